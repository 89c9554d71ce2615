// Basic device vocabulary shared by every flyops kernel.
#pragma once

#include <cstdint>

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

// The GPU's global nanosecond clock (%globaltimer), for phase traces and probes.
FLYOPS_DEVICE unsigned long long globaltimer_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
// The multiprocessor this thread runs on (%smid), for the same traces.
FLYOPS_DEVICE unsigned sm_id() {
  unsigned r;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(r));
  return r;
}

// A barrier among `threads` threads (whole warps) on hardware barrier `id` (1..15; 0 is
// __syncthreads'), so two warpgroups can meet without stopping a third.
FLYOPS_DEVICE void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// Arrive on barrier `id` without waiting (the other side of a named_barrier_sync: a signal).
FLYOPS_DEVICE void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}

// Two warpgroups (0 and 1) taking turns at issuing their products (FlashAttention-3's
// ping-pong), so that one's element-wise work runs under the other's tensor-core work:
// warpgroup w waits on barrier base + w for its turn and passes to the other's after
// issuing; warpgroup 1 passes once first (start: warpgroup 0 begins) and not after its last
// turn, so that every arrival is waited on. kOn false compiles to nothing.
template <bool kOn>
struct WarpgroupTurns {
  int wg, base;  // this warpgroup (0, 1); the first of the two barriers
  FLYOPS_DEVICE void start() const {
    if constexpr (kOn)
      if (wg == 1) named_barrier_arrive(base, 256);
  }
  FLYOPS_DEVICE void wait() const {
    if constexpr (kOn) named_barrier_sync(base + wg, 256);
  }
  FLYOPS_DEVICE void pass(bool last) const {
    if constexpr (kOn)
      if (!(last && wg == 1)) named_barrier_arrive(base + 1 - wg, 256);
  }
};

// A flag in global memory read with acquire and written with release at GPU scope: the
// hand-off between CTAs that take turns (what the releasing CTA wrote before is visible to
// the acquiring one after).
FLYOPS_DEVICE int ld_acquire_gpu(const int* p) {
  int v;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
FLYOPS_DEVICE void st_release_gpu(int* p, int v) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
// The same for a 64-bit word (a flag and its payload in one access), and its relaxed read
// (the word's latest value, ordering nothing).
FLYOPS_DEVICE uint64_t ld_acquire_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.acquire.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
FLYOPS_DEVICE uint64_t ld_relaxed_gpu(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}
FLYOPS_DEVICE void st_release_gpu(uint64_t* p, uint64_t v) {
  asm volatile("st.release.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

// One added to a counter in global memory with release at GPU scope, no value back (a
// count of finished CTAs that another kernel polls with ld_acquire_gpu: what this thread
// wrote and observed before, a CTA's writes after a barrier, is visible to the poller).
FLYOPS_DEVICE void red_release_gpu_add(unsigned* p, unsigned v) {
  asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Adds v to the shared-memory word at `addr` (a shared::cta address) where `p` holds, with no
// branch: the compiler's atomicAdd under an `if` branches around each add and, in a kernel
// that may run in a cluster, recomputes the shared window's base (S2R SR_CgaCtaId) inside
// every branch, a chain of dependent instructions per key. No value comes back; no memory
// clobber, so that loads of the keys may go ahead of it (a barrier orders it for readers).
FLYOPS_DEVICE void red_shared_add_if(bool p, unsigned addr, unsigned v) {
  asm volatile(
      "{\n\t.reg .pred q;\n\tsetp.ne.b32 q, %0, 0;\n\t@q red.shared.add.u32 [%1], %2;\n\t}" ::"r"(
          static_cast<unsigned>(p)),
      "r"(addr), "r"(v));
}

// Two adjacent fp32 values added into global memory (red.global.add.v2.f32, sm_90): no value
// comes back, so the thread goes on at once; `p` 8-byte aligned. A warp whose lanes give
// consecutive pairs adds 256 contiguous bytes in one instruction.
FLYOPS_DEVICE void red_add_f32x2(float* p, float a, float b) {
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};" ::"l"(p), "f"(a), "f"(b) : "memory");
}

#endif

}  // namespace flyops::tile
