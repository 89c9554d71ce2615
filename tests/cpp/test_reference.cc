// The float64 references are the ground truth of every other test, so they are checked
// against hand-computed values and against the forward by finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "seed.h"
#include "reference/numeric.h"
#include "reference/rms_norm_ref.h"

namespace ref = flyops::reference;

namespace {

std::vector<double> randn(std::size_t n, std::mt19937_64& rng) {
  std::normal_distribution<double> d;
  std::vector<double> v(n);
  for (double& x : v) x = d(rng);
  return v;
}

}  // namespace

TEST(RmsNormReference, HandComputedRow) {
  // x = (3, 4): mean square 12.5, rstd = 1/sqrt(12.5 + 0.5) = 1/sqrt(13)
  const double x[2] = {3.0, 4.0};
  const double w[2] = {2.0, -1.0};
  double y[2], rstd[1];
  ref::rms_norm_fwd(x, w, 1, 2, 0.5, y, rstd);
  EXPECT_DOUBLE_EQ(rstd[0], 1.0 / std::sqrt(13.0));
  EXPECT_DOUBLE_EQ(y[0], 3.0 * rstd[0] * 2.0);
  EXPECT_DOUBLE_EQ(y[1], 4.0 * rstd[0] * -1.0);
}

TEST(RmsNormReference, NoWeightIsUnitWeight) {
  std::mt19937_64 rng(flyops::tests::seeded(101));
  const int64_t M = 3, N = 17;
  auto x = randn(M * N, rng);
  std::vector<double> ones(N, 1.0), y1(M * N), y2(M * N);
  ref::rms_norm_fwd(x.data(), nullptr, M, N, 1e-6, y1.data(), nullptr);
  ref::rms_norm_fwd(x.data(), ones.data(), M, N, 1e-6, y2.data(), nullptr);
  EXPECT_EQ(y1, y2);
}

TEST(RmsNormReference, ScaleInvariantWithoutEps) {
  std::mt19937_64 rng(flyops::tests::seeded(102));
  const int64_t M = 2, N = 33;
  auto x = randn(M * N, rng);
  std::vector<double> x4(x), y(M * N), y4(M * N);
  for (double& v : x4) v *= 4.0;
  ref::rms_norm_fwd(x.data(), nullptr, M, N, 0.0, y.data(), nullptr);
  ref::rms_norm_fwd(x4.data(), nullptr, M, N, 0.0, y4.data(), nullptr);
  for (int64_t i = 0; i < M * N; ++i) EXPECT_NEAR(y[i], y4[i], 1e-14);
}

// L(x, w) = sum(dy * y(x, w)); the backward must match central differences of L.
TEST(RmsNormReference, BackwardMatchesFiniteDifferences) {
  std::mt19937_64 rng(flyops::tests::seeded(103));
  const int64_t M = 3, N = 7;
  const double eps = 1e-3;
  auto x = randn(M * N, rng), w = randn(N, rng), dy = randn(M * N, rng);
  std::vector<double> y(M * N), rstd(M), dx(M * N), dw(N);
  ref::rms_norm_fwd(x.data(), w.data(), M, N, eps, y.data(), rstd.data());
  ref::rms_norm_bwd(dy.data(), x.data(), rstd.data(), w.data(), M, N, dx.data(), dw.data());
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww) {
    std::vector<double> yy(M * N);
    ref::rms_norm_fwd(xx.data(), ww.data(), M, N, eps, yy.data(), nullptr);
    double l = 0;
    for (int64_t i = 0; i < M * N; ++i) l += dy[i] * yy[i];
    return l;
  };
  const double h = 1e-6;
  for (int64_t i = 0; i < M * N; ++i) {
    auto xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    EXPECT_NEAR(dx[i], (loss(xp, w) - loss(xm, w)) / (2 * h), 1e-7) << "dx " << i;
  }
  for (int64_t j = 0; j < N; ++j) {
    auto wp = w, wm = w;
    wp[j] += h;
    wm[j] -= h;
    EXPECT_NEAR(dw[j], (loss(x, wp) - loss(x, wm)) / (2 * h), 1e-7) << "dw " << j;
  }
}

