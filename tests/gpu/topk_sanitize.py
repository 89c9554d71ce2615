"""A small TopK workload for compute-sanitizer (memcheck, racecheck, synccheck): every
flyops TopK kernel on aligned and misaligned rows, odd sizes and special values, each
checked against stock. Run as: compute-sanitizer --kernel-name kns=flyops_topk python this
(with the argument `rows`, `lists` or `passes`: that kernel's cases alone, for
kns=flyops_topk_rows, kns=flyops_topk_finish or kns=flyops_topk_passes). Under racecheck, a
filter must take in every cluster kernel: a cluster kernel left uninstrumented after an
instrumented kernel faults under that tool alone (docs/perf-notes.md, forty-eighth session;
it did so behind torch's elementwise kernels alone), and the lists' chained row runs
flyops_topk_cluster, so racecheck the lists with kns=flyops_topk_."""

import sys

import torch

import flyops


def check(x, k, largest=True, sorted=True):
    ov, oi = torch.topk(x, k, largest=largest, sorted=sorted)
    with flyops.disabled():
        sv, _ = torch.topk(x, k, largest=largest, sorted=sorted)
    iv = torch.int32 if x.dtype == torch.float32 else torch.int16
    ok = torch.equal(ov.view(iv).sort(-1).values, sv.view(iv).sort(-1).values)
    ok = ok and torch.equal(x.gather(-1, oi).view(iv), ov.view(iv))
    return bool(ok)


def rows_cases(dtype):
    """The rows kernel (forced): aligned and misaligned rows at each digit's cut, a partial
    last CTA, ties and NaNs, sorted and unsorted. Returns (cases, failures)."""
    force = torch.ops.flyops._topk_force
    cases = failures = 0
    force(20, 0)
    for rows, n, k in ((5, 1, 1), (37, 257, 64), (9, 1024, 256), (6, 4096, 100), (3, 4095, 4095)):
        x = torch.randn(rows, n + 1, device="cuda").to(dtype)[:, 1:]
        x[:, ::17] = float("nan")
        for xx in (x, x.contiguous()):
            for largest, sorted in ((True, k <= 256), (False, False)):
                cases += 1
                failures += not check(xx, k, largest, sorted)
    force(-1, 0)
    return cases, failures


def list_cases(dtype):
    """The shared-memory finish kernel's screened lists (its one bucket pass, TopK v73):
    normal rows (fp32 buckets ranked, 16-bit buckets one key wide), whole numbers (tied keys
    ranked within buckets, and buckets past kListBucketMax: the digit rounds), a row's best in
    one stream block's range (that block crowded past its stage), long rows behind the wide
    sample (the list finish; a row it leaves to the chain, whose maxima the chain's maxima
    kernel writes: TopK v87), a screen CTA on every SM (16-bit: the screen at the stream's
    split, TopK v94), the finish that lists its row itself (TopK v118), both directions and
    orders. Returns (cases, failures)."""
    force = torch.ops.flyops._topk_force
    cases = failures = 0
    force(10, 0)  # screened wherever it fits
    clustered = torch.randn(3, 262144, device="cuda")
    clustered[:, 70000:70600] = 3 + torch.rand(3, 600, device="cuda")
    rows = (torch.randn(3, 262144, device="cuda").to(dtype),
            torch.randint(0, 3000, (3, 262144), device="cuda").to(dtype),
            torch.randint(0, 700, (3, 262144), device="cuda").to(dtype),
            clustered.to(dtype))
    for x in rows:
        for k in (300, 1024):
            for largest, sorted in ((True, True), (False, False)):
                cases += 1
                failures += not check(x, k, largest, sorted)
    if dtype != torch.float32:  # a screen CTA on every SM: the 16-bit screen at the stream's split (TopK v94)
        sms = torch.cuda.get_device_properties(0).multi_processor_count
        cases += 1
        failures += not check(torch.randn(sms, 131072, device="cuda").to(dtype), 1024, True, True)
    force(23, 0)  # the finish that lists its row itself (TopK v118): listed, ascending (too few
    # listed: its maxima from the row), one row all equal (kNoScreen), a ragged last step (fp32)
    for n in (32000, 32004, 151936):  # and a row of many ring laps (TopK v119)
        x = torch.randn(3, n, device="cuda")
        x[1] = x[1].sort().values
        x[2] = 0.5
        for largest, sorted in ((True, True), (False, False)):
            cases += 1
            failures += not check(x.to(dtype), 1024, largest, sorted)
    force(12, 0)  # the wide sample's list finish
    chained = torch.randn(2, 1 << 21, device="cuda")
    chained[1] = 1.5  # all equal: the list overflows, the chain selects the row
    for largest, sorted in ((True, True), (False, False)):
        cases += 2
        failures += not check(torch.randn(1, 1 << 21, device="cuda").to(dtype), 100, largest, sorted)
        failures += not check(chained.to(dtype), 100, largest, sorted)
    force(-1, 0)
    return cases, failures


