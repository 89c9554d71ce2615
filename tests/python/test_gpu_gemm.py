"""GEMM on the H200: flyops against float64 and stock, through the public PyTorch API
(mm, addmm, bmm, baddbmm, their .out forms, matmul / @, F.linear, nn.Linear).

Exact tests: small integers ([-4, 4]) make fp32 accumulation exact, so flyops' result must
equal the float64 product rounded once to the output dtype, bit for bit (but for the sign
of zero). Stock is not that reference: cuBLAS may reduce split-K partial sums in reduced
precision. Random-normal tests use the error rule of rms_norm_ref.check: our max error
against float64 at most 2x stock's (flyops disabled) plus a rounding term.

Tests of flyops' own results force its kernel past the router's speed table
(`_gemm_force(1)`, reset to the router afterwards), since the router may rightly send a
shape to stock. Every call checks where it went (flyops.stats: exactly one decision),
that the explain op `_route_gemm` agrees, and, where TMA's rules decide it, that a call
TMA can describe went to flyops and one it cannot went to stock. Outputs are poisoned
with NaN beforehand (out= tensors prefilled, fresh outputs through the caching
allocator); inputs are random on every run and never all zeros."""

import contextlib
import re

import pytest
import torch
import torch.nn.functional as F

import flyops
import rms_norm_ref as ref

pytestmark = pytest.mark.gpu

DTYPES = [torch.bfloat16, torch.float16]
TAG = {torch.bfloat16: "bf16", torch.float16: "fp16"}
INT_VIEW = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32,
            torch.float64: torch.int64}
KERNEL = re.compile(r"flyops_gemm(_decode|_splitk|_gemv)?<(bf16|fp16),A:(k|m)-major,B:(k|n)-major"
                    r"(,n(16|64),kparts\d+|,kparts[248]|,n(8|16),r[1248])?>")
# a: "n" row-major [M, K], "t" the .t() of a row-major [K, M];
# b: "n" row-major [K, N], "t" the .t() of a row-major [N, K] (a weight, as F.linear takes it).
LAYOUTS = ["nn", "nt", "tn", "tt"]
SMALL = [(1, 8, 8), (17, 4104, 40), (113, 203, 64), (113, 203, 200), (128, 256, 64)]
BATCHED = [(3, 1, 8, 8), (2, 17, 264, 40), (4, 113, 203, 64), (2, 128, 256, 64)]


def shape_id(s):
    return "x".join(map(str, s))


@pytest.fixture(autouse=True)
def _router_decides():
    torch.ops.flyops._gemm_force(0)
    yield
    torch.ops.flyops._gemm_force(0)
    torch.cuda.empty_cache()


@pytest.fixture
def ours():
    """flyops' kernel wherever it supports the call, past the router's speed table."""
    torch.ops.flyops._gemm_force(1)
    yield
    torch.ops.flyops._gemm_force(0)


# ---- inputs, references, checks -------------------------------------------------------------

def ints(shape, dtype, lo=-4, hi=4):
    """Random integers in [lo, hi] as dtype, never all zero."""
    while True:
        t = torch.randint(lo, hi + 1, shape, device="cuda", dtype=torch.int8).to(dtype)
        if t.numel() == 0 or bool(t.any()):
            return t


def randn(shape, dtype):
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)


def matrix(rows, cols, dtype, transposed, gen=ints, batch=None):
    """[(batch,) rows, cols]: row-major, or the transpose of a row-major [(batch,) cols, rows]."""
    lead = () if batch is None else (batch,)
    if transposed:
        return gen(lead + (cols, rows), dtype).transpose(-1, -2)
    return gen(lead + (rows, cols), dtype)


def operands(M, N, K, dtype, layout, gen=ints, batch=None):
    a = matrix(M, K, dtype, layout[0] == "t", gen, batch)
    b = matrix(K, N, dtype, layout[1] == "t", gen, batch)
    return a, b


def ref64(a, b):
    """The float64 product (exact for the small-integer inputs)."""
    with flyops.disabled("gemm"):
        return torch.matmul(a.double(), b.double())


def abs_scale(a, b):
    """The largest sum of |a_mk * b_kn| over k: what fp32 accumulation errors scale with."""
    with flyops.disabled("gemm"):
        return float(torch.matmul(a.double().abs(), b.double().abs()).max().item())


def poison(shape, dtype):
    """Leave a NaN block of this size in the caching allocator for a fresh output to reuse."""
    t = torch.full(shape, float("nan"), device="cuda", dtype=dtype)
    del t


def nan_full(shape, dtype):
    return torch.full(shape, float("nan"), device="cuda", dtype=dtype)


def bits(t):
    return (t + 0).contiguous().view(INT_VIEW[t.dtype])  # + 0 turns -0.0 into +0.0


def assert_same_bits(got, want, what=""):
    assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
    g, w = bits(got), bits(want)
    if not torch.equal(g, w):
        bad = (g != w).nonzero()
        i = tuple(bad[0].tolist())
        raise AssertionError(f"{what}: {bad.size(0)} of {got.numel()} elements differ; first at {i}: "
                             f"{got[i].item()} vs {want[i].item()}")


def counts():
    s = flyops.stats()["gemm"]
    return s["flyops"], s["stock"]


def went(fn):
    """Run fn once (one GEMM call): its result and where the call went, from flyops.stats."""
    f0, s0 = counts()
    out = fn()
    torch.cuda.synchronize()
    f1, s1 = counts()
    assert (f1 - f0) + (s1 - s0) == 1, f"{f1 - f0} flyops and {s1 - s0} stock decisions for one call"
    return out, ("flyops" if f1 > f0 else "stock")


def describable(t):
    """Whether TMA can describe the operand as the contract reads it: unit stride along one
    of its two matrix dims, the other stride a multiple of 8 elements (16 bytes) and no
    smaller than the rows it spans, a 16-byte aligned base, batch entries a nonzero multiple
    of 8 elements apart. None where a size-1 matrix dim leaves the leading stride to the
    binding (a size-1 dim's stride means nothing)."""
    R, C = t.shape[-2:]
    sr, sc = t.stride()[-2:]
    if t.data_ptr() % 16:
        return False
    if t.dim() == 3 and t.size(0) > 1 and (t.stride(0) == 0 or t.stride(0) % 8):
        return False
    ok = (sc == 1 and sr % 8 == 0 and sr >= C) or (sr == 1 and sc % 8 == 0 and sc >= R)
    if R == 1 or C == 1:
        return True if ok else None
    return ok


