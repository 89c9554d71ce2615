// Fused attention forward (issue 5), torch-free: for each batch entry b and query head h,
//   O[b, h] = softmax(scale * Q[b, h] K[b, g]^T, masked) V[b, g],   g = h / (H / Hkv),
//   LSE[b, h, i] = log sum_j exp(scale * q_i . k_j) over the keys row i sees (natural log;
//   +inf for a row that sees no key, whose O row is 0).
// 16-bit inputs (bf16, fp16), head dims 64, 128 and 256, fp32 softmax and accumulation,
// output in the input dtype. Tensors are [B, H, L, D] views given by strides (elements)
// with the head dim contiguous. Causal: query i sees keys j <= i + causal_offset (0 for
// PyTorch's SDPA, top-left; Lk - Lq for the flash op, bottom-right).
#pragma once

#include <cstddef>
#include <cstdint>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/rms_norm.h"  // Support, Stream
#include "flyops/status.h"

namespace flyops {

struct AttnTensor {
  const void* ptr = nullptr;
  int64_t stride_b = 0, stride_h = 0, stride_l = 0;  // elements; the head dim has unit stride
};

// The stock kernel a call would run if flyops did not take it: the router's tables are per
// alternative. cuDNN's for the cuDNN op (SDPA's default on the H200), FlashAttention-2's for
// the flash op (SDPA's flash backend: chosen by the user, or by deterministic mode, in which
// SDPA does not pick cuDNN).
enum class AttnStock { kCudnn, kFlash2 };

struct AttnParams {
  int64_t B = 0, H = 0, Hkv = 0, Lq = 0, Lk = 0, D = 0;
  DType dtype = DType::kBFloat16;
  AttnTensor q, k, v;
  AttnTensor o;  // written (ptr is the output)
  float* lse = nullptr;  // null: not computed; else (b, h, i) at lse[b * lse_stride_b + h * lse_stride_h + i]
  int64_t lse_stride_b = 0, lse_stride_h = 0;
  float scale = 0.f;  // > 0
  bool causal = false;
  int64_t causal_offset = 0;
  AttnStock stock = AttnStock::kCudnn;  // routing only: the kernel never reads it
  int device = 0;
  Stream stream = nullptr;
};

struct AttnPlan {
  bool flyops = false;
  const char* reason = "";
};

// Whether the kernel can take the call, else why not (a static string). Pure.
Support attention_supports(const AttnParams& p, const DeviceInfo& dev);

// attention_supports, then the measured table (src/attention/tuned_table.h).
AttnPlan attention_choose(const AttnParams& p, const DeviceInfo& dev);

// Test and benchmark hook, process-wide: 0 the router decides; 1 flyops whenever the kernel
// supports the call; 2 stock always.
void attention_force(int mode);
int attention_forced();

// Launch on p.stream (tensor maps built on the host, cached). No allocation, no sync.
// kUnsupported when the driver refuses a tensor map; attention_last_error() says why.
Status attention_run(const AttnParams& p);
const char* attention_last_error();

// "flyops_attention_fwd<bf16,d128,causal>"; valid until this thread's next call.
const char* attention_kernel_name(const AttnParams& p);

// The backward (issue 5): given the forward's inputs, its output O and log-sum-exp, and dO,
//   dV[b, g] = sum over the group's heads h of P^T dO,   dP = dO V^T,   Dsum_i = dO_i . O_i,
//   dS = P o (dP - Dsum),   dQ = scale dS K,   dK[b, g] = sum over h of scale dS^T Q,
// with P = exp(scale Q K^T - LSE) recomputed from the stored log-sum-exp. Head dims 64 and
// 128 (256 goes to stock: two head-dim accumulators do not fit a thread's registers).
// fwd.o is read (the forward's output), fwd.lse read (required). dQ accumulates in fp32 in
// the workspace by bulk reductions from every key block, in any order. `deterministic` makes
// the key blocks take turns per query block (ascending) so that the sums are the same run to
// run (bit for bit on the H200: scripts/attention-determinism.py); the binding sets it in
// deterministic mode.
struct AttnBwdParams {
  AttnParams fwd;  // shapes, q, k, v, o (read), lse (read), scale, causal, device, stream
  AttnTensor dout;
  AttnTensor dq, dk, dv;  // written (ptr is the output), dq with fwd.H heads, dk/dv with fwd.Hkv
  void* workspace = nullptr;  // attention_bwd_workspace_bytes(), 256-byte aligned
  bool deterministic = false;
};

// fp32 dQ accumulators, the scaled log-sum-exp and Dsum, per query row padded to the block,
// and the deterministic mode's turn counters.
size_t attention_bwd_workspace_bytes(const AttnParams& fwd);
Support attention_bwd_supports(const AttnBwdParams& p, const DeviceInfo& dev);
// attention_bwd_supports, then the measured table (src/attention/tuned_table.h).
AttnPlan attention_bwd_choose(const AttnBwdParams& p, const DeviceInfo& dev);
// The backward's own test hook, as attention_force (forward and backward are routed apart);
// 3: flyops with the ordered (deterministic) dQ, for the binding's determinism diagnostics.
void attention_bwd_force(int mode);
int attention_bwd_forced();
// Three launches on fwd.stream: Dsum and the scaled log-sum-exp (and dQ's accumulators
// cleared), the main kernel (dK, dV; dQ's partial sums), dQ scaled into the output dtype.
Status attention_bwd_run(const AttnBwdParams& p);
const char* attention_bwd_kernel_name(const AttnBwdParams& p);

}  // namespace flyops
