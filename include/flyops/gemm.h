// Dense GEMM on the tile layer (issue 4, first kernel): C[M, N] = A[M, K] * B[N, K]^T, bf16 in,
// fp32 accumulation, bf16 out. Both operands K-contiguous ("TN"); the other layouts, fp16,
// epilogues and the aten overrides come next. Torch-free.
#pragma once

#include <cstdint>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/rms_norm.h"  // Support, Stream
#include "flyops/status.h"

namespace flyops {

struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  DType dtype = DType::kBFloat16;
  const void* a = nullptr;  // [M, K], row stride lda elements
  int64_t lda = 0;
  const void* b = nullptr;  // [N, K], row stride ldb elements
  int64_t ldb = 0;
  void* c = nullptr;        // [M, N], row stride ldc elements
  int64_t ldc = 0;
  int device = 0;
  Stream stream = nullptr;
};

// Whether the kernel can take the call (TMA must describe A and B), else why not.
Support gemm_tn_supports(const GemmParams& p, const DeviceInfo& dev);

// Launch on p.stream (builds the two tensor maps on the host). No allocation.
Status gemm_tn(const GemmParams& p);

}  // namespace flyops