def expected_route(a, b):
    """'flyops' or 'stock' by the contract's rules for the kernel (forced past the table),
    None where they leave it open."""
    if a.dtype != b.dtype or a.dtype not in DTYPES:
        return "stock"
    if 0 in (a.size(-2), a.size(-1), b.size(-1)):
        return "stock"
    da, db = describable(a), describable(b)
    if da is False or db is False:
        return "stock"
    return "flyops" if da and db else None


def expected_kernel(a, b):
    """The kernel's name for operands with no size-1 matrix dim (the contract's majors)."""
    am = "k" if a.stride(-1) == 1 else "m"
    bm = "n" if b.stride(-1) == 1 else "k"
    return f"flyops_gemm<{TAG[a.dtype]},A:{am}-major,B:{bm}-major>"


def check_route(a, b, where, forced=True):
    """The call went where _route_gemm says; under mode 1 also where TMA's rules say."""
    r = torch.ops.flyops._route_gemm(a, b)
    if r.startswith("flyops_gemm"):
        assert KERNEL.fullmatch(r) and TAG[a.dtype] in r, r
        if 1 not in (a.size(-2), a.size(-1), b.size(-1)):
            assert re.sub(r"_decode|_splitk|_gemv|(,n\d+)?,kparts\d+|,n\d+,r\d+", "", r) == expected_kernel(a, b), r
        if a.dim() == 2 and a.size(0) <= 64:  # a few rows: the decode kernel, or at most 16 the narrow one
            assert r.startswith("flyops_gemm_decode<") or (r.startswith("flyops_gemm_gemv<") and a.size(0) <= 16), r
        kind = "flyops"
    else:
        assert r.startswith("stock (") and r.endswith(")"), r
        kind = "stock"
    assert where == kind, f"the call went to {where}, _route_gemm says {r!r}"
    if forced:
        e = expected_route(a, b)
        if e is not None:
            assert kind == e, (f"{r!r} for a {tuple(a.shape)}@{a.stride()} and b {tuple(b.shape)}@{b.stride()}: "
                               f"expected {e}")
    return r


def check_exact(out, want64, where, stock_fn, what=""):
    """flyops: the float64 result rounded once, bit for bit. stock: stock's own bits."""
    assert not torch.isnan(out).any(), f"{what}: NaN in the output (an element left unwritten, or wrong)"
    if where == "flyops":
        assert_same_bits(out, want64.to(out.dtype), what)
    else:
        with flyops.disabled("gemm"):
            s = stock_fn()
        assert_same_bits(out, s, what + " (stock route)")


def run_exact(fn, a, b, want64, what):
    out, where = went(fn)
    check_route(a, b, where)
    check_exact(out, want64, where, fn, what)
    return out, where


# ---- exact: small integers, every layout, every overload --------------------------------------

@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SMALL, ids=shape_id)
def test_mm_exact(shape, dtype, layout):
    M, N, K = shape
    a, b = operands(M, N, K, dtype, layout)
    want = ref64(a, b)
    poison((M, N), dtype)
    out, _ = run_exact(lambda: a @ b, a, b, want, "a @ b")
    assert out.is_contiguous()
    poison((M, N), dtype)
    run_exact(lambda: torch.mm(a, b), a, b, want, "torch.mm")


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SMALL, ids=shape_id)
def test_addmm_exact(shape, dtype, layout):
    M, N, K = shape
    a, b = operands(M, N, K, dtype, layout)
    prod = ref64(a, b)
    bias = ints((N,), dtype)
    # F.linear's call: addmm(bias, x, W.t()), beta = alpha = 1.
    poison((M, N), dtype)
    run_exact(lambda: F.linear(a, b.t(), bias), a, b, bias.double() + prod, "F.linear")
    # General alpha, beta (powers of two: exact) and every broadcast of self.
    for self_shape, beta, alpha in (((N,), -0.5, 2.0), ((1, N), 2.0, -0.5), ((M, 1), -0.5, 2.0),
                                    ((M, N), -0.5, 2.0), ((M, N), 1, 1)):
        s = ints(self_shape, dtype)
        poison((M, N), dtype)
        out, _ = run_exact(lambda: torch.addmm(s, a, b, beta=beta, alpha=alpha), a, b,
                           beta * s.double() + alpha * prod, f"addmm self={self_shape} beta={beta} alpha={alpha}")
        assert out.is_contiguous()


def out_layouts(shape, dtype):
    """Makers of out= tensors prefilled with NaN, each giving (the out view, the part of its
    allocation outside the view, which must stay NaN, or None): contiguous, column-major (per
    matrix), and rows padded to a longer stride as Inductor lays them out."""
    *lead, M, N = shape
    lead = tuple(lead)
    ld = (N + 7) // 8 * 8 + 8

    def contiguous():
        return nan_full(lead + (M, N), dtype), None

    def column_major():
        return nan_full(lead + (N, M), dtype).transpose(-1, -2), None

    def padded():
        base = nan_full(lead + (M, ld), dtype)
        return base[..., :N], base[..., N:]

    return {"contiguous": contiguous, "column-major": column_major, "padded rows": padded}


