// TopK router: supports() says whether a flyops kernel can take the call at all; choose()
// picks the kernel and its cluster size.
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "dispatch.h"
#include "flyops/topk.h"
#include "traits.h"
#include "tuned_table.h"

namespace flyops {
namespace {

std::atomic<int> g_forced_kind{-1};
std::atomic<int> g_forced_cluster{0};
std::atomic<uint32_t> g_list_tag{0};
std::atomic<bool> g_keep_polled_words{false};

constexpr const char* kSortTooLarge = "k too large to sort in shared memory";
constexpr const char* kTooLargeForTwoStages = "row too long for one cluster and k or rows too large for two stages";

Support fail(const char* reason) { return Support{false, reason}; }

TopkPlan stock(const char* reason) {
  TopkPlan p;
  p.reason = reason;
  return p;
}

int elem_bytes(DType t) { return static_cast<int>(dtype_size(t)); }

// Elements of a row one CTA holds: 64 KB, so two CTAs share an SM; 128 KB when a large
// sorted k already takes that much shared memory for its sort (then fewer, longer slices
// measured faster on the H200: bench/results/h200/topk_tune.json).
int64_t slice_elems(DType t, int64_t k, bool sorted) {
  const int bytes = sorted && k >= 512 ? 2 * topk::kSliceBytes : topk::kSliceBytes;
  return bytes / elem_bytes(t);
}

// The smallest cluster that holds the row; then larger while the grid would not fill half
// the GPU and each CTA keeps at least 2048 elements.
int cluster_for(int64_t rows, int64_t n, DType t, int64_t k, bool sorted, const DeviceInfo& dev) {
  const int64_t per = slice_elems(t, k, sorted);
  int c = static_cast<int>(topk::pow2_ceil((n + per - 1) / per));
  if (c > topk::kMaxCluster) return 0;
  while (c < topk::kMaxCluster && rows * c * 2 <= int64_t(dev.sm_count) && n / (2 * c) >= 2048) c *= 2;
  return c;
}

// Arg-max: CTAs enough to fill the GPU once (more measured slower: each adds a cluster
// reduction), each streaming 2048 to kArgmaxMaxSlice elements (one row of 32000: 8 CTAs
// 5.5 us, 4 CTAs 5.9; every cluster size forced, H200); 0 when a row needs more than one
// cluster.
int argmax_cluster(int64_t rows, int64_t n, const DeviceInfo& dev) {
  int c = 1;
  while (c < topk::kMaxCluster && (n + c - 1) / c > topk::kArgmaxMaxSlice) c *= 2;
  if ((n + c - 1) / c > topk::kArgmaxMaxSlice) return 0;
  while (c < topk::kMaxCluster && rows * c * 2 <= int64_t(dev.sm_count) && n / (2 * c) >= 2048) c *= 2;
  return c;
}

// A long row's arg-max in segments (rows of the arg-max kernel, then a merge): rows of 8 MiB
// or more (2^21 fp32, 2^22 16-bit elements; shorter ones are launch-bound: 2 x 2^21 bf16
// measured 0.96x of the plain plan, TopK v70) where the plain plan fills less than half the
// GPU; contiguous rows cut into equal, whole-vector segments of at least kArgmaxMinSegment,
// about two CTAs an SM in all. False: no segments.
bool argmax_segments_plan(const TopkParams& p, int plain_cluster, const DeviceInfo& dev, TopkPlan& plan) {
  if (p.n * elem_bytes(p.dtype) < (int64_t{8} << 20) || (p.rows > 1 && p.x_row_stride != p.n)) return false;
  if (p.rows * plain_cluster * 2 > int64_t(dev.sm_count)) return false;
  int segs = 1;
  while (p.rows * segs * 2 <= 2 * int64_t(dev.sm_count) && p.n % (2 * segs) == 0 && (p.n / (2 * segs)) % 8 == 0 &&
         p.n / (2 * segs) >= topk::kArgmaxMinSegment)
    segs *= 2;
  const int c = segs >= 4 ? argmax_cluster(p.rows * segs, p.n / segs, dev) : 0;
  if (c == 0) return false;
  plan.kind = TopkPlan::Kind::kArgmax;
  plan.segs = segs;
  plan.cluster = c;
  return true;
}

bool cluster_fits(int64_t n, int c, DType t, int64_t k, bool sorted, int gather = 0) {
  return c >= 1 && c <= topk::kMaxCluster &&
         topk::cluster_geometry(n, c, elem_bytes(t), k, sorted, gather).fits;
}

// The gather ending (cluster_kernel.cuh) for a one-pass cluster plan of c CTAs a row: where
// the grid fits the GPU in one wave, so its larger shared memory costs no occupancy.
int gather_for(const TopkParams& p, int c, const DeviceInfo& dev) {
  if (p.rows * c > int64_t(dev.sm_count) || !cluster_fits(p.n, c, p.dtype, p.k, p.sorted, topk::kGatherCap))
    return 0;
  return topk::kGatherCap;
}

// Huge rows: segments of one or more CTAs each, so that stage 2 holds segments * k elements
// in one cluster.
bool two_stage_plan(const TopkParams& p, const DeviceInfo& dev, TopkPlan& plan) {
  const int64_t cap2 = int64_t(topk::kMaxCluster) * slice_elems(p.dtype, p.k, p.sorted);
  for (int sc = 1; sc <= topk::kMaxCluster; sc *= 2) {
    const int64_t seg = sc * slice_elems(p.dtype, p.k, false);
    if (seg < p.k || seg >= p.n) continue;
    const topk::TwoStage t = topk::two_stage(p.n, p.k, seg);
    if (t.n2 > cap2) continue;
    const int c2 = cluster_for(p.rows, t.n2, p.dtype, p.k, p.sorted, dev);
    if (c2 == 0 || !cluster_fits(seg, sc, p.dtype, p.k, false) ||
        !cluster_fits(t.n2, c2, p.dtype, p.k, p.sorted))
      continue;
    plan.kind = TopkPlan::Kind::kTwoStage;
    plan.seg_len = seg;
    plan.seg_cluster = sc;
    plan.cluster = c2;
    return true;
  }
  return false;
}

// One radix selection (no short-row or arg-max kernel): two stages where measured better,
// else one cluster pass per row, else two stages. False when neither fits.
bool selection_plan(const TopkParams& p, const DeviceInfo& dev, TopkPlan::Selection& sel) {
  TopkPlan plan;
  if (topk::prefer_two_stage(p) && two_stage_plan(p, dev, plan)) {
    sel = plan.selection();
    return true;
  }
  const int c = cluster_for(p.rows, p.n, p.dtype, p.k, p.sorted, dev);
  if (c != 0 && cluster_fits(p.n, c, p.dtype, p.k, p.sorted)) {
    sel = {TopkPlan::Kind::kCluster, c, 0, 1};
    return true;
  }
  if (c == 0 && two_stage_plan(p, dev, plan)) {
    sel = plan.selection();
    return true;
  }
  return false;
}

// Delegates (delegate_kernel.cuh) with groups of `group` elements (traits.h; 0: none):
// rows 16-byte aligned, where both selections fit: in the finish kernel when it takes the
// row (`fe` keys per thread, finish_elems), else as two radix selections.
// `screen_rank`: the finish kernel's screening rank (traits.h, screen_rank; 0: none);
// `chain_screen`: whether the two radix selections may stand behind a finish of screened
// lists (the wide sample; the smallest shared-memory finish whose capacity the rule admits).
bool delegate_plan(const TopkParams& p, const DeviceInfo& dev, TopkPlan& plan, int group, int fe, int screen_rank,
                   int screen_threads, bool chain_screen) {
  if (group == 0) return false;
  const int vec = 16 / elem_bytes(p.dtype);
  if (reinterpret_cast<uintptr_t>(p.x) % 16 != 0 || (p.rows > 1 && p.x_row_stride % vec != 0)) return false;
  const int64_t per_block = int64_t{topk::kDelegateThreads} * topk::kDelegateUnroll;
  if (p.rows * ((p.n / vec + per_block - 1) / per_block) > INT_MAX || p.rows > INT_MAX) return false;
  if (fe != 0) {
    plan.kind = TopkPlan::Kind::kDelegate;
    plan.group = group;
    plan.finish = fe;
    plan.screen = screen_rank;
    plan.screen_threads = screen_rank != 0 ? screen_threads : 0;
    return true;
  }
  TopkPlan::Selection maxima;
  if (!selection_plan(topk::maxima_params(p, group), dev, maxima)) return false;
  const TopkParams c = topk::candidate_params(p, group);
  const int cc = cluster_for(c.rows, c.n, c.dtype, c.k, c.sorted, dev);
  if (cc == 0 || !cluster_fits(c.n, cc, c.dtype, c.k, c.sorted)) return false;
  plan.kind = TopkPlan::Kind::kDelegate;
  plan.group = group;
  plan.maxima = maxima;
  plan.candidates = {TopkPlan::Kind::kCluster, cc, 0, 1};
  if (chain_screen && p.k <= topk::kFinishSmemMaxK) {
    // The wide sample, or for fp32 rows it cannot screen the longer one (traits.h).
    const int bytes = elem_bytes(p.dtype);
    for (int vecs : {topk::kScreenVecsPerThread, topk::kScreenWideVecsLong}) {
      if (vecs == topk::kScreenWideVecsLong && bytes != 4) break;
      for (int e = 2 * topk::kFinishMaxE; e <= topk::kFinishSmemMaxE; e *= 2) {
        plan.screen = topk::screen_rank(p.n, p.k, bytes, topk::finish_capacity(e), topk::kScreenWideThreads, vecs);
        if (plan.screen != 0) {
          plan.screen_finish = e;
          plan.screen_vecs = vecs;
          return true;
        }
      }
    }
  }
  return true;
}

// The screened finish that lists its row itself (TopK v118): the delegates' group for the
// finish's fallback (its maxima from the row), and the fewest keys a thread from 16 whose
// lower half holds the list (screen_sample without the stream's queue bound).
bool row_list_plan(const TopkParams& p, const DeviceInfo& dev, TopkPlan& plan) {
  const int bytes = elem_bytes(p.dtype);
  const int group = topk::delegate_group(p.n, p.k, bytes, 0);
  const int fe = topk::finish_elems(p.n, p.k, group, bytes);
  if (fe == 0 || p.n > topk::kRowListMaxN) return false;
  for (int e = std::max(fe, 2 * topk::kFinishMaxE); e <= topk::kFinishSmemMaxE; e *= 2) {
    const topk::ScreenSample sample = topk::screen_sample(p.n, p.k, bytes, topk::row_list_capacity(e), false);
    if (sample.rank > 0 && delegate_plan(p, dev, plan, group, e, sample.rank, sample.threads, false)) {
      plan.screen_row = true;
      return true;
    }
  }
  return false;
}

// Whether the router's screened finish fits with its list from the stream (the rank it would
// give, below in choose_kernel): where it does, that plan measured ahead of the row-listed
// one (64 x 65536 at k = 1024: v118 1.2-1.8x of its time).
bool stream_screen_fits(const TopkParams& p) {
  const int bytes = elem_bytes(p.dtype);
  const int fe = topk::finish_elems(p.n, p.k, topk::delegate_group(p.n, p.k, bytes, 0), bytes);
  if (fe == 0) return false;
  const int fs = std::max(fe, 2 * topk::kFinishMaxE);
  return topk::screen_sample(p.n, p.k, bytes, topk::finish_capacity(fs)).rank > 0;
}

// The rows kernel (rows_kernel.cuh) where it takes the rows and its grid of kRowsWarps rows a
// CTA fits.
bool rows_plan(const TopkParams& p, TopkPlan& plan) {
  if (!topk::rows_fit(p.n, p.k, p.sorted) || p.rows > int64_t{INT_MAX} * topk::kRowsWarps) return false;
  plan.kind = TopkPlan::Kind::kRows;
  return true;
}

// CTAs a row for the radix passes: kPassCtasPerSm a SM over all rows, each reading at least
// eight elements a thread.
int passes_ctas(const TopkParams& p, const DeviceInfo& dev) {
  const int64_t want = (int64_t{topk::kPassCtasPerSm} * dev.sm_count + p.rows - 1) / p.rows;
  const int64_t most = (p.n + 8 * topk::kPassThreads - 1) / (8 * topk::kPassThreads);
  return static_cast<int>(std::max<int64_t>(1, std::min(want, most)));
}

// The radix passes: any k, in a 1-D grid of passes_ctas CTAs a row.
bool passes_plan(const TopkParams& p, const DeviceInfo& dev, TopkPlan& plan) {
  const int ctas = passes_ctas(p, dev);
  if (p.rows * ctas > INT_MAX) return false;
  plan.kind = TopkPlan::Kind::kPasses;
  plan.cluster = ctas;
  plan.sort_after = p.sorted && p.k > 1;  // the passes never order their output
  return true;
}

}  // namespace

Support topk_supports(const TopkParams& p, const DeviceInfo& dev) {
  if (!dev.valid) return fail("device query failed");
  if (!dev.is_sm90()) return fail("flyops kernels need compute capability 9.0 (H100/H200)");
  if (p.dtype != DType::kFloat32 && p.dtype != DType::kFloat16 && p.dtype != DType::kBFloat16)
    return fail("dtype not float32, float16 or bfloat16");
  if (p.rows <= 0 || p.n <= 0 || p.k <= 0) return fail("empty input or k == 0");
  if (p.k > p.n) return fail("k larger than the row");
  if (p.n > INT_MAX / 2) return fail("rows beyond 2^30 elements");
  if (p.rows > 1 && p.x_row_stride < p.n) return fail("rows overlap (row stride < N)");
  if (p.x == nullptr || p.values == nullptr || p.indices == nullptr) return fail("null pointer");
  return Support{true, ""};
}

namespace {

// The router's plan before measured_slower (tuned_table.h) compares it with stock.
TopkPlan choose_kernel(const TopkParams& p, const DeviceInfo& dev) {
  const Support s = topk_supports(p, dev);
  if (!s.ok) return stock(s.reason);

  TopkPlan plan;
  const int forced = g_forced_kind.load(std::memory_order_relaxed);
  const int forced_c = g_forced_cluster.load(std::memory_order_relaxed);
  if (forced == 0) return stock("forced to stock (tuning)");
  // Threads a row as the group kernel runs them: its long runs exist for some rows only.
  auto group_threads_run = [&](int t) {
    const bool ok = topk::group_long_run_ok(p.x, p.n, p.rows, p.x_row_stride, elem_bytes(p.dtype));
    return topk::group_long_run(topk::group_shape(p.n, p.rows, t)) && !ok ? 0 : t;
  };
  if ((forced == 5 || forced == 15 || forced == 16) && p.n <= topk::kGroupMaxN && p.k <= topk::kGroupMaxK) {
    plan.kind = TopkPlan::Kind::kGroup;
    if (forced_c == 2 || forced_c == 8 || forced_c == 16 || forced_c == 32)
      plan.group_threads = group_threads_run(forced_c);
    if (forced != 5) plan.group_threshold = forced == 15 ? 1 : 0;
    return plan;
  }
  if (forced == 1 && p.n <= topk::kWarpMaxN && p.k <= topk::kWarpMaxK) {
    plan.kind = TopkPlan::Kind::kWarp;
    return plan;
  }
  if (forced == 4 && p.k == 1 && forced_c >= 1 && forced_c <= topk::kMaxCluster &&
      (p.n + forced_c - 1) / forced_c <= topk::kArgmaxMaxSlice) {
    plan.kind = TopkPlan::Kind::kArgmax;
    plan.cluster = forced_c;
    return plan;
  }
  if (forced == 20 && rows_plan(p, plan)) return plan;
  if (forced == 23 && row_list_plan(p, dev, plan)) return plan;
  if (forced == 22 && passes_plan(p, dev, plan)) return plan;
  // 11: as 2, without the gather ending (A/B).
  const bool radix_only = forced == 2 || forced == 3 || forced == 11;
  if ((forced == 2 || forced == 11) && cluster_fits(p.n, forced_c, p.dtype, p.k, p.sorted)) {
    plan.kind = TopkPlan::Kind::kCluster;
    plan.cluster = forced_c;
    plan.gather = forced == 2 ? gather_for(p, forced_c, dev) : 0;
    return plan;
  }

  // Many rows of up to 4096: the rows kernel where it measured faster (tuned_table.h).
  if (forced < 0 && topk::prefer_rows(p) && rows_plan(p, plan)) return plan;
  if (forced < 0 && topk::prefer_screen_row(p) && !stream_screen_fits(p) && row_list_plan(p, dev, plan)) return plan;
  // Short rows: the group kernel where it measured faster than the warp kernel
  // (tuned_table.h), else the warp kernel.
  if (topk::prefer_group(p) && !radix_only) {
    plan.kind = TopkPlan::Kind::kGroup;
    plan.group_threads = group_threads_run(topk::group_threads(p));
    return plan;
  }
  if (p.n <= topk::kWarpMaxN && p.k <= topk::kWarpMaxK && !radix_only) {
    plan.kind = TopkPlan::Kind::kWarp;
    return plan;
  }
  if (p.k == 1 && !radix_only) {
    const int ca = argmax_cluster(p.rows, p.n, dev);
    if (argmax_segments_plan(p, ca == 0 ? topk::kMaxCluster : ca, dev, plan)) return plan;
    if (ca != 0) {
      plan.kind = TopkPlan::Kind::kArgmax;
      plan.cluster = ca;
      return plan;
    }
  }
  // 12: as 8 (the two radix selections), behind a finish of screened lists wherever it fits.
  // 17: as 10, the shared-memory finish at any k (its screened stream writes no maxima).
  if (forced < 0 || (forced >= 6 && forced <= 10 && forced != 7) || forced == 12 || forced == 17) {
    const int bytes = elem_bytes(p.dtype);
    const int group = topk::delegate_group(p.n, p.k, bytes, forced >= 6 && forced != 17 ? forced_c : 0);
    int fe = forced == 8 || forced == 12 ? 0 : topk::finish_elems(p.n, p.k, group, bytes);
    const bool reg_finish = forced < 0 && topk::prefer_register_finish(p, fe);
    const bool screen = forced == 10 || forced == 17 || (forced != 9 && !reg_finish && topk::prefer_screen(p));
    // The router (and 17) screen through the shared-memory finish only (tuned_table.h);
    // where the list does not fit it, the finish runs unscreened in the form it had.
    int rank = 0, threads = 0;
    if (screen && fe != 0) {
      const int fs = forced < 0 || forced == 17 ? std::max(fe, 2 * topk::kFinishMaxE) : fe;
      const topk::ScreenSample sample = topk::screen_sample(p.n, p.k, bytes, topk::finish_capacity(fs));
      threads = sample.threads;
      rank = sample.rank;
      if (rank > 0) fe = fs;
    }
    const bool chain_screen = forced == 12 || (forced < 0 && topk::prefer_screen_chain(p));
    const bool few_rows_listed = forced < 0 && rank > 0 && topk::prefer_screen_few_rows(p);
    if ((forced >= 0 || reg_finish || few_rows_listed ||
         topk::prefer_delegates(p, fe != 0, screen && fe > topk::kFinishMaxE)) &&
        delegate_plan(p, dev, plan, group, fe, rank, threads, chain_screen)) {
      plan.screen_maxima = few_rows_listed;  // a missed list's rows: the stream's maxima (v117b)
      return plan;
    }
  }
  if ((forced < 0 || forced == 7) && topk::prefer_two_stage(p) && two_stage_plan(p, dev, plan)) return plan;
  const int c = cluster_for(p.rows, p.n, p.dtype, p.k, p.sorted, dev);
  if (c != 0 && forced != 3) {
    if (!cluster_fits(p.n, c, p.dtype, p.k, p.sorted)) return stock(kSortTooLarge);
    plan.kind = TopkPlan::Kind::kCluster;
    plan.cluster = c;
    plan.gather = forced == 11 ? 0 : gather_for(p, c, dev);
    return plan;
  }
  if (two_stage_plan(p, dev, plan)) return plan;
  // Where no selection holds k: the radix passes in global memory, faster than stock on every
  // such shape measured (perf-notes, "TopK v90"). A sorted call comes here unsorted, from
  // topk_choose, so that it takes two stages wherever they hold the unsorted k.
  if (c == 0 && forced < 0 && (!p.sorted || p.k == 1) && passes_plan(p, dev, plan)) return plan;
  return stock(c == 0 ? kTooLargeForTwoStages : kSortTooLarge);
}

}  // namespace

namespace {
// choose_kernel's refusals of a sorted k that no kernel can order, where the selection
// alone may still fit.
bool sort_too_large(const char* reason) {
  return std::strcmp(reason, kSortTooLarge) == 0 || std::strcmp(reason, kTooLargeForTwoStages) == 0;
}
}  // namespace

TopkPlan topk_choose(const TopkParams& p, const DeviceInfo& dev) {
  const TopkPlan plan = choose_kernel(p, dev);
  const bool forced = g_forced_kind.load(std::memory_order_relaxed) >= 0;
  if (!plan.flyops() && p.sorted && !forced && sort_too_large(plan.reason)) {
    // Past the kernels' sorts: the unsorted selection, ordered afterwards by the caller.
    TopkParams q = p;
    q.sorted = false;
    TopkPlan u = choose_kernel(q, dev);
    if (!u.flyops() || topk::measured_slower(q, u) != nullptr) return plan;
    u.sort_after = true;
    return u;
  }
  if (!plan.flyops() || forced) return plan;
  const char* why = topk::measured_slower(p, plan);
  return why != nullptr ? stock(why) : plan;
}

namespace {
// "c4" for one cluster pass, "seg16384x1c2" for two stages.
void selection_name(const TopkPlan::Selection& s, char* buf, std::size_t len) {
  if (s.kind == TopkPlan::Kind::kTwoStage)
    std::snprintf(buf, len, "seg%lldx%dc%d", static_cast<long long>(s.seg_len), s.seg_cluster, s.cluster);
  else
    std::snprintf(buf, len, "c%d", s.cluster);
}
}  // namespace

void topk_plan_name(const TopkPlan& plan, DType dtype, char* buf, std::size_t len) {
  if (plan.sort_after && len > 5) {  // the kernel's name, then "+sort": the caller's sort follows it
    TopkPlan selection = plan;
    selection.sort_after = false;
    topk_plan_name(selection, dtype, buf, len - 5);
    std::strncat(buf, "+sort", len - std::strlen(buf) - 1);
    return;
  }
  switch (plan.kind) {
    case TopkPlan::Kind::kDelegate: {
      if (plan.finish != 0) {
        std::snprintf(buf, len, "flyops_topk_delegates<%s,g%d,finish%d%s>", dtype_name(dtype), plan.group, plan.finish,
                      plan.screen == 0       ? ""
                      : plan.screen_row    ? ",screen,row"
                      : plan.screen_maxima ? ",screen,maxima"
                                           : ",screen");
        break;
      }
      char m[48], c[48];
      selection_name(plan.maxima, m, sizeof m);
      selection_name(plan.candidates, c, sizeof c);
      std::snprintf(buf, len, "flyops_topk_delegates<%s,g%d,%s,%s%s>", dtype_name(dtype), plan.group, m, c,
                    plan.screen == 0                                  ? ""
                    : plan.screen_vecs == topk::kScreenWideVecsLong ? ",screen,long"
                                                                      : ",screen");
      break;
    }
    case TopkPlan::Kind::kStock: std::snprintf(buf, len, "stock"); break;
    case TopkPlan::Kind::kWarp: std::snprintf(buf, len, "flyops_topk_warp<%s>", dtype_name(dtype)); break;
    case TopkPlan::Kind::kGroup:
    {
      char t[8] = "";
      if (plan.group_threads != 0) std::snprintf(t, sizeof(t), ",t%d", plan.group_threads);
      std::snprintf(buf, len, "flyops_topk_group<%s%s%s>", dtype_name(dtype), t,
                    plan.group_threshold == 1 ? ",threshold" : plan.group_threshold == 0 ? ",networks" : "");
      break;
    }
    case TopkPlan::Kind::kCluster:
      std::snprintf(buf, len, "flyops_topk_cluster<%s,c%d%s>", dtype_name(dtype), plan.cluster,
                    plan.gather != 0 ? ",gather" : "");
      break;
    case TopkPlan::Kind::kArgmax:
      if (plan.segs > 1)
        std::snprintf(buf, len, "flyops_topk_argmax<%s,c%d,seg%d>", dtype_name(dtype), plan.cluster, plan.segs);
      else
        std::snprintf(buf, len, "flyops_topk_argmax<%s,c%d>", dtype_name(dtype), plan.cluster);
      break;
    case TopkPlan::Kind::kRows: std::snprintf(buf, len, "flyops_topk_rows<%s>", dtype_name(dtype)); break;
    case TopkPlan::Kind::kPasses:
      std::snprintf(buf, len, "flyops_topk_passes<%s,c%d>", dtype_name(dtype), plan.cluster);
      break;
    case TopkPlan::Kind::kTwoStage:
      std::snprintf(buf, len, "flyops_topk_two_stage<%s,seg%lldx%d,c%d>", dtype_name(dtype),
                    static_cast<long long>(plan.seg_len), plan.seg_cluster, plan.cluster);
      break;
  }
}

namespace {
// The call as the plan's kernels run it: a sort_after plan selects unsorted.
TopkParams as_run(const TopkParams& call, const TopkPlan& plan) {
  TopkParams p = call;
  if (plan.sort_after) p.sorted = false;
  return p;
}
}  // namespace

std::size_t topk_workspace_bytes(const TopkParams& call, const TopkPlan& plan) {
  const TopkParams p = as_run(call, plan);
  if (plan.kind == TopkPlan::Kind::kDelegate && plan.finish != 0)
    return static_cast<std::size_t>(
        topk::finish_layout(p, plan.group, topk::finish_capacity(plan.finish), plan.screen != 0).total);
  if (plan.kind == TopkPlan::Kind::kDelegate) {
    const TopkParams m = topk::maxima_params(p, plan.group);
    const int64_t list_cap = plan.screen != 0 ? topk::finish_capacity(plan.screen_finish) : 0;
    return static_cast<std::size_t>(
        topk::delegate_layout(p, plan.group, topk::selection_workspace_bytes(m, plan.maxima), list_cap).total);
  }
  if (plan.kind == TopkPlan::Kind::kPasses)
    return static_cast<std::size_t>(topk::passes_workspace_bytes(p.rows, plan.cluster, p.n));
  if (plan.kind == TopkPlan::Kind::kArgmax)  // the segments' winners: indices, then values
    return plan.segs > 1 ? static_cast<std::size_t>(p.rows * plan.segs * (8 + elem_bytes(p.dtype))) : 0;
  return static_cast<std::size_t>(topk::selection_workspace_bytes(p, plan.selection()));
}

Status topk_run(const TopkParams& call, const TopkPlan& plan) {
  const TopkParams p = as_run(call, plan);
  const topk::DtypeOps* ops = topk::ops_for(p.dtype);
  if (ops == nullptr || !plan.flyops()) return Status::kUnsupported;
  if (p.workspace_bytes < topk_workspace_bytes(p, plan))
    return Status::kInvalidArgument;
  return ops->run(p, plan);
}

namespace topk {

// The counter through a bijection of 32 bits (odd multipliers and xor-shifts), so that tags
// are distinct for 2^32 calls but do not look like the small integers that fill memory
// nearby (positions, counts): a tag found by chance only costs its row speed (TopK v139).
uint32_t next_list_tag() {
  for (;;) {
    uint32_t t = g_list_tag.fetch_add(1, std::memory_order_relaxed);
    t ^= t >> 16;
    t *= 0x7feb352du;
    t ^= t >> 15;
    t *= 0x846ca68bu;
    t ^= t >> 16;
    if (t != 0) return t;  // 0 is a cleared word's
  }
}

bool keeps_polled_words() { return g_keep_polled_words.load(std::memory_order_relaxed); }

}  // namespace topk

void topk_keep_polled_words(bool on) { g_keep_polled_words.store(on, std::memory_order_relaxed); }

void topk_force(int kind, int cluster) {
  // Codes no kind answers to (13 and 14; 18, 19 and 21 of the removed filter kernel) are the
  // router's, as a force that cannot run is.
  const bool known = kind >= -1 && kind <= 23 && kind != 13 && kind != 14 && kind != 18 && kind != 19 && kind != 21;
  g_forced_kind.store(known ? kind : -1, std::memory_order_relaxed);
  g_forced_cluster.store(cluster, std::memory_order_relaxed);
}

}  // namespace flyops
