// TopK on the CPU: the reference's ordering on hand-made rows, the kernels' radix keys
// against the reference on random bit patterns (NaNs of both signs, signed zeros,
// infinities, ties), and the router's choices and refusals for a described H200.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "seed.h"
#include "flyops/topk.h"
#include "reference/numeric.h"
#include "reference/topk_ref.h"
#include "topk/dispatch.h"
#include "topk/keys.h"
#include "topk/traits.h"
#include "topk/tuned_table.h"

using namespace flyops;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<int64_t> ref_topk(const std::vector<double>& x, int64_t k, bool largest) {
  std::vector<int64_t> idx(static_cast<size_t>(k));
  reference::topk(x.data(), 1, static_cast<int64_t>(x.size()), k, largest, idx.data());
  return idx;
}

// Top-k positions by the kernels' order keys, ties to the lower position.
template <typename Keys>
std::vector<int64_t> key_topk(const std::vector<uint32_t>& raw, int64_t k, bool largest) {
  std::vector<int64_t> order(raw.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) {
    return topk::order_key<Keys>(raw[i], largest) > topk::order_key<Keys>(raw[j], largest);
  });
  order.resize(static_cast<size_t>(k));
  return order;
}

// Random bit patterns of a type, rich in the values whose order is subtle.
std::vector<uint32_t> special_bits(std::mt19937& g, int n, int width) {
  const uint32_t sign = width == 32 ? 0x80000000u : 0x8000u;
  const uint32_t inf = width == 32 ? 0x7f800000u : 0x7c00u;  // fp16 here; bf16 patched below
  std::vector<uint32_t> out(n);
  std::uniform_int_distribution<uint32_t> any(0, width == 32 ? 0xffffffffu : 0xffffu);
  std::uniform_int_distribution<int> pick(0, 9);
  for (auto& b : out) {
    switch (pick(g)) {
      case 0: b = 0; break;                // +0
      case 1: b = sign; break;             // -0
      case 2: b = inf | 1u; break;         // NaN
      case 3: b = sign | inf | 7u; break;  // -NaN, other payload
      case 4: b = inf; break;              // +inf
      case 5: b = sign | inf; break;       // -inf
      case 6: b = width == 32 ? 0x3f800000u : 0x3c00u; break;  // 1.0, tied often
      default: b = any(g);
    }
  }
  return out;
}

double to_double(uint32_t b, int kind) {  // kind: 0 fp32, 1 fp16, 2 bf16
  if (kind == 0) return reference::bits_to_float(b);
  if (kind == 1) return reference::half_to_float(static_cast<uint16_t>(b));
  return reference::bf16_to_float(static_cast<uint16_t>(b));
}

template <typename Keys>
void check_keys_against_reference(int kind) {
  std::mt19937 g(flyops::tests::seeded(1234 + kind));
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(g() % 300);
    std::vector<uint32_t> raw = special_bits(g, n, Keys::kBits);
    if (kind == 2)  // bf16: NaN and inf live at 0x7f80
      for (auto& b : raw)
        if ((b & 0x7fffu) >= 0x7c00u && (b & 0x7fffu) <= 0x7c07u) b = (b & 0x8000u) | 0x7f80u | (b & 7u);
    std::vector<double> x(raw.size());
    for (size_t i = 0; i < raw.size(); ++i) x[i] = to_double(raw[i], kind);
    for (uint32_t b : raw)  // non-NaN bits come back from their key in both directions
      if (!Keys::is_nan(b))
        for (bool largest : {true, false})
          ASSERT_EQ(topk::raw_of_order_key<Keys>(topk::order_key<Keys>(b, largest), largest), b);
    for (bool largest : {true, false}) {
      const int64_t k = 1 + static_cast<int64_t>(g() % n);
      const std::vector<int64_t> want = ref_topk(x, k, largest);
      const std::vector<int64_t> got = key_topk<Keys>(raw, k, largest);
      ASSERT_EQ(got, want) << "kind " << kind << " n " << n << " k " << k << " largest " << largest;
    }
  }
}

// The delegate path's selection, as its kernels do it, on one row: each group's best
// ascending key (32-bit, NaN on top), the k best groups (NaN ties to the lowest group, other
// ties at random, as the cluster kernel may), then the k best of their elements (NaN ties to
// the lowest position, other ties at random). Returns the chosen positions.
template <typename Keys>
std::vector<int64_t> delegate_topk(const std::vector<uint32_t>& raw, int group, int64_t k, bool largest,
                                   std::mt19937& g) {
  const int64_t groups = static_cast<int64_t>(raw.size()) / group;
  auto order32 = [&](uint32_t asc) { return largest ? asc : ~asc; };
  auto nan32 = [&](uint32_t key) { return key == (largest ? 0xffffffffu : 0u); };
  auto key32 = [&](uint32_t b) { return order32(topk::widen_key32<Keys>(topk::ascending_key<Keys>(b))); };
  std::vector<uint32_t> maxima(groups);
  for (int64_t j = 0; j < groups; ++j) {
    uint32_t best = key32(raw[j * group]);
    for (int i = 1; i < group; ++i) best = std::max(best, key32(raw[j * group + i]));
    maxima[j] = best;
  }
  // Best first; equal keys by a random rank, except NaN keys by position.
  auto pick = [&](const std::vector<uint32_t>& key, const std::vector<int64_t>& pos, auto is_nan) {
    std::vector<uint32_t> coin(key.size());
    for (auto& c : coin) c = g();
    std::vector<size_t> order(key.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      if (key[a] != key[b]) return key[a] > key[b];
      return is_nan(key[a]) ? pos[a] < pos[b] : coin[a] < coin[b];
    });
    order.resize(static_cast<size_t>(k));
    return order;
  };
  std::vector<int64_t> ids(groups);
  std::iota(ids.begin(), ids.end(), int64_t{0});
  std::vector<uint32_t> cand_key;
  std::vector<int64_t> cand_pos;
  for (size_t j : pick(maxima, ids, nan32))
    for (int i = 0; i < group; ++i) {
      const int64_t pos = ids[j] * group + i;
      cand_key.push_back(topk::order_key<Keys>(raw[pos], largest));
      cand_pos.push_back(pos);
    }
  std::vector<int64_t> out;
  for (size_t c : pick(cand_key, cand_pos, [&](uint32_t key) { return topk::is_nan_key<Keys>(key, largest); }))
    out.push_back(cand_pos[c]);
  return out;
}

// The chosen elements' bits as a sorted multiset.
std::vector<uint32_t> bits_of(const std::vector<uint32_t>& raw, const std::vector<int64_t>& pos) {
  std::vector<uint32_t> b;
  for (int64_t p : pos) b.push_back(raw[p]);
  std::sort(b.begin(), b.end());
  return b;
}

template <typename Keys>
void check_delegates_against_keys(int kind) {
  std::mt19937 g(flyops::tests::seeded(777 + kind));
  for (int trial = 0; trial < 300; ++trial) {
    const int group = (16 / (Keys::kBits / 8)) << (2 + trial % 3);  // 4, 8 or 16 vectors
    const int groups = 1 + static_cast<int>(g() % 40);
    std::vector<uint32_t> raw = special_bits(g, groups * group, Keys::kBits);
    if (kind == 2)
      for (auto& b : raw)
        if ((b & 0x7fffu) >= 0x7c00u && (b & 0x7fffu) <= 0x7c07u) b = (b & 0x8000u) | 0x7f80u | (b & 7u);
    if (trial % 3 == 0)  // long runs of one value: ties across groups
      for (size_t i = 0; i < raw.size(); ++i)
        if (g() % 4 != 0) raw[i] = raw[0];
    for (bool largest : {true, false}) {
      const int64_t k = 1 + static_cast<int64_t>(g() % groups);
      const std::vector<int64_t> got = delegate_topk<Keys>(raw, group, k, largest, g);
      const std::vector<int64_t> want = key_topk<Keys>(raw, k, largest);
      ASSERT_EQ(bits_of(raw, got), bits_of(raw, want))
          << "kind " << kind << " groups " << groups << " k " << k << " largest " << largest;
    }
  }
}

TopkParams params(DType t, int64_t rows, int64_t n, int64_t k, bool sorted = true) {
  alignas(16) static char buf[64];
  TopkParams p;
  p.rows = rows;
  p.n = n;
  p.k = k;
  p.dtype = t;
  p.sorted = sorted;
  p.x = buf;
  p.x_row_stride = n;
  p.values = buf;
  p.indices = reinterpret_cast<int64_t*>(buf);
  return p;
}

const DeviceInfo kH200 = fake_device_info(9, 0, 132);

std::string plan_name(const TopkParams& p) {
  char buf[128];
  topk_plan_name(topk_choose(p, kH200), p.dtype, buf, sizeof(buf));
  return buf;
}

}  // namespace

