// Dense GEMM on the tile layer (issue 4): for each batch entry z,
//   C[M, N] = alpha * A[M, K] * B[K, N] + beta * D[M, N]
// 16-bit inputs (bf16, fp16), fp32 accumulation, output in the input dtype. A and B are
// given as (pointer, leading stride, major-ness): K-major A is row-major [M, K], M-major A
// is column-major; K-major B is [N, K] row-major (B transposed, "TN"), N-major B is [K, N]
// row-major. C is row-major with ldc (a column-major C is the transposed problem, which
// the caller sets up). D may broadcast through zero strides. Torch-free.
#pragma once

#include <cstdint>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/rms_norm.h"  // Support, Stream
#include "flyops/status.h"

namespace flyops {

struct GemmOperand {
  const void* ptr = nullptr;
  int64_t ld = 0;             // elements between consecutive rows of the stored matrix
  bool k_major = true;        // stored rows run along K
  int64_t batch_stride = 0;   // elements between batch entries
};

struct GemmParams {
  int64_t M = 0, N = 0, K = 0;
  int64_t batch = 1;
  DType dtype = DType::kBFloat16;
  GemmOperand a;  // K-major: (m, k) at a[m * ld + k]; M-major: at a[k * ld + m]
  GemmOperand b;  // K-major: (k, n) at b[n * ld + k]; N-major: at b[k * ld + n]
  void* c = nullptr;
  int64_t ldc = 0, batch_stride_c = 0;
  float alpha = 1.f, beta = 0.f;
  // The addend: (m, n) at d[m * d_stride_m + n * d_stride_n]; ignored (never read) when
  // beta == 0 or d is null. Same dtype as C.
  const void* d = nullptr;
  int64_t d_stride_m = 0, d_stride_n = 0, batch_stride_d = 0;
  int cluster = 0;   // CTAs per cluster, 1 or 2; 0: the launcher's choice (tuning hook)
  int epilogue = 0;  // 1: C by the lanes' copies even where TMA stores could write it (tuning hook)
  // Which kernel (tuning hook): 0 the launcher's choice, 1 the wide kernel even where a
  // narrow one applies, 2 the decode kernel (TMA and wgmma) where the narrow kernel would
  // run, 3 the narrow kernel (src/gemm/gemv.cuh) wherever it can run.
  int path = 0;
  int gemv_runs = 0;  // narrow kernel (src/gemm/gemv.cuh): K runs (warps) per 16 rows of B, 1, 2, 4 or 8; 0: the launcher's choice (tuning hook)
  int kparts = 0;    // decode path: K parts per cluster (1, 2, 4 or 8); 0: the launcher's choice (tuning hook)
  int group_rows = 0;  // wide kernel: tile rows per band of its tile order (2 to 64, even); 0: the default (tuning hook)
  // Wide kernel split along K where its tiles are few (src/gemm/splitk.cuh): 1 none, 2, 4 or
  // 8 parts, 0 the launcher's choice. Splitting needs `workspace` (the parts' fp32 partial
  // tiles, gemm_workspace_bytes of them); without one the call runs unsplit.
  int split = 0;
  void* workspace = nullptr;  // 16-byte aligned
  int device = 0;
  Stream stream = nullptr;
};

// The router's answer: flyops' kernel, or stock with the reason (a static string).
struct GemmPlan {
  bool flyops = false;
  const char* reason = "";
  int cluster = 0;  // the measured table's CTAs per cluster (2: pairs); 0: the launcher's choice
};

// gemm_supports, then the measured table (src/gemm/tuned_table.h): ours only on shape
// classes where it measured faster than stock on the H200.
GemmPlan gemm_choose(const GemmParams& p, const DeviceInfo& dev);

// Test and benchmark hook, process-wide: 0 the router decides; 1 flyops whenever the
// kernel supports the call (past the table); 2 stock always. `cluster` (0, 1 or 2) and
// `group_rows` are what the binding puts in GemmParams for the calls it hands to flyops.
void gemm_force(int mode, int cluster = 0, int group_rows = 0);
int gemm_forced();
int gemm_forced_cluster();
int gemm_forced_group_rows();

// Whether the kernel can take the call (TMA must describe A and B), else why not.
Support gemm_supports(const GemmParams& p, const DeviceInfo& dev);

// The workspace the call's split-K path needs (0 when it does not split): the caller
// allocates it (on p.stream's order) and sets p.workspace.
size_t gemm_workspace_bytes(const GemmParams& p, const DeviceInfo& dev);

// Launch on p.stream (builds the tensor maps on the host). No allocation. kUnsupported when
// the driver refuses a tensor map that gemm_supports let through; gemm_last_error() (this
// thread) then says which and why, and the caller falls back.
Status gemm_run(const GemmParams& p);
const char* gemm_last_error();

// The kernel's name for logs ("flyops_gemm<bf16,A:k-major,B:k-major>"; on the decode path
// "flyops_gemm_decode<bf16,A:k-major,B:k-major,n16,kparts4>": A's padded width and the
// cluster's K parts; split along K "flyops_gemm_splitk<bf16,A:k-major,B:k-major,kparts8>");
// valid until this thread's next call.
const char* gemm_kernel_name(const GemmParams& p, const DeviceInfo& dev);

}  // namespace flyops
