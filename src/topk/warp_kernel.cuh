// Short rows (MoE routing): one warp per row, the row in registers (kE elements per lane,
// lane-strided so loads coalesce), rounds of a warp-wide max over 32-bit order keys. A round
// takes every lane whose best key is the maximum at once (equal non-NaN keys have equal
// bits, so any of them will do), which also makes the output come out sorted. When the
// maximum is the NaN key, NaN bits differ and stock takes the lowest positions: that round
// reduces (key, position) composites instead and takes one element. No scratch memory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/warp.h"
#include "keys.h"
#include "traits.h"

namespace flyops::topk {

struct WarpArgs {
  const void* x;
  int64_t rows;
  int64_t n;  // <= 32 * kE
  int64_t row_stride;
  int k;      // <= n
  bool largest;
  void* values;  // [rows, k]
  int64_t* indices;
};

#if defined(__CUDACC__)
}  // namespace flyops::topk

// Global namespace: profiler and ncu names start with flyops_.
template <typename Keys, int kE>
__global__ void __launch_bounds__(flyops::topk::kWarpThreads) flyops_topk_warp(flyops::topk::WarpArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  static_assert(kE <= 32, "live mask is one word");
  const int64_t row = int64_t(blockIdx.x) * kWarpRowsPerCta + tile::warp_id();
  if (row >= a.rows) return;  // whole warps leave together
  const int lane = tile::lane_id();
  const int n = static_cast<int>(a.n);
  const bool largest = a.largest;
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;

  uint32_t key[kE];
  uint32_t live = 0;
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    const int i = lane + j * tile::kWarpSize;
    key[j] = i < n ? order_key<Keys>(__ldg(xr + i), largest) : 0u;
    live |= i < n ? (1u << j) : 0u;
  }
  Raw* vr = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* ir = a.indices + row * a.k;
  for (int r = 0; r < a.k;) {
    uint32_t best = 0;
#pragma unroll
    for (int j = 0; j < kE; ++j) best = (live >> j & 1u) && key[j] > best ? key[j] : best;
    const uint32_t top = tile::warp_max_u32(best);
    if (!is_nan_key<Keys>(top, largest)) {
      // Every lane holding the top key gives one element (its lowest position), up to k.
      const uint32_t tied = __ballot_sync(0xffffffffu, live != 0 && best == top);
      const int rank = __popc(tied & tile::lanemask_lt());
      const int take = min(__popc(tied), a.k - r);
      if ((tied >> lane & 1u) && rank < take) {
        int jt = -1;
#pragma unroll
        for (int j = kE - 1; j >= 0; --j) jt = (live >> j & 1u) && key[j] == top ? j : jt;
        vr[r + rank] = static_cast<Raw>(raw_of_order_key<Keys>(top, largest));
        ir[r + rank] = lane + jt * tile::kWarpSize;
        live &= ~(1u << jt);
      }
      r += take;
    } else {
      // NaN ties: the lowest position first, one per round; bits re-read from memory.
      uint64_t bc = 0;
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        const uint64_t c = (live >> j & 1u)
                               ? (uint64_t{key[j]} << 32) | (0xffffffffu - uint32_t(lane + j * tile::kWarpSize))
                               : 0;
        bc = c > bc ? c : bc;
      }
      const uint64_t win = tile::warp_max_u64(bc);
      if (bc == win && win != 0) {
        const uint32_t pos = 0xffffffffu - static_cast<uint32_t>(win);
        vr[r] = xr[pos];
        ir[r] = pos;
        live &= ~(1u << (pos / tile::kWarpSize));
      }
      r += 1;
    }
  }
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
