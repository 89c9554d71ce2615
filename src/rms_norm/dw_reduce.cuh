// dweight[c] = sum over partial rows b of partials[b][c], in increasing b within each of
// kSlices interleaved slices, then the slices in order: a fixed order, so the same bits
// on every run. With zero partial rows (M == 0) it writes zeros, as stock does.
#pragma once

#include "flyops/tile/numeric.h"

namespace flyops::rms_norm {
inline constexpr int kReduceCols = 32;
inline constexpr int kReduceSlices = 32;
}  // namespace flyops::rms_norm

template <typename T>
__global__ void __launch_bounds__(flyops::rms_norm::kReduceCols* flyops::rms_norm::kReduceSlices)
    flyops_rms_norm_dw_reduce(const float* __restrict__ partials, int64_t rows, int n,
                              T* __restrict__ dw) {
  using namespace flyops;
  constexpr int kCols = rms_norm::kReduceCols;
  constexpr int kSlices = rms_norm::kReduceSlices;
  __shared__ float sums[kSlices][kCols];
  const int lane = threadIdx.x % kCols;
  const int slice = threadIdx.x / kCols;
  const int c = blockIdx.x * kCols + lane;
  float s = 0.f;
  if (c < n) {
#pragma unroll 4
    for (int64_t b = slice; b < rows; b += kSlices) s += partials[b * n + c];
  }
  sums[slice][lane] = s;
  __syncthreads();
  if (slice == 0 && c < n) {
    float total = 0.f;
#pragma unroll
    for (int k = 0; k < kSlices; ++k) total += sums[k][lane];
    dw[c] = tile::from_float<T>(total);
  }
}
