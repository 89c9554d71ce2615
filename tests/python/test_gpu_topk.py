"""TopK on the H200: flyops against stock, bit for bit, through the public PyTorch API.

Stock is the specification: the values must equal stock's bitwise (in order when sorted;
NaNs, whose order among themselves stock leaves to its sort, as a multiset), and the
indices must gather those values. Every case also checks where the call went."""

import pytest
import torch

import flyops

pytestmark = pytest.mark.gpu

DTYPES = [torch.float32, torch.bfloat16, torch.float16]
DNAME = {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}  # in kernel names
INT_VIEW = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16,
            torch.float64: torch.int64, torch.int64: torch.int64}


@pytest.fixture(autouse=True)
def _reset():
    torch.ops.flyops._topk_force(-1, 0)
    yield
    torch.ops.flyops._topk_force(-1, 0)
    torch.cuda.empty_cache()


def routed_calls():
    return flyops.stats()["topk"]["flyops"]


def bits(t):
    return t.contiguous().view(INT_VIEW[t.dtype])


def poison(shape, dtype):
    """Leave a NaN (or -1) block of this size in the caching allocator for the output to reuse."""
    t = torch.full(shape, float("nan") if dtype.is_floating_point else -1, device="cuda", dtype=dtype)
    del t


def assert_same_as_stock(x, k, dim=-1, largest=True, sorted=True, expect=None):
    route = torch.ops.flyops._route_topk(x, k, dim, largest, sorted)
    if expect is None:  # flyops, except a sorted k too large for the in-shared-memory sort
        too_large = sorted and k > 4096 and "k too large to sort" in route  # and rows stock runs faster
        expect = "stock" if too_large or "stock measured faster" in route else "flyops"
    with flyops.disabled():
        sv, si = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    poison(sv.shape, x.dtype)
    poison(si.shape, torch.int64)  # -1: an index left unwritten fails the range check
    before = routed_calls()
    ov, oi = torch.topk(x, k, dim=dim, largest=largest, sorted=sorted)
    torch.cuda.synchronize()
    went = "flyops" if routed_calls() > before else "stock"
    assert went == expect, f"routed to {went}, expected {expect}"
    assert ov.shape == sv.shape and oi.shape == si.shape
    assert ov.dtype == sv.dtype and oi.dtype == torch.int64
    assert ov.stride() == sv.stride() and oi.stride() == si.stride()
    # A "+sort" route is ordered by PyTorch's sort (stock's own order), not by the key.
    check_result(x, k, dim, sorted, sv, ov, oi, largest, ours=went == "flyops" and not route.endswith("+sort"))
    return ov, oi


def check_result(x, k, dim, sorted, sv, ov, oi, largest=True, ours=True):
    """ov/oi against stock's values sv (see the module docstring)."""
    n = x.size(dim)
    xl, svl, ovl, oil = (t.movedim(dim, -1) for t in (x, sv, ov, oi))
    # Indices valid, distinct per row, and gathering exactly the returned values.
    assert bool(((oil >= 0) & (oil < n)).all())
    if k > 1:
        srt = oil.sort(dim=-1).values
        assert bool((srt[..., 1:] != srt[..., :-1]).all()), "repeated index in a row"
    assert torch.equal(bits(xl.gather(-1, oil)), bits(ovl)), "indices do not gather the values"
    # Values: the same multiset of bit patterns per row ...
    assert torch.equal(bits(ovl).sort(dim=-1).values, bits(svl).sort(dim=-1).values), "values differ"
    # ... and, when sorted, the same order of values. Stock's order among elements that
    # compare equal is its sort kernel's, which depends on k: a bitonic sort on float
    # compares leaves -0.0/+0.0 in any order and NaNs first, a radix sort on raw bits puts
    # -NaN last. flyops orders by the selection key (NaN first, +0.0 before -0.0). So the
    # non-NaN values must match in order as values (-0.0 == +0.0); the bits already matched
    # as a multiset above.
    if sorted:
        assert torch.equal(non_nan_in_order(ovl), non_nan_in_order(svl)), "sorted order differs"
    if sorted and ours and x.is_floating_point():
        key_o = order_keys(ovl)
        assert bool((key_o[..., 1:] <= key_o[..., :-1]).all() if largest else
                    (key_o[..., 1:] >= key_o[..., :-1]).all()), "not sorted by the selection key"


def non_nan_in_order(v):
    """Each row's non-NaN values in their order, NaNs moved to the end and zeroed."""
    nan = v.isnan()
    order = torch.sort(nan.to(torch.uint8), dim=-1, stable=True).indices
    packed = v.gather(-1, order)
    return torch.where(packed.isnan(), torch.zeros_like(packed), packed)


def order_keys(v):
    """Stock's selection key (NaN above +inf, -0.0 below +0.0) as int64, per element."""
    b = bits(v).long()
    width = 32 if v.dtype == torch.float32 else 16
    b = b & ((1 << width) - 1)
    top = 1 << (width - 1)
    key = torch.where(b & top != 0, (~b) & ((1 << width) - 1), b | top)
    return torch.where(v.isnan(), torch.full_like(key, (1 << width) - 1), key)


