// The delegates' finish in one CTA per row (delegate_kernel.cuh has the idea): after the
// group maxima stream, one kernel picks the k best maxima of its row (small_select.cuh),
// loads those groups' elements straight from the row, and picks their k best. It replaces two
// cluster-kernel selections, the gather and their launch gaps.
//
// Each thread holds a contiguous run of keys: in registers for small k (up to kFinishMaxE),
// or in shared memory (kE == 0: up to kFinishSmemMaxE, k up to kFinishSmemMaxK), where the
// ~sqrt(n k) maxima and candidates of k = 1024 do not fit the registers. Either way a
// thread only ever reads its own keys, so refilling them needs no barrier.
//
// Ties go to the lowest positions in both selections: maxima by group number, candidates
// by position (the chosen groups come out in increasing order, so candidate order is
// position order). That is what NaN ties need; any other tie may go either way.
#pragma once

#include <cstdint>
#include <type_traits>

#include "block_sort.cuh"
#include "chain_mark.cuh"
#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/async_copy.h"
#include "keys.h"
#include "row_maxima.cuh"
#include "small_select.cuh"
#include "trace.cuh"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct FinishArgs {
  const void* x;
  int64_t row_stride;        // elements between rows, a multiple of the vector
  int64_t n;                 // elements per row, a multiple of the group
  int k;                     // at most kFinishMaxK (registers) or kFinishSmemMaxK
  int group_log2;            // elements per group
  int elems;                 // keys per thread (finish_elems)
  bool largest;
  bool sorted;
  uint32_t* maxima;          // [rows, n / group] ascending keys (flyops_topk_maxima)
  void* values;              // [rows, k]
  int64_t* indices;
  // Screening (screen_kernel.cuh), or null: each row's candidate count and its list of
  // `cap` (order key, position) pairs, cap at most the run's capacity.
  const uint32_t* screen_count;
  const uint2* cand;
  int64_t cap;
  // The list alone (maxima null: the delegates' radix chain takes the rows it leaves): each
  // row it finishes is marked here, for the chain's kernels to skip.
  uint32_t* done = nullptr;
  // Given (the rows' screening thresholds), the stream wrote the maxima of kNoScreen rows
  // only (TopK v59): another row whose list does not hold its answer computes its groups'
  // maxima from the row itself, as the stream would have. The shared-memory form only.
  const uint32_t* list_only = nullptr;
  // The finish lists its row itself (TopK v118; list_only the thresholds, cand null): no
  // stream ran, so a row its list does not hold computes its maxima from the row, kNoScreen
  // or not.
  bool row_list = false;
  // With it, the CTA asks L2 for the rest of its row (past its ring's first lap) before its
  // grid wait, and its ring is kRowRingDeep slots: where the rows fit one wave
  // (their CTAs wait on the screen; TopK v118c: 64 rows 0.93-0.95x of without), not past it
  // (256 rows 1.05-1.09x: the later waves' prefetches only crowd L2).
  bool row_prefetch = false;
  // The 16-bit list-only stream's polled words (TopK v134, v139), or null: each CTA clears
  // its row's after its grid wait, so that a graph's next replay, whose tag is the same,
  // does not find them (the screen would poison those rows: correct, but slow).
  uint64_t* ready = nullptr;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

namespace flyops::topk::detail {

// The k best of the block's keys at or above `cut`, when at most kThreads are: each one's
// composite (key, ~position) compacted into `cand` and ranked among them by counting, so no
// digit round, no placing scan and no sort; out(rank, composite) for the ranks below k, rank 0
// the best (slots of a sorted output, which an unsorted one may take too). Returns false,
// having written nothing, when more keys reach the cut (ties). Every thread calls it.
template <int kThreads, typename Run, typename Pos, typename Out>
FLYOPS_DEVICE bool rank_over_cut(const Run& run, uint32_t cut, int k, uint64_t* cand, uint32_t* warp_c, Pos&& position,
                                 Out&& out) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t mine = 0;
  run.each([&](int, uint32_t key) { mine += key >= cut; });
  const uint32_t incl = tile::warp_prefix_sum(mine);
  if (lane == 31) warp_c[warp] = incl;
  __syncthreads();
  const int m = static_cast<int>(tile::sum_warps_before<kWarps>(warp_c, kWarps));
  if (m > kThreads) return false;
  uint32_t slot = incl - mine + tile::sum_warps_before<kWarps>(warp_c, warp);
  run.each([&](int j, uint32_t key) {
    if (key >= cut) cand[slot++] = (uint64_t{key} << 32) | (0xffffffffu - static_cast<uint32_t>(position(j)));
  });
  __syncthreads();
  rank_each_split<kThreads>(cand, m, [&](uint32_t r, uint64_t c, int) {
    if (r < static_cast<uint32_t>(k)) out(r, c);
  });
  return true;
}

