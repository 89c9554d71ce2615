// The persistent tile order: CTA b takes tiles b, b + grid, b + 2 grid, ... Tiles are
// numbered batch entry by batch entry; inside one, in bands of kGroupRows tile rows, going
// down a band's rows before moving one tile column right, so the tiles in flight at once
// (about one per SM) share a band of A and a run of B's columns in L2.
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::gemm {

inline constexpr int kGroupRows = 8;

struct TileCoord {
  int m, n, z;  // tile row, tile column, batch entry
};

struct Scheduler {
  int tiles_m, tiles_n;
  int64_t total;  // tiles_m * tiles_n * batch

  FLYOPS_HD TileCoord at(int64_t t) const {
    const int64_t per_batch = int64_t{tiles_m} * tiles_n;
    const int z = static_cast<int>(t / per_batch);
    int64_t r = t - z * per_batch;
    const int64_t per_band = int64_t{kGroupRows} * tiles_n;
    const int band = static_cast<int>(r / per_band);
    r -= band * per_band;
    const int rows = tiles_m - band * kGroupRows < kGroupRows ? tiles_m - band * kGroupRows : kGroupRows;
    return TileCoord{band * kGroupRows + static_cast<int>(r % rows), static_cast<int>(r / rows), z};
  }
};

}  // namespace flyops::gemm
