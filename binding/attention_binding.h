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

// One call of _scaled_dot_product_cudnn_attention_backward (fwd.flash = false) or
// _scaled_dot_product_flash_attention_backward: the forward call it differentiates (with its
// log-sum-exp, no debug mask), and what the backward adds.
struct AttnBwdCall {
  AttnCall fwd;
  const at::Tensor* grad_out;
  const at::Tensor* out;
  const at::Tensor* lse;
  bool cum_seq;
};

struct AttnBwdDecision {
  AttnBwdParams params;
  AttnPlan plan;
};

// The forward's shapes and checks into p (o and lse placeholders); nullptr, or why stock.
const char* attention_params(const AttnCall& call, AttnParams& p);
AttnDecision decide_attention(const AttnCall& call, const DeviceInfo& dev);
AttnBwdDecision decide_attention_backward(const AttnBwdCall& call, const DeviceInfo& dev);
std::string describe_attention(const AttnCall& call);
std::string describe_attention_backward(const AttnBwdCall& call);
void register_attention(torch::Library& aten_cuda);

}  // namespace flyops::binding
