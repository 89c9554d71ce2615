// The persistent tile order. With clusters of `cluster` CTAs (stacked along M: they share
// B's block through multicast), the unit of work is a cluster tile of `cluster` tile rows
// x 1 tile column; cluster c takes cluster tiles c, c + clusters, c + 2 clusters, ... and
// its CTA of rank r the r-th tile row of each. Cluster tiles are numbered batch entry by
// batch entry; inside one, in bands of group_rows tile rows, going down a band before
// moving one tile column right, so the tiles in flight at once (about one per SM) share a
// band of A and a run of B's columns in L2. A tile row past the end (tiles_m not a
// multiple of the cluster) is still walked: its loads read zeros, its stores are clipped.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::gemm {

inline constexpr int kGroupRows = 16;  // measured: 8192^3 reads 1.23 GB from DRAM (8: 1.49, 4: 2.34)

struct TileCoord {
  int m, n, z;  // tile row, tile column, batch entry
};

struct Scheduler {
  int tiles_m, tiles_n;
  int cluster;    // 1 or 2
  int64_t total;  // cluster tiles: ceil(tiles_m / cluster) * tiles_n * batch
  int group_rows = kGroupRows;  // tile rows per band (a multiple of cluster)

  static constexpr FLYOPS_HD int64_t count(int tiles_m, int tiles_n, int cluster, int64_t batch) {
    return int64_t{(tiles_m + cluster - 1) / cluster} * tiles_n * batch;
  }

  FLYOPS_HD TileCoord at(int64_t t, int rank) const {
    const int rows = (tiles_m + cluster - 1) / cluster;  // cluster-tile rows
    const int group = group_rows / cluster;
    const int64_t per_batch = int64_t{rows} * tiles_n;
    const int z = static_cast<int>(t / per_batch);
    int64_t r = t - z * per_batch;
    const int64_t per_band = int64_t{group} * tiles_n;
    const int band = static_cast<int>(r / per_band);
    r -= band * per_band;
    const int band_rows = rows - band * group < group ? rows - band * group : group;
    const int row = band * group + static_cast<int>(r % band_rows);
    return TileCoord{row * cluster + rank, static_cast<int>(r / band_rows), z};
  }
};

}  // namespace flyops::gemm
