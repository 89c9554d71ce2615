"""GEMM: flyops against stock PyTorch (cuBLAS) on the issue's shape set, bf16.

Passes: `square` (flyops' kernel forced past the router, `_gemm_force(1)`, against stock
torch.matmul at 4096^3 and 8192^3), `prefill` (x @ W.t() as F.linear does, M in {2048,
4096, 16384} over Llama-style projections, through the router), `decode` (M in {1, ..., 64}
over the same projections, through the router; also GB/s of weight streaming: N * K * 2
bytes over the time), `odd` (odd shapes, through the router), `host` (1000 back-to-back
decode calls by wall clock, host cost included).

Layouts: "nt" is a row-major [M, K] @ W.t() of a row-major [N, K] weight (nn.Linear),
"nn" both row-major. FLOPs counted: 2 * M * N * K. Every device case also records both
sides' largest error relative to a float64 reference on (up to) 64 sampled rows.
"""

import contextlib

import torch

import flyops

from . import common

DTYPE = torch.bfloat16
DTYPE_NAME = "bfloat16"
PROJ = ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (28672, 8192), (8192, 28672), (128256, 4096))
PREFILL_M = (2048, 4096, 16384)
DECODE_M = (1, 8, 16, 32, 64)
SQUARE = (4096, 8192)
# Odd shapes: small and unaligned ones, and N % 8 != 0 (C's rows not 16-byte aligned), where
# cuBLAS falls back to slower kernels: GPT-2's 50257-entry LM head at prefill and decode.
ODD = ((113, 203, 4096, "nt"), (1000, 1000, 1000, "nn"), (4097, 4097, 4096, "nt"), (777, 1240, 2048, "nn"),
       (3000, 5000, 7000, "nt"), (4097, 4097, 4097, "nn"), (4096, 50257, 768, "nt"), (1, 50257, 768, "nt"),
       (16, 50257, 768, "nt"), (2048, 1001, 4096, "nt"), (8192, 4095, 8192, "nt"), (512, 203, 4096, "nt"))
# Batched odd shapes (batch, M, N, K, layout): attention scores q @ k^T over an odd length,
# as user code writes it (a bmm whose C rows are not 16-byte aligned), and a wide one.
ODD_BATCHED = ((32, 1001, 1001, 128, "nt"), (16, 512, 1001, 64, "nt"), (8, 2048, 4095, 4096, "nt"))
HOST = (1, 4096, 4096, "nt")
QUICK_PROJ = ((4096, 4096), (14336, 4096), (128256, 4096))
ERR_ROWS = 64
# Long calls get fewer repetitions: about this much GPU time per side and case.
BUDGET_MS = 400.0
EST_TFLOPS = 650.0  # for the estimate only (cuBLAS at large sizes, ../shared/anchors)
EST_GBPS = 3500.0
FORCE = {"router": 0, "flyops": 1, "stock": 2}


def shapes(quick=False):
    """(pass, M, N, K, layout, force, batch) for every device case."""
    proj = QUICK_PROJ if quick else PROJ
    out = [("square", s, s, s, "nn", "flyops", 1) for s in SQUARE]
    for m in (PREFILL_M if not quick else (4096,)):
        out += [("prefill", m, n, k, "nt", "router", 1) for n, k in proj]
    for m in (DECODE_M if not quick else (1, 16, 64)):
        out += [("decode", m, n, k, "nt", "router", 1) for n, k in proj]
    out += [("odd", m, n, k, lay, "router", 1) for m, n, k, lay in (ODD if not quick else ODD[:3])]
    out += [("odd", m, n, k, lay, "router", bt) for bt, m, n, k, lay in (ODD_BATCHED if not quick else ())]
    return out


def operands(M, N, K, layout, batch=1):
    """[M, K] @ [K, N] ("nt": the transpose of a row-major [N, K]); batch > 1 adds a
    leading batch dim (torch.matmul then calls bmm)."""
    lead = (batch,) if batch > 1 else ()
    a = torch.randn(*lead, M, K, device="cuda", dtype=DTYPE)
    b = torch.randn(*lead, N, K, device="cuda", dtype=DTYPE).transpose(-1, -2) if layout == "nt" else \
        torch.randn(*lead, K, N, device="cuda", dtype=DTYPE)
    return a, b


