"""The benchmark's timing order (CPU only): the contexts' rounds are a balanced design."""
from collections import Counter

import pytest

from flyops.bench import common


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_balanced_orders(n):
    orders = common.balanced_orders(n)
    assert len(orders) == (n if n % 2 == 0 else 2 * n)
    assert all(sorted(row) == list(range(n)) for row in orders)  # each round times every context once
    firsts = Counter(row[0] for row in orders)
    assert set(firsts) == set(range(n)) and len(set(firsts.values())) == 1
    if n > 1:  # every context right after every other one, equally often
        pairs = Counter((row[i], row[i + 1]) for row in orders for i in range(n - 1))
        assert len(pairs) == n * (n - 1) and len(set(pairs.values())) == 1


def test_rounds_cover_whole_designs():
    assert common.rounds_of(2) == common.ROUNDS == 4  # stock and flyops: first equally often, as before
    assert common.rounds_of(3) == 6
    assert common.rounds_of(4) == 4
    assert common.rounds_of(5) == 10


def test_topk_summary_names_cases_below_half_the_copy_rate():
    from flyops.bench import topk

    def case(name, rows, n, ms, nbytes=4):
        b = rows * n * nbytes
        return {"name": name, "pass": "sampling", "speedup": 2.0, "routed": "flyops", "matches_stock": True,
                "bytes_read": b, "flyops_ms": ms, "frac_of_4200GBps": round(b / (ms * 1e-3) / 4.2e12, 3)}
    half = 2**26 / 2.1e12 * 1e3  # ms at which 64 MiB reads at exactly half of 4.2 TB/s
    cases = [case("at 64 MiB, just short", 64, 262144, half * 1.0005),  # rounds to 0.500, still short
             case("at 64 MiB, just over", 64, 262144, half * 0.999),
             case("under 64 MiB, slow", 63, 262144, half * 3),  # 66.1e6 bytes: 64 MB in 10^6-byte MB
             case("under 64e6 bytes, slow", 61, 262144, half * 3)]
    s = topk.summarize({"cases": cases})
    assert s["cases_reading_64MB"] == 2
    assert s["below_half_at_64MB"] == ["at 64 MiB, just short"]
    assert s["below_half_at_64e6_bytes"] == ["at 64 MiB, just short", "under 64 MiB, slow"]


