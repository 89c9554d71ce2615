// The attention forward's routing decision, shared by the two SDPA overrides and the
// explain op.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "flyops/attention.h"

namespace torch {
class Library;
}

namespace flyops::binding {

// One call of _scaled_dot_product_cudnn_attention (flash = false) or
// _scaled_dot_product_flash_attention (flash = true).
struct AttnCall {
  bool flash;
  const at::Tensor* q;
  const at::Tensor* k;
  const at::Tensor* v;
  bool has_bias;
  bool compute_lse;
  double dropout_p;
  bool causal;
  bool debug_mask;
  std::optional<double> scale;
};

struct AttnDecision {
  AttnParams params;
  AttnPlan plan;  // stock with a reason unless the call can be ours
};

AttnDecision decide_attention(const AttnCall& call, const DeviceInfo& dev);
std::string describe_attention(const AttnCall& call);
void register_attention(torch::Library& aten_cuda);

}  // namespace flyops::binding
