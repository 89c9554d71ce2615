// How many clusters of 1-8 CTAs the H200 holds at once for a CTA shaped like the wide GEMM
// kernel's (384 threads, ~225 KB of dynamic shared memory), and like the decode kernel's
// (384 threads, ~97 KB): cudaOccupancyMaxActiveClusters. The split-K experiment (perf-notes,
// GEMM v17) saw its CTAs start up to 56 us apart within one launch.
//
//   nvcc -O3 -std=c++17 -arch=sm_90a experiments/cluster-occupancy-probe.cu -o cluster-occupancy-probe
#include <cuda_runtime.h>

#include <cstdio>

__global__ void __launch_bounds__(384, 1) shaped(int* out) {
  extern __shared__ int smem[];
  if (threadIdx.x == 0) out[blockIdx.x] = smem[0];
}

int main() {
  int* out = nullptr;
  cudaMalloc(&out, 4096 * sizeof(int));
  cudaFuncSetAttribute(shaped, cudaFuncAttributeMaxDynamicSharedMemorySize, 230400);
  cudaFuncSetAttribute(shaped, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  for (int smem : {230400, 99328, 49152})
    for (int cluster : {1, 2, 4, 8, 16}) {
      cudaLaunchConfig_t cfg = {};
      cfg.gridDim = dim3(cluster * 64);
      cfg.blockDim = dim3(384);
      cfg.dynamicSmemBytes = smem;
      cudaLaunchAttribute attr;
      attr.id = cudaLaunchAttributeClusterDimension;
      attr.val.clusterDim.x = cluster, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
      cfg.attrs = &attr;
      cfg.numAttrs = 1;
      int n = -1;
      const cudaError_t e = cudaOccupancyMaxActiveClusters(&n, shaped, &cfg);
      std::printf("smem %6d B  cluster %2d: %3d clusters at once (%3d CTAs)%s\n", smem, cluster, n, n * cluster,
                  e == cudaSuccess ? "" : cudaGetErrorString(e));
    }
  return 0;
}
