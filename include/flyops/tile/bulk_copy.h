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

// Asks L2 to fetch a contiguous global range (cp.async.bulk.prefetch.L2): one thread, no
// registers, no completion to wait for; a later load of the range then finds it in L2. For a
// CTA that may not read its data yet (a dependent launch before its grid wait).
FLYOPS_DEVICE void bulk_prefetch_l2(const void* src, uint32_t bytes) {
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
}

// This CTA's shared memory added element-wise into global fp32 (cp.reduce.async.bulk): the
// TMA unit reads `bytes` from src and adds them to dst in whole lines, in a bulk group that
// tma_store_commit / tma_store_wait (tma.h) commit and wait for; src must stay unchanged
// until the group has read it.
FLYOPS_DEVICE void bulk_reduce_add_s2g(float* dst, const void* src, uint32_t bytes) {
  asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;" ::"l"(dst),
               "r"(smem_addr(src)), "r"(bytes)
               : "memory");
}
#endif

}  // namespace flyops::tile
