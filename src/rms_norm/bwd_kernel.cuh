// Backward, rows held in registers.
//   g = dy * w,  dx = rstd * (g - x * rstd^2 * mean(g * x)),  dw = sum_rows dy * x * rstd
// Scheduler: a persistent grid; CTA b takes row groups b, b + grid, ... so the rows each CTA
// sees depend only on (M, grid). Each thread owns fixed columns, so its dweight sums stay
// put across rows (registers, or shared memory for the widest shapes); at the end the CTA
// writes one fp32 partial row (partials[b][0..N)), which dw_reduce sums in a fixed order:
// the same bits on every run. Rows too long for one CTA are spread over a cluster of CTAs
// (one slice each, see row_tile.cuh) whose row sums meet through distributed shared memory;
// the cluster then plays the part of the CTA in the schedule and in the partial rows.
#pragma once

#include "flyops/rms_norm.h"
#include "flyops/tile/cluster.h"
#include "row_tile.cuh"

namespace flyops::rms_norm {

template <typename T, int kVec, int kShape>
struct BwdTraits : RowTraits<T, kVec, kShape> {
  using Base = RowTraits<T, kVec, kShape>;
  static constexpr int kStages = kShapes[kShape].stages;
  static constexpr bool kAccInRegs = bwd_acc_in_regs(
      kShape, kVec, std::is_same_v<T, float> ? Elem::kF32 : std::is_same_v<T, tile::bf16> ? Elem::kBF16 : Elem::kF16);
  static constexpr int kAccFloats = Base::kItems * kVec;
  // dynamic shared memory: the dweight sums when they live there, or the cross-row
  // combine buffer of multi-row CTAs
  static constexpr int kSmemBytes =
      (!kAccInRegs || Base::kRowsPerCta > 1) ? Base::kThreads * kAccFloats * 4 : 0;
  static_assert(kAccInRegs || Base::kRowsPerCta == 1, "shared-memory sums need one row per CTA");
};

// The dweight sums of one thread, at [i][j][thread] in shared memory or in registers.
template <typename Bt>
struct DwAcc {
  float regs[Bt::kAccInRegs ? Bt::kAccFloats : 1];
  float* smem;
  FLYOPS_DEVICE float& at(int i, int j) {
    if constexpr (Bt::kAccInRegs)
      return regs[i * Bt::kVec + j];
    else
      return smem[(i * Bt::kVec + j) * Bt::kThreads + threadIdx.x];
  }
};

}  // namespace flyops::rms_norm

