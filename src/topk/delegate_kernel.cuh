// Many long rows: select through group maxima ("delegates", after Dr. Top-k, SC'21), so
// that the radix select runs on a fraction of the row instead of all of it.
//
//   maxima    a pure stream: each group of 4-16 consecutive 16-byte vectors (traits.h)
//             becomes its best element's 32-bit ascending key;
//   select    the k best maxima of each row (the cluster kernel on AscKeys32): their
//             groups hold the row's answer;
//   select    the k best elements of those k groups (the cluster kernel, reading each
//             chosen group from the row by its own bulk copy: TopK v114, where a gather
//             kernel copied them into a candidate row before; positions mapped back
//             through the chosen groups).
//
// Why the k best groups suffice: their maxima are k distinct elements at or above the
// k-th best maximum t, so the row's k-th best key is >= t, and every answer element lies
// in a group whose maximum is >= it. Ties at t are any of those groups: each chosen group
// brings at least one element at or above t. NaN ties go to the lowest positions as in
// stock: maxima tie by group (groups are contiguous, so in position order) and candidates
// by their mapped positions.
#pragma once

#include <cstdint>
#include <type_traits>

#include "chain_mark.cuh"
#include "flyops/tile/launch.h"
#include "flyops/tile/warp.h"
#include "keys.h"
#include "trace.cuh"
#include "traits.h"
#include "vec_keys.cuh"

namespace flyops::topk {

struct DelegateArgs {
  const void* x;
  int64_t rows;
  int64_t n;           // elements per row, a multiple of the group
  int64_t row_stride;  // elements between rows, a multiple of the vector
  int64_t blocks_per_row;
  bool largest;
  uint32_t* maxima;    // [rows, n / group] ascending keys (kListOnly: of kNoScreen rows only)
  // Screening (screen_kernel.cuh), with the kernel's kScreen: each row's threshold, and its
  // candidate count and list of `cap` (order key, position) pairs, appended to here.
  const uint32_t* thresh;
  uint32_t* count;
  uint2* cand;
  int64_t cap;
  // 16-bit list-only streams: each row's screen word (this call's tag, the threshold), polled
  // instead of the screen grid's wait (TopK v134, v139; null: the grid wait).
  const uint64_t* ready = nullptr;
  uint32_t tag = 0;
};

}  // namespace flyops::topk

#if defined(__CUDACC__)

// Global namespace: profiler and ncu names start with flyops_.

