// A value computed once per (Tag, Id, device index) and cached: kernel attributes and
// occupancy answers that must be asked on each device but never on the hot path twice.
#pragma once

#include <array>
#include <mutex>

namespace flyops {

inline constexpr int kMaxDevices = 64;

template <typename Tag, int kId, typename F>
int per_device_once(int device, F&& compute) {
  static std::array<std::once_flag, kMaxDevices> once;
  static std::array<int, kMaxDevices> value{};
  if (device < 0 || device >= kMaxDevices) return compute();
  std::call_once(once[device], [&] { value[device] = compute(); });
  return value[device];
}

}  // namespace flyops
