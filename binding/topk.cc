// aten::topk and aten::topk.values on the CUDA key: flyops kernels where the router takes
// the call, else the stock CUDA kernels (at::cuda::*, which bypass the dispatcher).
// Anything invalid (k out of range, bad dim, wrong out dtypes) goes to stock untouched, so
// users see stock's errors.
#include <ATen/ATen.h>
#include <ATen/WrapDimUtils.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/topk_cuda_dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <sstream>

#include "controls.h"
#include "route_log.h"
#include "tensor_util.h"
#include "topk_binding.h"

namespace flyops::binding {
namespace {

// Fresh outputs come from the caching allocator (512-byte aligned); the router only needs
// non-null stand-ins before allocating.
void* const kFreshOutput = reinterpret_cast<void*>(uintptr_t{512});

std::vector<int64_t> out_shape(const at::Tensor& self, int64_t k) {
  std::vector<int64_t> s(self.sizes().begin(), self.sizes().end());
  s.back() = k;
  return s;
}

}  // namespace

TopkDecision decide_topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                         const DeviceInfo& dev) {
  TopkDecision d;
  auto stock = [&](const char* why) {
    d.plan.reason = why;
    return d;
  };
  if (self.dim() == 0) return stock("0-dim input");
  if (dim < -self.dim() || dim >= self.dim()) return stock("dim out of range");
  if (c10::maybe_wrap_dim(dim, self.dim()) != self.dim() - 1)
    return stock("dim is not the last (moving it last would cost a copy)");
  const int64_t n = self.size(-1);
  if (k < 0 || k > n) return stock("k out of range");
  if (self.numel() == 0) return stock("empty input");
  const std::optional<int64_t> stride = row_stride(self, 1);
  if (!stride) return stock("rows not contiguous (unsupported layout)");
  TopkParams& p = d.params;
  p.rows = self.numel() / n;
  p.n = n;
  p.k = k;
  p.dtype = to_dtype(self.scalar_type());
  p.largest = largest;
  p.sorted = sorted;
  p.x = self.data_ptr();
  p.x_row_stride = *stride;
  p.values = kFreshOutput;
  p.indices = static_cast<int64_t*>(kFreshOutput);
  p.device = self.get_device();
  d.plan = topk_choose(p, dev);
  return d;
}

std::string describe_topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted) {
  std::ostringstream o;
  o << describe(self) << " k=" << k << " dim=" << dim << (largest ? " largest" : " smallest")
    << (sorted ? " sorted" : " unsorted");
  return o.str();
}

std::string topk_kernel_name(const TopkDecision& d) {
  char buf[128];
  topk_plan_name(d.plan, d.params.dtype, buf, sizeof(buf));
  return buf;
}

namespace {

// Routes one call; on flyops' route runs the kernel into (values, indices), which the
// caller has sized [..., k] and made contiguous. Returns false when stock must run.
template <typename MakeOutputs>
bool try_flyops(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                MakeOutputs&& make_outputs) {
  if (passed_over(Op::kTopk, self.is_cuda(), [&] { return describe_topk(self, k, dim, largest, sorted); }))
    return false;
  TopkDecision d = decide_topk(self, k, dim, largest, sorted, routing_device(self));
  std::pair<at::Tensor, at::Tensor> outs;
  if (d.plan.flyops()) {
    outs = make_outputs();
    if (!outs.first.defined()) {
      d.plan = TopkPlan{};
      d.plan.reason = "out tensors not usable in place";
    }
  }
  bool ours = d.plan.flyops();
  if (ours) {
    RECORD_FUNCTION("flyops::topk", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(self.device());
    d.params.values = outs.first.data_ptr();
    d.params.indices = outs.second.data_ptr<int64_t>();
    d.params.workspace_bytes = topk_workspace_bytes(d.params, d.plan);
    const at::Tensor ws = workspace_tensor(self, d.params.workspace_bytes, &d.params.workspace);
    d.params.stream = at::cuda::getCurrentCUDAStream(self.get_device()).stream();
    if (!ran_or_refused(topk_run(d.params, d.plan), "topk")) {
      ours = false;
      d.plan.reason = kRefusedAtRun;
    } else if (d.plan.sort_after) {
      // A k past the kernels' sorts: PyTorch's sort orders the selection, as stock's topk
      // orders a k this large (at::sort_out, then a gather of the indices).
      const auto [sorted_values, order] = at::sort(outs.first, -1, largest);
      outs.second.copy_(outs.second.gather(-1, order));
      outs.first.copy_(sorted_values);
    }
  }
  report(Op::kTopk, ours, d.plan.reason, [&] { return describe_topk(self, k, dim, largest, sorted); },
         [&] { return topk_kernel_name(d); });
  return ours;
}

std::tuple<at::Tensor, at::Tensor> topk(const at::Tensor& self, c10::SymInt k_sym, int64_t dim,
                                        bool largest, bool sorted) {
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  at::Tensor values, indices;
  const bool ours = try_flyops(self, k, dim, largest, sorted, [&] {
    const auto shape = out_shape(self, k);
    values = at::empty(shape, self.options());
    indices = at::empty(shape, self.options().dtype(at::kLong));
    return std::make_pair(values, indices);
  });
  if (!ours) return at::cuda::topk(self, k, dim, largest, sorted);
  return {std::move(values), std::move(indices)};
}

std::tuple<at::Tensor&, at::Tensor&> topk_values(const at::Tensor& self, c10::SymInt k_sym, int64_t dim,
                                                 bool largest, bool sorted, at::Tensor& values,
                                                 at::Tensor& indices) {
  const int64_t k = k_sym.guard_int(__FILE__, __LINE__);
  const bool ours = try_flyops(self, k, dim, largest, sorted, [&]() -> std::pair<at::Tensor, at::Tensor> {
    // Only outputs stock would accept and that end up contiguous after stock's resize rule;
    // everything else (wrong dtype or device, aliasing the input, strided) is stock's.
    if (values.scalar_type() != self.scalar_type() || indices.scalar_type() != at::kLong ||
        values.device() != self.device() || indices.device() != self.device())
      return {};
    if (values.is_alias_of(self) || indices.is_alias_of(self) || values.is_alias_of(indices)) return {};
    const auto shape = out_shape(self, k);
    at::native::resize_output(values, shape);
    at::native::resize_output(indices, shape);
    if (!values.is_contiguous() || !indices.is_contiguous()) return {};
    return std::make_pair(values, indices);
  });
  if (!ours) at::cuda::topk_outf(self, k, dim, largest, sorted, values, indices);
  return {values, indices};
}

}  // namespace

void register_topk(torch::Library& aten_cuda) {
  aten_cuda.impl("topk", &topk);
  aten_cuda.impl("topk.values", &topk_values);
}

}  // namespace flyops::binding
