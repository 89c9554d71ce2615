// TMA tensor copies. Host: describe a 1-5-D global tensor and the box one copy moves
// (tma_check says why TMA cannot describe it; tma_encode builds the CUtensorMap through
// the driver entry point that the runtime hands out, so nothing links libcuda). Device:
// box loads into shared memory completing on an mbarrier (optionally multicast to several
// CTAs of the cluster), box stores from shared memory completing through bulk groups.
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "flyops/tile/arch.h"
#include "flyops/tile/layout.h"
#include "flyops/tile/mbarrier.h"

namespace flyops::tile {

inline constexpr int kTmaMaxRank = 5;

// dims[0] is the contiguous dimension; strides_bytes[d] is the step of dim d + 1.
struct TmaShape {
  int rank = 2;
  int elem_bytes = 2;
  const void* base = nullptr;
  uint64_t dims[kTmaMaxRank] = {};
  uint64_t strides_bytes[kTmaMaxRank - 1] = {};
  uint32_t box[kTmaMaxRank] = {};
  Swizzle swizzle = Swizzle::kNone;
};

// nullptr when TMA can describe the tensor and box, else the reason (a static string).
inline const char* tma_check(const TmaShape& s) {
  if (s.rank < 1 || s.rank > kTmaMaxRank) return "TMA: rank outside 1..5";
  if (s.elem_bytes != 1 && s.elem_bytes != 2 && s.elem_bytes != 4 && s.elem_bytes != 8)
    return "TMA: element size not 1, 2, 4 or 8 bytes";
  if ((reinterpret_cast<uintptr_t>(s.base) & 15u) != 0) return "TMA: base pointer not 16-byte aligned";
  for (int d = 0; d < s.rank; ++d) {
    if (s.dims[d] == 0 || s.dims[d] > (uint64_t{1} << 32)) return "TMA: a dimension is 0 or above 2^32";
    if (s.box[d] == 0 || s.box[d] > 256) return "TMA: a box dimension is 0 or above 256";
  }
  for (int d = 0; d + 1 < s.rank; ++d) {
    if (s.strides_bytes[d] % 16 != 0) return "TMA: an outer stride is not a multiple of 16 bytes";
    if (s.strides_bytes[d] >= (uint64_t{1} << 40)) return "TMA: an outer stride is 2^40 bytes or more";
  }
  const uint64_t row = uint64_t{s.box[0]} * s.elem_bytes;
  if (row % 16 != 0) return "TMA: the box's inner extent is not a multiple of 16 bytes";
  if (s.swizzle != Swizzle::kNone && row > swizzle_span(s.swizzle))
    return "TMA: the box's inner extent exceeds the swizzle span";
  return nullptr;
}

inline CUtensorMapSwizzle tma_swizzle(Swizzle s) {
  switch (s) {
    case Swizzle::k128B: return CU_TENSOR_MAP_SWIZZLE_128B;
    case Swizzle::k64B: return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::k32B: return CU_TENSOR_MAP_SWIZZLE_32B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

// The driver's cuTensorMapEncodeTiled, looked up once; null without a driver.
inline void* tma_encode_fn() {
  static void* fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) !=
            cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<void*>(nullptr);
    }
    return p;
  }();
  return fn;
}

// Whether this thread has a current CUDA context (the driver's cuCtxGetCurrent, looked up
// once; true when it cannot be asked, leaving the answer to the encode call).
inline bool tma_context_current() {
  using GetCurrent = CUresult (*)(CUcontext*);
  static const GetCurrent fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess) {
      cudaGetLastError();
      return static_cast<GetCurrent>(nullptr);
    }
    return reinterpret_cast<GetCurrent>(p);
  }();
  CUcontext ctx = nullptr;
  return fn == nullptr || fn(&ctx) != CUDA_SUCCESS || ctx != nullptr;
}

