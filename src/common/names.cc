#include "flyops/dtype.h"
#include "flyops/status.h"

namespace flyops {

const char* status_string(Status s) {
  switch (s) {
    case Status::kSuccess: return "success";
    case Status::kUnsupported: return "unsupported";
    case Status::kInvalidArgument: return "invalid argument";
    case Status::kCudaError: return "CUDA error";
  }
  return "unknown status";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "fp32";
    case DType::kFloat16: return "fp16";
    case DType::kBFloat16: return "bf16";
    case DType::kFloat64: return "fp64";
    default: return "other";
  }
}

}  // namespace flyops
