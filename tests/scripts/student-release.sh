#!/usr/bin/env bash
# student-release.sh: the student release has no solutions and no mutants,
# builds, and every command its READMEs show a student works there as shown
# (scripts/readme-commands.sh; the unfinished labs fail their verdicts,
# saying what is missing). Built without CUDA: the CUDA build is the tree's
# own, and nvcc's three targets would double the time.
set -eu
export CUDA=0
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
make --no-print-directory student-release RELEASE="$t/release.tar.gz"
! tar -tzf "$t/release.tar.gz" | grep -E "/solution/|grader/mutants"
tar -xzf "$t/release.tar.gz" -C "$t"
make --no-print-directory -C "$t/parallelism-labs" -j2 > "$t/build.log" 2>&1 || { tail -20 "$t/build.log"; exit 1; }
scripts/readme-commands.sh "$t/parallelism-labs"
