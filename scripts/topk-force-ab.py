"""Device times of torch.topk under router forces (torch.ops.flyops._topk_force), alternated
in one process, with the benchmark's timer (L2 flushed, median of CUDA events), the order of
the forces rotating from round to round:

    python scripts/topk-force-ab.py --forces=-1,8 1x16777216:100 4x4194304:100

prints one line per case and force ("<dtype> <rows>x<N> k=<k> force=<f> <plan> <us>" per
round), then the ratio of each force's median over the rounds to the first force's."""
import argparse
import statistics

import torch

import flyops  # noqa: F401
from flyops.bench.common import Timer


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--forces", default="-1,8", help="force codes (KIND or KIND/CLUSTER), the first is the base")
    ap.add_argument("--rounds", type=int, default=4, help="rounds (each starts one force further on)")
    ap.add_argument("--dtypes", default="float32,bfloat16")
    ap.add_argument("--unsorted", action="store_true", help="time torch.topk(x, k, sorted=False)")
    ap.add_argument("--rows-kind", default="randn", choices=["randn", "masked", "ascending"],
                    help="randn; masked: -inf but for 3000 random logits a row (a sampler's masked vocabulary); "
                         "ascending: sorted rows")
    ap.add_argument("cases", nargs="+", help="ROWSxN:K")
    args = ap.parse_args()
    forces = args.forces.split(",")  # KIND or KIND/CLUSTER (the force's second argument)
    timer = Timer(reps=30, warmup=5)
    torch.manual_seed(1)
    for dname in args.dtypes.split(","):
        dtype = getattr(torch, dname)
        for case in args.cases:
            shape, k = case.split(":")
            rows, n = (int(v) for v in shape.split("x"))
            k = int(k)
            x = torch.randn(rows, n, device="cuda")
            if args.rows_kind == "masked":
                live = min(n, 3000)  # a row shorter than that keeps what it has
                keep = torch.randint(0, n, (rows, live), device="cuda")
                x = torch.full_like(x, -float("inf")).scatter_(1, keep, x[:, :live])
            elif args.rows_kind == "ascending":
                x = x.sort(dim=1).values
            x = x.to(dtype)
            times = {f: [] for f in forces}
            # The order rotates per round: a fixed order measured the first force of a round
            # 3-6% slower on ~5 us calls, with the same kernel in two places (TopK v56).
            for r in range(args.rounds):
                for f in forces[r % len(forces):] + forces[:r % len(forces)]:
                    kind, _, c = f.partition("/")
                    torch.ops.flyops._topk_force(int(kind), int(c or 0))
                    plan = torch.ops.flyops._route_topk(x, k, -1, True, not args.unsorted)
                    ms = timer.device_ms(lambda: torch.topk(x, k, sorted=not args.unsorted))
                    times[f].append(ms * 1e3)
                    print(f"{dname} {rows}x{n} k={k} force={f} {plan} {ms * 1e3:.2f}", flush=True)
            torch.ops.flyops._topk_force(-1, 0)
            base = statistics.median(times[forces[0]])
            print(f"== {args.rows_kind} {dname} {rows}x{n} k={k} " +
                  " ".join(f"force={f} {statistics.median(times[f]):.2f}us {statistics.median(times[f]) / base:.3f}x"
                           for f in forces), flush=True)


if __name__ == "__main__":
    main()
