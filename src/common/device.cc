// Device facts for the routers, asked of the CUDA runtime once per device index.
#include "flyops/device.h"

#include <cuda_runtime_api.h>

#include <cstring>

#include "per_device.h"

namespace flyops {
namespace {

DeviceInfo query(int index) {
  DeviceInfo d;
  d.index = index;
  auto attr = [&](cudaDeviceAttr a, int* out) {
    return cudaDeviceGetAttribute(out, a, index) == cudaSuccess;
  };
  d.valid = attr(cudaDevAttrComputeCapabilityMajor, &d.cc_major) &&
            attr(cudaDevAttrComputeCapabilityMinor, &d.cc_minor) &&
            attr(cudaDevAttrMultiProcessorCount, &d.sm_count);
  cudaDeviceProp prop;
  const bool named = d.valid && cudaGetDeviceProperties(&prop, index) == cudaSuccess;
  if (named) d.gpu = gpu_of_name(prop.name);
  if (!named) cudaGetLastError();  // leave no error from a failed query for the caller's next check
  return d;
}

}  // namespace

Gpu gpu_of_name(const char* name) {
  auto has = [&](const char* s) { return std::strstr(name, s) != nullptr; };
  if (has("NVL") || has("PCIe")) return Gpu::kOther;
  if (has("H200")) return Gpu::kH200;
  if (has("H100") && has("HBM3")) return Gpu::kH100;
  return Gpu::kOther;
}

const DeviceInfo& device_info(int index) {
  static DeviceInfo infos[kMaxDevices];
  static DeviceInfo invalid;
  if (index < 0 || index >= kMaxDevices) return invalid;
  per_device_once<DeviceInfo, 0>(index, [&] {
    infos[index] = query(index);
    return 0;
  });
  return infos[index];
}

DeviceInfo fake_device_info(int cc_major, int cc_minor, int sm_count, Gpu gpu) {
  DeviceInfo d;
  d.gpu = gpu;
  d.index = -1;
  d.cc_major = cc_major;
  d.cc_minor = cc_minor;
  d.sm_count = sm_count;
  d.valid = true;
  return d;
}

}  // namespace flyops
