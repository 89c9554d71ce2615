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

// A barrier among `threads` threads (whole warps) on hardware barrier `id` (1..15; 0 is
// __syncthreads'), so two warpgroups can meet without stopping a third.
FLYOPS_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Two adjacent fp32 values added to global memory in one reduction (sm_90 vector red),
// relaxed at GPU scope: for partial sums whose order does not matter.
FLYOPS_DEVICE void red_add_v2(float* addr, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(addr), "f"(a), "f"(b) : "memory");
}
#endif

}  // namespace flyops::tile
