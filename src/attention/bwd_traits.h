// The attention backward kernel's compile-time shapes. A CTA owns kBN key/value rows of one
// (batch, key/value head), holds dK and dV for them in its two consumer warpgroups'
// registers, and walks every query block of kBM rows (of every query head of the group) that
// sees them. A producer warpgroup loads K and V once, then streams Q and dO blocks with their
// rows' log-sum-exp and Dsum through one ring.
//
// The products per query block, in the key-major form (FlashAttention-3's swapped S), so that
// P^T and dS^T come out of the accumulators shaped as the A operands of dV and dK:
//   S^T = K Q^T, dP^T = V dO^T, dV += P^T dO, dK += dS^T Q, dQ = dS K (fp32 partial sums).
//
// D = 64, 128 (kSplitHeadDim false): kBN = 128, each warpgroup owns 64 keys and every column;
// S^T and dP^T are m64 x kBM per warpgroup, dV and dK RS products (P^T and dS^T from
// registers), dQ an SS product from dS^T staged in shared memory, added through a shared
// staging buffer by one bulk reduction. kBM = 64 at D = 128, 128 at D = 64 (half the steps).
//
// D = 256 (kSplitHeadDim true): dK and dV for 128 keys would take 256 registers a thread,
// so kBN = 64 and the warpgroups split the work instead: warpgroup w makes S^T and dP^T for
// the step's queries 32 w .. (m64 x 32), publishes its half of P^T and dS^T in shared memory,
// and after one barrier owns head-dim columns 128 w .. of dV, dK (SS products from the whole
// P^T and dS^T) and of dQ, which it adds from registers (red.global.add.v2: no staging, which
// would not fit beside two stages of 64 KB).
#pragma once

#include <cstdint>

#include "traits.h"

