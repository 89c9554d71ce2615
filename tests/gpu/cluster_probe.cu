// Timing probe of the cluster exchanges TopK's cluster kernel is built from (torch-free):
// one round is "every CTA adds a few histogram bins into rank 0, rank 0 chooses and tells
// every CTA", repeated inside one launch, by four protocols:
//
//   barrier   reds, cluster barrier, rank 0's stores and a release arrival on each CTA's
//             mbarrier (the kernel's form today)
//   async     reds that complete on rank 0's mbarrier (red.async) and a relaxed remote
//             arrival announcing their bytes, then rank 0's st.async into each CTA
//   async-in  the async publish, the release hand-off
//   async-out the barrier publish, the st.async hand-off
//   two barriers  reds, cluster barrier, rank 0's plain stores into each CTA, a second
//             cluster barrier
//
// plus the bare costs: a cluster barrier alone, a ping-pong of release arrivals alone
// (every CTA to rank 0, rank 0 to every CTA), and rank 0's pass over its bins alone.
// Prints ns per round as CTA 0 sees it (%globaltimer), for clusters of 8 and 16. It is a
// probe, not a test: it answers "what does one exchange cost" in a second of device time.
//
//   flyops_cluster_probe [rounds] [bins a CTA adds per round, default 40]
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "check_cuda.h"
#include "flyops/tile/cluster.h"
#include "flyops/tile/launch.h"
#include "flyops/tile/mbarrier.h"

