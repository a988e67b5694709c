#!/usr/bin/env bash
# readme-commands.sh TREE: run, in TREE (a fresh student release), every
# command its READMEs show a student, as shown, and say which did not work.
#
# The commands are the lines of the READMEs' ```sh blocks, plus the make
# targets the READMEs name in their text for students (check-labNN, one
# of them, and lab03-figure). Left out, each with its reason: the instructors' commands
# (they need the solutions or a submission), the test suite and the
# benchmarks (they run for minutes, and make test runs the release's own
# tests elsewhere). mpirun gets --oversubscribe, as the README tells a user
# with fewer cores than ranks.
#
# "Works" means: it ran to its end (no time limit reached), took its flags
# (no usage error, exit 2), and either passed (exit 0) or failed the way an
# unfinished lab fails (exit 1, saying what is missing).
set -uo pipefail
tree=$1
cd "$tree"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

skip_reason() {
    case "$1" in
    "make test"*) echo "the test suite: make test runs the release's own tests" ;;
    "make bench"*) echo "a benchmark: minutes of timing" ;;
    *--solutions* | *"--submission DIR"* | *--hidden-seed* | "make && build/grade"*) echo "for instructors (solutions, submissions, hidden runs)" ;;
    "make student-release"*) echo "for instructors: it packs a git checkout" ;;
    *) echo "" ;;
    esac
}

commands=$(
    for f in README.md lab[0-9][0-9]_*/README.md; do
        awk '/^```sh/{on=1; next} /^```/{on=0} on' "$f" | sed 's/[[:space:]]*#.*$//; /^[[:space:]]*$/d'
    done
    # The check-labNN targets are one rule (the Makefile's LAB_RULES): the
    # first lab's stands for them all here, and the caller grades every
    # lab's file as they do (tests/scripts/student-release.sh).
    first=$(ls -d lab[0-9][0-9]_*/ | head -n 1)
    echo "make check-${first%%_*}"
    echo "make lab03-figure"
)

ok=0
bad=0
failures=()
while IFS= read -r cmd; do
    why=$(skip_reason "$cmd")
    if [ -n "$why" ]; then
        echo "--- left out: $cmd ($why)"
        continue
    fi
    run=${cmd//mpirun /mpirun --oversubscribe }
    echo "=== $cmd"
    t0=$SECONDS
    out=$(timeout --kill-after=10 300 bash -c "$run" < /dev/null 2>&1)
    rc=$?
    echo "$out" | tail -n 3
    works=false
    if grep -qE "is not a flag of this program|unknown flag|No such file|No rule to make target" <<<"$out"; then
        works=false
    elif [ $rc -eq 0 ]; then
        works=true
    elif { [ $rc -eq 1 ] || { [ $rc -eq 2 ] && [ "${cmd%% *}" = make ]; }; } &&
        grep -qE "not written yet|the grader would FAIL|does not pass yet|checks passed" <<<"$out"; then
        works=true   # an unfinished lab, failing as it should and saying why
    fi
    if $works; then
        ok=$((ok + 1))
        echo "--- works ($((SECONDS - t0)) s, exit $rc)"
    else
        bad=$((bad + 1))
        failures+=("$cmd")
        echo "--- DOES NOT WORK as shown (exit $rc)"
    fi
done <<<"$commands"

echo
[ $bad -gt 0 ] && printf 'did not work: %s\n' "${failures[@]}"
echo "$ok passed, $bad failed"
[ $bad -eq 0 ]
