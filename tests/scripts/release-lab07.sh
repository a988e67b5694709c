#!/usr/bin/env bash
# release-lab07.sh: lab07 is built on labs 05 and 06's answers, so it is
# released only with them. A release naming lab07 without them is refused;
# one naming the three holds lab07's files and, of the solutions, only the
# two files lab07 links (lab05's pipeline.c and lab06's sp.c), no planted
# bugs; it builds lab07, whose unfinished grid.c says what is missing, and
# its grader grades lab07's unfinished file and fails it, saying so.
# (Built from this tree's objects where the release holds their sources:
# tests/scripts/seed-build.sh; student-release.sh builds a release from
# nothing.)
set -eu
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
chmod 711 "$t"
out=$(make --no-print-directory student-release LABS="lab07" RELEASE="$t/no.tar.gz" 2>&1) && {
    echo "a release of lab07 alone was made: $out"; exit 1; }
echo "$out" | grep -q "name lab05 lab06 too" || { echo "refused without saying which labs to name: $out"; exit 1; }
make --no-print-directory student-release LABS="lab05 lab06 lab07" RELEASE="$t/release.tar.gz"
tar -tzf "$t/release.tar.gz" > "$t/list"
sols=$(grep "/solution/" "$t/list" | sed 's,^parallelism-labs/,,' | sort | tr '\n' ' ')
[ "$sols" = "lab05_pipeline/solution/pipeline.c lab06_sequence_parallel/solution/sp.c " ] || {
    echo "the release's solution files are: $sols"; exit 1; }
if grep -E "grader/mutants|lab0[1-4]_|lab07_3d_parallel/solution" "$t/list"; then
    echo "the release holds other labs, planted bugs or lab07's solution"; exit 1
fi
grep -q "parallelism-labs/lab07_3d_parallel/grid.c" "$t/list" || { echo "no lab07 grid.c in the release"; exit 1; }
tar -xzf "$t/release.tar.gz" -C "$t"
tests/scripts/seed-build.sh "$t/parallelism-labs"
cd "$t/parallelism-labs"
make --no-print-directory -j2 lab07 build/grade > "$t/build.log" 2>&1 || { tail -20 "$t/build.log"; exit 1; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mpirun --oversubscribe -np 4 build/lab07 --tp 2 --pp 2 --no-ref 2>&1) && { echo "the unfinished lab07 ran"; exit 1; }
echo "$out" | grep -q "not written yet" || { echo "the unfinished lab07 did not say what is missing: $out"; exit 1; }
rc=0
build/grade --lab lab07 --quick --runs np4-t2-dp2 --watchdog 10 > "$t/grade.txt" 2>&1 || rc=$?
tail -n 3 "$t/grade.txt"
[ $rc -eq 1 ] && grep -q "not written yet" "$t/grade.txt" || { echo "lab07's grading exited $rc without saying: not written yet"; exit 1; }
echo "lab07's release: labs 05 to 07, the two answers lab07 links, lab07 unfinished and graded so"
