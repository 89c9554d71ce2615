// Accumulators to C: fp32 -> bf16 (round to nearest even), written straight from registers
// with edge checks. (A shared-memory + TMA-store epilogue comes with the tuned kernel.)
#pragma once

#include <cstdint>

#include "flyops/tile/numeric.h"
#include "traits.h"

namespace flyops::gemm {

// wgmma m64nN fragment: warp w of the warpgroup holds rows 16w..16w+15; lane l holds row
// 16w + l/4 (and + 8) at columns 8j + 2(l%4) (and + 1), j = 0 .. N/8 - 1.
FLYOPS_DEVICE void store_tile(const float (&acc)[kBN / 2], tile::bf16* c, int64_t ldc, int64_t M, int64_t N,
                              int64_t row0, int64_t col0) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t r = row0 + 16 * w + l / 4 + 8 * h, col = col0 + 8 * j + 2 * (l % 4) + e;
        if (r < M && col < N) c[r * ldc + col] = tile::from_float<tile::bf16>(acc[4 * j + 2 * h + e]);
      }
}

}  // namespace flyops::gemm
