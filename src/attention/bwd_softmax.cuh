// The backward's element-wise steps on a consumer warpgroup's key-major accumulator
// fragments (wgmma m64 x kBM: each thread holds keys r and r + 8 of its warp's 16, at query
// columns 8 j + 2 (l % 4) + {0, 1}), with the query rows' vectors from shared memory.
#pragma once

#include <cstdint>

#include "bwd_traits.h"  // BwdArgs
#include "flyops/tile/arch.h"
#include "softmax.cuh"  // fast_exp2

namespace flyops::attention {

// S^T into P^T = exp2(scale_log2 S^T - LSE2[query]) in place; with `masked`, 0 where a key is
// past Lk or (causal) after the query's diagonal. `key` is the thread's first key, q0 the
// step's first query.
template <int kBM>
FLYOPS_DEVICE void probabilities_t(float (&s)[kBM / 2], const float* lse2, const BwdArgs& a, int key, int q0,
                                   bool masked) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < kBM / 8; ++j) {
    const float2 l2 = *reinterpret_cast<const float2*>(lse2 + 8 * j + 2 * t);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float& v = s[4 * j + i];
      v = fast_exp2(__fmaf_rn(v, a.scale_log2, -(i % 2 ? l2.y : l2.x)));
      if (masked) {
        const int kk = key + 8 * (i / 2), qq = q0 + 8 * j + 2 * t + i % 2;
        if (kk >= a.Lk || (a.causal && kk > qq + a.offset)) v = 0.f;
      }
    }
  }
}

// dP^T into dS^T = P^T o (dP^T - Dsum[query]) in place.
template <int kBM>
FLYOPS_DEVICE void score_grads_t(float (&dp)[kBM / 2], const float (&p)[kBM / 2], const float* dsum) {
  const int t = threadIdx.x % 4;
#pragma unroll
  for (int j = 0; j < kBM / 8; ++j) {
    const float2 d2 = *reinterpret_cast<const float2*>(dsum + 8 * j + 2 * t);
#pragma unroll
    for (int i = 0; i < 4; ++i) dp[4 * j + i] = p[4 * j + i] * (dp[4 * j + i] - (i % 2 ? d2.y : d2.x));
  }
}

}  // namespace flyops::attention
