"""TopK: flyops against stock PyTorch on the issue's shape set.

Passes: `sampling` (rows x vocabulary, k up to 1024), `routing` (MoE: tokens x experts,
k up to 8), `huge` (one row of 16M), `host` (1000 back-to-back single-row sampling calls,
wall clock, host cost included). Bytes counted: the input read once (outputs are tiny).
Every case also checks that flyops' values equal stock's bitwise and its indices gather them.
"""

import torch

import flyops

from . import common

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
SAMPLING_ROWS = (1, 64, 256)
SAMPLING_N = (32000, 128256, 151936, 262144)
SAMPLING_K = (1, 20, 50, 1024)
ROUTING_ROWS = (1, 4096, 16384, 65536)
ROUTING_N = (8, 64, 128, 256)
ROUTING_K = (1, 2, 6, 8)
HUGE = (1, 1 << 24, 100)
HOST = (1, 128256, 50)
PEAK_GBPS = 4200.0  # the H200's copy rate the issue counts against
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}


def shapes(quick=False):
    out = []
    for dt in DTYPES:
        for r in SAMPLING_ROWS:
            for n in SAMPLING_N:
                for k in SAMPLING_K:
                    if not quick or (n in (128256, 262144) and k in (1, 50, 1024)):
                        out.append(("sampling", r, n, k, dt))
        for r in ROUTING_ROWS:
            for n in ROUTING_N:
                for k in ROUTING_K:
                    if not quick or (n in (64, 256) and k in (1, 8)):
                        out.append(("routing", r, n, k, dt))
        out.append(("huge",) + HUGE + (dt,))
    return out


def _matches_stock(x, k):
    """Bitwise: same sorted values, and indices that gather them."""
    ov, oi = torch.topk(x, k)
    with flyops.disabled():
        sv, _ = torch.topk(x, k)
    iv = INT_VIEW[x.dtype]
    gathered = x.gather(-1, oi).view(iv)
    same = torch.equal(ov.view(iv), sv.view(iv)) and torch.equal(gathered, ov.view(iv))
    return bool(same)


def _row(name, pass_, x, k, dtype_name, fn, stock_ms, ours_ms):
    """The fields every case has."""
    return {
        "name": name,
        "pass": pass_,
        "params": {"rows": x.size(0), "N": x.size(1), "k": k, "dtype": dtype_name},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "routed": common.routed("topk", fn),
        "kernel": torch.ops.flyops._route_topk(x, k),
    }


def case(timer, pass_, rows, n, k, dtype_name):
    dtype = DTYPES[dtype_name]
    x = torch.randn(rows, n, device="cuda", dtype=torch.float32).to(dtype)
    fn = lambda: torch.topk(x, k)  # noqa: E731
    stock_ms, ours_ms = common.stock_and_flyops(timer, fn)
    nbytes = x.numel() * x.element_size()
    gbps = nbytes / (ours_ms * 1e-3) / 1e9
    return {
        **_row(f"{pass_} {dtype_name} rows={rows} N={n} k={k}", pass_, x, k, dtype_name, fn, stock_ms, ours_ms),
        "bytes_read": nbytes,
        "flyops_GBps": round(gbps, 1),
        "stock_GBps": round(nbytes / (stock_ms * 1e-3) / 1e9, 1),
        "frac_of_4200GBps": round(gbps / PEAK_GBPS, 3),
        "matches_stock": _matches_stock(x, k),
    }


def host_case(timer, dtype_name):
    rows, n, k = HOST
    x = torch.randn(rows, n, device="cuda", dtype=torch.float32).to(DTYPES[dtype_name])
    fn = lambda: torch.topk(x, k)  # noqa: E731
    with flyops.disabled():
        stock_ms = timer.host_ms(fn)
    ours_ms = timer.host_ms(fn)
    return _row(f"host {dtype_name} rows={rows} N={n} k={k} x1000", "host", x, k, dtype_name, fn,
                stock_ms, ours_ms)


def run(timer, quick=False):
    result = common.header("topk", timer)
    result["peak_GBps"] = PEAK_GBPS
    for pass_, rows, n, k, dt in shapes(quick):
        c = case(timer, pass_, rows, n, k, dt)
        print(f"{c['name']:48s} stock {c['stock_ms']:.4f} flyops {c['flyops_ms']:.4f} ms "
              f"{c['speedup']:6.2f}x {c['flyops_GBps']:7.0f} GB/s {c['kernel']}"
              f"{'' if c['matches_stock'] else '  MISMATCH'}", flush=True)
        result["cases"].append(c)
        torch.cuda.empty_cache()
    for dt in DTYPES:
        result["cases"].append(host_case(timer, dt))
    result["summary"] = summarize(result)
    return result


