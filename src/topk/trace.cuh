// Phase times of CTAs for tuning: build with -DFLYOPS_TOPK_TRACE=1 and thread 0 of each of
// the grid's first FLYOPS_TOPK_TRACE_CTAS CTAs (default 1; 16 shows a cluster's skew) prints
// its start (%globaltimer, ns, modulo 10^6: one time base for all SMs) and the ticks from it
// to each mark. Compiles to nothing otherwise.
#pragma once

#ifndef FLYOPS_TOPK_TRACE
#define FLYOPS_TOPK_TRACE 0
#endif
#ifndef FLYOPS_TOPK_TRACE_CTAS
#define FLYOPS_TOPK_TRACE_CTAS 1
#endif

#if defined(__CUDACC__)
#if FLYOPS_TOPK_TRACE
#include <cstdio>
#endif

#include "flyops/tile/arch.h"

namespace flyops::topk {

struct PhaseTrace {
#if FLYOPS_TOPK_TRACE
  unsigned long long t[25];
  int n = 0;
  FLYOPS_DEVICE void mark() {
    const unsigned long long now = tile::globaltimer_ns();
    if (n < 25) t[n++] = now;
  }
  // `label` and its two numbers first, then the times: one printf, so that CTAs' lines do
  // not interleave (marks past 24 are dropped, unused ones print as 0).
  FLYOPS_DEVICE void dump(const char* label, long long a, long long b) const {
    if (static_cast<int>(blockIdx.x) >= FLYOPS_TOPK_TRACE_CTAS || threadIdx.x != 0) return;  // (0: none)
    unsigned long long d[24];
    for (int i = 0; i < 24; ++i) d[i] = i + 1 < n ? t[i + 1] - t[0] : 0;
    printf("topk trace %s %lld %lld cta %u start %llu: %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu "
           "%llu %llu %llu %llu %llu %llu %llu %llu %llu %llu %llu\n",
           label, a, b, blockIdx.x, t[0] % 1000000ull, d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7], d[8], d[9], d[10],
           d[11], d[12], d[13], d[14], d[15], d[16], d[17], d[18], d[19], d[20], d[21], d[22], d[23]);
  }
#else
  FLYOPS_DEVICE void mark() {}
  FLYOPS_DEVICE void dump(const char*, long long, long long) const {}
#endif
};

// Every block's start, one mark and end in one call, for a whole grid's timeline (trace
// builds only; scripts/topk-grid-trace.py): thread 0 records them at its end, and
// flyops_topk_grid_dump, launched ahead of each call (launch.cuh), prints and clears the
// previous call's. One buffer per translation unit (one per dtype), as the kernels are.
#if FLYOPS_TOPK_TRACE
inline constexpr unsigned kGridTraceMax = 1u << 15;
static __device__ unsigned long long g_grid_trace[kGridTraceMax][4];
static __device__ unsigned g_grid_trace_n;
#endif

struct GridTrace {
#if FLYOPS_TOPK_TRACE
  unsigned long long t0 = tile::globaltimer_ns(), t1 = 0;
  FLYOPS_DEVICE void mark() { t1 = tile::globaltimer_ns(); }
  FLYOPS_DEVICE void end(unsigned tag) const {
    if (threadIdx.x != 0) return;
    const unsigned long long t2 = tile::globaltimer_ns();
    const unsigned long long sm = tile::sm_id();
    const unsigned slot = atomicAdd(&g_grid_trace_n, 1u);
    if (slot >= kGridTraceMax) return;
    g_grid_trace[slot][0] = (static_cast<unsigned long long>(tag) << 56) | (sm << 40) | blockIdx.x;
    g_grid_trace[slot][1] = t0;
    g_grid_trace[slot][2] = t1 != 0 ? t1 : t0;
    g_grid_trace[slot][3] = t2;
  }
#else
  FLYOPS_DEVICE void mark() {}
  FLYOPS_DEVICE void end(unsigned) const {}
#endif
};

}  // namespace flyops::topk

// Global namespace: profiler names start with flyops_.
#if FLYOPS_TOPK_TRACE
static __global__ void flyops_topk_grid_dump() {
  using namespace flyops::topk;
  const unsigned n = min(g_grid_trace_n, kGridTraceMax);
  if (n == 0) return;
  printf("topk grid begin %u\n", n);
  for (unsigned i = 0; i < n; ++i) {
    const unsigned long long h = g_grid_trace[i][0];
    printf("topk grid %llu %llu %llu %llu %llu %llu\n", h >> 56, h & 0xffffffffffull, (h >> 40) & 0xffff,
           g_grid_trace[i][1], g_grid_trace[i][2], g_grid_trace[i][3]);
  }
  g_grid_trace_n = 0;
}
#endif
#endif
