#!/usr/bin/env bash
# refcache.sh: the reference runs are trained once and kept (common/refcache.h),
# in a cache of this test's own:
#   - cold: a lab run says first that the reference is not kept yet, prints its
#     steps, then trains the reference (the steps before the wait) and passes;
#   - warm: the same run finds it kept (its steps beside the reference's loss)
#     and trains nothing;
#   - an entry changed on disk, or cut short, is trained again, never trusted;
#   - two runs at once that need the same reference train each entry once;
#   - another BLAS kernel (OPENBLAS_CORETYPE) is another entry;
#   - the grader and the lab programs share the cache both ways;
#   - an unfinished file says "not written yet" before its first step, and
#     trains no reference.
set -eu
t=$(mktemp -d) && trap 'rm -rf "$t"' EXIT
export PL_REFCACHE=$t/cache OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
RUN=(mpirun --oversubscribe -np 2 build/lab02_solution --steps 2 --layers 1 --seed 7)
fail() { echo "FAIL: $*"; exit 1; }
trained() { grep -c "^  reference run [0-9] of" "$1" || true; }

# Cold, then warm.
"${RUN[@]}" > "$t/cold.txt" 2>&1 || { tail "$t/cold.txt"; fail "the cold run failed"; }
grep -q "is not kept yet: 5 runs of build/ref train after your steps" "$t/cold.txt" || fail "the cold run did not say first that the reference trains"
first=$(grep -n -m1 "^step" "$t/cold.txt" | cut -d: -f1)
wait_at=$(grep -n -m1 "^training the single-device reference once" "$t/cold.txt" | cut -d: -f1)
[ -n "$first" ] && [ -n "$wait_at" ] && [ "$first" -lt "$wait_at" ] || fail "the steps did not print before the reference's training"
[ "$(trained "$t/cold.txt")" = 5 ] || fail "the cold run trained $(trained "$t/cold.txt") reference runs, not 5"
grep -q "the grader would pass this run" "$t/cold.txt" || fail "the cold run's verdict did not pass"
n=$(ls "$t"/cache/*/*.bin | wc -l)
[ "$n" = 5 ] || fail "the cache holds $n entries after the cold run, not 5"
"${RUN[@]}" > "$t/warm.txt" 2>&1 || fail "the warm run failed"
grep -q "not kept yet\|training the single-device" "$t/warm.txt" && fail "the warm run trained the reference again"
grep -q "^step    1/2  loss [0-9.]* (ref " "$t/warm.txt" || fail "the warm run's steps do not show the reference's loss"
grep -q "the grader would pass this run" "$t/warm.txt" || fail "the warm run's verdict did not pass"
echo "cold: steps, then 5 reference runs trained; warm: found, none trained"

# An entry changed, and one cut short: each trained again.
set -- "$t"/cache/*/*.bin
printf '\x01' | dd of="$1" bs=1 seek=5000 conv=notrunc status=none
truncate -s -100 "$2"
"${RUN[@]}" > "$t/damaged.txt" 2>&1 || fail "the run after the damage failed"
grep -q "is not kept yet: 2 runs of build/ref" "$t/damaged.txt" || fail "the changed and the cut entries were not both found wanting"
[ "$(trained "$t/damaged.txt")" = 2 ] || fail "after the damage $(trained "$t/damaged.txt") runs were trained, not 2"
echo "an entry changed and one cut short: both trained again"

# Two runs at once, each needing the same new reference: 5 trainings in all.
RUN2=(mpirun --oversubscribe -np 2 build/lab02_solution --steps 2 --layers 1 --seed 8)
"${RUN2[@]}" > "$t/a.txt" 2>&1 & a=$!
"${RUN2[@]}" > "$t/b.txt" 2>&1 & b=$!
wait $a || fail "the first of two runs at once failed"
wait $b || fail "the second of two runs at once failed"
both=$(( $(trained "$t/a.txt") + $(trained "$t/b.txt") ))
[ "$both" = 5 ] || fail "two runs at once trained $both reference runs, not 5 (one each)"
echo "two runs at once: 5 reference runs trained between them"

# Another BLAS kernel: another entry.
if [ "$(uname -m)" = x86_64 ]; then
    OPENBLAS_CORETYPE=Prescott "${RUN[@]}" > "$t/prescott.txt" 2>&1 || fail "the Prescott run failed"
    grep -q "is not kept yet: 5 runs" "$t/prescott.txt" || fail "an entry made under this machine's kernel was used under Prescott"
    echo "OPENBLAS_CORETYPE=Prescott: its own entries"
fi

# The lab's reference is the grader's, and the grader's the lab's.
mpirun --oversubscribe -np 2 build/lab02_solution --steps 3 --strategy bucketed --bucket-kb 256 > "$t/lab-first.txt" 2>&1 ||
    fail "the lab run before the grading failed"
build/grade --solutions --lab lab02 --runs np2-bucketed > "$t/grade.txt" 2>&1 || { tail "$t/grade.txt"; fail "the grading failed"; }
[ "$(tail -n 1 "$t/cache/lookups" | cut -d' ' -f1,2)" = "5 0" ] ||
    fail "the grader trained what the lab program had kept ($(tail -n 1 "$t/cache/lookups"))"
build/grade --solutions --lab lab02 --runs np2-bucketed-bf16 > "$t/grade-bf16.txt" 2>&1 || fail "the bf16 grading failed"
mpirun --oversubscribe -np 2 build/lab02_solution --steps 3 --strategy bucketed --bucket-kb 1024 --precision bf16 \
    > "$t/lab-after.txt" 2>&1 || fail "the lab run after the grading failed"
grep -q "not kept yet" "$t/lab-after.txt" && fail "the lab program did not find the reference the grader trained"
echo "the lab's reference found by the grader, and the grader's by the lab"

# Unfinished: said at once, and no reference trained.
mpirun --oversubscribe -np 2 build/lab02 --steps 2 --layers 1 --seed 9 > "$t/todo.txt" 2>&1 && fail "the unfinished run passed"
todo=$(grep -n -m1 "not written yet" "$t/todo.txt" | cut -d: -f1)
first=$(grep -n -m1 "^step" "$t/todo.txt" | cut -d: -f1)
[ -n "$todo" ] && [ -n "$first" ] && [ "$todo" -lt "$first" ] || fail "'not written yet' did not come before the first step"
[ "$(trained "$t/todo.txt")" = 0 ] || fail "the unfinished run trained the reference"
grep -q "a TODO this run called is not written yet" "$t/todo.txt" || fail "the unfinished run did not say why it is not compared"
echo "unfinished: 'not written yet' before the first step, no reference trained"
