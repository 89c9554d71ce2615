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


class Grad:
    """float64 gradients, with the magnitudes of the terms each one is computed from: both
    dx = rstd * (g - x * coef) and dw = sum over rows can cancel, and fp32 rounding scales
    with the terms, not with the (possibly tiny) result."""

    def __init__(self, dy, x, w, eps):
        x64, dy64 = x.double(), dy.double()
        rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + eps)
        g = dy64 * w.double() if w is not None else dy64
        coef = rstd * rstd * (g * x64).mean(-1, keepdim=True)
        self.dx = rstd * (g - x64 * coef)
        terms = rstd * (g.abs() + (x64 * coef).abs())
        self.dx_scale = float(terms.max().item()) if terms.numel() else 0.0
        if w is not None:
            per_row = (dy64 * x64 * rstd).reshape(-1, x.shape[-1])
            self.dw = per_row.sum(0)
            self.dw_scale = float(per_row.abs().sum(0).max().item()) if per_row.numel() else 0.0
        else:
            self.dw, self.dw_scale = None, 0.0


def bwd(dy, x, w, eps):
    g = Grad(dy, x, w, eps)
    return g.dx, g.dw


def max_err(out, ref):
    if out.numel() == 0:
        return 0.0
    return float((out.double() - ref).abs().max().item())


def check(ours, stock, ref, dtype, terms, scale=None):
    """ours within 2x stock's error plus rounding: one unit of the output format at the
    reference's largest magnitude, plus fp32 accumulation over `terms` summands at `scale`
    (the largest magnitude of the summed terms; default the reference's)."""
    assert ours.shape == ref.shape and ours.dtype == stock.dtype, (ours.shape, ref.shape, ours.dtype)
    if ours.numel() == 0:
        return
    assert not torch.isnan(ours).any(), "NaN in output (unwritten or wrong)"
    top = float(ref.abs().max().item())
    scale = top if scale is None else scale
    rounding = top * UNIT_ROUNDOFF[dtype] + scale * 4 * 2.0**-24 * math.sqrt(max(terms, 1))
    e_ours, e_stock = max_err(ours, ref), max_err(stock, ref)
    assert e_ours <= 2 * e_stock + rounding, f"error {e_ours:.3e} vs stock {e_stock:.3e} (+{rounding:.3e})"
