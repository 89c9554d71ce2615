// Host side, shared by the forward and the backward: a [B, H, L, D] tensor as a 4-D TMA map
// {D, L, H, B} with boxes {64, rows}, and the shape and stride checks both run first.
#pragma once

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>

#include "flyops/attention.h"
#include "flyops/tile/tma.h"
#include "traits.h"

namespace flyops::attention {

// Why the last run on this thread (forward or backward) returned kUnsupported.
inline thread_local char g_last_error[192] = "";

// A dim of size 1 is never stepped, so its stride is replaced by one TMA accepts.
inline tile::TmaShape shape_of(const AttnTensor& t, int64_t B, int64_t H, int64_t L, int64_t D, uint32_t rows) {
  tile::TmaShape s;
  s.rank = 4;
  s.elem_bytes = 2;
  s.base = t.ptr;
  s.dims[0] = static_cast<uint64_t>(D);
  s.dims[1] = static_cast<uint64_t>(L);
  s.dims[2] = static_cast<uint64_t>(H);
  s.dims[3] = static_cast<uint64_t>(B);
  const int64_t st[3] = {L > 1 ? t.stride_l : D, H > 1 ? t.stride_h : D * L, B > 1 ? t.stride_b : D * L * H};
  for (int i = 0; i < 3; ++i) s.strides_bytes[i] = static_cast<uint64_t>(st[i]) * 2;
  s.box[0] = kSpanElems;
  s.box[1] = rows;
  s.box[2] = 1;
  s.box[3] = 1;
  s.swizzle = tile::Swizzle::k128B;
  return s;
}

// The checks of a call's shape and scalars that the forward and the backward share: why
// neither kernel can take it, or null.
inline const char* shape_problem(const AttnParams& p) {
  if (p.B <= 0 || p.H <= 0 || p.Hkv <= 0 || p.Lq <= 0 || p.Lk <= 0) return "empty attention";
  if (p.H % p.Hkv != 0) return "key/value heads do not divide the query heads";
  if (p.Lq >= (int64_t{1} << 31) / 2 || p.Lk >= (int64_t{1} << 31) / 2) return "a sequence of 2^30 or more";
  if (!(p.scale > 0.f) || !std::isfinite(p.scale)) return "scale not positive and finite";
  if (p.causal && (p.causal_offset > p.Lk || p.causal_offset < -p.Lq)) return "causal offset outside the lengths";
  return nullptr;
}

inline const char* strides_ok(const AttnTensor& t) {
  if (t.stride_b < 0 || t.stride_h < 0 || t.stride_l < 0) return "a negative stride";
  return nullptr;
}

// Encodes n maps (through the per-thread cache); false with `error` written when the driver
// refuses one.
inline bool encode_maps(CUtensorMap* m, const tile::TmaShape* shapes, const char* const* names, int n, DType dtype,
                        char* error, size_t error_size) {
  const CUtensorMapDataType type =
      dtype == DType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  for (int i = 0; i < n; ++i) {
    CUresult r = CUDA_SUCCESS;
    if (!tile::tma_encode_cached(&m[i], shapes[i], type, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, &r)) {
      std::snprintf(error, error_size, "the driver refused the TMA descriptor of %s (CUresult %d)", names[i],
                    static_cast<int>(r));
      return false;
    }
  }
  return true;
}

}  // namespace flyops::attention
