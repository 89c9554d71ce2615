// Ordering probe of programmatic dependent launch (torch-free): may a kernel launched
// dependent that exits without griddepcontrol.wait let the stream's later work overtake the
// kernel it depends on? TopK's radix chain (launch.cuh) is a row of such kernels behind the
// list finish, each waiting for the grid before it only to learn that its row is done; if
// the stream's order held without the waits, a skipped kernel could exit at once.
//
// The primary spins for `spin` us, then sets a flag (it lets the dependent launch at its
// start). Behind it, in the cases below, kernels that exit without waiting, then a reader
// that copies the flag. A reader that sees 0 ran before the primary ended:
//
//   plain      primary, skip (dependent, no wait), reader (ordinary launch)
//   waited     primary, skip, skip, reader (dependent, griddepcontrol.wait)
//   event      primary, skip, event: the event's time from before the primary (us) against
//              the spin; and the reader after the event (ordinary launch)
//
// Prints for each case how many of the trials' readers saw the flag unset. A probe, not a
// test: a second of device time.
//
//   flyops_pdl_order_probe [trials, default 200] [spin us, default 20]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "check_cuda.h"
#include "flyops/tile/arch.h"
#include "flyops/tile/launch.h"

namespace {

using namespace flyops::tile;

__global__ void primary(unsigned* flag, unsigned spin_ns) {
  allow_dependent_launch();
  const unsigned long long t0 = globaltimer_ns();
  while (globaltimer_ns() - t0 < spin_ns) {
  }
  *reinterpret_cast<volatile unsigned*>(flag) = 1u;
}

__global__ void skip() { allow_dependent_launch(); }

template <bool kWait>
__global__ void reader(const unsigned* flag, unsigned* seen) {
  if constexpr (kWait) grid_dependency_wait();
  *seen = *reinterpret_cast<const volatile unsigned*>(flag);
}

}  // namespace

int main(int argc, char** argv) {
  const int trials = argc > 1 ? std::atoi(argv[1]) : 200;
  const unsigned spin_us = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 20u;
  cudaStream_t s;
  CHECK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  unsigned *flag, *seen;
  CHECK_CUDA(cudaMalloc(&flag, sizeof(unsigned)));
  CHECK_CUDA(cudaMallocHost(&seen, 3 * sizeof(unsigned)));
  unsigned* seen_d;
  CHECK_CUDA(cudaMalloc(&seen_d, 3 * sizeof(unsigned)));
  cudaEvent_t e0, e1;
  CHECK_CUDA(cudaEventCreate(&e0));
  CHECK_CUDA(cudaEventCreate(&e1));
  int early[3] = {0, 0, 0};
  float ev_min = 1e9f, ev_max = 0.0f;
  for (int t = 0; t < trials; ++t) {
    for (int c = 0; c < 3; ++c) {
      CHECK_CUDA(cudaMemsetAsync(flag, 0, sizeof(unsigned), s));
      CHECK_CUDA(cudaMemsetAsync(seen_d + c, 0xff, sizeof(unsigned), s));
      CHECK_CUDA(cudaEventRecord(e0, s));
      primary<<<1, 32, 0, s>>>(flag, spin_us * 1000u);
      CHECK_CUDA(launch_dependent(&skip, dim3(1), dim3(32), 0, s));
      if (c == 1) CHECK_CUDA(launch_dependent(&skip, dim3(1), dim3(32), 0, s));
      if (c == 2) CHECK_CUDA(cudaEventRecord(e1, s));
      if (c == 1)
        CHECK_CUDA(launch_dependent(&reader<true>, dim3(1), dim3(1), 0, s, flag, seen_d + c));
      else
        reader<false><<<1, 1, 0, s>>>(flag, seen_d + c);
      CHECK_CUDA(cudaGetLastError());
      CHECK_CUDA(cudaMemcpyAsync(seen + c, seen_d + c, sizeof(unsigned), cudaMemcpyDeviceToHost, s));
      CHECK_CUDA(cudaStreamSynchronize(s));
      early[c] += seen[c] == 0u ? 1 : 0;
      if (c == 2) {
        float ms = 0.0f;
        CHECK_CUDA(cudaEventElapsedTime(&ms, e0, e1));
        ev_min = std::min(ev_min, ms * 1e3f);
        ev_max = std::max(ev_max, ms * 1e3f);
      }
    }
  }
  std::printf("pdl order: %d trials, primary spins %u us\n", trials, spin_us);
  std::printf("  plain   reader saw the flag unset in %d\n", early[0]);
  std::printf("  waited  reader saw the flag unset in %d\n", early[1]);
  std::printf("  event   reader saw the flag unset in %d; event after the skip %.1f-%.1f us\n", early[2], ev_min,
              ev_max);
  return 0;
}
