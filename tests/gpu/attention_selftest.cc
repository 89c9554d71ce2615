// GPU self-test of the attention forward and backward through the core API (no torch),
// against the float64 reference: every head dim, bf16 and fp16, causal top-left and bottom-right,
// grouped and multi-query heads, lengths of 1 and not multiples of the blocks, [B, L, H, D]
// layouts (transposed views), outputs and log-sum-exp poisoned with NaN beforehand. Inputs
// are random normal, fresh each run unless --seed. The bound is the rounding the kernel
// must do (P and O rounded to the dtype, fp32 sums), a few units of the dtype's roundoff of
// the largest output; the Python tests apply the 2x-stock rule on top. The backward runs
// from each case's forward output and log-sum-exp, its gradients poisoned too; deterministic
// cases run it twice and compare dQ's bits.
//
// usage: flyops_attention_selftest [--sanitize | --race] [--seed S] [--time]
//   --race: eleven forward cases (every head dim, odd lengths, both causal forms, and at
//           D = 64 / 128 one of 265 tiles, so that the persistent CTAs reuse their Q buffers)
//           and the backward of the other nine (one deterministic per head dim) for racecheck
//   --time: also times the kernels alone (median of CUDA events, L2 flushed) on the issue's
//           shapes, B x L = 16384 tokens, in TFLOP/s (4 B H L^2 D, halved when causal; the
//           backward 2.5x that); FLYOPS_TIME_QUICK=1 times D 64 / 128 at L 1024 and 8192 only,
//           FLYOPS_TIME_DETERMINISTIC=1 the backward's ordered dQ, FLYOPS_TIME_CAUSAL=0 / 1
//           full or causal rows only, FLYOPS_TIME_FWD=1 the
//           forward only, FLYOPS_TIME_D=256 one head dim only, FLYOPS_TIME_FP16=1 fp16 inputs
//           (else bf16), FLYOPS_TIME_ONLY=1 no correctness cases before (scripts/attn-ab:
//           each build's own check is separate)
#include <cuda_runtime.h>

#include "check_cuda.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "flyops/attention.h"
#include "reference/attention_ref.h"
#include "reference/numeric.h"

using namespace flyops;