@contextlib.contextmanager
def forced(mode, cluster=0):
    """`_gemm_force(mode, cluster)` for the flyops side (the stock side runs in
    flyops.disabled(), which the force does not override); the router again afterwards."""
    torch.ops.flyops._gemm_force(FORCE[mode], cluster)
    try:
        yield
    finally:
        torch.ops.flyops._gemm_force(0)


@contextlib.contextmanager
def budget(timer, est_ms):
    """Fewer repetitions and warm-ups for calls long enough that the median settles anyway."""
    saved = timer.reps, timer.warmup
    if est_ms > 2.0:
        timer.reps = max(9, min(timer.reps, int(BUDGET_MS / est_ms)))
        timer.warmup = max(2, min(timer.warmup, int(100.0 / est_ms)))
    try:
        yield timer.reps
    finally:
        timer.reps, timer.warmup = saved


def estimate_ms(M, N, K, batch=1):
    return batch * max(2.0 * M * N * K / (EST_TFLOPS * 1e12), 2.0 * (M * K + N * K + M * N) / (EST_GBPS * 1e9)) * 1e3


def errors(a, b, fn):
    """Largest error relative to the reference's largest magnitude, flyops' and stock's, on
    up to ERR_ROWS sampled rows of the output (the first batch entry's) against float64."""
    if a.dim() == 3:
        a, b, full = a[0], b[0], fn
        fn = lambda: full()[0]  # noqa: E731
    M = a.size(0)
    rows = torch.arange(M, device="cuda") if M <= ERR_ROWS else \
        torch.randperm(M, device="cuda")[:ERR_ROWS].sort().values
    ours = fn()[rows]
    with flyops.disabled("gemm"):
        stock = fn()[rows]
        ref = a[rows].double() @ b.double()
    return common.max_rel_err(ours, ref), common.max_rel_err(stock, ref)


def tflops(M, N, K, ms, batch=1):
    return round(2.0 * batch * M * N * K / (ms * 1e-3) / 1e12, 1)


def case(timer, pass_, M, N, K, layout, force, batch=1):
    a, b = operands(M, N, K, layout, batch)
    fn = lambda: torch.matmul(a, b)  # noqa: E731
    with forced(force), budget(timer, estimate_ms(M, N, K, batch)) as reps:
        stock_ms, ours_ms = common.stock_and_flyops(timer, fn)
        routed = common.routed("gemm", fn)
        kernel = torch.ops.flyops._route_gemm(a, b)
        err, stock_err = errors(a, b, fn)
    row = {
        "name": f"{pass_} bf16 M={M} N={N} K={K} {layout}" + (f" batch={batch}" if batch > 1 else ""),
        "pass": pass_,
        "params": {"M": M, "N": N, "K": K, "dtype": DTYPE_NAME, "layout": layout, "batch": batch},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "routed": routed,
        "kernel": kernel,
        "forced": force == "flyops",
        "reps": reps,
        "flyops_tflops": tflops(M, N, K, ours_ms, batch),
        "stock_tflops": tflops(M, N, K, stock_ms, batch),
        "max_rel_err": err,
        "stock_max_rel_err": stock_err,
    }
    if pass_ == "decode":
        weight = N * K * a.element_size()
        row["weight_bytes"] = weight
        row["flyops_GBps"] = round(weight / (ours_ms * 1e-3) / 1e9, 1)
        row["stock_GBps"] = round(weight / (stock_ms * 1e-3) / 1e9, 1)
    return row


