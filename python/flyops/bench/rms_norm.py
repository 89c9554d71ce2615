"""RMSNorm: flyops against stock PyTorch, forward, backward, host cost and compiled blocks.

Bytes counted (the minimum): forward reads x and w, writes y and rstd; backward reads dy,
x, w and rstd, writes dx and dw.
"""

import torch
import torch.nn.functional as F

import flyops

from . import common

DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float16": torch.float16}
TARGET_M = (4096, 16384, 65536)
TARGET_N = (1024, 2048, 4096, 5120, 8192, 16384)
DECODE_ROWS = (1, 8, 64)
DECODE_N = (4096, 8192)
EPS = 1e-6
ERR_ROWS = 256  # rows checked against the float64 reference (rows are independent)


def _ref_fwd(x, w):
    x64 = x.double()
    rstd = torch.rsqrt(x64.pow(2).mean(-1, keepdim=True) + EPS)
    return x64 * rstd * w.double(), rstd


def _ref_dx(dy, x, w, rstd):
    x64, dy64, w64, r = x.double(), dy.double(), w.double(), rstd.double()
    g = dy64 * w64
    coef = r * r * (g * x64).mean(-1, keepdim=True)
    return r * (g - x64 * coef)


def _inputs(M, N, dtype):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    w = (1 + 0.5 * torch.randn(N, device="cuda")).to(dtype)
    return x, w


def _device_case(timer, pass_, M, N, dtype_name, fn, nbytes, op, outputs, ref):
    """One fwd/bwd row: stock and flyops timed on the same inputs, the bandwidth of each
    and of a same-size copy, and both errors against the float64 reference (`outputs(fn)`
    picks the checked rows of an output of fn)."""
    stock_ms, ours_ms = common.stock_and_flyops(timer, fn)
    ours_out = outputs(fn())
    with flyops.disabled():
        stock_out = outputs(fn())
    return {
        "name": f"{pass_} {dtype_name} M={M} N={N}",
        "pass": pass_,
        "params": {"M": M, "N": N, "dtype": dtype_name},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "routed": common.routed(op, fn),
        "flyops_tflops": None,
        "flyops_GBps": round(nbytes / (ours_ms * 1e-3) / 1e9, 1),
        "stock_GBps": round(nbytes / (stock_ms * 1e-3) / 1e9, 1),
        "copy_GBps": round(timer.copy_GBps(nbytes), 1),
        "max_rel_err": common.max_rel_err(ours_out, ref),
        "stock_max_rel_err": common.max_rel_err(stock_out, ref),
    }


def fwd_case(timer, M, N, dtype_name):
    x, w = _inputs(M, N, DTYPES[dtype_name])
    eb = x.element_size()
    rows = min(M, ERR_ROWS)
    ref, _ = _ref_fwd(x[:rows], w)
    return _device_case(timer, "fwd", M, N, dtype_name, lambda: F.rms_norm(x, (N,), w, EPS),
                        2 * M * N * eb + N * eb + 4 * M, "rms_norm", lambda y: y[:rows], ref)


def bwd_case(timer, M, N, dtype_name):
    x, w = _inputs(M, N, DTYPES[dtype_name])
    dy = torch.randn_like(x)
    with flyops.disabled():
        _, rstd = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
    eb = x.element_size()
    rows = min(M, ERR_ROWS)
    ref = _ref_dx(dy[:rows], x[:rows], w, rstd[:rows])
    fn = lambda: torch.ops.aten._fused_rms_norm_backward(dy, x, [N], rstd, w, [True, True])
    return _device_case(timer, "bwd", M, N, dtype_name, fn, 3 * M * N * eb + 2 * N * eb + 4 * M,
                        "rms_norm_backward", lambda out: out[0][:rows], ref)


