// Compile-time shapes of the RMSNorm kernels, shared by the router (host C++) and the
// kernels (CUDA). A row of N elements is spread over kThreadsPerRow threads, each holding
// kItems fragments of kVec elements in registers; a CTA holds kThreadsPerCta/kThreadsPerRow
// rows at once. Rows wider than a warp own the whole CTA (block-level reduction); narrower
// rows share a warp (lane-group reduction, no barrier).
#pragma once

namespace flyops::rms_norm {

struct RowShape {
  int items;
  int threads_per_row;
  int threads_per_cta;
  int stages = 1;   // backward: 2 issues the next row group's loads before this one's reduction
  int cluster = 1;  // backward: a row spread over this many CTAs of a thread block cluster
};

// The index is the shape id in the router's tables, the launch switch and FLYOPS tuning.
inline constexpr RowShape kShapes[] = {
    {1, 4, 128},      // 0
    {1, 8, 128},      // 1
    {1, 16, 128},     // 2
    {1, 32, 128},     // 3
    {2, 32, 128},     // 4
    {4, 32, 128},     // 5
    {4, 64, 64},      // 6
    {2, 128, 128},    // 7
    {4, 128, 128},    // 8
    {5, 128, 128},    // 9
    {8, 128, 128},    // 10
    {2, 256, 256},    // 11
    {4, 256, 256},    // 12
    {5, 256, 256},    // 13
    {8, 256, 256},    // 14
    {2, 512, 512},    // 15
    {4, 512, 512},    // 16
    {8, 512, 512},    // 17
    {2, 1024, 1024},  // 18
    {4, 1024, 1024},  // 19
    {2, 64, 64},      // 20
    // backward, double-buffered rows
    {4, 32, 128, 2},    // 21
    {2, 128, 128, 2},   // 22
    {4, 128, 128, 2},   // 23
    {2, 256, 256, 2},   // 24
    {4, 256, 256, 2},   // 25
    {2, 512, 512, 2},   // 26
    {4, 512, 512, 2},   // 27
    {2, 1024, 1024, 2}, // 28
    // backward, rows spread over a cluster of 2 CTAs (row sums exchanged through DSMEM)
    {5, 256, 256, 1, 2},   // 29
    {4, 512, 512, 1, 2},   // 30
    {4, 512, 512, 2, 2},   // 31
    {2, 1024, 1024, 1, 2}, // 32
    {4, 256, 256, 1, 2},   // 33
};
inline constexpr int kNumShapes = sizeof(kShapes) / sizeof(kShapes[0]);

constexpr long long shape_capacity(int shape, int vec) {
  return static_cast<long long>(kShapes[shape].items) * kShapes[shape].threads_per_row *
         kShapes[shape].cluster * vec;
}

// Element kinds, as far as registers go: bf16 fragments stay packed (two per register)
// until used, fp16 ones are widened early by the compiler (one register each).
enum class Elem { kF32, kBF16, kF16 };

// Register budgets. A CTA must fit on an SM alone (65536 registers). The estimates below
// are fitted to ptxas on sm_90a (nvcc 13.0) and keep every shape the router may pick clear
// of spills; `scripts/check-spills` checks the compiler agrees.
constexpr int reg_budget(int threads_per_cta) {
  return 65536 / threads_per_cta < 255 ? 65536 / threads_per_cta : 255;
}
constexpr int elems_per_thread(int shape, int vec) { return kShapes[shape].items * vec; }
constexpr int frag_regs(int shape, int vec, Elem e) {
  return e == Elem::kBF16 && vec > 1 ? elems_per_thread(shape, vec) / 2 : elems_per_thread(shape, vec);
}
// Forward: x, and the weight. An fp32 shape whose weight fragments would leave room for only
// one CTA per SM reads the weight in the epilogue instead, two fragments at a time (from
// L1/L2), when that lets a second CTA in: two rows in flight instead of one. Elsewhere the
// weight is loaded up front, its latency hidden by the reduction (measured: reading it late
// everywhere cost 2-4% on mid-size rows and 25% on decode rows; bench/results, run 5).
// (Forward CTAs take one row group each; stages apply to the persistent backward only.)
constexpr int ctas_per_sm(int shape, int regs) {
  return 65536 / (kShapes[shape].threads_per_cta * regs);
}
constexpr bool fwd_weight_late(int shape, int vec, Elem e) {
  const int x = frag_regs(shape, vec, e);
  return e == Elem::kF32 && ctas_per_sm(shape, 2 * x + 24) < 2 &&
         ctas_per_sm(shape, x + 2 * vec + 24) >= 2;
}
constexpr bool fwd_fits(int shape, int vec, Elem e) {
  const int weight = fwd_weight_late(shape, vec, e) ? 2 * vec : frag_regs(shape, vec, e);
  return kShapes[shape].stages == 1 && kShapes[shape].cluster == 1 &&
         frag_regs(shape, vec, e) + weight + 24 <= reg_budget(kShapes[shape].threads_per_cta);
}
// Backward: x, dy and the weight, plus fp32 dweight sums and temporaries; the sums move to
// shared memory when the registers cannot hold them.
// With two stages the next rows' x and dy are live too, and a few more addresses.
constexpr int bwd_frags(int shape) { return kShapes[shape].stages == 2 ? 5 : 3; }
constexpr int bwd_overhead(int shape) { return kShapes[shape].stages == 2 ? 40 : 32; }
constexpr bool bwd_acc_in_regs(int shape, int vec, Elem e) {
  return bwd_frags(shape) * frag_regs(shape, vec, e) + 2 * elems_per_thread(shape, vec) +
             bwd_overhead(shape) <=
         reg_budget(kShapes[shape].threads_per_cta);
}
constexpr bool bwd_fits(int shape, int vec, Elem e) {
  return bwd_acc_in_regs(shape, vec, e) ||
         (kShapes[shape].threads_per_cta == kShapes[shape].threads_per_row &&
          bwd_frags(shape) * frag_regs(shape, vec, e) + elems_per_thread(shape, vec) / 2 +
                  bwd_overhead(shape) <=
              reg_budget(kShapes[shape].threads_per_cta));
}

// Split path (rows too long for registers): a row-statistics kernel, then a kernel over
// column chunks of kSplitItems fragments per thread.
inline constexpr int kSplitThreads = 256;
inline constexpr int kSplitItems = 4;

constexpr bool valid_shape(RowShape s) {
  return (s.stages == 1 || s.stages == 2) &&
         (s.cluster == 1 || ((s.cluster == 2 || s.cluster == 4) && s.threads_per_row == s.threads_per_cta)) &&
         s.items > 0 && s.threads_per_row > 0 && s.threads_per_cta % 32 == 0 &&
         s.threads_per_cta <= 1024 &&
         (s.threads_per_row <= 32 ? s.threads_per_cta % s.threads_per_row == 0
                                  : s.threads_per_row == s.threads_per_cta) &&
         (s.threads_per_row & (s.threads_per_row - 1)) == 0;
}
constexpr bool all_valid() {
  for (const RowShape& s : kShapes)
    if (!valid_shape(s)) return false;
  return true;
}
static_assert(all_valid(), "every row shape must satisfy the kernels' layout rules");

}  // namespace flyops::rms_norm
