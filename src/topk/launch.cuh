// The one place where the router's runtime choices (kernel, elements per lane, cluster
// size) become template parameters and launch geometry. Included by one .cu per dtype.
#pragma once

#include <algorithm>
#include <cuda_runtime.h>

#include "argmax_kernel.cuh"
#include "cluster_kernel.cuh"
#include "common/per_device.h"
#include "delegate_kernel.cuh"
#include "dispatch.h"
#include "finish_kernel.cuh"
#include "flyops/device.h"
#include "flyops/tile/launch.h"
#include "group_kernel.cuh"
#include "passes_kernel.cuh"
#include "rows_kernel.cuh"
#include "screen_kernel.cuh"
#include "tuned_table.h"
#include "warp_kernel.cuh"

namespace flyops::topk {

inline Status launch_status() {
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}
// The status of a launch made through cudaLaunchKernelEx (cluster or dependent launches).
inline Status launched(cudaError_t e) { return e == cudaSuccess ? launch_status() : Status::kCudaError; }

template <typename Keys>
struct Launcher {
  using Raw = typename Keys::Raw;

  template <int kE>
  static Status warp_e(const TopkParams& p) {
    WarpArgs a{p.x, p.rows, p.n, p.x_row_stride, static_cast<int>(p.k), p.largest, p.values, p.indices};
    const int64_t grid = (p.rows + kWarpRowsPerCta - 1) / kWarpRowsPerCta;
    flyops_topk_warp<Keys, kE><<<static_cast<unsigned>(grid), kWarpThreads, 0, p.stream>>>(a);
    return launch_status();
  }

  static Status warp(const TopkParams& p) {
    const int64_t per_lane = (p.n + 31) / 32;
    if (per_lane <= 1) return warp_e<1>(p);
    if (per_lane <= 2) return warp_e<2>(p);
    if (per_lane <= 4) return warp_e<4>(p);
    if (per_lane <= 8) return warp_e<8>(p);
    if (per_lane <= 16) return warp_e<16>(p);
    return Status::kUnsupported;
  }

  static bool group_vec(const TopkParams& p) {
    return group_vec_loads(p.x, p.n, p.rows, p.x_row_stride, static_cast<int>(sizeof(Raw)));
  }
  static constexpr bool kLongRuns = Keys::kBits == 16;  // group_long_run_ok

  template <int kG, int kE, int kK>
  static Status group_gek(const TopkParams& p, int forced_threshold) {
    const bool threshold = forced_threshold < 0 ? prefer_group_threshold(p) : forced_threshold == 1;
    GroupArgs a{p.x, p.rows, p.n, p.x_row_stride, static_cast<int>(p.k), p.largest, threshold, p.values, p.indices};
    constexpr int kRowsPerCta = kGroupThreads / kG;
    const int64_t grid = (p.rows + kRowsPerCta - 1) / kRowsPerCta;
    if (group_vec(p))
      flyops_topk_group<Keys, kG, kE, kK, true><<<static_cast<unsigned>(grid), kGroupThreads, 0, p.stream>>>(a);
    else if constexpr (!group_long_run(GroupShape{kG, kE}))
      flyops_topk_group<Keys, kG, kE, kK, false><<<static_cast<unsigned>(grid), kGroupThreads, 0, p.stream>>>(a);
    else
      return Status::kUnsupported;  // group() never picks the long runs without 16-byte loads
    return launch_status();
  }

  template <int kG, int kE>
  static Status group_ge(const TopkParams& p, int thr) {
    switch (group_list(p.k)) {
      case 1: return group_gek<kG, kE, 1>(p, thr);
      case 2: return group_gek<kG, kE, 2>(p, thr);
      case 4: return group_gek<kG, kE, 4>(p, thr);
      default: return group_gek<kG, kE, 8>(p, thr);
    }
  }

