// Where flyops' attention forward measured faster than stock on the H200 (PyTorch's default
// backend, cuDNN, through torch 2.11), by shape class. Provenance: `python -m flyops.bench
// --op attention`, session run 6 of 2026-12-01 (docs/perf-notes.md, attention v0), flyops
// forced against stock in alternating rounds, both forward passes (training and inference):
//   causal self-attention, bf16, head dim 128 or 256, L >= 4096 (B x L = 16384): 1.00-1.08x
//   in all 12 measurements (D = 128: L 4096 1.01 / 1.03, 8192 1.06 / 1.02, 16384 1.04 /
//   1.02; D = 256: 4096 1.00 / 1.03, 8192 1.03 / 1.02, 16384 1.08 / 1.07).
// Everywhere else stock measured faster: head dim 64 (0.70-0.94x), L <= 2048 (0.76-0.97x),
// non-causal (0.89-0.98x). fp16, grouped heads and Lq != Lk are not measured yet, so stock.
#pragma once

#include "flyops/attention.h"

namespace flyops::attention {

inline bool measured_faster(const AttnParams& p) {
  return p.causal && p.dtype == DType::kBFloat16 && (p.D == 128 || p.D == 256) && p.Lq >= 4096 && p.Lk == p.Lq &&
         p.H == p.Hkv;
}

}  // namespace flyops::attention
