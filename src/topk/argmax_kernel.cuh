// k == 1 on long rows: a streaming arg-max, no shared-memory copy of the row. Each CTA
// reduces its slice to the largest composite (order key : ~position), so ties (NaN ones
// included) go to the lowest position as in stock; each CTA stores its composite into rank
// 0 over DSMEM, and rank 0 combines them and writes the element's bits (from its key;
// re-read for NaNs, whose key is shared).
#pragma once

#include <cstdint>

#include "flyops/tile/cluster.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct ArgmaxArgs {
  const void* x;
  int64_t rows;
  int64_t n;
  int64_t row_stride;
  int64_t slice;  // elements per CTA, a multiple of 8
  bool largest;
  void* values;   // [rows, 1]
  int64_t* indices;
};

// A row in segments (rows of the arg-max kernel): each segment's winner, then one CTA a row
// over them, re-reading each winner's bits, so NaNs and ties resolve as in one pass (the
// greatest order key, then the lowest position).
struct ArgmaxMergeArgs {
  const void* x;
  int64_t row_stride;
  int64_t seg;                 // elements a segment
  int segs;                    // segments a row
  bool largest;
  const int64_t* seg_indices;  // [rows * segs] each segment's winner, within the segment
  void* values;                // [rows, 1]
  int64_t* indices;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)
// Global namespace: profiler and ncu names start with flyops_.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kArgmaxThreads, 2) flyops_topk_argmax(flyops::topk::ArgmaxArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kThreads = kArgmaxThreads;
  constexpr int kVec = 16 / sizeof(Raw);
  // Loads in flight per thread: 16-bit rows carry half the bytes per load, and a thread's
  // keys are computed between its loads, so they need more of them to stay memory-bound.
  constexpr int kUnroll = sizeof(Raw) == 2 ? 8 : 4;
  __shared__ uint64_t warp_best[kThreads / 32];
  __shared__ uint64_t cta_best[kMaxCluster];  // rank 0: each CTA's best, stored there by that CTA

  const int tid = threadIdx.x;
  const uint32_t csize = tile::cluster_size();
  const uint32_t rank = tile::cluster_rank();
  const int64_t row = blockIdx.x / csize;
  const int64_t lo = int64_t(rank) * a.slice;
  const int64_t cnt64 = a.n - lo <= 0 ? 0 : (a.n - lo < a.slice ? a.n - lo : a.slice);
  const int cnt = static_cast<int>(cnt64);
  const Raw* xrow = static_cast<const Raw*>(a.x) + row * a.row_stride;
  const Raw* xr = xrow + lo;
  const uint32_t pos0 = static_cast<uint32_t>(lo);
  // Every CTA of the cluster has started before any stores into rank 0 (waited on below,
  // after the stream, so the barrier costs nothing on the way).
  tile::cluster_arrive();

  uint64_t best = 0;
  auto take = [&](uint32_t raw, int i) {
    const uint64_t c = (uint64_t{order_key<Keys>(raw, a.largest)} << 32) | (0xffffffffu - (pos0 + i));
    best = c > best ? c : best;
  };
  if ((reinterpret_cast<uintptr_t>(xr) & 15u) == 0) {
    // Per vector only its greatest key is compared with the thread's best, by selects that
    // keep the winning vector itself; its element is located once, after the loop (a branch
    // that located it at once diverged: with few vectors per thread some lane of a warp wins
    // at nearly every step). A thread's vectors come in increasing position order, so a
    // strict win keeps the lowest position on ties.
    const int nv = cnt / kVec;
    const uint4* src = reinterpret_cast<const uint4*>(xr);
    uint32_t vkey = 0;
    int vbest = -1;
    uint4 vraw = make_uint4(0, 0, 0, 0);
    auto pick = [&](const uint4& q, int v) {
      const uint32_t m = max_order_key<Keys>(q, a.largest);
      const bool win = m > vkey || vbest < 0;
      vkey = win ? m : vkey;
      vbest = win ? v : vbest;
      vraw = win ? q : vraw;
    };
    // Each step's loads are all issued before its selects: whole steps load unconditionally,
    // the last partial one under predicates. (With a bound test on every load, and ptxas
    // aiming at four CTAs of 32 registers per SM, two of eight loads were in flight; the
    // launch bound of two CTAs per SM leaves it the registers.)
    int v0 = tid;
    for (; v0 + (kUnroll - 1) * kThreads < nv; v0 += kThreads * kUnroll) {
      uint4 buf[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) buf[u] = __ldcs(src + v0 + u * kThreads);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) pick(buf[u], v0 + u * kThreads);
    }
    if (v0 < nv) {
      uint4 buf[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * kThreads < nv) buf[u] = __ldcs(src + v0 + u * kThreads);
#pragma unroll
      for (int u = 0; u < kUnroll; ++u)
        if (v0 + u * kThreads < nv) pick(buf[u], v0 + u * kThreads);
    }
    if (vbest >= 0) {
      int j = kVec - 1;
#pragma unroll
      for (int jj = kVec - 2; jj >= 0; --jj)
        if (order_key<Keys>(vec_element<Raw>(vraw, jj), a.largest) == vkey) j = jj;
      const uint32_t vpos = pos0 + static_cast<uint32_t>(vbest * kVec + j);
      const uint64_t c = (uint64_t{vkey} << 32) | (0xffffffffu - vpos);
      best = c > best ? c : best;
    }
    for (int i = nv * kVec + tid; i < cnt; i += kThreads) take(xr[i], i);
  } else {
    for (int i = tid; i < cnt; i += kThreads) take(__ldcs(xr + i), i);
  }
  best = tile::warp_max_u64(best);
  if ((tid & 31) == 0) warp_best[tid >> 5] = best;
  __syncthreads();
  tile::cluster_wait();
  if (tid == 0) {
    uint64_t b = 0;
#pragma unroll
    for (int w = 0; w < kThreads / 32; ++w) b = warp_best[w] > b ? warp_best[w] : b;
    tile::peer_store_u64(tile::peer_addr(&cta_best[rank], 0), b);
  }
  // Every CTA's best has landed in rank 0, which reads only its own shared memory from here
  // on: no remote loads one after another, and the peers may leave at once.
  tile::cluster_sync();
  if (rank == 0 && tid < 32) {
    const uint64_t b = tile::warp_max_u64(tid < static_cast<int>(csize) ? cta_best[tid] : 0);
    if (tid == 0) {
      const uint32_t key = static_cast<uint32_t>(b >> 32);
      const uint32_t pos = 0xffffffffu - static_cast<uint32_t>(b);
      static_cast<Raw*>(a.values)[row] = element_bits<Keys>(key, a.largest, xrow, pos);  // NaNs read back
      a.indices[row] = pos;
    }
  }
}

