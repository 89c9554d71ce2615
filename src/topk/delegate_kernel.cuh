// Many long rows: select through group maxima ("delegates", after Dr. Top-k, SC'21), so
// that the radix select runs on a fraction of the row instead of all of it.
//
//   maxima    a pure stream: each group of 4-16 consecutive 16-byte vectors (traits.h)
//             becomes its best element's 32-bit ascending key;
//   select    the k best maxima of each row (the cluster kernel on AscKeys32): their
//             groups hold the row's answer;
//   gather    those k groups' elements into a candidate row;
//   select    the k best candidates (the cluster kernel, positions mapped back through
//             the chosen groups).
//
// Why the k best groups suffice: their maxima are k distinct elements at or above the
// k-th best maximum t, so the row's k-th best key is >= t, and every answer element lies
// in a group whose maximum is >= it. Ties at t are any of those groups: each chosen group
// brings at least one element at or above t. NaN ties go to the lowest positions as in
// stock: maxima tie by group (groups are contiguous, so in position order) and candidates
// by their mapped positions.
#pragma once

#include <cstdint>

#include "flyops/tile/launch.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct DelegateArgs {
  const void* x;
  int64_t rows;
  int64_t n;           // elements per row, a multiple of the group
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int64_t blocks_per_row;
  bool largest;
  uint32_t* maxima;    // [rows, n / group] ascending keys
  // Screening (screen_kernel.cuh), with the kernel's kScreen: each row's threshold, and its
  // candidate count and list of `cap` (order key, position) pairs, appended to here.
  const uint32_t* thresh;
  uint32_t* count;
  uint2* cand;
  int64_t cap;
};

struct GatherArgs {
  const void* x;
  int64_t row_stride;
  int64_t groups_total;    // rows * k
  int k;
  int group_vecs_log2;     // 16-byte vectors per group
  const int64_t* chosen;   // [rows, k] group numbers
  void* cand;              // [rows, k * group] their elements (positions: from `chosen`)
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

// Global namespace: profiler and ncu names start with flyops_.

namespace flyops::topk::detail {

// Appends the elements of this lane's vector v whose order keys are at or above t (its best
// key m already known) to the row's candidates: one counter claim per warp. All lanes call
// it.
template <typename Keys>
FLYOPS_DEVICE void screen_append(const uint4& q, uint32_t m, bool in_row, int64_t v, uint32_t t, bool largest,
                                 uint32_t* count, uint2* cand, int64_t cap) {
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  uint32_t hits = 0;
  if (in_row && m >= t) {
#pragma unroll
    for (int i = 0; i < kVec; ++i) hits |= order_key<Keys>(vec_element<Raw>(q, i), largest) >= t ? 1u << i : 0u;
  }
  if (!__any_sync(0xffffffffu, hits != 0)) return;
  const uint32_t mine = __popc(hits);
  const uint32_t incl = tile::warp_prefix_sum(mine);
  uint32_t base = 0;
  if ((threadIdx.x & 31) == 31) base = atomicAdd(count, incl);
  base = __shfl_sync(0xffffffffu, base, 31) + incl - mine;
  for (; hits != 0; hits &= hits - 1, ++base) {
    const int i = __ffs(hits) - 1;
    if (base < cap)  // past it the count alone tells the finish kernel to take the maxima
      cand[base] = make_uint2(order_key<Keys>(vec_element<Raw>(q, i), largest), static_cast<uint32_t>(v * kVec + i));
  }
}

}  // namespace flyops::topk::detail

// One 16-byte vector per thread per step; the kGV lanes of a group combine by shuffles.
// kScreen: launched dependent on the screening kernel, whose thresholds it waits for after
// its loads are in flight.
template <typename Keys, int kGV, bool kScreen>
__global__ void __launch_bounds__(flyops::topk::kDelegateThreads) flyops_topk_maxima(flyops::topk::DelegateArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kPerBlock = kDelegateThreads * kDelegateUnroll;
  static_assert(kGV >= 1 && kGV <= 32 && (kGV & (kGV - 1)) == 0, "a group's lanes are a power of two in a warp");
  const int64_t row = blockIdx.x / a.blocks_per_row;
  const int64_t v0 = (blockIdx.x - row * a.blocks_per_row) * kPerBlock + threadIdx.x;
  const int64_t nv = a.n / kVec;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride);
  uint32_t* out = a.maxima + row * (nv / kGV);
  const bool largest = a.largest;

  uint4 buf[kDelegateUnroll];
#pragma unroll
  for (int u = 0; u < kDelegateUnroll; ++u) {
    const int64_t v = v0 + u * kDelegateThreads;
    buf[u] = v < nv ? __ldcs(src + v) : make_uint4(0, 0, 0, 0);
  }
  // The finish kernel may launch once every block is this far (it waits for the maxima).
  flyops::tile::allow_dependent_launch();
  uint32_t t = 0;
  if constexpr (kScreen) {
    flyops::tile::grid_dependency_wait();
    t = a.thresh[row];
  }
#pragma unroll
  for (int u = 0; u < kDelegateUnroll; ++u) {
    const int64_t v = v0 + u * kDelegateThreads;
    // The group's best element as a 32-bit ascending key (the greatest order key).
    const uint32_t m = max_order_key<Keys>(buf[u], largest);
    if constexpr (kScreen)
      detail::screen_append<Keys>(buf[u], m, v < nv, v, t, largest, a.count + row, a.cand + row * a.cap, a.cap);
    uint32_t best = widen_key32<Keys>(largest ? m : ~m & Keys::kMask);
#pragma unroll
    for (int d = 1; d < kGV; d <<= 1) {
      const uint32_t other = __shfl_xor_sync(0xffffffffu, best, d);
      best = largest ? max(best, other) : min(best, other);
    }
    // nv is a multiple of the group, so a group's lanes are all in the row or all out.
    if (v < nv && (threadIdx.x & (kGV - 1)) == 0) out[v / kGV] = best;
  }
}

// One 16-byte vector of a chosen group per thread.
template <typename Raw>
__global__ void __launch_bounds__(flyops::topk::kDelegateThreads) flyops_topk_gather(flyops::topk::GatherArgs a) {
  using namespace flyops::topk;
  constexpr int kVec = 16 / sizeof(Raw);
  const int gl = a.group_vecs_log2;
  const int64_t t = int64_t(blockIdx.x) * kDelegateThreads + threadIdx.x;  // vector of the candidates
  const int64_t slot = t >> gl;                                               // row * k + j
  if (slot >= a.groups_total) return;
  const int64_t row = slot / a.k;
  const int64_t pos = ((a.chosen[slot] << gl) + (t & ((int64_t{1} << gl) - 1))) * kVec;
  const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride + pos);
  reinterpret_cast<uint4*>(a.cand)[t] = v;
}
#endif
