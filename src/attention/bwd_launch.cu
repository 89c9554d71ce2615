// Host side of the attention backward: the workspace, the tensor maps, and the one launch
// function that turns head dim and dtype into template parameters.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "bwd_kernel.cuh"
#include "common/smem_opt_in.h"
#include "flyops/attention.h"
#include "maps.h"

namespace flyops {
namespace {

using attention::BwdConfig;

Support fail(const char* r) { return Support{false, r}; }

// f(Config) for the head dim's config: the one place that pairs a call with its BwdConfig.
template <typename F>
auto with_config(const AttnParams& f, F&& fn) {
  if (f.D == 64) return fn(BwdConfig<64>{});
  if (f.D == 128) return fn(BwdConfig<128>{});
  return fn(BwdConfig<256>{});
}

// Query rows per step, and key rows per CTA, of the head dim's config.
int64_t step_rows(const AttnParams& f) {
  return with_config(f, [](auto c) { return int64_t{decltype(c)::kBM}; });
}
uint32_t key_rows(const AttnParams& f) {
  return with_config(f, [](auto c) { return uint32_t{decltype(c)::kBN}; });
}

// Query rows padded to the step (the row vectors are loaded a step at a time).
int64_t padded_rows(const AttnParams& f) {
  const int64_t bm = step_rows(f);
  return f.B * f.H * ((f.Lq + bm - 1) / bm * bm);
}

// The six maps of the main kernel: q and dO by query blocks, k and v by key blocks, dK and dV
// by a warp's 16 rows.
void map_shapes(const AttnBwdParams& p, tile::TmaShape (&s)[6]) {
  using attention::shape_of;
  const AttnParams& f = p.fwd;
  const uint32_t kv_rows = key_rows(f);
  const uint32_t q_rows = static_cast<uint32_t>(step_rows(f));
  s[0] = shape_of(f.q, f.B, f.H, f.Lq, f.D, q_rows);
  s[1] = shape_of(f.k, f.B, f.Hkv, f.Lk, f.D, kv_rows);
  s[2] = shape_of(f.v, f.B, f.Hkv, f.Lk, f.D, kv_rows);
  s[3] = shape_of(p.dout, f.B, f.H, f.Lq, f.D, q_rows);
  s[4] = shape_of(p.dk, f.B, f.Hkv, f.Lk, f.D, attention::kStoreRows);
  s[5] = shape_of(p.dv, f.B, f.Hkv, f.Lk, f.D, attention::kStoreRows);
}

// The deterministic mode's counters: one per dQ chunk (64 query rows x 64 columns).
int64_t turn_counters(const AttnParams& f) { return padded_rows(f) / 64 * (f.D / 64); }

struct Workspace {
  float* dq_acc;
  float* lse2;
  float* dsum;
  int* turn;
  int64_t rows;
};

Workspace carve(const AttnBwdParams& p) {
  const int64_t rows = padded_rows(p.fwd);
  float* base = static_cast<float*>(p.workspace);
  float* dsum = base + rows * p.fwd.D + rows;
  return Workspace{base, base + rows * p.fwd.D, dsum, reinterpret_cast<int*>(dsum + rows), rows};
}

template <typename Cfg, typename T>
Status launch(const AttnBwdParams& p, const CUtensorMap (&m)[6]) {
  const AttnParams& f = p.fwd;
  const cudaStream_t stream = static_cast<cudaStream_t>(f.stream);
  constexpr auto kernel = &flyops_attention_bwd<Cfg, T>;
  if (!smem_opt_in<kernel, Cfg::kSmemBytes>(f.device)) return Status::kCudaError;
  const Workspace ws = carve(p);
  const int Lq_pad = static_cast<int>(ws.rows / (f.B * f.H));
  if (cudaMemsetAsync(ws.dq_acc, 0, static_cast<size_t>(ws.rows) * f.D * 4, stream) != cudaSuccess)
    return Status::kCudaError;
  if (p.deterministic && cudaMemsetAsync(ws.turn, 0, static_cast<size_t>(turn_counters(f)) * 4, stream) != cudaSuccess)
    return Status::kCudaError;

  attention::BwdPrepArgs pa;
  pa.o = f.o.ptr, pa.dout = p.dout.ptr;
  pa.o_sb = f.o.stride_b, pa.o_sh = f.o.stride_h, pa.o_sl = f.o.stride_l;
  pa.do_sb = p.dout.stride_b, pa.do_sh = p.dout.stride_h, pa.do_sl = p.dout.stride_l;
  pa.lse = f.lse, pa.lse_sb = f.lse_stride_b, pa.lse_sh = f.lse_stride_h;
  pa.H = static_cast<int>(f.H), pa.Lq = static_cast<int>(f.Lq), pa.Lq_pad = Lq_pad;
  pa.rows = ws.rows, pa.lse2 = ws.lse2, pa.dsum = ws.dsum;
  flyops_attention_bwd_prep<T, Cfg::kD><<<static_cast<unsigned>((ws.rows + 7) / 8), 256, 0, stream>>>(pa);

  attention::BwdArgs a;
  a.Lq = static_cast<int>(f.Lq), a.Lk = static_cast<int>(f.Lk), a.Lq_pad = Lq_pad;
  a.H = static_cast<int>(f.H), a.group = static_cast<int>(f.H / f.Hkv);
  a.scale_log2 = f.scale * 1.4426950408889634f, a.scale = f.scale;
  a.causal = f.causal, a.offset = static_cast<int>(f.causal_offset);
  a.lse2 = ws.lse2, a.dsum = ws.dsum, a.dq_acc = ws.dq_acc;
  a.dq_turn = p.deterministic ? ws.turn : nullptr;
  const dim3 grid(static_cast<unsigned>((f.Lk + Cfg::kBN - 1) / Cfg::kBN), static_cast<unsigned>(f.Hkv),
                  static_cast<unsigned>(f.B));
  kernel<<<grid, attention::kThreads, Cfg::kSmemBytes, stream>>>(m[0], m[1], m[2], m[3], m[4], m[5], a);

  attention::BwdDqArgs da;
  da.dq_acc = ws.dq_acc, da.dq = const_cast<void*>(p.dq.ptr);
  da.sb = p.dq.stride_b, da.sh = p.dq.stride_h, da.sl = p.dq.stride_l;
  da.H = static_cast<int>(f.H), da.Lq = static_cast<int>(f.Lq), da.Lq_pad = Lq_pad, da.D = static_cast<int>(f.D);
  da.scale = f.scale;
  da.quads = f.B * f.H * f.Lq * f.D / 4;
  flyops_attention_bwd_dq<T><<<static_cast<unsigned>((da.quads + 255) / 256), 256, 0, stream>>>(da);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

template <typename T>
Status launch_dim(const AttnBwdParams& p, const CUtensorMap (&m)[6]) {
  return with_config(p.fwd, [&](auto c) { return launch<decltype(c), T>(p, m); });
}

bool aligned(const void* ptr, uintptr_t bytes) { return reinterpret_cast<uintptr_t>(ptr) % bytes == 0; }

}  // namespace

size_t attention_bwd_workspace_bytes(const AttnParams& f) {
  return (static_cast<size_t>(padded_rows(f)) * static_cast<size_t>(f.D + 2) + static_cast<size_t>(turn_counters(f))) *
         4;
}

Support attention_bwd_supports(const AttnBwdParams& p, const DeviceInfo& dev) {
  const AttnParams& f = p.fwd;
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (f.dtype != DType::kBFloat16 && f.dtype != DType::kFloat16) return fail("dtype not bfloat16 or float16");
  if (f.D != 64 && f.D != 128 && f.D != 256) return fail("backward head dim not 64, 128 or 256");
  if (const char* why = attention::shape_problem(f)) return fail(why);
  if (f.B > 65535 || f.Hkv > 65535) return fail("more than 65535 batch entries or heads");  // grid y and z
  if (padded_rows(f) * f.D >= (int64_t{1} << 40)) return fail("a workspace of 2^40 elements or more");
  if (f.lse == nullptr) return fail("no log-sum-exp from the forward");
  for (const AttnTensor* t : {&f.q, &f.k, &f.v, &f.o, &p.dout, &p.dq, &p.dk, &p.dv})
    if (const char* why = attention::strides_ok(*t)) return fail(why);
  // dQ is written four elements (8 bytes) at a time.
  if (!aligned(p.dq.ptr, 8) || p.dq.stride_b % 4 || p.dq.stride_h % 4 || p.dq.stride_l % 4)
    return fail("dq not 8-byte aligned by rows");
  tile::TmaShape shapes[6];
  map_shapes(p, shapes);
  for (const tile::TmaShape& s : shapes)
    if (const char* why = tile::tma_check(s)) return fail(why);
  return Support{true, ""};
}

Status attention_bwd_run(const AttnBwdParams& p) {
  CUtensorMap m[6];
  tile::TmaShape shapes[6];
  map_shapes(p, shapes);
  static const char* const kNames[6] = {"q", "k", "v", "grad_out", "grad_key", "grad_value"};
  if (!attention::encode_maps(m, shapes, kNames, 6, p.fwd.dtype, attention::g_last_error,
                              sizeof(attention::g_last_error)))
    return Status::kUnsupported;
  return p.fwd.dtype == DType::kBFloat16 ? launch_dim<tile::bf16>(p, m) : launch_dim<tile::fp16>(p, m);
}

const char* attention_bwd_kernel_name(const AttnBwdParams& p) {
  thread_local char name[80];
  std::snprintf(name, sizeof(name), "flyops_attention_bwd<%s,d%lld%s%s>",
                p.fwd.dtype == DType::kBFloat16 ? "bf16" : "fp16", static_cast<long long>(p.fwd.D),
                p.fwd.causal ? ",causal" : "", p.deterministic ? ",deterministic" : "");
  return name;
}

}  // namespace flyops
