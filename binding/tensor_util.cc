#include "tensor_util.h"

#include <ATen/ATen.h>

#include <cuda_runtime_api.h>

#include <sstream>

namespace flyops::binding {

DType to_dtype(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return DType::kFloat32;
    case c10::ScalarType::Half: return DType::kFloat16;
    case c10::ScalarType::BFloat16: return DType::kBFloat16;
    case c10::ScalarType::Double: return DType::kFloat64;
    default: return DType::kOther;
  }
}

std::optional<int64_t> row_stride(const at::Tensor& t, int64_t inner_dims) {
  const int64_t dim = t.dim();
  if (inner_dims > dim) return std::nullopt;
  // The last `inner_dims` dims: contiguous among themselves (size-1 dims have any stride).
  int64_t n = 1;
  for (int64_t d = dim - 1; d >= dim - inner_dims; --d) {
    if (t.size(d) != 1 && t.stride(d) != n) return std::nullopt;
    n *= t.size(d);
  }
  // The outer dims: one stride between consecutive rows.
  int64_t stride = -1;
  int64_t span = 1;  // rows covered by the outer dims already seen
  for (int64_t d = dim - inner_dims - 1; d >= 0; --d) {
    if (t.size(d) == 1) continue;
    if (stride < 0)
      stride = t.stride(d);
    else if (t.stride(d) != stride * span)
      return std::nullopt;
    span *= t.size(d);
  }
  return stride < 0 ? n : stride;
}

std::string describe(const at::Tensor& t) {
  std::ostringstream o;
  o << dtype_name(to_dtype(t.scalar_type()));
  if (to_dtype(t.scalar_type()) == DType::kOther) o << "(" << t.scalar_type() << ")";
  o << t.sizes();
  if (!t.is_contiguous()) o << "@" << t.strides();
  if (!t.is_cuda()) o << "(" << t.device() << ")";
  return o.str();
}

std::string describe(const std::optional<at::Tensor>& t) {
  return t.has_value() && t->defined() ? describe(*t) : std::string("none");
}

const DeviceInfo& routing_device(const at::Tensor& t) {
  static const DeviceInfo kNone{};
  if (!t.is_cuda()) return kNone;
  return device_info(t.get_device());
}

at::Tensor workspace_tensor(const at::Tensor& like, std::size_t bytes, void** ptr) {
  *ptr = nullptr;
  if (bytes == 0) return {};
  at::Tensor ws = at::empty({static_cast<int64_t>(bytes)}, like.options().dtype(at::kByte));
  *ptr = ws.data_ptr();
  return ws;
}

bool ran_or_refused(Status s, const char* what) {
  if (s == Status::kUnsupported) {
    cudaGetLastError();  // a refused opt-in may leave an error; stock's launches must not see it
    return false;
  }
  check_ran(s, what);
  return true;
}

void check_ran(Status s, const char* what) {
  if (s == Status::kSuccess) return;
  const cudaError_t e = cudaGetLastError();
  const std::string cuda = e == cudaSuccess ? "" : std::string(" (") + cudaGetErrorString(e) + ")";
  TORCH_CHECK(false, "flyops ", what, " failed: ", status_string(s), cuda);
}

}  // namespace flyops::binding
