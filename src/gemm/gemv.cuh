// The narrow kernel: C = alpha * A B + beta * D for up to 16 rows of A, both operands
// K-major, where the time is one read of B (a weight matrix [N, K], as nn.Linear holds it).
// It computes the transposed problem C^T = B A^T with mma.sync (tile/mma.h), fed straight
// from global loads: no tensor maps, no shared-memory ring, no cluster, and no barrier
// until the very end, so each warp keeps a pipeline step of loads in flight and the call's
// host cost is one plain launch.
//
// A row group is 16 rows of B (mma's M side); its K is cut into `runs` contiguous runs, a
// warp each, and a CTA of kGemvWarps warps holds kGemvWarps / runs groups (the launcher
// picks runs so that the grid's warps fill the SMs once). mma's A fragment wants, per lane
// (g = lane / 4, t = lane % 4), rows g and g + 8 at k {2t, 2t+1, 2t+8, 2t+9}; a dot product
// does not care about the order of k, so a lane instead loads 16 contiguous elements of
// each of its rows (k 16t .. 16t + 15 of a 64-wide block, two 16-byte loads) and the same
// 16 of A's rows g (and g + 8 when kNT = 2): both operands see one permutation of K, so the
// products pair up. Each 8-element load feeds two mmas (its low and high 4 elements).
// At the end each warp's 16 x 8kNT partial goes through shared memory and the group's runs
// are added in order (the same bits every run, no atomics) and written with the epilogue.
#pragma once

#include <cstdint>

#include "epilogue.cuh"
#include "flyops/tile/mma.h"
#include "flyops/tile/numeric.h"
#include "flyops/tile/vec.h"

namespace flyops::gemm {

inline constexpr int kGemvRows = 16;  // rows of B per CTA (mma's M)
inline constexpr int kGemvBK = 64;    // K per block: 16 elements a lane, 4 lanes a row
inline constexpr int kGemvWarps = 8;  // per CTA: row groups x K runs (gemv_runs)

// A's rows per mma (8) times kNT covers M; the K blocks of one pipeline step (two steps'
// registers are live at once).
template <int kNT>
inline constexpr int kGemvUnroll = kNT == 1 ? 2 : 1;

template <typename T>
struct GemvArgs {
  const T* a;
  const T* b;
  int64_t lda, ldb;                    // elements between rows (multiples of 8)
  int64_t batch_a, batch_b;            // batch strides (elements)
  int64_t batch_c, batch_d;
  int64_t M, N, K;
  int runs;                            // K runs per 16 rows (1, 2, 4 or 8): warps a row group
  EpilogueArgs<T> epi;                 // C (M x N, row stride ldc) and the addend, untransposed
};

// One pipeline step's registers: kU K blocks of B's two rows (g, g + 8) and of A's kNT
// rows, each as two 8-element pieces (k 16t .. + 7 and 16t + 8 .. + 15 of the block).
template <int kNT, int kU>
struct GemvStep {
  uint4 b[kU][2][2];    // [block][row g, g + 8][piece]
  uint4 a[kU][kNT][2];  // [block][A's row g + 8j][piece]
};

// A lane's rows and the predicated loads of a step; a piece past the warp's run, past K (the
// launcher sends only K % 8 == 0 here, so pieces are whole), past N or past M is zero.
template <typename T, int kNT>
struct GemvLane {
  const T* b_row[2];
  const T* a_row[kNT];
  bool b_ok[2], a_ok[kNT];
  int t;

  FLYOPS_DEVICE GemvLane(const GemvArgs<T>& args, int64_t z, int64_t n0, int l) : t(l % 4) {
    const int g = l / 4;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      b_ok[r] = n0 + g + 8 * r < args.N;
      b_row[r] = args.b + z * args.batch_b + (b_ok[r] ? n0 + g + 8 * r : 0) * args.ldb;
    }
#pragma unroll
    for (int j = 0; j < kNT; ++j) {
      a_ok[j] = g + 8 * j < args.M;
      a_row[j] = args.a + z * args.batch_a + (a_ok[j] ? g + 8 * j : 0) * args.lda;
    }
  }

  template <int kU>
  FLYOPS_DEVICE void load(GemvStep<kNT, kU>& s, int64_t kb, int64_t kb_end, int64_t K) const {
#pragma unroll
    for (int u = 0; u < kU; ++u)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int64_t k = (kb + u) * kGemvBK + 16 * t + 8 * h;
        const bool in = kb + u < kb_end && k < K;
#pragma unroll
        for (int r = 0; r < 2; ++r)
          s.b[u][r][h] = tile::load_now_once_if(reinterpret_cast<const uint4*>(b_row[r] + k), in && b_ok[r]);
#pragma unroll
        for (int j = 0; j < kNT; ++j)
          s.a[u][j][h] = tile::load_now_if(reinterpret_cast<const uint4*>(a_row[j] + k), in && a_ok[j]);
      }
  }
};

