// Rows too long to hold in registers (N beyond the largest row shape). Two steps:
//  1. rowstats: one CTA per row (grid-stride) reduces the row to one number
//     (forward: rstd; backward: coef = rstd^2 * mean(dy * w * x)).
//  2. apply: CTAs over (column chunk, row range) do the elementwise part; in the backward
//     each thread keeps its chunk's dweight sums over its row range in registers and writes
//     one partial row per row range, reduced later in a fixed order.
// x (and dy) are read twice; this path trades bandwidth for unbounded N.
#pragma once

#include "flyops/rms_norm.h"
#include "flyops/tile/reduce.h"
#include "flyops/tile/vec.h"
#include "traits.h"

namespace flyops::rms_norm {

template <typename T, int kVec>
struct SplitTraits {
  static constexpr int kThreads = kSplitThreads;
  static constexpr int kItems = kSplitItems;
  static constexpr int kChunk = kThreads * kItems * kVec;  // columns per apply CTA
  using Frag = tile::Vec<T, kVec>;
};

// Sum over the row of f(fragment index, column) for fragments of kVec elements.
template <typename T, int kVec, typename F>
FLYOPS_DEVICE float split_row_sum(int n, F&& f) {
  float s = 0.f;
  for (int c = threadIdx.x * kVec; c < n; c += kSplitThreads * kVec) s += f(c);
  return s;
}

}  // namespace flyops::rms_norm

template <typename T, int kVec>
__global__ void __launch_bounds__(flyops::rms_norm::kSplitThreads)
    flyops_rms_norm_fwd_rowstats(const flyops::RmsNormFwdParams p) {
  using namespace flyops;
  __shared__ float red[rms_norm::kSplitThreads / 32];
  const int n = static_cast<int>(p.N);
  for (int64_t row = blockIdx.x; row < p.M; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    float ss = rms_norm::split_row_sum<T, kVec>(n, [&](int c) {
      tile::Vec<T, kVec> f;
      tile::load(f, x + c);  // default policy: the apply step re-reads it, keep it in L2
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float v = f.get(j);
        s += v * v;
      }
      return s;
    });
    ss = tile::block_allreduce_sum<rms_norm::kSplitThreads>(ss, red);
    if (threadIdx.x == 0) p.rstd[row] = rsqrtf(ss / static_cast<float>(n) + p.eps);
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(flyops::rms_norm::kSplitThreads)
    flyops_rms_norm_fwd_apply(const flyops::RmsNormFwdParams p) {
  using namespace flyops;
  using St = rms_norm::SplitTraits<T, kVec>;
  const int n = static_cast<int>(p.N);
  const int base = blockIdx.x * St::kChunk;
  typename St::Frag wf[St::kItems];
#pragma unroll
  for (int i = 0; i < St::kItems; ++i) {
    const int c = base + (i * St::kThreads + threadIdx.x) * kVec;
    if (p.weight != nullptr && c < n)
      tile::load(wf[i], static_cast<const T*>(p.weight) + c);
    else
      wf[i] = St::Frag::filled(1.f);
  }
  for (int64_t row = blockIdx.y; row < p.M; row += gridDim.y) {
    const float rstd = p.rstd[row];
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    T* y = static_cast<T*>(p.y) + row * p.y_row_stride;
#pragma unroll
    for (int i = 0; i < St::kItems; ++i) {
      const int c = base + (i * St::kThreads + threadIdx.x) * kVec;
      if (c >= n) continue;
      typename St::Frag xf;
      tile::load<tile::CachePolicy::kStreaming>(xf, x + c);
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[j] = wf[i].get(j) * (rstd * xf.get(j));
      tile::store(y + c, St::Frag::pack(out));
    }
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(flyops::rms_norm::kSplitThreads)
    flyops_rms_norm_bwd_rowstats(const flyops::RmsNormBwdParams p, float* __restrict__ coef) {
  using namespace flyops;
  __shared__ float red[rms_norm::kSplitThreads / 32];
  const int n = static_cast<int>(p.N);
  const T* w = static_cast<const T*>(p.weight);
  for (int64_t row = blockIdx.x; row < p.M; row += gridDim.x) {
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_row_stride;
    float dot = rms_norm::split_row_sum<T, kVec>(n, [&](int c) {
      tile::Vec<T, kVec> xf, dyf, wf;
      tile::load(xf, x + c);
      tile::load(dyf, dy + c);
      if (w != nullptr)
        tile::load(wf, w + c);
      else
        wf = tile::Vec<T, kVec>::filled(1.f);
      float s = 0.f;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        s += dyf.get(j) * wf.get(j) * xf.get(j);
      return s;
    });
    dot = tile::block_allreduce_sum<rms_norm::kSplitThreads>(dot, red);
    if (threadIdx.x == 0) {
      const float rstd = p.rstd[row];
      coef[row] = rstd * rstd * dot * (1.f / static_cast<float>(n));
    }
  }
}

// grid = (column chunks, row ranges); row range r covers rows [r*rows_per, (r+1)*rows_per).
template <typename T, int kVec>
__global__ void __launch_bounds__(flyops::rms_norm::kSplitThreads)
    flyops_rms_norm_bwd_apply(const flyops::RmsNormBwdParams p, const float* __restrict__ coef,
                              float* __restrict__ partials, int64_t rows_per_range) {
  using namespace flyops;
  using St = rms_norm::SplitTraits<T, kVec>;
  const int n = static_cast<int>(p.N);
  const int base = blockIdx.x * St::kChunk;
  typename St::Frag wf[St::kItems];
  float acc[St::kItems][kVec];
#pragma unroll
  for (int i = 0; i < St::kItems; ++i) {
    const int c = base + (i * St::kThreads + threadIdx.x) * kVec;
    if (p.weight != nullptr && c < n)
      tile::load(wf[i], static_cast<const T*>(p.weight) + c);
    else
      wf[i] = St::Frag::filled(1.f);
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc[i][j] = 0.f;
  }
  const int64_t r0 = int64_t(blockIdx.y) * rows_per_range;
  const int64_t r1 = r0 + rows_per_range < p.M ? r0 + rows_per_range : p.M;
  for (int64_t row = r0; row < r1; ++row) {
    const float rstd = p.rstd[row];
    const float k = coef[row];
    const T* x = static_cast<const T*>(p.x) + row * p.x_row_stride;
    const T* dy = static_cast<const T*>(p.dy) + row * p.dy_row_stride;
    T* dx = p.dx != nullptr ? static_cast<T*>(p.dx) + row * p.dx_row_stride : nullptr;
#pragma unroll
    for (int i = 0; i < St::kItems; ++i) {
      const int c = base + (i * St::kThreads + threadIdx.x) * kVec;
      if (c >= n) continue;
      typename St::Frag xf, dyf;
      tile::load<tile::CachePolicy::kStreaming>(xf, x + c);
      tile::load<tile::CachePolicy::kStreaming>(dyf, dy + c);
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float xv = xf.get(j);
        const float dyv = dyf.get(j);
        acc[i][j] += dyv * (xv * rstd);
        out[j] = rstd * (dyv * wf[i].get(j) - xv * k);
      }
      if (dx != nullptr) tile::store(dx + c, St::Frag::pack(out));
    }
  }
  if (p.dweight == nullptr) return;
  float* part = partials + int64_t(blockIdx.y) * n;
#pragma unroll
  for (int i = 0; i < St::kItems; ++i) {
    const int c = base + (i * St::kThreads + threadIdx.x) * kVec;
    if (c >= n) continue;
#pragma unroll
    for (int j = 0; j < kVec; ++j) part[c + j] = acc[i][j];
  }
}
