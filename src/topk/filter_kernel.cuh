// The filter kernel: many long rows in one pass and one launch, a CTA (or a cluster of a few)
// per row, no workspace.
//
// Each CTA streams its slice of the row once and keeps, in a shared-memory buffer, every
// element whose composite (order key, ~position) reaches a running threshold t. t is always
// the k-th best composite of some set of the row's elements (or 0), so it never passes the
// row's k-th best: nothing of the answer is dropped, whatever the row holds, and no guess can
// fail (the screened delegates' sampled threshold can, and then pay a fallback).
//
//   start    t is the k-th best maximum of the first step's 16-byte vectors (their maxima are
//            distinct elements, so k of the row's elements are at or above it);
//   stream   vectors whose maximum reaches t are examined; their elements at or above t are
//            appended (one claim a warp a step). A warp that finds no room keeps its elements
//            pending in registers;
//   raise    then the whole CTA cuts the buffer at its k-th best composite (small_cut on the
//            keys, then on the positions of ties), which becomes t, compacts it in place, and
//            appends the pending elements that still reach t. A random row of 150k at
//            k = 1024 raises t once or twice; an ascending row every few thousand elements;
//   end      the buffer's k best are the slice's; a cluster's rank 0 gathers its peers'
//            through DSMEM and keeps the row's k best, sorted or not.
//
// Composites are distinct, so the kept set is exact and ties go to the lowest positions, as
// NaN ties must (their bits differ).
#pragma once

#include <cstdint>

#include "flyops/tile/cluster.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "trace.cuh"
#include "traits.h"

