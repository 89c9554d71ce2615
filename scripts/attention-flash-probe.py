#!/usr/bin/env python3
"""Where PyTorch's SDPA runs its FlashAttention-2 op (the flash backend chosen by the user, and
deterministic mode), against flyops on the same op, in one process: which stock ops a
deterministic training step calls and whether their gradients repeat bit for bit, then
times (median of CUDA events, L2 flushed, alternating rounds) off the benchmark's set: fp16,
grouped heads, Lq != Lk, short and single sequences. The data behind the flash classes of
src/attention/tuned_table.h."""
import contextlib
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils._python_dispatch import TorchDispatchMode

import flyops
from flyops.bench import common
from flyops.bench.attention import forced


class OpNames(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = str(func.overloadpacket)
        if "attention" in name:
            self.names.append(name)
        return func(*args, **(kwargs or {}))


def inputs(B, H, Hkv, Lq, Lk, D, dtype, grad=True):
    q = torch.randn(B, H, Lq, D, device="cuda", dtype=dtype, requires_grad=grad)
    k, v = (torch.randn(B, Hkv, Lk, D, device="cuda", dtype=dtype, requires_grad=grad) for _ in range(2))
    return q, k, v, torch.randn(B, H, Lq, D, device="cuda", dtype=dtype)


def step(q, k, v, go, causal):
    out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=q.size(1) != k.size(1))
    return (out,) + torch.autograd.grad(out, (q, k, v), go)


def deterministic_part(timer):
    torch.use_deterministic_algorithms(True)
    try:
        q, k, v, go = inputs(2, 16, 16, 2048, 2048, 128, torch.bfloat16)
        with flyops.disabled("attention", "attention_backward"):
            with OpNames() as names:
                step(q, k, v, go, True)
            print("deterministic mode, stock, ops called:", sorted(set(names.names)))
            runs = [step(q, k, v, go, True) for _ in range(3)]
            print("deterministic mode, stock, max difference from run 0 (out dq dk dv):",
                  [max((r[i].float() - runs[0][i].float()).abs().max().item() for r in runs) for i in range(4)])
        with OpNames() as names:
            step(q, k, v, go, True)
        print("deterministic mode, flyops router, ops called:", sorted(set(names.names)))
        for D, H in ((64, 32), (128, 16)):
            for L in (1024, 4096, 8192):
                for causal in (False, True):
                    q, k, v, go = inputs(16384 // L, H, H, L, L, D, torch.bfloat16)
                    ms = common.alternating(timer, [lambda: flyops.disabled("attention", "attention_backward"),
                                                    lambda: forced(1, 3), contextlib.nullcontext],
                                            lambda: step(q, k, v, go, causal))
                    print(f"deterministic fwd+bwd D={D} L={L} causal={causal}: stock {ms[0]:.4f} ms, flyops ordered "
                          f"{ms[1]:.4f} ({ms[0] / ms[1]:.2f}x), router {ms[2]:.4f} ({ms[0] / ms[2]:.2f}x)", flush=True)
    finally:
        torch.use_deterministic_algorithms(False)


SHAPES = (  # (B, H, Hkv, Lq, Lk, D, dtype, causal)
    (4, 32, 8, 4096, 4096, 128, torch.bfloat16, True),
    (4, 32, 8, 4096, 4096, 128, torch.bfloat16, False),
    (4, 32, 4, 4096, 4096, 64, torch.bfloat16, True),
    (4, 16, 16, 4096, 4096, 128, torch.float16, True),
    (4, 16, 16, 4096, 4096, 128, torch.float16, False),
    (8, 32, 32, 2048, 2048, 64, torch.float16, False),
    (4, 8, 8, 4096, 4096, 256, torch.float16, True),
    (4, 16, 16, 1024, 4096, 128, torch.bfloat16, False),
    (4, 16, 16, 4096, 1024, 128, torch.bfloat16, False),
    (1, 16, 16, 2048, 2048, 128, torch.bfloat16, True),
    (1, 16, 16, 512, 512, 128, torch.bfloat16, True),
    (1, 16, 16, 128, 128, 128, torch.bfloat16, False),
    (8, 32, 8, 1, 4096, 128, torch.bfloat16, False),
    (8, 32, 8, 16, 4096, 128, torch.bfloat16, False),
    (64, 16, 16, 256, 256, 64, torch.bfloat16, True),
)


def flash_part(timer):
    for B, H, Hkv, Lq, Lk, D, dtype, causal in SHAPES:
        name = f"B={B} H={H} Hkv={Hkv} Lq={Lq} Lk={Lk} D={D} {str(dtype)[6:]}{' causal' if causal else ''}"
        for pass_ in ("fwd_infer", "fwdbwd"):
            grad = pass_ == "fwdbwd"
            q, k, v, go = inputs(B, H, Hkv, Lq, Lk, D, dtype, grad)
            if grad:
                fn = lambda: step(q, k, v, go, causal)  # noqa: E731
            else:
                def fn():
                    with torch.no_grad():
                        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=H != Hkv)
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                try:
                    ms = common.alternating(timer, [lambda: flyops.disabled("attention", "attention_backward"),
                                                    lambda: forced(1, 1), contextlib.nullcontext], fn)
                except RuntimeError as e:
                    print(f"flash {pass_:9s} {name}: {str(e).splitlines()[0][:100]}")
                    continue
            print(f"flash {pass_:9s} {name}: FA2 {ms[0]:.4f} ms, flyops forced {ms[1]:.4f} ({ms[0] / ms[1]:.2f}x), "
                  f"router {ms[2]:.4f} ({ms[0] / ms[2]:.2f}x)", flush=True)
            torch.cuda.empty_cache()


def main():
    timer = common.Timer(reps=20, warmup=3)
    parts = sys.argv[1:] or ["deterministic", "flash"]
    if "deterministic" in parts:
        deterministic_part(timer)
    if "flash" in parts:
        flash_part(timer)


if __name__ == "__main__":
    main()
