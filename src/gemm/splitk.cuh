// Split-K for the wide kernel's 128 x 256 tiles where there are too few of them to fill the
// GPU and K is long (113 x 203 x 4096 is one tile: one CTA walking 64 K blocks). Two
// launches, no clusters (v17's clusters of 225 KB CTAs started tens of microseconds late):
//   flyops_gemm_splitk: `parts` CTAs per tile, each streaming its run of K blocks through the
//     usual ring (TMA producer, two wgmma consumer warpgroups), then writing its fp32
//     accumulators to the workspace, each consumer warp's in its own 16 KB slot in register
//     order (lane l's float4 of registers 4 i .. 4 i + 3 at (32 i + l) x 16 bytes: 512
//     contiguous bytes a warp store);
//   flyops_gemm_splitk_reduce: a one-warp CTA per consumer warp of each tile: the parts
//     added in part order (the same bits every run, no atomics: deterministic mode may use
//     it), then the wide kernel's staged epilogue for that warp's 16 rows. It is a
//     programmatic dependent launch, so its CTAs are resident before the parts end.
#pragma once

#include <cuda.h>

#include "epilogue.cuh"
#include "flyops/tile/launch.h"
#include "kernel.cuh"
#include "mainloop.cuh"

namespace flyops::gemm {

inline constexpr int kSplitWarps = kConsumers * 4;  // a tile's consumer warps
inline constexpr int kSplitSlotFloats = 128 * 32;   // a warp's 128 fp32 registers x 32 lanes
// The reduction: a one-warp CTA per (tile, consumer warp), so that one tile's reduction
// spreads over eight SMs; its shared memory is that warp's epilogue staging, 1024-aligned.
inline constexpr int kReduceSmemBytes = kWarpStagingBytes + 1024;

// The slot of consumer warp g (0 .. 7) of part `part` of tile `tile`.
FLYOPS_HD int64_t split_slot(int64_t tile, int parts, int part, int g) {
  return ((tile * parts + part) * kSplitWarps + g) * kSplitSlotFloats;
}

// The workspace of `tiles` tiles split in `parts`.
FLYOPS_HD int64_t split_workspace_floats(int64_t tiles, int parts) { return tiles * parts * kSplitWarps * kSplitSlotFloats; }

}  // namespace flyops::gemm

template <typename T, bool kAKMajor, bool kBKMajor>
__global__ void __launch_bounds__(flyops::gemm::kThreads, 1)
    flyops_gemm_splitk(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                       const flyops::gemm::KernelArgs<T> args, float* partials, int parts) {
  using namespace flyops;
  using namespace flyops::gemm;
  using Cfg = Wide;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ tile::Ring<Cfg::kStages> ring;
  unsigned char* base = tile::align_1024(smem_raw);
  const Stages<Cfg> s{base};
  const int wg = threadIdx.x / 128;
  const int64_t tile_index = blockIdx.x / parts;
  const int part = static_cast<int>(blockIdx.x % parts);
  const TileCoord tc = args.sched.at(tile_index, 0);
  // This part's run of K blocks (the launcher gives every part at least one).
  const int k_blocks = static_cast<int>((args.K + kBK - 1) / kBK);
  const int kb_begin = part * k_blocks / parts, kb_end = (part + 1) * k_blocks / parts;
  if (threadIdx.x == 0) {
    ring.init(kConsumers * 4);  // one arrival per consumer warp
    tile::tma_prefetch_map(&map_a);
    tile::tma_prefetch_map(&map_b);
  }
  __syncthreads();
  tile::allow_dependent_launch();  // the reduction's CTAs may take free SMs now; they wait for this grid
  if (wg == 0) {
    tile::regs_decrease<kProducerRegs>();
    if (threadIdx.x == 0) {
      tile::RingState<Cfg::kStages> st;
      for (int kb = kb_begin; kb < kb_end; ++kb, st.advance())
        produce_block<Cfg, kAKMajor, kBKMajor, 1>(&map_a, &map_b, s, ring, st, kb, tc.m * Cfg::kBM, tc.n * Cfg::kBN,
                                                  tc.z, 0);
    }
    return;
  }
  tile::regs_increase<kConsumerRegs>();
  float acc[Cfg::kBN / 2];  // not zeroed: the run's first wgmma has scale-d 0
  tile::RingState<Cfg::kStages> st;
  consume<Cfg, T, kAKMajor, kBKMajor, 1>(acc, s, ring, st, kb_begin, kb_end, wg - 1);
  const int g = (threadIdx.x - 128) / 32, lane = threadIdx.x % 32;
  float4* slot = reinterpret_cast<float4*>(partials + split_slot(tile_index, parts, part, g));
#pragma unroll
  for (int i = 0; i < Cfg::kBN / 8; ++i)
    slot[i * 32 + lane] = make_float4(acc[4 * i], acc[4 * i + 1], acc[4 * i + 2], acc[4 * i + 3]);
}

template <typename T>
__global__ void __launch_bounds__(32)
    flyops_gemm_splitk_reduce(const __grid_constant__ CUtensorMap map_c, const flyops::gemm::KernelArgs<T> args,
                              const float* partials, int parts) {
  using namespace flyops;
  using namespace flyops::gemm;
  using Cfg = Wide;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  unsigned char* staging = tile::align_1024(smem_raw);
  const int lane = threadIdx.x;
  const int64_t tile_index = blockIdx.x / kSplitWarps;
  const int g = static_cast<int>(blockIdx.x % kSplitWarps);  // the tile's consumer warp this CTA stands in for
  const TileCoord tc = args.sched.at(tile_index, 0);
  if (args.tma_store && lane == 0) tile::tma_prefetch_map(&map_c);
  tile::grid_dependency_wait();  // every part's partials written and visible
  // Part by part, each part's 32 loads independent of each other (in flight together); the
  // sums run in part order, the same for every element and every run.
  float acc[Cfg::kBN / 2];
  const float4* slot = reinterpret_cast<const float4*>(partials + split_slot(tile_index, parts, 0, g));
#pragma unroll
  for (int i = 0; i < Cfg::kBN / 8; ++i) {
    const float4 v = slot[i * 32 + lane];
    acc[4 * i] = v.x, acc[4 * i + 1] = v.y, acc[4 * i + 2] = v.z, acc[4 * i + 3] = v.w;
  }
  for (int part = 1; part < parts; ++part) {
    slot = reinterpret_cast<const float4*>(partials + split_slot(tile_index, parts, part, g));
#pragma unroll
    for (int i = 0; i < Cfg::kBN / 8; ++i) {
      const float4 v = slot[i * 32 + lane];
      acc[4 * i] += v.x, acc[4 * i + 1] += v.y, acc[4 * i + 2] += v.z, acc[4 * i + 3] += v.w;
    }
  }
  EpilogueArgs<T> e = args.epi;
  e.c += tc.z * args.batch_stride_c;
  if (e.d != nullptr) e.d += tc.z * args.batch_stride_d;
  // store_tile_staged places warp w of a warpgroup at rows row0 + 16 w; this CTA's one warp
  // is w = 0, so row0 is warp g's own first row.
  const int row0 = tc.m * Cfg::kBM + 16 * g, col0 = tc.n * Cfg::kBN;
  if (args.tma_store) {
    store_tile_staged<true>(acc, e, args.form, &map_c, staging, args.M, args.N, row0, col0, tc.z);
    if (lane == 0) tile::tma_store_drain();
  } else {
    store_tile_staged<false>(acc, e, args.form, &map_c, staging, args.M, args.N, row0, col0, tc.z);
  }
}
