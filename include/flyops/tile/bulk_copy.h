// The non-tensor TMA copy (cp.async.bulk): one thread moves a contiguous global range into
// shared memory, with no registers in between; the transfer completes on an mbarrier
// (mbarrier.h) that the CTA waits on. Global source and shared destination must be
// 16-byte aligned, the size a multiple of 16.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/mbarrier.h"

namespace flyops::tile {

#if defined(__CUDACC__)
// Global -> this CTA's shared memory, completing `bytes` of transaction on `bar`.
FLYOPS_DEVICE void bulk_copy_g2s(void* dst, const void* src, uint32_t bytes, uint64_t* bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
          smem_addr(dst)),
      "l"(src), "r"(bytes), "r"(smem_addr(bar))
      : "memory");
}
#endif

}  // namespace flyops::tile
