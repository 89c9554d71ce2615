// One CTA selects the k best of up to 16k 32-bit order keys, each thread holding a contiguous
// run of positions (in registers, RegKeys, or in shared memory, SmemKeys); ties go to the
// lowest positions. Made for the delegates' small selections (finish_kernel.cuh), where the
// cluster kernel's machinery (histograms published through DSMEM, 2048-bin selections, a
// returning atomic per warp step with a hit) costs ~8 us on a 2000-element row whatever its
// size (TopK v18):
//
//   range   the block's least and greatest key (each thread's share gathered by the caller's
//           fill, KeyRange): digits start at their highest differing bit; with KeyBits also
//           the bits that vary at all, and the digits stop at the lowest of them (16-bit
//           keys widened to 32 bits, the delegates' maxima of 16-bit rows: two rounds, not
//           four);
//   digits  8 bits per round: a 256-bin histogram (non-returning shared atomics) of the keys
//           still in range, one warp finds the bin of the need-th best; two barriers a round;
//   place   one block scan of (in the final bin, above it) counts gives each taken element its
//           slot, in position order.
#pragma once

#if defined(__CUDACC__)
#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/warp.h"
#include "trace.cuh"

namespace flyops::topk {

// A thread's run of keys in registers: key j is position first + j, valid below cnt.
template <int kE>
struct RegKeys {
  uint32_t v[kE];
  int cnt = 0;
  FLYOPS_DEVICE uint32_t& operator[](int j) { return v[j]; }
  // f(j) for j = 0, kStep, 2 kStep, ... below cnt.
  template <int kStep, typename F>
  FLYOPS_DEVICE void steps(F&& f) {
#pragma unroll
    for (int j = 0; j < kE; j += kStep)
      if (j < cnt) f(j);
  }
  template <typename F>
  FLYOPS_DEVICE void each(F&& f) const {
#pragma unroll
    for (int j = 0; j < kE; ++j)
      if (j < cnt) f(j, v[j]);
  }
  // f(j, key) for each key, in order, that taken(key) accepts.
  template <typename Taken, typename F>
  FLYOPS_DEVICE void each_taken(Taken&& taken, F&& f) const {
    each([&](int j, uint32_t key) {
      if (taken(key)) f(j, key);
    });
  }
};

// A thread's run of keys in shared memory, stored transposed (key j of thread t at
// j * kStride + t): every pass over the runs is free of bank conflicts, and so are the
// coalesced fills (consecutive keys of one run fall in consecutive banks: kStride = 1 mod 32).
template <int kThreads>
struct SmemKeys {
  static constexpr int kStride = kThreads + 1;
  uint32_t* base;  // the block's array + threadIdx.x
  int cnt = 0;
  // Where key j of thread `owner` sits in the block's array (for fills by other threads).
  static FLYOPS_DEVICE int at(int owner, int j) { return j * kStride + owner; }
  FLYOPS_DEVICE uint32_t& operator[](int j) { return base[at(0, j)]; }
  FLYOPS_DEVICE uint32_t operator[](int j) const { return base[at(0, j)]; }
  // Eight loads issued before their uses: the uses' shared atomics would otherwise keep each
  // load behind the previous key's (they may alias), one load latency per key.
  template <typename F>
  FLYOPS_DEVICE void each(F&& f) const {
    int j = 0;
    for (; j + 8 <= cnt; j += 8) {
      uint32_t v[8];
#pragma unroll
      for (int i = 0; i < 8; ++i) v[i] = base[at(0, j + i)];
#pragma unroll
      for (int i = 0; i < 8; ++i) f(j + i, v[i]);
    }
    for (; j < cnt; ++j) f(j, base[at(0, j)]);
  }
  // f(j, key) for each key, in order, that taken(key) accepts. The decisions first, then f
  // over the few taken keys: f inside the pass would run on nearly every step of a warp
  // (some lane takes a key) with its loads in the chain, ~0.1 us a key at 16 keys a thread.
  template <typename Taken, typename F>
  FLYOPS_DEVICE void each_taken(Taken&& taken, F&& f) const {
    uint32_t mask = 0;  // cnt <= 32 (kFinishSmemMaxE)
    each([&](int j, uint32_t key) { mask |= taken(key) ? 1u << j : 0u; });
    for (; mask != 0; mask &= mask - 1) {
      const int j = __ffs(mask) - 1;
      f(j, base[at(0, j)]);
    }
  }
};

template <int kThreads>
struct SmallSelectSmem {
  uint32_t hist[2][256];  // this round's histogram and the next one's, zeroed meanwhile
  uint32_t warp_a[kThreads / 32];  // least and greatest keys per warp (small_cut)
  uint32_t warp_b[kThreads / 32];
  uint32_t warp_d[kThreads / 32];  // AND and OR of the keys per warp
  uint32_t warp_e[kThreads / 32];
  uint32_t warp_c[kThreads / 32];  // counts per warp (small_place): small_cut may return
                                   // with no barrier after reading warp_a, b, d and e
  uint32_t pick[3];  // the bin, elements in the bins above it, elements in it
};

// The least and greatest of the keys a thread has seen: any split of all the keys among the
// threads gives the block's range (the fills gather it, which saves a pass).
struct KeyRange {
  static constexpr bool kBits = false;
  uint32_t mn = 0xffffffffu, mx = 0;
  FLYOPS_DEVICE void add(uint32_t key) {
    mn = min(mn, key);
    mx = max(mx, key);
  }
};

// A KeyRange that also keeps the AND and OR of the keys (bits set in the OR but not in the
// AND vary), for keys whose low bits may never vary: two instructions more per key, so only
// where that is likely.
struct KeyBits : KeyRange {
  static constexpr bool kBits = true;
  uint32_t all = 0xffffffffu, any = 0;
  FLYOPS_DEVICE void add(uint32_t key) {
    KeyRange::add(key);
    all &= key;
    any |= key;
  }
};

// What the search found: every key above `hi` is taken; of the keys in [lo, hi], all of them
// when `whole`, else (lo == hi) the first `need` in position order. `taken` keys in all: k,
// or up to small_cut's `loose` for a whole bin.
struct SmallCut {
  uint32_t lo, hi, need;
  bool whole;
  uint32_t taken;
};

namespace detail {
FLYOPS_DEVICE uint32_t low_mask(int bits) { return bits >= 32 ? 0xffffffffu : (1u << bits) - 1u; }
}  // namespace detail

// The cut for the k best of all threads' keys (RegKeys or SmemKeys; k <= their total).
// `loose` (0: exact) lets the search stop at a whole bin once every key it takes, k or more,
// is at most that many: a threshold that only has to be about right (screen_kernel.cuh).
// `part`: this thread's share of the keys' range. Every thread of the CTA calls it; `trace`
// marks each digit round (trace.cuh).
template <int kThreads, typename Run, typename Range>
FLYOPS_DEVICE SmallCut small_cut(const Run& run, Range part, uint32_t k, SmallSelectSmem<kThreads>& s,
                                 PhaseTrace* trace = nullptr, uint32_t loose = 0) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t mn = __reduce_min_sync(0xffffffffu, part.mn);
  uint32_t mx = __reduce_max_sync(0xffffffffu, part.mx);
  uint32_t all = 0, any = 0;  // without KeyBits: as if every bit varied
  if constexpr (Range::kBits) {
    all = __reduce_and_sync(0xffffffffu, part.all);
    any = __reduce_or_sync(0xffffffffu, part.any);
  }
  if (lane == 0) {
    s.warp_a[warp] = mn;
    s.warp_b[warp] = mx;
    if constexpr (Range::kBits) {
      s.warp_d[warp] = all;
      s.warp_e[warp] = any;
    }
  }
  for (int b = tid; b < 512; b += kThreads) (&s.hist[0][0])[b] = 0;
  __syncthreads();
  mn = 0xffffffffu;
  mx = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    mn = min(mn, s.warp_a[w]);
    mx = max(mx, s.warp_b[w]);
    if constexpr (Range::kBits) {
      all &= s.warp_d[w];
      any |= s.warp_e[w];
    }
  }
  uint32_t need = k;
  if (mn == mx) return {mn, mx, need, false, k};
  // Every key has `all`'s bits below `low`: the digits work on key >> low. A caller's
  // raised least key (finish_kernel.cuh) may differ from the greatest only below it: then
  // every key in range is the greatest.
  int low = 0;
  if constexpr (Range::kBits) {
    low = __ffs(any & ~all) - 1;
    if (((mn ^ mx) >> low) == 0) return {mx, mx, need, false, k};
  }
  const uint32_t low_bits = all & detail::low_mask(low);
  // Digits split the range [lo, hi] (keys >> low) evenly by offset from lo, not by bit
  // prefix: the top of a row's candidates straddles an exponent step (1.85 .. 4.1), where
  // prefix digits put nearly every key in two bins and the histogram's shared atomics
  // serialise on them. Keys outside the range (below a raised least key, or outside the
  // last bin) are skipped by one unsigned compare.
  uint32_t lo = mn >> low, hi = mx >> low;
  int buf = 0;
  for (;;) {
    const uint32_t span = hi - lo;
    const int bits = 32 - __clz(span);
    const int sh = bits > 8 ? bits - 8 : 0;
    // Predicated adds from one base (TopK v108): as `if (d <= span) atomicAdd(...)` each key
    // was a branch that re-derived the shared window's base (S2R SR_CgaCtaId) before its add;
    // without them the 16-bit screen's round is ~0.3 us shorter (even end to end).
    const uint32_t hist = static_cast<uint32_t>(__cvta_generic_to_shared(&s.hist[buf][0]));
    run.each([&](int, uint32_t key) {
      const uint32_t d = (key >> low) - lo;
      tile::red_shared_add_if(d <= span, hist + ((d >> sh) << 2), 1u);
    });
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
    if (trace != nullptr) trace->mark();
    need -= s.pick[1];
    const uint32_t off = s.pick[0] << sh;
    lo += off;
    hi = span - off <= detail::low_mask(sh) ? hi : lo + detail::low_mask(sh);
    if (s.pick[2] == need || k - need + s.pick[2] <= loose)
      return {lo << low, (hi << low) | detail::low_mask(low), need, true, k - need + s.pick[2]};
    if (lo == hi) return {(lo << low) | low_bits, (lo << low) | low_bits, need, false, k};
    buf ^= 1;
  }
}

