// The per-dtype function table of an op (one translation unit per dtype), picked by dtype.
#pragma once

#include "flyops/dtype.h"

namespace flyops {

template <typename Ops>
const Ops* ops_by_dtype(DType t, const Ops& fp32, const Ops& fp16, const Ops& bf16) {
  switch (t) {
    case DType::kFloat32: return &fp32;
    case DType::kFloat16: return &fp16;
    case DType::kBFloat16: return &bf16;
    default: return nullptr;
  }
}

}  // namespace flyops
