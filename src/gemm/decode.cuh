// The decode kernel: C = alpha * A B + beta * D for a few rows of A (M <= 64), where the
// time is the read of B (a weight matrix). It computes the transposed problem
// C^T = B^T A^T, so B's N rows fill wgmma's 64-row side and A's M rows ride along as a
// narrow kMP-wide side (zero-filled by TMA past M).
//
// One CTA per (128-row tile of N, part of K). The `parts` CTAs of a tile form a cluster
// along K; each streams its run of K blocks through the usual ring (TMA producer, two
// wgmma consumer warpgroups). Then each pushes its fp32 partial rows to the CTA that owns
// them (rank r owns rows [r, r + 1) * 128 / parts) through distributed shared memory, and
// each owner adds the parts in rank order (the same bits every run) and writes its rows
// with the epilogue. One launch, no global workspace, no atomics, two cluster barriers.
// Two CTAs fit on an SM, so a grid of up to two per SM runs in a single wave.
#pragma once

#include <cuda.h>

#include "epilogue.cuh"
#include "flyops/tile/cluster.h"
#include "mainloop.cuh"

// FLYOPS_GEMM_TRACE=1 at compile time: every 16th CTA prints %globaltimer (ns) at its start,
// the end of its mainloop, after each cluster barrier and at its end (for the probe).
#ifndef FLYOPS_GEMM_TRACE
#define FLYOPS_GEMM_TRACE 0
#endif
#if FLYOPS_GEMM_TRACE
#include <cstdio>
#endif

namespace flyops::gemm {

FLYOPS_DEVICE unsigned long long trace_now() {
#if FLYOPS_GEMM_TRACE
  return tile::globaltimer_ns();
#else
  return 0;
#endif
}

inline constexpr int kDecodeRows = 128;   // rows of N per CTA (two consumer warpgroups)
inline constexpr int kDecodeCtasPerSm = 2;

// kMP: A's rows padded to a wgmma width (16 or 64). MN-major A needs whole 64-element spans.
template <int kMP>
using DecodeConfig = Config<kDecodeRows, kMP, 4, false>;

// The partials, in the drained ring: rank r owns rows [r, r + 1) * kDecodeRows / parts of
// the tile and receives every part's values for them, as part-major blocks of its rows x
// kMP fp32 (rows padded by 4 floats against bank conflicts). parts x rows is 128 always.
template <int kMP>
struct Partials {
  static constexpr int kLd = kMP + 4;
  static constexpr uint32_t kBytes = kDecodeRows * kLd * 4;
  static_assert(kBytes <= DecodeConfig<kMP>::kStages * DecodeConfig<kMP>::kStageBytes, "fits in the drained ring");
};

template <typename T>
struct DecodeArgs {
  int64_t M, N, K;
  EpilogueArgs<T> epi;  // C (M x N, row stride ldc) and the addend, untransposed
};

// A consumer warpgroup's fragment (rows 64 * wg.., m64nkMP layout) to the CTA that owns
// its rows: a warp's 16 rows have one owner (a rank owns a multiple of 16 rows). Remote
// stores do not wait for an answer; the next cluster barrier publishes them. Only A's M
// real rows (the fragment's columns below M) travel: at M = 1 one store in eight.
template <int kMP>
FLYOPS_DEVICE void push_partial(float* recv, const float (&acc)[kMP / 2], int wg, int parts, int rank, int M) {
  const int w = (threadIdx.x % 128) / 32, l = threadIdx.x % 32;
  const int rows = kDecodeRows / parts, row0 = 64 * wg + 16 * w;
  const int owner = row0 / rows;
  float* block = recv + (rank * rows + row0 % rows) * Partials<kMP>::kLd;  // this part's block there
  const uint32_t remote = parts > 1 ? tile::peer_addr(block, static_cast<uint32_t>(owner)) : 0u;
#pragma unroll
  for (int j = 0; j < kMP / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = l / 4 + 8 * h, c = 8 * j + 2 * (l % 4);
      if (c >= M) continue;
      const float x = acc[4 * j + 2 * h], y = acc[4 * j + 2 * h + 1];
      const int off = r * Partials<kMP>::kLd + c;
      if (parts > 1)
        tile::peer_store_f32x2(remote + 4u * static_cast<uint32_t>(off), x, y);
      else
        *reinterpret_cast<float2*>(block + off) = make_float2(x, y);
    }
}

// This CTA's rows of the tile: the parts added in rank order (the same bits every run),
// then the epilogue. Consecutive threads take consecutive n, so C's stores coalesce.
template <typename T, int kMP>
FLYOPS_DEVICE void reduce_rows(const float* recv, const DecodeArgs<T>& args, int parts, int rank, int64_t n0) {
  const int rows = kDecodeRows / parts;
  const int64_t M = args.M, N = args.N;
  const EpilogueArgs<T>& e = args.epi;
  for (int i = threadIdx.x; i < rows * M; i += blockDim.x) {
    const int r = i % rows, m = i / rows;
    const int64_t n = n0 + rank * rows + r;
    if (n >= N) continue;
    float sum = 0.f;
    for (int p = 0; p < parts; ++p) sum += recv[(p * rows + r) * Partials<kMP>::kLd + m];
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
  unsigned char* base = tile::align_1024(smem_raw);
  const Stages<Cfg> s{base};
  const unsigned long long t_start = trace_now();
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
  float* recv = reinterpret_cast<float*>(base);
  if (wg == 0) {
    if (threadIdx.x == 0) {
      tile::RingState<Cfg::kStages> st;
      for (int kb = kb_begin; kb < kb_end; ++kb, st.advance())
        produce_block<Cfg, kWKMajor, kXKMajor, 1>(&map_w, &map_x, s, ring, st, kb, tile_n * kDecodeRows, 0, 0, 0);
    }
    __syncwarp();
  }
  // Not zeroed: the first wgmma overwrites (scale-d 0). Zeroing here made ptxas serialize
  // every wgmma of the mainloop (C7515: non-wgmma instructions defining accumulators).
  float acc[kMP / 2];
  if (wg > 0) {
    tile::RingState<Cfg::kStages> st;
    consume<Cfg, T, kWKMajor, kXKMajor, 1>(acc, s, ring, st, kb_begin, kb_end, wg - 1);
  }
  const unsigned long long t_mainloop = trace_now();
  // Every CTA of the cluster is past its mainloop (its ring drained) before any partial
  // lands in it; then every partial is in place before any is added.
  unsigned long long t_sync1, t_sync2;
  if (parts > 1) {
    tile::cluster_sync();
    t_sync1 = trace_now();
    if (wg > 0) push_partial<kMP>(recv, acc, wg - 1, parts, rank, static_cast<int>(args.M));
    tile::cluster_sync();
  } else {
    __syncthreads();
    t_sync1 = trace_now();
    if (wg > 0) push_partial<kMP>(recv, acc, wg - 1, 1, 0, static_cast<int>(args.M));
    __syncthreads();
  }
  t_sync2 = trace_now();
  reduce_rows<T, kMP>(recv, args, parts, rank, int64_t{tile_n} * kDecodeRows);
#if FLYOPS_GEMM_TRACE
  if (threadIdx.x == 128 && blockIdx.x % 16 == 0)
    printf("decode trace cta %u smid %u: %llu %llu %llu %llu %llu\n", blockIdx.x, tile::sm_id(), t_start,
           t_mainloop, t_sync1, t_sync2, trace_now());
#else
  (void)t_start, (void)t_mainloop, (void)t_sync1, (void)t_sync2;
#endif
}
