// Screening for the delegates' finish (traits.h has the rule): one CTA per row samples
// kScreenPieces evenly spaced pieces of the row and takes the r-th best sampled key as the
// row's threshold. The maxima stream (delegate_kernel.cuh) then appends each element at or
// above it to the row's candidate list, and the finish kernel selects from that list alone
// when it holds at least k and at most its capacity; else from the group maxima, so the
// threshold only decides the speed, never the result. Rows too long for the finish kernel
// (the radix chain: launch.cuh, delegates) take a wide sample, and a finish of the list
// alone that marks the rows it took (`done`): the chain's kernels skip those.
//
// The threshold is a guess from a sample: a row whose sampled pieces hold its best
// elements gets a threshold too high (fewer than k candidates), a row of many equal keys
// one too low (past the capacity). Both finish through the group maxima.
#pragma once

#include <cstdint>

#include "chain_mark.cuh"
#include "flyops/tile/launch.h"
#include "keys.h"
#include "small_select.cuh"
#include "trace.cuh"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct ScreenArgs {
  const void* x;
  int64_t n;           // elements per row, at least 2 screen_samples
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int rank;            // screen_rank: the sampled key that becomes the threshold
  bool largest;
  uint32_t* thresh;    // [rows] order keys at the element's width
  uint32_t* count;     // [rows] zeroed here: the stream counts its candidates into it
  uint32_t* done;      // [rows] zeroed here when given: the list finish marks its rows
  // Each row's threshold again, beside this call's tag, released once the count is zeroed,
  // for the 16-bit list-only stream to poll (TopK v134, v139; null: not polled).
  uint64_t* ready = nullptr;
  uint32_t tag = 0;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

namespace flyops::topk::detail {

// Up to this rank the wide sample's threshold is the rank-th best of the threads' best
// keys, popped from the lanes (r rounds of a warp maximum), then from the warps' lists by
// warp 0. small_cut's first round counts every sampled key into a histogram whose few top
// bins its shared atomics crowd: the wide sample took 7-10 us with it, ~3.5-5 with this
// (TopK v48; the 128-thread sample keeps small_cut: popping measured ~5% slower there at
// r = 21). The key sits at or below the rank-th best sampled key (each of those threads
// holds one at or above it), and equals it unless a thread holds two of the best: the list
// grows by those few.
inline constexpr int kScreenPopMax = 32;

// The r-th best (r <= 32, with multiplicity) of one key per thread, in warp 0's lanes.
template <int kThreads>
FLYOPS_DEVICE uint32_t rth_best_of_threads(uint32_t best, int r, uint32_t (&lists)[kThreads / 32][32]) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint32_t v = best, mine = 0;  // a popped lane holds 0, below every key that can be popped ahead of it
  for (int i = 0; i < r; ++i) {
    const uint32_t m = __reduce_max_sync(0xffffffffu, v);
    if (lane == __ffs(__ballot_sync(0xffffffffu, v == m)) - 1) v = 0;
    if (lane == i) mine = m;
  }
  lists[warp][lane] = mine;  // the warp's r best, best first
  __syncthreads();
  uint32_t t = 0;
  if (warp == 0) {
    int h = 0;  // this lane's next entry of warp `lane`'s list
    for (int i = 0; i < r; ++i) {
      const uint32_t head = lane < kThreads / 32 && h < r ? lists[lane][h] : 0u;
      t = __reduce_max_sync(0xffffffffu, head);
      if (lane == __ffs(__ballot_sync(0xffffffffu, head == t)) - 1) ++h;
    }
  }
  return t;
}

// The q-th best (with multiplicity) of one value per lane, q <= 32: q rounds of a warp
// maximum, each popping one lane that holds it. At least q lanes hold a value at or above it.
FLYOPS_DEVICE uint32_t qth_best_of_lanes(uint32_t v, int q) {
  const int lane = threadIdx.x & 31;
  uint32_t m = 0;
  for (int i = 0; i < q; ++i) {
    m = __reduce_max_sync(0xffffffffu, v);
    if (lane == __ffs(__ballot_sync(0xffffffffu, v == m)) - 1) v = 0;
  }
  return m;
}

// 16-bit samples start their search from a raised least key (TopK v104): each warp's q-th
// best thread maximum, q = ceil(rank / warps), as the warp's least key, so the block's least
// is the least of those. Every warp then holds q keys at or above it, rank in all, so the
// rank-th best sampled key is too, and the search's first histogram counts only the few keys
// above it: from the sample's least key its 256 bins are an octave wide and nearly every key
// falls in a few of them, whose shared atomics serialise. fp32 keeps the plain start: raised
// (v104b, four rounds) its 256-row calls gained ~1% and its 64-row calls lost ~1%, and those
// are the furthest from the copy rate. Up to this q (the pops cost ~30 cycles each).
inline constexpr int kScreenRaiseMaxQ = 16;

}  // namespace flyops::topk::detail

