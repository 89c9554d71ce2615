"""The floor under the routing shapes (scripts only, GPU machine): with the benchmark's timer
(L2 flushed, median of CUDA events), a 1-element fill, then per case flyops' torch.topk,
stock's, a copy of the same input (what reading it once and writing it costs) and flyops'
kernel time by CUPTI (torch.profiler, L2 flushed before each of five calls, the median).

    python3 scripts/topk-floor.py            (rows {1, 4096} x N {8, 64, 256} x k {1, 2, 8})"""
import statistics

import torch

import flyops
from flyops.bench.common import Timer


def main():
    timer = Timer(reps=60, warmup=10)
    torch.manual_seed(1)

    def event_us(fn):
        return statistics.median(timer.samples(fn)) * 1e3

    def stock_us(fn):
        with flyops.disabled():
            return event_us(fn)

    def kernel_us(fn):
        return timer.kernel_us(fn, keep=lambda name: "flyops" in name)

    one = torch.empty(1, device="cuda")
    print(f"fill of one element: {event_us(lambda: one.fill_(1.0)):.2f} us")
    for dtype in (torch.float32, torch.bfloat16):
        for rows in (1, 4096):
            for n in (8, 64, 256):
                for k in (1, 2, 8):
                    x = torch.randn(rows, n, device="cuda").to(dtype)
                    y = torch.empty_like(x)
                    f = lambda: torch.topk(x, k)  # noqa: E731
                    print(f"{str(dtype)[6:]} {rows}x{n} k={k}: flyops {event_us(f):.2f} stock {stock_us(f):.2f} "
                          f"copy {event_us(lambda: y.copy_(x)):.2f} flyops kernel {kernel_us(f):.2f} us", flush=True)


if __name__ == "__main__":
    main()
