// Long rows: radix select with the row held in shared memory, spread over a cluster of
// C CTAs (C = 1..16) so that each row is read from global memory exactly once.
//
//   load     each CTA copies its slice of the row into shared memory, building the
//            histogram of the key's top 11 bits on the way;
//   select   the CTAs add their histograms into rank 0's (DSMEM reductions, non-zero bins
//            only); rank 0 finds the bin holding the k-th key and broadcasts it;
//   scan     each CTA classifies its elements against the new prefix: above it, they are
//            in the output (emitted now); equal, they stay candidates (copied to a short
//            list on the first scan) and feed the next digit's histogram; below, dropped.
//   repeat   over the candidates with the next digit until the bin holds exactly the
//            elements still needed, or the key is fully known.
//   gather   (a first bin too large for rank 0 to rank, small enough to send whole) every
//            CTA sends each element at or above the bin to rank 0, which orders them all
//            and keeps the k best: one cluster exchange instead of more digit rounds.
//
// Digits walk a composite key (order key : ~position). The position bits are only used
// when the k-th key is NaN, whose ties must go to the lowest positions as in stock (NaN
// bits differ; other tied elements have equal bits, so any of them will do).
// Output slots are handed out by atomic counters in rank 0. When sorted, elements go to
// rank 0's shared memory instead and rank 0 sorts them (block_sort.cuh) before writing.
#pragma once

#include <cstdint>

#include "block_sort.cuh"
#include "chain_mark.cuh"
#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/cluster.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/mbarrier.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "trace.cuh"
#include "traits.h"


namespace flyops::topk {

struct ClusterArgs {
  const void* x;
  int64_t rows;        // CTA groups: rows of the input times segs
  int64_t n;           // elements per input row
  int64_t row_stride;  // elements between input rows (and idx_map rows)
  // Each input row in `segs` segments of seg_len elements (the last one shorter), each a
  // row of its own for the kernel, with output positions relative to the input row.
  int64_t segs;
  int64_t seg_len;
  // Output position of element i of a segment: idx_map[r * row_stride + i] when given (one
  // segment per row), else its position in the input row.
  const int64_t* idx_map;
  // Else, when given, element i of row r is element i % 2^group_log2 of group
  // group_map[r * (row_stride >> group_log2) + i >> group_log2] of the input row (delegates).
  const int64_t* group_map;
  int group_log2;
  // With group_map, given: the elements are read from this input through the map (its rows
  // group_src_stride elements apart), a bulk copy a group's part of the slice, in place of a
  // gathered copy of the chosen groups (TopK v114: the delegates' gather kernel); 16-byte
  // aligned, as the delegates' rows are, and groups of whole vectors.
  const void* group_src;
  int64_t group_src_stride;
  int k;           // per row; a last row shorter than k yields all its elements
  int out_stride;  // elements between output rows
  bool largest;
  bool sorted;
  void* values;
  int64_t* indices;
  int slice;     // elements per CTA, a multiple of 8
  int cand_cap;  // candidate list entries per CTA
  int sort_cap;  // power of two >= k when sorted, else 0
  int stage_cap; // output elements staged per CTA before claiming slots
  int data_bytes; // shared memory before the sort buffers (cluster_geometry)
  int gather_cap;  // the gather ending's capacity (<= sort_cap), 0 without it
  // The list finish's marks on the input rows (chain_mark.cuh), or null: a listed row's CTAs
  // return at once (the delegates' radix chain behind a screened list: launch.cuh). Given,
  // the kernel is launched dependent on the previous one and waits for it before it reads.
  const uint32_t* skip;
};

#if defined(__CUDACC__)
namespace detail {

// A cluster barrier, or the CTA's own when the "cluster" is one CTA (cheaper).
FLYOPS_DEVICE void cluster_or_cta_sync(uint32_t csize) {
  if (csize == 1)
    __syncthreads();
  else
    tile::cluster_sync();
}

FLYOPS_DEVICE uint64_t shr(uint64_t v, int s) { return s >= 64 ? 0 : v >> s; }

// Width of the digit just below bit h: digits never straddle the key/position boundary.
FLYOPS_DEVICE int digit_width(int h) {
  const int room = h > 32 ? h - 32 : h;
  return room < kDigitBits ? room : kDigitBits;
}

struct Control {
  uint32_t gt;        // rank 0: output slots handed to elements above the threshold
  uint32_t eq;        // rank 0: slots handed to elements equal to it
  uint32_t cand_over;  // some warp found more candidates than its share of cand_cap
  uint32_t sel[4];    // rank 0: the selected bin, its elements still needed, how it ends
                      // (Ends), how many elements it holds
  alignas(16) uint32_t bcast[4];  // the selection, sent here by rank 0 (st.async)
  uint64_t load_bar;  // the slice's bulk copy completes here
  uint64_t sel_bar;   // rank 0's selection lands here once a round (16 bytes)
  uint64_t in_bar;    // rank 0: every CTA's histogram reductions land here once a round
  uint32_t sent;      // this CTA's reductions this round
  uint32_t flush[4];  // cursors over the staged gt / eq elements, their slot bases in rank 0
  uint32_t warp_sum[kClusterThreads / 32];
};

// How the digit loop goes on after a selection.
enum Ends : uint32_t {
  kNextDigit = 0,  // refine the bin by the next digit
  kWholeBin = 1,   // every element of the bin is needed
  kSmallBin = 2,   // few enough to finish at rank 0: it ranks the bin and takes the best
  kGather = 3,     // the first bin and everything above it go to rank 0, which keeps the best
};
static_assert(kSmallBinCap * 12 <= kBins * 4, "the bin buffer lives in the reduction bins");
// Rank 0: the bin of `red` (nb bins) holding the need-th largest element, and how the digit
// loop ends with it. `small_ok`: rank 0 may rank a small final bin; `gather`: at most this
// many elements (the bin and every one above it) may be gathered at rank 0 (never from bin
// 0: the scan then counts every element from the bin's floor as above it, floor - 1).
template <int kThreads>
FLYOPS_DEVICE void select_bin(const uint32_t* red, int nb, uint32_t need, bool small_ok, uint32_t gather,
                              Control& ctl) {
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int per = nb > kThreads ? nb / kThreads : 1;
  const int first = tid * per;
  uint32_t own = 0;
  if (first < nb)
    for (int b = 0; b < per; ++b) own += red[first + b];
  // Suffix sums: elements in bins above this thread's range.
  const uint32_t incl = tile::warp_suffix_sum(own);
  if (lane == 0) ctl.warp_sum[warp] = incl;
  __syncthreads();
  uint32_t above = incl - own + tile::sum_warps_after<kThreads / 32>(ctl.warp_sum, warp);
  if (first < nb && above < need && need <= above + own) {
    for (int b = first + per - 1; b >= first; --b) {
      const uint32_t c = red[b];
      if (above + c >= need) {
        ctl.sel[0] = static_cast<uint32_t>(b);
        ctl.sel[1] = need - above;
        ctl.sel[2] = c == need - above              ? kWholeBin
                     : small_ok && c <= kSmallBinCap ? kSmallBin
                     : b > 0 && above + c <= gather  ? kGather
                                                     : kNextDigit;
        ctl.sel[3] = c;
        break;
      }
      above += c;
    }
  }
}

}  // namespace detail

}  // namespace flyops::topk