namespace {

struct Case {
  int64_t B, H, Hkv, Lq, Lk, D;
  bool fp16 = false;
  int causal = 0;        // 0 none, 1 top-left (offset 0), 2 bottom-right (offset Lk - Lq)
  bool blhd = false;     // q, k, v, o stored as [B, L, H, D] (the transposed view)
  bool want_lse = true;
  bool bwd = true;       // also the backward (from this forward's O and LSE)
  bool det = false;      // the backward in deterministic mode, run twice: dQ's bits must agree
  bool ramp = false;     // key j scaled by 1 + 6 (Lk - 1 - j) / Lk ([B, H, L, D] only): the walk
                         // (last block first) meets ever larger scores, so the rows' maxima move
                         // by more than 2^8 many times (forward v12's lazy rescale)
};

std::mt19937_64 g_rng;
int g_fail = 0, g_cases = 0;

uint16_t to_bits(float f, bool fp16) { return fp16 ? reference::float_to_half(f) : reference::float_to_bf16(f); }
double from_bits(uint16_t h, bool fp16) { return fp16 ? reference::half_to_float(h) : reference::bf16_to_float(h); }

// Strides (elements) of a [B, H, L, D] view stored as [B, H, L, D] or [B, L, H, D].
AttnTensor layout(void* p, int64_t H, int64_t L, int64_t D, bool blhd) {
  AttnTensor t;
  t.ptr = p;
  if (blhd) {
    t.stride_b = L * H * D, t.stride_l = H * D, t.stride_h = D;
  } else {
    t.stride_b = H * L * D, t.stride_h = L * D, t.stride_l = D;
  }
  return t;
}

int64_t at(const AttnTensor& t, int64_t b, int64_t h, int64_t l, int64_t d) {
  return b * t.stride_b + h * t.stride_h + l * t.stride_l + d;
}

// Max |got - ref| over a [B, heads, L, D] device tensor against per-head float64 refs, and
// whether any element was left unwritten (NaN poison).
struct Err {
  double worst = 0, maxref = 0;
  bool unwritten = false;
  void add(double got, double ref) {
    if (std::isnan(got)) unwritten = true;
    worst = std::max(worst, std::fabs(got - ref));
    maxref = std::max(maxref, std::fabs(ref));
  }
};

// The backward from the forward just run (p: its device tensors, o and lse written).
bool check_backward(const Case& c, const AttnParams& p, const std::vector<uint16_t>& hq,
                    const std::vector<uint16_t>& hk, const std::vector<uint16_t>& hv, const char* name) {
  const int64_t nq = c.B * c.H * c.Lq * c.D, nk = c.B * c.Hkv * c.Lk * c.D;
  std::normal_distribution<float> nd;
  std::vector<uint16_t> hdo(nq);
  for (auto& x : hdo) x = to_bits(nd(g_rng), c.fp16);
  uint16_t *ddo, *ddq, *ddk, *ddv;
  void* ws;
  const size_t ws_bytes = attention_bwd_workspace_bytes(p);
  CHECK_CUDA(cudaMalloc(&ddo, nq * 2));
  CHECK_CUDA(cudaMalloc(&ddq, nq * 2));
  CHECK_CUDA(cudaMalloc(&ddk, nk * 2));
  CHECK_CUDA(cudaMalloc(&ddv, nk * 2));
  CHECK_CUDA(cudaMalloc(&ws, ws_bytes));
  CHECK_CUDA(cudaMemcpy(ddo, hdo.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(ddq, 0xff, nq * 2));
  CHECK_CUDA(cudaMemset(ddk, 0xff, nk * 2));
  CHECK_CUDA(cudaMemset(ddv, 0xff, nk * 2));
  CHECK_CUDA(cudaMemset(ws, 0xff, ws_bytes));
  AttnBwdParams bp;
  bp.fwd = p;
  bp.dout = layout(ddo, c.H, c.Lq, c.D, c.blhd);
  bp.dq = layout(ddq, c.H, c.Lq, c.D, c.blhd);
  bp.dk = layout(ddk, c.Hkv, c.Lk, c.D, c.blhd);
  bp.dv = layout(ddv, c.Hkv, c.Lk, c.D, c.blhd);
  bp.workspace = ws;
  bp.deterministic = c.det;
  bool ok = true;
  const Support sup = attention_bwd_supports(bp, device_info(0));
  if (!sup.ok) {
    std::printf("FAILED %s backward: unsupported (%s)\n", name, sup.reason);
    ok = false;
  } else if (attention_bwd_run(bp) != Status::kSuccess) {
    std::printf("FAILED %s backward: launch (%s)\n", name, attention_last_error());
    ok = false;
  }
  if (ok) {
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> gq(nq), gk(nk), gv(nk);
    CHECK_CUDA(cudaMemcpy(gq.data(), ddq, nq * 2, cudaMemcpyDeviceToHost));
    bool same_bits = true;
    if (c.det) {  // again, from a poisoned dQ: the same bits
      CHECK_CUDA(cudaMemset(ddq, 0xff, nq * 2));
      if (attention_bwd_run(bp) != Status::kSuccess) same_bits = false;
      CHECK_CUDA(cudaDeviceSynchronize());
      std::vector<uint16_t> again(nq);
      CHECK_CUDA(cudaMemcpy(again.data(), ddq, nq * 2, cudaMemcpyDeviceToHost));
      same_bits = same_bits && again == gq;
    }
    CHECK_CUDA(cudaMemcpy(gk.data(), ddk, nk * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(gv.data(), ddv, nk * 2, cudaMemcpyDeviceToHost));
    const int64_t g = c.H / c.Hkv;
    Err eq, ek, ev;
    std::vector<double> q(c.Lq * c.D), k(c.Lk * c.D), v(c.Lk * c.D), dout(c.Lq * c.D), dq(c.Lq * c.D);
    std::vector<double> dk(c.Lk * c.D), dv(c.Lk * c.D);
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t hkv = 0; hkv < c.Hkv; ++hkv) {
        std::fill(dk.begin(), dk.end(), 0.0);
        std::fill(dv.begin(), dv.end(), 0.0);
        for (int64_t j = 0; j < c.Lk; ++j)
          for (int64_t d = 0; d < c.D; ++d) {
            k[j * c.D + d] = from_bits(hk[at(p.k, b, hkv, j, d)], c.fp16);
            v[j * c.D + d] = from_bits(hv[at(p.v, b, hkv, j, d)], c.fp16);
          }
        for (int64_t h = hkv * g; h < (hkv + 1) * g; ++h) {
          for (int64_t i = 0; i < c.Lq; ++i)
            for (int64_t d = 0; d < c.D; ++d) {
              q[i * c.D + d] = from_bits(hq[at(p.q, b, h, i, d)], c.fp16);
              dout[i * c.D + d] = from_bits(hdo[at(bp.dout, b, h, i, d)], c.fp16);
            }
          reference::attention_head_bwd(q.data(), k.data(), v.data(), dout.data(), c.Lq, c.Lk, c.D, p.scale,
                                        p.causal, p.causal_offset, dq.data(), dk.data(), dv.data());
          for (int64_t i = 0; i < c.Lq; ++i)
            for (int64_t d = 0; d < c.D; ++d) eq.add(from_bits(gq[at(bp.dq, b, h, i, d)], c.fp16), dq[i * c.D + d]);
        }
        for (int64_t j = 0; j < c.Lk; ++j)
          for (int64_t d = 0; d < c.D; ++d) {
            ek.add(from_bits(gk[at(bp.dk, b, hkv, j, d)], c.fp16), dk[j * c.D + d]);
            ev.add(from_bits(gv[at(bp.dv, b, hkv, j, d)], c.fp16), dv[j * c.D + d]);
          }
      }
    // P and dS rounded once to the dtype before their products, fp32 sums, and the output's
    // own rounding: a bound of a few units of the dtype's roundoff of the largest gradient.
    const double u = c.fp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
    auto within = [&](const Err& e) { return !e.unwritten && e.worst <= 8 * u * std::max(e.maxref, 1e-3); };
    ok = within(eq) && within(ek) && within(ev) && same_bits;
    std::printf("%-6s %s backward%s  dq %.3g / %.3g  dk %.3g / %.3g  dv %.3g / %.3g (err / max |ref|)%s%s\n",
                ok ? "ok" : "FAILED", name, c.det ? " deterministic" : "", eq.worst, eq.maxref, ek.worst, ek.maxref,
                ev.worst, ev.maxref, eq.unwritten || ek.unwritten || ev.unwritten ? "  UNWRITTEN/NaN" : "",
                same_bits ? "" : "  BITS DIFFER RUN TO RUN");
  }
  cudaFree(ddo);
  cudaFree(ddq);
  cudaFree(ddk);
  cudaFree(ddv);
  cudaFree(ws);
  return ok;
}

void run(const Case& c) {
  ++g_cases;
  const int64_t nq = c.B * c.H * c.Lq * c.D, nk = c.B * c.Hkv * c.Lk * c.D;
  std::normal_distribution<float> nd;
  std::vector<uint16_t> hq(nq), hk(nk), hv(nk);
  for (auto& x : hq) x = to_bits(nd(g_rng), c.fp16);
  for (int64_t i = 0; i < nk; ++i) {
    const int64_t j = (i / c.D) % c.Lk;  // the key's index in the [B, H, L, D] layout
    const float r = c.ramp ? 1.f + 6.f * static_cast<float>(c.Lk - 1 - j) / static_cast<float>(c.Lk) : 1.f;
    hk[i] = to_bits(r * nd(g_rng), c.fp16);
  }
  for (auto& x : hv) x = to_bits(nd(g_rng), c.fp16);
  uint16_t *dq, *dk, *dv, *dout;
  float* dlse;
  CHECK_CUDA(cudaMalloc(&dq, nq * 2));
  CHECK_CUDA(cudaMalloc(&dk, nk * 2));
  CHECK_CUDA(cudaMalloc(&dv, nk * 2));
  CHECK_CUDA(cudaMalloc(&dout, nq * 2));
  CHECK_CUDA(cudaMalloc(&dlse, c.B * c.H * c.Lq * 4));
  CHECK_CUDA(cudaMemcpy(dq, hq.data(), nq * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dk, hk.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dv, hv.data(), nk * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, nq * 2));  // NaN poison
  CHECK_CUDA(cudaMemset(dlse, 0xff, c.B * c.H * c.Lq * 4));
  AttnParams p;
  p.B = c.B, p.H = c.H, p.Hkv = c.Hkv, p.Lq = c.Lq, p.Lk = c.Lk, p.D = c.D;
  p.dtype = c.fp16 ? DType::kFloat16 : DType::kBFloat16;
  p.q = layout(dq, c.H, c.Lq, c.D, c.blhd);
  p.k = layout(dk, c.Hkv, c.Lk, c.D, c.blhd);
  p.v = layout(dv, c.Hkv, c.Lk, c.D, c.blhd);
  p.o = layout(dout, c.H, c.Lq, c.D, c.blhd);
  p.lse = c.want_lse ? dlse : nullptr;
  p.lse_stride_h = c.Lq, p.lse_stride_b = c.H * c.Lq;
  p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(c.D)));
  p.causal = c.causal != 0;
  p.causal_offset = c.causal == 2 ? c.Lk - c.Lq : 0;
  char name[160];
  std::snprintf(name, sizeof(name), "%s B%lld H%lld/%lld Lq%lld Lk%lld%s%s%s%s", attention_kernel_name(p),
                (long long)c.B, (long long)c.H, (long long)c.Hkv, (long long)c.Lq, (long long)c.Lk,
                c.causal == 2 ? " bottom-right" : "", c.blhd ? " blhd" : "", c.want_lse ? "" : " no-lse",
                c.ramp ? " ramp" : "");
  const Support sup = attention_supports(p, device_info(0));
  if (!sup.ok) {
    std::printf("FAILED %s: unsupported (%s)\n", name, sup.reason);
    ++g_fail;
    return;
  }
  if (attention_run(p) != Status::kSuccess) {
    std::printf("FAILED %s: launch (%s)\n", name, attention_last_error());
    ++g_fail;
    return;
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> hout(nq);
  std::vector<float> hlse(c.B * c.H * c.Lq);
  CHECK_CUDA(cudaMemcpy(hout.data(), dout, nq * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(hlse.data(), dlse, hlse.size() * 4, cudaMemcpyDeviceToHost));
  const int64_t g = c.H / c.Hkv;
  const double u = c.fp16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  double worst = 0, worst_lse = 0, maxref = 0;
  bool unwritten = false;
  std::vector<double> q(c.Lq * c.D), k(c.Lk * c.D), v(c.Lk * c.D), ref(c.Lq * c.D), lse(c.Lq);
  for (int64_t b = 0; b < c.B; ++b)
    for (int64_t h = 0; h < c.H; ++h) {
      for (int64_t i = 0; i < c.Lq; ++i)
        for (int64_t d = 0; d < c.D; ++d) q[i * c.D + d] = from_bits(hq[at(p.q, b, h, i, d)], c.fp16);
      for (int64_t j = 0; j < c.Lk; ++j)
        for (int64_t d = 0; d < c.D; ++d) {
          k[j * c.D + d] = from_bits(hk[at(p.k, b, h / g, j, d)], c.fp16);
          v[j * c.D + d] = from_bits(hv[at(p.v, b, h / g, j, d)], c.fp16);
        }
      reference::attention_head(q.data(), k.data(), v.data(), c.Lq, c.Lk, c.D, p.scale, p.causal, p.causal_offset,
                                ref.data(), lse.data());
      for (int64_t i = 0; i < c.Lq; ++i) {
        for (int64_t d = 0; d < c.D; ++d) {
          const double got = from_bits(hout[at(p.o, b, h, i, d)], c.fp16);
          if (std::isnan(got)) unwritten = true;
          worst = std::max(worst, std::fabs(got - ref[i * c.D + d]));
          maxref = std::max(maxref, std::fabs(ref[i * c.D + d]));
        }
        if (c.want_lse) {
          const double got = hlse[(b * c.H + h) * c.Lq + i];
          if (std::isinf(lse[i])) {
            if (!(std::isinf(got) && got > 0)) unwritten = true;
          } else {
            if (std::isnan(got)) unwritten = true;
            worst_lse = std::max(worst_lse, std::fabs(got - lse[i]) / std::max(1.0, std::fabs(lse[i])));
          }
        }
      }
    }
  // P (in [0, 1]) and O each rounded once to the dtype, fp32 sums over at most Lk terms.
  const double tol = 4 * u * std::max(maxref, 1e-3), tol_lse = 1e-4;
  const bool ok = !unwritten && worst <= tol && worst_lse <= tol_lse;
  if (!ok) ++g_fail;
  std::printf("%-6s %s  max err %.3g (bound %.3g, max |ref| %.3g)  lse %.3g%s\n", ok ? "ok" : "FAILED", name, worst,
              tol, maxref, worst_lse, unwritten ? "  UNWRITTEN/NaN" : "");
  if (c.bwd && c.want_lse) {
    ++g_cases;
    if (!check_backward(c, p, hq, hk, hv, name)) ++g_fail;
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dlse);
}

// The kernel alone on random inputs: median of 20 CUDA-event timings, each after a 256 MiB
// write that evicts L2 (the benchmark's flush).
void time_shapes() {
  void* flush;
  const size_t flush_bytes = size_t{256} << 20;
  CHECK_CUDA(cudaMalloc(&flush, flush_bytes));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  const int64_t shapes[][2] = {{128, 16}, {64, 32}, {256, 8}};  // head dim, heads
  const bool quick = std::getenv("FLYOPS_TIME_QUICK") != nullptr;  // D 64 / 128 at L 1024 and 8192
  const char* only_d = std::getenv("FLYOPS_TIME_D");
  const char* only_causal = std::getenv("FLYOPS_TIME_CAUSAL");  // 0: full rows only, 1: causal only
  const bool fp16 = std::getenv("FLYOPS_TIME_FP16") != nullptr;
  for (const auto& dh : shapes)
    for (int64_t L : {512, 1024, 2048, 4096, 8192, 16384})
      for (bool causal : {false, true}) {
        const int64_t D = dh[0], H = dh[1], B = 16384 / L, n = B * H * L * D;
        if (quick && (D == 256 || (L != 1024 && L != 8192))) continue;
        if (only_d != nullptr && std::atoll(only_d) != D) continue;
        if (only_causal != nullptr && std::atoi(only_causal) != static_cast<int>(causal)) continue;
        uint16_t* buf;
        float* lse;
        CHECK_CUDA(cudaMalloc(&buf, 8 * n * 2));  // q k v o dO dq dk dv
        CHECK_CUDA(cudaMalloc(&lse, B * H * L * 4));
        std::vector<uint16_t> h(std::min<int64_t>(n, 1 << 22));
        std::normal_distribution<float> nd;
        for (auto& x : h) x = fp16 ? reference::float_to_half(nd(g_rng)) : reference::float_to_bf16(nd(g_rng));
        for (int64_t off = 0; off < 5 * n; off += static_cast<int64_t>(h.size()))
          CHECK_CUDA(cudaMemcpy(buf + off, h.data(), std::min<int64_t>(h.size(), 5 * n - off) * 2, cudaMemcpyHostToDevice));
        AttnParams p;
        p.B = B, p.H = p.Hkv = H, p.Lq = p.Lk = L, p.D = D;
        p.dtype = fp16 ? DType::kFloat16 : DType::kBFloat16;
        p.q = layout(buf, H, L, D, false), p.k = layout(buf + n, H, L, D, false), p.v = layout(buf + 2 * n, H, L, D, false);
        p.o = layout(buf + 3 * n, H, L, D, false);
        p.lse = lse, p.lse_stride_h = L, p.lse_stride_b = H * L;
        p.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
        p.causal = causal;
        AttnBwdParams bp;
        bp.fwd = p;
        bp.dout = layout(buf + 4 * n, H, L, D, false);
        bp.dq = layout(buf + 5 * n, H, L, D, false);
        bp.dk = layout(buf + 6 * n, H, L, D, false);
        bp.dv = layout(buf + 7 * n, H, L, D, false);
        void* ws = nullptr;
        if (std::getenv("FLYOPS_TIME_FWD") == nullptr)
          CHECK_CUDA(cudaMalloc(&ws, attention_bwd_workspace_bytes(p)));
        bp.workspace = ws;
        bp.deterministic = std::getenv("FLYOPS_TIME_DETERMINISTIC") != nullptr;
        const double flop = 4.0 * B * H * L * L * D / (causal ? 2 : 1);
        auto median_ms = [&](auto&& call) {
          std::vector<float> ms;
          for (int r = 0; r < 23; ++r) {
            CHECK_CUDA(cudaMemsetAsync(flush, r, flush_bytes));
            CHECK_CUDA(cudaEventRecord(e0));
            if (call() != Status::kSuccess) std::printf("launch failed: %s\n", attention_last_error());
            CHECK_CUDA(cudaEventRecord(e1));
            CHECK_CUDA(cudaEventSynchronize(e1));
            float t = 0;
            CHECK_CUDA(cudaEventElapsedTime(&t, e0, e1));
            if (r >= 3) ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          return ms[ms.size() / 2];
        };
        const double fwd_ms = median_ms([&] { return attention_run(p); });
        std::printf("time D=%lld H=%lld B=%lld L=%lld %s  %.4f ms  %.1f TFLOP/s", (long long)D, (long long)H,
                    (long long)B, (long long)L, causal ? "causal" : "full", fwd_ms, flop / (fwd_ms * 1e-3) / 1e12);
        if (ws != nullptr) {
          const double bwd_ms = median_ms([&] { return attention_bwd_run(bp); });
          std::printf("  bwd %.4f ms  %.1f TFLOP/s", bwd_ms, 2.5 * flop / (bwd_ms * 1e-3) / 1e12);
          cudaFree(ws);
        }
        std::printf("\n");
        cudaFree(lse);
        cudaFree(buf);
      }
  cudaFree(flush);
}

}  // namespace

int main(int argc, char** argv) {
  bool sanitize = false, timing = false, race = false;
  uint64_t seed = std::random_device{}();
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--sanitize")) sanitize = true;
    if (!std::strcmp(argv[i], "--time")) timing = true;
    if (!std::strcmp(argv[i], "--race")) race = true;
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
  }
  g_rng.seed(seed);
  std::printf("attention selftest, seed %llu\n", (unsigned long long)seed);
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      major != 9) {
    std::printf("attention selftest: needs an sm_90 GPU\n");
    return 1;
  }
  if (timing && std::getenv("FLYOPS_TIME_ONLY") != nullptr) {
    time_shapes();
    return 0;
  }
  const int64_t lengths[][2] = {{1, 1}, {1, 300}, {113, 203}, {128, 128}, {257, 130}, {130, 257}};
  if (race) {
    for (int64_t D : {64, 128, 256}) {
      run({1, 2, 1, 113, 203, D, false, 2, true});
      run({1, 2, 2, 257, 130, D, true, 0});
      run({1, 2, 2, 200, 300, D, false, 1, false, true, true, true});  // deterministic turns
      // Over twice 132 tiles: the persistent CTAs wait for their first Q buffer to be free.
      if (D != 256) run({1, 265, 5, 1, 130, D, false, 0, false, true, false});
    }
    run({1, 140, 4, 3, 4170, 128, false, 0, false, true, false});  // the walk on 160-key blocks, a 16-wide first
    std::printf("attention selftest: %d of %d cases passed\n", g_cases - g_fail, g_cases);
    return g_fail == 0 ? 0 : 1;
  }
  for (int64_t D : {64, 128, 256}) {
    for (const auto& L : lengths)
      for (int causal : {0, 1, 2}) {
        if (sanitize && L[0] * L[1] > 130 * 257 / 2 && causal == 1) continue;
        run({2, 4, 4, L[0], L[1], D, false, causal});
      }
    run({1, 8, 2, 200, 333, D, false, 1, true});           // grouped heads, [B, L, H, D] views
    run({2, 4, 1, 129, 129, D, true, 2});                  // multi-query, fp16
    run({1, 2, 2, 65, 1000, D, true, 0, false, false});    // fp16, no log-sum-exp
    run({1, 4, 2, 700, 520, D, false, 2, false, true, true, true});  // deterministic backward: causal, GQA, Lq > Lk
    run({2, 2, 2, 300, 300, D, false, 0, true, true, true, true});
  }
  // Over 132 tiles (one CTA per SM on the H200), so that the persistent CTAs (non-causal,
  // D = 64 and D = 128's 128-key blocks) walk several and alternate their Q buffers: grouped
  // heads, both layouts, fp16, query blocks of 1-5 rows; and (not under the sanitizer) the
  // 176-key blocks (bf16 from 4096 keys, a CTA per tile) on as many tiles.
  if (!sanitize) {
    run({1, 133, 7, 1, 4097, 128, false, 0, false, true, false});
    run({1, 140, 4, 3, 4500, 128, false, 0, true, true, false});
  }
  run({1, 150, 10, 5, 1000, 128, true, 0, true});
  run({3, 50, 50, 2, 300, 128, false, 0});
  run({1, 150, 10, 5, 1000, 64, false, 0, true});
  run({1, 34, 2, 600, 700, 64, false, 0, false, true, false});  // 192-row query blocks
  // Scores that grow along the walk, so rows' maxima move after the first block: the lazy
  // rescale's configs (D = 256; D = 64 causal from 4096 keys, three warpgroups) and one
  // that rescales every block (D = 128).
  for (const Case& r : {Case{1, 2, 2, 300, 1000, 256, false, 0}, Case{1, 2, 2, 300, 1000, 256, false, 1},
                        Case{1, 2, 1, 200, 4096, 64, false, 2}, Case{1, 2, 2, 300, 1000, 128, false, 0}}) {
    Case c = r;
    c.ramp = true;
    if (!sanitize || c.Lk < 4096) run(c);
  }
  // D = 128 non-causal bf16 from 4096 keys (160-key blocks on the persistent walk below 8192,
  // 176-key ones from there): the first block visited (the last along the keys) runs only as
  // wide as its keys (Config::kFirstWidth). 160: 69 keys in an 80-wide block, 10 in 16, 94 in
  // 96, 134 in the whole block, 64 in 64, 80 with scores growing along the walk; 176: 101 in
  // 128, 28 in 32.
  run({1, 2, 2, 64, 4229, 128, false, 0, false, true, false});
  if (!sanitize) {
    run({1, 2, 2, 200, 4229, 128, false, 0});
    run({1, 2, 2, 70, 4170, 128, false, 0, false, true, false});
    run({1, 3, 3, 130, 4254, 128, false, 0, true, true, false});
    run({1, 2, 1, 150, 4294, 128, false, 0, false, true, false});
    run({1, 2, 2, 64, 4224, 128, false, 0, false, true, false});
    Case ramp{1, 2, 2, 100, 4240, 128, false, 0};
    ramp.ramp = true;
    run(ramp);
    run({1, 2, 2, 64, 8197, 128, false, 0, false, true, false});
    run({1, 2, 1, 100, 8300, 128, false, 0, true, true, false});
  }
  if (!sanitize) {
    // Non-causal from 4096 keys, a partial last block, grouped heads, the transposed layout:
    // bf16 takes the wide key blocks (192 at D = 64, 176 at D = 128), fp16 the 128-key ones
    // (launch.cu keeps fp16 off the wide blocks until these cases have run on the H200).
    run({1, 2, 2, 200, 4200, 64, true, 0, false, true, false});
    run({1, 4, 2, 130, 4500, 128, true, 0, true, true, false});
    run({1, 2, 2, 300, 4099, 128, false, 0, false, true, false});
    run({1, 2, 1, 257, 4096, 64, false, 0, true, false, false});
    run({1, 2, 2, 1024, 1024, 128, false, 1});
    run({1, 2, 1, 1000, 2048, 128, false, 2, true});
    run({1, 1, 1, 2048, 777, 64, true, 0});
    run({1, 4, 1, 1000, 1030, 256, true, 2});  // D = 256: sixteen 64-key blocks, multi-query, fp16
    run({2, 2, 2, 1024, 1024, 256, false, 0, true});
  }
  std::printf("attention selftest: %d of %d cases passed\n", g_cases - g_fail, g_cases);
  if (timing) time_shapes();
  return g_fail == 0 ? 0 : 1;
}