  static Status group(const TopkParams& p, const TopkPlan& plan) {
    if (p.n > kGroupMaxN || p.k > kGroupMaxK) return Status::kUnsupported;
    GroupShape s = group_shape(p.n, p.rows, plan.group_threads);
    const int thr = plan.group_threshold;
    if (group_long_run(s)) {
      if constexpr (kLongRuns)
        if (group_vec(p)) return group_ge<2, 32>(p, thr);
      s = group_shape(p.n, p.rows);  // not instantiated for these rows: the rule's shape
    }
    if (s.g == 32) return group_ge<32, 8>(p, thr);
    if (s.g == 1) return group_ge<1, 8>(p, thr);
    if (s.g == 2) return group_ge<2, 8>(p, thr);
    if (s.g == 4) return group_ge<4, 8>(p, thr);
    if (s.g == 16) return s.e == 8 ? group_ge<16, 8>(p, thr) : group_ge<16, 16>(p, thr);
    if (s.e == 8) return group_ge<8, 8>(p, thr);
    if (s.e == 16) return group_ge<8, 16>(p, thr);
    return group_ge<8, 32>(p, thr);
  }

  // A warp a row (rows_kernel.cuh), kRowsWarps rows a CTA.
  static Status rows(const TopkParams& p) {
    if constexpr (Keys::kIdentity) {
      return Status::kUnsupported;
    } else {
      if (!rows_fit(p.n, p.k, p.sorted) || !prepare(p.device)) return Status::kUnsupported;
      RowsArgs a{};
      a.x = p.x;
      a.rows = p.rows;
      a.n = static_cast<int>(p.n);
      a.row_stride = p.x_row_stride;
      a.k = static_cast<int>(p.k);
      a.largest = p.largest;
      a.sorted = p.sorted;
      a.vec = group_vec_loads(p.x, p.n, p.rows, p.x_row_stride, static_cast<int>(sizeof(Raw)));
      a.smem = rows_smem(p.n, static_cast<int>(sizeof(Raw)), p.k, p.sorted);
      a.values = p.values;
      a.indices = p.indices;
      const int64_t grid = (p.rows + kRowsWarps - 1) / kRowsWarps;
      flyops_topk_rows<Keys><<<static_cast<unsigned>(grid), kRowsThreads, kRowsWarps * a.smem.per_warp, p.stream>>>(a);
      return launch_status();
    }
  }

  // Lifts the kernel's shared-memory limit and allows 16-CTA clusters, once per device.
  static bool prepare(int device) {
    return per_device_once<Launcher<Keys>, 0>(device, [] {
             auto k = &flyops_topk_cluster<Keys>;
             bool ok = cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            kMaxDynSmem) == cudaSuccess;
             ok = ok && cudaFuncSetAttribute(k, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) ==
                            cudaSuccess;
             ok = ok && cudaFuncSetAttribute(&flyops_topk_argmax<Keys>,
                                             cudaFuncAttributeNonPortableClusterSizeAllowed, 1) == cudaSuccess;
             if constexpr (!Keys::kIdentity) {  // maxima keys (AscKeys32) never take these
               ok = ok && cudaFuncSetAttribute(&flyops_topk_finish<Keys, 0>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               std::max({finish_smem(kFinishSmemMaxE, kFinishSmemMaxK, 0).total,
                                                         kFinishSpreadSmem,
                                                         row_ring_end(kFinishSmemMaxE, kRowRingDeep)})) ==
                             cudaSuccess;
               ok = ok && cudaFuncSetAttribute(&flyops_topk_rows<Keys>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               kRowsWarps * rows_smem(kRowsMaxN, 4, kRowsSortMaxK, true).per_warp) ==
                              cudaSuccess;
               if constexpr (sizeof(Raw) == 2)
                 ok = ok && cudaFuncSetAttribute(&flyops_topk_finish<Keys, 0, true>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                                 std::max(finish_smem(kFinishSmemMaxE, kFinishSmemMaxK, 0).total,
                                                          row16_end(kFinishSmemMaxE, kRowRingDeep))) == cudaSuccess;
               if constexpr (sizeof(Raw) == 2) {  // a hint: refused, the driver's split stays
                 if (cudaFuncSetAttribute(&flyops_topk_screen<Keys, kScreenThreads16, true>,
                                          cudaFuncAttributePreferredSharedMemoryCarveout,
                                          kScreen16CarveoutPercent) != cudaSuccess)
                   cudaGetLastError();
               }
             }
             if (!ok) cudaGetLastError();
             return ok ? 1 : 0;
           }) != 0;
  }

