// Where the H200 measurements put another plan ahead of the router's default rule.
// Source: bench/results/h200/topk_tune.json (python -m flyops.bench --op topk --tune, every
// cluster size and two stages forced on the sampling shapes, commit of that file). The
// one-pass cluster kernel's rows carry a fixed cost per row (its digit passes synchronise
// the cluster); with many long fp32 rows, two stages of single-CTA segments hide it better.
// No measured shape had stock ahead of every flyops plan, so nothing here routes to stock.
#pragma once

#include "flyops/topk.h"

namespace flyops::topk {

// Two stages (segments of one CTA each, then their union) instead of one pass per row.
inline bool prefer_two_stage(const TopkParams& p) {
  if (p.rows < 64 || p.n < 100000) return false;
  if (p.dtype == DType::kFloat32)  // 64 rows of 262144 at k >= 512: one pass measured faster
    return !(p.k >= 512 && p.rows < 256 && p.n >= 200000);
  // bf16/fp16 rows are half the bytes: one pass wins except 256 x 128256 at k = 1024.
  return p.rows >= 256 && p.k >= 512 && p.n < 200000;
}

}  // namespace flyops::topk
