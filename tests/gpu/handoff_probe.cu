// Timing probe of the hand-off from a streaming grid to a grid launched dependent on it
// (torch-free): what TopK's list stream and its finish kernel choose between (TopK v77,
// v80, v81 in docs/perf-notes.md). The primary is the stream's shape: 256-thread blocks,
// each loading 16 KB of a 64 MiB buffer (four 16-byte loads a thread, streaming), letting
// the dependent launch after its loads, then writing 32 eight-byte results of its own;
// `rows` rows of equal blocks. The dependent grid is one CTA a row that starts on its row's
// results. The ways a block ends and the dependent learns its row is ready:
//
//   grid     plain stores; the dependent waits for the whole grid (griddepcontrol.wait)
//   claim    a returning atomic on the row's count (the stream before v80), then the stores
//            at the claimed place; the dependent waits for the whole grid
//   release  plain stores, a barrier, one red.release.gpu on the row's count of ended
//            blocks; the dependent polls its row's count (ld.acquire.gpu), no grid wait (v81)
//   relaxed  as release without the fence (not a valid hand-off: its cost is the bare red's,
//            to separate the fence's from it)
//
// For each it prints, over the calls, the medians (us) of: the primary's span (its first
// block's start to its last block's end), the hand-off (the last block's end to the
// dependent's first CTA past its wait), the whole (first start to the dependent's last CTA
// past its wait) and the CUDA-event time of the call; with the L2 flushed before each call
// (a 256 MiB write). It is a probe, not a test: one second of device time.
//
//   flyops_handoff_probe [rows, default 64] [calls, default 30]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "check_cuda.h"
#include "flyops/tile/arch.h"
#include "flyops/tile/launch.h"

namespace {

using namespace flyops::tile;

constexpr int kThreads = 256;
constexpr int kUnroll = 4;                          // 16-byte loads a thread
constexpr int kBlockVecs = kThreads * kUnroll;      // 16 KB a block
constexpr int64_t kBytes = int64_t{64} << 20;       // the stream's read
constexpr int kResults = 32;                        // eight-byte results a block writes
constexpr int kProtos = 4;
const char* const kNames[kProtos] = {"grid", "claim", "release", "relaxed"};
enum Proto { kGrid = 0, kClaim = 1, kRelease = 2, kRelaxed = 3 };

struct Args {
  const uint4* x;
  int blocks_per_row;
  unsigned* count;            // [rows] claims (kClaim) or ended blocks (kRelease, kRelaxed), zeroed
  uint2* results;             // [rows * blocks_per_row * kResults]
  unsigned long long* start;  // [blocks] %globaltimer at the block's start
  unsigned long long* end;    // [blocks] at its end (after its hand-off)
  unsigned long long* go;     // [rows] the dependent CTA past its wait
  unsigned* sum;              // [rows] what the dependent read (keeps the reads)
};

FLYOPS_DEVICE void red_relaxed_gpu_add(unsigned* p, unsigned v) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

template <int kProto>
__global__ void __launch_bounds__(kThreads) handoff_stream(Args a) {
  __shared__ unsigned base;
  const unsigned long long t0 = globaltimer_ns();
  const int b = static_cast<int>(blockIdx.x), row = b / a.blocks_per_row;
  uint4 v[kUnroll];
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) v[u] = __ldcs(a.x + int64_t{b} * kBlockVecs + u * kThreads + threadIdx.x);
  allow_dependent_launch();
  unsigned m = 0;
#pragma unroll
  for (int u = 0; u < kUnroll; ++u) m = max(m, max(max(v[u].x, v[u].y), max(v[u].z, v[u].w)));
  m = __reduce_max_sync(0xffffffffu, m);
  unsigned slot = static_cast<unsigned>(b) * kResults;
  if constexpr (kProto == kClaim) {  // a place in the row's results, as the shared list did
    if (threadIdx.x == 0) base = atomicAdd(a.count + row, kResults);
    __syncthreads();
    slot = static_cast<unsigned>(row * a.blocks_per_row) * kResults + base;
  }
  if (threadIdx.x < kResults) a.results[slot + threadIdx.x] = make_uint2(m, threadIdx.x);
  if constexpr (kProto == kRelease || kProto == kRelaxed) {
    __syncthreads();
    if (threadIdx.x == 0) {
      if constexpr (kProto == kRelease)
        red_release_gpu_add(a.count + row, 1u);
      else
        red_relaxed_gpu_add(a.count + row, 1u);
    }
  }
  if (threadIdx.x == 0) {
    a.start[b] = t0;
    a.end[b] = globaltimer_ns();
  }
}

template <int kProto>
__global__ void __launch_bounds__(kThreads) handoff_finish(Args a) {
  const int row = static_cast<int>(blockIdx.x);
  if constexpr (kProto == kRelease || kProto == kRelaxed) {
    if (threadIdx.x == 0)
      while (static_cast<unsigned>(ld_acquire_gpu(reinterpret_cast<const int*>(a.count + row))) <
             static_cast<unsigned>(a.blocks_per_row))
        __nanosleep(32);
    __syncthreads();
  } else {
    grid_dependency_wait();
  }
  if (threadIdx.x == 0) a.go[row] = globaltimer_ns();
  unsigned s = 0;
  const int n = a.blocks_per_row * kResults;
  for (int i = threadIdx.x; i < n; i += kThreads) s += a.results[int64_t{row} * n + i].x;
  s = __reduce_add_sync(0xffffffffu, s);
  if ((threadIdx.x & 31) == 0) atomicAdd(a.sum + row, s);
}