// Global namespace: profiler and ncu names start with flyops_. Warp w of W reads pieces w,
// w + W, ..., w + (kPer - 1) W, one 16-byte vector per lane each. kThreads: kScreenThreads or
// kScreenThreads32 for fp32 rows, kScreenThreads16 for 16-bit ones (kScreenThreads' pieces,
// two vectors a thread), or kScreenWideThreads for the wide sample; fp32's and the wide
// sample's pieces grow with the threads (screen_rank counts them so: screen_sample).
// kStreamSplit: the same code as a second kernel, which launch.cuh gives the screened
// stream's L1 / shared split (kScreen16CarveoutPercent), a per-kernel attribute.
template <typename Keys, int kThreads, bool kStreamSplit = false, int kWideVecs = flyops::topk::kScreenVecsPerThread>
__global__ void __launch_bounds__(kThreads) flyops_topk_screen(flyops::topk::ScreenArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kPieces = kThreads == kScreenWideThreads ? screen_pieces(kThreads, kWideVecs)
                          : sizeof(Raw) == 4             ? screen_pieces(kThreads)
                                                         : kScreenPieces;
  constexpr int kPer = kPieces / (kThreads / 32);
  static_assert(kPer * (kThreads / 32) == kPieces, "whole pieces a warp");
  __shared__ SmallSelectSmem<kThreads> s;
  __shared__ uint32_t lists[kThreads / 32][32];
  __shared__ uint32_t at_or_above;  // sampled keys at or above the threshold, when counted
  PhaseTrace trace;  // -DFLYOPS_TOPK_TRACE=1: phase times (trace.cuh)
  GridTrace grid_trace;
  trace.mark();
  if (threadIdx.x == 0) at_or_above = 0;  // (the selection below passes barriers first)
  // The stream may start its loads now; it waits for this grid before reading thresholds.
  // (Allowed only once the sample was in, the stream ran 2-7% slower: TopK v48.)
  flyops::tile::allow_dependent_launch();
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nv = a.n / kVec;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride);
  uint4 buf[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) buf[u] = src[screen_piece(warp + u * (kThreads / 32), nv, kPieces) + lane];
  // The row's polled word as this call found it, before this CTA writes it (TopK v139).
  uint64_t old_word = 0;
  if (a.ready != nullptr && threadIdx.x == 0) old_word = flyops::tile::ld_relaxed_gpu(a.ready + row);
  RegKeys<kPer * kVec> run;
  run.cnt = kPer * kVec;
  KeyRange range;
#pragma unroll
  for (int u = 0; u < kPer; ++u)
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      run[u * kVec + i] = order_key<Keys>(vec_element<Raw>(buf[u], i), a.largest);
      range.add(run[u * kVec + i]);
    }
  // The wide sample at a small rank: popped maxima (above). Else the floor of a bin that
  // holds the rank-th best sampled key, with rank to 1.5 rank of them at or above it: a
  // threshold needs no more (each round of the search is a pass over the keys and two
  // barriers).
  const uint32_t rank = static_cast<uint32_t>(a.rank);
  uint32_t t;
  if (kThreads == kScreenWideThreads && rank <= detail::kScreenPopMax) {
    t = detail::rth_best_of_threads<kThreads>(range.mx, static_cast<int>(rank), lists);
  } else {
    trace.mark();  // the sample in (as far as the compiler keeps the conversions above it)
    KeyRange from = range;
    if constexpr (Keys::kBits == 16 && kThreads != kScreenWideThreads) {
      const int q = static_cast<int>((rank + kThreads / 32 - 1) / (kThreads / 32));
      if (q <= detail::kScreenRaiseMaxQ) from.mn = max(from.mn, detail::qth_best_of_lanes(range.mx, q));
    }
    const SmallCut c = small_cut<kThreads>(run, from, rank, s, &trace, rank + rank / 2);
    t = c.lo;
    // Ties (a row of mostly equal or masked keys) put far more than 1.5 rank of the sample
    // at or above t, and the list would overflow: such a row is marked not screened
    // (kNoScreen), so that its stream writes its maxima instead of a list. A whole bin's
    // count is known; a cut at one value (ties) is counted. The wide sample's rows that
    // overflow take the radix chain, as before.
    if (kThreads != kScreenWideThreads) {
      uint32_t above = c.taken;
      if (!c.whole) {  // uniform in the CTA
        uint32_t mine = 0;
        run.each([&](int, uint32_t key) { mine += key >= t ? 1u : 0u; });
        mine = __reduce_add_sync(0xffffffffu, mine);
        if ((threadIdx.x & 31) == 0) atomicAdd(&at_or_above, mine);
        __syncthreads();
        above = at_or_above;
      }
      if (above > 3 * rank) t = kNoScreen;
    }
  }
  trace.mark();
  trace.dump("screen (rank, threads)", rank, kThreads);
  grid_trace.end(0);
  if (threadIdx.x == 0) {
    // A word that carried this call's tag before this CTA wrote it (left by a graph replay
    // whose finish did not clear it, or by chance in fresh memory) may have been taken by
    // the stream's blocks, with whatever threshold it held. Its row's count is then poisoned
    // past any list's capacity, which no claim can bring back, and its threshold made one
    // that no key reaches but not kNoScreen, so that the finish computes the row's maxima
    // itself; the word then carries that threshold, so that later blocks list nothing at
    // once instead of polling until the grid wait. A stale word costs speed, never the
    // result (TopK v139).
    const bool stale = a.ready != nullptr && static_cast<uint32_t>(old_word >> 32) == a.tag;
    a.thresh[row] = stale ? kThreshPoisoned : t;
    // An atomic store: blocks that took a stale word may be claiming on the count already.
    if (a.ready != nullptr)
      atomicExch(a.count + row, stale ? kCountPoisoned : 0u);
    else
      a.count[row] = 0;
    if (a.done != nullptr) a.done[row] = kRowPending;
    if (a.ready != nullptr)
      flyops::tile::st_release_gpu(a.ready + row, (static_cast<uint64_t>(a.tag) << 32) | (stale ? kThreshPoisoned : t));
  }
}

#endif
