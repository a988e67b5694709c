#!/usr/bin/env bash
# closest-runs.sh CORETYPE RUNS: correct code passes on other machines'
# rounding. The runs whose margins the yardstick's matrix found smallest
# (scripts/yardstick-matrix.sh runs it all), graded under another OpenBLAS
# kernel: the solutions, and (under Prescott) the legal variants.
set -euo pipefail
export OPENBLAS_CORETYPE=$1
build/grade --ref-cache "$REFCACHE" --solutions --lab lab02,lab03,lab04,lab05,lab06 --runs "$2" | tail -n 1
[ "$1" = Prescott ] || exit 0   # the legal variants under one of the two
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
for lab in lab04 lab05; do
    mkdir -p "$t/$lab" && cp grader/mutants/$lab/legal_*.patch "$t/$lab/"
    build/grade --ref-cache "$REFCACHE" --lab $lab --mutants "$t/$lab" --runs "$2" | tail -n 1
done
