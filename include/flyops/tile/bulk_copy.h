// mbarrier and the non-tensor TMA copy (cp.async.bulk): one thread moves a contiguous
// global range into shared memory, with no registers in between; the transfer completes
// on an mbarrier that the CTA waits on. Global source and shared destination must be
// 16-byte aligned, the size a multiple of 16.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

#if defined(__CUDACC__)
FLYOPS_DEVICE uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// One thread initialises; make it visible to the async proxy before any copy names it.
FLYOPS_DEVICE void mbarrier_init(uint64_t* bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(arrivals) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

// Arrive and announce `bytes` of transfers that will complete on this phase.
FLYOPS_DEVICE void mbarrier_arrive_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes)
               : "memory");
}

// Block until the phase with this parity has completed.
FLYOPS_DEVICE void mbarrier_wait(uint64_t* bar, uint32_t parity) {
  asm volatile(
      "{\n\t.reg .pred done;\n"
      "WAIT_%=:\n\t"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
      "@!done bra WAIT_%=;\n}" ::"r"(smem_addr(bar)),
      "r"(parity)
      : "memory");
}

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
