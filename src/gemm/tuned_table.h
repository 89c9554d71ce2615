// Where flyops' GEMM measured faster than stock on the H200 (cuBLAS through torch 2.11),
// by shape class. Provenance: `python -m flyops.bench --op gemm --tune` runs cited in
// docs/perf-notes.md (GEMM section), stock and flyops alternating in one process.
//
// Status: on aligned shapes the kernel measures 0.87-1.0x of cuBLAS (prefill) and
// 0.55-1.0x (decode), so none of them routes to it yet. The table fills class by class as
// the kernel passes stock.
#pragma once

#include <cstdint>

#include "flyops/gemm.h"

namespace flyops::gemm {

struct ShapeClass {
  int64_t min_m, min_n, min_k;  // the call's M, N, K are at least these
  int64_t max_m;                // and M at most this
  bool c_unaligned;             // only where C's rows are not 16-byte aligned (ldc % 8 != 0)
};

inline constexpr ShapeClass kFasterThanStock[] = {
    {0, 0, 0, -1, false},  // placeholder: matches nothing (max_m < min_m)
};

inline bool measured_faster(const GemmParams& p) {
  const bool unaligned = p.ldc % 8 != 0;
  for (const ShapeClass& c : kFasterThanStock)
    if (p.M >= c.min_m && p.M <= c.max_m && p.N >= c.min_n && p.K >= c.min_k && (!c.c_unaligned || unaligned))
      return true;
  return false;
}

}  // namespace flyops::gemm
