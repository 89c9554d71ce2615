// Where flyops' GEMM measured faster than stock on the H200 (cuBLAS through torch 2.11),
// by shape class. Provenance: `python -m flyops.bench --op gemm --tune` runs cited in
// docs/perf-notes.md (GEMM section), stock and flyops alternating in one process.
//
// Classes:
//   C's rows not 16-byte aligned (ldc % 8 != 0: N % 8 != 0 for a fresh output), N >= 1000
//   and K >= 768: cuBLAS falls back to slow kernels there; flyops' epilogue writes any
//   row (through shared memory and the lanes' stores since v16; measured with v0-v15's
//   register epilogue, which was slower). Session of 2026-11-29 (late), runs 3 and 10 (5b6bbe8, f3335db):
//   4097x4097x4096 5.75x, 8192x4095x8192 6.5x, 2048x1001x4096 3.5x, GPT-2's LM head
//   4096x50257x768 2.9x, 16x50257x768 3.3x, 1x50257x768 1.27x, and batched 8 x
//   2048x4095x4096 6.2x. Outside it stock wins: N < 1000 (113x203x4096 0.31x, 512x203x4096
//   0.40x: a handful of tiles; 0.35x / 0.55x with v16's epilogue).
//   The same rows with short K (64 <= K < 768) where the call has at least 256 tiles (two
//   waves): attention scores as a bmm, which lost to cuBLAS with the register epilogue
//   (32 x 1001x1001x128 0.84x, 16 x 512x1001x64 0.58x: a tile's one or two k-blocks did not
//   pay for it) and win since v16 staged it (sixteenth session run 14, `--tune --passes
//   odd`: 2.78x and 1.60x; 4096x50257x768 6.1x, 4097x4097x4096 7.1x in the same run). Fewer
//   tiles at short K were not measured, so stock.
// Aligned shapes measure 0.87-1.0x of cuBLAS (prefill) and, on the decode kernel, 0.6-1.0x
// (decode), so none of them routes to the wide or decode kernels yet; the narrow kernel's
// classes are below. The table fills class by class as the kernels pass stock.
#pragma once

#include <cstdint>

#include "flyops/gemm.h"

namespace flyops::gemm {

struct ShapeClass {
  int64_t min_m, min_n, min_k;  // the call's M, N, K are at least these
  int64_t max_m;                // and M at most this
  bool c_unaligned;             // only where C's rows are not 16-byte aligned (ldc % 8 != 0)
  int64_t min_tiles;            // and the call has at least this many 128 x 256 tiles (all batches)
};

inline constexpr ShapeClass kFasterThanStock[] = {
    {1, 1000, 768, INT64_MAX, true, 0},   // C's rows unaligned, N >= 1000, K >= 768
    {1, 1000, 64, INT64_MAX, true, 256},  // the same at short K, two waves of tiles or more
};

// The wide kernel's 128 x 256 tiles over all batch entries (launch.cu's split-K choice too).
inline int64_t wide_tiles(const GemmParams& p) { return (p.M + 127) / 128 * ((p.N + 255) / 256) * p.batch; }

// The narrow kernel (gemv.cuh: at most 16 rows of A, both operands K-major, K % 8 == 0) on
// decode-sized calls, by A's rows and the weight's size N x K (elements). Session of
// 2026-12-04 (docs/perf-notes.md, GEMM v20), flyops against stock in one process, under
// the benchmark's memset flush (`--tune --passes decode` and the bench) and with a clean L2
// (the probe, PROBE_FLUSH=clean: what a model's decode step sees once the other layers'
// weights passed through L2). A class routes only where neither measured it slower:
//   M = 1-8:  4096 x 4096 1.19-1.26x (memset) / 1.10-1.14x (clean), 6144 x 4096 1.13-1.21x
//             / 1.05-1.06x, 4096 x 14336 1.13-1.15x / 1.02x, 14336 x 4096 1.10-1.13x /
//             0.99-1.02x (a tie on a clean L2);
//   M = 9-16: 4096 x 4096 1.11-1.17x / 1.04-1.06x; 6144 x 4096 1.02-1.06x but 0.87x on a
//             clean L2, 14336 x 4096 and 4096 x 14336 0.87-0.88x clean: stock.
// Past 2^26 elements (448 MiB weights, the 128256-entry LM head) stock streams at 3.7-4.2
// TB/s and the kernel measured 0.95-1.05x. Smaller weights and K below 4096 were not
// measured, so stock: there the launcher may pick the decode kernel (K < 2048), which was
// not measured on them either.
struct NarrowClass {
  int64_t max_m;           // A's rows at most this
  int64_t min_k;           // K at least this
  int64_t min_nk, max_nk;  // N * K within these
};

inline constexpr NarrowClass kNarrowFaster[] = {
    {8, 4096, int64_t{1} << 24, int64_t{1} << 26},
    {16, 4096, int64_t{1} << 24, int64_t{1} << 24},
};

inline bool narrow_faster(const GemmParams& p) {
  if (p.batch != 1 || !p.a.k_major || !p.b.k_major || p.K % 8 != 0) return false;
  for (const NarrowClass& c : kNarrowFaster)
    if (p.M <= c.max_m && p.K >= c.min_k && p.N * p.K >= c.min_nk && p.N * p.K <= c.max_nk) return true;
  return false;
}

inline bool measured_faster(const GemmParams& p) {
  if (narrow_faster(p)) return true;
  const bool unaligned = p.ldc % 8 != 0;
  for (const ShapeClass& c : kFasterThanStock)
    if (p.M >= c.min_m && p.M <= c.max_m && p.N >= c.min_n && p.K >= c.min_k && (!c.c_unaligned || unaligned) &&
        wide_tiles(p) >= c.min_tiles)
      return true;
  return false;
}

// A routed call with few tiles and a long K runs split along K (splitk.cuh; the launcher's
// choice), so a class added here is measured with that. Split-K against the unsplit kernel,
// nineteenth session run 2 (`flyops_gemm_probe`, interleaved rounds): in the unaligned class
// 2048 x 1001 x 4096 (2 parts) 0.0375 against 0.0458 ms (stock 0.191); on aligned rows, 777 x
// 1240 x 2048 and 128 x 4096 x 8192 faster than unsplit but still 0.57-0.75x of cuBLAS, which
// is why aligned rows stay stock.

}  // namespace flyops::gemm
