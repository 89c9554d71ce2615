// Probe (not part of the build): how fast one CTA an SM streams its slice of a 64 MiB buffer
// through a shared-memory ring filled by bulk copies (stages x bytes), against plain 16-byte
// loads with U vectors a thread in flight. Consumer: an XOR of every word (kept live).
// nvcc -O3 -gencode arch=compute_90a,code=sm_90a -I include experiments/ring-stream-probe.cu
#include <cstdio>
#include <cstdint>
#include <cuda_runtime.h>
#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/mbarrier.h"

constexpr int kThreads = 512;

template <int kStages, int kStageBytes>
__global__ void __launch_bounds__(kThreads, 1) ring(const uint4* x, int64_t slice_vecs, uint32_t* out) {
  extern __shared__ __align__(16) uint4 smem[];
  __shared__ uint64_t full[kStages];
  constexpr int kStepVecs = kStageBytes / 16;
  const uint4* src = x + blockIdx.x * slice_vecs;
  const int steps = static_cast<int>((slice_vecs + kStepVecs - 1) / kStepVecs);
  if (threadIdx.x == 0)
    for (int i = 0; i < kStages; ++i) flyops::tile::mbarrier_init(&full[i], 1);
  __syncthreads();
  auto issue = [&](int j) {
    const int s = j % kStages;
    const uint32_t bytes = static_cast<uint32_t>(min(static_cast<int64_t>(kStepVecs), slice_vecs - int64_t(j) * kStepVecs)) * 16u;
    flyops::tile::mbarrier_arrive_expect_tx(&full[s], bytes);
    flyops::tile::bulk_copy_g2s(smem + s * kStepVecs, src + int64_t(j) * kStepVecs, bytes, &full[s]);
  };
  if (threadIdx.x == 0)
    for (int j = 0; j < min(steps, kStages); ++j) issue(j);
  uint32_t acc = 0;
  for (int j = 0; j < steps; ++j) {
    const int s = j % kStages;
    flyops::tile::mbarrier_wait(&full[s], (j / kStages) & 1u);
    for (int i = threadIdx.x; i < kStepVecs; i += kThreads) {
      const uint4 v = smem[s * kStepVecs + i];
      acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    __syncthreads();
    if (threadIdx.x == 0 && j + kStages < steps) issue(j + kStages);
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Plain 16-byte loads, kU vectors a thread a turn: a CTA's own contiguous slice of
// slice_vecs (kStrided false), or blocks c, c + G, ... of kThreads * kU vectors over the whole
// buffer (kStrided: the GPU sweeps it in order).
template <int kU, bool kStrided>
__global__ void __launch_bounds__(kThreads, 1) plain(const uint4* x, int64_t slice_vecs, int64_t total_vecs,
                                                     uint32_t* out) {
  constexpr int64_t kTurn = int64_t(kThreads) * kU;
  const int64_t first = kStrided ? blockIdx.x * kTurn : blockIdx.x * slice_vecs;
  const int64_t step = kStrided ? gridDim.x * kTurn : kTurn;
  const int64_t end = kStrided ? total_vecs : first + slice_vecs;
  uint32_t acc = 0;
  for (int64_t b = first; b < end; b += step) {
    uint4 q[kU];
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t v = b + u * kThreads + threadIdx.x;
      q[u] = v < end ? __ldcs(x + v) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kU; ++u) acc ^= q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;
}

// Many short blocks of 256 threads, 4 vectors each (the delegates' maxima stream's shape).
__global__ void __launch_bounds__(256) blocks(const uint4* x, uint32_t* out) {
  const int64_t v0 = int64_t(blockIdx.x) * 1024 + threadIdx.x;
  uint4 q[4];
#pragma unroll
  for (int u = 0; u < 4; ++u) q[u] = __ldcs(x + v0 + u * 256);
  uint32_t acc = 0;
#pragma unroll
  for (int u = 0; u < 4; ++u) acc ^= q[u].x ^ q[u].y ^ q[u].z ^ q[u].w;
  if (acc == 0x12345678u) out[0] = acc;
}

int main() {
  const int64_t bytes = 64ll << 20;
  uint4* x;
  uint32_t* out;
  char* flush;
  cudaMalloc(&x, bytes);
  cudaMalloc(&out, 4);
  cudaMalloc(&flush, 256 << 20);
  cudaMemset(x, 1, bytes);
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  auto time = [&](const char* name, auto launch) {
    float best = 1e9f, sum = 0;
    for (int r = 0; r < 12; ++r) {
      cudaMemset(flush, r, 256 << 20);
      cudaEventRecord(a);
      launch();
      cudaEventRecord(b);
      cudaEventSynchronize(b);
      float ms;
      cudaEventElapsedTime(&ms, a, b);
      if (r >= 2) { best = ms < best ? ms : best; sum += ms; }
    }
    printf("%-28s best %7.2f us  mean %7.2f us  %5.2f TB/s (best)  err %s\n", name, best * 1e3, sum / 10 * 1e3,
           bytes / (best * 1e-3) / 1e12, cudaGetErrorString(cudaGetLastError()));
  };
  for (int ctas : {128, 132}) {
    const int64_t slice = bytes / 16 / ctas;
    printf("-- %d CTAs, %lld KB a CTA\n", ctas, (long long)(slice * 16 / 1024));
#define RING(S, B)                                                                                  \
  cudaFuncSetAttribute(ring<S, B>, cudaFuncAttributeMaxDynamicSharedMemorySize, S * B);            \
  time("ring " #S " x " #B, [&] { ring<S, B><<<ctas, kThreads, S * B>>>(x, slice, out); });
    RING(4, 32768) RING(6, 32768) RING(8, 16384) RING(12, 16384) RING(16, 8192) RING(3, 65536)
    const int64_t total = bytes / 16;
    time("plain U=4", [&] { plain<4, false><<<ctas, kThreads>>>(x, slice, total, out); });
    time("plain U=8", [&] { plain<8, false><<<ctas, kThreads>>>(x, slice, total, out); });
    time("plain U=16", [&] { plain<16, false><<<ctas, kThreads>>>(x, slice, total, out); });
    time("strided U=4", [&] { plain<4, true><<<ctas, kThreads>>>(x, slice, total, out); });
    time("strided U=8", [&] { plain<8, true><<<ctas, kThreads>>>(x, slice, total, out); });
    time("plain U=8, 2x CTAs", [&] { plain<8, false><<<2 * ctas, kThreads>>>(x, slice / 2, total, out); });
  }
  time("blocks 256x4", [&] { blocks<<<static_cast<unsigned>(bytes / 16 / 1024), 256>>>(x, out); });
  time("empty launch", [&] { blocks<<<1, 32>>>(x, out); });
  return 0;
}
