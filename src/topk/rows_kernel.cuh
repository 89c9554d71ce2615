// Many rows of up to kRowsMaxN elements (between the warp kernel's rows and the long rows of
// the stream kernels): one warp a row, several rows a CTA, the row's order keys in the
// warp's shared memory, no global scratch. Where these rows took a CTA each (~7-10 us a row,
// the cluster kernel or the finish kernel) stock ran them faster (tuned_table.h).
//
//   load    16-byte vectors (or single elements where a row is not aligned) made order keys
//           as they land, with the histogram of their top 8 bits (shared atomics);
//   digits  the bin of the need-th best key from the 256 bins (8 a lane, one warp scan);
//           while that bin holds more than is needed and bits remain, the histogram of the
//           next 8 bits over the keys that share the bins chosen so far;
//   emit    one pass in position order: every key above the cut, and of the keys at it
//           (a whole bin, or the exact k-th key) the first `need`, so NaN ties keep the
//           lowest positions as in stock. Unsorted, straight to the output; sorted (k <=
//           kRowsSortMaxK), the composites (key, ~position) staged, then a bitonic sort in
//           the warp's registers (ranking them by counting cost k^2 / 32 a lane: 64 rows of
//           200 at k = 128 took 13 us against 8 at k = 64).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/vec.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "traits.h"

namespace flyops::topk {

struct RowsArgs {
  const void* x;
  int64_t rows;
  int n;  // <= kRowsMaxN
  int64_t row_stride;
  int k;  // <= n; sorted: <= kRowsSortMaxK
  bool largest;
  bool sorted;
  bool vec;  // every row 16-byte aligned and whole vectors
  RowsSmem smem;
  void* values;  // [rows, k]
  int64_t* indices;
};

#if defined(__CUDACC__)
namespace detail {

// Two 16-bit order keys from a word of two elements; one fp32 order key.
template <typename Keys>
FLYOPS_DEVICE uint32_t order_key_word(uint32_t w, bool largest) {
  uint32_t k;
  if constexpr (Keys::kBits == 16) k = ascending_key_pair<Keys>(w);
  else k = ascending_key_f32(w);
  return largest ? k : ~k;  // ~ complements both 16-bit halves as order_key does each
}

// The bin of the need-th best key of a 256-bin histogram (lane l holds bins 255 - 8l down to
// 248 - 8l, so lane 0 the best), the keys in the bins above it, and in it. Every lane calls
// it and gets the same answer; need <= the histogram's total.
struct BinPick {
  uint32_t bin, above, in;
};
FLYOPS_DEVICE BinPick pick_bin(const uint32_t* hist, uint32_t need) {
  const int lane = tile::lane_id();
  const uint4* h4 = reinterpret_cast<const uint4*>(hist) + 2 * (31 - lane);
  const uint4 lo = h4[0], hi = h4[1];
  const uint32_t c[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};  // bins 8 (31 - l) + j
  uint32_t s = 0;
#pragma unroll
  for (int j = 0; j < 8; ++j) s += c[j];
  const uint32_t incl = tile::warp_prefix_sum(s);
  const int owner = __ffs(__ballot_sync(0xffffffffu, incl >= need)) - 1;
  uint32_t before = incl - s, bin = 0, in = 0;
  bool found = false;
#pragma unroll
  for (int j = 7; j >= 0; --j) {
    if (!found && before + c[j] >= need) {
      found = true;
      bin = 8 * (31 - lane) + j;
      in = c[j];
    } else if (!found) {
      before += c[j];
    }
  }
  BinPick p;
  p.bin = __shfl_sync(0xffffffffu, bin, owner);
  p.above = __shfl_sync(0xffffffffu, before, owner);
  p.in = __shfl_sync(0xffffffffu, in, owner);
  return p;
}

// A warp's descending bitonic sort of 32 kE composites, element j * 32 + lane in v[j]: pairs
// 32 or more apart are a lane's own registers, closer ones a shuffle away.
template <int kE>
FLYOPS_DEVICE void warp_sort_desc(uint64_t (&v)[kE]) {
  const int lane = tile::lane_id();
#pragma unroll
  for (int size = 2; size <= 32 * kE; size <<= 1) {
#pragma unroll
    for (int s = size >> 1; s > 0; s >>= 1) {
#pragma unroll
      for (int j = 0; j < kE; ++j) {
        const bool desc = ((j * 32 + lane) & size) == 0;
        if (s >= 32) {
          const int js = s / 32;
          if ((j & js) == 0 && ((v[j] < v[j + js]) == desc)) {
            const uint64_t t = v[j];
            v[j] = v[j + js];
            v[j + js] = t;
          }
        } else {
          const uint64_t o = __shfl_xor_sync(0xffffffffu, v[j], s);
          const bool keep_max = ((lane & s) == 0) == desc;
          v[j] = keep_max ? (o > v[j] ? o : v[j]) : (o < v[j] ? o : v[j]);
        }
      }
    }
  }
}

// The k <= 32 kE staged composites sorted and written out (slot = position in the order).
template <typename Keys, int kE>
FLYOPS_DEVICE void sort_and_emit(const uint64_t* stage, int k, bool largest, const typename Keys::Raw* xr,
                                 typename Keys::Raw* vr, int64_t* ir) {
  const int lane = tile::lane_id();
  uint64_t v[kE];
#pragma unroll
  for (int j = 0; j < kE; ++j) v[j] = j * 32 + lane < k ? stage[j * 32 + lane] : 0;  // 0: below any composite
  warp_sort_desc<kE>(v);
#pragma unroll
  for (int j = 0; j < kE; ++j) {
    const int r = j * 32 + lane;
    if (r < k) {
      const uint32_t key = static_cast<uint32_t>(v[j] >> 32), pos = 0xffffffffu - static_cast<uint32_t>(v[j]);
      vr[r] = element_bits<Keys>(key, largest, xr, pos);
      ir[r] = pos;
    }
  }
}

}  // namespace detail
}  // namespace flyops::topk

