"""RMSNorm on the H200: flyops against stock and float64, through the public PyTorch API.

Every case checks where the call went (flyops.stats), outputs poisoned beforehand through
the caching allocator (a freed NaN block of the same size is what the op gets back), and
the error rule against float64."""

import os
import re
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import flyops
import rms_norm_ref as ref

pytestmark = pytest.mark.gpu

DTYPES = [torch.bfloat16, torch.float16, torch.float32]
GRID_N = [1, 3, 127, 1024, 4096, 4097, 5120, 8192, 16384, 65536]
GRID_M = [0, 1, 7, 4096, 16384]
EPS = 1e-6


def counts(op):
    s = flyops.stats()[op]
    return s["flyops"], s["stock"]


def poison(shape, dtype):
    """Leave a NaN-filled block of exactly this size in the caching allocator."""
    t = torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    del t


def make(M, N, dtype, weight=True):
    x = torch.randn(M, N, device="cuda", dtype=dtype)
    w = (1 + 0.5 * torch.randn(N, device="cuda")).to(dtype) if weight else None
    return x, w


def grid(test):
    """dtype x weight (none, same dtype) x N x M, the issue's correctness grid."""
    for mark in (pytest.mark.parametrize("M", GRID_M), pytest.mark.parametrize("N", GRID_N),
                 pytest.mark.parametrize("weight", [False, True], ids=["noweight", "weight"]),
                 pytest.mark.parametrize("dtype", DTYPES, ids=str)):
        test = mark(test)
    return test


@pytest.fixture(autouse=True)
def _free_memory():
    yield
    torch.cuda.empty_cache()


@grid
def test_forward_grid(dtype, weight, N, M):
    x, w = make(M, N, dtype, weight)
    with flyops.disabled():
        y_s, r_s = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
    poison((M, N), dtype)
    before = counts("rms_norm")
    y, r = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
    assert counts("rms_norm")[0] == before[0] + 1, flyops.stats()["rms_norm"]
    assert y.shape == y_s.shape and y.stride() == y_s.stride() and y.dtype == y_s.dtype
    assert r.shape == r_s.shape and r.dtype == r_s.dtype == torch.float32
    y_ref, r_ref = ref.fwd(x, w, EPS)
    ref.check(y, y_s, y_ref, dtype, N)
    ref.check(r, r_s, r_ref, torch.float32, N)


@grid
def test_backward_grid(dtype, weight, N, M):
    x, w = make(M, N, dtype, weight)
    dy = torch.randn_like(x)
    with flyops.disabled():
        _, rstd = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
        dx_s, dw_s = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], rstd, w, [True, weight])
    poison((M, N), dtype)
    before = counts("rms_norm_backward")
    dx, dw = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], rstd, w, [True, weight])
    assert counts("rms_norm_backward")[0] == before[0] + 1
    g = ref.Grad(dy, x, w, EPS)
    ref.check(dx, dx_s, g.dx, dtype, N, g.dx_scale)
    if weight:
        assert dw.shape == dw_s.shape and dw.dtype == dw_s.dtype
        if M == 0:
            assert torch.equal(dw, torch.zeros_like(dw)) and torch.equal(dw_s, dw)
        else:
            ref.check(dw, dw_s, g.dw, dtype, M, g.dw_scale)
    else:
        assert (dw is None) == (dw_s is None)