TEST(TopkReference, OrdersLikeStock) {
  const std::vector<double> x = {1.0, kNaN, -0.0, 0.0, 3.0, -kNaN, -kInf, kInf, 1.0};
  // NaNs first (lower position first), then +inf, 3, the two 1.0s, +0 above -0, -inf.
  EXPECT_EQ(ref_topk(x, 9, true), (std::vector<int64_t>{1, 5, 7, 4, 0, 8, 3, 2, 6}));
  EXPECT_EQ(ref_topk(x, 9, false), (std::vector<int64_t>{6, 2, 3, 0, 8, 4, 7, 1, 5}));
  EXPECT_EQ(ref_topk(x, 1, true), (std::vector<int64_t>{1}));
  EXPECT_EQ(ref_topk(x, 2, false), (std::vector<int64_t>{6, 2}));
}

TEST(TopkKeys, MatchTheReferenceFp32) { check_keys_against_reference<topk::FloatKeys<32>>(0); }
TEST(TopkKeys, MatchTheReferenceFp16) { check_keys_against_reference<topk::Fp16Keys>(1); }
TEST(TopkKeys, MatchTheReferenceBf16) { check_keys_against_reference<topk::Bf16Keys>(2); }

// The group kernel's branch-free fp32 key is the same key: every sign and exponent, with
// edge and random mantissas (zeros, infinities, every NaN class).
TEST(TopkKeys, BranchFreeFp32KeyIsTheKey) {
  std::mt19937 g(flyops::tests::seeded(7));
  for (uint32_t top = 0; top < 512; ++top) {
    for (uint32_t mant : {0u, 1u, 0x400000u, 0x7fffffu, uint32_t(g()) & 0x7fffffu, uint32_t(g()) & 0x7fffffu}) {
      const uint32_t b = (top << 23) | mant;
      ASSERT_EQ(topk::ascending_key_f32(b), topk::ascending_key<topk::FloatKeys<32>>(b)) << std::hex << b;
    }
  }
}

// The group maxima's branch-free 16-bit keys, two per word, agree with the scalar keys on
// every bit pattern, and widening keeps their order with NaN on top.
template <typename Keys>
void check_key_pairs() {
  std::mt19937 g(flyops::tests::seeded(99));
  for (uint32_t b = 0; b <= 0xffffu; ++b) {
    const uint32_t other = g() & 0xffffu;
    const uint32_t pair = topk::ascending_key_pair<Keys>(b | (other << 16));
    ASSERT_EQ(pair & 0xffffu, topk::ascending_key<Keys>(b)) << std::hex << b;
    ASSERT_EQ(pair >> 16, topk::ascending_key<Keys>(other)) << std::hex << other;
    const uint32_t next = (b + 1) & 0xffffu;
    const uint32_t kb = topk::ascending_key<Keys>(b), kn = topk::ascending_key<Keys>(next);
    ASSERT_EQ(topk::widen_key32<Keys>(kb) < topk::widen_key32<Keys>(kn), kb < kn);
    ASSERT_EQ(topk::widen_key32<Keys>(kb) == 0xffffffffu, Keys::is_nan(b));
  }
}
TEST(TopkDelegates, KeyPairsBf16) { check_key_pairs<topk::Bf16Keys>(); }
TEST(TopkDelegates, KeyPairsFp16) { check_key_pairs<topk::Fp16Keys>(); }

// The screened stream's raw-bit test (TopK v123) against the order keys: where it applies,
// a vector hits exactly when an element's key reaches t, except that smallest-first may also
// let a negative NaN through (the exact test after the queue drops it).
template <typename Keys>
bool raw_hit_of(uint32_t x, int pos, uint32_t filler, const topk::RawBounds& b) {
  uint32_t w[4];
  if constexpr (Keys::kBits == 32) {
    for (int i = 0; i < 4; ++i) w[i] = i == pos ? x : filler;
  } else {
    for (int i = 0; i < 4; ++i) w[i] = filler | filler << 16;
    w[pos / 2] = (w[pos / 2] & ~(0xffffu << (16 * (pos % 2)))) | x << (16 * (pos % 2));
  }
  return topk::raw_screen_hit<Keys>(w[0], w[1], w[2], w[3], b);
}

template <typename Keys>
void check_raw_screen(uint32_t t, const std::vector<uint32_t>& elements, std::mt19937& g) {
  ASSERT_TRUE(topk::raw_screen_applies<Keys>(t)) << std::hex << t;
  constexpr int kPerVec = 128 / Keys::kBits;
  for (bool largest : {true, false}) {
    const topk::RawBounds b = topk::raw_screen_bounds<Keys>(t, largest);
    // The filler never passes: -inf largest-first, +0.0 smallest-first.
    const uint32_t filler = largest ? topk::kKeyTop<Keys> | Keys::kInf : 0u;
    ASSERT_FALSE(raw_hit_of<Keys>(filler, 0, filler, b)) << std::hex << t << " " << largest;
    for (uint32_t x : elements) {
      const bool want = topk::order_key<Keys>(x, largest) >= t;
      const bool hit = raw_hit_of<Keys>(x, static_cast<int>(g() % kPerVec), filler, b);
      const bool negative_nan = Keys::is_nan(x) && Keys::sign(x);
      if (!largest && negative_nan) continue;  // either answer is safe
      ASSERT_EQ(hit, want) << std::hex << "t " << t << " x " << x << " largest " << largest;
    }
  }
}

template <typename Keys>
void check_raw_screen_16() {
  std::mt19937 g(flyops::tests::seeded(123));
  std::vector<uint32_t> every(0x10000);
  std::iota(every.begin(), every.end(), 0u);
  constexpr uint32_t top = 0x8000u, last = top | Keys::kInf;
  std::vector<uint32_t> ts = {top, top + 1, last - 1, last, top | 0x3f80u, top | (Keys::kInf - 0x80u)};
  for (uint32_t t = top + 2; t < last - 1; t += 97 + g() % 16) ts.push_back(t);
  for (uint32_t t : ts) check_raw_screen<Keys>(t, every, g);
  // Outside the applicable range the kernel keeps the key test.
  EXPECT_FALSE(topk::raw_screen_applies<Keys>(top - 1));
  EXPECT_FALSE(topk::raw_screen_applies<Keys>(last + 1));
  EXPECT_FALSE(topk::raw_screen_applies<Keys>(0xffffffffu));
}
TEST(TopkDelegates, RawScreenBf16) { check_raw_screen_16<topk::Bf16Keys>(); }
TEST(TopkDelegates, RawScreenFp16) { check_raw_screen_16<topk::Fp16Keys>(); }

TEST(TopkDelegates, RawScreenFp32) {
  std::mt19937 g(flyops::tests::seeded(124));
  using Keys = topk::FloatKeys<32>;
  constexpr uint32_t top = 0x80000000u, last = top | Keys::kInf;
  std::vector<uint32_t> ts = {top, top + 1, last - 1, last, top | 0x3f800000u};
  for (int i = 0; i < 200; ++i) ts.push_back(top + g() % (Keys::kInf + 1));
  for (uint32_t t : ts) {
    // Every sign and exponent with edge and random mantissas, and the threshold's neighbours
    // in both signs.
    std::vector<uint32_t> xs;
    for (uint32_t hi = 0; hi < 512; ++hi)
      for (uint32_t mant : {0u, 1u, 0x400000u, 0x7fffffu, uint32_t(g()) & 0x7fffffu}) xs.push_back(hi << 23 | mant);
    for (uint32_t d : {0u, 1u, 2u}) {
      const uint32_t v = t - top;
      for (uint32_t x : {v + d, v - d, (v + d) | top, (v - d) | top}) xs.push_back(x);
    }
    check_raw_screen<Keys>(t, xs, g);
  }
  EXPECT_FALSE(topk::raw_screen_applies<Keys>(top - 1));
  EXPECT_FALSE(topk::raw_screen_applies<Keys>(last + 1));
}

// The k best group maxima's groups hold a valid answer, with stock's NaN choices.
TEST(TopkDelegates, MatchTheKeysFp32) { check_delegates_against_keys<topk::FloatKeys<32>>(0); }
TEST(TopkDelegates, MatchTheKeysFp16) { check_delegates_against_keys<topk::Fp16Keys>(1); }
TEST(TopkDelegates, MatchTheKeysBf16) { check_delegates_against_keys<topk::Bf16Keys>(2); }

// The group kernel's threads a row, forced for tuning (force 5, 8/16/32); other values keep
// the rule.
TEST(TopkRoute, GroupThreadsForced) {
  for (int t : {8, 16, 32}) {
    flyops::topk_force(5, t);
    EXPECT_EQ(flyops::topk_choose(params(DType::kFloat32, 4096, 256, 8), kH200).group_threads, t);
    EXPECT_EQ(plan_name(params(DType::kBFloat16, 4096, 256, 8)), "flyops_topk_group<bf16,t" + std::to_string(t) + ">");
  }
  flyops::topk_force(15, 16);  // the threshold form wherever the kernel has one
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 65536, 64, 8)), "flyops_topk_group<bf16,t16,threshold>");
  flyops::topk_force(16, 0);
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 64, 8)), "flyops_topk_group<fp32,networks>");
  flyops::topk_force(5, 4);
  EXPECT_EQ(flyops::topk_choose(params(DType::kFloat32, 4096, 256, 8), kH200).group_threads, 0);
  flyops::topk_force(-1, 0);
  EXPECT_EQ(topk::group_shape(256, 4096, 32).g, 32);
  EXPECT_EQ(topk::group_shape(256, 4096).g, 8);
  EXPECT_EQ(topk::group_shape(256, 1024).g, 16);
  EXPECT_EQ(topk::group_shape(64, 4096, 32).g, 8);  // rows of 64 or fewer keep their shape
}

