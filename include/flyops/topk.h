// TopK over the last dimension of each of `rows` rows: the k largest (or smallest) elements
// with their int64 positions, in PyTorch's order. Keys follow stock's radix order: every NaN
// (either sign) above +inf, -0.0 below +0.0; ties at the k-th key go to the lowest positions
// when they are NaNs (whose bits differ), to any position otherwise (their bits are equal).
// Torch-free: the binding fills these structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flyops/device.h"
#include "flyops/dtype.h"
#include "flyops/rms_norm.h"  // Support, Stream
#include "flyops/status.h"

namespace flyops {

struct TopkParams {
  int64_t rows = 0;
  int64_t n = 0;  // elements per row
  int64_t k = 0;  // 1 <= k <= n
  DType dtype = DType::kOther;
  bool largest = true;
  bool sorted = true;
  const void* x = nullptr;
  int64_t x_row_stride = 0;     // elements between row starts; each row contiguous
  void* values = nullptr;       // [rows, k] contiguous, dtype
  int64_t* indices = nullptr;   // [rows, k] contiguous
  void* workspace = nullptr;    // topk_workspace_bytes() bytes, 16-byte aligned
  std::size_t workspace_bytes = 0;
  int device = 0;
  Stream stream = nullptr;
};

struct TopkPlan {
  enum class Kind {
    kStock,
    kWarp,      // one warp per row, the row in registers, k rounds of warp argmax
    kGroup,     // k <= 8, N <= 256: a few threads per row, sorting networks in registers
    kCluster,   // radix select with the row in shared memory over a cluster of CTAs
    kArgmax,    // k == 1: a streaming arg-max over a cluster of CTAs
    kTwoStage,  // huge rows: top-k of segments (kCluster, many CTAs), then of their union
    kDelegate,  // many long rows: the k best group maxima pick k groups, then their k best
    kRows,      // N <= 4096: a warp per row, the row's keys in shared memory, 8-bit digit rounds
    kPasses,    // any k: a radix select in global memory, a launch per 11-bit digit (unsorted)
  };
  // How one radix selection runs: kCluster or kTwoStage with their geometry.
  struct Selection {
    Kind kind = Kind::kStock;
    int cluster = 1;          // CTAs per row (kCluster, kArgmax; kTwoStage: of the final stage)
    int64_t seg_len = 0;      // kTwoStage: elements per segment
    int seg_cluster = 1;      // kTwoStage: CTAs per segment
  };
  Kind kind = Kind::kStock;
  int cluster = 1;
  int64_t seg_len = 0;
  int seg_cluster = 1;
  const char* reason = "";  // why stock, when kind == kStock
  // kGroup: threads a row of 65-256 elements (8, 16, 32); 0: traits.h's group_shape rule.
  int group_threads = 0;
  // kGroup: the threshold form wherever the kernel has one (1), never (0), or where
  // prefer_group_threshold says (-1).
  int group_threshold = -1;
  // kDelegate: elements per group, and the selections over the group maxima and over the
  // chosen groups' elements.
  int group = 0;
  Selection maxima, candidates;
  // kDelegate: both selections (and the gather) in the one-CTA finish kernel instead, with
  // this many keys per thread; 0 when they run as above.
  int finish = 0;
  // kDelegate: the sample rank of each row's screening threshold (traits.h, screen_rank); 0
  // when the stream does not screen. With the two selections above (finish == 0), a finish
  // kernel of this many keys per thread takes the rows whose list holds their answer, and
  // the selections skip those rows.
  int screen = 0;
  int screen_finish = 0;
  // kDelegate, screened through the finish kernel: the sampling CTA's threads, whose pieces
  // the rank counts (traits.h, screen_sample); 0 otherwise.
  int screen_threads = 0;
  // kDelegate, screened ahead of the two selections: the wide sample's 16-byte vectors a
  // thread (traits.h: kScreenVecsPerThread, or kScreenWideVecsLong); 0 otherwise.
  int screen_vecs = 0;
  // kDelegate, screened through the finish kernel's shared-memory form: the stream writes
  // the group maxima beside the list, so that a row whose list misses (ascending rows, a NaN)
  // selects from them instead of computing its own from the row in one CTA (few rows, where
  // that one CTA is the whole call: TopK v117b). Otherwise such a stream lists only.
  bool screen_maxima = false;
  // kDelegate, screened through the finish kernel: no stream; each finish CTA reads its row
  // and lists it itself (TopK v118: rows short enough for one CTA to read).
  bool screen_row = false;
  // kCluster: the gather ending's capacity (traits.h, kGatherCap); 0 without it.
  int gather = 0;
  // kArgmax: segments a row, each a row of `cluster` CTAs, then one CTA a row over their
  // winners.
  int segs = 1;
  // A sorted call whose k no kernel can order (past the in-shared-memory sorts): the plan
  // selects unsorted, and the caller orders the k results with its framework's sort (as
  // stock's topk itself does for such a k). topk_run and topk_workspace_bytes then run the
  // selection as unsorted.
  bool sort_after = false;
  bool flyops() const { return kind != Kind::kStock; }
  Selection selection() const { return {kind, cluster, seg_len, seg_cluster}; }
};

// Cheap, allocation-free: whether any flyops kernel can take the call, and which one.
Support topk_supports(const TopkParams& p, const DeviceInfo& dev);
TopkPlan topk_choose(const TopkParams& p, const DeviceInfo& dev);

// "flyops_topk_cluster<fp32,c8>" and the like.
void topk_plan_name(const TopkPlan& plan, DType dtype, char* buf, std::size_t len);

std::size_t topk_workspace_bytes(const TopkParams& p, const TopkPlan& plan);

// Launch on p.stream. No allocation, no host synchronisation.
Status topk_run(const TopkParams& p, const TopkPlan& plan);

// Tuning hook for benchmarks: force a kind (0 stock, 1 warp, 2 cluster, 3 two-stage,
// 4 arg-max, 5 group, 6 delegates, 7 the router without delegates, 8 delegates without the
// finish kernel (unscreened), 9 delegates with the finish kernel but no screening, 10
// delegates screened wherever screening fits, 11 cluster without the gather ending, 12 as 8
// behind a screened list finish wherever it fits, 15 / 16 the group kernel with / without
// its threshold form, 17 as 10 with the finish kernel's shared-memory form at any k (its
// screened stream writes no maxima), 20 the rows kernel, 22 the radix passes in global
// memory (a sorted call sorted after them, sort_after), 23 the screened finish that lists its
// row itself (no stream) wherever its list fits; -1 the router) and a cluster size
// (0: the router's; for delegates, vectors per group; for the group kernel (5, 15, 16),
// threads a row of 65-256 elements: 8, 16 or 32). Forced plans that cannot run, and codes
// that no kind answers to (18, 19 and 21 were the one-pass filter kernel, measured slower
// everywhere and removed: docs/perf-notes.md, TopK v67-v72), fall back to the router's choice.
// Not thread-safe against concurrent calls.
void topk_force(int kind, int cluster);

// Test hook: the finish leaves the 16-bit list-only stream's polled words in place, so that a
// CUDA graph's replays, whose tag is their capture's, find words that carry it (TopK v139:
// the screen then poisons those rows' lists and their finish takes the maxima). Tests only.
void topk_keep_polled_words(bool on);

}  // namespace flyops
