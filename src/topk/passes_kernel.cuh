// Any k on rows that no other selection holds (millions of elements at a large k): a radix
// select in global memory, one launch per digit, as AIR top-k runs it. A count pass reads
// every element of the row and counts the digits of those whose higher digits equal the
// prefix chosen so far (shared-memory counts, added into the row's histogram in the
// workspace); a one-CTA pick a row then takes the digit that holds the k-th key and extends
// the prefix. After the last digit the prefix is the k-th key itself, and the write pass
// stores every element above it and as many equal to it as k still needs, each warp claiming
// its output slots with one atomic. Equal keys have equal bits except NaNs: where the k-th
// key is the NaN key, a tally pass counts each CTA's NaNs first and the write takes the
// lowest positions, as stock does. Stream order is the only synchronisation (a CUDA graph
// replays it); the output is unsorted (the caller sorts a sorted call: sort_after).
#pragma once

#include <cstdint>

#include "keys.h"
#include "traits.h"

namespace flyops::topk {

struct PassesArgs {
  const void* x;
  int64_t rows, n, row_stride, k;
  bool largest;
  int ctas;           // CTAs a row
  int64_t chunk;      // elements a CTA reads
  uint32_t* hist;     // [rows][kPassBins], zero before each count pass
  PassState* state;   // [rows], zero before the first
  uint32_t* equal;    // [rows][ctas]: each CTA's elements equal to a NaN k-th key (tally pass)
  void* values;       // [rows, k]
  int64_t* indices;
  int shift, bits;    // this pass's digit: bits [shift, shift + bits) of the order key
};

}  // namespace flyops::topk

#if defined(__CUDACC__)
// Key bits above this pass's digit (none on the first pass).
template <typename Keys>
__device__ __forceinline__ uint32_t flyops_pass_high_bits(int shift, int bits) {
  return shift + bits >= Keys::kBits ? 0u : (Keys::kMask >> (shift + bits)) << (shift + bits);
}

template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_count(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ uint32_t bins[kPassBins];
  const int64_t row = blockIdx.x / a.ctas;
  const int nb = 1 << a.bits;
  for (int i = threadIdx.x; i < nb; i += blockDim.x) bins[i] = 0;
  __syncthreads();
  const uint32_t prefix = a.state[row].prefix;
  const uint32_t high = flyops_pass_high_bits<Keys>(a.shift, a.bits);
  const uint32_t digit = static_cast<uint32_t>(nb - 1);
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  const int64_t lo = (blockIdx.x % a.ctas) * a.chunk;
  const int64_t end = a.n < lo + a.chunk ? a.n : lo + a.chunk;
  for (int64_t i0 = lo + threadIdx.x; i0 < end; i0 += kPassUnroll * blockDim.x) {
    Raw r[kPassUnroll];  // the loads first: kPassUnroll of them in flight a thread
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) r[u] = i0 + u * blockDim.x < end ? xr[i0 + u * blockDim.x] : Raw{0};
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const uint32_t key = order_key<Keys>(r[u], a.largest);
      if (i0 + u * blockDim.x < end && ((key ^ prefix) & high) == 0) atomicAdd(&bins[(key >> a.shift) & digit], 1u);
    }
  }
  __syncthreads();
  uint32_t* h = a.hist + row * kPassBins;
  for (int i = threadIdx.x; i < nb; i += blockDim.x)
    if (bins[i] != 0) atomicAdd(&h[i], bins[i]);
}

// One CTA a row: the digit holding the k-th key (bins counted from the top), then the
// histogram cleared for the next pass.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassPickThreads) flyops_topk_passes_pick(flyops::topk::PassesArgs a,
                                                                                         bool first) {
  using namespace flyops::topk;
  __shared__ uint32_t warp_sums[kPassPickThreads / 32];
  const int64_t row = blockIdx.x;
  uint32_t* h = a.hist + row * kPassBins;
  PassState& s = a.state[row];
  const int nb = 1 << a.bits;
  const int t = threadIdx.x, lane = t % 32, w = t / 32;
  // Thread t takes the bins nb - 1 - 2t and nb - 2 - 2t: descending digits in thread order.
  const int b0 = nb - 1 - 2 * t, b1 = b0 - 1;
  const uint32_t c0 = b0 >= 0 ? h[b0] : 0u, c1 = b1 >= 0 ? h[b1] : 0u;
  const uint32_t k_left = first ? static_cast<uint32_t>(a.k) : s.k_left;
  const uint32_t prefix = first ? 0u : s.prefix;
  // Exclusive scan of the pairs' sums over the block: the count in higher bins.
  uint32_t incl = c0 + c1;
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const uint32_t v = __shfl_up_sync(0xffffffffu, incl, d);
    if (lane >= d) incl += v;
  }
  if (lane == 31) warp_sums[w] = incl;
  __syncthreads();
  uint32_t before = incl - (c0 + c1);
  for (int i = 0; i < w; ++i) before += warp_sums[i];
  if (before < k_left && before + c0 >= k_left) {
    s.prefix = prefix | (static_cast<uint32_t>(b0) << a.shift);
    s.k_left = k_left - before;
  } else if (before + c0 < k_left && before + c0 + c1 >= k_left) {
    s.prefix = prefix | (static_cast<uint32_t>(b1) << a.shift);
    s.k_left = k_left - before - c0;
  }
  __syncthreads();  // every count read before any is cleared
  if (b0 >= 0) h[b0] = 0u;
  if (b1 >= 0) h[b1] = 0u;
}

