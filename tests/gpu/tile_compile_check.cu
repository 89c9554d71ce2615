// Instantiates every device wrapper of the tile layer that no kernel uses yet, so that
// nvcc and ptxas check their PTX in every build (the kernel is never launched). Their GPU
// unit tests are in tile_selftest.cu.
#include <cuda.h>

#include "flyops/tile/bulk_copy.h"
#include "flyops/tile/layout.h"
#include "flyops/tile/pipeline.h"
#include "flyops/tile/tma.h"
#include "flyops/tile/wgmma.h"

namespace {

using Tile = flyops::tile::SmemTile<uint16_t, 64, 64, flyops::tile::Swizzle::k128B>;

__global__ void flyops_tile_compile_check(const __grid_constant__ CUtensorMap map, int c, uint64_t* out) {
  using namespace flyops::tile;
  __shared__ __align__(1024) unsigned char buf[Tile::kBytes];
  __shared__ Ring<2> ring;
  if (threadIdx.x == 0) ring.init(1);
  __syncthreads();
  RingState<2> st;
  if (threadIdx.x == 0) {
    tma_prefetch_map(&map);
    ring.producer_acquire(st, Tile::kBytes);
    tma_load(buf, &map, ring.full_barrier(st), c, c);
    tma_load(buf, &map, ring.full_barrier(st), c, c, c);
    tma_load(buf, &map, ring.full_barrier(st), c, c, c, c);
    tma_load(buf, &map, ring.full_barrier(st), c, c, c, c, c);
    tma_load_multicast(buf, &map, ring.full_barrier(st), 0x3, c, c);
  }
  ring.consumer_wait(st);
  wgmma_fence();
  wgmma_commit();
  wgmma_wait<0>();
  regs_increase<232>();
  regs_decrease<40>();
  ring.consumer_release(st);
  st.advance();
  fence_proxy_async();
  if (threadIdx.x == 0) {
    tma_store(&map, buf, c, c);
    tma_store_commit();
    tma_store_wait<0>();
    mbarrier_arrive_cluster(&ring.empty[0], 0);
  }
  out[threadIdx.x] = wgmma_desc_kmajor<Tile>(smem_addr(buf)) + Tile::offset(1, 3);
}

}  // namespace

// Referenced so the kernel is emitted.
void* flyops_tile_compile_check_ptr() { return reinterpret_cast<void*>(&flyops_tile_compile_check); }
