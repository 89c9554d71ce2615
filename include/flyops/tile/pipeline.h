// A producer/consumer ring of kStages shared-memory slots: `full[s]` completes when slot
// s's data has landed (one producer arrival plus the TMA bytes), `empty[s]` when all
// consumers have released it. Each side walks the ring with a RingState (slot and phase).
#pragma once

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/mbarrier.h"

namespace flyops::tile {

template <int kStages>
struct RingState {
  int stage = 0;
  uint32_t phase = 0;
  FLYOPS_HD void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1u;
    }
  }
};

template <int kStages>
struct Ring {  // lives in shared memory
  uint64_t full[kStages];
  uint64_t empty[kStages];

#if defined(__CUDACC__)
  // One thread, before any other thread uses the ring (then a barrier).
  FLYOPS_DEVICE void init(uint32_t consumer_arrivals) {
    for (int s = 0; s < kStages; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], consumer_arrivals);
    }
  }
  // Producer: wait for the slot to be free (the first lap passes at once), then announce
  // the bytes its copies will complete on full[stage].
  FLYOPS_DEVICE void producer_acquire(const RingState<kStages>& st, uint32_t tx_bytes) {
    mbarrier_wait(&empty[st.stage], st.phase ^ 1u);
    mbarrier_arrive_expect_tx(&full[st.stage], tx_bytes);
  }
  FLYOPS_DEVICE uint64_t* full_barrier(const RingState<kStages>& st) { return &full[st.stage]; }
  // Consumer: wait for the data; release the slot when done reading it.
  FLYOPS_DEVICE void consumer_wait(const RingState<kStages>& st) { mbarrier_wait(&full[st.stage], st.phase); }
  FLYOPS_DEVICE void consumer_release(const RingState<kStages>& st) { mbarrier_arrive(&empty[st.stage]); }
#endif
};

}  // namespace flyops::tile
