// Per-dtype entry points, each defined in its own translation unit (instantiate_*.cu) so
// the kernels of different dtypes compile in parallel. Plain C++: no CUDA types here.
#pragma once

#include "common/dtype_ops.h"
#include "flyops/topk.h"

namespace flyops::topk {

struct DtypeOps {
  Status (*run)(const TopkParams&, const TopkPlan&);
};

extern const DtypeOps kOpsFp32;
extern const DtypeOps kOpsFp16;
extern const DtypeOps kOpsBf16;

inline const DtypeOps* ops_for(DType t) { return ops_by_dtype(t, kOpsFp32, kOpsFp16, kOpsBf16); }

// Two-stage plans: segments of each row and the length of their concatenated results.
struct TwoStage {
  int64_t segments = 0;
  int64_t n_last = 0;  // elements of the last segment
  int64_t n2 = 0;      // elements of each second-stage row
};
inline TwoStage two_stage(int64_t n, int64_t k, int64_t seg_len) {
  TwoStage t;
  t.segments = (n + seg_len - 1) / seg_len;
  t.n_last = n - (t.segments - 1) * seg_len;
  t.n2 = (t.segments - 1) * k + (t.n_last < k ? t.n_last : k);
  return t;
}

}  // namespace flyops::topk
