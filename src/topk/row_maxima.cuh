// Group maxima computed from a row by a kernel other than the stream: the shared-memory
// finish's fallback for a screened row whose list failed (TopK v59), and the radix chain's
// maxima behind its list-only stream (TopK v87), both as the stream would have written them.
#pragma once

#include <cstdint>

#include "chain_mark.cuh"
#include "flyops/tile/launch.h"
#include "keys.h"
#include "trace.cuh"
#include "traits.h"
#include "vec_keys.cuh"

#if defined(__CUDACC__)

namespace flyops::topk::detail {

inline constexpr int kRowMaximaLoads = 4;  // 16-byte loads in flight a thread

// The maxima of a row's groups of 2^gl elements, laid out as the stream is (a group's vectors
// on consecutive lanes, combined by shuffles; four loads in flight a thread: a thread a group
// kept one load in flight and took ~20 us on a row of 128256 fp32). The CTA takes steps
// first, first + stride, ... of kThreads x kRowMaximaLoads vectors: (0, 1) for the whole row.
template <typename Keys, int kThreads>
__noinline__ __device__ void maxima_from_row(const typename Keys::Raw* xr, uint32_t* dst, int64_t n, int gl, bool largest,
                                             int64_t first, int64_t stride) {
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int64_t kStep = int64_t{kThreads} * kRowMaximaLoads;
  const int gv = (1 << gl) / kVec;  // a power of two up to a warp's lanes
  const int64_t nv = n / kVec;      // a multiple of gv
  const uint4* src = reinterpret_cast<const uint4*>(xr);
  for (int64_t v0 = first * kStep + threadIdx.x; v0 - threadIdx.x < nv; v0 += stride * kStep) {
    uint4 q[kRowMaximaLoads];
#pragma unroll
    for (int u = 0; u < kRowMaximaLoads; ++u) {
      const int64_t v = v0 + u * kThreads;
      q[u] = v < nv ? src[v] : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kRowMaximaLoads; ++u) {
      const int64_t v = v0 + u * kThreads;
      uint32_t best = stored_group_key<Keys>(max_order_key<Keys>(q[u], largest), largest);
      for (int d = 1; d < gv; d <<= 1) best = better_group_key(best, __shfl_xor_sync(0xffffffffu, best, d), largest);
      if (v < nv && (v & (gv - 1)) == 0) dst[v / gv] = best;  // a group's lanes all in or all out
    }
  }
}

}  // namespace flyops::topk::detail

namespace flyops::topk {

struct ChainMaximaArgs {
  const void* x;
  int64_t rows;
  int64_t n;           // elements per row, a multiple of the group
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int group_log2;      // elements per group
  bool largest;
  uint32_t* maxima;    // [rows, n >> group_log2]
  const uint32_t* marks;  // [rows] the list finish's (chain_mark.cuh)
};

inline constexpr int kChainMaximaThreads = 512;

}  // namespace flyops::topk

// Global namespace: profiler names start with flyops_. The radix chain's maxima (TopK v87):
// its stream lists only, and this kernel, launched dependent on the list finish, writes the
// maxima of the rows that the list finish left to the chain, which its selections read. A
// grid of a few CTAs an SM walks each such row after the grid wait; on a listed row it reads
// nothing and waits for nothing (chain_mark.cuh), so behind a list that held the answer it is
// one nearly empty launch where the stream's maxima were 5-7% of the call (TopK v59).
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kChainMaximaThreads) flyops_topk_chain_maxima(flyops::topk::ChainMaximaArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  GridTrace grid_trace;  // trace builds: start, the first row's mark read, end (as a skipped kernel)
  flyops::tile::allow_dependent_launch();  // the chain's next kernel polls the marks too
  __shared__ uint32_t listed;
  const int64_t m = a.n >> a.group_log2;
  for (int64_t row = 0; row < a.rows; ++row) {
    if (threadIdx.x == 0) listed = detail::chain_row_listed<false>(a.marks + row) ? 1u : 0u;
    __syncthreads();
    const bool skip = listed != 0;
    if (row == 0) grid_trace.mark();
    __syncthreads();  // every thread has read `listed` before thread 0 writes the next row's
    if (skip) continue;
    flyops::tile::grid_dependency_wait();  // (thread 0 has waited; each reader waits too)
    detail::maxima_from_row<Keys, kChainMaximaThreads>(static_cast<const Raw*>(a.x) + row * a.row_stride,
                                                       a.maxima + row * m, a.n, a.group_log2, a.largest,
                                                       blockIdx.x, gridDim.x);
  }
  grid_trace.end(3);
}

#endif
