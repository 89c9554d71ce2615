// O / l in the input dtype through TMA stores, and the log-sum-exp. Each consumer warp
// stages its 16 rows into its own rows of Q's shared memory (free once the warpgroup's last
// S has landed; the other warpgroup reads only its own rows), kD / 64 boxes of 16 x 64 by
// stmatrix, and lane 0 stores them (rows past Lq are clipped by TMA).
#pragma once

#include <cuda.h>

#include "flyops/tile/stmatrix.h"
#include "flyops/tile/tma.h"
#include "mainloop.cuh"

namespace flyops::attention {

// A warp's 16 rows of an m64 x kD accumulator fragment (rows r and r + 8 scaled by factor[0]
// and factor[1]) into kD / 64 staging boxes of 16 x 64, box(s) for span s.
template <int kD, typename T, typename Box>
FLYOPS_DEVICE void stage_warp_rows(const float (&acc)[kD / 2], const float (&factor)[2], Box&& box) {
#pragma unroll
  for (int s = 0; s < kD / kSpanElems; ++s) {
    tile::stmatrix_box_16x64(tile::box_lane_addr(tile::smem_addr(box(s))), [&](int c, int hh) {
      const float* v = &acc[4 * (8 * s + c) + 2 * hh];
      return tile::pack2<T>(v[0] * factor[hh], v[1] * factor[hh]);
    });
  }
}

// The warp's staged boxes to rows row .. row + 15 of head h, batch b, head-dim spans span0 ..
// (rows past the end are clipped by TMA); returns once the stores have read shared memory.
template <int kD, typename Box>
FLYOPS_DEVICE void store_warp_rows(const CUtensorMap* map, Box&& box, int row, int h, int b, int span0 = 0) {
  tile::fence_proxy_async();  // the staging writes, visible to the TMA store
  __syncwarp();
  if (threadIdx.x % 32 == 0) {
#pragma unroll
    for (int s = 0; s < kD / kSpanElems; ++s) tile::tma_store(map, box(s), (span0 + s) * kSpanElems, row, h, b);
    tile::tma_store_commit();
    tile::tma_store_drain();
  }
  __syncwarp();
}

template <typename Cfg, typename T>
FLYOPS_DEVICE void store_output(float (&o)[Cfg::kD / 2], float (&m)[2], float (&l)[2], const Smem<Cfg>& sm,
                                int qbuf, const CUtensorMap* map_o, const Args& a, int q0, int wg, int h, int b) {
  const int w = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int row0 = 64 * wg + kStoreRows * w;  // the warp's first row in the block
  // The warp's staging box of span s: its rows of Q's span block (buffer qbuf).
  auto box = [&](int s) { return sm.q(qbuf) + s * Cfg::kBM * 128 + row0 * 128; };
  float inv[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 1);
    l[i] += __shfl_xor_sync(0xffffffffu, l[i], 2);
    inv[i] = l[i] > 0.f ? 1.f / l[i] : 0.f;  // a row that saw no key: O = 0 (FlashAttention's rule)
  }
  if (a.lse != nullptr && lane % 4 == 0) {
    float* lse = a.lse + b * a.lse_stride_b + h * a.lse_stride_h;
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int r = q0 + row0 + lane / 4 + 8 * i;
      // natural log of sum exp(scale s) = (m + log2 l) ln 2; +inf where no key was seen
      if (r < a.Lq) lse[r] = l[i] > 0.f ? (m[i] + __log2f(l[i])) * 0.6931471805599453f : __builtin_huge_valf();
    }
  }
  stage_warp_rows<Cfg::kD, T>(o, inv, box);
  store_warp_rows<Cfg::kD>(map_o, box, q0 + row0, h, b);
}

}  // namespace flyops::attention
