// RMSNorm over the last N elements of each of M rows:
//   y = x * rstd * weight,  rstd = 1 / sqrt(mean(x^2) + eps)
// and its backward (dx, dweight). Torch-free: the binding fills these structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/status.h"

struct CUstream_st;

namespace flyops {

using Stream = CUstream_st*;  // the same type as cudaStream_t

struct RmsNormFwdParams {
  int64_t M = 0;  // rows
  int64_t N = 0;  // elements per row (product of normalized_shape)
  DType dtype = DType::kOther;  // of x, y and weight alike
  const void* x = nullptr;
  int64_t x_row_stride = 0;  // elements between row starts; the row itself is contiguous
  const void* weight = nullptr;  // [N] contiguous, or null
  void* y = nullptr;
  int64_t y_row_stride = 0;
  float* rstd = nullptr;  // [M] fp32 contiguous
  float eps = 0.f;
  int device = 0;
  Stream stream = nullptr;
};

struct RmsNormBwdParams {
  int64_t M = 0;
  int64_t N = 0;
  DType dtype = DType::kOther;  // of dy, x, weight, dx and dweight alike
  const void* dy = nullptr;
  int64_t dy_row_stride = 0;
  const void* x = nullptr;
  int64_t x_row_stride = 0;
  const float* rstd = nullptr;   // [M] fp32 contiguous, as written by either forward
  const void* weight = nullptr;  // [N] or null (then g = dy)
  void* dx = nullptr;            // null: dx not requested
  int64_t dx_row_stride = 0;
  void* dweight = nullptr;       // [N]; null: dweight not requested (or no weight)
  void* workspace = nullptr;     // rms_norm_bwd_workspace_bytes() bytes, 16-byte aligned
  std::size_t workspace_bytes = 0;
  int device = 0;
  Stream stream = nullptr;
};

// The answer of supports(): ok, or the reason the stock kernel must take the call.
struct Support {
  bool ok = false;
  const char* reason = "";  // static string
};

// The router's choice for one call. kind == kStock means: call the stock kernel.
struct RmsNormPlan {
  enum class Kind { kStock, kFused, kSplit };
  Kind kind = Kind::kStock;
  int vec = 1;      // elements per memory access (16 bytes' worth, or 1 when unaligned)
  int shape = -1;   // row-shape index (kFused)
  const char* reason = "";  // why stock, when kind == kStock
  bool flyops() const { return kind != Kind::kStock; }
};

// Cheap, allocation-free checks. Pure functions of the params and the device.
Support rms_norm_fwd_supports(const RmsNormFwdParams& p, const DeviceInfo& dev);
Support rms_norm_bwd_supports(const RmsNormBwdParams& p, const DeviceInfo& dev);

// supports(), then the kernel configuration from the tuned table (or stock where
// the H200 measurements say stock is faster).
RmsNormPlan rms_norm_fwd_choose(const RmsNormFwdParams& p, const DeviceInfo& dev);
RmsNormPlan rms_norm_bwd_choose(const RmsNormBwdParams& p, const DeviceInfo& dev);

// Writes a short kernel description ("flyops_rms_norm_fwd<bf16,v8,4x128/128>") into buf.
void rms_norm_plan_name(const RmsNormPlan& plan, DType dtype, bool backward, char* buf,
                        std::size_t len);

// Scratch the backward needs for this plan (deterministic per-CTA dweight partials).
std::size_t rms_norm_bwd_workspace_bytes(const RmsNormBwdParams& p, const RmsNormPlan& plan,
                                         const DeviceInfo& dev);

// Launch on p.stream. No allocation, no host synchronisation.
Status rms_norm_fwd(const RmsNormFwdParams& p, const RmsNormPlan& plan);
Status rms_norm_bwd(const RmsNormBwdParams& p, const RmsNormPlan& plan);

// Test and tuning hook: force a row shape (or -1 for the table's choice). Not thread-safe
// against concurrent calls; meant for benchmarks that compare configurations.
void rms_norm_force_shape(int shape);
int rms_norm_num_shapes();
// Row shape `shape`: fragments per thread, threads per row, threads per CTA, stages,
// CTAs per row (cluster size).
void rms_norm_shape_info(int shape, int out[5]);

}  // namespace flyops
