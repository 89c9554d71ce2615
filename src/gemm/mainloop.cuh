// The producer (TMA loads of A and B blocks into the ring) and the consumers' mainloop
// (wgmma over each block, then the slot goes back to the producer).
#pragma once

#include <cuda.h>

#include "flyops/tile/pipeline.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"
#include "flyops/tile/wgmma_ops.h"
#include "traits.h"

namespace flyops::gemm {

// The ring's slots: stage i holds A's block, then B's, at base + i * kStageBytes (computed,
// so a runtime stage index needs no local-memory array).
struct Stages {
  unsigned char* base;
  FLYOPS_DEVICE unsigned char* a(int i) const { return base + i * kStageBytes; }
  FLYOPS_DEVICE unsigned char* b(int i) const { return base + i * kStageBytes + ATile::kBytes; }
};

// One thread of the producer warpgroup.
FLYOPS_DEVICE void produce(const CUtensorMap* map_a, const CUtensorMap* map_b, const Stages& s,
                           tile::Ring<kStages>& ring, int k_blocks, int tile_m, int tile_n) {
  tile::RingState<kStages> st;
  for (int kb = 0; kb < k_blocks; ++kb, st.advance()) {
    ring.producer_acquire(st, kStageBytes);
    tile::tma_load(s.a(st.stage), map_a, ring.full_barrier(st), kb * kBK, tile_m);
    tile::tma_load(s.b(st.stage), map_b, ring.full_barrier(st), kb * kBK, tile_n);
  }
}

// A consumer warpgroup: rows [64 * wg, 64 * wg + 64) of the tile into acc (fragment layout
// of m64n256). `wg` is 0 or 1; its named barrier is 1 + wg.
FLYOPS_DEVICE void consume(float (&acc)[kBN / 2], const Stages& s, tile::Ring<kStages>& ring, int k_blocks, int wg) {
  tile::RingState<kStages> st;
  for (int kb = 0; kb < k_blocks; ++kb, st.advance()) {
    ring.consumer_wait(st);
    tile::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      // Along K inside the swizzle span the start address moves by 32 bytes per k16 step.
      const uint32_t a = tile::smem_addr(s.a(st.stage)) + wg * 64 * ATile::kRowBytes + kk * 32;
      const uint32_t b = tile::smem_addr(s.b(st.stage)) + kk * 32;
      tile::wgmma_m64n256k16_bf16(acc, tile::wgmma_desc_kmajor<ATile>(a), tile::wgmma_desc_kmajor<BTile>(b),
                                  kb > 0 || kk > 0);
    }
    tile::wgmma_commit();
    tile::wgmma_wait<0>();
    // Every warp of the warpgroup is done reading the slot before it is handed back.
    asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
    if (threadIdx.x % 128 == 0) ring.consumer_release(st);
  }
}

}  // namespace flyops::gemm