// A step's products: each 8-element piece feeds two mmas, its low half (q = 0: registers x,
// y) and its high half (z, w). The A fragment is {row g lo, row g + 8 lo, row g hi, row
// g + 8 hi} of the half (tile/mma.h's layout under the lane's permutation of K).
template <typename T, int kNT, int kU>
FLYOPS_DEVICE void gemv_products(float (&acc)[kNT][4], const GemvStep<kNT, kU>& s) {
#pragma unroll
  for (int u = 0; u < kU; ++u)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const uint4 &lo = s.b[u][0][h], &hi = s.b[u][1][h];
        const uint32_t fa[4] = {q ? lo.z : lo.x, q ? hi.z : hi.x, q ? lo.w : lo.y, q ? hi.w : hi.y};
#pragma unroll
        for (int j = 0; j < kNT; ++j) {
          const uint4& p = s.a[u][j][h];
          const uint32_t fb[2] = {q ? p.z : p.x, q ? p.w : p.y};
          tile::mma_m16n8k16<T>(acc[j], fa, fb);
        }
      }
}

}  // namespace flyops::gemm

// Kernels at global scope, named flyops_* for profiles.
template <typename T, int kNT>
__global__ void __launch_bounds__(flyops::gemm::kGemvWarps * 32, 2) flyops_gemm_gemv(const flyops::gemm::GemvArgs<T> args) {
  using namespace flyops;
  using namespace flyops::gemm;
  constexpr int kWarps = kGemvWarps;
  __shared__ float partial[kWarps][4 * kNT][32];  // [warp][accumulator][lane]: no bank conflicts

  // Warp w: row group w / runs of the CTA's kWarps / runs, K run w % runs of it.
  const int w = static_cast<int>(threadIdx.x) / 32, l = static_cast<int>(threadIdx.x) % 32;
  const int runs = args.runs, groups = kWarps / runs;
  const int64_t z = blockIdx.y, n0 = (int64_t{blockIdx.x} * groups + w / runs) * kGemvRows;
  const GemvLane<T, kNT> lane(args, z, n0, l);

  // The run's K blocks, kGemvUnroll<kNT> at a time, software-pipelined: the next step's
  // loads are issued before this step's products, and since they are only used after the
  // loop's back edge the compiler cannot sink them under the products (it does within one
  // block of straight-line code, leaving ~3 loads in flight).
  constexpr int kU = kGemvUnroll<kNT>;
  const int64_t blocks = (args.K + kGemvBK - 1) / kGemvBK;
  const int64_t per = (blocks + runs - 1) / runs, run = w % runs;
  const int64_t kb_end = blocks < (run + 1) * per ? blocks : (run + 1) * per;

  float acc[kNT][4];
#pragma unroll
  for (int j = 0; j < kNT; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.f;
  int64_t kb = run * per;
  GemvStep<kNT, kU> cur;
  lane.load(cur, kb, kb_end, args.K);
#pragma unroll 1
  for (kb += kU; kb < kb_end; kb += kU) {
    GemvStep<kNT, kU> next;
    lane.load(next, kb, kb_end, args.K);
    gemv_products<T>(acc, cur);
    cur = next;
  }
  gemv_products<T>(acc, cur);

#pragma unroll
  for (int j = 0; j < kNT; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) partial[w][4 * j + e][l] = acc[j][e];
  __syncthreads();

  // One output a thread: group gi's row r (column n of C) and A's row m (C's row), its runs
  // added in order; consecutive threads take consecutive columns of C.
  T* c = args.epi.c + z * args.batch_c;
  const T* d = args.epi.d != nullptr ? args.epi.d + z * args.batch_d : nullptr;
  constexpr int kOut = kGemvRows * 8 * kNT;  // one group's outputs
  for (int i = static_cast<int>(threadIdx.x); i < groups * kOut; i += kWarps * 32) {
    const int gi = i / kOut, r = i % kGemvRows, m = i % kOut / kGemvRows;
    const int64_t n = (int64_t{blockIdx.x} * groups + gi) * kGemvRows + r;
    if (m >= args.M || n >= args.N) continue;
    // (r, m) sits in lane 4 (r % 8) + (m % 8) / 2, accumulator 4 (m / 8) + 2 (r / 8) + m % 2.
    const int src = 4 * (r % 8) + (m % 8) / 2, reg = 4 * (m / 8) + 2 * (r / 8) + m % 2;
    float sum = 0.f;
    for (int v = 0; v < runs; ++v) sum += partial[gi * runs + v][reg][src];
    float out = args.epi.alpha * sum;
    if (d != nullptr) out += args.epi.beta * tile::to_float(d[m * args.epi.d_stride_m + n * args.epi.d_stride_n]);
    c[m * args.epi.ldc + n] = tile::from_float<T>(out);
  }
}