def host_case(timer):
    M, N, K, layout = HOST
    a, b = operands(M, N, K, layout)
    fn = lambda: torch.matmul(a, b)  # noqa: E731
    # flyops forced past the router, as in the square pass: the host cost of our call path
    # (checks, cached tensor maps, launch) is what this pass is for. Two tries per side,
    # interleaved; the lower counts (wall clock only ever adds noise).
    stock, ours = [], []
    for _ in range(2):
        with flyops.disabled("gemm"):
            stock.append(timer.host_ms(fn))
        with forced("flyops"):
            ours.append(timer.host_ms(fn))
            kernel = torch.ops.flyops._route_gemm(a, b)
    stock_ms, ours_ms = min(stock), min(ours)
    return {
        "name": f"host bf16 M={M} N={N} K={K} {layout} x1000",
        "pass": "host",
        "params": {"M": M, "N": N, "K": K, "dtype": DTYPE_NAME, "layout": layout},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "routed": "flyops",
        "forced": True,
        "kernel": kernel,
        "flyops_us_per_call": round(ours_ms * 1e3, 2),
        "stock_us_per_call": round(stock_ms * 1e3, 2),
    }


def run(timer, quick=False):
    result = common.header("gemm", timer)
    result["method"] += (f"; calls estimated over 2 ms run fewer repetitions (about {BUDGET_MS:.0f} ms per side, "
                         "at least 9; each case records its reps); square forces flyops' kernel past the router "
                         "(_gemm_force(1)), and so does host (1000 back-to-back calls by wall clock, the lower of two tries "
                         "per side), every other pass goes through the router; where the tune pass also times "
                         "forced configs, the three or four sides alternate in rounds of a balanced order (each "
                         "after each other one equally often); errors on up to "
                         f"{ERR_ROWS} sampled output rows against float64")
    for pass_, M, N, K, layout, force, batch in shapes(quick):
        c = case(timer, pass_, M, N, K, layout, force, batch)
        extra = f" {c['flyops_GBps']:7.0f} GB/s" if "flyops_GBps" in c else ""
        print(f"{c['name']:44s} stock {c['stock_ms']:.4f} flyops {c['flyops_ms']:.4f} ms {c['speedup']:6.2f}x "
              f"{c['flyops_tflops']:6.1f} vs {c['stock_tflops']:6.1f} TFLOP/s{extra} {c['kernel']}", flush=True)
        result["cases"].append(c)
        torch.cuda.empty_cache()
    result["cases"].append(host_case(timer))
    result["summary"] = summarize(result)
    return result


def _err_outlier(c):
    return c["max_rel_err"] > 2 * c["stock_max_rel_err"] + 2.0**-8


def summarize(result):
    dev = [c for c in result["cases"] if c["pass"] != "host"]
    routed = [c for c in dev if c["pass"] != "square"]  # what a user gets
    sq = {c["params"]["M"]: c for c in dev if c["pass"] == "square"}
    host = [c for c in result["cases"] if c["pass"] == "host"]
    return {
        "geomean_speedup": round(common.geomean([c["speedup"] for c in routed]), 3),
        "min_speedup": round(min((c["speedup"] for c in routed), default=float("nan")), 3),
        "cases": len(routed),
        "by_pass": {p: round(common.geomean([c["speedup"] for c in dev if c["pass"] == p]), 3)
                    for p in ("square", "prefill", "decode", "odd") if any(c["pass"] == p for c in dev)},
        "tflops_8192": ({"flyops": sq[8192]["flyops_tflops"], "stock": sq[8192]["stock_tflops"]}
                        if 8192 in sq else None),
        "tflops_4096": ({"flyops": sq[4096]["flyops_tflops"], "stock": sq[4096]["stock_tflops"]}
                        if 4096 in sq else None),
        "cases_below_1x": [c["name"] for c in routed if c["speedup"] < 1.0],
        "routed_to_flyops": [c["name"] for c in routed if c["routed"] == "flyops"],
        "error_outliers": [c["name"] for c in dev if _err_outlier(c)],
        "host_us_per_call": ({"flyops": host[0]["flyops_us_per_call"], "stock": host[0]["stock_us_per_call"]}
                             if host else None),
    }