// Global namespace: profiler and ncu names start with flyops_.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kRowsThreads) flyops_topk_rows(flyops::topk::RowsArgs a) {
  using namespace flyops;
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  using Key = std::conditional_t<Keys::kBits == 16, uint16_t, uint32_t>;
  constexpr int kVec = 16 / static_cast<int>(sizeof(Raw));
  extern __shared__ __align__(16) unsigned char rows_smem[];
  const int warp = tile::warp_id(), lane = tile::lane_id();
  const int64_t row = int64_t(blockIdx.x) * kRowsWarps + warp;
  if (row >= a.rows) return;  // whole warps leave together
  unsigned char* base = rows_smem + warp * a.smem.per_warp;
  uint32_t* hist = reinterpret_cast<uint32_t*>(base + a.smem.hist);
  uint64_t* stage = reinterpret_cast<uint64_t*>(base + a.smem.stage);
  Key* sk = reinterpret_cast<Key*>(base + a.smem.keys);
  const int n = a.n;
  const bool largest = a.largest;
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;

  auto zero_hist = [&] {
    uint4* h4 = reinterpret_cast<uint4*>(hist) + 2 * lane;
    h4[0] = make_uint4(0, 0, 0, 0);
    h4[1] = make_uint4(0, 0, 0, 0);
  };
  zero_hist();
  __syncwarp();

  // Load: keys into shared memory, the histogram of their top digit.
  constexpr int kTop = Keys::kBits - 8;
  if (a.vec) {
    const uint4* xv = reinterpret_cast<const uint4*>(xr);
    const int nv = n / kVec;
    uint4* skv = reinterpret_cast<uint4*>(sk);
    for (int v0 = 0; v0 < nv; v0 += 32 * kRowsUnroll) {
      uint4 w[kRowsUnroll];
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        const int v = v0 + u * 32 + lane;
        w[u] = tile::load_now(xv + (v < nv ? v : 0));
      }
#pragma unroll
      for (int u = 0; u < kRowsUnroll; ++u) {
        const int v = v0 + u * 32 + lane;
        if (v >= nv) break;
        uint4 kv;
        kv.x = detail::order_key_word<Keys>(w[u].x, largest);
        kv.y = detail::order_key_word<Keys>(w[u].y, largest);
        kv.z = detail::order_key_word<Keys>(w[u].z, largest);
        kv.w = detail::order_key_word<Keys>(w[u].w, largest);
        skv[v] = kv;
        const uint32_t words[4] = {kv.x, kv.y, kv.z, kv.w};
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          if constexpr (Keys::kBits == 16) {
            atomicAdd(&hist[(words[q] >> 8) & 0xffu], 1u);  // the low half's top digit
            atomicAdd(&hist[words[q] >> 24], 1u);
          } else {
            atomicAdd(&hist[words[q] >> kTop], 1u);
          }
        }
      }
    }
  } else {
    for (int i = lane; i < n; i += 32) {
      const uint32_t key = order_key<Keys>(tile::load_now(xr + i), largest);
      sk[i] = static_cast<Key>(key);
      atomicAdd(&hist[key >> kTop], 1u);
    }
  }
  __syncwarp();

  // Digits: the k-th best key's, 8 bits a round, until its bin is wanted whole or exact.
  uint32_t need = static_cast<uint32_t>(a.k), prefix = 0;
  int shift = kTop;
  bool whole = false;
  for (;;) {
    const detail::BinPick pick = detail::pick_bin(hist, need);
    need -= pick.above;
    prefix = (prefix << 8) | pick.bin;
    if (pick.in == need) whole = true;
    if (whole || shift == 0) break;
    __syncwarp();  // every lane has read the histogram
    zero_hist();
    __syncwarp();
    const int next = shift - 8;
    for (int i = lane; i < n; i += 32) {
      const uint32_t key = sk[i];
      if ((key >> shift) == prefix) atomicAdd(&hist[(key >> next) & 0xffu], 1u);
    }
    shift = next;
    __syncwarp();
  }

  // Emit in position order: keys above the cut, and the first `need` at it (all when whole).
  const uint32_t cut = whole ? prefix << shift : prefix;
  Raw* vr = static_cast<Raw*>(a.values) + row * a.k;
  int64_t* ir = a.indices + row * a.k;
  const uint32_t lt = tile::lanemask_lt();
  uint32_t taken = 0, ties = 0;
  for (int b = 0; b < n && taken < static_cast<uint32_t>(a.k); b += 32) {
    const int i = b + lane;
    const bool valid = i < n;
    const uint32_t key = valid ? static_cast<uint32_t>(sk[i]) : 0u;
    const bool above = valid && (whole ? key >= cut : key > cut);
    const bool at = valid && !whole && key == cut;
    const uint32_t at_b = __ballot_sync(0xffffffffu, at);
    const bool take = above || (at && ties + __popc(at_b & lt) < need);
    ties += __popc(at_b);
    const uint32_t take_b = __ballot_sync(0xffffffffu, take);
    const uint32_t slot = taken + __popc(take_b & lt);
    taken += __popc(take_b);
    if (take) {
      if (a.sorted) {
        stage[slot] = (uint64_t{key} << 32) | (0xffffffffu - static_cast<uint32_t>(i));
      } else {
        vr[slot] = element_bits<Keys>(key, largest, xr, i);
        ir[slot] = i;
      }
    }
  }
  if (!a.sorted) return;
  __syncwarp();
  // Sorted: a bitonic sort of the k composites (distinct: position breaks ties) in the warp.
  static_assert(kRowsSortMaxK == 256, "sorts of 32 to 256");
  if (a.k <= 32) detail::sort_and_emit<Keys, 1>(stage, a.k, largest, xr, vr, ir);
  else if (a.k <= 64) detail::sort_and_emit<Keys, 2>(stage, a.k, largest, xr, vr, ir);
  else if (a.k <= 128) detail::sort_and_emit<Keys, 4>(stage, a.k, largest, xr, vr, ir);
  else detail::sort_and_emit<Keys, 8>(stage, a.k, largest, xr, vr, ir);
}

namespace flyops::topk {
#endif

}  // namespace flyops::topk
