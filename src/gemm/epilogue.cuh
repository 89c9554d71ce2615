// Accumulators to C: c = alpha * acc + beta * d in fp32, rounded once to the output type
// (round to nearest even). beta == 0 never reads d (PyTorch's rule: NaN or inf there must
// not leak). d's strides may be 0, so a bias (N), a column (M, 1) or a full (M, N) addend
// all come through one path. store_tile_staged stages a warp's rows in swizzled buffers in
// shared memory (stmatrix), then either
//   kTma: TMA stores, which clip the edges and drain while the next tile's mainloop runs;
//   or, for a C that TMA cannot describe (rows not 16-byte aligned, N not a multiple of 8),
//   the warp's lanes copy each staged row out with coalesced 2-byte stores and edge checks.
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

// The staged epilogue's forms, chosen once per launch (epilogue_form) so that the per-element
// work is what the call needs: C = acc (mm, bmm), alpha * acc, a bias row (F.linear's
// addmm: d with strides (0, 1)), or the general addend (any broadcast, checked per element).
enum class EpiForm : int { kPlain, kScale, kBias, kGeneral };

// A bias is read in pairs, so it must start 4-byte aligned in every batch entry and N be
// even (an even column below N then has its neighbour below N too).
template <typename T>
FLYOPS_HD EpiForm epilogue_form(const EpilogueArgs<T>& e, int64_t batch_stride_d, int64_t N) {
  if (e.d == nullptr) return e.alpha == 1.f ? EpiForm::kPlain : EpiForm::kScale;
  const bool row = e.d_stride_m == 0 && e.d_stride_n == 1 && reinterpret_cast<uintptr_t>(e.d) % 4 == 0 &&
                   batch_stride_d % 2 == 0 && N % 2 == 0;
  return row ? EpiForm::kBias : EpiForm::kGeneral;
}

// Box q's 16 x 64 staged in the 128-byte swizzle (tile::box_offset_16x64) to C's rows
// wrow0 .. + 15, columns col0 .. + 63, by the warp's lanes: half a row (32 columns, 64
// contiguous bytes) per store instruction, anything past M or N skipped.
template <typename T>
FLYOPS_DEVICE void copy_box_out(const unsigned char* box, const EpilogueArgs<T>& e, int64_t M, int64_t N,
                                int64_t wrow0, int64_t col0) {
  const int l = threadIdx.x % 32;
#pragma unroll 4
  for (int i = 0; i < 2 * kStoreRows; ++i) {
    const int r = i / 2, c = 32 * (i % 2) + l;
    const int64_t row = wrow0 + r, col = col0 + c;
    if (row >= M || col >= N) continue;
    const T v = *reinterpret_cast<const T*>(box + tile::box_offset_16x64(r, c));
    e.c[row * e.ldc + col] = v;
  }
}

// A consumer warp's 16 x 256 rows of the tile (rows row0 + 16w ..) as four boxes of
// 16 x 64 (kStoreBoxBytes, the TMA store's 128-byte swizzle) through this warp's two
// buffers at `staging` (1024-aligned): box q goes into buffer q % 2 once the store of box
// q - 2 has read it, by stmatrix (tile::stmatrix_box_16x64), then lane 0 stores it (kTma)
// or the lanes copy it out (copy_box_out). Only the warp synchronises. A bias is read in
// pairs (epilogue_form picks kBias only where that stays inside it).
template <EpiForm kForm, bool kTma, typename T>
FLYOPS_DEVICE void store_warp(const float (&acc)[128], const EpilogueArgs<T>& e, const CUtensorMap* map_c,
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
    if constexpr (kTma)
      if (l == 0) tile::tma_store_wait<1>();
    __syncwarp();  // (without TMA: every lane's copy of box q - 2 out of this buffer is done)
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
    if constexpr (kTma) {
      tile::fence_proxy_async();  // the staging writes, visible to the TMA store
      __syncwarp();
      if (l == 0) {
        tile::tma_store(map_c, staging + (q % 2) * kStoreBoxBytes, col0 + 64 * q, wrow0, z);
        tile::tma_store_commit();
      }
    } else {
      __syncwarp();  // every lane's stmatrix is in place
      copy_box_out(staging + (q % 2) * kStoreBoxBytes, e, M, N, wrow0, col0 + 64 * q);
    }
  }
}

// One consumer warpgroup's 64 x 256 rows, each warp its own 16 rows (its kWarpStagingBytes
// of `staging`), through TMA stores (kTma) or the lanes' copies; the form is uniform over
// the launch.
template <bool kTma, typename T>
FLYOPS_DEVICE void store_tile_staged(const float (&acc)[128], const EpilogueArgs<T>& e, EpiForm form,
                                     const CUtensorMap* map_c, unsigned char* staging, int64_t M, int64_t N, int row0,
                                     int col0, int z) {
  unsigned char* mine = staging + ((threadIdx.x % 128) / 32) * kWarpStagingBytes;
  switch (form) {
    case EpiForm::kPlain: store_warp<EpiForm::kPlain, kTma>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    case EpiForm::kScale: store_warp<EpiForm::kScale, kTma>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    case EpiForm::kBias: store_warp<EpiForm::kBias, kTma>(acc, e, map_c, mine, M, N, row0, col0, z); break;
    default: store_warp<EpiForm::kGeneral, kTma>(acc, e, map_c, mine, M, N, row0, col0, z); break;
  }
}

}  // namespace flyops::gemm
