"""Every block's times in one call, on the GPU machine, from a trace build (scripts only):
  python3 -m pip wheel --no-build-isolation --no-deps -w .carry-trace . -C build-dir=build/trace \
      -C cmake.define.FLYOPS_TOPK_TRACE=ON -C cmake.define.FLYOPS_TOPK_TRACE_CTAS=0
(TRACE_CTAS=0: no phase prints, which delay the CTAs that print). The screen, stream, finish
and the chain's skipped kernels' blocks record start, one mark and end by %globaltimer
(GridTrace, src/topk/trace.cuh); the next call's first launch prints them. Per kernel: blocks, first and last start, last end,
median span and median start-to-mark; then the blocks alive, waiting (start to mark) and
ended per half microsecond. Cases ROWSxN:K[:dtype] as arguments."""
import collections
import os
import statistics
import subprocess
import sys

TAGS = {0: "screen", 1: "stream", 2: "finish", 3: "skipped"}


def child(case):
    import torch
    import flyops  # noqa: F401
    rows, n, k, dt = case
    dt = getattr(torch, dt)
    torch.manual_seed(0)
    x = torch.randn(rows, n, device="cuda").to(dt)
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    for _ in range(4):
        torch.topk(x, k)
    flush.zero_()  # the L2 as the benchmark leaves it (a 256 MiB write)
    torch.cuda.synchronize()
    torch.topk(x, k)  # the measured call
    torch.cuda.synchronize()
    torch.topk(x, k)  # its launch prints the measured call's records: the last dump
    torch.cuda.synchronize()


def analyse(text):
    # Each call's launch prints the call before it, and device prints may reach stdout late
    # (at exit), so the measured call's records are the last dump, whatever came before.
    recs = []
    for ln in text.rsplit("topk grid begin", 1)[-1].splitlines()[1:]:
        f = ln.split()
        if f[:2] == ["topk", "grid"]:
            recs.append(tuple(int(v) for v in f[2:8]))
    t0 = min(r[3] for r in recs)
    by = collections.defaultdict(list)
    for tag, blk, sm, a, b, c in recs:
        by[tag].append((blk, sm, (a - t0) / 1e3, (b - t0) / 1e3, (c - t0) / 1e3))
    for tag in sorted(by):
        r = by[tag]
        print(f"  {TAGS.get(tag, tag):7s} blocks {len(r):5d}  start {min(x[2] for x in r):6.2f}-{max(x[2] for x in r):6.2f}"
              f"  end {min(x[4] for x in r):6.2f}-{max(x[4] for x in r):6.2f}  span med {statistics.median(x[4] - x[2] for x in r):5.2f}"
              f"  start-mark med {statistics.median(x[3] - x[2] for x in r):5.2f} max {max(x[3] - x[2] for x in r):5.2f}")
    end = max(x[4] for r in by.values() for x in r)
    print("  t(us) " + " ".join(f"{TAGS.get(t, t)}:alive/wait/ended" for t in sorted(by)))
    t = 0.0
    while t <= end + 0.5:
        cols = []
        for tag in sorted(by):
            r = by[tag]
            alive = sum(1 for x in r if x[2] <= t < x[4])
            wait = sum(1 for x in r if x[2] <= t < x[3])
            ended = sum(1 for x in r if x[4] <= t)
            cols.append(f"{alive:5d}/{wait:5d}/{ended:5d}")
        print(f"  {t:5.1f} " + "   ".join(cols))
        t += 1.0


def main():
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        rows, n, k, dt = sys.argv[2].split(":")
        child((int(rows), int(n), int(k), dt))
        return
    for a in sys.argv[1:]:
        rows, rest = a.split("x")
        parts = rest.split(":")
        dt = parts[2] if len(parts) > 2 else "float32"
        spec = f"{rows}:{parts[0]}:{parts[1]}:{dt}"
        out = subprocess.run([sys.executable, __file__, "--child", spec], capture_output=True, text=True,
                             env=dict(os.environ))
        print(f"== {a}", flush=True)
        if out.returncode != 0:
            print(out.stderr[-2000:])
            continue
        analyse(out.stdout)


if __name__ == "__main__":
    main()
