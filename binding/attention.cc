// aten::_scaled_dot_product_cudnn_attention and aten::_scaled_dot_product_flash_attention
// on the CUDA key (the forward ops F.scaled_dot_product_attention reaches through PyTorch's
// cuDNN and flash backends): flyops' kernel where the router takes the call, else the stock
// kernels (at::cuda::*); likewise their backward ops. Every output has exactly stock's
// sizes, strides and dtype (read off torch 2.11 on the H200; compiled graphs assert them):
//   cuDNN: out with q's stride order; logsumexp (B, H, Lq, 1) fp32, undefined unless
//          compute_log_sumexp; cum_seq_q/k undefined; max_q, max_k = Lq, Lk; philox seed and
//          offset 0-d int64 on the device; debug mask undefined.
//   flash: out with q's stride order too; logsumexp (B, H, Lq) fp32; cum_seq undefined;
//          rng_state (2,) and unused () uint64 on the device; debug mask an empty tensor of
//          q's dtype.
//   backward (both ops): grad_q/k/v as empty_like(q/k/v) (the input's strides: only dense
//          k and v are taken, q is dense already).
// Forward and backward are routed apart (either may be ours with the other stock); in
// deterministic mode the backward's dQ is summed in a fixed order.
// Causal masks are each op's own: top-left for cuDNN (SDPA's convention), bottom-right for
// flash (FlashAttention's). Dropout, an attention bias, a debug mask and unusual layouts go
// to stock, and so does anything invalid, untouched, so users see stock's errors.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/Context.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention_backward_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_cudnn_attention_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_backward_cuda_dispatch.h>
#include <ATen/ops/_scaled_dot_product_flash_attention_cuda_dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <sstream>

#include "attention_binding.h"
#include "controls.h"
#include "route_log.h"
#include "tensor_util.h"

namespace flyops::binding {
namespace {

using Outputs = std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor, c10::SymInt, c10::SymInt, at::Tensor,
                           at::Tensor, at::Tensor>;

// Fresh outputs come from the caching allocator (512-byte aligned); the router only needs a
// non-null stand-in before allocating.
void* const kFreshOutput = reinterpret_cast<void*>(uintptr_t{512});

AttnTensor view_of(const at::Tensor& t) {
  return AttnTensor{t.data_ptr(), t.stride(0), t.stride(1), t.stride(2)};
}

// The strides (elements) a dense [B, H, L, D] tensor gets when its dims are laid out in the
// order of q's strides, largest first (ties keep the dim order): both ops' output (measured:
// a contiguous q gives a contiguous output, a (B, L, H, D) view its transpose's strides).
std::array<int64_t, 4> strides_like(const at::Tensor& q, int64_t B, int64_t H, int64_t L, int64_t D) {
  const int64_t sizes[4] = {B, H, L, D};
  std::array<int, 4> order = {0, 1, 2, 3};
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return q.stride(a) > q.stride(b); });
  std::array<int64_t, 4> st{};
  int64_t step = 1;
  for (int i = 3; i >= 0; --i) {
    st[order[i]] = step;
    step *= sizes[order[i]];
  }
  return st;
}

// A layout this override was checked against stock on: q dense (no gaps, no overlap), so
// that the output's stride order is q's. Packed or sliced q (a qkv projection viewed
// in place) keeps stock's own rule, which has not been measured here.
bool dense(const at::Tensor& t) { return t.is_non_overlapping_and_dense(); }

}  // namespace