namespace flyops::topk::detail {

// A block's screening in shared memory. Vectors whose best key reaches the threshold are
// queued as they stream by and their elements examined after the loads, every lane busy:
// examined where found, each took the warp ~40 instructions for its one lane, and the bf16
// stream, already issue-heavy, ran ~1.4x longer at 2% of vectors queued (H200). The
// candidates are staged too, so that the row's counter sees one claim per block (a claim
// per warp step queued ~10^3 deep per row: the stream ran 4x slower at k = 1024).
struct ScreenStage {
  uint4 queue[kScreenQueue];
  uint32_t queue_v[kScreenQueue];
  uint2 list[kScreenBlockCap];
  uint32_t queued;  // may pass kScreenQueue: then the row's finish takes the maxima
  uint32_t count;   // may pass kScreenBlockCap: those past it claimed their row slots directly
  uint32_t base;
  uint32_t polled_t;  // the row's threshold as thread 0 polled it (TopK v134)
};

// A 16-bit list-only block's threshold from its own row's screen word (TopK v134, v139):
// polled until it carries this call's tag, or after kScreenPolls polls from the screen grid's
// end. A word with the tag that the screen did not write (a graph replay's, or chance) is the
// screen's to catch: it then poisons the row, so that the finish takes the maxima.
FLYOPS_DEVICE uint32_t poll_screen_word(const DelegateArgs& a, int64_t row) {
  uint64_t w = 0;
  for (int polls = 0;; ++polls) {
    w = flyops::tile::ld_acquire_gpu(a.ready + row);
    if (static_cast<uint32_t>(w >> 32) == a.tag) break;
    if (polls == kScreenPolls) {
      flyops::tile::grid_dependency_wait();
      w = a.thresh[row];
      break;
    }
    __nanosleep(128);
  }
  return static_cast<uint32_t>(w);
}

// One lane's own claim on a shared counter. Written as PTX so that the compiler does not
// aggregate it across the warp (a vote and a five-step scan around every claim, for the one
// lane that usually has a hit).
FLYOPS_DEVICE uint32_t lane_claim(uint32_t* counter, uint32_t n) {
  uint32_t old;
  asm volatile("atom.shared.add.u32 %0, [%1], %2;"
               : "=r"(old)
               : "r"(static_cast<uint32_t>(__cvta_generic_to_shared(counter))), "r"(n)
               : "memory");
  return old;
}

// Stages the elements of vector v (q) whose order keys are at or above t: each thread
// claims its own slots and stores unrolled.
template <typename Keys>
FLYOPS_DEVICE void screen_append(const uint4& q, int64_t v, uint32_t t, bool largest, ScreenStage& st,
                                 uint32_t* count, uint2* cand, int64_t cap) {
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  uint32_t key[kVec];
  uint32_t n = 0;
#pragma unroll
  for (int i = 0; i < kVec; ++i) {
    key[i] = order_key<Keys>(vec_element<Raw>(q, i), largest);
    n += key[i] >= t ? 1u : 0u;
  }
  uint32_t slot = lane_claim(&st.count, n);
  const uint32_t pos = static_cast<uint32_t>(v * kVec);
  if (slot + n <= kScreenBlockCap) {
#pragma unroll
    for (int i = 0; i < kVec; ++i)
      if (key[i] >= t) st.list[slot++] = make_uint2(key[i], pos + i);
    return;
  }
  // A crowded block: past its staging, straight to the row (past cap the count alone tells).
#pragma unroll 1
  for (int i = 0; i < kVec; ++i) {
    const uint32_t k = order_key<Keys>(vec_element<Raw>(q, i), largest);
    if (k < t) continue;
    const uint2 e = make_uint2(k, pos + i);
    if (slot < kScreenBlockCap) {
      st.list[slot] = e;
    } else {
      const uint32_t g = atomicAdd(count, 1u);
      if (g < cap) cand[g] = e;
    }
    ++slot;
  }
}

// Queues vector v (q), whose best key reaches t, for screen_flush. A full queue (an eighth
// of the block's vectors reach the threshold: far too low for this row) pushes the row's
// count past `cap`, so that its finish takes the maxima.
FLYOPS_DEVICE void screen_queue(const uint4& q, int64_t v, ScreenStage& st, uint32_t* count, int64_t cap) {
  const uint32_t slot = lane_claim(&st.queued, 1u);
  if (slot < kScreenQueue) {
    st.queue[slot] = q;
    st.queue_v[slot] = static_cast<uint32_t>(v);
  } else if (slot == kScreenQueue) {
    atomicAdd(count, static_cast<uint32_t>(cap) + 1u);
  }
}

// After the block's loop (a barrier between): the queued vectors examined, then the staged
// candidates to the row's list with one counter claim.
template <typename Keys>
FLYOPS_DEVICE void screen_flush(uint32_t t, bool largest, ScreenStage& st, uint32_t* count, uint2* cand,
                                int64_t cap) {
  const uint32_t nq = min(st.queued, static_cast<uint32_t>(kScreenQueue));
  if (nq == 0) return;  // nothing queued, nothing staged (most blocks of a long row)
  for (uint32_t i = threadIdx.x; i < nq; i += blockDim.x)
    screen_append<Keys>(st.queue[i], st.queue_v[i], t, largest, st, count, cand, cap);
  __syncthreads();
  const uint32_t n = min(st.count, static_cast<uint32_t>(kScreenBlockCap));
  if (n == 0) return;
  if (threadIdx.x == 0) st.base = atomicAdd(count, n);
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < n; i += blockDim.x)
    if (st.base + i < cap) cand[st.base + i] = st.list[i];
}

}  // namespace flyops::topk::detail

namespace flyops::topk {
// Whether the list-only stream's blocks trigger the dependent launch late, before their flush
// (the staged candidates' claim and stores), not after their loads, and the shared-memory
// finish behind it launches dependent (launch.cuh): its CTAs must not share SMs with the
// stream's blocks (TopK v23), and launched as the last block nears its end its launch
// latency is hidden (TopK v75, triggered at the blocks' end: 3.5-9% on bf16; fp32 mixed, 256
// rows 2-3% slower, so fp32 keeps the early trigger and the plain launch). Before the flush
// rather than after it: 1.4-2.4% more on the H100's 16-bit list calls (TopK v130).
template <typename Keys>
inline constexpr bool kListTriggerLate = Keys::kBits == 16;
}  // namespace flyops::topk

