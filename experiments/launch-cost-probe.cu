// What a launch costs under the benchmarks' timer (events around one launch after a 256 MiB
// memset), by launch form: plain, with a cluster dimension, with a large dynamic shared
// memory opt-in, and both; the kernel does no work but one store per CTA. The GEMM decode
// kernel is a cluster launch with 72-100 KB of shared memory, and its event-timed time
// exceeds its %globaltimer span by ~4 us (perf-notes, GEMM "v15").
//
//   nvcc -O3 -std=c++17 -arch=sm_90a experiments/launch-cost-probe.cu -o launch-cost-probe
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                              \
  do {                                                                        \
    cudaError_t e = (x);                                                      \
    if (e != cudaSuccess) {                                                   \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); \
      std::exit(1);                                                           \
    }                                                                         \
  } while (0)

__global__ void touch(int* out) {
  __shared__ int flag;  // the dynamic shared memory is only reserved, never touched
  if (threadIdx.x == 0) {
    flag = blockIdx.x;
    out[blockIdx.x] = flag;
  }
}

int main() {
  const size_t flush_bytes = size_t{256} << 20;
  void* flush = nullptr;
  int* out = nullptr;
  CHECK(cudaMalloc(&flush, flush_bytes));
  CHECK(cudaMalloc(&out, 4096 * sizeof(int)));
  CHECK(cudaFuncSetAttribute(touch, cudaFuncAttributeMaxDynamicSharedMemorySize, 200 * 1024));
  CHECK(cudaFuncSetAttribute(touch, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  cudaEvent_t e0, e1;
  CHECK(cudaEventCreate(&e0));
  CHECK(cudaEventCreate(&e1));
  struct Form {
    int cluster, smem_kb, ctas, threads;
  };
  const Form forms[] = {{1, 0, 128, 384},  {4, 0, 128, 384},   {1, 72, 128, 384}, {4, 72, 128, 384},
                        {1, 150, 128, 384}, {4, 150, 128, 384}, {2, 72, 256, 384}, {8, 72, 256, 384},
                        {1, 72, 256, 384}};
  for (int flush_kind = 0; flush_kind < 2; ++flush_kind)
    for (const Form& f : forms) {
      std::vector<float> ms;
      for (int rep = 0; rep < 60; ++rep) {
        if (flush_kind == 1) CHECK(cudaMemsetAsync(flush, rep & 0xff, flush_bytes));
        CHECK(cudaEventRecord(e0));
        cudaLaunchConfig_t cfg = {};
        cfg.gridDim = dim3(f.ctas);
        cfg.blockDim = dim3(f.threads);
        cfg.dynamicSmemBytes = f.smem_kb * 1024;
        cudaLaunchAttribute attr[1];
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = f.cluster;
        attr[0].val.clusterDim.y = 1;
        attr[0].val.clusterDim.z = 1;
        cfg.attrs = attr;
        cfg.numAttrs = f.cluster > 1 ? 1 : 0;
        CHECK(cudaLaunchKernelEx(&cfg, touch, out));
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        float t = 0;
        CHECK(cudaEventElapsedTime(&t, e0, e1));
        if (rep >= 10) ms.push_back(t);
      }
      std::sort(ms.begin(), ms.end());
      std::printf("%-6s cluster %d  smem %3d KB  %4d CTAs x %d: median %.2f us (p10 %.2f, p90 %.2f)\n",
                  flush_kind ? "memset" : "none", f.cluster, f.smem_kb, f.ctas, f.threads, ms[ms.size() / 2] * 1e3,
                  ms[ms.size() / 10] * 1e3, ms[ms.size() * 9 / 10] * 1e3);
    }
  return 0;
}
