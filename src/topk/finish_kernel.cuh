// The delegates' finish in one CTA per row, for small k (delegate_kernel.cuh has the idea):
// after the group maxima stream, one kernel picks the k best maxima of its row
// (small_select.cuh), loads those groups' elements straight from the row, and picks their
// k best. It replaces two cluster-kernel selections, the gather and their launch gaps.
//
// Ties go to the lowest positions in both selections: maxima by group number, candidates
// by position (the chosen groups come out in increasing order, so candidate order is
// position order). That is what NaN ties need; any other tie may go either way.
#pragma once

#include <cstdint>

#include "block_sort.cuh"
#include "keys.h"
#include "small_select.cuh"
#include "trace.cuh"
#include "traits.h"

namespace flyops::topk {

struct FinishArgs {
  const void* x;
  int64_t row_stride;        // elements between rows, a multiple of the vector
  int64_t n;                 // elements per row, a multiple of the group
  int k;                     // at most kFinishMaxK
  int group_log2;            // elements per group
  bool largest;
  bool sorted;
  const uint32_t* maxima;    // [rows, n / group] ascending keys (flyops_topk_maxima)
  void* values;              // [rows, k]
  int64_t* indices;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

// Global namespace: profiler and ncu names start with flyops_. kE: keys per thread, enough
// for both the row's maxima and its k groups' elements.
template <typename Keys, int kE>
__global__ void __launch_bounds__(flyops::topk::kFinishThreads) flyops_topk_finish(flyops::topk::FinishArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kThreads = kFinishThreads;
  constexpr int kVec = 16 / sizeof(Raw);
  static_assert(kE % kVec == 0 && kE <= kFinishMaxE, "whole 16-byte vectors per thread");
  __shared__ SmallSelectSmem<kThreads> s;
  __shared__ uint32_t chosen[kFinishMaxK];  // group numbers, increasing
  __shared__ uint64_t sort_key[kFinishMaxK];
  __shared__ uint32_t sort_val[kFinishMaxK];

  const int tid = threadIdx.x;
  const int64_t row = blockIdx.x;
  const int k = a.k, gl = a.group_log2;
  PhaseTrace trace;  // -DFLYOPS_TOPK_TRACE=1: phase times (trace.cuh)
  auto mark = [&] { trace.mark(); };
  auto dump = [&] { trace.dump("finish (k, group log2)", k, gl); };
  mark();
  const bool largest = a.largest;
  uint32_t key[kE];

  // ---- the k best group maxima --------------------------------------------------------------
  {
    const int m = static_cast<int>(a.n >> gl);
    const int per = (m + kThreads - 1) / kThreads;
    const int first = tid * per;
    const int cnt = max(0, min(per, m - first));
    const uint32_t* src = a.maxima + row * m + first;
#pragma unroll
    for (int j = 0; j < kE; ++j) key[j] = j < cnt ? order_key<AscKeys32>(src[j], largest) : 0u;
    mark();
    small_select<kThreads, kE>(key, cnt, static_cast<uint32_t>(k), s,
                               [&](int j, uint32_t slot) { chosen[slot] = static_cast<uint32_t>(first + j); });
  }
  __syncthreads();
  mark();

  // ---- the k best of the chosen groups' elements ----------------------------------------------
  const int c = k << gl;
  const int per = ((c + kThreads - 1) / kThreads + kVec - 1) / kVec * kVec;
  const int first = tid * per;
  const int cnt = max(0, min(per, c - first));  // a multiple of kVec: groups are whole vectors
  const int64_t gmask = (int64_t{1} << gl) - 1;
  auto position = [&](int j) -> int64_t {
    const int e = first + j;
    return (int64_t{chosen[e >> gl]} << gl) + (e & gmask);
  };
  const Raw* xr = static_cast<const Raw*>(a.x) + row * a.row_stride;
  uint32_t raw[kE];
#pragma unroll
  for (int v = 0; v < kE / kVec; ++v) {
    uint4 q = make_uint4(0, 0, 0, 0);
    if (v * kVec < cnt) q = *reinterpret_cast<const uint4*>(xr + position(v * kVec));
    const Raw* r = reinterpret_cast<const Raw*>(&q);
#pragma unroll
    for (int i = 0; i < kVec; ++i) raw[v * kVec + i] = r[i];
  }
#pragma unroll
  for (int j = 0; j < kE; ++j) key[j] = order_key<Keys>(raw[j], largest);
  mark();
  Raw* vals_out = static_cast<Raw*>(a.values) + row * k;
  int64_t* idx_out = a.indices + row * k;
  small_select<kThreads, kE>(key, cnt, static_cast<uint32_t>(k), s, [&](int j, uint32_t slot) {
    const int64_t pos = position(j);
    if (a.sorted) {
      sort_key[slot] = (uint64_t{key[j]} << 32) | (0xffffffffu - static_cast<uint32_t>(pos));
      sort_val[slot] = raw[j];
    } else {
      vals_out[slot] = static_cast<Raw>(raw[j]);
      idx_out[slot] = pos;
    }
  });
  if (!a.sorted) {
    mark();
    dump();
    return;
  }
  __syncthreads();
  mark();
  // Composites are distinct (positions differ): each one's rank is its slot.
  for (int i = tid; i < k; i += kThreads) {
    const uint64_t ck = sort_key[i];
    const uint32_t r = rank_desc(sort_key, k, ck);
    vals_out[r] = static_cast<Raw>(sort_val[i]);
    idx_out[r] = 0xffffffffu - static_cast<uint32_t>(ck);
  }
  mark();
  dump();
}

#endif