// Builds `map` for loads and stores of `s.box` boxes (out-of-bounds elements read as zero
// and are not written). False when tma_check refuses or the driver does.
// `result`, when given, receives the driver's answer (CUDA_ERROR_INVALID_VALUE when
// tma_check refused before asking it).
inline bool tma_encode(CUtensorMap* map, const TmaShape& s, CUtensorMapDataType type,
                       CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CUresult* result = nullptr) {
  CUresult ignored;
  CUresult& r = result != nullptr ? *result : ignored;
  r = CUDA_ERROR_INVALID_VALUE;
  if (tma_check(s) != nullptr) return false;
  using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                              const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                              CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
  auto encode = reinterpret_cast<Encode>(tma_encode_fn());
  r = CUDA_ERROR_NOT_FOUND;
  if (encode == nullptr) return false;
  cuuint64_t dims[kTmaMaxRank], strides[kTmaMaxRank - 1];
  cuuint32_t box[kTmaMaxRank], estride[kTmaMaxRank];
  for (int d = 0; d < s.rank; ++d) {
    dims[d] = s.dims[d];
    box[d] = s.box[d];
    estride[d] = 1;
    if (d + 1 < s.rank) strides[d] = s.strides_bytes[d];
  }
  // The driver wants a current context, which a thread that has only launched through the
  // runtime may not have yet (PyTorch's autograd workers: CUDA_ERROR_INVALID_CONTEXT on the
  // H200). Setting the runtime's current device makes its primary context current (CUDA
  // 12+); no stream work, so this is safe during graph capture too.
  if (!tma_context_current()) {
    int dev = 0;
    if (cudaGetDevice(&dev) == cudaSuccess) cudaSetDevice(dev);
  }
  r = encode(map, type, static_cast<cuuint32_t>(s.rank), const_cast<void*>(s.base), dims, strides, box, estride,
             CU_TENSOR_MAP_INTERLEAVE_NONE, tma_swizzle(s.swizzle), l2, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

inline bool operator==(const TmaShape& a, const TmaShape& b) {
  if (a.rank != b.rank || a.elem_bytes != b.elem_bytes || a.base != b.base || a.swizzle != b.swizzle) return false;
  for (int d = 0; d < kTmaMaxRank; ++d)
    if (a.dims[d] != b.dims[d] || a.box[d] != b.box[d] || (d + 1 < kTmaMaxRank && a.strides_bytes[d] != b.strides_bytes[d]))
      return false;
  return true;
}

// tma_encode through a small per-thread cache of the maps it built last: a model calls the
// same layers with the same weights and activation buffers again and again, and a map is a
// pure function of its description (addresses included), so a hit hands back the bytes the
// driver would build, without asking it (the encode is most of a GEMM call's host cost).
// Only successful encodes are kept; the oldest of kEntries goes first.
class TmaMapCache {
 public:
  static constexpr int kEntries = 16;
  bool encode(CUtensorMap* map, const TmaShape& s, CUtensorMapDataType type, CUtensorMapL2promotion l2,
              CUresult* result) {
    for (const Entry& e : entries_)
      if (e.valid && e.type == type && e.l2 == l2 && e.shape == s) {
        *map = e.map;
        if (result != nullptr) *result = CUDA_SUCCESS;
        return true;
      }
    if (!tma_encode(map, s, type, l2, result)) return false;
    entries_[next_] = Entry{s, type, l2, *map, true};
    next_ = (next_ + 1) % kEntries;
    return true;
  }

 private:
  struct Entry {
    TmaShape shape;
    CUtensorMapDataType type;
    CUtensorMapL2promotion l2;
    CUtensorMap map;
    bool valid;
  };
  Entry entries_[kEntries] = {};
  int next_ = 0;
};

inline bool tma_encode_cached(CUtensorMap* map, const TmaShape& s, CUtensorMapDataType type,
                              CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CUresult* result = nullptr) {
  thread_local TmaMapCache cache;
  return cache.encode(map, s, type, l2, result);
}

#if defined(__CUDACC__)
// Box load at coordinates c (innermost first) into this CTA's shared memory; `bar` counts
// the bytes (the issuing thread announced them with mbarrier_arrive_expect_tx).
FLYOPS_DEVICE void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::
          "r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar))
      : "memory");
}
FLYOPS_DEVICE void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::
          "r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar))
      : "memory");
}
FLYOPS_DEVICE void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];" ::
          "r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(bar))
      : "memory");
}
FLYOPS_DEVICE void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2, int c3,
                            int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::
          "r"(smem_addr(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_addr(bar))
      : "memory");
}

// The same box into the same offset of every CTA in `cta_mask` (bit r: cluster rank r),
// each completing on its own barrier at `bar`'s offset.
FLYOPS_DEVICE void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t cta_mask, int c0,
                                      int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3}], [%4], %5;" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}

FLYOPS_DEVICE void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t cta_mask, int c0,
                                      int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster "
      "[%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(smem_addr(dst)),
      "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(bar)), "h"(cta_mask)
      : "memory");
}
// Box store from shared memory; complete it with tma_store_commit / tma_store_wait. Out-of-
// bounds elements past an upper edge are not written, but at the inner edge the store works
// in 16-byte chunks: keep dims[0] * elem_bytes a multiple of 16 where what lies past the edge
// must survive. Coordinates must not be negative: a store whose box starts below 0 in any
// dimension traps (illegal instruction; measured on the H200 at ranks 2 and 3), where a load
// zero-fills.
// Shared-memory writes by threads must be fenced first (fence_proxy_async).
FLYOPS_DEVICE void tma_store(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(smem_addr(src))
               : "memory");
}
FLYOPS_DEVICE void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(smem_addr(src))
               : "memory");
}
FLYOPS_DEVICE void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(map),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_addr(src))
               : "memory");
}
FLYOPS_DEVICE void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile(
      "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];" ::"l"(map),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_addr(src))
      : "memory");
}
FLYOPS_DEVICE void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// Wait until at most kPending store groups still read shared memory.
template <int kPending>
FLYOPS_DEVICE void tma_store_wait() {
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(kPending) : "memory");
}
// Wait until every committed store group has completed (its writes done, not only its reads).
FLYOPS_DEVICE void tma_store_drain() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }

// Make this thread's shared-memory writes visible to the async proxy (TMA, wgmma).
FLYOPS_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// The same between the async proxy's global writes (bulk stores, reductions) and this
// thread's later generic accesses (a flag that hands the result on).
FLYOPS_DEVICE void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }

FLYOPS_DEVICE void tma_prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(map) : "memory");
}
#endif

}  // namespace flyops::tile
