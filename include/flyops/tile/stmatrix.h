// Accumulator fragments to shared memory as 16-bit matrices: stmatrix (sm_90) stores four
// 8 x 8 matrices of 16-bit elements from a warp in one instruction. Register i of lane l
// holds row l / 4, columns 2 (l % 4) and + 1 of matrix i, which is exactly how an mma or
// wgmma accumulator fragment holds an 8 x 8 block once two fp32 values are packed into one
// register (numeric.h's pack2); lane l gives the shared-memory address of row l % 8 of
// matrix l / 8.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

#if defined(__CUDACC__)
// Four 8 x 8 matrices of 16-bit elements (r0..r3, one register a lane each) to shared memory;
// every lane of the warp takes part (.aligned).
FLYOPS_DEVICE void stmatrix_x4(uint32_t smem_addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(smem_addr), "r"(r0),
               "r"(r1), "r"(r2), "r"(r3)
               : "memory");
}

// A warp's 16 x 64 box of 16-bit elements, 128-byte rows in TMA's 128-byte swizzle (chunk c
// of row r at byte r * 128 + (c ^ r % 8) * 16), as a TMA store of box {64, 16} reads it. The
// box's 16 rows are one accumulator fragment's rows r and r + 8 (h = 0, 1) over eight chunks
// of 8 columns. box_lane_addr: this lane's stmatrix address for chunks 0 and 1, computed once
// (`box` is a shared-memory address, 1024-aligned); chunk pair p is it XOR p * 32.
FLYOPS_DEVICE uint32_t box_lane_addr(uint32_t box) {
  const int l = lane_id(), mi = l / 8;  // lane l addresses row l % 8 of matrix mi = (h, chunk) = (mi % 2, mi / 2)
  return box + static_cast<uint32_t>((8 * (mi % 2) + l % 8) * 128) + static_cast<uint32_t>(((mi / 2) ^ (l % 8)) << 4);
}
// The byte offset of element (r, c) of such a box (16-bit elements), for reading it back.
FLYOPS_HD constexpr uint32_t box_offset_16x64(int r, int c) {
  return static_cast<uint32_t>(r * 128 + (((c / 8) ^ (r % 8)) << 4) + (c % 8) * 2);
}
// kPairs chunk pairs of such a box from pair pair0 (columns 16 pair0 ..); pack(c, h): this
// lane's register of chunk 2 pair0 + c, rows + 8 h. Fewer than four pairs: a fragment
// narrower than the box (an m64 x 32 accumulator into its columns of the rows).
template <int kPairs, typename Pack>
FLYOPS_DEVICE void stmatrix_box_pairs(uint32_t lane_addr, int pair0, Pack&& pack) {
#pragma unroll
  for (int p = 0; p < kPairs; ++p)
    stmatrix_x4(lane_addr ^ static_cast<uint32_t>((pair0 + p) * 32), pack(2 * p, 0), pack(2 * p, 1),
                pack(2 * p + 1, 0), pack(2 * p + 1, 1));
}

// The whole box: pack(c, h) for chunk c (0..7), e.g. pack2 of the accumulator pair at
// acc[4 (8 box + c) + 2 h].
template <typename Pack>
FLYOPS_DEVICE void stmatrix_box_16x64(uint32_t lane_addr, Pack&& pack) {
  stmatrix_box_pairs<4>(lane_addr, 0, pack);
}
#endif

}  // namespace flyops::tile
