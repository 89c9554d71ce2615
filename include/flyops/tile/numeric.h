// Element types and their conversion to and from the fp32 accumulator type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

using bf16 = __nv_bfloat16;
using fp16 = __half;
// The 8-bit floats of wgmma's k32 forms (only as element types: one byte each).
using fp8e4m3 = __nv_fp8_e4m3;
using fp8e5m2 = __nv_fp8_e5m2;

template <typename T>
FLYOPS_DEVICE float to_float(T v);
template <>
FLYOPS_DEVICE float to_float<float>(float v) { return v; }
template <>
FLYOPS_DEVICE float to_float<bf16>(bf16 v) { return __bfloat162float(v); }
template <>
FLYOPS_DEVICE float to_float<fp16>(fp16 v) { return __half2float(v); }

// Round to nearest even, as PyTorch's casts do.
template <typename T>
FLYOPS_DEVICE T from_float(float v);
template <>
FLYOPS_DEVICE float from_float<float>(float v) { return v; }
template <>
FLYOPS_DEVICE bf16 from_float<bf16>(float v) { return __float2bfloat16_rn(v); }
template <>
FLYOPS_DEVICE fp16 from_float<fp16>(float v) { return __float2half_rn(v); }

#if defined(__CUDACC__)
// Two fp32 values rounded to nearest even into one register of two 16-bit elements, `lo`
// at the lower address (as PyTorch's casts round).
template <typename T>
FLYOPS_DEVICE uint32_t pack2(float lo, float hi);
template <>
FLYOPS_DEVICE uint32_t pack2<bf16>(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <>
FLYOPS_DEVICE uint32_t pack2<fp16>(float lo, float hi) {
  uint32_t r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// The two 16-bit elements of `v` widened to fp32 (lo: the lower address).
template <typename T>
FLYOPS_DEVICE float2 unpack2(uint32_t v);
template <>
FLYOPS_DEVICE float2 unpack2<bf16>(uint32_t v) {
  return make_float2(__uint_as_float(v << 16), __uint_as_float(v & 0xffff0000u));
}
template <>
FLYOPS_DEVICE float2 unpack2<fp16>(uint32_t v) {
  __half2 h;
  static_assert(sizeof(h) == sizeof(v), "two halves a register");
  __builtin_memcpy(&h, &v, sizeof(v));
  return __half22float2(h);
}

#endif

}  // namespace flyops::tile
