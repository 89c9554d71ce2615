// Per-thread asynchronous copies global -> shared (cp.async, 16 bytes, L1 bypassed): each
// thread's copies form groups in issue order; waiting for all but the newest kPending groups
// makes the thread's own older copies complete and visible to it, with no barrier and no
// registers holding the bytes in flight. A thread that reads back only what it copied itself
// needs nothing more; others need a barrier after the wait.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/mbarrier.h"

namespace flyops::tile {

#if defined(__CUDACC__)
// 16 bytes, both addresses 16-byte aligned; src_bytes 0 fills the destination with zeros
// without reading (a predicated-off copy that keeps the group counts uniform).
FLYOPS_DEVICE void cp_async_16(void* dst, const void* src, uint32_t src_bytes = 16) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes)
               : "memory");
}
FLYOPS_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
FLYOPS_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}
#endif

}  // namespace flyops::tile
