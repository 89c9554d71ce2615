// Short rows (MoE routing): one warp per row, the row in registers (kE elements per lane,
// lane-strided so loads coalesce). Two ways to pick the k best, both exact:
//
//   threshold  (k >= 3) a key T at most the row's k-th largest, so every element of the
//              answer has a key >= T, and on real data few others do. For k <= 8, T is the
//              least of the maxima of 4 or 8 lane groups (as many distinct elements >= T as
//              groups, at least k: five shuffles); past 8, the k-th largest lane maximum
//              (k warp-wide rounds). When at most 64 elements pass, they are compacted
//              through shared memory as composites (order key : ~position), unique, so NaN
//              ties go to the lowest positions as in stock, and each candidate's rank among
//              them is its output slot.
//   rounds     (k <= 2, or too many elements pass: heavy ties) rounds of a warp-wide max
//              over the keys. A round takes every lane whose best key is the maximum at
//              once (equal non-NaN keys have equal bits, so any of them will do). When the
//              maximum is the NaN key, NaN bits differ and stock takes the lowest positions:
//              that round reduces composites instead and takes one element.
//
// Both emit in order (the ranks are slots), so the output comes out sorted. No global
// scratch memory.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/vec.h"
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
  constexpr int kCandPerLane = 2;
  constexpr int kCheapThresholdK = 8;  // up to this k the threshold comes from lane groups
  __shared__ uint64_t cand[kWarpRowsPerCta][kCandPerLane * tile::kWarpSize];
  const int64_t row = int64_t(blockIdx.x) * kWarpRowsPerCta + tile::warp_id();
  if (row >= a.rows) return;  // whole warps leave together
  const int lane = tile::lane_id();
  const int n = static_cast<int>(a.n);
  const bool largest = a.largest;
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;

  // All loads in flight before the first key (past the row: element 0, no branch).
  Raw raw[kE];
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    const int i = lane + j * tile::kWarpSize;
    raw[j] = tile::load_now(xr + (i < n ? i : 0));
  }
  uint32_t key[kE];
  uint32_t live = 0;
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    const int i = lane + j * tile::kWarpSize;
    key[j] = i < n ? order_key<Keys>(raw[j], largest) : 0u;
    live |= i < n ? (1u << j) : 0u;
  }
  Raw* vr = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* ir = a.indices + row * a.k;
  auto emit = [&](int r, uint32_t k32, uint32_t pos) {
    vr[r] = element_bits<Keys>(k32, largest, xr, pos);
    ir[r] = pos;
  };

  if (a.k >= 3) {
    uint32_t m = 0;
#pragma unroll
    for (int j = 0; j < kE; ++j) m = (live >> j & 1u) && key[j] > m ? key[j] : m;
    uint32_t t = 0;
    if (a.k <= kCheapThresholdK) {
      // The maxima of lane groups (4 groups of 8 lanes for k <= 4, else 8 of 4), then their
      // least (an empty group's is 0: then every element passes).
      const int span = a.k <= 4 ? 8 : 4;
      uint32_t g = m;
#pragma unroll
      for (int off = 1; off < tile::kWarpSize; off <<= 1) {
        const uint32_t o = __shfl_xor_sync(0xffffffffu, g, off);
        g = off < span ? max(g, o) : min(g, o);
      }
      t = g;
    } else {
      // Rounds over the lane maxima until k of them are taken.
      bool alive = live != 0;
      int taken = 0;
      for (;;) {
        const uint32_t top = tile::warp_max_u32(alive ? m : 0u);
        const uint32_t ball = __ballot_sync(0xffffffffu, alive && m == top);
        taken += __popc(ball);
        t = top;
        if (taken >= a.k || top == 0) break;  // no key is below 0
        if (ball >> lane & 1u) alive = false;
      }
    }
    uint32_t pass = 0;
#pragma unroll
    for (int j = 0; j < kE; ++j) pass |= (live >> j & 1u) && key[j] >= t ? (1u << j) : 0u;
    const int mine = __popc(pass);
    const int total = static_cast<int>(__reduce_add_sync(0xffffffffu, static_cast<uint32_t>(mine)));
    if (total <= kCandPerLane * tile::kWarpSize) {
      int before = static_cast<int>(tile::warp_prefix_sum(static_cast<uint32_t>(mine))) - mine;  // exclusive
      uint64_t* buf = cand[tile::warp_id()];
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        if (pass >> j & 1u) {
          const uint32_t pos = static_cast<uint32_t>(lane + j * tile::kWarpSize);
          buf[before++] = (uint64_t{key[j]} << 32) | (0xffffffffu - pos);
        }
      }
      __syncwarp();
      // A candidate's rank among the (unique) candidates is its output slot; the k lanes
      // or so with a rank below k write adjacent elements.
#pragma unroll
      for (int h = 0; h < kCandPerLane; ++h) {
        const int c = lane + h * tile::kWarpSize;
        if (c >= total) break;
        const uint64_t mine_c = buf[c];
        int rank = 0;
        for (int j = 0; j < total; ++j) rank += buf[j] > mine_c;
        if (rank < a.k) emit(rank, static_cast<uint32_t>(mine_c >> 32), 0xffffffffu - static_cast<uint32_t>(mine_c));
      }
      return;
    }
  }

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
        emit(r, static_cast<uint32_t>(win >> 32), pos);
        live &= ~(1u << (pos / tile::kWarpSize));
      }
      r += 1;
    }
  }
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
