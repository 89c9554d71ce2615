// Register fragments of kN elements that move to and from global memory in one access
// (16 bytes on the fast path). They stay packed as loaded (two bf16 or fp16 per 32-bit
// register) and widen one element at a time on use, so a fragment of 8 bf16 costs 4
// registers rather than 8. Loads of data read once use the streaming cache policy, so they
// do not evict what the next kernel will reuse (weights, outputs).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/arch.h"
#include "flyops/tile/numeric.h"

namespace flyops::tile {

enum class CachePolicy { kDefault, kStreaming };

template <typename T, int kN>
struct Vec {
  static constexpr int kBytes = sizeof(T) * kN;
  using Word = std::conditional_t<(kBytes >= 4), uint32_t, uint16_t>;
  static constexpr int kWords = kBytes >= 4 ? kBytes / 4 : 1;
  static constexpr int kPerWord = kBytes >= 4 ? 4 / static_cast<int>(sizeof(T)) : 1;
  Word w[kWords];

  // Element j (a compile-time index after unrolling), widened to fp32.
  FLYOPS_DEVICE float get(int j) const {
    if constexpr (std::is_same_v<T, float>) {
      return __uint_as_float(w[j]);
    } else if constexpr (kPerWord == 1) {  // a lone 16-bit element
      return to_float(bits_to<T>(static_cast<uint16_t>(w[0])));
    } else if constexpr (std::is_same_v<T, bf16>) {
      const uint32_t word = w[j / 2];
      return __uint_as_float(j % 2 == 0 ? word << 16 : word & 0xffff0000u);
    } else {
      const uint32_t word = w[j / 2];
      return to_float(bits_to<T>(static_cast<uint16_t>(j % 2 == 0 ? word : word >> 16)));
    }
  }

  // The same value as get(j), computed so the compiler cannot reuse an earlier get(j):
  // a kernel that keeps fragments packed across a reduction widens them again after it
  // (one instruction) instead of holding fp32 copies live, which would double its
  // registers and halve the rows in flight per SM. fp16 falls back to get(j).
  FLYOPS_DEVICE float get_late(int j) const {
    if constexpr (std::is_same_v<T, bf16> && kPerWord == 2) {
      uint32_t r;
      if (j % 2 == 0)
        asm("prmt.b32 %0, %1, %2, 0x1044;" : "=r"(r) : "r"(w[j / 2]), "r"(0u));
      else
        asm("prmt.b32 %0, %1, %2, 0x3244;" : "=r"(r) : "r"(w[j / 2]), "r"(0u));
      return __uint_as_float(r);
    } else {
      return get(j);
    }
  }

  // Round fp32 values to T (nearest even) and pack them.
  FLYOPS_DEVICE static Vec pack(const float (&f)[kN]) {
    Vec out;
    if constexpr (std::is_same_v<T, float>) {
#pragma unroll
      for (int j = 0; j < kN; ++j) out.w[j] = __float_as_uint(f[j]);
    } else if constexpr (kPerWord == 1) {
      out.w[0] = bits_of(from_float<T>(f[0]));
    } else {
#pragma unroll
      for (int k = 0; k < kWords; ++k)
        out.w[k] = uint32_t(bits_of(from_float<T>(f[2 * k]))) |
                   (uint32_t(bits_of(from_float<T>(f[2 * k + 1]))) << 16);
    }
    return out;
  }

  FLYOPS_DEVICE static Vec filled(float v) {
    float f[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) f[j] = v;
    return pack(f);
  }

