"""Device times of torch.topk on a fixed set of rows (the cluster kernel's single rows and a
few others), or on the cases given as arguments (ROWSxN:K), one line per case for
scripts/wheel-aba: "<tag> <dtype> <rows>x<N> k=<k> <us>". The tag is $ABA_TAG. Same timer as
the benchmark (L2 flushed, median of CUDA events)."""
import os
import sys

import torch

import flyops  # noqa: F401
from flyops.bench.common import Timer

CASES = [(1, 32000, 1024), (1, 151936, 1024), (1, 262144, 1024), (1, 32000, 50), (1, 151936, 50),
         (1, 262144, 20), (32, 32000, 1024), (64, 151936, 50), (1, 1 << 24, 100)]


def main():
    cases = CASES
    if len(sys.argv) > 1:  # ROWSxN:K ...
        cases = [tuple(int(v) for v in a.replace(":", "x").split("x")) for a in sys.argv[1:]]
    tag = os.environ.get("ABA_TAG", "-")
    timer = Timer(reps=50, warmup=10)
    torch.manual_seed(1)
    for dtype in (torch.float32, torch.bfloat16):
        for rows, n, k in cases:
            x = torch.randn(rows, n, device="cuda").to(dtype)
            ms = timer.device_ms(lambda: torch.topk(x, k))
            print(f"{tag} {str(dtype)[6:]} {rows}x{n} k={k} {ms * 1e3:.2f}", flush=True)


if __name__ == "__main__":
    main()
