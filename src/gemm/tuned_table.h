// Where flyops' GEMM measured faster than stock on the H200 (cuBLAS through torch 2.11),
// by shape class. Provenance: the probe and benchmark runs cited in docs/perf-notes.md.
//
// Status: the kernel (v0) measured slower than stock on every shape of the sets
// (0.32-0.90x, session run 1), so no class routes to it yet; the table fills as the
// kernel passes stock, class by class, from `python -m flyops.bench --op gemm --tune`.
#pragma once

#include <cstdint>

namespace flyops::gemm {

struct ShapeClass {
  int64_t min_m, min_n, min_k;  // the call's M, N, K are at least these
  int64_t max_m;                // and M at most this
};

inline constexpr ShapeClass kFasterThanStock[] = {
    {0, 0, 0, -1},  // placeholder: matches nothing (max_m < min_m)
};

inline bool measured_faster(int64_t M, int64_t N, int64_t K) {
  for (const ShapeClass& c : kFasterThanStock)
    if (M >= c.min_m && M <= c.max_m && N >= c.min_n && K >= c.min_k) return true;
  return false;
}

}  // namespace flyops::gemm
