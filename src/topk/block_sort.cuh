// Descending bitonic sort of P composites (P a power of two) with a 32-bit payload, held in
// shared memory, by every thread of the CTA. Stages whose pairs are 64 or more apart go
// through shared memory between CTA barriers; every run of closer stages is done by one warp
// per 64-element chunk in registers (two per lane, 32 apart), exchanging through shuffles.
// Of a 1024-element sort's 55 stages, 10 then touch shared memory, instead of all 55.
// Small widths are cheaper ranked (rank_desc) than sorted: see kRankSortMax.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/warp.h"

#if defined(__CUDACC__)
namespace flyops::topk {

namespace detail {

// The larger (want_max) or smaller of this lane's element and the one `s` lanes away.
FLYOPS_DEVICE void exchange_keep(uint64_t& k, uint32_t& v, int s, bool want_max) {
  const uint64_t ok = __shfl_xor_sync(0xffffffffu, k, s);
  const uint32_t ov = __shfl_xor_sync(0xffffffffu, v, s);
  if (want_max ? ok > k : ok < k) {
    k = ok;
    v = ov;
  }
}

// Compare-exchange of stage (size, s) on the two registers of a lane (element base + lane
// + 32 r in register r).
FLYOPS_DEVICE void warp_stage(uint64_t (&k)[2], uint32_t (&v)[2], int base, int size, int s) {
  const int lane = threadIdx.x & 31;
  if (s == 32) {  // the pair is this lane's two registers
    const bool desc = ((base + lane) & size) == 0;
    if ((k[0] < k[1]) == desc) {
      const uint64_t tk = k[0];
      k[0] = k[1];
      k[1] = tk;
      const uint32_t tv = v[0];
      v[0] = v[1];
      v[1] = tv;
    }
  } else {
    const bool lower = (lane & s) == 0;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const bool desc = ((base + lane + 32 * r) & size) == 0;
      exchange_keep(k[r], v[r], s, lower == desc);
    }
  }
}

// Over the 64 elements at `base`: every stage of sizes 2..64 (kFirstPass), or the stages of
// `size` with strides 32..1. Elements past p read as 0 (below every composite) and are not
// written back. All lanes call it.
template <bool kFirstPass>
FLYOPS_DEVICE void warp_stages(uint64_t* key, uint32_t* val, int p, int base, int size) {
  const int lane = threadIdx.x & 31;
  uint64_t k[2];
  uint32_t v[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = base + lane + 32 * r;
    k[r] = e < p ? key[e] : 0;
    v[r] = e < p ? val[e] : 0;
  }
  if constexpr (kFirstPass) {
    // Sizes in a loop, strides unrolled: full unrolling takes 60+ registers in the
    // cluster kernel, which then fits fewer CTAs per SM.
#pragma unroll 1
    for (int sz = 2; sz <= 64; sz <<= 1) {
#pragma unroll
      for (int s = 32; s > 0; s >>= 1)
        if (s < sz) warp_stage(k, v, base, sz, s);
    }
  } else {
#pragma unroll
    for (int s = 32; s > 0; s >>= 1) warp_stage(k, v, base, size, s);
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int e = base + lane + 32 * r;
    if (e < p) {
      key[e] = k[r];
      val[e] = v[r];
    }
  }
}

}  // namespace detail

// Up to this many composites, ranking beats the bitonic sort: a 64-wide bitonic sort is a
// chain of ~21 dependent shuffle stages (~2 us measured), a rank is k broadcast loads.
inline constexpr int kRankSortMax = 256;

// How many of the n distinct composites in key[] are larger than c: c's slot in a
// descending order. The lanes of a warp read the same entry at once (a broadcast).
FLYOPS_DEVICE uint32_t rank_desc(const uint64_t* key, int n, uint64_t c) {
  uint32_t r = 0;
  int j = 0;
  for (; j + 4 <= n; j += 4)
    r += (key[j] > c) + (key[j + 1] > c) + (key[j + 2] > c) + (key[j + 3] > c);
  for (; j < n; ++j) r += key[j] > c;
  return r;
}

