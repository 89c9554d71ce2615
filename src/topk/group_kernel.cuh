// Short rows with a small k (MoE routing: N <= 256, k <= 8): kG threads per row, kE
// elements each in registers, no global scratch. Every element becomes one
// composite integer, its order key above its complemented position, so composites are
// unique and the larger one is the better element; NaNs, which share one key, then go to
// the lowest positions as in stock. Each thread sorts chunks of kK composites with a
// bitonic network and folds them into its best kK; the group then merges lists across
// threads by xor shuffles. Merging two descending lists A and B into their best kK is
// max(A[i], B[kK-1-i]) (a bitonic sequence) and one bitonic merge. All threads of a group
// end with the same sorted list, so each writes its share of the k outputs.
//
// Cost per row is kG * (sorting and merging) instructions instead of the warp kernel's k
// warp-wide rounds, and a warp holds 32 / kG rows at once. Where the networks cost more
// than what they sort (fp32's 64-bit composites; many long 16-bit rows), a threshold form
// skips them: a key at most the row's k-th largest (from the group's maxima), the few
// elements at or above it ranked among themselves in shared memory (threshold_select).
// Heavy ties leave it for the networks. Elements are made into keys two per word for
// 16-bit dtypes, and composites in each thread's own frame (positions known at compile
// time), so preparing an element costs a few instructions.
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
  bool threshold;  // the threshold form where the kernel has one (kK >= 2, kG >= 8)
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
  T hi, lo;
  if constexpr (sizeof(T) == 8) {
    // One 64-bit compare (two ISETPs) for both selects: written as a max and a min, the
    // compiler makes a compare for each, 8 instructions a pair instead of 6.
    asm("{\n\t.reg .pred p;\n\t"
        "setp.gt.u64 p, %2, %3;\n\t"
        "selp.b64 %0, %2, %3, p;\n\t"
        "selp.b64 %1, %3, %2, p;\n\t}"
        : "=l"(hi), "=l"(lo)
        : "l"(a), "l"(b));
  } else {
    hi = a > b ? a : b;
    lo = a > b ? b : a;
  }
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

// The k-th largest (1 <= k <= kG kH) of the kG kH values a group holds, kH per thread
// (thread g's value h is element g kH + h): a bitonic sort across the group, by xor
// shuffles; every thread of the group gets the answer.
template <int kG, int kH>
FLYOPS_DEVICE uint32_t group_kth_largest(uint32_t (&m)[kH], int k, int g) {
  constexpr int kN = kG * kH;
#pragma unroll
  for (int size = 2; size <= kN; size <<= 1) {
#pragma unroll
    for (int stride = size / 2; stride > 0; stride >>= 1) {
#pragma unroll
      for (int h = 0; h < kH; ++h) {
        const int e = g * kH + h;
        const bool desc = (e & size) == 0;
        if (stride >= kH) {
          const uint32_t o = __shfl_xor_sync(0xffffffffu, m[h], stride / kH);
          m[h] = ((e & stride) == 0) == desc ? max(m[h], o) : min(m[h], o);
        } else if ((h & stride) == 0) {
          compare_swap(m[h], m[h + stride], desc);
        }
      }
    }
  }
  uint32_t mine = 0;  // m[(k - 1) % kH] by masks: a select here became a stack array
#pragma unroll
  for (int h = 0; h < kH; ++h) mine |= m[h] & (0u - uint32_t((k - 1) % kH == h));
  return __shfl_sync(0xffffffffu, mine, (k - 1) / kH, kG);
}

