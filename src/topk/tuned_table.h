// Where the H200 measurements put another plan ahead of the router's default rule.
// Source: bench/results/h200/topk_tune.json (python -m flyops.bench --op topk --tune, every
// cluster size and two stages forced on the sampling shapes, commit of that file). The
// one-pass cluster kernel's rows carry a fixed cost per row (its digit passes synchronise
// the cluster); with many long fp32 rows, two stages of single-CTA segments hide it better.
// Where stock measured ahead of the plan these rules pick, the call goes to stock
// (measured_slower, at the end).
#pragma once

#include "flyops/topk.h"
#include "traits.h"

namespace flyops::topk {

// Two stages (segments of one CTA each, then their union) instead of one pass per row.
inline bool prefer_two_stage(const TopkParams& p) {
  if (p.rows < 64 || p.n < 100000) return false;
  if (p.dtype == DType::kFloat32)  // 64 rows of 262144 at k >= 512: one pass measured faster
    return !(p.k >= 512 && p.rows < 256 && p.n >= 200000);
  // bf16/fp16 rows are half the bytes: one pass wins except 256 x 128256 at k = 1024.
  return p.rows >= 256 && p.k >= 512 && p.n < 200000;
}

// Delegates (group maxima, then the chosen groups) instead of a radix select over the whole
// row, on inputs of >= 15 MiB with long rows (>= 100k) or a large k (>= 512). Source: both
// forced in one process on the sampling shapes (docs/perf-notes.md, TopK v15-v17): their
// two selections and four launches cost ~25 us whatever the size, so 64 x 128256 bf16 (16
// MB) measured 0.95-1.19x, 256 x 262144 fp32 2.2-2.7x, one row of 2^24 1.4-1.8x; 256 x
// 32000 1.11-1.31x at k = 1024 but 0.90-1.07x at k = 20/50; single rows 0.3-0.6x.
//
// With the finish kernel (small k: both selections in one CTA per row, TopK v19) delegates
// also win on shorter rows once there are 64 rows or more: 256 x 32000 k = 20-256 1.3-2.1x
// over one cluster pass, 64 x 32000 0.96-1.4x (bf16 k = 20 the 0.96x); one row still lost
// then (1 x 32000-262144 0.8-1.0x: a cluster spreads the row over 8-16 CTAs; since TopK v66
// prefer_register_finish, below, takes it at k <= 100). Its shared-memory
// form (k up to 1024, TopK v21), against delegates' two radix selections or the router's
// cluster pass at 64 and 256 rows: k = 1024 1.0-1.6x (64 x 32000 fp32 the 1.0x), k = 300
// 1.1-1.4x; at one row 0.5-0.7x of the cluster kernel. `finish`: whether the finish kernel
// takes the row (finish_elems of its group); `screened`: through its screened shared-memory
// form.
// Calls of 8 or more rows of >= 120k elements and 6-15 MiB in all, which the one-pass cluster
// kernel took (2-4 waves of clusters), take the screened finish (prefer_screen) since TopK
// v60: 0.40-0.76x at every k measured (fp32 8 x 262144, 16 x 128256-151936; bf16 16 x
// 262144, 32 x 128256-151936); under 6 MiB it was even or behind (bf16 8 x 128256
// 1.05-1.10x at k <= 256).
// The finish kernel's register forms, unscreened, on fewer than 64 rows of 32000 or more at
// k <= 100, ahead of the rules above (the cluster kernel, or the screened shared-memory
// finish of mid-sized calls): since TopK v66 ranked their second selection by counting.
// Source: force 9 against the router in one process (twenty-sixth session, run 4: rows 1-48
// x N 32000-262144 x k 2-256, fp32 and bf16): 0.56-0.94x at k <= 100 wherever the router
// took another plan (one row 0.75-0.94x, 16 x 151936 bf16 0.60x), 0.98-1.04x where it took
// this one already; at k = 256, 1.13-1.47x on 1-8 rows: not taken. `fe`: finish_elems.
// Since the forty-second session, not where prefer_screen_mid_k (below) screens.
inline bool prefer_screen_mid_k(const TopkParams& p);
inline bool prefer_register_finish(const TopkParams& p, int fe) {
  return p.rows < 64 && p.n >= 32000 && p.k <= 100 && fe != 0 && fe <= kFinishMaxE &&
         !prefer_screen_mid_k(p);
}

inline int64_t input_bytes(const TopkParams& p) { return p.rows * p.n * static_cast<int64_t>(dtype_size(p.dtype)); }

inline bool screen_mid_sized(const TopkParams& p) {
  const int64_t bytes = input_bytes(p);
  return p.n >= 120000 && p.rows >= 8 && bytes >= (int64_t{6} << 20) && bytes < (int64_t{15} << 20);
}

// Few rows of >= 120k at large k through the screened list (the sample, the stream and the
// list finish: three launches) instead of the cluster kernel (one launch, its radix rounds
// and the gather ending's order of 1-2k composites on rank 0). Only where the list fits (the
// caller checks the screen's rank); the stream keeps the maxima (screen_maxima). Source:
// TopK v117-v117c (H100, fifty-second session: 1-4 rows of 128k-262k at k = 256-1024
// 1.13-1.61x faster than the cluster kernel on rows without structure; ascending rows, whose
// list misses, 1.29-1.62x slower, still ahead of stock).
inline constexpr int64_t kScreenFewRowsMax = 4;
inline constexpr int64_t kScreenFewRowsMinK = 256;
inline bool prefer_screen_few_rows(const TopkParams& p) {
  return p.rows <= kScreenFewRowsMax && p.n >= 120000 && p.k >= kScreenFewRowsMinK;
}

// The finish that lists its row itself (TopK v118; route.cc's row_list_plan) on 64 rows or
// more of 16k-40k at k = 1024 (16-bit rows from k = 512), where the stream's queue cannot
// hold their lists (route.cc checks: stream_screen_fits): ahead of the unscreened finish's
// two selections. H100, 32000 elements, with v119d's list (a vector's hits only, the row
// through a cp.async ring): bf16 k = 1024 64 rows 16.80 us, 256 rows 27.33 (v118's 22.77 /
// 34.10, itself 0.94-0.97x of the unscreened finish); bf16 k = 512 0.755x / 0.795x of the
// unscreened finish; fp32 k = 1024 22.90 / 36.14 (v118's 24.02 / 35.58, 0.75-0.81x of the
// unscreened finish); fp32 k = 512 1.05-1.22x, so fp32 starts at 1024. Longer rows lose: one
// CTA lists a row at ~6-8 GB/s (v119d, force 23: 64 x 128256 1.6-1.8x of the stream-screened
// plan, 256 x 151936 1.2-1.4x); the bound is where v118's measurements crossed (64 x 65536
// 1.2-1.8x). On fewer rows the cluster kernel stays (one CTA reading a row alone: 1 and 16 x
// 32000 1.05-1.56x of it under v118). Source: TopK v118-v119d (fifty-second and fifty-third
// sessions).
inline constexpr int64_t kRowListMinRows = 64;
inline constexpr int64_t kRowListMinN = 16384;
inline constexpr int64_t kRowListRouteMaxN = 40000;
inline constexpr int64_t kRowListMinK = 1024;
inline constexpr int64_t kRowListMinK16 = 512;
inline bool prefer_screen_row(const TopkParams& p) {
  const int64_t min_k = dtype_size(p.dtype) == 2 ? kRowListMinK16 : kRowListMinK;
  return p.rows >= kRowListMinRows && p.n >= kRowListMinN && p.n <= kRowListRouteMaxN && p.k >= min_k;
}

inline bool prefer_delegates(const TopkParams& p, bool finish, bool screened) {
  if (finish && (p.rows >= 64 || (screened && screen_mid_sized(p)))) return true;
  return (p.n >= 100000 || p.k >= 512) && input_bytes(p) >= (int64_t{15} << 20);
}

// Screening the delegates' candidates (screen_kernel.cuh) for the finish kernel, where it
// fits (traits.h, screen_rank), always through its shared-memory form, whose stream writes
// no maxima (TopK v59). Where: k > kFinishMaxK (below); since TopK v60 (the router against
// force 17 in one process, rows 8-256 x N 128256 / 151936 / 262144 x k 20-1024, fp32 and
// bf16, session of 2026-12-01, fifteenth, run 9) also rows of >= 120k at k >= 256 (0.78-0.94x
// of the register forms' unscreened finish), fp32 rows at k >= 100 (0.86-0.98x; of 256 rows
// only those of >= 150k), and the
// mid-sized calls above (0.40-0.76x); at k <= 50 on 32-256 rows it measured 0.91-1.14x
// (fp32) and 0.95-1.16x (bf16): not screened then (16-bit on 64-256 rows since:
// prefer_screen_low_k). Source of the first rule: screened against not in one process
// (session of 2026-11-30, tenth, run 8; sampling shapes of 64 and 256 rows;
// docs/perf-notes.md, TopK v45): fp32 k = 1024 on rows of 128k-262k
// 1.11-1.38x (the finish's two selections over ~16k keys each, ~28 us at 64 rows, became
// one over ~2-4k, ~10 us), bf16 1.17-1.29x (run 10, a queue of 512); at k = 20-50
// 0.86-1.04x (the register forms' finish saves ~5 us, the sampling kernel and the
// stream's queue cost as much).
// The fp32 calls that screen at mid k (from k = 100 below, k = 65 in prefer_screen_mid_k): 128
// rows or fewer, or rows of >= 150k. fp32 256 x 128256 k = 100 measured 1.026x once the list
// grew with the exact rank (v60), and 1.045x in the forty-second session.
inline bool fp32_screens_rows(const TopkParams& p) { return p.rows <= 128 || p.n >= 150000; }

// 16-bit rows of >= 32000 at k = 20-64 on 64-256 rows: screened through the shared-memory
// finish, ahead of the register forms' unscreened finish, since the list finish's read and
// trigger (TopK v126-v130) and the raw-bit stream (v123). Source: force 17 against the router
// in one process (sixty-first session, call 5, an H100; docs/perf-notes.md, rows 64 and 256 x
// N 32000 / 128256 / 151936 / 262144 x k 20 and 50): bf16 0.79-0.95x at every one (64 rows
// 0.79-0.88x). fp32 stays: 0.89-0.97x on 64 rows there, but 256 rows 1.00-1.12x, and the
// H200 measured 128 rows and rows of 151936-200000 slower (prefer_screen_mid_k). On the
// H200 (sixty-second session's bench against v123's record): bf16 256 x 128256 k = 20 / 50
// 0.94x, 256 x 151936 0.93-0.94x, 256 x 262144 0.91-0.94x.
inline bool prefer_screen_low_k(const TopkParams& p) {
  return p.dtype != DType::kFloat32 && p.rows >= 64 && p.rows <= 256 && p.n >= 32000 && p.k >= 20 &&
         p.k <= 64;
}

inline bool prefer_screen(const TopkParams& p) {
  if (p.k > kFinishMaxK) return true;
  if (prefer_screen_low_k(p)) return true;
  if (p.n < 120000) return false;
  const bool fp32_mid_k = p.dtype == DType::kFloat32 && p.k >= 100 && fp32_screens_rows(p);
  return p.k >= 256 || fp32_mid_k || screen_mid_sized(p) || prefer_screen_mid_k(p);
}

// Screening (through the shared-memory finish) at k of 65-99 (fp32) or 65-255 (16-bit), and
// fp32 rows of >= 250k at k = 50-64 on 32-64 rows, on calls of >= 15 MiB of rows of >= 120k,
// ahead of the register forms' unscreened finish. Past k = 64 the register forms lose their
// loose cut where groups hold 64 elements (finish_groups), or their keys outgrow the
// registers (the unscreened shared-memory form); the screened list then wins. Source: force
// 17 against the router in one process (forty-second session, H200; docs/perf-notes.md):
// k = 65-99 0.79-0.95x on 16-256 rows of 128256-262144 (fp32 and bf16: 16 x 262144, 32 x
// 151936-262144, 48 x 151936, 64 x 128256-262144, 128 x 151936-262144, 256 x 151936); bf16
// k = 100-200 0.77-0.87x (64 x 262144, 256 x 151936-262144; 256 x 128256 k = 100 0.997x);
// fp32 k = 50-64 on 32-64 rows of 262144 0.95-0.98x, but 1.01-1.10x on 16, 128 and 256 rows
// and 0.998-1.07x on rows of 151936-200000; bf16 k = 50-64 0.93-1.14x: not taken (on 64-256
// rows taken since, by prefer_screen_low_k). fp32 rows
// as fp32_screens_rows; the 6-15 MiB calls screen_mid_sized takes already, and under 6 MiB
// the finish is not the delegates' (prefer_delegates).
inline bool prefer_screen_mid_k(const TopkParams& p) {
  if (p.n < 120000 || input_bytes(p) < (int64_t{15} << 20)) return false;
  if (p.dtype != DType::kFloat32) return p.k > 64;
  if (p.k > 64) return fp32_screens_rows(p);
  return p.k >= 50 && p.n >= 250000 && p.rows >= 32 && p.rows <= 64;
}

// Screening in front of the delegates' two radix selections (rows too long for the finish
// kernel), wherever it fits (the wide sample: traits.h). Source: screened against not (force
// 8) in one process (session of 2026-12-01, twelfth, runs 3-4; docs/perf-notes.md, TopK
// v48): one row of 2^24 k = 100 fp32 52.5 -> ~39 us, bf16 45.6 -> ~31; 4 x 2^22 and 16 x
// 2^20 at k = 100 1.3-1.4x; 1 x 2^22 k = 20 1.06-1.47x; bf16 2^24 at k = 1024 1.43x (fp32's
// list does not fit there: not screened). Rows whose list misses pay the sample, the list
// finish and the skipped launches (~5-8 us) on top of the selections.
inline bool prefer_screen_chain(const TopkParams&) { return true; }

// The group kernel instead of the warp kernel on short rows. Source: both forced on the
// routing shapes (rows 1, 4096, 16384, 65536 x N 8-256 x k 1-8, fp32 and bf16;
// docs/perf-notes.md, TopK v10 and v24). 16-bit rows sort 32-bit composites: the group
// kernel took 0.38-0.9x of the warp kernel's time from 4096 rows on, 0.85-0.9x at one row.
// fp32 rows sort 64-bit ones. Up to 64 elements the group kernel wins or ties (a warp per
// row of 8 took 3x its time at 65536 rows). Past 64, against the warp kernel's lane-group
// threshold (v24), from 4096 rows on: k <= 2 the group kernel wins (0.67-0.93x); k = 3-4
// it wins at N = 128 (0.83-1.03x) and loses at 256 (1.0-1.1x); k = 6-8 it loses
// (1.04-1.35x). Below 4096 rows, where the group kernel runs sixteen threads a row (v25),
// both forced (session run 3 of 2026-11-30, rows 1, 64, 1024): rows of 65-128 at k >= 3
// the group kernel 0.89-0.99x of the warp kernel's time (k = 2: 1.03-1.05x); rows of
// 129-256 at k = 2 0.96-0.98x (k = 4-8: 1.0-1.08x; k = 1 not measured, stays). From 4096
// rows the group kernel's threshold form (prefer_group_threshold, TopK v37) took fp32 rows
// of 129-256 at k = 6-8 from the warp kernel: 4096 x 256 7.8-8.1 vs 8.5 us, 16384 x 256
// 12.5-13.3 vs 17.3, 65536 x 256 29.8-31.6 vs 51.8, 65536 x 128 20.0-21.9 vs 35.3 (4096 x
// 128 k = 8 6.98 vs 6.80, even).
// Since TopK v56 (session of 2026-12-01, fourteenth, run 6, forces in rotating order), fp32
// rows of 129-256 at k >= 3 and up to 1024 rows take the group kernel too, at the threads a
// row of group_threads: 0.84-0.91x of the warp kernel's time up to 512 rows (a warp a row),
// 0.88-0.94x at 1024 (sixteen threads); at 2048 rows neither beat it.
inline bool prefer_group(const TopkParams& p) {
  if (p.n > kGroupMaxN || p.k > kGroupMaxK) return false;
  if (p.dtype != DType::kFloat32 || p.n <= 64) return true;
  if (p.rows < 4096) return p.n <= 128 ? p.k >= 3 : p.k == 2 || (p.k >= 3 && p.rows <= 1024);
  return true;
}

// Threads a row for rows of 129-256 in the group kernel, where they measured faster than
// traits.h's group_shape rule (0: that rule). Source: TopK v56 (run 6, all three forced in
// rotating order over rows 1-16384 x N 128/200/256 x k 2/6/8, fp32 and bf16; run 5 for
// 65536 rows): fp32 k >= 2 up to 512 rows, a warp a row (1 x 256 k = 8 5.01 against the
// warp kernel's 5.50 us and sixteen threads' 5.52); fp32 k >= 3 from 4096 rows, where the
// threshold form runs, sixteen threads instead of eight, 0.91-0.96x up to 16384 rows
// (4096 x 256 k = 8 7.86 vs 8.45 us; 16384 x 256 12.46 vs 13.42), within 2% at 65536; 16-bit
// rows the same from 16384 rows, where their threshold form starts (16384 x 256 k = 8 10.90
// vs 11.68), and not with the networks (8192 rows 1.03-1.07x). Rows of 65-128 showed
// nothing past the measurement's +-5% on these ~5-10 us calls.
// Since TopK v64 (twenty-third session, run 1, forces in rotating order): 16-bit rows of
// 33-64 at k >= 5 from 65536 rows take two threads of 32 (bf16 65536 x 64 k = 6 / 8 11.10 /
// 11.46 against 13.15 / 12.98 us); at 16384 rows 1.00-1.06x, and fp32, whose networks
// compare 64-bit composites, 1.1-1.45x slower, so neither does.
inline int group_threads(const TopkParams& p) {
  if (p.n > 32 && p.n <= 64) return p.dtype != DType::kFloat32 && p.k >= 5 && p.rows >= 65536 ? 2 : 0;
  if (p.n <= 128 || p.n > kGroupMaxN) return 0;
  if (p.dtype == DType::kFloat32) {
    if (p.k >= 2 && p.rows <= 512) return 32;
    return p.k >= 3 && p.rows >= 4096 && p.rows <= 32768 ? 16 : 0;
  }
  return p.k >= 5 && p.rows >= 16384 && p.rows <= 32768 ? 16 : 0;
}

// The group kernel's threshold form (k >= 2 on rows of eight threads or more) instead of
// its sorting networks. Source: both in one process (session run 4 of 2026-11-30, later;
// docs/perf-notes.md, TopK v37), routing shapes 1-65536 rows: fp32, whose networks
// compare 64-bit composites, 0.42-0.98x of the networks' time at k = 6-8 from 4096 rows
// and 0.78-0.96x at k = 2 from 16384 (1.0-1.06x at 4096); 16-bit rows, whose networks
// take one instruction per min or max, 0.68-0.94x only at 65536 rows of 128-256 and 16384
// of 256, and 1.04-1.23x on shorter rows or fewer of them; single rows 1.02-1.18x. Since
// TopK v36 made 16-bit elements cheaper to prepare, their networks win again at k <= 4
// (session of 2026-11-30, ninth, run 3, both forced in one process: 65536 x 128 k = 2
// 11.5 vs 15.0 us, 65536 x 256 k = 2 17.5 vs 20.7, 16384 x 256 k = 2-3 0.87-0.94x); at
// k = 6-8 the two stay within 0.94-1.17x of each other and the threshold keeps its rows.
inline bool prefer_group_threshold(const TopkParams& p) {
  if (p.k < 2 || p.rows < 4096) return false;
  if (p.dtype == DType::kFloat32) return p.k >= 3 || p.rows >= 16384;
  if (p.k <= 4) return false;
  return p.n > 128 ? p.rows >= 16384 : p.n > 64 && p.rows >= 65536;
}

// The rows kernel (a warp a row, rows_kernel.cuh) ahead of every rule above. Source: it, the
// router and stock forced in one process (`scripts/topk-force-ab.py --forces=-1,0,20`,
// thirtieth session, run 2: rows 64-16384 x N 200-4096 x k 1-256; run 3: rows 1-32768 x N
// 200-4095 x k 2-200 between those; fp32, bf16, fp16, sorted; docs/perf-notes.md, TopK v71):
// - N <= 512 at k >= 32, where the warp kernel's k rounds or a CTA a row ran: 0.05-0.67x of
//   the router's time at any row count (bf16 16384 x 200 k = 64 33 against 732 us, 3.3x
//   stock's; the warp kernel at k = 32 on 8-32 fp32 rows of 512 was 1.05-1.17x stock's),
//   except fp32 under 256 rows of 257-512 at k > 32 (1.0-1.22x against the cluster kernel).
//   At k = 16 it ties the warp kernel from 64 rows and loses under (1.0-1.4x); k = 24 is
//   taken at any row count, between the two measured; at k <= 12 the group and warp kernels
//   stay ahead (1.1-2.9x).
// - N of 513-4096 from 1024 rows at k >= 2: 0.16-0.97x (bf16 16384 x 1024 k = 64 63 against
//   stock's 352 us), except fp32 rows of 2049-4096 against the delegates, which the rows of
//   4096 give whole groups (1.0-1.6x at k < 256 unless k >= 128 from 4096 rows or k >= 64 from
//   16384; rows of 3000 or 4095 from 8192 rows 0.39-0.81x); from 512 rows, rows of up to 1024
//   (fp32 512 x 640 0.57-0.74x) and 16-bit rows of up to 2048 (512 x 1500 0.69-0.88x), from
//   256 16-bit rows of up to 1024 (0.77-0.96x; fp32 256 x 1024 1.0-1.4x).
// - k = 1 on 513-2048 from 4096 rows, where the arg-max kernel takes a CTA a row or stock runs:
//   0.16-0.85x, except fp32 rows of 1025-2048 under 16384 rows (1.18x).
// Past N = 512 under 512 rows (256 for 16-bit rows of up to 1024) a warp each is too few
// (1.1-6.5x).
// - Unsorted k > 256 (run 6, `--unsorted`, rows 256-16384 x N 512-4096 x k 300-N): 0.08-0.96x
//   of stock's time everywhere, and of the router's plan (the cluster kernel, the delegates
//   or stock) from 1024 rows, except fp32 rows past 2048 under 4096 rows (0.96-1.10x), and at
//   256 rows on rows of 512 (0.55-0.80x) and 16-bit ones of 1024 (0.71-0.87x; fp32 1.12-1.2x,
//   rows of 2048-4096 1.15-2.8x).
inline bool prefer_rows(const TopkParams& p) {
  const bool sixteen = p.dtype != DType::kFloat32;
  if (p.n > kRowsMaxN) return false;
  if (p.k > kRowsSortMaxK) {
    if (p.sorted || p.rows < 256) return false;
    if (p.rows >= 1024) return sixteen || p.n <= 2048 || p.rows >= 4096;
    return p.n <= 512 || (sixteen && p.n <= 1024);
  }
  if (p.n <= 512) {
    if (p.k < 16) return false;
    if (p.k < 24) return p.rows >= 64;
    return p.k <= 32 || sixteen || p.n <= 256 || p.rows >= 256;
  }
  if (p.rows < 256) return false;
  if (p.k == 1) return p.rows >= 4096 && p.n <= 2048 && (p.n <= 1024 || sixteen || p.rows >= 16384);
  if (p.rows >= 1024) {
    if (!sixteen && p.n > 2048)
      return p.k >= 256 || (p.k >= 128 && p.rows >= 4096) || (p.k >= 64 && p.rows >= 16384) ||
             (p.n % 512 != 0 && p.rows >= 8192);
    return true;
  }
  if (p.rows >= 512) return p.n <= 1024 || (sixteen && p.n <= 2048);
  return sixteen && p.n <= 1024;
}

// Where stock measured faster than the plan the rules above pick: the call goes to stock.
// Source: the router against stock in one process (`scripts/topk-force-ab.py --forces=-1,0`,
// twenty-ninth session, runs 2-4; docs/perf-notes.md, "Rows of 512-4096 and stock"): rows
// 256-32768 x N 512-8192 x k 8-512, and rows 1-16 x N 2^20-2^24 and 3000017 x k 2048-8192,
// fp32, bf16 and fp16. Past the warp kernel (N > 512 or k > 32) such rows take a
// CTA a row (the cluster kernel, or the finish kernel behind the maxima): ~7-10 us a row,
// two an SM, while stock's 16-bit kernels run these rows at about half its fp32 time. Row
// counts between the measured ones are cut at the geometric middle (2048, 8192).
struct StockBox {
  bool sixteen;              // 16-bit dtypes, else fp32
  int64_t rows_min;
  int64_t n_lo, n_hi;        // n_lo < N <= n_hi
  int64_t k_min, k_max;      // k_min <= k <= k_max
};
inline constexpr int64_t kAnyK = int64_t{1} << 40;
inline constexpr StockBox kStockBoxes[] = {
    // What the rows kernel (prefer_rows) leaves of the measured boxes: sorted k past
    // kRowsSortMaxK, k = 1 under 4096 rows, and fp16 / bf16 k = 128-256 at 1024-2048 rows of
    // 2049-4096 ... (boxes wholly inside prefer_rows were dropped with it, thirtieth session).
    // 16-bit rows of 257-512 past k = 256: 0.37-0.87x from 1024 rows.
    {true, 1024, 256, 512, 257, kAnyK},
    // 16-bit rows of 513-1024: 0.46-0.99x at 4096 and 16384 rows at every k (1.1-1.9x at 1024).
    {true, 2048, 512, 1024, 1, kAnyK},
    // 16-bit rows of 1025-2048: from k = 64 0.68-0.98x at 4096 rows (fp16 k = 64 1.1-1.2x, given
    // up); at 16384 rows 0.82-1.04x at every k.
    {true, 2048, 1024, 2048, 64, kAnyK},
    {true, 8192, 1024, 2048, 1, kAnyK},
    // 16-bit rows of 2049-4096: k >= 128 0.83-1.0x at 16384 rows (fp16 k = 128 1.26x, given up);
    // k = 256 at 4096 rows 0.95x fp16, 1.05x bf16.
    {true, 8192, 2048, 4096, 128, kAnyK},
    {true, 2048, 2048, 4096, 256, 511},
};

// The reason to take stock instead of `plan` (any but the rows kernel's), or nullptr. Also: two stages of 16-bit rows of
// 2^20 or more at k >= 8192 (1-4 rows: 0.77-0.95x), and at k >= 4096 from 4 rows (0.90x;
// one row 1.13-1.25x, kept).
inline const char* measured_slower(const TopkParams& p, const TopkPlan& plan) {
  if (plan.kind == TopkPlan::Kind::kRows) return nullptr;  // measured against stock itself
  const bool sixteen = p.dtype != DType::kFloat32;
  for (const StockBox& b : kStockBoxes)
    if (b.sixteen == sixteen && p.rows >= b.rows_min && p.n > b.n_lo && p.n <= b.n_hi && p.k >= b.k_min &&
        p.k <= b.k_max)
      return "stock measured faster on these rows (H200: many rows of 257-4096 elements)";
  if (sixteen && plan.kind == TopkPlan::Kind::kTwoStage && p.rows <= 16 && p.n >= (int64_t{1} << 20) &&
      (p.k >= 8192 || (p.k >= 4096 && p.rows >= 4)))
    return "stock measured faster on these rows (H200: two stages of 16-bit rows at k >= 4096)";
  return nullptr;
}

}  // namespace flyops::topk
