// wgmma operand descriptors and the warpgroup-level fences, and register reallocation
// between warpgroup roles (setmaxnreg). The descriptor is plain bit packing (host-testable);
// the rest is sm_90a device code.
//
// Descriptor (PTX ISA, "matrix descriptor"): bits 0-13 start address >> 4, 16-29 leading
// dimension byte offset >> 4, 32-45 stride dimension byte offset >> 4, 49-51 base offset,
// 62-63 swizzle mode (layout.h's Swizzle values).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/layout.h"

namespace flyops::tile {

constexpr FLYOPS_HD uint64_t wgmma_desc(uint32_t smem_addr, uint32_t lead_bytes, uint32_t stride_bytes,
                                        Swizzle mode, uint32_t base_offset = 0) {
  return (uint64_t{(smem_addr >> 4) & 0x3fffu}) | (uint64_t{(lead_bytes >> 4) & 0x3fffu} << 16) |
         (uint64_t{(stride_bytes >> 4) & 0x3fffu} << 32) | (uint64_t{base_offset & 7u} << 49) |
         (uint64_t{static_cast<uint32_t>(mode)} << 62);
}

// The descriptor of a K-major SmemTile operand: 8-row core-matrix groups one atom
// (8 rows x span) apart; the leading offset is unused by the swizzled K-major modes.
template <typename Tile>
constexpr FLYOPS_HD uint64_t wgmma_desc_kmajor(uint32_t smem_addr) {
  return wgmma_desc(smem_addr, 16u, 8u * Tile::kRowBytes, Tile::kMode);
}

// The descriptor of an MN-major operand (transposed, for 16-bit types only): TMA writes it
// as blocks of `span` bytes along M (or N) by the K rows, each K row one swizzle row.
// Within a block the 8-row atoms along K are 8 * span apart (stride offset); the blocks
// along M/N are `block_bytes` apart (leading offset), i.e. K_tile * span for a stage that
// stacks the blocks one after another.
template <Swizzle kMode>
constexpr FLYOPS_HD uint64_t wgmma_desc_mnmajor(uint32_t smem_addr, uint32_t block_bytes) {
  return wgmma_desc(smem_addr, block_bytes, 8u * swizzle_span(kMode), kMode);
}

#if defined(__CUDACC__)
// Before the first wgmma that reads registers or shared memory written by this warpgroup.
FLYOPS_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
FLYOPS_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most kPending committed groups are still in flight.
template <int kPending>
FLYOPS_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory");
}

// Pins registers that an in-flight wgmma reads or writes: the compiler may neither move
// their other uses across this point nor hand their registers to something else before it.
// Put one after issuing (the A fragment of an RS wgmma, the accumulators) and one after the
// wait that completes it.
template <int N>
FLYOPS_DEVICE void fence_operands(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
FLYOPS_DEVICE void fence_operands(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Warpgroup register budgets: producers give registers back, consumers take them.
template <int kRegs>
FLYOPS_DEVICE void regs_increase() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
}
template <int kRegs>
FLYOPS_DEVICE void regs_decrease() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
}
#endif

}  // namespace flyops::tile
