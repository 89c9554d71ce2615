#!/usr/bin/env bash
# The device calls for TopK v142c / v142r / v142s (experiments/topk-v142*-row16.diff; sixty-sixth session,
# not yet run). Wheels: A main's, C v142c, D v142r, E v142s, built here first (`build`); carry
# .carry-ab/{main,v142c,v142r,v142s} (~55 MiB). Any card.
# ncu runs a small profile program (bf16 256 x 128256 k = 1024, forced to the row-listed finish); it is written
# below into $OUT.
#   bash experiments/topk-v142-calls.sh build   (here, not on the device) the four wheels into .carry-ab/, from
#                             main's checkout with each diff applied in turn (~6 min)
#   bash experiments/topk-v142-calls.sh all    1, then 2 and 3 on the winner it picks, trimmed to fit one call (~9 min)
#   bash experiments/topk-v142-calls.sh lean   the row-listed tests on C, D, E and wheel-aba A C D E on four cases (~3 min)
#   bash experiments/topk-v142-calls.sh 1      row-listed tests on C, D, E; wheel-aba A C D E; ncu of the finish on C, D, E (~5 min)
#   bash experiments/topk-v142-calls.sh 2 X    on wheel X (C, D or E: the winner): memcheck and racecheck of the row-listed tests,
#                             the whole test_gpu_topk.py (~4 min)
#   bash experiments/topk-v142-calls.sh 3 X    on wheel X: the router against force 23 (the row-listed finish) over
#                             bf16 rows {64, 128, 256} x N {65536, 128256, 151936, 262144} x k {256, 512, 1024} and a few
#                             more, best of two, to set a 16-bit rule beside prefer_screen_row (~3 min)
set -u
if [ "${1:-}" = build ]; then
  set -e
  git diff --quiet HEAD -- src include tests || { echo "src, include or tests differ from HEAD: commit or stash first"; exit 1; }
  export PIP_BREAK_SYSTEM_PACKAGES=1
  wheel() { rm -rf .carry-ab/$1 && mkdir -p .carry-ab/$1 && python3 -m pip wheel -q --no-build-isolation --no-deps -w .carry-ab/$1 .; }
  wheel main
  for v in c r s; do
    git apply experiments/topk-v142$v-row16.diff
    tests/emul/run | tail -1
    wheel v142$v || { git checkout -- src include tests; exit 1; }
    git checkout -- src include tests
  done
  du -sh .carry-ab/*
  exit 0
fi
L=$OUT/log.txt; mkdir -p $OUT
export PIP_BREAK_SYSTEM_PACKAGES=1
log() { echo "$@" | tee -a $L; }
nvidia-smi --query-gpu=name --format=csv,noheader | tee -a $L
A=.carry-ab/main/*.whl; C=.carry-ab/v142c/*.whl; D=.carry-ab/v142r/*.whl; E=.carry-ab/v142s/*.whl
inst() { python3 -m pip install -q --no-deps --force-reinstall --no-index $1 > /dev/null 2>&1; }
# pytest on the installed wheel: name, timeout, pytest arguments; returns pytest's status.
pyt() {
  local name=$1 limit=$2; shift 2
  local t0=$(date +%s) rc
  (cd tests/python && timeout $limit "$@" > /tmp/$name.log 2>&1); rc=$?
  log "$name rc=$rc $(( $(date +%s)-t0 ))s $(tail -1 /tmp/$name.log)"
  grep -E '^FAILED|ERROR SUMMARY|RACECHECK SUMMARY' /tmp/$name.log | head -8 | tee -a $L; cp /tmp/$name.log $OUT/
  return $rc
}
row_tests() { inst ${!1}; pyt pytest-row$1 100 python3 -m pytest -q -x -p no:cacheprovider test_gpu_topk.py -k row_listed; }
memcheck_row() {
  pyt memcheck-row$1 120 compute-sanitizer --tool memcheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider test_gpu_topk.py -k row_listed
}
racecheck_row16() {
  pyt racecheck-row16$1 120 compute-sanitizer --tool racecheck --error-exitcode 9 python3 -m pytest -q -x -p no:cacheprovider test_gpu_topk.py -k "row_listed and 16"
}
pytest_all() { pyt pytest-all$1 150 python3 -m pytest -q -p no:cacheprovider test_gpu_topk.py; }
# The router against force 23 on the installed wheel: rounds, time limit, extra cases; best of the rounds.
grid() {
  local rounds=$1 limit=$2 t0=$(date +%s); shift 2
  local cases=()
  for r in 64 128 256; do for n in 65536 128256 151936 262144; do for k in 256 512 1024; do
    cases+=("${r}x${n}:${k}:bfloat16" "${r}x${n}:${k}:bfloat16:23"); done; done; done
  for round in $(seq $rounds); do ABA_TAG=A timeout $limit python3 scripts/topk-times.py "${cases[@]}" "$@"; done > $OUT/grid.txt 2>&1
  log "grid rc=$? $(( $(date +%s)-t0 ))s"
  python3 - $OUT/grid.txt <<'PY' | tee -a $L
import collections, sys
best = collections.defaultdict(lambda: 1e9)
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) >= 4 and f[0] == "A":
        best[" ".join(f[1:-1])] = min(best[" ".join(f[1:-1])], float(f[-1]))
for case, us in best.items():
    f23 = None if case.endswith(" f23") else best.get(case + " f23")
    if f23:
        print(f"{case:34s} router {us:8.2f}  f23 {f23:8.2f}  f23/router {f23 / us:.3f}")
PY
}
aba() {  # wheels..., then --, then cases
  local ws=() t0=$(date +%s)
  while [ "$1" != -- ]; do ws+=("$1"); shift; done; shift
  timeout 300 scripts/wheel-aba "${ws[@]}" python3 scripts/topk-times.py "$@" > $OUT/aba.txt 2>&1
  log "aba rc=$? $(( $(date +%s)-t0 ))s"; tail -20 $OUT/aba.txt | tee -a $L
}
case ${1:-1} in
all)
  # Everything in one call, most needed first, for when machines are scarce (sixty-seventh session):
  # row-listed tests on C, D, E; wheel-aba A and the passing forms; the winner (least force 23 time at
  # bf16 256 x 128256 k = 1024) under memcheck; the grid (one round) on it; the whole TopK test file
  # on it. Each step logs as it ends, so a timeout keeps what ran.
  ok=()
  for w in C D E; do row_tests $w && ok+=($w); done
  [ ${#ok[@]} -gt 0 ] || { log "no form passed"; exit 0; }
  ws=($A); for w in "${ok[@]}"; do ws+=(${!w}); done
  aba "${ws[@]}" -- 256x128256:1024:bfloat16 256x128256:1024:bfloat16:23 256x151936:1024:bfloat16 \
    256x151936:1024:bfloat16:23 256x262144:1024:bfloat16:23 64x128256:1024:bfloat16:23 256x128256:1024:float16:23 \
    256x32000:1024:bfloat16 64x32000:1024:bfloat16
  W=$(python3 - $OUT/aba.txt "${ok[@]}" <<'PY'
import sys
forms = sys.argv[2:]  # wheel-aba tags them B, C, ... after main's A
tag = {"BCDEF"[i]: w for i, w in enumerate(forms)}
for line in open(sys.argv[1]):
    if line.startswith("bfloat16 256x128256 k=1024 f23 "):
        f = line.split()
        t = {tag[f[i]]: float(f[i + 1]) for i in range(len(f) - 1) if f[i] in tag}
        print(min(t, key=t.get)); break
else:
    print(forms[0])
PY
)
  log "winner $W"; inst ${!W}
  memcheck_row $W
  grid 1 150
  pytest_all $W
  ;;
min)  # the one question, for a last couple of minutes: v142c's tests, then main, C and D on the short case
  row_tests C
  aba $A $C $D -- 256x128256:1024:bfloat16 256x128256:1024:bfloat16:23
  ;;
lean)  # the least that tells the forms apart (~3 min): their row-listed tests, then four cases
  for w in C D E; do row_tests $w; done
  aba $A $C $D $E -- 256x128256:1024:bfloat16 256x128256:1024:bfloat16:23 256x151936:1024:bfloat16:23 \
    256x32000:1024:bfloat16
  ;;
1)
  cat > $OUT/prof142.py <<'PY'
import torch
import flyops  # noqa: F401
torch.manual_seed(0)
x = torch.randn(256, 128256, device="cuda").to(torch.bfloat16)
torch.ops.flyops._topk_force(23, 0)  # the row-listed finish
for _ in range(3):
    torch.topk(x, 1024)
torch.cuda.synchronize()
PY
  for w in C D E; do row_tests $w; done
  aba $A $C $D $E -- 256x128256:1024:bfloat16 256x128256:1024:bfloat16:23 256x151936:1024:bfloat16 \
    256x151936:1024:bfloat16:23 256x262144:1024:bfloat16:23 64x128256:1024:bfloat16 64x128256:1024:bfloat16:23 \
    256x128256:1024:float16:23 256x128256:50:bfloat16 256x128256:50:bfloat16:23 \
    256x32000:1024:bfloat16 64x32000:1024:bfloat16 256x32000:512:bfloat16 128x65536:1024:bfloat16:23
  for w in C D E; do
    inst ${!w}
    t0=$(date +%s); timeout 80 ncu -k regex:flyops_topk_finish --launch-skip 1 --launch-count 1 --section SpeedOfLight --section WarpStateStats \
      --metrics smsp__inst_executed.sum,smsp__issue_active.avg.pct_of_peak_sustained_active,dram__bytes_read.sum.per_second \
      python3 $OUT/prof142.py > $OUT/ncu$w.txt 2>&1
    log "ncu $w rc=$? $(( $(date +%s)-t0 ))s"; grep -E "Duration|DRAM Throughput|inst_executed|issue_active|bytes_read|Stall|Warp Cycles|Eligible" $OUT/ncu$w.txt | head -16 | tee -a $L
  done
  ;;
2) w=${2:-C}; inst ${!w}; memcheck_row $w; racecheck_row16 $w; pytest_all $w ;;
3)
  w=${2:-C}; inst ${!w}
  grid 2 200 256x128256:1024:float16 256x128256:1024:float16:23 256x128256:50:bfloat16 256x128256:50:bfloat16:23 \
    192x128256:1024:bfloat16 192x128256:1024:bfloat16:23 132x128256:1024:bfloat16 132x128256:1024:bfloat16:23
  ;;
esac
exit 0
