// The decode kernel: C = alpha * A B + beta * D for a few rows of A (M <= 64), where the
// time is the read of B (a weight matrix). It computes the transposed problem
// C^T = B^T A^T, so B's N rows fill wgmma's 64-row side and A's M rows ride along as a
// narrow kMP-wide side (zero-filled by TMA past M).
//
// One CTA per (128-row tile of N, part of K). The kParts CTAs of a tile form a cluster
// along K; each streams its run of K blocks through the usual ring (TMA producer, two
// wgmma consumer warpgroups), leaves its fp32 partial tile in its shared memory, and after
// one cluster barrier CTA r adds rows [r, r + 1) * 128 / kParts of all parts, in rank
// order (the same bits every run), through distributed shared memory and writes them with
// the epilogue. One launch, no global workspace, no atomics. Two CTAs fit on an SM, so a
// grid of up to two per SM runs in a single wave.
#pragma once

#include <cuda.h>

#include "epilogue.cuh"
#include "flyops/tile/cluster.h"
#include "mainloop.cuh"

namespace flyops::gemm {

inline constexpr int kDecodeRows = 128;   // rows of N per CTA (two consumer warpgroups)
inline constexpr int kDecodeCtasPerSm = 2;

// kMP: A's rows padded to a wgmma width (16 or 64). MN-major A needs whole 64-element spans.
template <int kMP>
using DecodeConfig = Config<kDecodeRows, kMP, 4, false>;

// The fp32 partial tile, after the ring is drained: 128 rows of kMP columns, rows padded
// by 4 floats so that the fragment's row-strided stores spread over the banks.
template <int kMP>
struct Partial {
  static constexpr int kLd = kMP + 4;
  static constexpr uint32_t kBytes = kDecodeRows * kLd * 4;
  static_assert(kBytes <= DecodeConfig<kMP>::kStages * DecodeConfig<kMP>::kStageBytes, "fits in the drained ring");
};

template <typename T>
struct DecodeArgs {
  int64_t M, N, K;
  EpilogueArgs<T> epi;  // C (M x N, row stride ldc) and the addend, untransposed
};

// A consumer warpgroup's fragment (rows 64 * wg.., m64nkMP layout) into the partial tile.
template <int kMP>
FLYOPS_DEVICE void stash_partial(float* part, const float (&acc)[kMP / 2], int wg) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
#pragma unroll
  for (int j = 0; j < kMP / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = 64 * wg + 16 * w + l / 4 + 8 * h, c = 8 * j + 2 * (l % 4);
      *reinterpret_cast<float2*>(part + r * Partial<kMP>::kLd + c) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
    }
}

// This CTA's share of the tile's rows: every part's partial added in rank order, then the
// epilogue. Consecutive threads take consecutive n, so the stores along C's rows coalesce.
template <typename T, int kMP>
FLYOPS_DEVICE void reduce_rows(const float* part, const DecodeArgs<T>& args, int parts, int rank, int64_t n0) {
  const int rows = kDecodeRows / parts;
  const int64_t M = args.M, N = args.N;
  const EpilogueArgs<T>& e = args.epi;
  for (int i = threadIdx.x; i < rows * M; i += blockDim.x) {
    const int r = rank * rows + i % rows, m = i / rows;
    const int64_t n = n0 + r;
    if (n >= N) continue;
    const float* src = part + r * Partial<kMP>::kLd + m;
    float sum = 0.f;
    if (parts == 1) {
      sum = *src;
    } else {
      for (int p = 0; p < parts; ++p) sum += __uint_as_float(tile::peer_load_u32(tile::peer_addr(src, p)));
    }
    float v = e.alpha * sum;
    if (e.d != nullptr) v += e.beta * tile::to_float(e.d[m * e.d_stride_m + n * e.d_stride_n]);
    e.c[m * e.ldc + n] = tile::from_float<T>(v);
  }
}

}  // namespace flyops::gemm

// map_w: B as the transposed problem's A ({K, N} when B is K-major, else {N, K}); map_x:
// A as its B ({K, M} or {M, K}). Launched with clusters of kParts CTAs along x.
template <typename T, bool kWKMajor, bool kXKMajor, int kMP>
__global__ void __launch_bounds__(flyops::gemm::kThreads, flyops::gemm::kDecodeCtasPerSm)
    flyops_gemm_decode(const __grid_constant__ CUtensorMap map_w, const __grid_constant__ CUtensorMap map_x,
                       const flyops::gemm::DecodeArgs<T> args) {
  using namespace flyops;
  using namespace flyops::gemm;
  using Cfg = DecodeConfig<kMP>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ tile::Ring<Cfg::kStages> ring;
  const uint32_t raw = tile::smem_addr(smem_raw);
  unsigned char* base = smem_raw + ((1024u - (raw & 1023u)) & 1023u);
  const Stages<Cfg> s{base};
  const int wg = threadIdx.x / 128;
  const int parts = static_cast<int>(tile::cluster_size()), rank = static_cast<int>(tile::cluster_rank());
  const int tile_n = static_cast<int>(blockIdx.x) / parts;
  // This part's run of K blocks (the launcher makes every run at least one block long).
  const int k_blocks = static_cast<int>((args.K + kBK - 1) / kBK);
  const int kb_begin = rank * k_blocks / parts, kb_end = (rank + 1) * k_blocks / parts;
  if (threadIdx.x == 0) {
    ring.init(kConsumers * 4);
    tile::tma_prefetch_map(&map_w);
    tile::tma_prefetch_map(&map_x);
  }
  __syncthreads();
  float* part = reinterpret_cast<float*>(base);
  if (wg == 0) {
    if (threadIdx.x == 0) {
      tile::RingState<Cfg::kStages> st;
      for (int kb = kb_begin; kb < kb_end; ++kb, st.advance())
        produce_block<Cfg, kWKMajor, kXKMajor, 1>(&map_w, &map_x, s, ring, st, kb, tile_n * kDecodeRows, 0, 0, 0);
    }
    __syncwarp();
  } else {
    float acc[kMP / 2];
#pragma unroll
    for (float& v : acc) v = 0.f;
    tile::RingState<Cfg::kStages> st;
    consume<Cfg, T, kWKMajor, kXKMajor, 1>(acc, s, ring, st, kb_begin, kb_end, wg - 1);
    // Both consumer warpgroups are past their last wgmma before the ring is overwritten.
    asm volatile("bar.sync 1, 256;" ::: "memory");
    stash_partial<kMP>(part, acc, wg - 1);
  }
  // Every part's partial is in place (cluster-wide release/acquire) before any is read.
  if (parts > 1)
    tile::cluster_sync();
  else
    __syncthreads();
  reduce_rows<T, kMP>(part, args, parts, rank, int64_t{tile_n} * kDecodeRows);
  // No CTA leaves while a peer may still read its partial.
  if (parts > 1) tile::cluster_sync();
}
