// Per-dtype entry points, each defined in its own translation unit (instantiate_*.cu) so
// the kernels of different dtypes compile in parallel. Plain C++: no CUDA types here.
#pragma once

#include "common/dtype_ops.h"
#include <cstddef>

#include "flyops/rms_norm.h"

namespace flyops::rms_norm {

struct DtypeOps {
  Status (*fwd)(const RmsNormFwdParams&, const RmsNormPlan&);
  Status (*bwd)(const RmsNormBwdParams&, const RmsNormPlan&);
  std::size_t (*bwd_workspace)(const RmsNormBwdParams&, const RmsNormPlan&, const DeviceInfo&);
};

extern const DtypeOps kOpsFp32;
extern const DtypeOps kOpsFp16;
extern const DtypeOps kOpsBf16;

inline const DtypeOps* ops_for(DType t) { return ops_by_dtype(t, kOpsFp32, kOpsFp16, kOpsBf16); }

}  // namespace flyops::rms_norm
