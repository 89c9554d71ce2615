// The attention backward's producer and a consumer warpgroup's loop over the query blocks
// (bwd_traits.h has the products). Per step: S^T and dP^T are issued together; P^T is made
// while dP^T still runs; then dS^T, the RS products for dV and dK, dS^T staged for dQ, and
// dQ's share added to the fp32 partials once every product has landed.
#pragma once

#include <cuda.h>

#include "bwd_traits.h"
#include "flyops/tile/bulk_copy.h"  // bulk_copy_g2s, bulk_reduce_add_s2g
#include "flyops/tile/pipeline.h"
#include "flyops/tile/stmatrix.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"
#include "flyops/tile/wgmma_ops.h"
#include "mainloop.cuh"  // kmajor_desc, value_desc, load_block
#include "bwd_softmax.cuh"
#include "softmax.cuh"   // to_operand

namespace flyops::attention {

// Shared memory, every block 1024-aligned: K, V (kSpans blocks of kBN rows each), the ring's
// Q and dO blocks, two dS^T buffers, two P^T buffers (kSplitHeadDim), two dQ staging buffers
// per warpgroup (not kSplitHeadDim), then the ring's row vectors (scaled LSE, Dsum).
template <typename Cfg>
struct BwdSmem {
  unsigned char* base;
  static constexpr uint32_t kQOff = 2 * Cfg::kKVBytes;
  static constexpr uint32_t kDOOff = kQOff + Cfg::kStages * Cfg::kQBytes;
  static constexpr uint32_t kDSOff = kDOOff + Cfg::kStages * Cfg::kQBytes;
  static constexpr uint32_t kPTOff = kDSOff + 2 * Cfg::kDSBytes;
  static constexpr uint32_t kDQOff = kPTOff + 2 * Cfg::kPTBytes;
  static constexpr uint32_t kRowsOff = kDQOff + 2 * Cfg::kDQBuffers * Cfg::kDQBytes;
  FLYOPS_DEVICE unsigned char* k() const { return base; }
  FLYOPS_DEVICE unsigned char* v() const { return base + Cfg::kKVBytes; }
  FLYOPS_DEVICE unsigned char* q(int s) const { return base + kQOff + s * Cfg::kQBytes; }
  FLYOPS_DEVICE unsigned char* dout(int s) const { return base + kDOOff + s * Cfg::kQBytes; }
  FLYOPS_DEVICE unsigned char* ds(int buf) const { return base + kDSOff + buf * Cfg::kDSBytes; }
  FLYOPS_DEVICE unsigned char* pt(int buf) const { return base + kPTOff + buf * Cfg::kPTBytes; }
  FLYOPS_DEVICE float* dq(int wg, int buf) const {
    return reinterpret_cast<float*>(base + kDQOff + (Cfg::kDQBuffers * wg + buf % Cfg::kDQBuffers) * Cfg::kDQBytes);
  }
  FLYOPS_DEVICE float* lse(int s) const { return reinterpret_cast<float*>(base + kRowsOff + s * 2 * Cfg::kRowsBytes); }
  FLYOPS_DEVICE float* dsum(int s) const { return lse(s) + Cfg::kBM; }
};


// The steps of a CTA: every query head of the group, each over the query blocks in range.
// Within a dQ chunk: the value of accumulator register i (= 2 pair + x) of warpgroup thread
// tid sits at (pair 128 + tid) 2 + x, so the 128 threads' pairs are contiguous.
FLYOPS_HD int dq_chunk_offset(int pair, int tid) { return (pair * 128 + tid) * 2; }

struct BwdSteps {
  QueryRange range;
  int count;
  FLYOPS_DEVICE int blocks() const { return range.end - range.begin; }
  FLYOPS_DEVICE int head(int step, int hk, int group) const { return hk * group + step / blocks(); }
  FLYOPS_DEVICE int qblock(int step) const { return range.begin + step % blocks(); }
};

// One thread: K and V once, then per step the query block's Q, dO and row vectors.
template <typename Cfg>
FLYOPS_DEVICE void bwd_produce(const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v,
                               const CUtensorMap* map_do, const BwdSmem<Cfg>& sm, uint64_t* kv_bar,
                               tile::Ring<Cfg::kStages>& ring, const BwdArgs& a, const BwdSteps& steps, int kv0,
                               int hk, int b) {
  tile::mbarrier_arrive_expect_tx(kv_bar, 2 * Cfg::kKVBytes);
  load_block<Cfg, Cfg::kBN>(sm.k(), map_k, kv_bar, kv0, hk, b);
  load_block<Cfg, Cfg::kBN>(sm.v(), map_v, kv_bar, kv0, hk, b);
  tile::RingState<Cfg::kStages> st;
  for (int step = 0; step < steps.count; ++step, st.advance()) {
    const int h = steps.head(step, hk, a.group), q0 = steps.qblock(step) * Cfg::kBM;
    ring.producer_acquire(st, Cfg::kStageTx);
    uint64_t* full = ring.full_barrier(st);
    load_block<Cfg, Cfg::kBM>(sm.q(st.stage), map_q, full, q0, h, b);
    load_block<Cfg, Cfg::kBM>(sm.dout(st.stage), map_do, full, q0, h, b);
    const int64_t row = (static_cast<int64_t>(b) * a.H + h) * a.Lq_pad + q0;
    tile::bulk_copy_g2s(sm.lse(st.stage), a.lse2 + row, Cfg::kRowsBytes, full);
    tile::bulk_copy_g2s(sm.dsum(st.stage), a.dsum + row, Cfg::kRowsBytes, full);
  }
}

// C[64 x kBM] = A B^T over the head dim for this warpgroup's 64 keys: A (K or V) and B (Q or
// dO) both K-major (issued and committed, not waited for).
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_keys_by_queries(float (&c)[Cfg::kBM / 2], const unsigned char* keys,
                                         const unsigned char* queries, int wg) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kD / 16; ++kk)
    tile::wgmma_m64k16<T, Cfg::kBM>(c, kmajor_desc<Cfg::kBN>(keys, 64 * wg, kk),
                                    kmajor_desc<Cfg::kBM>(queries, 0, kk), kk > 0);
  tile::wgmma_commit();
}

