// Screening for the delegates' finish (traits.h has the rule): one CTA per row samples
// kScreenPieces evenly spaced pieces of the row and takes the r-th best sampled key as the
// row's threshold. The maxima stream (delegate_kernel.cuh) then appends each element at or
// above it to the row's candidate list, and the finish kernel selects from that list alone
// when it holds at least k and at most its capacity; else from the group maxima, so the
// threshold only decides the speed, never the result.
//
// The threshold is a guess from a sample: a row whose sampled pieces hold its best
// elements gets a threshold too high (fewer than k candidates), a row of many equal keys
// one too low (past the capacity). Both finish through the group maxima.
#pragma once

#include <cstdint>

#include "flyops/tile/launch.h"
#include "keys.h"
#include "small_select.cuh"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct ScreenArgs {
  const void* x;
  int64_t n;           // elements per row, at least 2 screen_samples
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int rank;            // screen_rank: the sampled key that becomes the threshold
  bool largest;
  uint32_t* thresh;    // [rows] order keys at the element's width
  uint32_t* count;     // [rows] zeroed here: the stream counts its candidates into it
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

// Global namespace: profiler and ncu names start with flyops_. Warp w of W reads pieces w,
// w + W, w + 2W and w + 3W, one 16-byte vector per lane each.
template <typename Keys>
__global__ void __launch_bounds__(flyops::topk::kScreenThreads) flyops_topk_screen(flyops::topk::ScreenArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kPer = kScreenVecsPerThread;
  static_assert(kScreenPieces == kScreenThreads / 32 * kPer, "each warp reads kPer pieces");
  __shared__ SmallSelectSmem<kScreenThreads> s;
  // The stream may start its loads now; it waits for this grid before reading thresholds.
  flyops::tile::allow_dependent_launch();
  const int64_t row = blockIdx.x;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t nv = a.n / kVec;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride);
  uint4 buf[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) buf[u] = src[screen_piece(warp + u * (kScreenThreads / 32), nv) + lane];
  RegKeys<kPer * kVec> run;
  run.cnt = kPer * kVec;
  KeyRange range;
#pragma unroll
  for (int u = 0; u < kPer; ++u)
#pragma unroll
    for (int i = 0; i < kVec; ++i) {
      run[u * kVec + i] = order_key<Keys>(vec_element<Raw>(buf[u], i), a.largest);
      range.add(run[u * kVec + i]);
    }
  // The floor of a bin that holds the rank-th best sampled key, with rank to 1.5 rank of
  // them at or above it: a threshold needs no more (each round of the search is a pass
  // over the keys and two barriers).
  const uint32_t rank = static_cast<uint32_t>(a.rank);
  const SmallCut cut = small_cut<kScreenThreads>(run, range, rank, s, nullptr, rank + rank / 2);
  if (threadIdx.x == 0) {
    a.thresh[row] = cut.lo;
    a.count[row] = 0;
  }
}

#endif