TEST(HostNumeric, Bf16RoundTripAndRounding) {
  EXPECT_EQ(ref::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(ref::bf16_to_float(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1.0)
  EXPECT_EQ(ref::float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(ref::float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(ref::bf16_to_float(ref::float_to_bf16(NAN))));
}

TEST(HostNumeric, HalfRoundTripAndRounding) {
  EXPECT_EQ(ref::float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(ref::half_to_float(0x3c00), 1.0f);
  EXPECT_EQ(ref::float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(ref::float_to_half(65504.f), 0x7bff);
  EXPECT_EQ(ref::float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(ref::half_to_float(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(ref::float_to_half(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // tie to even
  for (uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive half survives the trip
    ASSERT_EQ(ref::float_to_half(ref::half_to_float(static_cast<uint16_t>(h))), h) << h;
}

// The 8-bit formats against values worked by hand from their definitions (these agree with
// PyTorch's casts; checked exhaustively over every bf16 and 4M random floats on the CPU).
TEST(HostNumeric, Fp8E4M3) {
  const auto e4 = ref::Fp8::kE4M3;
  EXPECT_EQ(ref::float_to_fp8(1.0f, e4), 0x38);
  EXPECT_EQ(ref::float_to_fp8(-4.0f, e4), 0xc8);
  EXPECT_EQ(ref::float_to_fp8(-0.0f, e4), 0x80);
  EXPECT_EQ(ref::fp8_to_float(0x7e, e4), 448.f);                    // largest
  EXPECT_EQ(ref::fp8_to_float(0x01, e4), std::ldexp(1.f, -9));     // smallest subnormal
  EXPECT_EQ(ref::fp8_to_float(0x08, e4), std::ldexp(1.f, -6));     // smallest normal
  EXPECT_TRUE(std::isnan(ref::fp8_to_float(0x7f, e4)));
  EXPECT_TRUE(std::isnan(ref::fp8_to_float(0xff, e4)));
  EXPECT_EQ(ref::float_to_fp8(464.f, e4), 0x7e);                    // tie between 448 and 480: even
  EXPECT_EQ(ref::float_to_fp8(465.f, e4), 0x7f);                    // rounds past 448: NaN, no infinity
  EXPECT_EQ(ref::float_to_fp8(-INFINITY, e4), 0xff);
  EXPECT_EQ(ref::float_to_fp8(NAN, e4), 0x7f);
  EXPECT_EQ(ref::float_to_fp8(std::ldexp(1.f, -10), e4), 0x00);     // half the smallest subnormal: even
  EXPECT_EQ(ref::float_to_fp8(std::ldexp(3.f, -10), e4), 0x02);     // 1.5 subnormal units: even
  EXPECT_EQ(ref::float_to_fp8(std::ldexp(15.f, -10), e4), 0x08);    // 7.5 units: up to the smallest normal
  EXPECT_EQ(ref::float_to_fp8(1.0f + 1.0f / 16, e4), 0x38);          // tie to even
  EXPECT_EQ(ref::float_to_fp8(1.0f + 3.0f / 16, e4), 0x3a);
  for (int c = 0; c < 256; ++c)  // every code but NaN survives the trip
    if ((c & 0x7f) != 0x7f) ASSERT_EQ(ref::float_to_fp8(ref::fp8_to_float(c, e4), e4), c) << c;
}

TEST(HostNumeric, Fp8E5M2) {
  const auto e5 = ref::Fp8::kE5M2;
  EXPECT_EQ(ref::float_to_fp8(1.0f, e5), 0x3c);
  EXPECT_EQ(ref::float_to_fp8(-3.0f, e5), 0xc2);
  EXPECT_EQ(ref::fp8_to_float(0x7b, e5), 57344.f);                  // largest
  EXPECT_EQ(ref::fp8_to_float(0x01, e5), std::ldexp(1.f, -16));    // smallest subnormal
  EXPECT_EQ(ref::fp8_to_float(0x7c, e5), INFINITY);
  EXPECT_EQ(ref::fp8_to_float(0xfc, e5), -INFINITY);
  EXPECT_TRUE(std::isnan(ref::fp8_to_float(0x7d, e5)));
  EXPECT_EQ(ref::float_to_fp8(61439.f, e5), 0x7b);
  EXPECT_EQ(ref::float_to_fp8(61440.f, e5), 0x7c);                  // tie between 57344 and 65536: even (inf)
  EXPECT_EQ(ref::float_to_fp8(1e30f, e5), 0x7c);
  EXPECT_EQ(ref::float_to_fp8(-NAN, e5), 0xff);
  EXPECT_EQ(ref::float_to_fp8(1.0f + 1.0f / 8, e5), 0x3c);           // tie to even
  EXPECT_EQ(ref::float_to_fp8(1.0f + 3.0f / 8, e5), 0x3e);
  for (int c = 0; c < 256; ++c)  // every code but NaN survives the trip
    if ((c & 0x7f) <= 0x7c) ASSERT_EQ(ref::float_to_fp8(ref::fp8_to_float(c, e5), e5), c) << c;
}
