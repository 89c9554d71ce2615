"""Kernel timeline of single torch.topk calls (scripts only): for each case ROWSxN:K the
kernels of one call, their start relative to the call's first kernel and their duration
(torch.profiler, CUPTI), L2 flushed before the call. Under the profiler the kernels
launched dependent (PDL) did not overlap their predecessors: on an H100 the stream began
~7 us after the screen's end, where the grid trace (scripts/topk-grid-trace.py, no
profiler) has it start 0.5 us after the screen's start. So the starts and gaps here are
not the plain call's; the durations are each kernel's alone."""
import sys

import torch
from torch.profiler import ProfilerActivity, profile

import flyops  # noqa: F401
from flyops.bench.common import Timer


def main():
    dtypes = [torch.float32, torch.bfloat16]
    cases = [tuple(int(v) for v in a.replace(":", "x").split("x")) for a in sys.argv[1:]]
    timer = Timer()  # for its L2 flush only
    torch.manual_seed(1)
    for dtype in dtypes:
        for rows, n, k in cases:
            x = torch.randn(rows, n, device="cuda").to(dtype)
            for _ in range(3):
                torch.topk(x, k)
            spans = []
            for rep in range(3):
                timer.flush_l2()
                torch.cuda.synchronize()
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    torch.topk(x, k)
                    torch.cuda.synchronize()
                ev = sorted((e for e in prof.events() if e.device_type.name == "CUDA" and "flyops" in e.name),
                            key=lambda e: e.time_range.start)
                spans.append(ev)
            # the call with the shortest span is printed
            ev = min(spans, key=lambda v: v[-1].time_range.end - v[0].time_range.start if v else 1e9)
            if not ev:
                continue
            t0 = ev[0].time_range.start
            total = max(e.time_range.end for e in ev) - t0
            print(f"{str(dtype)[6:]} {rows}x{n} k={k}: {total:.1f} us")
            for e in ev:
                s, d = e.time_range.start - t0, e.time_range.end - e.time_range.start
                print(f"   {s:7.1f} +{d:6.1f}  {e.name[:90]}")


if __name__ == "__main__":
    main()
