// The fp16 TopK kernels (see launch.cuh).
#include "launch.cuh"

namespace flyops::topk {

const DtypeOps kOpsFp16 = {&Launcher<Fp16Keys>::run};

}  // namespace flyops::topk
