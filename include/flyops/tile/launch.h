// Host side of launching tile-layer kernels: cluster launches and their occupancy.
#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>

namespace flyops::tile {

inline cudaLaunchConfig_t cluster_config(dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream,
                                         cudaLaunchAttribute* attr, int cluster) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(cluster);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// kernel<<<grid, block, smem, stream>>>(args...) in clusters of `cluster` CTAs along x.
template <typename... KArgs, typename... Args>
cudaError_t launch_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, int smem_bytes,
                           cudaStream_t stream, int cluster, Args&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(grid, block, smem_bytes, stream, &attr, cluster);
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

// How many clusters of `cluster` CTAs can be resident at once on the whole device.
template <typename... KArgs>
int max_active_clusters(void (*kernel)(KArgs...), dim3 block, int smem_bytes, int cluster) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg =
      cluster_config(dim3(cluster), block, smem_bytes, nullptr, &attr, cluster);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

}  // namespace flyops::tile
#endif
