#!/usr/bin/env bash
# adversarial.sh LAB RUNS NAME PATTERN [FORBIDDEN [HIDDEN_SEED]]: the
# submission grader/tests/adversarial/NAME/, which tries to cheat or to
# break the grader, graded with --submission, fails saying PATTERN (and never
# FORBIDDEN), with results.json written, the grader's work directory
# removed and no process of it left running. With HIDDEN_SEED, its hidden
# runs too (RUNS "hidden" names them), and some were graded.
set -u
lab=$1 runs=$2 name=$3 pattern=$4 forbidden=${5:-} hidden=${6:-}
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
chmod 711 "$t"   # the runs user (uid 65534, when root) passes through it
TMPDIR=$t build/grade --submission "grader/tests/adversarial/$name" --lab "$lab" --runs "$runs" \
    ${hidden:+--hidden-seed "$hidden"} --watchdog 5 --limit 60 --json "$t/results.json" > "$t/out.txt" 2>&1
rc=$?
tail -n 6 "$t/out.txt"
[ $rc -ne 0 ] || { echo "it passed"; exit 1; }
[ -s "$t/results.json" ] || { echo "no results.json"; exit 1; }
if [ -n "$hidden" ] && ! grep -q '"visibility": "hidden"' "$t/results.json"; then
    echo "no hidden run was graded"; exit 1
fi
grep -qF -- "$pattern" "$t/results.json" || { echo "results.json does not say: $pattern"; exit 1; }
if [ -n "$forbidden" ] && grep -qF -- "$forbidden" "$t/results.json" "$t/out.txt"; then
    echo "it says: $forbidden"; exit 1
fi
! ls -d "$t"/grade.* 2>/dev/null || { echo "the work directory is left behind"; exit 1; }
# Left running: a process whose working directory is in this grading's
# directory, and the daemon submission's own (it names itself, and only it
# does: another case's grading beside this one has processes of its own).
for p in /proc/[0-9]*; do
    case $(readlink "$p/cwd" 2>/dev/null) in
    "$t"/*) echo "a process of it is still running: ${p#/proc/} ($(cat "$p/comm" 2>/dev/null))"; exit 1 ;;
    esac
done
if [ "$name" = daemon ] && pgrep -x pl-adversary; then echo "a process of it is still running"; exit 1; fi
echo "failed as it should: $pattern"