const char* attention_params(const AttnCall& call, AttnParams& p) {
  auto stock = [](const char* why) { return why; };
  const at::Tensor& q = *call.q;
  const at::Tensor& k = *call.k;
  const at::Tensor& v = *call.v;
  if (q.is_nested() || k.is_nested() || v.is_nested()) return stock("nested tensors");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4) return stock("inputs not 4-D [B, H, L, D]");
  if (call.dropout_p != 0.0) return stock("dropout");
  if (call.has_bias) return stock("an attention bias");
  if (call.debug_mask) return stock("a debug attention mask");
  if (q.scalar_type() != k.scalar_type() || q.scalar_type() != v.scalar_type()) return stock("dtypes differ");
  if (q.device() != k.device() || q.device() != v.device()) return stock("inputs on different devices");
  const DType dtype = to_dtype(q.scalar_type());
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return stock("dtype not bfloat16 or float16");
  if (!k.sizes().equals(v.sizes())) return stock("key and value shapes differ");
  const int64_t B = q.size(0), H = q.size(1), Lq = q.size(2), D = q.size(3), Hkv = k.size(1), Lk = k.size(2);
  if (k.size(0) != B || k.size(3) != D) return stock("shapes do not match");
  if (B == 0 || H == 0 || Lq == 0 || Lk == 0 || D == 0) return stock("empty attention");
  if (Hkv == 0 || H % Hkv != 0) return stock("key/value heads do not divide the query heads");
  if (q.stride(3) != 1 || k.stride(3) != 1 || v.stride(3) != 1) return stock("head dim not contiguous");
  if (!dense(q)) return stock("q not dense (a packed or sliced view: stock's output layout)");
  const double scale = call.scale.has_value() ? *call.scale : 1.0 / std::sqrt(static_cast<double>(D));
  p.B = B, p.H = H, p.Hkv = Hkv, p.Lq = Lq, p.Lk = Lk, p.D = D;
  p.dtype = dtype;
  p.q = view_of(q), p.k = view_of(k), p.v = view_of(v);
  const auto st = strides_like(q, B, H, Lq, D);
  p.o = AttnTensor{kFreshOutput, st[0], st[1], st[2]};
  p.lse = call.flash || call.compute_lse ? static_cast<float*>(kFreshOutput) : nullptr;
  p.lse_stride_b = H * Lq, p.lse_stride_h = Lq;
  p.scale = static_cast<float>(scale);
  p.causal = call.causal;
  p.causal_offset = call.causal && call.flash ? Lk - Lq : 0;
  p.stock = call.flash ? AttnStock::kFlash2 : AttnStock::kCudnn;
  p.device = q.get_device();
  return nullptr;
}

AttnDecision decide_attention(const AttnCall& call, const DeviceInfo& dev) {
  AttnDecision dn;
  if (const char* why = attention_params(call, dn.params))
    dn.plan = AttnPlan{false, why};
  else
    dn.plan = attention_choose(dn.params, dev);
  return dn;
}

AttnBwdDecision decide_attention_backward(const AttnBwdCall& call, const DeviceInfo& dev) {
  AttnBwdDecision dn;
  auto stock = [&](const char* why) {
    dn.plan = AttnPlan{false, why};
    return dn;
  };
  if (call.cum_seq) return stock("packed sequences (cum_seq_q / cum_seq_k)");
  // Deterministic mode takes the core's ordered dQ (the adds of each chunk in turns, the
  // same bits run to run); _attention_backward_force(3), a test hook, takes it always.
  const bool ordered = at::globalContext().deterministicAlgorithms() || attention_bwd_forced() == 3;
  AttnParams& p = dn.params.fwd;
  if (const char* why = attention_params(call.fwd, p)) return stock(why);
  const at::Tensor& q = *call.fwd.q;
  const at::Tensor &go = *call.grad_out, &out = *call.out, &lse = *call.lse;
  if (!go.defined() || !out.defined() || !lse.defined()) return stock("an undefined input");
  if (!go.sizes().equals(q.sizes()) || !out.sizes().equals(q.sizes())) return stock("grad_out or out not q's shape");
  if (go.scalar_type() != q.scalar_type() || out.scalar_type() != q.scalar_type()) return stock("dtypes differ");
  if (go.device() != q.device() || out.device() != q.device() || lse.device() != q.device())
    return stock("inputs on different devices");
  if (go.stride(3) != 1 || out.stride(3) != 1) return stock("head dim not contiguous");
  // The log-sum-exp: (B, H, Lq) for flash, (B, H, Lq, 1) for cuDNN, fp32, rows contiguous.
  const int64_t lse_dims = call.fwd.flash ? 3 : 4;
  if (lse.scalar_type() != at::kFloat || lse.dim() != lse_dims || lse.size(0) != p.B || lse.size(1) != p.H ||
      lse.size(2) != p.Lq || (lse_dims == 4 && lse.size(3) != 1))
    return stock("log-sum-exp not stock's shape");
  if (p.Lq > 1 && lse.stride(2) != 1) return stock("log-sum-exp rows not contiguous");
  // Fresh gradients as stock allocates them (empty_like: the input's strides where it is dense).
  if (!dense(*call.fwd.k) || !dense(*call.fwd.v)) return stock("k or v not dense (stock's gradient layout)");
  p.o = view_of(out);
  p.lse = const_cast<float*>(lse.data_ptr<float>());
  p.lse_stride_b = lse.stride(0), p.lse_stride_h = lse.stride(1);
  AttnBwdParams& bp = dn.params;
  bp.deterministic = ordered;
  bp.dout = view_of(go);
  bp.dq = AttnTensor{kFreshOutput, q.stride(0), q.stride(1), q.stride(2)};
  bp.dk = AttnTensor{kFreshOutput, call.fwd.k->stride(0), call.fwd.k->stride(1), call.fwd.k->stride(2)};
  bp.dv = AttnTensor{kFreshOutput, call.fwd.v->stride(0), call.fwd.v->stride(1), call.fwd.v->stride(2)};
  dn.plan = attention_bwd_choose(bp, dev);
  return dn;
}

