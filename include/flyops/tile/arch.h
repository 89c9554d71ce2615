// Basic device vocabulary shared by every flyops kernel.
#pragma once

#if defined(__CUDACC__)
#define FLYOPS_HD __host__ __device__ __forceinline__
#define FLYOPS_DEVICE __device__ __forceinline__
#else
#define FLYOPS_HD inline
#define FLYOPS_DEVICE inline
#endif

namespace flyops::tile {

inline constexpr int kWarpSize = 32;

constexpr bool is_pow2(int x) { return x > 0 && (x & (x - 1)) == 0; }

#if defined(__CUDACC__)
FLYOPS_DEVICE int lane_id() { return static_cast<int>(threadIdx.x) & (kWarpSize - 1); }
FLYOPS_DEVICE int warp_id() { return static_cast<int>(threadIdx.x) / kWarpSize; }
#endif

}  // namespace flyops::tile
