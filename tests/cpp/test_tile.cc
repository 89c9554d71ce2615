// The tile layer's host-checkable parts: swizzles (a permutation of each atom, and the
// bank-conflict-free property they exist for), compile-time layouts, shared-memory tile
// offsets, wgmma descriptors, and what TMA can describe.
#include <gtest/gtest.h>

#include <cstdint>
#include <set>
#include <vector>

#include "flyops/tile/layout.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"

using namespace flyops::tile;

namespace {

const Swizzle kModes[] = {Swizzle::k32B, Swizzle::k64B, Swizzle::k128B};

}  // namespace

TEST(TileSwizzle, PermutesEachAtom) {
  for (Swizzle m : kModes) {
    const uint32_t atom = 8 * 128;  // the largest atom; smaller modes repeat inside it
    std::set<uint32_t> seen;
    for (uint32_t off = 0; off < atom; off += 16) {
      const uint32_t p = swizzle(m, off);
      EXPECT_LT(p, atom);
      EXPECT_EQ(p % 16, 0u);
      seen.insert(p);
    }
    EXPECT_EQ(seen.size(), atom / 16);
    EXPECT_EQ(swizzle(m, 4 * 1024 + 130), 4 * 1024 + swizzle(m, 130));  // per-atom, offset-preserving
  }
  EXPECT_EQ(swizzle(Swizzle::kNone, 1234), 1234u);
}

// Eight rows of one swizzle span each: the same logical 16-byte column chunk of the eight
// rows falls into eight different 16-byte slots of a 128-byte line (no bank conflicts).
TEST(TileSwizzle, ColumnChunkOfEightRowsHitsEightSlots) {
  for (Swizzle m : kModes) {
    const uint32_t span = swizzle_span(m);
    for (uint32_t c = 0; c < span / 16; ++c) {
      std::set<uint32_t> slots;
      for (uint32_t r = 0; r < 8; ++r) slots.insert((swizzle(m, r * span + c * 16) % 128) / 16);
      EXPECT_EQ(slots.size(), 8u) << "span " << span << " chunk " << c;
    }
  }
  // Without a swizzle, 128-byte rows put a column chunk of all rows in one slot.
  std::set<uint32_t> slots;
  for (uint32_t r = 0; r < 8; ++r) slots.insert((swizzle(Swizzle::kNone, r * 128) % 128) / 16);
  EXPECT_EQ(slots.size(), 1u);
}

TEST(TileLayout, OffsetsSizesCosizes) {
  using R = RowMajor<4, 8>;
  using C = ColMajor<4, 8>;
  static_assert(R::offset(2, 3) == 19 && C::offset(2, 3) == 14, "2-D offsets");
  static_assert(R::size() == 32 && R::cosize() == 32, "dense");
  using Padded = Layout<Ints<4, 8>, Ints<10, 1>>;  // rows padded to 10
  static_assert(Padded::cosize() == 38, "padded rows");
  using Three = Layout<Ints<2, 3, 4>, Ints<12, 4, 1>>;
  static_assert(Three::offset(1, 2, 3) == 23 && Three::size() == 24, "3-D");
  EXPECT_EQ(R::offset(3, 7), 31);
}

TEST(TileSmem, TileOffsetsFollowTheSwizzle) {
  using T128 = SmemTile<uint16_t, 64, 64, Swizzle::k128B>;  // bf16, K = 64: one 128-byte row
  static_assert(T128::kBytes == 8192, "64 rows of 128 bytes");
  EXPECT_EQ(T128::offset(0, 0), 0u);
  EXPECT_EQ(T128::offset(1, 0), 128u + 16u);       // row 1: chunk 0 -> slot 1
  EXPECT_EQ(T128::offset(1, 8), 128u + 0u);        // row 1: chunk 1 -> slot 0
  EXPECT_EQ(T128::offset(9, 3), 1024u + 128u + 16u + 6u);
  using T32 = SmemTile<float, 8, 8, Swizzle::k32B>;
  EXPECT_EQ(T32::offset(4, 0), 4u * 32u + 16u);    // bit 7 set -> chunk 0 becomes 1
}

