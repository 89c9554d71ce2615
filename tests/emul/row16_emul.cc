// Host emulation of list_row16 (TopK v141 and on), the device text pulled verbatim by
// extract.py: one CTA of 512 threads as ucontext fibers, warp collectives and barriers met
// when every participant has arrived, cp.async copies performed only at the wait that
// completes their group (so a read before its wait sees stale data). Checks the list and the
// count against a plain count of the elements whose order keys reach t. Run by tests/emul/run.
#include <ucontext.h>

#include <algorithm>
#include <cassert>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <random>
#include <type_traits>
#include <vector>

#include "topk/keys.h"
#include "topk/traits.h"

struct uint4 {
  uint32_t x, y, z, w;
};
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
using std::min;
using std::max;

constexpr int kT = 512;
// Where list_row16's block-scope `extern __shared__ ... smem16[]` resolves: its namespace.
namespace flyops::topk::detail {
alignas(16) unsigned char smem16[256 * 1024];
}
using flyops::topk::detail::smem16;

struct Fiber {
  ucontext_t ctx;
  std::vector<char> stack;
  bool done = false;
  // cp.async groups: each a list of (dst, src) copies
  std::deque<std::vector<std::pair<unsigned char*, uint4>>> groups;
  std::vector<std::pair<unsigned char*, uint4>> open;
};
static Fiber fibers[kT];
static ucontext_t sched_ctx;
static int cur = -1;
struct Dim {
  unsigned x;
};
static Dim tid_of[kT];
#define threadIdx (tid_of[cur])

static void yield_() { swapcontext(&fibers[cur].ctx, &sched_ctx); }

// Collectives: arrival counts per warp (or CTA) with generations.
struct Meet {
  int arrived = 0;
  unsigned gen = 0;
  uint32_t vals[kT];
  uint32_t result[kT];
};
static Meet warp_meet[kT / 32], cta_meet;
template <typename F>
static uint32_t meet(Meet& m, int n, int idx, uint32_t v, F combine) {
  const unsigned g = m.gen;
  m.vals[idx] = v;
  if (++m.arrived == n) {
    combine(m.vals, m.result);
    m.arrived = 0;
    ++m.gen;
  } else {
    while (m.gen == g) yield_();
  }
  return m.result[idx];
}
static int lane_() { return cur & 31; }
static Meet& wm() { return warp_meet[cur >> 5]; }

void __syncwarp() {
  meet(wm(), 32, lane_(), 0, [](uint32_t*, uint32_t* r) { std::fill(r, r + 32, 0); });
}
void __syncthreads() {
  meet(cta_meet, kT, cur, 0, [](uint32_t*, uint32_t* r) { std::fill(r, r + kT, 0); });
}
uint32_t __ballot_sync(uint32_t mask, bool p) {
  assert(mask == 0xffffffffu);
  return meet(wm(), 32, lane_(), p ? 1u : 0u, [](uint32_t* v, uint32_t* r) {
    uint32_t b = 0;
    for (int i = 0; i < 32; ++i) b |= v[i] << i;
    std::fill(r, r + 32, b);
  });
}
uint32_t __reduce_add_sync(uint32_t, uint32_t x) {
  return meet(wm(), 32, lane_(), x, [](uint32_t* v, uint32_t* r) {
    uint32_t s = 0;
    for (int i = 0; i < 32; ++i) s += v[i];
    std::fill(r, r + 32, s);
  });
}
static int shfl_src;
uint32_t __shfl_sync(uint32_t, uint32_t x, int srcl) {
  shfl_src = srcl;
  return meet(wm(), 32, lane_(), x, [](uint32_t* v, uint32_t* r) { std::fill(r, r + 32, v[shfl_src]); });
}
// Inclusive, as tile::warp_prefix_sum (a scan of shuffles on the device).
static uint32_t warp_prefix_sum_(uint32_t x) {
  return meet(wm(), 32, lane_(), x, [](uint32_t* v, uint32_t* r) {
    uint32_t s = 0;
    for (int i = 0; i < 32; ++i) r[i] = s += v[i];
  });
}
int __popc(uint32_t x) { return __builtin_popcount(x); }
int __ffs(uint32_t x) { return x ? __builtin_ctz(x) + 1 : 0; }
uint32_t atomicAdd(uint32_t* p, uint32_t v) {
  const uint32_t o = *p;
  *p = o + v;
  return o;
}
uint4 __ldcs(const uint4* p) { return *p; }

