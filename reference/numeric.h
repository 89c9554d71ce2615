// Host-side bit conversions between fp32 and the 16-bit float formats (round to nearest
// even), so host code can build device inputs and read device outputs without CUDA headers.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace flyops::reference {

inline float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
inline uint32_t float_to_bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

inline float bf16_to_float(uint16_t h) { return bits_to_float(uint32_t(h) << 16); }
inline uint16_t float_to_bf16(float f) {
  uint32_t b = float_to_bits(f);
  if (std::isnan(f)) return 0x7fc0;
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}

inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return bits_to_float(sign | 0x7f800000u | (man << 13));
  return bits_to_float(sign | ((exp + 112u) << 23) | (man << 13));
}
inline uint16_t float_to_half(float f) {
  // Through double arithmetic: exact scaling, then round to nearest even by the FPU.
  const uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  float a = std::fabs(f);
  if (std::isnan(f)) return 0x7e00;
  if (a >= 65520.f) return sign | 0x7c00;  // rounds to inf
  if (a < std::ldexp(1.f, -14)) {          // subnormal range: units of 2^-24
    const float q = std::nearbyint(std::ldexp(a, 24));
    return sign | static_cast<uint16_t>(q);
  }
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  const float ulp = std::ldexp(1.f, e - 11);
  float q = std::nearbyint(a / ulp) * ulp;  // 11 significant bits
  int e2;
  const float m2 = std::frexp(q, &e2);
  const uint32_t man = static_cast<uint32_t>(std::ldexp(m2, 11)) & 0x3ffu;
  return sign | static_cast<uint16_t>(((e2 - 1 + 15) << 10) | man);
}

}  // namespace flyops::reference