@pytest.mark.parametrize("mask", [(True, True), (True, False), (False, True), (False, False)])
def test_output_mask_matches_stock(mask):
    x, w = make(64, 1024, torch.bfloat16)
    dy = torch.randn_like(x)
    _, rstd = torch.ops.aten._fused_rms_norm(x, [1024], w, EPS)
    with flyops.disabled():
        s = torch.ops.aten._fused_rms_norm_backward(dy, x, [1024], rstd, w, list(mask))
    o = torch.ops.aten._fused_rms_norm_backward(dy, x, [1024], rstd, w, list(mask))
    for a, b in zip(o, s):
        assert (a is None) == (b is None)
        if a is not None:
            assert a.shape == b.shape and a.dtype == b.dtype


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_pairings_stock_and_ours(dtype):
    """Forward and backward are routed separately: each side's rstd feeds the other's."""
    M, N = 512, 4096
    x, w = make(M, N, dtype)
    dy = torch.randn_like(x)
    _, r_ours = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
    with flyops.disabled():
        _, r_stock = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
        ref_pair = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], r_stock, w, [True, True])
        stock_bwd_our_rstd = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], r_ours, w, [True, True])
    our_bwd_stock_rstd = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], r_stock, w, [True, True])
    g = ref.Grad(dy, x, w, EPS)
    for got in (stock_bwd_our_rstd, our_bwd_stock_rstd):
        ref.check(got[0], ref_pair[0], g.dx, dtype, N, g.dx_scale)
        ref.check(got[1], ref_pair[1], g.dw, dtype, M, g.dw_scale)


def test_eps_none_means_what_stock_makes_of_it():
    x = (1e-4 * torch.randn(64, 256, device="cuda")).float()  # mean square ~ eps: eps matters
    with flyops.disabled():
        y_s, r_s = torch.ops.aten._fused_rms_norm(x, [256], None, None)
    y, r = torch.ops.aten._fused_rms_norm(x, [256], None, None)
    torch.testing.assert_close(r, r_s, rtol=1e-5, atol=0)
    torch.testing.assert_close(y, y_s, rtol=1e-5, atol=1e-6)


def test_determinism_of_dweight():
    x, w = make(16384, 4096, torch.bfloat16)
    dy = torch.randn_like(x)
    _, rstd = torch.ops.aten._fused_rms_norm(x, [4096], w, EPS)
    outs = [torch.ops.aten._fused_rms_norm_backward(dy, x, [4096], rstd, w, [True, True])[1] for _ in range(3)]
    assert all(torch.equal(outs[0].view(torch.int16), o.view(torch.int16)) for o in outs[1:])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_every_row_shape(dtype):
    """Every instantiated row shape, forced, on a row that almost fills it and enough rows
    for several row groups per CTA: the tuned table may pick any of them tomorrow."""
    vec = 16 // torch.empty((), dtype=dtype).element_size()
    tried = 0
    try:
        for shape in range(torch.ops.flyops._rms_norm_num_shapes()):
            items, tpr, cta, stages, cluster = torch.ops.flyops._rms_norm_shape_info(shape)
            tag = (f",{items}x{tpr}/{cta}{',2-stage' if stages == 2 else ''}"
                   f"{f',cluster{cluster}' if cluster > 1 else ''}>")
            N = max(vec, items * tpr * cluster * vec - vec)
            x, w = make(700, N, dtype)
            dy = torch.randn_like(x)
            with flyops.disabled():
                y_s, r_s = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
                dx_s, dw_s = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], r_s, w, [True, True])
            torch.ops.flyops._rms_norm_force_shape(shape)
            for direction in ("fwd", "bwd"):
                name = (torch.ops.flyops._route_rms_norm(x, [N], w, EPS) if direction == "fwd" else
                        torch.ops.flyops._route_rms_norm_backward(dy, x, [N], r_s, w, [True, True]))
                if not name.endswith(tag):
                    continue  # does not fit this dtype's registers: never chosen
                tried += 1
                if direction == "fwd":
                    y, r = torch.ops.aten._fused_rms_norm(x, [N], w, EPS)
                    ref.check(y, y_s, ref.fwd(x, w, EPS)[0], dtype, N)
                else:
                    dx, dw = torch.ops.aten._fused_rms_norm_backward(dy, x, [N], r_s, w, [True, True])
                    g = ref.Grad(dy, x, w, EPS)
                    ref.check(dx, dx_s, g.dx, dtype, N, g.dx_scale)
                    ref.check(dw, dw_s, g.dw, dtype, 700, g.dw_scale)
    finally:
        torch.ops.flyops._rms_norm_force_shape(-1)
    assert tried >= 20


