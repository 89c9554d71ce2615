// The GEMM's compile-time shape: a 128 x 256 output tile per CTA, K in blocks of 64 (one
// 128-byte swizzle span of bf16), a ring of 4 stages; one producer warpgroup (TMA) and two
// consumer warpgroups, each computing 64 x 256 with wgmma m64n256k16.
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

using ATile = tile::SmemTile<uint16_t, kBM, kBK, tile::Swizzle::k128B>;
using BTile = tile::SmemTile<uint16_t, kBN, kBK, tile::Swizzle::k128B>;
inline constexpr uint32_t kStageBytes = ATile::kBytes + BTile::kBytes;
// Dynamic shared memory: the stages, plus slack to align them to the 1024-byte swizzle atom.
inline constexpr int kSmemBytes = kStages * kStageBytes + 1024;

}  // namespace flyops::gemm
