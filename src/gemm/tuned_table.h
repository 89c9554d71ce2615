// Where flyops' GEMM measured faster than stock on the H200 (cuBLAS through torch 2.11),
// by shape class. Provenance: `python -m flyops.bench --op gemm --tune` runs cited in
// docs/perf-notes.md (GEMM section), stock and flyops alternating in one process.
//
// Classes (single GEMMs: batched calls stay stock until measured):
//   C's rows not 16-byte aligned (N % 8 != 0 for a fresh output), N >= 1000: cuBLAS falls
//   back to slow kernels there; flyops' register epilogue writes any row. Session of
//   2026-11-29 (late), run 3 (5b6bbe8): 4097x4097x4096 5.75x, 8192x4095x8192 6.5x,
//   2048x1001x4096 3.5x, GPT-2's LM head 4096x50257x768 2.9x, 16x50257x768 3.3x,
//   1x50257x768 1.27x. Below N = 1000 stock wins (113x203x4096 0.31x, 512x203x4096
//   0.40x: too few tiles for the wide kernel).
// Aligned shapes measure 0.87-1.0x of cuBLAS (prefill) and 0.6-1.0x (decode), so none of
// them routes to flyops yet; the table fills class by class as the kernel passes stock.
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
    {1, 1000, 1, INT64_MAX, true},  // C's rows unaligned, N >= 1000
};

inline bool measured_faster(const GemmParams& p) {
  if (p.batch != 1) return false;  // bmm / baddbmm: not measured yet
  const bool unaligned = p.ldc % 8 != 0;
  for (const ShapeClass& c : kFasterThanStock)
    if (p.M >= c.min_m && p.M <= c.max_m && p.N >= c.min_n && p.K >= c.min_k && (!c.c_unaligned || unaligned))
      return true;
  return false;
}

}  // namespace flyops::gemm