# ---- the public API: F.rms_norm, nn.RMSNorm, autograd, graphs, compile --------------------

def test_functional_and_module_reach_flyops():
    x, w = make(8, 4096, torch.bfloat16)
    before = counts("rms_norm")[0]
    y = F.rms_norm(x, (4096,), w, EPS)
    m = torch.nn.RMSNorm(4096, eps=EPS, device="cuda", dtype=torch.bfloat16)
    y2 = m(x)
    assert counts("rms_norm")[0] == before + 2
    with flyops.disabled():
        torch.testing.assert_close(y, F.rms_norm(x, (4096,), w, EPS))
        torch.testing.assert_close(y2, m(x))


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32], ids=str)
def test_autograd_gradients(dtype):
    M, N = 300, 2048
    x0, w0 = make(M, N, dtype)
    dy = torch.randn(M, N, device="cuda", dtype=dtype)

    def grads(enabled):
        x = x0.clone().requires_grad_()
        w = w0.clone().requires_grad_()
        if enabled:
            y = F.rms_norm(x, (N,), w, EPS)
            y.backward(dy)
        else:
            with flyops.disabled():
                y = F.rms_norm(x, (N,), w, EPS)
                y.backward(dy)
        return x.grad, w.grad

    b = counts("rms_norm_backward")[0]
    gx, gw = grads(True)
    assert counts("rms_norm_backward")[0] == b + 1
    sx, sw = grads(False)
    g = ref.Grad(dy, x0, w0, EPS)
    ref.check(gx, sx, g.dx, dtype, N, g.dx_scale)
    ref.check(gw, sw, g.dw, dtype, M, g.dw_scale)