  // One cluster launch: `a` has everything but the geometry.
  static Status cluster(ClusterArgs a, int64_t n_max, int cluster, cudaStream_t stream, int device) {
    const ClusterGeometry g = cluster_geometry(n_max, cluster, sizeof(Raw), a.k, a.sorted, a.gather_cap);
    if (!g.fits || !prepare(device)) return Status::kUnsupported;
    a.slice = g.slice;
    a.cand_cap = g.cand_cap;
    a.sort_cap = g.sort_cap;
    a.stage_cap = g.stage_cap;
    a.data_bytes = g.data_bytes;
    const dim3 grid(unsigned(a.rows * cluster)), block(kClusterThreads);
    if (a.skip != nullptr)  // behind a list finish: launched dependent, the kernel waits before it reads
      return launched(tile::launch_cluster_dependent(&flyops_topk_cluster<Keys>, grid, block, g.smem, stream,
                                                     cluster, a));
    return launched(tile::launch_cluster(&flyops_topk_cluster<Keys>, grid, block, g.smem, stream, cluster, a));
  }

  // group_src (with group_map): the rows the groups come from, group_src_stride elements apart.
  static Status one_pass(const TopkParams& p, int cluster, const int64_t* group_map = nullptr, int group_log2 = 0,
                         int gather = 0, const uint32_t* skip = nullptr, const void* group_src = nullptr,
                         int64_t group_src_stride = 0) {
    ClusterArgs a{};
    a.gather_cap = gather;
    a.skip = skip;
    a.group_map = group_map;
    a.group_log2 = group_log2;
    a.group_src = group_src;
    a.group_src_stride = group_src_stride;
    a.x = p.x;
    a.rows = p.rows;
    a.n = a.seg_len = p.n;
    a.segs = 1;
    a.row_stride = p.x_row_stride;
    a.k = a.out_stride = static_cast<int>(p.k);
    a.largest = p.largest;
    a.sorted = p.sorted;
    a.values = p.values;
    a.indices = p.indices;
    return Launcher::cluster(a, p.n, cluster, p.stream, p.device);
  }

  // Stage 1: the k best of each segment of each row (unsorted) into the workspace; stage 2:
  // the k best of each row's union, positions mapped back through stage 1's indices.
  static Status two(const TopkParams& p, const TopkPlan::Selection& plan, const uint32_t* skip = nullptr) {
    const TwoStage t = two_stage(p.n, p.k, plan.seg_len);
    void* ws_vals = p.workspace;
    int64_t* ws_idx = reinterpret_cast<int64_t*>(static_cast<char*>(p.workspace) +
                                                 two_stage_values_bytes(p.rows, t, p.k, sizeof(Raw)));
    ClusterArgs a{};
    a.x = p.x;
    a.rows = p.rows * t.segments;
    a.n = p.n;
    a.row_stride = p.x_row_stride;
    a.segs = t.segments;
    a.seg_len = plan.seg_len;
    a.k = a.out_stride = static_cast<int>(p.k);
    a.largest = p.largest;
    a.sorted = false;
    a.values = ws_vals;
    a.indices = ws_idx;
    a.skip = skip;
    if (Status s = Launcher::cluster(a, plan.seg_len, plan.seg_cluster, p.stream, p.device);
        s != Status::kSuccess)
      return s;
    ClusterArgs b{};
    b.x = ws_vals;
    b.rows = p.rows;
    b.n = b.seg_len = t.n2;
    b.segs = 1;
    b.row_stride = t.segments * p.k;
    b.idx_map = ws_idx;
    b.k = b.out_stride = static_cast<int>(p.k);
    b.largest = p.largest;
    b.sorted = p.sorted;
    b.values = p.values;
    b.indices = p.indices;
    b.skip = skip;
    return Launcher::cluster(b, t.n2, plan.cluster, p.stream, p.device);
  }

