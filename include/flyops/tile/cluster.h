// Thread block clusters (sm_90): a cluster's CTAs run at once on neighbouring SMs and can
// read each other's shared memory (distributed shared memory, DSMEM).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

#if defined(__CUDACC__)
FLYOPS_DEVICE uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
// CTAs in this CTA's cluster (1 for a launch without clusters).
FLYOPS_DEVICE uint32_t cluster_size() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(r));
  return r;
}
FLYOPS_DEVICE uint32_t cluster_index() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%clusterid.x;" : "=r"(r));
  return r;
}
FLYOPS_DEVICE uint32_t cluster_count() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%nclusterid.x;" : "=r"(r));
  return r;
}

// Every thread of every CTA in the cluster arrives, then waits for all: shared-memory
// writes before it (release) are visible to loads after it in any CTA of the cluster
// (acquire). All threads of each warp must call it.
FLYOPS_DEVICE void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n\t"
      "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// Split form of cluster_sync: arrive early (release: this thread's earlier writes are
// visible after the matching wait), do independent work, then wait before the first access
// that needs the peers' earlier writes.
FLYOPS_DEVICE void cluster_arrive() {
  asm volatile("barrier.cluster.arrive.release.aligned;" ::: "memory");
}
FLYOPS_DEVICE void cluster_wait() {
  asm volatile("barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

// The shared::cluster address of `local` (this CTA's shared memory) in cluster CTA `rank`,
// where the same variable lives at the same offset. Rank == own rank is legal.
FLYOPS_DEVICE uint32_t peer_addr(const void* local, uint32_t rank) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  return remote;
}
FLYOPS_DEVICE uint32_t peer_load_u32(uint32_t remote) {
  uint32_t v;
  asm volatile("ld.shared::cluster.u32 %0, [%1];" : "=r"(v) : "r"(remote) : "memory");
  return v;
}
FLYOPS_DEVICE uint64_t peer_load_u64(uint32_t remote) {
  uint64_t v;
  asm volatile("ld.shared::cluster.u64 %0, [%1];" : "=l"(v) : "r"(remote) : "memory");
  return v;
}
FLYOPS_DEVICE void peer_store_u32(uint32_t remote, uint32_t v) {
  asm volatile("st.shared::cluster.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
FLYOPS_DEVICE void peer_store_u64(uint32_t remote, uint64_t v) {
  asm volatile("st.shared::cluster.u64 [%0], %1;" ::"r"(remote), "l"(v) : "memory");
}
// Two floats to 8-byte-aligned shared memory of a cluster CTA (fire and forget: made
// visible to that CTA by the next cluster barrier).
FLYOPS_DEVICE void peer_store_f32x2(uint32_t remote, float x, float y) {
  asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(remote), "f"(x), "f"(y) : "memory");
}
// Atomic add without a result (a reduction) and with the old value.
FLYOPS_DEVICE void peer_red_add(uint32_t remote, uint32_t v) {
  asm volatile("red.shared::cluster.add.u32 [%0], %1;" ::"r"(remote), "r"(v) : "memory");
}
FLYOPS_DEVICE uint32_t peer_atomic_add(uint32_t remote, uint32_t v) {
  uint32_t old;
  asm volatile("atom.shared::cluster.add.u32 %0, [%1], %2;" : "=r"(old) : "r"(remote), "r"(v) : "memory");
  return old;
}

// Asynchronous remote operations that complete on the destination CTA's mbarrier
// (`remote_bar`, a shared::cluster address) with their byte count, instead of becoming
// visible at the next cluster barrier: the waiter on that mbarrier sees them (as it sees a
// TMA load), and the sender needs no release fence. The barrier's phase must expect the
// bytes (mbarrier_arrive_expect_tx, locally, or mbarrier_arrive_expect_tx_peer).
FLYOPS_DEVICE void peer_red_add_async(uint32_t remote, uint32_t v, uint32_t remote_bar) {
  asm volatile("red.async.relaxed.cluster.shared::cluster.mbarrier::complete_tx::bytes.add.u32 [%0], %1, [%2];" ::"r"(
                   remote),
               "r"(v), "r"(remote_bar)
               : "memory");
}
FLYOPS_DEVICE void peer_store_async_v4(uint32_t remote, uint4 v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];" ::"r"(
                   remote),
               "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_bar)
               : "memory");
}
FLYOPS_DEVICE void peer_store_async_u64(uint32_t remote, uint64_t v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b64 [%0], %1, [%2];" ::"r"(remote), "l"(v),
               "r"(remote_bar)
               : "memory");
}
FLYOPS_DEVICE void peer_store_async_u32(uint32_t remote, uint32_t v, uint32_t remote_bar) {
  asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.b32 [%0], %1, [%2];" ::"r"(remote), "r"(v),
               "r"(remote_bar)
               : "memory");
}
// An arrival on a cluster CTA's mbarrier (shared::cluster address) announcing `bytes` of
// asynchronous operations on its phase, relaxed: it orders nothing of this thread's own
// (what it sends goes by the operations above, which the tx count covers).
FLYOPS_DEVICE void mbarrier_arrive_expect_tx_peer(uint32_t remote_bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.relaxed.cluster.shared::cluster.b64 _, [%0], %1;" ::"r"(remote_bar),
               "r"(bytes)
               : "memory");
}

// Reads the float at `local` (an address in this CTA's shared memory) in the shared memory
// of cluster CTA `rank`, where the same variable lives at the same offset.
FLYOPS_DEVICE float load_peer(const float* local, uint32_t rank) {
  const uint32_t addr = static_cast<uint32_t>(__cvta_generic_to_shared(local));
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(addr), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}

// Sum of one float per CTA over the cluster, in rank order (the same bits in every CTA).
// `slot` is a shared-memory float this CTA writes; callers alternate two slots between
// consecutive calls, so one barrier per call suffices: a CTA writes a slot again only after
// the next call's barrier, which every peer reaches after its reads of this one.
template <int kCluster>
FLYOPS_DEVICE float cluster_sum(float cta_value, float* slot) {
  if (threadIdx.x == 0) *slot = cta_value;
  cluster_sync();
  float total = 0.f;
#pragma unroll
  for (int r = 0; r < kCluster; ++r) total += load_peer(slot, r);
  return total;
}
#endif

}  // namespace flyops::tile
