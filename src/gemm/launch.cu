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
#include "splitk.cuh"

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
int cluster_for(const GemmParams& p) { return p.cluster == 2 && p.M > gemm::Wide::kBM ? 2 : 1; }

// SMs of the device, asked once.
struct SmCount {};
int device_sms(int device) {
  return per_device_once<SmCount, 0>(device, [&] {
    int n = 0;
    return cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device) == cudaSuccess ? n
                                                                                             : (cudaGetLastError(), 132);
  });
}

// One launch as the kernel sees it (for the split-K path: the transposed problem).
struct Problem {
  int64_t M, N, K, batch;
  bool a_k_major, b_k_major;
  void* c;
  int64_t ldc, batch_stride_c;
  float alpha, beta;
  const void* d;
  int64_t d_stride_m, d_stride_n, batch_stride_d;
  bool tma_c;
  int device;
  cudaStream_t stream;
};

template <typename Cfg, typename T, typename TOut, bool kAK, bool kBK, int kCluster>
Status launch(const Problem& q, const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc) {
  auto* kernel = &flyops_gemm<Cfg, T, TOut, kAK, kBK, kCluster>;
  constexpr int kId = (std::is_same_v<T, tile::bf16> ? 0 : 8) + (kAK ? 4 : 0) + (kBK ? 2 : 0) + (kCluster - 1);
  // Per instantiation and device: the shared-memory opt-in, then how many clusters fit.
  const int resident = per_device_once<Cfg, kId>(q.device, [&] {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return kCluster > 1 ? tile::max_active_clusters(kernel, dim3(gemm::kThreads), Cfg::kSmemBytes, kCluster)
                        : device_sms(q.device);
  });
  if (resident <= 0) return Status::kCudaError;
  gemm::KernelArgs<T, TOut> args;
  args.M = q.M, args.N = q.N, args.K = q.K;
  const int tiles_m = static_cast<int>((q.M + Cfg::kBM - 1) / Cfg::kBM);
  const int tiles_n = static_cast<int>((q.N + Cfg::kBN - 1) / Cfg::kBN);
  args.sched = gemm::Scheduler{tiles_m, tiles_n, kCluster, gemm::Scheduler::count(tiles_m, tiles_n, kCluster, q.batch)};
  args.batch_stride_c = q.batch_stride_c;
  const bool use_d = q.beta != 0.f && q.d != nullptr;
  args.batch_stride_d = use_d ? q.batch_stride_d : 0;
  args.epi = gemm::EpilogueArgs<T, TOut>{static_cast<TOut*>(q.c), q.ldc, q.alpha, q.beta,
                                         use_d ? static_cast<const T*>(q.d) : nullptr, q.d_stride_m, q.d_stride_n};
  args.tma_store = Cfg::kTmaStore && q.tma_c;
  const int64_t clusters = args.sched.total < resident ? args.sched.total : resident;
  const dim3 grid(static_cast<unsigned>(clusters * kCluster));
  cudaError_t e;
  if constexpr (kCluster > 1) {
    e = tile::launch_cluster(kernel, grid, dim3(gemm::kThreads), Cfg::kSmemBytes, q.stream, kCluster, ma, mb, mc,
                             args);
  } else {
    kernel<<<grid, gemm::kThreads, Cfg::kSmemBytes, q.stream>>>(ma, mb, mc, args);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// The runtime choices (operand majors, cluster size) into template parameters.
template <typename Cfg, typename T, typename TOut, int kCluster, typename... Maps>
Status launch_layout(const Problem& q, const Maps&... maps) {
  if (q.a_k_major)
    return q.b_k_major ? launch<Cfg, T, TOut, true, true, kCluster>(q, maps...)
                       : launch<Cfg, T, TOut, true, false, kCluster>(q, maps...);
  return q.b_k_major ? launch<Cfg, T, TOut, false, true, kCluster>(q, maps...)
                     : launch<Cfg, T, TOut, false, false, kCluster>(q, maps...);
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
  if (const char* why = tile::tma_check(operand_shape(p.a, p.M, p.K, p.batch, gemm::Wide::kBM))) return fail(why);
  if (const char* why = tile::tma_check(operand_shape(p.b, p.N, p.K, p.batch, gemm::Wide::kBN))) return fail(why);
  return Support{true, ""};
}

namespace {

// Both operands' tensor maps (B's box: each CTA of a cluster loads 1/cluster of the rows);
// on refusal, g_last_error says which and why.
bool encode_operands(CUtensorMap* ma, CUtensorMap* mb, const tile::TmaShape& sa, const tile::TmaShape& sb,
                     CUtensorMapDataType type) {
  CUresult r = CUDA_SUCCESS;
  const bool a_ok = tile::tma_encode(ma, sa, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r);
  if (a_ok && tile::tma_encode(mb, sb, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r)) return true;
  const tile::TmaShape& bad = a_ok ? sb : sa;
  std::snprintf(g_last_error, sizeof(g_last_error),
                "the driver refused the TMA descriptor of %s (CUresult %d; dims %llu x %llu x %llu, strides %llu, "
                "%llu bytes)",
                a_ok ? "B" : "A", static_cast<int>(r), (unsigned long long)bad.dims[0],
                (unsigned long long)bad.dims[1], (unsigned long long)bad.dims[2],
                (unsigned long long)bad.strides_bytes[0], (unsigned long long)bad.strides_bytes[1]);
  return false;
}

// The wide kernel on the problem as given.
template <typename T>
Status run_wide(const GemmParams& p, CUtensorMapDataType type) {
  const int cluster = cluster_for(p);
  CUtensorMap ma, mb;
  if (!encode_operands(&ma, &mb, operand_shape(p.a, p.M, p.K, p.batch, gemm::Wide::kBM),
                       operand_shape(p.b, p.N, p.K, p.batch, gemm::Wide::kBN / cluster), type))
    return Status::kUnsupported;
  // C through TMA stores where TMA can describe it (and the tuning hook allows), else from
  // registers; the unused map stays zeroed and is never touched.
  CUtensorMap mc{};
  const bool tma_c = p.epilogue != 1 && p.N % 8 == 0 && tile::tma_encode(&mc, output_shape(p), type);
  const Problem q{p.M,          p.N,          p.K,     p.batch,  p.a.k_major, p.b.k_major,
                  p.c,          p.ldc,        p.batch_stride_c,  p.alpha,  p.beta,      p.d,
                  p.d_stride_m, p.d_stride_n, p.batch_stride_d,  tma_c,    p.device,    static_cast<cudaStream_t>(p.stream)};
  return cluster == 2 ? launch_layout<gemm::Wide, T, T, 2>(q, ma, mb, mc)
                      : launch_layout<gemm::Wide, T, T, 1>(q, ma, mb, mc);
}

// The split-K path: C^T = B A^T with the narrow kernel (B's N rows stream through 128-row
// tiles, the <= 64 rows of A ride along as the narrow side), K cut into `splits` equal
// parts that the kernel sees as batch entries, fp32 partials [split][N][M] in the
// workspace, then one reduction kernel adds them in split order (deterministic) with
// alpha, beta * D and the rounding.
template <typename T>
Status run_splitk(const GemmParams& p, int splits, CUtensorMapDataType type) {
  const int64_t ks = p.K / splits;
  auto split = [&](GemmOperand op) {  // K cut into `splits` runs of ks: a batch dimension
    op.batch_stride = op.k_major ? ks : ks * op.ld;
    return op;
  };
  CUtensorMap ma, mb;
  if (!encode_operands(&ma, &mb, operand_shape(split(p.b), p.N, ks, splits, gemm::Narrow::kBM),
                       operand_shape(split(p.a), p.M, ks, splits, gemm::Narrow::kBN), type))
    return Status::kUnsupported;
  float* part = static_cast<float*>(p.workspace);
  const CUtensorMap mc{};
  const Problem q{p.N, p.M, ks, splits, p.b.k_major, p.a.k_major, part,  p.M,      p.N * p.M,
                  1.f, 0.f, nullptr, 0, 0,         0,           false, p.device, static_cast<cudaStream_t>(p.stream)};
  const Status s = launch_layout<gemm::Narrow, T, float, 1>(q, ma, mb, mc);
  if (s != Status::kSuccess) return s;
  const bool use_d = p.beta != 0.f && p.d != nullptr;
  const dim3 grid(static_cast<unsigned>((p.N + gemm::kReduceThreads - 1) / gemm::kReduceThreads),
                  static_cast<unsigned>(p.M));
  flyops_gemm_splitk_reduce<T><<<grid, gemm::kReduceThreads, 0, static_cast<cudaStream_t>(p.stream)>>>(
      part, splits, p.N * p.M, p.M, p.N, static_cast<T*>(p.c), p.ldc, p.alpha, p.beta,
      use_d ? static_cast<const T*>(p.d) : nullptr, p.d_stride_m, p.d_stride_n);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// How many parts to cut K into for the split-K path, 0 when it does not apply: a few rows
// (M <= 64, one batch entry), K in whole 64-element blocks. The fewest parts that give
// every SM a tile, keeping >= 4 blocks per part; parts divide the block count exactly.
int splitk_parts(const GemmParams& p, int sms) {
  if (p.path == 1 || p.M > gemm::Narrow::kBN || p.batch != 1 || p.K % gemm::kBK != 0) return 0;
  const int64_t tiles = (p.N + gemm::Narrow::kBM - 1) / gemm::Narrow::kBM, blocks = p.K / gemm::kBK;
  int best = 1;
  for (int s = 1; s <= 16; ++s) {
    if (blocks % s != 0 || blocks / s < 4) continue;
    best = s;
    if (tiles * s >= sms) break;
  }
  return best;
}

// The split-K path's fp32 partials: [splits][N][M].
size_t partials_bytes(const GemmParams& p, int splits) {
  return static_cast<size_t>(splits) * static_cast<size_t>(p.N * p.M) * sizeof(float);
}

}  // namespace

size_t gemm_workspace_bytes(const GemmParams& p, const DeviceInfo& dev) {
  return partials_bytes(p, splitk_parts(p, dev.sm_count > 0 ? dev.sm_count : 132));
}

Status gemm_run(const GemmParams& p) {
  const CUtensorMapDataType type =
      p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const int splits = splitk_parts(p, device_sms(p.device));
  const bool splitk = splits > 0 && p.workspace != nullptr && p.workspace_bytes >= partials_bytes(p, splits);
  if (p.dtype == DType::kBFloat16)
    return splitk ? run_splitk<tile::bf16>(p, splits, type) : run_wide<tile::bf16>(p, type);
  return splitk ? run_splitk<tile::fp16>(p, splits, type) : run_wide<tile::fp16>(p, type);
}

const char* gemm_last_error() { return g_last_error; }

const char* gemm_kernel_name(const GemmParams& p, const DeviceInfo& dev) {
  thread_local char name[96];
  const int splits = splitk_parts(p, dev.sm_count > 0 ? dev.sm_count : 132);
  char tail[24] = "";
  if (splits > 0) std::snprintf(tail, sizeof(tail), ",splitk%d", splits);
  std::snprintf(name, sizeof(name), "flyops_gemm<%s,A:%s-major,B:%s-major%s>",
                p.dtype == DType::kBFloat16 ? "bf16" : "fp16", p.a.k_major ? "k" : "m", p.b.k_major ? "k" : "n", tail);
  return name;
}

}  // namespace flyops
