// The producer (TMA loads of A and B blocks into the ring) and the consumers' mainloop
// (wgmma over each block, then the slot goes back to the producer).
#pragma once

#include <cuda.h>

#include "flyops/tile/pipeline.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"
#include "flyops/tile/wgmma_ops.h"
#include "scheduler.h"
#include "traits.h"

namespace flyops::gemm {

// The ring's slots: stage i holds A's block, then B's, at base + i * kStageBytes (computed,
// so a runtime stage index needs no local-memory array).
struct Stages {
  unsigned char* base;
  FLYOPS_DEVICE unsigned char* a(int i) const { return base + i * kStageBytes; }
  template <bool kAKMajor>
  FLYOPS_DEVICE unsigned char* b(int i) const {
    return base + i * kStageBytes + Operand<kBM, kAKMajor>::kBytes;
  }
};

// Loads one operand's block for k block `kb` at row `row0` (M or N) of batch `z`. The
// tensor map's dimensions are {K, rows, batch} for K-major, {rows, K, batch} for MN-major.
template <typename Op, bool kKMajor>
FLYOPS_DEVICE void load_operand(unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int kb, int row0, int z) {
  if constexpr (kKMajor) {
    tile::tma_load(dst, map, bar, kb * kBK, row0, z);
  } else {
#pragma unroll
    for (int i = 0; i < Op::kBoxes; ++i) tile::tma_load(dst + i * Op::kBoxBytes, map, bar, row0 + i * kSpanElems, kb * kBK, z);
  }
}

// One thread of the producer warpgroup: every k block of every tile this CTA owns, running
// ahead across tile boundaries as far as the ring lets it.
template <bool kAKMajor, bool kBKMajor>
FLYOPS_DEVICE void produce(const CUtensorMap* map_a, const CUtensorMap* map_b, const Stages& s,
                           tile::Ring<kStages>& ring, const Scheduler& sched, int k_blocks) {
  using L = StageLayout<kAKMajor, kBKMajor>;
  tile::RingState<kStages> st;
  for (int64_t t = blockIdx.x; t < sched.total; t += gridDim.x) {
    const TileCoord tc = sched.at(t);
    for (int kb = 0; kb < k_blocks; ++kb, st.advance()) {
      ring.producer_acquire(st, kStageBytes);
      load_operand<typename L::A, kAKMajor>(s.a(st.stage), map_a, ring.full_barrier(st), kb, tc.m * kBM, tc.z);
      load_operand<typename L::B, kBKMajor>(s.b<kAKMajor>(st.stage), map_b, ring.full_barrier(st), kb, tc.n * kBN,
                                            tc.z);
    }
  }
}

template <typename Op, bool kKMajor>
FLYOPS_DEVICE uint64_t operand_desc(const unsigned char* block, int row0, int kk) {
  const uint32_t addr = tile::smem_addr(block) + Op::offset(row0, kk);
  if constexpr (kKMajor)
    return tile::wgmma_desc(addr, 16u, 8u * 128u, kSwizzle);
  else
    return tile::wgmma_desc_mnmajor<kSwizzle>(addr, Op::kBoxBytes);
}

// A consumer warpgroup's mainloop for one tile: rows [64 * wg, 64 * wg + 64) of it into acc
// (fragment layout of m64n256). One wgmma group stays in flight: block kb's wgmmas are
// issued before block kb - 1's slot is released (each warp arrives once it has waited for
// its own part, so the empty barrier expects 4 arrivals per consumer warpgroup).
template <typename T, bool kAKMajor, bool kBKMajor>
FLYOPS_DEVICE void consume(float (&acc)[kBN / 2], const Stages& s, tile::Ring<kStages>& ring,
                           tile::RingState<kStages>& st, int k_blocks, int wg) {
  using L = StageLayout<kAKMajor, kBKMajor>;
  const bool signals = threadIdx.x % 32 == 0;
  tile::RingState<kStages> prev = st;
  for (int kb = 0; kb < k_blocks; ++kb) {
    ring.consumer_wait(st);
    tile::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const uint64_t da = operand_desc<typename L::A, kAKMajor>(s.a(st.stage), 64 * wg, kk);
      const uint64_t db = operand_desc<typename L::B, kBKMajor>(s.b<kAKMajor>(st.stage), 0, kk);
      tile::wgmma_m64k16<T, kBN, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc, da, db, kb > 0 || kk > 0);
    }
    tile::wgmma_commit();
    tile::wgmma_wait<1>();
    if (kb > 0) {
      if (signals) ring.consumer_release(prev);
      prev.advance();
    }
    st.advance();
  }
  tile::wgmma_wait<0>();
  if (signals) ring.consumer_release(prev);
}

}  // namespace flyops::gemm
