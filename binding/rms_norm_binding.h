// The RMSNorm routing decision, shared by the aten overrides and the explain ops that
// tests use to see decisions without a GPU.
#pragma once

#include <ATen/core/Tensor.h>

#include <array>
#include <optional>
#include <string>

#include "flyops/rms_norm.h"

namespace torch {
class Library;
}

namespace flyops::binding {

struct FwdDecision {
  RmsNormFwdParams params;
  RmsNormPlan plan;  // kind kStock with a reason unless the call can be ours
};

struct BwdDecision {
  RmsNormBwdParams params;
  RmsNormPlan plan;
};

FwdDecision decide_fwd(const at::Tensor& input, at::IntArrayRef normalized_shape,
                       const std::optional<at::Tensor>& weight, std::optional<double> eps,
                       const DeviceInfo& dev);
BwdDecision decide_bwd(const at::Tensor& grad_out, const at::Tensor& input,
                       at::IntArrayRef normalized_shape, const at::Tensor& rstd,
                       const std::optional<at::Tensor>& weight, std::array<bool, 2> mask,
                       const DeviceInfo& dev);

std::string describe_fwd(const at::Tensor& input, const std::optional<at::Tensor>& weight,
                         std::optional<double> eps);
std::string describe_bwd(const at::Tensor& grad_out, const at::Tensor& input,
                         const std::optional<at::Tensor>& weight, std::array<bool, 2> mask);
std::string fwd_kernel_name(const FwdDecision& d);
// m.impl() of the aten overrides, into the aten/CUDA library of registration.cc.
void register_rms_norm(torch::Library& aten_cuda);
std::string bwd_kernel_name(const BwdDecision& d);

}  // namespace flyops::binding