namespace flyops::topk {

struct FilterArgs {
  const void* x;
  int64_t n;            // elements per row, a multiple of the vector
  int64_t row_stride;   // elements between rows, a multiple of the vector
  int64_t slice_vecs;   // 16-byte vectors per CTA of a row
  int k;                // at most kFilterMaxK, and cluster * k at most kFilterCap
  bool largest;
  bool sorted;
  void* values;         // [rows, k]
  int64_t* indices;
  // Segments (null: none): each row's `segs` clusters take a part of it each and write their
  // k best composites (key, ~position) here, [rows, segs, k]; flyops_topk_filter_merge
  // selects the row's from them.
  uint64_t* parts = nullptr;
  int segs = 1;
  // The sampled start (one segment only): the rank of the row's sample whose key starts t
  // (traits.h, filter_sample_rank); 0: the first step's vector maxima start it.
  int sample_rank = 0;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)
#include "block_sort.cuh"
#include "small_select.cuh"
#include "vec_keys.cuh"

namespace flyops::topk::detail {

static_assert(filter_smem().total - filter_smem().bins == kOrderBuckets * 4,
              "filter_smem (traits.h) holds the bucket order's bins (block_sort.cuh)");

// A flat buffer of m composites as small_cut's runs: thread t owns entries t, t + kThreads,
// ... (consecutive threads read consecutive words). Keys: the composites' high halves (order
// keys), or (kTies) the low halves (~positions) of those whose high half is `tie`.
template <int kThreads, bool kTies>
struct FlatRun {
  const uint64_t* b;
  int m;
  uint32_t tie;
  template <typename F>
  FLYOPS_DEVICE void each(F&& f) const {
    int j = 0;
#pragma unroll 4
    for (int i = static_cast<int>(threadIdx.x); i < m; i += kThreads, ++j) {
      const uint64_t c = b[i];
      if constexpr (kTies) {
        if (static_cast<uint32_t>(c >> 32) == tie) f(j, static_cast<uint32_t>(c));
      } else {
        f(j, static_cast<uint32_t>(c >> 32));
      }
    }
  }
};

// A t with exactly `want` of the m > want distinct composites in b at or above it, or
// (loose) the floor of a whole key bin with want to `loose` of them above. Every thread calls
// it.
template <int kThreads>
FLYOPS_DEVICE uint64_t composite_cut(const uint64_t* b, int m, uint32_t want, SmallSelectSmem<kThreads>& s,
                                     uint32_t loose, PhaseTrace* trace = nullptr) {
  const FlatRun<kThreads, false> keys{b, m, 0};
  KeyRange r;
  keys.each([&](int, uint32_t key) { r.add(key); });
  const SmallCut c = small_cut<kThreads>(keys, r, want, s, trace, loose);
  if (c.whole) return uint64_t{c.lo} << 32;
  // c.lo == c.hi: the best c.need of the composites with that key, by their low halves.
  const FlatRun<kThreads, true> ties{b, m, c.lo};
  KeyRange r2;
  ties.each([&](int, uint32_t low) { r2.add(low); });
  __syncthreads();  // every thread has read the first cut's result
  const SmallCut c2 = small_cut<kThreads>(ties, r2, c.need, s, trace);
  return (uint64_t{c.lo} << 32) | c2.lo;
}

// Keeps the composites of b[0..m) at or above t, moved to its front in chunks of kThreads
// (a chunk's reads all precede its writes, and its writes stay below the next chunk);
// returns how many. Every thread calls it.
template <int kThreads>
FLYOPS_DEVICE int compact_at_least(uint64_t* b, int m, uint64_t t, uint32_t* warp_c) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  int out = 0;
  for (int i0 = 0; i0 < m; i0 += kThreads) {
    const int i = i0 + tid;
    const uint64_t c = i < m ? b[i] : 0;
    const bool keep = i < m && c >= t;
    const uint32_t vote = __ballot_sync(0xffffffffu, keep);
    if (lane == 0) warp_c[warp] = __popc(vote);
    __syncthreads();
    const int before = static_cast<int>(tile::sum_warps_before<kWarps>(warp_c, warp));
    const int total = static_cast<int>(tile::sum_warps_before<kWarps>(warp_c, kWarps));
    if (keep) b[out + before + __popc(vote & tile::lanemask_lt())] = c;
    out += total;
    __syncthreads();
  }
  return out;
}

// Cuts b's first m > want composites as composite_cut does and moves those at or above the cut
// (and `floor`) to its front: returns how many; the cut is in *cut. Every thread calls it.
template <int kThreads>
FLYOPS_DEVICE int keep_best(uint64_t* b, int m, uint32_t want, SmallSelectSmem<kThreads>& s, uint32_t loose,
                            uint64_t floor, uint64_t* cut, PhaseTrace* trace = nullptr) {
  const uint64_t c = composite_cut<kThreads>(b, m, want, s, loose, trace);
  *cut = c > floor ? c : floor;
  const int kept = compact_at_least<kThreads>(b, m, *cut, s.warp_c);
  if (trace != nullptr) trace->mark();
  return kept;
}

// The bits of the element of row xr whose composite (order key, ~position) is c.
template <typename Keys>
FLYOPS_DEVICE uint32_t composite_bits(uint64_t c, bool largest, const typename Keys::Raw* xr) {
  return element_bits<Keys>(static_cast<uint32_t>(c >> 32), largest, xr, ~static_cast<uint32_t>(c));
}

// The k best of the m >= k distinct composites in buf (element `~low half` of row xr) to a
// row's outputs, sorted or not; buf's room past them is the sort's. Every thread calls it.
template <typename Keys, int kThreads>
FLYOPS_DEVICE void emit_best(uint64_t* buf, int m, uint32_t k, bool sorted, bool largest, const typename Keys::Raw* xr,
                             typename Keys::Raw* vals_out, int64_t* idx_out, SmallSelectSmem<kThreads>& s) {
  using Raw = typename Keys::Raw;
  const int tid = threadIdx.x;
  uint64_t cut;
  if (m > static_cast<int>(k)) m = keep_best<kThreads>(buf, m, k, s, 0, 0, &cut);
  auto emit = [&](uint32_t slot, uint64_t c, uint32_t raw) {
    vals_out[slot] = static_cast<Raw>(raw);
    idx_out[slot] = ~static_cast<uint32_t>(c);
  };
  auto raw_of = [&](uint64_t c) { return composite_bits<Keys>(c, largest, xr); };
  if (!sorted) {
    for (int i = tid; i < m; i += kThreads) emit(i, buf[i], raw_of(buf[i]));
    return;
  }
  // The payloads after the power of two the bitonic fallback may fill, then the bucket order's
  // scratch (block_sort.cuh): under 4200 words at k = 1024, past the 4096 of the buffer into
  // the scratch behind it (filter_smem; the merge kernel has the same room).
  const int p = static_cast<int>(pow2_ceil(k));
  uint32_t* val = reinterpret_cast<uint32_t*>(buf + p);
  uint64_t* scratch = buf + p + p / 2;
  uint32_t* bins = reinterpret_cast<uint32_t*>(scratch + k + k / 2 + 1);
  uint64_t* mm = reinterpret_cast<uint64_t*>(bins + kOrderBuckets);
  for (int i = tid; i < m; i += kThreads) val[i] = raw_of(buf[i]);
  __syncthreads();
  order_desc<kThreads>(buf, val, m, p, scratch, bins, s.warp_c, mm, emit);
}

struct FilterState {
  uint32_t count;  // claimed entries (may pass the cap: the claims that found no room)
  uint32_t hole;   // where the claim that straddled the end begins (the cap: none)
  uint32_t stuck;  // a warp's elements found no room: raise at the next meet
  uint32_t kept;   // this CTA's entries, when streamed
  uint64_t t;      // this CTA's threshold, when streamed
};

// The k best of the m >= k distinct composites in key[] (every CTA of the row's, in rank 0)
// to the row's outputs, in descending order (sorted or not: it costs no more here). Up to
// kThreads each is ranked among all; else the bucket order over all m, whose slots below
// k are the answer, and past kMaxBucket ties in a bucket the cut and sort of emit_best.
// Scratch: val (m words), tmp_key / tmp_val (m entries), bins (kOrderBuckets words), mm.
template <typename Keys, int kThreads>
FLYOPS_DEVICE void emit_of_all(uint64_t* key, int m, uint32_t k, bool sorted, bool largest, const typename Keys::Raw* xr,
                               typename Keys::Raw* vals_out, int64_t* idx_out, SmallSelectSmem<kThreads>& s,
                               uint32_t* val, uint64_t* tmp_key, uint32_t* tmp_val, uint32_t* bins, uint64_t* mm) {
  using Raw = typename Keys::Raw;
  const int tid = threadIdx.x;
  auto raw_of = [&](uint64_t c) { return composite_bits<Keys>(c, largest, xr); };
  auto out = [&](uint32_t slot, uint64_t c, uint32_t raw) {
    if (slot >= k) return;
    vals_out[slot] = static_cast<Raw>(raw);
    idx_out[slot] = ~static_cast<uint32_t>(c);
  };
  if (m <= kThreads) {  // one composite a thread, ranked by m broadcast compares
    for (int i = tid; i < m; i += kThreads) {
      const uint64_t c = key[i];
      out(rank_desc(key, m, c), c, raw_of(c));
    }
    return;
  }
  for (int i = tid; i < m; i += kThreads) val[i] = raw_of(key[i]);
  __syncthreads();
  if (bucket_order_desc<kThreads>(key, val, m, tmp_key, tmp_val, bins, s.warp_c, mm, out)) return;
  emit_best<Keys, kThreads>(key, m, k, sorted, largest, xr, vals_out, idx_out, s);
}

}  // namespace flyops::topk::detail

