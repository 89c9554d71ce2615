// One CTA selects the k best of a few thousand 32-bit order keys held in registers, each
// thread holding a contiguous run of positions; ties go to the lowest positions. Made for the
// delegates' small selections (finish_kernel.cuh), where the cluster kernel's machinery
// (histograms published through DSMEM, 2048-bin selections, a returning atomic per warp step
// with a hit) costs ~8 us on a 2000-element row whatever its size (TopK v18):
//
//   range   the block's least and greatest key: digits start at their highest differing bit;
//   digits  8 bits per round: a 256-bin histogram (non-returning shared atomics) of the keys
//           still in range, one warp finds the bin of the need-th best; two barriers a round;
//   place   one block scan of (in the final bin, above it) counts gives each taken element its
//           slot, in position order.
#pragma once

#if defined(__CUDACC__)
#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/warp.h"

namespace flyops::topk {

template <int kThreads>
struct SmallSelectSmem {
  uint32_t hist[2][256];  // this round's histogram and the next one's, zeroed meanwhile
  uint32_t warp_a[kThreads / 32];  // least and greatest keys per warp (small_cut)
  uint32_t warp_b[kThreads / 32];
  uint32_t warp_c[kThreads / 32];  // counts per warp (small_place): small_cut may return
                                   // with no barrier after reading warp_a and warp_b
  uint32_t pick[3];  // the bin, elements in the bins above it, elements in it
};

// What the search found: every key above `hi` is taken; of the keys in [lo, hi], all of them
// when `whole`, else (lo == hi) the first `need` in position order.
struct SmallCut {
  uint32_t lo, hi, need;
  bool whole;
};

namespace detail {
FLYOPS_DEVICE uint32_t low_mask(int bits) { return bits >= 32 ? 0xffffffffu : (1u << bits) - 1u; }
}  // namespace detail

// The cut for the k best of all threads' keys (key[0..cnt) valid; k <= their total). Every
// thread of the CTA calls it.
template <int kThreads, int kE>
FLYOPS_DEVICE SmallCut small_cut(const uint32_t (&key)[kE], int cnt, uint32_t k, SmallSelectSmem<kThreads>& s) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t mn = 0xffffffffu, mx = 0;
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    if (j < cnt) {
      mn = min(mn, key[j]);
      mx = max(mx, key[j]);
    }
  }
  mn = __reduce_min_sync(0xffffffffu, mn);
  mx = __reduce_max_sync(0xffffffffu, mx);
  if (lane == 0) {
    s.warp_a[warp] = mn;
    s.warp_b[warp] = mx;
  }
  for (int b = tid; b < 512; b += kThreads) (&s.hist[0][0])[b] = 0;
  __syncthreads();
  mn = 0xffffffffu;
  mx = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    mn = min(mn, s.warp_a[w]);
    mx = max(mx, s.warp_b[w]);
  }
  uint32_t need = k;
  if (mn == mx) return {mn, mx, need, false};
  // Keys in range agree above `top`; the bin's range is lo .. lo | low_mask(top + 1).
  int top = 31 - __clz(mn ^ mx);
  uint32_t lo = mn & ~detail::low_mask(top + 1);
  int buf = 0;
  for (;;) {
    const int w = top + 1 < 8 ? top + 1 : 8;
    const int sh = top + 1 - w;
    const uint32_t hi = lo | detail::low_mask(top + 1);
#pragma unroll
    for (int j = 0; j < kE; ++j)
      if (j < cnt && key[j] >= lo && key[j] <= hi) atomicAdd(&s.hist[buf][(key[j] >> sh) & 255u], 1u);
    for (int b = tid; b < 256; b += kThreads) s.hist[buf ^ 1][b] = 0;
    __syncthreads();
    if (warp == 0) {
      uint32_t c[8], own = 0;
#pragma unroll
      for (int i = 0; i < 8; ++i) {
        c[i] = s.hist[buf][lane * 8 + i];
        own += c[i];
      }
      const uint32_t incl = tile::warp_suffix_sum(own);  // this lane's bins and every higher lane's
      uint32_t above = incl - own;
      if (above < need && need <= incl) {
#pragma unroll
        for (int i = 7; i >= 0; --i) {
          if (above + c[i] >= need) {
            s.pick[0] = static_cast<uint32_t>(lane * 8 + i);
            s.pick[1] = above;
            s.pick[2] = c[i];
            break;
          }
          above += c[i];
        }
      }
    }
    __syncthreads();
    need -= s.pick[1];
    lo |= s.pick[0] << sh;
    if (s.pick[2] == need) return {lo, lo | detail::low_mask(sh), need, true};
    if (sh == 0) return {lo, lo, need, false};
    top = sh - 1;
    buf ^= 1;
  }
}

// This thread's first output slot, and the rank (in position order) of its first key in
// [cut.lo, cut.hi] among all such keys. Every thread calls it.
template <int kThreads, int kE>
FLYOPS_DEVICE uint32_t small_place(const uint32_t (&key)[kE], int cnt, const SmallCut& cut,
                                   SmallSelectSmem<kThreads>& s, uint32_t& eq_base) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t gt = 0, eq = 0;
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    if (j < cnt) {
      gt += key[j] > cut.hi;
      eq += key[j] >= cut.lo && key[j] <= cut.hi;
    }
  }
  // Both counts in one scan: each total is at most kThreads * kE < 2^16.
  const uint32_t packed = (eq << 16) | gt;
  const uint32_t incl = tile::warp_prefix_sum(packed);
  if (lane == 31) s.warp_c[warp] = incl;
  __syncthreads();
  uint32_t before = incl - packed;
  for (int w = 0; w < warp; ++w) before += s.warp_c[w];
  eq_base = before >> 16;
  const uint32_t gt_base = before & 0xffffu;
  return gt_base + (cut.whole ? eq_base : min(eq_base, cut.need));
}

// Whether the key is taken, given the rank e of the thread's next key in [lo, hi] (advanced
// here).
FLYOPS_DEVICE bool small_taken(uint32_t key, const SmallCut& cut, uint32_t& e) {
  if (key > cut.hi) return true;
  if (key < cut.lo) return false;
  return cut.whole || e++ < cut.need;
}

// The k best keys of the CTA: emit(j, slot) for each of this thread's taken keys, slots
// 0..k-1 in position order. Every thread calls it.
template <int kThreads, int kE, typename Emit>
FLYOPS_DEVICE void small_select(const uint32_t (&key)[kE], int cnt, uint32_t k, SmallSelectSmem<kThreads>& s,
                                Emit&& emit) {
  const SmallCut cut = small_cut<kThreads, kE>(key, cnt, k, s);
  uint32_t e = 0;
  uint32_t slot = small_place<kThreads, kE>(key, cnt, cut, s, e);
#pragma unroll
  for (int j = 0; j < kE; ++j)
    if (j < cnt && small_taken(key[j], cut, e)) emit(j, slot++);
}

}  // namespace flyops::topk
#endif