def capture_topk(xs, ks):
    """torch.topk(x, k) of each pair captured in one CUDA graph, after a warm-up outside it on a
    side stream; returns the graph and the outputs it writes."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for x, k in zip(xs, ks):
            torch.topk(x, k)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        outs = [torch.topk(x, k) for x, k in zip(xs, ks)]
    return g, outs


def randn(shape, dtype):
    return torch.randn(shape, device="cuda", dtype=torch.float32).to(dtype)


# ---- the benchmark shapes --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("k", [1, 20, 50, 1024])
@pytest.mark.parametrize("N", [32000, 128256, 151936, 262144])
@pytest.mark.parametrize("rows", [1, 64, pytest.param(256, marks=pytest.mark.large)])
def test_sampling_shapes(rows, N, k, dtype):
    assert_same_as_stock(randn((rows, N), dtype), k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("k", [1, 2, 6, 8])
@pytest.mark.parametrize("N", [8, 64, 128, 256])
@pytest.mark.parametrize("rows", [1, 4096, 16384, 65536])
def test_routing_shapes(rows, N, k, dtype):
    assert_same_as_stock(randn((rows, N), dtype), k)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("k", [1, 100, 1024])
def test_huge_row(k, dtype):
    assert_same_as_stock(randn((1 << 24,), dtype), k)


# ---- where no selection holds k: the radix passes in global memory ---------------------------
NO_SELECTION = [((1, 1 << 24), 1 << 20, torch.float32), ((16, 1 << 22), 70000, torch.bfloat16),
                ((1, 1 << 24), 1 << 22, torch.float16)]


@pytest.mark.parametrize("sorted", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("shape,k,dtype", NO_SELECTION,
                         ids=[f"{r}x{n}-k{k}-{DNAME[d]}" for (r, n), k, d in NO_SELECTION])
def test_no_selection_holds_k_takes_the_passes(shape, k, dtype, sorted):
    x = randn(shape, dtype)
    route = torch.ops.flyops._route_topk(x, k, -1, True, sorted)
    assert route.startswith("flyops_topk_passes<") and route.endswith("+sort") == sorted, route
    assert_same_as_stock(x, k, sorted=sorted, expect="flyops")
    assert_same_as_stock(x, k, largest=False, sorted=sorted, expect="flyops")


# ---- a sorted k past the kernels' sorts: the unsorted selection, then PyTorch's sort ----------
SORT_AFTER = [((1, 100000), 60000, torch.float32), ((1, 100000), 60000, torch.bfloat16),
              ((3, 131071), 131071, torch.float32), ((3, 131071), 131071, torch.bfloat16),
              ((64, 262144), 8192, torch.float32), ((1, 1 << 20), 16384, torch.float32)]


@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("shape,k,dtype", SORT_AFTER,
                         ids=[f"{r}x{n}-k{k}-{DNAME[d]}" for (r, n), k, d in SORT_AFTER])
def test_sorted_k_past_the_kernels_sorts(shape, k, dtype, largest):
    x = randn(shape, dtype)
    x[..., ::97] = 0.0  # ties, and -0.0 beside +0.0
    x[..., 1::97] = -0.0
    x[..., 5::1009] = float("nan")
    x[..., 7::1013] = -float("nan")
    route = torch.ops.flyops._route_topk(x, k, -1, largest, True)
    assert route.endswith("+sort") and route.startswith("flyops_topk_"), route
    assert route[:-len("+sort")] == torch.ops.flyops._route_topk(x, k, -1, largest, False)
    assert_same_as_stock(x, k, largest=largest, sorted=True, expect="flyops")
    v = torch.empty(0, device="cuda", dtype=dtype)
    i = torch.empty(0, device="cuda", dtype=torch.int64)
    torch.topk(x, k, largest=largest, out=(v, i))  # out=: sorted into the caller's tensors
    with flyops.disabled():
        sv, _ = torch.topk(x, k, largest=largest)
    check_result(x, k, -1, True, sv, v, i, largest, ours=False)


# ---- odd sizes, every k edge, both directions, sorted or not ----------------------------------
@pytest.mark.parametrize("sorted", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("N", [1, 2, 31, 33, 1000, 4097, 131071])
def test_odd_sizes(N, dtype, largest, sorted):
    x = randn((3, N), dtype)
    for k in sorted_ks(N):
        assert_same_as_stock(x, k, largest=largest, sorted=sorted)


def sorted_ks(N):
    return sorted({1, max(N - 1, 1), N, min(N, 50), min(N, 33)})


# ---- special values: ties, signed zeros, NaN of both signs, infinities -----------------------
def special_row(N, dtype, kind, gen):
    if kind == "all_equal":
        return torch.full((N,), 1.5, dtype=dtype)
    if kind == "zeros":  # -0.0 and +0.0 mixed: stock orders -0.0 below +0.0
        z = torch.zeros(N, dtype=dtype)
        z[torch.rand(N, generator=gen) < 0.5] = -0.0
        return z
    base = torch.randn(N, generator=gen).to(dtype)
    r = torch.rand(N, generator=gen)
    if kind == "nan":  # NaN of both signs among ordinary values
        base[r < 0.05] = float("nan")
        base[(r >= 0.05) & (r < 0.1)] = -float("nan")
        return base
    if kind == "mixed":  # everything at once, with heavy ties
        base = torch.randint(-3, 4, (N,), generator=gen).to(dtype)
        base[r < 0.1] = float("inf")
        base[(r >= 0.1) & (r < 0.2)] = -float("inf")
        base[(r >= 0.2) & (r < 0.25)] = float("nan")
        base[(r >= 0.25) & (r < 0.3)] = -float("nan")
        base[(r >= 0.3) & (r < 0.4)] = -0.0
        base[(r >= 0.4) & (r < 0.5)] = 0.0
        return base
    raise ValueError(kind)


SPECIAL = ["all_equal", "zeros", "nan", "mixed"]


@pytest.mark.parametrize("sorted", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("largest", [True, False], ids=["largest", "smallest"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("N", [31, 256, 1000, 4097, 131071])
@pytest.mark.parametrize("kind", SPECIAL)
def test_special_values(kind, N, dtype, largest, sorted):
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    x = torch.stack([special_row(N, dtype, kind, gen) for _ in range(2)]).cuda()
    for k in sorted_ks(N):
        assert_same_as_stock(x, k, largest=largest, sorted=sorted)


@pytest.mark.parametrize("kind", SPECIAL)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
def test_special_values_two_stages(kind, dtype):
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    x = special_row(1 << 22, dtype, kind, gen).cuda()
    rows = torch.stack([special_row(100003, dtype, kind, gen) for _ in range(3)]).cuda()
    torch.ops.flyops._topk_force(3, 0)  # two stages even where one pass would do
    for k in (1, 100, 1000):
        assert_same_as_stock(x, k)
        assert_same_as_stock(rows, k, largest=False)
        assert_same_as_stock(rows[:, 1:], k, sorted=False)  # misaligned rows


@pytest.mark.parametrize("vecs", [0, 1, 4, 16], ids=["router", "g1", "g4", "g16"])  # 16-byte vectors per group
@pytest.mark.parametrize("kind", SPECIAL + ["randn"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_delegates(kind, dtype, vecs):
    """Group maxima, then the chosen groups (forced): ties across groups, NaNs of both signs
    (the lowest positions must win), signed zeros, both directions, sorted or not; rows it
    cannot take (not whole 64-byte groups, misaligned) go elsewhere and stay right."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    make = (lambda n: torch.randn(n, generator=gen).to(dtype)) if kind == "randn" else \
        (lambda n: special_row(n, dtype, kind, gen))
    rows = torch.stack([make(262144) for _ in range(3)]).cuda()
    huge = make(1 << 22).cuda()
    torch.ops.flyops._topk_force(6, vecs)
    for k in (2, 50, 101, 1000):  # 3 x 101: an odd count of chosen groups
        assert torch.ops.flyops._route_topk(rows, k).startswith("flyops_topk_delegates")
        for largest in (True, False):
            for sorted in (True, False):
                assert_same_as_stock(rows, k, largest=largest, sorted=sorted)
        assert torch.ops.flyops._route_topk(huge, k).startswith("flyops_topk_delegates")
        assert_same_as_stock(huge, k)
        assert_same_as_stock(huge, k, largest=False, sorted=False)
        view = rows[:, 1:]  # misaligned rows of 262143: not whole groups
        assert not torch.ops.flyops._route_topk(view, k).startswith("flyops_topk_delegates")
        assert_same_as_stock(view, k, sorted=False)
    strided = torch.stack([make(262144 + 64) for _ in range(2)]).cuda()[:, :262144]  # padded rows
    assert torch.ops.flyops._route_topk(strided, 50).startswith("flyops_topk_delegates")
    assert_same_as_stock(strided, 50)


