// Warp-wide integer max and lane masks (sm_80+ redux.sync: one instruction).
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

// Bits of the lanes below this one: popc(ballot & lanemask_lt) ranks a lane among voters.
FLYOPS_DEVICE uint32_t lanemask_lt() {
  uint32_t m;
  asm("mov.u32 %0, %%lanemask_lt;" : "=r"(m));
  return m;
}
#endif

}  // namespace flyops::tile