// acc[64 x kD] += X^T Y for the 64 queries of the step: X^T from registers (P^T or dS^T), Y
// (dO or Q) the MN-major B.
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_accumulate(float (&acc)[Cfg::kD / 2], const uint32_t (&x)[Cfg::kBM / 16][4],
                                    const unsigned char* y) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kBM / 16; ++kk)
    tile::wgmma_m64k16_rs<T, Cfg::kD, 1>(acc, x[kk], value_desc<Cfg::kBM>(y, kk), true);
}

// This warpgroup's share of dQ = dS K for the step's queries 64 mq .. (64 queries x 64
// head-dim columns): A is dS^T staged as 128-byte rows per key (MN-major), one block of kBN
// rows per 64 queries; B is K (MN-major along the head dim).
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_dq(float (&dq)[32], const unsigned char* ds, const unsigned char* keys, int wg, int mq) {
  constexpr int kSteps = Cfg::kDQSplitN ? Cfg::kBN / 16 : 64 / 16;
  const int key0 = Cfg::kDQSplitN ? 0 : 64 * wg;
  const unsigned char* kspan = keys + (Cfg::kDQSplitN ? wg * Cfg::kBN * 128 : 0);
  const unsigned char* block = ds + mq * Cfg::kBN * 128;
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    const uint64_t a = tile::wgmma_desc_mnmajor<tile::Swizzle::k128B>(
        tile::smem_addr(block) + static_cast<uint32_t>((key0 + 16 * kk) * 128), Cfg::kDSBytes);
    tile::wgmma_m64k16<T, 64, 1, 1>(dq, a, value_desc<Cfg::kBN>(kspan, key0 / 16 + kk), kk > 0);
  }
  tile::wgmma_commit();
}