def host_case(M, N, dtype_name):
    x, w = _inputs(M, N, DTYPES[dtype_name])
    fn = lambda: F.rms_norm(x, (N,), w, EPS)
    with flyops.disabled():
        stock = common.Timer.host_ms(fn)
    ours = common.Timer.host_ms(fn)
    return {
        "name": f"host {dtype_name} M={M} N={N}",
        "pass": "host",
        "params": {"M": M, "N": N, "dtype": dtype_name},
        "flyops_ms": round(ours, 5),
        "stock_ms": round(stock, 5),
        "speedup": round(stock / ours, 3),
        "routed": common.routed("rms_norm", fn),
        "flyops_tflops": None,
    }


def compile_cases(timer, dtype_name="bfloat16"):
    """Inductor decomposes _fused_rms_norm into a generated kernel: flyops is not called
    there. Measured here so the choice to leave Inductor alone rests on numbers: the op
    alone, and a transformer block piece (residual add + RMSNorm + linear)."""
    dtype = DTYPES[dtype_name]
    out = []
    for M, N in ((16384, 4096), (65536, 4096)):
        x, w = _inputs(M, N, dtype)
        eager = lambda: F.rms_norm(x, (N,), w, EPS)
        compiled = torch.compile(lambda a, b: F.rms_norm(a, (N,), b, EPS), fullgraph=True)
        stock_ms, ours_ms = common.stock_and_flyops(timer, eager)
        ind_ms = timer.device_ms(lambda: compiled(x, w))
        out.append(_compile_row(f"rms_norm {dtype_name} M={M} N={N}", M, N, dtype_name, ours_ms, stock_ms, ind_ms))

    M, N = 16384, 4096
    x, w = _inputs(M, N, dtype)
    res = torch.randn_like(x)
    lin = torch.randn(N, N, device="cuda", dtype=dtype) / N**0.5

    def block(a, r, g, W):
        h = a + r
        return F.linear(F.rms_norm(h, (N,), g, EPS), W), h

    compiled = torch.compile(block, fullgraph=True)
    stock_ms, ours_ms = common.stock_and_flyops(timer, lambda: block(x, res, w, lin))
    ind_ms = timer.device_ms(lambda: compiled(x, res, w, lin))
    out.append(_compile_row(f"add+rms_norm+linear {dtype_name} M={M} N={N}", M, N, dtype_name, ours_ms,
                            stock_ms, ind_ms))
    return out


def _compile_row(name, M, N, dtype_name, ours_ms, stock_ms, ind_ms):
    return {
        "name": name,
        "pass": "compile",
        "params": {"M": M, "N": N, "dtype": dtype_name},
        "flyops_ms": round(ours_ms, 5),
        "stock_ms": round(stock_ms, 5),
        "speedup": round(stock_ms / ours_ms, 3),
        "routed": "flyops",
        "inductor_ms": round(ind_ms, 5),
        "flyops_vs_inductor": round(ind_ms / ours_ms, 3),
    }


def run(timer, quick=False):
    result = common.header("rms_norm", timer)
    cases = result["cases"]
    Ms = TARGET_M[:2] if quick else TARGET_M
    for dtype_name in ("bfloat16", "float32"):
        for M in Ms:
            for N in TARGET_N:
                cases.append(fwd_case(timer, M, N, dtype_name))
                torch.cuda.empty_cache()
    for dtype_name in ("bfloat16", "float32"):
        for M in DECODE_ROWS:
            for N in DECODE_N:
                cases.append(fwd_case(timer, M, N, dtype_name))
    for dtype_name in ("bfloat16", "float32"):
        for M in Ms:
            for N in TARGET_N:
                cases.append(bwd_case(timer, M, N, dtype_name))
                torch.cuda.empty_cache()
    for M in (1, 8):
        cases.append(host_case(M, 4096, "bfloat16"))
    if not quick:
        cases.extend(compile_cases(timer))
    return result


