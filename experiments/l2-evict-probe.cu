// Does an evict-first L2 policy on streamed reads spare the write-back of a dirty L2?
//
// The benchmarks flush the L2 with a 256 MiB memset, which leaves it full of dirty lines;
// a kernel that then streams X bytes evicts them and shares the DRAM with their write-back
// (GEMM decode and the large TopK cases: perf-notes, "The L2 flush's kind"). A read whose
// lines are marked evict-first should, once a set holds one of them, evict its own clean
// lines instead. This probe streams X bytes after each flush kind with each load form and
// prints GB/s (median of CUDA events around the stream alone).
//
//   nvcc -O3 -std=c++17 -arch=sm_90a -Iinclude experiments/l2-evict-probe.cu -o l2-evict-probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/mbarrier.h"
#include "flyops/tile/tma.h"

namespace {

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

enum Form { kPlain, kCs, kHintFirst, kNoAllocHintFirst, kNcNoAllocHintFirst, kNumVecForms };
const char* kFormNames[] = {"ld.v4", "ld.cs.v4", "ld.L2::evict_first", "ld.L1::no_allocate.L2::evict_first",
                            "ld.nc.L1::no_allocate.L2::evict_first"};

__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}

template <int F>
__device__ __forceinline__ uint4 load(const uint4* a, uint64_t pol) {
  uint4 r;
  if constexpr (F == kPlain)
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a));
  else if constexpr (F == kCs)
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a));
  else if constexpr (F == kHintFirst)
    asm volatile("ld.global.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a), "l"(pol));
  else if constexpr (F == kNoAllocHintFirst)
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a), "l"(pol));
  else
    asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(a), "l"(pol));
  return r;
}

// Eight 16-byte loads in flight per thread, grid-stride; the XOR keeps them live.
template <int F>
__global__ void stream_vec(const uint4* a, size_t n16, unsigned* out) {
  const uint64_t pol = evict_first_policy();
  const size_t stride = size_t{gridDim.x} * blockDim.x;
  unsigned acc = 0;
  size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x;
  for (; i + 7 * stride < n16; i += 8 * stride) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = load<F>(a + i + u * stride, pol);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < n16; i += stride) {
    const uint4 v = load<F>(a + i, pol);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // never true for the fill; keeps the loads
}