// A screened row's k best from its list in one pass of kListBuckets buckets (TopK v73), in
// place of small_select's digit rounds and order_desc's bucket order after them (~6 us of a
// k = 1024 row): the buckets split the list's key span evenly; a suffix scan of their counts
// gives each bucket its first output slot and the cut (the bucket holding the k-th best);
// each key at or above the cut takes its bucket's first slot plus its place in the bucket,
// staged in shared memory as (key, ~list index). The place is what the counting atomic
// returned (TopK v102: kept a byte a key in `within`, so the scatter needs no second round
// of returning atomics, each one in the chain of its store). Buckets one key wide (a 16-bit
// list, or a narrow span) are done then: their keys tie, and a tie may take any index (the
// list's order is the stream's, by atomics, as before). Wider buckets rank their composites
// within the bucket. Returns false, having written nothing, when a bucket at or above the
// cut holds more than kListBucketMax keys in a wide bucket or kListPlaceMax in a one-key
// one (many tied keys: the caller selects as before). Key j of thread t's run is list entry
// t + j * kThreads (the runs strided by the block, TopK v106). out(slot, key, position) for
// each slot below k, slot 0 the best; the positions are read after the staging, all at once:
// where pos_row is not 0, entry t + j * kThreads's from pos_keys' row pos_row + j, column t
// (the caller's copy, TopK v107), else from the list in global memory. `within`: a word per
// four keys of each thread (word q of thread t at q * kThreads + t). Every thread calls it;
// k <= kFinishSmemMaxK.
template <int kThreads, typename Run, typename Out>
FLYOPS_DEVICE bool list_top(const Run& run, const uint2* list, const uint32_t* pos_keys, int pos_row, KeyRange part,
                            uint32_t k,
                            SmallSelectSmem<kThreads>& s, uint32_t* bins, uint64_t* stage, uint32_t* within,
                            PhaseTrace* trace, Out&& out) {
  constexpr int kWarps = kThreads / 32, kPer = kListBuckets / kThreads;
  static_assert(kPer * kThreads == kListBuckets && kListBuckets == 1 << 11, "whole buckets a thread, 11 bits");
  static_assert(kListBucketMax <= kListPlaceMax, "a wide bucket's places fit a byte");
  constexpr int kOut = (kFinishSmemMaxK + kListBucketMax + kThreads - 1) / kThreads;  // staged entries a thread
  constexpr int kChunk = 8;  // keys whose atomics are in flight together
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  uint32_t mn = __reduce_min_sync(0xffffffffu, part.mn), mx = __reduce_max_sync(0xffffffffu, part.mx);
  if (lane == 0) {
    s.warp_a[warp] = mn;
    s.warp_b[warp] = mx;
  }
  for (int b = tid; b < kListBuckets; b += kThreads) bins[b] = 0;
  __syncthreads();
#pragma unroll
  for (int w = 0; w < kWarps; ++w) {
    mn = min(mn, s.warp_a[w]);
    mx = max(mx, s.warp_b[w]);
  }
  const int bits = 32 - __clz(mx - mn);
  const int shift = bits > 11 ? bits - 11 : 0;
  auto bucket = [&](uint32_t key) { return (key - mn) >> shift; };
  const int cnt = run.cnt;
  // Each key's place in its bucket, from the count's own atomic: a chunk's atomics are
  // issued before any of their places is stored (a store may alias the next key's load).
  for (int j0 = 0; j0 < cnt; j0 += kChunk) {
    uint32_t key[kChunk], place[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) key[i] = j0 + i < cnt ? run[j0 + i] : 0u;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) place[i] = j0 + i < cnt ? atomicAdd(&bins[bucket(key[i])], 1u) : 0u;
#pragma unroll
    for (int q = 0; q < kChunk / 4; ++q) {
      uint32_t word = 0;
#pragma unroll
      for (int i = 0; i < 4; ++i) word |= min(place[q * 4 + i], kListPlaceMax) << (8 * i);
      if (j0 + q * 4 < cnt) within[((j0 >> 2) + q) * kThreads + tid] = word;
    }
  }
  __syncthreads();
  trace->mark();
  uint32_t cnt_b[kPer], own = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    cnt_b[j] = bins[tid * kPer + j];
    own += cnt_b[j];
  }
  const uint32_t incl = tile::warp_suffix_sum(own);  // this lane's buckets and every higher lane's
  if (lane == 0) s.warp_c[warp] = incl;
  __syncthreads();
  uint32_t above = incl - own + tile::sum_warps_after<kWarps>(s.warp_c, warp);
  // A place saturates its byte past kListPlaceMax; a wide bucket ranks at most kListBucketMax.
  const uint32_t most = shift > 0 ? static_cast<uint32_t>(kListBucketMax) : kListPlaceMax;
  bool crowded = false;
#pragma unroll
  for (int j = kPer - 1; j >= 0; --j) {
    bins[tid * kPer + j] = above;  // the bucket's first slot
    if (above < k) {
      crowded |= cnt_b[j] > most;
      if (above + cnt_b[j] >= k) s.pick[0] = static_cast<uint32_t>(tid * kPer + j);
    }
    above += cnt_b[j];
  }
  if (tid == 0) s.pick[1] = above;  // every key: the lowest bucket's end
  if (__syncthreads_or(crowded)) return false;
  const uint32_t cut = s.pick[0];
  // bins[b] is bucket b's first slot, and bucket b - 1's first is its end.
  auto bucket_end = [&](uint32_t b) { return b == 0 ? s.pick[1] : bins[b - 1]; };
  for (int j0 = 0; j0 < cnt; j0 += kChunk) {
    uint32_t key[kChunk], slot[kChunk];
#pragma unroll
    for (int i = 0; i < kChunk; ++i) key[i] = j0 + i < cnt ? run[j0 + i] : 0u;
#pragma unroll
    for (int i = 0; i < kChunk; ++i) {  // the slots' loads first, then the stores
      const uint32_t b = bucket(key[i]);
      slot[i] = j0 + i < cnt && b >= cut ? bins[b] + ((within[((j0 + i) >> 2) * kThreads + tid] >> (8 * (i & 3))) & 0xffu)
                                         : 0xffffffffu;
    }
#pragma unroll
    for (int i = 0; i < kChunk; ++i)
      if (slot[i] != 0xffffffffu && (shift > 0 || slot[i] < k))
        stage[slot[i]] = (uint64_t{key[i]} << 32) | (0xffffffffu - static_cast<uint32_t>(tid + (j0 + i) * kThreads));
  }
  __syncthreads();
  trace->mark();
  const uint32_t staged = shift == 0 ? k : bucket_end(cut);
  uint32_t slot[kOut], key[kOut], index[kOut];
