"""Phase times of the cluster and finish kernels (build with -DFLYOPS_TOPK_TRACE=1; scripts
only): the grid's first CTA prints its marks. Cases ROWSxN:K as arguments, fp32 and bf16,
or a default set; FLYOPS_TOPK_FORCE=KIND[/CLUSTER] forces a plan (torch.ops.flyops._topk_force)."""
import os
import sys

import torch

import flyops  # noqa: F401

CASES = [(1, 262144, 50), (1, 128256, 1024), (1, 262144, 1024), (64, 32000, 50), (64, 262144, 50),
         (256, 128256, 1024)]


def main():
    cases = CASES
    if len(sys.argv) > 1:
        cases = [tuple(int(v) for v in a.replace(":", "x").split("x")) for a in sys.argv[1:]]
    kind, _, c = os.environ.get("FLYOPS_TOPK_FORCE", "-1").partition("/")
    torch.ops.flyops._topk_force(int(kind), int(c or 0))
    torch.manual_seed(0)
    for dt in (torch.float32, torch.bfloat16):
        for rows, n, k in cases:
            x = torch.randn(rows, n, device="cuda").to(dt)
            for _ in range(3):
                torch.topk(x, k)
            torch.cuda.synchronize()
            print(rows, n, k, dt, flush=True)
            torch.topk(x, k)
            torch.cuda.synchronize()


if __name__ == "__main__":
    main()
