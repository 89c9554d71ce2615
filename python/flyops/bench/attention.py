"""Attention: flyops against stock PyTorch's default SDPA backend (cuDNN on the H200) and
its FlashAttention-2 backend (`fa2_ms`), in one process, bf16, 16384 tokens per batch
(B x L = 16384): 16 heads of 128, 32 of 64 or 8 of 256.

Passes: `fwd` (inputs require grad, as in training: the log-sum-exp is computed),
`fwd_infer` (no grad), `bwd` (the backward alone: each side's own forward once, then its
backward timed with the graph retained), `fwdbwd` (forward and backward through torch.autograd.grad; forced,
both are flyops').
Each case times stock, the router (`flyops_ms`: what a user gets), flyops' kernels forced
past the router (`forced_ms`, the data behind src/attention/tuned_table.h), FA2 (`fa2_ms`)
and the router under SDPA's flash backend (`flash_routed_ms`: the flash op's calls, whose
stock kernel is FA2), alternating.
FLOPs: 4 B H L^2 D forward (halved when causal), 2.5x that backward.
"""

import contextlib

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import flyops

from . import common

DTYPE = torch.bfloat16
HEADS = {128: 16, 64: 32, 256: 8}
LENGTHS = (512, 1024, 2048, 4096, 8192, 16384)
TOKENS = 16384
PASSES = ("fwd", "fwd_infer", "bwd", "fwdbwd")
ERR_ROWS = 64


@contextlib.contextmanager
def forced(mode, backward=None):
    """The forward's and the backward's test hooks (the backward's defaults to the forward's;
    3 is its ordered dQ), reset to the router on exit."""
    torch.ops.flyops._attention_force(mode)
    torch.ops.flyops._attention_backward_force(mode if backward is None else backward)
    try:
        yield
    finally:
        torch.ops.flyops._attention_force(0)
        torch.ops.flyops._attention_backward_force(0)


@contextlib.contextmanager
def fa2():
    with flyops.disabled("attention", "attention_backward"), sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        yield


@contextlib.contextmanager
def flash_routed():
    """SDPA's flash backend with flyops on: what a user who picks it (or deterministic mode,
    where SDPA does not pick cuDNN) gets; its calls reach the router as the flash op's."""
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        yield


def shapes(quick=False):
    dims = (128,) if quick else (64, 128, 256)
    lengths = (1024, 4096, 16384) if quick else LENGTHS
    return [(D, L, causal) for D in dims for L in lengths for causal in (False, True)]


def flops(B, H, L, D, causal, pass_):
    f = 4.0 * B * H * L * L * D / (2 if causal else 1)
    return f * {"fwdbwd": 3.5, "bwd": 2.5}.get(pass_, 1.0)


def errors(q, k, v, causal):
    """Largest error relative to the reference's largest magnitude, flyops' (forced) and
    stock's, on up to ERR_ROWS sampled query rows of batch entry 0, head 0, against float64."""
    L, D = q.size(2), q.size(3)
    rows = torch.randperm(L, device="cuda")[:ERR_ROWS].sort().values
    s = (q[0, 0, rows].double() @ k[0, 0].double().t()) / D ** 0.5
    if causal:
        s = s.masked_fill(torch.arange(L, device="cuda")[None, :] > rows[:, None], float("-inf"))
    ref = torch.softmax(s, -1) @ v[0, 0].double()
    with torch.no_grad(), forced(1):
        ours = F.scaled_dot_product_attention(q, k, v, is_causal=causal)[0, 0, rows]
    with torch.no_grad(), flyops.disabled("attention"):
        stock = F.scaled_dot_product_attention(q, k, v, is_causal=causal)[0, 0, rows]
    return common.max_rel_err(ours, ref), common.max_rel_err(stock, ref)


