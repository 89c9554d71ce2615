// The bf16 TopK kernels (see launch.cuh).
#include "launch.cuh"

namespace flyops::topk {

const DtypeOps kOpsBf16 = {&Launcher<Bf16Keys>::run};

}  // namespace flyops::topk
