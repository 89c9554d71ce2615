// Short rows with a small k (MoE routing: N <= 512, k <= 8): kG threads per row, kE
// elements each in registers, no shared memory and no scratch. Every element becomes one
// composite integer, its order key above its complemented position, so composites are
// unique and the larger one is the better element; NaNs, which share one key, then go to
// the lowest positions as in stock. Each thread sorts chunks of kK composites with a
// bitonic network and folds them into its best kK; the group then merges lists across
// threads by xor shuffles. Merging two descending lists A and B into their best kK is
// max(A[i], B[kK-1-i]) (a bitonic sequence) and one bitonic merge. All threads of a group
// end with the same sorted list, so each writes its share of the k outputs.
//
// Cost per row is kG * (sorting and merging) instructions instead of the warp kernel's k
// warp-wide rounds, and a warp holds 32 / kG rows at once.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/arch.h"
#include "keys.h"
#include "traits.h"

namespace flyops::topk {

struct GroupArgs {
  const void* x;
  int64_t rows;
  int64_t n;  // <= kG * kE
  int64_t row_stride;
  int k;      // <= min(n, kK)
  bool largest;
  void* values;  // [rows, k]
  int64_t* indices;
};

#if defined(__CUDACC__)
// Composite of a 16-bit key in 32 bits, of a 32-bit key in 64; 0 is below every element.
template <typename Keys>
struct Composite {
  using T = std::conditional_t<Keys::kBits == 32, uint64_t, uint32_t>;
  static constexpr int kPosBits = Keys::kBits;
  static constexpr T kPosMask = (T{1} << kPosBits) - 1;
  static FLYOPS_DEVICE T make(uint32_t key, uint32_t pos) { return (T{key} << kPosBits) | (kPosMask - pos); }
  static FLYOPS_DEVICE uint32_t key(T c) { return static_cast<uint32_t>(c >> kPosBits); }
  static FLYOPS_DEVICE uint32_t pos(T c) { return static_cast<uint32_t>(kPosMask - (c & kPosMask)); }
};

// Larger first when `desc`, else smaller first.
template <typename T>
FLYOPS_DEVICE void compare_swap(T& a, T& b, bool desc) {
  const T hi = a > b ? a : b;
  const T lo = a > b ? b : a;
  a = desc ? hi : lo;
  b = desc ? lo : hi;
}

// A bitonic sequence of kK into descending order.
template <int kK, typename T>
FLYOPS_DEVICE void bitonic_merge_desc(T* v) {
#pragma unroll
  for (int stride = kK / 2; stride > 0; stride >>= 1)
#pragma unroll
    for (int i = 0; i < kK; ++i)
      if ((i & stride) == 0) compare_swap(v[i], v[i + stride], true);
}

// kK values into descending order.
template <int kK, typename T>
FLYOPS_DEVICE void bitonic_sort_desc(T* v) {
#pragma unroll
  for (int size = 2; size <= kK; size <<= 1)
#pragma unroll
    for (int stride = size / 2; stride > 0; stride >>= 1)
#pragma unroll
      for (int i = 0; i < kK; ++i)
        if ((i & stride) == 0) compare_swap(v[i], v[i + stride], (i & size) == 0);
}

// best := the kK largest of two descending lists, descending.
template <int kK, typename T>
FLYOPS_DEVICE void fold_desc(T* best, const T* other_reversed) {
#pragma unroll
  for (int i = 0; i < kK; ++i) best[i] = best[i] > other_reversed[i] ? best[i] : other_reversed[i];
  bitonic_merge_desc<kK>(best);
}

}  // namespace flyops::topk

// Global namespace: profiler and ncu names start with flyops_.
template <typename Keys, int kG, int kE, int kK>
__global__ void __launch_bounds__(flyops::topk::kGroupThreads) flyops_topk_group(flyops::topk::GroupArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  using C = Composite<Keys>;
  using T = typename C::T;
  static_assert(kG >= 1 && kG <= 32 && (kG & (kG - 1)) == 0, "groups tile a warp");
  static_assert(kE % kK == 0, "whole chunks");
  constexpr int kRowsPerCta = kGroupThreads / kG;

  // Rows past the end still take part in the shuffles (full-warp masks); they write nothing.
  const int g = threadIdx.x % kG;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerCta + threadIdx.x / kG;
  const bool valid = row < a.rows;
  const int n = valid ? static_cast<int>(a.n) : 0;
  const Raw* xr = static_cast<const Raw*>(a.x) + (valid ? row : 0) * a.row_stride;

  // Element j * kG + g: a group's loads of one j are adjacent.
  T v[kE];
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    const int i = j * kG + g;
    v[j] = i < n ? C::make(order_key<Keys>(__ldg(xr + i), a.largest), i) : T{0};
  }

  T best[kK];
#pragma unroll
  for (int c = 0; c < kE / kK; ++c) {
    T* chunk = v + c * kK;
    bitonic_sort_desc<kK>(chunk);
    if (c == 0) {
#pragma unroll
      for (int i = 0; i < kK; ++i) best[i] = chunk[i];
    } else {
      T rev[kK];
#pragma unroll
      for (int i = 0; i < kK; ++i) rev[i] = chunk[kK - 1 - i];
      fold_desc<kK>(best, rev);
    }
  }

#pragma unroll
  for (int s = 1; s < kG; s <<= 1) {
    T rev[kK];
#pragma unroll
    for (int i = 0; i < kK; ++i) rev[i] = __shfl_xor_sync(0xffffffffu, best[kK - 1 - i], s);
    fold_desc<kK>(best, rev);
  }

  if (!valid) return;
  Raw* vr = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* ir = a.indices + row * a.k;
#pragma unroll
  for (int i = 0; i < kK; ++i) {
    if (i % kG != g || i >= a.k) continue;
    const uint32_t key = C::key(best[i]);
    const uint32_t pos = C::pos(best[i]);
    // NaNs share one key: their bits come from the element itself.
    vr[i] = is_nan_key<Keys>(key, a.largest) ? xr[pos] : static_cast<Raw>(raw_of_order_key<Keys>(key, a.largest));
    ir[i] = pos;
  }
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