std::string describe_attention(const AttnCall& c) {
  std::ostringstream o;
  o << (c.flash ? "flash " : "cudnn ") << describe(*c.q) << " k=" << describe(*c.k) << " v=" << describe(*c.v)
    << (c.causal ? " causal" : "") << (c.dropout_p != 0.0 ? " dropout" : "") << (c.has_bias ? " bias" : "")
    << (c.compute_lse || c.flash ? " lse" : "");
  if (c.scale.has_value()) o << " scale=" << *c.scale;
  return o.str();
}

std::string describe_attention_backward(const AttnBwdCall& c) {
  const AttnCall& f = c.fwd;
  std::ostringstream o;
  o << (f.flash ? "flash backward " : "cudnn backward ") << describe(*f.q) << " k=" << describe(*f.k)
    << " v=" << describe(*f.v) << " grad_out=" << describe(*c.grad_out) << (f.causal ? " causal" : "")
    << (f.dropout_p != 0.0 ? " dropout" : "") << (f.has_bias ? " bias" : "");
  if (f.scale.has_value()) o << " scale=" << *f.scale;
  return o.str();
}

namespace {

// Routes one call; on flyops' route allocates stock's outputs, runs the kernel and returns
// them, else returns nothing (the caller runs stock).
std::optional<Outputs> try_flyops(const AttnCall& call) {
  const at::Tensor& q = *call.q;
  if (passed_over(Op::kAttention, q.is_cuda(), [&] { return describe_attention(call); })) return std::nullopt;
  AttnDecision dn = decide_attention(call, routing_device(q));
  bool ours = dn.plan.flyops;
  const char* reason = dn.plan.reason;
  std::optional<Outputs> result;
  if (ours) {
    RECORD_FUNCTION("flyops::attention", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(q.device());
    AttnParams& p = dn.params;
    at::Tensor out = at::empty_strided({p.B, p.H, p.Lq, p.D}, {p.o.stride_b, p.o.stride_h, p.o.stride_l, 1}, q.options());
    at::Tensor lse;
    if (call.flash)
      lse = at::empty({p.B, p.H, p.Lq}, q.options().dtype(at::kFloat));
    else if (call.compute_lse)
      lse = at::empty({p.B, p.H, p.Lq, 1}, q.options().dtype(at::kFloat));
    p.o.ptr = out.data_ptr();
    p.lse = lse.defined() ? lse.data_ptr<float>() : nullptr;
    p.stream = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
    const Status s = attention_run(p);
    if (s == Status::kUnsupported) {  // a tensor map the driver refused: stock, and say why
      ours = false;
      reason = attention_last_error();
    } else {
      check_ran(s, "attention");
      const c10::SymInt max_q(p.Lq), max_k(p.Lk);
      if (call.flash) {
        const auto u64 = q.options().dtype(at::kUInt64);
        result = Outputs{out, lse, at::Tensor(), at::Tensor(), max_q, max_k, at::empty({2}, u64),
                         at::empty({}, u64), at::empty({0}, q.options())};
      } else {
        const auto i64 = q.options().dtype(at::kLong);
        result = Outputs{out, lse, at::Tensor(), at::Tensor(), max_q, max_k, at::empty({}, i64),
                         at::empty({}, i64), at::Tensor()};
      }
    }
  }
  report(Op::kAttention, ours, reason, [&] { return describe_attention(call); },
         [&] { return std::string(attention_kernel_name(dn.params)); });
  return result;
}

Outputs cudnn_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value,
                        const std::optional<at::Tensor>& attn_bias, bool compute_log_sumexp, double dropout_p,
                        bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const AttnCall call{false,          &query,      &key,      &value,           attn_bias.has_value(),
                      compute_log_sumexp, dropout_p, is_causal, return_debug_mask, scale};
  if (auto r = try_flyops(call)) return std::move(*r);
  return at::cuda::_scaled_dot_product_cudnn_attention(query, key, value, attn_bias, compute_log_sumexp, dropout_p,
                                                       is_causal, return_debug_mask, scale);
}

Outputs flash_attention(const at::Tensor& query, const at::Tensor& key, const at::Tensor& value, double dropout_p,
                        bool is_causal, bool return_debug_mask, std::optional<double> scale) {
  const AttnCall call{true, &query, &key, &value, false, true, dropout_p, is_causal, return_debug_mask, scale};
  if (auto r = try_flyops(call)) return std::move(*r);
  return at::cuda::_scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, return_debug_mask,
                                                       scale);
}

