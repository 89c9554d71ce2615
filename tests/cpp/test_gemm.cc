// What the first GEMM kernel takes and why it refuses the rest (the GPU results are in
// tests/gpu/tile_selftest.cu).
#include <gtest/gtest.h>

#include <string>

#include "flyops/gemm.h"

using namespace flyops;

namespace {

alignas(256) char g_buf[1024];

GemmParams params(int64_t M, int64_t N, int64_t K) {
  GemmParams p;
  p.M = M, p.N = N, p.K = K;
  p.a = g_buf, p.lda = K;
  p.b = g_buf + 256, p.ldb = K;
  p.c = g_buf + 512, p.ldc = N;
  return p;
}

const DeviceInfo kH200 = fake_device_info(9, 0, 132);

std::string why(const GemmParams& p, const DeviceInfo& dev = kH200) {
  const Support s = gemm_tn_supports(p, dev);
  return s.ok ? "ok" : s.reason;
}

}  // namespace

TEST(GemmSupports, TakesWhatTmaDescribes) {
  EXPECT_EQ(why(params(8192, 8192, 8192)), "ok");
  EXPECT_EQ(why(params(17, 4104, 40)), "ok");
  EXPECT_EQ(why(params(1, 8, 8)), "ok");
  EXPECT_EQ(why(params(1, 128256, 4096)), "ok");
}

TEST(GemmSupports, RefusalsSayWhy) {
  EXPECT_NE(why(params(64, 64, 64), fake_device_info(8, 0, 108)).find("9.0"), std::string::npos);
  GemmParams f16 = params(64, 64, 64);
  f16.dtype = DType::kFloat16;
  EXPECT_EQ(why(f16), "dtype not bfloat16");
  EXPECT_EQ(why(params(0, 64, 64)), "empty GEMM");
  EXPECT_EQ(why(params(64, 64, 33)), "TMA: an outer stride is not a multiple of 16 bytes");
  GemmParams offset = params(64, 64, 64);
  offset.a = g_buf + 2;  // an offset view
  EXPECT_EQ(why(offset), "TMA: base pointer not 16-byte aligned");
  GemmParams overlap = params(64, 64, 64);
  overlap.ldc = 32;
  EXPECT_EQ(why(overlap), "C rows overlap (ldc < N)");
}
