#!/usr/bin/env python3
"""A training step's halves routed apart: on the benchmark's shapes (bf16, B x L = 16384,
cuDNN as stock), times the forward with grad (stock, flyops forced) and the forward +
backward step under each pairing of stock and flyops kernels, in one process (median of
CUDA events, L2 flushed, alternating rounds). The data behind the training rows of
src/attention/tuned_table.h: whether our forward pays off in front of stock's backward, and
ours in front of ours.

usage (GPU machine): python3 scripts/attention-step-probe.py [--pause | --bwd-alone | --power | --aa] [D:L[:c] ...]   (c: causal)"""
import sys

import torch
import torch.nn.functional as F

import flyops  # noqa: F401  (loads the ops)
from flyops.bench import common
from flyops.bench.attention import HEADS, LENGTHS, TOKENS, forced

# (forward, backward) force modes: 1 flyops, 2 stock.
PAUSE_CYCLES = 0
STEPS = (("stock+stock", 2, 2), ("ours+stock", 1, 2), ("stock+ours", 2, 1), ("ours+ours", 1, 1))


def inputs(D, L):
    """The bench's q, k, v (requiring grad) and an output gradient for head dim D, length L."""
    H, B = HEADS[D], TOKENS // L
    q, k, v = (torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    return q, k, v, torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)


def shapes():
    if len(sys.argv) > 1:
        out = []
        for a in sys.argv[1:]:
            f = a.split(":")
            out.append((int(f[0]), int(f[1]), len(f) > 2 and f[2] == "c"))
        return out
    return [(D, L, c) for D in (64, 128, 256) for L in LENGTHS for c in (False, True)]


def backward_alone(timer, D, L, causal):
    """Stock's backward timed alone (graph retained, L2 flushed before each call) on the
    outputs of stock's forward and of ours: whether what our forward leaves (its output and
    log-sum-exp) slows it, apart from what runs before it."""
    q, k, v, go = inputs(D, L)
    outs = []
    for mode in (2, 1):
        with forced(mode):
            outs.append(F.scaled_dot_product_attention(q, k, v, is_causal=causal))
    side = [0]

    def bwd():
        return torch.autograd.grad(outs[side[0]], (q, k, v), go, retain_graph=True)

    def on(i):
        def ctx():
            side[0] = i
            return forced(2)
        return ctx
    t = common.alternating(timer, [on(0), on(1)], bwd)
    lse = [o.grad_fn._saved_logsumexp if hasattr(o.grad_fn, "_saved_logsumexp") else None for o in outs]
    info = "" if lse[0] is None else (f" lse strides {lse[0].stride()} / {lse[1].stride()}, max |diff| "
                                      f"{(lse[0] - lse[1]).abs().max().item():.2e}")
    print(f"D={D} L={L} {'causal' if causal else 'full':6s} stock backward alone: on stock's forward {t[0]:.4f} "
          f"ms, on ours {t[1]:.4f} ms ({t[0] / t[1]:.3f}x); out strides {outs[0].stride()} / {outs[1].stride()}"
          + info, flush=True)


def power(D, L, causal):
    """Sustained forward with grad (about a second a side, NVML read every 10 ms; scripts/
    gemm-power.py's sampler), stock's then ours then again: time, SM clock and board power."""
    import importlib.util
    import pathlib

    import pynvml
    spec = importlib.util.spec_from_file_location("gemm_power", pathlib.Path(__file__).with_name("gemm-power.py"))
    gp = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gp)
    pynvml.nvmlInit()
    h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
    q, k, v, _ = inputs(D, L)
    for name, mode in (("stock", 2), ("ours", 1), ("stock", 2), ("ours", 1)):
        with forced(mode):
            ms, mhz, watts = gp.sustained(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal), h)
        print(f"D={D} L={L} {'causal' if causal else 'full':6s} forward {name:5s} {ms:.4f} ms SM {mhz:6.0f} MHz "
              f"{watts:5.0f} W", flush=True)


def a_a(timer, D, L, causal):
    """The step's spread under the bench's alternating rounds: stock three times over, and our
    forward with stock's backward, as four contexts."""
    q, k, v, go = inputs(D, L)
    t = common.alternating(timer, [lambda: forced(2), lambda: forced(2), lambda: forced(1, 2), lambda: forced(2)],
                           lambda: torch.autograd.grad(F.scaled_dot_product_attention(q, k, v, is_causal=causal),
                                                       (q, k, v), go))
    print(f"D={D} L={L} {'causal' if causal else 'full':6s} step A/A: stock {t[0]:.4f} {t[1]:.4f} {t[3]:.4f} ms, "
          f"ours+stock {t[2]:.4f} ({t[0] / t[2]:.3f}x of the first)", flush=True)


def main():
    timer = common.Timer(reps=30, warmup=5)
    torch.manual_seed(0)
    mode = {"--power": power, "--aa": lambda *a: a_a(timer, *a)}.get(sys.argv[1] if len(sys.argv) > 1 else "")
    if mode is not None:
        del sys.argv[1]
        for shape in shapes():
            mode(*shape)
        return
    global PAUSE_CYCLES
    if sys.argv[1:2] == ["--pause"]:
        del sys.argv[1]
        PAUSE_CYCLES = 2_000_000  # ~1 ms at the H200's clocks
    if sys.argv[1:2] == ["--bwd-alone"]:
        del sys.argv[1]
        for D, L, causal in shapes():
            backward_alone(timer, D, L, causal)
        return
    for D, L, causal in shapes():
        q, k, v, go = inputs(D, L)

        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal)

        def step():
            out = fwd()
            if PAUSE_CYCLES:  # --pause: the GPU idles between the halves (power and clocks settle)
                torch.cuda._sleep(PAUSE_CYCLES)
            return torch.autograd.grad(out, (q, k, v), go)

        f_stock, f_ours = common.alternating(timer, [lambda: forced(2), lambda: forced(1)], fwd)
        steps = common.alternating(timer, [lambda f=f, b=b: forced(f, b) for _, f, b in STEPS], step)
        base = steps[0]
        cols = "  ".join(f"{name} {ms:.4f} ({base / ms:.3f}x)" for (name, _, _), ms in zip(STEPS, steps))
        print(f"D={D} L={L} {'causal' if causal else 'full':6s} fwd stock {f_stock:.4f} ours {f_ours:.4f} "
              f"({f_stock / f_ours:.3f}x) | step {cols}", flush=True)


if __name__ == "__main__":
    main()
