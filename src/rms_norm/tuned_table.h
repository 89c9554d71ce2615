// Row shape per N for each (direction, element size, vector width): the first entry whose
// max_n >= N wins; N past the last entry takes the split path.
// Provenance: H200 sweeps of every fitting shape at M*N = 64M elements, 2026-11-29
// (`python -m flyops.bench --op rms_norm --tune`, bench/results/h200/rms_norm_tune.json);
// where the best and the runner-up were within 1% the exact-fit shape was kept. Entries
// below 1024 and the scalar tables are not swept (launch-bound or rare).
#pragma once

#include "traits.h"

namespace flyops::rms_norm {

struct TableEntry {
  long long max_n;
  int shape;
};

template <int kLen>
struct Table {
  TableEntry e[kLen];
  static constexpr int size() { return kLen; }
};

// forward, 16-bit elements, 8 per access
inline constexpr Table<13> kFwd16 = {{{32, 0}, {64, 1}, {128, 2}, {256, 3}, {512, 4}, {1024, 20},
                                      {2048, 7}, {4096, 11}, {5120, 9}, {8192, 15}, {10240, 13},
                                      {16384, 16}, {32768, 19}}};
// forward, fp32, 4 per access
inline constexpr Table<12> kFwd32 = {{{16, 0}, {32, 1}, {64, 2}, {128, 3}, {256, 4}, {512, 5},
                                      {1024, 7}, {2048, 10}, {4096, 15}, {5120, 14}, {8192, 16},
                                      {16384, 17}}};
// backward, 16-bit elements, 8 per access (",2-stage" shapes prefetch the next rows)
inline constexpr Table<13> kBwd16 = {{{32, 0}, {64, 1}, {128, 2}, {256, 3}, {512, 4}, {1024, 5},
                                      {2048, 22}, {4096, 11}, {5120, 10}, {8192, 26}, {10240, 14},
                                      {16384, 16}, {32768, 30}}};
// backward, fp32, 4 per access
// (rows past 8192 spread over a cluster of 2 CTAs)
inline constexpr Table<13> kBwd32 = {{{16, 0}, {32, 1}, {64, 2}, {128, 3}, {256, 4}, {512, 5},
                                      {1024, 8}, {2048, 10}, {4096, 26}, {5120, 27}, {8192, 27},
                                      {10240, 29}, {16384, 31}}};
// one element per access (unaligned pointers or N not a multiple of the vector)
inline constexpr Table<5> kFwdScalar = {{{128, 5}, {512, 8}, {1024, 12}, {2048, 16}, {4096, 19}}};
inline constexpr Table<5> kBwdScalar = {{{128, 5}, {512, 8}, {1024, 12}, {2048, 16}, {4096, 19}}};

template <int kLen>
constexpr int lookup(const Table<kLen>& t, long long n) {
  for (int i = 0; i < kLen; ++i)
    if (n <= t.e[i].max_n) return t.e[i].shape;
  return -1;
}

// Every entry must hold its rows and fit the register budget. fp16 shares the 16-bit
// tables; where an entry does not fit fp16's registers the router takes the split path.
template <int kLen>
constexpr bool table_ok(const Table<kLen>& t, int vec, Elem e, bool bwd) {
  for (int i = 0; i < kLen; ++i) {
    const int s = t.e[i].shape;
    if (s < 0 || s >= kNumShapes || shape_capacity(s, vec) < t.e[i].max_n) return false;
    if (bwd ? !bwd_fits(s, vec, e) : !fwd_fits(s, vec, e)) return false;
  }
  return true;
}
static_assert(table_ok(kFwd16, 8, Elem::kBF16, false) && table_ok(kFwd32, 4, Elem::kF32, false));
static_assert(table_ok(kBwd16, 8, Elem::kBF16, true) && table_ok(kBwd32, 4, Elem::kF32, true));
static_assert(table_ok(kFwdScalar, 1, Elem::kF16, false) && table_ok(kFwdScalar, 1, Elem::kF32, false));
static_assert(table_ok(kBwdScalar, 1, Elem::kF16, true) && table_ok(kBwdScalar, 1, Elem::kF32, true));

}  // namespace flyops::rms_norm