def case(timer, pass_, D, L, causal):
    H, B = HEADS[D], TOKENS // L
    grad = pass_ != "fwd_infer"
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=DTYPE, requires_grad=grad) for _ in range(3))
    go = torch.randn(B, H, L, D, device="cuda", dtype=DTYPE)
    contexts = [lambda: flyops.disabled("attention", "attention_backward"), contextlib.nullcontext, lambda: forced(1),
                fa2, flash_routed]
    side = [0]
    if pass_ == "bwd":
        # Each side's backward node comes from its own forward (FA2's saves another op's state).
        grads = []
        for i, ctx in enumerate(contexts):
            with ctx():
                out_i = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            grads.append(lambda out_i=out_i: torch.autograd.grad(out_i, (q, k, v), go, retain_graph=True))

        def fn():
            return grads[side[0]]()

        def in_side(i, base=tuple(contexts)):
            @contextlib.contextmanager
            def ctx():
                side[0] = i
                with base[i]():
                    yield
            return ctx
        contexts = [in_side(i) for i in range(len(contexts))]
    elif pass_ == "fwdbwd":
        def fn():
            out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            return torch.autograd.grad(out, (q, k, v), go)
    elif pass_ == "fwd":
        def fn():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    else:
        def fn():
            with torch.no_grad():
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    stock_ms, ours_ms, forced_ms, fa2_ms, flash_ms = common.alternating(timer, contexts, fn)
    side[0] = 1  # the router's
    routed = common.routed("attention_backward" if pass_ == "bwd" else "attention", fn)  # this pass's own call
    routed_bwd = None
    if pass_ == "bwd":
        routed_bwd = routed
    elif pass_ == "fwdbwd":
        routed_bwd = common.routed("attention_backward", fn)
    err, stock_err = errors(q.detach(), k.detach(), v.detach(), causal)
    f = flops(B, H, L, D, causal, pass_)
    return {
        "name": f"{pass_} bf16 B={B} H={H} L={L} D={D}" + (" causal" if causal else ""),
        "pass": pass_,
        "params": {"B": B, "H": H, "Hkv": H, "L": L, "D": D, "causal": causal, "dtype": "bfloat16"},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "forced_ms": round(forced_ms, 5),
        "fa2_ms": round(fa2_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "forced_speedup": round(stock_ms / forced_ms, 3),
        "speedup_vs_fa2": round(fa2_ms / ours_ms, 3),
        "flash_routed_ms": round(flash_ms, 5),
        "flash_routed_vs_fa2": round(fa2_ms / flash_ms, 3),
        "routed": routed,
        "routed_backward": routed_bwd,
        "kernel": torch.ops.flyops._route_attention(q, k, v, False, causal, grad),
        "flyops_tflops": round(f / (ours_ms * 1e-3) / 1e12, 1),
        "stock_tflops": round(f / (stock_ms * 1e-3) / 1e12, 1),
        "forced_tflops": round(f / (forced_ms * 1e-3) / 1e12, 1),
        "fa2_tflops": round(f / (fa2_ms * 1e-3) / 1e12, 1),
        "max_rel_err": err,
        "stock_max_rel_err": stock_err,
    }


def run(timer, quick=False):
    result = common.header("attention", timer)
    rounds = common.rounds_of(5)
    result["method"] += (f"; here five sides alternate, in {rounds} rounds of {-(-timer.reps // rounds)} whose orders "
                         "put each side after each other one equally often: stock's default backend (flyops "
                         "disabled), the router, flyops forced past the router (forced_ms: forward and backward), "
                         "stock's FlashAttention-2 backend (fa2_ms), the router under that backend "
                         "(flash_routed_ms); errors on 64 sampled query rows of one head against float64")
    for pass_ in PASSES:
        for D, L, causal in shapes(quick):
            c = case(timer, pass_, D, L, causal)
            print(f"{c['name']:44s} stock {c['stock_ms']:.4f} flyops {c['flyops_ms']:.4f} forced {c['forced_ms']:.4f} "
                  f"fa2 {c['fa2_ms']:.4f} ms  forced {c['forced_speedup']:5.2f}x  {c['forced_tflops']:6.1f} vs "
                  f"{c['stock_tflops']:6.1f} TFLOP/s  {c['routed']}", flush=True)
            result["cases"].append(c)
            torch.cuda.empty_cache()
    result["summary"] = summarize(result)
    return result


def summarize(result):
    cases = result["cases"]
    by = {p: [c for c in cases if c["pass"] == p] for p in PASSES}
    d128_long = [c for c in by.get("fwd", [])
                 if c["params"]["D"] == 128 and not c["params"]["causal"] and c["params"]["L"] >= 4096]
    return {
        "geomean_speedup": round(common.geomean([c["speedup"] for c in cases]), 3),
        "by_pass": {p: {"speedup": round(common.geomean([c["speedup"] for c in cs]), 3),
                        "forced_speedup": round(common.geomean([c["forced_speedup"] for c in cs]), 3),
                        "forced_vs_fa2": round(common.geomean([c["fa2_ms"] / c["forced_ms"] for c in cs]), 3),
                        "speedup_vs_fa2": round(common.geomean([c["speedup_vs_fa2"] for c in cs]), 3),
                        "flash_routed_vs_fa2": round(common.geomean([c["flash_routed_vs_fa2"] for c in cs]), 3)}
                    for p, cs in by.items() if cs},
        # the 650 TFLOP/s: our kernel (forced past the router), and through the router
        # (which may send the shape to stock: then it is stock's figure)
        "tflops_d128_long_full": {c["params"]["L"]: c["forced_tflops"] for c in d128_long},
        "tflops_d128_long_full_router": {c["params"]["L"]: c["flyops_tflops"] for c in d128_long},
        "routed_to_flyops": sum(c["routed"] == "flyops" for c in cases),
        "cases": len(cases),
        # routed to flyops and slower than stock (the cases the router leaves to stock time
        # stock against itself: 0.93-1.0x between identical sides)
        "routed_below_1x": [c["name"] for c in cases if c["routed"] == "flyops" and c["speedup"] < 1.0],
        "flash_routed_below_1x": [c["name"] for c in cases if c["flash_routed_vs_fa2"] < 1.0],
        "error_outliers": [c["name"] for c in cases if c["max_rel_err"] > 2 * c["stock_max_rel_err"] + 2.0 ** -8],
    }


def summary(result):
    s = result["summary"]
    lines = [f"attention: geomean {s['geomean_speedup']}x over {s['cases']} cases through the router "
             f"({s['routed_to_flyops']} routed to flyops)"]
    for p, d in s["by_pass"].items():
        lines.append(f"  {p}: router {d['speedup']}x, forced {d['forced_speedup']}x over stock; "
                     f"vs FA2 {d['speedup_vs_fa2']}x (forced {d['forced_vs_fa2']}x); flash backend through the "
                     f"router vs FA2 {d['flash_routed_vs_fa2']}x")
    lines.append(f"  fwd TFLOP/s at D=128, full, L >= 4096: flyops forced {s['tflops_d128_long_full']}, "
                 f"through the router {s.get('tflops_d128_long_full_router')}")
    lines.append(f"  routed to flyops and below 1x: {s['routed_below_1x']}; flash backend below FA2: "
                 f"{s['flash_routed_below_1x']}")
    lines.append(f"  errors above 2x stock's: {s['error_outliers']}")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passes = [p for p in PASSES if any(c["pass"] == p for c in result["cases"])]
    fig, axes = plt.subplots(len(passes), 1, figsize=(14, 3.8 * len(passes)), squeeze=False)
    for ax, p in zip(axes[:, 0], passes):
        sel = [c for c in result["cases"] if c["pass"] == p]
        ax.bar(range(len(sel)), [c["speedup"] for c in sel],
               color=["tab:blue" if c["routed"] == "flyops" else "tab:gray" for c in sel],
               label="speedup over stock (gray: routed to stock)")
        ax2 = ax.twinx()
        for key, mark, color in (("forced", "o", "tab:orange"), ("stock", "x", "tab:green"), ("fa2", "+", "tab:red")):
            ax2.plot(range(len(sel)), [c[f"{key}_tflops"] for c in sel], mark, ms=4, color=color,
                     label=f"{key} TFLOP/s")
        ax2.set_ylim(0, None)
        ax2.legend(fontsize=7, loc="upper right")
        common.finish_speedup_axes(ax, sel, [c["name"].split(" ", 2)[2] for c in sel],
                                   f"attention {p} on {result['device']} (torch {result['torch']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