// Where the k-th key is the NaN key (NaNs differ in bits, so which of them the output takes
// matters): each CTA's count of them, for the write's ordered form.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_tally(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ uint32_t total;
  const int64_t row = blockIdx.x / a.ctas;
  const uint32_t kth = a.state[row].prefix;
  if (!is_nan_key<Keys>(kth, a.largest)) return;
  if (threadIdx.x == 0) total = 0;
  __syncthreads();
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  const int64_t lo = (blockIdx.x % a.ctas) * a.chunk;
  const int64_t end = a.n < lo + a.chunk ? a.n : lo + a.chunk;
  uint32_t mine = 0;
  for (int64_t i0 = lo + threadIdx.x; i0 < end; i0 += kPassUnroll * blockDim.x) {
    Raw r[kPassUnroll];
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) r[u] = i0 + u * blockDim.x < end ? xr[i0 + u * blockDim.x] : Raw{0};
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u)
      mine += i0 + u * blockDim.x < end && order_key<Keys>(r[u], a.largest) == kth;
  }
  for (int d = 16; d > 0; d /= 2) mine += __shfl_xor_sync(0xffffffffu, mine, d);
  if (threadIdx.x % 32 == 0 && mine != 0) atomicAdd(&total, mine);
  __syncthreads();
  if (threadIdx.x == 0) a.equal[blockIdx.x] = total;
}

// Every element above the k-th key, and k_left of those equal to it, into the row's output;
// a warp claims its slots above with one atomic. Equal ones: by one atomic a warp too, or,
// when they are NaNs, by position (the CTAs before this one from the tally, then this CTA's
// warps in order).
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_write(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  const int64_t row = blockIdx.x / a.ctas;
  PassState& s = a.state[row];
  const uint32_t kth = s.prefix, take_equal = s.k_left;
  const uint32_t n_above = static_cast<uint32_t>(a.k) - take_equal;
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  Raw* vals = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* idx = a.indices + row * a.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t below_me = (1u << lane) - 1u;
  const int64_t lo = (blockIdx.x % a.ctas) * a.chunk;
  const int64_t end = a.n < lo + a.chunk ? a.n : lo + a.chunk;
  const bool ordered = is_nan_key<Keys>(kth, a.largest);
  __shared__ uint32_t warp_equal[kPassThreads / 32];
  uint32_t equal_before = 0;  // ordered: equal elements at lower positions of the row
  if (ordered)
    for (int64_t c = row * a.ctas; c < static_cast<int64_t>(blockIdx.x); ++c) equal_before += a.equal[c];
  for (int64_t base = lo; base < end; base += kPassUnroll * blockDim.x) {  // the same trips for every thread
    Raw r[kPassUnroll];  // the loads first; then the elements in position order
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      r[u] = i < end ? xr[i] : Raw{0};
    }
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      const Raw raw = r[u];
      const uint32_t key = i < end ? order_key<Keys>(raw, a.largest) : 0u;
      const bool above = i < end && key > kth, equal = i < end && key == kth;
      const uint32_t ma = __ballot_sync(0xffffffffu, above);
      if (ma != 0) {
        const int leader = __ffs(ma) - 1;
        uint32_t first = 0;
        if (lane == leader) first = atomicAdd(&s.above, static_cast<uint32_t>(__popc(ma)));
        first = __shfl_sync(0xffffffffu, first, leader);
        if (above) {
          const uint32_t slot = first + __popc(ma & below_me);
          vals[slot] = raw;
          idx[slot] = i;
        }
      }
      const uint32_t me = __ballot_sync(0xffffffffu, equal);
      if (ordered) {  // uniform over the CTA
        if (lane == 0) warp_equal[warp] = static_cast<uint32_t>(__popc(me));
        __syncthreads();
        uint32_t e = equal_before + __popc(me & below_me), trip = 0;
        for (int j = 0; j < kPassThreads / 32; ++j) {
          e += j < warp ? warp_equal[j] : 0u;
          trip += warp_equal[j];
        }
        __syncthreads();  // read before the next trip writes them
        if (equal && e < take_equal) {
          vals[n_above + e] = raw;
          idx[n_above + e] = i;
        }
        equal_before += trip;
      } else if (me != 0) {
        const int leader = __ffs(me) - 1;
        uint32_t first = 0;
        if (lane == leader) first = atomicAdd(&s.equal, static_cast<uint32_t>(__popc(me)));
        first = __shfl_sync(0xffffffffu, first, leader);
        const uint32_t e = first + __popc(me & below_me);
        if (equal && e < take_equal) {
          vals[n_above + e] = raw;
          idx[n_above + e] = i;
        }
      }
    }
  }
}
#endif
