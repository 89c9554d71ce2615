// Accumulators to C: c = alpha * acc + beta * d in fp32, rounded once to the output type
// (round to nearest even). beta == 0 never reads d (PyTorch's rule: NaN or inf there must
// not leak). d's strides may be 0, so a bias (N), a column (M, 1) or a full (M, N) addend
// all come through one path. Two ways out:
//   store_tile_tma: through swizzled staging buffers in shared memory (stmatrix) and TMA
//     stores, which clip the edges and drain while the next tile's mainloop runs;
//   store_tile: straight from registers with edge checks, for a C that TMA cannot describe.
#pragma once

#include <cstdint>

#include <cuda.h>

#include "flyops/tile/numeric.h"
#include "flyops/tile/stmatrix.h"
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

// The staged epilogue's forms, chosen once per launch (epilogue_form) so that the per-element
// work is what the call needs: C = acc (mm, bmm), alpha * acc, a bias row (F.linear's
// addmm: d with strides (0, 1)), or the general addend (any broadcast, checked per element).
enum class EpiForm : int { kPlain, kScale, kBias, kGeneral };

// A bias is read in pairs, so it must start 4-byte aligned in every batch entry.
template <typename T>
FLYOPS_HD EpiForm epilogue_form(const EpilogueArgs<T>& e, int64_t batch_stride_d) {
  if (e.d == nullptr) return e.alpha == 1.f ? EpiForm::kPlain : EpiForm::kScale;
  const bool row = e.d_stride_m == 0 && e.d_stride_n == 1 && reinterpret_cast<uintptr_t>(e.d) % 4 == 0 &&
                   batch_stride_d % 2 == 0;
  return row ? EpiForm::kBias : EpiForm::kGeneral;
}

// A consumer warp's 16 x 256 rows of the tile (rows row0 + 16w ..) as four boxes of
// 16 x 64 (kStoreBoxBytes, the TMA store's 128-byte swizzle) through this warp's two
// buffers at `staging` (1024-aligned): box q goes into buffer q % 2 once the store of box
// q - 2 has read it, by stmatrix (tile::stmatrix_box_16x64), then lane 0 stores it.
// Only the warp synchronises. With N % 8 == 0 (the TMA path), an even column below N has
// its neighbour below N too, so a bias is read in pairs.
template <EpiForm kForm, typename T>
FLYOPS_DEVICE void store_warp_tma(const float (&acc)[128], const EpilogueArgs<T>& e, const CUtensorMap* map_c,
                                  unsigned char* staging, int64_t M, int64_t N, int row0, int col0, int z) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
  const int wrow0 = row0 + 16 * w;
  const uint32_t lane_addr = tile::box_lane_addr(tile::smem_addr(staging));
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float2 bias[8];  // beta * d at this lane's column pairs of box q
    if constexpr (kForm == EpiForm::kBias) {
      const uint32_t* d2 = reinterpret_cast<const uint32_t*>(e.d);
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int64_t col = col0 + 64 * q + 8 * j + 2 * (l % 4);
        const float2 b = col < N ? tile::unpack2<T>(__ldg(d2 + col / 2)) : make_float2(0.f, 0.f);
        bias[j] = make_float2(e.beta * b.x, e.beta * b.y);
      }
    }
    if (l == 0) tile::tma_store_wait<1>();
    __syncwarp();
    tile::stmatrix_box_16x64(lane_addr + (q % 2) * kStoreBoxBytes, [&](int c, int h) {
      const int jj = 8 * q + c;
      const float* a2 = &acc[4 * jj + 2 * h];
      float v[2];
      if constexpr (kForm == EpiForm::kPlain) {
        v[0] = a2[0], v[1] = a2[1];
      } else if constexpr (kForm == EpiForm::kScale) {
        v[0] = e.alpha * a2[0], v[1] = e.alpha * a2[1];
      } else if constexpr (kForm == EpiForm::kBias) {
        v[0] = __fmaf_rn(e.alpha, a2[0], bias[c].x), v[1] = __fmaf_rn(e.alpha, a2[1], bias[c].y);
      } else {
        epilogue_pair(v, a2, e, wrow0 + l / 4 + 8 * h, col0 + 8 * jj + 2 * (l % 4), M, N);
      }
      return tile::pack2<T>(v[0], v[1]);
    });
    tile::fence_proxy_async();  // the staging writes, visible to the TMA store
    __syncwarp();
    if (l == 0) {
      tile::tma_store(map_c, staging + (q % 2) * kStoreBoxBytes, col0 + 64 * q, wrow0, z);
      tile::tma_store_commit();
    }
  }
}

// One consumer warpgroup's 64 x 256 rows through TMA stores, each warp its own 16 rows (its
// kWarpStagingBytes of `staging`); the form is uniform over the launch.
template <typename T>
FLYOPS_DEVICE void store_tile_tma(const float (&acc)[128], const EpilogueArgs<T>& e, EpiForm form,
                                  const CUtensorMap* map_c, unsigned char* staging, int64_t M, int64_t N, int row0,
                                  int col0, int z) {
  unsigned char* mine = staging + ((threadIdx.x % 128) / 32) * kWarpStagingBytes;
  switch (form) {
    case EpiForm::kPlain: store_warp_tma<EpiForm::kPlain>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    case EpiForm::kScale: store_warp_tma<EpiForm::kScale>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    case EpiForm::kBias: store_warp_tma<EpiForm::kBias>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    default: store_warp_tma<EpiForm::kGeneral>(acc, e, map_c, mine, M, N, row0, col0, z); break;
  }
}

}  // namespace flyops::gemm
