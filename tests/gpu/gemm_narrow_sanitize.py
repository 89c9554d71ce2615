"""The GEMM narrow kernel (src/gemm/gemv.cuh) on a few shapes, for compute-sanitizer's
racecheck and synccheck (scripts/gpu-check; run under `--kernel-name kns=flyops_gemm_gemv`):
one and two 8-wide columns of A, 1-8 K runs a row group, an N tail inside a CTA. Each call
must take the narrow kernel and land within one bf16 rounding of the float64 product plus
fp32 accumulation's bound. No stock GEMM runs here: cuBLAS's bf16 kernels fail under
racecheck ("failed to handle a hardware exception"). Exit code 0 when all do."""
import sys

import torch

import flyops

SHAPES = ((1, 4096, 4096), (5, 1000, 2048), (16, 203, 4096), (9, 4104, 2048), (8, 100, 8192))


def main():
    torch.ops.flyops._gemm_force(1)
    bad = 0
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        route = torch.ops.flyops._route_gemm(a, w.t())
        y = a @ w.t()
        ad, wd = a.double(), w.double()
        want = ad @ wd.t()
        err = float((y.double() - want).abs().max())
        # one bf16 rounding of the largest output, and fp32 sums of K terms
        tol = float(want.abs().max()) * 2.0 ** -8 + k * 2.0 ** -23 * float((ad.abs() @ wd.abs().t()).max())
        ok = route.startswith("flyops_gemm_gemv<") and err <= tol
        bad += not ok
        print(f"{m}x{n}x{k} {route}: max error {err:.4g} (bound {tol:.4g}) {'ok' if ok else 'FAILED'}")
    torch.ops.flyops._gemm_force(0)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
