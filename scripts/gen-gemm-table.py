#!/usr/bin/env python3
"""Writes src/gemm/measured_shapes.inc, the GEMM router's per-shape table, from tune runs on
the H100 or H200 (`python -m flyops.bench --op gemm --tune`, once with the default write flush
and once with `--flush read`: stock, the router and flyops' kernel forced past it, alternating
in one process).

Runs are grouped by the part they ran on, and each part gets its own entries: the router
answers a shape from the entries of the part it runs on (memory-bound shapes rank differently
on the H100's slower memory). A measured shape routes to flyops where its forced kernel beat
stock by at least the margin in every run of that part, and to stock otherwise; CTA pairs
(multicast B) where they beat both by the margin in every such run; shapes the kernel does
not take are left out (gemm_supports decides them). The router answers these shapes from the
table and every other one by tuned_table.h's class rules. The runs' provenance goes into the
file.

Bench runs (`python -m flyops.bench --op gemm`, `--bench`) only take shapes away from flyops:
a shape the table gives flyops, whose kernel that bench timed (routed to it, or forced) under
the margin on the same part, goes to stock. The tune runs alone can pass a shape whose lead
is within one machine's variation of the next (the H200's LM head at 2048 rows: 1.037x in both
tune runs, 0.986x in the next bench).

    scripts/gen-gemm-table.py bench/results/h100/gemm_tune.json bench/results/h100/gemm_tune_read.json \
        bench/results/h200/gemm_tune.json bench/results/h200/gemm_tune_read.json \
        --bench bench/results/h200/gemm.json
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DTYPES = {"bfloat16": "DType::kBFloat16", "float16": "DType::kFloat16"}
GPUS = {"H100": "Gpu::kH100", "H200": "Gpu::kH200"}


def gpu_of(run):
    """The part a run measured, from its device name by device.cc's gpu_of_name: the SXM
    boards only ("NVIDIA H100 80GB HBM3", "NVIDIA H200"); PCIe and NVL boards are refused."""
    name = str(run.get("device"))
    if "NVL" not in name and "PCIe" not in name:
        if "H200" in name:
            return "H200"
        if "H100" in name and "HBM3" in name:
            return "H100"
    raise ValueError(f"{run.get('_path')}: device {name!r} is neither an H100 SXM nor an H200 SXM")


def key_of(row):
    """(M, N, K, batch, A K-major, B K-major, dtype) as the core's GemmParams see the bench's
    call: A row-major [M, K]; B "nt" the transpose of a row-major [N, K] (K-major), "nn" a
    row-major [K, N] (N-major)."""
    layout = row["layout"]
    if layout not in ("nn", "nt"):
        raise ValueError(f"layout {layout!r}: the bench's A is row-major, B 'nn' or 'nt'")
    return (row["M"], row["N"], row["K"], row.get("batch", 1), True, layout == "nt", row["dtype"])


def decide(runs, margin):
    """[(gpu, key, flyops, cluster, worst speedup, pass, speedups per run)], each part's runs
    decided alone (parts in GPUS order)."""
    return [(gpu,) + e for gpu in GPUS for e in decide_part([r for r in runs if gpu_of(r) == gpu], margin)]


def decide_part(runs, margin):
    """[(key, flyops, cluster, worst speedup, pass, speedups per run)] for every shape that
    every run measured with flyops' kernel taking it: cluster 2 (pairs) where they beat stock
    and the single CTAs by the margin in every run, else 0 (the launcher's choice)."""
    seen = {}
    for run in runs:
        if run.get("op") != "gemm":
            raise ValueError(f"{run.get('_path')}: not a gemm tune run (op {run.get('op')!r})")
        for row in run["rows"]:
            if row["dtype"] not in DTYPES:
                continue
            sp = row["stock_ms"] / row["flyops_ms"] if row.get("flyops_ms") else None
            pairs = row.get("flyops_pairs_ms")
            over = min(row["stock_ms"], row["flyops_ms"]) / pairs if pairs and sp else None
            entry = seen.setdefault(key_of(row), {"pass": row["pass"], "speedups": {}, "pairs": {}})
            entry["speedups"][run["_path"]] = sp
            entry["pairs"][run["_path"]] = (over, row["stock_ms"] / pairs if pairs else None)
    out = []
    for key, e in sorted(seen.items()):
        sps = [e["speedups"].get(r["_path"]) for r in runs]
        if any(sp is None for sp in sps):
            continue  # not measured in every run, or the kernel does not take it
        worst = min(sps)
        pairs = [e["pairs"].get(r["_path"], (None, None)) for r in runs]
        if all(over is not None and over >= margin for over, _ in pairs):
            out.append((key, True, 2, min(s for _, s in pairs), e["pass"], [s for _, s in pairs]))
        else:
            out.append((key, worst >= margin, 0, worst, e["pass"], sps))
    return out


def bench_speedups(bench):
    """{(part, key): (stock's time over flyops' kernel's, forced)} for the bench cases that
    timed the kernel: routed to flyops (the table's configuration), or forced past the router
    (square: the launcher's). Cases routed to stock timed stock twice and say nothing of the
    kernel."""
    out = {}
    for c in bench["cases"]:
        p = c["params"]
        if c["pass"] == "host" or p.get("dtype") not in DTYPES or not (c.get("routed") == "flyops" or c.get("forced")):
            continue
        row = {"M": p["M"], "N": p["N"], "K": p["K"], "batch": p.get("batch", 1), "layout": p["layout"], "dtype": p["dtype"]}
        out[(gpu_of(bench), key_of(row))] = (c["stock_ms"] / c["flyops_ms"], bool(c.get("forced")))
    return out


def demote(entries, benches, margin):
    """The entries with flyops' shapes that a bench timed under the margin sent to stock (their
    speedups gain the bench's). A forced timing ran the launcher's configuration, so it does
    not speak for CTA pairs."""
    timed = {}
    for b in benches:
        for k, sp in bench_speedups(b).items():
            timed.setdefault(k, []).append(sp)
    out = []
    for gpu, key, flyops, cluster, worst, pass_, sps in entries:
        extra = [sp for sp, forced in timed.get((gpu, key), []) if not (forced and cluster == 2)]
        if flyops and extra:
            sps = sps + extra
            worst = min([worst] + extra)
            if worst < margin:
                flyops, cluster = False, 0
        out.append((gpu, key, flyops, cluster, worst, pass_, sps))
    return out


def render(runs, entries, margin, script_args, benches=()):
    lines = [
        "// GENERATED by scripts/gen-gemm-table.py: do not edit; rerun it on new tune runs:",
        f"//   scripts/gen-gemm-table.py {' '.join(script_args)}".rstrip(),
        "// The GEMM shapes measured on the H100 and H200, one entry a shape and part: flyops where its",
        f"// kernel (forced past the router) beat stock by at least {margin:g}x in every run of that part",
        "// below, stock elsewhere; CTA pairs (cluster 2) where they beat both by as much. Speedups:",
        "// stock's time over the configuration's, per run.",
        "// Included by tuned_table.h inside namespace flyops::gemm, after MeasuredShape.",
        "// Runs:",
    ]
    if not runs:
        lines.append("//   none yet: tuned_table.h's class rules decide every shape")
    for r in runs:
        lines.append(f"//   {r['_path']}: {r.get('device')}, torch {r.get('torch')}, commit {str(r.get('commit'))[:12]}, "
                     f"{r.get('date', 'date not recorded')}, flush {r.get('flush', 'write')}")
        lines.append(f"//     {r.get('method', '')}")
    if benches:
        lines.append("// Bench runs (only take shapes from flyops: a kernel they timed under the margin; their")
        lines.append("// speedups follow the tune runs' in the comments):")
    for b in benches:
        lines.append(f"//   {b['_path']}: {b.get('device')}, torch {b.get('torch')}, commit {str(b.get('commit'))[:12]}, "
                     f"{b.get('date', 'date not recorded')}")
    lines.append(f"inline constexpr std::array<MeasuredShape, {len(entries)}> kMeasuredShapes{{{{")
    for gpu, (M, N, K, batch, ak, bk, dt), flyops, cluster, worst, pass_, sps in entries:
        sp = ", ".join(f"{s:.3f}" for s in sps)
        lines.append(f"    {{{GPUS[gpu]}, {M}, {N}, {K}, {batch}, {str(ak).lower()}, {str(bk).lower()}, {DTYPES[dt]}, "
                     f"{str(flyops).lower()}, {cluster}, {worst:.3f}f}},  // {pass_}: {sp}")
    lines.append("}};")
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="*", help="gemm tune JSONs (bench --op gemm --tune [--flush read])")
    ap.add_argument("--margin", type=float, default=1.03,
                    help="flyops only where stock's time over flyops' is at least this in every run")
    ap.add_argument("--bench", action="append", default=[],
                    help="gemm bench JSONs (bench --op gemm): a flyops shape they timed under the margin goes to stock")
    ap.add_argument("--out", default=os.path.join(ROOT, "src", "gemm", "measured_shapes.inc"))
    args = ap.parse_args(argv)

    def load(path):
        with open(path) as f:
            run = json.load(f)
        run["_path"] = os.path.relpath(os.path.abspath(path), ROOT) if os.path.abspath(path).startswith(ROOT) else path
        return run

    runs = [load(p) for p in args.runs]
    benches = [load(p) for p in args.bench]
    entries = demote(decide(runs, args.margin), benches, args.margin)
    script_args = ([r["_path"] for r in runs] + [f"--bench {b['_path']}" for b in benches] +
                   ([f"--margin {args.margin:g}"] if args.margin != 1.03 else []))
    text = render(runs, entries, args.margin, script_args, benches)
    with open(args.out, "w") as f:
        f.write(text)
    routed = sum(1 for e in entries if e[2])
    print(f"wrote {args.out}: {len(entries)} shapes, {routed} to flyops, from {len(runs)} runs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
