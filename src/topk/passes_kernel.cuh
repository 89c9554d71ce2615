// Any k on rows that no other selection holds (millions of elements at a large k): a radix
// select in global memory, one launch per digit, as AIR top-k runs it. The first count pass
// reads every element of the row and counts its top digit (shared-memory counts, added into
// the row's histogram in the workspace); a one-CTA pick a row then takes the digit that
// holds the k-th key and extends the prefix. Where the chosen digit's elements fit the row's
// candidate list (a list of (bits, position), an eighth of the row: `buffered`), each later
// pass is a filter: it stores the elements whose digits so far are above the prefix into the
// output at once, appends those equal to it to the next list and counts their next digit; it
// reads the row once (the second digit) and the short lists after that. Where they do not
// fit, every pass reads the whole row and counts the elements matching the prefix. After the
// last digit the prefix is the k-th key itself; the write stores the elements above it and as
// many equal to it as k still needs, from the last list or the row, each CTA claiming a trip's
// output slots with one atomic. Equal keys have equal bits except NaNs: where the k-th key is
// the NaN key, a tally pass counts each CTA's NaNs in the row first and the write takes the
// lowest positions, from the row, as stock does. Stream order is the only synchronisation (a
// CUDA graph replays it); the output is unsorted (the caller sorts a sorted call: sort_after).
#pragma once

#include <cstdint>

#include "flyops/tile/warp.h"
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
  int pass;           // its index, from the top
  bool vec;           // count passes in 16-byte loads: rows and chunks 16-byte aligned
  uint2* lists;       // [rows][2][cap] candidate lists: (bits, position); pass p appends to p % 2
  int64_t cap;        // entries a list holds
};

}  // namespace flyops::topk

#if defined(__CUDACC__)
// Key bits above this pass's digit (none on the first pass).
template <typename Keys>
__device__ __forceinline__ uint32_t flyops_pass_high_bits(int shift, int bits) {
  return shift + bits >= Keys::kBits ? 0u : (Keys::kMask >> (shift + bits)) << (shift + bits);
}

// The elements a CTA reads, kPassUnroll a thread a trip (position order: unroll, warp, lane),
// from the row or from a candidate list (bits, position).
template <typename Keys>
struct PassSource {
  using Raw = typename Keys::Raw;
  const Raw* row = nullptr;
  const uint2* list = nullptr;
  int64_t lo = 0, end = 0;
  __device__ __forceinline__ void load(int64_t base, Raw (&r)[flyops::topk::kPassUnroll],
                                       int64_t (&at)[flyops::topk::kPassUnroll]) const {
#pragma unroll
    for (int u = 0; u < flyops::topk::kPassUnroll; ++u) {
      const int64_t i = base + u * blockDim.x + threadIdx.x;
      if (i >= end) {
        r[u] = Raw{0}, at[u] = -1;
      } else if (list != nullptr) {
        const uint2 e = list[i];
        r[u] = static_cast<Raw>(e.x), at[u] = e.y;
      } else {
        r[u] = row[i], at[u] = i;
      }
    }
  }
};

// A CTA's share of a list of `count` entries (lists are split evenly over the row's CTAs).
template <typename Keys>
__device__ __forceinline__ PassSource<Keys> flyops_pass_list(const flyops::topk::PassesArgs& a, int64_t row, int list,
                                                             uint32_t count) {
  PassSource<Keys> src;
  src.list = a.lists + (row * 2 + list) * a.cap;
  const int64_t chunk = (static_cast<int64_t>(count) + a.ctas - 1) / a.ctas;
  src.lo = (blockIdx.x % a.ctas) * chunk;
  src.end = count < src.lo + chunk ? static_cast<int64_t>(count) : src.lo + chunk;
  return src;
}

template <typename Keys>
__device__ __forceinline__ PassSource<Keys> flyops_pass_row(const flyops::topk::PassesArgs& a, int64_t row) {
  PassSource<Keys> src;
  src.row = static_cast<const typename Keys::Raw*>(a.x) + row * a.row_stride;
  src.lo = (blockIdx.x % a.ctas) * a.chunk;
  src.end = a.n < src.lo + a.chunk ? a.n : src.lo + a.chunk;
  return src;
}