// The threshold form of the group kernel (k >= 2, eight threads a row or more; TopK v37,
// v43). The k-th largest key among P maxima per thread (distinct elements) is at most the
// row's k-th largest key, so every element of the answer is at or above it; on random rows
// about k + 2 elements are. They go to shared memory as composites, and each one's rank
// among them is its output slot. Returns false when some row has more than
// kGroupFilterCap candidates (heavy ties); the caller then runs the sorting networks.
//  - 2 kK <= kG (k <= 4 at eight threads a row): P = 1, the thread's whole run, and about
//    one candidate a thread. The thread marks its own in a mask, puts all its words in
//    shared memory (a few 16-byte stores) and copies the marked ones; the fallback is
//    decided per warp (the networks' output needs no CTA barrier when kG >= kK).
//  - Else P = 2, the half-runs, and a store per candidate; the fallback is decided per
//    CTA. The mask-and-copy form measured 2-7% slower here (fp32 rows of 64-128,
//    k = 6-8).
// ord[jj]: 16-bit composites in the thread's frame (key in the top half) or fp32 keys;
// composite(w, jj): the row-frame composite of element jj whose ord is w.
template <typename Keys, int kG, int kE, int kK, typename Ord, typename MakeComposite, typename Live, typename ValueOf>
FLYOPS_DEVICE bool threshold_select(const Ord& ord, MakeComposite&& composite, Live&& live, ValueOf&& value_of,
                                    const GroupArgs& a, int g, int64_t row, bool valid) {
  using C = Composite<Keys>;
  using T = typename C::T;
  using Raw = typename Keys::Raw;
  constexpr bool k16 = Keys::kBits == 16;
  constexpr int kP = 2 * kK <= kG ? 1 : 2;  // maxima per thread
  constexpr int kRun = kE / kP;
  static_assert(kG >= kK, "the networks' output has no CTA barrier, so a warp may fall back alone");
  uint32_t pm[kP];
#pragma unroll
  for (int p = 0; p < kP; ++p) pm[p] = ord[p * kRun];
#pragma unroll
  for (int jj = 1; jj < kRun; ++jj)
#pragma unroll
    for (int p = 0; p < kP; ++p) pm[p] = max(pm[p], ord[p * kRun + jj]);
  if constexpr (k16)
#pragma unroll
    for (int p = 0; p < kP; ++p) pm[p] >>= 16;
  const uint32_t t = group_kth_largest<kG, kP>(pm, a.k, g);
  const uint32_t tc = k16 ? t << 16 : t;
  // The candidates of this thread and of those before it in the group (an inclusive scan),
  // and the row's total.
  int total = 0;
  auto scan = [&](int mine) {
    int incl = mine;
#pragma unroll
    for (int d = 1; d < kG; d <<= 1) {
      const int o = __shfl_up_sync(0xffffffffu, incl, d, kG);
      incl += g >= d ? o : 0;
    }
    total = __shfl_sync(0xffffffffu, incl, kG - 1, kG);
    return incl;
  };
  __shared__ T cand[kGroupThreads / kG][kGroupFilterCap + 1];  // + 1: rows in distinct banks
  T* buf = cand[threadIdx.x / kG];
  if constexpr (kP == 1) {
    static_assert(kG * kE > kGroupFilterCap, "a threshold of 0, which the padding passes, overflows the list");
    static_assert(kE % 4 == 0 && kE <= 32, "whole 16-byte stores; the mask is one word");
    uint32_t mask = 0;
#pragma unroll
    for (int jj = 0; jj < kE; ++jj) mask |= ord[jj] >= tc ? 1u << jj : 0u;
    const int mine = __popc(mask);
    const int incl = scan(mine);
    if (__any_sync(0xffffffffu, total > kGroupFilterCap)) return false;
    int o = incl - mine;
    // Slot-major, so that a warp's 16-byte stores are contiguous.
    __shared__ uint4 words[kE / 4][kGroupThreads];
#pragma unroll
    for (int q = 0; q < kE / 4; ++q)
      words[q][threadIdx.x] = make_uint4(ord[4 * q], ord[4 * q + 1], ord[4 * q + 2], ord[4 * q + 3]);
    const uint32_t* mine_w = reinterpret_cast<const uint32_t*>(&words[0][threadIdx.x]);
    for (uint32_t m = mask; m != 0; m &= m - 1) {
      const int jj = __ffs(m) - 1;
      buf[o++] = composite(mine_w[(jj / 4) * kGroupThreads * 4 + jj % 4], jj);
    }
  } else {
    auto pass = [&](int jj) { return ord[jj] >= tc && live(jj); };
    int mine = 0;
#pragma unroll
    for (int jj = 0; jj < kE; ++jj) mine += pass(jj);
    const int incl = scan(mine);
    if (__syncthreads_or(total > kGroupFilterCap)) return false;
    int o = incl - mine;
#pragma unroll
    for (int jj = 0; jj < kE; ++jj)
      if (pass(jj)) buf[o++] = composite(ord[jj], jj);
  }
  __syncwarp();
  for (int c = g; c < total; c += kG) {
    const T mc = buf[c];
    int rank = 0;
    for (int j = 0; j < total; ++j) rank += buf[j] > mc;
    if (valid && rank < a.k) {
      const uint32_t key = C::key(mc), p = C::pos(mc);
      static_cast<Raw*>(a.values)[row * a.k + rank] = value_of(key, p);
      a.indices[row * a.k + rank] = p;
    }
  }
  return true;
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

  // ord[jj], what the thresholds and networks compare. 16-bit rows: the composite, made in
  // the thread's own frame (position off(jj), known at compile time: one LOP3 or shift
  // each) and moved to the row's frame once selected, by one subtraction. fp32 rows: the
  // 32-bit order key; their composites carry the position in a word of their own and are
  // made in the row's frame when needed. Elements past the row are 0, and are masked
  // (`live`) only where the row does not fill its group.
  constexpr bool kLocalFrame = Keys::kBits == 16;
  const uint32_t flip = a.largest ? 0u : 0xffffffffu;
  const int lim = n - base;  // elements with off(jj) < lim are in the row
  const bool full = n == kG * kE;
  auto live = [&](int jj) { return full || off(jj) < lim; };
  auto make_ord = [&](const uint32_t (&word)[kWords], uint32_t (&ord)[kE]) {
    if constexpr (Keys::kBits == 16) {
#pragma unroll
      for (int w = 0; w < kWords; ++w) {
        const uint32_t kp = ascending_key_pair<Keys>(word[w]) ^ flip;
        ord[2 * w] = (kp << 16) | (0xffffu - off(2 * w));
        ord[2 * w + 1] = (kp & 0xffff0000u) | (0xffffu - off(2 * w + 1));
      }
    } else {
      static_assert(std::is_same_v<Keys, FloatKeys<32>>, "fp32 keys");
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) ord[jj] = ascending_key_f32(word[jj]) ^ flip;
    }
    if (!full) {
#pragma unroll
      for (int jj = 0; jj < kE; ++jj) ord[jj] = off(jj) < lim ? ord[jj] : 0u;
    }
  };
  auto value_of = [&](uint32_t key, uint32_t p) -> Raw { return element_bits<Keys>(key, a.largest, xr, p); };

  uint32_t word[kWords];  // the thread's elements as loaded (layout and order: off, above)
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
    uint32_t ord[kE];
    make_ord(word, ord);
    // The row-frame composite of element jj, whose ord is w (jj may be a runtime value).
    auto composite = [&](uint32_t w, int jj) -> T {
      if constexpr (kLocalFrame) return w - uint32_t(base);
      else return C::make(w, off(jj) + base);
    };
    if constexpr (kK >= 2 && kG >= 8) {
      if (a.threshold && threshold_select<Keys, kG, kE, kK>(ord, composite, live, value_of, a, g, row, valid))
        return;  // the whole warp (or CTA)
    }
    T v[kE];
