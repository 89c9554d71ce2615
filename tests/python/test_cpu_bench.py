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
