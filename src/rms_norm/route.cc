// RMSNorm router: supports() says whether a flyops kernel can take the call at all;
// choose() picks the kernel (path, vector width, row shape) from the tuned table.
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>

#include "flyops/rms_norm.h"
#include "traits.h"
#include "tuned_table.h"

namespace flyops {
namespace {

std::atomic<int> g_forced_shape{-1};

bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

bool is_float_type(DType t) {
  return t == DType::kFloat32 || t == DType::kFloat16 || t == DType::kBFloat16;
}

Support fail(const char* reason) { return Support{false, reason}; }

Support common_checks(int64_t M, int64_t N, DType dtype, const DeviceInfo& dev) {
  if (!dev.valid) return fail("device query failed");
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (!is_float_type(dtype)) return fail("dtype not float32, float16 or bfloat16");
  if (M < 0 || N < 0) return fail("negative size");
  if (N == 0) return fail("empty normalized shape (N == 0)");
  if (N > INT_MAX / 2) return fail("N beyond 2^30 elements");
  return Support{true, ""};
}

bool rows_ok(int64_t M, int64_t N, int64_t stride) { return M <= 1 || stride >= N; }

int fast_vec(DType t) { return static_cast<int>(16 / dtype_size(t)); }

// Row shape from the table for (direction, dtype, vec), or -1 for the split path.
int table_shape(bool bwd, DType t, int vec, int64_t N) {
  using namespace rms_norm;
  if (vec == 1) return bwd ? lookup(kBwdScalar, N) : lookup(kFwdScalar, N);
  if (dtype_size(t) == 4) return bwd ? lookup(kBwd32, N) : lookup(kFwd32, N);
  return bwd ? lookup(kBwd16, N) : lookup(kFwd16, N);
}

rms_norm::Elem elem_of(DType t) {
  return t == DType::kFloat32 ? rms_norm::Elem::kF32
         : t == DType::kBFloat16 ? rms_norm::Elem::kBF16 : rms_norm::Elem::kF16;
}

bool fits(bool bwd, int shape, int vec, DType t) {
  return bwd ? rms_norm::bwd_fits(shape, vec, elem_of(t)) : rms_norm::fwd_fits(shape, vec, elem_of(t));
}

RmsNormPlan plan_for(bool bwd, DType t, int vec, int64_t N) {
  using namespace rms_norm;
  RmsNormPlan plan;
  plan.vec = vec;
  const int forced = g_forced_shape.load(std::memory_order_relaxed);
  if (forced >= 0 && forced < kNumShapes && shape_capacity(forced, vec) >= N &&
      fits(bwd, forced, vec, t)) {
    plan.kind = RmsNormPlan::Kind::kFused;
    plan.shape = forced;
    return plan;
  }
  const int shape = table_shape(bwd, t, vec, N);
  if (shape >= 0 && fits(bwd, shape, vec, t)) {
    plan.kind = RmsNormPlan::Kind::kFused;
    plan.shape = shape;
  } else {
    plan.kind = RmsNormPlan::Kind::kSplit;
  }
  return plan;
}

RmsNormPlan stock(const char* reason) {
  RmsNormPlan p;
  p.kind = RmsNormPlan::Kind::kStock;
  p.reason = reason;
  return p;
}

}  // namespace

Support rms_norm_fwd_supports(const RmsNormFwdParams& p, const DeviceInfo& dev) {
  Support s = common_checks(p.M, p.N, p.dtype, dev);
  if (!s.ok) return s;
  if (p.M > 0 && (p.x == nullptr || p.y == nullptr || p.rstd == nullptr))
    return fail("null pointer");
  if (!rows_ok(p.M, p.N, p.x_row_stride) || !rows_ok(p.M, p.N, p.y_row_stride))
    return fail("rows overlap (row stride < N)");
  return s;
}

Support rms_norm_bwd_supports(const RmsNormBwdParams& p, const DeviceInfo& dev) {
  Support s = common_checks(p.M, p.N, p.dtype, dev);
  if (!s.ok) return s;
  if (p.M > 0 && (p.x == nullptr || p.dy == nullptr || p.rstd == nullptr))
    return fail("null pointer");
  if (!rows_ok(p.M, p.N, p.x_row_stride) || !rows_ok(p.M, p.N, p.dy_row_stride) ||
      (p.dx != nullptr && !rows_ok(p.M, p.N, p.dx_row_stride)))
    return fail("rows overlap (row stride < N)");
  if (p.dweight != nullptr && p.weight == nullptr) return fail("dweight requested without weight");
  return s;
}

RmsNormPlan rms_norm_fwd_choose(const RmsNormFwdParams& p, const DeviceInfo& dev) {
  const Support s = rms_norm_fwd_supports(p, dev);
  if (!s.ok) return stock(s.reason);
  const int v = fast_vec(p.dtype);
  const bool vec_ok = p.N % v == 0 && aligned16(p.x) && aligned16(p.y) && aligned16(p.weight) &&
                      (p.M <= 1 || (p.x_row_stride % v == 0 && p.y_row_stride % v == 0));
  return plan_for(false, p.dtype, vec_ok ? v : 1, p.N);
}

RmsNormPlan rms_norm_bwd_choose(const RmsNormBwdParams& p, const DeviceInfo& dev) {
  const Support s = rms_norm_bwd_supports(p, dev);
  if (!s.ok) return stock(s.reason);
  const int v = fast_vec(p.dtype);
  const bool vec_ok =
      p.N % v == 0 && aligned16(p.x) && aligned16(p.dy) && aligned16(p.dx) &&
      aligned16(p.weight) &&
      (p.M <= 1 || (p.x_row_stride % v == 0 && p.dy_row_stride % v == 0 &&
                    (p.dx == nullptr || p.dx_row_stride % v == 0)));
  return plan_for(true, p.dtype, vec_ok ? v : 1, p.N);
}

void rms_norm_plan_name(const RmsNormPlan& plan, DType dtype, bool backward, char* buf,
                        std::size_t len) {
  const char* dir = backward ? "bwd" : "fwd";
  switch (plan.kind) {
    case RmsNormPlan::Kind::kStock:
      std::snprintf(buf, len, "stock");
      break;
    case RmsNormPlan::Kind::kSplit:
      std::snprintf(buf, len, "flyops_rms_norm_%s_split<%s,v%d>", dir, dtype_name(dtype), plan.vec);
      break;
    case RmsNormPlan::Kind::kFused: {
      const rms_norm::RowShape& s = rms_norm::kShapes[plan.shape];
      char cluster[24] = "";
      if (s.cluster > 1) std::snprintf(cluster, sizeof(cluster), ",cluster%d", s.cluster);
      std::snprintf(buf, len, "flyops_rms_norm_%s<%s,v%d,%dx%d/%d%s%s>", dir, dtype_name(dtype),
                    plan.vec, s.items, s.threads_per_row, s.threads_per_cta,
                    s.stages == 2 ? ",2-stage" : "", cluster);
      break;
    }
  }
}

void rms_norm_force_shape(int shape) { g_forced_shape.store(shape, std::memory_order_relaxed); }
int rms_norm_num_shapes() { return rms_norm::kNumShapes; }

void rms_norm_shape_info(int shape, int out[5]) {
  const rms_norm::RowShape& s = rms_norm::kShapes[shape < 0 || shape >= rms_norm::kNumShapes ? 0 : shape];
  out[0] = s.items;
  out[1] = s.threads_per_row;
  out[2] = s.threads_per_cta;
  out[3] = s.stages;
  out[4] = s.cluster;
}

}  // namespace flyops
