// GPU unit tests of the tile layer's TMA, ring, wgmma, bulk-reduction, named-barrier and
// acquire/release pieces: each a tiny kernel whose
// result is checked against what the CPU computes from the same inputs. Exit code 0 when
// all pass. Runs on sm_90a (scripts/gpu-check); small enough for compute-sanitizer's memcheck;
// `--race` runs only a GEMM set for racecheck and synccheck; `--seed S` repeats a run's inputs.
#include <cuda.h>
#include <cuda_runtime.h>

#include "check_cuda.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "flyops/device.h"
#include "flyops/gemm.h"
#include "flyops/tile/async_copy.h"
#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/cluster.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/layout.h"
#include "flyops/tile/mbarrier.h"
#include "flyops/tile/mma.h"
#include "flyops/tile/pipeline.h"
#include "flyops/tile/stmatrix.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/vec.h"
#include "flyops/tile/warp.h"
#include "flyops/tile/wgmma.h"
#include "flyops/tile/wgmma_ops.h"
#include "reference/numeric.h"

using namespace flyops::tile;

namespace {


int g_failed = 0, g_passed = 0;

// Inputs are fresh each run: every generator starts from this run's seed (printed; `--seed S`
// repeats a run) mixed with a per-test salt, so two tests never share a stream.
uint32_t g_seed = 0;
uint32_t seeded(uint32_t salt) { return g_seed ^ (salt * 0x9E3779B9u); }

void report(const char* name, bool ok) {
  std::printf("%-44s %s\n", name, ok ? "ok" : "FAILED");
  (ok ? g_passed : g_failed) += 1;
}

// ---- programmatic dependent launch: the dependent kernel starts early, reads after the wait ----
__global__ void pdl_producer(int* buf, int n) {
  allow_dependent_launch();  // at once: the consumer may start while these writes run
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) buf[i] = 3 * i + 1;
}

__global__ void pdl_consumer(const int* buf, int n, int* bad) {
  grid_dependency_wait();
  int wrong = 0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) wrong += buf[i] != 3 * i + 1;
  if (wrong != 0) atomicAdd(bad, wrong);
}

void test_dependent_launch() {
  const int n = 1 << 24;
  int *buf = nullptr, *bad = nullptr;
  CHECK_CUDA(cudaMalloc(&buf, sizeof(int) * n));
  CHECK_CUDA(cudaMalloc(&bad, sizeof(int)));
  bool ok = true;
  for (int rep = 0; rep < 3 && ok; ++rep) {
    CHECK_CUDA(cudaMemset(buf, 0xff, sizeof(int) * n));
    CHECK_CUDA(cudaMemset(bad, 0, sizeof(int)));
    pdl_producer<<<264, 256>>>(buf, n);
    CHECK_CUDA(cudaGetLastError());
    CHECK_CUDA(launch_dependent(&pdl_consumer, dim3(132), dim3(256), 0, nullptr, buf, n, bad));
    CHECK_CUDA(cudaDeviceSynchronize());
    int h = -1;
    CHECK_CUDA(cudaMemcpy(&h, bad, sizeof(int), cudaMemcpyDeviceToHost));
    ok = h == 0;
  }
  CHECK_CUDA(cudaFree(buf));
  CHECK_CUDA(cudaFree(bad));
  report("dependent launch reads after the wait", ok);
}

// bf16 tiles of 64 rows, each row one swizzle span (what a TMA box of that width writes).
template <Swizzle kMode>
using SpanTile = SmemTile<uint16_t, 64, swizzle_span(kMode) / 2, kMode>;
using Tile = SpanTile<Swizzle::k128B>;  // one 128-byte row per index

// ---- TMA load (2-D, one swizzle span a row, edges zero-filled), optionally multicast to a pair ----

template <Swizzle kMode>
__global__ void tma_load_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1, bool multicast,
                                uint16_t* out) {
  using T = SpanTile<kMode>;
  __shared__ __align__(1024) unsigned char tile[T::kBytes];
  __shared__ uint64_t bar;
  const uint32_t rank = cluster_rank();
  if (threadIdx.x == 0) {
    mbarrier_init(&bar, 1);
    mbarrier_arrive_expect_tx(&bar, T::kBytes);
  }
  __syncthreads();
  if (multicast) cluster_sync();  // every CTA's barrier is armed before rank 0 multicasts
  if (threadIdx.x == 0) {
    if (!multicast)
      tma_load(tile, &map, &bar, c0, c1);
    else if (rank == 0)
      tma_load_multicast(tile, &map, &bar, 0x3, c0, c1);
  }
  mbarrier_wait(&bar, 0);
  const uint16_t* t = reinterpret_cast<const uint16_t*>(tile);
  for (int i = threadIdx.x; i < T::kBytes / 2; i += blockDim.x) out[rank * (T::kBytes / 2) + i] = t[i];
  if (multicast) cluster_sync();
}

// ---- TMA store from a swizzled tile -------------------------------------------------------
__global__ void tma_store_kernel(const __grid_constant__ CUtensorMap map, int c0, int c1) {
  __shared__ __align__(1024) unsigned char tile[Tile::kBytes];
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {
    const int r = i / 64, c = i % 64;
    *reinterpret_cast<uint16_t*>(tile + Tile::offset(r, c)) = static_cast<uint16_t>(r * 64 + c);
  }
  fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    tma_store(&map, tile, c0, c1);
    tma_store_commit();
    tma_store_wait<0>();
  }
}

// ---- ring: a producer thread streams kSteps tiles through 2 stages; consumers sum them ----
constexpr int kSteps = 6;
__global__ void ring_kernel(const __grid_constant__ CUtensorMap map, float* out) {
  __shared__ __align__(1024) unsigned char tiles[2][Tile::kBytes];
  __shared__ Ring<2> ring;
  const int warp = threadIdx.x / 32;
  if (threadIdx.x == 0) ring.init(4);  // four consumer warps release each slot
  __syncthreads();
  RingState<2> st;
  if (warp == 4) {  // producer warp
    if (threadIdx.x % 32 == 0)
      for (int s = 0; s < kSteps; ++s, st.advance()) {
        ring.producer_acquire(st, Tile::kBytes);
        tma_load(tiles[st.stage], &map, ring.full_barrier(st), 0, 64 * s);
      }
    return;
  }
  float acc = 0.f;
  for (int s = 0; s < kSteps; ++s, st.advance()) {
    ring.consumer_wait(st);
    const unsigned char* t = tiles[st.stage];
    for (int i = threadIdx.x; i < 64 * 64; i += 128)
      acc += __uint_as_float(uint32_t{*reinterpret_cast<const uint16_t*>(t + Tile::offset(i / 64, i % 64))} << 16);
    __syncwarp();
    if (threadIdx.x % 32 == 0) ring.consumer_release(st);
  }
  atomicAdd(out, acc);
}

// ---- wgmma m64n64k16 bf16: A 64x16 and B 64x16 (both K-major, 32-byte swizzle) ----------
using Op = SmemTile<uint16_t, 64, 16, Swizzle::k32B>;
__global__ void wgmma_kernel(const uint16_t* a, const uint16_t* b, float* d_out) {
  __shared__ __align__(1024) unsigned char sa[Op::kBytes];
  __shared__ __align__(1024) unsigned char sb[Op::kBytes];
  for (int i = threadIdx.x; i < 64 * 16; i += blockDim.x) {
    *reinterpret_cast<uint16_t*>(sa + Op::offset(i / 16, i % 16)) = a[i];
    *reinterpret_cast<uint16_t*>(sb + Op::offset(i / 16, i % 16)) = b[i];
  }
  fence_proxy_async();
  __syncthreads();
  float d[32];
  for (float& v : d) v = 0.f;
  wgmma_fence();
  wgmma_m64n64k16_bf16(d, wgmma_desc_kmajor<Op>(smem_addr(sa)), wgmma_desc_kmajor<Op>(smem_addr(sb)), false);
  wgmma_commit();
  wgmma_wait<0>();
  // Fragment: warp w holds rows 16w..16w+15; lane l row 16w + l/4 (+8), columns
  // 8j + 2(l%4) (+1) for j = 0..7.
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  for (int j = 0; j < 8; ++j)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e) {
        const int row = 16 * w + l / 4 + 8 * h, col = 8 * j + 2 * (l % 4) + e;
        d_out[row * 64 + col] = d[4 * j + 2 * h + e];
      }
}

// ---- mma.sync m16n8k16 (bf16 / fp16): A 16x16 row-major, B 16x8 by column, fragments
// loaded per tile/mma.h's layout by one warp; exact on small integers ----------------------
template <typename T>
__global__ void mma_kernel(const uint16_t* a, const uint16_t* b, float* d_out) {
  const int l = threadIdx.x, g = l / 4, t = l % 4;
  auto pair = [](const uint16_t* p) { return uint32_t{p[0]} | uint32_t{p[1]} << 16; };
  const uint32_t fa[4] = {pair(a + g * 16 + 2 * t), pair(a + (g + 8) * 16 + 2 * t), pair(a + g * 16 + 2 * t + 8),
                          pair(a + (g + 8) * 16 + 2 * t + 8)};
  const uint32_t fb[2] = {pair(b + g * 16 + 2 * t), pair(b + g * 16 + 2 * t + 8)};  // b stored [n][k]
  float d[4] = {1.f, 2.f, 3.f, 4.f};  // accumulates onto these
  mma_m16n8k16<T>(d, fa, fb);
  for (int e = 0; e < 4; ++e) d_out[(g + 8 * (e / 2)) * 8 + 2 * t + e % 2] = d[e];
}

// Two 16-bit operands of small integers in [-4, 4] (their products and sums are exact in
// fp32) on the device and as floats on the host, and an fp32 output poisoned with NaN, for
// the tensor-core tests; freed with it.
struct SmallIntOperands {
  std::vector<float> af, bf;
  uint16_t *da = nullptr, *db = nullptr;
  float* dout = nullptr;
  size_t outs;

