// Layouts: compile-time shapes and strides, and the shared-memory swizzles that TMA and
// wgmma agree on. Host and device (constexpr), so the tests check them on the CPU.
//
// A swizzle permutes 16-byte chunks inside an atom of 8 rows: for the 128-byte mode the
// chunk index (address bits 4-6) is XORed with the row within the atom (bits 7-9), so the
// 8 rows of one logical column chunk land in 8 different bank groups. 64- and 32-byte
// modes do the same with 4 and 2 chunks per row (bits 4-5 ^ 7-8, bit 4 ^ bit 7).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"

namespace flyops::tile {

// The encodings are the wgmma descriptor's (bits 62-63); TMA has its own enum (tma.h).
enum class Swizzle : uint32_t { kNone = 0, k128B = 1, k64B = 2, k32B = 3 };

// Bytes of one swizzled row (the span a TMA box row may have in that mode); 16 for none.
constexpr uint32_t swizzle_span(Swizzle s) {
  return s == Swizzle::k128B ? 128u : s == Swizzle::k64B ? 64u : s == Swizzle::k32B ? 32u : 16u;
}

// The physical byte offset of logical byte offset `off` in a buffer aligned to the mode's
// atom (8 rows x span bytes; 1024 bytes for 128B).
constexpr uint32_t swizzle(Swizzle s, uint32_t off) {
  if (s == Swizzle::kNone) return off;
  const uint32_t chunks = swizzle_span(s) / 16u;  // 2, 4 or 8 chunks per row
  const uint32_t row = (off >> 7) & (chunks - 1u);
  return off ^ (row << 4);
}

// ---- compile-time layouts ---------------------------------------------------------------
template <int... Ns>
struct Ints {
  static constexpr int kRank = sizeof...(Ns);
  static constexpr int kValues[kRank > 0 ? kRank : 1] = {Ns...};
  static constexpr int get(int i) { return kValues[i]; }
};

// Offset (in elements) of index (i0, i1, ...) = sum i_d * stride_d; size = prod shape_d.
template <typename Shape, typename Stride>
struct Layout {
  static_assert(Shape::kRank == Stride::kRank, "shape and stride of one rank");
  static constexpr int kRank = Shape::kRank;
  static constexpr int shape(int d) { return Shape::get(d); }
  static constexpr int stride(int d) { return Stride::get(d); }
  static constexpr int size() {
    int n = 1;
    for (int d = 0; d < kRank; ++d) n *= shape(d);
    return n;
  }
  // One past the largest offset: the storage the layout needs.
  static constexpr int cosize() {
    int hi = 0;
    for (int d = 0; d < kRank; ++d) hi += (shape(d) - 1) * stride(d);
    return hi + 1;
  }
  template <typename... I>
  static constexpr FLYOPS_HD int offset(I... idx) {
    static_assert(sizeof...(I) == kRank, "one index per mode");
    const int ix[] = {static_cast<int>(idx)...};
    int o = 0;
    for (int d = 0; d < kRank; ++d) o += ix[d] * stride(d);
    return o;
  }
};

template <int R, int C>
using RowMajor = Layout<Ints<R, C>, Ints<C, 1>>;
template <int R, int C>
using ColMajor = Layout<Ints<R, C>, Ints<1, R>>;

// ---- shared-memory tiles ------------------------------------------------------------------
// A tile of kRows x kCols elements of T, rows of kCols * sizeof(T) bytes laid out as TMA
// writes them with box {kCols, kRows} in mode kSwizzle: each row exactly one swizzle span
// (so a K-major operand tile for wgmma is a stack of such tiles along K).
template <typename T, int kRows, int kCols, Swizzle kSwizzle>
struct SmemTile {
  static constexpr uint32_t kRowBytes = kCols * sizeof(T);
  static_assert(kSwizzle == Swizzle::kNone || kRowBytes == swizzle_span(kSwizzle),
                "a swizzled tile row is one swizzle span");
  static_assert(kRows % 8 == 0 || kSwizzle == Swizzle::kNone, "whole 8-row atoms");
  static constexpr uint32_t kBytes = kRows * kRowBytes;
  static constexpr Swizzle kMode = kSwizzle;
  // Byte offset of element (r, c) from the tile's (atom-aligned) base.
  static constexpr FLYOPS_HD uint32_t offset(int r, int c) {
    return swizzle(kSwizzle, static_cast<uint32_t>(r) * kRowBytes + static_cast<uint32_t>(c) * sizeof(T));
  }
};

}  // namespace flyops::tile