// Force 23: the screened finish that lists its row itself (TopK v118) on rows of up to
// kRowListMaxN whose group divides them, with the fewest keys a thread (from 16) whose lower
// half holds the list; longer rows, and rows the delegates cannot take, the router's plan.
TEST(TopkRoute, RowListedFinishForced) {
  flyops::topk_force(23, 0);
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 32000, 1024)), "flyops_topk_delegates<fp32,g4,finish32,screen,row>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 256, 32000, 1024)), "flyops_topk_delegates<bf16,g8,finish32,screen,row>");
  EXPECT_EQ(plan_name(params(DType::kFloat16, 3, 32000, 256)), "flyops_topk_delegates<fp16,g8,finish16,screen,row>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 65536, 1024)), "flyops_topk_delegates<fp32,g8,finish32,screen,row>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 2, 300000, 1024)).find(",row>"), std::string::npos);
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 2, 32004, 1024)).find(",row>"), std::string::npos);
  for (auto [t, n, k] : {std::tuple{DType::kFloat32, int64_t{32000}, int64_t{1024}},
                         std::tuple{DType::kBFloat16, int64_t{65536}, int64_t{300}}}) {
    const TopkParams p = params(t, 64, n, k);
    const TopkPlan plan = topk_choose(p, kH200);
    ASSERT_TRUE(plan.screen_row);
    // The list's expected length (1.5 r / f) twice over fits the half of the keys it may take.
    const int bytes = t == DType::kFloat32 ? 4 : 2;
    const double f = static_cast<double>(topk::screen_samples(bytes, plan.screen_threads)) / static_cast<double>(n);
    EXPECT_LE(2 * 1.5 * plan.screen / f, static_cast<double>(topk::row_list_capacity(plan.finish)));
    EXPECT_GE(topk_workspace_bytes(p, plan), static_cast<std::size_t>(64 * (n / plan.group) * 4));  // the fallback's maxima
  }
  // The router: 64 rows or more at k = 1024 where the stream cannot screen (tuned_table.h,
  // prefer_screen_row; route.cc, stream_screen_fits).
  flyops::topk_force(-1, 0);
  EXPECT_TRUE(topk_choose(params(DType::kFloat32, 64, 32000, 1024), kH200).screen_row);
  EXPECT_TRUE(topk_choose(params(DType::kBFloat16, 256, 32000, 1024), kH200).screen_row);
  EXPECT_TRUE(topk_choose(params(DType::kBFloat16, 64, 20000, 1024), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 65536, 1024), kH200).screen_row);  // the stream screens
  EXPECT_FALSE(topk_choose(params(DType::kBFloat16, 64, 65536, 1024), kH200).screen_row);
  EXPECT_TRUE(topk_choose(params(DType::kBFloat16, 64, 32000, 512), kH200).screen_row);  // 16-bit from k = 512
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 32000, 512), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kBFloat16, 64, 32000, 256), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kBFloat16, 16, 32000, 1024), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 32000, 256), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 100000, 1024), kH200).screen_row);
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 8192, 1024), kH200).screen_row);
}

// The rows kernel (force 20): any row of up to kRowsMaxN, a sorted k up to kRowsSortMaxK,
// unsorted any k; past that the router's plan. Its shared memory leaves room for whole
// 16-byte vectors and keeps the composites 8-byte aligned.
TEST(TopkRoute, RowsKernelForced) {
  flyops::topk_force(20, 0);
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 16384, 1024, 64)), "flyops_topk_rows<bf16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 3, 4096, 256)), "flyops_topk_rows<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat16, 5, 1, 1)), "flyops_topk_rows<fp16>");
  TopkParams unsorted = params(DType::kFloat32, 64, 4096, 4096);
  unsorted.sorted = false;
  EXPECT_EQ(plan_name(unsorted), "flyops_topk_rows<fp32>");
  EXPECT_NE(plan_name(params(DType::kFloat32, 64, 4096, 257)), "flyops_topk_rows<fp32>");
  EXPECT_NE(plan_name(params(DType::kFloat32, 64, 4097, 8)), "flyops_topk_rows<fp32>");
  flyops::topk_force(-1, 0);
  const topk::RowsSmem s = topk::rows_smem(1001, 2, 7, true);
  EXPECT_EQ(s.stage % 8, 0);
  EXPECT_EQ(s.keys % 16, 0);
  EXPECT_GE(s.keys - s.stage, 7 * 8);
  EXPECT_GE(s.per_warp - s.keys, 1001 * 2);
  EXPECT_EQ(s.per_warp % 16, 0);
  EXPECT_EQ(topk::rows_smem(1001, 2, 7, false).keys, s.stage);
}

// Force codes that no kind answers to, the removed filter kernel's among them, are the router's.
TEST(TopkRoute, RemovedFilterForcesTakeTheRoutersPlan) {
  for (auto [dt, rows, n, k] : {std::tuple{DType::kFloat32, 64, 262144, 1024}, std::tuple{DType::kBFloat16, 8, 16384, 50}}) {
    const std::string routed = plan_name(params(dt, rows, n, k));
    for (int force : {13, 14, 18, 19, 21, 99, -7}) {
      flyops::topk_force(force, 2);
      EXPECT_EQ(plan_name(params(dt, rows, n, k)), routed) << force;
    }
    flyops::topk_force(-1, 0);
  }
}

// The radix passes in global memory (force 22): digits that tile the key from the top, a
// grid that covers the row, a workspace of a histogram and a state a row; a sorted call is
// sorted after them (the passes never order).
TEST(TopkPasses, DigitsPlanAndWorkspace) {
  for (int bits : {16, 32}) {
    int covered = 0;
    for (int p = 0; p < topk::passes_of(bits); ++p) {
      EXPECT_EQ(topk::pass_shift(bits, p) + topk::pass_width(bits, p), bits - covered) << bits << " " << p;
      EXPECT_GT(topk::pass_width(bits, p), 0);
      EXPECT_LE(topk::pass_width(bits, p), topk::kPassBits);
      covered += topk::pass_width(bits, p);
    }
    EXPECT_EQ(covered, bits);
  }
  EXPECT_EQ(topk::passes_of(32), 3);
  EXPECT_EQ(topk::passes_of(16), 2);
  flyops::topk_force(22, 0);
  for (auto [rows, n, k] : {std::tuple{1, int64_t{1} << 24, int64_t{1} << 20}, std::tuple{64, int64_t{262144}, int64_t{50}},
                            std::tuple{100000, int64_t{100}, int64_t{7}}, std::tuple{3, int64_t{1}, int64_t{1}}}) {
    for (bool sorted : {false, true}) {
      const TopkParams p = params(DType::kBFloat16, rows, n, k, sorted);
      const TopkPlan plan = topk_choose(p, kH200);
      ASSERT_EQ(plan.kind, TopkPlan::Kind::kPasses) << rows << "x" << n;
      EXPECT_EQ(plan.sort_after, sorted && k > 1);
      EXPECT_GE(plan.cluster, 1);
      EXPECT_LE(plan.cluster, (int64_t{topk::kPassCtasPerSm} * 132 + rows - 1) / rows);  // about 4 CTAs an SM
      EXPECT_LE((plan.cluster - 1) * int64_t{8} * topk::kPassThreads, n);  // 8 elements a thread, at least
      EXPECT_EQ(topk_workspace_bytes(p, plan),
                static_cast<std::size_t>((rows * (topk::kPassBins * 4 + 32 + 4 * int64_t{plan.cluster}) + 15) / 16 * 16 +
                                         rows * 2 * ((n + 7) / 8) * 8));  // two lists of an eighth of the row
      EXPECT_EQ(plan_name(p).rfind("flyops_topk_passes<bf16,c", 0), 0u) << plan_name(p);
    }
  }
  flyops::topk_force(-1, 0);
}

