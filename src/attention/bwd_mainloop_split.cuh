// The attention backward's consumer warpgroup at D = 256 (bwd_traits.h: kSplitHeadDim): the
// two warpgroups share the CTA's 64 keys. Per step warpgroup w makes S^T and dP^T for the
// step's queries kSlab w .. (m64 x kSlab), turns them into P^T and dS^T, and writes its half
// of both into shared memory; after one barrier it accumulates head-dim columns 128 w .. of
// dV and dK from the whole P^T and dS^T (SS products) and makes the same columns of dQ in two
// chunks of 64, each added to the fp32 partials from registers while the tensor cores go on.
#pragma once

#include "bwd_mainloop.cuh"

namespace flyops::attention {

// C[64 keys x kSlab queries] = A B^T over the head dim: A (K or V) the block's kBN = 64 keys,
// B (Q or dO) this warpgroup's queries kSlab wg .., both K-major (issued and committed).
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_slab(float (&c)[Cfg::kSlab / 2], const unsigned char* keys, const unsigned char* queries,
                              int wg) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kD / 16; ++kk)
    tile::wgmma_m64k16<T, Cfg::kSlab>(c, kmajor_desc<Cfg::kBN>(keys, 0, kk),
                                      kmajor_desc<Cfg::kBM>(queries, Cfg::kSlab * wg, kk), kk > 0);
  tile::wgmma_commit();
}

// acc[64 keys x kCols] += X^T Y over the step's kBM queries: X^T (P^T or dS^T) K-major in
// shared memory, Y (dO or Q) from this warpgroup's first span, MN-major (not committed).
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_accumulate_ss(float (&acc)[Cfg::kCols / 2], const unsigned char* xt,
                                       const unsigned char* y) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kBM / 16; ++kk)
    tile::wgmma_m64k16<T, Cfg::kCols, 0, 1>(acc, kmajor_desc<Cfg::kBN>(xt, 0, kk), value_desc<Cfg::kBM>(y, kk), true);
}

// dQ's chunk of head-dim span `span` (64 queries x 64 columns) = dS K over the kBN keys: A is
// dS^T (MN-major), B the span block of K (MN-major along the head dim); committed.
template <typename Cfg, typename T>
FLYOPS_DEVICE void issue_dq_chunk(float (&dq)[32], const unsigned char* ds, const unsigned char* keys, int span) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kBN / 16; ++kk) {
    const uint64_t a = tile::wgmma_desc_mnmajor<tile::Swizzle::k128B>(
        tile::smem_addr(ds) + static_cast<uint32_t>(16 * kk * 128), Cfg::kDSBytes);
    tile::wgmma_m64k16<T, 64, 1, 1>(dq, a, value_desc<Cfg::kBN>(keys + span * Cfg::kBN * 128, kk), kk > 0);
  }
  tile::wgmma_commit();
}