def test_double_backward_still_works():
    x0, w0 = make(64, 256, torch.float32)

    def second(enabled):
        x = x0.clone().requires_grad_()
        w = w0.clone().requires_grad_()
        ctx = flyops.disabled() if not enabled else _null()
        with ctx:
            y = F.rms_norm(x, (256,), w, EPS)
            (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
            gx.sum().backward()
        return x.grad, w.grad

    a, b = second(True), second(False)
    for u, v in zip(a, b):
        torch.testing.assert_close(u, v, rtol=1e-4, atol=1e-5)


class _null:
    def __enter__(self):
        return self

    def __exit__(self, *a):
        return False


def test_disabled_governs_autograd_worker_threads():
    x0, w0 = make(256, 1024, torch.bfloat16)
    x = x0.clone().requires_grad_()
    y = F.rms_norm(x, (1024,), w0, EPS)
    f0, s0 = counts("rms_norm_backward")
    with flyops.disabled():
        y.sum().backward(retain_graph=True)  # runs on autograd's CUDA worker thread
    f1, s1 = counts("rms_norm_backward")
    assert (f1, s1) == (f0, s0 + 1)
    assert flyops.stats()["rms_norm_backward"]["stock_reasons"].get("flyops disabled", 0) >= 1
    with flyops.disabled("rms_norm"):  # forward only: the backward stays ours
        y.backward(torch.randn_like(y), retain_graph=True)
    assert counts("rms_norm_backward")[0] == f1 + 1
    y.backward(torch.randn_like(y))
    assert counts("rms_norm_backward")[0] == f1 + 2


def test_cuda_graph_capture_and_replay():
    M, N = 1024, 4096
    x, w = make(M, N, torch.bfloat16)
    dy = torch.randn_like(x)
    static_x = x.clone()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            F.rms_norm(static_x, (N,), w, EPS)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    f0 = counts("rms_norm")[0]
    b0 = counts("rms_norm_backward")[0]
    with torch.cuda.graph(g):
        y, rstd = torch.ops.aten._fused_rms_norm(static_x, [N], w, EPS)
        dx, dw = torch.ops.aten._fused_rms_norm_backward(dy, static_x, [N], rstd, w, [True, True])
    assert counts("rms_norm")[0] == f0 + 1 and counts("rms_norm_backward")[0] == b0 + 1
    for _ in range(2):
        static_x.copy_(torch.randn_like(static_x))
        g.replay()
        torch.cuda.synchronize()
        with flyops.disabled():
            y_s, r_s = torch.ops.aten._fused_rms_norm(static_x, [N], w, EPS)
            dx_s, dw_s = torch.ops.aten._fused_rms_norm_backward(dy, static_x, [N], r_s, w, [True, True])
        y_ref, _ = ref.fwd(static_x, w, EPS)
        gr = ref.Grad(dy, static_x, w, EPS)
        ref.check(y, y_s, y_ref, torch.bfloat16, N)
        ref.check(dx, dx_s, gr.dx, torch.bfloat16, N, gr.dx_scale)
        ref.check(dw, dw_s, gr.dw, torch.bfloat16, M, gr.dw_scale)


def test_torch_compile_fullgraph_works_with_flyops_loaded():
    x, w = make(512, 4096, torch.bfloat16)
    res = torch.randn_like(x)
    lin = torch.randn(1024, 4096, device="cuda", dtype=torch.bfloat16) / 64

    def block(a, r):
        h = a + r
        return F.linear(F.rms_norm(h, (4096,), w, EPS), lin)

    compiled = torch.compile(block, fullgraph=True)
    out = compiled(x, res)
    with flyops.disabled():
        expect = block(x, res)
    torch.testing.assert_close(out, expect, rtol=2e-2, atol=2e-2)
    # and training through a compiled graph
    xg = x.clone().requires_grad_()
    compiled(xg, res).float().pow(2).mean().backward()
    assert xg.grad is not None and torch.isfinite(xg.grad).all()


def test_autocast():
    x, _ = make(64, 1024, torch.float32)
    w = torch.randn(1024, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y = F.rms_norm(x, (1024,), w, EPS)
        with flyops.disabled():
            y_s = F.rms_norm(x, (1024,), w, EPS)
    assert y.dtype == y_s.dtype
    torch.testing.assert_close(y, y_s)


# ---- layouts, odd inputs, bad inputs ---------------------------------------------------------

def test_row_strided_and_misaligned_views():
    wide, w = make(333, 8192, torch.bfloat16)
    w = w[:4096].contiguous()
    views = {
        "row slice": wide[:, :4096],
        "offset by one element": wide.view(-1)[1:1 + 333 * 4096].view(333, 4096),
        "3d batch": wide[:, :4096].reshape(9, 37, 4096),
    }
    for name, v in views.items():
        before = counts("rms_norm")[0]
        y = F.rms_norm(v, (4096,), w, EPS)
        assert counts("rms_norm")[0] == before + 1, name
        with flyops.disabled():
            y_s = F.rms_norm(v, (4096,), w, EPS)
        y_ref, _ = ref.fwd(v, w, EPS)
        ref.check(y, y_s, y_ref, torch.bfloat16, 4096)


def test_unsupported_layout_goes_to_stock_with_reason():
    x, w = make(4096, 64, torch.float32)
    t = x.t()  # rows not contiguous
    before = counts("rms_norm")
    y = F.rms_norm(t, (4096,), None, EPS)
    after = counts("rms_norm")
    assert after == (before[0], before[1] + 1)
    assert "rows not contiguous (unsupported layout)" in flyops.stats()["rms_norm"]["stock_reasons"]
    with flyops.disabled():
        torch.testing.assert_close(y, F.rms_norm(t, (4096,), None, EPS))


def test_multi_dim_normalized_shape():
    x = torch.randn(8, 16, 32, 64, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(32, 64, device="cuda", dtype=torch.bfloat16)
    y, r = torch.ops.aten._fused_rms_norm(x, [32, 64], w, EPS)
    with flyops.disabled():
        y_s, r_s = torch.ops.aten._fused_rms_norm(x, [32, 64], w, EPS)
    assert r.shape == r_s.shape == (8, 16, 1, 1)
    y_ref = (x.double() * torch.rsqrt(x.double().pow(2).mean((-2, -1), keepdim=True) + EPS) * w.double())
    ref.check(y, y_s, y_ref, torch.bfloat16, 2048)


def _outcome(fn):
    try:
        out = fn()
        return ("ok", out)
    except Exception as e:  # noqa: BLE001
        return (type(e), str(e).split("\n")[0])


@pytest.mark.parametrize("case", ["weight_dtype", "bad_shape", "weight_shape", "weight_cpu", "input_cpu_weight_cuda",
                                  "double", "int"])
def test_bad_inputs_behave_like_stock(case):
    x, w = make(16, 64, torch.bfloat16)
    args = {
        "weight_dtype": (x, [64], w.float(), EPS),
        "bad_shape": (x, [32], None, EPS),
        "weight_shape": (x, [64], w[:32], EPS),
        "weight_cpu": (x, [64], w.cpu(), EPS),
        "input_cpu_weight_cuda": (x.cpu(), [64], w, EPS),
        "double": (x.double(), [64], w.double(), EPS),
        "int": (x.to(torch.int32), [64], None, EPS),
    }[case]
    ours = _outcome(lambda: torch.ops.aten._fused_rms_norm(*args))
    with flyops.disabled():
        stock = _outcome(lambda: torch.ops.aten._fused_rms_norm(*args))
    assert ours[0] == stock[0]
    if ours[0] == "ok":
        for a, b in zip(ours[1], stock[1]):
            torch.testing.assert_close(a, b, equal_nan=True)
    else:
        assert ours[1] == stock[1]


def test_nan_and_inf_like_stock():
    for dtype in DTYPES:
        x, w = make(8, 1024, dtype)
        x[1, 5] = float("nan")
        x[2, 7] = float("inf")
        x[3, 9] = -float("inf")
        y, r = torch.ops.aten._fused_rms_norm(x, [1024], w, EPS)
        with flyops.disabled():
            y_s, r_s = torch.ops.aten._fused_rms_norm(x, [1024], w, EPS)
        assert torch.equal(torch.isnan(y), torch.isnan(y_s)), dtype
        assert torch.equal(torch.isnan(r), torch.isnan(r_s)), dtype
        finite = torch.isfinite(y_s)
        torch.testing.assert_close(y[finite], y_s[finite])


def test_profiler_shows_range_and_kernel_names():
    x, w = make(1024, 4096, torch.bfloat16)
    F.rms_norm(x, (4096,), w, EPS)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        F.rms_norm(x, (4096,), w, EPS)
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert "flyops::rms_norm" in names
    kernels = [n for n in names if "flyops_rms_norm" in n]
    assert kernels and all(n.split(" ")[-1].startswith("flyops_") or n.startswith("void flyops_") for n in kernels), kernels


def test_routing_log_on_gpu():
    code = textwrap.dedent("""
        import torch, torch.nn.functional as F, flyops
        x = torch.randn(64, 4096, device='cuda', dtype=torch.bfloat16)
        for _ in range(3):
            F.rms_norm(x, (4096,), None, 1e-6)
        F.rms_norm(x.t(), (64,), None, 1e-6)
        torch.cuda.synchronize()
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, FLYOPS_LOG="1"))
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("flyops:")]
    assert re.fullmatch(r"flyops: rms_norm bf16\[64, 4096\] weight=none eps=1e-06 -> "
                        r"flyops_rms_norm_fwd<bf16,v8,\d+x\d+/\d+>", lines[0]), lines
    assert lines[1] == "flyops: (previous line repeated 2 more times)"
    assert lines[2].endswith("-> stock (rows not contiguous (unsupported layout))"), lines


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="one GPU")
def test_second_device():
    x, w = make(64, 4096, torch.bfloat16)
    x1, w1 = x.to("cuda:1"), w.to("cuda:1")
    y = F.rms_norm(x1, (4096,), w1, EPS)
    assert y.device == x1.device
    with flyops.disabled():
        torch.testing.assert_close(y, F.rms_norm(x1, (4096,), w1, EPS))