// One 16-byte vector per thread per step; the kGV lanes of a group combine by shuffles.
// kScreen: launched dependent on the screening kernel, whose thresholds it waits for after
// its loads are in flight; bounded to 40 registers (6 blocks an SM instead of 5: TopK v48).
// kListOnly (screened only): a screened row's blocks write no maxima (TopK v59), the rows
// whose threshold is kNoScreen write them and list nothing; behind the radix chain's list
// finish, flyops_topk_chain_maxima (row_maxima.cuh) writes the maxima of the rows it leaves
// (TopK v87). A template parameter: the register finishes' screened streams (maxima always)
// keep their code.
template <typename Keys, int kGV, bool kScreen, bool kListOnly = false>
__global__ void __launch_bounds__(flyops::topk::kDelegateThreads, kScreen ? 6 : 1) flyops_topk_maxima(flyops::topk::DelegateArgs a) {
  using namespace flyops::topk;
  using Raw = typename Keys::Raw;
  constexpr int kVec = 16 / sizeof(Raw);
  constexpr int kPerBlock = kDelegateThreads * kDelegateUnroll;
  static_assert(kGV >= 1 && kGV <= 32 && (kGV & (kGV - 1)) == 0, "a group's lanes are a power of two in a warp");
  static_assert(kScreen || !kListOnly, "an unscreened stream's output is its maxima");
  GridTrace grid_trace;  // trace builds: the block's start, its wait's end and its end
  const int64_t row = blockIdx.x / a.blocks_per_row;
  const int64_t v0 = (blockIdx.x - row * a.blocks_per_row) * kPerBlock + threadIdx.x;
  const int64_t nv = a.n / kVec;
  const uint4* src = reinterpret_cast<const uint4*>(static_cast<const Raw*>(a.x) + row * a.row_stride);
  uint32_t* out = a.maxima + row * (nv / kGV);
  const bool largest = a.largest;

  uint4 buf[kDelegateUnroll];
#pragma unroll
  for (int u = 0; u < kDelegateUnroll; ++u) {
    const int64_t v = v0 + u * kDelegateThreads;
    buf[u] = v < nv ? __ldcs(src + v) : make_uint4(0, 0, 0, 0);
  }
  // The finish kernel may launch once every block is this far (it waits for the maxima);
  // behind a list-only stream, before the block's flush where kListTriggerLate says so.
  constexpr bool kTriggerLate = kListOnly && kListTriggerLate<Keys>;
  if constexpr (!kTriggerLate)
    flyops::tile::allow_dependent_launch();
  else
    __syncwarp();  // the same point for the compiler: without it, ptxas spilled at 40 registers
  uint32_t t = 0;
  __shared__ std::conditional_t<kScreen, detail::ScreenStage, char> stage;
  if constexpr (kScreen) {
    // A 16-bit list-only block waits for its own row's screen CTA, not the whole screen
    // grid, whose end the first wave's threshold reads queued behind the loads of the blocks
    // it let in (TopK v134).
    bool polled = false;
    if constexpr (kListOnly && Keys::kBits == 16) {
      if (a.ready != nullptr) {  // uniform
        polled = true;
        if (threadIdx.x == 0) {
          stage.queued = stage.count = 0;
          stage.polled_t = detail::poll_screen_word(a, row);
        }
        __syncthreads();  // after thread 0's acquire: the row's count is zeroed for every thread
        t = stage.polled_t;
      }
    }
    if (!polled) {
      if (threadIdx.x == 0) stage.queued = stage.count = 0;
      __syncthreads();
      flyops::tile::grid_dependency_wait();
      t = a.thresh[row];
    }
    grid_trace.mark();
  }
  const bool maxima = !kListOnly || t == kNoScreen;  // uniform in the block
  // A list-only block whose threshold allows it tests raw bits instead of keys (keys.h,
  // TopK v123); uniform in the block.
  bool screened_raw = false;
  if constexpr (kListOnly) {
    if (raw_screen_applies<Keys>(t)) {
      screened_raw = true;
      const RawBounds bounds = raw_screen_bounds<Keys>(t, largest);
#pragma unroll
      for (int u = 0; u < kDelegateUnroll; ++u) {
        const int64_t v = v0 + u * kDelegateThreads;
        if (v < nv && raw_screen_hit<Keys>(buf[u].x, buf[u].y, buf[u].z, buf[u].w, bounds))
          detail::screen_queue(buf[u], v, stage, a.count + row, a.cap);
      }
    }
  }
  if (!screened_raw) {
#pragma unroll
    for (int u = 0; u < kDelegateUnroll; ++u) {
      const int64_t v = v0 + u * kDelegateThreads;
      // The group's best element as a 32-bit ascending key (the greatest order key).
      const uint32_t m = max_order_key<Keys>(buf[u], largest);
      if constexpr (kScreen) {
        if (v < nv && m >= t)  // a few percent of the vectors
          detail::screen_queue(buf[u], v, stage, a.count + row, a.cap);
      }
      if (!maxima) continue;  // they cost the screened stream 5-10% (TopK v59)
      // stored_group_key and better_group_key (vec_keys.cuh) spelled out: through them ptxas
      // scheduled the 16-bit plain streams differently.
      uint32_t best = widen_key32<Keys>(largest ? m : ~m & Keys::kMask);
#pragma unroll
      for (int d = 1; d < kGV; d <<= 1) {
        const uint32_t other = __shfl_xor_sync(0xffffffffu, best, d);
        best = largest ? max(best, other) : min(best, other);
      }
      // nv is a multiple of the group, so a group's lanes are all in the row or all out.
      if (v < nv && (threadIdx.x & (kGV - 1)) == 0) out[v / kGV] = best;
    }
  }
  if constexpr (kScreen) {
    __syncthreads();
    // Before the flush: its claim's round trip and stores then overlap the finish's launch,
    // which still starts only as the last block gets here (TopK v130).
    if constexpr (kTriggerLate) flyops::tile::allow_dependent_launch();
    detail::screen_flush<Keys>(t, largest, stage, a.count + row, a.cand + row * a.cap, a.cap);
    // Polled or not, this grid completes only after the screen's, which the finish and the
    // next call's kernels take for granted (they wait on this one).
    if constexpr (kListOnly && Keys::kBits == 16) flyops::tile::grid_dependency_wait();
  }
  grid_trace.end(1);
}

#endif
