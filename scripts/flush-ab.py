"""How the L2 flush's kind moves memory-bound times (scripts only): the bench's flush writes
256 MiB (the L2 is left full of dirty lines, written back while the timed call reads); a
read flush (a sum over 256 MiB) leaves it full of clean ones. Stock and flyops TopK, a copy,
and decode GEMMs (M x N x K, stock against flyops' kernel forced) under each, in one process:

    python scripts/flush-ab.py 64x262144:20 256x151936:50 gemm:1x4096x4096
"""
import sys

import torch

import flyops
from flyops.bench.common import Timer


def main():
    cases = [tuple(int(v) for v in a.replace(":", "x").split("x")) for a in sys.argv[1:] if not a.startswith("gemm:")]
    gemms = [tuple(int(v) for v in a[5:].split("x")) for a in sys.argv[1:] if a.startswith("gemm:")]
    timers = {"write": Timer(reps=40, warmup=5), "read": Timer(reps=40, warmup=5, flush="read")}
    timers["read"]._flush = timers["write"]._flush
    for name, t in timers.items():
        print(f"copy 256 MiB, {name} flush: {t.copy_GBps(256 << 20):.0f} GB/s", flush=True)
    torch.manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        for rows, n, k in cases:
            x = torch.randn(rows, n, device="cuda").to(dtype)
            gb = x.numel() * x.element_size() / 1e9
            line = f"{str(dtype)[6:]} {rows}x{n} k={k}:"
            for name, t in timers.items():
                with flyops.disabled():
                    s = t.device_ms(lambda: torch.topk(x, k))
                f = t.device_ms(lambda: torch.topk(x, k))
                line += f"  {name}: stock {s * 1e3:.1f} flyops {f * 1e3:.1f} us ({gb / (f * 1e-3) / 4200:.3f} of 4.2 TB/s)"
            print(line, flush=True)
    for M, N, K in gemms:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16)
        gb = w.numel() * 2 / 1e9
        line = f"gemm {M}x{N}x{K}:"
        for name, t in timers.items():
            with flyops.disabled():
                s = t.device_ms(lambda: a @ w.t())
            torch.ops.flyops._gemm_force(1)
            f = t.device_ms(lambda: a @ w.t())
            torch.ops.flyops._gemm_force(0)
            line += f"  {name}: stock {s * 1e3:.1f} ({gb / (s * 1e-3):.0f} GB/s) flyops {f * 1e3:.1f} us ({gb / (f * 1e-3):.0f} GB/s)"
        print(line, flush=True)


if __name__ == "__main__":
    main()
