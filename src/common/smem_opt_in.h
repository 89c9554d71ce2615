// The opt-in to more than 48 KB of dynamic shared memory for one kernel, asked once per
// device (cudaFuncSetAttribute is not free, and launches must not repeat it).
#pragma once

#include <cuda_runtime.h>

#include "common/per_device.h"

namespace flyops {

// True when `kKernel` may launch with `kBytes` of dynamic shared memory on `device`.
template <auto kKernel, int kBytes>
bool smem_opt_in(int device) {
  struct Tag {};  // one per kernel and size
  return per_device_once<Tag, 0>(device, [] {
           if (cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) == cudaSuccess)
             return 1;
           cudaGetLastError();  // clear the refusal
           return 0;
         }) != 0;
}

}  // namespace flyops
