// Host side of the GEMM: what TMA can describe, the tensor maps, the launch.
#include <cuda.h>
#include <cuda_runtime.h>

#include "common/per_device.h"
#include "flyops/gemm.h"
#include "flyops/tile/tma.h"
#include "kernel.cuh"

namespace flyops {
namespace {

tile::TmaShape operand(const void* base, int64_t rows, int64_t K, int64_t ld, uint32_t box_rows) {
  tile::TmaShape s;
  s.rank = 2;
  s.elem_bytes = 2;
  s.base = base;
  s.dims[0] = static_cast<uint64_t>(K);
  s.dims[1] = static_cast<uint64_t>(rows);
  s.strides_bytes[0] = static_cast<uint64_t>(ld) * 2;
  s.box[0] = gemm::kBK;
  s.box[1] = box_rows;
  s.swizzle = tile::Swizzle::k128B;
  return s;
}

Support fail(const char* r) { return Support{false, r}; }

}  // namespace

Support gemm_tn_supports(const GemmParams& p, const DeviceInfo& dev) {
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (p.dtype != DType::kBFloat16) return fail("dtype not bfloat16");
  if (p.M <= 0 || p.N <= 0 || p.K <= 0) return fail("empty GEMM");
  if (p.M >= (int64_t{1} << 31) || p.N >= (int64_t{1} << 31)) return fail("M or N beyond 2^31");
  if (p.ldc < p.N) return fail("C rows overlap (ldc < N)");
  if (const char* why = tile::tma_check(operand(p.a, p.M, p.K, p.lda, gemm::kBM))) return fail(why);
  if (const char* why = tile::tma_check(operand(p.b, p.N, p.K, p.ldb, gemm::kBN))) return fail(why);
  return Support{true, ""};
}

Status gemm_tn(const GemmParams& p) {
  CUtensorMap ma, mb;
  if (!tile::tma_encode(&ma, operand(p.a, p.M, p.K, p.lda, gemm::kBM), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) ||
      !tile::tma_encode(&mb, operand(p.b, p.N, p.K, p.ldb, gemm::kBN), CU_TENSOR_MAP_DATA_TYPE_BFLOAT16))
    return Status::kUnsupported;
  const int ok = per_device_once<GemmParams, 0>(p.device, [] {
    return cudaFuncSetAttribute(&flyops_gemm_tn_bf16, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                gemm::kSmemBytes) == cudaSuccess
               ? 1
               : (cudaGetLastError(), 0);
  });
  if (!ok) return Status::kCudaError;
  const dim3 grid(static_cast<unsigned>((p.N + gemm::kBN - 1) / gemm::kBN),
                  static_cast<unsigned>((p.M + gemm::kBM - 1) / gemm::kBM));
  gemm::KernelArgs args{p.M, p.N, p.K, static_cast<tile::bf16*>(p.c), p.ldc};
  flyops_gemm_tn_bf16<<<grid, gemm::kThreads, gemm::kSmemBytes, p.stream>>>(ma, mb, args);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

}  // namespace flyops
