// The producer (TMA loads of A and B blocks into the ring) and the consumers' mainloop
// (wgmma over each block, then the slot goes back to the producer), for a tile Config.
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
template <typename Cfg>
struct Stages {
  unsigned char* base;
  FLYOPS_DEVICE unsigned char* a(int i) const { return base + i * Cfg::kStageBytes; }
  template <bool kAKMajor>
  FLYOPS_DEVICE unsigned char* b(int i) const {
    return base + i * Cfg::kStageBytes + Operand<Cfg::kBM, kAKMajor>::kBytes;
  }
};

// Loads one operand's block for k block `kb` at row `row0` (M or N) of batch `z`. The
// tensor map's dimensions are {K, rows, batch} for K-major, {rows, K, batch} for MN-major.
// With kParts > 1 this CTA loads part `part` of the block (its rows 1/kParts of the way
// in) and multicasts it to every CTA of the cluster, which each load the other parts.
template <typename Op, bool kKMajor, int kParts>
FLYOPS_DEVICE void load_operand(unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int kb, int row0, int z,
                                int part) {
  constexpr uint16_t kAll = (1u << kParts) - 1u;
  if constexpr (kKMajor) {
    constexpr int kRows = Op::kRowsPerBox / kParts;  // the tensor map's box rows
    unsigned char* d = dst + part * kRows * 128;
    if constexpr (kParts == 1)
      tile::tma_load(d, map, bar, kb * kBK, row0, z);
    else
      tile::tma_load_multicast(d, map, bar, kAll, kb * kBK, row0 + part * kRows, z);
  } else {
    constexpr int kBoxes = Op::kBoxes / kParts;
#pragma unroll
    for (int j = 0; j < kBoxes; ++j) {
      const int i = part * kBoxes + j;
      if constexpr (kParts == 1)
        tile::tma_load(dst + i * Op::kBoxBytes, map, bar, row0 + i * kSpanElems, kb * kBK, z);
      else
        tile::tma_load_multicast(dst + i * Op::kBoxBytes, map, bar, kAll, row0 + i * kSpanElems, kb * kBK, z);
    }
  }
}

// Producer: waits for the ring's next slot, then loads k block `kb` of A (rows from
// row_a) and B (rows from row_b; in kCluster parts, this CTA's part `rank`) into it.
template <typename Cfg, bool kAKMajor, bool kBKMajor, int kCluster>
FLYOPS_DEVICE void produce_block(const CUtensorMap* map_a, const CUtensorMap* map_b, const Stages<Cfg>& s,
                                 tile::Ring<Cfg::kStages>& ring, const tile::RingState<Cfg::kStages>& st, int kb,
                                 int row_a, int row_b, int z, int rank) {
  using L = typename Cfg::template Stage<kAKMajor, kBKMajor>;
  ring.producer_acquire(st, Cfg::kStageBytes);
  load_operand<typename L::A, kAKMajor, 1>(s.a(st.stage), map_a, ring.full_barrier(st), kb, row_a, z, 0);
  load_operand<typename L::B, kBKMajor, kCluster>(s.template b<kAKMajor>(st.stage), map_b, ring.full_barrier(st), kb,
                                                  row_b, z, rank);
}

// One thread of the producer warpgroup: every k block of every tile this CTA owns, running
// ahead across tile boundaries as far as the ring lets it. A comes from this CTA's tile
// row; B, shared by the cluster's CTAs, is loaded in kCluster parts, one per CTA.
template <typename Cfg, bool kAKMajor, bool kBKMajor, int kCluster>
FLYOPS_DEVICE void produce(const CUtensorMap* map_a, const CUtensorMap* map_b, const Stages<Cfg>& s,
                           tile::Ring<Cfg::kStages>& ring, const Scheduler& sched, int k_blocks, int rank) {
  tile::RingState<Cfg::kStages> st;
  for (int64_t t = blockIdx.x / kCluster; t < sched.total; t += gridDim.x / kCluster) {
    const TileCoord tc = sched.at(t, rank);
    for (int kb = 0; kb < k_blocks; ++kb, st.advance())
      produce_block<Cfg, kAKMajor, kBKMajor, kCluster>(map_a, map_b, s, ring, st, kb, tc.m * Cfg::kBM,
                                                       tc.n * Cfg::kBN, tc.z, rank);
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
// (fragment layout of m64nkBN), over k blocks [kb_begin, kb_end) (at least one). One wgmma group stays in flight: block kb's wgmmas are
// issued before block kb - 1's slot is released. Each warp releases once it has waited
// for its own part, on the slot of every CTA in the cluster (their producers write parts
// of B into this CTA's slot), so an empty barrier expects 4 arrivals per consumer
// warpgroup per CTA.
template <int kCluster, int kStages>
FLYOPS_DEVICE void release(tile::Ring<kStages>& ring, const tile::RingState<kStages>& st) {
  if constexpr (kCluster == 1) {
    if (threadIdx.x % 32 == 0) ring.consumer_release(st);
  } else {
    // Lane r signals cluster CTA r: the remote arrivals go out in parallel.
    const uint32_t lane = threadIdx.x % 32;
    if (lane < kCluster) tile::mbarrier_arrive_peer(&ring.empty[st.stage], lane);
  }
}

template <typename Cfg, typename T, bool kAKMajor, bool kBKMajor, int kCluster>
FLYOPS_DEVICE void consume(float (&acc)[Cfg::kBN / 2], const Stages<Cfg>& s, tile::Ring<Cfg::kStages>& ring,
                           tile::RingState<Cfg::kStages>& st, int kb_begin, int kb_end, int wg) {
  using L = typename Cfg::template Stage<kAKMajor, kBKMajor>;
  tile::RingState<Cfg::kStages> prev = st;
  for (int kb = kb_begin; kb < kb_end; ++kb) {
    ring.consumer_wait(st);
    tile::wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < kBK / 16; ++kk) {
      const uint64_t da = operand_desc<typename L::A, kAKMajor>(s.a(st.stage), 64 * wg, kk);
      const uint64_t db = operand_desc<typename L::B, kBKMajor>(s.template b<kAKMajor>(st.stage), 0, kk);
      tile::wgmma_m64k16<T, Cfg::kBN, kAKMajor ? 0 : 1, kBKMajor ? 0 : 1>(acc, da, db, kb > kb_begin || kk > 0);
    }
    tile::wgmma_commit();
    tile::wgmma_wait<1>();
    if (kb > kb_begin) {
      release<kCluster>(ring, prev);
      prev.advance();
    }
    st.advance();
  }
  tile::wgmma_wait<0>();
  release<kCluster>(ring, prev);
}

}  // namespace flyops::gemm