template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_count(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ uint32_t bins[kPassBins];
  const int64_t row = blockIdx.x / a.ctas;
  if (a.pass > 0 && a.state[row].buffered) return;  // the filter counts this digit
  const int nb = 1 << a.bits;
  for (int i = threadIdx.x; i < nb; i += blockDim.x) bins[i] = 0;
  __syncthreads();
  const uint32_t prefix = a.state[row].prefix;
  const uint32_t high = flyops_pass_high_bits<Keys>(a.shift, a.bits);
  const uint32_t digit = static_cast<uint32_t>(nb - 1);
  const PassSource<Keys> src = flyops_pass_row<Keys>(a, row);
  const Raw* xr = src.row;
  const int64_t lo = src.lo, end = src.end;
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
__global__ void __launch_bounds__(flyops::topk::kPassPickThreads) flyops_topk_passes_pick(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  const bool first = a.pass == 0;
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
  int chosen = -1;
  uint32_t chosen_count = 0;
  if (before < k_left && before + c0 >= k_left) {
    chosen = b0, chosen_count = c0;
    s.k_left = k_left - before;
  } else if (before + c0 < k_left && before + c0 + c1 >= k_left) {
    chosen = b1, chosen_count = c1;
    s.k_left = k_left - before - c0;
  }
  if (chosen >= 0) {
    s.prefix = prefix | (static_cast<uint32_t>(chosen) << a.shift);
    // The next pass's candidates are this bin's elements: lists where they fit.
    if (first) s.buffered = static_cast<int64_t>(chosen_count) <= a.cap ? 1u : 0u;
  }
  if (t == 0) s.appended[(a.pass + 1) % 2] = 0u;  // the list the next filter appends to
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
  const PassSource<Keys> src = flyops_pass_row<Keys>(a, row);
  const Raw* xr = src.row;
  const int64_t lo = src.lo, end = src.end;
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

// A CTA's output slots for one trip of kPassUnroll x kPassThreads elements, for two kinds of
// flagged element at once: a warp each would contend on one counter once most warps hold one
// (bf16 2^24 at k = 2^22 ran 2x slower than stock so). Each warp's ballots per (unroll, warp)
// slot, in position order, go to shared memory; one warp scans them and claims each kind's
// range with one atomic on its counter, or, for a kind taken by position (`ordered1`), from
// the running count `before1` (warp 0's). `at` holds two buffers of both kinds' offsets, so a
// trip's counts never overwrite offsets the trip before is still reading; false (no barrier
// after the first) where the CTA flags nothing on this trip.
struct PassClaim {
  static constexpr int kWarps = flyops::topk::kPassThreads / 32;
  static constexpr int kSlots = flyops::topk::kPassUnroll * kWarps;
  uint32_t at[2][2][kSlots];  // [buffer][kind][slot]
};

__device__ __forceinline__ bool flyops_pass_claim(PassClaim& c, int buf, const uint32_t (&m0)[flyops::topk::kPassUnroll],
                                                  const uint32_t (&m1)[flyops::topk::kPassUnroll], uint32_t* ctr0,
                                                  uint32_t* ctr1, bool ordered1, uint32_t& before1) {
  using namespace flyops::topk;
  static_assert(PassClaim::kSlots == 64, "the scan gives each lane of one warp two (unroll, warp) slots");
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  bool any = false;
#pragma unroll
  for (int u = 0; u < kPassUnroll; ++u) {
    any |= (m0[u] | m1[u]) != 0;
    if (lane == 0) {
      c.at[buf][0][u * PassClaim::kWarps + warp] = static_cast<uint32_t>(__popc(m0[u]));
      c.at[buf][1][u * PassClaim::kWarps + warp] = static_cast<uint32_t>(__popc(m1[u]));
    }
  }
  if (!__syncthreads_or(any)) return false;
  if (warp == 0) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {
      uint32_t* at = c.at[buf][q];
      const uint32_t c0 = at[2 * lane], c1 = at[2 * lane + 1];
      const uint32_t incl = flyops::tile::warp_prefix_sum(c0 + c1);
      const uint32_t total = __shfl_sync(0xffffffffu, incl, 31);
      uint32_t first = 0;
      if (q == 1 && ordered1) {
        first = before1;
        before1 += total;
      } else {
        if (lane == 0 && total != 0) first = atomicAdd(q == 0 ? ctr0 : ctr1, total);
        first = __shfl_sync(0xffffffffu, first, 0);
      }
      at[2 * lane] = first + incl - c0 - c1;
      at[2 * lane + 1] = first + incl - c1;
    }
  }
  __syncthreads();
  return true;
}

// A filter pass (after the first, on buffered rows): elements whose digits so far are above the
// prefix go to the output; those equal to it go to this pass's list, their digit counted.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_filter(flyops::topk::PassesArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ uint32_t bins[kPassBins];
  __shared__ PassClaim claim;
  const int64_t row = blockIdx.x / a.ctas;
  PassState& s = a.state[row];
  if (!s.buffered) return;  // the count pass reads the row instead
  const int nb = 1 << a.bits;
  for (int i = threadIdx.x; i < nb; i += blockDim.x) bins[i] = 0;
  const uint32_t prefix = s.prefix, high = flyops_pass_high_bits<Keys>(a.shift, a.bits);
  const uint32_t digit = static_cast<uint32_t>(nb - 1);
  const PassSource<Keys> src = a.pass == 1 ? flyops_pass_row<Keys>(a, row)
                                            : flyops_pass_list<Keys>(a, row, (a.pass - 1) % 2, s.appended[(a.pass - 1) % 2]);
  uint2* out_list = a.lists + (row * 2 + a.pass % 2) * a.cap;
  Raw* vals = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* idx = a.indices + row * a.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t below_me = (1u << lane) - 1u;
  uint32_t unused = 0;
  __syncthreads();  // bins cleared
  int buf = 0;
  for (int64_t base = src.lo; base < src.end; base += kPassUnroll * blockDim.x, buf ^= 1) {
    Raw r[kPassUnroll];
    int64_t at[kPassUnroll];
    src.load(base, r, at);
    uint32_t key[kPassUnroll], ma[kPassUnroll], mc[kPassUnroll];
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      key[u] = order_key<Keys>(r[u], a.largest);
      ma[u] = __ballot_sync(0xffffffffu, at[u] >= 0 && (key[u] & high) > prefix);
      mc[u] = __ballot_sync(0xffffffffu, at[u] >= 0 && (key[u] & high) == prefix);
    }
    if (!flyops_pass_claim(claim, buf, ma, mc, &s.above, &s.appended[a.pass % 2], false, unused)) continue;
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int sl = u * PassClaim::kWarps + warp;
      if ((ma[u] >> lane) & 1u) {
        const uint32_t o = claim.at[buf][0][sl] + __popc(ma[u] & below_me);
        vals[o] = r[u];
        idx[o] = at[u];
      }
      if ((mc[u] >> lane) & 1u) {
        const uint32_t o = claim.at[buf][1][sl] + __popc(mc[u] & below_me);
        out_list[o] = make_uint2(static_cast<uint32_t>(r[u]), static_cast<uint32_t>(at[u]));
        atomicAdd(&bins[(key[u] >> a.shift) & digit], 1u);
      }
    }
  }
  __syncthreads();
  uint32_t* h = a.hist + row * kPassBins;
  for (int i = threadIdx.x; i < nb; i += blockDim.x)
    if (bins[i] != 0) atomicAdd(&h[i], bins[i]);
}

