// Warp-level tensor-core products (mma.sync m16n8k16, 16-bit operands, fp32 accumulation):
// operands come from registers, so a kernel can feed them straight from global loads with
// no shared-memory stage (the GEMM's narrow kernel, src/gemm/gemv.cuh).
//
// Fragments, for lane l with g = l / 4, t = l % 4 (each register two 16-bit elements, the
// lower k in the low half):
//   A (16 x 16, row-major): a[0] = (row g, k 2t, 2t+1), a[1] = (row g+8, k 2t, 2t+1),
//                           a[2] = (row g, k 2t+8, 2t+9), a[3] = (row g+8, k 2t+8, 2t+9);
//   B (16 x 8, by column):  b[0] = (k 2t, 2t+1; column g), b[1] = (k 2t+8, 2t+9; column g);
//   D (16 x 8, fp32):       d[0], d[1] = (row g, columns 2t, 2t+1), d[2], d[3] = (row g+8, same).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/arch.h"
#include "flyops/tile/numeric.h"

namespace flyops::tile {

#if defined(__CUDACC__)

// d += A * B for T = bf16 or fp16.
template <typename T>
FLYOPS_DEVICE void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  static_assert(std::is_same_v<T, bf16> || std::is_same_v<T, fp16>, "16-bit operands");
  if constexpr (std::is_same_v<T, bf16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#endif  // __CUDACC__

}  // namespace flyops::tile