def tune(timer, dtype_names=("bfloat16", "float32"), Ns=(1024, 2048, 4096, 5120, 8192, 10240, 16384)):
    """Time every row shape that fits each (direction, dtype, N) and report the best."""
    rows = []
    n_shapes = torch.ops.flyops._rms_norm_num_shapes()
    for dtype_name in dtype_names:
        for N in Ns:
            M = max(4096, (64 << 20) // N)
            x, w = _inputs(M, N, DTYPES[dtype_name])
            dy = torch.randn_like(x)
            _, rstd = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
            for direction in ("fwd", "bwd"):
                if direction == "fwd":
                    fn = lambda: torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
                else:
                    fn = lambda: torch.ops.aten._fused_rms_norm_backward(dy, x, [N], rstd, w, [True, True])
                times = {}
                for shape in list(range(n_shapes)) + [-1]:
                    torch.ops.flyops._rms_norm_force_shape(shape)
                    name = _kernel_name(direction, x, w, dy, rstd, N)
                    if shape >= 0 and name in (t[0] for t in times.values()):
                        continue  # the shape did not fit: the table's choice ran again
                    times[shape] = (name, timer.device_ms(fn))
                torch.ops.flyops._rms_norm_force_shape(-1)
                best = min(times.items(), key=lambda kv: kv[1][1])
                table = times[-1]
                rows.append({"direction": direction, "dtype": dtype_name, "M": M, "N": N,
                             "table": table[0], "table_ms": round(table[1], 5),
                             "best": best[1][0], "best_ms": round(best[1][1], 5),
                             "all": {v[0]: round(v[1], 5) for v in times.values()}})
                print(f"{direction} {dtype_name:8s} N={N:6d} M={M:6d} table {table[0]} {table[1]:.4f} ms"
                      f" | best {best[1][0]} {best[1][1]:.4f} ms")
            del x, w, dy, rstd
            torch.cuda.empty_cache()
    return rows


def _kernel_name(direction, x, w, dy, rstd, N):
    if direction == "fwd":
        return torch.ops.flyops._route_rms_norm(x, [N], w, EPS)
    return torch.ops.flyops._route_rms_norm_backward(dy, x, [N], rstd, w, [True, True])


def summary(result):
    lines = []
    cases = result["cases"]
    for p in ("fwd", "bwd", "host", "compile"):
        sel = [c for c in cases if c["pass"] == p]
        if not sel:
            continue
        lines.append(f"-- {p}: geomean speedup {common.geomean([c['speedup'] for c in sel]):.2f}x over {len(sel)} cases")
        for c in sel:
            extra = ""
            if "copy_GBps" in c:
                extra = (f" {c['flyops_GBps']:7.0f} GB/s ({c['flyops_GBps'] / c['copy_GBps']:.2f} of copy)"
                         f" stock {c['stock_GBps']:7.0f} GB/s")
            if "inductor_ms" in c:
                extra = f" inductor {c['inductor_ms']:.4f} ms"
            lines.append(f"{c['name']:34s} flyops {c['flyops_ms']:8.4f} ms stock {c['stock_ms']:8.4f} ms "
                         f"x{c['speedup']:5.2f} [{c['routed']}]{extra}")
    return "\n".join(lines)


def plot(result, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    passes = [p for p in ("fwd", "bwd", "host", "compile") if any(c["pass"] == p for c in result["cases"])]
    fig, axes = plt.subplots(len(passes), 1, figsize=(14, 3.6 * len(passes)), squeeze=False)
    for ax, p in zip(axes[:, 0], passes):
        sel = [c for c in result["cases"] if c["pass"] == p]
        names = [c["name"] if p == "compile" else c["name"].split(" ", 1)[1] for c in sel]
        ax.bar(range(len(sel)), [c["speedup"] for c in sel], color="tab:blue", label="speedup over stock")
        if p in ("fwd", "bwd"):
            frac = [c["flyops_GBps"] / c["copy_GBps"] for c in sel]
            ax.plot(range(len(sel)), frac, "o", color="tab:orange", label="flyops GB/s / copy GB/s")
        ax.axhline(1.0, color="gray", lw=0.8)
        ax.set_xticks(range(len(sel)))
        ax.set_xticklabels(names, rotation=60, ha="right", fontsize=7)
        ax.set_title(f"rms_norm {p} on {result['device']} (torch {result['torch']}): "
                     f"geomean {common.geomean([c['speedup'] for c in sel]):.2f}x")
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
