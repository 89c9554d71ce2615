// The bf16 RMSNorm kernels (see launch.cuh).
#include "dispatch.h"
#include "launch.cuh"

namespace flyops::rms_norm {

const DtypeOps kOpsBf16 = {
    &Launcher<tile::bf16>::fwd,
    &Launcher<tile::bf16>::bwd,
    [](const RmsNormBwdParams& p, const RmsNormPlan& plan, const DeviceInfo& dev) {
      return Launcher<tile::bf16>::layout(p, plan, dev).total();
    },
};

}  // namespace flyops::rms_norm
