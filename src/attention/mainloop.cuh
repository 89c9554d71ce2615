// The producer (TMA loads of Q once, then key and value blocks into their rings) and a
// consumer warpgroup's mainloop over the key blocks, last block first (so the blocks that
// need the mask come first and the rest run without it).
//
// Per block j, overlapped as FlashAttention-3 does inside a warpgroup: S_j = Q K_j^T is
// issued, then O += P_{j+1} V_{j+1} of the block before; once S_j has landed its softmax
// runs while the tensor cores still work on P V; then O is rescaled and S_j becomes P_j.
#pragma once

#include <cuda.h>

#include <type_traits>

#include "flyops/tile/pipeline.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"
#include "flyops/tile/wgmma_ops.h"
#include "softmax.cuh"
#include "traits.h"

namespace flyops::attention {

// Shared memory: the Q buffers (kSpans blocks of kBM rows each), then the key ring's stages,
// then the value ring's, each stage kSpans blocks of kBN rows; every block starts 1024-aligned.
template <typename Cfg>
struct Smem {
  static constexpr uint32_t kQ = Cfg::kQBuffers * Cfg::kQBytes;
  unsigned char* base;
  FLYOPS_DEVICE unsigned char* q(int buf) const { return base + buf * Cfg::kQBytes; }
  FLYOPS_DEVICE unsigned char* k(int s) const { return base + kQ + s * Cfg::kKVBytes; }
  FLYOPS_DEVICE unsigned char* v(int s) const { return base + kQ + (Cfg::kStages + s) * Cfg::kKVBytes; }
};

// What the kernel needs besides the tensor maps.
struct Args {
  int Lq, Lk;
  int q_blocks;
  int group;  // query heads per key/value head
  float scale_log2;
  bool causal;
  int offset;
  float* lse;
  int64_t lse_stride_b, lse_stride_h;
  int heads, tiles;  // tiles = q_blocks x heads x batch entries (the persistent walk)
};

// A K-major operand (rows of a span block, kRows rows a block) at row row0, k16 step kk.
template <int kRows>
FLYOPS_DEVICE uint64_t kmajor_desc(const unsigned char* blocks, int row0, int kk) {
  const uint32_t addr = tile::smem_addr(blocks) + static_cast<uint32_t>((kk / 4) * kRows * 128 + row0 * 128 + (kk % 4) * 32);
  return tile::wgmma_desc(addr, 16u, 8u * 128u, tile::Swizzle::k128B);
}

// V as the MN-major B of P V at k16 step kk (keys 16 kk ..): the span blocks, kRows rows
// each, are the 64-column blocks along N.
template <int kRows>
FLYOPS_DEVICE uint64_t value_desc(const unsigned char* blocks, int kk) {
  return tile::wgmma_desc_mnmajor<tile::Swizzle::k128B>(tile::smem_addr(blocks) + static_cast<uint32_t>(kk * 16 * 128),
                                                        kRows * 128u);
}

// Loads one [rows x kD] block (kSpans boxes {64, rows}) at row `row` of head `h`, batch `b`.
template <typename Cfg, int kRows>
FLYOPS_DEVICE void load_block(unsigned char* dst, const CUtensorMap* map, uint64_t* bar, int row, int h, int b) {
#pragma unroll
  for (int s = 0; s < Cfg::kSpans; ++s) tile::tma_load(dst + s * kRows * 128, map, bar, s * kSpanElems, row, h, b);
}

// One thread, one tile: Q into buffer qbuf, then for each key block (last first) its keys
// and its values. The rings' states run on across the tiles of a persistent CTA.
template <typename Cfg>
FLYOPS_DEVICE void produce(const CUtensorMap* map_q, const CUtensorMap* map_k, const CUtensorMap* map_v,
                           const Smem<Cfg>& sm, int qbuf, uint64_t* q_bar, tile::Ring<Cfg::kStages>& kring,
                           tile::Ring<Cfg::kStages>& vring, tile::RingState<Cfg::kStages>& sk,
                           tile::RingState<Cfg::kStages>& sv, int q0, int blocks, int h, int hk, int b) {
  tile::mbarrier_arrive_expect_tx(q_bar, Cfg::kQBytes);
  load_block<Cfg, Cfg::kBM>(sm.q(qbuf), map_q, q_bar, q0, h, b);
  for (int j = blocks - 1; j >= 0; --j, sk.advance(), sv.advance()) {
    kring.producer_acquire(sk, Cfg::kKVBytes);
    load_block<Cfg, Cfg::kBN>(sm.k(sk.stage), map_k, kring.full_barrier(sk), j * Cfg::kBN, hk, b);
    vring.producer_acquire(sv, Cfg::kKVBytes);
    load_block<Cfg, Cfg::kBN>(sm.v(sv.stage), map_v, vring.full_barrier(sv), j * Cfg::kBN, hk, b);
  }
}

// S = Q K^T for this warpgroup's 64 rows (issued, not waited for), kW columns: the block's,
// or the first block's Cfg::kFirstWidth (traits.h) into registers of its own, since wgmmas
// of two widths on one accumulator serialize (the columns past it are masked by the softmax).
template <typename Cfg, typename T, int kW = Cfg::kBN>
FLYOPS_DEVICE void issue_qk(float (&s)[kW / 2], const Smem<Cfg>& sm, int qbuf, int stage, int wg) {
#pragma unroll
  for (int kk = 0; kk < Cfg::kD / 16; ++kk)
    tile::wgmma_m64k16<T, kW>(s, kmajor_desc<Cfg::kBM>(sm.q(qbuf), 64 * wg, kk),
                              kmajor_desc<Cfg::kBN>(sm.k(stage), 0, kk), kk > 0);
  tile::wgmma_commit();
}

// O (+)= P V (issued, not waited for); `accumulate` false on the first block. kSteps: the
// k16 steps that run (the first block's P is zero past kFirstWidth).
template <typename Cfg, typename T, int kSteps = Cfg::kBN / 16>
FLYOPS_DEVICE void issue_pv(float (&o)[Cfg::kD / 2], uint32_t (&p)[Cfg::kBN / 16][4], const Smem<Cfg>& sm, int stage,
                            bool accumulate) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
    tile::wgmma_m64k16_rs<T, Cfg::kD, 1>(o, p[kk], value_desc<Cfg::kBN>(sm.v(stage), kk), accumulate || kk > 0);
  tile::wgmma_commit();
}

