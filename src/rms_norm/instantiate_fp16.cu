// The fp16 RMSNorm kernels (see launch.cuh).
#include "dispatch.h"
#include "launch.cuh"

namespace flyops::rms_norm {

const DtypeOps kOpsFp16 = {
    &Launcher<tile::fp16>::fwd,
    &Launcher<tile::fp16>::bwd,
    [](const RmsNormBwdParams& p, const RmsNormPlan& plan, const DeviceInfo& dev) {
      return Launcher<tile::fp16>::layout(p, plan, dev).total();
    },
};

}  // namespace flyops::rms_norm