// This thread's first output slot, and the rank (in position order) of its first key in
// [cut.lo, cut.hi] among all such keys. Every thread calls it.
template <int kThreads, typename Run>
FLYOPS_DEVICE uint32_t small_place(const Run& run, const SmallCut& cut, SmallSelectSmem<kThreads>& s,
                                   uint32_t& eq_base) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t gt = 0, eq = 0;
  run.each([&](int, uint32_t key) {
    gt += key > cut.hi;
    eq += key >= cut.lo && key <= cut.hi;
  });
  // Both counts in one scan: each total is below 2^16 (finish_elems keeps a CTA's keys there).
  const uint32_t packed = (eq << 16) | gt;
  const uint32_t incl = tile::warp_prefix_sum(packed);
  if (lane == 31) s.warp_c[warp] = incl;
  __syncthreads();
  const uint32_t before = incl - packed + tile::sum_warps_before<kThreads / 32>(s.warp_c, warp);
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

// The k best keys of the CTA: emit(j, key, slot) for each of this thread's taken keys,
// slots 0..cut.taken-1 in position order; returns the cut (every taken key is >= its lo).
// `loose` as small_cut's: more than k may be taken, all of them at or above the k-th best.
// Every thread calls it.
template <int kThreads, typename Run, typename Range, typename Emit>
FLYOPS_DEVICE SmallCut small_select(const Run& run, Range part, uint32_t k, SmallSelectSmem<kThreads>& s,
                                    Emit&& emit, PhaseTrace* trace = nullptr, uint32_t loose = 0) {
  const SmallCut cut = small_cut<kThreads>(run, part, k, s, trace, loose);
  uint32_t e = 0;
  uint32_t slot = small_place<kThreads>(run, cut, s, e);
  if (trace != nullptr) trace->mark();
  run.each_taken([&](uint32_t key) { return small_taken(key, cut, e); },
                 [&](int j, uint32_t key) { emit(j, key, slot++); });
  return cut;
}

}  // namespace flyops::topk
#endif
