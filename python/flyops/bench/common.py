"""Timing and reporting shared by the op benchmarks.

Device time: median of CUDA-event timings after warm-up, with L2 flushed (a 256 MiB write)
before each timed call. Host time: many back-to-back calls timed by wall clock with one
synchronize at the end, no flush. Stock and flyops run in the same process on the same
inputs; stock runs inside `flyops.disabled()`.
"""

import contextlib
import datetime
import json
import os
import statistics
import subprocess
import time

import torch

import flyops

L2_FLUSH_BYTES = 256 << 20
METHOD = ("median of {reps} CUDA-event timings after {warmup} warm-ups, L2 flushed ({flush}) before "
          "each; stock and flyops alternate in {rounds} rounds of {per_round}, each side first in half of them; "
          "the GPU held ~50 us a timed call before each batch of them, so that the host enqueues ahead of it")
# The GPU's hold before a batch of timed calls, in clock cycles a call (~50 us at Hopper's
# 1.98 GHz): the host enqueues the batch's flushes and calls meanwhile, so a host slowed by up
# to that much a call does not leave the GPU idle inside a timed interval, where it would
# count as the call's time. (The H100 benches of the forty-third session had whole cases
# 1.5-15x off, mostly on the side with the shorter kernels, which a slowed host starves
# first: docs/perf-notes.md.) Short against the flushes' own ~80 us a call.
HOLD_CYCLES_PER_CALL = 100_000
# The L2 flushes: "write" (the anchors' method and the benchmark's) leaves the L2 full of
# dirty lines that are written back while the timed call reads; "read" leaves clean lines,
# as a model's step finds them once the other layers' weights have passed through.
FLUSHES = {"write": "256 MiB write", "read": "256 MiB read"}
# Even, so that each side goes first equally often: a compute-bound burst heats the GPU and
# lowers its clocks for whatever runs right after (an identical GEMM kernel measured 12%
# apart by its place in a round on the H200; docs/perf-notes.md, GEMM).
ROUNDS = 4


