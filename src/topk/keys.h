// Radix keys: unsigned integers whose order is the order stock TopK sorts by. Every NaN
// (either sign, any payload) maps to the top key, so NaNs tie with each other and sit above
// +inf; -0.0 maps just below +0.0. For smallest-first the key is complemented, which keeps
// NaNs tied (at the bottom). Host and device.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "flyops/tile/arch.h"

namespace flyops::topk {

template <int kBits>
struct FloatKeys;

template <>
struct FloatKeys<32> {
  using Raw = uint32_t;
  static constexpr int kBits = 32;
  static constexpr uint32_t kMask = 0xffffffffu;
  static constexpr bool kIdentity = false;
  static constexpr uint32_t kInf = 0x7f800000u;
  static FLYOPS_HD bool is_nan(uint32_t b) { return (b & 0x7fffffffu) > kInf; }
  static FLYOPS_HD uint32_t sign(uint32_t b) { return b & 0x80000000u; }
};

// fp16 and bf16 differ only in where NaN starts.
template <uint32_t kInfBits>
struct HalfKeys {
  using Raw = uint16_t;
  static constexpr int kBits = 16;
  static constexpr uint32_t kMask = 0xffffu;
  static constexpr bool kIdentity = false;
  static constexpr uint32_t kInf = kInfBits;
  static FLYOPS_HD bool is_nan(uint32_t b) { return (b & 0x7fffu) > kInfBits; }
  static FLYOPS_HD uint32_t sign(uint32_t b) { return b & 0x8000u; }
};
using Fp16Keys = HalfKeys<0x7c00u>;
using Bf16Keys = HalfKeys<0x7f80u>;

// Elements that already are 32-bit ascending keys (the group maxima of delegates.cuh, of
// any source dtype): the key is the element, and 0xffffffff stands for NaN, whose ties
// still go to the lowest positions.
struct AscKeys32 {
  using Raw = uint32_t;
  static constexpr int kBits = 32;
  static constexpr uint32_t kMask = 0xffffffffu;
  static constexpr bool kIdentity = true;
};

// The top (sign) bit of a key: where negatives end and positives begin.
template <typename Keys>
inline constexpr uint32_t kKeyTop = Keys::kMask ^ (Keys::kMask >> 1);

// The ascending key of raw bits: negatives reversed below positives, NaN on top.
template <typename Keys>
FLYOPS_HD uint32_t ascending_key(uint32_t b) {
  if constexpr (Keys::kIdentity) {
    return b;
  } else {
    if (Keys::is_nan(b)) return Keys::kMask;
    return Keys::sign(b) ? (~b & Keys::kMask) : (b | kKeyTop<Keys>);
  }
}

// ascending_key for fp32 without branches or selects on the sign: its mask comes from an
// arithmetic shift (the per-element form of the short-row kernels).
FLYOPS_HD uint32_t ascending_key_f32(uint32_t b) {
  const uint32_t neg = static_cast<uint32_t>(static_cast<int32_t>(b) >> 31);
  const uint32_t k = b ^ (neg | 0x80000000u);
  return FloatKeys<32>::is_nan(b) ? 0xffffffffu : k;
}

// An ascending key as 32 bits with NaN still on top (AscKeys32's elements): a 16-bit key
// goes to the top half, so that the radix select's first digit sees its sign and exponent.
template <typename Keys>
FLYOPS_HD uint32_t widen_key32(uint32_t k) {
  if constexpr (Keys::kBits == 32) return k;
  else return k == Keys::kMask ? 0xffffffffu : k << 16;
}

#if defined(__CUDA_ARCH__)
// 0xffff in each half of w whose bit 15 is set.
FLYOPS_DEVICE uint32_t half_sign_mask(uint32_t w) {
  uint32_t d;
  asm("prmt.b32 %0, %1, 0, 0xbb99;" : "=r"(d) : "r"(w));
  return d;
}
#endif

// Two 16-bit ascending keys at once from a word of two elements (branch-free: the group
// maxima are a stream whose 16-bit elements would otherwise cost more than their load).
template <typename Keys>
FLYOPS_HD uint32_t ascending_key_pair(uint32_t w) {
  static_assert(Keys::kBits == 16, "two 16-bit elements per word");
  constexpr uint32_t kLow = 0x00010001u;
  // A half is NaN when its magnitude exceeds inf's, i.e. when adding 0x7fff - inf carries
  // into bit 15 (no carry leaves the half: both terms are below 0x8000).
  const uint32_t nan_bits = (w & 0x7fff7fffu) + (0x7fffu - Keys::kInf) * kLow;
#if defined(__CUDA_ARCH__)
  // Bit 15 of each half spread over the half: one byte permute in its sign-replicating
  // mode (selector nibbles 9 and b copy the sign of bytes 1 and 3).
  const uint32_t neg = half_sign_mask(w);
  const uint32_t nan = half_sign_mask(nan_bits);
#else
  const uint32_t neg = ((w >> 15) & kLow) * 0xffffu;  // 0xffff in each negative half
  const uint32_t nan = ((nan_bits >> 15) & kLow) * 0xffffu;
#endif
  return (w ^ (neg | 0x80008000u)) | nan;
}

// The key whose largest values come first in the output.
template <typename Keys>
FLYOPS_HD uint32_t order_key(uint32_t b, bool largest) {
  const uint32_t k = ascending_key<Keys>(b);
  return largest ? k : (~k & Keys::kMask);
}

// The raw bits of a non-NaN element from its order key (NaNs share one key; their bits
// must be read from the element itself).
template <typename Keys>
FLYOPS_HD uint32_t raw_of_order_key(uint32_t key, bool largest) {
  constexpr uint32_t top = kKeyTop<Keys>;
  const uint32_t asc = largest ? key : (~key & Keys::kMask);
  if constexpr (Keys::kIdentity) return asc;
  else return (asc & top) ? (asc ^ top) : (~asc & Keys::kMask);
}

// Whether an order key is the NaN key (their raw bits may differ, so ties there matter).
template <typename Keys>
FLYOPS_HD bool is_nan_key(uint32_t key, bool largest) {
  return key == (largest ? Keys::kMask : 0u);
}

// The bits of the element at row[pos] whose order key is `key`: from the key, except NaNs
// (one key for all), which are read back from the row.
template <typename Keys, typename Index>
FLYOPS_HD typename Keys::Raw element_bits(uint32_t key, bool largest, const typename Keys::Raw* row, Index pos) {
  using Raw = typename Keys::Raw;
  return is_nan_key<Keys>(key, largest) ? row[pos] : static_cast<Raw>(raw_of_order_key<Keys>(key, largest));
}

// Each 16-bit half's maximum, signed or unsigned (one instruction on the device).
template <bool kSigned>
FLYOPS_HD uint32_t max_16x2(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  uint32_t d;
  if constexpr (kSigned)
    asm("max.s16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else
    asm("max.u16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  using Half = std::conditional_t<kSigned, int16_t, uint16_t>;
  const auto half_max = [&](int i) {
    return static_cast<uint32_t>(static_cast<uint16_t>(
        std::max(static_cast<Half>(a >> (16 * i)), static_cast<Half>(b >> (16 * i)))));
  };
  return half_max(0) | half_max(1) << 16;
#endif
}
FLYOPS_HD uint32_t max_u16x2(uint32_t a, uint32_t b) { return max_16x2<false>(a, b); }
FLYOPS_HD uint32_t max_s16x2(uint32_t a, uint32_t b) { return max_16x2<true>(a, b); }

// A screened row's threshold test on the raw bits (TopK v123), for a threshold t that is the
// order key of a non-NaN value of the sign the row's best have (largest: t >= +0.0's key;
// smallest: t <= -0.0's): there, the elements at or above t are largest-first those whose
// raw bits, read as signed integers, reach t's value, and every negative NaN (above -inf's
// bits, unsigned); smallest-first those whose raw bits reach t unsigned (that also lets
// negative NaNs through, which the exact test after the queue drops). So a vector needs two
// running maxima of its words and no keys: 7 SASS instructions for bf16's eight elements,
// where their keys took ~30.
struct RawBounds {
  uint32_t s;  // a vector hits where its signed maximum passes s (replicated per 16-bit half)
  uint32_t u;  // or its unsigned maximum passes u
};

template <typename Keys>
FLYOPS_HD bool raw_screen_applies(uint32_t t) {
  constexpr uint32_t top = kKeyTop<Keys>;
  return t >= top && t <= (top | Keys::kInf);
}

template <typename Keys>
FLYOPS_HD RawBounds raw_screen_bounds(uint32_t t, bool largest) {
  constexpr uint32_t top = kKeyTop<Keys>;
  constexpr uint32_t rep = Keys::kBits == 16 ? 0x00010001u : 1u;  // a 16-bit bound in both halves
  // Largest-first: t - top is the value's bits, and s one below them (-1 for +0.0), so that
  // "passes" is "reaches"; u is -inf's bits. Smallest-first: s is the greatest signed value
  // (nothing passes it) and u one below t.
  if (largest) return {((t - top - 1u) & Keys::kMask) * rep, (top | Keys::kInf) * rep};
  return {(Keys::kMask >> 1) * rep, ((t - 1u) & Keys::kMask) * rep};
}

// Whether any element of a 16-byte vector (its four words) passes the bounds: each maximum
// starts from its bound, so it differs from the bound only where an element exceeds it.
template <typename Keys>
FLYOPS_HD bool raw_screen_hit(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, const RawBounds& b) {
  if constexpr (Keys::kBits == 32) {
    const auto smax = [](uint32_t x, uint32_t y) {
      return static_cast<int32_t>(x) > static_cast<int32_t>(y) ? x : y;
    };
    const auto umax = [](uint32_t x, uint32_t y) { return x > y ? x : y; };
    return (smax(smax(smax(w0, w1), b.s), smax(w2, w3)) != b.s) | (umax(umax(umax(w0, w1), b.u), umax(w2, w3)) != b.u);
  } else {
    // Both tests always (| not ||): with || ptxas branched between them.
    return (max_s16x2(max_s16x2(max_s16x2(w0, w1), b.s), max_s16x2(w2, w3)) != b.s) |
           (max_u16x2(max_u16x2(max_u16x2(w0, w1), b.u), max_u16x2(w2, w3)) != b.u);
  }
}

}  // namespace flyops::topk
