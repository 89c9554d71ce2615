// The fp32 TopK kernels (see launch.cuh).
#include "launch.cuh"

namespace flyops::topk {

const DtypeOps kOpsFp32 = {&Launcher<FloatKeys<32>>::run};

}  // namespace flyops::topk
