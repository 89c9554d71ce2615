#!/usr/bin/env python3
"""Writes include/flyops/tile/wgmma_ops.h: the wgmma.mma_async wrappers (SS form, fp32
accumulators) for bf16 and fp16 at m64 x N x k16, N in {16, 32, 64, 80, 96, 128, 160, 176, 192, 256}, and the RS form
(A from registers) at N in {64, 128, 256}; and the 8-bit float forms at m64 x N x k32 (SS and
RS, every pairing of e4m3 and e5m2, N in {64, 128, 256}: the MX GEMM's). The operand lists
are long and regular, so they are generated rather than typed."""
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NS = (16, 32, 64, 80, 96, 128, 160, 176, 192, 256)  # 80, 160 and 176: attention's key blocks (Q K^T), 16-128 their
# narrow first blocks; 32: the D = 256 backward's S^T slabs
NS_RS = (64, 128, 256)  # attention's P @ V: N is the head dim
TYPES = (("bf16", "bf16"), ("f16", "fp16"))
NS_FP8 = (64, 128, 256)
FP8 = ("e4m3", "e5m2")  # PTX type names; the C++ types are fp8e4m3 / fp8e5m2 (numeric.h)


def acc_list(regs):
    """The accumulators' operand numbers in the asm string: %0 .. %(regs - 1)."""
    return ", ".join(f"%{i}" for i in range(regs))


def outs_list(regs):
    """The accumulators as in-out asm operands, eight a line."""
    return ",\n        ".join(", ".join(f'"+f"(d[{i}])' for i in range(j, min(j + 8, regs)))
                               for j in range(0, regs, 8))


def wrapper(ptx_type, name, n):
    regs = n // 2  # fp32 accumulators per thread: 64 x n over 128 threads
    d = acc_list(regs)
    a, b, s, ta, tb = regs, regs + 1, regs + 2, regs + 3, regs + 4
    outs = outs_list(regs)
    return f'''
// D[64 x {n}] (+)= A[64 x 16] * B[16 x {n}], {name} operands from shared memory (descriptors),
// fp32 accumulators in the fragment layout of wgmma (d has {regs} per thread). kTransA /
// kTransB = 1: that operand is MN-major in shared memory (wgmma_desc_mnmajor).
template <int kTransA = 0, int kTransB = 0>
FLYOPS_DEVICE void wgmma_m64n{n}k16_{name}(float (&d)[{regs}], uint64_t desc_a, uint64_t desc_b, bool accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "
      "{{{d}}}, %{a}, %{b}, p, 1, 1, %{ta}, %{tb};\\n}}"
      : {outs}
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<uint32_t>(accumulate)), "n"(kTransA), "n"(kTransB));
}}
'''


def wrapper_rs(ptx_type, name, n):
    regs = n // 2
    d = acc_list(regs)
    a = ", ".join(f"%{regs + i}" for i in range(4))
    b, s, tb = regs + 4, regs + 5, regs + 6
    outs = outs_list(regs)
    return f'''
// D[64 x {n}] (+)= A[64 x 16] * B[16 x {n}], RS form: A from registers (four registers a thread,
// two {name} each, in the m64k16 A fragment layout, which is the layout of an m64nN
// accumulator's 16 columns once packed), B from shared memory; kTransB = 1: B is MN-major.
// A's registers must not change until the wgmma has completed.
template <int kTransB = 0>
FLYOPS_DEVICE void wgmma_m64n{n}k16_rs_{name}(float (&d)[{regs}], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k16.f32.{ptx_type}.{ptx_type} "
      "{{{d}}}, {{{a}}}, %{b}, p, 1, 1, %{tb};\\n}}"
      : {outs}
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<uint32_t>(accumulate)), "n"(kTransB));
}}
'''


def dispatcher_rs():
    cases = "\n".join(
        f"  {'if' if i == 0 else 'else if'} constexpr (std::is_same_v<T, {ctype}> && kN == {n})\n"
        f"    wgmma_m64n{n}k16_rs_{nm}<kTransB>(d, a, desc_b, accumulate);"
        for i, ((p, nm), ctype, n) in enumerate((t, c, n) for t, c in zip(TYPES, ("bf16", "fp16")) for n in NS_RS))
    return f'''
template <typename T, int kN, int kTransB = 0>
FLYOPS_DEVICE void wgmma_m64k16_rs(float (&d)[kN / 2], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {{
{cases}
  else
    static_assert(kN < 0, "no RS wgmma wrapper for this type and width");
}}
'''


def dispatcher():
    cases = "\n".join(
        f"  {'if' if i == 0 else 'else if'} constexpr (std::is_same_v<T, {ctype}> && kN == {n})\n"
        f"    wgmma_m64n{n}k16_{nm}<kTransA, kTransB>(d, desc_a, desc_b, accumulate);"
        for i, ((p, nm), ctype, n) in enumerate((t, c, n) for t, c in zip(TYPES, ("bf16", "fp16")) for n in NS))
    return f'''
// One name for kernels templated on the element type and tile width.
template <typename T, int kN, int kTransA = 0, int kTransB = 0>
FLYOPS_DEVICE void wgmma_m64k16(float (&d)[kN / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) {{
{cases}
  else
    static_assert(kN < 0, "no wgmma wrapper for this type and width");
}}
'''