// Ranks split over lane groups: m elements to rank on kThreads threads give each element an
// aligned group of 2^log2 lanes (the most, up to a warp, that lets all of them rank in one
// pass), each lane counting every 2^log2-th entry. At k = 20-50 most threads were idle while
// one per element walked all the entries (rank 0's order phase, 0.8-1.8 us in the trace).
template <int kThreads>
FLYOPS_DEVICE int rank_split_log2(int m) {
  int l = 0;
  while (l < 5 && int64_t{m} << (l + 1) <= kThreads) ++l;
  return l;
}
// rank_desc(key, n, c) counted by the 2^log2 lanes of this lane's group (the same c and n in
// each) and summed over them by shuffles; every lane of the warp calls it with the same
// log2 (a lane with nothing to rank passes n = 0).
FLYOPS_DEVICE uint32_t rank_desc_split(const uint64_t* key, int n, uint64_t c, int log2) {
  const int s = 1 << log2;
  int j = static_cast<int>(threadIdx.x) & (s - 1);
  uint32_t r = 0;
  for (; j + 3 * s < n; j += 4 * s) r += (key[j] > c) + (key[j + s] > c) + (key[j + 2 * s] > c) + (key[j + 3 * s] > c);
  for (; j < n; j += s) r += key[j] > c;
  for (int o = 1; o < s; o <<= 1) r += __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}

// Each of the n distinct composites key[0..n) ranked among them, counted by lane groups
// (rank_desc_split): out(rank, composite, i) once per element, rank 0 the largest. The loop
// is warp-uniform for the shuffles (one pass when n << log2 fits the block). Every thread
// calls it.
template <int kThreads, typename Out>
FLYOPS_DEVICE void rank_each_split(const uint64_t* key, int n, Out&& out) {
  const int tid = threadIdx.x;
  const int l = rank_split_log2<kThreads>(n);
  for (int g0 = 0; g0 < n << l; g0 += kThreads) {
    const int i = (g0 + tid) >> l;
    const bool valid = i < n;
    const uint64_t c = valid ? key[i] : 0;
    const uint32_t r = rank_desc_split(key, valid ? n : 0, c, l);
    if (valid && (tid & ((1 << l) - 1)) == 0) out(r, c, i);
  }
}

// Up to this many composites per bucket, bucket_order_desc ranks them; more (many tied keys
// share a bucket) and the caller sorts instead.
inline constexpr uint32_t kMaxBucket = 128;
inline constexpr int kOrderBuckets = 2048;