  // In `segs` segments a row (contiguous rows, equal segments): the segments' winners into
  // the workspace as rows of their own, then one CTA a row over them.
  static Status argmax(const TopkParams& p, int cluster, int segs) {
    if (!prepare(p.device)) return Status::kUnsupported;
    const int64_t seg = p.n / segs;
    int64_t* seg_indices = static_cast<int64_t*>(p.workspace);
    ArgmaxArgs a{p.x, p.rows * segs, seg, segs > 1 ? seg : p.x_row_stride, 0, p.largest, p.values, p.indices};
    if (segs > 1) {
      a.indices = seg_indices;
      a.values = seg_indices + p.rows * segs;
    }
    a.slice = ((seg + cluster - 1) / cluster + 7) / 8 * 8;
    const Status s = launched(tile::launch_cluster(&flyops_topk_argmax<Keys>, dim3(unsigned(a.rows * cluster)),
                                                   dim3(kArgmaxThreads), 0, p.stream, cluster, a));
    if (s != Status::kSuccess || segs == 1) return s;
    ArgmaxMergeArgs m{p.x, p.x_row_stride, seg, segs, p.largest, seg_indices, p.values, p.indices};
    flyops_topk_argmax_merge<Keys><<<static_cast<unsigned>(p.rows), kArgmaxMergeThreads, 0, p.stream>>>(m);
    return launch_status();
  }

  // A radix selection: one cluster pass per row, or two stages; rows that skip[row] marks
  // listed (chain_mark.cuh) are left alone.
  static Status select(const TopkParams& p, const TopkPlan::Selection& s, const uint32_t* skip = nullptr) {
    if (s.kind == TopkPlan::Kind::kCluster) return one_pass(p, s.cluster, nullptr, 0, 0, skip);
    if (s.kind == TopkPlan::Kind::kTwoStage) return two(p, s, skip);
    return Status::kUnsupported;
  }

  // Both selections of delegates in one CTA per row, the maxima at the workspace's start:
  // the keys in registers, or in shared memory past kFinishMaxE per thread.
  static Status finish(const TopkParams& p, const TopkPlan& plan, const FinishLayout& l) {
    const int gl = __builtin_ctz(static_cast<unsigned>(plan.group));
    char* ws = static_cast<char*>(p.workspace);
    // Screened: the list from the stream, or (screen_row) the thresholds alone, the finish
    // listing its row itself (TopK v118).
    const bool stream_list = plan.screen != 0 && !plan.screen_row;
    FinishArgs f{p.x,
                 p.x_row_stride,
                 p.n,
                 static_cast<int>(p.k),
                 gl,
                 plan.finish,
                 p.largest,
                 p.sorted,
                 reinterpret_cast<uint32_t*>(ws),
                 p.values,
                 p.indices,
                 stream_list ? reinterpret_cast<const uint32_t*>(ws + l.count) : nullptr,
                 stream_list ? reinterpret_cast<const uint2*>(ws + l.cand) : nullptr,
                 finish_capacity(plan.finish)};
    if (lists_only(plan)) f.list_only = reinterpret_cast<const uint32_t*>(ws + l.thresh);
    if (polls_rows(plan) && !keeps_polled_words()) f.ready = reinterpret_cast<uint64_t*>(ws + l.ready);
    f.row_list = plan.screen_row;
    f.row_prefetch = plan.screen_row && p.rows <= device_info(p.device).sm_count;  // and the deep ring
    const unsigned grid = static_cast<unsigned>(p.rows);
    const int smem = finish_smem(plan.finish, static_cast<int>(p.k), gl).total;
    // The register forms launch dependent on the maxima stream: their blocks start as the
    // stream drains and wait for the maxima (tile::launch_dependent), 2-9% faster on the
    // H200. The shared-memory form launches after it: started early, its 512-thread CTAs
    // were packed two to an SM beside the stream's last blocks and ran 13-22% slower at 64
    // rows (docs/perf-notes.md, TopK v23); behind a list-only stream whose blocks trigger
    // late (kListTriggerLate), a dependent launch waits for the last of them (v75, v130).
    auto go = [&](auto kernel, int bytes) {
      return launched(tile::launch_dependent(kernel, dim3(grid), dim3(kFinishThreads), bytes, p.stream, f));
    };
    if (plan.finish > kFinishMaxE) {
      if (!prepare(p.device)) return Status::kUnsupported;
      // Behind the screen, whose CTAs allow it at their start: the row's prefetch and the
      // launch before the thresholds are in.
      if (plan.screen_row) {
        if constexpr (sizeof(Raw) == 2)  // its packed list and queues (TopK v141)
          return go(&flyops_topk_finish<Keys, 0, true>,
                    std::max(smem, row16_end(plan.finish, row16_ring_stages(f.row_prefetch))));
        return go(&flyops_topk_finish<Keys, 0>,
                  std::max(smem, row_ring_end(plan.finish, row_ring_stages(f.row_prefetch))));
      }
      if (lists_only(plan) && kListTriggerLate<Keys>) return go(&flyops_topk_finish<Keys, 0>, smem);
      // fp32's list-only stream lets it launch after its loads. Where the rows fit one CTA an
      // SM, each CTA takes more than half an SM's shared memory, so that waiting beside the
      // stream's last blocks they spread one an SM (two to an SM ran 13-22% slower: v23); it
      // then starts ~1 us after the stream's end instead of ~2.3 (TopK v78).
      if (lists_only(plan) && p.rows <= device_info(p.device).sm_count)
        return go(&flyops_topk_finish<Keys, 0>, std::max(smem, kFinishSpreadSmem));
      // Few rows whose stream keeps the maxima (screen_maxima): their 1-4 CTAs beside the
      // stream's last blocks cost nothing, and the dependent launch hides the launch gap.
      if (plan.screen_maxima) return go(&flyops_topk_finish<Keys, 0>, smem);
      flyops_topk_finish<Keys, 0><<<grid, kFinishThreads, smem, p.stream>>>(f);
      return launch_status();
    }
    if constexpr (sizeof(Raw) == 4) {  // 16-bit rows need at least one vector of 8
      if (plan.finish <= 4) return go(&flyops_topk_finish<Keys, 4>, smem);
    }
    return go(&flyops_topk_finish<Keys, kFinishMaxE>, smem);
  }