// The rows kernel by the router (tuned_table.h, prefer_rows): k >= 24 on rows of up to 512
// (k >= 16 from 64 rows), k >= 2 from 1024 rows of up to 4096 (fp32 rows past 2048 only at
// large k or without whole delegate groups), fewer rows of up to 1024-2048, k = 1 from 4096
// rows of up to 2048.
TEST(TopkRoute, RowsKernelByRule) {
  auto rows = [](DType t, int64_t r, int64_t n, int64_t k, bool sorted = true) {
    return plan_name(params(t, r, n, k, sorted)).rfind("flyops_topk_rows<", 0) == 0;
  };
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16}) {
    EXPECT_TRUE(rows(t, 64, 200, 64));
    EXPECT_TRUE(rows(t, 16384, 300, 32));
    EXPECT_FALSE(rows(t, 16384, 300, 8));   // the warp kernel
    EXPECT_FALSE(rows(t, 65536, 256, 8));   // the group kernel
    EXPECT_TRUE(rows(t, 1, 200, 64));
    EXPECT_TRUE(rows(t, 8, 512, 32));
    EXPECT_FALSE(rows(t, 32, 200, 16));     // the warp kernel under 64 rows at k < 24
    EXPECT_TRUE(rows(t, 1024, 1024, 8));
    EXPECT_TRUE(rows(t, 16384, 2048, 256));
    EXPECT_FALSE(rows(t, 16384, 2048, 257)); // sorted past the kernel's sort
    EXPECT_FALSE(rows(t, 16384, 4097, 8));
    EXPECT_TRUE(rows(t, 4096, 1024, 1));
    EXPECT_FALSE(rows(t, 1024, 1024, 1));   // the arg-max kernel
    EXPECT_FALSE(rows(t, 64, 4096, 64));
  }
  EXPECT_FALSE(rows(DType::kFloat32, 64, 512, 64));  // the cluster kernel, fp32
  EXPECT_TRUE(rows(DType::kBFloat16, 64, 512, 64));
  EXPECT_FALSE(rows(DType::kFloat32, 256, 1024, 64));
  EXPECT_TRUE(rows(DType::kBFloat16, 256, 1024, 64));
  EXPECT_FALSE(rows(DType::kFloat32, 4096, 4096, 64));  // the delegates
  EXPECT_TRUE(rows(DType::kFloat32, 4096, 4096, 128));
  EXPECT_TRUE(rows(DType::kBFloat16, 4096, 4096, 8));
  EXPECT_TRUE(rows(DType::kFloat32, 512, 640, 16));
  EXPECT_FALSE(rows(DType::kFloat32, 512, 1500, 16));
  EXPECT_TRUE(rows(DType::kBFloat16, 512, 1500, 16));
  EXPECT_TRUE(rows(DType::kFloat32, 8192, 3000, 2));   // no whole groups for the delegates
  EXPECT_FALSE(rows(DType::kFloat32, 4096, 3000, 2));
  EXPECT_FALSE(rows(DType::kFloat32, 8192, 4096, 2));
  EXPECT_TRUE(rows(DType::kBFloat16, 4096, 2048, 1000, false));  // unsorted k past the sort
  EXPECT_TRUE(rows(DType::kFloat32, 1024, 2048, 2048, false));
  EXPECT_FALSE(rows(DType::kFloat32, 1024, 4096, 1000, false));
  EXPECT_TRUE(rows(DType::kFloat32, 4096, 4096, 1000, false));
  EXPECT_TRUE(rows(DType::kFloat16, 256, 1024, 300, false));
  EXPECT_FALSE(rows(DType::kFloat32, 256, 1024, 300, false));
  EXPECT_FALSE(rows(DType::kBFloat16, 256, 2048, 300, false));
  EXPECT_FALSE(rows(DType::kBFloat16, 128, 512, 300, false));
  EXPECT_FALSE(rows(DType::kFloat32, 4096, 2048, 1));
  EXPECT_TRUE(rows(DType::kBFloat16, 4096, 2048, 1));
}

// Two threads of 32 for rows of 33-64 (TopK v64): 16-bit rows with 16-byte loads only,
// forced or, at k >= 5 from 65536 rows, by the rule.
TEST(TopkRoute, GroupLongRuns) {
  flyops::topk_force(5, 2);
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 37, 64, 3)), "flyops_topk_group<bf16,t2>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 37, 64, 3)), "flyops_topk_group<fp32>");
  TopkParams odd = params(DType::kFloat16, 37, 64, 3);
  odd.x = static_cast<const char*>(odd.x) + 2;  // rows not 16-byte aligned
  EXPECT_EQ(plan_name(odd), "flyops_topk_group<fp16>");
  flyops::topk_force(-1, 0);
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 65536, 64, 8)), "flyops_topk_group<bf16,t2>");
  EXPECT_EQ(plan_name(params(DType::kFloat16, 65536, 48, 6)), "flyops_topk_group<fp16,t2>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 65536, 64, 2)), "flyops_topk_group<bf16>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 16384, 64, 8)), "flyops_topk_group<bf16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 64, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(topk::group_shape(64, 65536, 2).e, 32);
  EXPECT_EQ(topk::group_shape(128, 65536, 2).g, 8);  // rows of 65-128 keep their shape
}

