// RMSNorm entry points: validate the plan against the params, then the per-dtype launcher.
#include "dispatch.h"
#include "flyops/rms_norm.h"

namespace flyops {

Status rms_norm_fwd(const RmsNormFwdParams& p, const RmsNormPlan& plan) {
  const rms_norm::DtypeOps* ops = rms_norm::ops_for(p.dtype);
  if (ops == nullptr || !plan.flyops()) return Status::kUnsupported;
  return ops->fwd(p, plan);
}

Status rms_norm_bwd(const RmsNormBwdParams& p, const RmsNormPlan& plan) {
  const rms_norm::DtypeOps* ops = rms_norm::ops_for(p.dtype);
  if (ops == nullptr || !plan.flyops()) return Status::kUnsupported;
  return ops->bwd(p, plan);
}

std::size_t rms_norm_bwd_workspace_bytes(const RmsNormBwdParams& p, const RmsNormPlan& plan,
                                         const DeviceInfo& dev) {
  const rms_norm::DtypeOps* ops = rms_norm::ops_for(p.dtype);
  if (ops == nullptr || !plan.flyops()) return 0;
  return ops->bwd_workspace(p, plan, dev);
}

}  // namespace flyops