TEST(TileWgmma, DescriptorFields) {
  const uint64_t d = wgmma_desc(0x1230, 16, 1024, Swizzle::k128B);
  EXPECT_EQ(d & 0x3fff, 0x123u);
  EXPECT_EQ((d >> 16) & 0x3fff, 1u);
  EXPECT_EQ((d >> 32) & 0x3fff, 64u);
  EXPECT_EQ((d >> 49) & 7, 0u);
  EXPECT_EQ(d >> 62, 1u);
  using T = SmemTile<uint16_t, 64, 32, Swizzle::k64B>;
  const uint64_t t = wgmma_desc_kmajor<T>(0x4000);
  EXPECT_EQ((t >> 32) & 0x3fff, 8u * 64u / 16u);  // 8-row groups 512 bytes apart
  EXPECT_EQ(t >> 62, 2u);
}

namespace {

TmaShape matrix(const void* base, uint64_t rows, uint64_t cols, uint64_t ld_elems, int eb, uint32_t box_r,
                uint32_t box_c, Swizzle s) {
  TmaShape t;
  t.rank = 2;
  t.elem_bytes = eb;
  t.base = base;
  t.dims[0] = cols;
  t.dims[1] = rows;
  t.strides_bytes[0] = ld_elems * eb;
  t.box[0] = box_c;
  t.box[1] = box_r;
  t.swizzle = s;
  return t;
}

}  // namespace

TEST(TileTma, WhatTmaCanDescribe) {
  alignas(256) static char buf[256];
  EXPECT_EQ(tma_check(matrix(buf, 4096, 4096, 4096, 2, 128, 64, Swizzle::k128B)), nullptr);
  EXPECT_EQ(tma_check(matrix(buf, 17, 4104, 4104, 2, 128, 64, Swizzle::k128B)), nullptr);  // edges: OOB fill
  EXPECT_STREQ(tma_check(matrix(buf + 2, 64, 64, 64, 2, 64, 64, Swizzle::k128B)),
               "TMA: base pointer not 16-byte aligned");
  EXPECT_STREQ(tma_check(matrix(buf, 64, 33, 33, 2, 64, 32, Swizzle::k64B)),
               "TMA: an outer stride is not a multiple of 16 bytes");  // K = 33 bf16
  EXPECT_STREQ(tma_check(matrix(buf, 64, 64, 64, 2, 64, 128, Swizzle::k128B)),
               "TMA: the box's inner extent exceeds the swizzle span");
  EXPECT_STREQ(tma_check(matrix(buf, 64, 64, 64, 2, 512, 64, Swizzle::k128B)),
               "TMA: a box dimension is 0 or above 256");
  EXPECT_STREQ(tma_check(matrix(buf, 64, 6, 8, 2, 8, 6, Swizzle::kNone)),
               "TMA: the box's inner extent is not a multiple of 16 bytes");
  TmaShape zero = matrix(buf, 0, 64, 64, 2, 8, 64, Swizzle::k128B);
  EXPECT_STREQ(tma_check(zero), "TMA: a dimension is 0 or above 2^32");
}

// Encoding needs the driver: without one (CI) it must fail cleanly; with one, succeed.
TEST(TileTma, EncodeThroughTheDriverEntryPoint) {
  alignas(256) static char buf[4096];
  CUtensorMap map;
  const bool ok = tma_encode(&map, matrix(buf, 32, 64, 64, 2, 8, 64, Swizzle::k128B),
                             CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  EXPECT_EQ(ok, tma_encode_fn() != nullptr);
  EXPECT_FALSE(tma_encode(&map, matrix(buf + 2, 32, 64, 64, 2, 8, 64, Swizzle::k128B),
                          CU_TENSOR_MAP_DATA_TYPE_BFLOAT16));
}
