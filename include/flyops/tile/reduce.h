// Sums across threads. Results are identical on every participating thread and do not
// depend on timing (fixed butterfly and fixed cross-warp order), so they are deterministic.
#pragma once

#include "flyops/tile/arch.h"

namespace flyops::tile {

// Sum over aligned groups of kWidth lanes (kWidth a power of two <= 32). All 32 lanes of
// the warp must call it.
template <int kWidth>
FLYOPS_DEVICE float group_allreduce_sum(float v) {
  static_assert(is_pow2(kWidth) && kWidth <= kWarpSize, "group width");
#pragma unroll
  for (int offset = kWidth / 2; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Sum over the whole CTA of kThreads threads (a multiple of 32). `smem` holds kThreads/32
// floats. Ends with a barrier so the same buffer can be reused by the next call.
template <int kThreads>
FLYOPS_DEVICE float block_allreduce_sum(float v, float* smem) {
  static_assert(kThreads % kWarpSize == 0, "whole warps");
  constexpr int kWarps = kThreads / kWarpSize;
  v = group_allreduce_sum<kWarpSize>(v);
  if constexpr (kWarps == 1) {
    return v;
  } else {
    if (lane_id() == 0) smem[warp_id()] = v;
    __syncthreads();
    float total = 0.f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) total += smem[w];
    __syncthreads();
    return total;
  }
}

// A row spread over kThreadsPerRow threads: a lane group when it fits in a warp, else the CTA.
template <int kThreadsPerRow, int kThreadsPerCta>
FLYOPS_DEVICE float row_allreduce_sum(float v, float* smem) {
  if constexpr (kThreadsPerRow <= kWarpSize) {
    return group_allreduce_sum<kThreadsPerRow>(v);
  } else {
    static_assert(kThreadsPerRow == kThreadsPerCta, "rows wider than a warp own the CTA");
    return block_allreduce_sum<kThreadsPerCta>(v, smem);
  }
}

}  // namespace flyops::tile
