// Phase times of one CTA for tuning: build with -DFLYOPS_TOPK_TRACE=1 and thread 0 of the
// grid's first CTA prints the %globaltimer ticks (ns) from its start to each mark. Compiles
// to nothing otherwise.
#pragma once

#ifndef FLYOPS_TOPK_TRACE
#define FLYOPS_TOPK_TRACE 0
#endif

#if defined(__CUDACC__)
#if FLYOPS_TOPK_TRACE
#include <cstdio>
#endif

#include "flyops/tile/arch.h"

namespace flyops::topk {

struct PhaseTrace {
#if FLYOPS_TOPK_TRACE
  unsigned long long t[24];
  int n = 0;
  FLYOPS_DEVICE void mark() {
    const unsigned long long now = tile::globaltimer_ns();
    if (n < 24) t[n++] = now;
  }
  // `label` and its two numbers first, then the times.
  FLYOPS_DEVICE void dump(const char* label, long long a, long long b) const {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    printf("topk trace %s %lld %lld:", label, a, b);
    for (int i = 1; i < n; ++i) printf(" %llu", t[i] - t[0]);
    printf("\n");
  }
#else
  FLYOPS_DEVICE void mark() {}
  FLYOPS_DEVICE void dump(const char*, long long, long long) const {}
#endif
};

}  // namespace flyops::topk
#endif
