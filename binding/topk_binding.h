// The TopK routing decision, shared by the aten overrides and the explain op.
#pragma once

#include <ATen/core/Tensor.h>

#include <string>

#include "flyops/topk.h"

namespace torch {
class Library;
}

namespace flyops::binding {

struct TopkDecision {
  TopkParams params;
  TopkPlan plan;  // kind kStock with a reason unless the call can be ours
};

TopkDecision decide_topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted,
                         const DeviceInfo& dev);
std::string describe_topk(const at::Tensor& self, int64_t k, int64_t dim, bool largest, bool sorted);
std::string topk_kernel_name(const TopkDecision& d);
void register_topk(torch::Library& aten_cuda);

}  // namespace flyops::binding