TEST(TopkRoute, KernelPerShapeClass) {
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4096, 64, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 8, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 16384, 64, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 16384, 128, 6)), "flyops_topk_group<fp32>");  // threshold form
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 128, 8)), "flyops_topk_group<fp32>");  // few rows: 16 a row
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 128, 2)), "flyops_topk_warp<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1024, 256, 2)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1024, 256, 8)), "flyops_topk_group<fp32>");  // sixteen a row (v56)
  EXPECT_EQ(plan_name(params(DType::kFloat32, 2048, 256, 8)), "flyops_topk_warp<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 8, 1)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 128, 4)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 256, 4)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 65536, 8, 6)), "flyops_topk_group<bf16>");
  EXPECT_EQ(plan_name(params(DType::kFloat16, 1, 33, 8)), "flyops_topk_group<fp16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 16384, 128, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 65536, 256, 6)), "flyops_topk_group<bf16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 256, 2)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 256, 6)), "flyops_topk_group<fp32>");  // threshold form
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1024, 256, 6)), "flyops_topk_group<fp32>");
  // Threads a row for rows of 129-256 where they measured faster than the rule (TopK v56).
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 256, 8)), "flyops_topk_group<fp32,t32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 512, 200, 2)), "flyops_topk_group<fp32,t32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4096, 256, 8)), "flyops_topk_group<fp32,t16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 16384, 129, 6)), "flyops_topk_group<fp32,t16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 65536, 256, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4096, 128, 8)), "flyops_topk_group<fp32>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 16384, 256, 8)), "flyops_topk_group<bf16,t16>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 8192, 256, 8)), "flyops_topk_group<bf16>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 16384, 256, 2)), "flyops_topk_group<bf16>");
  // The group kernel's threshold form: fp32 from 4096 rows at k >= 3, 16-bit rows only long and many.
  EXPECT_TRUE(topk::prefer_group_threshold(params(DType::kFloat32, 4096, 256, 6)));
  EXPECT_FALSE(topk::prefer_group_threshold(params(DType::kFloat32, 4096, 256, 2)));
  EXPECT_TRUE(topk::prefer_group_threshold(params(DType::kFloat32, 16384, 64, 2)));
  EXPECT_FALSE(topk::prefer_group_threshold(params(DType::kFloat32, 65536, 64, 1)));
  EXPECT_TRUE(topk::prefer_group_threshold(params(DType::kBFloat16, 16384, 256, 8)));
  EXPECT_FALSE(topk::prefer_group_threshold(params(DType::kBFloat16, 16384, 128, 8)));
  EXPECT_TRUE(topk::prefer_group_threshold(params(DType::kBFloat16, 65536, 128, 8)));
  EXPECT_FALSE(topk::prefer_group_threshold(params(DType::kBFloat16, 65536, 128, 2)));  // networks at k <= 4
  EXPECT_FALSE(topk::prefer_group_threshold(params(DType::kFloat16, 65536, 64, 8)));
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 256, 1)), "flyops_topk_warp<fp32>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 4096, 257, 8)), "flyops_topk_warp<bf16>");  // row past the group
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4096, 64, 9)), "flyops_topk_warp<fp32>");  // k past the lists
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4096, 513, 8)), "flyops_topk_rows<fp32>");  // row past both
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 513, 8)), "flyops_topk_cluster<fp32,c1,gather>");  // too few for it
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 128256, 1)), "flyops_topk_argmax<fp32,c16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 32000, 1)), "flyops_topk_argmax<fp32,c8>");  // 4000 a CTA
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 262144, 1)), "flyops_topk_argmax<fp32,c1>");
  // Rows of 8 MiB or more on few CTAs: in segments, then a merge.
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 24, 1)), "flyops_topk_argmax<fp32,c1,seg256>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 4, 1 << 22, 1)), "flyops_topk_argmax<bf16,c1,seg64>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 21, 1)), "flyops_topk_argmax<fp32,c2,seg64>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 2, 1 << 21, 1)).find(",seg"), std::string::npos);  // 4 MiB rows
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 20, 1)), "flyops_topk_argmax<fp32,c16>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 3000017, 1)), "flyops_topk_argmax<fp32,c16>");  // no equal segments
  // Under 64 rows at k <= 100 the finish kernel's register forms, unscreened (TopK v66); few
  // rows of >= 120k at k >= 256 the screened list (TopK v117), shorter ones the cluster kernel.
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 1, 128256, 50)), "flyops_topk_delegates<bf16,g64,finish8>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 1, 128256, 256)), "flyops_topk_delegates<bf16,g16,finish16,screen,maxima>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4, 262144, 1024)), "flyops_topk_delegates<fp32,g16,finish32,screen,maxima>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 1, 100000, 1024)), "flyops_topk_cluster<bf16,c16,gather>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4, 32000, 101)), "flyops_topk_cluster<fp32,c8,gather>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 4, 32000, 100)), "flyops_topk_delegates<fp32,g16,finish4>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 32000, 50)), "flyops_topk_delegates<fp32,g32,finish4>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish8>");
  // Groups reach 128 elements: 32 vectors of fp32, still 16 of bf16 (TopK v54).
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 262144, 20)), "flyops_topk_delegates<fp32,g128,finish8>");
  EXPECT_EQ(topk::delegate_group(262144, 20, 4), 128);
  EXPECT_EQ(topk::delegate_group(262144, 20, 2), 128);
  EXPECT_EQ(topk::delegate_group(int64_t{1} << 24, 100, 2), 128);
  EXPECT_EQ(topk::delegate_group(262144, 20, 2, 32), 0);  // 256 bf16 elements: past the cap
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 262144, 1024)), "flyops_topk_delegates<fp32,g16,finish32,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 64, 151936, 1024)), "flyops_topk_delegates<bf16,g16,finish32,screen>");
  // rows of 16k-64k at k >= 512: the row-listed finish (TopK v118)
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 256, 32000, 1024)), "flyops_topk_delegates<bf16,g8,finish32,screen,row>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 32000, 1024)), "flyops_topk_cluster<fp32,c8,gather>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 64, 32000, 256)), "flyops_topk_delegates<bf16,g8,finish8>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 128256, 1024)), "flyops_topk_delegates<fp32,g8,finish32,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 64, 262144, 1024)), "flyops_topk_delegates<bf16,g16,finish32,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 32000, 20)), "flyops_topk_delegates<fp32,g32,finish4>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 24, 100)), "flyops_topk_delegates<fp32,g128,c16,c4,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 1, 1 << 24, 100)), "flyops_topk_delegates<bf16,g128,c16,c4,screen>");
  // the longer wide sample where the wide one cannot screen: fp32 only (TopK v116)
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 24, 1024)),
            "flyops_topk_delegates<fp32,g128,c16,c16,screen,long>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 1, 1 << 24, 1024)), "flyops_topk_delegates<bf16,g128,c16,c16,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish8>");  // one row
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 32000, 50)), "flyops_topk_delegates<fp32,g32,finish4>");
  // 16-bit rows at k = 20-64 on 64-256 rows: screened (prefer_screen_low_k, sixty-first session).
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 64, 128256, 50)), "flyops_topk_delegates<bf16,g64,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat16, 256, 32000, 20)), "flyops_topk_delegates<fp16,g32,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 64, 128256, 16)), "flyops_topk_delegates<bf16,g64,finish8>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 512, 128256, 50)).find(",screen"), std::string::npos);
  EXPECT_EQ(plan_name(params(DType::kFloat32, 32, 32000, 50)), "flyops_topk_delegates<fp32,g32,finish4>");  // few rows
  // Screened through the shared-memory finish (TopK v60): k >= 256, fp32 k >= 100, and
  // 6-15 MiB calls of 8 or more long rows (the cluster kernel's before) at k > 100; k <= 50
  // unscreened (but 16-bit rows on 64-256 rows, above), and under 64 rows at k <= 100 too.
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 128256, 256)), "flyops_topk_delegates<fp32,g16,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 32, 128256, 50)), "flyops_topk_delegates<bf16,g64,finish8>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 32, 128256, 256)), "flyops_topk_delegates<bf16,g16,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 262144, 100)), "flyops_topk_delegates<fp32,g64,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 8, 128256, 50)), "flyops_topk_delegates<bf16,g64,finish8>");  // 2 MB
  // Since the forty-second session (prefer_screen_mid_k): k = 65-99 (16-bit: to 255) on calls
  // of >= 15 MiB, and fp32 rows of >= 250k at k = 50-64 on 32-64 rows, screened too.
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 32, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish16,screen>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 16, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish8>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 128, 262144, 50)), "flyops_topk_delegates<fp32,g64,finish8>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 64, 200000, 50)).find(",screen"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kBFloat16, 64, 262144, 50)).find(",screen>"), std::string::npos);  // (16-bit k 20-64)
  EXPECT_NE(plan_name(params(DType::kFloat32, 16, 262144, 80)).find(",screen>"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kFloat32, 64, 128256, 80)).find(",screen>"), std::string::npos);
  EXPECT_EQ(plan_name(params(DType::kFloat32, 256, 128256, 80)).find(",screen"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kBFloat16, 64, 262144, 200)).find(",screen>"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kBFloat16, 256, 151936, 72)).find(",screen>"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kFloat32, 64, 151936, 72)).find(",screen>"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kFloat16, 32, 262144, 100)).find(",screen>"), std::string::npos);
  EXPECT_NE(plan_name(params(DType::kBFloat16, 64, 262144, 64)).find(",screen>"), std::string::npos);
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 8, 128256, 80)).find(",screen"), std::string::npos);  // 2 MB
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 8, 128256, 256)), "flyops_topk_cluster<bf16,c16,gather>");
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 16000, 50)), "flyops_topk_cluster<fp32,c4,gather>");  // short row
  // Candidates over half the row: not worth it.
  EXPECT_EQ(plan_name(params(DType::kBFloat16, 256, 128256, 8192)), "flyops_topk_two_stage<bf16,seg32768x1,c1>");
  TopkParams odd = params(DType::kFloat32, 256, 262144 - 8, 50);  // only groups far below sqrt(n / k)
  EXPECT_EQ(plan_name(odd), "flyops_topk_two_stage<fp32,seg16384x1,c1>");
}

// Many 16-bit rows of 512-4096 where the rows kernel does not take them, and two stages of
// long 16-bit rows at k >= 4096: stock where it measured faster (tuned_table.h,
// measured_slower), with the reason; forcing bypasses it.
TEST(TopkRoute, StockWhereMeasuredFaster) {
  auto to_stock = [](DType t, int64_t rows, int64_t n, int64_t k) {
    const TopkPlan plan = topk_choose(params(t, rows, n, k), kH200);
    if (plan.flyops()) return false;
    EXPECT_NE(std::string(plan.reason).find("stock measured faster"), std::string::npos) << plan.reason;
    return true;
  };
  for (DType t : {DType::kBFloat16, DType::kFloat16}) {
    EXPECT_TRUE(to_stock(t, 1024, 512, 512));    // sorted k past the rows kernel
    EXPECT_FALSE(to_stock(t, 512, 512, 512));    // 1.07-1.09x
    EXPECT_TRUE(to_stock(t, 16384, 1024, 512));
    EXPECT_TRUE(to_stock(t, 2048, 1024, 1));     // k = 1 under the rows kernel's 4096 rows
    EXPECT_TRUE(to_stock(t, 16384, 1536, 300));
    EXPECT_TRUE(to_stock(t, 16384, 4096, 300));
    EXPECT_TRUE(to_stock(t, 1, 4194304, 8192));
    EXPECT_TRUE(to_stock(t, 4, 3000017, 4096));
    EXPECT_FALSE(to_stock(t, 16384, 512, 8));    // the warp kernel: 8-9x
    EXPECT_FALSE(to_stock(t, 1024, 1024, 8));    // the rows kernel
    EXPECT_FALSE(to_stock(t, 16384, 512, 64));
    EXPECT_FALSE(to_stock(t, 4096, 2048, 64));
    EXPECT_FALSE(to_stock(t, 16384, 4096, 256));
    EXPECT_FALSE(to_stock(t, 16384, 8192, 64));  // 2.3x
    EXPECT_FALSE(to_stock(t, 1, 4194304, 4096)); // one row: 1.25x
    EXPECT_FALSE(to_stock(t, 65536, 256, 8));    // routing rows
  }
  EXPECT_FALSE(to_stock(DType::kFloat32, 4096, 512, 128));  // the rows kernel
  EXPECT_FALSE(to_stock(DType::kFloat32, 16384, 768, 256));
  EXPECT_FALSE(to_stock(DType::kFloat32, 4096, 1024, 64));
  EXPECT_FALSE(to_stock(DType::kFloat32, 16384, 512, 256));
  EXPECT_FALSE(to_stock(DType::kFloat32, 1, 4194304, 8192));
  flyops::topk_force(2, 1);  // a forced plan is the plan
  EXPECT_TRUE(topk_choose(params(DType::kBFloat16, 16384, 1024, 512), kH200).flyops());
  flyops::topk_force(-1, 0);
}

