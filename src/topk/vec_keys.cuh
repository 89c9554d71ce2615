// The best order key of a 16-byte vector, for the streaming kernels (arg-max, group maxima):
// 16-bit elements go two per word (ascending_key_pair, then max.u16x2), which keeps those
// streams memory-bound instead of bound by per-element key arithmetic.
#pragma once

#if defined(__CUDACC__)
#include <cstdint>

#include "keys.h"

namespace flyops::topk {

// The greatest order key (at the element's width) among the vector's elements.
template <typename Keys>
FLYOPS_DEVICE uint32_t max_order_key(const uint4& v, bool largest) {
  if constexpr (Keys::kBits == 32) {
    uint32_t m = order_key<Keys>(v.x, largest);
    m = max(m, order_key<Keys>(v.y, largest));
    m = max(m, order_key<Keys>(v.z, largest));
    return max(m, order_key<Keys>(v.w, largest));
  } else {
    const uint32_t flip = largest ? 0u : 0xffffffffu;  // smallest-first: both halves complemented
    const uint32_t p = max_u16x2(max_u16x2(ascending_key_pair<Keys>(v.x) ^ flip, ascending_key_pair<Keys>(v.y) ^ flip),
                                 max_u16x2(ascending_key_pair<Keys>(v.z) ^ flip, ascending_key_pair<Keys>(v.w) ^ flip));
    return max(p & 0xffffu, p >> 16);
  }
}

// A group maximum as flyops_topk_maxima stores it: the group's greatest order key m (at the
// element's width) as a 32-bit ascending key. The map is strictly monotone (widen_key32 is),
// so better_group_key of two vectors' stored keys is the stored key of their greater m: the
// stream's per-vector combine and the finish kernel's fallback (a screened row's maxima,
// from the row) give the same keys.
template <typename Keys>
FLYOPS_DEVICE uint32_t stored_group_key(uint32_t m, bool largest) {
  return widen_key32<Keys>(largest ? m : ~m & Keys::kMask);
}

FLYOPS_DEVICE uint32_t better_group_key(uint32_t a, uint32_t b, bool largest) { return largest ? max(a, b) : min(a, b); }

// Bit i set where element i's order key is at or above t: 16-bit elements two per word
// (ascending_key_pair, both halves complemented smallest-first), as max_order_key reads them.
template <typename Keys>
FLYOPS_DEVICE uint32_t hit_mask(const uint4& v, uint32_t t, bool largest) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  uint32_t m = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    if constexpr (Keys::kBits == 32) {
      m |= (order_key<Keys>(w[j], largest) >= t ? 1u : 0u) << j;
    } else {
      const uint32_t p = ascending_key_pair<Keys>(w[j]) ^ (largest ? 0u : 0xffffffffu);
      m |= ((p & 0xffffu) >= t ? 1u : 0u) << (2 * j);
      m |= ((p >> 16) >= t ? 1u : 0u) << (2 * j + 1);
    }
  }
  return m;
}

// Element i of a 16-byte vector of Raw, by shifts: taking the vector's address to index it
// put it on the stack (the finish kernel's 16-bit form).
template <typename Raw>
FLYOPS_DEVICE uint32_t vec_element(const uint4& v, int i) {
  constexpr int kPerWord = 4 / static_cast<int>(sizeof(Raw));
  const int wi = i / kPerWord;
  const uint32_t w = wi == 0 ? v.x : wi == 1 ? v.y : wi == 2 ? v.z : v.w;
  if constexpr (kPerWord == 1) return w;
  else return (w >> (16 * (i % kPerWord))) & 0xffffu;
}

}  // namespace flyops::topk
#endif
