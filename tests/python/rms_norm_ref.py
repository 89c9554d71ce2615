"""float64 references for the GPU tests, and the error rule of DEVELOPERS.md:
our max error against float64 is at most 2x stock's in the same dtype, plus a rounding term."""

import math

import torch

UNIT_ROUNDOFF = {torch.float32: 2.0**-24, torch.float16: 2.0**-11, torch.bfloat16: 2.0**-8}


def fwd(x, w, eps):
    x64 = x.double()
    rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    y = x64 * rstd
    return (y * w.double() if w is not None else y), rstd


def bwd(dy, x, w, eps):
    """dx and dw from float64 statistics (not the kernels' fp32 rstd)."""
    x64, dy64 = x.double(), dy.double()
    rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
    g = dy64 * w.double() if w is not None else dy64
    coef = rstd * rstd * (g * x64).mean(-1, keepdim=True)
    dx = rstd * (g - x64 * coef)
    dw = (dy64 * x64 * rstd).reshape(-1, x.shape[-1]).sum(0) if w is not None else None
    return dx, dw


def max_err(out, ref):
    if out.numel() == 0:
        return 0.0
    return float((out.double() - ref).abs().max().item())


def check(ours, stock, ref, dtype, terms):
    """ours within 2x stock's error plus rounding: one unit of the output format plus fp32
    accumulation over `terms` summands, both at the reference's largest magnitude."""
    assert ours.shape == ref.shape and ours.dtype == stock.dtype, (ours.shape, ref.shape, ours.dtype)
    if ours.numel() == 0:
        return
    assert not torch.isnan(ours).any(), "NaN in output (unwritten or wrong)"
    scale = float(ref.abs().max().item())
    rounding = scale * (UNIT_ROUNDOFF[dtype] + 4 * 2.0**-24 * math.sqrt(max(terms, 1)))
    e_ours, e_stock = max_err(ours, ref), max_err(stock, ref)
    assert e_ours <= 2 * e_stock + rounding, f"error {e_ours:.3e} vs stock {e_stock:.3e} (+{rounding:.3e})"