def check_out(make, fn_out, a, b, want, what):
    """fn_out(o) writes into o: the same tensor back, exact, the padding left alone."""
    o, padding = make()
    out, where = went(lambda: fn_out(o))
    assert out.data_ptr() == o.data_ptr() and out.shape == o.shape and out.stride() == o.stride(), what
    check_route(a, b, where)
    check_exact(o, want, where, lambda: fn_out(make()[0]), what)
    if padding is not None:
        assert torch.isnan(padding).all(), f"{what}: wrote into the padding past the out= view"


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", SMALL, ids=shape_id)
def test_out_variants_exact(shape, dtype, layout):
    M, N, K = shape
    a, b = operands(M, N, K, dtype, layout)
    prod = ref64(a, b)
    bias = ints((N,), dtype)
    for name, make in out_layouts((M, N), dtype).items():
        check_out(make, lambda o: torch.mm(a, b, out=o), a, b, prod, f"mm.out {name}")
        check_out(make, lambda o: torch.addmm(bias, a, b, beta=0.5, alpha=-2.0, out=o), a, b,
                  0.5 * bias.double() - 2.0 * prod, f"addmm.out {name}")


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("shape", BATCHED, ids=shape_id)
def test_bmm_exact(shape, dtype, layout):
    B, M, N, K = shape
    a, b = operands(M, N, K, dtype, layout, batch=B)
    prod = ref64(a, b)
    poison((B, M, N), dtype)
    out, _ = run_exact(lambda: torch.bmm(a, b), a, b, prod, "bmm")
    assert out.is_contiguous()
    poison((B, M, N), dtype)
    out, where = went(lambda: a @ b)  # matmul's batching decides the operands bmm sees
    check_exact(out, prod, where, lambda: a @ b, "a @ b (3-D)")
    for self_shape in ((B, M, N), (N,), (1, N), (M, 1)):
        s = ints(self_shape, dtype)
        poison((B, M, N), dtype)
        run_exact(lambda: torch.baddbmm(s, a, b, beta=-0.5, alpha=2.0), a, b, -0.5 * s.double() + 2.0 * prod,
                  f"baddbmm self={self_shape}")
    s = ints((B, M, N), dtype)
    for name, make in out_layouts((B, M, N), dtype).items():
        check_out(make, lambda o: torch.bmm(a, b, out=o), a, b, prod, f"bmm.out {name}")
        check_out(make, lambda o: torch.baddbmm(s, a, b, beta=2.0, alpha=0.5, out=o), a, b,
                  2.0 * s.double() + 0.5 * prod, f"baddbmm.out {name}")


@pytest.mark.large
@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_large_exact(dtype, layout):
    """3000 x 5000 x 7000 on every layout: many tiles, odd edges, a long K (sums to ~1e5)."""
    M, N, K = 3000, 5000, 7000
    a, b = operands(M, N, K, dtype, layout)
    want = ref64(a, b)
    poison((M, N), dtype)
    out, where = run_exact(lambda: a @ b, a, b, want, f"3000x5000x7000 {layout}")
    assert where == "flyops"


@pytest.mark.large
@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_vocab_row_exact(dtype, layout):
    """One token against a 128256-entry vocabulary (the LM head at decode), K = 4096."""
    M, N, K = 1, 128256, 4096
    a, b = operands(M, N, K, dtype, layout)
    want = ref64(a, b)
    poison((M, N), dtype)
    run_exact(lambda: a @ b, a, b, want, "1x128256x4096")
    bias = ints((N,), dtype)
    poison((M, N), dtype)
    run_exact(lambda: torch.addmm(bias, a, b), a, b, bias.double() + want, "addmm 1x128256x4096")


# ---- what goes to stock, and still gives stock's (exact) result -------------------------------

STOCK_CASES = ["K=33 row-major", "offset by one element", "x[:, 1:] view", "no unit-stride dim", "fp32", "fp64",
               "broadcast batch (stride 0)", "empty M", "empty K", "empty N", "empty batch"]


def stock_case(case):
    """Inputs the kernel cannot take, with values in [-1, 1] so that every partial sum is an
    integer bf16 holds exactly: any stock algorithm is then exact too."""
    bf = torch.bfloat16

    def i1(shape, dt=bf):
        return ints(shape, dt, -1, 1)

    if case == "K=33 row-major":
        return i1((64, 33)), i1((33, 64))
    if case == "offset by one element":
        return i1((64 * 64 + 1,))[1:].view(64, 64), i1((64, 64))
    if case == "x[:, 1:] view":
        return i1((64, 72))[:, 1:], i1((71, 64))
    if case == "no unit-stride dim":
        return i1((64, 128))[:, ::2], i1((64, 64))
    if case in ("fp32", "fp64"):
        dt = torch.float32 if case == "fp32" else torch.float64
        return i1((64, 64), dt), i1((64, 64), dt)
    if case == "broadcast batch (stride 0)":
        return i1((1, 64, 64)).expand(3, 64, 64), i1((3, 64, 64))
    empty = {"empty M": ((0, 64), (64, 64)), "empty K": ((64, 0), (0, 64)), "empty N": ((64, 64), (64, 0)),
             "empty batch": ((0, 8, 8), (0, 8, 8))}[case]
    return tuple(torch.randint(-1, 2, s, device="cuda").to(bf) for s in empty)


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("case", STOCK_CASES)
def test_unsupported_inputs_go_to_stock(case):
    a, b = stock_case(case)
    r = torch.ops.flyops._route_gemm(a, b)
    assert r.startswith("stock (") and r.endswith(")"), r
    want = ref64(a, b)
    mm = torch.bmm if a.dim() == 3 else torch.mm
    with flyops.disabled("gemm"):
        stock = mm(a, b)
    if want.numel():
        poison(tuple(want.shape), a.dtype)
    out, where = went(lambda: mm(a, b))
    assert where == "stock", case
    assert out.shape == stock.shape and out.dtype == stock.dtype and out.stride() == stock.stride()
    assert_same_bits(out, stock, case)
    assert_same_bits(out, want.to(a.dtype), case + " vs float64")
    reasons = flyops.stats()["gemm"]["stock_reasons"]
    assert r[len("stock ("):-1] in reasons, (r, reasons)


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("tf32", [False, True], ids=["ieee", "tf32"])
def test_fp32_goes_to_stock_under_either_tf32_setting(tf32):
    """fp32 GEMMs are stock's with TF32 allowed or not, and the result is what stock gives
    under that setting (values in [-1, 1] are exact in TF32 too)."""
    a, b = ints((64, 128), torch.float32, -1, 1), ints((128, 96), torch.float32, -1, 1)
    was = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        r = torch.ops.flyops._route_gemm(a, b)
        assert r == "stock (float32 (TF32 settings are stock's))", r
        out, where = went(lambda: a @ b)
        with flyops.disabled("gemm"):
            stock = a @ b
    finally:
        torch.backends.cuda.matmul.allow_tf32 = was
    assert where == "stock"
    assert "float32 (TF32 settings are stock's)" in flyops.stats()["gemm"]["stock_reasons"]
    assert_same_bits(out, stock, "fp32")
    assert_same_bits(out, ref64(a, b).float(), "fp32 vs float64")