// The radix passes where no selection in shared memory holds k (sorted through the
// unsorted re-choice), and two stages kept where they hold the unsorted k.
TEST(TopkRoute, PassesWhereNoSelectionHoldsK) {
  // No selection in shared memory holds 2^20 of a row of 2^24, or 70000 of each of 16 rows
  // of 2^22: the radix passes in global memory, sorted after them where asked.
  for (auto [rows, n, k] : {std::tuple{1, int64_t{1} << 24, int64_t{1} << 20}, std::tuple{16, int64_t{1} << 22, int64_t{70000}}})
    for (DType dt : {DType::kFloat32, DType::kBFloat16})
      for (bool sorted : {false, true}) {
        const TopkPlan plan = topk_choose(params(dt, rows, n, k, sorted), kH200);
        EXPECT_EQ(plan.kind, TopkPlan::Kind::kPasses) << rows << "x" << n << " k=" << k;
        EXPECT_EQ(plan.sort_after, sorted);
      }
  // Two stages hold 16384 of a row of 2^20 unsorted, not sorted: a sorted call takes them,
  // sorted after, and not the passes.
  EXPECT_EQ(plan_name(params(DType::kFloat32, 1, 1 << 20, 16384)),
            plan_name(params(DType::kFloat32, 1, 1 << 20, 16384, false)) + "+sort");
  EXPECT_EQ(topk_choose(params(DType::kFloat32, 1, 1 << 20, 16384), kH200).kind, TopkPlan::Kind::kTwoStage);
}

TEST(TopkRoute, RefusalsSayWhy) {
  auto reason = [](const TopkParams& p, const DeviceInfo& dev) {
    const TopkPlan plan = topk_choose(p, dev);
    EXPECT_FALSE(plan.flyops());
    return std::string(plan.reason);
  };
  EXPECT_NE(reason(params(DType::kFloat32, 4, 100, 5), fake_device_info(8, 0, 108)).find("9.0"), std::string::npos);
  EXPECT_NE(reason(params(DType::kFloat64, 4, 100, 5), kH200).find("dtype"), std::string::npos);
  EXPECT_NE(reason(params(DType::kFloat32, 4, 100, 101), kH200).find("k larger"), std::string::npos);
  EXPECT_NE(reason(params(DType::kFloat32, 0, 100, 5), kH200).find("empty"), std::string::npos);
  EXPECT_NE(reason(params(DType::kFloat32, 4, 100, 0), kH200).find("k == 0"), std::string::npos);
  // A sorted k past the kernels' sorts: the unsorted selection, ordered by the caller after
  // it (sort_after); the same k unsorted is the same plan without the sort.
  const TopkPlan unsorted = topk_choose(params(DType::kFloat32, 1, 100000, 60000, false), kH200);
  const TopkPlan sorted = topk_choose(params(DType::kFloat32, 1, 100000, 60000), kH200);
  EXPECT_TRUE(unsorted.flyops() && !unsorted.sort_after);
  EXPECT_TRUE(sorted.flyops() && sorted.sort_after);
  EXPECT_EQ(sorted.kind, unsorted.kind);
  EXPECT_EQ(sorted.cluster, unsorted.cluster);
  char a[128], b[128];
  topk_plan_name(unsorted, DType::kFloat32, a, sizeof a);
  topk_plan_name(sorted, DType::kFloat32, b, sizeof b);
  EXPECT_EQ(std::string(a) + "+sort", std::string(b));
  EXPECT_EQ(topk_workspace_bytes(params(DType::kFloat32, 1, 100000, 60000), sorted),
            topk_workspace_bytes(params(DType::kFloat32, 1, 100000, 60000, false), unsorted));
  // Kernels that sort k themselves keep doing so.
  EXPECT_FALSE(topk_choose(params(DType::kFloat32, 64, 32000, 1024), kH200).sort_after);
  TopkParams overlap = params(DType::kFloat32, 4, 100, 5);
  overlap.x_row_stride = 50;
  EXPECT_NE(reason(overlap, kH200).find("overlap"), std::string::npos);
}

// Every part of the delegates' workspace starts 16-byte aligned (the list holds 8-byte
// pairs, the selections' workspaces 16-byte vectors), whatever rows * k, and the parts do
// not overlap.
TEST(TopkDelegates, WorkspaceLayoutAligned) {
  for (DType t : {DType::kFloat32, DType::kBFloat16})
    for (int64_t rows : {1, 3, 64})
      for (int64_t k : {1, 7, 50, 101, 1024})
        for (int group : {8, 16, 64})
          for (int64_t ws : {0, 8, 40})
            for (int64_t screen_cap : {0, 8192}) {
              TopkParams p = params(t, rows, 262144, k);
              const topk::DelegateLayout l = topk::delegate_layout(p, group, ws, screen_cap);
              for (int64_t off : {l.maxima, l.sel_values, l.sel_indices, l.sel_workspace, l.thresh, l.count, l.done,
                                  l.list})
                EXPECT_EQ(off % 16, 0) << rows << " x k " << k << " group " << group << " ws " << ws;
              EXPECT_GE(l.sel_values, rows * (262144 / group) * 4);
              EXPECT_GE(l.sel_indices - l.sel_values, rows * k * 4);
              EXPECT_GE(l.sel_workspace - l.sel_indices, rows * k * 8);
              EXPECT_GE(l.thresh - l.sel_workspace, ws);
              if (screen_cap == 0) {
                EXPECT_EQ(l.total, l.thresh);
              } else {
                EXPECT_GE(l.count - l.thresh, rows * 4);
                EXPECT_GE(l.done - l.count, rows * 4);
                EXPECT_GE(l.list - l.done, rows * 4);
                EXPECT_EQ(l.total - l.list, rows * screen_cap * 8);
              }
            }
}

// A listed key's bin: its distance from the threshold, the last bin for the keys past the
// span and for NaN keys (both directions), so that a finish that finds the last bin empty
// holds every key exactly.
template <typename Keys>
void check_list_hist_bins() {
  const uint32_t last = topk::kListBuckets - 1;
  for (bool largest : {true, false})
    for (uint32_t t : {0x0000u, 0x3f80u, 0x8000u, 0xc000u, 0xf000u, 0xfff0u}) {
      for (uint32_t key = t; key <= Keys::kMask; ++key) {
        const uint32_t bin = topk::list_hist_bin<Keys>(key, t, largest);
        if (topk::is_nan_key<Keys>(key, largest)) {
          EXPECT_EQ(bin, last) << key;
        } else if (key - t < last) {
          EXPECT_EQ(bin, key - t) << key;
        } else {
          EXPECT_EQ(bin, last) << key;
        }
      }
    }
}
TEST(TopkDelegates, ListHistBinsBf16) { check_list_hist_bins<topk::Bf16Keys>(); }
TEST(TopkDelegates, ListHistBinsFp16) { check_list_hist_bins<topk::Fp16Keys>(); }