#pragma unroll
  for (int u = 0; u < kOut; ++u) {
    const uint32_t q = tid + u * kThreads;
    slot[u] = k;  // none
    if (q < staged) {
      const uint64_t c = stage[q];
      key[u] = static_cast<uint32_t>(c >> 32);
      index[u] = 0xffffffffu - static_cast<uint32_t>(c);
      uint32_t r = q;
      if (shift > 0) {
        const uint32_t b = bucket(key[u]);
        r = bins[b];
        for (uint32_t i = r, end = bucket_end(b); i < end; ++i) r += stage[i] > c;
      }
      slot[u] = r;
    }
  }
  uint32_t pos[kOut];
#pragma unroll
  for (int u = 0; u < kOut; ++u)  // the loads first, all in flight
    if (slot[u] < k)
      pos[u] = pos_row != 0 ? pos_keys[SmemKeys<kThreads>::at(index[u] % kThreads, pos_row + index[u] / kThreads)]
                            : list[index[u]].y;
#pragma unroll
  for (int u = 0; u < kOut; ++u)
    if (slot[u] < k) out(slot[u], key[u], pos[u]);
  return true;
}

// A 16-bit list's k best (TopK v126): its keys counted in bins one order key wide from the
// threshold up (list_hist_bin), so a suffix scan of the bins gives each key's first output
// slot and the cut (the bin of the k-th best), and each entry at or above the cut takes its
// slot from a returning shared atomic on its bin's start (equal keys tie, and a tie may take
// any index). Against list_top: no key range and its barrier, no keys or places kept in
// shared memory, no in-bucket ranks; the entries stay in registers (a batch a thread, loaded
// once the count is in: TopK v129). v125 had the stream count them in global bins: its
// atomics cost the stream more (+22%) than the finish saved. Returns false, having written
// nothing, when the list does not hold the row's answer (fewer than k entries, past the
// capacity) or a key fell in the last bin (past the span, or a NaN: their ties need position
// order): the caller selects as before. Every thread calls it; kListBuckets bins, four a
// thread, in `bins`; `stage` holds k entries. `trace` marks each phase's end (trace builds).
// `list`: the entries as (order key, position), a pointer or (the row-listed 16-bit finish's
// packed list, TopK v141) a function of the index.
template <typename List>
FLYOPS_DEVICE uint2 list_entry(const List& list, int i) {
  if constexpr (std::is_pointer_v<List>) return list[i];
  else return list(i);
}
template <typename Keys, int kThreads, typename List, typename Out>
FLYOPS_DEVICE bool list_top16(const uint32_t* count, const List& list, uint32_t t, bool largest, uint32_t k,
                              int64_t cap, SmallSelectSmem<kThreads>& s, uint32_t* bins, uint2* stage, Out&& out,
                              PhaseTrace* trace) {
  constexpr int kWarps = kThreads / 32, kPer = kListBuckets / kThreads;
  static_assert(kPer == 4, "a thread's bins are one 16-byte word");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint32_t c = *count;
  reinterpret_cast<uint4*>(bins)[tid] = make_uint4(0u, 0u, 0u, 0u);  // while the count's load is out
  if (c < k || c > cap) return false;  // uniform
  const int mine = tid < static_cast<int>(c) ? (static_cast<int>(c) - 1 - tid) / kThreads + 1 : 0;
  uint2 e[kListBatch];
  auto load = [&](int j0) {
#pragma unroll
    for (int u = 0; u < kListBatch; ++u)
      e[u] = j0 + u < mine ? list_entry(list, tid + (j0 + u) * kThreads) : make_uint2(0u, 0u);
  };
  // Only the list's entries: read whole with the count (v126), the stale rest of the list's
  // room came from DRAM, ~3 MB at 256 rows of 128256, and the call ran ~3% longer (v129).
  load(0);
  auto tally = [&](int j0) {
#pragma unroll
    for (int u = 0; u < kListBatch; ++u)
      if (j0 + u < mine) atomicAdd(&bins[list_hist_bin<Keys>(e[u].x, t, largest)], 1u);
  };
  __syncthreads();  // the bins zeroed
  trace->mark();
  tally(0);
  for (int j0 = kListBatch; j0 < mine; j0 += kListBatch) {  // lists past kListBatch a thread
    load(j0);
    tally(j0);
  }
  __syncthreads();
  trace->mark();  // the entries in and counted
  const uint4 h = reinterpret_cast<const uint4*>(bins)[tid];
  // Bins 4 tid + j; the higher the bin, the better its key.
  const uint32_t cnt[kPer] = {h.x, h.y, h.z, h.w};
  const uint32_t own = h.x + h.y + h.z + h.w;
  const uint32_t incl = tile::warp_suffix_sum(own);  // this lane's bins and every higher lane's
  if (lane == 0) s.warp_c[warp] = incl;
  if (tid == kThreads - 1) s.pick[1] = h.w;  // keys past the span, or NaN
  if (tid == 0) s.pick[0] = kListBuckets;    // no cut yet
  __syncthreads();
  if (s.pick[1] != 0) return false;  // uniform
  uint32_t above = incl - own + tile::sum_warps_after<kWarps>(s.warp_c, warp);
#pragma unroll
  for (int j = kPer - 1; j >= 0; --j) {
    bins[tid * kPer + j] = above;  // the bin's first slot
    if (above < k && above + cnt[j] >= k) s.pick[0] = static_cast<uint32_t>(tid * kPer + j);
    above += cnt[j];
  }
  __syncthreads();
  trace->mark();  // the scan
  const uint32_t cut = s.pick[0];  // the bins add up to c >= k, so some bin holds the k-th best
  auto place = [&](int j0) {
    uint32_t slot[kListBatch];
#pragma unroll
    for (int u = 0; u < kListBatch; ++u) {  // the atomics in flight together, then the stores
      const uint32_t b = e[u].x - t;        // below the last bin here
      slot[u] = j0 + u < mine && b >= cut ? atomicAdd(&bins[b], 1u) : k;
    }
#pragma unroll
    for (int u = 0; u < kListBatch; ++u)
      if (slot[u] < k) stage[slot[u]] = e[u];
  };
  if (mine > kListBatch) load(0);  // the registers hold the last batch tallied
  place(0);
  for (int j0 = kListBatch; j0 < mine; j0 += kListBatch) {
    load(j0);
    place(j0);
  }
  __syncthreads();
  trace->mark();  // the entries placed
  for (uint32_t q = tid; q < k; q += kThreads) {
    const uint2 v = stage[q];
    out(q, v.x, v.y);
  }
  return true;
}

