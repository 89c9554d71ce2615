// Compile-time constants and launch geometry of the TopK kernels, shared by the router
// (host C++) and the kernels (CUDA).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "flyops/tile/arch.h"
#include "keys.h"

namespace flyops::topk {

// ---- warp kernel: one row per warp, up to 32 elements per lane ----------------------------
inline constexpr int kWarpThreads = 256;
inline constexpr int kWarpRowsPerCta = kWarpThreads / 32;
inline constexpr int kWarpMaxN = 512;  // 16 keys per lane: more would spill
inline constexpr int kWarpMaxK = 32;

// The least power of two >= v (host and device; int or int64_t).
template <typename T>
FLYOPS_HD T pow2_ceil(T v) {
  T p = 1;
  while (p < v) p <<= 1;
  return p;
}

// ---- rows kernel (rows_kernel.cuh): a warp a row of up to kRowsMaxN, keys in shared memory --
inline constexpr int kRowsThreads = 128;
inline constexpr int kRowsWarps = kRowsThreads / 32;
inline constexpr int kRowsMaxN = 4096;
inline constexpr int kRowsSortMaxK = 256;  // a sorted k is sorted in the warp's registers, 8 a lane
inline constexpr int kRowsUnroll = 4;      // 16-byte loads in flight a lane
// Whether the rows kernel takes rows of n at k (unsorted: any k).
FLYOPS_HD constexpr bool rows_fit(int64_t n, int64_t k, bool sorted) {
  return n >= 1 && n <= kRowsMaxN && k >= 1 && k <= n && (!sorted || k <= kRowsSortMaxK);
}
// A warp's shared memory, in bytes from its base: the 256-bin histogram, the sorted k's
// composites, the row's keys (elem_bytes each, room for whole 16-byte vectors).
struct RowsSmem {
  int hist, stage, keys, per_warp;
};
FLYOPS_HD constexpr RowsSmem rows_smem(int64_t n, int elem_bytes, int64_t k, bool sorted) {
  RowsSmem s{};
  s.hist = 0;
  s.stage = 256 * 4;
  s.keys = s.stage + (sorted ? static_cast<int>(k) * 8 + 15 : 0) / 16 * 16;
  s.per_warp = s.keys + static_cast<int>(n * elem_bytes + 15) / 16 * 16;
  return s;
}

// ---- group kernel: kG threads per row, kE elements each, k <= kGroupMaxK ---------------------
// Which of it and the warp kernel takes a row is measured: tuned_table.h.
inline constexpr int kGroupThreads = 128;
inline constexpr int kGroupMaxN = 256;
inline constexpr int kGroupMaxK = 8;
// Candidates per row at most for the threshold form (group_kernel.cuh), in shared memory.
inline constexpr int kGroupFilterCap = 32;

// Threads per row and elements per thread for a row of n <= kGroupMaxN: eight each up to
// 64, then longer runs per thread (a local sort is cheaper than a shuffle merge). Up to
// kGroupWideRows rows the GPU is far from full at eight threads a row and a thread's run
// is its row's latency, so 65-256 elements take sixteen threads: 1.03-1.22x faster from one
// row to 1024 on the H200, but at 4096 rows k = 6-8 0.86-0.97x (perf-notes, TopK v25).
inline constexpr int64_t kGroupWideRows = 1024;
struct GroupShape {
  int g = 0, e = 0;
};
// `threads` (8, 16 or 32; 0: by the rule above) sets the threads a row of 65-256 elements
// takes; 32 means a warp a row, eight elements a thread. Rows of 33-64 also take two
// threads of 32 (`threads` 2: a row's networks without the shuffle folds of eight threads;
// instantiated for 16-bit rows with 16-byte loads only, group_long_run_ok; TopK v64).
FLYOPS_HD GroupShape group_shape(int64_t n, int64_t rows, int threads = 0) {
  if (n <= 8) return {1, 8};
  if (n <= 16) return {2, 8};
  if (n <= 32) return {4, 8};
  if (n <= 64 && threads == 2) return {2, 32};
  if (n <= 64) return {8, 8};
  if (threads == 32) return {32, 8};
  if (threads == 16 || (threads == 0 && rows <= kGroupWideRows)) return {16, n <= 128 ? 8 : 16};
  if (n <= 128) return {8, 16};
  return {8, 32};
}

// The long-run shape above, two threads of 32 (rows of 33-64).
FLYOPS_HD constexpr bool group_long_run(GroupShape s) { return s.g == 2 && s.e == 32; }
// The group kernel's 16-byte loads: every row starts 16-byte aligned and holds whole vectors.
inline bool group_vec_loads(const void* x, int64_t n, int64_t rows, int64_t row_stride, int elem_bytes) {
  const int64_t v = 16 / elem_bytes;
  return reinterpret_cast<uintptr_t>(x) % 16 == 0 && n % v == 0 && (rows == 1 || row_stride % v == 0);
}
// Whether the long-run shape exists for these rows (16-bit elements, 16-byte loads); else
// the group kernel runs the rule's shape.
inline bool group_long_run_ok(const void* x, int64_t n, int64_t rows, int64_t row_stride, int elem_bytes) {
  return elem_bytes == 2 && group_vec_loads(x, n, rows, row_stride, elem_bytes);
}

// List length of the group kernel: k rounded up to a power of two.
FLYOPS_HD int group_list(int64_t k) { return k <= 1 ? 1 : k <= 2 ? 2 : k <= 4 ? 4 : 8; }

// ---- arg-max kernel (k == 1 on long rows) -----------------------------------------------------
inline constexpr int kArgmaxThreads = 512;
inline constexpr int64_t kArgmaxMaxSlice = 1 << 20;  // elements per CTA at most
// A long row in segments (argmax_kernel.cuh): each at least this long, and the merge CTA.
inline constexpr int64_t kArgmaxMinSegment = 32768;
inline constexpr int kArgmaxMergeThreads = 256;

// ---- delegates (delegate_kernel.cuh): many long rows through group maxima ------------------
inline constexpr int kDelegateThreads = 256;
inline constexpr int kDelegateUnroll = 4;  // 16-byte loads in flight per thread
// A group is 1 to 32 consecutive 16-byte vectors, at most 128 elements: larger groups
// leave fewer maxima (n / G) to select from, smaller ones fewer candidates (k G). The two
// selections cost about the same per element, so G near sqrt(n / k) balances them; the H200
// sweep agrees (TopK v17: k = 1024 best at G = 8-16 for n of 128k-262k, 4-8 at 32000; k =
// 20-100 at 64 fp32, where 128 was out of reach then: TopK v54 measured it 1-3% faster at
// k = 20 on rows of 262144; 256 bf16 elements measured 0-1% slower on the row of 2^24).
inline constexpr int kMaxGroupVecs = 32;
inline constexpr int kMaxGroupElems = 128;

// Elements per group for k of a row of n (a power of two, the one nearest sqrt(n / k) in
// log2, and within 4x of it), or 0 when delegates do not fit: whole groups per row and the
// candidates at most half the row. `only_vecs` (tuning) allows that many vectors only.
inline int delegate_group(int64_t n, int64_t k, int elem_bytes, int only_vecs = 0) {
  const int vec = 16 / elem_bytes;
  // The target's square, n / k, capped at the largest group's.
  const int max_vecs = std::min(kMaxGroupVecs, kMaxGroupElems / vec);
  const double cap = static_cast<double>(max_vecs * vec);
  const double target2 = std::min(static_cast<double>(n) / static_cast<double>(k), cap * cap);
  int best = 0;
  double best_err = 0;
  for (int gv = max_vecs; gv >= 1; gv /= 2) {
    const int64_t g = int64_t{gv} * vec;
    if (n % g != 0 || k * g * 2 > n || (only_vecs != 0 && gv != only_vecs)) continue;
    // |log2(g) - log2(target)|, compared as |log2(g^2 / target^2)|
    const double r = static_cast<double>(g) * static_cast<double>(g) / target2;
    const double err = r >= 1 ? r : 1 / r;
    if (only_vecs == 0 && err > 16) continue;  // more than 4x off
    if (best == 0 || err < best_err) {
      best = static_cast<int>(g);
      best_err = err;
    }
  }
  return best;
}

// The finish kernel (finish_kernel.cuh): both selections of delegates in one CTA per row,
// when the row's maxima and its k groups' elements each fit the CTA: up to kFinishMaxE keys
// per thread in registers for k <= kFinishMaxK, else up to kFinishSmemMaxE in shared memory
// for k <= kFinishSmemMaxK (64 KB of keys: two CTAs per SM).
inline constexpr int kFinishThreads = 512;
inline constexpr int kFinishMaxE = 8;  // keys per thread
inline constexpr int kFinishMaxK = 256;
inline constexpr int kFinishSmemMaxE = 32;
inline constexpr int kFinishSmemMaxK = 1024;
static_assert(kFinishThreads * kFinishSmemMaxE < (1 << 16), "small_place packs two counts in 32 bits");

// Keys per thread the finish kernel needs (a power of two, at least one 16-byte vector;
// above kFinishMaxE: in shared memory), or 0 when it does not fit.
inline int finish_elems(int64_t n, int64_t k, int64_t group, int elem_bytes) {
  const int64_t vec = 16 / elem_bytes;
  if (k > kFinishSmemMaxK || group <= 0 || group % vec != 0) return 0;
  const int64_t per_maxima = (n / group + kFinishThreads - 1) / kFinishThreads;
  const int64_t per_cand = ((k * group + kFinishThreads - 1) / kFinishThreads + vec - 1) / vec * vec;
  const int64_t need = std::max(per_maxima, per_cand);
  const int first = k > kFinishMaxK ? 2 * kFinishMaxE : static_cast<int>(vec);
  for (int e = first; e <= kFinishSmemMaxE; e *= 2)
    if (e >= need) return e;
  return 0;
}

// The most groups the finish kernel's register forms take from their maxima (elements per
// group 2^group_log2): as many as their runs hold, so that the maxima's selection may stop
// at the first digit whose bin, taken whole with everything above it, fits (k or more
// groups at or above the k-th best maximum hold the answer as the k best do; TopK v50).
// The shared-memory form takes exactly k.
FLYOPS_HD int finish_groups(int elems, int k, int group_log2) {
  const int fit = elems <= kFinishMaxE ? (kFinishThreads * elems) >> group_log2 : 0;
  return fit > k ? fit : k;
}

// The finish kernel's dynamic shared memory, in bytes, and the offsets of its parts: the
// keys (shared-memory form only; each thread's run strided by 513 words), the sort's
// composites and payloads (room for the bitonic sort's power of two), the chosen groups
// (finish_groups). The sort's bucket scatter reuses the keys. The register forms' ranking
// by counting (TopK v66) puts one composite a thread in the sort's room, which it uses only
// where the sort does not run: at offset 0, no pointer to hold.
// The shared-memory form also has room for the list's one bucket pass (TopK v73,
// detail::list_top in finish_kernel.cuh): kListBuckets counts and the composites of the
// buckets at or above the cut (fewer than k plus one bucket's kListBucketMax).
inline constexpr int kListBuckets = 2048;
inline constexpr int kListBucketMax = 128;
// Each list key's place in its bucket is kept in a byte (TopK v102), in the sort's room,
// which the list pass does not use: a word per four keys of each thread. A one-key bucket
// at or above the cut with more keys than this sends the row back as a crowded one does.
inline constexpr uint32_t kListPlaceMax = 255;
// List entries a thread loads at a time into its run (TopK v106).
inline constexpr int kListBatch = 8;
// A 16-bit list's keys binned one order key a bin from the threshold up (TopK v126,
// detail::list_top16 in finish_kernel.cuh): the last bin takes the keys past that span and
// NaN keys, and a row with any there takes the general bucket pass. `key` is at or above `t`.
template <typename Keys>
FLYOPS_HD uint32_t list_hist_bin(uint32_t key, uint32_t t, bool largest) {
  const uint32_t last = kListBuckets - 1;
  return is_nan_key<Keys>(key, largest) ? last : std::min(key - t, last);
}
// The fp32 list finish's shared memory when its rows fit one CTA an SM (launch.cuh): more
// than half of an SM's 228 KB, so that no two of its CTAs share an SM.
inline constexpr int kFinishSpreadSmem = 116 * 1024;
struct FinishSmem {
  int keys, sort_key, sort_val, chosen, total;
  int sort_cap;  // the power of two >= k
  int bins, stage;  // the list's bucket pass (shared-memory form only)
};
FLYOPS_HD FinishSmem finish_smem(int elems, int k, int group_log2) {
  auto up16 = [](int b) { return (b + 15) & ~15; };
  const int p = pow2_ceil(k);
  FinishSmem s;
  s.keys = 0;
  s.sort_key = elems > kFinishMaxE ? up16(elems * (kFinishThreads + 1) * 4) : 0;
  s.sort_val = s.sort_key + p * 8;
  const int ranked = elems <= kFinishMaxE ? s.sort_key + kFinishThreads * 8 : 0;
  s.chosen = up16(s.sort_val + p * 4 > ranked ? s.sort_val + p * 4 : ranked);
  if (elems > kFinishMaxE && s.chosen < s.sort_key + elems * kFinishThreads)  // the list's places
    s.chosen = up16(s.sort_key + elems * kFinishThreads);
  s.bins = s.stage = up16(s.chosen + finish_groups(elems, k, group_log2) * 4);
  if (elems > kFinishMaxE) s.stage = s.bins + kListBuckets * 4;
  s.total = elems > kFinishMaxE ? s.stage + (k + kListBucketMax) * 8 : s.bins;
  s.sort_cap = p;
  return s;
}

// ---- screening (screen_kernel.cuh): the finish kernel's candidates found by the stream ------
// One CTA per row reads kScreenPieces evenly spaced pieces of 32 vectors (512 bytes); the
// row's threshold is a key with r to 1.5 r of the sampled keys at or above it (the floor of
// a bin holding the r-th best). The maxima stream then also appends every element at or
// above it to the row's candidate list (through shared memory: delegate_kernel.cuh). When
// at least k and at most the finish kernel's run capacity arrived, the finish selects from
// them alone; else it takes the group maxima as before.
inline constexpr int kScreenThreads = 128;  // few registers a CTA: the stream's blocks start beside it
inline constexpr int kScreenPieceVecs = 32;
inline constexpr int kScreenVecsPerThread = 4;
// Pieces a screening CTA of `threads` reads at `vecs` 16-byte vectors a thread.
FLYOPS_HD constexpr int screen_pieces(int threads, int vecs = kScreenVecsPerThread) { return threads / 32 * vecs; }
inline constexpr int kScreenPieces = screen_pieces(kScreenThreads);
// 16-bit rows: the same pieces read by twice the threads, two vectors each, so that each
// thread's selection runs over 16 sampled keys as in fp32 (with 128 threads of 32 keys the
// 16-bit sample took 6.9-7.2 us at 256 rows against fp32's 5.1-5.3: TopK v69).
inline constexpr int kScreenThreads16 = 256;
// fp32 rows whose list would be long: 256 threads of four vectors, twice the pieces of
// kScreenThreads (TopK v109r; screen_sample below).
inline constexpr int kScreenThreads32 = 256;
// The 16-bit screen's preferred L1 / shared split where its CTAs cover nearly every SM, in
// percent of the SM's 228 KB: the ~100 KB the driver gives the screened stream, so that the
// stream's first wave can start on the SMs that hold a screening CTA (at the screen's own
// ~32 KB the driver picks another split, and an SM runs CTAs of one split at a time). On an
// H100, bf16 k = 80-1024 at 128-256 rows of 128k-262k: 0.933-0.981x; at 16-96 rows, where
// the stream has free SMs, the stream's blocks beside the screen slowed it: 1.014-1.068x
// (TopK v94). fp32's screen (~64 KB) ran 1.035-1.10x slower at 28-71% on 64 rows.
inline constexpr int kScreen16CarveoutPercent = 43;
// Rows from which the 16-bit screen takes that split: 7/8 of the SMs (128 rows of 132 won
// 0.967-0.972x, 96 lost 1.014x).
inline bool screen16_takes_stream_split(int64_t rows, int sm_count) { return rows * 8 >= int64_t{sm_count} * 7; }
// The wide sample, for the delegates' radix chain (rows too long for the finish kernel:
// the row of 2^24): 8x the pieces, so that a k of ~100 leaves a list of a few thousand
// (16 pieces of a 2^24 row would put ~25k elements above the threshold).
inline constexpr int kScreenWideThreads = 1024;
// fp32 rows that sample cannot screen (its list would overflow the finish: the row of 2^24
// at k = 1024) take twice the pieces, eight vectors a thread (TopK v116: 72.5 -> 40.9 us
// there; as every fp32 row's wide sample, v112, it cost rows of 2^20-2^22 3-10%).
inline constexpr int kScreenWideVecsLong = 8;
// Vectors a maxima block examines after its loop (of its 1024): 512 let bf16 rows of 128k-152k
// screen at k = 1024 (~15% of their vectors reach the threshold), 1.17-1.29x (TopK v45).
inline constexpr int kScreenQueue = 512;
inline constexpr int kScreenBlockCap = 256;  // candidates it stages

// Keys a finish kernel of `elems` keys per thread holds: the most candidates it takes.
FLYOPS_HD constexpr int64_t finish_capacity(int elems) { return int64_t{kFinishThreads} * elems; }

// Elements sampled from each row (16-byte vectors of elem_bytes elements) by a screening
// CTA of `threads`.
inline int64_t screen_samples(int elem_bytes, int threads, int vecs = kScreenVecsPerThread) {
  return int64_t{screen_pieces(threads, vecs)} * kScreenPieceVecs * (16 / elem_bytes);
}

// A row's threshold that means "not screened" (screen_kernel.cuh): the sample's keys at or
// above its threshold far outnumber the rank (ties: a row of mostly equal or masked keys),
// so the list would overflow. Above every 16-bit key; for 32-bit keys it is NaN's, and a
// row whose rank-th sampled key is NaN wants the maxima anyway. The stream writes that
// row's maxima and lists nothing, and its finish takes the maxima.
inline constexpr uint32_t kNoScreen = 0xffffffffu;
// A 16-bit list-only stream block's polls of its row's screen word before the grid wait
// (TopK v134): the first wave's take ~3-5 us, a poll ~1 us behind the loads.
inline constexpr int kScreenPolls = 64;
// A row that the screen found a stale polled word for (TopK v139): its candidate count past
// every list's capacity, and past it still after any claims; its threshold past every order
// key (the blocks that read it list nothing) and not kNoScreen (the finish computes the row's
// maxima itself: the blocks that took the stale word wrote none).
inline constexpr uint32_t kCountPoisoned = 0x80000000u;
inline constexpr uint32_t kThreshPoisoned = kNoScreen - 1;

// The least r with P(X >= r) <= p for X ~ Poisson(lambda).
inline int poisson_tail_rank(double lambda, double p) {
  double pmf = std::exp(-lambda), below = 0.0;  // P(X = r), P(X < r)
  int r = 0;
  while (1.0 - below > p && r < 1 << 20) {
    below += pmf;
    ++r;
    pmf *= lambda / r;
  }
  return r;
}

// The sample rank r behind the threshold, or 0 when screening does not fit. A sample of s
// of the row's n elements (a fraction f) puts about r / f of the row at or above its r-th
// best key. The row has fewer than k there only if r sampled keys are among its k - 1 best,
// of which the sample holds about Poisson(f k): r is the least rank that happens to with
// probability 1e-5 at most, for rows without structure, since such a row's finish computes
// its maxima alone in one CTA (TopK v59; r = f k + 4 sqrt(f k) + 2, the normal
// approximation, let ~2.4e-4 of the rows fail at f k = 2). The wide sample keeps that
// approximation: its rows that fail take the radix chain, whose cost (~15 us on the row of
// 2^24) does not pay for a longer list on every call. With up to 1.5 r sampled keys
// above the threshold, the expected list (1.5 r / f) must also sit within half of `cap`,
// the finish kernel's run capacity, and the vectors a maxima block queues (each holding
// such an element) within half of its queue.
// `queued`: the list comes from the stream, whose blocks queue the vectors that reach the
// threshold (kScreenQueue bounds their share); not so where the finish lists its row itself
// (TopK v118, route.cc's row_list_plan).
inline int screen_rank(int64_t n, int64_t k, int elem_bytes, int64_t cap, int threads,
                       int vecs = kScreenVecsPerThread, bool queued = true) {
  const int64_t s = screen_samples(elem_bytes, threads, vecs);
  if (n < s || k <= 0) return 0;  // the pieces may not overlap
  const double f = static_cast<double>(s) / static_cast<double>(n);
  const double fk = f * static_cast<double>(k);
  const int64_t r = threads == kScreenWideThreads ? static_cast<int64_t>(fk + 4.0 * std::sqrt(fk)) + 2
                                                  : std::max(1, poisson_tail_rank(fk, 1e-5));
  const double list = 1.5 * static_cast<double>(r) / f;  // elements at or above the threshold
  const double per_vector = std::min(1.0, list / static_cast<double>(n) * (16 / elem_bytes));
  const double block_vectors = static_cast<double>(kDelegateThreads) * kDelegateUnroll;
  if (r > s || 2 * list > static_cast<double>(cap) || (queued && 2 * per_vector * block_vectors > kScreenQueue))
    return 0;
  return static_cast<int>(r);
}

// The sample the finish kernel's screen takes of a row, as its threads (whose pieces
// screen_pieces counts) and the rank screen_rank gives it: 16-bit rows kScreenThreads' 16
// pieces (read by kScreenThreads16 threads of two vectors); fp32 rows the same, or
// kScreenThreads32's 32 where that sample's list (r / f entries) would hold
// kScreenLongList or more (TopK v109: f k doubles and the list is ~23% shorter, which took
// 1.7% off fp32 64 x 262144 k = 1024 on an H100 (~3070 entries before), where rows of 151936
// at k = 1024 (~2450) lost 0.7% and k = 50 / 100 1.2-1.9% to the larger sample).
// Returns the sample's threads and its rank (0: no screening), each rank computed once.
inline constexpr double kScreenLongList = 2900;
struct ScreenSample {
  int threads, rank;
};
inline ScreenSample screen_sample(int64_t n, int64_t k, int elem_bytes, int64_t cap, bool queued = true) {
  const int r = screen_rank(n, k, elem_bytes, cap, kScreenThreads, kScreenVecsPerThread, queued);
  if (elem_bytes != 4 || r == 0) return {kScreenThreads, r};
  const double f = static_cast<double>(screen_samples(elem_bytes, kScreenThreads)) / static_cast<double>(n);
  if (r / f < kScreenLongList) return {kScreenThreads, r};
  const int r32 = screen_rank(n, k, elem_bytes, cap, kScreenThreads32, kScreenVecsPerThread, queued);
  return r32 > 0 ? ScreenSample{kScreenThreads32, r32} : ScreenSample{kScreenThreads, r};
}

// The screened finish that lists its row itself (TopK v118, finish_kernel.cuh's list_row):
// one CTA reads the whole row, so rows up to this; the list's positions take the upper half
// of the finish's key rows, so the list fits the lower half.
inline constexpr int64_t kRowListMaxN = 262144;
inline int64_t row_list_capacity(int elems) { return finish_capacity(elems) / 2; }
// Its row streams into shared memory through a ring of per-thread copies (TopK v119b): kRowRingStages
// slots of one 16-byte vector a thread, above the keys' rows (the sort's and the list pass's
// room, unused until the list is in). The kernel's shared memory is at least row_ring_end.
// Where the rows spread one CTA an SM, the ring is kRowRingDeep slots (TopK v119c).
inline constexpr int kRowRingStages = 4;
inline constexpr int kRowRingDeep = 12;
inline constexpr int kRowRingVecs = kFinishThreads;
FLYOPS_HD int row_ring_stages(bool spread) { return spread ? kRowRingDeep : kRowRingStages; }
FLYOPS_HD int row_ring_offset(int elems) { return finish_smem(elems, 1, 0).sort_key; }
inline int row_ring_end(int elems, int stages) { return row_ring_offset(elems) + stages * kRowRingVecs * 16; }
// The 16-bit row-listed finish (TopK v141, finish_kernel.cuh's list_row16) keeps its list
// packed a word an entry, the key's offset from the threshold (its list_top16 bin) above the
// position, so that its ring takes kRowRing16Stages slots (48 KB a CTA: 96 KB an SM at two,
// the maxima stream's bytes in flight) where list_row's ring took four (seven slots measured
// even with six: v141b). Its shared memory: each
// warp's queue of kRowQueue vectors and their positions, the list's count, the list, the
// ring.
inline constexpr int kRowRing16Stages = 6;
inline constexpr int kRowQueue = 64;  // a power of two, at least 63 (a warp step adds up to 32 to 31)
inline constexpr int kRowQueueBytes = kRowQueue * (16 + 4);  // a warp's: the vectors, then their positions
inline constexpr int kRowPackShift = 21;
static_assert(kRowListMaxN <= (int64_t{1} << kRowPackShift) && kListBuckets <= (1 << (32 - kRowPackShift)),
              "a packed entry holds a position and a bin");
inline constexpr int kRow16CountOffset = kFinishThreads / 32 * kRowQueueBytes;  // the list's count
inline constexpr int kRow16ListOffset = kRow16CountOffset + 16;
FLYOPS_HD constexpr int row16_ring_offset(int elems) {
  return kRow16ListOffset + static_cast<int>(finish_capacity(elems) / 2) * 4;
}
FLYOPS_HD constexpr int row16_ring_stages(bool spread) { return spread ? kRowRingDeep : kRowRing16Stages; }
FLYOPS_HD constexpr int row16_end(int elems, int stages) { return row16_ring_offset(elems) + stages * kRowRingVecs * 16; }

// First vector of sampled piece p of `pieces` in a row of nv vectors (nv >= pieces * 32).
FLYOPS_HD int64_t screen_piece(int p, int64_t nv, int pieces = kScreenPieces) {
  return static_cast<int64_t>(p) * (nv - kScreenPieceVecs) / (pieces - 1);
}

// ---- cluster kernel -------------------------------------------------------------------------
inline constexpr int kClusterThreads = 512;
inline constexpr int kDigitBits = 11;
inline constexpr int kBins = 1 << kDigitBits;
inline constexpr int kMaxCluster = 16;          // non-portable size, supported on H100/H200
inline constexpr int kSliceBytes = 64 * 1024;   // row bytes per CTA: two CTAs fit an SM
inline constexpr int kMaxDynSmem = 227 * 1024 - 1024;
// A final bin of at most this many elements is finished by rank 0 (ranked in its
// reduction bins) instead of refined by another digit round across the cluster.
inline constexpr uint32_t kSmallBinCap = 256;
// A larger first bin: when it and the elements above it number at most this many, every CTA
// sends them all to rank 0, which orders them and keeps the k best (the gather ending),
// instead of another digit round across the cluster. A large k's first bin holds ~0.5-2.5k
// elements of a random row (11 bits: a quarter of an exponent step). Rank 0 orders ~1 us
// per 512 elements, and a second digit round costs ~3.5-5 us: past ~3000 gathered the two
// measured even (TopK v46), so the cap keeps a margin. The gather buffer is rank 0's sort
// buffer, so it costs every CTA that much shared memory: only where the clusters fit one
// wave anyway (route.cc).
inline constexpr int kGatherCap = 2048;

// Dynamic shared memory of one CTA, in bytes, and the offsets of its parts.
struct ClusterSmem {
  int data, hist, red, cand_raw, cand_pos, sort_key, sort_val, stage_key, stage_pos, total;
};
// `data_bytes`: the slice's keys, and with a sorted k rank 0's bucket scatter (12 bytes an
// element, block_sort.cuh) once the slice is idle: cluster_geometry has the rule.
FLYOPS_HD ClusterSmem cluster_smem(int data_bytes, int cand_cap, int sort_cap, int stage_cap) {
  auto up16 = [](int b) { return (b + 15) & ~15; };
  ClusterSmem s;
  s.data = 0;
  s.sort_key = up16(data_bytes);  // u64s: 8-byte aligned after the 16-byte-rounded data
  s.hist = s.sort_key + sort_cap * 8;
  s.red = s.hist + kBins * 4;
  s.cand_raw = s.red + kBins * 4;
  s.cand_pos = s.cand_raw + cand_cap * 4;
  s.sort_val = s.cand_pos + cand_cap * 4;
  s.stage_key = s.sort_val + sort_cap * 4;
  s.stage_pos = s.stage_key + stage_cap * 4;
  s.total = up16(s.stage_pos + stage_cap * 4);
  return s;
}

// How a row of n elements spreads over a cluster of `cluster` CTAs.
struct ClusterGeometry {
  int slice = 0;     // elements per CTA, a multiple of 8
  int cand_cap = 0;  // first-scan candidates kept per CTA
  int sort_cap = 0;  // power of two >= k when sorted, and >= the gather capacity
  int stage_cap = 0; // output elements a CTA stages before claiming their slots
  int data_bytes = 0;
  int smem = 0;
  bool fits = false;
};
// `gather`: the gather ending's capacity (kGatherCap), or 0 without it.
inline ClusterGeometry cluster_geometry(int64_t n, int cluster, int elem_bytes, int64_t k, bool sorted,
                                        int gather = 0) {
  ClusterGeometry g;
  const int64_t slice = ((n + cluster - 1) / cluster + 7) / 8 * 8;
  if (slice * elem_bytes > 2 * kSliceBytes || k > (int64_t{1} << 20)) return g;
  g.slice = static_cast<int>(slice);
  // Candidates: the elements in the k-th element's top-digit bin. A few percent of the
  // slice for real data; more (all-equal rows) falls back to rescanning the slice.
  g.cand_cap = static_cast<int>(slice / 8 < 256 ? 256 : (slice / 8 > 2048 ? 2048 : slice / 8));
  g.sort_cap = sorted ? static_cast<int>(pow2_ceil(k)) : 0;
  if (gather > 0 && pow2_ceil(gather) > g.sort_cap) g.sort_cap = static_cast<int>(pow2_ceil(gather));
  // Staging: a CTA's share of the output (k at most) and, in a cluster, a small final bin,
  // half again as much and at least 32 a warp: each warp stages into a sixteenth of it, and
  // an uneven warp past its share claims slots one step at a time.
  const int64_t want = k + (cluster > 1 ? kSmallBinCap : 0);
  const int64_t room = std::max<int64_t>(want + want / 2, 512);
  g.stage_cap = static_cast<int>(std::min<int64_t>(std::min<int64_t>(room, slice), 2048));
  // Room for the bucket scatter of a sorted k where the slice is shorter and the CTA still
  // fits: without it a large k takes the bitonic sort (1 x 32000 bf16 k = 1024, eight CTAs
  // of 8000 bytes: 8.7 us for the order against 3.2 with the scatter).
  const int slice_bytes = g.slice * elem_bytes;
  g.data_bytes = slice_bytes;
  if (g.sort_cap * 12 > slice_bytes &&
      cluster_smem(g.sort_cap * 12, g.cand_cap, g.sort_cap, g.stage_cap).total <= kMaxDynSmem)
    g.data_bytes = g.sort_cap * 12;
  g.smem = cluster_smem(g.data_bytes, g.cand_cap, g.sort_cap, g.stage_cap).total;
  // Gathering, rank 0 compacts the k best into the slice's memory and may order all it
  // gathered there: both need that room.
  g.fits = g.smem <= kMaxDynSmem && (gather == 0 || g.data_bytes >= g.sort_cap * 12);
  return g;
}

// ---- the radix passes in global memory (passes_kernel.cuh) ----------------------------------
inline constexpr int kPassBits = 11;  // digit width: three passes for 32-bit keys, two for 16-bit
inline constexpr int kPassBins = 1 << kPassBits;
inline constexpr int kPassThreads = 512;
inline constexpr int kPassPickThreads = kPassBins / 2;  // two bins a thread
inline constexpr int kPassCtasPerSm = 4;
inline constexpr int kPassUnroll = 4;  // loads a thread issues before it uses them
inline constexpr int kPassListDiv = 8;  // a candidate list holds an eighth of the row

// One row's selection, after its histogram in the workspace.
struct PassState {
  uint32_t prefix;  // the order-key bits chosen so far: the k-th key once every digit is
  uint32_t k_left;  // how many of the elements matching the prefix the output still takes
  uint32_t above;   // output slots taken by elements above the k-th key (filters and write)
  uint32_t equal;   // write pass: elements equal to it, seen so far
  uint32_t buffered;     // 1: the later passes filter through the candidate lists
  uint32_t appended[2];  // entries in each list (list p % 2 is pass p's)
  uint32_t pad;
};
static_assert(sizeof(PassState) % 16 == 0, "states follow the histograms, 16-byte aligned");

constexpr int passes_of(int key_bits) { return (key_bits + kPassBits - 1) / kPassBits; }
// Digit p, from the top, of a key_bits-wide key.
constexpr int pass_shift(int key_bits, int p) {
  return key_bits - (p + 1) * kPassBits > 0 ? key_bits - (p + 1) * kPassBits : 0;
}
constexpr int pass_width(int key_bits, int p) { return key_bits - p * kPassBits - pass_shift(key_bits, p); }

}  // namespace flyops::topk
