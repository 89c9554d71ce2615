// GPU self-test of the RMSNorm kernels through the core API (no torch), against the float64
// reference. Inputs are random (fresh seed each run unless --seed), outputs are poisoned with
// NaN before every launch, and odd shapes, offsets and row strides are covered. The dweight
// of each case is computed twice and must match bit for bit. Exit code 0 when all pass.
//
// usage: flyops_gpu_selftest [--quick | --sanitize] [--seed S]
//   --sanitize: a few cases that reach every kernel and path, small enough for
//               compute-sanitizer's memcheck and racecheck
#include <cuda_runtime.h>

#include "check_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "flyops/rms_norm.h"
#include "reference/numeric.h"
#include "reference/rms_norm_ref.h"

using namespace flyops;

namespace {


// Host-side element codec for each dtype.
struct Codec {
  DType t;
  std::size_t bytes() const { return dtype_size(t); }
  void put(void* base, int64_t i, float v) const {
    switch (t) {
      case DType::kFloat32: static_cast<float*>(base)[i] = v; break;
      case DType::kFloat16: static_cast<uint16_t*>(base)[i] = reference::float_to_half(v); break;
      default: static_cast<uint16_t*>(base)[i] = reference::float_to_bf16(v); break;
    }
  }
  double get(const void* base, int64_t i) const {
    switch (t) {
      case DType::kFloat32: return static_cast<const float*>(base)[i];
      case DType::kFloat16: return reference::half_to_float(static_cast<const uint16_t*>(base)[i]);
      default: return reference::bf16_to_float(static_cast<const uint16_t*>(base)[i]);
    }
  }
  // Half the spacing of the format's subnormals: the absolute rounding floor.
  double tiny() const {
    return t == DType::kFloat32 ? std::ldexp(1.0, -150) : t == DType::kFloat16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134);
  }
  // Unit roundoff of the storage format.
  double unit() const {
    return t == DType::kFloat32 ? std::ldexp(1.0, -24) : t == DType::kFloat16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  }
};

struct Case {
  DType t;
  int64_t M, N;
  bool weight;
  int64_t pad = 0;     // extra elements between rows (row stride N + pad)
  int64_t offset = 0;  // elements added to every base pointer (misalignment)
};

struct DeviceBuf {
  void* p = nullptr;
  std::size_t n = 0;
  explicit DeviceBuf(std::size_t bytes) : n(bytes) { CHECK_CUDA(cudaMalloc(&p, std::max<std::size_t>(bytes, 16))); }
  ~DeviceBuf() { cudaFree(p); }
  char* c() const { return static_cast<char*>(p); }
};

std::mt19937_64 g_rng;

int g_fail = 0;
int g_cases = 0;

void fail(const Case& c, const char* what, double got, double want, double tol) {
  ++g_fail;
  std::printf("FAIL %s M=%lld N=%lld w=%d pad=%lld off=%lld: %s got %.6g want %.6g (tol %.3g)\n",
              dtype_name(c.t), (long long)c.M, (long long)c.N, c.weight, (long long)c.pad,
              (long long)c.offset, what, got, want, tol);
}

