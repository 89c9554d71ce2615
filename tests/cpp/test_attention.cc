// The attention forward's host side without a GPU: what it supports and why not, and which
// key blocks a query block visits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "attention/bwd_traits.h"
#include "attention/traits.h"
#include "flyops/attention.h"
#include "reference/attention_ref.h"

namespace flyops {
namespace {

const DeviceInfo kH200 = fake_device_info(9, 0, 132);

// A [B, H, L, D] problem in contiguous storage at a 16-byte aligned stand-in address.
AttnParams params(int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D) {
  alignas(16) static char base[16];
  AttnParams p;
  p.B = 2, p.H = H, p.Hkv = Hkv, p.Lq = Lq, p.Lk = Lk, p.D = D;
  p.q = {base, H * Lq * D, Lq * D, D};
  p.k = {base, Hkv * Lk * D, Lk * D, D};
  p.v = p.k;
  p.o = p.q;
  p.scale = 0.125f;
  return p;
}

std::string why(const AttnParams& p) { return attention_supports(p, kH200).reason; }

TEST(AttentionSupports, ShapesAndReasons) {
  EXPECT_TRUE(attention_supports(params(8, 8, 1, 1, 128), kH200).ok);
  EXPECT_TRUE(attention_supports(params(8, 1, 113, 203, 64), kH200).ok);
  EXPECT_TRUE(attention_supports(params(8, 2, 4097, 4097, 256), kH200).ok);
  EXPECT_EQ(why(params(8, 8, 10, 10, 96)), "head dim not 64, 128 or 256");
  EXPECT_EQ(why(params(8, 3, 10, 10, 64)), "key/value heads do not divide the query heads");
  EXPECT_EQ(why(params(8, 8, 0, 10, 64)), "empty attention");
  AttnParams p = params(8, 8, 10, 10, 64);
  p.scale = 0.f;
  EXPECT_EQ(why(p), "scale not positive and finite");
  p = params(8, 8, 10, 10, 64);
  p.dtype = DType::kFloat32;
  EXPECT_EQ(why(p), "dtype not bfloat16 or float16");
  p = params(8, 8, 10, 10, 64);
  p.q.stride_l = 68;  // 136 bytes: not a TMA stride
  EXPECT_EQ(why(p), "TMA: an outer stride is not a multiple of 16 bytes");
  EXPECT_FALSE(attention_supports(params(8, 8, 10, 10, 64), fake_device_info(8, 0, 108)).ok);
}

TEST(AttentionRouter, ForcedAndTable) {
  ASSERT_EQ(attention_forced(), 0);
  AttnParams p = params(16, 16, 4096, 4096, 128);
  EXPECT_FALSE(attention_choose(p, kH200).flyops);  // non-causal: stock measured faster
  p.causal = true;
  EXPECT_TRUE(attention_choose(p, kH200).flyops);   // the measured class (inference: no lse)
  // Training (the lse kept): only where a whole step measured ahead behind our forward: D =
  // 128 causal at 16384, non-causal at 4096-8191 and from 16384; D = 64 non-causal from 2048
  // and causal at 16384; D = 256 non-causal at 1024-2048 and from 8192, causal from 4096.
  static float lse_stand_in;
  const auto training = [&](AttnParams t) {
    t.lse = &lse_stand_in;
    return attention_choose(t, kH200).flyops;
  };
  EXPECT_FALSE(training(p));
  AttnParams t = params(16, 16, 16384, 16384, 128);
  EXPECT_TRUE(training(t));
  t.causal = true;
  EXPECT_TRUE(training(t));
  EXPECT_FALSE(training(params(16, 16, 8192, 8192, 128)));
  EXPECT_TRUE(training(params(16, 16, 4096, 4096, 128)));
  EXPECT_FALSE(training(params(16, 16, 2048, 2048, 128)));
  EXPECT_TRUE(training(params(32, 32, 4096, 4096, 64)));
  EXPECT_TRUE(training(params(32, 32, 2048, 2048, 64)));
  EXPECT_FALSE(training(params(32, 32, 1024, 1024, 64)));
  t = params(32, 32, 16384, 16384, 64);
  t.causal = true;
  EXPECT_TRUE(training(t));  // D = 64 causal: the step measured ahead at 16384 only
  t.Lq = t.Lk = 8192;
  EXPECT_FALSE(training(t));
  EXPECT_TRUE(training(params(8, 8, 1024, 1024, 256)));
  EXPECT_TRUE(training(params(8, 8, 2048, 2048, 256)));
  EXPECT_FALSE(training(params(8, 8, 4096, 4096, 256)));  // the step measured even
  EXPECT_TRUE(training(params(8, 8, 8192, 8192, 256)));
  t = params(8, 8, 2048, 2048, 256);
  t.causal = true;
  EXPECT_FALSE(training(t));
  t.Lq = t.Lk = 4096;
  EXPECT_TRUE(training(t));
  AttnParams gqa = p;
  gqa.Hkv = 4;
  EXPECT_FALSE(attention_choose(gqa, kH200).flyops);  // not measured
  EXPECT_FALSE(attention_choose(params(16, 16, 2048, 2048, 128), kH200).flyops);
  // Non-causal inference: D = 128 from 8192, D = 64 from 2048, D = 256 from 1024.
  EXPECT_TRUE(attention_choose(params(8, 8, 8192, 8192, 256), kH200).flyops);
  EXPECT_TRUE(attention_choose(params(8, 8, 1024, 1024, 256), kH200).flyops);
  EXPECT_FALSE(attention_choose(params(8, 8, 512, 512, 256), kH200).flyops);
  EXPECT_TRUE(attention_choose(params(16, 16, 16384, 16384, 128), kH200).flyops);
  EXPECT_TRUE(attention_choose(params(16, 16, 8192, 8192, 128), kH200).flyops);
  EXPECT_FALSE(attention_choose(params(16, 16, 4096, 4096, 128), kH200).flyops);
  EXPECT_TRUE(attention_choose(params(32, 32, 2048, 2048, 64), kH200).flyops);
  EXPECT_FALSE(attention_choose(params(32, 32, 1024, 1024, 64), kH200).flyops);
  // Causal inference at D = 64: from 8192.
  t = params(32, 32, 4096, 4096, 64);
  t.causal = true;
  EXPECT_FALSE(attention_choose(t, kH200).flyops);
  t.Lq = t.Lk = 8192;
  EXPECT_TRUE(attention_choose(t, kH200).flyops);
  p.causal = false;
  attention_force(1);
  EXPECT_TRUE(attention_choose(p, kH200).flyops);
  attention_force(2);
  EXPECT_FALSE(attention_choose(p, kH200).flyops);
  attention_force(0);
}

// Calls whose stock kernel is FlashAttention-2's (the flash op) take flyops where both lengths
// are 512 or more (measured: bf16 and fp16, grouped heads, Lq != Lk), training or not.
TEST(AttentionRouter, AgainstFlash2) {
  AttnParams p = params(16, 16, 4096, 4096, 64);
  p.stock = AttnStock::kFlash2;
  EXPECT_TRUE(attention_choose(p, kH200).flyops);  // non-causal D = 64: stock's (cuDNN's) above
  static float lse_stand_in;
  p.lse = &lse_stand_in;
  EXPECT_TRUE(attention_choose(p, kH200).flyops);
  AttnParams off = p;
  off.Hkv = 4;
  off.dtype = DType::kFloat16;
  off.Lq = 1024;
  EXPECT_TRUE(attention_choose(off, kH200).flyops);
  off = p;
  off.Lq = off.Lk = 256;
  EXPECT_FALSE(attention_choose(off, kH200).flyops);  // short: FA2's
  off = p;
  off.Lq = 1;
  EXPECT_FALSE(attention_choose(off, kH200).flyops);  // decoding: FA2 measured faster
  p.stock = AttnStock::kCudnn;
  p.Lq = p.Lk = 1024;
  EXPECT_FALSE(attention_choose(p, kH200).flyops);  // cuDNN's at D = 64, L = 1024
}

// Key blocks: all of them without a mask; causal top-left stops at the block holding the
// block's last row's diagonal; a causal block that sees no key visits none.
TEST(AttentionKeyRange, CausalBounds) {
  using attention::KeyRange;
  EXPECT_EQ(KeyRange::of(0, 128, 128, 1000, false, 0).blocks, 8);
  EXPECT_EQ(KeyRange::of(0, 128, 128, 1000, true, 0).blocks, 1);
  EXPECT_EQ(KeyRange::of(128, 128, 128, 1000, true, 0).blocks, 2);
  EXPECT_EQ(KeyRange::of(128, 128, 128, 200, true, 0).blocks, 2);
  EXPECT_EQ(KeyRange::of(0, 128, 64, 1, true, 0).blocks, 1);
  EXPECT_EQ(KeyRange::of(0, 128, 128, 70, true, -130).blocks, 0);  // bottom-right, Lq 200 > Lk 70
  EXPECT_EQ(KeyRange::of(128, 128, 128, 70, true, -130).blocks, 1);
}

// The float64 reference by hand: one key gives its value and the scaled dot product as the
// log-sum-exp; two equal keys average their values; a causal row before the first key is 0
// with +inf.
TEST(AttentionReference, HandValues) {
  const double q[2] = {1.0, 2.0}, k1[2] = {0.5, -1.0}, v1[2] = {3.0, 4.0};
  double out[2], lse[1];
  reference::attention_head(q, k1, v1, 1, 1, 2, 0.5, false, 0, out, lse);
  EXPECT_DOUBLE_EQ(out[0], 3.0);
  EXPECT_DOUBLE_EQ(out[1], 4.0);
  EXPECT_DOUBLE_EQ(lse[0], 0.5 * (0.5 - 2.0));
  const double k2[4] = {0.5, -1.0, 0.5, -1.0}, v2[4] = {1.0, 0.0, 3.0, 2.0};
  reference::attention_head(q, k2, v2, 1, 2, 2, 0.5, false, 0, out, lse);
  EXPECT_DOUBLE_EQ(out[0], 2.0);
  EXPECT_DOUBLE_EQ(out[1], 1.0);
  EXPECT_NEAR(lse[0], -0.75 + std::log(2.0), 1e-15);
  reference::attention_head(q, k2, v2, 1, 2, 2, 0.5, true, -1, out, lse);
  EXPECT_EQ(out[0], 0.0);
  EXPECT_TRUE(std::isinf(lse[0]) && lse[0] > 0);
}

AttnBwdParams bwd_params(int64_t H, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t D) {
  alignas(16) static float lse[1];
  AttnBwdParams b;
  b.fwd = params(H, Hkv, Lq, Lk, D);
  b.fwd.lse = lse;
  b.fwd.lse_stride_b = H * Lq, b.fwd.lse_stride_h = Lq;
  b.dout = b.dq = b.fwd.q;
  b.dk = b.dv = b.fwd.k;
  return b;
}

std::string why_bwd(const AttnBwdParams& p) { return attention_bwd_supports(p, kH200).reason; }

TEST(AttentionBackwardSupports, ShapesAndReasons) {
  EXPECT_TRUE(attention_bwd_supports(bwd_params(8, 8, 1, 1, 128), kH200).ok);
  EXPECT_TRUE(attention_bwd_supports(bwd_params(8, 1, 113, 203, 64), kH200).ok);
  EXPECT_TRUE(attention_bwd_supports(bwd_params(8, 2, 113, 203, 256), kH200).ok);
  EXPECT_EQ(why_bwd(bwd_params(8, 8, 100, 100, 96)), "backward head dim not 64, 128 or 256");
  AttnBwdParams no_lse = bwd_params(8, 8, 100, 100, 128);
  no_lse.fwd.lse = nullptr;
  EXPECT_EQ(why_bwd(no_lse), "no log-sum-exp from the forward");
  AttnBwdParams odd = bwd_params(8, 8, 100, 100, 128);
  odd.dq.stride_l = 130;  // rows of dQ not a multiple of four elements apart
  EXPECT_EQ(why_bwd(odd), "dq not 8-byte aligned by rows");
  EXPECT_EQ(why_bwd(bwd_params(8, 3, 100, 100, 64)), "key/value heads do not divide the query heads");
  EXPECT_FALSE(attention_bwd_supports(bwd_params(8, 8, 10, 10, 64), fake_device_info(8, 0, 108)).ok);
}

// fp32 dQ partials plus two row vectors per query row, rows padded to the 64-row block, and
// one turn counter per 64 x 64 chunk of dQ.
TEST(AttentionBackwardSupports, Workspace) {
  const AttnParams p = params(8, 8, 100, 100, 128);
  EXPECT_EQ(attention_bwd_workspace_bytes(p), (size_t{2} * 8 * 128 * (128 + 2) + 2 * 8 * 2 * 2) * 4);
  const AttnParams wide = params(8, 8, 100, 100, 256);  // four chunks a 64-row block
  EXPECT_EQ(attention_bwd_workspace_bytes(wide), (size_t{2} * 8 * 128 * (256 + 2) + 2 * 8 * 2 * 4) * 4);
}

TEST(AttentionBackwardRouter, StockUnlessForced) {
  const AttnBwdParams p = bwd_params(16, 16, 4096, 4096, 128);
  ASSERT_EQ(attention_bwd_forced(), 0);
  EXPECT_FALSE(attention_bwd_choose(p, kH200).flyops);  // not measured faster anywhere yet
  attention_bwd_force(1);
  EXPECT_TRUE(attention_bwd_choose(p, kH200).flyops);
  attention_force(2);  // the forward's force leaves the backward alone
  EXPECT_TRUE(attention_bwd_choose(p, kH200).flyops);
  attention_force(0);
  attention_bwd_force(2);
  EXPECT_FALSE(attention_bwd_choose(p, kH200).flyops);
  attention_bwd_force(0);
}

// Against FlashAttention-2's backward, flyops on the measured set; the ordered dQ on its own.
TEST(AttentionBackwardRouter, AgainstFlash2) {
  AttnBwdParams p = bwd_params(16, 16, 4096, 4096, 128);
  p.fwd.stock = AttnStock::kFlash2;
  EXPECT_TRUE(attention_bwd_choose(p, kH200).flyops);
  p.fwd.causal = true;
  EXPECT_TRUE(attention_bwd_choose(p, kH200).flyops);
  AttnBwdParams off = p;
  off.fwd.Hkv = 8;
  EXPECT_TRUE(attention_bwd_choose(off, kH200).flyops);
  off.deterministic = true;  // the ordered dQ is measured on equal heads only
  EXPECT_FALSE(attention_bwd_choose(off, kH200).flyops);
  off = p;
  off.fwd.Lq = off.fwd.Lk = 256;
  EXPECT_FALSE(attention_bwd_choose(off, kH200).flyops);
  off = p;
  off.deterministic = true;  // the ordered dQ: measured faster at D = 128, and causal at 64
  EXPECT_TRUE(attention_bwd_choose(off, kH200).flyops);
  off = bwd_params(16, 16, 4096, 4096, 64);
  off.fwd.stock = AttnStock::kFlash2;
  off.deterministic = true;
  EXPECT_FALSE(attention_bwd_choose(off, kH200).flyops);
  off.fwd.causal = true;
  EXPECT_TRUE(attention_bwd_choose(off, kH200).flyops);
  off.fwd.Lq = off.fwd.Lk = 512;
  EXPECT_FALSE(attention_bwd_choose(off, kH200).flyops);
  off = bwd_params(16, 16, 4096, 4096, 256);  // D = 256 against FA2: every length from 512
  off.fwd.stock = AttnStock::kFlash2;
  EXPECT_TRUE(attention_bwd_choose(off, kH200).flyops);
  off.deterministic = true;  // its ordered dQ is not measured
  EXPECT_FALSE(attention_bwd_choose(off, kH200).flyops);
}

// D = 256 against cuDNN: the measured classes only (L 512-1024, non-causal from 8192, causal
// at 16384).
TEST(AttentionBackwardRouter, HeadDim256AgainstCudnn) {
  auto at = [](int64_t L, bool causal) {
    AttnBwdParams p = bwd_params(8, 8, L, L, 256);
    p.fwd.causal = causal;
    return attention_bwd_choose(p, kH200);
  };
  EXPECT_TRUE(at(512, false).flyops);
  EXPECT_TRUE(at(1024, true).flyops);
  EXPECT_TRUE(at(8192, false).flyops);
  EXPECT_TRUE(at(16384, false).flyops);
  EXPECT_FALSE(at(4096, false).flyops);
  EXPECT_FALSE(at(8192, true).flyops);
  EXPECT_TRUE(at(16384, true).flyops);
  EXPECT_FALSE(at(256, false).flyops);  // shorter rows were not measured
  const AttnPlan mid = at(2048, false);
  EXPECT_FALSE(mid.flyops);
  EXPECT_NE(std::string(mid.reason).find("tuned_table"), std::string::npos);
  AttnBwdParams gqa = bwd_params(8, 2, 1024, 1024, 256);
  EXPECT_FALSE(attention_bwd_choose(gqa, kH200).flyops);
}

// Query blocks a key block sees: all without a mask; causal top-left starts at the block
// holding the diagonal of the key block's first key; bottom-right shifts by the offset.
// Deterministic turns: over every chunk, the CTAs whose query range holds it take the turns
// 0, 1, .. exactly once each, in launch order (a CTA waits only for CTAs launched before it),
// and those launched later reach the chunk no earlier (the walk's step at which each adds).
TEST(AttentionDeterministicTurns, EveryChunkInLaunchOrder) {
  using attention::QueryRange;
  struct Shape { int Lq, Lk, bm, bn; bool causal; int offset; };
  const Shape shapes[] = {{1000, 1000, 64, 128, true, 0},  {1000, 1000, 128, 128, true, 0},
                          {700, 520, 64, 128, true, 0},    {520, 700, 128, 128, true, 180},
                          {700, 520, 64, 128, true, -180}, {300, 1100, 64, 128, false, 0},
                          {129, 1, 128, 128, true, 0},     {1, 1000, 64, 128, true, 999},
                          {777, 777, 128, 128, false, 0},  {1000, 1000, 64, 64, true, 0},  // D = 256: 64-key blocks
                          {700, 520, 64, 64, true, -180},  {520, 700, 64, 64, true, 180},
                          {300, 1100, 64, 64, false, 0}};
  for (const Shape& sh : shapes) {
    const int bn = sh.bn, key_blocks = (sh.Lk + bn - 1) / bn, q_blocks = (sh.Lq + sh.bm - 1) / sh.bm;
    for (int qb = 0; qb < q_blocks; ++qb) {
      std::vector<int> turns;
      int last_step = -1;
      for (int cta = 0; cta < key_blocks; ++cta) {
        const int kb = attention::key_block_of(cta, key_blocks, true, sh.causal);
        const QueryRange r = QueryRange::of(kb * bn, sh.bm, sh.Lq, sh.causal, sh.offset);
        if (qb < r.begin || qb >= r.end) continue;
        turns.push_back(attention::dq_turn_of(kb, qb, key_blocks, sh.bm, bn, sh.causal, sh.offset));
        if (sh.causal) {
          EXPECT_GE(qb - r.begin, last_step) << "a later CTA reaches the chunk first";
          last_step = qb - r.begin;
        }
      }
      for (size_t t = 0; t < turns.size(); ++t)
        ASSERT_EQ(turns[t], static_cast<int>(t)) << "Lq " << sh.Lq << " Lk " << sh.Lk << " qb " << qb;
    }
  }
}

TEST(AttentionQueryRange, CausalBounds) {
  using attention::QueryRange;
  EXPECT_EQ(QueryRange::of(0, 64, 1000, false, 0).begin, 0);
  EXPECT_EQ(QueryRange::of(256, 64, 1000, false, 0).begin, 0);
  EXPECT_EQ(QueryRange::of(256, 64, 1000, true, 0).begin, 4);
  EXPECT_EQ(QueryRange::of(256, 64, 1000, true, 0).end, 16);
  EXPECT_EQ(QueryRange::of(200, 64, 1000, true, 0).begin, 3);
  EXPECT_EQ(QueryRange::of(128, 64, 100, true, 30).begin, 1);   // Lq 100, Lk 130: keys 128.. from query 98
  const QueryRange none = QueryRange::of(256, 64, 100, true, 0);  // keys past every query's diagonal
  EXPECT_EQ(none.begin, none.end);
  EXPECT_EQ(QueryRange::of(0, 64, 200, true, -130).begin, 2);  // bottom-right, Lq 200 > Lk 70: key 0 from query 130
}

// The backward reference against a central difference of the forward: d/dq of sum(dout . out).
TEST(AttentionReference, BackwardMatchesFiniteDifferences) {
  const int64_t Lq = 3, Lk = 4, D = 2;
  double q[Lq * D] = {0.3, -0.2, 1.1, 0.4, -0.7, 0.9}, k[Lk * D] = {0.5, -1.0, 0.2, 0.8, -0.3, 0.1, 1.2, -0.4};
  double v[Lk * D] = {1.0, 0.0, 3.0, 2.0, -1.0, 0.5, 0.25, -2.0}, dout[Lq * D] = {0.7, -0.1, 0.2, 0.9, -0.5, 0.3};
  double dq[Lq * D], dk[Lk * D] = {}, dv[Lk * D] = {};
  reference::attention_head_bwd(q, k, v, dout, Lq, Lk, D, 0.6, true, 1, dq, dk, dv);
  auto loss = [&]() {
    double out[Lq * D], lse[Lq], sum = 0;
    reference::attention_head(q, k, v, Lq, Lk, D, 0.6, true, 1, out, lse);
    for (int64_t i = 0; i < Lq * D; ++i) sum += out[i] * dout[i];
    return sum;
  };
  auto diff = [&](double* x, int64_t i) {
    const double h = 1e-6, x0 = x[i];
    x[i] = x0 + h;
    const double up = loss();
    x[i] = x0 - h;
    const double down = loss();
    x[i] = x0;
    return (up - down) / (2 * h);
  };
  for (int64_t i = 0; i < Lq * D; ++i) EXPECT_NEAR(dq[i], diff(q, i), 1e-7);
  for (int64_t i = 0; i < Lk * D; ++i) {
    EXPECT_NEAR(dk[i], diff(k, i), 1e-7);
    EXPECT_NEAR(dv[i], diff(v, i), 1e-7);
  }
}

}  // namespace
}  // namespace flyops
