// Host-side bit conversions between fp32 and the 16- and 8-bit float formats (round to
// nearest even), so host code can build device inputs and read device outputs without CUDA
// headers.
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

// The two 8-bit float formats of wgmma (and of OCP MX's FP8 elements), as PyTorch stores
// them: e4m3fn (bias 7, no infinity, NaN 0x7f / 0xff, largest 448) and e5m2 (bias 15, IEEE
// infinities and NaNs, largest 57344).
enum class Fp8 { kE4M3, kE5M2 };

inline float fp8_to_float(uint8_t v, Fp8 kind) {
  const int mbits = kind == Fp8::kE4M3 ? 3 : 2, bias = kind == Fp8::kE4M3 ? 7 : 15;
  const int exp = (v & 0x7f) >> mbits, man = v & ((1 << mbits) - 1), top = (1 << (7 - mbits)) - 1;
  const float sign = (v & 0x80) ? -1.f : 1.f;
  if (kind == Fp8::kE4M3 && exp == top && man == (1 << mbits) - 1) return std::nanf("");
  if (kind == Fp8::kE5M2 && exp == top) return man == 0 ? sign * INFINITY : std::nanf("");
  if (exp == 0) return sign * std::ldexp(static_cast<float>(man), 1 - bias - mbits);  // subnormal
  return sign * std::ldexp(static_cast<float>((1 << mbits) | man), exp - bias - mbits);
}

// Round to nearest even as PyTorch's casts do (c10's fp8 conversions): past the largest
// finite value after rounding, e4m3fn gives NaN and e5m2 infinity; a NaN keeps its sign bit.
inline uint8_t float_to_fp8(float f, Fp8 kind) {
  const int mbits = kind == Fp8::kE4M3 ? 3 : 2, bias = kind == Fp8::kE4M3 ? 7 : 15;
  const int max_code = kind == Fp8::kE4M3 ? 0x7e : 0x7b, overflow = kind == Fp8::kE4M3 ? 0x7f : 0x7c;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  if (std::isnan(f)) return sign | 0x7f;
  const double a = std::fabs(static_cast<double>(f));
  if (std::isinf(a)) return sign | overflow;
  int code;
  if (a < std::ldexp(1.0, 1 - bias)) {  // subnormal range: units of the smallest subnormal
    code = static_cast<int>(std::nearbyint(std::ldexp(a, bias - 1 + mbits)));  // 2^mbits: the smallest normal
  } else {
    int e;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the unbiased exponent is e - 1
    const int q = static_cast<int>(std::nearbyint(std::ldexp(a, mbits - (e - 1))));  // in [2^mbits, 2^(mbits + 1)]
    const bool carry = q == 2 << mbits;  // rounded up into the next binade
    code = ((e - 1 + bias + carry) << mbits) | (carry ? 0 : q - (1 << mbits));  // past max_code: overflow below
  }
  return static_cast<uint8_t>(sign | (code > max_code ? overflow : code));
}

}  // namespace flyops::reference