// Warpgroup wg (0, 1) over the CTA's steps; on return dk and dv hold its head-dim columns of
// the block's 64 keys (dK not yet scaled).
template <typename Cfg, typename T>
FLYOPS_DEVICE void bwd_consume_split(float (&dk)[Cfg::kCols / 2], float (&dv)[Cfg::kCols / 2],
                                     const BwdSmem<Cfg>& sm, uint64_t* kv_bar, tile::Ring<Cfg::kStages>& ring,
                                     const BwdArgs& a, const BwdSteps& steps, int kv0, int wg, int hk, int b) {
  static_assert(Cfg::kSplitHeadDim && Cfg::kBN == 64 && Cfg::kCols == 128, "two warpgroups over 64 keys");
  constexpr int kBM = Cfg::kBM, kSlab = Cfg::kSlab;
  const int lane = threadIdx.x % 32, w = (threadIdx.x % 128) / 32, tid = threadIdx.x % 128;
  const int key = kv0 + 16 * w + lane / 4;  // this thread's first key (h = 0; h = 1 is + 8)
  const uint32_t rows = static_cast<uint32_t>(16 * w * 128);  // the warp's rows of P^T and dS^T
  const uint32_t pt_lane0 = tile::box_lane_addr(tile::smem_addr(sm.pt(0)) + rows);
  const uint32_t ds_lane0 = tile::box_lane_addr(tile::smem_addr(sm.ds(0)) + rows);
  tile::RingState<Cfg::kStages> st;
  float s[kSlab / 2], dp[kSlab / 2], dq[32];
  // dQ's chunk `chunk` of (head h, queries q0 ..) added from registers; in ordered mode after
  // the adders before this key block, and published (fence, then release) for the next.
  auto add_dq = [&](int h, int q0, int chunk) {
    const int64_t index =
        ((static_cast<int64_t>(b) * a.H + h) * (a.Lq_pad / 64) + q0 / 64) * Cfg::kDQHalves + chunk;
    float* dst = a.dq_acc + index * 4096;
    int turn = 0;
    if (a.dq_turn != nullptr) {
      turn = dq_turn_of(kv0 / Cfg::kBN, q0 / kBM, gridDim.x, kBM, Cfg::kBN, a.causal, a.offset);
      if (tid == 0)
        while (tile::ld_acquire_gpu(a.dq_turn + index) != turn) {
        }
      tile::named_barrier_sync(3 + wg, 128);
    }
#pragma unroll
    for (int pair = 0; pair < 16; ++pair)
      tile::red_add_f32x2(dst + dq_chunk_offset(pair, tid), dq[2 * pair], dq[2 * pair + 1]);
    if (a.dq_turn != nullptr) {
      __threadfence();  // this thread's adds performed before the release below
      tile::named_barrier_sync(3 + wg, 128);
      if (tid == 0) tile::st_release_gpu(a.dq_turn + index, turn + 1);
    }
  };
  // This warpgroup's columns of a 64 x kBM buffer (P^T or dS^T): chunk pairs 2 wg, 2 wg + 1.
  auto publish = [&](uint32_t lane_addr, const float (&x)[kSlab / 2]) {
    tile::stmatrix_box_pairs<kSlab / 16>(lane_addr, (kSlab / 16) * wg, [&](int c, int hh) {
      return tile::pack2<T>(x[4 * c + 2 * hh], x[4 * c + 2 * hh + 1]);
    });
  };
  if (steps.count > 0) tile::mbarrier_wait(kv_bar, 0);
  for (int step = 0; step < steps.count; ++step, st.advance()) {
    const int h = steps.head(step, hk, a.group), q0 = steps.qblock(step) * kBM;
    const int qs = q0 + kSlab * wg;  // this warpgroup's first query of S^T
    const bool masked = kv0 + Cfg::kBN > a.Lk || (a.causal && kv0 + Cfg::kBN - 1 > qs + a.offset);
    ring.consumer_wait(st);
    tile::wgmma_fence();
    issue_slab<Cfg, T>(s, sm.k(), sm.q(st.stage), wg);
    issue_slab<Cfg, T>(dp, sm.v(), sm.dout(st.stage), wg);
    tile::wgmma_wait<1>();  // S^T has landed; dP^T may still run
    tile::fence_operands(s);
    probabilities_t<kSlab>(s, sm.lse(st.stage) + kSlab * wg, a, key, qs, masked);
    tile::wgmma_wait<0>();
    tile::fence_operands(dp);
    score_grads_t<kSlab>(dp, s, sm.dsum(st.stage) + kSlab * wg);
    // Double buffers: a warpgroup writes buffer `buf` again two steps on, past the barrier of
    // the step between, which the other reaches only once its reads of this step are done.
    const int buf = step % 2;
    publish(pt_lane0 + buf * Cfg::kPTBytes, s);
    publish(ds_lane0 + buf * Cfg::kDSBytes, dp);
    tile::fence_proxy_async();  // the stores, visible to the wgmma that read them
    tile::named_barrier_sync(1, 256);
    tile::wgmma_fence();
    const int span0 = 2 * wg;  // this warpgroup's first head-dim span
    issue_dq_chunk<Cfg, T>(dq, sm.ds(buf), sm.k(), span0);
    issue_accumulate_ss<Cfg, T>(dv, sm.pt(buf), sm.dout(st.stage) + span0 * kBM * 128);
    issue_accumulate_ss<Cfg, T>(dk, sm.ds(buf), sm.q(st.stage) + span0 * kBM * 128);
    tile::wgmma_commit();
    tile::wgmma_wait<1>();  // the first dQ chunk has landed; dV and dK still run
    tile::fence_operands(dq);
    add_dq(h, q0, span0);
    tile::wgmma_fence();
    issue_dq_chunk<Cfg, T>(dq, sm.ds(buf), sm.k(), span0 + 1);
    tile::wgmma_wait<0>();
    tile::fence_operands(dv);
    tile::fence_operands(dk);
    tile::fence_operands(dq);
    ring.consumer_release(st);  // by every thread: its generic loads of the row vectors come first
    add_dq(h, q0, span0 + 1);
  }
}

}  // namespace flyops::attention
