// The fp32 TopK kernels (see launch.cuh).
#include "launch.cuh"

namespace flyops::topk {

const DtypeOps kOpsFp32 = {&Launcher<FloatKeys<32>>::run};

Status select_maxima(const TopkParams& p, const TopkPlan::Selection& s, const uint32_t* skip) {
  return Launcher<AscKeys32>::select(p, s, skip);
}

}  // namespace flyops::topk