// The n >= 2 distinct composites of key[] (payload val[]) in descending order without a
// sort: out(slot, composite, payload) once per element, slot 0 the largest. 2048 buckets
// split the composites' span evenly; a suffix scan of the bucket counts gives each bucket's
// first slot; a scatter into tmp_key/tmp_val (n entries each) groups the buckets; an
// element's slot is its bucket's first plus the larger composites in its bucket. Scratch:
// bins (2048 words), wsum (kThreads / 32 words), mm (kThreads / 16 u64s). Returns false, with
// nothing written, when a bucket holds more than kMaxBucket. Every thread calls it.
template <int kThreads, typename Out>
FLYOPS_DEVICE bool bucket_order_desc(const uint64_t* key, const uint32_t* val, int n, uint64_t* tmp_key,
                                     uint32_t* tmp_val, uint32_t* bins, uint32_t* wsum, uint64_t* mm, Out&& out) {
  constexpr int kWarps = kThreads / 32, kPer = kOrderBuckets / kThreads;
  static_assert(kOrderBuckets % kThreads == 0, "whole buckets per thread");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  // The least and greatest key (high halves) and ~position (low halves).
  uint32_t klo = 0xffffffffu, khi = 0, plo = 0xffffffffu, phi = 0;
  for (int i = tid; i < n; i += kThreads) {
    const uint64_t c = key[i];
    const uint32_t kh = static_cast<uint32_t>(c >> 32), pl = static_cast<uint32_t>(c);
    klo = min(klo, kh);
    khi = max(khi, kh);
    plo = min(plo, pl);
    phi = max(phi, pl);
  }
  uint32_t* m32 = reinterpret_cast<uint32_t*>(mm);
  klo = __reduce_min_sync(0xffffffffu, klo);
  khi = __reduce_max_sync(0xffffffffu, khi);
  plo = __reduce_min_sync(0xffffffffu, plo);
  phi = __reduce_max_sync(0xffffffffu, phi);
  if (lane == 0) {
    m32[4 * warp] = klo;
    m32[4 * warp + 1] = khi;
    m32[4 * warp + 2] = plo;
    m32[4 * warp + 3] = phi;
  }
  for (int b = tid; b < kOrderBuckets; b += kThreads) bins[b] = 0;
  __syncthreads();
  for (int w = 0; w < kWarps; ++w) {
    klo = min(klo, m32[4 * w]);
    khi = max(khi, m32[4 * w + 1]);
    plo = min(plo, m32[4 * w + 2]);
    phi = max(phi, m32[4 * w + 3]);
  }
  // Buckets split evenly the span of each composite's rank in a dense numbering, (key -
  // least key) * W + (~position - least), W the positions' span: monotone in the composite,
  // and below 2^64. Not the bits below the common prefix: the top 1024 of 32000 normal
  // values straddle 2.0, whose bits differ from 1.9's from the exponent's top bit down, and
  // all of [1.875, 2) would share one bucket. Not the composites themselves either: 16-bit
  // keys repeat (~100 times a value among 2000 of 150k bf16 normals), and one key's
  // elements, whose positions only differ in the low bits, would all share one bucket.
  const uint64_t width = uint64_t{phi - plo} + 1;
  auto dense = [&](uint64_t c) {
    return uint64_t{static_cast<uint32_t>(c >> 32) - klo} * width + (static_cast<uint32_t>(c) - plo);
  };
  const uint64_t span = uint64_t{khi - klo} * width + (phi - plo);
  const int top = 63 - __clzll(static_cast<long long>(span));
  const int shift = top >= 11 ? top + 1 - 11 : 0;
  auto bucket = [&](uint64_t c) { return static_cast<uint32_t>(dense(c) >> shift); };
  for (int i = tid; i < n; i += kThreads) atomicAdd(&bins[bucket(key[i])], 1u);
  __syncthreads();
  // A bucket's first slot: the elements in the buckets above it (this thread's own, then
  // the higher lanes' and warps').
  uint32_t cnt[kPer], own = 0, most = 0;
#pragma unroll
  for (int j = 0; j < kPer; ++j) {
    cnt[j] = bins[tid * kPer + j];
    own += cnt[j];
    most = max(most, cnt[j]);
  }
  const uint32_t incl = tile::warp_suffix_sum(own);
  most = __reduce_max_sync(0xffffffffu, most);
  uint32_t* wmost = reinterpret_cast<uint32_t*>(mm);  // mm's min/max were read before the last barrier
  if (lane == 0) {
    wsum[warp] = incl;
    wmost[warp] = most;
  }
  __syncthreads();
  uint32_t above = incl - own;
  for (int w = 0; w < kWarps; ++w) {
    if (w > warp) above += wsum[w];
    most = max(most, wmost[w]);
  }
  if (most > kMaxBucket) return false;
#pragma unroll
  for (int j = kPer - 1; j >= 0; --j) {
    bins[tid * kPer + j] = above;
    above += cnt[j];
  }
  __syncthreads();
  for (int i = tid; i < n; i += kThreads) {
    const uint64_t c = key[i];
    const uint32_t p = atomicAdd(&bins[bucket(c)], 1u);
    tmp_key[p] = c;
    tmp_val[p] = val[i];
  }
  __syncthreads();
  // bins[b] is now bucket b's end; its first slot is the end of the bucket above.
  for (int p = tid; p < n; p += kThreads) {
    const uint64_t c = tmp_key[p];
    const uint32_t b = bucket(c);
    const uint32_t first = b == kOrderBuckets - 1 ? 0u : bins[b + 1], end = bins[b];
    uint32_t r = 0;
    for (uint32_t q = first; q < end; ++q) r += tmp_key[q] > c;
    out(first + r, c, tmp_val[p]);
  }
  return true;
}