  // Before the shared-memory finish a screened row's maxima are only its failed list's
  // fallback, which computes its own (finish_kernel.cuh): that stream lists only, unless the
  // plan keeps them (screen_maxima: few rows, whose one fallback CTA would be the whole call).
  // The chain's cluster kernel and the register forms read the maxima.
  static bool lists_only(const TopkPlan& plan) {
    return plan.screen != 0 && plan.finish > kFinishMaxE && !plan.screen_maxima;
  }

  // The 16-bit list-only stream polls each row's screen word instead of the screen grid's
  // wait (TopK v134, v139).
  static bool polls_rows(const TopkPlan& plan) {
    return sizeof(Raw) == 2 && lists_only(plan) && !plan.screen_row;
  }

  // The group maxima stream of kGV vectors per group; screening, it launches dependent on
  // the screening kernel (list_only: lists_only above).
  template <int kGV>
  static Status stream_maxima(const DelegateArgs& d, unsigned grid, bool screen, bool list_only, cudaStream_t stream) {
    if constexpr (!Keys::kIdentity) {
      if (list_only)
        return launched(tile::launch_dependent(&flyops_topk_maxima<Keys, kGV, true, true>, dim3(grid),
                                               dim3(kDelegateThreads), 0, stream, d));
      if (screen)
        return launched(tile::launch_dependent(&flyops_topk_maxima<Keys, kGV, true>, dim3(grid),
                                               dim3(kDelegateThreads), 0, stream, d));
    }
    flyops_topk_maxima<Keys, kGV, false><<<grid, kDelegateThreads, 0, stream>>>(d);
    return launch_status();
  }

  // Each row's screening threshold from a sample, by a CTA of kThreads (kScreenThreads or
  // kScreenThreads32 for fp32, kScreenThreads16, or kScreenWideThreads for the wide sample);
  // it zeroes the rows' counts and done marks.
  // kStreamSplit: the kernel at the stream's split (kScreen16CarveoutPercent, set in prepare()).
  // kWideVecs: the wide sample's vectors a thread (kScreenWideVecsLong for fp32's longer one).
  template <int kThreads, bool kStreamSplit = false, int kWideVecs = kScreenVecsPerThread>
  static Status screen_rows(const TopkParams& p, int rank, uint32_t* thresh, uint32_t* count, uint32_t* done,
                            uint64_t* ready = nullptr, uint32_t tag = 0) {
    ScreenArgs sa{p.x, p.n, p.x_row_stride, rank, p.largest, thresh, count, done, ready, tag};
    flyops_topk_screen<Keys, kThreads, kStreamSplit, kWideVecs>
        <<<static_cast<unsigned>(p.rows), kThreads, 0, p.stream>>>(sa);
    return launch_status();
  }

