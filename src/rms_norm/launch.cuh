// The one place where the router's runtime choices (path, vector width, row shape) become
// template parameters. Included by one .cu per dtype, which instantiates Launcher<T>.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <utility>

#include "common/per_device.h"
#include "flyops/tile/launch.h"

#include "bwd_kernel.cuh"
#include "dw_reduce.cuh"
#include "flyops/rms_norm.h"
#include "fwd_kernel.cuh"
#include "split_kernels.cuh"

namespace flyops::rms_norm {

inline Status launch_status() {
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Rows per backward CTA range of the split path, and the number of ranges.
struct SplitGrid {
  int chunks = 0;
  int64_t ranges = 0;
  int64_t rows_per_range = 0;
};

template <typename T, int kVec>
SplitGrid split_grid(int64_t M, int64_t N, const DeviceInfo& dev) {
  SplitGrid g;
  g.chunks = static_cast<int>(ceil_div64(N, SplitTraits<T, kVec>::kChunk));
  // About four CTAs per SM in total; ranges of whole rows, fixed by (M, N, SM count).
  const int64_t want = std::max<int64_t>(1, (int64_t(dev.sm_count) * 4) / g.chunks);
  g.rows_per_range = std::max<int64_t>(1, ceil_div64(M, want));
  g.ranges = M > 0 ? ceil_div64(M, g.rows_per_range) : 0;
  return g;
}

template <typename T>
struct Launcher {
  static constexpr int kFastVec = 16 / sizeof(T);
  static constexpr Elem kElem = std::is_same_v<T, float>  ? Elem::kF32
                                : std::is_same_v<T, tile::bf16> ? Elem::kBF16 : Elem::kF16;

  // ---- forward -----------------------------------------------------------------------
  template <int kVec, int kShape>
  static Status fused_fwd(const RmsNormFwdParams& p) {
    if constexpr (!fwd_fits(kShape, kVec, kElem)) {
      return Status::kUnsupported;
    } else {
      using Tr = RowTraits<T, kVec, kShape>;
      const int64_t grid = ceil_div64(p.M, Tr::kRowsPerCta);
      flyops_rms_norm_fwd<T, kVec, kShape><<<grid, Tr::kThreads, 0, p.stream>>>(p);
      return launch_status();
    }
  }

  template <int kVec>
  static Status split_fwd(const RmsNormFwdParams& p) {
    const DeviceInfo& dev = device_info(p.device);
    const int64_t rows_grid = std::min<int64_t>(p.M, int64_t(dev.sm_count) * 8);
    flyops_rms_norm_fwd_rowstats<T, kVec><<<rows_grid, kSplitThreads, 0, p.stream>>>(p);
    if (Status s = launch_status(); s != Status::kSuccess) return s;
    const dim3 grid(static_cast<unsigned>(ceil_div64(p.N, SplitTraits<T, kVec>::kChunk)),
                    static_cast<unsigned>(std::min<int64_t>(p.M, 65535)));
    flyops_rms_norm_fwd_apply<T, kVec><<<grid, kSplitThreads, 0, p.stream>>>(p);
    return launch_status();
  }

  // ---- backward ----------------------------------------------------------------------
  template <int kVec, int kShape>
  static auto bwd_kernel() {
    return &flyops_rms_norm_bwd<T, kVec, kShape>;
  }

  // Resident CTAs (clusters, for cluster shapes) on the whole device, asked once per device
  // (which also lifts the dynamic shared memory limit there, a per-device setting).
  template <int kVec, int kShape>
  static int bwd_resident_units(const DeviceInfo& dev) {
    using Bt = BwdTraits<T, kVec, kShape>;
    return per_device_once<Launcher<T>, kVec * 1000 + kShape>(dev.index, [&] {
      auto k = bwd_kernel<kVec, kShape>();
      if (Bt::kSmemBytes > 48 * 1024 &&
          cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, Bt::kSmemBytes) != cudaSuccess) {
        cudaGetLastError();
        return 0;  // the opt-in refused: fused_bwd refuses the call (stock runs it)
      }
      int units = 0;
      if constexpr (Bt::kCluster > 1) {
        units = tile::max_active_clusters(k, dim3(Bt::kThreads), Bt::kSmemBytes, Bt::kCluster);
      } else {
        int per_sm = 0;
        if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, k, Bt::kThreads, Bt::kSmemBytes) !=
            cudaSuccess)
          cudaGetLastError();
        units = per_sm * dev.sm_count;
      }
      return units > 0 ? units : 1;
    });
  }

  // The persistent grid, in CTAs (clusters for cluster shapes): every one resident at once.
  // Each also writes one fp32 partial row of dweight, so when rows are few each takes at
  // least 8 row groups (but the grid keeps 2 CTAs per SM): at M = 4096 that cuts the
  // partials from a quarter of the backward's bytes to about a tenth.
  template <int kVec, int kShape>
  static int64_t fused_bwd_grid(int64_t M, const DeviceInfo& dev) {
    using Bt = BwdTraits<T, kVec, kShape>;
    const int64_t groups = ceil_div64(M, Bt::kRowsPerCta);
    const int64_t resident = bwd_resident_units<kVec, kShape>(dev);
    const int64_t wanted =
        std::max<int64_t>(2 * int64_t(dev.sm_count) / Bt::kCluster, ceil_div64(groups, 8));
    return std::max<int64_t>(1, std::min({groups, resident, wanted}));
  }

  template <int kVec, int kShape>
  static Status fused_bwd(const RmsNormBwdParams& p, float* partials) {
    if constexpr (!bwd_fits(kShape, kVec, kElem)) {
      return Status::kUnsupported;
    } else {
      using Bt = BwdTraits<T, kVec, kShape>;
      const DeviceInfo& dev = device_info(p.device);
      if (bwd_resident_units<kVec, kShape>(dev) == 0) return Status::kUnsupported;
      const int64_t units = fused_bwd_grid<kVec, kShape>(p.M, dev);
      if (p.M > 0) {
        auto k = bwd_kernel<kVec, kShape>();
        if constexpr (Bt::kCluster > 1) {
          const cudaError_t e = tile::launch_cluster(k, dim3(units * Bt::kCluster), dim3(Bt::kThreads),
                                                     Bt::kSmemBytes, p.stream, Bt::kCluster, p, partials);
          if (e != cudaSuccess) return Status::kCudaError;
        } else {
          k<<<units, Bt::kThreads, Bt::kSmemBytes, p.stream>>>(p, partials);
        }
      }
      if (Status s = launch_status(); s != Status::kSuccess) return s;
      return reduce_dw(p, partials, p.M > 0 ? units : 0);
    }
  }

  template <int kVec>
  static Status split_bwd(const RmsNormBwdParams& p, float* coef, float* partials) {
    const DeviceInfo& dev = device_info(p.device);
    const SplitGrid g = split_grid<T, kVec>(p.M, p.N, dev);
    if (p.M > 0) {
      const int64_t rows_grid = std::min<int64_t>(p.M, int64_t(dev.sm_count) * 8);
      flyops_rms_norm_bwd_rowstats<T, kVec><<<rows_grid, kSplitThreads, 0, p.stream>>>(p, coef);
      if (Status s = launch_status(); s != Status::kSuccess) return s;
      const dim3 grid(g.chunks, static_cast<unsigned>(g.ranges));
      flyops_rms_norm_bwd_apply<T, kVec><<<grid, kSplitThreads, 0, p.stream>>>(p, coef, partials,
                                                                               g.rows_per_range);
      if (Status s = launch_status(); s != Status::kSuccess) return s;
    }
    return reduce_dw(p, partials, g.ranges);
  }

  static Status reduce_dw(const RmsNormBwdParams& p, const float* partials, int64_t rows) {
    if (p.dweight == nullptr || p.N == 0) return Status::kSuccess;
    const unsigned grid = static_cast<unsigned>(ceil_div64(p.N, kReduceCols));
    flyops_rms_norm_dw_reduce<T><<<grid, kReduceCols * kReduceSlices, 0, p.stream>>>(
        partials, rows, static_cast<int>(p.N), static_cast<T*>(p.dweight));
    return launch_status();
  }

  // ---- workspace ---------------------------------------------------------------------
  // [coef: M floats (split only)][partials: rows x N floats], each part 16-byte aligned.
  struct WorkspaceLayout {
    std::size_t coef_bytes = 0;
    std::size_t partial_bytes = 0;
    std::size_t total() const { return coef_bytes + partial_bytes; }
  };

  static std::size_t align16(std::size_t b) { return (b + 15) & ~std::size_t(15); }

  template <int kVec>
  static WorkspaceLayout layout_vec(const RmsNormBwdParams& p, const RmsNormPlan& plan,
                                    const DeviceInfo& dev) {
    WorkspaceLayout w;
    int64_t rows = 0;
    if (plan.kind == RmsNormPlan::Kind::kSplit) {
      const SplitGrid g = split_grid<T, kVec>(p.M, p.N, dev);
      w.coef_bytes = align16(sizeof(float) * std::size_t(p.M));
      rows = g.ranges;
    } else {
      rows = with_shape(plan.shape, int64_t{0}, [&](auto shape) -> int64_t {
        if constexpr (!bwd_fits(decltype(shape)::value, kVec, kElem))
          return 0;
        else
          return p.M > 0 ? fused_bwd_grid<kVec, decltype(shape)::value>(p.M, dev) : 0;
      });
    }
    if (p.dweight != nullptr) w.partial_bytes = align16(sizeof(float) * std::size_t(rows) * p.N);
    return w;
  }

  static WorkspaceLayout layout(const RmsNormBwdParams& p, const RmsNormPlan& plan,
                                const DeviceInfo& dev) {
    return plan.vec == 1 ? layout_vec<1>(p, plan, dev) : layout_vec<kFastVec>(p, plan, dev);
  }

  // ---- dispatch ----------------------------------------------------------------------
  // f(std::integral_constant<int, shape>) for the runtime shape id; `otherwise` if none.
  template <typename R, typename F, int... kIds>
  static R with_shape_impl(int shape, R otherwise, F&& f, std::integer_sequence<int, kIds...>) {
    R r = otherwise;
    ((shape == kIds ? (r = f(std::integral_constant<int, kIds>{}), true) : false) || ...);
    return r;
  }
  template <typename R, typename F>
  static R with_shape(int shape, R otherwise, F&& f) {
    return with_shape_impl(shape, otherwise, f, std::make_integer_sequence<int, kNumShapes>{});
  }

  template <int kVec>
  static Status fwd_vec(const RmsNormFwdParams& p, const RmsNormPlan& plan) {
    if (plan.kind == RmsNormPlan::Kind::kSplit) return split_fwd<kVec>(p);
    return with_shape(plan.shape, Status::kInvalidArgument, [&](auto shape) -> Status {
      return fused_fwd<kVec, decltype(shape)::value>(p);
    });
  }

  static Status fwd(const RmsNormFwdParams& p, const RmsNormPlan& plan) {
    if (p.M == 0) return Status::kSuccess;
    return plan.vec == 1 ? fwd_vec<1>(p, plan) : fwd_vec<kFastVec>(p, plan);
  }

  template <int kVec>
  static Status bwd_vec(const RmsNormBwdParams& p, const RmsNormPlan& plan) {
    const WorkspaceLayout w = layout_vec<kVec>(p, plan, device_info(p.device));
    if (p.workspace_bytes < w.total() || (w.total() > 0 && p.workspace == nullptr))
      return Status::kInvalidArgument;
    auto* base = static_cast<char*>(p.workspace);
    float* coef = reinterpret_cast<float*>(base);
    float* partials = reinterpret_cast<float*>(base + w.coef_bytes);
    if (plan.kind == RmsNormPlan::Kind::kSplit) return split_bwd<kVec>(p, coef, partials);
    return with_shape(plan.shape, Status::kInvalidArgument, [&](auto shape) -> Status {
      return fused_bwd<kVec, decltype(shape)::value>(p, partials);
    });
  }

  static Status bwd(const RmsNormBwdParams& p, const RmsNormPlan& plan) {
    return plan.vec == 1 ? bwd_vec<1>(p, plan) : bwd_vec<kFastVec>(p, plan);
  }
};

}  // namespace flyops::rms_norm