def summarize(result):
    dev = [c for c in result["cases"] if c["pass"] != "host"]
    big = [c for c in dev if c["bytes_read"] >= 64 * 2**20]
    slow = lambda c: c["bytes_read"] / (c["flyops_ms"] * 1e-3) < 0.5 * PEAK_GBPS * 1e9  # noqa: E731
    return {
        "geomean_speedup": round(common.geomean([c["speedup"] for c in dev]), 3),
        "min_speedup": min(c["speedup"] for c in dev),
        "cases": len(dev),
        "cases_below_1x": [c["name"] for c in dev if c["speedup"] < 1.0],
        "routed_to_stock": [c["name"] for c in dev if c["routed"] != "flyops"],
        "mismatches": [c["name"] for c in dev if not c["matches_stock"]],
        "cases_reading_64MB": len(big),
        "min_frac_of_4200GBps_at_64MB": min((c["frac_of_4200GBps"] for c in big), default=None),
        # The bound, from the unrounded rate: 64 MiB itself counts (fp32 64 x 262144).
        "below_half_at_64MB": [c["name"] for c in big if slow(c)],
        # The same bound read with 10^6-byte megabytes: also bf16 256 x 128256 (65.7e6 bytes).
        "below_half_at_64e6_bytes": [c["name"] for c in dev if c["bytes_read"] >= 64e6 and slow(c)],
        "by_pass": {p: round(common.geomean([c["speedup"] for c in dev if c["pass"] == p]), 3)
                    for p in ("sampling", "routing", "huge")},
    }


def summary(result):
    s = result["summary"]
    lines = [f"topk: geomean {s['geomean_speedup']}x over {s['cases']} cases "
             f"(min {s['min_speedup']}x; by pass {s['by_pass']})",
             f"  cases reading >= 64 MB: {s['cases_reading_64MB']}, lowest {s['min_frac_of_4200GBps_at_64MB']} "
             f"of 4.2 TB/s; below half: {s['below_half_at_64MB']}",
             f"  below half at >= 64e6 bytes: {s['below_half_at_64e6_bytes']}",
             f"  below 1x: {s['cases_below_1x']}", f"  routed to stock: {s['routed_to_stock']}",
             f"  mismatches: {s['mismatches']}"]
    for c in result["cases"]:
        if c["pass"] == "host":
            lines.append(f"  {c['name']}: stock {c['stock_ms']*1e3:.1f} us, flyops {c['flyops_ms']*1e3:.1f} us per call")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passes = [p for p in ("sampling", "routing", "huge", "host") if any(c["pass"] == p for c in result["cases"])]
    widths = [max(4, len([c for c in result["cases"] if c["pass"] == p])) for p in passes]
    fig, axes = plt.subplots(len(passes), 1, figsize=(min(40, 0.16 * max(widths) + 4), 3.8 * len(passes)),
                             squeeze=False)
    for ax, p in zip(axes[:, 0], passes):
        sel = [c for c in result["cases"] if c["pass"] == p]
        ax.bar(range(len(sel)), [c["speedup"] for c in sel], color="tab:blue", label="speedup over stock")
        if p != "host":
            ax2 = ax.twinx()
            ax2.plot(range(len(sel)), [c["frac_of_4200GBps"] for c in sel], "o", ms=3, color="tab:orange",
                     label="flyops read rate / 4.2 TB/s")
            ax2.set_ylim(0, 1.05)
            ax2.legend(fontsize=7, loc="upper right")
        common.finish_speedup_axes(ax, sel, [c["name"].split(" ", 1)[1] for c in sel],
                                   f"topk {p} on {result['device']} (torch {result['torch']})", fontsize=5)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


TUNE_SHAPES = [(r, n, k) for r in (1, 64, 256) for n in (32000, 128256, 262144) for k in (1, 50, 1024)] + \
    [(4096, 8192, 64), (1, 1 << 24, 100)] + \
    [(r, n, k) for r in (1, 4096, 65536) for n in (8, 64, 256) for k in (1, 8)]  # group vs warp


def tune(timer):
    """Each cluster size forced on the cluster kernel, two stages, and delegates with 4, 8 and
    16 vectors per group, against stock and the router's pick: the data behind route.cc's
    cluster rule and tuned_table.h."""
    rows_out = []
    for dt, dtype in DTYPES.items():
        for rows, n, k in TUNE_SHAPES:
            x = torch.randn(rows, n, device="cuda", dtype=torch.float32).to(dtype)
            fn = lambda: torch.topk(x, k)  # noqa: E731
            with flyops.disabled():
                stock = timer.device_ms(fn)
            entry = {"rows": rows, "N": n, "k": k, "dtype": dt, "stock_ms": round(stock, 5),
                     "router": torch.ops.flyops._route_topk(x, k), "router_ms": round(timer.device_ms(fn), 5),
                     "forced": {}}
            kinds = [(1, 0), (5, 0)] if n <= 512 else [(2, c) for c in (1, 2, 4, 8, 16)] + [(3, 0)] + \
                ([(4, c) for c in (1, 2, 4, 8, 16)] if k == 1 else [(6, v) for v in (4, 8, 16)])
            for kind, c in kinds:
                torch.ops.flyops._topk_force(kind, c)
                try:
                    name = torch.ops.flyops._route_topk(x, k)
                    if (kind in (2, 4) and f"c{c}>" not in name) or (kind == 3 and "two_stage" not in name) \
                            or (kind == 6 and "delegates" not in name) \
                            or (kind == 1 and "warp" not in name) or (kind == 5 and "group" not in name) \
                            or name in entry["forced"]:
                        continue
                    entry["forced"][name] = round(timer.device_ms(fn), 5)
                finally:
                    torch.ops.flyops._topk_force(-1, 0)
            best = min(entry["forced"].items(), key=lambda kv: kv[1]) if entry["forced"] else (None, None)
            entry["best"] = best[0]
            print(f"{dt} {rows}x{n} k={k}: stock {stock:.4f} router {entry['router']} {entry['router_ms']:.4f} "
                  f"best {best[0]} {best[1]}", flush=True)
            rows_out.append(entry)
            torch.cuda.empty_cache()
    return rows_out
