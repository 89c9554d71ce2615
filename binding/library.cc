// The flyops:: operator namespace: controls callable from Python (torch.ops.flyops.*), so the
// binding needs no Python extension module and loads under any Python version. Also the
// explain ops, which run a routing decision on tensors of any device for a described GPU.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <sstream>

#include "attention_binding.h"
#include "controls.h"
#include "flyops/attention.h"
#include "gemm_binding.h"
#include "flyops/gemm.h"
#include "flyops/rms_norm.h"
#include "registration.h"
#include "rms_norm_binding.h"
#include "route_log.h"
#include "topk_binding.h"

#ifndef FLYOPS_BUILD_TORCH_VERSION
#define FLYOPS_BUILD_TORCH_VERSION "unknown"
#endif
#ifndef FLYOPS_VERSION
#define FLYOPS_VERSION "0.0.0"
#endif

namespace flyops::binding {
namespace {

uint64_t mask_of(const std::string& ops) {
  if (ops.empty()) return ~uint64_t{0};
  uint64_t mask = 0;
  std::stringstream ss(ops);
  std::string name;
  while (std::getline(ss, name, ',')) {
    const int i = op_index(name);
    TORCH_CHECK(i >= 0, "flyops: unknown op '", name, "'");
    mask |= uint64_t{1} << i;
  }
  return mask;
}

Op op_of(const std::string& name) {
  const int i = op_index(name);
  TORCH_CHECK(i >= 0, "flyops: unknown op '", name, "'");
  return static_cast<Op>(i);
}

std::string decision_text(bool ours, const std::string& kernel, const char* reason) {
  return ours ? kernel : std::string("stock (") + reason + ")";
}

std::string route_rms_norm(const at::Tensor& input, at::IntArrayRef ns,
                           const std::optional<at::Tensor>& weight, std::optional<double> eps,
                           int64_t cc_major, int64_t cc_minor, int64_t sms) {
  const DeviceInfo dev = fake_device_info(int(cc_major), int(cc_minor), int(sms));
  const FwdDecision d = decide_fwd(input, ns, weight, eps, dev);
  const std::string text = decision_text(d.plan.flyops(), fwd_kernel_name(d), d.plan.reason);
  if (log_level() > 0) log_line("rms_norm " + describe_fwd(input, weight, eps) + " -> " + text);
  return text;
}

std::string route_rms_norm_backward(const at::Tensor& grad_out, const at::Tensor& input,
                                    at::IntArrayRef ns, const at::Tensor& rstd,
                                    const std::optional<at::Tensor>& weight,
                                    std::array<bool, 2> mask, int64_t cc_major, int64_t cc_minor,
                                    int64_t sms) {
  const DeviceInfo dev = fake_device_info(int(cc_major), int(cc_minor), int(sms));
  const BwdDecision d = decide_bwd(grad_out, input, ns, rstd, weight, mask, dev);
  const std::string text = decision_text(d.plan.flyops(), bwd_kernel_name(d), d.plan.reason);
  if (log_level() > 0)
    log_line("rms_norm_backward " + describe_bwd(grad_out, input, weight, mask) + " -> " + text);
  return text;
}

std::string route_topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                       int64_t cc_major, int64_t cc_minor, int64_t sms) {
  const DeviceInfo dev = fake_device_info(int(cc_major), int(cc_minor), int(sms));
  const TopkDecision d = decide_topk(self, k, dim, largest, sorted, dev);
  const std::string text = decision_text(d.plan.flyops(), topk_kernel_name(d), d.plan.reason);
  if (log_level() > 0) log_line("topk " + describe_topk(self, k, dim, largest, sorted) + " -> " + text);
  return text;
}

// The GEMM decision for a @ b (2-D: mm, 3-D: bmm) into a fresh output, on a described GPU.
// gpu picks the per-shape table's part: "H200", "H100", another name (neither), or "" for
// the part a holds when it is on a GPU (as the call would route there), else the H200.
std::string route_gemm(const at::Tensor& a, const at::Tensor& b, int64_t cc_major, int64_t cc_minor, int64_t sms,
                       c10::string_view gpu) {
  Gpu part = gpu == "H200" ? Gpu::kH200 : gpu == "H100" ? Gpu::kH100 : Gpu::kOther;
  if (gpu.empty()) part = a.is_cuda() ? device_info(a.get_device()).gpu : Gpu::kH200;
  const DeviceInfo dev = fake_device_info(int(cc_major), int(cc_minor), int(sms), part);
  const bool batched = a.dim() == 3;
  const GemmCall call{batched ? "bmm" : "mm", &a, &b, nullptr, 0.0, 1.0, nullptr, batched};
  GemmDecision d = decide_gemm(call, dev);
  // The run path gives the split-K path its workspace; name the kernel as that run would.
  if (gemm_workspace_bytes(d.params, dev) > 0) d.params.workspace = &d;
  const std::string text = decision_text(d.plan.flyops, gemm_kernel_name(d.params, dev), d.plan.reason);
  if (log_level() > 0) log_line("gemm " + describe_gemm(call) + " -> " + text);
  return text;
}

// The attention decision for the cuDNN op (flash = false) or the flash op on a described GPU.
std::string route_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool flash, bool causal,
                            bool lse, int64_t cc_major, int64_t cc_minor, int64_t sms) {
  const DeviceInfo dev = fake_device_info(int(cc_major), int(cc_minor), int(sms));
  const AttnCall call{flash, &q, &k, &v, false, lse, 0.0, causal, false, std::nullopt};
  const AttnDecision d = decide_attention(call, dev);
  const std::string text = decision_text(d.plan.flyops, attention_kernel_name(d.params), d.plan.reason);
  if (log_level() > 0) log_line("attention " + describe_attention(call) + " -> " + text);
  return text;
}

