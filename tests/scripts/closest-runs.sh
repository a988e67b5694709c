#!/usr/bin/env bash
# closest-runs.sh CORETYPE RUNS: correct code passes on other machines'
# rounding. The runs whose margins the yardstick's matrix found smallest
# (scripts/yardstick-matrix.sh runs it all), graded under another OpenBLAS
# kernel: the solutions, and (under Prescott) the legal variants. A grading
# that fails shows what it said went wrong.
set -uo pipefail
export OPENBLAS_CORETYPE=$1
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
graded() {
    "$@" > "$t/out.txt" 2>&1
    local rc=$?
    tail -n 1 "$t/out.txt"
    [ $rc -eq 0 ] || { grep -E "FAIL|what went wrong" -A3 "$t/out.txt" | head -40; exit 1; }
}
graded build/grade --solutions --lab lab02,lab03,lab04,lab05,lab06 --runs "$2"
[ "$1" = Prescott ] || exit 0   # the legal variants under one of the two
for lab in lab04 lab05; do
    mkdir -p "$t/$lab" && cp grader/mutants/$lab/legal_*.patch "$t/$lab/"
    graded build/grade --lab $lab --mutants "$t/$lab" --runs "$2"
done
