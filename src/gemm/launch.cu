// Host side of the GEMM: what TMA can describe, the tensor maps, the one launch function
// that turns the runtime choices (dtype, operand majors, cluster size) into template
// parameters.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "common/per_device.h"
#include "common/smem_opt_in.h"
#include "flyops/gemm.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/tma.h"
#include "kernel.cuh"
#include "decode.cuh"
#include "gemv.cuh"
#include "splitk.cuh"
#include "tuned_table.h"  // wide_tiles

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

// C and the addend as every kernel's epilogue takes them; beta == 0 drops D (never read).
template <typename T>
gemm::EpilogueArgs<T> epilogue_args(const GemmParams& p) {
  const bool use_d = p.beta != 0.f && p.d != nullptr;
  return gemm::EpilogueArgs<T>{static_cast<T*>(p.c), p.ldc, p.alpha, p.beta,
                               use_d ? static_cast<const T*>(p.d) : nullptr, p.d_stride_m, p.d_stride_n};
}

// The kernels' arguments: sizes, the tile order, the epilogue.
template <typename Cfg, typename T>
gemm::KernelArgs<T> kernel_args(const GemmParams& p, bool tma_c, int cluster) {
  gemm::KernelArgs<T> args;
  args.M = p.M, args.N = p.N, args.K = p.K;
  const int tiles_m = static_cast<int>((p.M + Cfg::kBM - 1) / Cfg::kBM);
  const int tiles_n = static_cast<int>((p.N + Cfg::kBN - 1) / Cfg::kBN);
  args.sched = gemm::Scheduler{tiles_m, tiles_n, cluster, gemm::Scheduler::count(tiles_m, tiles_n, cluster, p.batch)};
  // The tuning hook's band height: even, so that pairs of tile rows stay in one band.
  if (p.group_rows >= 2 && p.group_rows <= 64 && p.group_rows % 2 == 0) args.sched.group_rows = p.group_rows;
  args.batch_stride_c = p.batch_stride_c;
  args.epi = epilogue_args<T>(p);
  args.batch_stride_d = args.epi.d != nullptr ? p.batch_stride_d : 0;
  args.tma_store = tma_c;
  args.form = gemm::epilogue_form(args.epi, args.batch_stride_d, p.N);
  return args;
}

