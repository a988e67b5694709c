#!/usr/bin/env bash
# release-lab01-lab02.sh: a release of some labs holds those alone, and its
# grader grades them alone. (Built from this tree's objects where the release
# holds their sources: tests/scripts/seed-build.sh; student-release.sh builds
# a release from nothing.)
set -u
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
chmod 711 "$t"   # the runs user (uid 65534, when root) passes through it
make --no-print-directory student-release LABS="lab01 lab02" RELEASE="$t/r.tar.gz" > /dev/null &&
    tar -xzf "$t/r.tar.gz" -C "$t" && tests/scripts/seed-build.sh "$t/parallelism-labs" && cd "$t/parallelism-labs" || exit 1
[ -d lab01_collectives ] && [ -d lab02_ddp ] || { echo "lab01 or lab02 is missing"; exit 1; }
! ls -d lab0[3-9]_* */solution 2>/dev/null || { echo "it holds more than lab01 and lab02"; exit 1; }
make --no-print-directory -j2 build/grade build/ref build/lab01 build/lab02 > build.log 2>&1 || { tail -20 build.log; exit 1; }
build/grade --quick > out.txt 2>&1
[ $? -eq 1 ] && grep -q "== lab01" out.txt && grep -q "== lab02" out.txt && grep -q "not written yet" out.txt &&
    ! grep -q "== lab0[3-9]" out.txt || { tail -20 out.txt; echo "not lab01 and lab02 alone, failing as unfinished"; exit 1; }
build/grade --lab lab04 > out4.txt 2>&1
[ $? -ne 0 ] && grep -q "lab04 is not in this tree" out4.txt || { cat out4.txt; exit 1; }
echo "lab01 and lab02 alone, graded alone"
