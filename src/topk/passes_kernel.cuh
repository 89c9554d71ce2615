// Any k on rows that no other selection holds (millions of elements at a large k): a radix
// select in global memory, one launch per digit, as AIR top-k runs it. A count pass reads
// every element of the row and counts the digits of those whose higher digits equal the
// prefix chosen so far (shared-memory counts, added into the row's histogram in the
// workspace); a one-CTA pick a row then takes the digit that holds the k-th key and extends
// the prefix. After the last digit the prefix is the k-th key itself, and the write pass
// stores every element above it and as many equal to it as k still needs, each CTA claiming
// a trip's output slots with one atomic. Equal keys have equal bits except NaNs: where the k-th
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
  bool vec;           // count passes in 16-byte loads: rows and chunks 16-byte aligned
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
  auto count = [&](Raw raw) {
    const uint32_t key = order_key<Keys>(raw, a.largest);
    if (((key ^ prefix) & high) == 0) atomicAdd(&bins[(key >> a.shift) & digit], 1u);
  };
  int64_t scalar_lo = lo;
  if (a.vec && lo < end) {  // whole 16-byte vectors from lo (aligned), kPassUnroll in flight a thread
    constexpr int kV = 16 / sizeof(Raw);
    const int64_t nvec = (end - lo) / kV;
    const uint4* xv = reinterpret_cast<const uint4*>(xr + lo);
    for (int64_t v0 = threadIdx.x; v0 < nvec; v0 += kPassUnroll * blockDim.x) {
      uint4 r[kPassUnroll];
#pragma unroll
      for (int u = 0; u < kPassUnroll; ++u) r[u] = v0 + u * blockDim.x < nvec ? xv[v0 + u * blockDim.x] : uint4{};
#pragma unroll
      for (int u = 0; u < kPassUnroll; ++u)
        if (v0 + u * blockDim.x < nvec) {
          const Raw* e = reinterpret_cast<const Raw*>(&r[u]);
#pragma unroll
          for (int j = 0; j < kV; ++j) count(e[j]);
        }
    }
    scalar_lo = lo + nvec * kV;  // the row's last few elements, in its last CTA
  }
  for (int64_t i0 = scalar_lo + threadIdx.x; i0 < end; i0 += kPassUnroll * blockDim.x) {
    Raw r[kPassUnroll];  // the loads first: kPassUnroll of them in flight a thread
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) r[u] = i0 + u * blockDim.x < end ? xr[i0 + u * blockDim.x] : Raw{0};
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u)
      if (i0 + u * blockDim.x < end) count(r[u]);
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

// Every element above the k-th key, and k_left of those equal to it, into the row's output.
// A CTA claims its slots for a trip (kPassUnroll x kPassThreads elements) with one atomic: a
// warp each contended on one address once a large k puts most warps above (bf16 2^24 at
// k = 2^22 ran 2x slower than stock). Equal ones: by one atomic too, or, when they are NaNs,
// by position (the CTAs before this one from the tally, then this CTA's trips in order).
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_write(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kWarps = kPassThreads / 32, kSlots = kPassUnroll * kWarps;
  static_assert(kSlots == 64, "the scan below gives each lane of one warp two (unroll, warp) slots");
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
  // Per (unroll, warp) slot, in position order: counts, then the output offsets. Two buffers,
  // so a trip's counts never overwrite offsets the trip before is still reading.
  __shared__ uint32_t above_at[2][kSlots], equal_at[2][kSlots];
  uint32_t equal_before = 0;  // warp 0, ordered: equal elements at lower positions of the row
  if (ordered && warp == 0) {
    for (int64_t c = row * a.ctas + lane; c < static_cast<int64_t>(blockIdx.x); c += 32) equal_before += a.equal[c];
    for (int d = 16; d > 0; d /= 2) equal_before += __shfl_xor_sync(0xffffffffu, equal_before, d);
  }
  int buf = 0;
  for (int64_t base = lo; base < end; base += kPassUnroll * blockDim.x, buf ^= 1) {  // the same trips for every thread
    Raw r[kPassUnroll];  // the loads first
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      r[u] = i < end ? xr[i] : Raw{0};
    }
    uint32_t ma[kPassUnroll], me[kPassUnroll];
    bool any = false;
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      const uint32_t key = i < end ? order_key<Keys>(r[u], a.largest) : 0u;
      ma[u] = __ballot_sync(0xffffffffu, i < end && key > kth);
      me[u] = __ballot_sync(0xffffffffu, i < end && key == kth);
      any |= (ma[u] | me[u]) != 0;
      if (lane == 0) {
        above_at[buf][u * kWarps + warp] = static_cast<uint32_t>(__popc(ma[u]));
        equal_at[buf][u * kWarps + warp] = static_cast<uint32_t>(__popc(me[u]));
      }
    }
    if (!__syncthreads_or(any)) continue;  // most trips at a small k: nothing to store
    if (warp == 0) {  // exclusive scans of both counts over the slots, one atomic each
      uint32_t* const at[2] = {above_at[buf], equal_at[buf]};
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const uint32_t c0 = at[q][2 * lane], c1 = at[q][2 * lane + 1];
        uint32_t incl = c0 + c1;
#pragma unroll
        for (int d = 1; d < 32; d *= 2) {
          const uint32_t v = __shfl_up_sync(0xffffffffu, incl, d);
          if (lane >= d) incl += v;
        }
        const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
        uint32_t first = 0;
        if (q == 1 && ordered) {
          first = equal_before;
          equal_before += total;
        } else if (lane == 0 && total != 0) {
          first = atomicAdd(q == 0 ? &s.above : &s.equal, total);
        }
        if (!(q == 1 && ordered)) first = __shfl_sync(0xffffffffu, first, 0);
        at[q][2 * lane] = first + incl - c0 - c1;
        at[q][2 * lane + 1] = first + incl - c1;
      }
    }
    __syncthreads();
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      if ((ma[u] >> lane) & 1u) {
        const uint32_t slot = above_at[buf][u * kWarps + warp] + __popc(ma[u] & below_me);
        vals[slot] = r[u];
        idx[slot] = i;
      }
      if ((me[u] >> lane) & 1u) {
        const uint32_t e = equal_at[buf][u * kWarps + warp] + __popc(me[u] & below_me);
        if (e < take_equal) {
          vals[n_above + e] = r[u];
          idx[n_above + e] = i;
        }
      }
    }
  }
}
#endif