def _gen_gemm_table():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "gen-gemm-table.py"
    spec = importlib.util.spec_from_file_location("gen_gemm_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_gemm_table_generator(tmp_path):
    """scripts/gen-gemm-table.py: flyops only where it beat stock by the margin in every run,
    stock where any run had it slower or level, shapes a run lacks or the kernel refused left
    out; the runs' provenance in the file."""
    import json

    gen = _gen_gemm_table()

    def row(M, N, K, layout, stock, ours, batch=1, dtype="bfloat16", pairs=None):
        return {"pass": "decode", "M": M, "N": N, "K": K, "batch": batch, "dtype": dtype, "layout": layout,
                "stock_ms": stock, "flyops_ms": ours, "flyops_pairs_ms": pairs}

    write = {"op": "gemm", "device": "NVIDIA H200", "torch": "2.11.0+cu130", "commit": "abcdef0123456789",
             "date": "2026-12-05T08:00:00Z", "method": "m", "flush": "write",
             "rows": [row(1, 4096, 4096, "nt", 0.0130, 0.0110),   # 1.18x
                      row(16, 6144, 4096, "nt", 0.0200, 0.0190),  # 1.05x here, 0.9x on a clean L2
                      row(4096, 4096, 4096, "nt", 0.20, 0.199, pairs=0.18),  # pairs 1.106x over single
                      row(113, 203, 4096, "nt", 0.01, None),      # the kernel did not take it
                      row(8, 2048, 4095, "nt", 0.1, 0.01, batch=8),
                      row(64, 64, 64, "nt", 0.1, 0.01, dtype="float32")]}
    read = dict(write, flush="read",
                rows=[row(1, 4096, 4096, "nt", 0.0120, 0.0109),  # 1.10x
                      row(16, 6144, 4096, "nt", 0.0170, 0.0190),
                      row(4096, 4096, 4096, "nt", 0.20, 0.199, pairs=0.19),  # pairs 1.047x over single
                      row(113, 203, 4096, "nt", 0.01, None),
                      row(2048, 4096, 4096, "nt", 0.05, 0.049, pairs=0.047)])
    paths = []
    for name, run in (("w.json", write), ("r.json", read)):
        paths.append(str(tmp_path / name))
        (tmp_path / name).write_text(json.dumps(run))
    out = tmp_path / "measured_shapes.inc"
    assert gen.main(paths + ["--out", str(out)]) == 0
    text = out.read_text()
    entries = [line.strip() for line in text.splitlines() if line.startswith("    {")]
    assert len(entries) == 3, entries  # the batched shape was in one run only; fp32 is not a GEMM dtype here
    assert entries[0].startswith("{Gpu::kH200, 1, 4096, 4096, 1, true, true, DType::kBFloat16, true, 0, 1.101f},")
    assert entries[1].startswith("{Gpu::kH200, 16, 6144, 4096, 1, true, true, DType::kBFloat16, false, 0, 0.895f},")
    assert entries[2].startswith("{Gpu::kH200, 4096, 4096, 4096, 1, true, true, DType::kBFloat16, true, 2, 1.053f},")
    assert "std::array<MeasuredShape, 3> kMeasuredShapes" in text
    assert "NVIDIA H200, torch 2.11.0+cu130, commit abcdef012345, 2026-12-05T08:00:00Z, flush read" in text

    # an H100's runs are decided alone, into entries of their own; H100 entries come first
    h100 = dict(write, device="NVIDIA H100 80GB HBM3", rows=[row(16, 6144, 4096, "nt", 0.0200, 0.0150)])
    (tmp_path / "h100.json").write_text(json.dumps(h100))
    assert gen.main(paths + [str(tmp_path / "h100.json"), "--out", str(out)]) == 0
    entries = [line.strip() for line in out.read_text().splitlines() if line.startswith("    {")]
    assert len(entries) == 4, entries
    assert entries[0].startswith("{Gpu::kH100, 16, 6144, 4096, 1, true, true, DType::kBFloat16, true, 0, 1.333f},")
    assert entries[2].startswith("{Gpu::kH200, 16, 6144, 4096, 1, true, true, DType::kBFloat16, false, 0, 0.895f},")
    for name in ("NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe", "NVIDIA H100 NVL", "NVIDIA H200 NVL"):
        (tmp_path / "other.json").write_text(json.dumps(dict(write, device=name)))
        with pytest.raises(ValueError, match="neither an H100 SXM nor an H200 SXM"):
            gen.main([str(tmp_path / "other.json"), "--out", str(out)])
    assert gen.key_of({"M": 2, "N": 3, "K": 4, "layout": "nn", "dtype": "float16"}) == (2, 3, 4, 1, True, False,
                                                                                        "float16")

    # a bench run only takes shapes from flyops: one whose kernel it timed under the margin on
    # the same part; cases routed to stock (stock timed twice) and the other part's say nothing
    def case(M, N, K, stock, ours, routed="flyops", forced=False):
        return {"pass": "decode", "params": {"M": M, "N": N, "K": K, "dtype": "bfloat16", "layout": "nt", "batch": 1},
                "stock_ms": stock, "flyops_ms": ours, "routed": routed, "forced": forced}

    bench = {"op": "gemm", "device": "NVIDIA H200", "torch": "2.11.0+cu130", "commit": "0123456789abcdef",
             "date": "2026-12-05T14:00:00Z",
             "cases": [case(1, 4096, 4096, 0.0130, 0.0128),         # 1.016x: under the margin
                       case(16, 6144, 4096, 0.0200, 0.0100, "stock"),  # stock's own time: no promotion
                       case(4096, 4096, 4096, 0.20, 0.21, "stock", forced=True)]}  # forced: not the pairs
    (tmp_path / "bench.json").write_text(json.dumps(bench))
    assert gen.main(paths + ["--bench", str(tmp_path / "bench.json"), "--out", str(out)]) == 0
    text = out.read_text()
    entries = [line.strip() for line in text.splitlines() if line.startswith("    {")]
    assert entries[0].startswith("{Gpu::kH200, 1, 4096, 4096, 1, true, true, DType::kBFloat16, false, 0, 1.016f},")
    assert entries[0].endswith("// decode: 1.182, 1.101, 1.016")
    assert entries[1].startswith("{Gpu::kH200, 16, 6144, 4096, 1, true, true, DType::kBFloat16, false, 0, 0.895f},")
    assert entries[2].startswith("{Gpu::kH200, 4096, 4096, 4096, 1, true, true, DType::kBFloat16, true, 2, 1.053f},")
    assert entries[2].endswith("// decode: 1.111, 1.053")
    assert "--bench " in text and "NVIDIA H200, torch 2.11.0+cu130, commit 0123456789ab, 2026-12-05T14:00:00Z" in text
    (tmp_path / "bench.json").write_text(json.dumps(dict(bench, device="NVIDIA H100 80GB HBM3")))
    assert gen.main(paths + ["--bench", str(tmp_path / "bench.json"), "--out", str(out)]) == 0
    entries = [line.strip() for line in out.read_text().splitlines() if line.startswith("    {")]
    assert entries[0].startswith("{Gpu::kH200, 1, 4096, 4096, 1, true, true, DType::kBFloat16, true, 0, 1.101f},")
