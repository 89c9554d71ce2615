// mbarriers: shared-memory barriers that count arrivals and expected transaction bytes
// (TMA completions) per phase; waits name the phase by its parity.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

#if defined(__CUDACC__)
FLYOPS_DEVICE uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// The first 1024-byte boundary at or after p in shared memory (the 128-byte swizzle's atom,
// where TMA boxes and wgmma tiles start); kernels ask for 1024 bytes of slack for it.
FLYOPS_DEVICE unsigned char* align_1024(unsigned char* p) { return p + ((1024u - (smem_addr(p) & 1023u)) & 1023u); }

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

// One test of the phase with this parity, acquiring at cluster scope: once it has
// completed, what a peer CTA released with its arrival (mbarrier_arrive_cluster) is visible.
FLYOPS_DEVICE bool mbarrier_try_wait_cluster(uint64_t* bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n\t.reg .pred p;\n\t"
      "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n\t"
      "selp.u32 %0, 1, 0, p;\n}"
      : "=r"(done)
      : "r"(smem_addr(bar)), "r"(parity)
      : "memory");
  return done != 0;
}
FLYOPS_DEVICE void mbarrier_wait_cluster(uint64_t* bar, uint32_t parity) {
  while (!mbarrier_try_wait_cluster(bar, parity)) {
  }
}

// A plain arrival (consumers freeing a slot).
FLYOPS_DEVICE void mbarrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_addr(bar)) : "memory");
}

// An arrival on the same barrier in cluster CTA `rank` (releasing this CTA's reads first).
FLYOPS_DEVICE void mbarrier_arrive_cluster(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// The same arrival with the default (CTA-scope) release: enough to hand a slot that this
// CTA only read back to a peer's TMA writes, and much cheaper in a mainloop.
FLYOPS_DEVICE void mbarrier_arrive_peer(uint64_t* bar, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_addr(bar)), "r"(rank));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}
#endif

}  // namespace flyops::tile
