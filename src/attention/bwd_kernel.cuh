// The attention backward's three kernels: the row vectors (Dsum = dO . O, the log-sum-exp in
// the log2 domain), the main kernel (one CTA per key block, key/value head and batch entry;
// dK and dV written, dQ's partial sums added), and dQ scaled into the output dtype.
#pragma once

#include <cuda.h>

#include "bwd_mainloop.cuh"
#include "bwd_mainloop_split.cuh"
#include "epilogue.cuh"
#include "flyops/tile/numeric.h"

namespace flyops::attention {

struct BwdPrepArgs {
  const void* o;
  const void* dout;
  int64_t o_sb, o_sh, o_sl, do_sb, do_sh, do_sl;  // elements
  const float* lse;
  int64_t lse_sb, lse_sh;
  int H, Lq, Lq_pad;
  int64_t rows;  // B H Lq_pad
  float* lse2;
  float* dsum;
};

struct BwdDqArgs {
  const float* dq_acc;
  void* dq;
  int64_t sb, sh, sl;  // elements
  int H, Lq, Lq_pad, D;
  float scale;
  int64_t quads;  // B H Lq D / 4
};

}  // namespace flyops::attention

// A warp a row: Dsum over the head dim in fp32, and the log-sum-exp times log2 e (+inf and
// 0 past Lq, so that padded rows give P = 0).
template <typename T, int kD>
__global__ void __launch_bounds__(256) flyops_attention_bwd_prep(const flyops::attention::BwdPrepArgs a) {
  using namespace flyops;
  constexpr int kPer = kD / 32;  // elements a lane
  const int64_t r = static_cast<int64_t>(blockIdx.x) * 8 + threadIdx.x / 32;
  if (r >= a.rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t bh = r / a.Lq_pad;
  const int q = static_cast<int>(r % a.Lq_pad);
  const int64_t b = bh / a.H, h = bh % a.H;
  float sum = 0.f, lse2 = __builtin_huge_valf();
  if (q < a.Lq) {
    const T* o = static_cast<const T*>(a.o) + b * a.o_sb + h * a.o_sh + q * a.o_sl + lane * kPer;
    const T* d = static_cast<const T*>(a.dout) + b * a.do_sb + h * a.do_sh + q * a.do_sl + lane * kPer;
#pragma unroll
    for (int i = 0; i < kPer; ++i) sum = __fmaf_rn(tile::to_float<T>(o[i]), tile::to_float<T>(d[i]), sum);
    lse2 = a.lse[b * a.lse_sb + h * a.lse_sh + q] * 1.4426950408889634f;
  }
#pragma unroll
  for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  if (lane == 0) {
    a.dsum[r] = q < a.Lq ? sum : 0.f;
    a.lse2[r] = lse2;
  }
}

// dQ = scale x the partial sums, four head-dim elements a thread, read from the chunks'
// fragment order (dq_chunk_offset): element (r, c) of a 64 x 64 chunk was register 4 (c / 8)
// + 2 (r % 16 / 8) + c % 2 of thread 32 (r / 16) + 4 (r % 8) + c % 8 / 2, so four columns
// from a multiple of 4 are one aligned float4.
template <typename T>
__global__ void __launch_bounds__(256) flyops_attention_bwd_dq(const flyops::attention::BwdDqArgs a) {
  using namespace flyops;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * 256 + threadIdx.x;
  if (i >= a.quads) return;
  const int64_t e = i * 4;
  const int d = static_cast<int>(e % a.D);
  const int64_t row = e / a.D;  // (b h) Lq + q
  const int q = static_cast<int>(row % a.Lq);
  const int64_t bh = row / a.Lq, b = bh / a.H, h = bh % a.H;
  const int r = q % 64, c = d % 64;
  const int64_t chunk = (bh * (a.Lq_pad / 64) + q / 64) * (a.D / 64) + d / 64;
  const int tid = 32 * (r / 16) + 4 * (r % 8) + (c % 8) / 2, pair = 2 * (c / 8) + (r % 16) / 8;
  const float4 v = *reinterpret_cast<const float4*>(a.dq_acc + chunk * 4096 + attention::dq_chunk_offset(pair, tid));
  uint2 out;
  out.x = tile::pack2<T>(v.x * a.scale, v.y * a.scale);
  out.y = tile::pack2<T>(v.z * a.scale, v.w * a.scale);
  *reinterpret_cast<uint2*>(static_cast<T*>(a.dq) + b * a.sb + h * a.sh + q * a.sl + d) = out;
}

template <typename Cfg, typename T>
__global__ void __launch_bounds__(flyops::attention::kThreads, 1)
    flyops_attention_bwd(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                         const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_do,
                         const __grid_constant__ CUtensorMap map_dk, const __grid_constant__ CUtensorMap map_dv,
                         const flyops::attention::BwdArgs args) {
  using namespace flyops;
  using namespace flyops::attention;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ tile::Ring<Cfg::kStages> ring;
  __shared__ uint64_t kv_bar;
  const BwdSmem<Cfg> sm{tile::align_1024(smem_raw)};
  const int hk = blockIdx.y, b = blockIdx.z;
  const int kv0 =
      key_block_of(blockIdx.x, gridDim.x, args.dq_turn != nullptr, args.causal) * Cfg::kBN;
  BwdSteps steps{QueryRange::of(kv0, Cfg::kBM, args.Lq, args.causal, args.offset), 0};
  steps.count = steps.blocks() * args.group;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    ring.init(kConsumers * 128);  // every consumer thread arrives (its own loads of the row vectors)
    tile::mbarrier_init(&kv_bar, 1);
    tile::tma_prefetch_map(&map_q);
    tile::tma_prefetch_map(&map_k);
    tile::tma_prefetch_map(&map_v);
    tile::tma_prefetch_map(&map_do);
  }
  __syncthreads();
  if (wg == 0) {
    tile::regs_decrease<kBwdProducerRegs>();
    if (threadIdx.x == 0 && steps.count > 0)
      bwd_produce<Cfg>(&map_q, &map_k, &map_v, &map_do, sm, &kv_bar, ring, args, steps, kv0, hk, b);
  } else {
    tile::regs_increase<kBwdConsumerRegs>();
    float dk[Cfg::kCols / 2], dv[Cfg::kCols / 2];
#pragma unroll
    for (int i = 0; i < Cfg::kCols / 2; ++i) dk[i] = dv[i] = 0.f;
    // This warp's rows and first span of dK and dV: its warpgroup's 64 keys and every span, or
    // (kSplitHeadDim) all 64 keys and its warpgroup's half of the spans.
    int row0 = kStoreRows * ((threadIdx.x % 128) / 32), span0 = 0;
    if constexpr (Cfg::kSplitHeadDim) {
      bwd_consume_split<Cfg, T>(dk, dv, sm, &kv_bar, ring, args, steps, kv0, wg - 1, hk, b);
      span0 = 2 * (wg - 1);
      tile::named_barrier_sync(1, 256);  // both warpgroups read every row of V: done before it is overwritten
    } else {
      bwd_consume<Cfg, T>(dk, dv, sm, &kv_bar, ring, args, steps, kv0, wg - 1, hk, b);
      row0 += 64 * (wg - 1);
    }
    // dV, then dK, staged in this warp's own part of V (no other warp reads it now) and stored.
    auto box = [&](int s) { return sm.v() + (span0 + s) * Cfg::kBN * 128 + row0 * 128; };
    const float one[2] = {1.f, 1.f}, scale[2] = {args.scale, args.scale};
    stage_warp_rows<Cfg::kCols, T>(dv, one, box);
    store_warp_rows<Cfg::kCols>(&map_dv, box, kv0 + row0, hk, b, span0);
    stage_warp_rows<Cfg::kCols, T>(dk, scale, box);
    store_warp_rows<Cfg::kCols>(&map_dk, box, kv0 + row0, hk, b, span0);
  }
}
