// aten::_fused_rms_norm and aten::_fused_rms_norm_backward on the CUDA key: flyops kernels
// where the router takes the call, else the stock CUDA kernels (at::cuda::*, which bypass
// the dispatcher). Anything invalid goes to stock untouched, so users see stock's errors.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/_fused_rms_norm_backward_cuda_dispatch.h>
#include <ATen/ops/_fused_rms_norm_cuda_dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cfloat>
#include <sstream>

#include "controls.h"
#include "flyops/rms_norm.h"
#include "rms_norm_binding.h"
#include "route_log.h"
#include "tensor_util.h"

namespace flyops::binding {
namespace {

// Fresh outputs come from the caching allocator, which aligns every block to 512 bytes; the
// router only needs to know that, so decisions use this stand-in before allocating.
void* const kFreshOutput = reinterpret_cast<void*>(uintptr_t{512});

// Shape checks shared by forward and backward. nullptr when the call may be ours.
const char* check_shapes(const at::Tensor& input, at::IntArrayRef ns,
                         const std::optional<at::Tensor>& weight) {
  const int64_t k = static_cast<int64_t>(ns.size());
  if (k == 0 || k > input.dim()) return "normalized_shape does not match the input";
  for (int64_t i = 0; i < k; ++i)
    if (input.size(input.dim() - k + i) != ns[i]) return "normalized_shape does not match the input";
  if (weight.has_value() && weight->defined()) {
    if (weight->sizes() != ns) return "weight shape differs from normalized_shape";
    if (weight->scalar_type() != input.scalar_type()) return "weight dtype differs from input";
    if (weight->device() != input.device()) return "tensors on different devices";
    if (!weight->is_contiguous()) return "weight not contiguous";
  }
  return nullptr;
}

int64_t numel_of(at::IntArrayRef ns) {
  int64_t n = 1;
  for (int64_t s : ns) n *= s;
  return n;
}

// eps=None means the epsilon of the computation type (fp32 for every dtype we run).
float eps_value(std::optional<double> eps) {
  return eps.has_value() ? static_cast<float>(*eps) : FLT_EPSILON;
}

std::vector<int64_t> stat_shape(const at::Tensor& input, int64_t k) {
  std::vector<int64_t> s(input.sizes().begin(), input.sizes().end());
  for (int64_t i = input.dim() - k; i < input.dim(); ++i) s[i] = 1;
  return s;
}

std::string describe_eps(std::optional<double> eps) {
  if (!eps.has_value()) return "None";
  std::ostringstream o;
  o << *eps;
  return o.str();
}

std::string plan_name(const RmsNormPlan& plan, DType t, bool bwd) {
  char buf[128];
  rms_norm_plan_name(plan, t, bwd, buf, sizeof(buf));
  return buf;
}

}  // namespace

FwdDecision decide_fwd(const at::Tensor& input, at::IntArrayRef ns,
                       const std::optional<at::Tensor>& weight, std::optional<double> eps,
                       const DeviceInfo& dev) {
  FwdDecision d;
  if (const char* why = check_shapes(input, ns, weight)) {
    d.plan.reason = why;
    return d;
  }
  const int64_t k = static_cast<int64_t>(ns.size());
  const std::optional<int64_t> stride = row_stride(input, k);
  if (!stride) {
    d.plan.reason = "rows not contiguous (unsupported layout)";
    return d;
  }
  RmsNormFwdParams& p = d.params;
  p.N = numel_of(ns);
  p.M = p.N > 0 ? input.numel() / p.N : 0;
  p.dtype = to_dtype(input.scalar_type());
  p.x = input.data_ptr();
  p.x_row_stride = *stride;
  p.weight = weight.has_value() && weight->defined() ? weight->data_ptr() : nullptr;
  p.y = kFreshOutput;
  p.y_row_stride = p.N;
  p.rstd = static_cast<float*>(kFreshOutput);
  p.eps = eps_value(eps);
  p.device = input.get_device();
  d.plan = rms_norm_fwd_choose(p, dev);
  return d;
}

BwdDecision decide_bwd(const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef ns,
                       const at::Tensor& rstd, const std::optional<at::Tensor>& weight,
                       std::array<bool, 2> mask, const DeviceInfo& dev) {
  BwdDecision d;
  auto stock = [&](const char* why) {
    d.plan.reason = why;
    return d;
  };
  if (const char* why = check_shapes(input, ns, weight)) return stock(why);
  if (grad_out.sizes() != input.sizes()) return stock("grad_out shape differs from input");
  if (grad_out.scalar_type() != input.scalar_type()) return stock("grad_out dtype differs from input");
  if (grad_out.device() != input.device() || rstd.device() != input.device())
    return stock("tensors on different devices");
  const int64_t k = static_cast<int64_t>(ns.size());
  const int64_t N = numel_of(ns);
  const int64_t M = N > 0 ? input.numel() / N : 0;
  if (rstd.scalar_type() != at::kFloat || rstd.numel() != M || !rstd.is_contiguous())
    return stock("rstd not a contiguous fp32 tensor of one value per row");
  const std::optional<int64_t> xs = row_stride(input, k);
  const std::optional<int64_t> gs = row_stride(grad_out, k);
  if (!xs || !gs) return stock("rows not contiguous (unsupported layout)");
  const bool has_w = weight.has_value() && weight->defined();
  RmsNormBwdParams& p = d.params;
  p.M = M;
  p.N = N;
  p.dtype = to_dtype(input.scalar_type());
  p.dy = grad_out.data_ptr();
  p.dy_row_stride = *gs;
  p.x = input.data_ptr();
  p.x_row_stride = *xs;
  p.rstd = rstd.data_ptr<float>();
  p.weight = has_w ? weight->data_ptr() : nullptr;
  p.dx = mask[0] ? kFreshOutput : nullptr;
  p.dx_row_stride = N;
  p.dweight = mask[1] && has_w ? kFreshOutput : nullptr;
  p.device = input.get_device();
  d.plan = rms_norm_bwd_choose(p, dev);
  return d;
}

std::string describe_fwd(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         std::optional<double> eps) {
  return describe(input) + " weight=" + describe(weight) + " eps=" + describe_eps(eps);
}

std::string describe_bwd(const at::Tensor& grad_out, const at::Tensor& input,
                         const std::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  return "grad=" + describe(grad_out) + " input=" + describe(input) + " weight=" +
         describe(weight) + " mask=[" + (mask[0] ? "1" : "0") + "," + (mask[1] ? "1" : "0") + "]";
}

std::string fwd_kernel_name(const FwdDecision& d) { return plan_name(d.plan, d.params.dtype, false); }
std::string bwd_kernel_name(const BwdDecision& d) { return plan_name(d.plan, d.params.dtype, true); }

namespace {

std::tuple<at::Tensor, at::Tensor> fused_rms_norm(const at::Tensor& input, at::IntArrayRef ns,
                                                  const std::optional<at::Tensor>& weight,
                                                  std::optional<double> eps) {
  if (passed_over(Op::kRmsNorm, input.is_cuda(), [&] { return describe_fwd(input, weight, eps); }))
    return at::cuda::_fused_rms_norm(input, ns, weight, eps);
  FwdDecision d = decide_fwd(input, ns, weight, eps, routing_device(input));
  bool ours = d.plan.flyops();
  at::Tensor y, rstd;
  if (ours) {
    RECORD_FUNCTION("flyops::rms_norm", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(input.device());
    y = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
    rstd = at::empty(stat_shape(input, static_cast<int64_t>(ns.size())), input.options().dtype(at::kFloat));
    d.params.y = y.data_ptr();
    d.params.rstd = rstd.data_ptr<float>();
    d.params.stream = at::cuda::getCurrentCUDAStream(input.get_device()).stream();
    if (!ran_or_refused(rms_norm_fwd(d.params, d.plan), "rms_norm forward")) {
      ours = false;
      d.plan.reason = kRefusedAtRun;
    }
  }
  report(Op::kRmsNorm, ours, d.plan.reason, [&] { return describe_fwd(input, weight, eps); },
         [&] { return fwd_kernel_name(d); });
  if (!ours) return at::cuda::_fused_rms_norm(input, ns, weight, eps);
  return {std::move(y), std::move(rstd)};
}

std::tuple<at::Tensor, at::Tensor> fused_rms_norm_backward(
    const at::Tensor& grad_out, const at::Tensor& input, at::IntArrayRef ns, const at::Tensor& rstd,
    const std::optional<at::Tensor>& weight, std::array<bool, 2> mask) {
  if (passed_over(Op::kRmsNormBackward, input.is_cuda(), [&] { return describe_bwd(grad_out, input, weight, mask); }))
    return at::cuda::_fused_rms_norm_backward(grad_out, input, ns, rstd, weight, mask);
  const DeviceInfo& dev = routing_device(input);
  BwdDecision d = decide_bwd(grad_out, input, ns, rstd, weight, mask, dev);
  bool ours = d.plan.flyops();
  at::Tensor dx, dw;
  if (ours) {
    RECORD_FUNCTION("flyops::rms_norm_backward", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(input.device());
    if (d.params.dx != nullptr) {
      dx = at::empty(input.sizes(), input.options().memory_format(at::MemoryFormat::Contiguous));
      d.params.dx = dx.data_ptr();
    }
    if (d.params.dweight != nullptr) {
      dw = at::empty(weight->sizes(), weight->options());
      d.params.dweight = dw.data_ptr();
    }
    d.params.workspace_bytes = rms_norm_bwd_workspace_bytes(d.params, d.plan, dev);
    const at::Tensor ws = workspace_tensor(input, d.params.workspace_bytes, &d.params.workspace);
    d.params.stream = at::cuda::getCurrentCUDAStream(input.get_device()).stream();
    if (!ran_or_refused(rms_norm_bwd(d.params, d.plan), "rms_norm backward")) {
      ours = false;
      d.plan.reason = kRefusedAtRun;
    }
  }
  report(Op::kRmsNormBackward, ours, d.plan.reason,
         [&] { return describe_bwd(grad_out, input, weight, mask); }, [&] { return bwd_kernel_name(d); });
  if (!ours) return at::cuda::_fused_rms_norm_backward(grad_out, input, ns, rstd, weight, mask);
  return {std::move(dx), std::move(dw)};
}

}  // namespace

void register_rms_norm(torch::Library& aten_cuda) {
  aten_cuda.impl("_fused_rms_norm", &fused_rms_norm);
  aten_cuda.impl("_fused_rms_norm_backward", &fused_rms_norm_backward);
}

}  // namespace flyops::binding