void run_case(const Case& c) {
  ++g_cases;
  const Codec k{c.t};
  const int64_t M = c.M, N = c.N, S = N + c.pad;
  const std::size_t eb = k.bytes();
  std::normal_distribution<float> nd;
  // Host tensors, rounded to the storage dtype; the reference sees the rounded values.
  std::vector<char> hx(std::max<int64_t>(1, M * S) * eb), hdy(hx.size()), hw(N * eb);
  std::vector<double> rx(M * N), rdy(M * N), rw(N);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      k.put(hx.data(), i * S + j, nd(g_rng));
      k.put(hdy.data(), i * S + j, nd(g_rng));
      rx[i * N + j] = k.get(hx.data(), i * S + j);
      rdy[i * N + j] = k.get(hdy.data(), i * S + j);
    }
  for (int64_t j = 0; j < N; ++j) {
    k.put(hw.data(), j, 1.0f + 0.5f * nd(g_rng));
    rw[j] = k.get(hw.data(), j);
  }
  const double eps = 1e-5;
  std::vector<double> ry(M * N), rrstd(M), rdx(M * N), rdw(N);
  reference::rms_norm_fwd(rx.data(), c.weight ? rw.data() : nullptr, M, N, eps, ry.data(), rrstd.data());

  const std::size_t off = c.offset * eb;
  DeviceBuf dx_in(hx.size() + off), ddy(hdy.size() + off), dw(hw.size() + off), dy_out(hx.size() + off),
      drstd(std::max<int64_t>(M, 1) * 4), dgrad(hx.size() + off), ddw(hw.size() + off);
  CHECK_CUDA(cudaMemcpy(dx_in.c() + off, hx.data(), hx.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(ddy.c() + off, hdy.data(), hdy.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dw.c() + off, hw.data(), hw.size(), cudaMemcpyHostToDevice));
  // Poison: NaN in every format is all-ones bits.
  CHECK_CUDA(cudaMemset(dy_out.p, 0xff, dy_out.n));
  CHECK_CUDA(cudaMemset(drstd.p, 0xff, drstd.n));

  const DeviceInfo& dev = device_info(0);
  RmsNormFwdParams f;
  f.M = M;
  f.N = N;
  f.dtype = c.t;
  f.x = dx_in.c() + off;
  f.x_row_stride = S;
  f.weight = c.weight ? dw.c() + off : nullptr;
  f.y = dy_out.c() + off;
  f.y_row_stride = S;
  f.rstd = static_cast<float*>(drstd.p);
  f.eps = static_cast<float>(eps);
  const RmsNormPlan fp = rms_norm_fwd_choose(f, dev);
  if (!fp.flyops()) {
    std::printf("FAIL routed to stock: %s\n", fp.reason);
    ++g_fail;
    return;
  }
  if (rms_norm_fwd(f, fp) != Status::kSuccess) return fail(c, "fwd launch", 0, 0, 0);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<char> hy(hx.size());
  std::vector<float> hrstd(std::max<int64_t>(M, 1));
  CHECK_CUDA(cudaMemcpy(hy.data(), dy_out.c() + off, hy.size(), cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hrstd.data(), drstd.p, 4 * std::max<int64_t>(M, 1), cudaMemcpyDeviceToHost));
  // y: fp32 arithmetic then one rounding to the storage format; |y| = |x| rstd |w|.
  for (int64_t i = 0; i < M; ++i) {
    const double rs_tol = 8 * std::ldexp(1.0, -24) * rrstd[i];
    if (!(std::fabs(hrstd[i] - rrstd[i]) <= rs_tol)) return fail(c, "rstd", hrstd[i], rrstd[i], rs_tol);
    for (int64_t j = 0; j < N; ++j) {
      const double got = k.get(hy.data(), i * S + j), want = ry[i * N + j];
      const double tol = k.unit() * std::fabs(want) + 16 * std::ldexp(1.0, -24) * std::fabs(want) + k.tiny();
      if (!(std::fabs(got - want) <= tol)) return fail(c, "y", got, want, tol);
    }
  }

  // Backward from the kernel's own rstd.
  std::vector<double> grstd(hrstd.begin(), hrstd.begin() + M);
  reference::rms_norm_bwd(rdy.data(), rx.data(), grstd.data(), c.weight ? rw.data() : nullptr, M, N,
                          rdx.data(), c.weight ? rdw.data() : nullptr);
  RmsNormBwdParams b;
  b.M = M;
  b.N = N;
  b.dtype = c.t;
  b.dy = ddy.c() + off;
  b.dy_row_stride = S;
  b.x = dx_in.c() + off;
  b.x_row_stride = S;
  b.rstd = static_cast<const float*>(drstd.p);
  b.weight = f.weight;
  b.dx = dgrad.c() + off;
  b.dx_row_stride = S;
  b.dweight = c.weight ? ddw.c() + off : nullptr;
  const RmsNormPlan bp = rms_norm_bwd_choose(b, dev);
  if (!bp.flyops()) {
    std::printf("FAIL bwd routed to stock: %s\n", bp.reason);
    ++g_fail;
    return;
  }
  const std::size_t ws_bytes = rms_norm_bwd_workspace_bytes(b, bp, dev);
  DeviceBuf ws(ws_bytes);
  b.workspace = ws.p;
  b.workspace_bytes = ws_bytes;
  std::vector<char> hdx(hx.size()), hdw(hw.size()), hdw2(hw.size());
  for (int rep = 0; rep < 2; ++rep) {
    CHECK_CUDA(cudaMemset(dgrad.p, 0xff, dgrad.n));
    CHECK_CUDA(cudaMemset(ddw.p, 0xff, ddw.n));
    CHECK_CUDA(cudaMemset(ws.p, 0xff, ws.n));
    if (rms_norm_bwd(b, bp) != Status::kSuccess) return fail(c, "bwd launch", 0, 0, 0);
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaMemcpy(hdx.data(), dgrad.c() + off, hdx.size(), cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(rep ? hdw2.data() : hdw.data(), ddw.c() + off, hw.size(), cudaMemcpyDeviceToHost));
  }
  // dx: the row sum (N terms in fp32) carries error ~ N * u32 * sum|g x|, times rstd^3 |x| / N.
  for (int64_t i = 0; i < M; ++i) {
    double sabs = 0;
    for (int64_t j = 0; j < N; ++j) sabs += std::fabs(rdy[i * N + j] * (c.weight ? rw[j] : 1.0) * rx[i * N + j]);
    const double r = grstd[i];
    for (int64_t j = 0; j < N; ++j) {
      const double got = k.get(hdx.data(), i * S + j), want = rdx[i * N + j];
      const double g = std::fabs(rdy[i * N + j] * (c.weight ? rw[j] : 1.0));
      const double scale = r * g + std::fabs(rx[i * N + j]) * r * r * r * sabs / N;
      const double tol =
          k.unit() * std::fabs(want) + 64 * std::ldexp(1.0, -24) * scale * std::sqrt(double(N)) + k.tiny();
      if (!(std::fabs(got - want) <= tol)) return fail(c, "dx", got, want, tol);
    }
  }
  if (c.weight) {
    if (std::memcmp(hdw.data(), hdw2.data(), hdw.size()) != 0) return fail(c, "dweight not deterministic", 0, 0, 0);
    for (int64_t j = 0; j < N; ++j) {
      double sabs = 0;
      for (int64_t i = 0; i < M; ++i) sabs += std::fabs(rdy[i * N + j] * rx[i * N + j] * grstd[i]);
      const double got = k.get(hdw.data(), j), want = rdw[j];
      const double tol =
          k.unit() * std::fabs(want) + 8 * std::ldexp(1.0, -24) * sabs * std::sqrt(double(M) + 1) + k.tiny();
      if (!(std::fabs(got - want) <= tol)) return fail(c, "dweight", got, want, tol);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false, sanitize = false;
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--quick")) quick = true;
    if (!std::strcmp(argv[i], "--sanitize")) sanitize = true;
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
  }
  g_rng.seed(seed);
  std::printf("flyops_gpu_selftest seed=%llu%s\n", (unsigned long long)seed,
              sanitize ? " (sanitize)" : quick ? " (quick)" : "");
  int dev_count = 0;
  if (cudaGetDeviceCount(&dev_count) != cudaSuccess || dev_count == 0) {
    std::printf("no CUDA device\n");
    return 2;
  }
  if (!device_info(0).is_sm90()) {
    std::printf("device 0 is not compute capability 9.0\n");
    return 2;
  }
  if (sanitize) {
    // warp rows (multi-row CTAs), block rows, scalar accesses, the split path, no rows
    for (DType t : {DType::kBFloat16, DType::kFloat32})
      for (int64_t N : {24, 1000, 4096, 4097, 16384, 40000})
        for (int64_t M : {0, 5, 67}) run_case({t, M, N, true});
    run_case({DType::kFloat16, 9, 5120, false});
    run_case({DType::kBFloat16, 3, 4096, true, 8, 1});
    std::printf("%d passed, %d failed\n", g_cases - g_fail, g_fail);
    return g_fail == 0 ? 0 : 1;
  }
  std::vector<int64_t> Ns = quick ? std::vector<int64_t>{1, 3, 127, 1024, 4097, 5120, 40000}
                                  : std::vector<int64_t>{1, 3, 8, 127, 256, 1000, 1024, 2048, 4096, 4097, 5120,
                                                         8192, 10240, 16384, 20000, 65536};
  std::vector<int64_t> Ms = quick ? std::vector<int64_t>{0, 1, 7, 133} : std::vector<int64_t>{0, 1, 7, 300};
  for (DType t : {DType::kBFloat16, DType::kFloat16, DType::kFloat32})
    for (int64_t N : Ns)
      for (int64_t M : Ms)
        for (bool w : {false, true}) {
          if (M * N > (quick ? 2'000'000 : 8'000'000)) continue;
          run_case({t, M, N, w});
        }
  // Layouts: padded rows (row stride > N), a base one element off alignment.
  for (DType t : {DType::kBFloat16, DType::kFloat32}) {
    run_case({t, 37, 4096, true, 8, 0});
    run_case({t, 37, 4096, true, 0, 1});
    run_case({t, 5, 113 * 203, true, 3, 1});
    run_case({t, 113, 203, true, 0, 0});
  }
  std::printf("%d passed, %d failed\n", g_cases - g_fail, g_fail);
  return g_fail == 0 ? 0 : 1;
}
