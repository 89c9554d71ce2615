// The attention forward kernel: one CTA per (query block, head, batch entry); the causal
// grid runs its query blocks heaviest first. Warpgroup 0 gives up registers and one of its
// threads streams Q, K and V with TMA; warpgroups 1 and 2 each own 64 query rows.
#pragma once

#include <cuda.h>

#include "epilogue.cuh"
#include "mainloop.cuh"

template <typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flyops_attention_fwd(const __grid_constant__ CUtensorMap map_q, const __grid_constant__ CUtensorMap map_k,
                         const __grid_constant__ CUtensorMap map_v, const __grid_constant__ CUtensorMap map_o,
                         const flyops::attention::Args args) {
  using namespace flyops;
  using namespace flyops::attention;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ tile::Ring<Cfg::kStages> kring, vring;
  __shared__ uint64_t q_bar;
  const Smem<Cfg> sm{tile::align_1024(smem_raw)};
  const int qb = args.causal ? args.q_blocks - 1 - static_cast<int>(blockIdx.x) : static_cast<int>(blockIdx.x);
  const int h = blockIdx.y, b = blockIdx.z, hk = h / args.group;
  const int q0 = qb * Cfg::kBM;
  const int blocks = KeyRange::of(q0, Cfg::kBM, Cfg::kBN, args.Lk, args.causal, args.offset).blocks;
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    kring.init(Cfg::kConsumers * 4);  // one arrival per consumer warp
    vring.init(Cfg::kConsumers * 4);
    tile::mbarrier_init(&q_bar, 1);
    tile::tma_prefetch_map(&map_q);
    tile::tma_prefetch_map(&map_k);
    tile::tma_prefetch_map(&map_v);
    tile::tma_prefetch_map(&map_o);
  }
  __syncthreads();
  if (wg == 0) {
    tile::regs_decrease<Cfg::kProducerRegs>();
    // No key block (a causal block above the diagonal's start): Q is not loaded, since its
    // shared memory stages the zero output.
    if (threadIdx.x == 0 && blocks > 0) produce<Cfg>(&map_q, &map_k, &map_v, sm, &q_bar, kring, vring, q0, blocks, h, hk, b);
  } else {
    tile::regs_increase<Cfg::kConsumerRegs>();
    float o[Cfg::kD / 2];
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};
    if (blocks > 0) {
      consume<Cfg, T>(o, m, l, sm, &q_bar, kring, vring, args, q0, blocks, wg - 1);
    } else {
#pragma unroll
      for (float& v : o) v = 0.f;
    }
    store_output<Cfg, T>(o, m, l, sm, &map_o, args, q0, wg - 1, h, b);
  }
}