// Bulk copies into a ring of shared-memory stages (what TMA-fed kernels do), one issuing
// thread per CTA; `hint` adds the evict-first cache policy.
constexpr int kStages = 4;
constexpr uint32_t kChunk = 32768;
template <bool kHint>
__global__ void stream_bulk(const char* a, size_t bytes, unsigned* out) {
  extern __shared__ __align__(128) char smem[];
  __shared__ uint64_t full[kStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kStages; ++s) flyops::tile::mbarrier_init(&full[s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const uint64_t pol = evict_first_policy();
  const size_t chunks = bytes / kChunk;
  uint32_t phase[kStages] = {};
  size_t issued = 0, done = 0;
  auto issue = [&](size_t c) {
    const int s = static_cast<int>(issued % kStages);
    flyops::tile::mbarrier_arrive_expect_tx(&full[s], kChunk);
    const char* src = a + c * kChunk;
    void* dst = smem + s * kChunk;
    if constexpr (kHint)
      asm volatile(
          "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
              flyops::tile::smem_addr(dst)),
          "l"(src), "r"(kChunk), "r"(flyops::tile::smem_addr(&full[s])), "l"(pol)
          : "memory");
    else
      flyops::tile::bulk_copy_g2s(dst, src, kChunk, &full[s]);
    ++issued;
  };
  size_t c = blockIdx.x;
  for (int s = 0; s < kStages && c < chunks; ++s, c += gridDim.x) issue(c);
  unsigned acc = 0;
  while (done < issued) {
    const int s = static_cast<int>(done % kStages);
    flyops::tile::mbarrier_wait(&full[s], phase[s]);
    phase[s] ^= 1;
    acc ^= static_cast<unsigned char>(smem[s * kChunk]);
    ++done;
    if (c < chunks) {
      issue(c);
      c += gridDim.x;
    }
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

// The decode kernel's access shape: TMA boxes of 128 rows x 64 bf16 (128 bytes a row, 128-byte
// swizzle) of a K-major weight matrix (K = 4096: rows 8 KB apart). A stage holds kRun boxes
// at consecutive K (so each row is read in runs of 128 kRun bytes); 128 KB in flight a CTA.
constexpr int kK = 4096, kBoxRows = 128, kBoxK = 64;
constexpr uint32_t kBoxBytes = kBoxRows * kBoxK * 2;
template <int kRun>
__global__ void stream_boxes(const __grid_constant__ CUtensorMap map, int row_blocks, unsigned* out) {
  constexpr int kSt = 8 / kRun;  // stages: 8 boxes in flight
  extern __shared__ __align__(128) char smem_raw[];
  __shared__ uint64_t full[8];
  char* smem = smem_raw + ((1024u - (flyops::tile::smem_addr(smem_raw) & 1023u)) & 1023u);  // swizzle 128B
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kSt; ++s) flyops::tile::mbarrier_init(&full[s], 1);
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  const int runs = kK / (kBoxK * kRun);
  // CTA c takes an even share of the (row block, run) items, runs of a row block in order
  // (as the decode kernel's K parts do).
  const int total = row_blocks * runs;
  const int first = static_cast<int>(int64_t{total} * blockIdx.x / gridDim.x);
  const int items = static_cast<int>(int64_t{total} * (blockIdx.x + 1) / gridDim.x) - first;
  uint32_t phase[8] = {};
  int issued = 0, done = 0;
  auto issue = [&](int it) {
    const int s = issued % kSt;
    flyops::tile::mbarrier_arrive_expect_tx(&full[s], kRun * kBoxBytes);
    const int rb = (first + it) / runs, run = (first + it) % runs;
    for (int q = 0; q < kRun; ++q)
      flyops::tile::tma_load(smem + (s * kRun + q) * kBoxBytes, &map, &full[s], (run * kRun + q) * kBoxK,
                             rb * kBoxRows);
    ++issued;
  };
  int it = 0;
  for (; it < kSt && it < items; ++it) issue(it);
  unsigned acc = 0;
  while (done < issued) {
    const int s = done % kSt;
    flyops::tile::mbarrier_wait(&full[s], phase[s]);
    phase[s] ^= 1;
    acc ^= static_cast<unsigned char>(smem[s * kRun * kBoxBytes]);
    ++done;
    if (it < items) issue(it++);
  }
  if (acc == 0x9e3779b9u) out[0] = acc;
}

__global__ void fill(uint32_t* p, size_t n) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x)
    p[i] = static_cast<uint32_t>(i * 2654435761u) | 1u;
}

}  // namespace

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const size_t flush_bytes = size_t{256} << 20, max_bytes = size_t{1} << 30;
  char *flush = nullptr, *data = nullptr;
  unsigned* out = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&data, max_bytes));
  CHECK(cudaMalloc(&out, 64));
  fill<<<1024, 256>>>(reinterpret_cast<uint32_t*>(data), max_bytes / 4);
  fill<<<1024, 256>>>(reinterpret_cast<uint32_t*>(flush), flush_bytes / 4);
  const int bulk_smem = kStages * kChunk;
  CHECK(cudaFuncSetAttribute(stream_bulk<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_smem));
  CHECK(cudaFuncSetAttribute(stream_bulk<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_smem));
  const int box_smem = 8 * kBoxBytes + 1024;
  CHECK(cudaFuncSetAttribute(stream_boxes<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, box_smem));
  CHECK(cudaFuncSetAttribute(stream_boxes<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, box_smem));
  CHECK(cudaFuncSetAttribute(stream_boxes<4>, cudaFuncAttributeMaxDynamicSharedMemorySize, box_smem));
  CHECK(cudaFuncSetAttribute(stream_boxes<8>, cudaFuncAttributeMaxDynamicSharedMemorySize, box_smem));
  CHECK(cudaDeviceSynchronize());
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));

  const size_t sizes[] = {size_t{32} << 20, size_t{64} << 20, size_t{112} << 20, size_t{256} << 20};
  const char* flush_names[] = {"memset", "read"};
  for (size_t bytes : sizes) {
    for (int fk = 0; fk < 2; ++fk) {
      flyops::tile::TmaShape shape;
      shape.base = data;
      shape.dims[0] = kK;
      shape.dims[1] = bytes / (2 * kK);
      shape.strides_bytes[0] = 2 * kK;
      shape.box[0] = kBoxK;
      shape.box[1] = kBoxRows;
      shape.swizzle = flyops::tile::Swizzle::k128B;
      CUtensorMap map;
      if (!flyops::tile::tma_encode(&map, shape, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)) {
        std::printf("tensor map encode failed\n");
        return 1;
      }
      const int row_blocks = static_cast<int>(shape.dims[1] / kBoxRows);
      for (int form = 0; form < kNumVecForms + 6; ++form) {
        std::vector<float> ms;
        for (int rep = 0; rep < 25; ++rep) {
          if (fk == 0)
            CHECK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
          else
            stream_vec<kPlain><<<sms * 8, 256>>>(reinterpret_cast<const uint4*>(flush), flush_bytes / 16, out);
          CHECK(cudaEventRecord(e0));
          const uint4* a = reinterpret_cast<const uint4*>(data);
          switch (form) {
            case kPlain: stream_vec<kPlain><<<sms * 8, 256>>>(a, bytes / 16, out); break;
            case kCs: stream_vec<kCs><<<sms * 8, 256>>>(a, bytes / 16, out); break;
            case kHintFirst: stream_vec<kHintFirst><<<sms * 8, 256>>>(a, bytes / 16, out); break;
            case kNoAllocHintFirst: stream_vec<kNoAllocHintFirst><<<sms * 8, 256>>>(a, bytes / 16, out); break;
            case kNcNoAllocHintFirst: stream_vec<kNcNoAllocHintFirst><<<sms * 8, 256>>>(a, bytes / 16, out); break;
            case kNumVecForms: stream_bulk<false><<<sms, 32, bulk_smem>>>(data, bytes, out); break;
            case kNumVecForms + 1: stream_bulk<true><<<sms, 32, bulk_smem>>>(data, bytes, out); break;
            case kNumVecForms + 2: stream_boxes<1><<<sms, 32, box_smem>>>(map, row_blocks, out); break;
            case kNumVecForms + 3: stream_boxes<2><<<sms, 32, box_smem>>>(map, row_blocks, out); break;
            case kNumVecForms + 4: stream_boxes<4><<<sms, 32, box_smem>>>(map, row_blocks, out); break;
            default: stream_boxes<8><<<sms, 32, box_smem>>>(map, row_blocks, out); break;
          }
          CHECK(cudaEventRecord(e1));
          CHECK(cudaEventSynchronize(e1));
          float t = 0;
          CHECK(cudaEventElapsedTime(&t, e0, e1));
          if (rep >= 3) ms.push_back(t);
        }
        CHECK(cudaGetLastError());
        std::sort(ms.begin(), ms.end());
        const float med = ms[ms.size() / 2];
        const char* kExtra[] = {"bulk", "bulk.L2::evict_first", "TMA boxes, rows in runs of 128 B",
                                "TMA boxes, runs of 256 B", "TMA boxes, runs of 512 B", "TMA boxes, runs of 1 KB"};
        const char* name = form < kNumVecForms ? kFormNames[form] : kExtra[form - kNumVecForms];
        std::printf("%6zu MiB  flush=%-6s  %-40s %8.1f us  %7.0f GB/s\n", bytes >> 20, flush_names[fk], name,
                    med * 1e3, bytes / (med * 1e-3) / 1e9);
      }
    }
  }
  return 0;
}
