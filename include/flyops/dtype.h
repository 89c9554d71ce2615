// Element types the core understands, independent of any framework's enum.
#pragma once

#include <cstddef>

namespace flyops {

enum class DType { kFloat32, kFloat16, kBFloat16, kFloat64, kOther };

constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat32: return 4;
    case DType::kFloat16: return 2;
    case DType::kBFloat16: return 2;
    case DType::kFloat64: return 8;
    default: return 0;
  }
}

const char* dtype_name(DType t);

}  // namespace flyops