namespace {

using namespace flyops::tile;

constexpr int kThreads = 256;
constexpr int kBins = 2048;
constexpr int kSentDefault = 40;  // bins each CTA adds into rank 0 per round (a random row's share)

enum Proto {
  kBarrier = 0,
  kAsync = 1,
  kAsyncIn = 2,
  kAsyncOut = 3,
  kTwoBarriers = 4,
  kBarrierOnly = 5,
  kHandoffOnly = 6,
  kSelectOnly = 7,
  kProtos
};
const char* const kNames[] = {"barrier",
                              "async",
                              "async-in",
                              "async-out",
                              "two barriers",
                              "cluster barrier alone",
                              "release hand-off alone",
                              "rank 0's selection alone"};

__global__ void exchange_kernel(int proto, int rounds, int sent, unsigned long long* ns, uint32_t* check) {
  __shared__ uint32_t bins[kBins];
  __shared__ __align__(16) uint32_t bcast[4];
  __shared__ uint64_t in_bar, sel_bar;
  __shared__ uint32_t total;
  const int tid = threadIdx.x;
  const uint32_t rank = cluster_rank(), csize = cluster_size();
  for (int i = tid; i < kBins; i += kThreads) bins[i] = 0;
  if (tid == 0) {
    total = 0;
    mbarrier_init(&in_bar, csize);
    mbarrier_init(&sel_bar, 1);
  }
  __syncthreads();
  cluster_sync();
  const bool async_in = proto == kAsync || proto == kAsyncIn;
  const bool async_out = proto == kAsync || proto == kAsyncOut;
  const uint32_t in_bar0 = peer_addr(&in_bar, 0);
  uint32_t sum = 0;
  const unsigned long long t0 = globaltimer_ns();
  for (int r = 0; r < rounds; ++r) {
    const uint32_t parity = r & 1;
    if (proto == kBarrierOnly) {
      cluster_sync();
      continue;
    }
    if (async_out && tid == 0) mbarrier_arrive_expect_tx(&sel_bar, 16);
    if (proto == kSelectOnly) {
      if (rank != 0) continue;
    } else if (proto == kHandoffOnly) {
      if (tid == 0) mbarrier_arrive_cluster(&in_bar, 0);
      if (rank == 0) mbarrier_wait_cluster(&in_bar, parity);
    } else {
      // Publish: `sent` bins of this CTA into rank 0's (up to kThreads).
      const uint32_t b = (static_cast<uint32_t>(tid) * 37u + rank * 11u + r) % kBins;
      if (tid < sent) {
        if (async_in)
          peer_red_add_async(peer_addr(&bins[b], 0), 1u, in_bar0);
        else
          peer_red_add(peer_addr(&bins[b], 0), 1u);
      }
      if (async_in) {
        if (tid == 0) mbarrier_arrive_expect_tx_peer(in_bar0, sent * 4u);
        if (rank == 0) mbarrier_wait(&in_bar, parity);
      } else {
        cluster_sync();
      }
    }
    if (rank == 0) {
      // "Select": read every bin (as select_bin does), then clear them for the next round.
      uint32_t own = 0;
      for (int i = tid; i < kBins; i += kThreads) own += bins[i];
      own = __reduce_add_sync(0xffffffffu, own);
      if ((tid & 31) == 0) atomicAdd(&total, own);
      __syncthreads();
      own = total;
      for (int i = tid; i < kBins; i += kThreads) bins[i] = 0;
      if (tid == 0) total = 0;
      __syncthreads();
      if (tid < static_cast<int>(csize)) {
        const uint4 v = make_uint4(own, r, 0, 0);
        if (proto == kSelectOnly) {
          bcast[0] = v.x;
          bcast[1] = v.y;
        } else if (async_out) {
          peer_store_async_v4(peer_addr(bcast, tid), v, peer_addr(&sel_bar, tid));
        } else if (proto == kTwoBarriers) {
          peer_store_u32(peer_addr(&bcast[0], tid), v.x);
          peer_store_u32(peer_addr(&bcast[1], tid), v.y);
        } else {
          peer_store_u32(peer_addr(&bcast[0], tid), v.x);
          peer_store_u32(peer_addr(&bcast[1], tid), v.y);
          mbarrier_arrive_cluster(&sel_bar, tid);
        }
      }
    }
    if (proto == kSelectOnly)
      __syncthreads();
    else if (proto == kTwoBarriers)
      cluster_sync();
    else if (async_out)
      mbarrier_wait(&sel_bar, parity);
    else
      mbarrier_wait_cluster(&sel_bar, parity);
    sum += bcast[0] + (bcast[1] == static_cast<uint32_t>(r) ? 0u : 1000000u);
  }
  const unsigned long long t1 = globaltimer_ns();
  cluster_sync();  // no CTA leaves while a peer may still write into it
  if (tid == 0) {
    if (blockIdx.x == 0) *ns = t1 - t0;
    atomicAdd(check, sum);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 400;
  int sent = argc > 2 ? std::atoi(argv[2]) : kSentDefault;
  sent = sent < 1 ? 1 : sent > kThreads ? kThreads : sent;
  std::printf("%d bins a CTA a round\n", sent);
  unsigned long long* d_ns;
  uint32_t* d_check;
  CHECK_CUDA(cudaMalloc(&d_ns, sizeof(*d_ns)));
  CHECK_CUDA(cudaMalloc(&d_check, sizeof(*d_check)));
  CHECK_CUDA(cudaFuncSetAttribute(exchange_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1));
  for (int cluster : {8, 16}) {
    for (int proto = 0; proto < kProtos; ++proto) {
      unsigned long long best = ~0ull;
      uint32_t check = 0;
      for (int rep = 0; rep < 5; ++rep) {
        CHECK_CUDA(cudaMemset(d_check, 0, sizeof(*d_check)));
        CHECK_CUDA(launch_cluster(&exchange_kernel, dim3(cluster), dim3(kThreads), 0, nullptr, cluster, proto, rounds, sent,
                                  d_ns, d_check));
        CHECK_CUDA(cudaDeviceSynchronize());
        unsigned long long ns;
        CHECK_CUDA(cudaMemcpy(&ns, d_ns, sizeof(ns), cudaMemcpyDeviceToHost));
        CHECK_CUDA(cudaMemcpy(&check, d_check, sizeof(check), cudaMemcpyDeviceToHost));
        if (ns < best) best = ns;
      }
      // Every CTA saw every round's selection: the bins' total is cluster x sent per round.
      const bool counts = proto >= kBarrierOnly ||
                          check == static_cast<uint32_t>(cluster) * cluster * sent * rounds;
      std::printf("cluster %2d  %-24s %7.1f ns a round%s\n", cluster, kNames[proto], double(best) / rounds,
                  counts ? "" : "  (COUNTS WRONG)");
    }
  }
  return 0;
}