namespace flyops::tile {
inline uint32_t warp_prefix_sum(uint32_t x) { return warp_prefix_sum_(x); }
inline uint32_t lanemask_lt() { return (1u << (cur & 31)) - 1u; }
inline uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(static_cast<const unsigned char*>(p) - smem16);
}
inline void cp_async_16_bytes(unsigned char* dst, const void* src) {
  fibers[cur].open.push_back({dst, *static_cast<const uint4*>(src)});
}
inline void cp_async_16(void* dst, const void* src) { cp_async_16_bytes(static_cast<unsigned char*>(dst), src); }
// The shared-memory-by-address primitives and register loads below serve the v142 forms of
// list_row16 (experiments/topk-v142*-row16.diff); main's v141 goes through the ring above.
template <int kDstOffset = 0, int kSrcOffset = 0>
inline void cp_async_16_at(uint32_t dst, const void* src) {
  cp_async_16_bytes(smem16 + dst + kDstOffset, static_cast<const unsigned char*>(src) + kSrcOffset);
}
inline void cp_async_commit() {
  fibers[cur].groups.push_back(std::move(fibers[cur].open));
  fibers[cur].open.clear();
}
template <int kPending>
inline void cp_async_wait() {
  auto& g = fibers[cur].groups;
  while (static_cast<int>(g.size()) > kPending) {
    for (auto& c : g.front()) std::memcpy(c.first, &c.second, 16);
    g.pop_front();
  }
}
template <int kOffset = 0>
inline uint4 ld_shared_16(uint32_t addr) {
  uint4 v;
  std::memcpy(&v, smem16 + addr + kOffset, 16);
  assert((addr + kOffset) % 16 == 0);
  return v;
}
inline void st_shared_16_if(bool p, uint32_t addr, const uint4& v) {
  assert(addr % 16 == 0);
  if (p) std::memcpy(smem16 + addr, &v, 16);
}
inline void st_shared_4_if(bool p, uint32_t addr, uint32_t v) {
  if (p) std::memcpy(smem16 + addr, &v, 4);
}
inline uint4 load_now_once_if(const uint4* p, bool ok) { return ok ? *p : make_uint4(0, 0, 0, 0); }
inline uint4 load_now(const uint4* p) { return *p; }
}  // namespace flyops::tile

#define __noinline__
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#undef FLYOPS_DEVICE
#define FLYOPS_DEVICE inline
#include LR16_INC

using namespace flyops::topk;
#ifndef KEYS
#define KEYS Bf16Keys
#endif
using Keys = KEYS;

struct Args {
  const uint4* src;
  int ring_offset, nv, chunks, stages;
  uint32_t t;
  bool largest;
  uint32_t cap;
};
static Args g_args;

static void body() {
  const Args& a = g_args;
  // The kernel's ring.start(): chunks 0..stages-1, one group each.
  const int tid = cur;
  auto* slots = reinterpret_cast<uint4*>(smem16 + a.ring_offset);
  for (int s = 0; s < a.stages; ++s) {
    const int v = s * kRowRingVecs + tid;
    if (s < a.chunks && v < a.nv) flyops::tile::cp_async_16(slots + s * kRowRingVecs + tid, a.src + v);
    flyops::tile::cp_async_commit();
  }
  detail::list_row16<Keys, kT>(a.src, a.ring_offset, a.nv, a.chunks, a.stages, a.t, a.largest, a.cap);
  fibers[cur].done = true;
}
static void trampoline() {
  body();
  swapcontext(&fibers[cur].ctx, &sched_ctx);
}

static void run_cta() {
  for (int i = 0; i < kT; ++i) {
    Fiber& f = fibers[i];
    f.stack.assign(64 * 1024, 0);
    f.done = false;
    f.groups.clear();
    f.open.clear();
    tid_of[i].x = i;
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = &sched_ctx;
    makecontext(&f.ctx, trampoline, 0);
  }
  for (bool any = true; any;) {
    any = false;
    for (int i = 0; i < kT; ++i) {
      if (fibers[i].done) continue;
      any = true;
      cur = i;
      swapcontext(&sched_ctx, &fibers[i].ctx);
    }
  }
  cur = -1;
  for (int i = 0; i < kT; ++i)  // a copy never waited for would land on what the kernel does next
    for (auto& grp : fibers[i].groups) assert(grp.empty());
}

