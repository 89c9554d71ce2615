// Per-dtype entry points, each defined in its own translation unit (instantiate_*.cu) so
// the kernels of different dtypes compile in parallel. Plain C++: no CUDA types here.
#pragma once

#include "common/dtype_ops.h"
#include "flyops/topk.h"
#include "traits.h"

namespace flyops::topk {

struct DtypeOps {
  Status (*run)(const TopkParams&, const TopkPlan&);
};

extern const DtypeOps kOpsFp32;
extern const DtypeOps kOpsFp16;
extern const DtypeOps kOpsBf16;

// The selection over group maxima (AscKeys32 elements, whatever the input dtype): defined
// once, in the fp32 translation unit.
// Rows that skip[row] marks listed (chain_mark.cuh) are left alone (null: none).
Status select_maxima(const TopkParams& p, const TopkPlan::Selection& s, const uint32_t* skip);

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

// The workspace a selection needs: two stages keep their first stage's results.
inline int64_t selection_workspace_bytes(const TopkParams& p, const TopkPlan::Selection& s) {
  if (s.kind != TopkPlan::Kind::kTwoStage) return 0;
  return two_stage_workspace_bytes(p.rows, two_stage(p.n, p.k, s.seg_len), p.k,
                                   static_cast<int>(dtype_size(p.dtype)));
}

// Delegates: the selection over each row's group maxima (32-bit keys, unsorted) and the one
// over the chosen groups' elements (the caller's dtype, order and outputs).
inline TopkParams maxima_params(const TopkParams& p, int group) {
  TopkParams q = p;
  q.n = q.x_row_stride = p.n / group;
  q.dtype = DType::kFloat32;  // for the router: 4-byte elements
  q.sorted = false;
  return q;
}
inline TopkParams candidate_params(const TopkParams& p, int group) {
  TopkParams q = p;
  q.n = q.x_row_stride = p.k * group;
  return q;
}

// The group maxima, 32-bit keys, lead both delegate workspaces; the finish kernel's has
// nothing else.
inline int64_t maxima_bytes(const TopkParams& p, int group) { return p.rows * (p.n / group) * 4; }

// The 16-bit list-only stream's polled words (TopK v134, v139; route.cc): each call's tag,
// never 0 (a cleared word's), and whether the test hook keeps the finish from clearing them.
uint32_t next_list_tag();
bool keeps_polled_words();

// The finish kernel's workspace: the maxima, then when screening (screen_kernel.cuh) each
// row's threshold key, candidate count and polled word (the 16-bit list-only stream's: TopK
// v134), and its candidate list of `cap` (key, position) pairs. Offsets in bytes, 16-byte
// aligned.
struct FinishLayout {
  int64_t thresh = 0, count = 0, ready = 0, cand = 0, total = 0;
};
inline FinishLayout finish_layout(const TopkParams& p, int group, int64_t cap, bool screen) {
  auto up16 = [](int64_t b) { return (b + 15) / 16 * 16; };
  FinishLayout l;
  l.thresh = up16(maxima_bytes(p, group));
  if (!screen) {
    l.count = l.ready = l.cand = l.total = maxima_bytes(p, group);
    return l;
  }
  l.count = l.thresh + up16(p.rows * 4);
  l.ready = l.count + up16(p.rows * 4);
  l.cand = l.ready + up16(p.rows * 8);
  l.total = l.cand + p.rows * cap * 8;
  return l;
}

// The delegates' workspace, in order: maxima, their selection's values, indices (the
// chosen groups) and own workspace (the candidates' selection reads the chosen groups from
// the rows: TopK v114); when screening (`screen_cap`, the list finish's capacity, nonzero),
// each row's threshold, count and done mark, then its list of screen_cap (key, position)
// pairs. Offsets in bytes, 16-byte aligned.
struct DelegateLayout {
  int64_t maxima = 0, sel_values = 0, sel_indices = 0, sel_workspace = 0;
  int64_t thresh = 0, count = 0, done = 0, list = 0, total = 0;
};
inline DelegateLayout delegate_layout(const TopkParams& p, int group, int64_t sel_workspace_bytes,
                                      int64_t screen_cap = 0) {
  auto up16 = [](int64_t b) { return (b + 15) / 16 * 16; };
  DelegateLayout l;
  l.sel_values = up16(maxima_bytes(p, group));
  l.sel_indices = l.sel_values + up16(p.rows * p.k * 4);
  l.sel_workspace = l.sel_indices + up16(p.rows * p.k * 8);
  l.thresh = l.count = l.done = l.list = l.total = l.sel_workspace + up16(sel_workspace_bytes);
  if (screen_cap == 0) return l;
  l.count = l.thresh + up16(p.rows * 4);
  l.done = l.count + up16(p.rows * 4);
  l.list = l.done + up16(p.rows * 4);
  l.total = l.list + p.rows * screen_cap * 8;
  return l;
}

// The radix passes' workspace: the histograms, the states (16-byte aligned, as the
// histograms are), the tally's counts, one a CTA (`ctas` a row), then two candidate lists a
// row of passes_list_cap(n) entries of 8 bytes (16-byte aligned).
inline int64_t passes_hist_bytes(int64_t rows) { return rows * kPassBins * 4; }
inline int64_t passes_equal_offset(int64_t rows) {
  return passes_hist_bytes(rows) + rows * static_cast<int64_t>(sizeof(PassState));
}
inline int64_t passes_list_cap(int64_t n) { return (n + kPassListDiv - 1) / kPassListDiv; }
inline int64_t passes_lists_offset(int64_t rows, int ctas) { return (passes_equal_offset(rows) + rows * ctas * 4 + 15) / 16 * 16; }
inline int64_t passes_workspace_bytes(int64_t rows, int ctas, int64_t n) {
  return passes_lists_offset(rows, ctas) + rows * 2 * passes_list_cap(n) * 8;
}

}  // namespace flyops::topk