// Global namespace: profiler and ncu names start with flyops_. kU: 16-byte vectors per thread
// a step (and as many more in flight). One CTA an SM (filter_smem): one pass of a CTA an SM
// streams as fast as any shape measured (3.1 TB/s of events on 64 MiB, where bulk copies
// through a ring of shared memory measured 2.6: TopK v72).
template <typename Keys, int kU>
__global__ void __launch_bounds__(flyops::topk::kFilterThreads, 1) flyops_topk_filter(flyops::topk::FilterArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kThreads = kFilterThreads;
  constexpr int kVec = 16 / sizeof(Raw);
  static_assert(kU * kVec <= 32, "a bit per element of a thread's step");
  constexpr uint32_t kVecMask = (1u << kVec) - 1;
  constexpr int kStep = kThreads * kU;
  __shared__ SmallSelectSmem<kThreads> s;
  __shared__ detail::FilterState st;
  __shared__ uint64_t mm[kThreads / 16];
  extern __shared__ __align__(16) unsigned char smem[];
  const FilterSmem L = filter_smem();
  uint64_t* buf = reinterpret_cast<uint64_t*>(smem + L.buf);  // kFilterCap composites

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const uint32_t csize = flyops::tile::cluster_size(), rank = flyops::tile::cluster_rank();
  const int64_t row = blockIdx.x / (csize * a.segs);
  const int seg = static_cast<int>(blockIdx.x / csize % a.segs);
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  const uint4* src = reinterpret_cast<const uint4*>(xr);
  // Vector numbers within the row fit 32 bits (n < 2^31): fewer registers than int64_t.
  const int nv = static_cast<int>(a.n / kVec);
  const int v_begin = min(nv, static_cast<int>((seg * csize + rank) * a.slice_vecs));
  const int v_end = min(nv, v_begin + static_cast<int>(a.slice_vecs));
  const bool largest = a.largest;
  const uint32_t k = static_cast<uint32_t>(a.k);
  // Each CTA's share of the buffer, so that rank 0 holds every CTA's entries at the end.
  const uint32_t cap = kFilterCap / csize;
  const uint32_t loose = min(2 * k, cap / 2);  // a raise may keep up to this many
  // Raised also once this many are kept: t then follows the k-th best of what the CTA has
  // seen instead of staying at its start until the buffer fills. Not from a sampled start,
  // which already sits near the row's k-th best: then only a full buffer raises it.
  const bool sampled = a.sample_rank > 0;
  uint32_t raise_at = sampled ? cap : min(cap / 2, max(4 * k, 512u));

  if (a.parts != nullptr) flyops::tile::allow_dependent_launch();  // the merge's CTAs wait beside
  if (tid == 0) {
    st.count = 0;
    st.hole = cap;
  }
  uint64_t t = 0;  // composites at or above t are kept
  PhaseTrace trace;  // -DFLYOPS_TOPK_TRACE=1: phase times (trace.cuh)
  trace.mark();
  int raises = 0;

  auto load = [&](uint4 (&q)[kU], int base) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = base + u * kThreads + tid;
      q[u] = v < v_end ? src[v] : make_uint4(0, 0, 0, 0);
    }
  };
  auto composite = [&](const uint4& v, int vi, int i) -> uint64_t {
    const uint32_t key = order_key<Keys>(vec_element<Raw>(v, i), largest);
    return (uint64_t{key} << 32) | ~static_cast<uint32_t>(vi * kVec + i);
  };
  // The elements of a vector whose key reaches tk, a bit each: 16-bit keys two a word
  // (ascending_key_pair, then one packed compare), no per-element composite (examined one by
  // one, a warp with any vector reaching paid ~250 instructions a vector: the kernel ran 2-4x
  // the delegates' time, compute-bound, in its first form).
  auto key_bits = [&](const uint4& v, uint32_t tk) -> uint32_t {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
    uint32_t b = 0;
    if constexpr (Keys::kBits == 16) {
      const uint32_t flip = largest ? 0u : 0xffffffffu, tk2 = tk | (tk << 16);
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const uint32_t m = __vcmpgeu2(ascending_key_pair<Keys>(w[j]) ^ flip, tk2);
        b |= ((m & 1u) | ((m >> 15) & 2u)) << (2 * j);
      }
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) b |= (order_key<Keys>(w[j], largest) >= tk ? 1u : 0u) << j;
    }
    return b;
  };
  // This thread's elements of the step at `base` that reach t (bit u * kVec + i), of `only`.
  auto reaching = [&](const uint4 (&q)[kU], int base, uint32_t only) {
    uint32_t h = 0;
    const uint32_t tk = static_cast<uint32_t>(t >> 32);
    const bool by_key = static_cast<uint32_t>(t) == 0;  // t from a whole key bin: key >= tk is exact
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = base + u * kThreads + tid;
      if (v < v_end) {
        uint32_t b = key_bits(q[u], tk);
        if (!by_key && b != 0) {  // t inside a key's ties: their positions decide
#pragma unroll
          for (int i = 0; i < kVec; ++i)
            if (((b >> i) & 1u) != 0 && composite(q[u], v, i) < t) b &= ~(1u << i);
        }
        h |= b << (u * kVec);
      }
    }
    return h & only;
  };
  // Appends the elements of `pend`, all of the warp's or (no room) none: then they stay.
  auto append = [&](const uint4 (&q)[kU], int base, uint32_t& pend) {
    const uint32_t cnt = __popc(pend);
    const uint32_t incl = flyops::tile::warp_prefix_sum(cnt);
    const uint32_t tot = __shfl_sync(0xffffffffu, incl, 31);
    if (tot == 0) return;
    uint32_t wb = 0;
    if (lane == 31) {
      wb = atomicAdd(&st.count, tot);
      if (wb < cap && wb + tot > cap) st.hole = wb;  // the one claim across the end
    }
    wb = __shfl_sync(0xffffffffu, wb, 31);
    if (wb + tot > cap) return;
    uint32_t o = wb + incl - cnt;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int v = base + u * kThreads + tid;
      for (uint32_t m = (pend >> (u * kVec)) & kVecMask; m != 0; m &= m - 1) buf[o++] = composite(q[u], v, __ffs(m) - 1);
    }
    pend = 0;
  };
  // The buffer's first m > k entries cut at their k-th best (t rises to it) and compacted.
  auto raise = [&](int m, uint32_t loose_cap) { return detail::keep_best<kThreads>(buf, m, k, s, loose_cap, t, &t, &trace); };

  // One pass over the slice, the caller having loaded its first two steps into q and nq.
  // Each warp walks the steps on its own, the step at hand in q and the next in flight in nq,
  // and the CTA meets every kMeet steps: a barrier a step held every warp to the slowest
  // load of the CTA's step, ~17 GB/s an SM (TopK v72b). A warp whose elements find no room
  // stops at that step until the meet, where the CTA raises t (the buffer's k-th best) if a
  // warp stopped or raise_at are kept; every warp then loads its two steps again (held across
  // a raise, they spilled) and the stopped ones retry.
  constexpr int kMeet = 8;
  uint4 q[kU], nq[kU];
  auto stream = [&] {
    const int steps = (v_end - v_begin + kStep - 1) / kStep;
    int j = 0;          // this warp's step
    uint32_t pend = 0;  // this thread's elements of step j that found no room
    // Appends step j's elements of `only` that reach t and moves on; or, no room, marks the
    // warp stuck and keeps step j in q for the retry.
    auto take_step = [&](uint32_t only) {
      const int base = v_begin + j * kStep;
      pend = reaching(q, base, only);
      append(q, base, pend);
      if (__any_sync(0xffffffffu, pend != 0)) {
        if (lane == 0) st.stuck = 1;
        return false;
      }
      ++j;
#pragma unroll
      for (int u = 0; u < kU; ++u) q[u] = nq[u];
      load(nq, base + 2 * kStep);
      return true;
    };
    if (tid == 0) st.stuck = 0;
    while (__syncthreads_or(j < steps)) {
      // Read by every thread before any appends again: one warp's appends past this point
      // would otherwise give the warps different verdicts, and the raise's barriers would
      // not match (racecheck's slow warps hit it as an illegal instruction).
      const bool full = st.stuck != 0 || st.count >= raise_at;
      const int m = static_cast<int>(min(st.count, st.hole));
      __syncthreads();
      if (full) {
        trace.mark();  // a raise begins (its digit rounds and compaction are marked)
        const int kept = raise(m, loose);
        ++raises;
        if (tid == 0) {
          st.count = static_cast<uint32_t>(kept);
          st.hole = cap;
          st.stuck = 0;
        }
        __syncthreads();
        load(q, v_begin + j * kStep);
        load(nq, v_begin + (j + 1) * kStep);
        if (__any_sync(0xffffffffu, pend != 0) && !take_step(pend)) continue;  // still no room
      }
      for (int g = 0; g < kMeet && j < steps; ++g)
        if (!take_step(0xffffffffu)) break;
    }
  };

  // The sampled start's pieces go out first: the first two steps' loads would delay them.
  constexpr int kPer = kFilterSamplePieces / (kThreads / 32);
  uint4 sv[kPer];
  if (sampled) {
#pragma unroll
    for (int i = 0; i < kPer; ++i) sv[i] = src[screen_piece(warp + i * (kThreads / 32), nv, kFilterSamplePieces) + lane];
  }
  load(q, v_begin);
  load(nq, v_begin + kStep);
  __syncthreads();  // st's start
  if (sampled) {
    // start: the row's sample, taken while the first two steps load (the same pieces, so the
    // same t, in every CTA of the row). t is the floor of a key bin holding the rank-th best
    // of the threads' sampled maxima, with rank to 1.5 rank of them at or above it: at least
    // rank sampled keys reach it, so it is no higher than the sample's rank-th best, which is
    // what the rank's tail bound asks; and one key a thread keeps the histograms' shared
    // atomics few (a cut over every sampled key took ~5 us, TopK v72b).
    RegKeys<1> run;
    run.cnt = 1;
    run[0] = 0;
#pragma unroll
    for (int i = 0; i < kPer; ++i) run[0] = max(run[0], max_order_key<Keys>(sv[i], largest));
    KeyRange r;
    r.add(run[0]);
    const uint32_t rk = static_cast<uint32_t>(a.sample_rank);
    t = uint64_t{small_cut<kThreads>(run, r, rk, s, nullptr, rk + rk / 2).lo} << 32;
  } else if (v_begin + kStep <= v_end && k * 2 <= static_cast<uint32_t>(kStep)) {
    // start: the k-th best vector maximum of a whole first step (kU keys a thread).
    RegKeys<kU> mx;
    mx.cnt = kU;
    KeyRange r;
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      mx[u] = max_order_key<Keys>(q[u], largest);
      r.add(mx[u]);
    }
    const SmallCut c = small_cut<kThreads>(mx, r, k, s, nullptr, loose);
    t = uint64_t{c.lo} << 32;
  }
  trace.mark();  // started

  // end: rank 0 gathers every CTA's entries (each CTA fills only its share of the buffer, so
  // they fit). A sampled start may have dropped part of the answer: the row's k best are
  // among them only when k reach the greatest t of the CTAs (everything dropped lies below
  // its own CTA's t). A CTA whose buffer filled raised its t to the k-th best of k or more
  // entries it keeps, so the greatest t is a raised one and the check passes; with no raise,
  // every t is the sample's and the check is the count of all entries. Every CTA reads every
  // CTA's count and t and gets the same verdict, with no barrier for it. If it fails, every
  // CTA streams its slice again from t = 0, raised as the buffer fills, which keeps its k best
  // whatever the row. Started otherwise, a CTA's t is the k-th best of some of its elements:
  // the check always passes.
  const uint64_t t0 = t;
  int m = 0;  // rank 0: every CTA's entries
  auto sync_row = [&] {  // the row's CTAs
    if (csize > 1) flyops::tile::cluster_sync();
    else __syncthreads();
  };
  for (;;) {
    stream();
    trace.mark();  // streamed
    if (tid == 0) {
      st.kept = min(st.count, cap);  // every claim found room: count <= cap
      st.t = t;
    }
    sync_row();  // every CTA's count and t
    bool raised = st.t != t0;
    uint32_t total = st.kept, before = 0;
    for (uint32_t r = 0; r < csize; ++r) {  // the peers' (a single CTA reads only its own)
      if (r == rank) continue;
      const uint32_t c = flyops::tile::peer_load_u32(flyops::tile::peer_addr(&st.kept, r));
      raised |= flyops::tile::peer_load_u64(flyops::tile::peer_addr(&st.t, r)) != t0;
      before += r < rank ? c : 0u;
      total += c;
    }
    if (!sampled || raised || total >= k) {
      if (rank != 0) {  // this CTA's entries after the lower ranks' in rank 0's buffer
        const uint32_t dst = flyops::tile::peer_addr(buf + before, 0);
        const int c = static_cast<int>(st.kept);
        for (int i = tid; i < c; i += kThreads) flyops::tile::peer_store_u64(dst + 8u * i, buf[i]);
      }
      if (csize > 1) flyops::tile::cluster_sync();  // every entry in rank 0's buffer
      m = static_cast<int>(total);
      break;
    }
    // Uniform in the cluster: stream again. Every CTA has read the counts before any resets.
    sync_row();
    if (tid == 0) {
      st.count = 0;
      st.hole = cap;
    }
    t = 0;
    raise_at = min(cap / 2, max(4 * k, 512u));
    load(q, v_begin);
    load(nq, v_begin + kStep);
    __syncthreads();
  }
  trace.mark();  // gathered
  if (rank != 0) {
    trace.dump("filter-peer", raises, m);
    return;
  }
  if (a.parts != nullptr) {  // a segment of the row: its k best composites, for the merge
    if (m > static_cast<int>(k)) m = raise(m, 0);
    uint64_t* out = a.parts + (row * a.segs + seg) * k;
    for (int i = tid; i < m; i += kThreads) out[i] = buf[i];
    return;
  }
  detail::emit_of_all<Keys, kThreads>(buf, m, k, a.sorted, largest, xr, static_cast<Raw*>(a.values) + row * k,
                                      a.indices + row * k, s, reinterpret_cast<uint32_t*>(smem + L.val),
                                      reinterpret_cast<uint64_t*>(smem + L.tmp_key),
                                      reinterpret_cast<uint32_t*>(smem + L.tmp_val),
                                      reinterpret_cast<uint32_t*>(smem + L.bins), mm);
  trace.mark();  // emitted
  trace.dump("filter", raises, m);
}

// The segments' k best of each row (flyops_topk_filter with parts), merged: one CTA a row,
// launched dependent on the filter kernel.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kFilterThreads) flyops_topk_filter_merge(flyops::topk::FilterArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kThreads = kFilterThreads;
  __shared__ SmallSelectSmem<kThreads> s;
  extern __shared__ __align__(16) uint64_t buf[];  // kFilterSmem: the buffer and the scratch behind it
  const int64_t row = blockIdx.x;
  const int m = a.segs * a.k;
  flyops::tile::grid_dependency_wait();
  const uint64_t* in = a.parts + row * m;
  for (int i = threadIdx.x; i < m; i += kThreads) buf[i] = in[i];
  __syncthreads();
  detail::emit_best<Keys, kThreads>(buf, m, static_cast<uint32_t>(a.k), a.sorted, a.largest,
                                    static_cast<const Raw*>(a.x) + row * a.row_stride,
                                    static_cast<Raw*>(a.values) + row * a.k, a.indices + row * a.k, s);
}

#endif