// The row-listed finish's read (TopK v119b): the row streams through a ring of `stages`
// slots of kRowRingVecs vectors in shared memory, each thread copying its own vector of every
// chunk into its slot (cp.async, L1 bypassed) `stages` chunks ahead, the first ones before
// the grid wait, and reading back only its own: no barrier between the threads. v118 loaded
// the row into registers, four vectors a thread at a time, nothing in flight while it listed
// them (~10 us a row of 32000 elements); v119's bulk copies, one thread issuing a slot's 8 KB
// behind barriers, ran ~6 GB/s an SM. `stages`: kRowRingStages, or kRowRingDeep where the
// rows spread one CTA an SM (TopK v119c; even in its measurement, where the list's
// instructions were the bound, not the read).
struct RowRing {
  const uint4* src;
  uint4* slots;
  int nv, chunks, stages;
  // This thread's vector of chunk c into slot s (none past the row): one copy group each.
  FLYOPS_DEVICE void copy(int c, int s) const {
    const int v = c * kRowRingVecs + static_cast<int>(threadIdx.x);
    if (c < chunks && v < nv) tile::cp_async_16(slots + s * kRowRingVecs + threadIdx.x, src + v);
    tile::cp_async_commit();
  }
  FLYOPS_DEVICE void start() const {
    for (int s = 0; s < stages; ++s) copy(s, s);
  }
  // This thread's copy of the oldest chunk in flight landed. kShallow: the ring's depth when
  // not kRowRingDeep (list_row16's is kRowRing16Stages, TopK v141).
  template <int kShallow = kRowRingStages>
  FLYOPS_DEVICE void wait() const {
    if (stages == kRowRingDeep) tile::cp_async_wait<kRowRingDeep - 1>();
    else tile::cp_async_wait<kShallow - 1>();
  }
  // Where the row is not listed: the first lap's copies landed (a barrier after it), so that
  // the slots' memory may be written.
  FLYOPS_DEVICE void drain() const { tile::cp_async_wait<0>(); }
};

// The row-listed finish's list (TopK v118): every element of the row whose order key is at
// or above t, as (key, position) at slot s of the block's list, key in row s / kThreads of
// thread s % kThreads's run and its position pos_row rows further (list_top reads them there),
// slots claimed a warp step at a time on `counter`. Slots from `cap` on are counted only.
// Returns the count (every thread) and the range of the keys this thread stored.
struct RowList {
  int count;
  KeyRange range;
};
template <typename Keys, int kThreads>
FLYOPS_DEVICE RowList list_row(const RowRing& ring, uint32_t t, bool largest, uint32_t* keys, int pos_row, int cap,
                               uint32_t* counter) {
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  static_assert(kRowRingVecs == kThreads, "a slot holds one vector a thread");
  const int tid = threadIdx.x, lane = tid & 31;
  if (tid == 0) *counter = 0;
  __syncthreads();
  RowList out{0, KeyRange{}};
  for (int c = 0, s = 0; c < ring.chunks; ++c) {  // uniform: the warp's shuffles below
    ring.wait();  // chunk c, in slot s
    const int v = c * kRowRingVecs + tid;
    const bool in = v < ring.nv;
    const uint4 q = in ? ring.slots[s * kRowRingVecs + tid] : make_uint4(0, 0, 0, 0);
    uint32_t hits = in ? hit_mask<Keys>(q, t, largest) : 0u;
    ring.copy(c + ring.stages, s);  // into the slot q came from (read: q is used above)
    s = s + 1 == ring.stages ? 0 : s + 1;
    const uint32_t mine = __popc(hits);
    const uint32_t incl = tile::warp_prefix_sum(mine);
    uint32_t base = 0;
    if (lane == 31 && incl != 0) base = atomicAdd(counter, incl);
    uint32_t slot = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
    // Only the hits (~3% of the elements): the warp runs its busiest lane's count, where a
    // test of every element ran each one's store path whenever any lane had a hit (v118:
    // ~195 instructions a warp step of 32 vectors, the listing bound by them).
    while (hits != 0) {
      const int i = __ffs(hits) - 1;
      hits &= hits - 1;
      const uint32_t key = order_key<Keys>(vec_element<Raw>(q, i), largest);
      if (slot < static_cast<uint32_t>(cap)) {
        const int owner = static_cast<int>(slot % kThreads), j = static_cast<int>(slot / kThreads);
        keys[SmemKeys<kThreads>::at(owner, j)] = key;
        keys[SmemKeys<kThreads>::at(owner, pos_row + j)] = static_cast<uint32_t>(v * kVec + i);
        out.range.add(key);
      }
      ++slot;
    }
  }
  __syncthreads();
  out.count = static_cast<int>(*counter);
  return out;
}

