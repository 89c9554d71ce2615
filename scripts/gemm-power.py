#!/usr/bin/env python3
"""Sustained GEMM rate, SM clock and board power, stock against flyops (single CTAs, pairs,
and single CTAs with bands of 4 or 16 tile rows instead of 8), on random bf16 operands through torch.matmul: is a shape limited by the power cap
(clocks below their maximum at the cap) or by the kernel (clocks at maximum, power below
it)? Each side runs back to back for about a second (no L2 flush: the operands are far
larger than L2) while a thread reads clocks and power through NVML every 10 ms; the sides
alternate twice. For the H200 machine.

    python3 scripts/gemm-power.py                   8192^3 nn, 4096 x 14336 x 4096 nt
    python3 scripts/gemm-power.py 4096 4096 4096 nt ...
"""
import statistics
import sys
import threading
import time

import pynvml
import torch

import flyops


def sample_loop(handle, out, stop):
    while not stop.is_set():
        out.append((pynvml.nvmlDeviceGetClockInfo(handle, pynvml.NVML_CLOCK_SM),
                    pynvml.nvmlDeviceGetPowerUsage(handle) / 1000.0))
        time.sleep(0.01)


def sustained(fn, handle, seconds=1.0):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    n = max(5, int(seconds / max(time.perf_counter() - t0, 1e-6)))
    samples, stop = [], threading.Event()
    th = threading.Thread(target=sample_loop, args=(handle, samples, stop))
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    th.start()
    e0.record()
    for _ in range(n):
        fn()
    e1.record()
    torch.cuda.synchronize()
    stop.set()
    th.join()
    late = samples[len(samples) // 3:] or samples  # after the clocks settle
    return e0.elapsed_time(e1) / n, statistics.mean(s[0] for s in late), statistics.mean(s[1] for s in late)


def main(argv):
    shapes = [(8192, 8192, 8192, "nn"), (4096, 14336, 4096, "nt")]
    if len(argv) >= 4:
        shapes = [(int(argv[i]), int(argv[i + 1]), int(argv[i + 2]), argv[i + 3]) for i in range(0, len(argv) - 3, 4)]
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    limit = pynvml.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0
    top = pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)
    print(f"power limit {limit:.0f} W, max SM clock {top} MHz")
    for M, N, K, layout in shapes:
        a = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(N, K, device="cuda", dtype=torch.bfloat16).t() if layout == "nt" else \
            torch.randn(K, N, device="cuda", dtype=torch.bfloat16)
        fn = lambda: torch.matmul(a, b)  # noqa: E731
        sides = {"stock": lambda: flyops.disabled("gemm"), "flyops": lambda: flyops_forced(1),
                 "pairs": lambda: flyops_forced(2), "band4": lambda: flyops_forced(1, 4),
                 "band16": lambda: flyops_forced(1, 16)}
        for rnd in range(2):
            for name in (list(sides) if rnd == 0 else list(sides)[::-1]):
                with sides[name]():
                    ms, mhz, watts = sustained(fn, h)
                print(f"{M}x{N}x{K} {layout} {name:6s} {ms:.4f} ms {2 * M * N * K / ms / 1e9:6.1f} TFLOP/s "
                      f"SM {mhz:6.0f} MHz {watts:5.0f} W", flush=True)
    return 0


class flyops_forced:
    def __init__(self, cluster, group_rows=0):
        self.cluster, self.group_rows = cluster, group_rows

    def __enter__(self):
        torch.ops.flyops._gemm_force(1, self.cluster, self.group_rows)

    def __exit__(self, *exc):
        torch.ops.flyops._gemm_force(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
