// Host side of the GEMM: what TMA can describe, the tensor maps, the one launch function
// that turns the runtime choices (dtype, operand majors, cluster size) into template
// parameters.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "common/per_device.h"
#include "flyops/gemm.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/tma.h"
#include "kernel.cuh"

namespace flyops {
namespace {

thread_local char g_last_error[192] = "";

// The tensor map of one operand: {K, rows, batch} when K-major, {rows, K, batch} when not;
// boxes as traits.h's Operand loads them.
tile::TmaShape operand_shape(const GemmOperand& op, int64_t rows, int64_t K, int64_t batch, uint32_t box_rows) {
  tile::TmaShape s;
  s.rank = 3;
  s.elem_bytes = 2;
  s.base = op.ptr;
  s.dims[0] = static_cast<uint64_t>(op.k_major ? K : rows);
  s.dims[1] = static_cast<uint64_t>(op.k_major ? rows : K);
  s.dims[2] = static_cast<uint64_t>(batch);
  s.strides_bytes[0] = static_cast<uint64_t>(op.ld) * 2;
  // A single entry's batch stride is never followed; give TMA a valid one.
  s.strides_bytes[1] = static_cast<uint64_t>(batch > 1 ? op.batch_stride : op.ld * static_cast<int64_t>(s.dims[1])) * 2;
  s.box[0] = gemm::kSpanElems;
  s.box[1] = op.k_major ? box_rows : gemm::kBK;
  s.box[2] = 1;
  s.swizzle = gemm::kSwizzle;
  return s;
}

Support fail(const char* r) { return Support{false, r}; }

// Rows (or, MN-major, K rows) must not overlap, nor batch entries: TMA's strides are taken
// as given, and a zero or short stride is a broadcast the kernel does not promise to read.
const char* overlap(const GemmOperand& op, int64_t rows, int64_t K, int64_t batch) {
  const int64_t inner = op.k_major ? K : rows, outer = op.k_major ? rows : K;
  if (op.ld < inner) return "operand rows overlap (leading stride below the row length)";
  if (batch > 1 && op.batch_stride < op.ld * outer) return "operand batch entries overlap or broadcast";
  return nullptr;
}

// CTAs per cluster: single CTAs unless asked. Pairs with multicast measured no faster on
// the H200 so far (docs/perf-notes.md, GEMM v2/v3); the tuning hook keeps them reachable.
int cluster_for(const GemmParams& p) { return p.cluster == 2 && p.M > gemm::kBM ? 2 : 1; }

template <typename T, bool kAK, bool kBK, int kCluster>
Status launch(const GemmParams& p, const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc, bool tma_c) {
  auto* kernel = &flyops_gemm<T, kAK, kBK, kCluster>;
  // Per instantiation and device: the shared-memory opt-in, then how many clusters fit.
  const int resident = per_device_once<GemmParams, (std::is_same_v<T, tile::bf16> ? 0 : 8) + (kAK ? 4 : 0) +
                                                       (kBK ? 2 : 0) + (kCluster - 1)>(p.device, [&] {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, gemm::kSmemBytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    if (kCluster > 1) return tile::max_active_clusters(kernel, dim3(gemm::kThreads), gemm::kSmemBytes, kCluster);
    int sms = 0;
    return cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, p.device) == cudaSuccess
               ? sms
               : (cudaGetLastError(), 0);
  });
  if (resident <= 0) return Status::kCudaError;
  gemm::KernelArgs<T> args;
  args.M = p.M, args.N = p.N, args.K = p.K;
  const int tiles_m = static_cast<int>((p.M + gemm::kBM - 1) / gemm::kBM);
  const int tiles_n = static_cast<int>((p.N + gemm::kBN - 1) / gemm::kBN);
  args.sched = gemm::Scheduler{tiles_m, tiles_n, kCluster, gemm::Scheduler::count(tiles_m, tiles_n, kCluster, p.batch)};
  args.batch_stride_c = p.batch_stride_c;
  const bool use_d = p.beta != 0.f && p.d != nullptr;
  args.batch_stride_d = use_d ? p.batch_stride_d : 0;
  args.epi = gemm::EpilogueArgs<T>{static_cast<T*>(p.c), p.ldc, p.alpha, p.beta,
                                   use_d ? static_cast<const T*>(p.d) : nullptr, p.d_stride_m, p.d_stride_n};
  args.tma_store = tma_c;
  const int64_t clusters = args.sched.total < resident ? args.sched.total : resident;
  const dim3 grid(static_cast<unsigned>(clusters * kCluster));
  cudaError_t e;
  if constexpr (kCluster > 1) {
    e = tile::launch_cluster(kernel, grid, dim3(gemm::kThreads), gemm::kSmemBytes, p.stream, kCluster, ma, mb, mc, args);
  } else {
    kernel<<<grid, gemm::kThreads, gemm::kSmemBytes, p.stream>>>(ma, mb, mc, args);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

template <typename T, int kCluster, typename... Maps>
Status launch_layout(const GemmParams& p, const Maps&... maps) {
  if (p.a.k_major)
    return p.b.k_major ? launch<T, true, true, kCluster>(p, maps...) : launch<T, true, false, kCluster>(p, maps...);
  return p.b.k_major ? launch<T, false, true, kCluster>(p, maps...) : launch<T, false, false, kCluster>(p, maps...);
}

template <typename T, typename... Maps>
Status launch_cluster_size(const GemmParams& p, int cluster, const Maps&... maps) {
  return cluster == 2 ? launch_layout<T, 2>(p, maps...) : launch_layout<T, 1>(p, maps...);
}

// C's tensor map for the TMA-store epilogue: {N, M, batch} in 64 x 64 boxes. Only for rows
// of whole 16-byte chunks: at the inner edge TMA stores write whole chunks (measured on the
// H200: N % 8 != 0 overwrote the padding after row ends), so the other widths take the
// register epilogue.
tile::TmaShape output_shape(const GemmParams& p) {
  tile::TmaShape s;
  s.rank = 3;
  s.elem_bytes = 2;
  s.base = p.c;
  s.dims[0] = static_cast<uint64_t>(p.N);
  s.dims[1] = static_cast<uint64_t>(p.M);
  s.dims[2] = static_cast<uint64_t>(p.batch);
  s.strides_bytes[0] = static_cast<uint64_t>(p.ldc) * 2;
  s.strides_bytes[1] = static_cast<uint64_t>(p.batch > 1 ? p.batch_stride_c : p.ldc * p.M) * 2;
  s.box[0] = gemm::kStoreCols;
  s.box[1] = 64;
  s.box[2] = 1;
  s.swizzle = gemm::kSwizzle;
  return s;
}

}  // namespace

Support gemm_supports(const GemmParams& p, const DeviceInfo& dev) {
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (p.dtype != DType::kBFloat16 && p.dtype != DType::kFloat16) return fail("dtype not bfloat16 or float16");
  if (p.M <= 0 || p.N <= 0 || p.K <= 0 || p.batch <= 0) return fail("empty GEMM");
  if (p.M >= (int64_t{1} << 31) || p.N >= (int64_t{1} << 31) || p.K >= (int64_t{1} << 31) ||
      p.batch >= (int64_t{1} << 16))
    return fail("M, N or K beyond 2^31, or more than 65535 batch entries");
  if (p.ldc < p.N) return fail("C rows overlap (ldc < N)");
  if (p.batch > 1 && p.batch_stride_c < p.ldc * p.M) return fail("C batch entries overlap");
  if (const char* why = overlap(p.a, p.M, p.K, p.batch)) return fail(why);
  if (const char* why = overlap(p.b, p.N, p.K, p.batch)) return fail(why);
  if (const char* why = tile::tma_check(operand_shape(p.a, p.M, p.K, p.batch, gemm::kBM))) return fail(why);
  if (const char* why = tile::tma_check(operand_shape(p.b, p.N, p.K, p.batch, gemm::kBN))) return fail(why);
  return Support{true, ""};
}

Status gemm_run(const GemmParams& p) {
  const CUtensorMapDataType type =
      p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int cluster = cluster_for(p);
  CUtensorMap ma, mb;
  // B's box: each CTA of a cluster loads 1/cluster of the rows (K-major boxes span them all).
  const tile::TmaShape sa = operand_shape(p.a, p.M, p.K, p.batch, gemm::kBM);
  const tile::TmaShape sb = operand_shape(p.b, p.N, p.K, p.batch, gemm::kBN / cluster);
  CUresult r = CUDA_SUCCESS;
  const bool a_ok = tile::tma_encode(&ma, sa, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r);
  if (!a_ok || !tile::tma_encode(&mb, sb, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r)) {
    const tile::TmaShape& bad = a_ok ? sb : sa;
    std::snprintf(g_last_error, sizeof(g_last_error),
                  "the driver refused the TMA descriptor of %s (CUresult %d; dims %llu x %llu x %llu, strides %llu, "
                  "%llu bytes)",
                  a_ok ? "B" : "A", static_cast<int>(r), (unsigned long long)bad.dims[0],
                  (unsigned long long)bad.dims[1], (unsigned long long)bad.dims[2],
                  (unsigned long long)bad.strides_bytes[0], (unsigned long long)bad.strides_bytes[1]);
    return Status::kUnsupported;
  }
  // C through TMA stores where TMA can describe it (and the tuning hook allows), else from
  // registers; the unused map stays zeroed and is never touched.
  CUtensorMap mc{};
  const bool tma_c = p.epilogue != 1 && p.N % 8 == 0 && tile::tma_encode(&mc, output_shape(p), type);
  return p.dtype == DType::kBFloat16 ? launch_cluster_size<tile::bf16>(p, cluster, ma, mb, mc, tma_c)
                                     : launch_cluster_size<tile::fp16>(p, cluster, ma, mb, mc, tma_c);
}

const char* gemm_last_error() { return g_last_error; }

const char* gemm_kernel_name(const GemmParams& p) {
  static const char* const names[8] = {
      "flyops_gemm<fp16,A:m-major,B:n-major>", "flyops_gemm<fp16,A:m-major,B:k-major>",
      "flyops_gemm<fp16,A:k-major,B:n-major>", "flyops_gemm<fp16,A:k-major,B:k-major>",
      "flyops_gemm<bf16,A:m-major,B:n-major>", "flyops_gemm<bf16,A:m-major,B:k-major>",
      "flyops_gemm<bf16,A:k-major,B:n-major>", "flyops_gemm<bf16,A:k-major,B:k-major>"};
  return names[(p.dtype == DType::kBFloat16 ? 4 : 0) + (p.a.k_major ? 2 : 0) + (p.b.k_major ? 1 : 0)];
}

}  // namespace flyops
