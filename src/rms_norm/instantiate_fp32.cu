// The fp32 RMSNorm kernels (see launch.cuh).
#include "dispatch.h"
#include "launch.cuh"

namespace flyops::rms_norm {

const DtypeOps kOpsFp32 = {
    &Launcher<float>::fwd,
    &Launcher<float>::bwd,
    [](const RmsNormBwdParams& p, const RmsNormPlan& plan, const DeviceInfo& dev) {
      return Launcher<float>::layout(p, plan, dev).total();
    },
};

}  // namespace flyops::rms_norm