template <typename T, int kVec, int kShape>
__global__ void __launch_bounds__(flyops::rms_norm::kShapes[kShape].threads_per_cta)
    flyops_rms_norm_bwd(const flyops::RmsNormBwdParams p, float* __restrict__ partials) {
  using namespace flyops;
  using Bt = rms_norm::BwdTraits<T, kVec, kShape>;
  using Tile = rms_norm::RowTile<Bt>;
  constexpr int kI = Bt::kItems;
  __shared__ float red[Bt::kWarps];
  __shared__ float cluster_slots[2];
  extern __shared__ float dyn_smem[];

  constexpr int kCluster = Bt::kCluster;
  const int rank = kCluster > 1 ? static_cast<int>(tile::cluster_rank()) : 0;
  const int64_t first = kCluster > 1 ? int64_t(tile::cluster_index()) : int64_t(blockIdx.x);
  const int64_t stride = kCluster > 1 ? int64_t(tile::cluster_count()) : int64_t(gridDim.x);
  const int lane_in_row = rank * Bt::kThreadsPerRow + static_cast<int>(threadIdx.x % Bt::kThreadsPerRow);
  const int slot = threadIdx.x / Bt::kThreadsPerRow;
  const int n = static_cast<int>(p.N);
  const float inv_n = 1.f / static_cast<float>(n);
  const int64_t groups = (p.M + Bt::kRowsPerCta - 1) / Bt::kRowsPerCta;

  typename Bt::Frag wf[kI];
  Tile::load_weight(wf, static_cast<const T*>(p.weight), lane_in_row, n);

  rms_norm::DwAcc<Bt> acc;
  acc.smem = dyn_smem;
#pragma unroll
  for (int i = 0; i < kI; ++i)
#pragma unroll
    for (int j = 0; j < kVec; ++j) acc.at(i, j) = 0.f;

  // The rows of one row group, loaded into registers. With two stages the next group's
  // loads are issued before the current group's reduction, so they overlap it.
  struct Rows {
    typename Bt::Frag x[kI], dy[kI];
    float rstd;
    bool ok;
  };
  auto load_rows = [&](int64_t grp, Rows& r) {
    const int64_t row = grp * Bt::kRowsPerCta + slot;
    r.ok = grp < groups && row < p.M;
    Tile::template load<tile::CachePolicy::kStreaming>(
        r.x, static_cast<const T*>(p.x) + row * p.x_row_stride, lane_in_row, n, r.ok);
    Tile::template load<tile::CachePolicy::kStreaming>(
        r.dy, static_cast<const T*>(p.dy) + row * p.dy_row_stride, lane_in_row, n, r.ok);
    r.rstd = r.ok ? p.rstd[row] : 0.f;
  };

  Rows cur;
  load_rows(first, cur);
  int parity = 0;
  for (int64_t grp = first; grp < groups; grp += stride) {
    Rows next;
    if constexpr (Bt::kStages == 2) load_rows(grp + stride, next);
    const int64_t row = grp * Bt::kRowsPerCta + slot;
    const bool row_ok = cur.ok;
    const auto& xf = cur.x;
    const auto& dyf = cur.dy;
    const float rstd = cur.rstd;

    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kI; ++i)
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float xv = xf[i].get(j);
        const float dyv = dyf[i].get(j);
        acc.at(i, j) += dyv * (xv * rstd);
        dot += dyv * wf[i].get(j) * xv;
      }
    dot = tile::row_allreduce_sum<Bt::kThreadsPerRow, Bt::kThreads>(dot, red);
    if constexpr (kCluster > 1) {
      dot = tile::cluster_sum<kCluster>(dot, &cluster_slots[parity]);
      parity ^= 1;
    }
    const float coef = rstd * rstd * dot * inv_n;

    if (row_ok && p.dx != nullptr) {
      T* dx = static_cast<T*>(p.dx) + row * p.dx_row_stride;
#pragma unroll
      for (int i = 0; i < kI; ++i) {
        if (!Tile::in_row(i, lane_in_row, n)) continue;
        float out[kVec];
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          out[j] = rstd * (dyf[i].get_late(j) * wf[i].get_late(j) - xf[i].get_late(j) * coef);
        tile::store(dx + Tile::col(i, lane_in_row), Bt::Frag::pack(out));
      }
    }
    if constexpr (Bt::kStages == 2)
      cur = next;
    else
      load_rows(grp + stride, cur);
  }
  // No CTA may leave (and free its shared memory) while a peer still reads its slot.
  if constexpr (kCluster > 1) tile::cluster_sync();

  if (p.dweight == nullptr) return;
  float* part = partials + first * n;
  if constexpr (Bt::kRowsPerCta == 1) {
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      if (!Tile::in_row(i, lane_in_row, n)) continue;
#pragma unroll
      for (int j = 0; j < kVec; ++j) part[Tile::col(i, lane_in_row) + j] = acc.at(i, j);
    }
  } else {
    // Rows of one CTA share columns: add the slots up in slot order through shared memory,
    // laid out [slot][i][j][lane_in_row] so stores and loads are conflict-free.
    auto at = [&](int s, int i, int j) {
      return ((s * kI + i) * kVec + j) * Bt::kThreadsPerRow + lane_in_row;
    };
#pragma unroll
    for (int i = 0; i < kI; ++i)
#pragma unroll
      for (int j = 0; j < kVec; ++j) dyn_smem[at(slot, i, j)] = acc.at(i, j);
    __syncthreads();
    if (slot != 0) return;
#pragma unroll
    for (int i = 0; i < kI; ++i) {
      if (!Tile::in_row(i, lane_in_row, n)) continue;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        float s = 0.f;
        for (int r = 0; r < Bt::kRowsPerCta; ++r) s += dyn_smem[at(r, i, j)];
        part[Tile::col(i, lane_in_row) + j] = s;
      }
    }
  }
}