template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kArgmaxMergeThreads) flyops_topk_argmax_merge(
    flyops::topk::ArgmaxMergeArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ uint64_t warp_best[kArgmaxMergeThreads / 32];
  const int64_t row = blockIdx.x;
  const Raw* xrow = static_cast<const Raw*>(a.x) + row * a.row_stride;
  const int64_t* win = a.seg_indices + row * a.segs;
  uint64_t best = 0;
  for (int s = threadIdx.x; s < a.segs; s += kArgmaxMergeThreads) {
    const uint32_t pos = static_cast<uint32_t>(s * a.seg + win[s]);
    const uint64_t c = (uint64_t{order_key<Keys>(xrow[pos], a.largest)} << 32) | (0xffffffffu - pos);
    best = c > best ? c : best;
  }
  best = tile::warp_max_u64(best);
  if ((threadIdx.x & 31) == 0) warp_best[threadIdx.x >> 5] = best;
  __syncthreads();
  if (threadIdx.x < 32) {
    best = tile::warp_max_u64(threadIdx.x < kArgmaxMergeThreads / 32 ? warp_best[threadIdx.x] : 0);
    if (threadIdx.x == 0) {
      const uint32_t pos = 0xffffffffu - static_cast<uint32_t>(best);
      static_cast<Raw*>(a.values)[row] = xrow[pos];
      a.indices[row] = pos;
    }
  }
}
#endif
