#!/usr/bin/env bash
# student-release.sh: the student release has no solutions and no mutants,
# builds, and every command its READMEs show a student works there as shown
# (scripts/readme-commands.sh; the unfinished labs fail their verdicts,
# saying what is missing). Then its grader grades every lab's unfinished
# file (what make check-labNN does for one): each fails, saying what is
# missing, and scores nothing (a check they pass, a memory bound or a byte
# count, earns no point while their runs' TODOs are unwritten), with valid
# Gradescope and JUnit reports. Built without CUDA: the CUDA build is the
# tree's own, and nvcc's three targets would double the time.
set -eu
export CUDA=0
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
chmod 711 "$t"   # the runs user (uid 65534, when root) passes through it
make --no-print-directory student-release RELEASE="$t/release.tar.gz"
# (Not `! tar | grep`: set -e lets a negated command fail unseen.)
if tar -tzf "$t/release.tar.gz" | grep -E "/solution/|grader/mutants|grader/tests/adversarial"; then
    echo "the release holds solutions, planted bugs or adversarial submissions (each a solution with one cheat)"; exit 1
fi
tar -xzf "$t/release.tar.gz" -C "$t"
make --no-print-directory -C "$t/parallelism-labs" -j2 > "$t/build.log" 2>&1 || { tail -20 "$t/build.log"; exit 1; }
scripts/readme-commands.sh "$t/parallelism-labs"
here=$PWD
cd "$t/parallelism-labs"
rc=0
build/grade --quick --watchdog 10 --json "$t/r.json" --junit "$t/r.xml" > "$t/grade.txt" 2>&1 || rc=$?
tail -n 5 "$t/grade.txt"
[ $rc -eq 1 ] && grep -q "not written yet" "$t/grade.txt" || { echo "the grading exited $rc without saying: not written yet"; exit 1; }
for d in lab[0-9][0-9]_*/; do
    grep -q "^== ${d%%_*} ==" "$t/grade.txt" || { echo "${d%%_*} was not graded"; exit 1; }
done
/usr/bin/python3 "$here/grader/tests/check_reports.py" "$t/r.json" "$t/r.xml"
/usr/bin/python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['score']; print('score', s); sys.exit(s != 0)" "$t/r.json"
