"""The bench timer's GPU hold (HOLD_CYCLES_PER_CALL) on and off, alternated in one process on a
few TopK and GEMM calls, flyops' route and stock's, four rounds; prints each side's median of
the rounds' medians and hold-on / hold-off. Where the host keeps ahead of the GPU the two agree
within ~1%; where a call's host work outlasts the flush before it, hold-off counts the GPU
waiting for the host inside the timed interval."""
import contextlib
import statistics

import torch

import flyops
from flyops.bench import common

CASES = [("topk", (16384, 64), torch.bfloat16, 8), ("topk", (1, 128256), torch.float32, 50),
         ("topk", (64, 262144), torch.float32, 1024), ("mm", (1, 4096, 4096), torch.bfloat16, 0),
         ("mm", (4096, 4096, 4096), torch.bfloat16, 0), ("topk", (1, 32000), torch.bfloat16, 20),
         ("topk", (1, 128256), torch.bfloat16, 20), ("topk", (1, 8), torch.float32, 1)]


def call(case):
    op, shape, dt, k = case
    if op == "topk":
        x = torch.randn(*shape, device="cuda").to(dt)
        return lambda: torch.topk(x, k)
    m, n, kk = shape
    a = torch.randn(m, kk, device="cuda", dtype=dt)
    b = torch.randn(kk, n, device="cuda", dtype=dt)
    return lambda: a @ b


def main():
    timer = common.Timer(reps=13, warmup=5)
    default = common.HOLD_CYCLES_PER_CALL
    for case in CASES:
        fn = call(case)
        for route in ("flyops", "stock"):
            times = {"on": [], "off": []}
            for r in range(4):
                for side in (("on", "off") if r % 2 == 0 else ("off", "on")):
                    common.HOLD_CYCLES_PER_CALL = default if side == "on" else 0
                    with flyops.disabled() if route == "stock" else contextlib.nullcontext():
                        times[side].append(timer.device_ms(fn) * 1e3)
            common.HOLD_CYCLES_PER_CALL = default
            on, off = statistics.median(times["on"]), statistics.median(times["off"])
            print(f"== {route} {case[0]} {case[1]} {case[2]} k={case[3]}: hold on {on:.2f} us, off {off:.2f} us, "
                  f"on/off {on / off:.3f}", flush=True)


if __name__ == "__main__":
    main()
