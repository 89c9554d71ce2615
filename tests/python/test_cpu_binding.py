"""What runs without a GPU: the library loads and registers, the controls work, routing
decisions and log lines are right, and a broken or mismatched build leaves torch working."""

import functools
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import threading

import pytest
import torch

import flyops

OPS = ("_fused_rms_norm", "_fused_rms_norm_backward", "topk", "topk.values",
       "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_flash_attention")


def run_py(code, env=None, check=True):
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                       env=e, timeout=300)
    if check and r.returncode != 0:
        raise AssertionError(f"subprocess failed ({r.returncode}):\n{r.stdout}\n{r.stderr}")
    return r


@pytest.mark.parametrize("op", OPS)
def test_overrides_registered_on_cuda_key(op):
    dump = torch._C._dispatch_dump(f"aten::{op}")
    cuda = [l for l in dump.splitlines() if l.startswith("CUDA:")]
    assert len(cuda) == 1, dump
    assert "binding/registration.cc" in cuda[0], cuda[0]
    # the stock kernel is still there underneath, reachable through at::cuda::
    assert "CUDA (inactive)" in dump


def test_import_does_not_initialise_cuda():
    r = run_py("""
        import torch, flyops
        print(torch.cuda.is_initialized())
    """)
    assert r.stdout.strip() == "False"


def test_entry_point_declared():
    eps = importlib.metadata.entry_points(group="torch.backends")
    mine = [ep for ep in eps if ep.name == "flyops"]
    assert len(mine) == 1
    assert mine[0].value == "flyops_autoload:_autoload"


def test_import_torch_alone_loads_flyops():
    code = """
        import sys, torch
        print('flyops' in sys.modules)
        print([l for l in torch._C._dispatch_dump('aten::_fused_rms_norm').splitlines() if l.startswith('CUDA:')])
    """
    on = run_py(code)
    assert on.stdout.splitlines()[0] == "True"
    assert "registration.cc" in on.stdout
    assert "Overriding a previously registered kernel" not in on.stderr
    off = run_py(code, env={"TORCH_DEVICE_BACKEND_AUTOLOAD": "0"})
    assert off.stdout.splitlines()[0] == "False"
    assert "registration.cc" not in off.stdout