template <int kProto>
void launch(const Args& a, int rows, cudaStream_t stream) {
  handoff_stream<kProto><<<rows * a.blocks_per_row, kThreads, 0, stream>>>(a);
  CHECK_CUDA(cudaGetLastError());
  CHECK_CUDA(launch_dependent(&handoff_finish<kProto>, dim3(rows), dim3(kThreads), 0, stream, a));
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int rows = argc > 1 ? std::atoi(argv[1]) : 64;
  const int calls = argc > 2 ? std::atoi(argv[2]) : 30;
  const int64_t vecs = kBytes / 16;
  if (rows < 1 || vecs % (int64_t{rows} * kBlockVecs) != 0) {
    std::fprintf(stderr, "rows must divide %lld blocks\n", static_cast<long long>(vecs / kBlockVecs));
    return 1;
  }
  const int blocks = static_cast<int>(vecs / kBlockVecs), bpr = blocks / rows;

  uint4* x;
  unsigned char* flush;
  Args a{};
  CHECK_CUDA(cudaMalloc(&x, kBytes));
  CHECK_CUDA(cudaMalloc(&flush, size_t{256} << 20));
  CHECK_CUDA(cudaMemset(x, 0x5a, kBytes));
  CHECK_CUDA(cudaMalloc(&a.count, rows * sizeof(unsigned)));
  CHECK_CUDA(cudaMalloc(&a.results, size_t(blocks) * kResults * sizeof(uint2)));
  CHECK_CUDA(cudaMalloc(&a.start, blocks * sizeof(unsigned long long)));
  CHECK_CUDA(cudaMalloc(&a.end, blocks * sizeof(unsigned long long)));
  CHECK_CUDA(cudaMalloc(&a.go, rows * sizeof(unsigned long long)));
  CHECK_CUDA(cudaMalloc(&a.sum, rows * sizeof(unsigned)));
  a.x = x;
  a.blocks_per_row = bpr;
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));

  std::vector<unsigned long long> start(blocks), end(blocks), go(rows);
  std::vector<unsigned> sum(rows);
  std::printf("%d rows of %d blocks (64 MiB, 16 KB a block); medians of %d calls, us\n", rows, bpr, calls);
  std::printf("%-8s %8s %9s %8s %8s\n", "", "stream", "hand-off", "whole", "events");
  for (int proto = 0; proto < kProtos; ++proto) {
    std::vector<double> span, handoff, whole, event;
    int stale = 0;  // rows that read a result before it was visible (relaxed only)
    for (int c = 0; c < calls + 3; ++c) {  // three warm-ups
      CHECK_CUDA(cudaMemsetAsync(flush, c & 0xff, size_t{256} << 20, stream));
      CHECK_CUDA(cudaMemsetAsync(a.count, 0, rows * sizeof(unsigned), stream));
      CHECK_CUDA(cudaMemsetAsync(a.sum, 0, rows * sizeof(unsigned), stream));
      CHECK_CUDA(cudaEventRecord(e0, stream));
      switch (proto) {
        case kGrid: launch<kGrid>(a, rows, stream); break;
        case kClaim: launch<kClaim>(a, rows, stream); break;
        case kRelease: launch<kRelease>(a, rows, stream); break;
        default: launch<kRelaxed>(a, rows, stream); break;
      }
      CHECK_CUDA(cudaEventRecord(e1, stream));
      CHECK_CUDA(cudaStreamSynchronize(stream));
      if (c < 3) continue;
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
      CHECK_CUDA(cudaMemcpy(start.data(), a.start, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(end.data(), a.end, blocks * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(go.data(), a.go, rows * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
      CHECK_CUDA(cudaMemcpy(sum.data(), a.sum, rows * sizeof(unsigned), cudaMemcpyDeviceToHost));
      // Every result holds the row's maximum word, 0x5a5a5a5a (the same whatever the order).
      for (int r = 0; r < rows; ++r)
        if (sum[r] != static_cast<unsigned>(uint64_t{0x5a5a5a5au} * bpr * kResults)) {
          if (proto != kRelaxed) {
            std::fprintf(stderr, "%s: row %d read %u: a result was not visible\n", kNames[proto], r, sum[r]);
            return 3;
          }
          ++stale;  // the relaxed red orders nothing: counted, not an error of the probe
        }
      const unsigned long long first = *std::min_element(start.begin(), start.end());
      const unsigned long long last = *std::max_element(end.begin(), end.end());
      const unsigned long long go0 = *std::min_element(go.begin(), go.end());
      const unsigned long long go1 = *std::max_element(go.begin(), go.end());
      span.push_back((last - first) * 1e-3);
      handoff.push_back((static_cast<double>(go0) - static_cast<double>(last)) * 1e-3);
      whole.push_back((go1 - first) * 1e-3);
      event.push_back(ms * 1e3);
    }
    std::printf("%-8s %8.2f %9.2f %8.2f %8.2f", kNames[proto], median(span), median(handoff), median(whole),
                median(event));
    if (proto == kRelaxed) std::printf("   (%d stale rows)", stale);
    std::printf("\n");
  }
  return 0;
}