class Timer:
    def __init__(self, reps=50, warmup=10, flush="write"):
        if flush not in FLUSHES:
            raise ValueError(f"flush must be one of {sorted(FLUSHES)}, not {flush!r}")
        self.reps = reps
        self.warmup = warmup
        self.flush = flush
        self._flush = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device="cuda")

    def method(self):
        return METHOD.format(reps=self.reps, warmup=self.warmup, rounds=ROUNDS, flush=FLUSHES[self.flush],
                             per_round=-(-self.reps // ROUNDS))

    def samples(self, fn, reps=None, warmup=None):
        for _ in range(self.warmup if warmup is None else warmup):
            fn()
        n = self.reps if reps is None else reps
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        torch.cuda._sleep(HOLD_CYCLES_PER_CALL * n)  # outside every timed interval (HOLD_CYCLES_PER_CALL)
        for s, e in zip(starts, ends):
            self.flush_l2()
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    def flush_l2(self):
        """Evicts the L2 before a timed call: a 256 MiB write (the anchors' method; it leaves
        the L2 full of dirty lines, scripts/flush-ab.py measures what that costs) or, with
        flush="read", a sum over the same bytes (clean lines)."""
        if self.flush == "read":
            self._sink = self._flush.view(torch.int64).sum()
        else:
            self._flush.zero_()

    def device_ms(self, fn):
        return statistics.median(self.samples(fn))

    def kernel_us(self, fn, keep=lambda name: True, calls=5):
        """The median over `calls` calls, the L2 flushed before each, of the summed durations
        (us, torch.profiler's CUPTI trace) of the CUDA kernels whose names `keep` accepts."""
        from torch.profiler import ProfilerActivity, profile
        for _ in range(3):
            fn()
        spans = []
        for _ in range(calls):
            self.flush_l2()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn()
                torch.cuda.synchronize()
            ev = [e for e in prof.events() if e.device_type.name == "CUDA" and keep(e.name)]
            if ev:
                spans.append(sum(e.time_range.end - e.time_range.start for e in ev))
        return statistics.median(spans) if spans else float("nan")

    @staticmethod
    def host_ms(fn, calls=1000, warmup=50):
        for _ in range(warmup):
            fn()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        return (time.perf_counter() - t0) * 1e3 / calls

    def copy_GBps(self, nbytes):
        """A device-to-device copy moving `nbytes` (read plus write), timed the same way."""
        half = max(nbytes // 2, 16)
        src = torch.empty(half, dtype=torch.uint8, device="cuda").random_()
        dst = torch.empty_like(src)
        ms = self.device_ms(lambda: dst.copy_(src))
        return 2 * half / (ms * 1e-3) / 1e9


def stock_and_flyops(timer, fn):
    """Medians of stock and flyops, timed in alternating rounds so that clock and thermal
    drift during the run fall on both alike."""
    return alternating(timer, [lambda: flyops.disabled(), contextlib.nullcontext], fn)


def balanced_orders(n):
    """Orders of n contexts, one per round, in which every context follows every other one
    equally often (a Williams design: n rounds for even n, 2n for odd). A rotation keeps the
    cyclic order, so each context would always follow the same one, and the state a
    compute-bound context leaves (clocks under the power cap) would fall on one neighbour."""
    first, lo, hi = [0], 1, n - 1
    while len(first) < n:
        first.append(lo)
        lo += 1
        if len(first) < n:
            first.append(hi)
            hi -= 1
    rows = [[(c + r) % n for c in first] for r in range(n)]
    return rows if n % 2 == 0 else rows + [row[::-1] for row in rows]


def rounds_of(n):
    """Rounds `alternating` runs for n contexts: at least ROUNDS, and whole balanced designs."""
    orders = len(balanced_orders(n))
    return -(-max(ROUNDS, orders) // orders) * orders


def alternating(timer, contexts, fn):
    """Medians of fn under each context (a callable returning a context manager), timed in
    rounds (at least ROUNDS, and a whole balanced design) whose orders put each context
    after each other one equally often, and first equally often."""
    orders = balanced_orders(len(contexts))
    rounds = rounds_of(len(contexts))
    per_round = -(-timer.reps // rounds)
    samples = [[] for _ in contexts]
    for r in range(rounds):
        warm = timer.warmup if r == 0 else 2
        for c in orders[r % len(orders)]:
            with contexts[c]():
                samples[c] += timer.samples(fn, per_round, warm)
    return tuple(statistics.median(x) for x in samples)


def routed(op, fn):
    """'flyops' or 'stock': where one call of fn went, from flyops.stats()."""
    before = flyops.stats()[op]["flyops"]
    fn()
    torch.cuda.synchronize()
    return "flyops" if flyops.stats()[op]["flyops"] > before else "stock"


def max_rel_err(out, ref):
    ref = ref.double()
    denom = ref.abs().max().item() or 1.0
    return float((out.double() - ref).abs().max().item() / denom)


def git_commit():
    if os.environ.get("FLYOPS_COMMIT"):
        return os.environ["FLYOPS_COMMIT"]
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def header(op, timer):
    return {
        "op": op,
        "device": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "method": timer.method(),
        "cases": [],
    }


def results_dir(out):
    if out:
        return out
    name = torch.cuda.get_device_name().lower()
    gpu = "h200" if "h200" in name else "h100" if "h100" in name else name.replace(" ", "_")
    return os.path.join("bench", "results", gpu)


def write(result, out_dir, stem):
    os.makedirs(out_dir, exist_ok=True)
    path = os.path.join(out_dir, f"{stem}.json")
    with open(path, "w") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    return path


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    if not xs:
        return float("nan")
    p = 1.0
    for x in xs:
        p *= x
    return p ** (1.0 / len(xs))


def finish_speedup_axes(ax, sel, labels, title, fontsize=6):
    """The shared look of one pass's speedup panel: log scale, the 1x line, a tick per case,
    the geomean in the title."""
    ax.set_yscale("log")
    ax.axhline(1.0, color="gray", lw=0.8)
    ax.set_xticks(range(len(sel)))
    ax.set_xticklabels(labels, rotation=90, fontsize=fontsize)
    ax.set_title(f"{title}: geomean {geomean([c['speedup'] for c in sel]):.2f}x")
    ax.legend(fontsize=7, loc="upper left")