def _fake_install(tmp_path, mutate):
    """A copy of the installed flyops with its own dist-info, first on sys.path."""
    import flyops_autoload

    src = os.path.dirname(flyops.__file__)
    dst = tmp_path / "flyops"
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(os.path.dirname(flyops_autoload.__file__), tmp_path / "flyops_autoload",
                    ignore=shutil.ignore_patterns("__pycache__"))
    dist = tmp_path / "flyops-0.1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: flyops\nVersion: 0.1.0\n")
    (dist / "entry_points.txt").write_text("[torch.backends]\nflyops = flyops_autoload:_autoload\n")
    mutate(dst)
    return {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", "")}


def _check_torch_survives(env, expect_in_warning):
    r = run_py("""
        import sys, torch
        x = torch.ones(3) * 2
        print('torch ok', float(x.sum()))
        print('flyops loaded:', 'flyops' in sys.modules and getattr(sys.modules['flyops'], '__version__', None) is not None)
        print([l for l in torch._C._dispatch_dump('aten::_fused_rms_norm').splitlines() if l.startswith('CUDA:')])
    """, env=env)
    assert "torch ok 6.0" in r.stdout
    assert "registration.cc" not in r.stdout  # flyops stayed off
    warnings = [l for l in r.stderr.splitlines() if "flyops is off" in l]
    assert len(warnings) == 1, r.stderr
    assert expect_in_warning in warnings[0], warnings[0]


def test_mismatched_torch_version_leaves_torch_working(tmp_path):
    def mutate(pkg):
        info = pkg / "_build_info.py"
        info.write_text(info.read_text().replace(f'TORCH_VERSION = "{torch.__version__}"',
                                                 'TORCH_VERSION = "1.0.0+other"'))
    _check_torch_survives(_fake_install(tmp_path, mutate), "built for torch 1.0.0+other")


def test_broken_library_leaves_torch_working(tmp_path):
    def mutate(pkg):
        (pkg / "lib" / "libflyops_torch.so").write_bytes(b"\x7fELF this is not a library")
    _check_torch_survives(_fake_install(tmp_path, mutate), "failed to load")


def test_missing_library_leaves_torch_working(tmp_path):
    def mutate(pkg):
        (pkg / "lib" / "libflyops_torch.so").unlink()
    _check_torch_survives(_fake_install(tmp_path, mutate), "missing")


def test_explicit_import_of_broken_build_raises(tmp_path):
    def mutate(pkg):
        (pkg / "lib" / "libflyops_torch.so").write_bytes(b"garbage")
    env = _fake_install(tmp_path, mutate)
    env["TORCH_DEVICE_BACKEND_AUTOLOAD"] = "0"
    r = run_py("import flyops", env=env, check=False)
    assert r.returncode != 0 and "failed to load" in r.stderr


# ---- controls ---------------------------------------------------------------------------

def test_enable_disable():
    assert flyops.is_enabled()
    try:
        flyops.disable()
        assert not flyops.is_enabled() and not flyops.active("rms_norm")
    finally:
        flyops.enable()
    assert flyops.active("rms_norm")


def test_per_op_switch():
    try:
        flyops.disable_op("rms_norm_backward")
        assert not flyops.op_enabled("rms_norm_backward")
        assert flyops.active("rms_norm") and not flyops.active("rms_norm_backward")
    finally:
        flyops.enable_op("rms_norm_backward")
    assert flyops.active("rms_norm_backward")
    with pytest.raises(RuntimeError, match="unknown op"):
        flyops.disable_op("no_such_op")


def test_disabled_context_nests_and_restores():
    with flyops.disabled("rms_norm"):
        assert not flyops.active("rms_norm") and flyops.active("rms_norm_backward")
        with flyops.disabled():
            assert not flyops.active("rms_norm_backward")
        assert flyops.active("rms_norm_backward") and not flyops.active("rms_norm")
    assert flyops.active("rms_norm")
    with pytest.raises(ValueError):
        flyops.disabled("no_such_op")


def test_disabled_context_is_per_thread():
    seen = {}
    inside = threading.Event()
    done = threading.Event()

    def other():
        inside.wait(10)
        seen["other"] = flyops.active("rms_norm")
        done.set()

    t = threading.Thread(target=other)
    t.start()
    with flyops.disabled():
        inside.set()
        done.wait(10)
        seen["main"] = flyops.active("rms_norm")
    t.join()
    assert seen == {"other": True, "main": False}


def _profiled_step():
    torch.ones(4).add_(1)


def test_disabled_and_the_profiler_interleave():
    """The profiler keeps its state in the same thread-local chain as disabled() and pops
    it by kind: starting or stopping it inside a disabled() block that it straddles must
    work, and each block still covers exactly its own span."""
    from torch.profiler import ProfilerActivity, profile

    # Started inside the block, stopped after it.
    p = profile(activities=[ProfilerActivity.CPU])
    with flyops.disabled("rms_norm"):
        p.start()
        _profiled_step()
        assert not flyops.active("rms_norm")
    assert flyops.active("rms_norm")
    _profiled_step()
    p.stop()
    # Started before the block, stopped inside it (a scheduled profiler's step() does this).
    p = profile(activities=[ProfilerActivity.CPU])
    p.start()
    with flyops.disabled("rms_norm"):
        _profiled_step()
        p.stop()
        assert not flyops.active("rms_norm")
    assert flyops.active("rms_norm")
    # Both at once, nested blocks, then a profiler entirely inside one.
    p = profile(activities=[ProfilerActivity.CPU])
    p.start()
    with flyops.disabled("rms_norm"):
        with flyops.disabled():
            p.stop()
            with profile(activities=[ProfilerActivity.CPU]):
                _profiled_step()
                assert not flyops.active("topk")
        assert flyops.active("topk") and not flyops.active("rms_norm")
    assert flyops.active("rms_norm") and flyops.active("topk")


def test_disabled_as_decorator():
    @flyops.disabled("rms_norm")
    def f():
        return flyops.active("rms_norm")

    assert f() is False
    assert flyops.active("rms_norm")


def test_env_disable():
    r = run_py("import flyops; print(flyops.is_enabled())", env={"FLYOPS_DISABLE": "1"})
    assert r.stdout.strip() == "False"


def test_stats_shape():
    s = flyops.stats()
    assert set(s) == set(flyops.ops())
    for v in s.values():
        assert set(v) == {"flyops", "stock", "stock_reasons"}
    flyops.reset_stats()
    assert all(v["flyops"] == 0 and v["stock"] == 0 for v in flyops.stats().values())


def test_build_info_matches_torch():
    info = flyops.build_info()
    assert info["torch"] == torch.__version__ and info["cuda_arch"] == "sm_90a"


# ---- routing decisions (the same code the CUDA override runs, for a described GPU) --------

def route(x, shape, w=None, eps=None, cc=(9, 0)):
    return torch.ops.flyops._route_rms_norm(x, shape, w, eps, cc[0], cc[1], 132)


def test_routing_decisions():
    x = torch.randn(64, 4096, dtype=torch.bfloat16)
    w = torch.randn(4096, dtype=torch.bfloat16)
    assert re.fullmatch(r"flyops_rms_norm_fwd<bf16,v8,\d+x\d+/\d+>", route(x, [4096], w))
    assert route(x.float(), [4096]).startswith("flyops_rms_norm_fwd<fp32,v4,")
    assert route(x, [4096], w, cc=(8, 0)) == "stock (flyops kernels need compute capability 9.0 (H100/H200))"
    assert route(x, [4096], w, cc=(10, 0)).startswith("stock (flyops kernels need")
    assert route(x.double(), [4096]).startswith("stock (dtype")
    assert route(x, [4096], w.float()) == "stock (weight dtype differs from input)"
    assert route(x, [2048]) == "stock (normalized_shape does not match the input)"
    assert route(x, [4096], w[:2048]) == "stock (weight shape differs from normalized_shape)"
    assert route(x.t(), [64]) == "stock (rows not contiguous (unsupported layout))"
    assert route(x, [4096], w[::1].view(2, 2048).t().reshape(4096)) != ""  # reshape copies: fine
    # odd shapes: one element per access
    assert route(torch.randn(113, 203), [203]).startswith("flyops_rms_norm_fwd<fp32,v1,")
    # a view one element off alignment
    base = torch.randn(64 * 4096 + 1, dtype=torch.bfloat16)
    assert ",v1," in route(base[1:].view(64, 4096), [4096])
    # rows with a stride (a slice of wider rows) are still ours
    wide = torch.randn(64, 8192, dtype=torch.bfloat16)
    assert route(wide[:, :4096], [4096]).startswith("flyops_rms_norm_fwd<bf16,v8,")
    # several normalized dims, batch dims collapsed
    assert route(torch.randn(2, 3, 16, 64), [16, 64]).startswith("flyops_rms_norm_fwd<fp32,")
    # long rows
    assert route(torch.randn(2, 65536, dtype=torch.bfloat16), [65536]) == "flyops_rms_norm_fwd_split<bf16,v8>"


def test_topk_routing_decisions():
    r = torch.ops.flyops._route_topk
    f32 = lambda *shape, **kw: torch.empty(*shape, **kw)  # noqa: E731
    assert r(f32(16384, 128), 8) == "flyops_topk_group<fp32>"  # the group kernel's threshold form
    assert r(f32(16384, 128), 4) == "flyops_topk_group<fp32>"
    assert r(f32(16384, 256), 8) == "flyops_topk_group<fp32,t16>"  # sixteen threads a row (v56)
    assert r(f32(1024, 256), 8) == "flyops_topk_group<fp32>"
    assert r(f32(2048, 256), 8) == "flyops_topk_warp<fp32>"  # the lane-group threshold
    assert r(f32(16384, 256, dtype=torch.bfloat16), 8) == "flyops_topk_group<bf16,t16>"
    assert r(f32(64, 128), 8) == "flyops_topk_group<fp32>"  # few rows: sixteen threads a row
    assert r(f32(64, 128), 2) == "flyops_topk_warp<fp32>"
    assert r(f32(4096, 1024), 64) == "flyops_topk_rows<fp32>"  # a warp a row (v71)
    assert r(f32(16384, 512, dtype=torch.bfloat16), 64) == "flyops_topk_rows<bf16>"
    assert r(f32(64, 256), 2) == "flyops_topk_group<fp32,t32>"  # a warp a row
    assert r(f32(1, 128256), 1) == "flyops_topk_argmax<fp32,c16>"
    assert r(f32(1, 128256, dtype=torch.bfloat16), 50) == "flyops_topk_delegates<bf16,g64,finish8>"  # v66
    # few rows of >= 120k at k >= 256: the screened list, its stream keeping the maxima (v117c)
    assert r(f32(1, 128256, dtype=torch.bfloat16), 256) == "flyops_topk_delegates<bf16,g16,finish16,screen,maxima>"
    assert r(f32(1, 100000, dtype=torch.bfloat16), 256) == "flyops_topk_cluster<bf16,c16,gather>"
    # 64 rows or more of 16k-64k at k >= 512: the finish that lists its row itself (v118)
    assert r(f32(64, 32000), 1024) == "flyops_topk_delegates<fp32,g4,finish32,screen,row>"
    assert r(f32(1, 1 << 24), 100).startswith("flyops_topk_delegates<fp32")
    assert r(f32(1, (1 << 24) + 1)[:, 1:], 100).startswith("flyops_topk_two_stage<fp32")  # misaligned
    assert r(f32(256, 262144), 50) == "flyops_topk_delegates<fp32,g64,finish8>"
    assert r(f32(256, 262144), 1024) == "flyops_topk_delegates<fp32,g16,finish32,screen>"  # keys in shared memory, screened
    assert r(f32(300, 64), 5, 0) == "stock (dim is not the last (moving it last would cost a copy))"
    assert r(f32(300, 64).t(), 5) == "stock (rows not contiguous (unsupported layout))"
    assert r(f32(4, 100), 101) == "stock (k out of range)"
    assert r(f32(4, 100), 0) == "stock (empty input or k == 0)"
    assert r(torch.empty(4, 100, dtype=torch.int64), 5) == "stock (dtype not float32, float16 or bfloat16)"
    assert r(f32(4, 100), 5, cc_major=8).startswith("stock (flyops kernels need compute capability 9.0")
    # a sorted k past the kernels' sorts: the unsorted selection, then PyTorch's sort
    assert r(f32(1, 100000), 60000) == r(f32(1, 100000), 60000, sorted=False) + "+sort"
    assert r(f32(1, 100000), 60000, sorted=False).startswith("flyops_topk_cluster")
    # two stages hold this k unsorted: a sorted call takes them (not the passes), sorted after
    assert r(f32(1, 1 << 20), 16384) == r(f32(1, 1 << 20), 16384, sorted=False) + "+sort"
    assert r(f32(1, 1 << 20), 16384, sorted=False).startswith("flyops_topk_two_stage<fp32")
    # where no selection holds k: the radix passes in global memory, sorted after them
    assert r(f32(1, 1 << 24), 1 << 20).startswith("flyops_topk_passes<fp32,c")
    assert r(f32(1, 1 << 24), 1 << 20).endswith("+sort")
    assert r(f32(1, 1 << 24), 1 << 20, sorted=False) + "+sort" == r(f32(1, 1 << 24), 1 << 20)


def test_backward_routing_decisions():
    x = torch.randn(64, 4096, dtype=torch.bfloat16)
    g = torch.randn_like(x)
    w = torch.randn(4096, dtype=torch.bfloat16)
    rstd = torch.rand(64, 1)
    r = lambda *a, **k: torch.ops.flyops._route_rms_norm_backward(*a, **k)
    assert r(g, x, [4096], rstd, w, [True, True]).startswith("flyops_rms_norm_bwd<bf16,v8,")
    assert r(g.float(), x, [4096], rstd, w, [True, True]) == "stock (grad_out dtype differs from input)"
    assert r(g, x, [4096], rstd.double(), w, [True, True]).startswith("stock (rstd")
    assert r(g.t().contiguous().t(), x, [4096], rstd, w, [True, True]).startswith("stock (rows")
    assert r(g, x, [4096], rstd, w, [True, True], 8, 6).startswith("stock (flyops kernels need")


def test_log_lines_counted_not_repeated():
    r = run_py("""
        import torch, flyops
        x = torch.randn(8, 4096, dtype=torch.bfloat16)
        for _ in range(3):
            torch.ops.flyops._route_rms_norm(x, [4096], None, 1e-6)
        torch.ops.flyops._route_rms_norm(x.double(), [4096], None, None)
    """, env={"FLYOPS_LOG": "1"})
    lines = [l for l in r.stderr.splitlines() if l.startswith("flyops:")]
    assert len(lines) == 3, r.stderr
    assert re.fullmatch(r"flyops: rms_norm bf16\[8, 4096\]\(cpu\) weight=none eps=1e-06 -> "
                        r"flyops_rms_norm_fwd<bf16,v8,\d+x\d+/\d+>", lines[0]), lines[0]
    assert lines[1:] == [
        "flyops: (previous line repeated 2 more times)",
        "flyops: rms_norm fp64[8, 4096](cpu) weight=none eps=None -> stock (dtype not float32, float16 or bfloat16)",
    ], r.stderr


def test_log_off_by_default():
    r = run_py("""
        import torch, flyops
        torch.ops.flyops._route_rms_norm(torch.randn(8, 64), [64], None, None)
    """)
    assert "flyops:" not in r.stderr


def test_bench_without_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    r = subprocess.run([sys.executable, "-m", "flyops.bench", "--op", "rms_norm"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0
    assert "no CUDA GPU" in r.stdout


# ---- GEMM (the binding: binding/gemm.cc) -----------------------------------------------------

GEMM_OPS = ("mm", "mm.out", "addmm", "addmm.out", "bmm", "bmm.out", "baddbmm", "baddbmm.out")
GEMM_KERNEL = re.compile(r"flyops_gemm(_decode|_splitk|_gemv)?<(bf16|fp16),A:(k|m)-major,B:(k|n)-major"
                         r"(,n(16|64),kparts\d+|,kparts[248]|,n(8|16),r[1248])?>")


@pytest.fixture
def gemm_forced():
    """The kernel's own limits (mode 1: past the router's speed table), reset afterwards."""
    torch.ops.flyops._gemm_force(1)
    yield
    torch.ops.flyops._gemm_force(0)


@pytest.mark.parametrize("op", GEMM_OPS)
def test_gemm_overrides_registered_on_cuda_key(op):
    test_overrides_registered_on_cuda_key(op)


def test_gemm_controls():
    assert "gemm" in flyops.ops()
    assert set(flyops.stats()["gemm"]) == {"flyops", "stock", "stock_reasons"}
    with flyops.disabled("gemm"):
        assert not flyops.active("gemm") and flyops.active("topk")
    try:
        flyops.disable_op("gemm")
        assert not flyops.op_enabled("gemm") and not flyops.active("gemm")
    finally:
        flyops.enable_op("gemm")
    assert flyops.active("gemm")


def _gemm_operands(M, N, K, layout, dtype=torch.bfloat16):
    """a: "n" row-major [M, K], "t" the .t() of a row-major [K, M]; b: "n" row-major [K, N],
    "t" the .t() of a row-major [N, K] (F.linear's weight)."""
    a = torch.empty(K, M, dtype=dtype).t() if layout[0] == "t" else torch.empty(M, K, dtype=dtype)
    b = torch.empty(N, K, dtype=dtype).t() if layout[1] == "t" else torch.empty(K, N, dtype=dtype)
    return a, b


@pytest.mark.usefixtures("gemm_forced")
def test_gemm_routing_decisions():
    r = torch.ops.flyops._route_gemm
    majors = {"nn": "A:k-major,B:n-major", "nt": "A:k-major,B:k-major",
              "tn": "A:m-major,B:n-major", "tt": "A:m-major,B:k-major"}
    for dtype, tag in ((torch.bfloat16, "bf16"), (torch.float16, "fp16")):
        for layout, m in majors.items():
            assert r(*_gemm_operands(128, 256, 64, layout, dtype)) == f"flyops_gemm<{tag},{m}>"
    # odd M and N: TMA zero-fills the edges, as long as the strides are 16-byte multiples
    assert r(*_gemm_operands(113, 203, 64, "nt")) == "flyops_gemm<bf16,A:k-major,B:k-major>"
    # one tile and a long K: split along K in 8 parts (forced only: src/gemm/splitk.cuh)
    assert r(*_gemm_operands(113, 203, 4096, "nt")) == "flyops_gemm_splitk<bf16,A:k-major,B:k-major,kparts8>"
    assert r(*_gemm_operands(256, 4096, 4096, "tn")) == "flyops_gemm_splitk<bf16,A:m-major,B:n-major,kparts4>"
    bf = lambda *shape: torch.empty(*shape, dtype=torch.bfloat16)  # noqa: E731
    # M <= 64 rows: the decode kernel (A padded to 64 rows past 16; one K block, one part)
    assert r(*_gemm_operands(17, 4104, 40, "nn")) == "flyops_gemm_decode<bf16,A:k-major,B:n-major,n64,kparts1>"
    assert r(*_gemm_operands(16, 4096, 4096, "nn")) == "flyops_gemm_decode<bf16,A:k-major,B:n-major,n16,kparts4>"
    assert r(bf(16, 4104)[:, :4100], bf(4096, 4104)[:, :4100].t()) == \
        "flyops_gemm_decode<bf16,A:k-major,B:k-major,n16,kparts4>"  # K % 8 != 0 (padded rows)
    # M <= 16 with both operands K-major, K % 8 == 0 and K >= 2048: the narrow kernel (past 8
    # rows up to 2^26 weight elements), its K runs per 16 rows as many as fill the SMs once
    # (8 at 4096 rows, 2 at 14336), else 8
    assert r(*_gemm_operands(16, 4096, 4096, "nt")) == "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n16,r8>"
    assert r(*_gemm_operands(1, 14336, 4096, "nt")) == "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r2>"
    assert r(*_gemm_operands(8, 128256, 4096, "nt")) == "flyops_gemm_gemv<bf16,A:k-major,B:k-major,n8,r8>"
    assert r(*_gemm_operands(16, 128256, 4096, "nt")).startswith("flyops_gemm_decode<")
    assert r(*_gemm_operands(8, 4096, 1024, "nt")).startswith("flyops_gemm_decode<")
    assert r(torch.empty(3, 64, 128, dtype=torch.bfloat16), torch.empty(3, 128, 256, dtype=torch.bfloat16)) == \
        "flyops_gemm<bf16,A:k-major,B:n-major>"
    stock = {
        "K = 33 row-major": r(bf(64, 33), bf(33, 64)),
        "ld 113 (M-major A)": r(*_gemm_operands(113, 208, 64, "tn")),
        "ld 203 (N-major B)": r(*_gemm_operands(128, 203, 64, "nn")),
        "offset by one element": r(bf(64 * 64 + 1)[1:].view(64, 64), bf(64, 64)),
        "x[:, 1:]": r(bf(64, 72)[:, 1:], bf(71, 64)),
        "no unit-stride dim": r(bf(64, 128)[:, ::2], bf(64, 64)),
        "fp32": r(torch.empty(64, 64), torch.empty(64, 64)),
        "fp64": r(torch.empty(64, 64, dtype=torch.float64), torch.empty(64, 64, dtype=torch.float64)),
        "int32": r(torch.empty(64, 64, dtype=torch.int32), torch.empty(64, 64, dtype=torch.int32)),
        "mixed dtypes": r(bf(64, 64), torch.empty(64, 64, dtype=torch.float16)),
        "broadcast batch": r(bf(1, 64, 64).expand(3, 64, 64), bf(3, 64, 64)),
        "empty M": r(bf(0, 64), bf(64, 64)),
        "empty K": r(bf(64, 0), bf(0, 64)),
        "empty N": r(bf(64, 64), bf(64, 0)),
        "compute capability 8.0": r(bf(128, 64), bf(64, 256), 8, 0),
        "compute capability 10.0": r(bf(128, 64), bf(64, 256), 10, 0),
    }
    for what, text in stock.items():
        assert text.startswith("stock (") and text.endswith(")") and len(text) > len("stock ()"), (what, text)
    assert stock["compute capability 8.0"] == "stock (flyops kernels need compute capability 9.0 (H100/H200))"


def test_gemm_router_and_force_modes():
    a, b = _gemm_operands(4096, 4096, 4096, "nt")
    try:
        torch.ops.flyops._gemm_force(2)
        assert torch.ops.flyops._route_gemm(a, b).startswith("stock (")
        torch.ops.flyops._gemm_force(1)
        assert torch.ops.flyops._route_gemm(a, b) == "flyops_gemm<bf16,A:k-major,B:k-major>"
        torch.ops.flyops._gemm_force(0)  # the router's table: either answer, well formed
        text = torch.ops.flyops._route_gemm(a, b)
        assert GEMM_KERNEL.fullmatch(text) or (text.startswith("stock (") and text.endswith(")")), text
    finally:
        torch.ops.flyops._gemm_force(0)


def test_gemm_router_per_part_table():
    """src/gemm/measured_shapes.inc holds each part's runs apart: a shape measured on both the
    H100 and the H200 routes on each by that part's own entry, with the table's reason; other
    parts keep the class rules; the explain op's default is the operands' own part, the H200
    for CPU tensors."""
    r = torch.ops.flyops._route_gemm
    table = "stock (stock measured faster on this shape (gemm/measured_shapes.inc))"
    ops = _gemm_operands(1, 128256, 4096, "nt")  # H100: 1.070x, 1.124x; H200: 0.988x, 0.965x
    assert r(*ops, gpu="H100").startswith("flyops_gemm_")
    assert r(*ops, gpu="H200") == table and r(*ops) == r(*ops, gpu="H200")
    assert "gemm/tuned_table.h" in r(*ops, gpu="other")  # no table: the class rules
    ops = _gemm_operands(1, 6144, 4096, "nt")  # H100: 1.155x, 1.022x (under the margin); H200: 1.131x, 1.031x
    assert r(*ops, gpu="H100") == table
    assert r(*ops, gpu="H200").startswith("flyops_gemm_gemv<")


def test_gemm_router_table_classes():
    """Mode 0 on a part without measured runs: the class rules send C's unaligned rows
    (N % 8 != 0, N >= 1000, K >= 768, or K >= 64 over at least 256 tiles) to flyops and
    everything else to stock, saying why."""
    r = functools.partial(torch.ops.flyops._route_gemm, gpu="other")
    assert r(*_gemm_operands(4096, 50257, 768, "nt")) == "flyops_gemm<bf16,A:k-major,B:k-major>"
    assert r(*_gemm_operands(1, 50257, 768, "nt")).startswith("flyops_gemm_decode<bf16,A:k-major,B:k-major,")
    for shape in ((4096, 4096, 4096), (113, 203, 4096), (1001, 1001, 128), (1, 28672, 8192), (16, 14336, 4096),
                  (16, 6144, 4096), (8, 1024, 1024)):
        assert "tuned_table" in r(*_gemm_operands(*shape, "nt")), shape
    # decode-sized weights of 2^24-2^26 elements on the narrow kernel (2^24 at 9-16 rows)
    for shape in ((1, 4096, 4096), (8, 14336, 4096), (1, 4096, 14336), (16, 4096, 4096)):
        assert r(*_gemm_operands(*shape, "nt")).startswith("flyops_gemm_gemv<"), shape
    # few tiles (64), long K, in the class: split along K, where it measured faster
    assert r(*_gemm_operands(2048, 1001, 4096, "nt")) == "flyops_gemm_splitk<bf16,A:k-major,B:k-major,kparts2>"
    # attention scores as a bmm: short K, flyops over 32 heads (1024 tiles), stock over 4 (128)
    q, k = torch.empty(32, 1001, 128, dtype=torch.bfloat16), torch.empty(32, 1001, 128, dtype=torch.bfloat16)
    assert r(q, k.transpose(-1, -2)) == "flyops_gemm<bf16,A:k-major,B:k-major>"
    assert "tuned_table" in r(q[:4], k[:4].transpose(-1, -2))
    x, w = torch.empty(8, 2048, 4096, dtype=torch.bfloat16), torch.empty(8, 4095, 4096, dtype=torch.bfloat16)
    assert r(x, w.transpose(-1, -2)) == "flyops_gemm<bf16,A:k-major,B:k-major>"


def test_gemm_log_lines():
    r = run_py("""
        import torch, flyops
        torch.ops.flyops._gemm_force(1)
        a = torch.empty(8, 64, dtype=torch.bfloat16)
        w = torch.empty(32, 64, dtype=torch.bfloat16)
        torch.ops.flyops._route_gemm(a, w.t())
        torch.ops.flyops._route_gemm(a.float(), w.float().t())
    """, env={"FLYOPS_LOG": "1"})
    lines = [l for l in r.stderr.splitlines() if l.startswith("flyops:")]
    assert len(lines) == 2, r.stderr
    assert lines[0].startswith("flyops: gemm ") and \
        lines[0].endswith(" -> flyops_gemm_decode<bf16,A:k-major,B:k-major,n16,kparts1>"), lines[0]  # 8 rows
    assert re.fullmatch(r"flyops: gemm .*fp32\[8, 64\].* -> stock \(.+\)", lines[1]), lines[1]


def test_gemm_bench_without_gpu_says_so():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    import importlib.util
    if importlib.util.find_spec("flyops.bench.gemm") is None:
        pytest.skip("the installed flyops predates the GEMM benchmark (scripts/test reinstalls it)")
    r = subprocess.run([sys.executable, "-m", "flyops.bench", "--op", "gemm"], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "no CUDA GPU" in r.stdout


# ---- attention: routing decisions on a described H200, CPU tensors -----------------------

def _attn(D=128, dtype=torch.bfloat16, Hkv=4, blhd=False, Lq=100, Lk=130):
    def make(h, l):
        if blhd:
            return torch.randn(2, l, h, D, dtype=dtype).transpose(1, 2)
        return torch.randn(2, h, l, D, dtype=dtype)
    return make(4, Lq), make(Hkv, Lk), make(Hkv, Lk)


def test_attention_routing_reasons():
    q, k, v = _attn()
    assert "attention" in flyops.ops()
    assert torch.ops.flyops._route_attention(q, k, v).startswith("stock (stock measured faster")
    lq, lk, lv = _attn(Lq=4096, Lk=4096)
    assert torch.ops.flyops._route_attention(lq, lk, lv, causal=True) == "flyops_attention_fwd<bf16,d128,causal>"
    assert torch.ops.flyops._route_attention(lq, lk, lv).startswith("stock (stock measured faster")
    # training (the log-sum-exp kept for the backward) against cuDNN at D = 128 below 16384: stock
    assert torch.ops.flyops._route_attention(lq, lk, lv, causal=True, lse=True).startswith("stock (stock measured")
    # ... and flyops where a whole step measured ahead behind our forward (tuned_table.h)
    assert torch.ops.flyops._route_attention(*_attn(D=64, Lq=4096, Lk=4096), lse=True) == "flyops_attention_fwd<bf16,d64>"
    assert torch.ops.flyops._route_attention(*_attn(D=64, Lq=2048, Lk=2048), lse=True) == "flyops_attention_fwd<bf16,d64>"
    assert torch.ops.flyops._route_attention(*_attn(D=64, Lq=1024, Lk=1024), lse=True).startswith("stock (stock measured")
    assert torch.ops.flyops._route_attention(*_attn(D=64, Lq=2048, Lk=2048)) == "flyops_attention_fwd<bf16,d64>"
    assert torch.ops.flyops._route_attention(*_attn(D=256, Lq=1024, Lk=1024), lse=True) == "flyops_attention_fwd<bf16,d256>"
    # the flash op (its stock kernel FA2): flyops from 512 keys and queries, stock below
    assert torch.ops.flyops._route_attention(lq, lk, lv, True, True) == "flyops_attention_fwd<bf16,d128,causal>"
    assert torch.ops.flyops._route_attention(lq, lk, lv, True, False) == "flyops_attention_fwd<bf16,d128>"
    assert torch.ops.flyops._route_attention(q, k, v, True, True).startswith("stock (stock measured")
    torch.ops.flyops._attention_force(1)
    try:
        assert torch.ops.flyops._route_attention(q, k, v) == "flyops_attention_fwd<bf16,d128>"
        assert torch.ops.flyops._route_attention(q, k, v, causal=True) == "flyops_attention_fwd<bf16,d128,causal>"
        assert torch.ops.flyops._route_attention(*_attn(Hkv=1, blhd=True)).startswith("flyops_attention_fwd")
        assert torch.ops.flyops._route_attention(*_attn(D=64, dtype=torch.float16)) == "flyops_attention_fwd<fp16,d64>"
        cases = {
            "head dim not 64, 128 or 256": _attn(D=96),
            "dtype not bfloat16 or float16": _attn(dtype=torch.float32),
            "key/value heads do not divide the query heads": _attn(Hkv=3),
            "flyops kernels need compute capability 9.0": None,
        }
        for reason, t in cases.items():
            if t is None:
                text = torch.ops.flyops._route_attention(q, k, v, cc_major=8, cc_minor=0, sm_count=108)
            else:
                text = torch.ops.flyops._route_attention(*t)
            assert text.startswith("stock (") and reason in text, (reason, text)
        packed = torch.randn(2, 100, 3, 4, 128, dtype=torch.bfloat16)
        pq, pk, pv = (packed[:, :, i].transpose(1, 2) for i in range(3))
        assert "q not dense" in torch.ops.flyops._route_attention(pq, pk, pv)
    finally:
        torch.ops.flyops._attention_force(0)