std::string build_info() {
  std::ostringstream o;
  o << "{\"version\": \"" << FLYOPS_VERSION << "\", \"torch\": \"" << FLYOPS_BUILD_TORCH_VERSION
    << "\", \"cuda_arch\": \"sm_90a\"}";
  return o.str();
}

}  // namespace

TORCH_LIBRARY(flyops, m) {
  m.def("_register_overrides() -> ()", [] { register_overrides(); });
  m.def("set_enabled(bool on) -> ()", [](bool on) { set_enabled(on); });
  m.def("is_enabled() -> bool", [] { return enabled(); });
  m.def("set_op_enabled(str op, bool on) -> ()",
        [](std::string op, bool on) { set_op_enabled(op_of(op), on); });
  m.def("op_enabled(str op) -> bool", [](std::string op) { return op_enabled(op_of(op)); });
  // ops: comma-separated names, or "" for every op.
  m.def("push_disabled(str ops) -> ()", [](std::string ops) { push_disabled(mask_of(ops)); });
  m.def("pop_disabled() -> ()", [] { pop_disabled(); });
  m.def("active(str op) -> bool", [](std::string op) { return active(op_of(op)); });
  m.def("op_names() -> str", [] {
    std::string out;
    for (const std::string& n : op_names()) out += (out.empty() ? "" : ",") + n;
    return out;
  });
  m.def("set_log_level(int level) -> ()", [](int64_t level) { set_log_level(int(level)); });
  m.def("log_level() -> int", [] { return int64_t{log_level()}; });
  m.def("stats() -> str", [] { return stats_json(); });
  m.def("reset_stats() -> ()", [] { reset_stats(); });
  m.def("build_info() -> str", [] { return build_info(); });
  m.def("_route_rms_norm(Tensor input, int[] normalized_shape, Tensor? weight, float? eps, "
        "int cc_major=9, int cc_minor=0, int sm_count=132) -> str",
        &route_rms_norm);
  m.def("_route_rms_norm_backward(Tensor grad_out, Tensor input, int[] normalized_shape, "
        "Tensor rstd, Tensor? weight, bool[2] output_mask, int cc_major=9, int cc_minor=0, "
        "int sm_count=132) -> str",
        &route_rms_norm_backward);
  m.def("_route_topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True, "
        "int cc_major=9, int cc_minor=0, int sm_count=132) -> str",
        &route_topk);
  // Tuning hook: force a TopK kernel (0 stock, 1 warp, 2 cluster, 3 two-stage, 4 arg-max, -1 router)
  // and a cluster size (0: the router's). Benchmarks only.
  m.def("_topk_force(int kind, int cluster=0) -> ()",
        [](int64_t kind, int64_t cluster) { topk_force(int(kind), int(cluster)); });
  // Test hook: the finish leaves the 16-bit list stream's polled words (their poisoned rows).
  m.def("_topk_keep_polled_words(bool on) -> ()", [](bool on) { topk_keep_polled_words(on); });
  m.def("_route_gemm(Tensor a, Tensor b, int cc_major=9, int cc_minor=0, int sm_count=132, str gpu=\"\") -> str",
        &route_gemm);
  // Test and benchmark hook: 0 the router, 1 flyops whenever supported, 2 stock.
  m.def("_route_attention(Tensor q, Tensor k, Tensor v, bool flash=False, bool causal=False, bool lse=False, "
        "int cc_major=9, int cc_minor=0, int sm_count=132) -> str",
        &route_attention);
  m.def("_attention_force(int mode) -> ()", [](int64_t mode) { attention_force(int(mode)); });
  m.def("_attention_backward_force(int mode) -> ()", [](int64_t mode) { attention_bwd_force(int(mode)); });
  m.def("_gemm_force(int mode, int cluster=0, int group_rows=0) -> ()",
        [](int64_t mode, int64_t cluster, int64_t group_rows) { gemm_force(int(mode), int(cluster), int(group_rows)); });
  // Tuning hook: force a row shape (-1: the tuned table). Benchmarks only.
  m.def("_rms_norm_force_shape(int shape) -> ()",
        [](int64_t shape) { rms_norm_force_shape(int(shape)); });
  m.def("_rms_norm_num_shapes() -> int", [] { return int64_t{rms_norm_num_shapes()}; });
  m.def("_rms_norm_shape_info(int shape) -> int[]", [](int64_t shape) {
    int v[5];
    rms_norm_shape_info(int(shape), v);
    return std::vector<int64_t>(v, v + 5);
  });
}

}  // namespace flyops::binding