// Every element above the k-th key, and k_left of those equal to it, into the row's output.
// `from_list`: a buffered row's last list, whose elements above the k-th key and (unless
// the k-th key is the NaN key) those equal to it it stores. Otherwise the row: every element
// of an unbuffered row; of a buffered one only the NaNs equal to the k-th key, by position.
// NaNs equal to a NaN k-th key are taken by position: the CTAs before this one from the
// tally, then this CTA's trips in order.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kPassThreads) flyops_topk_passes_write(flyops::topk::PassesArgs a,
                                                                                       bool from_list) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  __shared__ PassClaim claim;
  const int64_t row = blockIdx.x / a.ctas;
  PassState& s = a.state[row];
  const uint32_t kth = s.prefix, take_equal = s.k_left;
  const bool ordered = is_nan_key<Keys>(kth, a.largest), buffered = s.buffered != 0;
  if (from_list ? !buffered : buffered && !ordered) return;
  const bool above_too = from_list || !buffered, equal_too = !(from_list && ordered);
  const uint32_t n_above = static_cast<uint32_t>(a.k) - take_equal;
  const int last = passes_of(Keys::kBits) - 1;
  const PassSource<Keys> src = from_list ? flyops_pass_list<Keys>(a, row, last % 2, s.appended[last % 2])
                                         : flyops_pass_row<Keys>(a, row);
  Raw* vals = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* idx = a.indices + row * a.k;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const uint32_t below_me = (1u << lane) - 1u;
  uint32_t equal_before = 0;  // warp 0, ordered: equal elements at lower positions of the row
  if (ordered && !from_list && warp == 0) {
    for (int64_t c = row * a.ctas + lane; c < static_cast<int64_t>(blockIdx.x); c += 32) equal_before += a.equal[c];
    for (int d = 16; d > 0; d /= 2) equal_before += __shfl_xor_sync(0xffffffffu, equal_before, d);
  }
  int buf = 0;
  for (int64_t base = src.lo; base < src.end; base += kPassUnroll * blockDim.x, buf ^= 1) {  // the same trips for every thread
    Raw r[kPassUnroll];
    int64_t at[kPassUnroll];
    src.load(base, r, at);
    uint32_t ma[kPassUnroll], me[kPassUnroll];
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const uint32_t key = order_key<Keys>(r[u], a.largest);
      ma[u] = __ballot_sync(0xffffffffu, above_too && at[u] >= 0 && key > kth);
      me[u] = __ballot_sync(0xffffffffu, equal_too && at[u] >= 0 && key == kth);
    }
    if (!flyops_pass_claim(claim, buf, ma, me, &s.above, &s.equal, ordered, equal_before)) continue;
#pragma unroll
    for (int u = 0; u < kPassUnroll; ++u) {
      const int sl = u * PassClaim::kWarps + warp;
      if ((ma[u] >> lane) & 1u) {
        const uint32_t o = claim.at[buf][0][sl] + __popc(ma[u] & below_me);
        vals[o] = r[u];
        idx[o] = at[u];
      }
      if ((me[u] >> lane) & 1u) {
        const uint32_t e = claim.at[buf][1][sl] + __popc(me[u] & below_me);
        if (e < take_equal) {
          vals[n_above + e] = r[u];
          idx[n_above + e] = at[u];
        }
      }
    }
  }
}
#endif