def wrapper_fp8(ta, tb, n):
    regs = n // 2
    d = acc_list(regs)
    a, b, s = regs, regs + 1, regs + 2
    return f'''
// D[64 x {n}] (+)= A[64 x 32] * B[32 x {n}], A {ta} and B {tb} from shared memory, both
// K-major (8-bit wgmma has no transposed form; a k32 step is 32 bytes of each row, as a
// 16-bit k16 step is), fp32 accumulators in the fragment layout of wgmma (d has {regs} per thread).
FLYOPS_DEVICE void wgmma_m64n{n}k32_{ta}_{tb}(float (&d)[{regs}], uint64_t desc_a, uint64_t desc_b, bool accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ta}.{tb} "
      "{{{d}}}, %{a}, %{b}, p, 1, 1;\\n}}"
      : {outs_list(regs)}
      : "l"(desc_a), "l"(desc_b), "r"(static_cast<uint32_t>(accumulate)));
}}
'''


def wrapper_fp8_rs(ta, tb, n):
    regs = n // 2
    d = acc_list(regs)
    a = ", ".join(f"%{regs + i}" for i in range(4))
    b, s = regs + 4, regs + 5
    return f'''
// D[64 x {n}] (+)= A[64 x 32] * B[32 x {n}], RS form: A {ta} from registers (four registers a
// thread, four elements each: the k16 A fragment's layout in bytes, so register r holds row
// 16 w + l / 4 (+ 8 for r odd), K bytes 4 (l % 4) .. + 3 (+ 16 for r >= 2)), B {tb} K-major in
// shared memory. A's registers must not change until the wgmma has completed.
FLYOPS_DEVICE void wgmma_m64n{n}k32_rs_{ta}_{tb}(float (&d)[{regs}], const uint32_t (&a)[4], uint64_t desc_b, bool accumulate) {{
  asm volatile(
      "{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{s}, 0;\\n"
      "wgmma.mma_async.sync.aligned.m64n{n}k32.f32.{ta}.{tb} "
      "{{{d}}}, {{{a}}}, %{b}, p, 1, 1;\\n}}"
      : {outs_list(regs)}
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<uint32_t>(accumulate)));
}}
'''


def fp8_combos():
    return [(ta, tb, n) for ta in FP8 for tb in FP8 for n in NS_FP8]


def dispatcher_fp8(rs):
    suffix, args, a_param = ("_rs", "d, a, desc_b, accumulate", "const uint32_t (&a)[4]") if rs else \
        ("", "d, desc_a, desc_b, accumulate", "uint64_t desc_a")
    cases = "\n".join(
        f"  {'if' if i == 0 else 'else if'} constexpr (std::is_same_v<TA, fp8{ta}> && std::is_same_v<TB, fp8{tb}> && kN == {n})\n"
        f"    wgmma_m64n{n}k32{suffix}_{ta}_{tb}({args});"
        for i, (ta, tb, n) in enumerate(fp8_combos()))
    return f'''
template <typename TA, typename TB, int kN>
FLYOPS_DEVICE void wgmma_m64k32{suffix}(float (&d)[kN / 2], {a_param}, uint64_t desc_b, bool accumulate) {{
{cases}
  else
    static_assert(kN < 0, "no 8-bit wgmma wrapper for these types and width");
}}
'''


def main():
    body = "".join(wrapper(p, nm, n) for p, nm in TYPES for n in NS) + dispatcher()
    body += "".join(wrapper_rs(p, nm, n) for p, nm in TYPES for n in NS_RS) + dispatcher_rs()
    body += "".join(wrapper_fp8(ta, tb, n) for ta, tb, n in fp8_combos()) + dispatcher_fp8(False)
    body += "".join(wrapper_fp8_rs(ta, tb, n) for ta, tb, n in fp8_combos()) + dispatcher_fp8(True)
    text = f'''// Generated by scripts/gen-wgmma.py; do not edit. wgmma.mma_async, SS form: A and B in
// shared memory, K-major or (transposed, 16-bit types only) MN-major, described by wgmma_desc
// (wgmma.h), and RS form: A from registers; bf16 / fp16 at k16, e4m3 / e5m2 at k32; fp32
// accumulation. Issue between wgmma_fence() and wgmma_commit(); results are valid after
// wgmma_wait().
#pragma once

#include <cstdint>
#include <type_traits>

#include "flyops/tile/arch.h"
#include "flyops/tile/numeric.h"

namespace flyops::tile {{

#if defined(__CUDACC__)
{body}#endif

}}  // namespace flyops::tile
'''
    path = os.path.join(ROOT, "include", "flyops", "tile", "wgmma_ops.h")
    with open(path, "w") as f:
        f.write(text)
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