using Grads = std::tuple<at::Tensor, at::Tensor, at::Tensor>;

std::optional<Grads> try_flyops_backward(const AttnBwdCall& call) {
  const at::Tensor& q = *call.fwd.q;
  if (passed_over(Op::kAttentionBackward, q.is_cuda(), [&] { return describe_attention_backward(call); }))
    return std::nullopt;
  AttnBwdDecision dn = decide_attention_backward(call, routing_device(q));
  bool ours = dn.plan.flyops;
  const char* reason = dn.plan.reason;
  std::optional<Grads> result;
  if (ours) {
    RECORD_FUNCTION("flyops::attention_backward", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(q.device());
    AttnBwdParams& p = dn.params;
    at::Tensor dq = at::empty_like(q), dk = at::empty_like(*call.fwd.k), dv = at::empty_like(*call.fwd.v);
    const at::Tensor ws = workspace_tensor(q, attention_bwd_workspace_bytes(p.fwd), &p.workspace);
    p.dq.ptr = dq.data_ptr(), p.dk.ptr = dk.data_ptr(), p.dv.ptr = dv.data_ptr();
    p.fwd.stream = at::cuda::getCurrentCUDAStream(q.get_device()).stream();
    const Status s = attention_bwd_run(p);
    if (s == Status::kUnsupported) {
      ours = false;
      reason = attention_last_error();
    } else {
      check_ran(s, "attention backward");
      result = Grads{dq, dk, dv};
    }
  }
  report(Op::kAttentionBackward, ours, reason, [&] { return describe_attention_backward(call); },
         [&] { return std::string(attention_bwd_kernel_name(dn.params)); });
  return result;
}

Grads cudnn_attention_backward(const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, const at::Tensor& out, const at::Tensor& logsumexp,
                               const at::Tensor& philox_seed, const at::Tensor& philox_offset,
                               const at::Tensor& attn_bias, const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k,
                               c10::SymInt max_q, c10::SymInt max_k, double dropout_p, bool is_causal,
                               std::optional<double> scale) {
  const AttnBwdCall call{{false, &query, &key, &value, attn_bias.defined(), true, dropout_p, is_causal, false, scale},
                         &grad_out, &out, &logsumexp, cum_seq_q.defined() || cum_seq_k.defined()};
  if (auto r = try_flyops_backward(call)) return std::move(*r);
  return at::cuda::_scaled_dot_product_cudnn_attention_backward_symint(
      grad_out, query, key, value, out, logsumexp, philox_seed, philox_offset, attn_bias, cum_seq_q, cum_seq_k,
      std::move(max_q), std::move(max_k), dropout_p, is_causal, scale);
}

Grads flash_attention_backward(const at::Tensor& grad_out, const at::Tensor& query, const at::Tensor& key,
                               const at::Tensor& value, const at::Tensor& out, const at::Tensor& logsumexp,
                               const at::Tensor& cum_seq_q, const at::Tensor& cum_seq_k, c10::SymInt max_q,
                               c10::SymInt max_k, double dropout_p, bool is_causal, const at::Tensor& philox_seed,
                               const at::Tensor& philox_offset, std::optional<double> scale) {
  const AttnBwdCall call{{true, &query, &key, &value, false, true, dropout_p, is_causal, false, scale},
                         &grad_out, &out, &logsumexp, cum_seq_q.defined() || cum_seq_k.defined()};
  if (auto r = try_flyops_backward(call)) return std::move(*r);
  return at::cuda::_scaled_dot_product_flash_attention_backward_symint(
      grad_out, query, key, value, out, logsumexp, cum_seq_q, cum_seq_k, std::move(max_q), std::move(max_k), dropout_p,
      is_causal, philox_seed, philox_offset, scale);
}

}  // namespace

void register_attention(torch::Library& aten_cuda) {
  aten_cuda.impl("_scaled_dot_product_cudnn_attention", &cudnn_attention);
  aten_cuda.impl("_scaled_dot_product_flash_attention", &flash_attention);
  aten_cuda.impl("_scaled_dot_product_cudnn_attention_backward", &cudnn_attention_backward);
  aten_cuda.impl("_scaled_dot_product_flash_attention_backward", &flash_attention_backward);
}

}  // namespace flyops::binding