// Global namespace: profiler and ncu names start with flyops_.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kClusterThreads, 2) flyops_topk_cluster(flyops::topk::ClusterArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;  // keys are stored at the element's width
  constexpr int kThreads = kClusterThreads;
  constexpr int kKB = Keys::kBits;
  constexpr int kW = kKB + 32;                // composite width: key, then ~position
  constexpr int kVec = 16 / sizeof(Raw);      // elements per 16-byte access
  constexpr int kUnroll = 8;                  // loads in flight per thread (unaligned rows)
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ detail::Control ctl;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  PhaseTrace trace;  // -DFLYOPS_TOPK_TRACE=1: phase times (trace.cuh)
  auto mark = [&] { trace.mark(); };
  mark();
  const uint32_t csize = tile::cluster_size();
  const uint32_t rank = tile::cluster_rank();
  const int64_t row = blockIdx.x / csize;  // output row
  const int64_t in_row = row / a.segs, seg = row - in_row * a.segs;
  GridTrace grid_trace;  // trace builds: a skipped row's CTAs record their start and end
  if (a.skip != nullptr) {  // launched dependent behind the list finish, which marks the rows (launch.cuh)
    // The chain's next kernel may launch now (a row left to the chain waits for this grid
    // before it reads), so a listed row's kernels cost neither a launch nor a wait each.
    tile::allow_dependent_launch();
    const bool listed = detail::chain_row_listed<true>(a.skip + in_row);  // every CTA of the cluster: the same row
    grid_trace.mark();
    if (listed) {
      grid_trace.end(3);
      return;
    }
  }
  const int64_t seg0 = seg * a.seg_len;    // the segment's first position in the input row
  const int64_t row_n = seg == a.segs - 1 ? a.n - seg0 : a.seg_len;
  const int k = static_cast<int>(row_n < a.k ? row_n : a.k);
  const int64_t lo = int64_t(rank) * a.slice;
  const int cnt = static_cast<int>(row_n - lo <= 0 ? 0 : (row_n - lo < a.slice ? row_n - lo : a.slice));
  const Raw* xr = static_cast<const Raw*>(a.x) + in_row * a.row_stride + seg0 + lo;
  const Raw* src_row = a.group_src != nullptr ? static_cast<const Raw*>(a.group_src) + in_row * a.group_src_stride : nullptr;
  // Element lo + i of the segment, in memory (through the group map when reading group_src).
  auto src_of = [&](int i) -> const Raw* {
    if (src_row == nullptr) return xr + i;
    const int64_t e = lo + i, gl = a.group_log2;
    return src_row + (a.group_map[in_row * (a.row_stride >> gl) + (e >> gl)] << gl) + (e & ((int64_t{1} << gl) - 1));
  };
  const bool largest = a.largest;

  const ClusterSmem L = cluster_smem(a.data_bytes, a.cand_cap, a.sort_cap, a.stage_cap);
  Raw* keys = reinterpret_cast<Raw*>(smem + L.data);
  uint32_t* hist = reinterpret_cast<uint32_t*>(smem + L.hist);
  uint32_t* red = reinterpret_cast<uint32_t*>(smem + L.red);
  uint32_t* cand_key = reinterpret_cast<uint32_t*>(smem + L.cand_raw);
  uint32_t* cand_pos = reinterpret_cast<uint32_t*>(smem + L.cand_pos);
  uint64_t* sort_key = reinterpret_cast<uint64_t*>(smem + L.sort_key);
  uint32_t* sort_val = reinterpret_cast<uint32_t*>(smem + L.sort_val);
  uint32_t* stage_key = reinterpret_cast<uint32_t*>(smem + L.stage_key);
  uint32_t* stage_pos = reinterpret_cast<uint32_t*>(smem + L.stage_pos);

  for (int i = tid; i < kBins; i += kThreads) {
    hist[i] = 0;
    red[i] = 0;
  }
  if (tid == 0) {
    ctl.gt = ctl.eq = ctl.cand_over = ctl.sent = 0;
    tile::mbarrier_init(&ctl.sel_bar, 1);
    tile::mbarrier_init(&ctl.in_bar, tile::cluster_size());  // re-read: csize's register spilled
  }
  __syncthreads();
  // Rank 0's counters and reduction bins are zero before any peer touches them: the wait
  // sits just before the first remote access, so the load below overlaps the barrier.
  if (csize > 1) tile::cluster_arrive();

  // ---- load: order keys into shared memory, histogram of their top digit -----------------
  constexpr int kTopShift = kKB - kDigitBits;
  auto to_key = [&](uint32_t raw) -> uint32_t {
    const uint32_t key = order_key<Keys>(raw, largest);
    atomicAdd(&hist[key >> kTopShift], 1u);
    return key;
  };
  if (src_row != nullptr || (reinterpret_cast<uintptr_t>(xr) & 15u) == 0) {
    // TMA bulk copy of the slice (all of it in flight at once, no registers), then the
    // keys and the histogram in place, in shared memory.
    const int nv = cnt / kVec;
    const uint32_t bytes = static_cast<uint32_t>(nv) * 16u;
    if (tid == 0) {
      tile::mbarrier_init(&ctl.load_bar, 1);
      tile::mbarrier_arrive_expect_tx(&ctl.load_bar, bytes);
      if (src_row == nullptr) {
        constexpr uint32_t kChunk = 32 * 1024;
        for (uint32_t off = 0; off < bytes; off += kChunk)
          tile::bulk_copy_g2s(reinterpret_cast<char*>(keys) + off, reinterpret_cast<const char*>(xr) + off,
                              bytes - off < kChunk ? bytes - off : kChunk, &ctl.load_bar);
      }
    }
    if (src_row != nullptr) {
      // A copy per group the slice meets, a group a thread (each behind its own map entry's
      // load, all in parallel: on warp 0 alone, four a lane at k = 1024, the failing-list
      // path ran 2-5% slower than behind a gather kernel, TopK v114b), once the barrier
      // expects the bytes. Slices and groups are whole vectors, so every part is too, and
      // there is no tail.
      __syncthreads();
      const int gl = a.group_log2;
      const int64_t g0 = lo >> gl, g1 = (lo + cnt + (int64_t{1} << gl) - 1) >> gl;
      for (int64_t g = g0 + tid; g < g1; g += kThreads) {
        const int64_t e0 = max(lo, g << gl), e1 = min(lo + int64_t{cnt}, (g + 1) << gl);
        tile::bulk_copy_g2s(keys + (e0 - lo), src_of(static_cast<int>(e0 - lo)),
                            static_cast<uint32_t>((e1 - e0) * sizeof(Raw)), &ctl.load_bar);
      }
    } else {
      for (int i = nv * kVec + tid; i < cnt; i += kThreads) keys[i] = xr[i];  // the < 16-byte tail
    }
    __syncthreads();  // the barrier is initialised before anyone waits on it
    tile::mbarrier_wait(&ctl.load_bar, 0);
    uint4* vk = reinterpret_cast<uint4*>(keys);
    for (int v = tid; v < nv; v += kThreads) {
      uint4 pack = vk[v];
      Raw* e = reinterpret_cast<Raw*>(&pack);
#pragma unroll
      for (int j = 0; j < kVec; ++j) e[j] = static_cast<Raw>(to_key(e[j]));
      vk[v] = pack;
    }
    for (int i = nv * kVec + tid; i < cnt; i += kThreads) keys[i] = static_cast<Raw>(to_key(keys[i]));
  } else {
    for (int i0 = tid; i0 < cnt; i0 += kThreads * kUnroll) {
      Raw buf[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        if (i < cnt) buf[u] = __ldcs(xr + i);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int i = i0 + u * kThreads;
        if (i < cnt) keys[i] = static_cast<Raw>(to_key(buf[u]));
      }
    }
  }
  __syncthreads();
  mark();

  auto out_index = [&](int i) -> uint32_t {
    if (a.idx_map != nullptr) return static_cast<uint32_t>(a.idx_map[in_row * a.row_stride + lo + i]);
    if (a.group_map != nullptr) {
      const int64_t e = lo + i, gl = a.group_log2;
      const int64_t g = a.group_map[in_row * (a.row_stride >> gl) + (e >> gl)];
      return static_cast<uint32_t>((g << gl) | (e & ((int64_t{1} << gl) - 1)));
    }
    return static_cast<uint32_t>(seg0 + lo + i);
  };
  // The element's bits: from its key, except NaNs (one key for all), re-read from memory.
  auto raw_of = [&](uint32_t key, int i) -> uint32_t {
    return is_nan_key<Keys>(key, largest) ? uint32_t{*src_of(i)} : raw_of_order_key<Keys>(key, largest);
  };
  auto composite = [&](uint32_t key, uint32_t idx) -> uint64_t {
    return (uint64_t{key} << 32) | (0xffffffffu - idx);
  };
  const uint32_t gt_addr = tile::peer_addr(&ctl.gt, 0);
  const uint32_t eq_addr = tile::peer_addr(&ctl.eq, 0);
  Raw* vals_out = static_cast<Raw*>(a.values) + row * a.out_stride;
  int64_t* idx_out = a.indices + row * a.out_stride;

  // One output element: global memory when unsorted, else rank 0's sort buffer (and there
  // too, as a candidate, when gathering: the ending is chosen in the digit loop, below, and
  // read here from where the hand-off stored it).
  auto write_out = [&](uint32_t slot, uint32_t key, int i) {
    const uint32_t idx = out_index(i);
    const uint32_t raw = raw_of(key, i);
    if (a.sorted || ctl.bcast[2] == detail::kGather) {
      tile::peer_store_u64(tile::peer_addr(&sort_key[slot], 0), composite(key, idx));
      tile::peer_store_u32(tile::peer_addr(&sort_val[slot], 0), raw);
    } else {
      vals_out[slot] = static_cast<Raw>(raw);
      idx_out[slot] = idx;
    }
  };
  // Warp-aggregated slot claim on one of rank 0's counters. All lanes call it.
  auto claim = [&](bool pred, uint32_t counter) -> uint32_t {
    const uint32_t ballot = __ballot_sync(0xffffffffu, pred);
    if (ballot == 0) return 0;
    const int leader = __ffs(ballot) - 1;
    uint32_t base = 0;
    if (lane == leader) base = tile::peer_atomic_add(counter, __popc(ballot));
    base = __shfl_sync(0xffffffffu, base, leader);
    return base + __popc(ballot & tile::lanemask_lt());
  };

  // Output elements are staged in shared memory and claim their rank-0 slots once per CTA
  // at the end: a remote atomic per warp step would put DSMEM latency in the scan. Each warp
  // stages into its own share, counted in a register (the same in every lane): one count
  // per CTA took a returning shared atomic per warp step with a hit, on one address, and at
  // k = 1024 most steps hit. Past its share (huge unsorted k, a warp's run of hits) an
  // element claims its slot directly. All lanes call it.
  uint32_t final_need = 0, final_eq_base = 0;
  uint32_t small_bin = 0;  // elements of the final bin when rank 0 ranks it, else 0
  uint64_t* bin_key = reinterpret_cast<uint64_t*>(red);
  uint32_t* bin_val = red + 2 * kSmallBinCap;
  // An element of the final bin with eq slot s: one of the first final_need, or every one
  // into rank 0's bin buffer when rank 0 ranks the bin.
  auto emit_eq = [&](uint32_t s, uint32_t key, int i) {
    if (small_bin != 0) {
      if (s < small_bin) {
        tile::peer_store_u64(tile::peer_addr(&bin_key[s], 0), composite(key, out_index(i)));
        tile::peer_store_u32(tile::peer_addr(&bin_val[s], 0), raw_of(key, i));
      }
    } else if (s < final_need) {
      write_out(final_eq_base + s, key, i);
    }
  };
  // (The share's start is recomputed where used: two more pointers kept through the scan
  // made the kernel spill.)
  const int stage_share = a.stage_cap / (kThreads / 32);
  uint32_t wstage = 0;  // this warp's staged elements (may pass its share)
  auto stage = [&](bool pred, uint32_t key, int i, bool is_eq) {
    const uint32_t ballot = __ballot_sync(0xffffffffu, pred);
    if (ballot == 0) return;
    const uint32_t slot = wstage + __popc(ballot & tile::lanemask_lt());
    wstage += __popc(ballot);
    const bool staged = slot < static_cast<uint32_t>(stage_share);
    if (pred && staged) {
      const int at = warp * stage_share + static_cast<int>(slot);
      stage_key[at] = key;
      stage_pos[at] = static_cast<uint32_t>(i) | (is_eq ? 0x80000000u : 0u);
    }
    const uint32_t s = claim(pred && !staged, is_eq ? eq_addr : gt_addr);
    if (pred && !staged) {
      if (!is_eq) write_out(s, key, i);
      else emit_eq(s, key, i);
    }
  };

  // ---- digit loop ------------------------------------------------------------------------
  // The k-th element's composite agrees with `prefix` above bit h; `need` of the elements
  // that agree are still to be taken.
  uint64_t prefix = 0;
  int h = kW;
  int width = kDigitBits;
  uint32_t need = static_cast<uint32_t>(k);
  bool first_scan = true;
  // The first scan's candidates: each warp keeps its own in a share of the list, counted in
  // a register (the same value in every lane). A count per CTA took a returning shared
  // atomic on one address per warp step with a hit, and the warps queued on it.
  const int cand_share = a.cand_cap / (kThreads / 32);
  uint32_t* const wcand_key = cand_key + warp * cand_share;
  uint32_t* const wcand_pos = cand_pos + warp * cand_share;
  uint32_t wcand = 0;
  bool lists_ok = false;  // every warp's list held its candidates (read after round one)
  bool waited = false;
  uint32_t round = 0;  // the selection barrier's phase
  for (;;) {
    // Publish this CTA's histogram into rank 0's, which selects the bin.
    const int nb = 1 << width;
    if (!waited) {
      if (csize > 1) tile::cluster_wait();
      waited = true;
    }
    // The bins go by reductions that complete on rank 0's in_bar, each CTA announcing their
    // bytes with one relaxed arrival, and the selection comes back by st.async on each CTA's
    // sel_bar: no release fence and no cluster barrier in the round (the cluster probe:
    // 1.09 us a round of 16 CTAs against 1.55 with a barrier and a release hand-off).
    if (csize > 1 && tid == 0) tile::mbarrier_arrive_expect_tx(&ctl.sel_bar, 16);
    const uint32_t red0 = tile::peer_addr(red, 0);
    const uint32_t in_bar0 = tile::peer_addr(&ctl.in_bar, 0);
    for (int b0 = 0; b0 < nb; b0 += kThreads) {
      const int b = b0 + tid;
      const uint32_t v = b < nb ? hist[b] : 0u;
      if (v != 0) {
        if (csize > 1)
          tile::peer_red_add_async(red0 + 4u * b, v, in_bar0);
        else
          red[b] += v;  // a lone CTA's own bins (every thread owns its bins)
        hist[b] = 0;
      }
      if (csize > 1) {  // the bytes rank 0's in_bar is told of (a lone CTA has no in_bar round)
        const uint32_t sent = __popc(__ballot_sync(0xffffffffu, v != 0));
        if (lane == 0 && sent != 0) atomicAdd(&ctl.sent, sent);
      }
    }
    __syncthreads();  // the bins cleared before the scan counts into them; the count complete
    if (csize > 1) {
      if (tid == 0) {
        tile::mbarrier_arrive_expect_tx_peer(in_bar0, 4u * ctl.sent);
        ctl.sent = 0;  // next added to after the round's closing barrier
      }
      if (rank == 0) tile::mbarrier_wait(&ctl.in_bar, round & 1u);
    }
    mark();
    // Rank 0 selects, clears its bins for the next round, then sends the selection to every
    // CTA (a peer's next histogram lands only after it has received it).
    // (A lone CTA's digit round has no cluster barriers and measured cheaper. The staging
    // must hold a CTA's share of the output and all of the bin, so that few elements claim
    // their slots from the scan, one warp step at a time.)
    const bool small_ok = csize > 1 && a.stage_cap >= min(a.slice, k + static_cast<int>(kSmallBinCap));
    if (rank == 0) {
      // Gathering only after the first digit: no element has its output slot yet.
      detail::select_bin<kThreads>(red, nb, need, small_ok, first_scan ? static_cast<uint32_t>(a.gather_cap) : 0u,
                                   ctl);
      __syncthreads();
      for (int b = tid; b < nb; b += kThreads) red[b] = 0;
      __syncthreads();
      if (csize == 1) {  // st.async needs a cluster of two or more (compute-sanitizer)
        if (tid < 4) ctl.bcast[tid] = ctl.sel[tid];
      } else if (tid < static_cast<int>(csize)) {
        const uint32_t bar = tile::peer_addr(&ctl.sel_bar, tid);
        for (int j = 0; j < 4; ++j) tile::peer_store_async_u32(tile::peer_addr(&ctl.bcast[j], tid), ctl.sel[j], bar);
      }
    }
    if (csize > 1)
      tile::mbarrier_wait(&ctl.sel_bar, round & 1u);
    else
      __syncthreads();
    ++round;
    mark();
    const uint32_t bin = ctl.bcast[0];
    const uint32_t nneed = ctl.bcast[1];
    const int nh = h - width;
    const uint64_t nprefix = (prefix << width) | bin;
    // Done when any nneed of the bin's elements will do (all of them are needed, or their
    // key is fully known and they are equal bits), or when rank 0 can rank the bin.
    const bool any_will_do = ctl.bcast[2] == detail::kWholeBin || nh == 0 ||
                             (nh == 32 && !is_nan_key<Keys>(static_cast<uint32_t>(nprefix), largest));
    const bool gather = ctl.bcast[2] == detail::kGather;
    // (small_ok is implied by kSmallBin, but without it here the fp32 kernel spilled.)
    const bool done = any_will_do || (ctl.bcast[2] == detail::kSmallBin && small_ok) || gather;
    const int nwidth = done ? 0 : detail::digit_width(nh);
    if (done) {
      final_need = nneed;                               // equal elements still to take
      final_eq_base = static_cast<uint32_t>(k) - nneed;  // their slots follow the greater ones
      small_bin = any_will_do || gather ? 0 : ctl.bcast[3];
    }

    // Act on one element that may matter: above the new prefix, emit; equal, emit (when
    // done) or keep as a candidate and count its next digit. All lanes call it.
    auto act = [&](bool gt, bool eq, uint32_t key, int i, uint64_t c) {
      stage(gt, key, i, false);
      if (done) {
        stage(eq, key, i, true);
        return;
      }
      if (first_scan) {
        const uint32_t ballot = __ballot_sync(0xffffffffu, eq);
        const uint32_t slot = wcand + __popc(ballot & tile::lanemask_lt());
        wcand += __popc(ballot);
        if (eq && slot < static_cast<uint32_t>(cand_share)) {
          wcand_key[slot] = key;
          wcand_pos[slot] = static_cast<uint32_t>(i);
        }
      }
      if (eq) atomicAdd(&hist[static_cast<uint32_t>(detail::shr(c, nh - nwidth)) & ((1u << nwidth) - 1u)], 1u);
    };

    // This warp's candidates from the first scan, one per lane per step. All lanes call
    // visit.
    auto scan_list = [&](auto&& visit) {
      const int total = static_cast<int>(wcand);
      for (int j0 = 0; j0 < total; j0 += 32) {
        const int j = j0 + lane;
        const bool valid = j < total;
        visit(valid, valid ? wcand_key[j] : 0u, valid ? static_cast<int>(wcand_pos[j]) : 0);
      }
    };

    if (h > 32 && (nh > 32 || done)) {
      // Key digits: the prefixes are key ranges, so classifying is two 32-bit compares.
      const int s_old = h - 32, s_new = nh - 32;
      const uint32_t old_hi = static_cast<uint32_t>(((prefix << s_old) | ((uint64_t{1} << s_old) - 1)) & Keys::kMask);
      const uint32_t new_lo = static_cast<uint32_t>(nprefix << s_new);
      // Gathering, every element from the bin's floor up counts as above it (bin > 0).
      const uint32_t new_hi = gather ? new_lo - 1 : static_cast<uint32_t>(new_lo | ((uint64_t{1} << s_new) - 1));
      auto visit = [&](bool valid, uint32_t key, int i) {
        const bool any = valid && key >= new_lo && key <= old_hi;
        if (!__any_sync(0xffffffffu, any)) return;
        act(any && key > new_hi, any && key <= new_hi, key, i, uint64_t{key} << 32);
      };
      if (lists_ok) {
        scan_list(visit);
      } else {
        const int nvec = (cnt + kVec - 1) / kVec;
        for (int b0 = warp * 32; b0 < nvec; b0 += kThreads) {
          const int v = b0 + lane;
          uint4 pack = make_uint4(0, 0, 0, 0);
          if (v < nvec) pack = reinterpret_cast<const uint4*>(keys)[v];
          const Raw* e = reinterpret_cast<const Raw*>(&pack);
          uint32_t hits = 0;
#pragma unroll
          for (int j = 0; j < kVec; ++j)
            hits |= v * kVec + j < cnt && e[j] >= new_lo && e[j] <= old_hi ? 1u << j : 0u;
          if constexpr (kVec == 8) {
            // 16-bit keys: one visit per element slot that some lane hits, the key re-read
            // from shared memory. Eight inlined visits made the kernel outgrow the
            // instruction cache (ncu: no_inst stalls; the first scan of 1 x 262144 bf16
            // 4.3 us against fp32's 2.8). Four (fp32) measured better unrolled: 2-4% at
            // k = 1024, where most slots hold a hit.
#pragma unroll 1
            for (uint32_t m = __reduce_or_sync(0xffffffffu, hits); m != 0; m &= m - 1) {
              const int i = v * kVec + __ffs(m) - 1;
              visit(i < cnt, i < cnt ? uint32_t{keys[i]} : 0u, i);
            }
          } else {
            if (!__any_sync(0xffffffffu, hits != 0)) continue;
#pragma unroll
            for (int j = 0; j < kVec; ++j) visit(v * kVec + j < cnt, e[j], v * kVec + j);
          }
        }
      }
    } else {
      // Position digits (the k-th key is NaN and ties must go to the lowest positions):
      // full composites. Rare, so kept simple.
      auto visit = [&](bool valid, uint32_t key, int i) {
        uint64_t c = 0;
        bool match = false;
        if (valid) {
          c = composite(key, out_index(i));
          match = detail::shr(c, h) == prefix;
        }
        const uint64_t t = detail::shr(c, nh);
        const bool gt = match && t > nprefix, eq = match && t == nprefix;
        if (!__any_sync(0xffffffffu, gt || eq)) return;
        act(gt, eq, key, i, c);
      };
      if (lists_ok) {
        scan_list(visit);
      } else {
        for (int b0 = warp * 32; b0 < cnt; b0 += kThreads) {
          const int i = b0 + lane;
          visit(i < cnt, i < cnt ? uint32_t{keys[i]} : 0u, i);
        }
      }
    }
    mark();
    if (done) break;
    if (first_scan && lane == 0 && wcand > static_cast<uint32_t>(cand_share)) ctl.cand_over = 1;
    __syncthreads();  // histogram and candidate lists complete
    if (first_scan) lists_ok = ctl.cand_over == 0;
    prefix = nprefix;
    h = nh;
    width = nwidth;
    need = nneed;
    first_scan = false;
  }

  // ---- flush the staged elements: one slot claim per CTA for each kind -------------------
  // Each warp counts its share's elements of each kind (packed: eq above bit 16, shares are
  // at most 2048 / 16) and thread 0 claims the CTA's totals. (Placing each warp's elements
  // by ballots after the earlier warps' made the kernel spill: the cursors are shared
  // atomics, which the compiler aggregates per warp.)
  const int mine = static_cast<int>(min(wstage, static_cast<uint32_t>(stage_share)));
  const uint32_t* wstage_key = stage_key + warp * stage_share;
  const uint32_t* wstage_pos = stage_pos + warp * stage_share;
  __syncwarp();  // the warp's lanes read what its other lanes staged (racecheck, run 12)
  uint32_t packed = 0;
  for (int j0 = 0; j0 < mine; j0 += 32) {
    const int j = j0 + lane;
    const bool v = j < mine;
    const bool e = v && (wstage_pos[j] >> 31) != 0;
    packed += __popc(__ballot_sync(0xffffffffu, v && !e)) + (__popc(__ballot_sync(0xffffffffu, e)) << 16);
  }
  if (lane == 0) ctl.warp_sum[warp] = packed;
  __syncthreads();
  if (tid == 0) {
    const uint32_t total = tile::sum_warps_before<kThreads / 32>(ctl.warp_sum, kThreads / 32);
    // Both claims in flight at once: neither result is stored before the other is issued.
    const uint32_t gt_base = (total & 0xffffu) ? tile::peer_atomic_add(gt_addr, total & 0xffffu) : 0;
    const uint32_t eq_base = (total >> 16) ? tile::peer_atomic_add(eq_addr, total >> 16) : 0;
    ctl.flush[2] = gt_base;
    ctl.flush[3] = eq_base;
    ctl.flush[0] = ctl.flush[1] = 0;  // the local cursors
  }
  __syncthreads();
  for (int j = lane; j < mine; j += 32) {  // cursors by (warp-aggregated) shared atomics
    const uint32_t pos = wstage_pos[j];
    const int i = static_cast<int>(pos & 0x7fffffffu);
    if (pos >> 31) {
      emit_eq(ctl.flush[3] + atomicAdd(&ctl.flush[1], 1u), wstage_key[j], i);
    } else {
      write_out(ctl.flush[2] + atomicAdd(&ctl.flush[0], 1u), wstage_key[j], i);
    }
  }

  mark();
  // Every emission has landed in rank 0 (and no peer still reads this CTA's memory).
  detail::cluster_or_cta_sync(csize);
  mark();
  auto dump = [&] { trace.dump(csize > 1 ? "cluster (cnt, k)" : "cta (cnt, k)", cnt, k); };
  if (rank != 0 || (!a.sorted && small_bin == 0 && ctl.bcast[2] != detail::kGather)) {
    dump();
    return;
  }

  // One output element at its final slot, from its bits and its composite's low half
  // (~position).
  auto write_final = [&](auto slot, uint32_t low, uint32_t raw) {
    vals_out[slot] = static_cast<Raw>(raw);
    idx_out[slot] = 0xffffffffu - low;
  };

  // ---- rank 0: the best final_need of a small final bin, after the greater elements -------
  // Every bin element sits below every greater one, so when sorted each part is ranked
  // within itself, in one pass straight to the output (no second pass over all k).
  const int gtn = static_cast<int>(final_eq_base);  // the greater elements: sort_key[0, gtn)
  if (small_bin != 0 && a.sorted && k <= kRankSortMax) {
    // Each element ranked by a lane group (rank_desc_split); the loop is warp-uniform.
    const int m = gtn + static_cast<int>(small_bin);
    const int l = rank_split_log2<kThreads>(m);
    for (int g0 = 0; g0 < m << l; g0 += kThreads) {
      const int e = (g0 + tid) >> l;
      const bool in_gt = e < gtn;
      const int i = in_gt ? e : e - gtn;
      const uint64_t* set = in_gt ? sort_key : bin_key;
      const int n = e >= m ? 0 : in_gt ? gtn : static_cast<int>(small_bin);
      const uint64_t c = n != 0 ? set[i] : 0;
      const uint32_t r = rank_desc_split(set, n, c, l);
      if (n != 0 && (tid & ((1 << l) - 1)) == 0) {
        if (in_gt)
          write_final(r, static_cast<uint32_t>(c), sort_val[i]);
        else if (r < final_need)
          write_final(final_eq_base + r, static_cast<uint32_t>(c), bin_val[i]);
      }
    }
    mark();
    dump();
    return;
  }
  if (small_bin != 0) {
    for (int i = tid; i < static_cast<int>(small_bin); i += kThreads) {
      const uint64_t c = bin_key[i];
      const uint32_t r = rank_desc(bin_key, static_cast<int>(small_bin), c);
      if (r >= final_need) continue;
      const uint32_t slot = final_eq_base + r;
      if (a.sorted) {
        sort_key[slot] = c;
        sort_val[slot] = bin_val[i];
      } else {
        write_final(slot, static_cast<uint32_t>(c), bin_val[i]);
      }
    }
    __syncthreads();
    if (!a.sorted) {
      dump();
      return;
    }
  }

  // ---- rank 0: the k composites in order, largest first -----------------------------------
  // Gathered, every element at or above the first bin is ordered and the k best go out (the
  // bitonic fallback over the power of two above them): ~2 ns an element, which is why the
  // gather stops at kGatherCap. By buckets scattered into the slice's shared memory (idle
  // since the final barrier) when it holds them (cluster_geometry makes room for the sort
  // buffer's capacity when gathering). (The ending from shared memory: a flag kept in a
  // register from the loop made the kernel spill.)
  const bool gathered = ctl.bcast[2] == detail::kGather;
  const int n_ord = gathered ? static_cast<int>(ctl.gt) : k;  // every claim landed before the barrier
  const int p_ord = gathered ? static_cast<int>(pow2_ceil(static_cast<uint32_t>(n_ord))) : a.sort_cap;
  const bool room = int64_t{n_ord} * 12 <= int64_t{L.sort_key - L.data};
  order_desc<kThreads, false, true>(sort_key, sort_val, n_ord, p_ord, room ? smem + L.data : nullptr, hist, ctl.warp_sum,
                       reinterpret_cast<uint64_t*>(red), [&](uint32_t slot, uint64_t c, uint32_t raw) {
                         if (slot < static_cast<uint32_t>(k)) write_final(slot, static_cast<uint32_t>(c), raw);
                       });
  mark();
  dump();
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
