// Accumulators to C: c = alpha * acc + beta * d in fp32, rounded once to the output type
// (round to nearest even). beta == 0 never reads d (PyTorch's rule: NaN or inf there must
// not leak). d's strides may be 0, so a bias (N), a column (M, 1) or a full (M, N) addend
// all come through one path. Two ways out:
//   store_tile_tma: through a swizzled staging buffer in shared memory and TMA stores,
//     which clip the edges and drain while the next tile's mainloop runs;
//   store_tile: straight from registers with edge checks, for a C that TMA cannot describe.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "flyops/tile/numeric.h"
#include "flyops/tile/tma.h"
#include "traits.h"

namespace flyops::gemm {

// T: the inputs', the addend's and C's type.
template <typename T>
struct EpilogueArgs {
  T* c;
  int64_t ldc;
  float alpha, beta;
  const T* d;  // null when beta == 0
  int64_t d_stride_m, d_stride_n;
};

// alpha * acc + beta * d for the fragment's column pair at (r, col), col + 1.
template <typename T>
FLYOPS_DEVICE void epilogue_pair(float (&v)[2], const float* acc2, const EpilogueArgs<T>& e, int64_t r,
                                 int64_t col, int64_t M, int64_t N) {
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    v[x] = e.alpha * acc2[x];
    if (e.d != nullptr && r < M && col + x < N) v[x] += e.beta * tile::to_float(e.d[r * e.d_stride_m + (col + x) * e.d_stride_n]);
  }
}

// wgmma m64nN fragment: warp w of the warpgroup holds rows 16w..16w+15; lane l holds row
// 16w + l/4 (and + 8) at columns 8j + 2(l%4) (and + 1), j = 0 .. N/8 - 1. The two
// neighbouring columns go out as one 4-byte store when C's rows are 4-byte aligned.
template <int kBN, typename T>
FLYOPS_DEVICE void store_tile(const float (&acc)[kBN / 2], const EpilogueArgs<T>& e, int64_t M, int64_t N,
                              int64_t row0, int64_t col0) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
  const bool pairs = e.ldc % 2 == 0 && reinterpret_cast<uintptr_t>(e.c) % (2 * sizeof(T)) == 0;
#pragma unroll
  for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t r = row0 + 16 * w + l / 4 + 8 * h, col = col0 + 8 * j + 2 * (l % 4);
      if (r >= M || col >= N) continue;
      float v[2];
      epilogue_pair(v, &acc[4 * j + 2 * h], e, r, col, M, N);
      T* dst = e.c + r * e.ldc + col;
      if (pairs && col + 1 < N) {
        struct alignas(2 * sizeof(T)) Pair {
          T lo, hi;
        };
        *reinterpret_cast<Pair*>(dst) = Pair{tile::from_float<T>(v[0]), tile::from_float<T>(v[1])};
      } else {
        dst[0] = tile::from_float<T>(v[0]);
        if (col + 1 < N) dst[1] = tile::from_float<T>(v[1]);
      }
    }
}

// One consumer warpgroup's 64 x 256 rows through `staging` (kStagingBytes, 1024-aligned) in
// two halves of 128 columns. Thread 0 of the warpgroup issues the stores; before writing
// the staging again it waits for the previous stores to have read it. `bar` is the
// warpgroup's named barrier.
template <typename T>
FLYOPS_DEVICE void store_tile_tma(const float (&acc)[128], const EpilogueArgs<T>& e, const CUtensorMap* map_c,
                                  unsigned char* staging, int bar, int64_t M, int64_t N, int row0, int col0, int z) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  const bool leader = t == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (leader) tile::tma_store_wait<0>();
    asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * w + l / 4 + 8 * h, c = 8 * j + 2 * (l % 4);  // within the 64 x 128 half
        const int jj = 16 * half + j;
        float v[2];
        epilogue_pair(v, &acc[4 * jj + 2 * h], e, row0 + r, col0 + 128 * half + c, M, N);
        struct alignas(4) Pair {
          T lo, hi;
        };
        const uint32_t off = (c / kStoreCols) * kStoreBoxBytes +
                             tile::swizzle(kSwizzle, static_cast<uint32_t>(r * kStoreCols * 2 + (c % kStoreCols) * 2));
        *reinterpret_cast<Pair*>(staging + off) = Pair{tile::from_float<T>(v[0]), tile::from_float<T>(v[1])};
      }
    tile::fence_proxy_async();  // the staging writes, visible to the TMA store
    asm volatile("bar.sync %0, 128;" ::"r"(bar) : "memory");
    if (leader) {
#pragma unroll
      for (int b = 0; b < 2; ++b)
        tile::tma_store(map_c, staging + b * kStoreBoxBytes, col0 + 128 * half + b * kStoreCols, row0, z);
      tile::tma_store_commit();
    }
  }
}

}  // namespace flyops::gemm