// A consumer warpgroup (wg = 0, 1: keys kv0 + 64 wg ..) over the CTA's steps; on return dk
// and dv hold its rows' sums (dK not yet scaled).
template <typename Cfg, typename T>
FLYOPS_DEVICE void bwd_consume(float (&dk)[Cfg::kD / 2], float (&dv)[Cfg::kD / 2], const BwdSmem<Cfg>& sm,
                               uint64_t* kv_bar, tile::Ring<Cfg::kStages>& ring, const BwdArgs& a,
                               const BwdSteps& steps, int kv0, int wg, int hk, int b) {
  constexpr int kBM = Cfg::kBM;
  const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32;
  const int key = kv0 + 64 * wg + 16 * w + lane / 4;  // this thread's first key (h = 0; h = 1 is + 8)
  const uint32_t ds_rows = static_cast<uint32_t>((64 * wg + 16 * w) * 128);  // the warp's rows of dS^T
  const uint32_t ds_lane0 = tile::box_lane_addr(tile::smem_addr(sm.ds(0)) + ds_rows);
  // dQ's columns of this warpgroup and the barrier that publishes dS^T to it.
  const int dq_col0 = Cfg::kDQSplitN ? 64 * wg : 0;
  const int bar_id = Cfg::kDQSplitN ? 1 : 1 + wg, bar_threads = Cfg::kDQSplitN ? 256 : 128;
  const int tid = threadIdx.x % 128;
  tile::RingState<Cfg::kStages> st;
  float s[kBM / 2], dp[kBM / 2], dq[32];
  uint32_t p[kBM / 16][4], ds[kBM / 16][4];
  // dQ's share of (head h, the 64 queries from q0): staged in buffer buf (once the bulk
  // reduction that last read it is done), then one thread adds it to its chunk of the partials.
  auto add_dq = [&](int h, int q0, int buf) {
    float* stage = sm.dq(wg, buf);
    if (tid == 0) tile::tma_store_wait<Cfg::kDQBuffers - 1>();
    tile::named_barrier_sync(3 + wg, 128);
#pragma unroll
    for (int pair = 0; pair < 16; ++pair)
      *reinterpret_cast<float2*>(stage + dq_chunk_offset(pair, tid)) = make_float2(dq[2 * pair], dq[2 * pair + 1]);
    tile::fence_proxy_async();
    tile::named_barrier_sync(3 + wg, 128);
    if (tid == 0) {
      const int64_t chunk =
          ((static_cast<int64_t>(b) * a.H + h) * (a.Lq_pad / 64) + q0 / 64) * Cfg::kDQHalves + dq_col0 / 64;
      // Ordered mode: this adder's turn (dq_turn_of; 2 t + warpgroup where both add).
      int turn = 0;
      if (a.dq_turn != nullptr) {
        const int t = dq_turn_of(kv0 / Cfg::kBN, q0 / kBM, gridDim.x, kBM, Cfg::kBN, a.causal, a.offset);
        turn = Cfg::kDQSplitN ? t : 2 * t + wg;
        while (tile::ld_acquire_gpu(a.dq_turn + chunk) != turn) {
        }
      }
      tile::bulk_reduce_add_s2g(a.dq_acc + chunk * 4096, stage, Cfg::kDQBytes);
      tile::tma_store_commit();
      if (a.dq_turn != nullptr) {
        tile::tma_store_drain();  // this add performed before the next adder's starts
        tile::fence_proxy_async_global();
        tile::st_release_gpu(a.dq_turn + chunk, turn + 1);
      }
    }
  };
  // Ping-pong at D = 128 (the forward's schedule): per step each warpgroup takes two turns
  // (barriers 5 and 6), one for S^T and dP^T and one for dV and dK, alternating with the
  // other's, so that the tensor cores run S_A, S_B, dKV_A, dKV_B while A's and then B's
  // element-wise work goes on. No steps: no turns, so no first pass either.
  const tile::WarpgroupTurns<Cfg::kPingPong> turns{wg, 5};
  if (steps.count > 0) turns.start();
  if (steps.count > 0) tile::mbarrier_wait(kv_bar, 0);
  // Each step waits for all its products before the next one's scores: issuing the next S^T
  // under this step's dQ (so that dP^T starts late) measured 1.12-1.16x slower (session run 6).
  for (int step = 0; step < steps.count; ++step, st.advance()) {
    const int h = steps.head(step, hk, a.group), q0 = steps.qblock(step) * kBM;
    const bool masked = kv0 + Cfg::kBN > a.Lk || (a.causal && kv0 + Cfg::kBN - 1 > q0 + a.offset);
    ring.consumer_wait(st);
    turns.wait();
    tile::wgmma_fence();
    issue_keys_by_queries<Cfg, T>(s, sm.k(), sm.q(st.stage), wg);
    issue_keys_by_queries<Cfg, T>(dp, sm.v(), sm.dout(st.stage), wg);
    turns.pass(false);
    const float* lse = sm.lse(st.stage);
    const float* dsum = sm.dsum(st.stage);
    tile::wgmma_wait<1>();  // S^T has landed; dP^T may still run
    tile::fence_operands(s);
    probabilities_t<kBM>(s, lse, a, key, q0, masked);
    // P^T packed while dP^T runs where the registers allow it (kBM = 64), else after dS^T.
    if constexpr (kBM == 64) to_operand<T, kBM>(s, p);
    tile::wgmma_wait<0>();
    tile::fence_operands(dp);
    score_grads_t<kBM>(dp, s, dsum);
    if constexpr (kBM != 64) to_operand<T, kBM>(s, p);
    to_operand<T, kBM>(dp, ds);
    const int buf = step % 2;
#pragma unroll
    for (int qb = 0; qb < Cfg::kQHalves; ++qb)
      tile::stmatrix_box_16x64(ds_lane0 + buf * Cfg::kDSBytes + qb * Cfg::kBN * 128,
                               [&](int c, int hh) { return ds[4 * qb + c / 2][2 * (c % 2) + hh]; });
    turns.wait();
    tile::wgmma_fence();
    issue_accumulate<Cfg, T>(dv, p, sm.dout(st.stage));
    issue_accumulate<Cfg, T>(dk, ds, sm.q(st.stage));
    tile::wgmma_commit();
    turns.pass(step == steps.count - 1);
    tile::fence_proxy_async();  // dS^T's stores, visible to the wgmma that reads them
    tile::named_barrier_sync(bar_id, bar_threads);
    issue_dq<Cfg, T>(dq, sm.ds(buf), sm.k(), wg, 0);
    tile::wgmma_wait<0>();
    tile::fence_operands(dv);
    tile::fence_operands(dk);
    tile::fence_operands(dq);
    for (auto& r : p) tile::fence_operands(r);
    for (auto& r : ds) tile::fence_operands(r);
    ring.consumer_release(st);  // by every thread: its generic loads of the row vectors come first
    add_dq(h, q0, buf);
#pragma unroll
    for (int mq = 1; mq < Cfg::kQHalves; ++mq) {  // the step's further 64-query tiles of dQ
      tile::wgmma_fence();
      issue_dq<Cfg, T>(dq, sm.ds(buf), sm.k(), wg, mq);
      tile::wgmma_wait<0>();
      tile::fence_operands(dq);
      add_dq(h, q0 + 64 * mq, buf);
    }
  }
  if (threadIdx.x % 128 == 0) tile::tma_store_drain();  // the last reductions, done before exit
}

}  // namespace flyops::attention
