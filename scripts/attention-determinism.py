#!/usr/bin/env python3
"""Which attention outputs repeat bit for bit: flyops' forward and backward forced, the same
inputs three times per shape, the largest difference of out, dq, dk, dv from the first run,
with dQ's adds unordered (backward force 1) and in turns (force 3, the core's deterministic
mode). Unordered, dq may differ and out, dk, dv must not; in turns, nothing may differ."""
import torch
import torch.nn.functional as F

import flyops  # noqa: F401  (registers the overrides)

SHAPES = ((2, 8, 2, 777, False), (2, 8, 8, 777, False), (1, 2, 2, 777, False), (2, 8, 2, 777, True))


def repeat(mode, D, B, H, Hkv, L, causal, runs=3):
    torch.ops.flyops._attention_backward_force(mode)
    q, k, v = (torch.randn(B, h, L, D, device="cuda", dtype=torch.bfloat16, requires_grad=True) for h in (H, Hkv, Hkv))
    go = torch.randn(B, H, L, D, device="cuda", dtype=torch.bfloat16)
    results = []
    for _ in range(runs):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=H != Hkv)
        results.append((out.detach().clone(),) + torch.autograd.grad(out, (q, k, v), go))
    return [max((r[i].float() - results[0][i].float()).abs().max().item() for r in results) for i in range(4)]


def main():
    torch.ops.flyops._attention_force(1)
    torch.manual_seed(0)
    try:
        for mode in (1, 3):
            for D in (64, 128):
                for shape in SHAPES:
                    d = repeat(mode, D, *shape)
                    print(f"backward force {mode} D={D} (B, H, Hkv, L, causal)={shape}: max difference from run 0: "
                          f"out {d[0]:.3g} dq {d[1]:.3g} dk {d[2]:.3g} dv {d[3]:.3g}", flush=True)
    finally:
        torch.ops.flyops._attention_force(0)
        torch.ops.flyops._attention_backward_force(0)


if __name__ == "__main__":
    main()
