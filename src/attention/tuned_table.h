// Where flyops' attention forward measured faster than stock on the H200 (PyTorch's default
// backend, cuDNN, through torch 2.11), by shape class. Provenance: `python -m flyops.bench
// --op attention`, session runs 6 and 7 of 2026-12-01 (docs/perf-notes.md, attention v0),
// flyops forced against stock in alternating rounds:
//   causal self-attention without the log-sum-exp (inference: the cuDNN op with
//   compute_log_sumexp false, as SDPA calls it without grad), bf16, head dim 128 or 256,
//   L >= 4096 (B x L = 16384): 1.00-1.06x in all 12 measurements (D = 128: L 4096 1.03 /
//   1.04, 8192 1.02 / 1.03, 16384 1.02 / 1.06; D = 256: 4096 1.03 / 1.01, 8192 1.02 / 1.03,
//   16384 1.07 / 1.00).
// After forward v5 (FlashAttention-3's key blocks; session of 2026-12-01, eighteenth, run 4,
// bench/results/h200/attention.json, flyops forced against stock in the bench's rounds), the
// non-causal inference calls that measured ahead in both forward passes (with and without the
// log-sum-exp): D = 256 from L = 8192 (1.04-1.12x), D = 128 at L = 16384 (1.06-1.09x); D = 256
// at 1024-4096 measured 0.995-1.05x and D = 128 at 8192 1.005x, too close to route.
// Training (the log-sum-exp kept for the backward) stayed stock until forward v9: a whole
// step with our forward and stock's backward measured 0.92-1.01x (eighteenth session, run 7).
// Re-measured after v9 (twenty-first session, run 1: scripts/attention-step-probe.py, the
// forward with grad and forward + backward under each pairing, alternating rounds; run 2: the
// bench's fwdbwd pass through this router), our forward in front of the backward the router
// picks, the step's speedup in run 1 / run 2:
//   D = 64 non-causal: forward 1.05-1.21x; step at 2048 1.023 / 0.977x, 4096-16384 1.017-1.050x;
//   D = 128: forward 1.01-1.18x, but the step 0.978-0.999x below L = 16384 and non-causal at
//     16384 (0.999 / 0.990x); causal 16384 1.032 / 1.003x;
//   D = 256: forward 1.04-1.41x; step non-causal 1.004-1.117x at 1024, 2048 and from 8192,
//     even at 4096 (0.999 / 0.998x); causal 1.003-1.084x from 4096, 1.014 / 0.970x at 2048.
// Stock's backward runs up to ~3% slower behind our forward than behind its own, though alone
// (L2 flushed, graph retained) it takes the same time on either's outputs (0.993-1.000x, run 3):
// what carries over is the GPU's state after the faster forward (perf-notes), so only the
// shapes whose step measured ahead in both runs take our training forward. After forward
// v10 (the persistent non-causal D = 64 kernels, 0.93x time at 2048; twenty-second session,
// the step probe) D = 64 non-causal at 2048 too: forward 1.128x, step 1.037x behind it (1.023
// / 0.977x before v10); at 512 / 1024 the forward measured 1.012 / 0.992x, D = 128 non-causal
// at 512-2048 1.002-1.018x (steps 1.005-1.018x): too close to route.
// Inference (no log-sum-exp), the bench's fwd_infer pass after v9 (twentieth session, run 10,
// bench/results/h200/attention.json): D = 64 non-causal from 2048 1.03-1.17x, causal at 16384
// 1.08x (8192 1.02x); D = 256 non-causal from 1024 1.06-1.10x, causal from 2048 1.05-1.22x
// (1024 0.99x). Everywhere else stock measured faster or even: D = 64 causal below 16384
// (0.73-1.02x), L <= 1024 at D = 64 and 128 (0.73-0.94x), D = 128 non-causal below 16384
// (0.87-1.00x). fp16, grouped heads and Lq != Lk are not measured against cuDNN, so stock.
// After forward v12 (conditional rescaling on the causal three-warpgroup D = 64 tile, 0.95-
// 0.96x time from 4096; twenty-third session): D = 64 causal, the step probe's three runs /
// the bench's fwd_infer pass (run 7): forward at 8192 1.089-1.113x (inference 1.093x), at
// 16384 1.131-1.157x; the step behind it at 16384 1.022 / 1.026 / 1.026x, at 8192 1.014 /
// 1.001 / 1.010x (too close); at 4096 the forward 0.987-0.989x. So the training forward
// from 16384 and inference from 8192.
// D = 128 non-causal inference at 8192: forced 1.058x and 1.071x of cuDNN in the last two
// records' fwd_infer (e96ca5c, c170850: 671 / 679 against 634 TFLOP/s), before forward v13
// narrowed the first key block (0.985x time there in the twenty-fifth session's A/B); so
// inference from 8192 (was 16384). Training, after v13 / v14 (twenty-fifth session, the step
// probe twice, our forward in front of stock's backward against stock's pair, D = 128
// non-causal): step 1.018 / 1.029x at 4096 (forward 1.012 / 1.000x; the bench's 1.02x),
// 1.001 / 1.014x at 8192 (forward 1.05-1.10x; too close), 1.030 / 1.030x at 16384 (forward
// 1.085x): so the training forward at 4096-8191 and from 16384.
#pragma once

