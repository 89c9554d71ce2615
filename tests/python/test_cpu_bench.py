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
             case("under 64 MiB, slow", 63, 262144, half * 3)]
    s = topk.summarize({"cases": cases})
    assert s["cases_reading_64MB"] == 2
    assert s["below_half_at_64MB"] == ["at 64 MiB, just short"]
