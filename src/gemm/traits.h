// The GEMM's compile-time shape: a 128 x 256 output tile per CTA, K in blocks of 64 (one
// 128-byte swizzle span of 16-bit elements), a ring of 4 stages; one producer warpgroup
// (TMA) and two consumer warpgroups, each computing 64 x 256 with wgmma m64n256k16.
//
// Operand layouts come from the strides: an operand is K-major (its rows run along K) or
// MN-major (its rows run along M or N; wgmma reads it transposed). One stage holds A's and
// B's blocks either way, only arranged differently (see Operand below).
#pragma once

#include <cstdint>

#include "flyops/tile/layout.h"

namespace flyops::gemm {

inline constexpr int kBM = 128;
inline constexpr int kBN = 256;
inline constexpr int kBK = 64;
inline constexpr int kStages = 4;
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

template <bool kAKMajor, bool kBKMajor>
struct StageLayout {
  using A = Operand<kBM, kAKMajor>;
  using B = Operand<kBN, kBKMajor>;
  static constexpr uint32_t kBytes = A::kBytes + B::kBytes;
};

// Both layouts hold the same bytes: 16 KB of A and 32 KB of B per stage.
inline constexpr uint32_t kStageBytes = StageLayout<true, true>::kBytes;
static_assert(StageLayout<false, false>::kBytes == kStageBytes, "stage size independent of layout");
// The epilogue's staging: per consumer warpgroup one 64 x 128 half of its 64 x 256 rows,
// as two 64 x 64 boxes in the TMA store's 128-byte swizzle (8 KB each).
inline constexpr int kStoreCols = 64;
inline constexpr uint32_t kStoreBoxBytes = 64 * kStoreCols * 2;
inline constexpr uint32_t kStagingBytes = 2 * kStoreBoxBytes;
// Dynamic shared memory: the stages, the staging, slack to align to the 1024-byte atom.
inline constexpr int kSmemBytes = kStages * kStageBytes + kConsumers * kStagingBytes + 1024;
static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of sm_90");

}  // namespace flyops::gemm