  // The finish kernel on the screened lists alone, ahead of the radix chain: a row whose
  // list holds its answer is finished and marked in `done`, the rest are left to the chain.
  // Launched dependent on the stream (the chain's rows are few, so its CTAs beside the
  // stream's last blocks cost little; TopK v23 has the many-row case).
  static Status list_finish(const TopkParams& p, int elems, const uint32_t* count, const uint2* list, uint32_t* done) {
    if (!prepare(p.device)) return Status::kUnsupported;
    FinishArgs f{p.x,   p.x_row_stride, p.n,     static_cast<int>(p.k),    0,     elems,
                 p.largest, p.sorted,   nullptr, p.values, p.indices, count, list, finish_capacity(elems), done};
    const int smem = finish_smem(elems, static_cast<int>(p.k), 0).total;
    return launched(tile::launch_dependent(&flyops_topk_finish<Keys, 0>, dim3(static_cast<unsigned>(p.rows)),
                                           dim3(kFinishThreads), smem, p.stream, f));
  }

  // The maxima of the rows that the list finish left to the chain (row_maxima.cuh), launched
  // dependent on it: two CTAs an SM, each row's steps spread over them.
  static Status chain_maxima(const TopkParams& p, int group, uint32_t* maxima, const uint32_t* done) {
    ChainMaximaArgs c{p.x, p.rows, p.n, p.x_row_stride, __builtin_ctz(static_cast<unsigned>(group)), p.largest,
                      maxima, done};
    const int64_t steps = (p.n / (16 / sizeof(Raw)) + kChainMaximaThreads * detail::kRowMaximaLoads - 1) /
                          (kChainMaximaThreads * detail::kRowMaximaLoads);
    const int64_t grid = std::min<int64_t>(steps, 2 * int64_t{device_info(p.device).sm_count});
    return launched(tile::launch_dependent(&flyops_topk_chain_maxima<Keys>, dim3(static_cast<unsigned>(grid)),
                                           dim3(kChainMaximaThreads), 0, p.stream, c));
  }