// The 16-bit row-listed finish's list (TopK v141). list_row ran ~70 warp instructions a step
// of 32 vectors (each vector's keys, a warp scan and a claim every step, the hits' store path
// whenever any lane had one): at two CTAs an SM, the row read at about half the rate the
// maxima stream reaches. Here a vector is first tested as the stream tests it (raw bits,
// keys.h, or its best key), and those that reach t (~15% at k = 1024) are queued in the
// warp's ring of kRowQueue in shared memory; each time 32 are queued the warp examines them,
// one a lane, and appends their elements at or above t to `list` with one claim, packed a
// word each: the key's offset from t (its list_top16 bin, kListBuckets - 1 for NaN keys and
// those past the span) above the position. Slots from `cap` on are counted only; the count
// ends at kRow16CountOffset (read after the barrier at the end). A call of its own: inlined,
// the finish spilled at its 64 registers.
template <typename Keys, int kThreads>
__noinline__ FLYOPS_DEVICE void list_row16(const uint4* src, int ring_offset, int nv, int chunks, int stages, uint32_t t,
                                           bool largest, uint32_t cap) {
  using Raw = typename Keys::Raw;
  static_assert(Keys::kBits == 16 && kRowRingVecs == kThreads, "16-bit rows, a slot a vector a thread");
  constexpr int kVec = 8;
  // The kernel's dynamic shared memory (row16_ring_offset has its layout), named here so that
  // its accesses are shared ones in this call of its own.
  extern __shared__ __align__(16) unsigned char smem16[];
  const RowRing ring{src, reinterpret_cast<uint4*>(smem16 + ring_offset), nv, chunks, stages};
  uint32_t* const list = reinterpret_cast<uint32_t*>(smem16 + kRow16ListOffset);
  uint32_t* const counter = reinterpret_cast<uint32_t*>(smem16 + kRow16CountOffset);
  const int tid = threadIdx.x, lane = tid & 31;
  // The warp's queue: kRowQueue vectors, then their positions.
  unsigned char* wq = smem16 + (tid >> 5) * kRowQueueBytes;
  auto vec_at = [&](uint32_t i) -> uint4& { return reinterpret_cast<uint4*>(wq)[i]; };
  auto pos_at = [&](uint32_t i) -> uint32_t& { return reinterpret_cast<uint32_t*>(wq + kRowQueue * 16)[i]; };
  if (tid == 0) *counter = 0;
  __syncthreads();
  const bool raw = raw_screen_applies<Keys>(t);  // uniform
  const RawBounds bounds = raw_screen_bounds<Keys>(t, largest);
  // Entries [head, head + n) of the warp's queue (n <= 32), one a lane.
  auto examine = [&](uint32_t head, uint32_t n) {
    __syncwarp();  // the lanes' queue stores
    uint4 q = make_uint4(0u, 0u, 0u, 0u);
    uint32_t v = 0, hits = 0;
    if (static_cast<uint32_t>(lane) < n) {
      const uint32_t i = (head + lane) & (kRowQueue - 1);
      q = vec_at(i);
      v = pos_at(i);
      hits = hit_mask<Keys>(q, t, largest);
    }
    __syncwarp();  // read before any lane queues into these slots again
    const uint32_t mine = __popc(hits);
    const uint32_t incl = tile::warp_prefix_sum(mine);
    uint32_t base = 0;
    if (lane == 31 && incl != 0) base = atomicAdd(counter, incl);
    uint32_t slot = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
    while (hits != 0) {
      const int i = __ffs(hits) - 1;
      hits &= hits - 1;
      if (slot < cap) {
        const uint32_t key = order_key<Keys>(vec_element<Raw>(q, i), largest);
        const uint32_t bin = is_nan_key<Keys>(key, largest) ? kListBuckets - 1u : min(key - t, kListBuckets - 1u);
        list[slot] = bin << kRowPackShift | (v * kVec + static_cast<uint32_t>(i));
      }
      ++slot;
    }
  };
  // Vectors queued so far (uniform in the warp). Each step adds at most 32 to fewer than 32
  // pending, and a batch of 32 is examined once 32 are, so the first pending one is always
  // at tail rounded down to 32.
  uint32_t tail = 0;
  for (int c = 0, s = 0; c < ring.chunks; ++c) {
    ring.template wait<kRowRing16Stages>();  // chunk c, in slot s
    const int v = c * kRowRingVecs + tid;
    const bool in = v < ring.nv;
    const uint4 q = in ? ring.slots[s * kRowRingVecs + tid] : make_uint4(0u, 0u, 0u, 0u);
    const bool hit = in && (raw ? raw_screen_hit<Keys>(q.x, q.y, q.z, q.w, bounds) : max_order_key<Keys>(q, largest) >= t);
    ring.copy(c + ring.stages, s);  // into the slot q came from (read: q is used above)
    s = s + 1 == ring.stages ? 0 : s + 1;
    const uint32_t voters = __ballot_sync(0xffffffffu, hit);
    if (hit) {
      const uint32_t i = (tail + __popc(voters & tile::lanemask_lt())) & (kRowQueue - 1);
      vec_at(i) = q;
      pos_at(i) = static_cast<uint32_t>(v);
    }
    const uint32_t head = tail & ~31u;
    tail += __popc(voters);
    if (tail - head >= 32) examine(head, 32);
  }
  if (tail & 31u) examine(tail & ~31u, tail & 31u);
  __syncthreads();
}

}  // namespace flyops::topk::detail