@pytest.mark.usefixtures("ours")
def test_negated_view_is_read_negated():
    """A lazily negated view (neg bit): whoever takes it must read it negated."""
    a, b = ints((64, 64), torch.bfloat16), ints((64, 64), torch.bfloat16)
    n = torch._neg_view(a)
    assert torch.ops.flyops._route_gemm(n, b).startswith("stock (")
    out, where = went(lambda: torch.mm(n, b))
    check_exact(out, -ref64(a, b), where, lambda: torch.mm(n, b), "neg view")


@pytest.mark.usefixtures("ours")
def test_size_one_dims_either_route_exact():
    """1x1x1 and 1-wide operands: a size-1 dim's stride means nothing, so whether the kernel
    takes them is the binding's choice (the contract said stock for 1x1x1); the result must
    be exact either way and the explain op must agree with the call."""
    for M, N, K in ((1, 1, 1), (64, 64, 1), (1, 64, 1), (64, 1, 64), (1, 1, 64)):
        for layout in LAYOUTS:
            a, b = operands(M, N, K, torch.bfloat16, layout)
            want = ref64(a, b)
            poison((M, N), torch.bfloat16)
            run_exact(lambda: torch.mm(a, b), a, b, want, f"{M}x{N}x{K} {layout}")


def test_one_by_one_goes_to_stock_through_the_router():
    """Unforced, 1x1x1 is stock's (the contract's example; no measured class holds it), with
    the reason in the log and stock's bits."""
    a, b = ints((1, 1), torch.bfloat16), ints((1, 1), torch.bfloat16)
    r = torch.ops.flyops._route_gemm(a, b)
    assert r.startswith("stock (") and r.endswith(")"), r
    out, where = went(lambda: torch.mm(a, b))
    assert where == "stock"
    assert r[len("stock ("):-1] in flyops.stats()["gemm"]["stock_reasons"]
    assert_same_bits(out, ref64(a, b).to(torch.bfloat16), "1x1x1")


@pytest.mark.usefixtures("ours")
def test_out_aliasing_an_operand_goes_to_stock():
    a, b = ints((128, 128), torch.bfloat16), ints((128, 128), torch.bfloat16)
    # out= mat1: cuBLAS reads what it writes, so stock's own result is undefined here: only
    # where the call went is checked.
    _, where = went(lambda: torch.mm(a, b, out=a))
    assert where == "stock"
    assert "out aliases an operand" in flyops.stats()["gemm"]["stock_reasons"]
    a, b = ints((128, 128), torch.bfloat16), ints((128, 128), torch.bfloat16)
    _, where = went(lambda: torch.addmm(ints((128,), torch.bfloat16), a, b, out=b))
    assert where == "stock"
    # out= self, the same view (an in-place addmm): well defined, and the kernel's to take.
    c = ints((128, 128), torch.bfloat16)
    c0 = c.clone()
    want = 0.5 * c.double() + 2.0 * ref64(a, b)
    out, where = went(lambda: torch.addmm(c, a, b, beta=0.5, alpha=2.0, out=c))
    assert out.data_ptr() == c.data_ptr()
    assert where == "flyops"  # the epilogue reads each element's addend before it writes it

    def stock_in_place():
        c1 = c0.clone()
        return torch.addmm(c1, a, b, beta=0.5, alpha=2.0, out=c1)

    check_exact(c, want, where, stock_in_place, "addmm out=self")


@pytest.mark.usefixtures("ours")
def test_forced_stock_and_disabled():
    a, b = operands(256, 512, 128, torch.bfloat16, "nt")
    with flyops.disabled("gemm"):
        stock = a @ b
    torch.ops.flyops._gemm_force(2)
    assert torch.ops.flyops._route_gemm(a, b).startswith("stock (forced")
    out, where = went(lambda: a @ b)
    assert where == "stock" and torch.equal(bits(out), bits(stock))
    torch.ops.flyops._gemm_force(1)
    with flyops.disabled("gemm"):
        _, where = went(lambda: a @ b)
    assert where == "stock"
    assert flyops.stats()["gemm"]["stock_reasons"].get("flyops disabled", 0) >= 1
    try:
        flyops.disable_op("gemm")
        _, where = went(lambda: a @ b)
        assert where == "stock"
    finally:
        flyops.enable_op("gemm")
    _, where = went(lambda: a @ b)
    assert where == "flyops"


# ---- beta = 0 never reads self ----------------------------------------------------------------

@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_beta_zero_ignores_nan_and_inf_in_self(dtype):
    M, N, K = 113, 256, 64
    a, b = operands(M, N, K, dtype, "nt")
    want = 2.0 * ref64(a, b)
    poisoned = nan_full((M, N), dtype)
    poisoned[::2] = float("inf")
    poisoned[1::4] = -float("inf")
    for s in (poisoned, poisoned[0], nan_full((N,), dtype)):
        out, where = went(lambda: torch.addmm(s, a, b, beta=0, alpha=2))
        assert where == "flyops"
        assert torch.isfinite(out).all()
        assert_same_bits(out, want.to(dtype), f"addmm beta=0 self={tuple(s.shape)}")
        o = nan_full((M, N), dtype)
        _, where = went(lambda: torch.addmm(s, a, b, beta=0.0, alpha=2.0, out=o))
        assert where == "flyops"
        assert_same_bits(o, want.to(dtype), "addmm.out beta=0")
    ab, bb = operands(64, 128, 64, dtype, "nn", batch=3)
    out, where = went(lambda: torch.baddbmm(nan_full((3, 64, 128), dtype), ab, bb, beta=0, alpha=1))
    assert where == "flyops"
    assert_same_bits(out, ref64(ab, bb).to(dtype), "baddbmm beta=0")


# ---- random normal inputs: the 2x-stock error rule against float64 ----------------------------

