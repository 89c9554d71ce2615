// The GEMM's compile-time shapes: output tiles of kBM x kBN per CTA, K in blocks of 64 (one
// 128-byte swizzle span of 16-bit elements), a ring of stages; one producer warpgroup
// (TMA) and two consumer warpgroups, each computing 64 x kBN with wgmma m64nkBNk16.
//
// Operand layouts come from the strides: an operand is K-major (its rows run along K) or
// MN-major (its rows run along M or N; wgmma reads it transposed). One stage holds A's and
// B's blocks either way, only arranged differently (see Operand below).
#pragma once

#include <cstdint>

#include "flyops/tile/layout.h"

namespace flyops::gemm {

inline constexpr int kBK = 64;
inline constexpr int kConsumers = 2;               // warpgroups
inline constexpr int kThreads = 128 * (1 + kConsumers);
inline constexpr int kProducerRegs = 40;
inline constexpr int kConsumerRegs = 232;
inline constexpr tile::Swizzle kSwizzle = tile::Swizzle::k128B;
inline constexpr int kSpanElems = 64;              // 16-bit elements per 128-byte swizzle row

// One operand's block of kRows (M or N) x kBK in a stage.
//   K-major:  kRows rows of kBK elements (one TMA box {kBK, kRows}); a k16 step moves 32
//             bytes along the row.
//   MN-major: kRows / 64 blocks, each kBK rows (along K) of 64 elements (TMA boxes {64, kBK}
//             stacked); a k16 step moves 16 rows = 2048 bytes.
template <int kRows, bool kKMajor>
struct Operand {
  static constexpr int kRowsPerBox = kKMajor ? kRows : kSpanElems;
  static constexpr int kBoxes = kKMajor ? 1 : kRows / kSpanElems;
  static constexpr uint32_t kBoxBytes = (kKMajor ? kRows * kBK : kSpanElems * kBK) * 2;
  static constexpr uint32_t kBytes = kBoxes * kBoxBytes;
  static_assert(kKMajor || kRows % kSpanElems == 0, "MN-major blocks are whole 64-element spans");
  // Byte offset of the sub-block starting at row `r` (a multiple of 64) for k16 step kk.
  static constexpr uint32_t offset(int r, int kk) {
    return kKMajor ? static_cast<uint32_t>(r) * 128u + kk * 32u
                   : static_cast<uint32_t>(r / kSpanElems) * kBoxBytes + kk * 16u * 128u;
  }
};

// The epilogue's staging: each consumer warp stores its 16 rows in boxes of 16 x 64 (2 KB,
// the TMA store's 128-byte swizzle) through two buffers of its own.
inline constexpr int kStoreCols = 64, kStoreRows = 16;
inline constexpr uint32_t kStoreBoxBytes = kStoreRows * kStoreCols * 2;
inline constexpr uint32_t kWarpStagingBytes = 2 * kStoreBoxBytes;

// A tile configuration: kBM x kBN output tiles (two consumer warpgroups of 64 rows each),
// K blocks of kBK, a ring of kStages.
//   Wide:   128 x 256, 4 stages of 48 KB, epilogue staging: the compute-bound kernel.
//   Decode (decode.cuh): 128 x 16 or 128 x 64, 4 stages, no staging: the transposed
//           problem of a few rows of A against a weight matrix.
template <int kBM_, int kBN_, int kStages_, bool kStaged_>
struct Config {
  static constexpr int kBM = kBM_, kBN = kBN_, kStages = kStages_;
  static constexpr bool kStaged = kStaged_;  // per-warp epilogue staging (the wide kernel)
  static constexpr uint32_t kStageBytes = Operand<kBM, true>::kBytes + Operand<kBN, true>::kBytes;
  template <bool kAKMajor, bool kBKMajor>
  struct Stage {
    using A = Operand<kBM, kAKMajor>;
    using B = Operand<kBN, kBKMajor>;
    static_assert(A::kBytes + B::kBytes == kStageBytes, "stage size independent of layout");
  };
  static constexpr uint32_t kStagingBytes = kStaged ? 4 * kWarpStagingBytes : 0;  // per consumer warpgroup
  static_assert(!kStaged || kBN == 256, "the staged epilogue writes a warp's 16 x 256 rows as four boxes");
  // Dynamic shared memory: the stages, the staging, slack to align to the 1024-byte atom.
  static constexpr int kSmemBytes = kStages * kStageBytes + kConsumers * kStagingBytes + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of sm_90");
};

using Wide = Config<128, 256, 4, true>;

}  // namespace flyops::gemm