  SmallIntOperands(size_t na, size_t nb, size_t out_floats, bool fp16, uint32_t seed)
      : af(na), bf(nb), outs(out_floats) {
    std::mt19937 rng(seeded(seed));
    std::vector<uint16_t> a(na), b(nb);
    auto fill = [&](std::vector<float>& f, std::vector<uint16_t>& h) {
      for (size_t i = 0; i < f.size(); ++i) {
        f[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4);
        h[i] = fp16 ? flyops::reference::float_to_half(f[i]) : flyops::reference::float_to_bf16(f[i]);
      }
    };
    fill(af, a);
    fill(bf, b);
    CHECK_CUDA(cudaMalloc(&da, na * 2));
    CHECK_CUDA(cudaMalloc(&db, nb * 2));
    CHECK_CUDA(cudaMalloc(&dout, outs * 4));
    CHECK_CUDA(cudaMemcpy(da, a.data(), na * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemcpy(db, b.data(), nb * 2, cudaMemcpyHostToDevice));
    CHECK_CUDA(cudaMemset(dout, 0xff, outs * 4));
  }
  SmallIntOperands(const SmallIntOperands&) = delete;
  SmallIntOperands& operator=(const SmallIntOperands&) = delete;
  ~SmallIntOperands() {
    cudaFree(da);
    cudaFree(db);
    cudaFree(dout);
  }

  // The output, after the kernel that writes it.
  std::vector<float> result() const {
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<float> got(outs);
    CHECK_CUDA(cudaMemcpy(got.data(), dout, outs * 4, cudaMemcpyDeviceToHost));
    return got;
  }
};

template <typename T>
void test_mma(bool fp16) {
  const SmallIntOperands op(16 * 16, 8 * 16, 16 * 8, fp16, fp16 ? 23 : 13);
  mma_kernel<T><<<1, 32>>>(op.da, op.db, op.dout);
  const std::vector<float> got = op.result();
  bool ok = true;
  for (int m = 0; m < 16; ++m)
    for (int n = 0; n < 8; ++n) {
      float want = static_cast<float>(1 + (m >= 8) * 2 + n % 2);  // the initial accumulator
      for (int k = 0; k < 16; ++k) want += op.af[m * 16 + k] * op.bf[n * 16 + k];
      ok &= got[m * 8 + n] == want;
    }
  report(fp16 ? "mma.sync m16n8k16 fp16, exact on small integers" : "mma.sync m16n8k16 bf16, exact on small integers",
         ok);
}

// ---- stmatrix x4 and pack2: four 8 x 8 matrices from a warp's fragments -----------------
// Lane l packs matrix i's row l / 4, columns 2 (l % 4) and + 1 (from `in`, fp32, row-major
// 8 x 8 per matrix) and gives the address of row l % 8 of matrix l / 8 in a buffer whose
// matrix i starts at 128 i + 512 (i % 2) bytes and whose rows are 16 bytes apart, reversed
// (row r at 7 - r): the addresses are the lanes' own, not a fixed pattern.
template <typename T>
__global__ void stmatrix_kernel(const float* in, uint16_t* out) {
  __shared__ __align__(16) unsigned char buf[1024];
  const int l = threadIdx.x;
  for (int i = l; i < 1024 / 4; i += 32) reinterpret_cast<uint32_t*>(buf)[i] = 0xdeadbeefu;
  __syncwarp();
  uint32_t r[4];
  for (int i = 0; i < 4; ++i) {
    const float* m = in + 64 * i + 8 * (l / 4) + 2 * (l % 4);
    r[i] = pack2<T>(m[0], m[1]);
  }
  const int mi = l / 8, row = l % 8;
  stmatrix_x4(smem_addr(buf + 128 * (mi / 2) + 512 * (mi % 2) + 16 * (7 - row)), r[0], r[1], r[2], r[3]);
  __syncwarp();
  for (int i = l; i < 512; i += 32) out[i] = reinterpret_cast<const uint16_t*>(buf)[i];
}

CUtensorMap matrix_map(void* base, int rows, int cols, Swizzle mode = Swizzle::k128B) {
  TmaShape s;
  s.rank = 2;
  s.elem_bytes = 2;
  s.base = base;
  s.dims[0] = cols;
  s.dims[1] = rows;
  s.strides_bytes[0] = uint64_t(cols) * 2;
  s.box[0] = swizzle_span(mode) / 2;
  s.box[1] = 64;
  s.swizzle = mode;
  CUtensorMap map;
  if (!tma_encode(&map, s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)) {
    std::fprintf(stderr, "tma_encode failed (%s)\n", tma_check(s) ? tma_check(s) : "driver");
    std::exit(2);
  }
  return map;
}

// The per-thread map cache hands back exactly the driver's bytes, and a different base
// (or shape) is a different entry, not a stale hit.
void test_tma_map_cache() {
  char* buf[2];
  for (char*& b : buf) CHECK_CUDA(cudaMalloc(&b, 4096));
  TmaShape s;
  s.rank = 2;
  s.elem_bytes = 2;
  s.dims[0] = 64;
  s.dims[1] = 16;
  s.strides_bytes[0] = 128;
  s.box[0] = 64;
  s.box[1] = 8;
  s.swizzle = Swizzle::k128B;
  bool ok = true;
  for (int round = 0; round < 2; ++round)  // the second round hits the cache
    for (int i = 0; i < 2; ++i) {
      s.base = buf[i];
      CUtensorMap direct, cached;
      ok &= tma_encode(&direct, s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
      ok &= tma_encode_cached(&cached, s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
      ok &= std::memcmp(&direct, &cached, sizeof(direct)) == 0;
    }
  s.base = buf[0];
  CUtensorMap a, b;
  ok &= tma_encode_cached(&a, s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  s.dims[1] = 15;
  ok &= tma_encode_cached(&b, s, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  ok &= std::memcmp(&a, &b, sizeof(a)) != 0;
  report("tensor map cache: the driver's bytes, per shape and base", ok);
  for (char* b : buf) cudaFree(b);
}

template <Swizzle kMode = Swizzle::k128B>
void test_tma_load(bool multicast) {
  using T = SpanTile<kMode>;
  constexpr int kCols = swizzle_span(kMode) / 2;
  const int rows = 100, cols = 72;  // not multiples of the box: the second box is partly outside
  std::vector<uint16_t> h(rows * cols);
  for (int i = 0; i < rows * cols; ++i) h[i] = static_cast<uint16_t>(i + 1);
  uint16_t *g, *out;
  const int ctas = multicast ? 2 : 1;
  CHECK_CUDA(cudaMalloc(&g, h.size() * 2));
  CHECK_CUDA(cudaMalloc(&out, ctas * T::kBytes));
  CHECK_CUDA(cudaMemcpy(g, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0xff, ctas * T::kBytes));
  const CUtensorMap map = matrix_map(g, rows, cols, kMode);
  const int c0 = 64, c1 = 64;  // columns 64.., rows 64..127: 8 x 36 inside
  CHECK_CUDA(launch_cluster(&tma_load_kernel<kMode>, dim3(ctas), dim3(128), 0, nullptr, ctas, map, c0, c1, multicast, out));
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got(ctas * T::kBytes / 2);
  CHECK_CUDA(cudaMemcpy(got.data(), out, got.size() * 2, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int cta = 0; cta < ctas; ++cta)
    for (int r = 0; r < 64; ++r)
      for (int c = 0; c < kCols; ++c) {
        const int gr = c1 + r, gc = c0 + c;
        const uint16_t want = gr < rows && gc < cols ? h[gr * cols + gc] : 0;
        ok &= got[cta * T::kBytes / 2 + T::offset(r, c) / 2] == want;
      }
  const char* name = multicast                 ? "tma load multicast to a 2-CTA cluster"
                     : kMode == Swizzle::k128B ? "tma load 2-D, 128B swizzle, OOB zero"
                     : kMode == Swizzle::k64B  ? "tma load 2-D, 64B swizzle, OOB zero"
                                               : "tma load 2-D, 32B swizzle, OOB zero";
  report(name, ok);
  cudaFree(g);
  cudaFree(out);
}

void test_tma_store() {
  const int rows = 100, cols = 72;
  uint16_t* g;
  CHECK_CUDA(cudaMalloc(&g, rows * cols * 2));
  CHECK_CUDA(cudaMemset(g, 0xee, rows * cols * 2));
  const CUtensorMap map = matrix_map(g, rows, cols);
  tma_store_kernel<<<1, 128>>>(map, 64, 64);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got(rows * cols);
  CHECK_CUDA(cudaMemcpy(got.data(), g, got.size() * 2, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int gr = 0; gr < rows; ++gr)
    for (int gc = 0; gc < cols; ++gc) {
      const bool inside = gr >= 64 && gc >= 64;
      const uint16_t want = inside ? static_cast<uint16_t>((gr - 64) * 64 + (gc - 64)) : 0xeeee;
      ok &= got[gr * cols + gc] == want;
    }
  report("tma store 2-D, edges not written", ok);
  cudaFree(g);
}

void test_ring() {
  const int rows = 64 * kSteps, cols = 64;
  std::vector<uint16_t> h(rows * cols);
  std::mt19937 rng(seeded(7));
  double want = 0;
  for (auto& v : h) {
    const float f = static_cast<float>(static_cast<int>(rng() % 9) - 4);
    v = flyops::reference::float_to_bf16(f);
    want += f;
  }
  uint16_t* g;
  float* out;
  CHECK_CUDA(cudaMalloc(&g, h.size() * 2));
  CHECK_CUDA(cudaMalloc(&out, 4));
  CHECK_CUDA(cudaMemcpy(g, h.data(), h.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0, 4));
  const CUtensorMap map = matrix_map(g, rows, cols);
  ring_kernel<<<1, 160>>>(map, out);
  CHECK_CUDA(cudaDeviceSynchronize());
  float got = 0;
  CHECK_CUDA(cudaMemcpy(&got, out, 4, cudaMemcpyDeviceToHost));
  report("2-stage ring, 6 tiles through TMA", got == static_cast<float>(want));
  cudaFree(g);
  cudaFree(out);
}

// Values that need rounding (ties to even among them) go through pack2 and stmatrix; the
// buffer must hold each matrix row where its lane said, rounded as the host rounds, and the
// bytes no lane addressed untouched.
template <typename T>
void test_stmatrix(bool fp16) {
  std::vector<float> in(4 * 64);
  std::mt19937 rng(seeded(fp16 ? 21 : 22));
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = (static_cast<float>(rng() % 2001) - 1000.f) / 7.f + (i % 5 == 0 ? 0.5f : 0.f);
  float* din;
  uint16_t* dout;
  CHECK_CUDA(cudaMalloc(&din, in.size() * 4));
  CHECK_CUDA(cudaMalloc(&dout, 512 * 2));
  CHECK_CUDA(cudaMemcpy(din, in.data(), in.size() * 4, cudaMemcpyHostToDevice));
  stmatrix_kernel<T><<<1, 32>>>(din, dout);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got(512);
  CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<uint16_t> want(512, 0);
  for (int i = 0; i < 512; i += 2) want[i] = 0xbeef, want[i + 1] = 0xdead;  // the poison words
  for (int m = 0; m < 4; ++m)
    for (int r = 0; r < 8; ++r)
      for (int c = 0; c < 8; ++c) {
        const int byte = 128 * (m / 2) + 512 * (m % 2) + 16 * (7 - r) + 2 * c;
        const float v = in[64 * m + 8 * r + c];
        want[byte / 2] = fp16 ? flyops::reference::float_to_half(v) : flyops::reference::float_to_bf16(v);
      }
  report(fp16 ? "stmatrix x4 + pack2 fp16, lane addresses, round to nearest even"
              : "stmatrix x4 + pack2 bf16, lane addresses, round to nearest even",
         got == want);
  cudaFree(din);
  cudaFree(dout);
}

void test_wgmma() {
  const SmallIntOperands op(64 * 16, 64 * 16, 64 * 64, false, 11);
  wgmma_kernel<<<1, 128>>>(op.da, op.db, op.dout);
  const std::vector<float> got = op.result();
  bool ok = true;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 64; ++n) {
      float want = 0;  // small integers: exact in fp32
      for (int k = 0; k < 16; ++k) want += op.af[m * 16 + k] * op.bf[n * 16 + k];
      ok &= got[m * 64 + n] == want;
    }
  report("wgmma m64n64k16 bf16, exact on small integers", ok);
}

// ---- wgmma through a swizzled K block, every element type and both forms -----------------
// A [64 x kSpan bytes] and B [kN x kSpan bytes], both K-major, one swizzle span a row, stored
// as TMA would write them: kSpan / 32 wgmma K steps of 32 bytes each (k16 for bf16 / fp16,
// k32 for e4m3 / e5m2), each descriptor starting 32 bytes further into the swizzled rows
// (what a GEMM's mainloop does).
// In the RS form each step's A comes from registers, four bytes a register: register r of
// lane l in warp w holds row 16 w + l / 4 (+ 8 for r odd), bytes 4 (l % 4) (+ 16 for r >= 2)
// of the step.
constexpr int kStepBytes = 32;
constexpr Swizzle swizzle_of_span(int span) {
  return span == 128 ? Swizzle::k128B : span == 64 ? Swizzle::k64B : Swizzle::k32B;
}

template <typename TA, typename TB, int kN, bool kRS, int kBlockBytes>
__global__ void wgmma_block_kernel(const uint8_t* a, const uint8_t* b, float* d_out) {
  using BlockA = SmemTile<uint8_t, 64, kBlockBytes, swizzle_of_span(kBlockBytes)>;
  using BlockB = SmemTile<uint8_t, kN, kBlockBytes, swizzle_of_span(kBlockBytes)>;
  __shared__ __align__(1024) unsigned char sa[BlockA::kBytes];
  __shared__ __align__(1024) unsigned char sb[BlockB::kBytes];
  for (int i = threadIdx.x; i < 64 * kBlockBytes; i += blockDim.x) sa[BlockA::offset(i / kBlockBytes, i % kBlockBytes)] = a[i];
  for (int i = threadIdx.x; i < kN * kBlockBytes; i += blockDim.x) sb[BlockB::offset(i / kBlockBytes, i % kBlockBytes)] = b[i];
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  uint32_t frag[kBlockBytes / kStepBytes][4];
  for (int s = 0; s < kBlockBytes / kStepBytes; ++s)
    for (int r = 0; r < 4; ++r) {
      const int row = 16 * w + l / 4 + 8 * (r & 1), byte = kStepBytes * s + 4 * (l % 4) + 16 * (r >> 1);
      frag[s][r] = *reinterpret_cast<const uint32_t*>(a + row * kBlockBytes + byte);
    }
  fence_proxy_async();
  __syncthreads();
  float d[kN / 2];
  for (float& v : d) v = 0.f;
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < kBlockBytes / kStepBytes; ++s) {
    const uint64_t da = wgmma_desc_kmajor<BlockA>(smem_addr(sa) + kStepBytes * s);
    const uint64_t db = wgmma_desc_kmajor<BlockB>(smem_addr(sb) + kStepBytes * s);
    if constexpr (sizeof(TA) == 2 && kRS)
      wgmma_m64k16_rs<TA, kN>(d, frag[s], db, s > 0);
    else if constexpr (sizeof(TA) == 2)
      wgmma_m64k16<TA, kN>(d, da, db, s > 0);
    else if constexpr (kRS)
      wgmma_m64k32_rs<TA, TB, kN>(d, frag[s], db, s > 0);
    else
      wgmma_m64k32<TA, TB, kN>(d, da, db, s > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  for (int j = 0; j < kN / 8; ++j)  // the accumulator fragment, as in wgmma_kernel
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e)
        d_out[(16 * w + l / 4 + 8 * h) * kN + 8 * j + 2 * (l % 4) + e] = d[4 * j + 2 * h + e];
}

// Host encodings of the element types (little-endian bytes into `out` at element `i`).
template <typename T>
void put_element(std::vector<uint8_t>& out, size_t i, float v) {
  namespace ref = flyops::reference;
  if constexpr (std::is_same_v<T, fp8e4m3> || std::is_same_v<T, fp8e5m2>) {
    out[i] = ref::float_to_fp8(v, std::is_same_v<T, fp8e4m3> ? ref::Fp8::kE4M3 : ref::Fp8::kE5M2);
  } else {
    const uint16_t h = std::is_same_v<T, fp16> ? ref::float_to_half(v) : ref::float_to_bf16(v);
    out[2 * i] = static_cast<uint8_t>(h), out[2 * i + 1] = static_cast<uint8_t>(h >> 8);
  }
}

template <typename TA, typename TB, int kN, bool kRS, int kBlockBytes = 128>
void test_wgmma_block(const char* name) {
  // Small integers in [-4, 4]: exact in every element type, and sums of up to 128 products exact in fp32.
  const int ka = kBlockBytes / static_cast<int>(sizeof(TA)), kb = kBlockBytes / static_cast<int>(sizeof(TB));
  std::mt19937 rng(seeded(static_cast<uint32_t>(kN * 31 + sizeof(TA) * 7 + sizeof(TB) + kRS)));
  std::vector<float> af(64 * ka), bf(kN * kb);
  std::vector<uint8_t> ab(64 * kBlockBytes), bb(kN * kBlockBytes);
  for (size_t i = 0; i < af.size(); ++i) put_element<TA>(ab, i, af[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4));
  for (size_t i = 0; i < bf.size(); ++i) put_element<TB>(bb, i, bf[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4));
  uint8_t *da, *db;
  float* dout;
  CHECK_CUDA(cudaMalloc(&da, ab.size()));
  CHECK_CUDA(cudaMalloc(&db, bb.size()));
  CHECK_CUDA(cudaMalloc(&dout, 64 * kN * 4));
  CHECK_CUDA(cudaMemcpy(da, ab.data(), ab.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, bb.data(), bb.size(), cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, 64 * kN * 4));  // NaN
  wgmma_block_kernel<TA, TB, kN, kRS, kBlockBytes><<<1, 128>>>(da, db, dout);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(64 * kN);
  CHECK_CUDA(cudaMemcpy(got.data(), dout, got.size() * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < kN; ++n) {
      float want = 0;
      for (int k = 0; k < ka; ++k) want += af[m * ka + k] * bf[n * kb + k];
      ok &= got[m * kN + n] == want;
    }
  report(name, ok);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dout);
}

// ---- wgmma with MN-major operands (the GEMM's M-major A and N-major B): 16-bit elements,
// K = 64 in four k16 steps, an MN-major operand stored as TMA writes it (blocks of 64
// elements along M / N, each block 64 K rows of one 128-byte swizzle row; a step moves 16 K
// rows, 2048 bytes, and the blocks are 8 KB apart: wgmma_desc_mnmajor's leading offset). ----
template <typename T, int kN, bool kMnA, bool kMnB>
__global__ void wgmma_mn_kernel(const uint16_t* a, const uint16_t* b, float* d_out) {
  using KTile = SmemTile<uint16_t, 64, 64, Swizzle::k128B>;  // a K-major operand: 64 rows of K = 64
  using MnBlock = SmemTile<uint16_t, 64, 64, Swizzle::k128B>;  // one MN-major block: 64 K rows of 64
  constexpr uint32_t kBlockBytes = MnBlock::kBytes;
  __shared__ __align__(1024) unsigned char sa[KTile::kBytes];
  __shared__ __align__(1024) unsigned char sb[kN / 64 * kBlockBytes];
  for (int i = threadIdx.x; i < 64 * 64; i += blockDim.x) {  // a[m * 64 + k]
    const int m = i / 64, k = i % 64;
    const uint32_t off = kMnA ? MnBlock::offset(k, m) : KTile::offset(m, k);
    *reinterpret_cast<uint16_t*>(sa + off) = a[i];
  }
  for (int i = threadIdx.x; i < kN * 64; i += blockDim.x) {  // b[n * 64 + k]
    const int n = i / 64, k = i % 64;
    const uint32_t off = kMnB ? (n / 64) * kBlockBytes + MnBlock::offset(k, n % 64) : KTile::offset(n, k);
    *reinterpret_cast<uint16_t*>(sb + off) = b[i];
  }
  fence_proxy_async();
  __syncthreads();
  float d[kN / 2];
  wgmma_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) {
    const uint64_t da = kMnA ? wgmma_desc_mnmajor<Swizzle::k128B>(smem_addr(sa) + 2048u * s, kBlockBytes)
                             : wgmma_desc_kmajor<KTile>(smem_addr(sa) + 32u * s);
    const uint64_t db = kMnB ? wgmma_desc_mnmajor<Swizzle::k128B>(smem_addr(sb) + 2048u * s, kBlockBytes)
                             : wgmma_desc_kmajor<KTile>(smem_addr(sb) + 32u * s);
    wgmma_m64k16<T, kN, kMnA ? 1 : 0, kMnB ? 1 : 0>(d, da, db, s > 0);
  }
  wgmma_commit();
  wgmma_wait<0>();
  const int w = threadIdx.x / 32, l = threadIdx.x % 32;
  for (int j = 0; j < kN / 8; ++j)
    for (int h = 0; h < 2; ++h)
      for (int e = 0; e < 2; ++e)
        d_out[(16 * w + l / 4 + 8 * h) * kN + 8 * j + 2 * (l % 4) + e] = d[4 * j + 2 * h + e];
}

template <typename T, int kN, bool kMnA, bool kMnB>
void test_wgmma_mn(const char* name) {
  const SmallIntOperands op(64 * 64, kN * 64, 64 * kN, std::is_same_v<T, fp16>, 40 + kN + 2 * kMnA + kMnB);
  wgmma_mn_kernel<T, kN, kMnA, kMnB><<<1, 128>>>(op.da, op.db, op.dout);
  const std::vector<float> got = op.result();
  bool ok = true;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < kN; ++n) {
      float want = 0;  // sums of 64 products of [-4, 4] integers: exact in fp32
      for (int k = 0; k < 64; ++k) want += op.af[m * 64 + k] * op.bf[n * 64 + k];
      ok &= got[m * kN + n] == want;
    }
  report(name, ok);
}

// ---- TMA boxes at ranks 3-5 (loads and stores): strided (padded) tensors, boxes across the upper edges
// (zero fill on load; nothing written there on store) and, for loads, a negative coordinate
// (a store with one traps: tma.h) -----------------
struct Coords {
  int c[kTmaMaxRank];
};

template <int kRank>
FLYOPS_DEVICE void tma_load_at(void* dst, const CUtensorMap* map, uint64_t* bar, const Coords& k) {
  if constexpr (kRank == 3) tma_load(dst, map, bar, k.c[0], k.c[1], k.c[2]);
  else if constexpr (kRank == 4) tma_load(dst, map, bar, k.c[0], k.c[1], k.c[2], k.c[3]);
  else tma_load(dst, map, bar, k.c[0], k.c[1], k.c[2], k.c[3], k.c[4]);
}

template <int kRank>
FLYOPS_DEVICE void tma_store_at(const CUtensorMap* map, const void* src, const Coords& k) {
  if constexpr (kRank == 3) tma_store(map, src, k.c[0], k.c[1], k.c[2]);
  else if constexpr (kRank == 4) tma_store(map, src, k.c[0], k.c[1], k.c[2], k.c[3]);
  else tma_store(map, src, k.c[0], k.c[1], k.c[2], k.c[3], k.c[4]);
}

constexpr int kBoxBufBytes = 4096;
template <int kRank, bool kStore>
__global__ void tma_box_kernel(const __grid_constant__ CUtensorMap map, Coords at, int box_elems, uint16_t* out) {
  __shared__ __align__(128) uint16_t box[kBoxBufBytes / 2];
  __shared__ uint64_t bar;
  if constexpr (kStore) {
    for (int i = threadIdx.x; i < box_elems; i += blockDim.x) box[i] = static_cast<uint16_t>(i + 1);
    fence_proxy_async();
    __syncthreads();
    if (threadIdx.x == 0) {
      tma_store_at<kRank>(&map, box, at);
      tma_store_commit();
      tma_store_drain();  // the writes done, not only the box read
    }
  } else {
    if (threadIdx.x == 0) {
      mbarrier_init(&bar, 1);
      mbarrier_arrive_expect_tx(&bar, box_elems * 2);  // the whole box counts, zero-filled parts too
      tma_load_at<kRank>(box, &map, &bar, at);
    }
    __syncthreads();
    mbarrier_wait(&bar, 0);
    for (int i = threadIdx.x; i < box_elems; i += blockDim.x) out[i] = box[i];
  }
}

// dims[0] elements a row, each outer dimension's stride padded by 8 elements (16 bytes).
template <int kRank, bool kStore>
void test_tma_box(const int (&dims)[kRank], const int (&box)[kRank], const int (&at)[kRank]) {
  int64_t stride[kRank];
  stride[0] = 1;
  for (int d = 1; d < kRank; ++d) stride[d] = (d == 1 ? (dims[0] + 7) / 8 * 8 : stride[d - 1] * dims[d - 1]) + 8;
  const int64_t elems = stride[kRank - 1] * dims[kRank - 1];
  int box_elems = 1;
  for (int d = 0; d < kRank; ++d) box_elems *= box[d];
  std::vector<uint16_t> h(elems);
  for (int64_t i = 0; i < elems; ++i) h[i] = static_cast<uint16_t>(0x8000 | (i * 7 + 3));
  uint16_t *g, *out;
  CHECK_CUDA(cudaMalloc(&g, elems * 2));
  CHECK_CUDA(cudaMalloc(&out, kBoxBufBytes));
  CHECK_CUDA(cudaMemcpy(g, h.data(), elems * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0xee, kBoxBufBytes));
  TmaShape s;
  s.rank = kRank;
  s.elem_bytes = 2;
  s.base = g;
  Coords c{};
  for (int d = 0; d < kRank; ++d) {
    s.dims[d] = dims[d];
    s.box[d] = box[d];
    if (d > 0) s.strides_bytes[d - 1] = stride[d] * 2;
    c.c[d] = at[d];
  }
  CUtensorMap map;
  bool ok = tma_encode(&map, s, CU_TENSOR_MAP_DATA_TYPE_UINT16);
  if (ok) {
    tma_box_kernel<kRank, kStore><<<1, 128>>>(map, c, box_elems, out);
    CHECK_CUDA(cudaDeviceSynchronize());
    std::vector<uint16_t> got_box(box_elems), got(elems);
    CHECK_CUDA(cudaMemcpy(got_box.data(), out, box_elems * 2, cudaMemcpyDeviceToHost));
    CHECK_CUDA(cudaMemcpy(got.data(), g, elems * 2, cudaMemcpyDeviceToHost));
    std::vector<uint16_t> want = h;  // the tensor after a store
    for (int i = 0; i < box_elems; ++i) {
      int64_t off = 0;
      bool inside = true;
      for (int d = 0, rest = i; d < kRank; rest /= box[d], ++d) {
        const int x = at[d] + rest % box[d];
        inside &= x >= 0 && x < dims[d];
        off += int64_t{x} * stride[d];
      }
      if (kStore && inside) want[off] = static_cast<uint16_t>(i + 1);
      if (!kStore) ok &= got_box[i] == (inside ? h[off] : 0);
    }
    if (kStore) ok &= got == want;  // the box's inside written, the rest (padding too) intact
  }
  char name[64];
  std::snprintf(name, sizeof(name), "tma %s %d-D, padded strides, edges", kStore ? "store" : "load", kRank);
  report(name, ok);
  cudaFree(g);
  cudaFree(out);
}

// The GEMM through the core API on small integers (exact in fp32; the output rounds once
// on both sides): every layout, bf16 and fp16, batches, alpha/beta with a broadcast addend.
// C is poisoned beforehand and its padding checked intact.
struct GemmCase {
  int64_t M, N, K;
  bool a_k_major = true, b_k_major = true, fp16 = false;
  int64_t batch = 1, pad = 0;
  float alpha = 1.f, beta = 0.f;
  int d_kind = 0;  // 0: none, 1: bias (N), 2: column (M, 1), 3: full (M, N)
  int cluster = 0;  // 0: the launcher's choice (single CTAs); 2: pairs with multicast where M > 128
  bool odd_ldc = false;  // C's rows 2 * (N + 3) bytes apart: no TMA store, the lanes copy C out
  bool wide = false;     // the wide kernel even where the decode path applies
  int kparts = 0;        // the decode path's K parts (0: the launcher's choice)
  int d_offset = 0;      // d starts this many elements into its buffer (1: a bias not 4-byte aligned)
  int split = 0;         // the wide kernel's K parts (splitk.cuh; 0: the launcher's choice, given a workspace)
  int path = 0;          // 2: the decode kernel where the narrow one (gemv.cuh) would run; 3: the narrow one
  int gemv_runs = 0;     // the narrow kernel's K runs per row group (0: the launcher's choice)
};

uint16_t to_bits(float f, bool fp16) {
  return fp16 ? flyops::reference::float_to_half(f) : flyops::reference::float_to_bf16(f);
}

void test_gemm(const GemmCase& g) {
  const int64_t M = g.M, N = g.N, K = g.K, B = g.batch;
  // Stored shapes: A is [M, K] (K-major) or [K, M]; B is [N, K] (K-major) or [K, N]. Leading
  // strides are rounded up to 8 elements (16 bytes, what TMA needs); the logical shape stays odd.
  auto ld_of = [&](int64_t inner) { return (inner + 7) / 8 * 8 + g.pad; };
  const int64_t lda = ld_of(g.a_k_major ? K : M), ldb = ld_of(g.b_k_major ? K : N);
  const int64_t ldc = g.odd_ldc ? N + 3 : (N + 7) / 8 * 8 + 8;
  const int64_t sa = lda * (g.a_k_major ? M : K), sb = ldb * (g.b_k_major ? N : K), sc = ldc * M;
  const int64_t dsm = g.d_kind == 2 ? 1 : g.d_kind == 3 ? N : 0;
  const int64_t dsn = g.d_kind == 1 || g.d_kind == 3 ? 1 : 0;
  const int64_t dsize = (g.d_kind == 0 ? 1 : g.d_kind == 1 ? N : g.d_kind == 2 ? M : M * N) + g.d_offset;
  std::vector<float> af(sa * B), bf(sb * B), df(dsize);
  std::vector<uint16_t> a(af.size()), b(bf.size()), d(df.size());
  std::mt19937 rng(seeded(static_cast<uint32_t>(M * 131 + N * 7 + K + B)));
  auto fill = [&](std::vector<float>& f, std::vector<uint16_t>& h) {
    for (size_t i = 0; i < f.size(); ++i) {
      f[i] = static_cast<float>(static_cast<int>(rng() % 9) - 4);
      h[i] = to_bits(f[i], g.fp16);
    }
  };
  fill(af, a);
  fill(bf, b);
  fill(df, d);
  if (g.beta == 0.f)  // beta == 0 must never read d: poison it
    for (auto& v : d) v = 0xffff;
  uint16_t *da, *db, *dc, *dd;
  CHECK_CUDA(cudaMalloc(&da, a.size() * 2));
  CHECK_CUDA(cudaMalloc(&db, b.size() * 2));
  CHECK_CUDA(cudaMalloc(&dc, sc * B * 2));
  CHECK_CUDA(cudaMalloc(&dd, d.size() * 2));
  CHECK_CUDA(cudaMemcpy(da, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(db, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dd, d.data(), d.size() * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dc, 0xff, sc * B * 2));  // NaN poison
  flyops::GemmParams p;
  p.M = M, p.N = N, p.K = K, p.batch = B;
  p.dtype = g.fp16 ? flyops::DType::kFloat16 : flyops::DType::kBFloat16;
  p.a = {da, lda, g.a_k_major, sa};
  p.b = {db, ldb, g.b_k_major, sb};
  p.c = dc, p.ldc = ldc, p.batch_stride_c = sc;
  p.alpha = g.alpha, p.beta = g.beta;
  p.cluster = g.cluster;
  p.path = g.wide ? 1 : g.path;
  p.gemv_runs = g.gemv_runs;
  p.kparts = g.kparts;
  p.split = g.split;
  if (g.d_kind != 0) p.d = dd + g.d_offset, p.d_stride_m = dsm, p.d_stride_n = dsn;
  // The split-K path's workspace, as the binding gives it (poisoned: every part writes its slots).
  void* ws = nullptr;
  if (const size_t bytes = flyops::gemm_workspace_bytes(p, flyops::device_info(0))) {
    CHECK_CUDA(cudaMalloc(&ws, bytes));
    CHECK_CUDA(cudaMemset(ws, 0xff, bytes));
    p.workspace = ws;
  }
  const flyops::Support sup = flyops::gemm_supports(p, flyops::device_info(0));
  char name[160];
  std::snprintf(name, sizeof(name), "%s %lldx%lldx%lld b%lld pad%lld a%g b%g d%d%s c%d%s", flyops::gemm_kernel_name(p, flyops::device_info(0)),
                (long long)M, (long long)N, (long long)K, (long long)B, (long long)g.pad, g.alpha, g.beta, g.d_kind,
                g.d_offset ? "+1" : "", g.cluster, g.odd_ldc ? " reg-epilogue" : "");
  if (!sup.ok) {
    std::printf("%s: unsupported (%s)\n", name, sup.reason);
    report(name, false);
    return;
  }
  const bool launched = flyops::gemm_run(p) == flyops::Status::kSuccess;
  if (!launched) std::printf("  launch failed: %s\n", flyops::gemm_last_error());
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint16_t> got(sc * B);
  CHECK_CUDA(cudaMemcpy(got.data(), dc, got.size() * 2, cudaMemcpyDeviceToHost));
  bool ok = launched;
  int64_t bad = 0;
  for (int64_t z = 0; z < B; ++z)
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) {
          const double x = af[z * sa + (g.a_k_major ? m * lda + k : k * lda + m)];
          const double y = bf[z * sb + (g.b_k_major ? n * ldb + k : k * ldb + n)];
          want += x * y;
        }
        want *= g.alpha;
        if (g.d_kind != 0 && g.beta != 0.f) want += double(g.beta) * df[g.d_offset + m * dsm + n * dsn];
        const uint16_t v = got[z * sc + m * ldc + n];
        if (v != to_bits(static_cast<float>(want), g.fp16)) {
          if (bad < 3)
            std::printf("  (%lld, %lld, %lld): got 0x%04x want %g\n", (long long)z, (long long)m, (long long)n, v,
                        want);
          ++bad;
        }
      }
      for (int64_t n = N; n < ldc; ++n) bad += got[z * sc + m * ldc + n] != 0xffff;  // padding untouched
    }
  report(name, ok && bad == 0);
  cudaFree(da);
  cudaFree(db);
  cudaFree(dc);
  cudaFree(dd);
  cudaFree(ws);
}

// A GEMM launched first thing from a new host thread, which has no current CUDA context
// until the runtime makes one (PyTorch's autograd workers are such threads): the tensor
// maps must still encode.
void test_gemm_fresh_thread() {
  uint16_t* buf;
  CHECK_CUDA(cudaMalloc(&buf, 3 * 64 * 64 * 2));
  CHECK_CUDA(cudaMemset(buf, 0, 3 * 64 * 64 * 2));
  CHECK_CUDA(cudaDeviceSynchronize());
  flyops::Status st = flyops::Status::kCudaError;
  std::thread t([&] {
    flyops::GemmParams p;
    p.M = p.N = p.K = 64;
    p.a = {buf, 64};
    p.b = {buf + 64 * 64, 64};
    p.c = buf + 2 * 64 * 64, p.ldc = 64;
    st = flyops::gemm_run(p);
    if (st != flyops::Status::kSuccess) std::printf("  %s\n", flyops::gemm_last_error());
    cudaDeviceSynchronize();
  });
  t.join();
  report("gemm from a fresh host thread", st == flyops::Status::kSuccess);
  cudaFree(buf);
}

}  // namespace

// ---- load_now: scalar 16/32-bit and 16-byte read-only loads, all issued before any use ----
__global__ void load_now_kernel(const uint16_t* h, const uint32_t* w, const uint4* q, uint32_t* out) {
  const int t = threadIdx.x;
  const uint16_t a = load_now(h + t);
  const uint32_t b = load_now(w + t);
  const uint4 c = load_now(q + t);
  out[t] = a ^ b ^ c.x ^ (c.y << 1) ^ (c.z << 2) ^ (c.w << 3);
}

void test_load_now() {
  constexpr int kN = 64;
  std::mt19937 rng(seeded(1001));
  std::vector<uint16_t> h(kN);
  std::vector<uint32_t> w(kN), q(4 * kN), expect(kN);
  for (auto& v : h) v = static_cast<uint16_t>(rng());
  for (auto& v : w) v = rng();
  for (auto& v : q) v = rng();
  for (int t = 0; t < kN; ++t)
    expect[t] = h[t] ^ w[t] ^ q[4 * t] ^ (q[4 * t + 1] << 1) ^ (q[4 * t + 2] << 2) ^ (q[4 * t + 3] << 3);
  uint16_t* dh;
  uint32_t *dw, *dq, *dout;
  CHECK_CUDA(cudaMalloc(&dh, kN * 2));
  CHECK_CUDA(cudaMalloc(&dw, kN * 4));
  CHECK_CUDA(cudaMalloc(&dq, kN * 16));
  CHECK_CUDA(cudaMalloc(&dout, kN * 4));
  CHECK_CUDA(cudaMemcpy(dh, h.data(), kN * 2, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dw, w.data(), kN * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemcpy(dq, q.data(), kN * 16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, kN * 4));
  load_now_kernel<<<1, kN>>>(dh, dw, reinterpret_cast<const uint4*>(dq), dout);
  std::vector<uint32_t> got(kN);
  CHECK_CUDA(cudaMemcpy(got.data(), dout, kN * 4, cudaMemcpyDeviceToHost));
  report("load_now u16/u32/16-byte", got == expect);
  cudaFree(dh);
  cudaFree(dw);
  cudaFree(dq);
  cudaFree(dout);
}

// ---- warp_suffix_sum / warp_prefix_sum: inclusive scans over the lanes of each warp -------
__global__ void warp_scan_kernel(const uint32_t* in, uint32_t* suffix, uint32_t* prefix) {
  const int t = threadIdx.x;
  suffix[t] = warp_suffix_sum(in[t]);
  prefix[t] = warp_prefix_sum(in[t]);
}

void test_warp_scans() {
  constexpr int kN = 128;  // four warps
  std::mt19937 rng(seeded(1002));
  std::vector<uint32_t> in(kN), suffix(kN), prefix(kN), got_s(kN), got_p(kN);
  for (auto& v : in) v = rng() % 100000;
  for (int w = 0; w < kN; w += 32) {
    uint32_t acc = 0;
    for (int l = 0; l < 32; ++l) prefix[w + l] = acc += in[w + l];
    acc = 0;
    for (int l = 31; l >= 0; --l) suffix[w + l] = acc += in[w + l];
  }
  uint32_t *din, *ds, *dp;
  CHECK_CUDA(cudaMalloc(&din, kN * 4));
  CHECK_CUDA(cudaMalloc(&ds, kN * 4));
  CHECK_CUDA(cudaMalloc(&dp, kN * 4));
  CHECK_CUDA(cudaMemcpy(din, in.data(), kN * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(ds, 0xff, kN * 4));
  CHECK_CUDA(cudaMemset(dp, 0xff, kN * 4));
  warp_scan_kernel<<<1, kN>>>(din, ds, dp);
  CHECK_CUDA(cudaMemcpy(got_s.data(), ds, kN * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_p.data(), dp, kN * 4, cudaMemcpyDeviceToHost));
  report("warp_suffix_sum / warp_prefix_sum", got_s == suffix && got_p == prefix);
  cudaFree(din);
  cudaFree(ds);
  cudaFree(dp);
}

// ---- sum_warps_before / sum_warps_after: totals of the other warps of a 16-warp CTA -------
__global__ void warp_totals_kernel(const uint32_t* totals, uint32_t* before, uint32_t* after) {
  __shared__ uint32_t per_warp[16];
  const int t = threadIdx.x;
  if (t < 16) per_warp[t] = totals[t];
  __syncthreads();
  before[t] = sum_warps_before<16>(per_warp, t >> 5);
  after[t] = sum_warps_after<16>(per_warp, t >> 5);
}

void test_warp_totals() {
  constexpr int kN = 512;
  std::mt19937 rng(seeded(1003));
  std::vector<uint32_t> totals(16), before(kN), after(kN), got_b(kN), got_a(kN);
  for (auto& v : totals) v = rng() % 100000;
  for (int t = 0; t < kN; ++t) {
    before[t] = after[t] = 0;
    for (int w = 0; w < 16; ++w) {
      if (w < t / 32) before[t] += totals[w];
      if (w > t / 32) after[t] += totals[w];
    }
  }
  uint32_t *dt, *db, *da;
  CHECK_CUDA(cudaMalloc(&dt, 16 * 4));
  CHECK_CUDA(cudaMalloc(&db, kN * 4));
  CHECK_CUDA(cudaMalloc(&da, kN * 4));
  CHECK_CUDA(cudaMemcpy(dt, totals.data(), 16 * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(db, 0xff, kN * 4));
  CHECK_CUDA(cudaMemset(da, 0xff, kN * 4));
  warp_totals_kernel<<<1, kN>>>(dt, db, da);
  CHECK_CUDA(cudaMemcpy(got_b.data(), db, kN * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(got_a.data(), da, kN * 4, cudaMemcpyDeviceToHost));
  report("sum_warps_before / sum_warps_after", got_b == before && got_a == after);
  cudaFree(dt);
  cudaFree(db);
  cudaFree(da);
}

// ---- a cluster hand-off: rank 0 stores into each CTA and arrives on its mbarrier; each
// CTA waits with cluster-scope acquire and must see the store, over several phases ----------
constexpr int kHandoffRounds = 5;
__global__ void handoff_kernel(const uint32_t* values, uint32_t* seen) {
  __shared__ uint64_t bar;
  __shared__ uint32_t word;
  const uint32_t rank = cluster_rank(), csize = cluster_size();
  if (threadIdx.x == 0) {
    word = 0xffffffffu;
    mbarrier_init(&bar, 1);
  }
  __syncthreads();
  cluster_sync();  // every CTA's barrier is initialised before rank 0 arrives on it
  for (int r = 0; r < kHandoffRounds; ++r) {
    if (rank == 0 && threadIdx.x < csize) {
      peer_store_u32(peer_addr(&word, threadIdx.x), values[r * csize + threadIdx.x]);
      mbarrier_arrive_cluster(&bar, threadIdx.x);
    }
    mbarrier_wait_cluster(&bar, r & 1);
    seen[(r * csize + rank) * blockDim.x + threadIdx.x] = word;
    cluster_sync();  // all have read this round's word before rank 0 stores the next one
  }
}

// The cluster exchange tests' launch: `values` uploaded, one cluster of kCtas CTAs of
// kThreads threads run as kernel(values, seen), and `words` words of seen (filled with
// `poison` bytes first) read back.
constexpr int kExchangeCtas = 4, kExchangeThreads = 64;
std::vector<uint32_t> run_exchange(void (*kernel)(const uint32_t*, uint32_t*), const std::vector<uint32_t>& values,
                                   size_t words, int poison) {
  std::vector<uint32_t> got(words);
  uint32_t *dv, *ds;
  CHECK_CUDA(cudaMalloc(&dv, values.size() * 4));
  CHECK_CUDA(cudaMalloc(&ds, words * 4));
  CHECK_CUDA(cudaMemcpy(dv, values.data(), values.size() * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(ds, poison, words * 4));
  CHECK_CUDA(launch_cluster(kernel, dim3(kExchangeCtas), dim3(kExchangeThreads), 0, nullptr, kExchangeCtas,
                            static_cast<const uint32_t*>(dv), ds));
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), ds, words * 4, cudaMemcpyDeviceToHost));
  cudaFree(dv);
  cudaFree(ds);
  return got;
}

void test_cluster_handoff() {
  constexpr int kCtas = kExchangeCtas, kThreads = kExchangeThreads;
  std::mt19937 rng(seeded(1004));
  std::vector<uint32_t> values(kHandoffRounds * kCtas), expect(kHandoffRounds * kCtas * kThreads);
  for (auto& v : values) v = rng();
  for (int r = 0; r < kHandoffRounds; ++r)
    for (int c = 0; c < kCtas; ++c)
      for (int t = 0; t < kThreads; ++t) expect[(r * kCtas + c) * kThreads + t] = values[r * kCtas + c];
  report("cluster hand-off: peer stores + mbarrier", run_exchange(&handoff_kernel, values, expect.size(), 0) == expect);
}

// ---- an asynchronous exchange: every CTA adds into rank 0's words by red.async, announcing
// their bytes with a relaxed remote arrival; rank 0 sends the sums back by st.async (16-,
// 8- and 4-byte forms), each completing on the receiver's mbarrier, over several phases ------
constexpr int kAsyncWords = 7;
__global__ void async_exchange_kernel(const uint32_t* values, uint32_t* seen) {
  __shared__ __align__(16) uint32_t sums[8];
  __shared__ __align__(16) uint32_t back[8];
  __shared__ uint64_t in_bar, out_bar;
  const uint32_t rank = cluster_rank(), csize = cluster_size();
  const int tid = threadIdx.x;
  if (tid < 8) sums[tid] = 0;
  if (tid == 0) {
    mbarrier_init(&in_bar, csize);
    mbarrier_init(&out_bar, 1);
  }
  __syncthreads();
  cluster_sync();  // every CTA's barriers are initialised and rank 0's sums zero
  const uint32_t in_bar0 = peer_addr(&in_bar, 0);
  for (int r = 0; r < kHandoffRounds; ++r) {
    if (tid == 0) mbarrier_arrive_expect_tx(&out_bar, 28);  // 16 + 8 + 4 bytes back
    if (tid < kAsyncWords)
      peer_red_add_async(peer_addr(&sums[tid], 0), values[(r * csize + rank) * kAsyncWords + tid], in_bar0);
    if (tid == 0) mbarrier_arrive_expect_tx_peer(in_bar0, kAsyncWords * 4);
    if (rank == 0) {
      mbarrier_wait(&in_bar, r & 1);
      uint32_t w[kAsyncWords];
      for (int i = 0; i < kAsyncWords; ++i) w[i] = sums[i];
      __syncthreads();
      if (tid < kAsyncWords) sums[tid] = 0;  // before any peer's next round, which waits on us
      __syncthreads();
      if (tid < static_cast<int>(csize)) {
        peer_store_async_v4(peer_addr(back, tid), make_uint4(w[0], w[1], w[2], w[3]), peer_addr(&out_bar, tid));
        peer_store_async_u64(peer_addr(&back[4], tid), (uint64_t{w[5]} << 32) | w[4], peer_addr(&out_bar, tid));
        peer_store_async_u32(peer_addr(&back[6], tid), w[6], peer_addr(&out_bar, tid));
      }
    }
    mbarrier_wait(&out_bar, r & 1);
    if (tid < kAsyncWords) seen[(r * csize + rank) * kAsyncWords + tid] = back[tid];
    __syncthreads();  // read before the next round's stores can land (rank 0 waits on this CTA first)
  }
  cluster_sync();  // no CTA leaves while a peer may still write into it
}

void test_cluster_async_exchange() {
  constexpr int kCtas = kExchangeCtas;
  std::mt19937 rng(seeded(1005));
  std::vector<uint32_t> values(kHandoffRounds * kCtas * kAsyncWords), expect(values.size());
  for (auto& v : values) v = rng() >> 4;  // sums of four stay below 2^32
  for (int r = 0; r < kHandoffRounds; ++r)
    for (int w = 0; w < kAsyncWords; ++w) {
      uint32_t sum = 0;
      for (int c = 0; c < kCtas; ++c) sum += values[(r * kCtas + c) * kAsyncWords + w];
      for (int c = 0; c < kCtas; ++c) expect[(r * kCtas + c) * kAsyncWords + w] = sum;
    }
  report("cluster async exchange: red.async in, st.async out, on mbarriers",
         run_exchange(&async_exchange_kernel, values, expect.size(), 0xff) == expect);
}

// ---- bulk reduction: shared fp32 added into global by TMA, twice in two groups ----
__global__ void bulk_reduce_kernel(float* dst, int n) {
  __shared__ __align__(128) float buf[4096];
  for (int i = threadIdx.x; i < n; i += blockDim.x) buf[i] = static_cast<float>(i % 97) - 48.f;
  fence_proxy_async();  // the stores, visible to the async proxy
  __syncthreads();
  if (threadIdx.x == 0) {
    bulk_reduce_add_s2g(dst, buf, n * 4);
    tma_store_commit();
    bulk_reduce_add_s2g(dst, buf, n * 4);
    tma_store_commit();
    tma_store_drain();
  }
}

void test_bulk_reduce() {
  const int n = 4096;
  std::vector<float> init(n);
  for (int i = 0; i < n; ++i) init[i] = static_cast<float>(i) * 0.25f;
  float* g;
  CHECK_CUDA(cudaMalloc(&g, n * 4));
  CHECK_CUDA(cudaMemcpy(g, init.data(), n * 4, cudaMemcpyHostToDevice));
  bulk_reduce_kernel<<<1, 256>>>(g, n);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(n);
  CHECK_CUDA(cudaMemcpy(got.data(), g, n * 4, cudaMemcpyDeviceToHost));
  bool ok = true;
  for (int i = 0; i < n; ++i) ok &= got[i] == init[i] + 2.f * (static_cast<float>(i % 97) - 48.f);  // exact
  report("bulk reduce-add fp32 shared -> global", ok);
  cudaFree(g);
}

// ---- bulk L2 prefetch: a hint with no result of its own; the range read after it (here
// by the same CTA, with ragged sizes and an odd 16-byte offset) holds what was written ----
__global__ void bulk_prefetch_kernel(const uint32_t* src, int words, uint32_t* sum) {
  if (threadIdx.x == 0) {
    bulk_prefetch_l2(src, static_cast<uint32_t>(words) * 4);
    bulk_prefetch_l2(src + 4, 16);
  }
  uint32_t mine = 0;
  for (int i = threadIdx.x; i < words; i += blockDim.x) mine += src[i];
  atomicAdd(sum, mine);
}

void test_bulk_prefetch() {
  const int words = 32000 + 4;  // not a multiple of the line
  std::mt19937 rng(seeded(1006));
  std::vector<uint32_t> v(words);
  uint32_t expect = 0;
  for (auto& x : v) expect += (x = rng());
  uint32_t *g, *sum;
  CHECK_CUDA(cudaMalloc(&g, words * 4));
  CHECK_CUDA(cudaMalloc(&sum, 4));
  CHECK_CUDA(cudaMemcpy(g, v.data(), words * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(sum, 0, 4));
  bulk_prefetch_kernel<<<1, 256>>>(g, words, sum);
  CHECK_CUDA(cudaDeviceSynchronize());
  uint32_t got = 0;
  CHECK_CUDA(cudaMemcpy(&got, sum, 4, cudaMemcpyDeviceToHost));
  report("bulk prefetch to L2, then the range read", got == expect);
  cudaFree(g);
  cudaFree(sum);
}

// ---- cp.async 16 bytes: each thread streams its own vectors through a private ring of
// four shared-memory slots, three groups in flight, reading back only what it copied (no
// barrier); past the range a zero-fill copy (src_bytes 0) keeps the group counts even ----
__global__ void cp_async_kernel(const uint4* src, int vecs, uint4* out) {
  __shared__ uint4 ring[4][128];
  const int t = threadIdx.x, steps = (vecs + 127) / 128;
  auto copy = [&](int c) {
    const int v = c * 128 + t;
    cp_async_16(&ring[c % 4][t], v < vecs ? src + v : src, v < vecs ? 16u : 0u);
    cp_async_commit();
  };
  for (int c = 0; c < 4; ++c) copy(c);
  for (int c = 0; c < steps; ++c) {
    cp_async_wait<3>();
    const uint4 q = ring[c % 4][t];
    const int v = c * 128 + t;
    if (v < vecs) out[v] = q;
    else if (q.x | q.y | q.z | q.w) out[0] = make_uint4(0, 0, 0, 0);  // a zero fill that was not
    copy(c + 4);
  }
  cp_async_wait<0>();
}

void test_cp_async() {
  const int vecs = 4000 + 3;  // a ragged last step
  std::mt19937 rng(seeded(1007));
  std::vector<uint32_t> v(vecs * 4);
  for (auto& x : v) x = rng() | 1u;
  uint4 *src, *out;
  CHECK_CUDA(cudaMalloc(&src, vecs * 16));
  CHECK_CUDA(cudaMalloc(&out, vecs * 16));
  CHECK_CUDA(cudaMemcpy(src, v.data(), vecs * 16, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0xff, vecs * 16));  // poisoned
  cp_async_kernel<<<1, 128>>>(src, vecs, out);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<uint32_t> got(vecs * 4);
  CHECK_CUDA(cudaMemcpy(got.data(), out, vecs * 16, cudaMemcpyDeviceToHost));
  report("cp.async 16 bytes through a per-thread ring", got == v);
  cudaFree(src);
  cudaFree(out);
}

// ---- align_1024: the first 1024-byte boundary of dynamic shared memory, less than 1024 on ----
__global__ void align_kernel(int* out) {
  extern __shared__ __align__(16) unsigned char dyn[];
  const unsigned char* a = align_1024(dyn);
  out[0] = static_cast<int>(smem_addr(a) % 1024);
  out[1] = static_cast<int>(a - dyn);
}

void test_align_1024() {
  int* d;
  CHECK_CUDA(cudaMalloc(&d, 8));
  align_kernel<<<1, 32, 4096>>>(d);
  int got[2] = {-1, -1};
  CHECK_CUDA(cudaMemcpy(got, d, 8, cudaMemcpyDeviceToHost));
  report("align_1024 of dynamic shared memory", got[0] == 0 && got[1] >= 0 && got[1] < 1024);
  cudaFree(d);
}

// ---- red.global.add.v2.f32: 64 CTAs add i - 32 (exact in fp32) to every pair of 4096
// floats, lane-consecutive pairs as the attention backward adds dQ ----
__global__ void red_add_kernel(float* g, int n) {
  const float add = static_cast<float>(static_cast<int>(blockIdx.x) - 32);
  for (int i = 2 * static_cast<int>(threadIdx.x); i < n; i += 2 * static_cast<int>(blockDim.x))
    red_add_f32x2(g + i, add, 2.f * add);
}

void test_red_add() {
  const int n = 4096, ctas = 64;
  std::vector<float> init(n);
  for (int i = 0; i < n; ++i) init[i] = static_cast<float>(i) * 0.5f;
  float* g;
  CHECK_CUDA(cudaMalloc(&g, n * 4));
  CHECK_CUDA(cudaMemcpy(g, init.data(), n * 4, cudaMemcpyHostToDevice));
  red_add_kernel<<<ctas, 256>>>(g, n);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<float> got(n);
  CHECK_CUDA(cudaMemcpy(got.data(), g, n * 4, cudaMemcpyDeviceToHost));
  // sum over CTAs of (c - 32) = -32 (c from 0 to 63); the odd element gets twice that
  bool ok = true;
  for (int i = 0; i < n; ++i) ok &= got[i] == init[i] + (i % 2 ? -64.f : -32.f);
  report("red.global.add.v2.f32 from 64 CTAs", ok);
  cudaFree(g);
}

// ---- red_shared_add_if: 256 threads add 16 values each into a shared 256-bin histogram where
// the value is in range; out-of-range values' addresses fall far outside the histogram (as
// small_cut's do), so memcheck (tile-memcheck in scripts/gpu-check) sees any that is not
// predicated off. Half the values crowd four bins, so same-address lanes are many ----
__global__ void red_shared_add_if_kernel(const unsigned* values, unsigned span, unsigned* out) {
  __shared__ unsigned hist[256];
  hist[threadIdx.x] = 0;
  __syncthreads();
  const unsigned base = static_cast<unsigned>(__cvta_generic_to_shared(hist));
  for (int j = 0; j < 16; ++j) {
    const unsigned d = values[j * blockDim.x + threadIdx.x];
    red_shared_add_if(d <= span, base + (d << 2), 1u + (d & 1u));
  }
  __syncthreads();
  out[threadIdx.x] = hist[threadIdx.x];
}

void test_red_shared_add_if() {
  const int n = 16 * 256;
  const unsigned span = 255;
  std::mt19937 rng(seeded(41));
  std::vector<unsigned> v(n), want(256, 0);
  for (int i = 0; i < n; ++i) {
    const unsigned r = rng();
    v[i] = r % 4 == 0 ? 256u + (r >> 4) : r % 4 == 1 ? (r >> 8) % 256 : 100 + (r >> 8) % 4;  // out, spread, crowded
    if (v[i] <= span) want[v[i]] += 1u + (v[i] & 1u);
  }
  unsigned *values, *out;
  CHECK_CUDA(cudaMalloc(&values, n * 4));
  CHECK_CUDA(cudaMalloc(&out, 256 * 4));
  CHECK_CUDA(cudaMemcpy(values, v.data(), n * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(out, 0xff, 256 * 4));
  red_shared_add_if_kernel<<<1, 256>>>(values, span, out);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<unsigned> got(256);
  CHECK_CUDA(cudaMemcpy(got.data(), out, 256 * 4, cudaMemcpyDeviceToHost));
  report("red_shared_add_if: predicated shared adds, crowded bins, far addresses off", got == want);
  cudaFree(values);
  cudaFree(out);
}

// ---- named barrier: warpgroups 1 and 2 exchange through shared memory on barrier 1 while
// warpgroup 0 takes no part ----
__global__ void named_barrier_kernel(int* out) {
  __shared__ int slot[256];
  const int wg = threadIdx.x / 128, t = threadIdx.x - 128;
  if (wg == 0) return;
  for (int round = 0; round < 4; ++round) {
    slot[t] = round * 1000 + t;
    named_barrier_sync(1, 256);
    const int peer = (t + 128) % 256;
    if (slot[peer] != round * 1000 + peer) atomicAdd(out, 1);
    named_barrier_sync(1, 256);
  }
}

void test_named_barrier() {
  int* bad;
  CHECK_CUDA(cudaMalloc(&bad, 4));
  CHECK_CUDA(cudaMemset(bad, 0, 4));
  named_barrier_kernel<<<1, 384>>>(bad);
  CHECK_CUDA(cudaDeviceSynchronize());
  int got = -1;
  CHECK_CUDA(cudaMemcpy(&got, bad, 4, cudaMemcpyDeviceToHost));
  report("named barrier between two of three warpgroups", got == 0);
  cudaFree(bad);
}

// ---- setmaxnreg: the producer warpgroup gives registers back (40), the two consumers take
// them (232), as the GEMM's roles do; values live across the change survive it, and the work
// after it is right. The increase waits for registers the CTA does not hold, so the launch's
// allocation is checked first: a kernel below it would hang, not fail. ----------------------
__global__ void __launch_bounds__(384, 1) regs_realloc_kernel(const uint32_t* in, uint32_t* out) {
  const int t = static_cast<int>(threadIdx.x);
  const uint32_t keep = in[t];
  if (t / 128 == 0) {
    regs_decrease<40>();
    out[t] = keep * 3u + 1u;
  } else {
    regs_increase<232>();
    uint32_t r[48];
#pragma unroll
    for (int i = 0; i < 48; ++i) r[i] = keep * (2u * i + 1u) + in[(t + i) % 384];
    uint32_t acc = 0;
#pragma unroll
    for (int i = 0; i < 48; ++i) acc = acc * 31u + (r[i] ^ r[47 - i]);
    out[t] = acc;
  }
}

void test_regs_realloc() {
  cudaFuncAttributes attr{};
  CHECK_CUDA(cudaFuncGetAttributes(&attr, regs_realloc_kernel));
  if (attr.numRegs * 384 < 40 * 128 + 232 * 2 * 128) {
    std::printf("setmaxnreg: the launch holds %d registers a thread, too few for 40 + 2 x 232\n", attr.numRegs);
    report("setmaxnreg 40 / 232 / 232 across warpgroups", false);
    return;
  }
  std::mt19937 rng(seeded(1006));
  std::vector<uint32_t> in(384), want(384), got(384, 0);
  for (auto& v : in) v = rng();
  for (int t = 0; t < 384; ++t) {
    if (t < 128) {
      want[t] = in[t] * 3u + 1u;
      continue;
    }
    uint32_t r[48], acc = 0;
    for (int i = 0; i < 48; ++i) r[i] = in[t] * (2u * i + 1u) + in[(t + i) % 384];
    for (int i = 0; i < 48; ++i) acc = acc * 31u + (r[i] ^ r[47 - i]);
    want[t] = acc;
  }
  uint32_t *din, *dout;
  CHECK_CUDA(cudaMalloc(&din, 384 * 4));
  CHECK_CUDA(cudaMalloc(&dout, 384 * 4));
  CHECK_CUDA(cudaMemcpy(din, in.data(), 384 * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMemset(dout, 0xff, 384 * 4));
  regs_realloc_kernel<<<1, 384>>>(din, dout);
  CHECK_CUDA(cudaDeviceSynchronize());
  CHECK_CUDA(cudaMemcpy(got.data(), dout, 384 * 4, cudaMemcpyDeviceToHost));
  report("setmaxnreg 40 / 232 / 232 across warpgroups", got == want);
  cudaFree(din);
  cudaFree(dout);
}

// ---- turns between CTAs: each waits (acquire) for its index, appends, releases the next ----
__global__ void turns_kernel(int* counter, int* order, int* data) {
  if (threadIdx.x != 0) return;
  const int me = static_cast<int>(blockIdx.x);
  while (ld_acquire_gpu(counter) != me) {
  }
  // The previous CTA's plain write is visible after the acquire: running sum in order.
  data[me + 1] = data[me] + me;
  order[me] = me;
  st_release_gpu(counter, me + 1);
}

void test_turns() {
  const int ctas = 64;  // all resident at once
  int *counter, *order, *data;
  CHECK_CUDA(cudaMalloc(&counter, 4));
  CHECK_CUDA(cudaMalloc(&order, ctas * 4));
  CHECK_CUDA(cudaMalloc(&data, (ctas + 1) * 4));
  CHECK_CUDA(cudaMemset(counter, 0, 4));
  CHECK_CUDA(cudaMemset(order, 0xff, ctas * 4));
  CHECK_CUDA(cudaMemset(data, 0, (ctas + 1) * 4));
  turns_kernel<<<ctas, 32>>>(counter, order, data);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<int> got(ctas + 1);
  CHECK_CUDA(cudaMemcpy(got.data(), data, (ctas + 1) * 4, cudaMemcpyDeviceToHost));
  int final_count = 0;
  CHECK_CUDA(cudaMemcpy(&final_count, counter, 4, cudaMemcpyDeviceToHost));
  report("acquire/release turns across 64 CTAs", final_count == ctas && got[ctas] == ctas * (ctas - 1) / 2);
  cudaFree(counter);
  cudaFree(order);
  cudaFree(data);
}

// ---- a count of finished CTAs: each writes its block, then (after a barrier) one thread adds
// one with red_release_gpu_add; the last CTA polls the count (acquire) and reads every block ----
__global__ void release_count_kernel(unsigned* count, int* data, long long* sum) {
  const int b = static_cast<int>(blockIdx.x), writers = static_cast<int>(gridDim.x) - 1;
  if (b < writers) {
    data[b * blockDim.x + threadIdx.x] = b * 1000 + static_cast<int>(threadIdx.x);
    __syncthreads();  // the block's writes before its one release
    if (threadIdx.x == 0) red_release_gpu_add(count, 1u);
    return;
  }
  if (threadIdx.x == 0)
    while (static_cast<unsigned>(ld_acquire_gpu(reinterpret_cast<const int*>(count))) < static_cast<unsigned>(writers)) {
    }
  __syncthreads();  // what thread 0 acquired, for the whole CTA
  long long s = 0;
  for (int i = threadIdx.x; i < writers * static_cast<int>(blockDim.x); i += blockDim.x) s += data[i];
  atomicAdd(reinterpret_cast<unsigned long long*>(sum), static_cast<unsigned long long>(s));
}

void test_release_count() {
  const int ctas = 64, threads = 256, writers = ctas - 1;  // all resident at once
  unsigned* count;
  int* data;
  long long* sum;
  CHECK_CUDA(cudaMalloc(&count, 4));
  CHECK_CUDA(cudaMalloc(&data, writers * threads * 4));
  CHECK_CUDA(cudaMalloc(&sum, 8));
  CHECK_CUDA(cudaMemset(count, 0, 4));
  CHECK_CUDA(cudaMemset(data, 0xff, writers * threads * 4));  // -1 where a write is not seen
  CHECK_CUDA(cudaMemset(sum, 0, 8));
  release_count_kernel<<<ctas, threads>>>(count, data, sum);
  CHECK_CUDA(cudaDeviceSynchronize());
  long long got = 0, want = 0;
  unsigned final_count = 0;
  CHECK_CUDA(cudaMemcpy(&got, sum, 8, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(&final_count, count, 4, cudaMemcpyDeviceToHost));
  for (int b = 0; b < writers; ++b)
    for (int t = 0; t < threads; ++t) want += b * 1000 + t;
  report("release count of 63 CTAs, polled by the 64th", final_count == static_cast<unsigned>(writers) && got == want);
  cudaFree(count);
  cudaFree(data);
  cudaFree(sum);
}

// For racecheck and synccheck (`--race`): one small call of each GEMM kernel form (wide
// single CTAs and pairs, the staged and the lanes' epilogue, split-K, decode with cluster
// parts, narrow), on a K-major and an MN-major layout. The cluster hand-off test stays out:
// racecheck stopped on an internal sanitizer error there (docs/perf-notes.md, GEMM v17).
void gemm_race_set() {
  for (int layout : {3, 0}) {
    const bool ak = layout & 2, bk = layout & 1;
    test_gemm({129, 257, 520, ak, bk});
    test_gemm({136, 264, 72, ak, bk, false, 1, 0, 1.f, 1.f, 1});
    test_gemm({520, 700, 136, ak, bk, false, 1, 0, 1.f, 0.f, 0, 2});
    test_gemm({129, 257, 520, ak, bk, false, 1, 0, 1.f, 1.f, 1, 0, true});
    test_gemm({150, 500, 1000, ak, bk, true, 1, 0, 1.f, 0.f, 0, 0, false, false, 0, 0, 4});
    test_gemm({33, 500, 192, ak, bk, true});
    test_gemm({5, 300, 600, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, false, false, 2});
  }
  GemmCase narrow{9, 203, 1000, true, true, true};
  narrow.gemv_runs = 2;
  narrow.path = 3;
  test_gemm(narrow);
}

int main(int argc, char** argv) {
  g_seed = std::random_device{}();
  bool race = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seed") && i + 1 < argc) g_seed = static_cast<uint32_t>(std::strtoul(argv[++i], nullptr, 10));
    if (!std::strcmp(argv[i], "--race")) race = true;
  }
  std::printf("flyops_tile_selftest seed=%u (--seed %u repeats this run)\n", g_seed, g_seed);
  int dev = 0, major = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess || major != 9) {
    std::printf("tile selftest: needs an sm_90 GPU\n");
    return 1;
  }
  if (race) {
    gemm_race_set();
    std::printf("tile selftest (race set): %d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 0 : 1;
  }
  test_gemm_fresh_thread();  // first, before this program's other threads matter
  test_tma_map_cache();
  test_load_now();
  test_warp_scans();
  test_warp_totals();
  test_cluster_handoff();
  test_cluster_async_exchange();
  test_named_barrier();
  test_regs_realloc();
  test_bulk_reduce();
  test_bulk_prefetch();
  test_cp_async();
  test_red_add();
  test_red_shared_add_if();
  test_align_1024();
  test_turns();
  test_release_count();
  test_dependent_launch();
  test_tma_load(false);
  test_tma_load(true);
  test_tma_load<Swizzle::k64B>(false);
  test_tma_load<Swizzle::k32B>(false);
  test_tma_store();
  test_ring();
  test_wgmma();
  test_wgmma_block<bf16, bf16, 64, false>("wgmma k16 bf16 SS, 128B swizzle, 4 steps");
  test_wgmma_block<fp16, fp16, 256, false>("wgmma k16 fp16 SS n256, 4 steps");
  test_wgmma_block<bf16, bf16, 128, true>("wgmma k16 bf16 RS n128, 4 steps");
  test_wgmma_block<fp16, fp16, 64, true>("wgmma k16 fp16 RS, 4 steps");
  test_wgmma_block<fp8e4m3, fp8e4m3, 64, false>("wgmma k32 e4m3 x e4m3 SS, 4 steps");
  test_wgmma_block<fp8e5m2, fp8e4m3, 128, false>("wgmma k32 e5m2 x e4m3 SS n128, 4 steps");
  test_wgmma_block<fp8e4m3, fp8e5m2, 256, false>("wgmma k32 e4m3 x e5m2 SS n256, 4 steps");
  test_wgmma_block<fp8e5m2, fp8e5m2, 64, false>("wgmma k32 e5m2 x e5m2 SS, 4 steps");
  test_wgmma_block<fp8e4m3, fp8e4m3, 256, true>("wgmma k32 e4m3 x e4m3 RS n256, 4 steps");
  test_wgmma_block<fp8e5m2, fp8e4m3, 64, true>("wgmma k32 e5m2 x e4m3 RS, 4 steps");
  test_wgmma_block<bf16, bf16, 128, false, 64>("wgmma k16 bf16 SS n128, 64B swizzle, 2 steps");
  test_wgmma_block<fp8e4m3, fp8e4m3, 64, true, 64>("wgmma k32 e4m3 RS, 64B swizzle, 2 steps");
  test_wgmma_block<fp8e4m3, fp8e5m2, 128, false, 32>("wgmma k32 e4m3 x e5m2 SS n128, 32B swizzle");
  test_wgmma_mn<bf16, 128, false, true>("wgmma k16 bf16 SS n128, B N-major (wgmma_desc_mnmajor)");
  test_wgmma_mn<fp16, 64, true, false>("wgmma k16 fp16 SS n64, A M-major");
  test_wgmma_mn<bf16, 256, true, true>("wgmma k16 bf16 SS n256, A M-major and B N-major");
  test_tma_box<3, false>({21, 6, 5}, {16, 4, 3}, {8, -2, 3});
  test_tma_box<4, false>({40, 3, 4, 3}, {16, 2, 3, 2}, {32, 2, 2, 1});
  test_tma_box<5, false>({21, 3, 4, 2, 3}, {16, 2, 2, 2, 2}, {16, 2, -1, 1, 2});
  test_tma_box<5, false>({21, 3, 4, 2, 3}, {8, 3, 4, 2, 3}, {0, 0, 0, 0, 0});
  test_tma_box<3, true>({24, 6, 5}, {16, 4, 3}, {16, 4, 3});
  test_tma_box<4, true>({40, 3, 4, 3}, {16, 2, 3, 2}, {24, 2, 2, 2});
  test_tma_box<5, true>({24, 3, 4, 2, 3}, {8, 2, 2, 2, 2}, {16, 2, 3, 1, 2});
  test_mma<bf16>(false);
  test_mma<fp16>(true);
  test_stmatrix<bf16>(false);
  test_stmatrix<fp16>(true);
  // Sums of up to K products of [-4, 4] integers are exact in fp32; bf16 rounds the larger
  // ones the same way on both sides (the reference rounds the exact sum once).
  for (int layout = 0; layout < 4; ++layout) {
    const bool ak = layout & 2, bk = layout & 1;
    for (bool fp16 : {false, true}) {
      test_gemm({128, 256, 64, ak, bk, fp16});
      test_gemm({256, 512, 192, ak, bk, fp16});
      test_gemm({129, 257, 520, ak, bk, fp16});
    }
    test_gemm({1, 8, 8, ak, bk});
    test_gemm({17, 4104, 40, ak, bk});
    test_gemm({300, 500, 72, ak, bk, false, 1, 8});
    test_gemm({1, 1000, 4096, ak, bk});
    test_gemm({200, 136, 96, ak, bk, false, 3});
    test_gemm({300, 500, 72, ak, bk, false, 1, 0, 1.f, 0.f, 0, 1});   // single CTAs
    test_gemm({520, 700, 136, ak, bk, false, 2, 0, 1.f, 0.f, 0, 2});  // pairs, odd tile rows
    test_gemm({129, 257, 520, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, true});
    test_gemm({17, 4104, 40, ak, bk, true, 1, 0, 1.f, 0.f, 0, 2, true});
    // Split along K (splitk.cuh): one tile in 8 parts (C by the lanes), 12 tiles in 4 (TMA
    // stores), K not a multiple of the block in 8 parts of two blocks.
    test_gemm({113, 203, 4096, ak, bk});
    test_gemm({300, 1000, 1024, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, false, false, 0, 0, 4});
    test_gemm({150, 500, 1000, ak, bk, true, 1, 0, 1.f, 0.f, 0, 0, false, false, 0, 0, 8});
  }
  // Split along K with the addend's forms, an odd ldc and batches.
  test_gemm({200, 264, 2048, true, true, true, 1, 0, 2.f, 0.5f, 3, 0, false, false, 0, 0, 8});
  test_gemm({130, 300, 1024, true, false, false, 1, 0, 1.f, 1.f, 1, 0, true, false, 0, 0, 2});
  test_gemm({129, 257, 1024, true, true, false, 3, 0, 1.f, 0.f, 0, 0, false, false, 0, 0, 4});
  test_gemm({100, 1000, 2048, false, true, false, 1, 0, 1.f, -2.f, 2, 0, false, false, 0, 0, 2});
  // The staged (TMA-store) epilogue's forms, N % 8 == 0: a bias (F.linear), scaled, a column
  // and a full addend (the general form), a bias one element off 4-byte alignment (general),
  // a batched bias; N past a tile edge inside a box and rows past M inside a warp's box.
  for (int layout = 0; layout < 4; ++layout) {
    const bool ak = layout & 2, bk = layout & 1;
    test_gemm({136, 264, 72, ak, bk, false, 1, 0, 1.f, 1.f, 1});
    test_gemm({136, 264, 72, ak, bk, true, 1, 0, 2.f, 0.5f, 1});
    test_gemm({130, 512, 64, ak, bk, false, 1, 0, 0.5f, 0.f, 0});
    test_gemm({200, 264, 96, ak, bk, false, 1, 0, 1.f, -2.f, 2});
    test_gemm({200, 264, 96, ak, bk, true, 1, 0, 2.f, 1.f, 3});
    test_gemm({136, 264, 72, ak, bk, false, 1, 0, 1.f, 1.f, 1, 0, false, false, 0, 1});
    test_gemm({77, 328, 200, ak, bk, false, 3, 0, 1.f, 1.f, 1});
  }
  test_gemm({130, 300, 64, true, true, false, 1, 0, 2.f, 1.f, 3, 0, true});
  test_gemm({130, 300, 64, false, true, false, 3, 0, 1.f, 1.f, 1, 1, true});
  // N odd: no TMA store, so the lanes copy C out; a bias there is read per element (its
  // last pair would run past it).
  test_gemm({129, 257, 520, true, true, false, 1, 0, 1.f, 1.f, 1});
  test_gemm({300, 1001, 136, true, false, true, 2, 0, 2.f, 0.5f, 1});
  test_gemm({300, 1001, 136, false, true, false, 1, 0, 1.f, 0.f, 0, 2});
  // The decode path (M <= 64) on every layout, with and without it (the wide kernel):
  // both padded widths (16, 64), K cut into 1 to 8 cluster parts, K and N tails.
  for (int layout = 0; layout < 4; ++layout) {
    const bool ak = layout & 2, bk = layout & 1;
    test_gemm({64, 4096, 1024, ak, bk});
    test_gemm({64, 4096, 1024, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, false, true});
    test_gemm({33, 500, 192, ak, bk, true});
    test_gemm({8, 1000, 4096, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, true});
    test_gemm({1, 4096, 4096, ak, bk});
    test_gemm({3, 1000, 4104, ak, bk, true});
    test_gemm({16, 129, 640, ak, bk});
    test_gemm({17, 130, 8, ak, bk});
    test_gemm({64, 200, 100, ak, bk, true});
    for (int parts : {1, 2, 8})  // K runs of one or two blocks, and one part with a tail
      test_gemm({5, 300, 600, ak, bk, false, 1, 0, 1.f, 0.f, 0, 0, false, false, parts});
  }
  // The narrow kernel (M <= 16, both operands K-major): one and two 8-wide columns of A,
  // 1 to 8 K runs a row group (runs empty, partial, a K tail inside a block; a CTA's last
  // groups past N), N tails, batches, the addend's forms, fp16; the same shapes on the
  // decode kernel (path 2).
  for (int runs : {1, 2, 4, 8})
    for (int64_t m : {1, 5, 8, 9, 16}) {
      GemmCase c{m, 203, 1000, true, true, m % 2 == 1};
      c.gemv_runs = runs;
      c.path = 3;
      test_gemm(c);
    }
  for (int path : {3, 2}) {
    GemmCase c{16, 4104, 4096};
    c.path = path;
    test_gemm(c);
    GemmCase e{7, 1001, 4104, true, true, true, 3, 0, 2.f, 0.5f, 3};
    e.path = path;
    test_gemm(e);
    GemmCase f{12, 777, 520, true, true, false, 1, 0, 1.f, 1.f, 1};
    f.path = path;
    test_gemm(f);
    GemmCase h{1, 17, 8, true, true, false, 2, 0, 1.f, -1.f, 2};
    h.path = path;
    test_gemm(h);
  }
  // The launcher's choice between the narrow and the decode kernel (short K, 9-16 rows on a
  // large weight: the decode kernel).
  test_gemm({16, 8200, 8192});
  test_gemm({4, 700, 2048, true, true, true});
  test_gemm({4, 700, 2040});
  // K not a multiple of 8 (a 16-byte piece would cross a row's end): the decode kernel.
  test_gemm({5, 300, 100});
  test_gemm({1, 64, 1});
  test_gemm({16, 70, 36, true, true, true});
  // A one element off 16-byte alignment: neither the narrow kernel nor TMA can read it
  // (reported unsupported: the binding's route to stock).
  {
    const flyops::GemmParams probe = [] {
      flyops::GemmParams p;
      p.M = 4, p.N = 64, p.K = 64, p.a = {reinterpret_cast<const void*>(uintptr_t{2}), 64}, p.b = {reinterpret_cast<const void*>(uintptr_t{256}), 64};
      p.c = reinterpret_cast<void*>(uintptr_t{256}), p.ldc = 64;
      return p;
    }();
    report("gemm: A off 16-byte alignment is unsupported", !flyops::gemm_supports(probe, flyops::device_info(0)).ok);
  }
  test_gemm({16, 300, 128, true, true, false, 1, 0, 2.f, 1.f, 1});
  test_gemm({16, 300, 128, true, false, true, 1, 0, 0.5f, -2.f, 3});
  // nn.Linear(512, 1000)'s backward on 148 rows: dX = dY W, dW = dY^T X.
  test_gemm({148, 512, 1000, true, false});
  test_gemm({1000, 512, 148, false, false});
  test_gemm({130, 300, 64, true, false, false, 1, 0, 2.f, 1.f, 1});
  test_gemm({130, 300, 64, true, true, true, 2, 0, 1.f, -0.5f, 2});
  test_gemm({130, 300, 64, false, false, false, 1, 0, 0.5f, 2.f, 3});
  test_gemm({64, 64, 64, true, true, false, 1, 0, 1.f, 0.f, 3});  // beta 0: d never read (decode path)
  std::printf("tile selftest: %d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