template <int kThreads>
FLYOPS_DEVICE void block_sort_desc(uint64_t* key, uint32_t* val, int p) {
  constexpr int kWarps = kThreads / 32;
  const int tid = threadIdx.x, warp = tid >> 5;
  // Sizes up to 64 (all of a sort of at most 64, padded) in one register pass per chunk.
  for (int base = warp * 64; base < (p < 64 ? 64 : p); base += kWarps * 64)
    detail::warp_stages<true>(key, val, p, base, 64);
  __syncthreads();
  for (int size = 128; size <= p; size <<= 1) {
    for (int stride = size >> 1; stride >= 64; stride >>= 1) {
      for (int t = tid; t < p / 2; t += kThreads) {
        const int i = 2 * t - (t & (stride - 1));
        const int j = i + stride;
        const bool desc = (i & size) == 0;
        const uint64_t ki = key[i], kj = key[j];
        if ((ki < kj) == desc) {
          key[i] = kj;
          key[j] = ki;
          const uint32_t vi = val[i];
          val[i] = val[j];
          val[j] = vi;
        }
      }
      __syncthreads();
    }
    for (int base = warp * 64; base < p; base += kWarps * 64) detail::warp_stages<false>(key, val, p, base, size);
    __syncthreads();
  }
}

// The k distinct composites of key[] (payload val[], room for P = the power of two >= k) in
// descending order: out(slot, composite, payload) once each. Ranks up to kRankSortMax; above,
// buckets when `scratch` (k * 12 bytes) is given (bins: 2048 words) and no bucket
// overflows, else the bitonic sort. wsum: kThreads / 32 words; mm: kThreads / 16 u64s. Every
// thread calls it, after a barrier that follows the last write of key[] and val[].
// kRankOnly: the caller's k never passes kRankSortMax, and the sorts are not compiled in.
// kSplitRank: the ranks counted by lane groups (rank_desc_split); the cluster kernel's rank 0
// gains by it, the finish kernel measured 1-3% slower with it (twenty-first session, run 1), so
// it keeps one thread an element.
template <int kThreads, bool kRankOnly = false, bool kSplitRank = false, typename Out>
FLYOPS_DEVICE void order_desc(uint64_t* key, uint32_t* val, int k, int P, void* scratch, uint32_t* bins,
                              uint32_t* wsum, uint64_t* mm, Out&& out) {
  const int tid = threadIdx.x;
  if (kRankOnly || k <= kRankSortMax) {
    // Each element's rank straight to its output slot: no barriers between stages.
    if constexpr (!kSplitRank) {
      for (int i = tid; i < k; i += kThreads) {
        const uint64_t c = key[i];
        out(rank_desc(key, k, c), c, val[i]);
      }
      return;
    }
    rank_each_split<kThreads>(key, k, [&](uint32_t r, uint64_t c, int i) { out(r, c, val[i]); });
    return;
  }
  if constexpr (!kRankOnly) {
    uint64_t* tmp_key = static_cast<uint64_t*>(scratch);
    uint32_t* tmp_val = reinterpret_cast<uint32_t*>(tmp_key + k);
    if (scratch != nullptr && bucket_order_desc<kThreads>(key, val, k, tmp_key, tmp_val, bins, wsum, mm, out)) return;
    for (int i = k + tid; i < P; i += kThreads) key[i] = 0;  // below every real composite
    __syncthreads();
    block_sort_desc<kThreads>(key, val, P);
    for (int r = tid; r < k; r += kThreads) out(r, key[r], val[r]);
  }
}

}  // namespace flyops::topk
#endif