RULE_CASES = [
    # (overload, batch, M, N, K, layout, dtype)
    ("mm", None, 113, 203, 4096, "nt", torch.bfloat16),
    ("mm", None, 113, 203, 4096, "nt", torch.float16),
    ("mm", None, 4096, 4096, 4096, "nt", torch.bfloat16),
    ("mm", None, 1, 4096, 4096, "nt", torch.bfloat16),
    ("mm", None, 1000, 1000, 1000, "tn", torch.bfloat16),
    ("mm", None, 17, 4104, 40, "nn", torch.float16),
    ("addmm", None, 333, 1000, 2048, "nt", torch.float16),
    ("bmm", 8, 128, 256, 4096, "nn", torch.bfloat16),
    ("baddbmm", 4, 200, 136, 1024, "tt", torch.bfloat16),
]


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("case", RULE_CASES, ids=lambda c: f"{c[0]}-{c[1] or 1}x{c[2]}x{c[3]}x{c[4]}-{c[5]}-{c[6]}")
def test_random_normal_within_twice_stock_error(case):
    op, batch, M, N, K, layout, dtype = case
    a, b = operands(M, N, K, dtype, layout, gen=randn, batch=batch)
    want, scale = ref64(a, b), abs_scale(a, b)
    if op in ("addmm", "baddbmm"):
        s = randn((N,), dtype)
        fn = (lambda: torch.addmm(s, a, b)) if op == "addmm" else (lambda: torch.baddbmm(s, a, b))
        want = want + s.double()
        scale += float(s.double().abs().max().item())
    else:
        fn = {"mm": lambda: a @ b, "bmm": lambda: torch.bmm(a, b)}[op]
    with flyops.disabled("gemm"):
        stock = fn()
    poison(tuple(want.shape), dtype)
    out, where = went(fn)
    check_route(a, b, where)
    assert where == "flyops"
    ref.check(out, stock, want, dtype, K, scale)


def test_router_choice_is_consistent_and_correct():
    """Mode 0 (the router's table): wherever a call goes, it is the explain op's answer and
    its result keeps the error rule."""
    for M, N, K, layout in ((1, 4096, 4096, "nt"), (512, 1024, 512, "nn"), (4096, 4096, 4096, "nt"),
                            (113, 203, 64, "nt")):
        a, b = operands(M, N, K, torch.bfloat16, layout, gen=randn)
        with flyops.disabled("gemm"):
            stock = a @ b
        out, where = went(lambda: a @ b)
        check_route(a, b, where, forced=False)
        ref.check(out, stock, ref64(a, b), torch.bfloat16, K, abs_scale(a, b))


@pytest.mark.parametrize("shape", [(2048, 1001, 4096), (16, 50257, 768), (1, 50257, 768), (300, 1003, 776)],
                         ids=shape_id)
def test_router_sends_unaligned_rows_to_flyops(shape):
    """Mode 0: C's rows not 16-byte aligned (N % 8 != 0), N >= 1000 and K >= 768 are the
    table's flyops class (cuBLAS is slow there); exact on small integers, F.linear and
    addmm alike."""
    M, N, K = shape
    a, b = operands(M, N, K, torch.bfloat16, "nt")
    bias = ints((N,), torch.bfloat16)
    want = ref64(a, b)
    out, where = went(lambda: a @ b)
    assert where == "flyops"
    check_route(a, b, where, forced=False)
    check_exact(out, want, where, lambda: a @ b, f"{shape} mm")
    out, where = went(lambda: F.linear(a, b.t(), bias))
    assert where == "flyops"
    check_exact(out, bias.double() + want, where, lambda: F.linear(a, b.t(), bias), f"{shape} linear")


def test_router_sends_unaligned_batched_rows_to_flyops():
    """The class holds for bmm too (K >= 768); attention scores over an odd length (short K)
    go to flyops from two waves of tiles (16 x 1001 x 1001: 512 tiles) and stay stock below
    (4 x: 128 tiles). Exact on small integers either way."""
    a, b = operands(300, 1003, 776, torch.bfloat16, "nt", batch=3)
    out, where = went(lambda: a @ b)
    assert where == "flyops"
    check_route(a, b, where, forced=False)
    check_exact(out, ref64(a, b), where, lambda: a @ b, "bmm 3 x 300x1003x776")
    for batch, route in ((4, "stock"), (16, "flyops")):
        q, k = operands(1001, 1001, 128, torch.bfloat16, "nt", batch=batch)
        out, where = went(lambda: q @ k)
        assert where == route
        check_exact(out, ref64(q, k), where, lambda: q @ k, f"scores {batch} x 1001x1001x128")


# ---- the public API: nn.Linear with autograd, compile, graphs, autocast, determinism ----------

@pytest.mark.usefixtures("ours")
def test_linear_forward_and_backward():
    lin = torch.nn.Linear(512, 1000, device="cuda", dtype=torch.bfloat16)
    x0 = randn((4, 37, 512), torch.bfloat16)
    dy = randn((4, 37, 1000), torch.bfloat16)

    def run():
        m = torch.nn.Linear(512, 1000, device="cuda", dtype=torch.bfloat16)
        with torch.no_grad():
            m.weight.copy_(lin.weight)
            m.bias.copy_(lin.bias)
        x = x0.clone().requires_grad_()
        y = m(x)
        y.backward(dy)
        return y, x.grad, m.weight.grad, m.bias.grad

    f0, s0 = counts()
    ours_ = run()
    torch.cuda.synchronize()
    f1, s1 = counts()
    assert (f1 - f0, s1 - s0) == (3, 0), "forward addmm and two backward mm, all to flyops"
    with flyops.disabled("gemm"):
        stock = run()
    x, w, bias, g = x0.double().reshape(-1, 512), lin.weight.double(), lin.bias.double(), dy.double().reshape(-1, 1000)
    refs = [((x @ w.t() + bias).reshape(4, 37, 1000), float((x.abs() @ w.abs().t() + bias.abs()).max()), 512),
            ((g @ w).reshape(4, 37, 512), float((g.abs() @ w.abs()).max()), 1000),
            (g.t() @ x, float((g.abs().t() @ x.abs()).max()), 148),
            (g.sum(0), float(g.abs().sum(0).max()), 148)]
    for got, st, (want, scale, terms) in zip(ours_, stock, refs):
        ref.check(got, st, want, torch.bfloat16, terms, scale)


