"""python -m flyops.bench --op rms_norm|topk|gemm|attention|all [--out DIR] [--quick] [--tune [--passes P,..]] [--flush write|read] [--no-plot]

Measures flyops against stock PyTorch in one process on this GPU and writes
<out>/<op>.json (default bench/results/<gpu>/) with a PNG plot, then prints a table.
"""

import argparse
import json
import os
import sys

import torch


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m flyops.bench")
    ap.add_argument("--op", default="rms_norm", choices=["rms_norm", "topk", "gemm", "attention", "all"])
    ap.add_argument("--out", default=None, help="results folder (default bench/results/<gpu>)")
    ap.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    ap.add_argument("--tune", action="store_true", help="sweep kernel shapes instead")
    ap.add_argument("--passes", default=None, help="gemm --tune: only these passes (comma-separated)")
    ap.add_argument("--flush", default="write", choices=["write", "read"],
                    help="how the L2 is flushed before each timed call: a 256 MiB write (default, the anchors' "
                         "method) or read (leaves clean lines; gemm --tune runs under both for its table)")
    ap.add_argument("--no-plot", action="store_true")
    args = ap.parse_args(argv)

    if not torch.cuda.is_available():
        print("flyops.bench: no CUDA GPU on this machine, so there is nothing to measure. "
              "flyops kernels run on NVIDIA Hopper GPUs (H100, H200); run this there.")
        return 0
    import flyops

    from . import attention, common, gemm, rms_norm, topk

    cc = torch.cuda.get_device_capability()
    if cc != (9, 0):
        print(f"flyops.bench: {torch.cuda.get_device_name()} is compute capability {cc[0]}.{cc[1]}; "
              "flyops routes every call to stock there, so flyops and stock would be the same.")
        return 0
    torch.manual_seed(int.from_bytes(os.urandom(4), "little"))
    timer = common.Timer(reps=20 if args.quick else 50, warmup=5 if args.quick else 10, flush=args.flush)
    out_dir = common.results_dir(args.out)
    if args.tune:
        mod = {"topk": topk, "gemm": gemm}.get(args.op, rms_norm)
        rows = mod.tune(timer, passes=args.passes.split(",")) if args.passes and mod is gemm else mod.tune(timer)
        op = mod.__name__.rsplit(".", 1)[1]
        stem = f"{op}_tune" + ("" if args.flush == "write" else f"_{args.flush}")
        head = {key: v for key, v in common.header(op, timer).items() if key != "cases"}
        path = common.write({**head, "flush": args.flush, "rows": rows}, out_dir, stem)
        print(f"wrote {path}")
        return 0
    ops = ["rms_norm", "topk", "gemm", "attention"] if args.op == "all" else [args.op]
    modules = {"rms_norm": rms_norm, "topk": topk, "gemm": gemm, "attention": attention}
    for op in ops:
        mod = modules[op]
        flyops.reset_stats()
        result = mod.run(timer, quick=args.quick)
        path = common.write(result, out_dir, op)
        if not args.no_plot:
            try:
                mod.plot(result, os.path.join(out_dir, f"{op}.png"))
            except ImportError as e:
                print(f"no plot: {e}")
        print(mod.summary(result))
        print(f"wrote {path}")
        print("stats:", json.dumps(flyops.stats()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
