// The split-K path's second kernel: C[m, n] = alpha * sum over parts of P[part][n][m] +
// beta * D[m, n], the parts added in order (the same bits every run), rounded once.
// P is the narrow kernel's fp32 output for the transposed problem (N rows of M).
#pragma once

#include <cstdint>

#include "flyops/tile/numeric.h"

namespace flyops::gemm {
inline constexpr int kReduceThreads = 256;
}  // namespace flyops::gemm

// One thread per (m, n): consecutive threads take consecutive n, so the stores to C's rows
// coalesce; the partials (at most 64 x N x parts floats) sit in L2.
template <typename T>
__global__ void __launch_bounds__(flyops::gemm::kReduceThreads)
    flyops_gemm_splitk_reduce(const float* __restrict__ part, int parts, int64_t part_stride, int64_t M, int64_t N,
                              T* __restrict__ c, int64_t ldc, float alpha, float beta, const T* __restrict__ d,
                              int64_t d_stride_m, int64_t d_stride_n) {
  using namespace flyops;
  const int64_t n = int64_t{blockIdx.x} * flyops::gemm::kReduceThreads + threadIdx.x, m = blockIdx.y;
  if (n >= N) return;
  float acc = 0.f;
  for (int z = 0; z < parts; ++z) acc += part[z * part_stride + n * M + m];
  float v = alpha * acc;
  if (d != nullptr) v += beta * tile::to_float(d[m * d_stride_m + n * d_stride_n]);
  c[m * ldc + n] = tile::from_float<T>(v);
}
