// Element types and their conversion to and from the fp32 accumulator type.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flyops/tile/arch.h"

namespace flyops::tile {

using bf16 = __nv_bfloat16;
using fp16 = __half;

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

}  // namespace flyops::tile
