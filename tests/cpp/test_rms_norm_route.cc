// The RMSNorm router on the CPU: what supports() refuses and why, which kernel choose()
// picks, and that every choice can hold its rows.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>

#include "seed.h"
#include "flyops/rms_norm.h"
#include "rms_norm/traits.h"

using namespace flyops;

namespace {

alignas(256) char g_buf[1 << 12];

RmsNormFwdParams fwd(DType t, int64_t M, int64_t N) {
  RmsNormFwdParams p;
  p.M = M;
  p.N = N;
  p.dtype = t;
  p.x = g_buf;
  p.x_row_stride = N;
  p.y = g_buf + 256;
  p.y_row_stride = N;
  p.rstd = reinterpret_cast<float*>(g_buf + 512);
  p.eps = 1e-6f;
  return p;
}

RmsNormBwdParams bwd(DType t, int64_t M, int64_t N, bool weight) {
  RmsNormBwdParams p;
  p.M = M;
  p.N = N;
  p.dtype = t;
  p.dy = g_buf;
  p.dy_row_stride = N;
  p.x = g_buf + 256;
  p.x_row_stride = N;
  p.rstd = reinterpret_cast<const float*>(g_buf + 512);
  p.weight = weight ? g_buf + 768 : nullptr;
  p.dx = g_buf + 1024;
  p.dx_row_stride = N;
  p.dweight = weight ? g_buf + 1280 : nullptr;
  return p;
}

const DeviceInfo kH200 = fake_device_info(9, 0, 132);

std::string name(const RmsNormPlan& plan, DType t, bool b) {
  char buf[128];
  rms_norm_plan_name(plan, t, b, buf, sizeof(buf));
  return buf;
}

}  // namespace

TEST(RmsNormRoute, OnlyHopper) {
  for (auto [maj, min] : {std::pair{8, 0}, {8, 9}, {9, 1}, {10, 0}, {12, 0}}) {
    const Support s = rms_norm_fwd_supports(fwd(DType::kBFloat16, 8, 4096), fake_device_info(maj, min, 100));
    EXPECT_FALSE(s.ok);
    EXPECT_NE(std::string(s.reason).find("compute capability 9.0"), std::string::npos);
  }
  EXPECT_TRUE(rms_norm_fwd_supports(fwd(DType::kBFloat16, 8, 4096), kH200).ok);
  DeviceInfo broken;
  EXPECT_FALSE(rms_norm_fwd_supports(fwd(DType::kBFloat16, 8, 4096), broken).ok);
}

TEST(RmsNormRoute, RefusesWithReasons) {
  auto reason = [](const RmsNormFwdParams& p) {
    const Support s = rms_norm_fwd_supports(p, kH200);
    EXPECT_FALSE(s.ok);
    return std::string(s.reason);
  };
  EXPECT_NE(reason(fwd(DType::kFloat64, 4, 64)).find("dtype"), std::string::npos);
  EXPECT_NE(reason(fwd(DType::kOther, 4, 64)).find("dtype"), std::string::npos);
  EXPECT_NE(reason(fwd(DType::kFloat32, 4, 0)).find("N == 0"), std::string::npos);
  auto overlap = fwd(DType::kFloat32, 4, 64);
  overlap.x_row_stride = 32;
  EXPECT_NE(reason(overlap).find("overlap"), std::string::npos);
  auto nulls = fwd(DType::kFloat32, 4, 64);
  nulls.x = nullptr;
  EXPECT_NE(reason(nulls).find("null"), std::string::npos);
  // Zero rows need no pointers at all.
  auto empty = fwd(DType::kFloat32, 0, 64);
  empty.x = empty.y = nullptr;
  empty.rstd = nullptr;
  EXPECT_TRUE(rms_norm_fwd_supports(empty, kH200).ok);
  // A dweight without a weight is a caller bug.
  auto b = bwd(DType::kBFloat16, 4, 64, true);
  b.weight = nullptr;
  EXPECT_FALSE(rms_norm_bwd_supports(b, kH200).ok);
}

TEST(RmsNormRoute, VectorWidthFollowsAlignment) {
  auto p = fwd(DType::kBFloat16, 16, 4096);
  RmsNormPlan plan = rms_norm_fwd_choose(p, kH200);
  ASSERT_EQ(plan.kind, RmsNormPlan::Kind::kFused);
  EXPECT_EQ(plan.vec, 8);
  EXPECT_EQ(name(plan, p.dtype, false).rfind("flyops_rms_norm_fwd<bf16,v8,", 0), 0u);

  p.x = g_buf + 2;  // one element off a 16-byte boundary
  EXPECT_EQ(rms_norm_fwd_choose(p, kH200).vec, 1);
  p = fwd(DType::kBFloat16, 16, 4097);  // rows not a whole number of vectors
  EXPECT_EQ(rms_norm_fwd_choose(p, kH200).vec, 1);
  p = fwd(DType::kFloat32, 16, 4096);
  EXPECT_EQ(rms_norm_fwd_choose(p, kH200).vec, 4);
  p.x_row_stride = 4098;  // row starts drift off alignment
  EXPECT_EQ(rms_norm_fwd_choose(p, kH200).vec, 1);
  p.M = 1;  // one row: its stride does not matter
  EXPECT_EQ(rms_norm_fwd_choose(p, kH200).vec, 4);
}