template <int kStages>
FLYOPS_DEVICE void release(tile::Ring<kStages>& ring, const tile::RingState<kStages>& st) {
  if (threadIdx.x % 32 == 0) ring.consumer_release(st);  // one arrival per consumer warp
}

// A consumer warpgroup (wg = 0, 1: rows q0 + 64 wg ..) over the key blocks; on return o holds
// the unnormalised output, m the rows' maxima (log2 domain) and l their sums (per thread).
// Q is buffer qbuf, waited for at parity q_phase.
template <typename Cfg, typename T>
FLYOPS_DEVICE void consume(float (&o)[Cfg::kD / 2], float (&m)[2], float (&l)[2], const Smem<Cfg>& sm, int qbuf,
                           uint64_t* q_bar, uint32_t q_phase, tile::Ring<Cfg::kStages>& kring,
                           tile::Ring<Cfg::kStages>& vring, tile::RingState<Cfg::kStages>& sk,
                           tile::RingState<Cfg::kStages>& sv, const Args& a, int q0, int blocks, int wg) {
  constexpr int kBN = Cfg::kBN;
  constexpr bool kLazy = Cfg::kLazyRescale;
  const int row = q0 + 64 * wg + 16 * ((threadIdx.x % 128) / 32) + (threadIdx.x % 32) / 4;
  auto masked = [&](int j) { return (j + 1) * kBN > a.Lk || (Cfg::kCausal && a.causal && (j + 1) * kBN - 1 > q0 + a.offset); };
  // Block j's softmax on s, with the mask only where the block needs it.
  auto softmax = [&](float (&scores)[kBN / 2], float (&factor)[2], int j) {
    if (masked(j))
      online_softmax<true, kBN, kLazy>(scores, m, l, factor, a.scale_log2, row, j * kBN, a.Lk, a.causal, a.offset);
    else
      online_softmax<false, kBN, kLazy>(scores, m, l, factor, a.scale_log2, row, j * kBN, a.Lk, a.causal, a.offset);
  };
  // Ping-pong: the two warpgroups take turns issuing their products (barriers 1 and 2), so
  // one's softmax runs under the other's GEMMs.
  const tile::WarpgroupTurns<Cfg::kPingPong> turns{wg, 1};
  turns.start();
  float s[kBN / 2];
  uint32_t p[kBN / 16][4];
  float alpha[2];
  constexpr bool kNarrow = Cfg::kFirstWidth < kBN;
  if constexpr (kNarrow)  // defined before the peeled step's P V (else ptxas serializes it)
#pragma unroll
    for (float& v : o) v = 0.f;
  tile::mbarrier_wait(q_bar, q_phase);
  int j = blocks - 1;
  // The first block: S, softmax, P; no P V before it.
  kring.consumer_wait(sk);
  turns.wait();
  tile::wgmma_fence();
  if constexpr (kNarrow) {
    float sf[Cfg::kFirstWidth / 2];
    issue_qk<Cfg, T, Cfg::kFirstWidth>(sf, sm, qbuf, sk.stage, wg);
    turns.pass(false);
    tile::wgmma_wait<0>();
    tile::fence_operands(sf);
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) s[i] = i < Cfg::kFirstWidth / 2 ? sf[i] : 0.f;  // masked past the width
  } else {
    issue_qk<Cfg, T>(s, sm, qbuf, sk.stage, wg);
    turns.pass(false);
    tile::wgmma_wait<0>();
    tile::fence_operands(s);
  }
  release(kring, sk);
  sk.advance();
  softmax(s, alpha, j);
  to_operand<T, kBN>(s, p);
  bool accumulate = false;
  // One block past the first: S_j with P V of the block before. mask_tag true: the block may
  // need the mask (decided at run time); false: no mask code at all.
  // pv_steps: the k16 steps of the block before's P V (fewer after a narrow first block).
  auto step = [&](int jb, auto mask_tag, auto pv_steps) {
    kring.consumer_wait(sk);
    vring.consumer_wait(sv);
    turns.wait();
    tile::wgmma_fence();
    issue_qk<Cfg, T>(s, sm, qbuf, sk.stage, wg);
    issue_pv<Cfg, T, decltype(pv_steps)::value>(o, p, sm, sv.stage, accumulate);
    turns.pass(false);
    tile::fence_operands(o);
    tile::wgmma_wait<1>();  // S_j has landed; P V may still run
    tile::fence_operands(s);
    release(kring, sk);
    sk.advance();
    if constexpr (decltype(mask_tag)::value)  // the masked loop visits only blocks that need it
      online_softmax<true, kBN, kLazy>(s, m, l, alpha, a.scale_log2, row, jb * kBN, a.Lk, a.causal, a.offset);
    else
      online_softmax<false, kBN, kLazy>(s, m, l, alpha, a.scale_log2, row, jb * kBN, a.Lk, false, 0);
    tile::wgmma_wait<0>();  // P V done: O and P are free again
    tile::fence_operands(o);
    for (auto& r : p) tile::fence_operands(r);
    release(vring, sv);
    sv.advance();
    rescale<Cfg::kD, kLazy>(o, alpha);
    to_operand<T, kBN>(s, p);
    accumulate = true;
  };
  // Past the first block only the causal diagonal needs the mask, and its blocks come first
  // (the walk runs down the keys), so they take their own loop and the rest a loop without
  // the mask's code, which is what keeps the wide blocks' registers (forward v5).
  using Full = std::integral_constant<int, kBN / 16>;
  using FirstSteps = std::integral_constant<int, Cfg::kFirstWidth / 16>;
  --j;
  if constexpr (kNarrow)  // the second block carries the narrow first's P V (no mask: non-causal)
    if (j >= 0) step(j--, std::false_type{}, FirstSteps{});
  if constexpr (Cfg::kCausal)
    for (; j >= 0 && masked(j); --j) step(j, std::true_type{}, Full{});
  for (; j >= 0; --j) step(j, std::false_type{}, Full{});
  vring.consumer_wait(sv);
  turns.wait();
  tile::wgmma_fence();
  issue_pv<Cfg, T>(o, p, sm, sv.stage, accumulate);  // a lone narrow block's too: its P is zero past the width
  turns.pass(true);
  tile::wgmma_wait<0>();
  tile::fence_operands(o);
  for (auto& r : p) tile::fence_operands(r);
  release(vring, sv);
  sv.advance();  // the states run on into a persistent CTA's next tile
}

}  // namespace flyops::attention
