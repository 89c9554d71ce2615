// What the first GEMM kernel takes and why it refuses the rest (the GPU results are in
// tests/gpu/tile_selftest.cu).
#include <gtest/gtest.h>

#include <array>
#include <set>
#include <string>
#include <tuple>

#include "flyops/gemm.h"
#include "gemm/scheduler.h"
#include "gemm/tuned_table.h"

using namespace flyops;

namespace {

alignas(256) char g_buf[1024];

GemmParams params(int64_t M, int64_t N, int64_t K) {
  GemmParams p;
  p.M = M, p.N = N, p.K = K;
  p.a = {g_buf, K};
  p.b = {g_buf + 256, K};
  p.c = g_buf + 512, p.ldc = N;
  return p;
}

const DeviceInfo kH200 = fake_device_info(9, 0, 132);

// The class rules alone: what the router answers for a shape the per-shape table lacks.
bool by_class(const GemmParams& p, const DeviceInfo& dev = kH200) {
  return gemm_supports(p, dev).ok && gemm::measured_faster(p);
}

std::string why(const GemmParams& p, const DeviceInfo& dev = kH200) {
  const Support s = gemm_supports(p, dev);
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
  GemmParams f32 = params(64, 64, 64);
  f32.dtype = DType::kFloat32;
  EXPECT_EQ(why(f32), "dtype not bfloat16 or float16");
  EXPECT_EQ(why(params(0, 64, 64)), "empty GEMM");
  EXPECT_EQ(why(params(64, 64, 33)), "TMA: an outer stride is not a multiple of 16 bytes");
  GemmParams offset = params(64, 64, 64);
  offset.a.ptr = g_buf + 2;  // an offset view
  EXPECT_EQ(why(offset), "TMA: base pointer not 16-byte aligned");
  GemmParams overlap = params(64, 64, 64);
  overlap.ldc = 32;
  EXPECT_EQ(why(overlap), "C rows overlap (ldc < N)");
}

TEST(GemmSupports, LayoutsAndBatches) {
  GemmParams mn = params(100, 200, 64);  // A M-major [K, M], B N-major [K, N]
  mn.a = {g_buf, 104, false};
  mn.b = {g_buf + 256, 200, false};
  EXPECT_EQ(why(mn), "ok");
  mn.a.ld = 100;  // 200 bytes: not a multiple of 16
  EXPECT_EQ(why(mn), "TMA: an outer stride is not a multiple of 16 bytes");
  mn.a.ld = 96;  // shorter than M
  EXPECT_EQ(why(mn), "operand rows overlap (leading stride below the row length)");
  GemmParams fp16 = params(64, 64, 64);
  fp16.dtype = DType::kFloat16;
  EXPECT_EQ(why(fp16), "ok");
  GemmParams batched = params(64, 64, 64);
  batched.batch = 3;
  batched.a.batch_stride = 64 * 64;
  batched.b.batch_stride = 64 * 64;
  batched.batch_stride_c = 64 * 64;
  EXPECT_EQ(why(batched), "ok");
  batched.b.batch_stride = 0;  // a broadcast weight
  EXPECT_EQ(why(batched), "operand batch entries overlap or broadcast");
  batched.b.batch_stride = 64 * 64;
  batched.batch_stride_c = 64;
  EXPECT_EQ(why(batched), "C batch entries overlap");
}

// The router's class rules (src/gemm/tuned_table.h, for shapes the generated per-shape table
// lacks): flyops where C's rows are not 16-byte aligned and N >= 1000, with K >= 768 or (K >=
// 64 and at least 256 tiles), stock elsewhere, and never without the kernel's support.
TEST(GemmRouter, TableClasses) {
  ASSERT_EQ(gemm_forced(), 0);
  EXPECT_TRUE(by_class(params(4096, 50257, 768)));
  EXPECT_TRUE(by_class(params(1, 50257, 768)));
  EXPECT_TRUE(by_class(params(2048, 1001, 4096)));
  EXPECT_FALSE(by_class(params(113, 203, 4096)));
  const GemmPlan small = gemm_choose(params(113, 203, 4000), kH200);  // a shape no tune run measures
  EXPECT_FALSE(small.flyops);
  EXPECT_NE(std::string(small.reason).find("tuned_table"), std::string::npos);
  EXPECT_FALSE(by_class(params(4096, 4096, 4096)));
  GemmParams padded = params(4096, 4095, 4096);  // an out= with aligned rows: not the class
  padded.ldc = 4096;
  EXPECT_FALSE(by_class(padded));
  EXPECT_FALSE(by_class(params(4096, 50257, 768), fake_device_info(8, 0, 108)));
  EXPECT_FALSE(by_class(params(4097, 4097, 4097)));  // K = 4097: TMA cannot
  auto batched = [](int64_t M, int64_t N, int64_t K, int64_t batch = 8) {
    GemmParams p = params(M, N, K);
    p.batch = batch;
    p.a.batch_stride = M * K, p.b.batch_stride = N * K, p.batch_stride_c = M * N;
    return p;
  };
  EXPECT_TRUE(by_class(batched(2048, 4095, 4096)));
  EXPECT_TRUE(by_class(batched(1001, 1001, 128)));      // short K, 256 tiles
  EXPECT_TRUE(by_class(batched(512, 1001, 64, 16)));    // 256 tiles
  EXPECT_FALSE(by_class(batched(1001, 1001, 128, 4)));  // 128 tiles: stock
  EXPECT_FALSE(by_class(batched(512, 1001, 32, 64)));   // K < 64: stock
  EXPECT_FALSE(by_class(params(1001, 1001, 128)));      // one call, 32 tiles
  // Decode-sized weights on the narrow kernel: 2^24-2^26 elements up to 8 rows of A, 2^24
  // at 9-16; both operands K-major, one batch entry, K % 8 == 0.
  EXPECT_TRUE(by_class(params(1, 4096, 4096)));
  EXPECT_TRUE(by_class(params(8, 4096, 14336)));
  EXPECT_TRUE(by_class(params(16, 4096, 4096)));
  EXPECT_FALSE(by_class(params(16, 6144, 4096)));
  EXPECT_FALSE(by_class(params(16, 14336, 4096)));
  EXPECT_FALSE(by_class(params(1, 28672, 8192)));
  EXPECT_FALSE(by_class(params(17, 4096, 4096)));
  EXPECT_FALSE(by_class(params(1, 1024, 1024)));
  EXPECT_FALSE(by_class(params(1, 32768, 1024)));  // K < 4096: not measured (decode kernel)
  EXPECT_FALSE(by_class(params(8, 8192, 2048)));   // nor on the narrow kernel
  EXPECT_FALSE(by_class(batched(1, 4096, 4096, 2)));
  GemmParams n_major = params(1, 4096, 4096);
  n_major.b = {g_buf + 256, 4096, false};
  EXPECT_FALSE(by_class(n_major));
}

// The per-shape table (src/gemm/measured_shapes.inc, generated): a lookup matches the call's
// whole key, C's alignment class included; every entry routed to flyops measured faster than
// stock, and the router answers each measured shape as its entry says.
// The parts the per-shape table keys on: the SXM boards its runs came from, by name.
TEST(GemmRouter, GpuPartsByName) {
  EXPECT_EQ(gpu_of_name("NVIDIA H100 80GB HBM3"), Gpu::kH100);
  EXPECT_EQ(gpu_of_name("NVIDIA H200"), Gpu::kH200);
  for (const char* other : {"NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL", "NVIDIA A100-SXM4-80GB", ""})
    EXPECT_EQ(gpu_of_name(other), Gpu::kOther) << other;
}

TEST(GemmRouter, MeasuredShapes) {
  using gemm::MeasuredShape;
  const std::array<MeasuredShape, 4> table{{
      {Gpu::kH200, 4096, 4095, 4096, 1, true, true, DType::kBFloat16, true, 0, 1.5f},
      {Gpu::kH200, 16, 6144, 4096, 1, true, true, DType::kBFloat16, false, 0, 0.97f},
      {Gpu::kH200, 16, 6144, 4096, 1, true, false, DType::kBFloat16, true, 2, 1.1f},
      {Gpu::kH100, 16, 6144, 4096, 1, true, true, DType::kBFloat16, true, 0, 1.2f},
  }};
  constexpr Gpu h200 = Gpu::kH200;
  EXPECT_EQ(gemm::find_measured(params(4096, 4095, 4096), h200, table), &table[0]);
  EXPECT_EQ(gemm::find_measured(params(16, 6144, 4096), h200, table), &table[1]);
  // each part's own entry; none for a part with no runs
  EXPECT_EQ(gemm::find_measured(params(16, 6144, 4096), Gpu::kH100, table), &table[3]);
  EXPECT_EQ(gemm::find_measured(params(4096, 4095, 4096), Gpu::kH100, table), nullptr);
  EXPECT_EQ(gemm::find_measured(params(16, 6144, 4096), Gpu::kOther, table), nullptr);
  GemmParams n_major = params(16, 6144, 4096);
  n_major.b = {g_buf + 256, 6144, false};
  EXPECT_EQ(gemm::find_measured(n_major, h200, table), &table[2]);
  GemmParams fp16 = params(16, 6144, 4096);
  fp16.dtype = DType::kFloat16;
  EXPECT_EQ(gemm::find_measured(fp16, h200, table), nullptr);
  GemmParams batched = params(16, 6144, 4096);
  batched.batch = 2;
  EXPECT_EQ(gemm::find_measured(batched, h200, table), nullptr);
  GemmParams padded = params(4096, 4095, 4096);  // an out= with aligned rows: not what ran
  padded.ldc = 4096;
  EXPECT_EQ(gemm::find_measured(padded, h200, table), nullptr);
  EXPECT_EQ(gemm::find_measured(params(4096, 4095, 4104), h200, table), nullptr);
  for (const MeasuredShape& m : gemm::kMeasuredShapes) {
    if (m.flyops) EXPECT_GE(m.worst_speedup, 1.0f) << m.M << "x" << m.N << "x" << m.K;
    GemmParams p = params(m.M, m.N, m.K);
    p.dtype = m.dtype, p.batch = m.batch;
    p.a.k_major = m.a_k_major;
    p.a.ld = m.a_k_major ? m.K : m.M;
    p.b = {g_buf + 256, m.b_k_major ? m.K : m.N, m.b_k_major};
    p.a.batch_stride = m.M * m.K, p.b.batch_stride = m.N * m.K, p.batch_stride_c = m.M * m.N;
    EXPECT_TRUE(m.cluster == 0 || m.cluster == 2);
    const DeviceInfo dev = fake_device_info(9, 0, 132, m.gpu);
    if (!gemm_supports(p, dev).ok) continue;
    const GemmPlan plan = gemm_choose(p, dev);
    EXPECT_EQ(plan.flyops, m.flyops) << m.M << "x" << m.N << "x" << m.K;
    EXPECT_EQ(plan.cluster, m.flyops ? m.cluster : 0);
  }
}

// The narrow kernel's reach and its K runs per 16 rows of B (src/gemm/gemv.cuh): the most
// runs whose warps fit the SMs in one wave (16 warps an SM), else 8; the hook's choice wins.
TEST(GemmNarrow, AppliesAndRuns) {
  auto name = [](const GemmParams& p) { return std::string(gemm_kernel_name(p, kH200)); };
  EXPECT_EQ(name(params(1, 4096, 4096)), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r8>");
  EXPECT_EQ(name(params(9, 6144, 4096)), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n16,r4>");
  EXPECT_EQ(name(params(1, 14336, 4096)), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r2>");
  EXPECT_EQ(name(params(1, 28672, 8192)), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r8>");
  GemmParams hook = params(1, 4096, 4096);
  hook.gemv_runs = 1;
  EXPECT_EQ(name(hook), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r1>");
  hook.path = 2;  // the decode kernel instead
  EXPECT_EQ(name(hook).rfind("flyops_gemm_decode<", 0), 0u);
  EXPECT_EQ(name(params(17, 4096, 4096)).rfind("flyops_gemm_decode<", 0), 0u);  // 17 rows
  GemmParams padded = params(4, 4096, 4100);  // K % 8 != 0 in padded rows
  padded.a.ld = padded.b.ld = 4104;
  EXPECT_TRUE(gemm_supports(padded, kH200).ok);
  EXPECT_EQ(name(padded).rfind("flyops_gemm_decode<", 0), 0u);
  GemmParams m_major = params(4, 4096, 4096);
  m_major.a = {g_buf, 8, false};
  EXPECT_EQ(name(m_major).rfind("flyops_gemm_decode<", 0), 0u);
  EXPECT_EQ(gemm_workspace_bytes(params(16, 1000, 4096), kH200), 0u);  // no workspace
  // The launcher's choice: the decode kernel at short K and past 8 rows on large weights;
  // the hook's path 3 takes the narrow kernel anyway, with at least four K blocks a run.
  EXPECT_EQ(name(params(1, 50257, 768)).rfind("flyops_gemm_decode<", 0), 0u);
  EXPECT_EQ(name(params(16, 28672, 8192)).rfind("flyops_gemm_decode<", 0), 0u);
  hook = params(1, 50257, 768);
  hook.path = 3;
  EXPECT_EQ(name(hook), "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r2>");
}

// Split-K (src/gemm/splitk.cuh): where the wide tiles fill less than half the SMs, the most
// parts that keep the grid within one CTA per SM with eight K blocks or more each; its fp32
// partials (16 KB per consumer warp, 8 warps a tile, per part) come from the caller's
// workspace, and without one the call runs unsplit.
TEST(GemmSplitK, PartsWorkspaceAndName) {
  const size_t tile_part = size_t{8} * 128 * 32 * 4;
  EXPECT_EQ(gemm_workspace_bytes(params(113, 203, 4096), kH200), 1 * 8 * tile_part);   // one tile, 8 parts
  EXPECT_EQ(gemm_workspace_bytes(params(512, 203, 4096), kH200), 4 * 8 * tile_part);   // 4 tiles x 8
  EXPECT_EQ(gemm_workspace_bytes(params(256, 4096, 4096), kH200), 32 * 4 * tile_part); // 32 tiles x 4
  EXPECT_EQ(gemm_workspace_bytes(params(1000, 1000, 1024), kH200), 32 * 2 * tile_part);  // 16 blocks: 2
  EXPECT_EQ(gemm_workspace_bytes(params(1000, 1000, 512), kH200), 0u);  // 8 K blocks: too short
  EXPECT_EQ(gemm_workspace_bytes(params(4096, 4096, 4096), kH200), 0u);  // 512 tiles: no split
  EXPECT_EQ(gemm_workspace_bytes(params(129, 257, 520), kH200), 0u);    // 9 K blocks: too short
  EXPECT_EQ(gemm_workspace_bytes(params(8, 4096, 4096), kH200), 0u);    // the decode path
  GemmParams hook = params(129, 257, 520);
  hook.split = 4;  // the hook forces it where every part gets a block
  EXPECT_EQ(gemm_workspace_bytes(hook, kH200), 4 * 4 * tile_part);
  hook = params(113, 203, 4096);
  hook.split = 1;  // none
  EXPECT_EQ(gemm_workspace_bytes(hook, kH200), 0u);
  // Unforced, split-K runs only on the routed class (C's unaligned rows): few-tile aligned
  // rows, where it trails cuBLAS, stay stock.
  ASSERT_EQ(gemm_forced(), 0);
  EXPECT_TRUE(gemm_choose(params(2048, 1001, 4096), kH200).flyops);
  EXPECT_GT(gemm_workspace_bytes(params(2048, 1001, 4096), kH200), 0u);
  EXPECT_FALSE(gemm_choose(params(113, 203, 4096), kH200).flyops);   // N < 1000: not the class
  EXPECT_FALSE(gemm_choose(params(256, 4096, 4096), kH200).flyops);  // aligned rows
  GemmParams p = params(113, 203, 4096);
  EXPECT_EQ(std::string(gemm_kernel_name(p, kH200)), "flyops_gemm<bf16,A:k-major,B:k-major>");  // no workspace
  p.workspace = g_buf;
  EXPECT_EQ(std::string(gemm_kernel_name(p, kH200)), "flyops_gemm_splitk<bf16,A:k-major,B:k-major,kparts8>");
}

// The persistent order visits every tile of every batch entry exactly once (with clusters:
// each cluster tile's ranks cover its rows), and the tiles of one wave (consecutive
// numbers) stay inside a band of group_rows tile rows (the default and the tuning hook's).
TEST(GemmScheduler, CoversEveryTileOnceInBands) {
  for (int g : {gemm::kGroupRows, 2, 16})
  for (int cluster : {1, 2})
    for (auto [tm, tn, batch] : {std::tuple{1, 1, 1}, {3, 5, 1}, {8, 4, 2}, {17, 9, 3}, {64, 32, 1}, {40, 7, 2}}) {
      const gemm::Scheduler s{tm, tn, cluster, gemm::Scheduler::count(tm, tn, cluster, batch), g};
      std::set<std::tuple<int, int, int>> seen;
      int64_t past_end = 0;
      for (int64_t t = 0; t < s.total; ++t) {
        for (int rank = 0; rank < cluster; ++rank) {
          const gemm::TileCoord c = s.at(t, rank);
          ASSERT_GE(c.m, 0);
          ASSERT_GE(c.n, 0);
          ASSERT_LT(c.n, tn);
          ASSERT_LT(c.z, batch);
          if (c.m >= tm) {
            ++past_end;  // only the last rank of an odd cluster tile row
            EXPECT_EQ(c.m, tm);
            continue;
          }
          EXPECT_TRUE(seen.insert({c.m, c.n, c.z}).second);
        }
        if (t > 0) {  // neighbours share a band (or the band just turned over)
          const gemm::TileCoord c = s.at(t, 0), p = s.at(t - 1, 0);
          if (p.z == c.z && p.m / g != c.m / g) {
            EXPECT_EQ(c.m / g, p.m / g + 1);
            EXPECT_EQ(c.n, 0);
          }
        }
      }
      EXPECT_EQ(static_cast<int64_t>(seen.size()), int64_t{tm} * tn * batch);
      EXPECT_EQ(past_end, cluster == 2 && tm % 2 ? int64_t{tn} * batch : 0);
    }
}