@pytest.mark.usefixtures("ours")
def test_torch_compile_fullgraph_reaches_flyops():
    """Compiled graphs call mm.out / addmm.out. Values in [-1, 1] with K = 64 keep every
    intermediate an integer below 256: compiled and eager must agree bit for bit however
    Inductor groups the additions."""
    x, w = ints((96, 64), torch.bfloat16, -1, 1), ints((64, 128), torch.bfloat16, -1, 1)
    w2, bias = ints((128, 64), torch.bfloat16, -1, 1), ints((128,), torch.bfloat16, -1, 1)

    def f(x, w, w2, bias):
        return x @ w + F.linear(x, w2, bias)

    compiled = torch.compile(f, fullgraph=True)
    f0, s0 = counts()
    out = compiled(x, w, w2, bias)
    out2 = compiled(x, w, w2, bias)
    torch.cuda.synchronize()
    f1, s1 = counts()
    assert f1 - f0 >= 2 and s1 == s0, (f1 - f0, s1 - s0)
    eager = f(x, w, w2, bias)
    assert_same_bits(out, eager, "compiled vs eager")
    assert_same_bits(out2, eager, "compiled (second call) vs eager")
    with flyops.disabled("gemm"):
        want = (x.double() @ w.double() + x.double() @ w2.double().t() + bias.double())
    assert_same_bits(out, want.to(torch.bfloat16), "compiled vs float64")


@pytest.mark.usefixtures("ours")
def test_torch_compile_linear_backward_reaches_flyops():
    """nn.Linear forward and backward compiled: AOTAutograd's backward graph calls mm for dX
    and dW. Values in [-1, 1] with every reduction at most 128 long keep each sum an integer
    bf16 holds exactly, so the outputs and gradients equal the float64 ones bit for bit."""
    bf = torch.bfloat16
    lin = torch.nn.Linear(64, 128, device="cuda", dtype=bf)
    with torch.no_grad():
        lin.weight.copy_(ints((128, 64), bf, -1, 1))
        lin.bias.copy_(ints((128,), bf, -1, 1))
    x = ints((96, 64), bf, -1, 1).requires_grad_()
    dy = ints((96, 128), bf, -1, 1)
    compiled = torch.compile(lin, fullgraph=True)
    f0, s0 = counts()
    y = compiled(x)
    torch.cuda.synchronize()
    f1, s1 = counts()
    y.backward(dy)
    torch.cuda.synchronize()
    f2, s2 = counts()
    assert f1 - f0 >= 1 and f2 - f1 >= 2 and s2 == s0, (f1 - f0, f2 - f1, s2 - s0)
    xd, wd, gd = x.detach().double(), lin.weight.detach().double(), dy.double()
    with flyops.disabled("gemm"):
        want = {"y": xd @ wd.t() + lin.bias.detach().double(), "dx": gd @ wd, "dw": gd.t() @ xd}
    assert_same_bits(y.detach(), want["y"].to(bf), "compiled forward")
    assert_same_bits(x.grad, want["dx"].to(bf), "compiled dX")
    assert_same_bits(lin.weight.grad, want["dw"].to(bf), "compiled dW")
    assert_same_bits(lin.bias.grad, gd.sum(0).to(bf), "compiled db")


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("backends", ["ATEN", pytest.param("ATEN,TRITON", marks=pytest.mark.large)])
def test_max_autotune_takes_flyops_as_the_aten_choice(backends):
    """Under max-autotune Inductor times its GEMM choices; the aten choice is the mm call our
    override takes, so flyops runs whichever wins (with ATEN alone, in the graph itself). The
    caches are off so that the choices are timed on every run; K = 256 of values in [-1, 1]
    keeps the result exact whoever computes it."""
    import torch._inductor.config as inductor_config

    bf = torch.bfloat16
    x, w = ints((256, 256), bf, -1, 1), ints((256, 384), bf, -1, 1)
    torch._dynamo.reset()
    with inductor_config.patch(max_autotune=True, max_autotune_gemm_backends=backends, force_disable_caches=True):
        compiled = torch.compile(lambda x, w: x @ w, fullgraph=True)
        f0, _ = counts()
        out = compiled(x, w)
        torch.cuda.synchronize()
        f1, _ = counts()
    torch._dynamo.reset()
    assert f1 > f0, "the aten choice never reached flyops"
    assert_same_bits(out, ref64(x, w).to(bf), f"max-autotune ({backends}) vs float64")


@pytest.mark.usefixtures("ours")
def test_out_resized_like_stock():
    """out= of another size is resized by stock's rule (a warning where it held elements,
    none where it was empty; its storage kept where it is large enough) and then written by
    the kernel; an out= of another dtype raises stock's error."""
    import warnings

    bf = torch.bfloat16
    a, b = operands(113, 264, 64, bf, "nt")
    bias = ints((264,), bf)
    prod = ref64(a, b)
    calls = {"mm.out": (lambda o: torch.mm(a, b, out=o), prod),
             "addmm.out": (lambda o: torch.addmm(bias, a, b, out=o), bias.double() + prod)}
    for name, (fn, want) in calls.items():
        for start in ((0,), (3, 5), (113 * 264 + 8,)):
            def run(disabled):
                o = nan_full(start, bf)
                ptr = o.data_ptr()
                with warnings.catch_warnings(record=True) as caught:
                    warnings.simplefilter("always")
                    if disabled:
                        with flyops.disabled("gemm"):
                            r, where = fn(o), "stock"
                    else:
                        r, where = went(lambda: fn(o))
                return o, r, ptr == o.data_ptr(), [str(m.message) for m in caught], where
            so, _, s_kept, s_warn, _ = run(True)
            oo, r, o_kept, o_warn, where = run(False)
            what = f"{name} from {start}"
            assert where == "flyops", what
            assert r.data_ptr() == oo.data_ptr() and oo.shape == so.shape and oo.stride() == so.stride(), what
            assert o_kept == s_kept and o_warn == s_warn, (what, o_warn, s_warn)
            check_exact(oo, want, where, None, what)
        seen = rejected(fn, (113, 264), torch.float32)
        assert seen[0][0] is not None and seen[0] == seen[1], (name, seen)
    # A call stock rejects (operands of two dtypes): its error, with out= left as stock leaves it.
    b16 = b.to(torch.float16)
    for name, fn in (("mm.out", lambda o: torch.mm(a, b16, out=o)),
                     ("addmm.out", lambda o: torch.addmm(bias, a, b16, out=o))):
        seen = rejected(fn, (3, 5), bf)
        assert seen[0][0] is not None and seen[0] == seen[1], (name, seen)


