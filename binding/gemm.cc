// aten::mm, addmm, bmm, baddbmm and their .out forms on the CUDA key: flyops' GEMM where
// the router takes the call, else the stock CUDA kernels (at::cuda::*, which bypass the
// dispatcher). Every overload becomes one problem, C = alpha * A @ B + beta * D, described
// by strides: an operand is used in place when one of its two matrix dims has unit stride;
// a column-major C is the transposed problem (A and B swap). Anything invalid or unusual
// (mismatched shapes, dtypes or devices, aliasing outputs, broadcast batches) goes to
// stock untouched, so users see stock's errors and results.
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/native/Resize.h>
#include <ATen/ops/addmm_cuda_dispatch.h>
#include <ATen/ops/baddbmm_cuda_dispatch.h>
#include <ATen/ops/bmm_cuda_dispatch.h>
#include <ATen/ops/mm_cuda_dispatch.h>
#include <ATen/record_function.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <sstream>
#include <utility>

#include "controls.h"
#include "gemm_binding.h"
#include "route_log.h"
#include "tensor_util.h"

namespace flyops::binding {
namespace {

// Fresh outputs come from the caching allocator (512-byte aligned); the router only needs
// a non-null stand-in before allocating.
void* const kFreshOutput = reinterpret_cast<void*>(uintptr_t{512});

int64_t round_up8(int64_t x) { return (x + 7) / 8 * 8; }

// The operand held by t's dims (row_dim, k_dim): K-major when K has unit stride, else
// MN-major when the rows do. A size-1 dim has any stride, so its leading stride is ours to
// pick; K-major wins unless its stride cannot be a TMA stride and MN-major's can.
bool operand_of(const at::Tensor& t, int64_t row_dim, int64_t k_dim, GemmOperand& op) {
  const int64_t rows = t.size(row_dim), K = t.size(k_dim);
  const int64_t s_row = t.stride(row_dim), s_k = t.stride(k_dim);
  const bool k_ok = s_k == 1 || K == 1, mn_ok = s_row == 1 || rows == 1;
  const int64_t ld_k = rows == 1 ? round_up8(K) : s_row, ld_mn = K == 1 ? round_up8(rows) : s_k;
  if (k_ok && (!mn_ok || ld_k % 8 == 0)) {
    op.k_major = true;
    op.ld = ld_k;
  } else if (mn_ok) {
    op.k_major = false;
    op.ld = ld_mn;
  } else {
    return false;
  }
  op.ptr = t.data_ptr();
  op.batch_stride = t.dim() == 3 ? t.stride(0) : 0;
  return true;
}

// C's layout: row-major (ldc = row stride) or column-major (the transposed problem).
bool output_layout(at::IntArrayRef sizes, at::IntArrayRef strides, bool& transposed, int64_t& ldc) {
  const size_t r = sizes.size() - 2, c = sizes.size() - 1;
  const int64_t M = sizes[r], N = sizes[c];
  if ((strides[c] == 1 || N == 1) && (M == 1 || strides[r] >= N)) {
    transposed = false;
    ldc = M == 1 ? N : strides[r];
    return true;
  }
  if ((strides[r] == 1 || M == 1) && (N == 1 || strides[c] >= M)) {
    transposed = true;
    ldc = N == 1 ? M : strides[c];
    return true;
  }
  return false;
}

bool same_view(const at::Tensor& x, const at::Tensor& y) {
  return x.data_ptr() == y.data_ptr() && x.sizes().equals(y.sizes()) && x.strides().equals(y.strides());
}

}  // namespace

GemmDecision decide_gemm(const GemmCall& call, const DeviceInfo& dev) {
  GemmDecision dn;
  auto stock = [&](const char* why) {
    dn.plan = GemmPlan{false, why};
    return dn;
  };
  const at::Tensor& a = *call.a;
  const at::Tensor& b = *call.b;
  const int64_t rank = call.batched ? 3 : 2;
  if (a.dim() != rank || b.dim() != rank) return stock("operands of the wrong rank");
  if (a.size(-1) != b.size(-2) || (call.batched && a.size(0) != b.size(0))) return stock("shapes do not match");
  if (a.scalar_type() != b.scalar_type()) return stock("operand dtypes differ");
  if (a.is_neg() || b.is_neg() || (call.self != nullptr && call.self->is_neg()))
    return stock("a lazily negated view (neg bit)");
  const DType dtype = to_dtype(a.scalar_type());
  if (dtype == DType::kFloat32) return stock("float32 (TF32 settings are stock's)");
  if (dtype != DType::kBFloat16 && dtype != DType::kFloat16) return stock("dtype not bfloat16 or float16");
  if (a.device() != b.device()) return stock("operands on different devices");
  const int64_t M = a.size(-2), N = b.size(-1), K = a.size(-1), batch = call.batched ? a.size(0) : 1;
  if (M == 0 || N == 0 || K == 0 || batch == 0) return stock("empty GEMM");
  GemmParams& p = dn.params;
  p.M = M, p.N = N, p.K = K, p.batch = batch;
  p.dtype = dtype;
  if (!operand_of(a, rank - 2, rank - 1, p.a) || !operand_of(b, rank - 1, rank - 2, p.b))
    return stock("an operand has no unit-stride matrix dim");
  if (call.batched && batch > 1 && (a.stride(0) == 0 || b.stride(0) == 0))
    return stock("a broadcast (stride-0) batch");

  // The output: a fresh contiguous tensor, or the caller's (already resized).
  bool transposed = false;
  int64_t ldc = N, batch_stride_c = M * N;
  if (call.out != nullptr) {
    const at::Tensor& out = *call.out;
    if (out.scalar_type() != a.scalar_type() || out.device() != a.device()) return stock("out dtype or device differs");
    if (out.is_alias_of(a) || out.is_alias_of(b)) return stock("out aliases an operand");
    if (!output_layout(out.sizes(), out.strides(), transposed, ldc)) return stock("out has no unit-stride matrix dim");
    batch_stride_c = call.batched ? out.stride(0) : 0;
    p.c = out.data_ptr();
  } else {
    p.c = kFreshOutput;
  }
  p.ldc = ldc;
  p.batch_stride_c = batch_stride_c;

  // The addend, broadcast to C's shape; beta == 0 never reads it, but stock checks it all
  // the same, so an unusual self is stock's either way.
  p.alpha = static_cast<float>(call.alpha);
  p.beta = call.self != nullptr ? static_cast<float>(call.beta) : 0.f;
  if (call.self != nullptr) {
    const at::Tensor& d = *call.self;
    if (d.scalar_type() != a.scalar_type() || d.device() != a.device()) return stock("self dtype or device differs");
    const int64_t full[3] = {batch, M, N};
    if (!at::is_expandable_to(d.sizes(), at::IntArrayRef(full + (call.batched ? 0 : 1), rank)))
      return stock("self does not broadcast to the output");
  }
  if (call.self != nullptr && call.beta != 0.0) {
    const at::Tensor& d = *call.self;
    if (call.out != nullptr && call.out->is_alias_of(d) && !same_view(*call.out, d))
      return stock("out overlaps self in another layout");
    // Broadcast strides without building the expanded view: a missing or size-1 dim
    // repeats (stride 0).
    int64_t st[3] = {0, 0, 0};
    for (int64_t i = 1; i <= d.dim(); ++i)
      if (d.size(-i) != 1) st[rank - i] = d.stride(-i);
    p.d = d.data_ptr();
    p.d_stride_m = st[rank - 2];
    p.d_stride_n = st[rank - 1];
    p.batch_stride_d = call.batched ? st[0] : 0;
  }
  if (transposed) {  // C^T = B^T A^T, written row-major into C's columns
    std::swap(p.M, p.N);
    std::swap(p.a, p.b);
    std::swap(p.d_stride_m, p.d_stride_n);
  }
  p.device = a.get_device();
  p.cluster = gemm_forced_cluster();  // the tuning hooks (0: the launcher's choice)
  p.group_rows = gemm_forced_group_rows();
  dn.plan = gemm_choose(p, dev);
  if (p.cluster == 0) p.cluster = dn.plan.cluster;  // the measured table's configuration, unless forced
  return dn;
}

std::string describe_gemm(const GemmCall& call) {
  std::ostringstream o;
  o << call.name << " " << describe(*call.a) << " @ " << describe(*call.b);
  if (call.self != nullptr) o << " + " << call.beta << " * " << describe(*call.self) << " (alpha " << call.alpha << ")";
  if (call.out != nullptr) o << " out=" << describe(*call.out);
  return o.str();
}

namespace {

// Routes one call; on flyops' route runs the kernel into the output (the caller's `out`,
// or a fresh tensor from make_fresh) and returns it, else returns an undefined tensor.
template <typename MakeFresh>
at::Tensor try_flyops(const GemmCall& call, MakeFresh&& make_fresh) {
  const at::Tensor& a = *call.a;
  if (passed_over(Op::kGemm, a.is_cuda(), [&] { return describe_gemm(call); })) return at::Tensor();
  const DeviceInfo& dev = routing_device(a);
  GemmDecision dn = decide_gemm(call, dev);
  bool ours = dn.plan.flyops;
  const char* reason = dn.plan.reason;
  at::Tensor out;
  if (ours) {
    RECORD_FUNCTION("flyops::gemm", std::vector<c10::IValue>());
    c10::cuda::CUDAGuard device_guard(a.device());
    out = call.out != nullptr ? *call.out : make_fresh();
    dn.params.c = out.data_ptr();
    dn.params.stream = at::cuda::getCurrentCUDAStream(a.get_device()).stream();
    // The split-K path's partials.
    const at::Tensor workspace = workspace_tensor(a, gemm_workspace_bytes(dn.params, dev), &dn.params.workspace);
    const Status s = gemm_run(dn.params);
    if (s == Status::kUnsupported) {  // a tensor map the driver refused: stock, and say why
      ours = false;
      reason = gemm_last_error();
      out = at::Tensor();
    } else {
      check_ran(s, "gemm");
    }
  }
  report(Op::kGemm, ours, reason, [&] { return describe_gemm(call); },
         [&] { return std::string(gemm_kernel_name(dn.params, dev)); });
  return out;
}

double scalar(const at::Scalar& s, bool& ok) {
  if (s.isComplex()) {
    ok = false;
    return 0.0;
  }
  return s.toDouble();
}

// The out= overloads: only calls stock would accept reach the decision, after stock's resize
// rule; the rest is stock's, errors included, with `out` untouched until stock's own checks
// (operands of one dtype and device, an addend of theirs that broadcasts to the output).
bool prepare_out(at::Tensor& out, const at::Tensor& a, const at::Tensor& b, const at::Tensor* self,
                 at::IntArrayRef shape) {
  if (!a.is_cuda() || b.scalar_type() != a.scalar_type() || b.device() != a.device() ||
      out.scalar_type() != a.scalar_type() || out.device() != a.device())
    return false;
  if (self != nullptr && (self->scalar_type() != a.scalar_type() || self->device() != a.device() ||
                          !at::is_expandable_to(self->sizes(), shape)))
    return false;
  at::native::resize_output(out, shape);
  return true;
}

at::Tensor mm(const at::Tensor& self, const at::Tensor& mat2) {
  const GemmCall call{"mm", &self, &mat2, nullptr, 0.0, 1.0, nullptr, false};
  if (self.dim() == 2 && mat2.dim() == 2) {
    at::Tensor r = try_flyops(call, [&] { return at::empty({self.size(0), mat2.size(1)}, self.options()); });
    if (r.defined()) return r;
  }
  return at::cuda::mm(self, mat2);
}

at::Tensor& mm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (self.dim() == 2 && mat2.dim() == 2 && self.size(1) == mat2.size(0) &&
      prepare_out(out, self, mat2, nullptr, {self.size(0), mat2.size(1)})) {
    const GemmCall call{"mm.out", &self, &mat2, nullptr, 0.0, 1.0, &out, false};
    if (try_flyops(call, [] { return at::Tensor(); }).defined()) return out;
  }
  return at::cuda::mm_out(out, self, mat2);
}

at::Tensor addmm(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                 const at::Scalar& alpha) {
  bool ok = true;
  const GemmCall call{"addmm", &mat1, &mat2, &self, scalar(beta, ok), scalar(alpha, ok), nullptr, false};
  if (ok && mat1.dim() == 2 && mat2.dim() == 2) {
    at::Tensor r = try_flyops(call, [&] { return at::empty({mat1.size(0), mat2.size(1)}, mat1.options()); });
    if (r.defined()) return r;
  }
  return at::cuda::addmm(self, mat1, mat2, beta, alpha);
}

at::Tensor& addmm_out(const at::Tensor& self, const at::Tensor& mat1, const at::Tensor& mat2, const at::Scalar& beta,
                      const at::Scalar& alpha, at::Tensor& out) {
  bool ok = true;
  const GemmCall call{"addmm.out", &mat1, &mat2, &self, scalar(beta, ok), scalar(alpha, ok), &out, false};
  if (ok && mat1.dim() == 2 && mat2.dim() == 2 && mat1.size(1) == mat2.size(0) &&
      prepare_out(out, mat1, mat2, &self, {mat1.size(0), mat2.size(1)})) {
    if (try_flyops(call, [] { return at::Tensor(); }).defined()) return out;
  }
  return at::cuda::addmm_out(out, self, mat1, mat2, beta, alpha);
}

at::Tensor bmm(const at::Tensor& self, const at::Tensor& mat2) {
  const GemmCall call{"bmm", &self, &mat2, nullptr, 0.0, 1.0, nullptr, true};
  if (self.dim() == 3 && mat2.dim() == 3) {
    at::Tensor r =
        try_flyops(call, [&] { return at::empty({self.size(0), self.size(1), mat2.size(2)}, self.options()); });
    if (r.defined()) return r;
  }
  return at::cuda::bmm(self, mat2);
}

at::Tensor& bmm_out(const at::Tensor& self, const at::Tensor& mat2, at::Tensor& out) {
  if (self.dim() == 3 && mat2.dim() == 3 && self.size(0) == mat2.size(0) && self.size(2) == mat2.size(1) &&
      prepare_out(out, self, mat2, nullptr, {self.size(0), self.size(1), mat2.size(2)})) {
    const GemmCall call{"bmm.out", &self, &mat2, nullptr, 0.0, 1.0, &out, true};
    if (try_flyops(call, [] { return at::Tensor(); }).defined()) return out;
  }
  return at::cuda::bmm_out(out, self, mat2);
}

at::Tensor baddbmm(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2, const at::Scalar& beta,
                   const at::Scalar& alpha) {
  bool ok = true;
  const GemmCall call{"baddbmm", &batch1, &batch2, &self, scalar(beta, ok), scalar(alpha, ok), nullptr, true};
  if (ok && batch1.dim() == 3 && batch2.dim() == 3) {
    at::Tensor r = try_flyops(
        call, [&] { return at::empty({batch1.size(0), batch1.size(1), batch2.size(2)}, batch1.options()); });
    if (r.defined()) return r;
  }
  return at::cuda::baddbmm(self, batch1, batch2, beta, alpha);
}

at::Tensor& baddbmm_out(const at::Tensor& self, const at::Tensor& batch1, const at::Tensor& batch2,
                        const at::Scalar& beta, const at::Scalar& alpha, at::Tensor& out) {
  bool ok = true;
  const GemmCall call{"baddbmm.out", &batch1, &batch2, &self, scalar(beta, ok), scalar(alpha, ok), &out, true};
  if (ok && batch1.dim() == 3 && batch2.dim() == 3 && batch1.size(0) == batch2.size(0) &&
      batch1.size(2) == batch2.size(1) && prepare_out(out, batch1, batch2, &self,
                                                        {batch1.size(0), batch1.size(1), batch2.size(2)})) {
    if (try_flyops(call, [] { return at::Tensor(); }).defined()) return out;
  }
  return at::cuda::baddbmm_out(out, self, batch1, batch2, beta, alpha);
}

}  // namespace

void register_gemm(torch::Library& aten_cuda) {
  aten_cuda.impl("mm", &mm);
  aten_cuda.impl("mm.out", &mm_out);
  aten_cuda.impl("addmm", &addmm);
  aten_cuda.impl("addmm.out", &addmm_out);
  aten_cuda.impl("bmm", &bmm);
  aten_cuda.impl("bmm.out", &bmm_out);
  aten_cuda.impl("baddbmm", &baddbmm);
  aten_cuda.impl("baddbmm.out", &baddbmm_out);
}

}  // namespace flyops::binding