namespace flyops::attention {

inline constexpr int kBwdProducerRegs = 24;
inline constexpr int kBwdConsumerRegs = 240;

template <int kD_>
struct BwdConfig {
  static constexpr int kD = kD_;
  static constexpr bool kSplitHeadDim = kD == 256;
  static constexpr int kBN = kSplitHeadDim ? 64 : 128;  // key/value rows per CTA
  // Query rows per step: 128 at D = 64 (half the steps, so half the per-step waits and
  // barriers; the registers allow it there), 64 at D = 128 and 256.
  static constexpr int kBM = kD == 64 ? 128 : 64;
  static constexpr int kQHalves = kBM / 64;  // m64 tiles of dQ per step
  // Query columns of S^T and dP^T per warpgroup (kSplitHeadDim: its half of the step's).
  static constexpr int kSlab = kSplitHeadDim ? kBM / 2 : kBM;
  static constexpr int kStages = kD == 128 ? 3 : 2;  // a third stage: 0.96-0.98x time at D = 128, 1.01-1.03x at 64
  static constexpr int kSpans = kD / kSpanElems;
  // dK and dV columns per warpgroup (its accumulators hold kCols / 2 a thread each).
  static constexpr int kCols = kSplitHeadDim ? kD / 2 : kD;
  static constexpr uint32_t kKVBytes = kBN * kD * 2;
  static constexpr uint32_t kQBytes = kBM * kD * 2;  // a Q or dO block
  static constexpr uint32_t kRowsBytes = kBM * 4;    // a block's scaled log-sum-exp or Dsum
  static constexpr uint32_t kStageTx = 2 * kQBytes + 2 * kRowsBytes;
  static constexpr uint32_t kDSBytes = kBN * kBM * 2;  // dS^T: kBM / 64 blocks of kBN rows of 128 bytes
  // kSplitHeadDim: P^T beside dS^T, the same layout (the other warpgroup reads both).
  static constexpr uint32_t kPTBytes = kSplitHeadDim ? kDSBytes : 0;
  // dQ = dS K per warpgroup, N = 64: at kD = 128 warpgroup w takes head-dim columns 64 w ..
  // over all 128 keys (the two halves of dS^T met at a barrier); at kD = 64 each takes all
  // columns over its own 64 keys (no barrier, two partial sums per element); at kD = 256
  // columns 128 w .. in two chunks of 64, over all 64 keys.
  static constexpr bool kDQSplitN = kD != 64;
  // A warpgroup's share of dQ (64 x 64 fp32) is staged in shared memory, two buffers per
  // warpgroup, and added to the fp32 partials by one bulk reduction (whole lines, by TMA);
  // none at D = 256 (added from registers).
  static constexpr uint32_t kDQBytes = kSplitHeadDim ? 0 : 64 * 64 * 4;
  static constexpr int kDQBuffers = 1;  // per warpgroup (D = 128: the third stage's room; D = 64: 128-query steps')
  static constexpr int kDQHalves = kD / 64;  // partial chunks per query block
  // The warpgroups take turns issuing each step's score products, then its gradient
  // products (bwd_mainloop.cuh), so that one's exponentials and dS run under the other's
  // products: at D = 128 only (measured 0.966-0.994x time there, 0.997-1.056x at D = 64;
  // backward v3); kSplitHeadDim has its own loop.
  static constexpr bool kPingPong = kD == 128;
  static constexpr int kSmemBytes = 2 * kKVBytes + kStages * (2 * kQBytes + 2 * kRowsBytes) + 2 * kDSBytes +
                                    2 * kPTBytes + 2 * kDQBuffers * kDQBytes + 1024;
  static_assert(kD == 64 || kD == 128 || kD == 256, "head dims 64, 128 and 256");
  static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of sm_90");
};

// What the backward kernel needs besides its tensor maps.
struct BwdArgs {
  int Lq, Lk, Lq_pad;  // Lq_pad: Lq rounded up to the query block (the workspace's rows)
  int H, group;
  float scale_log2, scale;
  bool causal;
  int offset;
  const float* lse2;  // [B H, Lq_pad]: log2-domain log-sum-exp, +inf past Lq
  const float* dsum;  // [B H, Lq_pad]: dO . O, 0 past Lq
  // fp32 partial sums of dS K: per (b h, query block, 64-column half) a chunk of 64 x 64
  // in the fragment order of the warpgroup that adds it (dq_chunk_offset), so that its
  // staging writes are conflict-free and one bulk reduction adds it.
  float* dq_acc;
  // Deterministic mode: one counter per chunk (cleared before the launch); the adder with
  // turn t (dq_turn_of: t, or 2 t + warpgroup when both warpgroups add) waits for t.
  int* dq_turn;  // null: the adds go in any order
};

// The query blocks a key block sees: [begin, end) (causal: the first that holds a query at or
// past the diagonal of the block's first key).
struct QueryRange {
  int begin, end;
  FLYOPS_HD static QueryRange of(int kv0, int bm, int Lq, bool causal, int offset) {
    const int end = (Lq + bm - 1) / bm;
    int begin = 0;
    if (causal && kv0 - offset > 0) begin = (kv0 - offset) / bm;
    return QueryRange{begin < end ? begin : end, end};
  }
};

// Deterministic mode: which key block a CTA takes, and its place among the adders of a dQ
// chunk of query block qb. A CTA waits only for CTAs launched before it (so it never waits on
// one that is not yet resident). Non-causal, every key block adds to every chunk, in key
// order. Causal, the key blocks launch last-first: a key block starts at its diagonal's query
// block and walks up, so the later key blocks reach each chunk first, and in that order they
// take their turns (in key order they would wait on each other at every chunk: measured 2.5x
// the unordered time). The adders of chunk qb are the key blocks kb <= last(qb).
FLYOPS_HD int key_block_of(int cta, int key_blocks, bool deterministic, bool causal) {
  return deterministic && causal ? key_blocks - 1 - cta : cta;
}
FLYOPS_HD int dq_turn_of(int kb, int qb, int key_blocks, int bm, int bn, bool causal, int offset) {
  if (!causal) return kb;
  const int reach = (qb + 1) * bm + offset;  // the block's last row sees the keys below reach
  int last = (reach + bn - 1) / bn - 1;
  if (last > key_blocks - 1) last = key_blocks - 1;
  return last - kb;
}

}  // namespace flyops::attention
