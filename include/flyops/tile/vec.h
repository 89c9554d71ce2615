// Register fragments of kN elements that move to and from global memory in one access
// (16 bytes for the fast path). Loads of data read once use the streaming cache policy so
// they do not evict what the next kernel will reuse (weights, outputs).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/numeric.h"

namespace flyops::tile {

template <typename T, int kN>
struct alignas(sizeof(T) * kN) Vec {
  T v[kN];
  static constexpr int kBytes = sizeof(T) * kN;
};

enum class CachePolicy { kDefault, kStreaming };

namespace detail {
template <int kBytes>
struct Raw;
template <>
struct Raw<16> { using type = uint4; };
template <>
struct Raw<8> { using type = uint2; };
template <>
struct Raw<4> { using type = uint32_t; };
template <>
struct Raw<2> { using type = uint16_t; };

template <CachePolicy P>
FLYOPS_DEVICE uint4 ld(const uint4* p) {
  uint4 r;
  if constexpr (P == CachePolicy::kStreaming) {
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  } else {
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  }
  return r;
}
template <CachePolicy P, typename R>
FLYOPS_DEVICE R ld(const R* p) {
  return P == CachePolicy::kStreaming ? __ldcs(p) : *p;
}
}  // namespace detail

template <CachePolicy P = CachePolicy::kDefault, typename T, int kN>
FLYOPS_DEVICE void load(Vec<T, kN>& dst, const T* src) {
  using R = typename detail::Raw<Vec<T, kN>::kBytes>::type;
  R r = detail::ld<P>(reinterpret_cast<const R*>(src));
  dst = *reinterpret_cast<const Vec<T, kN>*>(&r);
}

template <typename T, int kN>
FLYOPS_DEVICE void store(T* dst, const Vec<T, kN>& src) {
  using R = typename detail::Raw<Vec<T, kN>::kBytes>::type;
  *reinterpret_cast<R*>(dst) = *reinterpret_cast<const R*>(&src);
}

template <typename T, int kN>
FLYOPS_DEVICE void fill(Vec<T, kN>& v, float value) {
#pragma unroll
  for (int i = 0; i < kN; ++i) v.v[i] = from_float<T>(value);
}

}  // namespace flyops::tile
