#!/usr/bin/env bash
# gpu-check-dry-run.sh: make gpu-check without a GPU (scripts/gpu-check.sh
# --dry-run): the pre-flight, the bundle for a GPU machine made and
# unpacked, its Open MPI alone (its plugins and help files its own), the
# grader through it, the table and the logs' archive, the GPU rows skipped
# and not failed; then with a deadline that cuts a step: that step cut short
# at it, the rest not run, the table and the archive still written, exit 1.
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
OUT=$t/a GPU_CHECK_WORK=$t/wa scripts/gpu-check.sh --dry-run > "$t/a.txt" 2>&1; rc=$?
cat "$t/a.txt"
[ $rc -eq 0 ] && grep -q "^pre-flight: gpu .* SKIP" "$t/a/gpu-check.txt" &&
    grep -q "every op: GPU against CPU.* SKIP .*no GPU" "$t/a/gpu-check.txt" &&
    ! grep -q " FAIL " "$t/a/gpu-check.txt" && tar -tzf "$t/a/gpu-check-logs.tar.gz" | grep -q "^logs/" ||
    { echo "the dry run: exit $rc, or its table or archive is not as it should be"; exit 1; }
# The bundle's Open MPI and PMIx found their plugins and help files.
! tar -xzOf "$t/a/gpu-check-logs.tar.gz" | grep -E "open the help file|usable compression library|was unable to be opened" ||
    { echo "the bundle's Open MPI or PMIx looked outside the bundle"; exit 1; }
# The deadline cuts a step with others after it: the dry run holds one
# step (GPU_CHECK_HOLD) past any deadline, and the deadline is the shortest
# of a few past what the steps before it take on this machine (the
# pre-flight and the first steps: 2 to 5 s, 25 under load). (Found by
# trying deadlines alone, without a held step, a loaded machine's steps
# changed length between tries and no deadline cut one.)
hold="grade lab01 on the CPU (quick runs): the grader's way"
for d in 5 10 20 40; do
    rm -rf "$t/b" "$t/wb"
    OUT=$t/b GPU_CHECK_WORK=$t/wb GPU_CHECK_HOLD=$hold scripts/gpu-check.sh --dry-run --deadline $d > "$t/b.txt" 2>&1; rc=$?
    grep -q "cut short at the deadline after" "$t/b/gpu-check.txt" && grep -q "NOT RUN" "$t/b/gpu-check.txt" && break
done
grep -E "CUT|NOT RUN|deadline" "$t/b.txt"
[ $rc -eq 1 ] && grep -q "cut short at the deadline" "$t/b/gpu-check.txt" &&
    grep -q "NOT RUN" "$t/b/gpu-check.txt" && [ -s "$t/b/gpu-check-logs.tar.gz" ] ||
    { echo "with a deadline of $d s: exit $rc (1 wanted), or no step cut short with one after it, or no table or archive"; exit 1; }
