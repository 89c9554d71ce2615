// Warp-wide integer max (sm_80+ redux.sync: one instruction), sums over lanes, lane masks.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

#if defined(__CUDACC__)
FLYOPS_DEVICE uint32_t warp_max_u32(uint32_t v) { return __reduce_max_sync(0xffffffffu, v); }

// The largest 64-bit value over the warp: the high word first, then the low word among the
// lanes that hold that high word.
FLYOPS_DEVICE uint64_t warp_max_u64(uint64_t v) {
  const uint32_t hi = static_cast<uint32_t>(v >> 32);
  const uint32_t top = warp_max_u32(hi);
  const uint32_t lo = warp_max_u32(hi == top ? static_cast<uint32_t>(v) : 0u);
  return (uint64_t{top} << 32) | lo;
}

// Inclusive scans of a warp's values: over this lane and the lanes above it (suffix), or
// this lane and the lanes below it (prefix). All lanes call them.
FLYOPS_DEVICE uint32_t warp_suffix_sum(uint32_t v) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t o = __shfl_down_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) < 32 - off) v += o;  // against an immediate: no register per offset
  }
  return v;
}
FLYOPS_DEVICE uint32_t warp_prefix_sum(uint32_t v) {
#pragma unroll
  for (int off = 1; off < 32; off <<= 1) {
    const uint32_t o = __shfl_up_sync(0xffffffffu, v, off);
    if ((threadIdx.x & 31) >= off) v += o;
  }
  return v;
}

// Sum of the per-warp totals of the warps before (after) `warp`, of kWarps: a fixed-bound
// loop, so the shared-memory loads issue together instead of one after another.
template <int kWarps>
FLYOPS_DEVICE uint32_t sum_warps_before(const uint32_t* per_warp, int warp) {
  uint32_t s = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += w < warp ? per_warp[w] : 0u;
  return s;
}
template <int kWarps>
FLYOPS_DEVICE uint32_t sum_warps_after(const uint32_t* per_warp, int warp) {
  uint32_t s = 0;
#pragma unroll
  for (int w = 0; w < kWarps; ++w) s += w > warp ? per_warp[w] : 0u;
  return s;
}

// Bits of the lanes below this one: popc(ballot & lanemask_lt) ranks a lane among voters.
FLYOPS_DEVICE uint32_t lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}
#endif

}  // namespace flyops::tile
