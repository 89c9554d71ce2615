// Where flyops' attention forward measured faster than stock on the H200 (PyTorch's default
// backend, cuDNN, through torch 2.11), by shape class. Provenance: `python -m flyops.bench
// --op attention`, session runs 6 and 7 of 2026-12-01 (docs/perf-notes.md, attention v0),
// flyops forced against stock in alternating rounds:
//   causal self-attention without the log-sum-exp (inference: the cuDNN op with
//   compute_log_sumexp false, as SDPA calls it without grad), bf16, head dim 128 or 256,
//   L >= 4096 (B x L = 16384): 1.00-1.06x in all 12 measurements (D = 128: L 4096 1.03 /
//   1.04, 8192 1.02 / 1.03, 16384 1.02 / 1.06; D = 256: 4096 1.03 / 1.01, 8192 1.02 / 1.03,
//   16384 1.07 / 1.00).
// The same shapes in training (the log-sum-exp kept for the backward) measured 1.00-1.08x
// forward alone, but a whole step (our forward, stock's backward) 0.92-1.01x (run 7), so
// training stays stock. Everywhere else stock measured faster: head dim 64 (0.70-0.94x),
// L <= 2048 (0.76-0.97x), non-causal (0.89-0.98x). fp16, grouped heads and Lq != Lk are
// not measured yet, so stock.
#pragma once

#include "flyops/attention.h"

namespace flyops::attention {

inline bool measured_faster(const AttnParams& p) {
  return p.lse == nullptr && p.causal && p.dtype == DType::kBFloat16 && (p.D == 128 || p.D == 256) &&
         p.Lq >= 4096 && p.Lk == p.Lq && p.H == p.Hkv;
}

// The backward (v0, not yet measured against stock on the H200): stock everywhere until a
// run says otherwise.
inline bool bwd_measured_faster(const AttnBwdParams&) { return false; }

}  // namespace flyops::attention