def summary(result):
    s = result["summary"]
    lines = [f"gemm: geomean {s['geomean_speedup']}x over {s['cases']} routed cases "
             f"(min {s['min_speedup']}x; by pass {s['by_pass']})",
             *[f"  {n}^3 (flyops forced): flyops {t['flyops']} vs stock {t['stock']} TFLOP/s"
               for n, t in ((8192, s["tflops_8192"]), (4096, s["tflops_4096"])) if t],
             f"  routed to flyops: {len(s['routed_to_flyops'])} of {s['cases']}",
             f"  below 1x: {s['cases_below_1x']}",
             f"  errors above 2x stock's: {s['error_outliers']}"]
    if s["host_us_per_call"]:
        lines.append(f"  host, 1000 decode calls: stock {s['host_us_per_call']['stock']} us, "
                     f"flyops {s['host_us_per_call']['flyops']} us per call")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passes = [p for p in ("square", "prefill", "decode", "odd", "host") if any(c["pass"] == p for c in result["cases"])]
    widths = [max(4, len([c for c in result["cases"] if c["pass"] == p])) for p in passes]
    fig, axes = plt.subplots(len(passes), 1, figsize=(min(40, 0.3 * max(widths) + 5), 3.8 * len(passes)),
                             squeeze=False)
    for ax, p in zip(axes[:, 0], passes):
        sel = [c for c in result["cases"] if c["pass"] == p]
        ax.bar(range(len(sel)), [c["speedup"] for c in sel],
               color=["tab:blue" if c["routed"] == "flyops" else "tab:gray" for c in sel],
               label="speedup over stock (gray: routed to stock)")
        if p != "host":
            ax2 = ax.twinx()
            key, unit = ("GBps", "GB/s of weight") if p == "decode" else ("tflops", "TFLOP/s")
            ax2.plot(range(len(sel)), [c[f"flyops_{key}"] for c in sel], "o", ms=3, color="tab:orange",
                     label=f"flyops {unit}")
            ax2.plot(range(len(sel)), [c[f"stock_{key}"] for c in sel], "x", ms=3, color="tab:green",
                     label=f"stock {unit}")
            ax2.set_ylim(0, None)
            ax2.legend(fontsize=7, loc="upper right")
        common.finish_speedup_axes(ax, sel, [c["name"].split(" ", 2)[2] for c in sel],
                                   f"gemm {p} on {result['device']} (torch {result['torch']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def tune(timer, passes=("prefill", "decode", "odd")):
    """Stock, the router and flyops' kernel forced past it (single CTAs, and on the wide
    kernel with more than one tile row also CTA pairs sharing B by multicast), on every
    prefill, decode and odd shape (or those of `passes`): the data behind
    src/gemm/tuned_table.h (which shape classes flyops measured faster on)."""
    rows_out = []
    for pass_, M, N, K, layout, _, batch in shapes():
        if pass_ not in passes:
            continue
        a, b = operands(M, N, K, layout, batch)
        fn = lambda: torch.matmul(a, b)  # noqa: E731
        with budget(timer, estimate_ms(M, N, K, batch)):
            with forced("flyops"):
                kernel = torch.ops.flyops._route_gemm(a, b)
            # stock, the router and (where it takes the call) flyops forced, in rotating order
            contexts = [lambda: flyops.disabled("gemm"), contextlib.nullcontext]
            if kernel.startswith("flyops"):
                contexts.append(lambda: forced("flyops", 1))
            pairs = kernel.startswith("flyops_gemm<") and M > 128
            if pairs:
                contexts.append(lambda: forced("flyops", 2))
            ms = common.alternating(timer, contexts, fn)
            stock = ms[0]
            entry = {"pass": pass_, "M": M, "N": N, "K": K, "batch": batch, "dtype": DTYPE_NAME, "layout": layout,
                     "stock_ms": round(stock, 5), "router": torch.ops.flyops._route_gemm(a, b),
                     "router_ms": round(ms[1], 5), "kernel": kernel,
                     "flyops_ms": round(ms[2], 5) if len(ms) > 2 else None,
                     "flyops_pairs_ms": round(ms[3], 5) if pairs else None}
        entry["flyops_faster"] = entry["flyops_ms"] is not None and entry["flyops_ms"] < stock
        print(f"{pass_} M={M} N={N} K={K} {layout} batch={batch}: stock {stock:.4f} flyops {entry['flyops_ms']} "
              f"pairs {entry['flyops_pairs_ms']} router {entry['router']} {entry['router_ms']:.4f}", flush=True)
        rows_out.append(entry)
        torch.cuda.empty_cache()
    return rows_out
