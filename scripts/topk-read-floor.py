"""What one read of the input costs, against torch.topk, on large cases (scripts only, GPU
machine). With the benchmark's timer (L2 flushed, median of CUDA events), per case ROWSxN:K:
flyops' torch.topk, flyops' k = 1 (the arg-max kernel: one pass, one launch), stock's
amax and sum over the last dim (one read each), and each one's kernel time by CUPTI
(L2 flushed before each of five calls, the median of the summed kernel durations).

    python3 scripts/topk-read-floor.py 64x262144:1024 1x16777216:100"""
import statistics
import sys

import torch

import flyops
from flyops.bench.common import Timer


def main():
    timer = Timer(reps=50, warmup=10)
    torch.manual_seed(1)

    def event_us(fn):
        return statistics.median(timer.samples(fn)) * 1e3

    def kernel_us(fn):  # every kernel of the call (the flush runs outside the trace)
        return timer.kernel_us(fn)

    cases = [tuple(int(v) for v in a.replace(":", "x").split("x")) for a in sys.argv[1:]]
    for dtype in (torch.float32, torch.bfloat16):
        for rows, n, k in cases:
            x = torch.randn(rows, n, device="cuda").to(dtype)
            mb = x.numel() * x.element_size() / 1e6
            fns = {
                "topk": lambda: torch.topk(x, k),
                "topk k=1": lambda: torch.topk(x, 1),
                "amax": lambda: torch.amax(x, dim=-1),
                "sum": lambda: torch.sum(x, dim=-1),
            }
            parts = []
            for name, fn in fns.items():
                ev, kt = event_us(fn), kernel_us(fn)
                parts.append(f"{name} {ev:.1f} us ({mb / ev:.2f} TB/s; kernels {kt:.1f})")
            print(f"{str(dtype)[6:]} {rows}x{n} k={k} {mb:.1f} MB: " + " | ".join(parts), flush=True)


if __name__ == "__main__":
    main()