def passes_cases(dtype):
    """The radix passes in global memory (forced): a long row at a large k, rows with NaN ties
    at the k-th key (the tally and the ordered write), misaligned rows, many short rows, both
    directions, sorted (PyTorch's sort after them) and not. Returns (cases, failures)."""
    force = torch.ops.flyops._topk_force
    cases = failures = 0
    force(22, 0)
    nan_rows = torch.randn(3, 20001, device="cuda").to(dtype)[:, 1:]
    nan_rows[:, ::3] = float("nan")
    nan_rows[:, 1::3] = -float("nan")
    for x, k in ((torch.randn(1, 1 << 20, device="cuda").to(dtype), 300000), (nan_rows, 5000),
                 (torch.randn(500, 37, device="cuda").to(dtype), 5)):
        for largest, sorted in ((True, True), (False, False)):
            cases += 1
            failures += not check(x, k, largest, sorted)
    force(-1, 0)
    return cases, failures


def main():
    torch.manual_seed(0)
    failures = 0
    cases = 0
    force = torch.ops.flyops._topk_force
    subsets = {"rows": rows_cases, "lists": list_cases, "passes": passes_cases}
    if sys.argv[1:2] and sys.argv[1] in subsets:  # one kernel alone (a sanitizer run on one kernel)
        for dtype in (torch.float32, torch.bfloat16):
            c, f = subsets[sys.argv[1]](dtype)
            cases += c
            failures += f
        print(f"topk sanitizer workload ({sys.argv[1]}): {cases - failures} passed, {failures} failed")
        return 1 if failures else 0
    for dtype in (torch.float32, torch.bfloat16):
        for rows, n, k in ((3, 1, 1), (37, 8, 8), (5, 33, 7), (64, 64, 8), (64, 256, 8), (9, 512, 3), (7, 1000, 32), (2, 4097, 50),
                           (2, 131071, 1024), (1, 262144, 20)):
            x = torch.randn(rows, n + 1, device="cuda").to(dtype)[:, 1:]  # misaligned rows
            for xx in (x, x.contiguous()):
                for largest, sorted in ((True, True), (False, False)):
                    cases += 1
                    failures += not check(xx, k, largest, sorted)
        for t in (0, 32):  # the group kernel on rows the router gives the warp kernel (and a warp a row)
            force(5, t)
            for n in (200, 256):
                x = torch.randn(37, n + 1, device="cuda").to(dtype)[:, 1:]
                for xx in (x, x.contiguous()):
                    cases += 1
                    failures += not check(xx, 8)
        force(5, 2)  # long runs: two threads a row of 64 (16-bit rows)
        x = torch.randn(37, 64, device="cuda").to(dtype)
        for k in (1, 8):
            cases += 1
            failures += not check(x, k)
        force(-1, 0)  # the group kernel's threshold form (many rows), and its fallback
        for n in (200, 256):  # to the networks where a CTA holds a row of ties
            x = torch.randn(16400, n + 1, device="cuda").to(dtype)[:, 1:]
            x[7] = 1.5
            for xx in (x, x.contiguous()):
                for k in (2, 8):  # fp32 k = 2: one maximum a thread, the fallback per warp
                    cases += 1
                    failures += not check(xx, k)
        force(1, 0)  # the warp kernel where the group kernel would take the call
        x = torch.randn(37, 201, device="cuda").to(dtype)[:, 1:]
        cases += 1
        failures += not check(x, 6)
        for c in (1, 2, 16):
            force(2, c)
            x = torch.randn(2, 40000, device="cuda").to(dtype)
            x[:, ::7] = float("nan")
            x[:, 1::9] = -0.0
            cases += 1
            failures += not check(x, 300)
        for c in (1, 16):  # the gather ending: a NaN first bin of ~2000, and a sorted row whose
            force(2, c)   # candidates all sit in the last slice (past its staging)
            x = torch.randn(2, 40000, device="cuda").to(dtype)
            x[0, ::20] = float("nan")
            x[1] = x[1].sort().values
            cases += 2
            failures += not check(x, 300)
            failures += not check(x, 1000, True, False)
        for c in (1, 16):
            force(4, c)
            x = torch.randn(3, 40001, device="cuda").to(dtype)[:, 1:]
            x[:, ::11] = float("nan")
            cases += 1
            failures += not check(x, 1)
        force(3, 0)  # two stages: one huge row, and several rows (misaligned, unsorted)
        cases += 2
        failures += not check(torch.randn(1, 1 << 21, device="cuda").to(dtype), 100)
        failures += not check(torch.randn(3, 100001, device="cuda").to(dtype)[:, 1:], 50, False, False)
        x = torch.randn(4, 65536 + 32, device="cuda").to(dtype)[:, :65536]
        x[:, ::13] = float("nan")
        # delegates (the finish kernel where k is small, else the two selections: 8 forces
        # those, 12 behind a screened list finish; 9 the finish kernel without screening, 10
        # screened wherever it fits): many rows, one long row, padded rows, NaNs (the
        # screened finish falls back to the maxima, the list finish to the selections)
        for kind, vecs in ((6, 0), (6, 1), (6, 2), (6, 16), (8, 0), (8, 16), (9, 0), (10, 0), (12, 0)):
            force(kind, vecs)
            for xx, k in ((x, 50), (torch.randn(2, 32768, device="cuda").to(dtype), 200),
                          (torch.randn(1, 1 << 21, device="cuda").to(dtype), 100)):
                for largest, sorted in ((True, True), (False, False)):
                    cases += 1
                    failures += not check(xx, k, largest, sorted)
        # the finish kernel's shared-memory form (k > 256: 8192 maxima and 8192 candidates
        # per row, sorted by buckets), forced once; the other forces at k = 1024 (cluster
        # kernels' sorts) pushed racecheck past its 240 s
        force(6, 0)
        for largest, sorted in ((True, True), (False, False)):
            cases += 2
            failures += not check(x[:2], 1024, largest, sorted)
            failures += not check(torch.randn(2, 262144, device="cuda").to(dtype), 1024, largest, sorted)  # screened
        # screened, the lists holding NaNs: the shared-memory finish computes the rows' maxima
        # from the rows (the stream wrote none)
        force(10, 0)
        y = torch.randn(2, 262144, device="cuda").to(dtype)
        y[:, ::4099] = float("nan")
        cases += 1
        failures += not check(y, 1024, True, True)
        y = torch.full((2, 262144), -float("inf"), device="cuda").to(dtype)  # masked: not screened
        y[:, ::97] = torch.randn(2, (262144 + 96) // 97, device="cuda").to(dtype)
        cases += 1
        failures += not check(y, 1024, True, True)
        force(-1, 0)
        x = torch.full((3, 50000), 2.0, device="cuda", dtype=dtype)  # all equal: rescans
        cases += 1
        failures += not check(x, 1000)
        # one warp's first-scan candidates past its share of the list (cluster of 4, slices
        # of 8192: warp 0 of CTA 0 reads vectors lane + 512 i), the CTA's total within it
        force(2, 4)
        vec = 16 // x.element_size()
        warp0 = (torch.arange(0, 8192, 512 * vec, device="cuda")[:, None] +
                 torch.arange(32 * vec, device="cuda")[None, :]).flatten()
        x = torch.randn(2, 32768, device="cuda").to(dtype)
        x[0, warp0] = 3.0
        x[1, warp0] = (3.0 + torch.arange(warp0.numel(), device="cuda") * 2.0 ** -6).clamp(max=3.4).to(dtype)
        cases += 2
        failures += not check(x, 100)
        failures += not check(x, 100, True, False)
        force(-1, 0)
        for extra in (rows_cases, passes_cases):
            c, f = extra(dtype)
            cases += c
            failures += f
    torch.cuda.synchronize()
    print(f"topk sanitizer workload: {cases - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
