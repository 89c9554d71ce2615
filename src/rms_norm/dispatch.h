// Per-dtype entry points, each defined in its own translation unit (instantiate_*.cu) so
// the kernels of different dtypes compile in parallel. Plain C++: no CUDA types here.
#pragma once

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

inline const DtypeOps* ops_for(DType t) {
  switch (t) {
    case DType::kFloat32: return &kOpsFp32;
    case DType::kFloat16: return &kOpsFp16;
    case DType::kBFloat16: return &kOpsBf16;
    default: return nullptr;
  }
}

}  // namespace flyops::rms_norm
