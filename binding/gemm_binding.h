// The GEMM routing decision, shared by the eight aten overrides and the explain op.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "flyops/gemm.h"

namespace torch {
class Library;
}

namespace flyops::binding {

// One overload's call as C = alpha * a @ b + beta * self, into `out` (null: a fresh
// contiguous tensor). `batched`: 3-D operands (bmm, baddbmm).
struct GemmCall {
  const char* name;
  const at::Tensor* a;
  const at::Tensor* b;
  const at::Tensor* self;  // null: no addend
  double beta, alpha;
  const at::Tensor* out;
  bool batched;
};

struct GemmDecision {
  GemmParams params;
  GemmPlan plan;  // stock with a reason unless the call can be ours
};

GemmDecision decide_gemm(const GemmCall& call, const DeviceInfo& dev);
std::string describe_gemm(const GemmCall& call);
void register_gemm(torch::Library& aten_cuda);

}  // namespace flyops::binding