  // Group maxima (a stream), the k best of them, their groups' elements, the k best of
  // those: four launches, the workspace laid out by delegate_layout; screened (the wide
  // sample), a finish of the lists alone before the selections, which skip the rows it
  // took. Or the stream and the finish kernel (finish_layout), after the screening kernel
  // when the plan screens.
  static Status delegates(const TopkParams& p, const TopkPlan& plan) {
    constexpr int kVec = 16 / sizeof(Raw);
    const int group = plan.group;
    char* ws = static_cast<char*>(p.workspace);
    uint32_t* maxima = reinterpret_cast<uint32_t*>(ws);  // they lead both layouts (dispatch.h)

    const int gv = group / kVec;  // both powers of two
    DelegateArgs d{p.x, p.rows, p.n, p.x_row_stride, 0, p.largest, maxima, nullptr, nullptr, nullptr, 0};
    constexpr int64_t kPerBlock = int64_t{kDelegateThreads} * kDelegateUnroll;
    d.blocks_per_row = (p.n / kVec + kPerBlock - 1) / kPerBlock;
    const unsigned grid = static_cast<unsigned>(p.rows * d.blocks_per_row);
    const bool chain = plan.finish == 0;
    const bool screen = plan.screen != 0 && (!chain || plan.screen_finish != 0);
    const FinishLayout fl = finish_layout(p, group, finish_capacity(plan.finish), screen && !chain);
    TopkParams m = maxima_params(p, group);
    const int64_t m_ws = chain ? selection_workspace_bytes(m, plan.maxima) : 0;
    const DelegateLayout l =
        delegate_layout(p, group, m_ws, screen && chain ? finish_capacity(plan.screen_finish) : 0);
    uint32_t* done = nullptr;
    if constexpr (!Keys::kIdentity) {
      if (screen) {
        auto at = [&](int64_t off) { return reinterpret_cast<uint32_t*>(ws + off); };
        uint32_t* thresh = at(chain ? l.thresh : fl.thresh);
        uint32_t* count = at(chain ? l.count : fl.count);
        if (chain) done = at(l.done);
        constexpr int kThreads = sizeof(Raw) == 2 ? kScreenThreads16 : kScreenThreads;
        Status s = Status::kUnsupported;
        if (chain) {
          // fp32's longer wide sample (TopK v116) is instantiated for fp32 alone.
          const bool long_sample = sizeof(Raw) == 4 && plan.screen_vecs == kScreenWideVecsLong;
          if constexpr (sizeof(Raw) == 4) {
            if (long_sample)
              s = screen_rows<kScreenWideThreads, false, kScreenWideVecsLong>(p, plan.screen, thresh, count, done);
          }
          if (!long_sample) s = screen_rows<kScreenWideThreads>(p, plan.screen, thresh, count, done);
        } else if constexpr (sizeof(Raw) == 2) {
          // (The stream's split serves the stream's first wave: the row-listed finish has none.)
          // The list-only stream polls each row's word, tagged by this call (TopK v134, v139).
          uint64_t* ready = nullptr;
          uint32_t tag = 0;
          if (polls_rows(plan)) {
            ready = reinterpret_cast<uint64_t*>(ws + fl.ready);
            tag = next_list_tag();
            d.ready = ready;
            d.tag = tag;
          }
          if (plan.screen_row || !screen16_takes_stream_split(p.rows, device_info(p.device).sm_count))
            s = screen_rows<kThreads>(p, plan.screen, thresh, count, nullptr, ready, tag);
          else if (prepare(p.device))  // which sets that kernel's split
            s = screen_rows<kThreads, true>(p, plan.screen, thresh, count, nullptr, ready, tag);
        } else if (plan.screen_threads == kScreenThreads32) {  // fp32's larger sample (TopK v109r)
          s = screen_rows<kScreenThreads32>(p, plan.screen, thresh, count, nullptr);
        } else {
          s = screen_rows<kThreads>(p, plan.screen, thresh, count, nullptr);
        }
        if (s != Status::kSuccess) return s;
        d.thresh = thresh;
        d.count = count;
        d.cand = reinterpret_cast<uint2*>(ws + (chain ? l.list : fl.cand));
        d.cap = finish_capacity(chain ? plan.screen_finish : plan.finish);
        // No stream: each finish CTA lists its row itself (TopK v118).
        if (plan.screen_row) return finish(p, plan, fl);
      }
    }
    // The chain's stream lists only too: the maxima its selections read come after the list
    // finish, for the rows it leaves them (chain_maxima).
    const bool list_only = lists_only(plan) || (chain && screen);
    Status st;
    if (gv == 32) {  // 32 vectors are within kMaxGroupElems for fp32 only
      if constexpr (32 * kVec <= kMaxGroupElems)
        st = stream_maxima<32>(d, grid, screen, list_only, p.stream);
      else
        st = Status::kUnsupported;  // delegate_group never makes such a group
    } else if (gv == 16)
      st = stream_maxima<16>(d, grid, screen, list_only, p.stream);
    else if (gv == 8)
      st = stream_maxima<8>(d, grid, screen, list_only, p.stream);
    else if (gv == 4)
      st = stream_maxima<4>(d, grid, screen, list_only, p.stream);
    else if (gv == 2)
      st = stream_maxima<2>(d, grid, screen, list_only, p.stream);
    else
      st = stream_maxima<1>(d, grid, screen, list_only, p.stream);
    if (st != Status::kSuccess) return st;
    if (!chain) return finish(p, plan, fl);
    if constexpr (!Keys::kIdentity) {
      if (done != nullptr) {
        if (Status s = list_finish(p, plan.screen_finish, d.count, d.cand, done); s != Status::kSuccess) return s;
        if (Status s = chain_maxima(p, group, maxima, done); s != Status::kSuccess) return s;
      }
    }

    // Two radix selections.
    m.x = maxima;
    m.values = ws + l.sel_values;
    m.indices = reinterpret_cast<int64_t*>(ws + l.sel_indices);
    m.workspace = ws + l.sel_workspace;
    m.workspace_bytes = static_cast<std::size_t>(m_ws);
    if (Status s = select_maxima(m, plan.maxima, done); s != Status::kSuccess) return s;

    // The chosen groups' elements, read by the selection straight from the rows (TopK v114:
    // no gather kernel, one launch fewer behind a list that held the answer).
    const TopkParams c = candidate_params(p, group);
    return one_pass(c, plan.candidates.cluster, m.indices, __builtin_ctz(static_cast<unsigned>(group)), 0, done, p.x,
                    p.x_row_stride);
  }

