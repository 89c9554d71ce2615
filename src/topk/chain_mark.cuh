// The list finish's mark on each row of the delegates' radix chain (launch.cuh: the screen
// zeroes the marks, the list finish sets them, the chain's kernels read them).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/launch.h"

namespace flyops::topk {

inline constexpr uint32_t kRowPending = 0;  // the list finish has not looked at the row yet
inline constexpr uint32_t kRowListed = 1;   // its list held the answer: the list finish wrote it
inline constexpr uint32_t kRowChained = 2;  // the chain's kernels select it

}  // namespace flyops::topk

#if defined(__CUDACC__)

namespace flyops::topk::detail {

// Called by a chain kernel launched dependent behind the list finish, in place of its grid
// wait: whether the row is the list finish's, so that this CTA may exit. It polls the row's
// mark rather than waiting for the grid before it: each wait returned ~1 us after that grid
// ended, one after another through the chain's three or four kernels (TopK v83). Exiting
// without the wait keeps the stream's order (tests/gpu/pdl_order_probe.cu: work after the
// chain still starts only after the list finish has ended). A row left to the chain waits
// for the grid before it, as before, before it reads anything. kWarpRow: the warp's lanes
// share the row, and one lane polls for them (the CTAs poll beside the list finish's reads).
template <bool kWarpRow>
FLYOPS_DEVICE bool chain_row_listed(const uint32_t* mark) {
  auto poll = [&] {
    uint32_t m;
    while ((m = static_cast<uint32_t>(tile::ld_acquire_gpu(reinterpret_cast<const int*>(mark)))) == kRowPending)
      __nanosleep(200);
    return m;
  };
  uint32_t m;
  if constexpr (kWarpRow) {
    m = (threadIdx.x & 31) == 0 ? poll() : 0u;
    m = __shfl_sync(0xffffffffu, m, 0);
  } else {
    m = poll();
  }
  if (m == kRowListed) return true;
  tile::grid_dependency_wait();
  return false;
}

}  // namespace flyops::topk::detail

#endif