 private:
  template <typename U>
  FLYOPS_DEVICE static U bits_to(uint16_t b) {
    if constexpr (std::is_same_v<U, bf16>)
      return __ushort_as_bfloat16(b);
    else
      return __ushort_as_half(b);
  }
  template <typename U>
  FLYOPS_DEVICE static uint16_t bits_of(U v) {
    if constexpr (std::is_same_v<U, bf16>)
      return __bfloat16_as_ushort(v);
    else
      return __half_as_ushort(v);
  }
};

namespace detail {
template <CachePolicy P>
FLYOPS_DEVICE uint4 ld128(const void* p) {
  uint4 r;
  if constexpr (P == CachePolicy::kStreaming)
    asm volatile("ld.global.cs.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  else
    asm volatile("ld.global.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}
template <CachePolicy P, typename R>
FLYOPS_DEVICE R ld(const R* p) {
  if constexpr (P == CachePolicy::kStreaming)
    return __ldcs(p);
  else
    return *p;
}
}  // namespace detail

// A scalar read-only load that stays where it is written (asm volatile): the compiler
// neither sinks it into a branch beside its use nor re-issues it later to save registers,
// so a run of them is in flight at once.
FLYOPS_DEVICE uint32_t load_now(const uint32_t* p) {
  uint32_t r;
  asm volatile("ld.global.nc.u32 %0, [%1];" : "=r"(r) : "l"(p));
  return r;
}
FLYOPS_DEVICE uint16_t load_now(const uint16_t* p) {
  uint16_t r;
  asm volatile("ld.global.nc.u16 %0, [%1];" : "=h"(r) : "l"(p));
  return r;
}
FLYOPS_DEVICE uint4 load_now(const uint4* p) {
  uint4 r;
  asm volatile("ld.global.nc.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

// load_now's 16-byte form under a predicate, zero where it is false (no branch: the load
// is predicated in place); `once` for data read once: no line is allocated in L1, so
// what the kernel re-reads (the GEMM narrow kernel's activations) keeps its place there.
#define FLYOPS_LOAD_IF(QUAL)                                                                   \
  uint4 r;                                                                                     \
  asm volatile(                                                                                \
      "{\n.reg .pred q;\nsetp.ne.b32 q, %5, 0;\nmov.b32 %0, 0;\nmov.b32 %1, 0;\nmov.b32 %2, 0;\n" \
      "mov.b32 %3, 0;\n@q ld.global.nc" QUAL ".v4.u32 {%0,%1,%2,%3}, [%4];\n}"                 \
      : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)                                             \
      : "l"(p), "r"(static_cast<uint32_t>(ok)));                                               \
  return r;
FLYOPS_DEVICE uint4 load_now_if(const uint4* p, bool ok) { FLYOPS_LOAD_IF("") }
FLYOPS_DEVICE uint4 load_now_once_if(const uint4* p, bool ok) { FLYOPS_LOAD_IF(".L1::no_allocate") }
#undef FLYOPS_LOAD_IF

template <CachePolicy P = CachePolicy::kDefault, typename T, int kN>
FLYOPS_DEVICE void load(Vec<T, kN>& dst, const T* src) {
  using V = Vec<T, kN>;
  if constexpr (V::kBytes == 16) {
    const uint4 r = detail::ld128<P>(src);
    dst.w[0] = r.x;
    dst.w[1] = r.y;
    dst.w[2] = r.z;
    dst.w[3] = r.w;
  } else if constexpr (V::kBytes == 8) {
    const uint2 r = detail::ld<P>(reinterpret_cast<const uint2*>(src));
    dst.w[0] = r.x;
    dst.w[1] = r.y;
  } else {
    dst.w[0] = detail::ld<P>(reinterpret_cast<const typename V::Word*>(src));
  }
}

template <typename T, int kN>
FLYOPS_DEVICE void store(T* dst, const Vec<T, kN>& src) {
  using V = Vec<T, kN>;
  if constexpr (V::kBytes == 16)
    *reinterpret_cast<uint4*>(dst) = make_uint4(src.w[0], src.w[1], src.w[2], src.w[3]);
  else if constexpr (V::kBytes == 8)
    *reinterpret_cast<uint2*>(dst) = make_uint2(src.w[0], src.w[1]);
  else
    *reinterpret_cast<typename V::Word*>(dst) = src.w[0];
}

}  // namespace flyops::tile
