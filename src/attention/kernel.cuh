// The attention forward kernels: a CTA per (query block, head, batch entry), the causal grid
// running its query blocks heaviest first; or, on the persistent configs (traits.h), a CTA
// per SM walking the tiles by a stride of the grid, its producer loading the next tile's Q
// into the other buffer while the consumers finish and store this one. Warpgroup 0 gives up
// registers and one of its threads streams Q, K and V with TMA; warpgroups 1 and 2 (and 3)
// each own 64 query rows. (Two kernels rather than one with both forms: the causal D = 64
// configs measured 1-2% slower compiled beside the walk.)
#pragma once

#include <cuda.h>

#include "epilogue.cuh"
#include "mainloop.cuh"

namespace flyops::attention {

struct Tile {
  int qb, h, b;
  // Tile t of a persistent walk: query block fastest, so that the CTAs running at once share
  // a head's keys and values in L2 (the launched grid's order).
  FLYOPS_DEVICE static Tile of(int t, const Args& a) {
    const int hb = t / a.q_blocks;
    return Tile{t - hb * a.q_blocks, hb % a.heads, hb / a.heads};
  }
};

}  // namespace flyops::attention

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
    if (threadIdx.x == 0 && blocks > 0) {
      tile::RingState<Cfg::kStages> sk, sv;
      produce<Cfg>(&map_q, &map_k, &map_v, sm, 0, &q_bar, kring, vring, sk, sv, q0, blocks, h, hk, b);
    }
  } else {
    tile::regs_increase<Cfg::kConsumerRegs>();
    float o[Cfg::kD / 2];
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.f, 0.f};
    if (blocks > 0) {
      tile::RingState<Cfg::kStages> sk, sv;
      consume<Cfg, T>(o, m, l, sm, 0, &q_bar, 0u, kring, vring, sk, sv, args, q0, blocks, wg - 1);
    } else {
#pragma unroll
      for (float& v : o) v = 0.f;
    }
    store_output<Cfg, T>(o, m, l, sm, 0, &map_o, args, q0, wg - 1, h, b);
  }
}

// The persistent config's kernel (Cfg::kPersistent: non-causal, so every tile has a key
// block): a CTA per SM, tiles t = blockIdx.x + i gridDim.x, Q buffers alternating.
template <typename Cfg, typename T>
__global__ void __launch_bounds__(Cfg::kThreads, 1)
    flyops_attention_fwd_persistent(const __grid_constant__ CUtensorMap map_q,
                                    const __grid_constant__ CUtensorMap map_k,
                                    const __grid_constant__ CUtensorMap map_v,
                                    const __grid_constant__ CUtensorMap map_o, const flyops::attention::Args args) {
  using namespace flyops;
  using namespace flyops::attention;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ tile::Ring<Cfg::kStages> kring, vring;
  // Per Q buffer: loaded, and free again once every consumer warp's output stores have read
  // it (the output is staged there).
  __shared__ uint64_t q_full[Cfg::kQBuffers], q_empty[Cfg::kQBuffers];
  const Smem<Cfg> sm{tile::align_1024(smem_raw)};
  const int wg = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    kring.init(Cfg::kConsumers * 4);  // one arrival per consumer warp
    vring.init(Cfg::kConsumers * 4);
    for (int i = 0; i < Cfg::kQBuffers; ++i) {
      tile::mbarrier_init(&q_full[i], 1);
      tile::mbarrier_init(&q_empty[i], Cfg::kConsumers * 4);
    }
    tile::tma_prefetch_map(&map_q);
    tile::tma_prefetch_map(&map_k);
    tile::tma_prefetch_map(&map_v);
    tile::tma_prefetch_map(&map_o);
  }
  __syncthreads();
  auto blocks_of = [&](const Tile& tl) {
    return KeyRange::of(tl.qb * Cfg::kBM, Cfg::kBM, Cfg::kBN, args.Lk, args.causal, args.offset).blocks;
  };
  tile::RingState<Cfg::kStages> sk, sv;
  if (wg == 0) {
    tile::regs_decrease<Cfg::kProducerRegs>();
    if (threadIdx.x != 0) return;
    uint32_t it = 0;
    for (int t = blockIdx.x; t < args.tiles; t += gridDim.x, ++it) {
      const Tile tl = Tile::of(t, args);
      const int buf = static_cast<int>(it % 2);
      if (it >= 2) tile::mbarrier_wait(&q_empty[buf], (it / 2 - 1) & 1u);
      produce<Cfg>(&map_q, &map_k, &map_v, sm, buf, &q_full[buf], kring, vring, sk, sv, tl.qb * Cfg::kBM,
                   blocks_of(tl), tl.h, tl.h / args.group, tl.b);
    }
  } else {
    tile::regs_increase<Cfg::kConsumerRegs>();
    float o[Cfg::kD / 2];
    float m[2], l[2];
    uint32_t it = 0;
    for (int t = blockIdx.x; t < args.tiles; t += gridDim.x, ++it) {
      const Tile tl = Tile::of(t, args);
      const int q0 = tl.qb * Cfg::kBM;
      m[0] = m[1] = kNegInf;
      l[0] = l[1] = 0.f;
      const int buf = static_cast<int>(it % 2);
      consume<Cfg, T>(o, m, l, sm, buf, &q_full[buf], (it / 2) & 1u, kring, vring, sk, sv, args, q0, blocks_of(tl),
                      wg - 1);
      store_output<Cfg, T>(o, m, l, sm, buf, &map_o, args, q0, wg - 1, tl.h, tl.b);
      if (threadIdx.x % 32 == 0) tile::mbarrier_arrive(&q_empty[buf]);  // the warp's stores have read it
    }
  }
}
