"""Device times of torch.topk on a fixed set of rows (the cluster kernel's single rows and a
few others), or on the cases given as arguments (ROWSxN:K for fp32 and bf16, ROWSxN:K:DTYPE
for one, ROWSxN:K:DTYPE:FORCE with that `_topk_force` kind), one line per case for
scripts/wheel-aba: "<tag> <dtype> <rows>x<N> k=<k>[ f<force>] <us>". The tag is $ABA_TAG.
Same timer as the benchmark (L2 flushed, median of CUDA events)."""
import os
import sys

import torch

import flyops  # noqa: F401
from flyops.bench.common import Timer

CASES = [(1, 32000, 1024), (1, 151936, 1024), (1, 262144, 1024), (1, 32000, 50), (1, 151936, 50),
         (1, 262144, 20), (32, 32000, 1024), (64, 151936, 50), (1, 1 << 24, 100)]
DTYPES = [torch.float32, torch.bfloat16]


def parse(arg):
    """ROWSxN:K (both dtypes), ROWSxN:K:DTYPE (float32, bfloat16 or float16 alone) or
    ROWSxN:K:DTYPE:FORCE (the plan forced so)."""
    shape, k, *rest = arg.split(":")
    rows, n = (int(v) for v in shape.split("x"))
    dt = rest[:1]
    force = int(rest[1]) if len(rest) > 1 else -1
    return rows, n, int(k), [getattr(torch, d) for d in dt] or DTYPES, force


def main():
    cases = [(rows, n, k, DTYPES, -1) for rows, n, k in CASES]
    if len(sys.argv) > 1:  # ROWSxN:K[:DTYPE[:FORCE]] ...
        cases = [parse(a) for a in sys.argv[1:]]
    tag = os.environ.get("ABA_TAG", "-")
    timer = Timer(reps=50, warmup=10)
    torch.manual_seed(1)
    for dtype in DTYPES + [torch.float16]:  # float16 only where a case names it
        for rows, n, k, dtypes, force in cases:
            if dtype not in dtypes:
                continue
            x = torch.randn(rows, n, device="cuda").to(dtype)
            torch.ops.flyops._topk_force(force, 0)
            ms = timer.device_ms(lambda: torch.topk(x, k))
            torch.ops.flyops._topk_force(-1, 0)
            label = f" f{force}" if force >= 0 else ""
            print(f"{tag} {str(dtype)[6:]} {rows}x{n} k={k}{label} {ms * 1e3:.2f}", flush=True)


if __name__ == "__main__":
    main()