static int failures = 0;
static int g_elems = 32;  // the finish's keys a thread: the list's cap and the ring's place
static void check(const std::vector<uint16_t>& row, int stages, uint32_t t, bool largest, const char* what) {
  const int n = static_cast<int>(row.size());
  const int nv = n / 8, chunks = (nv + kRowRingVecs - 1) / kRowRingVecs;
  const int elems = g_elems;
  const uint32_t cap = static_cast<uint32_t>(elems * kT / 2);
  std::memset(smem16, 0xcd, sizeof smem16);  // poison
  g_args = {reinterpret_cast<const uint4*>(row.data()), row16_ring_offset(elems), nv, chunks, stages, t, largest, cap};
  assert(row16_end(elems, stages) <= static_cast<int>(sizeof smem16));
  run_cta();
  // Expected: every element (of the whole vectors) whose order key reaches t.
  std::map<uint32_t, int> want;  // packed entry -> count
  uint32_t count = 0;
  for (int i = 0; i < nv * 8; ++i) {
    const uint32_t key = order_key<Keys>(row[i], largest);
    if (key < t) continue;
    const uint32_t bin = is_nan_key<Keys>(key, largest) ? kListBuckets - 1u : std::min(key - t, kListBuckets - 1u);
    ++want[bin << kRowPackShift | static_cast<uint32_t>(i)];
    ++count;
  }
  uint32_t got_count;
  std::memcpy(&got_count, smem16 + kRow16CountOffset, 4);
  bool ok = got_count == count;
  if (ok && count <= cap) {
    std::map<uint32_t, int> got;
    for (uint32_t i = 0; i < count; ++i) {
      uint32_t e;
      std::memcpy(&e, smem16 + kRow16ListOffset + 4 * i, 4);
      ++got[e];
    }
    ok = got == want;
  }
  std::printf("%-40s n %7d stages %2d elems %2d largest %d t %04x count %6u (got %6u) %s\n", what, n, stages, elems,
              largest, t, count, got_count, ok ? "ok" : "FAIL");
  failures += !ok;
}

static uint16_t bf16_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return static_cast<uint16_t>(b >> 16);
}

// t as the order key of the r-th best element (a threshold the screen might give).
static uint32_t t_at_rank(const std::vector<uint16_t>& row, bool largest, size_t r) {
  std::vector<uint32_t> keys;
  for (size_t i = 0; i < row.size() / 8 * 8; ++i) keys.push_back(order_key<Keys>(row[i], largest));
  std::sort(keys.rbegin(), keys.rend());
  return keys[std::min(r, keys.size() - 1)];
}

int main() {
  std::mt19937 g(static_cast<unsigned>(std::getenv("SEED") ? std::atoi(std::getenv("SEED")) : 7));
  std::normal_distribution<float> nd;
  auto normal_row = [&](int n) {
    std::vector<uint16_t> r(n);
    for (auto& x : r) x = bf16_of(nd(g));
    return r;
  };
  for (int elems : {32, 16})
  for (int stages : {6, 12}) {
    g_elems = elems;
    for (int n : {128256, 32000, 262144, 8 * 512 * 7 + 8 * 3, 8 * 100, 8}) {
      auto row = normal_row(n);
      for (bool largest : {true, false}) {
        check(row, stages, t_at_rank(row, largest, 1900), largest, "normal, rank 1900");
        check(row, stages, t_at_rank(row, largest, 40), largest, "normal, rank 40");
      }
    }
    // Clustered hits (many a step: the queue's room path), all equal (over the cap), NaNs and
    // zeros of both signs, ascending.
    {
      std::vector<uint16_t> row = normal_row(128256);
      for (int i = 50000; i < 60000; ++i) row[i] = bf16_of(100.0f + i);
      check(row, stages, t_at_rank(row, true, 9000), true, "a dense run of hits");
      std::vector<uint16_t> eq(65536, bf16_of(1.5f));
      check(eq, stages, order_key<Keys>(bf16_of(1.5f), true), true, "all equal");
      std::vector<uint16_t> nz = normal_row(32000);
      for (int i = 0; i < 32000; i += 97) nz[i] = (i / 97) % 2 ? 0xffc1 : 0x7fc0;  // NaN of both signs
      for (int i = 5; i < 32000; i += 89) nz[i] = (i / 89) % 2 ? 0x8000 : 0x0000;
      for (bool largest : {true, false}) check(nz, stages, t_at_rank(nz, largest, 700), largest, "NaN and zeros");
      std::vector<uint16_t> bits(100000);  // every kind of value, NaNs and infinities of both signs
      for (auto& x : bits) x = static_cast<uint16_t>(g());
      for (bool largest : {true, false}) {
        check(bits, stages, t_at_rank(bits, largest, 1500), largest, "random bits");
        check(bits, stages, t_at_rank(bits, largest, 90000), largest, "random bits, low t");
      }
      std::vector<uint16_t> asc(40000);
      for (int i = 0; i < 40000; ++i) asc[i] = bf16_of(static_cast<float>(i) * 0.01f);
      check(asc, stages, t_at_rank(asc, true, 1024), true, "ascending");
    }
  }
  std::printf("%s: %d failures\n", failures ? "FAIL" : "PASS", failures);
  return failures != 0;
}