TEST(RmsNormRoute, LongRowsTakeTheSplitPath) {
  EXPECT_EQ(rms_norm_fwd_choose(fwd(DType::kBFloat16, 4, 65536), kH200).kind, RmsNormPlan::Kind::kSplit);
  EXPECT_EQ(rms_norm_fwd_choose(fwd(DType::kFloat32, 4, 16384), kH200).kind, RmsNormPlan::Kind::kFused);
  EXPECT_EQ(rms_norm_fwd_choose(fwd(DType::kFloat32, 4, 16385), kH200).kind, RmsNormPlan::Kind::kSplit);
  // fp32 rows past 8192 spread over a cluster of CTAs in the backward
  EXPECT_NE(name(rms_norm_bwd_choose(bwd(DType::kFloat32, 4, 16384, true), kH200), DType::kFloat32, true)
                .find(",cluster2>"),
            std::string::npos);
  const RmsNormPlan split = rms_norm_bwd_choose(bwd(DType::kBFloat16, 4, 1 << 20, true), kH200);
  EXPECT_EQ(split.kind, RmsNormPlan::Kind::kSplit);
  EXPECT_EQ(name(split, DType::kBFloat16, true), "flyops_rms_norm_bwd_split<bf16,v8>");
}

// Whatever N, a fused choice holds the whole row and fits its register budget.
TEST(RmsNormRoute, EveryFusedChoiceHoldsItsRow) {
  std::mt19937 rng(flyops::tests::seeded(201));
  for (DType t : {DType::kFloat32, DType::kFloat16, DType::kBFloat16}) {
    for (int trial = 0; trial < 3000; ++trial) {
      const int64_t N = trial < 1000 ? trial + 1 : std::uniform_int_distribution<int64_t>(1, 70000)(rng);
      for (bool b : {false, true}) {
        RmsNormPlan plan = b ? rms_norm_bwd_choose(bwd(t, 7, N, true), kH200)
                             : rms_norm_fwd_choose(fwd(t, 7, N), kH200);
        ASSERT_TRUE(plan.flyops());
        if (plan.kind != RmsNormPlan::Kind::kFused) continue;
        ASSERT_GE(rms_norm::shape_capacity(plan.shape, plan.vec), N) << "N=" << N;
        const auto e = t == DType::kFloat32 ? rms_norm::Elem::kF32
                       : t == DType::kBFloat16 ? rms_norm::Elem::kBF16 : rms_norm::Elem::kF16;
        ASSERT_TRUE(b ? rms_norm::bwd_fits(plan.shape, plan.vec, e)
                      : rms_norm::fwd_fits(plan.shape, plan.vec, e));
        if (plan.vec > 1) ASSERT_EQ(N % plan.vec, 0);
      }
    }
  }
}

TEST(RmsNormRoute, ForcedShapeOnlyWhereItFits) {
  const int table = rms_norm_fwd_choose(fwd(DType::kBFloat16, 4, 4096), kH200).shape;
  const int other = table == 8 ? 11 : 8;  // 4 x 128 or 2 x 256 threads: both hold 4096
  rms_norm_force_shape(other);
  RmsNormPlan p = rms_norm_fwd_choose(fwd(DType::kBFloat16, 4, 4096), kH200);
  EXPECT_EQ(p.shape, other);
  // Too small for the row: the table decides.
  p = rms_norm_fwd_choose(fwd(DType::kBFloat16, 4, 8192), kH200);
  EXPECT_NE(p.shape, other);
  rms_norm_force_shape(-1);
  EXPECT_EQ(rms_norm_fwd_choose(fwd(DType::kBFloat16, 4, 4096), kH200).shape, table);
}

TEST(RmsNormLaunch, StockPlanIsNotLaunched) {
  RmsNormPlan stock;
  EXPECT_EQ(rms_norm_fwd(fwd(DType::kBFloat16, 4, 64), stock), Status::kUnsupported);
  EXPECT_EQ(rms_norm_bwd(bwd(DType::kBFloat16, 4, 64, true), stock), Status::kUnsupported);
  EXPECT_EQ(rms_norm_bwd_workspace_bytes(bwd(DType::kBFloat16, 4, 64, true), stock, kH200), 0u);
}

TEST(RmsNormLaunch, SplitWorkspaceHoldsCoefAndPartials) {
  auto p = bwd(DType::kBFloat16, 1000, 65536, true);
  const RmsNormPlan plan = rms_norm_bwd_choose(p, kH200);
  ASSERT_EQ(plan.kind, RmsNormPlan::Kind::kSplit);
  const std::size_t bytes = rms_norm_bwd_workspace_bytes(p, plan, kH200);
  // coef (one float per row) plus at least one fp32 partial row, at most one per row
  EXPECT_GE(bytes, 4u * 1000 + 4u * 65536);
  EXPECT_LE(bytes, 4u * 1000 + 16 + 4u * 65536 * 1000);
  p.dweight = nullptr;  // no dweight: no partials
  EXPECT_EQ(rms_norm_bwd_workspace_bytes(p, plan, kH200), 4u * 1000);
  p.workspace = nullptr;
  p.workspace_bytes = 0;
  p.dweight = g_buf;
  EXPECT_EQ(rms_norm_bwd(p, plan), Status::kInvalidArgument);  // no room for the workspace
}
