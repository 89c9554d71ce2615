// The attention forward's host side without a GPU: what it supports and why not, and which
// key blocks a query block visits.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

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
  AttnParams training = p;
  static float lse_stand_in;
  training.lse = &lse_stand_in;
  EXPECT_FALSE(attention_choose(training, kH200).flyops);
  AttnParams gqa = p;
  gqa.Hkv = 4;
  EXPECT_FALSE(attention_choose(gqa, kH200).flyops);  // not measured
  EXPECT_FALSE(attention_choose(params(16, 16, 2048, 2048, 128), kH200).flyops);
  p.causal = false;
  attention_force(1);
  EXPECT_TRUE(attention_choose(p, kH200).flyops);
  attention_force(2);
  EXPECT_FALSE(attention_choose(p, kH200).flyops);
  attention_force(0);
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

}  // namespace
}  // namespace flyops
