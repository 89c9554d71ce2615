// What the router needs to know about a GPU. Queried lazily (first call on a device),
// cached per device index, never at import time.
#pragma once

namespace flyops {

// Which Hopper part, where a router keeps measurements of one part only (the GEMM's
// per-shape table): the H100's memory is about 70% of the H200's, so memory-bound shapes
// can rank the other way. Only the SXM boards the runs came from: "NVIDIA H100 80GB HBM3"
// and "NVIDIA H200"; PCIe and NVL boards (other memory, clocks and power) are kOther.
enum class Gpu : int { kOther = 0, kH100 = 1, kH200 = 2 };

// The part a device name (cudaDeviceProp::name) names; scripts/gen-gemm-table.py reads run
// files' device names by the same rule.
Gpu gpu_of_name(const char* name);

struct DeviceInfo {
  int index = -1;
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  Gpu gpu = Gpu::kOther;             // from the device's name
  bool valid = false;                // false when the query failed (no driver, bad index)

  // flyops kernels are built for sm_90a only: H100 / H200.
  bool is_sm90() const { return valid && cc_major == 9 && cc_minor == 0; }
};

// Cached after the first call for each device index. Thread-safe.
const DeviceInfo& device_info(int device_index);

// A synthetic description for routing decisions without a GPU (tests, explain).
DeviceInfo fake_device_info(int cc_major, int cc_minor, int sm_count, Gpu gpu = Gpu::kH200);

}  // namespace flyops