template <typename Cfg, typename T, bool kAK, bool kBK, int kCluster>
Status launch(const GemmParams& p, bool tma_c, const CUtensorMap& ma, const CUtensorMap& mb, const CUtensorMap& mc) {
  auto* kernel = &flyops_gemm<Cfg, T, kAK, kBK, kCluster>;
  // Per instantiation (a local type is one per specialization) and device: the
  // shared-memory opt-in, then how many clusters fit.
  struct Tag {};
  const int resident = per_device_once<Tag, 0>(p.device, [&] {
    if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg::kSmemBytes) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return kCluster > 1 ? tile::max_active_clusters(kernel, dim3(gemm::kThreads), Cfg::kSmemBytes, kCluster)
                        : device_sms(p.device);
  });
  if (resident <= 0) return Status::kCudaError;
  const gemm::KernelArgs<T> args = kernel_args<Cfg, T>(p, tma_c, kCluster);
  const int64_t clusters = args.sched.total < resident ? args.sched.total : resident;
  const dim3 grid(static_cast<unsigned>(clusters * kCluster));
  const auto stream = static_cast<cudaStream_t>(p.stream);
  cudaError_t e;
  if constexpr (kCluster > 1) {
    e = tile::launch_cluster(kernel, grid, dim3(gemm::kThreads), Cfg::kSmemBytes, stream, kCluster, ma, mb, mc, args);
  } else {
    kernel<<<grid, gemm::kThreads, Cfg::kSmemBytes, stream>>>(ma, mb, mc, args);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// Split-K (splitk.cuh): `parts` CTAs per tile into the workspace, then the reduction and
// the epilogue, launched dependent on them.
template <typename T, bool kAK, bool kBK>
Status launch_split(const GemmParams& p, bool tma_c, int parts, const CUtensorMap& ma, const CUtensorMap& mb,
                    const CUtensorMap& mc) {
  using Cfg = gemm::Wide;
  constexpr auto partial = &flyops_gemm_splitk<T, kAK, kBK>;
  constexpr auto reduce = &flyops_gemm_splitk_reduce<T>;
  if (!smem_opt_in<partial, Cfg::kSmemBytes>(p.device) || !smem_opt_in<reduce, gemm::kReduceSmemBytes>(p.device))
    return Status::kCudaError;
  const gemm::KernelArgs<T> args = kernel_args<Cfg, T>(p, tma_c, 1);
  float* partials = static_cast<float*>(p.workspace);
  const auto stream = static_cast<cudaStream_t>(p.stream);
  partial<<<static_cast<unsigned>(args.sched.total * parts), gemm::kThreads, Cfg::kSmemBytes, stream>>>(
      ma, mb, args, partials, parts);
  if (cudaGetLastError() != cudaSuccess) return Status::kCudaError;
  const cudaError_t e = tile::launch_dependent(reduce, dim3(static_cast<unsigned>(args.sched.total * gemm::kSplitWarps)),
                                               dim3(32), gemm::kReduceSmemBytes, stream, mc, args,
                                               static_cast<const float*>(partials), parts);
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// The runtime choices (operand majors, cluster size, K parts) into template parameters.
template <typename Cfg, typename T, int kCluster>
Status launch_layout(const GemmParams& p, bool tma_c, int parts, const CUtensorMap& ma, const CUtensorMap& mb,
                     const CUtensorMap& mc) {
  if constexpr (kCluster == 1) {
    if (parts > 1) {
      if (p.a.k_major)
        return p.b.k_major ? launch_split<T, true, true>(p, tma_c, parts, ma, mb, mc)
                           : launch_split<T, true, false>(p, tma_c, parts, ma, mb, mc);
      return p.b.k_major ? launch_split<T, false, true>(p, tma_c, parts, ma, mb, mc)
                         : launch_split<T, false, false>(p, tma_c, parts, ma, mb, mc);
    }
  }
  if (p.a.k_major)
    return p.b.k_major ? launch<Cfg, T, true, true, kCluster>(p, tma_c, ma, mb, mc)
                       : launch<Cfg, T, true, false, kCluster>(p, tma_c, ma, mb, mc);
  return p.b.k_major ? launch<Cfg, T, false, true, kCluster>(p, tma_c, ma, mb, mc)
                     : launch<Cfg, T, false, false, kCluster>(p, tma_c, ma, mb, mc);
}

// K parts the call's split-K path would take, 1 where it does not apply (the decode path,
// pairs, the hook's split = 1): where the wide kernel's tiles fill less than half the SMs,
// the most parts (2, 4, 8) that keep the grid within one CTA per SM, each part at least
// eight K blocks long. The hook (split 2, 4, 8) forces a count where every part gets a block.
static_assert(gemm::Wide::kBM == 128 && gemm::Wide::kBN == 256, "wide_tiles counts 128 x 256 tiles");
int wanted_parts(const GemmParams& p, int sms) {
  if (p.split == 1 || cluster_for(p) == 2) return 1;
  const int64_t tiles = gemm::wide_tiles(p), blocks = (p.K + gemm::kBK - 1) / gemm::kBK;
  if (p.split == 2 || p.split == 4 || p.split == 8) return p.split <= blocks ? p.split : 1;
  int parts = 1;
  while (parts < 8 && tiles * parts * 2 <= sms && blocks >= parts * 2 * 8) parts *= 2;
  return parts;
}

// C's tensor map for the TMA-store epilogue: {N, M, batch} in 16 x 64 boxes. Only for rows
// of whole 16-byte chunks: at the inner edge TMA stores write whole chunks (measured on the
// H200: N % 8 != 0 overwrote the padding after row ends), so the other widths take the
// lanes' copies of the staged rows (epilogue.cuh).
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
  s.box[1] = gemm::kStoreRows;
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
  const bool a_ok = tile::tma_encode_cached(ma, sa, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r);
  if (a_ok && tile::tma_encode_cached(mb, sb, type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r)) return true;
  const tile::TmaShape& bad = a_ok ? sb : sa;
  std::snprintf(g_last_error, sizeof(g_last_error),
                "the driver refused the TMA descriptor of %s (CUresult %d; dims %llu x %llu x %llu, strides %llu, "
                "%llu bytes)",
                a_ok ? "B" : "A", static_cast<int>(r), (unsigned long long)bad.dims[0],
                (unsigned long long)bad.dims[1], (unsigned long long)bad.dims[2],
                (unsigned long long)bad.strides_bytes[0], (unsigned long long)bad.strides_bytes[1]);
  return false;
}

// The wide kernel on the problem as given, split along K (parts > 1) or not.
template <typename T>
Status run_wide(const GemmParams& p, int parts, CUtensorMapDataType type) {
  const int cluster = parts > 1 ? 1 : cluster_for(p);
  CUtensorMap ma, mb;
  if (!encode_operands(&ma, &mb, operand_shape(p.a, p.M, p.K, p.batch, gemm::Wide::kBM),
                       operand_shape(p.b, p.N, p.K, p.batch, gemm::Wide::kBN / cluster), type))
    return Status::kUnsupported;
  // C through TMA stores where TMA can describe it (and the tuning hook allows), else from
  // registers; the unused map stays zeroed and is never touched.
  CUtensorMap mc{};
  const bool tma_c = p.epilogue != 1 && p.N % 8 == 0 && tile::tma_encode_cached(&mc, output_shape(p), type);
  return cluster == 2 ? launch_layout<gemm::Wide, T, 2>(p, tma_c, 1, ma, mb, mc)
                      : launch_layout<gemm::Wide, T, 1>(p, tma_c, parts, ma, mb, mc);
}

// The decode kernel for the runtime choices: operand majors and A's padded width into
// template parameters; clusters of `parts` CTAs along K.
template <typename T, bool kWK, bool kXK, int kMP>
Status launch_decode(const GemmParams& p, const CUtensorMap& mw, const CUtensorMap& mx, int parts) {
  constexpr auto kernel = &flyops_gemm_decode<T, kWK, kXK, kMP>;
  constexpr int kSmem = gemm::DecodeConfig<kMP>::kSmemBytes;
  if (!smem_opt_in<kernel, kSmem>(p.device)) return Status::kCudaError;
  const gemm::DecodeArgs<T> args{p.M, p.N, p.K, epilogue_args<T>(p)};
  const int64_t tiles = (p.N + gemm::kDecodeRows - 1) / gemm::kDecodeRows;
  const dim3 grid(static_cast<unsigned>(tiles * parts));
  const auto stream = static_cast<cudaStream_t>(p.stream);
  cudaError_t e;
  if (parts > 1) {
    e = tile::launch_cluster(kernel, grid, dim3(gemm::kThreads), kSmem, stream, parts, mw, mx, args);
  } else {
    kernel<<<grid, gemm::kThreads, kSmem, stream>>>(mw, mx, args);
    e = cudaGetLastError();
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

template <typename T, int kMP>
Status launch_decode_layout(const GemmParams& p, const CUtensorMap& mw, const CUtensorMap& mx, int parts) {
  if constexpr (kMP == 16) {  // A K-major only (its MN-major blocks are 64 wide)
    return p.b.k_major ? launch_decode<T, true, true, 16>(p, mw, mx, parts)
                       : launch_decode<T, false, true, 16>(p, mw, mx, parts);
  } else {
    if (p.a.k_major)
      return p.b.k_major ? launch_decode<T, true, true, 64>(p, mw, mx, parts)
                         : launch_decode<T, false, true, 64>(p, mw, mx, parts);
    return p.b.k_major ? launch_decode<T, true, false, 64>(p, mw, mx, parts)
                       : launch_decode<T, false, false, 64>(p, mw, mx, parts);
  }
}

// A's rows padded to the decode kernel's narrow side.
int decode_width(const GemmParams& p) { return p.M <= 16 && p.a.k_major ? 16 : 64; }

// The decode path: B's rows (the transposed problem's A) in 128-row tiles, A's rows as the
// narrow side, K in `parts` runs reduced across a cluster.
template <typename T>
Status run_decode(const GemmParams& p, int parts, CUtensorMapDataType type) {
  const int mp = decode_width(p);
  CUtensorMap mw, mx;
  if (!encode_operands(&mx, &mw, operand_shape(p.a, p.M, p.K, 1, static_cast<uint32_t>(mp)),
                       operand_shape(p.b, p.N, p.K, 1, gemm::kDecodeRows), type))
    return Status::kUnsupported;
  return mp == 16 ? launch_decode_layout<T, 16>(p, mw, mx, parts) : launch_decode_layout<T, 64>(p, mw, mx, parts);
}

// The narrow kernel (gemv.cuh) can run: at most 16 rows of A, both operands K-major with
// 16-byte aligned rows and batch entries and K a multiple of 8 (its loads are 16 bytes and
// may not cross a row's end). The launcher takes it (path 0) where it measured faster than
// the decode kernel (docs/perf-notes.md, GEMM v20): K of 2048 or more (at 1 or 16 x 50257
// x 768 the decode kernel took 0.96x / 0.73x of its time), and past 8 rows only on weights
// up to 2^26 elements (at 16 x 28672 x 8192 and 16 x 128256 the decode kernel streamed
// 3.8-4.0 TB/s against its 3.3-3.6). The hook's path 3 takes it wherever it can run.
bool aligned16(const GemmOperand& op, int64_t batch) {
  return reinterpret_cast<uintptr_t>(op.ptr) % 16 == 0 && op.ld % 8 == 0 && (batch == 1 || op.batch_stride % 8 == 0);
}
bool gemv_applies(const GemmParams& p) {
  const bool can = p.M <= 16 && p.K % 8 == 0 && p.a.k_major && p.b.k_major && aligned16(p.a, p.batch) &&
                   aligned16(p.b, p.batch);
  if (p.path == 3) return can;
  return p.path == 0 && can && p.K >= 2048 && (p.M <= 8 || p.N * p.K <= (int64_t{1} << 26));
}

// Its K runs per row group: the most (8, 4, 2; at most a quarter of K's blocks) whose warps
// all fit on the SMs at once (two 8-warp CTAs an SM at <= 128 registers), so that no partial
// second wave trails the first; where even 2 would not fit, the most (many waves; measured
// faster there than 1, whose single wave of whole-K warps streamed 2-4% slower:
// docs/perf-notes.md, GEMM v20). The hook's 1, 2, 4, 8 win.
int gemv_runs(const GemmParams& p, int sms) {
  if (p.gemv_runs == 1 || p.gemv_runs == 2 || p.gemv_runs == 4 || p.gemv_runs == 8) return p.gemv_runs;
  const int64_t groups = (p.N + gemm::kGemvRows - 1) / gemm::kGemvRows * p.batch;
  // At least four K blocks a run, so that short K does not leave warps idle.
  const int64_t blocks = (p.K + gemm::kGemvBK - 1) / gemm::kGemvBK;
  int cap = gemm::kGemvWarps;
  while (cap > 1 && blocks < int64_t{4} * cap) cap /= 2;
  for (int runs = cap; runs >= 2; runs /= 2)
    if (groups * runs <= int64_t{sms} * 2 * gemm::kGemvWarps) return runs;
  return cap;
}

template <typename T, int kNT>
Status launch_gemv(const GemmParams& p, int runs) {
  const gemm::EpilogueArgs<T> epi = epilogue_args<T>(p);
  const gemm::GemvArgs<T> args{static_cast<const T*>(p.a.ptr),
                               static_cast<const T*>(p.b.ptr),
                               p.a.ld,
                               p.b.ld,
                               p.a.batch_stride,
                               p.b.batch_stride,
                               p.batch_stride_c,
                               epi.d != nullptr ? p.batch_stride_d : 0,
                               p.M,
                               p.N,
                               p.K,
                               runs,
                               epi};
  const int64_t rows_per_cta = int64_t{gemm::kGemvRows} * (gemm::kGemvWarps / runs);
  const dim3 grid(static_cast<unsigned>((p.N + rows_per_cta - 1) / rows_per_cta), static_cast<unsigned>(p.batch));
  flyops_gemm_gemv<T, kNT><<<grid, gemm::kGemvWarps * 32, 0, static_cast<cudaStream_t>(p.stream)>>>(args);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// A's rows in one or two 8-wide mma columns into a template parameter.
template <typename T>
Status run_gemv(const GemmParams& p, int runs) {
  return p.M <= 8 ? launch_gemv<T, 1>(p, runs) : launch_gemv<T, 2>(p, runs);
}

// How many parts to cut K into on the decode path, 0 when it does not apply (more than 64
// rows of A, batches, or the tuning hook asks for the wide kernel; route_of asks the narrow
// kernel first). The most parts (up to
// a portable cluster of 8) that keep the grid within 1.5 CTAs per SM, each part at least
// two K blocks long: fewer parts pay less for the cluster reduction, which measured
// ~2.5 us per CTA (docs/perf-notes.md, GEMM v5); the probe's per-part sweep put the best
// split near one to two CTAs per SM.
int decode_parts(const GemmParams& p, int sms) {
  if (p.path == 1 || p.M > 64 || p.batch != 1) return 0;
  const int64_t tiles = (p.N + gemm::kDecodeRows - 1) / gemm::kDecodeRows, blocks = (p.K + gemm::kBK - 1) / gemm::kBK;
  const int64_t slots = int64_t{sms} * 3 / 2;
  if (p.kparts == 1 || p.kparts == 2 || p.kparts == 4 || p.kparts == 8)  // the tuning hook, where every part
    return p.kparts <= blocks ? p.kparts : 1;                          // gets a K block
  int parts = 1;
  while (parts < 8 && tiles * parts * 2 <= slots && blocks >= parts * 4) parts *= 2;
  return parts;
}

int sms_of(const DeviceInfo& dev) { return dev.sm_count > 0 ? dev.sm_count : 132; }

// The kernel a call runs on, decided in one place for the launch, its name and its
// workspace: the narrow kernel (n: K runs per row group), the decode kernel (n: K parts),
// or the wide kernel (n: K parts it would split into, given a workspace).
struct Route {
  enum Kind { kNarrow, kDecode, kWide } kind;
  int n;
};
Route route_of(const GemmParams& p, int sms) {
  if (gemv_applies(p)) return {Route::kNarrow, gemv_runs(p, sms)};
  if (const int parts = decode_parts(p, sms)) return {Route::kDecode, parts};
  return {Route::kWide, wanted_parts(p, sms)};
}

// The wide kernel's K parts as it runs: the route's where the caller gave the workspace,
// else 1 (unsplit).
int wide_split(const GemmParams& p, const Route& r) {
  return r.kind == Route::kWide && p.workspace != nullptr ? r.n : 1;
}

}  // namespace

size_t gemm_workspace_bytes(const GemmParams& p, const DeviceInfo& dev) {
  const Route r = route_of(p, sms_of(dev));
  if (r.kind != Route::kWide || r.n == 1) return 0;
  return static_cast<size_t>(gemm::split_workspace_floats(gemm::wide_tiles(p), r.n)) * 4;
}

Status gemm_run(const GemmParams& p) {
  const CUtensorMapDataType type =
      p.dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  const bool bf16 = p.dtype == DType::kBFloat16;
  const Route r = route_of(p, device_sms(p.device));
  switch (r.kind) {
    case Route::kNarrow: return bf16 ? run_gemv<tile::bf16>(p, r.n) : run_gemv<tile::fp16>(p, r.n);
    case Route::kDecode: return bf16 ? run_decode<tile::bf16>(p, r.n, type) : run_decode<tile::fp16>(p, r.n, type);
    default: {
      const int split = wide_split(p, r);
      return bf16 ? run_wide<tile::bf16>(p, split, type) : run_wide<tile::fp16>(p, split, type);
    }
  }
}

const char* gemm_last_error() { return g_last_error; }

const char* gemm_kernel_name(const GemmParams& p, const DeviceInfo& dev) {
  thread_local char name[96];
  const char* dtype = p.dtype == DType::kBFloat16 ? "bf16" : "fp16";
  const Route r = route_of(p, sms_of(dev));
  if (r.kind == Route::kNarrow) {
    std::snprintf(name, sizeof(name), "flyops_gemm_gemv<%s,A:k-major,B:k-major,n%d,r%d>", dtype, p.M <= 8 ? 8 : 16, r.n);
    return name;
  }
  const int split = wide_split(p, r);
  char tail[24] = "";
  if (r.kind == Route::kDecode) std::snprintf(tail, sizeof(tail), ",n%d,kparts%d", decode_width(p), r.n);
  if (split > 1) std::snprintf(tail, sizeof(tail), ",kparts%d", split);
  std::snprintf(name, sizeof(name), "flyops_gemm%s<%s,A:%s-major,B:%s-major%s>",
                r.kind == Route::kDecode ? "_decode" : split > 1 ? "_splitk" : "", dtype, p.a.k_major ? "k" : "m",
                p.b.k_major ? "k" : "n", tail);
  return name;
}

}  // namespace flyops
