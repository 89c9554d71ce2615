// Short rows with a small k (MoE routing: N <= 256, k <= 8): kG threads per row, kE
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
#include "flyops/tile/vec.h"
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
// kVec: 16-byte loads (rows 16-byte aligned, n a multiple of their width), else scalar.
template <typename Keys, int kG, int kE, int kK, bool kVec>
__global__ void __launch_bounds__(flyops::topk::kGroupThreads) flyops_topk_group(flyops::topk::GroupArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  using C = Composite<Keys>;
  using T = typename C::T;
  static_assert(kG >= 1 && kG <= 32 && (kG & (kG - 1)) == 0, "groups tile a warp");
  static_assert(kE % kK == 0, "whole chunks");
  constexpr int kRowsPerCta = kGroupThreads / kG;
  constexpr int kV = kVec ? 16 / int(sizeof(Raw)) : 1;  // elements per load
  static_assert(kE % kV == 0, "whole vectors");

  // Rows past the end still take part in the shuffles (full-warp masks) on row 0's
  // elements; they write nothing.
  const int g = threadIdx.x % kG;
  const int64_t row = int64_t(blockIdx.x) * kRowsPerCta + threadIdx.x / kG;
  const bool valid = row < a.rows;
  const int n = static_cast<int>(a.n);
  const Raw* xr = static_cast<const Raw*>(a.x) + (valid ? row : 0) * a.row_stride;

  // Load j of each thread of a group covers adjacent elements (or vectors): element jj of
  // thread g sits at position off(jj) + g kV. All loads are issued before the first key
  // is made (left to itself, the compiler interleaves them with the sorts and a row's
  // loads wait for each other); loads past the row read its start.
  constexpr auto off = [](int jj) { return (jj / kV) * kG * kV + jj % kV; };
  const int base = g * kV;
  constexpr int kWords = kE * int(sizeof(Raw)) / 4;
  uint32_t word[kWords];
#pragma unroll
  for (int j = 0; j < kE / kV; ++j) {
    const int i = off(j * kV) + base;
    if constexpr (kVec) {
      const uint4 w = tile::load_now(reinterpret_cast<const uint4*>(xr + (i < n ? i : 0)));
      word[4 * j] = w.x, word[4 * j + 1] = w.y, word[4 * j + 2] = w.z, word[4 * j + 3] = w.w;
    } else if constexpr (sizeof(Raw) == 4) {
      word[j] = tile::load_now(xr + (i < n ? i : 0));
    } else {
      const uint32_t e = tile::load_now(xr + (i < n ? i : 0));
      word[j / 2] = j % 2 == 0 ? e : word[j / 2] | (e << 16);
    }
  }

  // 16-bit composites are made in the thread's own frame (position off(jj), known at
  // compile time, so one LOP3 or shift each); its kK best move to the row's frame after the
  // local sort, by one subtraction each. fp32 composites carry their position in a word of
  // their own, so they start in the row's frame. Elements past the row become 0 only where
  // the row does not fill its group.
  constexpr bool kLocalFrame = Keys::kBits == 16;
  const uint32_t flip = a.largest ? 0u : 0xffffffffu;
  const int lim = n - base;  // elements with off(jj) < lim are in the row
  const bool full = n == kG * kE;
  T best[kK];
  if constexpr (std::is_same_v<Keys, FloatKeys<32>> && kK == 1) {
    // Arg-max: the best 32-bit key, then the lowest position holding it (a 64-bit max per
    // element costs four instructions). Ascending keys, their max or min by direction, so
    // the direction costs nothing per element; past the row, keys that never win.
    const bool largest = a.largest;
    const uint32_t never = largest ? 0u : 0xffffffffu;
    uint32_t key[kE];
#pragma unroll
    for (int jj = 0; jj < kE; ++jj) key[jj] = ascending_key_f32(word[jj]);
    if (!full) {
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) key[jj] = off(jj) < lim ? key[jj] : never;
    }
    uint32_t m = key[0];
#pragma unroll
    for (int jj = 1; jj < kE; ++jj) m = largest ? max(m, key[jj]) : min(m, key[jj]);
    int p = off(kE - 1);
#pragma unroll
    for (int jj = kE - 2; jj >= 0; --jj) p = key[jj] == m ? off(jj) : p;
    best[0] = lim > 0 ? C::make(m ^ flip, p + base) : T{0};
  } else {
    T v[kE];
    if constexpr (Keys::kBits == 16) {
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        const uint32_t kp = ascending_key_pair<Keys>(word[w]) ^ flip;
        v[2 * w] = (kp << 16) | (0xffffu - off(2 * w));
        v[2 * w + 1] = (kp & 0xffff0000u) | (0xffffu - off(2 * w + 1));
      }
    } else {
      static_assert(std::is_same_v<Keys, FloatKeys<32>>, "fp32 keys");
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) v[jj] = C::make(ascending_key_f32(word[jj]) ^ flip, off(jj) + base);
    }
    if (!full) {
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) v[jj] = off(jj) < lim ? v[jj] : T{0};
    }
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
  }
  // To the row's frame: the same offset for the whole list keeps its order.
  if constexpr (kLocalFrame) {
#pragma unroll
    for (int i = 0; i < kK; ++i) best[i] = best[i] != 0 ? best[i] - T(base) : T{0};
  }

#pragma unroll
  for (int s = 1; s < kG; s <<= 1) {
    T rev[kK];
#pragma unroll
    for (int i = 0; i < kK; ++i) rev[i] = __shfl_xor_sync(0xffffffffu, best[kK - 1 - i], s);
    fold_desc<kK>(best, rev);
  }

  // Output i of the row comes from thread i % kG. With one output per thread (kG >= kK) a
  // warp's stores already cover adjacent elements. With several, they would go out as
  // single-element stores k apart, so they pass through shared memory: a CTA's rows are
  // consecutive, so its outputs form one block, written with adjacent threads on adjacent
  // elements.
  auto value_of = [&](uint32_t key, uint32_t p) -> Raw { return element_bits<Keys>(key, a.largest, xr, p); };
  if constexpr (kG >= kK) {
    T mine = 0;  // best[g], chosen without a dynamic register index
#pragma unroll
    for (int i = 0; i < kK; ++i) mine = i == g ? best[i] : mine;
    if (valid && g < a.k) {
      const uint32_t key = C::key(mine), p = C::pos(mine);
      static_cast<Raw*>(a.values)[row * a.k + g] = value_of(key, p);
      a.indices[row * a.k + g] = p;
    }
  } else {
    __shared__ Raw s_val[kRowsPerCta * kK];
    __shared__ int64_t s_idx[kRowsPerCta * kK];
    const int local = threadIdx.x / kG;
    if (valid) {
#pragma unroll
      for (int i = 0; i < kK; ++i) {
        if (i % kG != g || i >= a.k) continue;
        const uint32_t key = C::key(best[i]), p = C::pos(best[i]);
        s_val[local * a.k + i] = value_of(key, p);
        s_idx[local * a.k + i] = p;
      }
    }
    __syncthreads();
    const int64_t row0 = int64_t(blockIdx.x) * kRowsPerCta;
    const int rows_here = static_cast<int>(a.rows - row0 < kRowsPerCta ? a.rows - row0 : kRowsPerCta);
    const int count = rows_here * a.k;
    Raw* vr = static_cast<Raw*>(a.values) + row0 * a.k;
    int64_t* ir = a.indices + row0 * a.k;
    for (int t = threadIdx.x; t < count; t += kGroupThreads) {
      vr[t] = s_val[t];
      ir[t] = s_idx[t];
    }
  }
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