@pytest.mark.parametrize("kind", SPECIAL + ["randn", "coarse"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_delegates_finish(kind, dtype):
    """Both selections of delegates in the one-CTA finish kernel (keys in registers for
    small k, in shared memory for k > 256 or many keys): ties across groups and within the
    final bin, keys whose low bits never vary, NaNs of both signs (the lowest positions must
    win), signed zeros, both directions, sorted or not (k = 1024 sorted by buckets, or by the
    bitonic sort when ties crowd a bucket), one row or several, padded rows; the same calls
    with the two radix selections instead (forced) stay right too."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    if kind in ("randn", "coarse"):
        # coarse: values of 7 significant bits in any dtype, so the keys' low bits never vary
        # (the digit rounds stop above them) and ties are common
        make = (lambda n: torch.randn(n, generator=gen).to(torch.bfloat16 if kind == "coarse" else dtype).to(dtype))
    else:
        make = lambda n: special_row(n, dtype, kind, gen)
    for n, ks in ((32000, (2, 101, 256, 1024)), (128256, (20, 50, 257)), (262144, (50, 1024))):
        rows = torch.stack([make(n) for _ in range(3)]).cuda()
        for force in (6, 8, 9):  # 9: the finish kernel without screening
            torch.ops.flyops._topk_force(force, 0)
            for k in ks:
                for x in (rows, rows[1:2]):
                    name = torch.ops.flyops._route_topk(x, k)
                    assert name.startswith("flyops_topk_delegates") and (("finish" in name) == (force != 8)), name
                    assert force != 9 or "screen" not in name, name
                    for largest in (True, False):
                        for sorted in (True, False):
                            assert_same_as_stock(x, k, largest=largest, sorted=sorted)
    padded = torch.stack([make(32000 + 64) for _ in range(2)]).cuda()[:, :32000]
    torch.ops.flyops._topk_force(6, 0)
    for k in (50, 1024):
        assert "finish" in torch.ops.flyops._route_topk(padded, k)
        assert_same_as_stock(padded, k)


@pytest.mark.parametrize("plant", ["equal", "nan"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_delegates_finish_loose(plant, dtype):
    """The register forms' maxima selection takes a first bin whole when its groups fit: rows
    where many groups share the k-th best maximum (one planted value in 30-60 groups, the rest
    below it), so more than k groups are chosen; planted NaNs of both signs must still go to
    the lowest positions (the values' bits tell). Also fewer groups planted than k, and more
    than the runs hold (the search goes on to an exact cut)."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    n, group = 262144, 64
    torch.ops.flyops._topk_force(9, 0)  # the finish kernel, unscreened
    for groups in (12, 30, 60, 400):
        rows = []
        for _ in range(2):
            r = (torch.randn(n, generator=gen) * 0.1).to(dtype)
            g = torch.randperm(n // group, generator=gen)[:groups]
            at = g * group + torch.randint(0, group, (groups,), generator=gen)
            if plant == "nan":
                signs = torch.where(torch.rand(groups, generator=gen) < 0.5, -1.0, 1.0)
                r[at] = (signs * float("nan")).to(dtype)
            else:
                r[at] = 3.0
            rows.append(r)
        x = torch.stack(rows).cuda()
        for k in (20, 50):
            assert "finish8" in torch.ops.flyops._route_topk(x, k) or "finish4" in torch.ops.flyops._route_topk(x, k)
            for largest in (True, False):
                for sorted in (True, False):
                    assert_same_as_stock(x, k, largest=largest, sorted=sorted)


def screen_pieces(n, dtype, pieces=None):
    """Element ranges the screening kernel samples from a row of n (traits.h, screen_piece):
    16 pieces, and for fp32 also the 32 of its larger sample (screen_sample: the
    router takes either), or 128 for the wide sample (screen_pieces(kScreenWideThreads))."""
    size = torch.tensor([], dtype=dtype).element_size()
    vec = 16 // size
    nv, piece_vecs = n // vec, 32  # kScreenPieceVecs
    counts = [pieces] if pieces else [16, 32] if size == 4 else [16]
    return [(p * (nv - piece_vecs) // (c - 1) * vec, (p * (nv - piece_vecs) // (c - 1) + piece_vecs) * vec)
            for c in counts for p in range(c)]


def screen_row_kinds(n, dtype, gen, rows=3, pieces=None):
    """`rows` rows of n of each kind a screened list meets, on the CPU: without structure; the
    sampled pieces (screen_pieces(n, dtype, pieces)) holding the best elements (too few
    listed); a few NaNs of both signs (their ties need position order); coarse values (ties at
    any threshold); masked logits, -inf but for up to 3000 (the sample's keys tie: kNoScreen);
    whole numbers below 3000 (the list's buckets one key value each, TopK v73, tied ~n / 3000
    times)."""
    randn_ = torch.randn(rows, n, generator=gen).to(dtype)
    planted = torch.randn(rows, n, generator=gen).to(dtype)
    for lo, hi in screen_pieces(n, dtype, pieces):
        planted[:, lo:hi] = (50 + torch.randn(rows, hi - lo, generator=gen)).to(dtype)
    nans = torch.randn(rows, n, generator=gen).to(dtype)
    where = torch.randint(0, n, (rows, 4), generator=gen)
    nans.scatter_(1, where, float("nan"))
    nans[0, where[0, 0]] = -float("nan")
    coarse = torch.randn(rows, n, generator=gen).to(torch.bfloat16).to(dtype)
    masked = torch.full((rows, n), -float("inf")).to(dtype)
    keep = torch.randint(0, n, (rows, min(n // 4, 3000)), generator=gen)
    masked.scatter_(1, keep, torch.randn(rows, keep.shape[1], generator=gen).to(dtype))
    ints = torch.randint(0, 3000, (rows, n), generator=gen).to(dtype)
    return randn_, planted, nans, coarse, masked, ints


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_delegates_screen(dtype):
    """The finish kernel's candidates found by the stream against a sampled threshold: rows
    without structure (the list holds at least k), rows whose sampled pieces hold their best
    elements (too few candidates: the maxima finish), a few NaNs among the candidates (their
    ties need position order: the maxima finish), ties at the threshold, all-equal and masked
    rows (the sample's keys tie: not screened), rows of one call taking different paths, both
    directions, sorted or not; the same rows without screening agree. Where the shared-memory
    finish runs, a screened row's stream writes no maxima and the rows that fall back compute
    their own (TopK v59)."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for n, ks in ((32000, (2, 50, 256, 1024)), (262144, (20, 50, 1024))):
        randn, planted, nans, coarse, masked, ints = screen_row_kinds(n, dtype, gen)
        mixed = torch.stack([randn[0], planted[1], torch.full((n,), 3.0).to(dtype)])
        # Whole numbers (ints, above, and these): tied ~n / 700 times (past kListBucketMax at
        # 262144: the digit rounds instead).
        crowded = torch.randint(0, 700, (3, n), generator=gen).to(dtype)
        # A row's best elements in one stream block's range, and ascending rows: crowded
        # blocks (more candidates than a block stages, kScreenBlockCap) beside sparse ones.
        clustered = torch.randn(3, n, generator=gen).to(dtype)
        at = int(torch.randint(0, n - 600, (1,), generator=gen))
        clustered[:, at:at + 600] = (3 + torch.rand(3, 600, generator=gen)).to(dtype)
        ascending = torch.randn(3, n, generator=gen).sort(dim=1).values.to(dtype)
        # Rows of one sign: a threshold on the other side of zero from the row's best keeps
        # the key test (the raw-bit test, TopK v123, takes only a threshold on their side).
        magnitudes = torch.randn(3, n, generator=gen).abs() + 0.5
        one_signed = torch.cat([-magnitudes[:2], magnitudes[2:]]).to(dtype)
        # Listed keys spread over more than the 16-bit list finish's bins (kListBuckets order
        # keys from the threshold up, TopK v126): many octaves, so that the rows take the
        # general bucket pass instead.
        octaves = 40 if dtype == torch.bfloat16 else 14
        spread = (torch.randn(3, n, generator=gen) * torch.exp2(torch.randint(0, octaves, (3, n), generator=gen).float()))
        spread = spread.to(dtype)
        screened = 0
        for x in (randn, planted, nans, coarse, mixed, masked, ints, crowded, clustered, ascending, one_signed, spread):
            x = x.cuda()
            for k in ks:
                for force in (10, 17, 9):  # screened wherever it fits (17: the shared-memory finish); not
                    torch.ops.flyops._topk_force(force, 0)
                    name = torch.ops.flyops._route_topk(x, k)
                    assert name.startswith("flyops_topk_delegates") and (force != 9 or "screen" not in name), name
                    screened += "screen" in name
                    for largest in (True, False):
                        for sorted in (True, False):
                            assert_same_as_stock(x, k, largest=largest, sorted=sorted)
        assert screened >= 8, f"{screened} screened plans for rows of {n}"


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_row_listed_finish(dtype):
    """The screened finish that lists its row itself (force 23, TopK v118: the sample, then one
    finish CTA a row reading the row through its ring of bulk copies (v119), no stream): rows without structure (listed), rows whose
    sampled pieces hold their best elements (too few listed) and a few NaNs among the
    candidates (each computes its maxima from the row), ties at the threshold, whole numbers
    (one-key buckets, and past kListBucketMax the digit rounds over the list, positions from
    shared memory), masked and all-equal rows (kNoScreen: maxima from the row, no stream
    wrote them), ascending rows; both directions, sorted or not. Rows too long for one CTA, or
    whose group does not divide them, take the router's plan."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for n, ks in ((32000, (256, 1024)), (65536, (300, 1024)), (8192, (512,)), (151936, (1024,))):
        randn_, planted, nans, coarse, masked, ints = screen_row_kinds(n, dtype, gen)
        crowded = torch.randint(0, 300, (3, n), generator=gen).to(dtype)
        mixed = torch.stack([randn_[0], planted[1], torch.full((n,), 3.0).to(dtype)])
        ascending = torch.randn(3, n, generator=gen).sort(dim=1).values.to(dtype)
        for x in (randn_, planted, nans, coarse, masked, ints, crowded, mixed, ascending):
            x = x.cuda()
            for k in ks:
                torch.ops.flyops._topk_force(23, 0)
                name = torch.ops.flyops._route_topk(x, k)
                assert name.endswith(",screen,row>") or n == 8192, name
                for largest in (True, False):
                    for sorted in (True, False):
                        assert_same_as_stock(x, k, largest=largest, sorted=sorted)
    torch.ops.flyops._topk_force(23, 0)
    x = torch.randn(2, 300000, device="cuda").to(dtype)  # one CTA would read too much
    assert not torch.ops.flyops._route_topk(x, 1024).endswith(",row>")
    assert_same_as_stock(x, 1024)
    for n in (32004, 32001):  # fp32's groups of 4 divide the first (a ragged last step); not 16-bit vectors
        x = torch.randn(2, n, device="cuda").to(dtype)
        name = torch.ops.flyops._route_topk(x, 1024)
        assert name.endswith(",row>") == (n == 32004 and dtype == torch.float32), name
        assert_same_as_stock(x, 1024)
        assert_same_as_stock(x[:, 1:].contiguous(), 999, largest=False)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_row_listed_16bit_many_long_rows(dtype):
    """The 16-bit row-listed finish (force 23) with more rows than SMs, two CTAs an SM on its
    six-slot ring (TopK v141: the vectors queued per warp, the list packed): long rows
    without structure, ascending rows (too few listed: maxima from the row), all-equal rows
    (kNoScreen) and rows with NaNs of both signs among their best; both directions, sorted
    or not."""
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for rows, n in ((sms + 9, 128256), (sms + 3, 262144)):
        x = randn((rows, n), dtype)
        x[1] = x[1].sort().values
        x[2] = 0.5
        x[3, torch.randint(0, n, (5,))] = float("nan")
        x[4, torch.randint(0, n, (5,))] = -float("nan")
        torch.ops.flyops._topk_force(23, 0)
        assert torch.ops.flyops._route_topk(x, 1024).endswith(",screen,row>"), torch.ops.flyops._route_topk(x, 1024)
        for largest in (True, False):
            for sorted in (True, False):
                assert_same_as_stock(x, 1024, largest=largest, sorted=sorted)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_router_row_listed_16bit_k512(dtype):
    """The router's row-listed finish for 16-bit rows from k = 512 (tuned_table.h,
    kRowListMinK16; TopK v119d): 64 and 256 rows of 32000, both directions, sorted or not;
    fp32 rows at k = 512 keep the unscreened finish."""
    torch.ops.flyops._topk_force(-1, 0)
    for rows in (64, 256):
        x = randn((rows, 32000), dtype)
        assert torch.ops.flyops._route_topk(x, 512).endswith(",screen,row>"), torch.ops.flyops._route_topk(x, 512)
        for largest in (True, False):
            for sorted in (True, False):
                assert_same_as_stock(x, 512, largest=largest, sorted=sorted)
    assert not torch.ops.flyops._route_topk(randn((64, 32000), torch.float32), 512).endswith(",row>")


def test_cuda_graph_row_listed_finish():
    """The row-listed finish replayed from a graph (its CTAs launch dependent on the screen
    and prefetch their rows before the wait): fresh rows, then ascending rows and one row in
    four all equal (the maxima from the row)."""
    torch.ops.flyops._topk_force(23, 0)
    xs = [randn((64, 32000), torch.float32), randn((256, 32000), torch.bfloat16), randn((1, 65536), torch.float32)]
    k = 1024
    for x in xs:
        assert torch.ops.flyops._route_topk(x, k).endswith(",screen,row>"), torch.ops.flyops._route_topk(x, k)
    g, outs = capture_topk(xs, [k] * len(xs))
    for rep in range(3):
        for x in xs:
            x.copy_(torch.randn_like(x))
            if rep == 1:
                x.copy_(x.sort(dim=1).values)
            if rep == 2:
                x[::4].fill_(0.5)
        g.replay()
        torch.cuda.synchronize()
        for x, (ov, oi) in zip(xs, outs):
            with flyops.disabled():
                sv, _ = torch.topk(x, k)
            check_result(x, k, -1, True, sv, ov, oi)


@pytest.mark.parametrize("sorted", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("rows,n,k,dtype", [(16, 262144, 80, torch.float32), (32, 262144, 50, torch.float32),
                                            (64, 151936, 72, torch.float32), (64, 262144, 200, torch.bfloat16),
                                            (32, 262144, 100, torch.float16), (256, 151936, 72, torch.bfloat16)],
                         ids=str)
def test_router_screens_mid_k(rows, n, k, dtype, sorted):
    """The router's screened classes of the forty-second session (prefer_screen_mid_k): k of
    65-99 (16-bit rows: to 255) on calls of >= 15 MiB, fp32 rows of >= 250k at k = 50-64 on
    32-64 rows; plain rows and rows of coarse values (ties at the threshold), both directions."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    plain = torch.randn(rows, n, generator=gen).to(dtype).cuda()
    coarse = torch.randn(rows, n, generator=gen).to(torch.bfloat16).to(dtype).cuda()
    for x in (plain, coarse):
        assert torch.ops.flyops._route_topk(x, k).endswith(",screen>"), torch.ops.flyops._route_topk(x, k)
        for largest in (True, False):
            assert_same_as_stock(x, k, largest=largest, sorted=sorted)


@pytest.mark.parametrize("sorted", [True, False], ids=["sorted", "unsorted"])
@pytest.mark.parametrize("rows,n,k,dtype", [(1, 128256, 1024, torch.float32), (1, 262144, 1024, torch.bfloat16),
                                            (2, 151936, 512, torch.float16), (4, 120000, 256, torch.float32)],
                         ids=str)
def test_router_screens_few_rows(rows, n, k, dtype, sorted):
    """Few rows of >= 120k at large k take the screened list, not the cluster kernel
    (prefer_screen_few_rows, TopK v117), its stream writing the group maxima too (v117b):
    plain rows, coarse values (ties at the threshold), ascending rows (the sample holds the
    best elements: the list misses, the finish selects from the stream's maxima), a few NaNs
    among the candidates (the same) and all-equal rows (kNoScreen: maxima alone), both
    directions."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    plain = torch.randn(rows, n, generator=gen).to(dtype).cuda()
    coarse = torch.randn(rows, n, generator=gen).to(torch.bfloat16).to(dtype).cuda()
    ascending = torch.randn(rows, n, generator=gen).sort(dim=1).values.to(dtype).cuda()
    nans = torch.randn(rows, n, generator=gen).to(dtype).cuda()
    nans[:, ::9973] = float("nan")
    equal = torch.full((rows, n), 0.25, dtype=dtype, device="cuda")
    for x in (plain, coarse, ascending, nans, equal):
        assert torch.ops.flyops._route_topk(x, k).endswith(",screen,maxima>"), torch.ops.flyops._route_topk(x, k)
        for largest in (True, False):
            assert_same_as_stock(x, k, largest=largest, sorted=sorted)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_delegates_chain_screen(dtype):
    """The two radix selections behind a finish of screened lists (the wide sample): rows
    without structure (the list finish takes them and the chain skips them), rows whose
    sampled pieces hold their best elements (too few listed: the chain), a few NaNs (the
    chain), ties at any threshold, all-equal rows (the list overflows: the chain), both
    directions, sorted or not, rows of one call taking different paths; the same rows
    without screening agree."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for n, ks in ((262144, (20, 100, 1024)), (1 << 20, (20, 100))):
        randn, planted, nans, coarse, _, ints = screen_row_kinds(n, dtype, gen, rows=2, pieces=128)
        mixed = torch.stack([randn[0], planted[1], torch.full((n,), 3.0).to(dtype), nans[1]])
        screened = 0
        for x in (randn, planted, nans, coarse, mixed, ints):
            x = x.cuda()
            for k in ks:
                for force in (12, 8):  # screened wherever it fits; not screened
                    torch.ops.flyops._topk_force(force, 0)
                    name = torch.ops.flyops._route_topk(x, k)
                    assert name.startswith("flyops_topk_delegates") and "finish" not in name, name
                    assert force == 12 or "screen" not in name, name
                    screened += "screen" in name
                    for largest in (True, False):
                        for sorted in (True, False):
                            assert_same_as_stock(x, k, largest=largest, sorted=sorted)
        assert screened == 6 * len(ks), f"{screened} screened plans for rows of {n}"


def test_delegates_long_wide_sample():
    """fp32 rows of 2^24 at k = 1024, which the wide sample cannot screen, take the longer one
    (256 pieces, TopK v116): rows without structure (listed), rows whose sampled pieces hold
    their best elements (too few listed: the chain), an all-equal row (the list overflows),
    both directions, sorted or not."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    n, k = 1 << 24, 1024
    randn = torch.randn(1, n, generator=gen)
    planted = torch.randn(1, n, generator=gen)
    for lo, hi in screen_pieces(n, torch.float32, 256):
        planted[:, lo:hi] = 50 + torch.randn(1, hi - lo, generator=gen)
    for x in (randn, planted, torch.full((1, n), 0.5)):
        x = x.cuda()
        name = torch.ops.flyops._route_topk(x, k)
        assert name == "flyops_topk_delegates<fp32,g128,c16,c16,screen,long>", name
        for largest in (True, False):
            for sorted in (True, False):
                assert_same_as_stock(x, k, largest=largest, sorted=sorted)


# ---- every kernel and cluster size forced on the same inputs ----------------------------------
@pytest.mark.parametrize("cluster", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_cluster_sizes(cluster, dtype):
    torch.ops.flyops._topk_force(2, cluster)
    for N, k in ((1000, 5), (4097, 50), (30000, 1024), (65536, 700)):
        if (N + cluster - 1) // cluster * x_bytes(dtype) > 128 * 1024:
            continue
        x = randn((5, N), dtype)
        for largest in (True, False):
            for sorted in (True, False):
                assert_same_as_stock(x, k, largest=largest, sorted=sorted)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_mixed_slices_in_one_cluster(dtype):
    """Slices of one cluster that behave differently in the same row: a random slice next to
    a tied one (its candidate list overflows and it rescans), few distinct values, sorted
    rows (the answer in one CTA's slice)."""
    N = 32768
    r = randn((N,), dtype)
    tied = torch.full((N,), 2.0, dtype=dtype, device="cuda")
    few = torch.randint(-2, 3, (N,), device="cuda").to(dtype)
    asc = torch.sort(randn((N,), dtype)).values
    h = N // 2
    rows = torch.stack([r, torch.cat([r[:h], tied[h:]]), torch.cat([tied[:h], r[h:]]), few, asc, asc.flip(0)])
    for cluster in (1, 2, 4, 8):
        if (N + cluster - 1) // cluster * x_bytes(dtype) > 64 * 1024:
            continue
        torch.ops.flyops._topk_force(2, cluster)
        assert torch.ops.flyops._route_topk(rows, 100).startswith("flyops_topk_cluster")
        for k in (2, 7, 100, 1000):
            assert_same_as_stock(rows, k)
            assert_same_as_stock(rows, k, largest=False, sorted=False)
            assert_same_as_stock(rows[:, 1:], k, sorted=False)  # misaligned rows: no bulk copy


def gather_rows(N, dtype, gen):
    """Rows whose first bin and the elements above it (k = 300-1000) number more than rank 0
    ranks (256) and at most the gather ending's capacity (2048), and some that do not (k =
    2500, few distinct values)."""
    r = torch.rand(N, generator=gen)
    normal = torch.randn(N, generator=gen)
    nan = normal.clone()  # ~1970 NaNs of both signs: their one key is the first bin
    nan[r < 0.015] = float("nan")
    nan[(r >= 0.015) & (r < 0.03)] = -float("nan")
    zeros = -normal.abs() - 0.5  # ~1300 each of +0.0 and -0.0 above negatives: two bins
    zeros[r < 0.02] = 0.0
    zeros[(r >= 0.02) & (r < 0.04)] = -0.0
    asc = torch.sort(normal).values  # every candidate in the last slice: past its staging
    few = torch.randint(-2, 3, (N,), generator=gen).float()  # bins too large: more digits
    return torch.stack([normal, nan, zeros, asc, asc.flip(0), few]).to(dtype).cuda()


@pytest.mark.parametrize("cluster", [1, 4, 16])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_gather_ending(cluster, dtype):
    """The cluster kernel's gather ending (rank 0 orders every element at or above a large
    first bin) against stock, and the same rows without it (force 11)."""
    N = 65536
    if N // cluster * x_bytes(dtype) > 128 * 1024:
        pytest.skip("slice past 128 KB")
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    rows = gather_rows(N, dtype, gen)
    for force in (2, 11):
        torch.ops.flyops._topk_force(force, cluster)
        name = torch.ops.flyops._route_topk(rows, 1000)
        assert name.startswith("flyops_topk_cluster") and (name.endswith(",gather>") == (force == 2)), name
        for k in (300, 1000, 2500):
            for largest in (True, False):
                x = rows if largest else -rows
                for sorted in (True, False):
                    assert_same_as_stock(x, k, largest=largest, sorted=sorted)
        assert_same_as_stock(rows[:, 1:], 1000)  # misaligned rows: no bulk copy


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_warps_candidates_overflow_its_share(dtype):
    """The cluster kernel keeps each warp's first-scan candidates in its own share of the
    list (cand_cap / 16). Put the k-th element's bin in the elements one warp scans, more of
    them than its share while the CTA's total would fit: the CTA must rescan its slice."""
    N, cluster, k = 32768, 4, 100
    torch.ops.flyops._topk_force(2, cluster)
    vec = 16 // x_bytes(dtype)  # elements per 16-byte access
    slice_ = N // cluster
    # Warp 0 of CTA 0 reads vectors lane + 512 i (512 threads, one vector each per step).
    starts = torch.arange(0, slice_, 512 * vec, device="cuda")
    warp0 = (starts[:, None] + torch.arange(32 * vec, device="cuda")[None, :]).flatten()
    assert warp0.numel() > (slice_ // 8) // 16  # more than the warp's share of cand_cap
    rows = randn((3, N), dtype)
    rows[0, warp0] = 3.0  # ties: the key is known after the digits
    # Distinct values in one top-digit bin, so the digits go on over the candidates.
    steps = torch.arange(warp0.numel(), device="cuda", dtype=torch.float32)
    rows[1, warp0] = (3.0 + steps * (2.0 ** -12 if dtype == torch.float32 else 2.0 ** -6)).clamp(max=3.4).to(dtype)
    rows[2, warp0] = -rows[1, warp0]  # the same for the smallest
    assert torch.ops.flyops._route_topk(rows, k).startswith("flyops_topk_cluster")
    for sorted in (True, False):
        assert_same_as_stock(rows[:2], k, sorted=sorted)
        assert_same_as_stock(rows[2:], k, largest=False, sorted=sorted)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_one_warps_staging_overflows_its_share(dtype):
    """The cluster kernel stages output elements per warp, each in a sixteenth of the staging;
    past it they claim their slots one step at a time. Put the answer in the elements one warp
    scans: every output (k = 1000), and a small final bin of ~200 ranked by rank 0."""
    N, cluster = 32768, 4
    torch.ops.flyops._topk_force(2, cluster)
    vec = 16 // x_bytes(dtype)
    starts = torch.arange(0, N // cluster, 512 * vec, device="cuda")  # warp 0 of CTA 0
    warp0 = (starts[:, None] + torch.arange(32 * vec, device="cuda")[None, :]).flatten()
    steps = torch.arange(warp0.numel(), device="cuda", dtype=torch.float32)
    rows = randn((2, N), dtype)
    rows[0, warp0] = (5.0 + steps * 2.0 ** -6).to(dtype)  # distinct, above everything else
    few = warp0[:200]  # distinct values in one top-digit bin, [4, 4.5)
    rows[1, few] = (4.0 + steps[:200] * (2.0 ** -10 if dtype == torch.float32 else 2.0 ** -7)).clamp(max=4.45).to(dtype)
    for sorted in (True, False):
        assert_same_as_stock(rows[:1], 1000, sorted=sorted)
        assert_same_as_stock(rows[1:], 100, sorted=sorted)
        assert_same_as_stock(-rows[1:], 100, largest=False, sorted=sorted)


def hard_rows(n, dtype, gen):
    """Random; ascending (every element beats the ones before; ties where the dtype rounds)
    and descending; masked; coarse values; and the special kinds. On the GPU."""
    ascending = torch.arange(n, dtype=torch.float32).to(dtype)
    masked = torch.full((n,), -float("inf")).to(dtype)
    masked[torch.randint(0, n, (max(n // 50, 1),), generator=gen)] = 1.0
    rows = [torch.randn(n, generator=gen).to(dtype), ascending, ascending.flip(0), masked,
            torch.randn(n, generator=gen).to(torch.bfloat16).to(dtype)] + \
        [special_row(n, dtype, kind, gen) for kind in SPECIAL]
    return torch.stack(rows).cuda()


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_removed_forces_take_the_router(dtype):
    """The filter kernel's force codes (18, 19, 21; the kernel was removed) and codes no kind
    answers to give the router's plan, and stock's results, on rows of every kind."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for n, k in ((4104, 7), (262144, 1024)):
        x = hard_rows(n, dtype, gen)
        routed = torch.ops.flyops._route_topk(x, k)
        for force in (18, 19, 21, 99):
            torch.ops.flyops._topk_force(force, 2)
            assert torch.ops.flyops._route_topk(x, k) == routed, force
            assert_same_as_stock(x, k)
        torch.ops.flyops._topk_force(-1, 0)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sort_every_width(dtype):
    """The final sort at every power-of-two width and either side of it (register passes for
    pairs closer than 64, shared-memory stages beyond), on ordinary rows and with ties/NaNs."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    x = randn((2, 30000), dtype)
    mixed = torch.stack([special_row(30000, dtype, "mixed", gen) for _ in range(2)]).cuda()
    for k in (2, 3, 31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1025, 2047, 2049, 4096):
        assert_same_as_stock(x, k)
        assert_same_as_stock(x, k, largest=False)
        assert_same_as_stock(mixed, k)


@pytest.mark.parametrize("cluster", [1, 2, 4, 8, 16])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_argmax_cluster_sizes(cluster, dtype):
    torch.ops.flyops._topk_force(4, cluster)
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for N in (1000, 4097, 131071):
        assert torch.ops.flyops._route_topk(randn((3, N), dtype), 1).startswith("flyops_topk_argmax")
        for kind in SPECIAL:
            x = torch.stack([special_row(N, dtype, kind, gen) for _ in range(3)]).cuda()
            assert_same_as_stock(x, 1)
            assert_same_as_stock(x[:, 1:], 1, largest=False)  # misaligned rows
        assert_same_as_stock(randn((3, N), dtype), 1)


def x_bytes(dtype):
    return torch.empty((), dtype=dtype).element_size()


def check_short_rows(N, dtype, gen, kernel, ks, special_ks):
    """37 random rows of N (a partial last CTA) at each k, both directions, then five rows of
    each special kind at special_ks; the calls must route to flyops_topk_<kernel>."""
    x = randn((37, N), dtype)
    assert torch.ops.flyops._route_topk(x, max(ks)).startswith(f"flyops_topk_{kernel}")
    for k in ks:
        assert_same_as_stock(x, k)
        assert_same_as_stock(x, k, largest=False, sorted=False)
    for kind in SPECIAL:
        xs = torch.stack([special_row(N, dtype, kind, gen) for _ in range(5)]).cuda()
        for k in special_ks:
            assert_same_as_stock(xs, k)
            assert_same_as_stock(xs, k, largest=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_kernel_every_shape(dtype):
    """Each group shape at its edges and every list length."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    for N in (1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64):
        check_short_rows(N, dtype, gen, "group", sorted({min(N, k) for k in (1, 2, 3, 4, 5, 8)}),
                         sorted({1, min(N, 8)}))
    torch.ops.flyops._topk_force(5, 0)  # 65-256 elements, forced
    for N in (65, 100, 128, 129, 200, 255, 256):  # few rows: sixteen threads a row
        check_short_rows(N, dtype, gen, "group", (1, 2, 3, 5, 8), (8,))
    # Past kGroupWideRows: eight threads, runs of 16 and 32; at 16385 rows the threshold form
    # (fp32 from k = 2, 16-bit rows past 128), whose CTAs with special rows (ties) may fall
    # back to the networks.
    for rows, N in ((1025, 100), (1025, 256), (16385, 100), (16385, 129), (16385, 256)):
        x = randn((rows, N), dtype)
        for k in (1, 2, 3, 8):
            assert_same_as_stock(x, k)
            assert_same_as_stock(x, k, largest=False, sorted=False)
        for kind in SPECIAL:  # special rows on those shapes (full and partial groups)
            xs = torch.stack([special_row(N, dtype, kind, gen) for _ in range(5)]).cuda()
            xs = torch.cat([randn((rows - 5, N), dtype), xs])
            for k in (1, 2, 8):  # fp32 k = 2: the one-maximum threshold, its per-warp fallback
                assert_same_as_stock(xs, k)
                assert_same_as_stock(xs, k, largest=False)
    assert_same_as_stock(randn((9, 257), dtype)[:, 1:], 7)  # misaligned, scalar loads
    torch.ops.flyops._topk_force(-1, 0)
    assert_same_as_stock(randn((9, 61), dtype)[:, 1:], 8)  # misaligned rows: scalar loads
    assert_same_as_stock(randn((9, 64), dtype)[:, :60], 5)  # rows 64 apart, 60 long
    assert_same_as_stock(randn((3, 5, 7, 64), dtype), 6)  # leading dims fold into rows


@pytest.mark.parametrize("threads", (8, 16, 32))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_kernel_threads_forced(threads, dtype):
    """Rows of 65-256 at each forced number of threads a row (32: a warp a row, eight
    elements a thread, the threshold form's one-maximum mask path at every k >= 2): few rows
    and many (where the threshold form runs), special rows among random ones, both directions."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    torch.ops.flyops._topk_force(5, threads)
    for N in (65, 128, 129, 256):
        check_short_rows(N, dtype, gen, f"group<{DNAME[dtype]},t{threads}>", (1, 2, 3, 6, 8), (2, 8))
    for rows, N in ((4096, 129), (4097, 256), (16385, 200)):
        x = randn((rows, N), dtype)
        for kind in SPECIAL:
            x[rows // 2] = special_row(N, dtype, kind, gen).cuda()
            for k in (2, 6, 8):
                assert_same_as_stock(x, k)
                assert_same_as_stock(x, k, largest=False, sorted=False)
    assert_same_as_stock(randn((9, 257), dtype)[:, 1:], 7)  # misaligned, scalar loads


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_kernel_long_runs(dtype):
    """Rows of 33-64 at two threads a row (runs of 32; 16-bit rows with 16-byte loads only),
    forced on few rows and routed on many, with special rows among random ones, both
    directions; fp32 rows and rows that cannot take 16-byte loads run the rule's shape."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    runs = dtype != torch.float32
    torch.ops.flyops._topk_force(5, 2)
    for N in (40, 64):
        check_short_rows(N, dtype, gen, f"group<{DNAME[dtype]}{',t2' if runs else ''}>", (1, 2, 3, 6, 8), (2, 8))
    x = randn((9, 65), dtype)[:, 1:]  # misaligned rows of 64: scalar loads, the rule's shape
    assert torch.ops.flyops._route_topk(x, 6) == f"flyops_topk_group<{DNAME[dtype]}>"
    assert_same_as_stock(x, 6)
    torch.ops.flyops._topk_force(-1, 0)
    for rows, N in ((65536, 64), (65537, 56)):
        x = randn((rows, N), dtype)
        assert torch.ops.flyops._route_topk(x, 8).endswith(",t2>") == runs
        for kind in SPECIAL:
            x[rows // 2] = special_row(N, dtype, kind, gen).cuda()
            for k in (6, 8):
                assert_same_as_stock(x, k)
                assert_same_as_stock(x, k, largest=False, sorted=False)


@pytest.mark.parametrize("force", (15, 16), ids=("threshold", "networks"))
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_group_kernel_threshold_forced(force, dtype):
    """The group kernel with its threshold form wherever the kernel has one (15: k >= 2 at
    eight threads a row or more, every dtype and row count) or never (16), on random rows
    with special ones among them (ties send the threshold form to the networks)."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    name = "threshold" if force == 15 else "networks"
    torch.ops.flyops._topk_force(force, 0)
    for N in (40, 64, 128, 256):
        check_short_rows(N, dtype, gen, f"group<{DNAME[dtype]}", (1, 2, 3, 6, 8), (2, 8))
        assert torch.ops.flyops._route_topk(randn((2, N), dtype), 8).endswith(f",{name}>")
    for rows, N in ((4097, 64), (16385, 100)):
        x = randn((rows, N), dtype)
        for kind in SPECIAL:
            x[rows // 2] = special_row(N, dtype, kind, gen).cuda()
            for k in (2, 8):
                assert_same_as_stock(x, k)
                assert_same_as_stock(x, k, largest=False, sorted=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_warp_kernel_threshold_pass(dtype):
    """k >= 3 on rows of 65-512: the threshold (lane groups' maxima for k <= 8, lane maxima
    past 8), its compaction and ranks, and the fallback to rounds when more than 64 elements
    pass (ties, all-equal rows, NaNs when smallest, the best elements all in a few lanes)."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    torch.ops.flyops._topk_force(1, 0)  # the group kernel takes many of these rows
    for N in (65, 100, 128, 200, 256, 512):
        check_short_rows(N, dtype, gen, "warp", (3, 6, 8, 20, 32), (3, 8, 32))
    ramp = torch.arange(256, device="cuda", dtype=torch.float32).to(dtype).repeat(4, 1)
    assert_same_as_stock(ramp, 8)  # every lane maximum in the last register
    assert_same_as_stock(ramp.flip(-1), 8, largest=False)
    # The row's best elements in lanes 0-3 only (one lane group): the other groups' maxima
    # set a low threshold; with 512 elements more than 64 pass (the rounds), with 96 and
    # 128 fewer.
    for N in (96, 128, 512):
        x = randn((5, N), dtype)
        lanes = torch.arange(N, device="cuda") % 32 < 4
        x[:, lanes] = x[:, lanes].abs() + 8
        for k in (3, 6, 8):
            assert_same_as_stock(x, k)
            assert_same_as_stock(-x, k, largest=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_warp_kernel_every_width(dtype):
    torch.ops.flyops._topk_force(1, 0)  # k <= 8 would go to the group kernel
    for N in (1, 5, 32, 33, 64, 65, 200, 512, 513, 1024):
        x = randn((37, N), dtype)
        for k in sorted({1, min(N, 8), min(N, 32)}):
            assert_same_as_stock(x, k)
            assert_same_as_stock(x, k, largest=False, sorted=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_argmax_in_segments(dtype):
    """k = 1 on rows of 2^21 or more: the segments' winners, then a merge. The best value in
    two segments (a tie), NaNs of both signs in late segments (the lowest position's bits),
    -inf and +inf, both directions, and a row whose best sits in its last element."""
    for rows, n in ((1, 1 << 22), (2, 1 << 21 if dtype == torch.float32 else 1 << 22)):
        x = randn((rows, n), dtype)
        assert ",seg" in torch.ops.flyops._route_topk(x, 1)
        assert_same_as_stock(x, 1)
        assert_same_as_stock(x, 1, largest=False)
        x[0, n - 1] = float("inf")
        x[-1, 5] = float("-inf")
        assert_same_as_stock(x, 1)
        assert_same_as_stock(x, 1, largest=False)
        x[0, n // 3] = float("inf")  # a tie in another segment
        assert_same_as_stock(x, 1)
        x[0, n - 40000] = float("nan")
        x[0, n - 7] = -float("nan")
        assert_same_as_stock(x, 1)
        assert_same_as_stock(x, 1, largest=False)


@pytest.mark.parametrize("kind", SPECIAL + ["randn"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_radix_passes_forced(kind, dtype):
    """The radix passes in global memory (force 22) at any k: a row of 2^22 and rows of
    100003 up to k = N, many short rows, ties at the k-th key (NaNs of both signs: the lowest
    positions, as stock), signed zeros, both directions, sorted (ordered after them by
    PyTorch's sort) or not, misaligned strided rows."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    make = (lambda n: torch.randn(n, generator=gen).to(dtype)) if kind == "randn" else \
        (lambda n: special_row(n, dtype, kind, gen))
    torch.ops.flyops._topk_force(22, 0)
    long = make(1 << 22).cuda()
    rows = torch.stack([make(100003) for _ in range(3)]).cuda()
    short = torch.stack([make(37) for _ in range(1000)]).cuda()
    for x, ks in ((long, (1, 100, 70000, 1 << 21)), (rows, (1, 5000, 100003)), (short, (1, 5, 37))):
        for k in ks:
            route = torch.ops.flyops._route_topk(x, k)
            assert route.startswith("flyops_topk_passes<") and route.endswith("+sort") == (k > 1), route
            for largest in (True, False):
                for sorted in (True, False):
                    assert_same_as_stock(x, k, largest=largest, sorted=sorted)
    assert_same_as_stock(rows[:, 1:], 777, sorted=False)
    # aligned rows (16-byte loads in the count passes) whose length leaves a scalar tail
    wide = torch.stack([make(100008) for _ in range(3)]).cuda()
    for k in (1, 4099, 100001):
        assert_same_as_stock(wide[:, :100001], k, sorted=False)
        assert_same_as_stock(wide[:, :100001], k, largest=False, sorted=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_rows_kernel_forced(dtype):
    """The rows kernel (a warp a row, keys in shared memory) forced at every width it takes:
    whole bins and exact keys at each digit, k = 1, k = N - 1 and N unsorted, the sorted
    ranks up to its limit, ties, signed zeros and NaNs, misaligned and strided rows, and a
    partial last CTA."""
    gen = torch.Generator().manual_seed(int(torch.randint(0, 1 << 30, (1,))))
    torch.ops.flyops._topk_force(20, 0)
    for N in (1, 2, 31, 33, 257, 1000, 1024, 2049, 4096):
        ks = sorted({1, min(N, 7), min(N, 64), min(N, 256)})
        check_short_rows(N, dtype, gen, "rows", ks, ks)
        x = randn((13, N), dtype)
        for k in sorted({max(N - 1, 1), N}):  # past the sorted limit only unsorted
            sorted_ = k <= 256
            assert_same_as_stock(x, k, sorted=sorted_)
            assert_same_as_stock(x, k, largest=False, sorted=sorted_)
    for N in (1000, 4096):  # a sorted k past the limit falls back to the router's plan
        x = randn((5, N), dtype)
        assert not torch.ops.flyops._route_topk(x, 300).startswith("flyops_topk_rows")
        assert_same_as_stock(x, 300)
    torch.ops.flyops._topk_force(-1, 0)  # the router's rows kernel: unsorted k past the sort
    x = randn((4096, 2048), dtype)
    assert torch.ops.flyops._route_topk(x, 1000, -1, True, False).startswith("flyops_topk_rows")
    assert_same_as_stock(x, 1000, sorted=False)
    assert_same_as_stock(x, 2048, largest=False, sorted=False)
    torch.ops.flyops._topk_force(20, 0)
    x = randn((9, 1025), dtype)
    assert torch.ops.flyops._route_topk(x[:, 1:], 50).startswith("flyops_topk_rows")
    assert_same_as_stock(x[:, 1:], 50)  # misaligned rows: scalar loads
    assert_same_as_stock(randn((9, 1024), dtype)[:, :1000], 50, largest=False)  # strided
    # Rows whose best keys share their top digits (a narrow range): every digit round runs.
    x = (1 + randn((41, 3000), dtype).float() * 1e-3).to(dtype)
    assert_same_as_stock(x, 100)
    assert_same_as_stock(x, 100, largest=False, sorted=False)
    # Small integers: heavy ties at the k-th key.
    x = torch.randint(-4, 5, (64, 2048), device="cuda").to(dtype)
    for k in (1, 10, 200, 1500):
        assert_same_as_stock(x, k, sorted=k <= 256)
        assert_same_as_stock(x, k, largest=False, sorted=False)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_stock_where_measured_faster(dtype):
    """Many 16-bit rows of 512-4096 that the rows kernel does not take go to stock where it
    measured faster (tuned_table.h, measured_slower), with the reason in the route; the
    kernels the rules would have taken there stay right when forced."""
    x = randn((2048, 1024), dtype)
    k = 1
    route = torch.ops.flyops._route_topk(x, k)
    if dtype == torch.float32:
        assert route.startswith("flyops_topk_"), route
    else:
        assert route.startswith("stock") and "measured faster" in route, route
    assert_same_as_stock(x, k)
    assert_same_as_stock(randn((16384, 512), dtype), 300)
    x = randn((16384, 512), dtype)
    assert torch.ops.flyops._route_topk(x, 64).startswith("flyops_topk_rows")
    assert_same_as_stock(x, 64, expect="flyops")
    assert_same_as_stock(randn((1024, 8192), dtype), 64, expect="flyops")
    for force in ((2, 1), (9, 0)):  # the cluster kernel, a CTA a row; the finish kernel
        torch.ops.flyops._topk_force(*force)
        for rows, n, kk in ((4096, 1024, 128), (2048, 768, 8), (1024, 2048, 64)):
            xr = randn((rows, n), dtype)
            assert torch.ops.flyops._route_topk(xr, kk).startswith("flyops_topk_")
            assert_same_as_stock(xr, kk, expect="flyops")
            assert_same_as_stock(xr, kk, largest=False, sorted=False, expect="flyops")


# ---- layouts ---------------------------------------------------------------------------------
def test_row_strided_view_and_batch_dims():
    big = randn((6, 5000), torch.float32)
    assert_same_as_stock(big[:, :4000], 10)  # rows 5000 apart
    assert_same_as_stock(big[::2, 7:], 10)  # misaligned start
    assert_same_as_stock(randn((2, 3, 4, 300), torch.bfloat16), 6)  # leading dims fold into rows
    assert_same_as_stock(randn((4, 40000), torch.float32)[:, 1:], 20)  # misaligned, cluster path


def test_other_dims_go_to_stock_with_reason():
    x = randn((300, 64), torch.float32)
    assert_same_as_stock(x, 5, dim=0, expect="stock")
    assert_same_as_stock(x.t(), 5, expect="stock")  # last dim not contiguous
    assert_same_as_stock(randn((100,), torch.float32), 3, dim=0)  # dim 0 of 1-D is the last dim
    assert torch.ops.flyops._route_topk(x, 5, 0).startswith("stock (dim is not the last")
    assert torch.ops.flyops._route_topk(x.t(), 5).startswith("stock (rows not contiguous")


def test_integer_and_double_go_to_stock():
    assert_same_as_stock(torch.randint(-100, 100, (16, 500), device="cuda"), 7, expect="stock")
    assert_same_as_stock(torch.randn(16, 500, device="cuda", dtype=torch.float64), 7, expect="stock")


def test_empty_and_k_zero():
    for shape, k in (((0, 100), 5), ((4, 0), 0), ((4, 100), 0)):
        x = torch.randn(shape, device="cuda")
        with flyops.disabled():
            sv, si = torch.topk(x, k)
        ov, oi = torch.topk(x, k)
        assert ov.shape == sv.shape and oi.shape == si.shape
        assert ov.dtype == sv.dtype and oi.dtype == si.dtype == torch.int64
        assert ov.stride() == sv.stride() and oi.stride() == si.stride()


def test_invalid_k_raises_like_stock():
    x = randn((4, 100), torch.float32)
    for k in (101, -1):
        with flyops.disabled():
            with pytest.raises(RuntimeError) as stock_err:
                torch.topk(x, k)
        with pytest.raises(RuntimeError) as ours_err:
            torch.topk(x, k)
        assert str(ours_err.value) == str(stock_err.value)
    for dim in (2, -3):
        with flyops.disabled():
            with pytest.raises(IndexError) as stock_err:
                torch.topk(x, 3, dim=dim)
        with pytest.raises(IndexError) as ours_err:
            torch.topk(x, 3, dim=dim)
        assert str(ours_err.value) == str(stock_err.value)


def test_out_variant():
    x = randn((64, 128256), torch.bfloat16)
    with flyops.disabled():
        sv, si = torch.topk(x, 50)
    v = torch.empty(0, device="cuda", dtype=torch.bfloat16)
    i = torch.empty(0, device="cuda", dtype=torch.int64)
    before = routed_calls()
    torch.topk(x, 50, out=(v, i))
    assert routed_calls() == before + 1
    check_result(x, 50, -1, True, sv, v, i)
    # Wrong out dtype: stock's error.
    with pytest.raises(RuntimeError):
        torch.topk(x, 50, out=(torch.empty(0, device="cuda"), i))


def run_out(x, k, make_outs, ours):
    """topk(x, k, out=make_outs()) by stock and by the router: where it went, the outputs'
    shapes, strides and storage, the warnings and the error, all as stock's; values by
    check_result. Returns where the call went."""
    import warnings

    def call(disabled):
        v, i = make_outs()
        ptrs = (v.data_ptr(), i.data_ptr())
        with warnings.catch_warnings(record=True) as w:
            warnings.simplefilter("always")
            try:
                if disabled:
                    with flyops.disabled():
                        torch.topk(x, k, out=(v, i))
                else:
                    torch.topk(x, k, out=(v, i))
                err = None
            except RuntimeError as e:
                err = str(e)
        return v, i, ptrs, [str(m.message) for m in w], err

    sv, si, sptrs, swarn, serr = call(True)
    before = routed_calls()
    ov, oi, optrs, owarn, oerr = call(False)
    torch.cuda.synchronize()
    went = "flyops" if routed_calls() > before else "stock"
    assert went == ours, f"routed to {went}, expected {ours}"
    assert oerr == serr and owarn == swarn, (oerr, serr, owarn, swarn)
    if serr is None:
        assert ov.shape == sv.shape and ov.stride() == sv.stride() and oi.stride() == si.stride()
        assert (optrs[0] == ov.data_ptr()) == (sptrs[0] == sv.data_ptr()), "values reallocated unlike stock"
        assert (optrs[1] == oi.data_ptr()) == (sptrs[1] == si.data_ptr()), "indices reallocated unlike stock"
        check_result(x, k, -1, True, sv, ov, oi, ours=went == "flyops")
    return went


def test_out_forms_behave_as_stock():
    """out= as PyTorch allows it: right size (written in place), a wrong size (resized, with
    stock's warning), strided or aliasing the input (stock's), wrong dtypes (stock's error)."""
    x = randn((64, 32000), torch.float32)
    k = 50
    cuda = dict(device="cuda")
    nan = lambda shape, dt=torch.float32: torch.full(shape, float("nan"), dtype=dt, **cuda)
    idx = lambda shape: torch.full(shape, -7, dtype=torch.int64, **cuda)
    assert run_out(x, k, lambda: (nan((64, k)), idx((64, k))), "flyops") == "flyops"
    run_out(x, k, lambda: (nan((3, 5)), idx((7,))), "flyops")  # resized, with stock's warning
    run_out(x, k, lambda: (nan((k, 64)).t(), idx((64, k))), "stock")  # a column-major values
    run_out(x, k, lambda: (nan((64, 2 * k))[:, ::2], idx((64, k))), "stock")  # strided
    run_out(x, k, lambda: (nan((64, k)), idx((k, 64)).t()), "stock")
    run_out(x, k, lambda: (nan((64, k), torch.bfloat16), idx((64, k))), "stock")  # stock's error
    run_out(x, k, lambda: (nan((64, k)), idx((64, k)).int()), "stock")
    # Values written over the input itself (contiguous, so only the alias sends it away):
    # stock's call, and its error if it raises one; what it writes there is its own affair.
    errors = []
    for disabled in (True, False):
        y = x.clone()
        before = routed_calls()
        try:
            if disabled:
                with flyops.disabled():
                    torch.topk(y, k, out=(y.view(-1)[:64 * k].view(64, k), idx((64, k))))
            else:
                torch.topk(y, k, out=(y.view(-1)[:64 * k].view(64, k), idx((64, k))))
            errors.append(None)
        except RuntimeError as e:
            errors.append(str(e))
        torch.cuda.synchronize()
        assert routed_calls() == before
    assert errors[0] == errors[1], errors


def test_autograd_matches_stock():
    x = randn((64, 32000), torch.float32).requires_grad_()
    g = torch.randn(64, 20, device="cuda")
    with flyops.disabled():
        sv, _ = torch.topk(x, 20)
        (gs,) = torch.autograd.grad(sv, x, g)
    ov, _ = torch.topk(x, 20)
    (go,) = torch.autograd.grad(ov, x, g)
    assert torch.equal(go, gs)


@pytest.mark.parametrize("dtype,experts,kernel", [(torch.bfloat16, 128, "group"), (torch.float32, 256, "group"),
                                                   (torch.float32, 128256, "delegates"), (torch.bfloat16, 1024, "rows")])
def test_torch_compile_reaches_flyops(dtype, experts, kernel):
    x = randn((256, experts), dtype)
    assert torch.ops.flyops._route_topk(x, 8).startswith(f"flyops_topk_{kernel}")

    @torch.compile(fullgraph=True)
    def route(logits):
        w, idx = torch.topk(logits.softmax(-1), 8)
        return w / w.sum(-1, keepdim=True), idx

    before = routed_calls()
    w, idx = route(x)
    assert routed_calls() > before
    p = x.softmax(-1)
    with flyops.disabled():
        ps, _ = torch.topk(p, 8)
    # Ties (frequent in bf16) may pick other positions: compare the values they gather.
    assert torch.equal(p.gather(-1, idx), ps)
    torch.testing.assert_close(w, ps / ps.sum(-1, keepdim=True))  # Inductor divides in fp32


def test_cuda_graph_capture_and_replay():
    xs = [randn((1, 1 << 24), torch.float32), randn((64, 128256), torch.float32),
          randn((4096, 256), torch.float32), randn((4096, 128), torch.bfloat16),
          randn((4096, 1024), torch.bfloat16)]
    # delegates (the screened chain's seven launches, then the stream and the finish), the warp
    # kernel, the group kernel, the rows kernel
    ks = [100, 50, 8, 6, 64]
    assert torch.ops.flyops._route_topk(xs[4], ks[4]).startswith("flyops_topk_rows")
    assert all(torch.ops.flyops._route_topk(x, k).startswith("flyops_topk_delegates") for x, k in zip(xs[:2], ks[:2]))
    g, outs = capture_topk(xs, ks)
    for rep in range(3):
        for x in xs:
            x.copy_(torch.randn_like(x))
        if rep == 2:  # the row of 2^24 all equal: its list overflows, the chain's kernels run
            xs[0].fill_(1.5)
        g.replay()
        torch.cuda.synchronize()
        for x, k, (ov, oi) in zip(xs, ks, outs):
            with flyops.disabled():
                sv, _ = torch.topk(x, k)
            check_result(x, k, -1, True, sv, ov, oi)


def test_cuda_graph_screened_lists():
    """The screened list-only calls replayed from a graph, whose kernels hand over through
    programmatic edges (the stream waits for its rows' thresholds, the finish for the
    stream's candidates): fp32 rows that fit one finish CTA an SM and more rows, and bf16
    (its stream triggers the finish at its blocks' end). Replays with fresh rows, with
    ascending rows (crowded stream blocks) and with one row in four all equal (not screened:
    the maxima)."""
    torch.ops.flyops._topk_force(17, 0)  # the shared-memory finish, screened wherever it fits
    shapes = [((64, 262144), torch.float32), ((160, 131072), torch.float32), ((256, 151936), torch.bfloat16)]
    xs = [randn(shape, dtype) for shape, dtype in shapes]
    k = 1024
    for x in xs:
        name = torch.ops.flyops._route_topk(x, k)
        assert name.startswith("flyops_topk_delegates") and "finish" in name and "screen" in name, name
    g, outs = capture_topk(xs, [k] * len(xs))
    for rep in range(5):
        for x in xs:
            x.copy_(torch.randn(x.shape, device="cuda").to(x.dtype))
            if rep == 3:  # ascending rows
                x.copy_(x.sort(dim=1).values)
            if rep == 4:  # one row in four all equal
                x[::4].fill_(0.75)
        g.replay()
        torch.cuda.synchronize()
        for x, (ov, oi) in zip(xs, outs):
            with flyops.disabled():
                sv, _ = torch.topk(x, k)
            check_result(x, k, -1, True, sv, ov, oi)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16], ids=str)
def test_cuda_graph_stale_polled_words(dtype):
    """The 16-bit list-only stream polls each row's screen word, tagged by its call. A graph's
    replays keep their capture's tag, so with the finish kept from clearing the words (the
    test hook) every replay after the first finds words that carry its tag before the screen
    writes them (the last replay's, poisoned or not): the screen must poison those rows (their
    finish computes the maxima from the row), and the results still equal stock's, ascending
    rows (crowded blocks claiming past the stale threshold) among them. One call a graph, so
    that no other call's words land in its workspace between replays. Then the hook off:
    graphs captured anew (their finish clears the words) replayed, and eager calls."""
    x = randn((256, 128256), dtype)
    ks = (1024, 50)
    for k in ks:
        name = torch.ops.flyops._route_topk(x, k)
        assert name.startswith("flyops_topk_delegates") and name.endswith(",screen>"), name  # the polled list

    def replays(graphs, count):
        for rep in range(count):
            x.copy_(randn(x.shape, dtype))
            if rep == 2:  # ascending rows: crowded blocks beside sparse ones
                x.copy_(x.sort(dim=1).values)
            for k, (g, (ov, oi)) in zip(ks, graphs):
                g.replay()
                torch.cuda.synchronize()
                with flyops.disabled():
                    sv, _ = torch.topk(x, k)
                check_result(x, k, -1, True, sv, ov, oi)

    def capture_each():
        graphs = []
        for k in ks:
            g, outs = capture_topk([x], [k])
            graphs.append((g, outs[0]))
        return graphs

    torch.ops.flyops._topk_keep_polled_words(True)
    try:
        replays(capture_each(), 4)
    finally:
        torch.ops.flyops._topk_keep_polled_words(False)
    replays(capture_each(), 3)
    for k in ks:
        v, i = torch.topk(x, k)
        with flyops.disabled():
            sv, _ = torch.topk(x, k)
        check_result(x, k, -1, True, sv, v, i)


def test_log_and_profiler_names(capfd):
    x = randn((64, 128256), torch.float32)
    flyops.set_log(1)
    try:
        torch.topk(x, 50)
        torch.topk(x, 5, dim=0)
    finally:
        flyops.set_log(0)
    err = capfd.readouterr().err
    assert "topk fp32[64, 128256] k=50 dim=-1 largest sorted -> flyops_topk_" in err
    assert "-> stock (dim is not the last" in err
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU,
                                            torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.topk(x, 50)  # delegates: the maxima stream and the finish kernel
        torch.topk(randn((1, 100000), torch.float32), 256)  # one row under 120k at k > 100: the cluster kernel
        torch.topk(randn((4096, 64), torch.float32), 8)
        torch.topk(randn((2048, 256), torch.float32), 8)  # the warp kernel's lane-group threshold
        torch.cuda.synchronize()
    names = [e.name for e in prof.events()]
    assert "flyops::topk" in names
    assert any(n.startswith("void flyops_topk_cluster") or n.startswith("flyops_topk_cluster") for n in names)
    assert any("flyops_topk_maxima" in n for n in names)
    assert any("flyops_topk_finish" in n for n in names)
    assert any("flyops_topk_group" in n for n in names)
    assert any("flyops_topk_warp" in n for n in names)
