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

// The workspace of two stages over `rows` rows: the first stage's values (rounded up to
// 16 bytes), then its int64 positions.
inline int64_t two_stage_values_bytes(int64_t rows, const TwoStage& t, int64_t k, int elem_bytes) {
  return (rows * t.segments * k * elem_bytes + 15) / 16 * 16;
}
inline int64_t two_stage_workspace_bytes(int64_t rows, const TwoStage& t, int64_t k, int elem_bytes) {
  return two_stage_values_bytes(rows, t, k, elem_bytes) + rows * t.segments * k * 8;
}

inline TwoStage two_stage(int64_t n, int64_t k, int64_t seg_len) {
  TwoStage t;
  t.segments = (n + seg_len - 1) / seg_len;
  t.n_last = n - (t.segments - 1) * seg_len;
  t.n2 = (t.segments - 1) * k + (t.n_last < k ? t.n_last : k);
  return t;
}

}  // namespace flyops::topk