// The finish kernel takes a row when its maxima and its k groups' elements both fit the
// CTA's keys (whole 16-byte vectors per thread): in registers for k <= kFinishMaxK and up to
// kFinishMaxE keys per thread, else in shared memory up to kFinishSmemMaxE and k <= 1024.
TEST(TopkDelegates, FinishFits) {
  const int cap = topk::kFinishThreads * topk::kFinishMaxE;
  const int smem_cap = topk::kFinishThreads * topk::kFinishSmemMaxE;
  EXPECT_EQ(topk::finish_elems(32000, 20, 32, 4), 4);     // 1000 maxima, 640 candidates
  EXPECT_EQ(topk::finish_elems(32000, 20, 32, 2), 8);     // a bf16 thread holds a whole vector
  EXPECT_EQ(topk::finish_elems(262144, 50, 64, 4), 8);    // 4096 maxima
  EXPECT_EQ(topk::finish_elems(int64_t{cap} * 64, 50, 64, 4), topk::kFinishMaxE);
  EXPECT_EQ(topk::finish_elems(int64_t{cap} * 64 + 64, 50, 64, 4), 16);  // one maximum past the registers
  EXPECT_EQ(topk::finish_elems(int64_t{cap} * 64, cap / 64, 64, 4), topk::kFinishMaxE);
  EXPECT_EQ(topk::finish_elems(int64_t{cap} * 64, cap / 64 + 1, 64, 4), 16);  // candidates past them
  EXPECT_EQ(topk::finish_elems(32000, topk::kFinishMaxK + 1, 8, 4), 16);  // past the rank sort: smem
  EXPECT_EQ(topk::finish_elems(262144, 1024, 16, 4), topk::kFinishSmemMaxE);  // 16384 of each
  EXPECT_EQ(topk::finish_elems(int64_t{smem_cap} * 16 + 16, 1024, 16, 4), 0);  // one maximum too many
  EXPECT_EQ(topk::finish_elems(int64_t{smem_cap} * 64, smem_cap / 64 + 1, 64, 4), 0);  // candidates
  EXPECT_EQ(topk::finish_elems(262144, topk::kFinishSmemMaxK + 1, 16, 4), 0);  // past the bucket order
  EXPECT_EQ(topk::finish_elems(32000, 20, 4, 2), 0);      // groups of half a vector
  // Shared memory: the keys (64 KB at 32 per thread) and the sort of 1024 leave two CTAs per
  // SM (228 KB; a few KB static and reserved per CTA), and the bucket scatter (12 bytes per
  // composite, then 2048 bucket words) fits over the keys.
  const topk::FinishSmem big = topk::finish_smem(topk::kFinishSmemMaxE, topk::kFinishSmemMaxK, 4);
  EXPECT_LE(2 * (big.total + 4096), 228 * 1024);
  EXPECT_LE(12 * topk::kFinishSmemMaxK + 2048 * 4, big.sort_key);
  EXPECT_LE(12 * topk::kFinishSmemMaxK + 2048 * 4, topk::finish_smem(16, topk::kFinishSmemMaxK, 4).sort_key);
  EXPECT_EQ(topk::finish_smem(topk::kFinishMaxE, topk::kFinishMaxK, 2).sort_key, 0);  // no keys in registers' form
  // The register forms' ranking by counting puts one composite a thread at the sort's offset,
  // clear of the chosen groups it reads while compacting; the shared-memory form has none.
  for (int e : {4, 8})
    for (int k : {1, 20, 50, topk::kFinishMaxK})
      EXPECT_GE(topk::finish_smem(e, k, 4).chosen, topk::finish_smem(e, k, 4).sort_key + topk::kFinishThreads * 8);
  EXPECT_EQ(topk::finish_smem(16, 1024, 4).chosen - topk::finish_smem(16, 1024, 4).sort_val, 1024 * 4);
  // The list's bucket pass (shared-memory form): its buckets past the chosen groups, then the
  // composites at or above the cut (fewer than k plus one bucket's most) to the end; the
  // register forms have neither.
  for (int k : {257, 300, 1000, topk::kFinishSmemMaxK}) {
    const topk::FinishSmem l = topk::finish_smem(topk::kFinishSmemMaxE, k, 0);
    EXPECT_GE(l.bins, l.chosen + k * 4);
    EXPECT_EQ(l.stage - l.bins, topk::kListBuckets * 4);
    EXPECT_EQ(l.total - l.stage, (k + topk::kListBucketMax) * 8);
  }
  // Each list key's place in its bucket (TopK v102) takes a byte a key in the sort's room,
  // before the buckets, at every k the shared-memory form lists; that room never grows a form
  // past the largest one, which the launch's shared-memory attribute is set from.
  for (int e : {16, topk::kFinishSmemMaxE})
    for (int k : {1, 20, 50, 100, 257, 512, 1000, topk::kFinishSmemMaxK}) {
      const topk::FinishSmem l = topk::finish_smem(e, k, 4);
      EXPECT_GE(l.bins - l.sort_key, e * topk::kFinishThreads) << e << " " << k;
      EXPECT_LE(l.total, topk::finish_smem(topk::kFinishSmemMaxE, topk::kFinishSmemMaxK, 0).total) << e << " " << k;
    }
  EXPECT_EQ(topk::finish_smem(8, 20, 6).bins, topk::finish_smem(8, 20, 6).total);
  EXPECT_EQ(topk::finish_smem(8, 20, 6).stage, topk::finish_smem(8, 20, 6).total);
  // The register forms' maxima selection may take as many groups as the runs hold (k or
  // more), the chosen list sized for them; the shared-memory form takes exactly k.
  EXPECT_EQ(topk::finish_groups(8, 20, 6), cap / 64);                  // 64 groups of 64 fp32
  EXPECT_EQ(topk::finish_groups(8, cap / 64, 6), cap / 64);
  EXPECT_EQ(topk::finish_groups(4, 200, 2), 512);                      // runs of 4: 512 one-vector groups
  EXPECT_EQ(topk::finish_groups(topk::kFinishSmemMaxE, 1024, 4), 1024);
  EXPECT_EQ(topk::finish_smem(8, 20, 6).total - topk::finish_smem(8, 20, 6).chosen, cap / 64 * 4);
  for (int64_t n : {32000, 128256, 151936, 262144})
    for (int64_t k : {1, 20, 50, 256})
      for (int gl : {3, 4, 5, 6, 7}) {
        const int e = topk::finish_elems(n, k, int64_t{1} << gl, 4);
        if (e == 0 || e > topk::kFinishMaxE) continue;
        EXPECT_GE(topk::finish_groups(e, static_cast<int>(k), gl), k);
        EXPECT_LE(topk::finish_groups(e, static_cast<int>(k), gl) << gl, topk::kFinishThreads * e);
      }
}

// The 16-bit screen takes the screened stream's split only where its CTAs cover nearly every
// SM (TopK v94: 128 rows of 132 SMs won, 96 lost).
TEST(TopkDelegates, Screen16StreamSplitFromRows) {
  EXPECT_FALSE(topk::screen16_takes_stream_split(0, 132));
  EXPECT_FALSE(topk::screen16_takes_stream_split(64, 132));
  EXPECT_FALSE(topk::screen16_takes_stream_split(96, 132));
  EXPECT_TRUE(topk::screen16_takes_stream_split(128, 132));
  EXPECT_TRUE(topk::screen16_takes_stream_split(256, 132));
  EXPECT_TRUE(topk::screen16_takes_stream_split(int64_t{1} << 40, 132));
  EXPECT_FALSE(topk::screen16_takes_stream_split(99, 114));  // the H100 PCIe's 114 SMs: from 100
  EXPECT_TRUE(topk::screen16_takes_stream_split(100, 114));
}

// Screening: the sampled pieces stay inside the row and apart, and the rank keeps the
// expected candidate list (rank / sample fraction) at least k (the finish kernel's sample:
// with r sampled keys among the row's k best, Poisson(f k), at most once in 10^5 rows and r
// the least such rank; the wide sample: four spreads to spare) and (with the threshold's
// slack of 1.5) at most half the finish kernel's capacity; rows too short for apart pieces
// do without.
TEST(TopkDelegates, ScreenRank) {
  for (int threads : {topk::kScreenThreads, topk::kScreenThreads32, topk::kScreenWideThreads})
  for (int bytes : {2, 4}) {
    const int pieces = topk::screen_pieces(threads);
    const int64_t s = topk::screen_samples(bytes, threads), vec = 16 / bytes;
    EXPECT_EQ(s, pieces * topk::kScreenPieceVecs * vec);
    for (int64_t n : {s, int64_t{32000} * 4 / bytes, int64_t{128256}, int64_t{262144}, int64_t{1} << 24}) {
      if (n < s) continue;
      const int64_t nv = n / vec;
      EXPECT_EQ(topk::screen_piece(0, nv, pieces), 0);
      EXPECT_EQ(topk::screen_piece(pieces - 1, nv, pieces), nv - topk::kScreenPieceVecs);
      for (int p = 1; p < pieces; ++p)
        EXPECT_GE(topk::screen_piece(p, nv, pieces) - topk::screen_piece(p - 1, nv, pieces), topk::kScreenPieceVecs)
            << n << " " << p;
      for (int64_t k : {1, 2, 20, 50, 100, 256, 1024}) {
        const int64_t cap = topk::finish_capacity(k > 256 || threads == topk::kScreenWideThreads ? 32 : 8);
        const int r = topk::screen_rank(n, k, bytes, cap, threads);
        if (r == 0) continue;
        const double f = static_cast<double>(s) / static_cast<double>(n), expect = r / f;
        if (threads == topk::kScreenWideThreads) {
          EXPECT_GE(expect, k + 4 * std::sqrt(k / f) * 0.99) << n << " " << k;  // spread of the count: sqrt(r) / f
        } else {
          auto tail = [&](int rank) {  // P(Poisson(f k) >= rank), summed from the top
            double sum = 0.0;
            for (int i = rank; i < rank + 400; ++i)
              sum += std::exp(i * std::log(f * k) - f * k - std::lgamma(i + 1.0));
            return sum;
          };
          EXPECT_LE(tail(r), 1e-5) << n << " " << k;
          if (r > 1) EXPECT_GT(tail(r - 1), 1e-5) << n << " " << k;
        }
        EXPECT_LE(3 * expect, static_cast<double>(cap)) << n << " " << k;  // 1.5 r sampled keys, half of cap
        // and the vectors holding them (at most one element each, at worst) half of a
        // maxima block's queue
        EXPECT_LE(2 * 1.5 * expect / n * vec * topk::kDelegateThreads * topk::kDelegateUnroll,
                  static_cast<double>(topk::kScreenQueue) * 1.0001) << n << " " << k;
      }
    }
    EXPECT_EQ(topk::screen_rank(s - vec, 20, bytes, topk::finish_capacity(8), threads), 0);  // pieces would overlap
  }
  // The row of 2^24 at k = 100: only the wide sample leaves a list the finish kernel holds.
  auto rank = [](int64_t n, int64_t k, int bytes, int64_t cap) {  // the finish kernel's sample
    const topk::ScreenSample sample = topk::screen_sample(n, k, bytes, cap);
    EXPECT_EQ(sample.rank, topk::screen_rank(n, k, bytes, cap, sample.threads));
    return sample.rank;
  };
  // fp32's larger sample only where the 16-piece list would be long (TopK v109r)
  const int64_t cap32 = topk::finish_capacity(32);
  EXPECT_EQ(topk::screen_sample(262144, 1024, 4, cap32).threads, topk::kScreenThreads32);
  EXPECT_EQ(topk::screen_sample(151936, 1024, 4, cap32).threads, topk::kScreenThreads);
  EXPECT_EQ(topk::screen_sample(262144, 50, 4, cap32).threads, topk::kScreenThreads);
  EXPECT_EQ(topk::screen_sample(262144, 100, 4, cap32).threads, topk::kScreenThreads);
  EXPECT_EQ(topk::screen_sample(262144, 1024, 2, cap32).threads, topk::kScreenThreads);
  EXPECT_EQ(rank(int64_t{1} << 24, 100, 4, topk::finish_capacity(32)), 0);
  EXPECT_GT(topk::screen_rank(int64_t{1} << 24, 100, 4, topk::finish_capacity(32), topk::kScreenWideThreads), 0);
  EXPECT_GT(topk::screen_rank(int64_t{1} << 24, 100, 2, topk::finish_capacity(16), topk::kScreenWideThreads), 0);
  // fp32 2^24 at k = 1024: the wide sample's list would overflow the finish, the longer one's fits
  EXPECT_EQ(topk::screen_rank(int64_t{1} << 24, 1024, 4, topk::finish_capacity(32), topk::kScreenWideThreads), 0);
  EXPECT_GT(topk::screen_rank(int64_t{1} << 24, 1024, 4, topk::finish_capacity(32), topk::kScreenWideThreads,
                              topk::kScreenWideVecsLong),
            0);
  EXPECT_GT(rank(262144, 1024, 4, topk::finish_capacity(32)), 0);
  EXPECT_EQ(rank(262144, 1024, 4, 4096), 0);  // up to ~3550 expected: over half of 4096
  // k = 1024 of 32000 (fp32 or bf16): ~27-30% of the vectors would queue; of 151936 bf16 ~15%
  EXPECT_EQ(rank(32000, 1024, 4, topk::finish_capacity(32)), 0);
  EXPECT_EQ(rank(32000, 1024, 2, topk::finish_capacity(16)), 0);
  EXPECT_GT(rank(151936, 1024, 2, topk::finish_capacity(32)), 0);
  EXPECT_GT(rank(262144, 1024, 2, topk::finish_capacity(32)), 0);
}