// Global namespace: profiler and ncu names start with flyops_. kE: keys per thread in
// registers, enough for both the row's maxima and its k groups' elements; 0: a.elems keys
// per thread in dynamic shared memory (finish_smem has the layout).
// kRow16: the 16-bit row-listed finish (TopK v141: list_row16 and list_top16 on its packed
// list), an instantiation of its own so that the others' code stays as it was.
template <typename Keys, int kE, bool kRow16 = false>
__global__ void __launch_bounds__(flyops::topk::kFinishThreads, 2) flyops_topk_finish(flyops::topk::FinishArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kThreads = kFinishThreads;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr bool kShared = kE == 0;
  static_assert(kShared || (kE % kVec == 0 && kE <= kFinishMaxE), "whole 16-byte vectors per thread");
  static_assert(!kRow16 || (kShared && Keys::kBits == 16), "the row-listed 16-bit finish keeps its keys in shared memory");
  static_assert(kFinishSmemMaxE <= 32, "SmemKeys::each_taken keeps a thread's decisions in 32 bits");
  using Run = std::conditional_t<kShared, SmemKeys<kThreads>, RegKeys<kE>>;
  __shared__ SmallSelectSmem<kThreads> s;
  __shared__ uint32_t row_listed;  // the row-listed finish's claims (list_row)
  extern __shared__ __align__(16) unsigned char smem[];
  const int k = a.k, gl = a.group_log2;
  const FinishSmem L = finish_smem(kShared ? a.elems : kE, k, gl);
  uint32_t* chosen = reinterpret_cast<uint32_t*>(smem + L.chosen);  // group numbers, increasing
  // Row position of element e of the chosen groups (in group e >> gl of them).
  auto chosen_pos = [&](int e) -> int64_t { return (int64_t{chosen[e >> gl]} << gl) + (e & ((1 << gl) - 1)); };
  uint64_t* sort_key = reinterpret_cast<uint64_t*>(smem + L.sort_key);
  uint32_t* sort_val = reinterpret_cast<uint32_t*>(smem + L.sort_val);

  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  PhaseTrace trace;  // -DFLYOPS_TOPK_TRACE=1: phase times (trace.cuh)
  auto mark = [&] { trace.mark(); };
  GridTrace grid_trace;
  auto dump = [&] {
    trace.dump("finish (k, group log2)", k, gl);
    grid_trace.end(2);
  };
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  // The row-listed finish launches dependent on the screen: before the wait its ring's first
  // lap of copies is in flight and (row_prefetch) the rest of its row asked of L2.
  detail::RowRing ring{};
  if constexpr (kShared) {
    if (a.row_list) {
      ring.src = reinterpret_cast<const uint4*>(xr);
      ring.slots = reinterpret_cast<uint4*>(smem + (kRow16 ? row16_ring_offset(a.elems) : row_ring_offset(a.elems)));
      ring.nv = static_cast<int>(a.n / kVec);
      ring.chunks = (ring.nv + kRowRingVecs - 1) / kRowRingVecs;
      ring.stages = kRow16 ? row16_ring_stages(a.row_prefetch) : row_ring_stages(a.row_prefetch);
      ring.start();
      const int64_t from = int64_t{ring.stages} * kRowRingVecs * 16;
      if (a.row_prefetch && tid == 0 && from < a.n * static_cast<int64_t>(sizeof(Raw)))
        flyops::tile::bulk_prefetch_l2(reinterpret_cast<const char*>(xr) + from,
                                       static_cast<uint32_t>(a.n * sizeof(Raw) - from));
    }
  }
  flyops::tile::grid_dependency_wait();  // the register forms launch dependent on the maxima stream
  grid_trace.mark();
  if (a.ready != nullptr && tid == 0) a.ready[row] = 0;
  // The list alone: the chain's first kernel may launch now (it waits for this one).
  if (a.maxima == nullptr) flyops::tile::allow_dependent_launch();
  mark();
  const bool largest = a.largest;
  // Where a 16-bit list's selection (list_top16) writes the row's outputs: from the key, or
  // for NaNs (one key for all) from the row.
  const auto put_row_out = [&] {
    Raw* vo = static_cast<Raw*>(a.values) + row * k;
    int64_t* io = a.indices + row * k;
    return [=](uint32_t slot, uint32_t key, uint32_t pos) {
      vo[slot] = element_bits<Keys>(key, largest, xr, pos);
      io[slot] = pos;
    };
  };
  Run run;
  uint32_t* keys = reinterpret_cast<uint32_t*>(smem + L.keys);
  if constexpr (kShared) run.base = keys + tid;

  // This thread's run of keys: key j is candidate first + j * step, at row position
  // position(j).
  int first = 0, step = 1;
  int pos_row = 0;  // the shared-memory list's positions: from this row of the keys' rows (0: none)
  KeyRange range;

  // ---- the screened candidates, when the stream found enough and not too many --------------
  // Whether the row's answer comes from its list (a flag, the pointer recomputed where used:
  // held across the kernel, the pointer spilled in the 16-bit form).
  bool listed = false;
  if constexpr (kShared) {
    const uint32_t t = a.row_list ? a.list_only[row] : kNoScreen;  // uniform in the CTA
    if (a.row_list && t == kNoScreen) {  // no list: the ring's first lap lands before its slots are reused
      ring.drain();
      __syncthreads();
    } else if (kRow16 && t != kNoScreen) {
      if constexpr (kRow16) {
        // The warps' queues, then the packed list and its count (traits.h, row16_ring_offset);
        // a row the list does not hold goes on to the maxima from the row, below.
        uint32_t* plist = reinterpret_cast<uint32_t*>(smem + kRow16ListOffset);
        const uint32_t cap = static_cast<uint32_t>(a.elems * kThreads / 2);
        detail::list_row16<Keys, kThreads>(ring.src, row16_ring_offset(a.elems), ring.nv, ring.chunks, ring.stages, t,
                                           largest, cap);
        mark();  // (trace builds) the list in
        const auto entry = [plist, t](int i) {
          const uint32_t e = plist[i];
          return make_uint2(t + (e >> kRowPackShift), e & ((1u << kRowPackShift) - 1u));
        };
        const uint32_t* count = reinterpret_cast<const uint32_t*>(smem + kRow16CountOffset);
        if (detail::list_top16<Keys, kThreads>(count, entry, t, largest, static_cast<uint32_t>(k), cap, s,
                                               reinterpret_cast<uint32_t*>(smem + L.bins),
                                               reinterpret_cast<uint2*>(smem + L.stage), put_row_out(),
                                               &trace)) {
          mark();
          dump();
          return;
        }
      }
    } else if (t != kNoScreen) {
      // Positions in the upper half of the keys' rows: the list takes at most the lower half.
      const int half = a.elems / 2;
      const detail::RowList rl =
          detail::list_row<Keys, kThreads>(ring, t, largest, keys, half, half * kThreads, &row_listed);
      mark();  // (trace builds) the list in
      if (rl.count >= k && rl.count <= half * kThreads) {
        first = tid;
        step = kThreads;
        run.cnt = tid < rl.count ? (rl.count - 1 - tid) / kThreads + 1 : 0;
        pos_row = half;
        range = rl.range;
        // NaN keys tie and must go to the lowest positions, which the claims do not keep.
        listed = !__syncthreads_or(is_nan_key<Keys>(largest ? range.mx : range.mn, largest));
        if (!listed) {
          range = KeyRange{};
          pos_row = 0;
        }
      }
    }
  }
  // ---- a 16-bit list in bins one key wide (TopK v126) --------------------------------------
  // Behind a list-only stream: thresholds and a stream's list (the row-listed finish has no
  // list, the chain's list finish no thresholds).
  if constexpr (kShared && Keys::kBits == 16 && !kRow16) {
    if (a.list_only != nullptr && a.cand != nullptr) {
      if (detail::list_top16<Keys, kThreads>(a.screen_count + row, a.cand + row * a.cap, a.list_only[row], largest,
                                             static_cast<uint32_t>(k), a.cap, s,
                                             reinterpret_cast<uint32_t*>(smem + L.bins),
                                             reinterpret_cast<uint2*>(smem + L.stage), put_row_out(), &trace)) {
        mark();
        dump();
        return;
      }
    }
  }

  if (!kRow16 && a.cand != nullptr) {  // (the row-listed finish has no stream's list)
    const int c = static_cast<int>(min(static_cast<int64_t>(a.screen_count[row]), a.cap + 1));
    if (c >= k && c <= a.cap) {
      const uint2* l = a.cand + row * a.cap;
      if constexpr (kShared) {
        mark();  // (trace builds) the count in
        // Runs strided by the block (TopK v106): key j of thread t is entry t + j * kThreads,
        // so each thread stores the keys it loads, a batch of loads in flight at a time. A
        // run of consecutive entries made every load's owner a division (i / per, i % per):
        // ~0.2 us of this read's ~1.5 at ~4k entries. The list's order means nothing (the
        // stream's atomics), so neither does a run's.
        first = tid;
        step = kThreads;
        run.cnt = tid < c ? (c - 1 - tid) / kThreads + 1 : 0;
        // The entries' positions too, where the runs leave room above them in the keys' rows
        // (TopK v107): the list pass then reads its outputs' positions from shared memory.
        const int rows_used = (c + kThreads - 1) / kThreads;
        if (2 * rows_used <= a.elems) pos_row = rows_used;
        for (int j0 = 0; j0 < run.cnt; j0 += kListBatch) {
          uint2 e[kListBatch];
#pragma unroll
          for (int u = 0; u < kListBatch; ++u)
            e[u] = j0 + u < run.cnt ? l[tid + (j0 + u) * kThreads] : make_uint2(0u, 0u);
#pragma unroll
          for (int u = 0; u < kListBatch; ++u)
            if (j0 + u < run.cnt) {
              run[j0 + u] = e[u].x;
              if (pos_row != 0) run[pos_row + j0 + u] = e[u].y;
              range.add(e[u].x);
            }
        }
        mark();  // (trace builds) the list in, before the NaN vote's barrier
      } else {
        const int per = (c + kThreads - 1) / kThreads;
        first = tid * per;
        run.cnt = max(0, min(per, c - first));
        run.template steps<1>([&](int j) {
          run[j] = l[first + j].x;
          range.add(run[j]);
        });
      }
      // NaNs share one key and their ties must go to the lowest positions, which the list's
      // order does not keep: rows with NaN candidates take the maxima (the barrier also
      // completes the shared-memory fill).
      const bool nan = is_nan_key<Keys>(largest ? range.mx : range.mn, largest);
      listed = !__syncthreads_or(nan);
      if (!listed) range = KeyRange{};
      mark();
    }
  }

  if (a.maxima == nullptr) {  // the list alone: a row it does not hold is the chain's
    // Marked at once: the chain's kernels poll the mark (chain_mark.cuh).
    if (tid == 0) flyops::tile::st_release_gpu(reinterpret_cast<int*>(a.done + row), listed ? kRowListed : kRowChained);
    if (!listed) {
      dump();
      return;
    }
  }

  // ---- the list's k best in one bucket pass, where no bucket is crowded ---------------------
  if constexpr (kShared) {
    if (listed) {
      Raw* vo = static_cast<Raw*>(a.values) + row * k;
      int64_t* io = a.indices + row * k;
      if (detail::list_top<kThreads>(run, a.cand != nullptr ? a.cand + row * a.cap : nullptr, keys, pos_row, range,
                                     static_cast<uint32_t>(k), s,
                                     reinterpret_cast<uint32_t*>(smem + L.bins),
                                     reinterpret_cast<uint64_t*>(smem + L.stage),
                                     reinterpret_cast<uint32_t*>(smem + L.sort_key), &trace,
                                     [&](uint32_t slot, uint32_t key, uint32_t pos) {
                                       vo[slot] = element_bits<Keys>(key, largest, xr, pos);
                                       io[slot] = pos;
                                     })) {
        mark();
        dump();
        return;
      }
    }
  }

  // ---- else the k best group maxima, then the k best of their groups' elements ---------------
  if (!listed) {
    if constexpr (kShared) {  // (the register forms' streams write them: in the 16-bit one this spilled)
      if (a.list_only != nullptr && (a.row_list || a.list_only[row] != kNoScreen)) {  // the stream wrote none
        detail::maxima_from_row<Keys, kThreads>(xr, a.maxima + row * (a.n >> gl), a.n, gl, largest, 0, 1);
        __syncthreads();  // the block's global writes visible to all its threads
      }
    }
    SmallCut maxima_cut;
    {
      const int m = static_cast<int>(a.n >> gl);
      const int per = (m + kThreads - 1) / kThreads;
      const int mfirst = tid * per;
      run.cnt = max(0, min(per, m - mfirst));
      const uint32_t* src = a.maxima + row * m;
      // Maxima of 16-bit rows are 16-bit keys widened to 32 bits: their low half never
      // varies but through NaN's (keys.h, widen_key32), so their digits stop above it.
      std::conditional_t<Keys::kBits == 16, KeyBits, KeyRange> mrange;
      if constexpr (kShared) {  // coalesced, each key to its owner's run
#pragma unroll 8
        for (int i = tid; i < m; i += kThreads) {
          const uint32_t key = order_key<AscKeys32>(src[i], largest);
          keys[SmemKeys<kThreads>::at(i / per, i % per)] = key;
          mrange.add(key);
        }
        __syncthreads();
      } else {
        run.template steps<1>([&](int j) {
          run[j] = order_key<AscKeys32>(src[mfirst + j], largest);
          mrange.add(run[j]);
        });
      }
      mark();
      // Loose in the register forms: a first digit's bin taken whole, with everything above
      // it, when the groups fit the runs, instead of more digit rounds (~0.8 us each).
      maxima_cut = small_select<kThreads>(
          run, mrange, static_cast<uint32_t>(k), s,
          [&](int j, uint32_t, uint32_t slot) { chosen[slot] = static_cast<uint32_t>(mfirst + j); }, &trace,
          kShared ? 0u : static_cast<uint32_t>(finish_groups(kE, k, gl)));
    }
    __syncthreads();
    mark();

    const int c = static_cast<int>(maxima_cut.taken) << gl;
    const int per = ((c + kThreads - 1) / kThreads + kVec - 1) / kVec * kVec;
    first = tid * per;
    step = 1;
    run.cnt = max(0, min(per, c - first));  // a multiple of kVec: groups are whole vectors
    if constexpr (kShared) {  // coalesced vectors, each to its owner's run
#pragma unroll 4
      for (int v = tid; v < c / kVec; v += kThreads) {
        const int e = v * kVec, owner = e / per, j = e % per;
        const uint4 q = *reinterpret_cast<const uint4*>(xr + chosen_pos(e));
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          const uint32_t key = order_key<Keys>(vec_element<Raw>(q, i), largest);
          keys[SmemKeys<kThreads>::at(owner, j + i)] = key;
          range.add(key);
        }
      }
      __syncthreads();
    } else {
      run.template steps<kVec>([&](int j) {
        const uint4 q = *reinterpret_cast<const uint4*>(xr + chosen_pos(first + j));
#pragma unroll
        for (int i = 0; i < kVec; ++i) {
          run[j + i] = order_key<Keys>(vec_element<Raw>(q, i), largest);
          range.add(run[j + i]);
        }
      });
    }
    // The chosen maxima are k or more elements at or above the cut's lo, so the answer is too:
    // the digits start from there, and the candidates below it never enter a histogram.
    // (Maxima are 32-bit keys; a 16-bit key sits in their top half, NaN's all-ones
    // included.)
    range.mn = max(range.mn, Keys::kBits == 32 ? maxima_cut.lo : maxima_cut.lo >> 16);
    mark();
  }

  // ---- the k best of the run, to the outputs ---------------------------------------------------
  auto position = [&](int j) -> int64_t {
    if constexpr (kShared) {  // the row-listed finish's positions sit pos_row rows above its keys
      if (listed && a.cand == nullptr) return int64_t{run[pos_row + j]};
    }
    return listed ? int64_t{a.cand[row * a.cap + first + j * step].y} : chosen_pos(first + j);
  };
  Raw* vals_out = static_cast<Raw*>(a.values) + row * k;
  int64_t* idx_out = a.indices + row * k;
  if constexpr (!kShared) {
    // The keys at or above the maxima's cut are few on most rows (the k-th best maximum is
    // near the row's k-th best): rank them by counting (TopK v66), else the digit rounds.
    if (!listed && detail::rank_over_cut<kThreads>(
                               run, range.mn, k, sort_key, s.warp_c, position,
                               [&](uint32_t slot, uint64_t c) {
                                 const int64_t pos = 0xffffffffu - static_cast<uint32_t>(c);
                                 vals_out[slot] = element_bits<Keys>(static_cast<uint32_t>(c >> 32), largest, xr, pos);
                                 idx_out[slot] = pos;
                               })) {
      mark();
      dump();
      return;
    }
  }
  small_select<kThreads>(run, range, static_cast<uint32_t>(k), s, [&](int j, uint32_t key, uint32_t slot) {
    const int64_t pos = position(j);
    const Raw raw = element_bits<Keys>(key, largest, xr, pos);  // NaNs read back
    if (a.sorted) {
      sort_key[slot] = (uint64_t{key} << 32) | (0xffffffffu - static_cast<uint32_t>(pos));
      sort_val[slot] = raw;
    } else {
      vals_out[slot] = raw;
      idx_out[slot] = pos;
    }
  }, &trace);
  if (!a.sorted) {
    mark();
    dump();
    return;
  }
  __syncthreads();
  mark();
  // Composites are distinct (positions differ). The bucket scatter (k > kRankSortMax, shared
  // form only) reuses the keys, done with since the barrier.
  order_desc<kThreads, !kShared>(sort_key, sort_val, k, L.sort_cap, kShared ? keys : nullptr, keys + 3 * k, s.warp_c,
                                 reinterpret_cast<uint64_t*>(&s.hist[0][0]),
                                 [&](uint32_t slot, uint64_t ck, uint32_t raw) {
                                   vals_out[slot] = static_cast<Raw>(raw);
                                   idx_out[slot] = 0xffffffffu - static_cast<uint32_t>(ck);
                                 });
  mark();
  dump();
}

#endif