  // The radix passes (passes_kernel.cuh): the histograms and states cleared, then a count
  // and a pick per digit, the tally (NaN ties only) and the write; `ctas` CTAs a row.
  static Status passes(const TopkParams& p, int ctas) {
    if constexpr (Keys::kIdentity) {
      return Status::kUnsupported;
    } else {
      const int64_t bytes = passes_workspace_bytes(p.rows, ctas, p.n);
      if (ctas < 1 || p.workspace_bytes < static_cast<std::size_t>(bytes)) return Status::kInvalidArgument;
      char* ws = static_cast<char*>(p.workspace);
      if (cudaMemsetAsync(ws, 0, static_cast<std::size_t>(passes_equal_offset(p.rows)), p.stream) != cudaSuccess)
        return Status::kCudaError;
      PassesArgs a{};
      a.x = p.x;
      a.rows = p.rows;
      a.n = p.n;
      a.row_stride = p.x_row_stride;
      a.k = p.k;
      a.largest = p.largest;
      a.ctas = ctas;
      a.chunk = (p.n + ctas - 1) / ctas;
      // 16-byte loads in the count passes where every row starts 16-byte aligned; chunks are
      // then whole vectors, so every CTA's start is aligned too.
      constexpr int64_t kV = 16 / sizeof(Raw);
      a.vec = reinterpret_cast<uintptr_t>(p.x) % 16 == 0 && (p.rows == 1 || p.x_row_stride % kV == 0);
      if (a.vec) a.chunk = (a.chunk + kV - 1) / kV * kV;
      a.hist = reinterpret_cast<uint32_t*>(ws);
      a.state = reinterpret_cast<PassState*>(ws + passes_hist_bytes(p.rows));
      a.equal = reinterpret_cast<uint32_t*>(ws + passes_equal_offset(p.rows));
      a.values = p.values;
      a.indices = p.indices;
      a.lists = reinterpret_cast<uint2*>(ws + passes_lists_offset(p.rows, ctas));
      a.cap = passes_list_cap(p.n);
      const dim3 grid(static_cast<unsigned>(p.rows * ctas));
      // Each row takes the count or the filter after the first pass (the pick decides: its
      // `buffered`), and the write from the row or from its last list; the other launch of
      // each pair returns at once.
      for (int pass = 0; pass < passes_of(Keys::kBits); ++pass) {
        a.pass = pass;
        a.shift = pass_shift(Keys::kBits, pass);
        a.bits = pass_width(Keys::kBits, pass);
        flyops_topk_passes_count<Keys><<<grid, kPassThreads, 0, p.stream>>>(a);
        if (pass > 0) flyops_topk_passes_filter<Keys><<<grid, kPassThreads, 0, p.stream>>>(a);
        flyops_topk_passes_pick<Keys><<<static_cast<unsigned>(p.rows), kPassPickThreads, 0, p.stream>>>(a);
        if (Status s = launch_status(); s != Status::kSuccess) return s;
      }
      flyops_topk_passes_tally<Keys><<<grid, kPassThreads, 0, p.stream>>>(a);
      flyops_topk_passes_write<Keys><<<grid, kPassThreads, 0, p.stream>>>(a, false);
      flyops_topk_passes_write<Keys><<<grid, kPassThreads, 0, p.stream>>>(a, true);
      return launch_status();
    }
  }

  static Status run(const TopkParams& p, const TopkPlan& plan) {
    if (p.rows == 0) return Status::kSuccess;
#if FLYOPS_TOPK_TRACE
    flyops_topk_grid_dump<<<1, 1, 0, p.stream>>>();  // the previous call's block times
#endif
    switch (plan.kind) {
      case TopkPlan::Kind::kWarp: return warp(p);
      case TopkPlan::Kind::kGroup: return group(p, plan);
      case TopkPlan::Kind::kCluster: return one_pass(p, plan.cluster, nullptr, 0, plan.gather);
      case TopkPlan::Kind::kArgmax: return argmax(p, plan.cluster, plan.segs);
      case TopkPlan::Kind::kTwoStage: return two(p, plan.selection());
      case TopkPlan::Kind::kDelegate: return delegates(p, plan);
      case TopkPlan::Kind::kRows: return rows(p);
      case TopkPlan::Kind::kPasses: return passes(p, plan.cluster);
      default: return Status::kUnsupported;
    }
  }
};

}  // namespace flyops::topk
