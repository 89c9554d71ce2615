// A thread's slice of one row: kItems fragments of kVec contiguous elements, fragment i at
// column (i * kLanesPerRow + lane) * kVec, so neighbouring threads touch neighbouring
// 16-byte chunks (coalesced). A row spread over a cluster of CTAs has kLanesPerRow =
// cluster size x threads per row, and CTA rank r holds lanes [r, r + 1) x threads per row.
// Out-of-range fragments read as zero and are never stored.
#pragma once

#include "flyops/tile/reduce.h"
#include "flyops/tile/vec.h"
#include "traits.h"

namespace flyops::rms_norm {

template <typename T, int kVec_, int kShape>
struct RowTraits {
  static constexpr RowShape kS = kShapes[kShape];
  static constexpr int kVec = kVec_;
  static constexpr int kItems = kS.items;
  static constexpr int kThreadsPerRow = kS.threads_per_row;
  static constexpr int kThreads = kS.threads_per_cta;
  static constexpr int kRowsPerCta = kThreads / kThreadsPerRow;
  static constexpr int kWarps = kThreads / 32;
  static constexpr int kCluster = kS.cluster;
  static constexpr int kLanesPerRow = kThreadsPerRow * kCluster;
  using Frag = tile::Vec<T, kVec>;
};

template <typename Tr>
struct RowTile {
  using Frag = typename Tr::Frag;

  FLYOPS_DEVICE static int col(int i, int lane_in_row) {
    return (i * Tr::kLanesPerRow + lane_in_row) * Tr::kVec;
  }
  // Fragments are all-or-nothing: the router only picks kVec > 1 when N % kVec == 0.
  FLYOPS_DEVICE static bool in_row(int i, int lane_in_row, int n) { return col(i, lane_in_row) < n; }

  template <tile::CachePolicy P, typename T>
  FLYOPS_DEVICE static void load(Frag (&f)[Tr::kItems], const T* row, int lane_in_row, int n,
                                 bool row_ok) {
#pragma unroll
    for (int i = 0; i < Tr::kItems; ++i) {
      if (row_ok && in_row(i, lane_in_row, n))
        tile::load<P>(f[i], row + col(i, lane_in_row));
      else
        f[i] = Frag::filled(0.f);
    }
  }

  template <typename T>
  FLYOPS_DEVICE static Frag load_weight_frag(const T* w, int i, int lane_in_row) {
    Frag f;
    tile::load(f, w + col(i, lane_in_row));
    return f;
  }

  template <typename T>
  FLYOPS_DEVICE static void load_weight(Frag (&f)[Tr::kItems], const T* w, int lane_in_row,
                                        int n) {
#pragma unroll
    for (int i = 0; i < Tr::kItems; ++i) {
      if (w != nullptr && in_row(i, lane_in_row, n))
        tile::load(f[i], w + col(i, lane_in_row));
      else
        f[i] = Frag::filled(1.f);
    }
  }
};

}  // namespace flyops::rms_norm