#include "flyops/attention.h"

namespace flyops::attention {

inline constexpr const char* kStockFaster = "stock measured faster on this shape class (attention/tuned_table.h)";

// Against FlashAttention-2 (the flash op, p.stock == kFlash2): the bench's fa2 columns
// (run 9 of the sixteenth session; run 4 of the seventeenth, bench/results/h200/attention.json,
// the same within a few percent, with the router under the flash backend), flyops forced against
// FA2 over the whole set (bf16, head dim 64 / 128 / 256, L 512-16384, B x L = 16384, causal
// and not, H == Hkv): forward 1.13-2.61x (the least at D = 64, L <= 1024), inference
// 1.15-2.57x, backward (64 / 128) 1.31-1.75x, forward + backward 1.30-1.76x; off that set
// (scripts/attention-flash-probe.py, seventeenth session run 2, inference and training
// step): grouped heads (4 and 8 to 1) 1.38-1.95x, fp16 1.38-2.08x, Lq != Lk (1024 / 4096 both
// ways) 1.70-1.85x; through this class in run 6, 1.37-2.18x. Shorter sequences stay FA2's: 1 x 4096 0.49x, 256 x 256 at D = 64 1.00x
// forward.
inline bool flash2_class(const AttnParams& p) { return p.Lq >= 512 && p.Lk >= 512; }

inline bool measured_faster(const AttnParams& p) {
  if (p.stock == AttnStock::kFlash2) return flash2_class(p);
  if (p.dtype != DType::kBFloat16 || p.Lk != p.Lq || p.H != p.Hkv) return false;
  const int64_t L = p.Lq;
  if (p.lse != nullptr) {  // training
    if (p.D == 64) return L >= (p.causal ? 16384 : 2048);
    if (p.D == 128) return p.causal ? L >= 16384 : (L >= 4096 && L < 8192) || L >= 16384;
    return p.causal ? L >= 4096 : (L >= 1024 && L <= 2048) || L >= 8192;
  }
  if (p.D == 64) return L >= (p.causal ? 8192 : 2048);
  if (p.D == 128) return L >= (p.causal ? 4096 : 8192);
  return L >= (p.causal ? 2048 : 1024);
}

// The backward against cuDNN's: slower everywhere measured (0.76-0.94x in run 9; D = 64
// 0.87-0.95x faster since), so stock. Against FA2's, the class above. In deterministic mode
// (where SDPA calls the flash op pair and FA2's backward repeats bit for bit too) with the
// ordered dQ, a training step (our forward, our backward) against stock's, B x L = 16384,
// bf16 (scripts/attention-flash-probe.py, seventeenth session run 3): D = 128 1.22-1.78x (L
// 1024-8192, causal and not), D = 64 causal 1.10-1.36x, D = 64 non-causal 0.91-1.13x (two
// adders a chunk per key block, each waiting for the last: stock there). Measured on bf16
// self-attention with equal heads only, so the ordered dQ takes only that.
inline bool bwd_measured_faster(const AttnBwdParams& p) {
  const AttnParams& f = p.fwd;
  if (f.stock != AttnStock::kFlash2 || !flash2_class(f)) return false;
  return !p.deterministic || (f.dtype == DType::kBFloat16 && f.H == f.Hkv && f.Lq == f.Lk && f.Lq >= 1024 &&
                              (f.D == 128 || f.causal));
}

// The head dim 256 backward (bwd_mainloop_split.cuh), nineteenth session run 3 (the bench's
// bwd pass, flyops forced against stock in alternating rounds, bf16, B x L = 16384, H = 8):
// against cuDNN 1.15 / 1.13x non-causal and 1.06 / 1.04x causal at L = 512 / 1024, 1.06 /
// 1.10x non-causal at 8192 / 16384; 0.89-1.04x elsewhere (L = 2048-4096, causal from 2048),
// so stock there, except causal at 16384: 1.05x in the bench (twentieth session, run 10), and
// in a whole step behind our forward 1.066x against 1.024x with stock's backward (twenty-first
// session, run 1). Against FA2 1.53-1.76x at every length. The ordered dQ at D = 256 was not
// measured.
inline bool bwd_d256_measured_faster(const AttnBwdParams& p) {
  const AttnParams& f = p.fwd;
  if (p.deterministic) return false;
  if (f.stock == AttnStock::kFlash2) return flash2_class(f);
  if (f.dtype != DType::kBFloat16 || f.H != f.Hkv || f.Lq != f.Lk) return false;
  return (f.Lq >= 512 && f.Lq <= 1024) || f.Lq >= (f.causal ? 16384 : 8192);
}

// Why stock's backward runs, or nullptr where ours measured faster.
inline const char* bwd_stock_reason(const AttnBwdParams& p) {
  const bool faster = p.fwd.D == 256 ? bwd_d256_measured_faster(p) : bwd_measured_faster(p);
  return faster ? nullptr : kStockFaster;
}

}  // namespace flyops::attention
