// The online softmax over one key block, on the S accumulator fragment of a consumer
// warpgroup (wgmma m64 x kBN): each thread holds rows r and r + 8 (h = 0, 1) of its warp's 16
// at columns 8 j + 2 (l % 4) + {0, 1}; a row's values sit in the four lanes of a quad. The
// scores are scaled into the log2 domain (scale * log2 e), so each probability is one exp2.
// Row sums stay per thread until the end (each thread's share is rescaled by the same
// factors), so a block costs two quad shuffles a row, for the maximum.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/numeric.h"

namespace flyops::attention {

inline constexpr float kNegInf = -__builtin_huge_valf();

FLYOPS_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// kLazy (Config::kLazyRescale): how far a block may raise a row's maximum (log2 units)
// before the row's reference maximum m moves and O is rescaled (FlashAttention-4's
// conditional rescaling): below it the probabilities reach 2^8 at most, which the fp32
// sums and the 16-bit P hold with the same relative precision, and past the first blocks
// most rows' maxima never move that far, so most blocks rescale nothing (forward v12).
inline constexpr float kRescaleSlack = 8.f;

// Masks (kMask), takes the rows' new maxima (kLazy: moved only past kRescaleSlack), turns s
// into unnormalised probabilities exp2(s * scale_log2 - m) in place, rescales the running
// sums and returns in alpha the factor by which each row's O must be rescaled (kLazy: 1
// where m stayed; 0 where m was -inf, as on the first block).
// `row` is the h = 0 row's query index, `col0` the block's first key index.
template <bool kMask, int kBN, bool kLazy>
FLYOPS_DEVICE void online_softmax(float (&s)[kBN / 2], float (&m)[2], float (&l)[2], float (&alpha)[2],
                                  float scale_log2, int row, int col0, int Lk, bool causal, int offset) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float mx = kNegInf;
    // Masked: this thread's element at column col0 + 2 t + c (c = 8 j + x) when c >= lim.
    int lim = Lk - col0 - 2 * t;
    if (kMask && causal) lim = min(lim, row + 8 * h + offset + 1 - col0 - 2 * t);
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        float& v = s[4 * j + 2 * h + x];
        if constexpr (kMask)
          if (8 * j + x >= lim) v = kNegInf;
        mx = fmaxf(mx, v);
      }
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
    const float m_blk = mx * scale_log2;
    const bool move = !kLazy || m_blk > m[h] + kRescaleSlack;  // lazy: always when m is -inf and the block has a key
    const float m_new = kLazy ? (move ? m_blk : m[h]) : fmaxf(m[h], m_blk);
    const float m_use = m_new == kNegInf ? 0.f : m_new;  // a row with no key yet: keep exp2 finite
    alpha[h] = move ? fast_exp2(m[h] - m_use) : 1.f;
    m[h] = m_new;
    float sum = 0.f;
#pragma unroll
    for (int j = 0; j < kBN / 8; ++j)
#pragma unroll
      for (int x = 0; x < 2; ++x) {
        float& v = s[4 * j + 2 * h + x];
        v = fast_exp2(__fmaf_rn(v, scale_log2, -m_use));
        sum += v;
      }
    l[h] = __fmaf_rn(l[h], alpha[h], sum);
  }
}

// O's rows scaled by their factors (fragment of wgmma m64 x kD); kLazy: nothing where none
// of the warp's rows moved its maximum (a warp-uniform branch).
template <int kD, bool kLazy>
FLYOPS_DEVICE void rescale(float (&o)[kD / 2], const float (&alpha)[2]) {
  if constexpr (kLazy)
    if (!__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) return;
#pragma unroll
  for (int j = 0; j < kD / 8; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) o[4 * j + i] *= alpha[i / 2];
}

// The probabilities as the A operand of P V: k16 step kk takes columns 16 kk .. 16 kk + 15,
// which are the accumulator's chunks 2 kk and 2 kk + 1 (the A fragment's four registers:
// rows + 0 / + 8 at columns + 0 / + 8).
template <typename T, int kBN>
FLYOPS_DEVICE void to_operand(const float (&s)[kBN / 2], uint32_t (&p)[kBN / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < kBN / 16; ++kk)
#pragma unroll
    for (int i = 0; i < 4; ++i) p[kk][i] = tile::pack2<T>(s[8 * kk + 2 * i], s[8 * kk + 2 * i + 1]);
}

}  // namespace flyops::attention
