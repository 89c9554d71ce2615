// Accumulators to C: c = alpha * acc + beta * d in fp32, rounded once to the output type
// (round to nearest even), written straight from registers with edge checks. beta == 0
// never reads d (PyTorch's rule: NaN or inf there must not leak). d's strides may be 0, so
// a bias (N), a column (M, 1) or a full (M, N) addend all come through one path.
// (A shared-memory + TMA-store epilogue comes with the tuned kernel.)
#pragma once

#include <cstdint>

#include "flyops/tile/numeric.h"
#include "traits.h"

namespace flyops::gemm {

template <typename T>
struct EpilogueArgs {
  T* c;
  int64_t ldc;
  float alpha, beta;
  const T* d;  // null when beta == 0
  int64_t d_stride_m, d_stride_n;
};

// wgmma m64nN fragment: warp w of the warpgroup holds rows 16w..16w+15; lane l holds row
// 16w + l/4 (and + 8) at columns 8j + 2(l%4) (and + 1), j = 0 .. N/8 - 1. The two
// neighbouring columns go out as one 4-byte store when C's rows are 4-byte aligned.
template <typename T>
FLYOPS_DEVICE void store_tile(const float (&acc)[kBN / 2], const EpilogueArgs<T>& e, int64_t M, int64_t N,
                              int64_t row0, int64_t col0) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
  const bool pairs = e.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(e.c) % 4 == 0;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = row0 + 16 * w + l / 4 + 8 * h, col = col0 + 8 * j + 2 * (l % 4);
      if (r >= M || col >= N) continue;
      float v[2];
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        v[x] = e.alpha * acc[4 * j + 2 * h + x];
        if (e.d != nullptr && col + x < N) v[x] += e.beta * tile::to_float(e.d[r * e.d_stride_m + (col + x) * e.d_stride_n]);
      }
      T* dst = e.c + r * e.ldc + col;
      if (pairs && col + 1 < N) {
        struct alignas(4) Pair {
          T lo, hi;
        };
        *reinterpret_cast<Pair*>(dst) = Pair{tile::from_float<T>(v[0]), tile::from_float<T>(v[1])};
      } else {
        dst[0] = tile::from_float<T>(v[0]);
        if (col + 1 < N) dst[1] = tile::from_float<T>(v[1]);
      }
    }
}

}  // namespace flyops::gemm
