// Many long rows: select through group maxima ("delegates", after Dr. Top-k, SC'21), so
// that the radix select runs on a fraction of the row instead of all of it.
//
//   maxima    a pure stream: each group of kGroupVecs consecutive 16-byte vectors (16 fp32
//             or 32 bf16/fp16 elements) becomes its best element's 32-bit ascending key;
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

#include "keys.h"
#include "traits.h"

namespace flyops::topk {

struct DelegateArgs {
  const void* x;
  int64_t rows;
  int64_t n;           // elements per row, a multiple of the group
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int64_t blocks_per_row;
  bool largest;
  uint32_t* maxima;    // [rows, n / group] ascending keys
};

struct GatherArgs {
  const void* x;
  int64_t row_stride;
  int64_t groups_total;    // rows * k
  int k;
  const int64_t* chosen;   // [rows, k] group numbers
  void* cand;              // [rows, k * group] their elements (positions: from `chosen`)
};

}  // namespace flyops::topk

#if defined(__CUDACC__)
namespace flyops::topk::detail {

// The best 32-bit ascending key of a 16-byte vector: largest-first wants the greatest,
// smallest-first the least. 16-bit elements go two per word (ascending_key_pair, then
// max/min.u16x2), which keeps the stream memory-bound.
template <typename Keys>
FLYOPS_DEVICE uint32_t best_key(const uint4& v, bool largest) {
  if constexpr (Keys::kBits == 32) {
    uint32_t best = ascending_key32<Keys>(v.x);
    for (uint32_t w : {v.y, v.z, v.w}) {
      const uint32_t key = ascending_key32<Keys>(w);
      best = largest ? max(best, key) : min(best, key);
    }
    return best;
  } else {
    const uint32_t a = ascending_key_pair<Keys>(v.x), b = ascending_key_pair<Keys>(v.y);
    const uint32_t c = ascending_key_pair<Keys>(v.z), d = ascending_key_pair<Keys>(v.w);
    uint32_t ab, cd, p;
    if (largest) {
      asm("max.u16x2 %0, %1, %2;" : "=r"(ab) : "r"(a), "r"(b));
      asm("max.u16x2 %0, %1, %2;" : "=r"(cd) : "r"(c), "r"(d));
      asm("max.u16x2 %0, %1, %2;" : "=r"(p) : "r"(ab), "r"(cd));
      return widen_key32<Keys>(max(p & 0xffffu, p >> 16));
    }
    asm("min.u16x2 %0, %1, %2;" : "=r"(ab) : "r"(a), "r"(b));
    asm("min.u16x2 %0, %1, %2;" : "=r"(cd) : "r"(c), "r"(d));
    asm("min.u16x2 %0, %1, %2;" : "=r"(p) : "r"(ab), "r"(cd));
    return widen_key32<Keys>(min(p & 0xffffu, p >> 16));
  }
}

}  // namespace flyops::topk::detail

// Global namespace: profiler and ncu names start with flyops_.

// One 16-byte vector per thread per step; the four lanes of a group combine by shuffles.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kDelegateThreads) flyops_topk_maxima(flyops::topk::DelegateArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kPerBlock = kDelegateThreads * kDelegateUnroll;
  static_assert(kGroupVecs == 4, "the shuffles below combine four lanes");
  const int64_t row = blockIdx.x / a.blocks_per_row;
  const int64_t v0 = (blockIdx.x - row * a.blocks_per_row) * kPerBlock + threadIdx.x;
  const int64_t nv = a.n / kVec;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride);
  uint32_t* out = a.maxima + row * (nv / kGroupVecs);
  const bool largest = a.largest;

  uint4 buf[kDelegateUnroll];
#pragma unroll
  for (int u = 0; u < kDelegateUnroll; ++u) {
    const int64_t v = v0 + u * kDelegateThreads;
    buf[u] = v < nv ? __ldcs(src + v) : make_uint4(0, 0, 0, 0);
  }
#pragma unroll
  for (int u = 0; u < kDelegateUnroll; ++u) {
    const int64_t v = v0 + u * kDelegateThreads;
    uint32_t best = detail::best_key<Keys>(buf[u], largest);
#pragma unroll
    for (int d = 1; d < kGroupVecs; d <<= 1) {
      const uint32_t other = __shfl_xor_sync(0xffffffffu, best, d);
      best = largest ? max(best, other) : min(best, other);
    }
    // nv is a multiple of the group, so a group's lanes are all in the row or all out.
    if (v < nv && (threadIdx.x & (kGroupVecs - 1)) == 0) out[v / kGroupVecs] = best;
  }
}

// One 16-byte vector of a chosen group per thread.
template <typename Raw>
__global__ void __launch_bounds__(flyops::topk::kDelegateThreads) flyops_topk_gather(flyops::topk::GatherArgs a) {
  using namespace flyops::topk;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kGroup = kGroupVecs * kVec;
  const int64_t t = int64_t(blockIdx.x) * kDelegateThreads + threadIdx.x;  // vector of the candidates
  const int64_t slot = t / kGroupVecs;                                        // row * k + j
  if (slot >= a.groups_total) return;
  const int64_t row = slot / a.k;
  const int64_t pos = a.chosen[slot] * kGroup + (t % kGroupVecs) * kVec;
  const uint4 v = *reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride + pos);
  reinterpret_cast<uint4*>(a.cand)[t] = v;
}
#endif
