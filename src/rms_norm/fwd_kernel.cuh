// Forward, rows held in registers. Scheduler: each CTA takes kRowsPerCta consecutive rows.
// Mainloop: one pass over global memory (x read once), sum of squares reduced over the row.
// Epilogue: y = w * (rstd * x) from the registers, rstd written by the row's first thread.
#pragma once

#include "flyops/rms_norm.h"
#include "row_tile.cuh"

template <typename T, int kVec, int kShape>
__global__ void __launch_bounds__(flyops::rms_norm::kShapes[kShape].threads_per_cta)
    flyops_rms_norm_fwd(const flyops::RmsNormFwdParams p) {
  using namespace flyops;
  using Tr = rms_norm::RowTraits<T, kVec, kShape>;
  using Tile = rms_norm::RowTile<Tr>;
  __shared__ float red[Tr::kWarps];

  const int lane_in_row = threadIdx.x % Tr::kThreadsPerRow;
  const int64_t row = int64_t(blockIdx.x) * Tr::kRowsPerCta + threadIdx.x / Tr::kThreadsPerRow;
  const bool row_ok = row < p.M;
  const int n = static_cast<int>(p.N);

  typename Tr::Frag xf[Tr::kItems];
  Tile::template load<tile::CachePolicy::kStreaming>(
      xf, static_cast<const T*>(p.x) + row * p.x_row_stride, lane_in_row, n, row_ok);

  float ss = 0.f;
#pragma unroll
  for (int i = 0; i < Tr::kItems; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const float v = xf[i].get(j);
      ss += v * v;
    }

  // The weight is shared by all rows and stays in L1/L2; its load overlaps the reduction,
  // unless the row is wide fp32 and the weight is read in the epilogue (traits.h).
  constexpr bool kWeightLate = rms_norm::fwd_weight_late(
      kShape, kVec, std::is_same_v<T, float> ? rms_norm::Elem::kF32 : rms_norm::Elem::kBF16);
  typename Tr::Frag wf[kWeightLate ? 1 : Tr::kItems];
  if constexpr (!kWeightLate) Tile::load_weight(wf, static_cast<const T*>(p.weight), lane_in_row, n);

  ss = tile::row_allreduce_sum<Tr::kThreadsPerRow, Tr::kThreads>(ss, red);
  const float rstd = rsqrtf(ss / static_cast<float>(n) + p.eps);
  if (!row_ok) return;

  T* y = static_cast<T*>(p.y) + row * p.y_row_stride;
  const T* w = static_cast<const T*>(p.weight);
#pragma unroll
  for (int i = 0; i < Tr::kItems; ++i) {
    if (Tile::in_row(i, lane_in_row, n)) {
      typename Tr::Frag wi;
      if constexpr (kWeightLate)
        wi = w != nullptr ? Tile::load_weight_frag(w, i, lane_in_row) : Tr::Frag::filled(1.f);
      else
        wi = wf[i];
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[j] = wi.get_late(j) * (rstd * xf[i].get_late(j));
      tile::store(y + Tile::col(i, lane_in_row), Tr::Frag::pack(out));
    }
    // Keeps the compiler from hoisting every weight load above the first store (which
    // would hold the whole weight in registers again): two fragments in flight at a time.
    if constexpr (kWeightLate)
      if (i % 2 == 1) asm volatile("" ::: "memory");
  }
  if (lane_in_row == 0) p.rstd[row] = rstd;
}
