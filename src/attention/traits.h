// The attention forward kernel's compile-time shapes. A CTA takes kBM = 64 x consumers query
// rows of one (batch, head): two (or three) consumer warpgroups of 64 rows each, and a producer warpgroup that
// streams key and value blocks of kBN rows through two rings. Rows of the head dim are
// stored as kD / 64 spans of 128 bytes (one 128-byte swizzle row each; TMA boxes {64, rows}),
// span blocks one after another, so Q and K are K-major wgmma operands and V (rows along the
// keys, the reduction of P V) an MN-major one.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::attention {

inline constexpr int kConsumers = 2;  // warpgroups
inline constexpr int kThreads = 128 * (1 + kConsumers);
inline constexpr int kProducerRegs = 40;
inline constexpr int kConsumerRegs = 232;
inline constexpr int kSpanElems = 64;  // 16-bit elements per 128-byte swizzle row
inline constexpr int kStoreRows = 16;  // rows of an output TMA store box: one consumer warp's

// kCausal_ false: the config runs only non-causal launches, so no block inside the mainloop
// needs the mask (only the first visited, the last along the keys, can pass Lk) and the
// kernel has no masked loop (mainloop.cuh): with one, the 176- and 192-key blocks spill.
// launch.cu's with_config picks the Config.
template <int kD_, int kBN_, bool kCausal_, int kConsumers_ = kConsumers, int kFirstWidth_ = kBN_>
struct Config {
  static constexpr int kD = kD_;
  static constexpr bool kCausal = kCausal_;
  static constexpr int kConsumers = kConsumers_;
  static constexpr int kThreads = 128 * (1 + kConsumers);
  // setmaxnreg's split of the 64 K registers: 128 x (producer + consumers) <= 65536.
  static constexpr int kProducerRegs = kConsumers == 2 ? attention::kProducerRegs : 32;
  static constexpr int kConsumerRegs = kConsumers == 2 ? attention::kConsumerRegs : 160;
  static constexpr int kBM = 64 * kConsumers;
  // Registers per consumer thread: O takes kD / 2, S kBN / 2, P kBN / 4.
  static constexpr int kBN = kBN_;
  // The first block visited, the last along the keys, holds Lk - (blocks - 1) kBN keys; a
  // non-causal launch knows that count, and kFirstWidth < kBN (a generated wgmma width, a
  // multiple of 16 that covers it) makes that block's S and P V only that wide, so e.g.
  // 4096 keys in 176-key blocks spend 64 columns, not 176, on the last 48 (mainloop.cuh).
  static constexpr int kFirstWidth = kFirstWidth_;
  static constexpr int kStages = 2;
  // The consumer warpgroups take turns issuing their products (mainloop.cuh): measured
  // 0.95-0.97x time at D = 256 and on causal D = 128, even on full D = 128, 1.02-1.03x at 64.
  static constexpr bool kPingPong = kD != 64;
  // A CTA per SM walks the tiles (kernel.cuh, forward v10) on the non-causal configs at
  // D = 64 and D = 128's 128-key blocks, with two Q buffers, so that the next tile's Q loads
  // while this one's output is staged in and stored from the other. Equal tiles end evenly
  // under a static walk (causal rows did not: v3); the 176-key blocks leave no room for a
  // second Q buffer, so 160-key ones walk at 4096-8191 keys (v14; v11 measured them slower
  // from 8192, where the 176-key blocks stay).
  static constexpr bool kPersistent = !kCausal && ((kD == 128 && kBN != 176) || kD == 64);
  static constexpr int kQBuffers = kPersistent ? 2 : 1;
  // O rescaled only when a row's maximum moves past 2^8 (softmax.cuh, forward v12): 0.988-
  // 0.994x time at D = 256 and 0.953-0.960x on the causal three-warpgroup tile at D = 64, but
  // 1.02x slower at D = 128 and 1.03-1.10x on the other D = 64 tiles (the branch around O's
  // multiplies cost those schedules more than it saved).
  static constexpr bool kLazyRescale = kD == 256 || (kD == 64 && kCausal && kConsumers == 3);
  static constexpr int kSpans = kD / kSpanElems;
  static constexpr uint32_t kQBytes = kBM * kD * 2;
  static constexpr uint32_t kKVBytes = kBN * kD * 2;  // one key or value block
  static constexpr int kSmemBytes = kQBuffers * kQBytes + 2 * kStages * kKVBytes + 1024;  // + the 1024-byte alignment
  static_assert(kD % kSpanElems == 0 && kBN % 16 == 0, "whole spans, whole k16 steps");
  static_assert(kFirstWidth % 16 == 0 && kFirstWidth <= kBN && (kFirstWidth == kBN || !kCausal),
                "a narrow first block only where every tile's is the same (non-causal)");
  static_assert(kSmemBytes <= 227 * 1024, "fits the opt-in shared memory of sm_90");
};

// Which key blocks a query block visits: [0, blocks); block j needs the mask when it runs
// past Lk or (causal) past the diagonal of the block's first row.
struct KeyRange {
  int blocks;
  FLYOPS_HD static KeyRange of(int q0, int bm, int bn, int Lk, bool causal, int offset) {
    int end = Lk;
    if (causal && q0 + bm + offset < end) end = q0 + bm + offset;  // last visible key + 1
    return KeyRange{end <= 0 ? 0 : (end + bn - 1) / bn};
  }
};

}  // namespace flyops::attention