def rejected(fn, out_shape, out_dtype):
    """fn(out) on a fresh NaN out=, by stock then through flyops: each side's error text (None
    if it ran) and out's shape afterwards."""
    seen = []
    for disabled in (True, False):
        o = nan_full(out_shape, out_dtype)
        try:
            with flyops.disabled("gemm") if disabled else contextlib.nullcontext():
                fn(o)
            seen.append((None, tuple(o.shape)))
        except RuntimeError as e:
            seen.append((str(e), tuple(o.shape)))
    return seen


@pytest.mark.usefixtures("ours")
def test_cuda_graph_capture_and_replay():
    a, b = operands(512, 768, 1024, torch.bfloat16, "nt", gen=randn)
    bias = randn((768,), torch.bfloat16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):  # warm-up outside the graph
            torch.mm(a, b)
            torch.addmm(bias, a, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    f0, _ = counts()
    with torch.cuda.graph(g):
        y = torch.mm(a, b)
        z = torch.addmm(bias, a, b, beta=0.5, alpha=2.0)
    assert counts()[0] == f0 + 2
    for _ in range(2):
        a.copy_(randn(a.shape, torch.bfloat16))
        b.copy_(randn((768, 1024), torch.bfloat16).t())
        bias.copy_(randn((768,), torch.bfloat16))
        g.replay()
        torch.cuda.synchronize()
        assert_same_bits(y, torch.mm(a, b), "graph mm vs eager")
        assert_same_bits(z, torch.addmm(bias, a, b, beta=0.5, alpha=2.0), "graph addmm vs eager")


@pytest.mark.parametrize("rows", [1, 8, 16])
def test_decode_linear_routed_to_the_narrow_kernel(rows):
    """A decode step's nn.Linear (4096 -> 4096, bias) through the router, no force: the narrow
    kernel takes it; random values against float64 by the error rule (stock alongside),
    then captured in a CUDA graph and compiled with fullgraph=True, with the same bits."""
    lin = torch.nn.Linear(4096, 4096, device="cuda", dtype=torch.bfloat16)
    x = randn((rows, 4096), torch.bfloat16)
    assert torch.ops.flyops._route_gemm(x, lin.weight.t()).startswith("flyops_gemm_gemv<bf16,"), rows
    y, where = went(lambda: lin(x))
    assert where == "flyops"
    with flyops.disabled("gemm"):
        y_s = lin(x)
    xd, wd, bd = x.double(), lin.weight.double(), lin.bias.double()
    ref.check(y, y_s, xd @ wd.t() + bd, torch.bfloat16, 4096, float((xd.abs() @ wd.abs().t() + bd.abs()).max()))
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        lin(x)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        yg = lin(x)
    x.copy_(randn((rows, 4096), torch.bfloat16))
    g.replay()
    torch.cuda.synchronize()
    assert_same_bits(yg, lin(x), "graph replay vs eager")
    compiled = torch.compile(lin, fullgraph=True)
    f0, _ = counts()
    yc = compiled(x)
    torch.cuda.synchronize()
    assert counts()[0] > f0
    assert_same_bits(yc, lin(x), "compiled vs eager")


@pytest.mark.usefixtures("ours")
def test_autocast_linear_reaches_flyops():
    lin = torch.nn.Linear(512, 1000, device="cuda")
    x = torch.randn(64, 512, device="cuda")
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y, where = went(lambda: lin(x))
        with flyops.disabled("gemm"):
            y_s = lin(x)
    assert where == "flyops" and y.dtype == y_s.dtype == torch.bfloat16
    xb, wb, bb = x.bfloat16().double(), lin.weight.bfloat16().double(), lin.bias.bfloat16().double()
    want = xb @ wb.t() + bb
    ref.check(y, y_s, want, torch.bfloat16, 512, float((xb.abs() @ wb.abs().t() + bb.abs()).max()))


@pytest.mark.usefixtures("ours")
@pytest.mark.parametrize("shape,layout", [((113, 203, 4096), "nt"), ((512, 203, 4096), "tt"),
                                          ((256, 4096, 4096), "tn"), ((1000, 1000, 1024), "nn")],
                         ids=lambda v: shape_id(v) if isinstance(v, tuple) else v)
def test_split_k_exact(shape, layout):
    """Few tiles and a long K: forced calls take the split-K path (src/gemm/splitk.cuh), whose
    parts add in a fixed order: exact on small integers, the same bits run to run and in
    deterministic mode, and inside a captured CUDA graph (the workspace from the caching
    allocator, the reduction a dependent launch)."""
    M, N, K = shape
    a, b = operands(M, N, K, torch.bfloat16, layout)
    assert "_splitk<" in torch.ops.flyops._route_gemm(a, b)
    want = ref64(a, b)
    poison((M, N), torch.bfloat16)
    out, _ = run_exact(lambda: a @ b, a, b, want, "split-K a @ b")
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        again, where = went(lambda: a @ b)
    finally:
        torch.use_deterministic_algorithms(was)
    assert where == "flyops" and torch.equal(bits(again), bits(out))
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.mm(a, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        y = torch.mm(a, b)
    a.copy_(ints(a.shape, torch.bfloat16))  # new values, a's own strides
    g.replay()
    torch.cuda.synchronize()
    assert_same_bits(y, ref64(a, b).to(torch.bfloat16), "split-K graph replay")


def test_split_k_through_the_router():
    """Unforced, split-K runs where it measured faster (C's unaligned rows with few tiles:
    2048 x 1001 x 4096 in two parts) and nowhere else (aligned rows stay stock)."""
    a, b = operands(2048, 1001, 4096, torch.bfloat16, "nt")
    r = torch.ops.flyops._route_gemm(a, b)
    assert r == "flyops_gemm_splitk<bf16,A:k-major,B:k-major,kparts2>", r
    want = ref64(a, b)
    out, where = went(lambda: a @ b)
    assert where == "flyops"
    assert_same_bits(out, want.to(torch.bfloat16), "routed split-K")
    a, b = operands(256, 4096, 4096, torch.bfloat16, "nt")
    assert torch.ops.flyops._route_gemm(a, b).startswith("stock (")


@pytest.mark.usefixtures("ours")
def test_deterministic_same_bits():
    """No atomics: the same bits on every run, with and without deterministic algorithms.
    (Under deterministic mode a stock cuBLAS call without CUBLAS_WORKSPACE_CONFIG raises, so
    this also shows the calls stay ours.)"""
    a, b = operands(2048, 2048, 8192, torch.bfloat16, "nt", gen=randn)
    x, w = operands(1, 4096, 14336, torch.bfloat16, "nt", gen=randn)
    bias = randn((4096,), torch.bfloat16)
    ba, bb = operands(256, 512, 2048, torch.bfloat16, "nn", gen=randn, batch=4)
    calls = {"mm": lambda: a @ b, "addmm": lambda: torch.addmm(bias, x, w), "bmm": lambda: torch.bmm(ba, bb)}
    first = {k: went(fn) for k, fn in calls.items()}
    assert all(where == "flyops" for _, where in first.values())
    was = torch.are_deterministic_algorithms_enabled()
    torch.use_deterministic_algorithms(True)
    try:
        for _ in range(2):
            for k, fn in calls.items():
                out, where = went(fn)
                assert where == "flyops", k
                assert torch.equal(bits(out), bits(first[k][0])), k
    finally:
        torch.use_deterministic_algorithms(was)
    for k, fn in calls.items():
        assert torch.equal(bits(fn()), bits(first[k][0])), k


# ---- invalid inputs raise stock's errors --------------------------------------------------------

BAD_CASES = ["mm shapes", "mm.out shapes", "mm 1-D", "mm dtypes", "mm devices", "mm.out dtype", "addmm self shape",
             "addmm dtypes", "addmm self dtype", "bmm 2-D", "bmm batches", "bmm shapes", "bmm dtypes", "bmm.out 2-D",
             "baddbmm batches", "baddbmm self shape", "addmm self shape beta 0", "addmm self dtype beta 0",
             "baddbmm self shape beta 0"]


def bad_call(case):
    bf = torch.bfloat16
    a, b = randn((64, 64), bf), randn((64, 64), bf)
    a3, b3 = randn((2, 64, 64), bf), randn((2, 64, 64), bf)
    return {
        "mm shapes": lambda: torch.mm(randn((3, 40), bf), randn((48, 6), bf)),
        "mm.out shapes": lambda: torch.mm(randn((3, 40), bf), randn((48, 6), bf),
                                          out=torch.empty(3, 6, device="cuda", dtype=bf)),
        "mm 1-D": lambda: torch.mm(randn((64,), bf), b),
        "mm dtypes": lambda: torch.mm(a, b.half()),
        "mm devices": lambda: torch.mm(a, b.cpu()),
        "mm.out dtype": lambda: torch.mm(a, b, out=torch.empty(64, 64, device="cuda")),
        "addmm self shape": lambda: torch.addmm(randn((7,), bf), a, b),
        "addmm dtypes": lambda: torch.addmm(randn((64,), bf), a, b.half()),
        "addmm self dtype": lambda: torch.addmm(randn((64,), torch.float16), a, b),
        "bmm 2-D": lambda: torch.bmm(a, b3),
        "bmm batches": lambda: torch.bmm(a3, randn((3, 64, 64), bf)),
        "bmm shapes": lambda: torch.bmm(a3, randn((2, 48, 64), bf)),
        "bmm dtypes": lambda: torch.bmm(a3, b3.half()),
        "bmm.out 2-D": lambda: torch.bmm(a, b3, out=torch.empty(2, 64, 64, device="cuda", dtype=bf)),
        "baddbmm batches": lambda: torch.baddbmm(randn((2, 64, 64), bf), a3, randn((3, 64, 64), bf)),
        "baddbmm self shape": lambda: torch.baddbmm(randn((2, 5, 64), bf), a3, b3),
        # beta == 0 never reads self, but stock still checks it
        "addmm self shape beta 0": lambda: torch.addmm(randn((7,), bf), a, b, beta=0),
        "addmm self dtype beta 0": lambda: torch.addmm(randn((64,), torch.float16), a, b, beta=0),
        "baddbmm self shape beta 0": lambda: torch.baddbmm(randn((2, 5, 64), bf), a3, b3, beta=0),
    }[case]


def _outcome(fn):
    try:
        return ("ok", fn())
    except Exception as e:  # noqa: BLE001
        return (type(e), str(e))


@pytest.mark.parametrize("mode", [0, 1], ids=["router", "forced"])
@pytest.mark.parametrize("case", BAD_CASES)
def test_invalid_inputs_raise_like_stock(case, mode):
    fn = bad_call(case)
    torch.ops.flyops._gemm_force(mode)
    with flyops.disabled("gemm"):
        stock = _outcome(fn)
    if stock[0] == "ok":  # not an error in this torch after all: then the same result
        ours = _outcome(fn)
        assert ours[0] == "ok", ours
        assert ours[1].shape == stock[1].shape and ours[1].dtype == stock[1].dtype
        torch.testing.assert_close(ours[1], stock[1])
        return
    with pytest.raises(stock[0]) as ours:
        fn()
    assert type(ours.value) is stock[0]
    assert str(ours.value) == stock[1]


# ---- the log and the profiler ----------------------------------------------------------------

@pytest.mark.usefixtures("ours")
def test_log_and_profiler_names(capfd):
    a, b = operands(256, 512, 512, torch.bfloat16, "nt", gen=randn)  # eight K blocks: not split
    flyops.set_log(1)
    try:
        a @ b
        a.float() @ b.float()
        torch.cuda.synchronize()
    finally:
        flyops.set_log(0)
    lines = [l for l in capfd.readouterr().err.splitlines() if l.startswith("flyops: gemm ")]
    assert any(re.fullmatch(r"flyops: gemm mm bf16\[256, 512\] @ .* -> flyops_gemm<bf16,A:k-major,B:k-major>", l)
               for l in lines), lines
    assert any(re.fullmatch(r"flyops: gemm mm fp32\[256, 512\] @ .* -> stock \(.+\)", l) for l in lines), lines
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        a @ b
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert "flyops::gemm" in names
    kernels = [n for n in names if "flyops_gemm" in n]
    assert kernels and all(re.match(r"(void )?flyops_gemm(_decode|_splitk|_splitk_reduce|_gemv)?<", n) for n in kernels), kernels