// Every plan the router picks over a sweep fits shared memory and its workspace covers the
// two-stage layout.
TEST(TopkRoute, PlansFit) {
  for (DType t : {DType::kFloat32, DType::kBFloat16, DType::kFloat16})
    for (int64_t rows : {1, 3, 64, 256, 4096})
      for (int64_t n : {1, 31, 512, 513, 4097, 32000, 128256, 262144, 1000003, 1 << 24})
        for (int64_t k : {1, 2, 50, 1024, 4096})
          for (bool sorted : {true, false}) {
            if (k > n || rows * n > (int64_t{1} << 26)) continue;
            const TopkParams p = params(t, rows, n, k, sorted);
            const TopkPlan plan = topk_choose(p, kH200);
            if (plan.kind == TopkPlan::Kind::kCluster) {
              const topk::ClusterGeometry g = topk::cluster_geometry(n, plan.cluster, static_cast<int>(dtype_size(t)),
                                                                     k, sorted, plan.gather);
              EXPECT_TRUE(g.fits);
              if (plan.gather != 0) {  // one wave; the buffer and the bucket scatter hold every gathered element
                EXPECT_LE(rows * plan.cluster, kH200.sm_count);
                EXPECT_GE(g.sort_cap, plan.gather);
                EXPECT_GE(g.data_bytes, g.sort_cap * 12);
              }
            }
            if (plan.kind == TopkPlan::Kind::kTwoStage) {
              EXPECT_GT(topk_workspace_bytes(p, plan), size_t(0));
              EXPECT_TRUE(topk::cluster_geometry(plan.seg_len, plan.seg_cluster,
                                                 static_cast<int>(dtype_size(t)), k, false).fits);
            }
            if (plan.kind == TopkPlan::Kind::kDelegate) {
              EXPECT_EQ(n % plan.group, 0);
              EXPECT_LE(k * plan.group * 2, n);
              if (plan.finish != 0) {  // the maxima, and both selections in the CTA's keys
                const int64_t cap = int64_t{topk::kFinishThreads} * plan.finish;
                EXPECT_LE(plan.finish, topk::kFinishSmemMaxE);
                EXPECT_LE(k, plan.finish > topk::kFinishMaxE ? topk::kFinishSmemMaxK : topk::kFinishMaxK);
                EXPECT_LE(n / plan.group, cap);
                EXPECT_LE(k * plan.group, cap);
                const topk::FinishLayout l = topk::finish_layout(p, plan.group, cap, plan.screen != 0);
                EXPECT_EQ(topk_workspace_bytes(p, plan), size_t(l.total));
                EXPECT_GE(l.thresh, rows * (n / plan.group) * 4);
                if (plan.screen != 0) {  // pieces apart, and room for twice the expected list
                  const int bytes = static_cast<int>(dtype_size(t));
                  EXPECT_EQ(plan.screen_threads, topk::screen_sample(n, k, bytes, cap).threads);
                  const int64_t s = topk::screen_samples(bytes, plan.screen_threads);
                  EXPECT_GE(n, s);
                  EXPECT_LE(plan.screen, s);
                  EXPECT_LE(3 * plan.screen * n, cap * s);
                  EXPECT_EQ(l.total - l.cand, rows * cap * 8);
                  for (int64_t off : {l.thresh, l.count, l.cand}) EXPECT_EQ(off % 16, 0);
                } else {
                  EXPECT_EQ(l.total, rows * (n / plan.group) * 4);
                }
              } else {
                EXPECT_GT(topk_workspace_bytes(p, plan), size_t(rows * (n / plan.group) * 4));
                EXPECT_TRUE(topk::cluster_geometry(k * plan.group, plan.candidates.cluster,
                                                   static_cast<int>(dtype_size(t)), k, sorted).fits);
                if (plan.screen != 0) {  // the wide sample; a shared-memory list finish twice the expected list
                  const int bytes = static_cast<int>(dtype_size(t));
                  const int64_t s = topk::screen_samples(bytes, topk::kScreenWideThreads, plan.screen_vecs);
                  // the longer sample only for fp32 rows the wide one cannot screen
                  if (plan.screen_vecs == topk::kScreenWideVecsLong) {
                    EXPECT_EQ(bytes, 4);
                    for (int e = 2 * topk::kFinishMaxE; e <= topk::kFinishSmemMaxE; e *= 2)
                      EXPECT_EQ(topk::screen_rank(n, k, bytes, topk::finish_capacity(e), topk::kScreenWideThreads), 0);
                  } else {
                    EXPECT_EQ(plan.screen_vecs, topk::kScreenVecsPerThread);
                  }
                  const int64_t cap = topk::finish_capacity(plan.screen_finish);
                  EXPECT_GT(plan.screen_finish, topk::kFinishMaxE);
                  EXPECT_LE(plan.screen_finish, topk::kFinishSmemMaxE);
                  EXPECT_LE(k, topk::kFinishSmemMaxK);
                  EXPECT_GE(n, s);
                  EXPECT_LE(3 * plan.screen * n, cap * s);
                  const TopkParams m = topk::maxima_params(p, plan.group);
                  const topk::DelegateLayout l =
                      topk::delegate_layout(p, plan.group, topk::selection_workspace_bytes(m, plan.maxima), cap);
                  EXPECT_EQ(topk_workspace_bytes(p, plan), size_t(l.total));
                } else {
                  EXPECT_EQ(plan.screen_finish, 0);
                }
              }
            }
            if (plan.kind == TopkPlan::Kind::kGroup) {
              EXPECT_LE(n, topk::kGroupMaxN);
              EXPECT_LE(k, topk::kGroupMaxK);
            }
            if (plan.kind == TopkPlan::Kind::kWarp) {
              EXPECT_LE(n, topk::kWarpMaxN);
              EXPECT_LE(k, topk::kWarpMaxK);
            }
          }
}

// The group kernel's shape covers every row it takes, with whole groups in a warp and whole
// sorting chunks per thread.
TEST(TopkGroup, ShapeCoversTheRow) {
  for (int64_t rows : {int64_t{1}, topk::kGroupWideRows, topk::kGroupWideRows + 1}) {
    for (int64_t n = 1; n <= topk::kGroupMaxN; ++n) {
      const topk::GroupShape s = topk::group_shape(n, rows);
      EXPECT_GE(int64_t{s.g} * s.e, n);
      EXPECT_TRUE(s.g >= 1 && s.g <= 32 && (s.g & (s.g - 1)) == 0);
      EXPECT_EQ(s.e % topk::kGroupMaxK, 0);
      EXPECT_EQ(topk::kGroupThreads % s.g, 0);
    }
  }
  for (int64_t k = 1; k <= topk::kGroupMaxK; ++k) {
    const int l = topk::group_list(k);
    EXPECT_TRUE(l >= k && l < 2 * k + (k == 1) && (l & (l - 1)) == 0);
  }
}
