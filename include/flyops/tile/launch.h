// Launching tile-layer kernels: cluster launches and their occupancy, and programmatic
// dependent launch (host and device sides).
#pragma once

#if defined(__CUDACC__)
#include <cuda_runtime.h>

#include "flyops/tile/arch.h"

namespace flyops::tile {

// A launch of grid x block with smem_bytes of dynamic shared memory on stream, carrying the
// one attribute *attr (which must outlive the launch).
inline cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream,
                                        cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

inline cudaLaunchConfig_t cluster_config(dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream,
                                         cudaLaunchAttribute* attr, int cluster) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(cluster);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  return launch_config(grid, block, smem_bytes, stream, attr);
}

// The attribute of a programmatic dependent launch (launch_dependent, below).
inline cudaLaunchAttribute dependent_attr() {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return attr;
}

// kernel<<<grid, block, smem, stream>>>(args...) in clusters of `cluster` CTAs along x.
template <typename... KArgs, typename... Args>
cudaError_t launch_cluster(void (*kernel)(KArgs...), dim3 grid, dim3 block, int smem_bytes,
                           cudaStream_t stream, int cluster, Args&&... args) {
  cudaLaunchAttribute attr;
  const cudaLaunchConfig_t cfg = cluster_config(grid, block, smem_bytes, stream, &attr, cluster);
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

// launch_cluster that is also a programmatic dependent launch (launch_dependent, below).
template <typename... KArgs, typename... Args>
cudaError_t launch_cluster_dependent(void (*kernel)(KArgs...), dim3 grid, dim3 block, int smem_bytes,
                                     cudaStream_t stream, int cluster, Args&&... args) {
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = cluster_config(grid, block, smem_bytes, stream, &attrs[0], cluster);
  attrs[1] = dependent_attr();
  cfg.numAttrs = 2;
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

// Programmatic dependent launch: kernel<<<grid, block, smem, stream>>>(args...) that may
// begin before the stream's previous kernel ends (once each of that kernel's blocks has
// called allow_dependent_launch() or exited), hiding the launch gap. The kernel must call
// grid_dependency_wait() before it reads anything the previous kernel writes; that wait
// returns when the previous kernel has completed and its writes are visible. Kernels
// launched the ordinary way treat both calls as no-ops.
template <typename... KArgs, typename... Args>
cudaError_t launch_dependent(void (*kernel)(KArgs...), dim3 grid, dim3 block, int smem_bytes, cudaStream_t stream,
                             Args&&... args) {
  cudaLaunchAttribute attr = dependent_attr();
  const cudaLaunchConfig_t cfg = launch_config(grid, block, smem_bytes, stream, &attr);
  return cudaLaunchKernelEx(&cfg, kernel, static_cast<KArgs>(args)...);
}

FLYOPS_DEVICE void grid_dependency_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
FLYOPS_DEVICE void allow_dependent_launch() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }

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