#pragma unroll
    for (int jj = 0; jj < kE; ++jj) v[jj] = live(jj) ? (kLocalFrame ? T(ord[jj]) : composite(ord[jj], jj)) : T{0};
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
  // elements. The lists go there as composites and each output's thread makes its value:
  // made by the row's thread, k values were a serial chain of ~25 instructions each (a select
  // per slot, a NaN's load), the whole call's latency where a few rows run.
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
    __shared__ T s_best[kRowsPerCta * kK];
    const int local = threadIdx.x / kG;
    if (valid) {
#pragma unroll
      for (int i = 0; i < kK; ++i)
        if (i % kG == g && i < a.k) s_best[local * a.k + i] = best[i];
    }
    __syncthreads();
    const int64_t row0 = int64_t(blockIdx.x) * kRowsPerCta;
    const int rows_here = static_cast<int>(a.rows - row0 < kRowsPerCta ? a.rows - row0 : kRowsPerCta);
    const int count = rows_here * a.k;
    Raw* vr = static_cast<Raw*>(a.values) + row0 * a.k;
    int64_t* ir = a.indices + row0 * a.k;
    for (int t = threadIdx.x; t < count; t += kGroupThreads) {
      const T c = s_best[t];
      const uint32_t key = C::key(c), p = C::pos(c);
      // The row (a division by k) is read only for a NaN: element_bits's load branch.
      vr[t] = element_bits<Keys>(key, a.largest, static_cast<const Raw*>(a.x) + (row0 + t / a.k) * a.row_stride, p);
      ir[t] = p;
    }
  }
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
