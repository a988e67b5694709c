#!/usr/bin/env bash
# run-tests.sh: every test of the course, in order, each with a time limit.
# `make test` builds first and then runs this. Each test's own output (Check's
# summary lines among it) is shown; the last line counts the test programs
# that passed and failed.
set -uo pipefail
cd "$(dirname "$0")/.."
# The reference runs, kept once for every grading of this tree below
# (build/grade --ref-cache): a configuration's yardstick runs once, not in
# every grading that has it. Inside the tree, hidden from the submissions'
# runs.
export REFCACHE="$PWD/build/refcache"
rm -rf "$REFCACHE"

# mpirun refuses root unless told, and more ranks than cores unless told.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe)

passed=0
failed=0
skipped=0
failures=()

# run NAME LIMIT_SECONDS COMMAND...
run() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    if [ $rc -eq 77 ] && [ "${CI:-}" != "true" ]; then
        # A skip (a missing optional tool) is shown, and never counted as a
        # pass; in CI, where .ci/run installs everything, it is a failure.
        skipped=$((skipped + 1))
        echo "--- SKIPPED: $name"
        return
    fi
    if [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "--- ok: $name ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1))
        failures+=("$name")
        if [ $rc -eq 124 ]; then
            echo "--- FAILED: $name ran past its limit of $limit s"
        else
            echo "--- FAILED: $name (exit code $rc)"
        fi
    fi
}

# run_gpu NAME LIMIT COMMAND...: a test of the GPU path, which exits 77 where
# no GPU is visible: skipped and counted as skipped, in CI too (CI's
# machines have none; make gpu-check runs the GPU path where one is).
run_gpu() {
    local name=$1 limit=$2
    shift 2
    echo "=== $name"
    timeout --kill-after=10 "$limit" "$@"
    local rc=$?
    if [ $rc -eq 77 ]; then
        skipped=$((skipped + 1))
        echo "--- SKIPPED: $name (no GPU visible)"
    elif [ $rc -eq 0 ]; then
        passed=$((passed + 1))
        echo "--- ok: $name"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "--- FAILED: $name (exit code $rc)"
    fi
}

# run_failing NAME LIMIT PATTERN COMMAND...: a run that must fail (exit
# non-zero, not by the time limit) and say PATTERN: an unfinished student
# file, a planted bug. It passes when it fails that way.
run_failing() {
    local name=$1 limit=$2 pattern=$3
    shift 3
    echo "=== $name (must fail, saying: $pattern)"
    local out rc
    out=$(timeout --kill-after=10 "$limit" "$@" 2>&1)
    rc=$?
    echo "$out" | tail -n 25
    if [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -qF -- "$pattern" <<<"$out"; then
        passed=$((passed + 1))
        echo "--- ok: $name failed as it should (exit code $rc)"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "--- FAILED: $name exited $rc without saying '$pattern'"
    fi
}

# run_refused NAME PATTERN COMMAND...: a run that must be refused as a usage
# error: exit code 2, within 15 s (no rank left waiting), PATTERN said once.
run_refused() {
    local name=$1 pattern=$2
    shift 2
    echo "=== $name (must be refused, saying once: $pattern)"
    local out rc t0=$SECONDS
    out=$(timeout --kill-after=5 15 "$@" 2>&1)
    rc=$?
    echo "$out" | grep -v '^$' | head -n 4
    if [ $rc -eq 2 ] && [ "$(grep -cF -- "$pattern" <<<"$out")" -eq 1 ]; then
        passed=$((passed + 1))
        echo "--- ok: $name refused (exit code 2, $((SECONDS - t0)) s)"
    else
        failed=$((failed + 1))
        failures+=("$name")
        echo "--- FAILED: $name exited $rc (2 wanted; 124: a rank was left waiting) or did not say '$pattern' once"
    fi
}

# The long jobs (the grader over every lab, the planted bugs, the student
# releases) run two at a time: each spends about half its time waiting
# (mpirun starting, a run's processes in their own namespaces, a watchdog
# running out), so two of them share the two cores. Each is reported, in
# the order added, as run or run_failing would report it.
# pool_add NAME LIMIT PATTERN COMMAND...: PATTERN "" for a job that must
# pass, else one that must fail saying PATTERN.
pool_names=()
pool_limits=()
pool_patterns=()
pool_cmds=()
pool_add() {
    pool_names+=("$1")
    pool_limits+=("$2")
    pool_patterns+=("$3")
    shift 3
    pool_cmds+=("$(printf '%q ' "$@")")
}
pool_ok() { passed=$((passed + 1)); echo "--- ok: $2"; }
pool_bad() { failed=$((failed + 1)); failures+=("$1"); echo "--- FAILED: $2"; }
pool_run() {
    local dir i n=${#pool_names[@]} running=0 rc secs
    dir=$(mktemp -d)
    for ((i = 0; i < n; i++)); do
        if [ $running -ge 2 ]; then
            wait -n
            running=$((running - 1))
        fi
        (
            t0=$SECONDS
            eval "timeout --kill-after=10 ${pool_limits[i]} ${pool_cmds[i]}" > "$dir/$i.log" 2>&1
            echo "$? $((SECONDS - t0))" > "$dir/$i.rc"
        ) &
        running=$((running + 1))
    done
    wait
    for ((i = 0; i < n; i++)); do
        local name=${pool_names[i]} pattern=${pool_patterns[i]}
        read -r rc secs < "$dir/$i.rc"
        if [ -z "$pattern" ]; then
            echo "=== $name (beside another job)"
            cat "$dir/$i.log"
            [ "$rc" -eq 0 ] && pool_ok "$name" "$name ($secs s)" ||
                pool_bad "$name" "$name $([ "$rc" -eq 124 ] && echo "ran past its limit of ${pool_limits[i]} s" || echo "(exit code $rc)")"
        else
            echo "=== $name (beside another job; must fail, saying: $pattern)"
            tail -n 25 "$dir/$i.log"
            [ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] && grep -qF -- "$pattern" "$dir/$i.log" &&
                pool_ok "$name" "$name failed as it should (exit code $rc, $secs s)" ||
                pool_bad "$name" "$name exited $rc without saying '$pattern'"
        fi
    done
    rm -rf "$dir"
    pool_names=() pool_limits=() pool_patterns=() pool_cmds=()
}

# Unit tests of the library that need no MPI launch.
for t in rng mem data dump args ops gpt grader; do
    run "test_$t" 120 "build/tests/test_$t"
done
# The reference trainer as a user runs it.
run "test_ref" 300 build/tests/test_ref
# The independent oracle: the same GPT in PyTorch against build/ref.
run "torch_oracle" 300 /usr/bin/python3 tests/torch_oracle.py

# Communication at world sizes 1 to 4 (odd ones too).
for np in 1 2 3 4; do
    run "test_comm np=$np" 300 "${MPIRUN[@]}" -np "$np" build/tests/test_comm
done
for np in 1 3; do
    run "test_report np=$np" 120 "${MPIRUN[@]}" -np "$np" build/tests/test_report
done
run "the grader's include graph has no cycle (scripts/include-graph.py grader)" 30 python3 scripts/include-graph.py grader
run "test_trace np=3" 120 "${MPIRUN[@]}" -np 3 build/tests/test_trace
run "test_watchdog" 180 build/tests/test_watchdog
# The GPU path: every op on the GPU against the CPU's (make gpu-check runs
# the rest of it: the labs graded on a GPU, NCCL, compute-sanitizer).
if [ -x build/gpu_check ]; then
    # A wait on NCCL leaves no "not ready" for the next launch's check (a
    # model of the runtime's two functions; no GPU needed).
    run "test_cuda_poll" 60 build/tests/test_cuda_poll
    run_gpu "every op: GPU against CPU (build/gpu_check)" 300 build/gpu_check
    run_gpu "comm.h on GPU buffers (build/tests/test_comm_gpu np=1)" 120 "${MPIRUN[@]}" -np 1 build/tests/test_comm_gpu
else
    skipped=$((skipped + 1))
    echo "--- SKIPPED: the GPU path (a build without CUDA: CUDA=0, or no nvcc)"
fi

# Bad input is refused before the work, and one rank's refusal ends every
# rank: a missing, empty, 1-byte or directory --data, an output that cannot
# be made, a vocabulary the synthetic data cannot use, a model larger than
# the machine, a flag the program does not take.
bad=$(mktemp -d) && : > "$bad/empty" && printf x > "$bad/one-byte" && mkfifo "$bad/fifo"
# (A release of some labs has only theirs: the others' lines are skipped.)
have() { [ -x "build/$1" ]; }
for lab in build/lab02 build/lab03 build/lab04 build/lab05 build/lab06; do
    [ -x "$lab" ] || continue
    run_refused "$lab --data missing np=2" "cannot open --data file" "${MPIRUN[@]}" -np 2 $lab --data /missing/file
    run_refused "$lab --data empty np=2" "has 0 bytes" "${MPIRUN[@]}" -np 2 $lab --data "$bad/empty"
    run_refused "$lab --data 1 byte np=2" "has 1 bytes" "${MPIRUN[@]}" -np 2 $lab --data "$bad/one-byte"
    run_refused "$lab --data directory np=2" "is a directory" "${MPIRUN[@]}" -np 2 $lab --data "$bad"
    run_refused "$lab --data FIFO np=2 (no hang)" "is not a regular file" "${MPIRUN[@]}" -np 2 $lab --data "$bad/fifo"
    run_refused "$lab --dump in a missing directory np=2" "cannot create --dump file" "${MPIRUN[@]}" -np 2 $lab --dump /missing/run.bin
    run_refused "$lab --vocab 3 np=2" "too small for the synthetic data" "${MPIRUN[@]}" -np 2 $lab --vocab 3
    run_refused "$lab --layers 4096 np=2 (memory)" "but this machine has" "${MPIRUN[@]}" -np 2 $lab --layers 4096 --device cpu
done
have lab03 && run_refused "lab03 --figure in a missing directory np=2" "cannot create --figure file" "${MPIRUN[@]}" -np 2 build/lab03 --figure /missing/m.svg
have lab02 && run_refused "lab02 --accum not dividing the rows np=2 (after MPI starts)" "which --accum 3 does not divide" "${MPIRUN[@]}" -np 2 build/lab02 --accum 3
have lab04 && run_refused "lab04 np=3 with 4 heads (after MPI starts)" "3 ranks cannot split 4 heads" "${MPIRUN[@]}" -np 3 build/lab04
have lab04 && run_refused "lab04 --tp 3 np=4" "--tp 3 does not divide 4 ranks" "${MPIRUN[@]}" -np 4 build/lab04 --tp 3
have lab04 && run_refused "lab04 --vocab 255 np=2" "cannot split 255 tokens" "${MPIRUN[@]}" -np 2 build/lab04 --vocab 255
have lab05 && run_refused "lab05 --micro 3 np=2" "--micro 3 does not divide" "${MPIRUN[@]}" -np 2 build/lab05 --micro 3
have lab05 && run_refused "lab05 --pp 3 np=4" "--pp 3 does not divide 4 ranks" "${MPIRUN[@]}" -np 4 build/lab05 --pp 3
have lab05 && run_refused "lab05 np=7 stages for 6 units" "7 stages for 6 units" "${MPIRUN[@]}" -np 7 build/lab05
have lab05 && run_refused "lab05 --figure in a missing directory np=2" "cannot create --figure file" "${MPIRUN[@]}" -np 2 build/lab05 --figure /missing/s.svg
have lab06 && run_refused "lab06 np=3 with 64 tokens a row" "3 ranks cannot split 64 tokens" "${MPIRUN[@]}" -np 3 build/lab06 --heads 6 --dim 96 --vocab 192
have lab06 && run_refused "lab06 --tp 3 np=4" "--tp 3 does not divide 4 ranks" "${MPIRUN[@]}" -np 4 build/lab06 --tp 3
have lab01 && run_refused "lab01 --data (a flag it does not take)" "--data is not a flag of this program" build/lab01 --data README.md
run_refused "grade --json into a missing directory, before any grading" "cannot create --json file" build/grade --solutions --json /missing/r.json
run_refused "hello --data (a flag it does not take)" "--data is not a flag of this program" build/hello --data /missing
[ -z "$(ls "$bad" | grep -v -x -e empty -e one-byte -e fifo)" ] || echo "(files left behind in $bad)"
rm -rf "$bad"

# A student release has no solutions and no mutants: their tests cannot run.
if [ ! -d lab01_collectives/solution ]; then
    echo
    echo "(a student release: no solutions or mutants here; their tests are not run)"
    echo "$passed passed, $failed failed"
    [ $failed -eq 0 ]
    exit
fi

# The solutions at every world size and shape the grader runs are graded
# below (grade --solutions); here, what the grader's runs do not show: each
# lab program's own verdict with its reference, its default shape, its
# trace and figure files, lab01's bench; and the unfinished student files.
run "lab01_solution --bench np=2 (small sizes)" 300 "${MPIRUN[@]}" -np 2 build/lab01_solution --quiet \
    --bench --min-kib 1 --max-mib 1 --iters 3 --warmup 1
for np in 1 3; do
    run_failing "lab01 student np=$np" 300 "not written yet" "${MPIRUN[@]}" -np "$np" build/lab01 --quiet
done

# lab02: the solution matches single-device training (its exit code says
# so) and writes its trace; the student file does not.
run "lab02_solution np=2 flat --accum 2" 300 "${MPIRUN[@]}" -np 2 build/lab02_solution --steps 4 --strategy flat --accum 2
run "lab02_solution np=4 bucketed --trace" 300 bash -c \
    "${MPIRUN[*]} -np 4 build/lab02_solution --steps 3 --strategy bucketed --bucket-kb 256 --trace build/lab02.trace.json &&
     /usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert len({e[\"pid\"] for e in d[\"traceEvents\"]}) == 4' build/lab02.trace.json"
run_failing "lab02 student np=2" 300 "not written yet" "${MPIRUN[@]}" -np 2 build/lab02 --steps 2

# lab03: the figure of the four stages is drawn (and the run passes); the
# student file, as given, is plain data parallelism: right, but it fails the
# stages' TODOs.
run "lab03_solution np=4 stage 3 --figure" 300 bash -c \
    "${MPIRUN[*]} -np 4 build/lab03_solution --steps 3 --stage 3 --figure build/lab03-memory.svg &&
     /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert len(r.findall(\".//{http://www.w3.org/2000/svg}rect\")) >= 12' build/lab03-memory.svg"
run_failing "lab03 student np=2 stage 3" 300 "not written yet" "${MPIRUN[@]}" -np 2 build/lab03 --steps 2 --stage 3

# lab04: the solution matches single-device training on the default shape at
# t = 4 (the grader's runs cover t = 1, 2, 3, the grid, dropout and the naive
# MLP); the student file, as given, says what is missing.
run "lab04_solution np=4" 300 "${MPIRUN[@]}" -np 4 build/lab04_solution --steps 3
run_failing "lab04 student np=2" 300 "not written yet" "${MPIRUN[@]}" -np 2 build/lab04 --steps 2

# lab05: 1F1B on the default shape at p = 4 matches single-device training
# and draws its schedule (the grader's runs cover p = 1 to 4, m = 1 to 8,
# GPipe and the grid); the student file, as given, says what is missing.
# lab04 and lab06: their figures are drawn (both MLPs' bytes and memory per
# t; the activations per layer), parse, and hold their bars.
run "lab04_solution np=2 --figure" 300 bash -c \
    "${MPIRUN[*]} -np 2 build/lab04_solution --steps 2 --layers 2 --no-ref --figure build/lab04-tp.svg &&
     /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert len(r.findall(\".//{http://www.w3.org/2000/svg}rect\")) >= 16 + 2 and len(r.findall(\".//{http://www.w3.org/2000/svg}circle\")) == 2' build/lab04-tp.svg"
run "lab06_solution np=2 --figure" 300 bash -c \
    "${MPIRUN[*]} -np 2 build/lab06_solution --steps 2 --layers 2 --no-ref --figure build/lab06-acts.svg &&
     /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert len(r.findall(\".//{http://www.w3.org/2000/svg}rect\")) >= 6 + 2' build/lab06-acts.svg"
run "lab05_solution np=4 1f1b --figure" 300 bash -c \
    "${MPIRUN[*]} -np 4 build/lab05_solution --steps 3 --schedule 1f1b --micro 8 --figure build/lab05-schedule.svg &&
     /usr/bin/python3 -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); assert len(r.findall(\".//{http://www.w3.org/2000/svg}rect\")) >= 2 * 4 * 16' build/lab05-schedule.svg"
run_failing "lab05 student np=4 1f1b" 300 "not written yet" "${MPIRUN[@]}" -np 4 build/lab05 --steps 2 --schedule 1f1b

# lab06: sequence parallelism on the default shape at t = 4, dropout on,
# matches single-device training (the grader's runs cover t = 1 to 4, the
# grid and --sp off); the student file, as given, says what is missing.
run "lab06_solution np=4" 300 "${MPIRUN[@]}" -np 4 build/lab06_solution --steps 3
run_failing "lab06 student np=2" 300 "not written yet" "${MPIRUN[@]}" -np 2 build/lab06 --steps 2

# The grader. The reference solutions pass, with valid reports for Gradescope
# and JUnit (hidden runs included); the unfinished student files fail.
# Planted bugs: small patches against a solution, one classic bug each; each
# must fail with the diagnosis its EXPECT line names (a planted deadlock
# among them), and each legal variant (EXPECT: PASS) must pass. One grader
# run per lab shares the reference runs. The student release: no solutions
# in it, it builds, and every command its READMEs show a student works there
# as shown (scripts/readme-commands.sh; the unfinished labs fail their
# verdicts, saying what is missing). The longest jobs first, two at a time.
# (The releases are built without CUDA: the CUDA build is the one above, and
# nvcc's three targets would double the job's time.)
pool_add "student release: builds, and the READMEs' commands work" 900 "" bash -c '
    set -e
    export CUDA=0
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    make --no-print-directory student-release RELEASE="$t/release.tar.gz"
    ! tar -tzf "$t/release.tar.gz" | grep -E "/solution/|grader/mutants|grader/tests/adversarial"
    tar -xzf "$t/release.tar.gz" -C "$t"
    make --no-print-directory -C "$t/parallelism-labs" -j2 > "$t/build.log" 2>&1 || { tail -20 "$t/build.log"; exit 1; }
    scripts/readme-commands.sh "$t/parallelism-labs"'
pool_add "grade --solutions of ref and labs 01 to 03 (json, junit)" 900 "" bash -c \
    'build/grade --ref-cache "$REFCACHE" --solutions --lab ref,lab01,lab02,lab03 --json build/results.json --junit build/results.xml &&
     /usr/bin/python3 grader/tests/check_reports.py build/results.json build/results.xml'
for lab in lab03 lab01 lab02; do
    pool_add "planted bugs of $lab" 900 "" build/grade --ref-cache "$REFCACHE" --lab "$lab" --mutants "grader/mutants/$lab/" --quick --watchdog 5 --limit 120
done
pool_add "grade --solutions of labs 04 to 06 (json, junit)" 900 "" bash -c \
    'build/grade --ref-cache "$REFCACHE" --solutions --lab lab04,lab05,lab06 --json build/results-b.json --junit build/results-b.xml &&
     /usr/bin/python3 grader/tests/check_reports.py build/results-b.json build/results-b.xml'
# The unfinished student files fail, saying what is missing, and score
# nothing: a check they pass (a memory bound, a byte count) earns no point
# while their runs' TODOs are unwritten.
pool_add "grade (the unfinished student files): they fail and score 0" 600 "" bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    build/grade --ref-cache "$REFCACHE" --quick --json "$t/r.json" --junit "$t/r.xml" > "$t/out.txt" 2>&1
    rc=$?
    tail -n 5 "$t/out.txt"
    [ $rc -ne 0 ] && grep -q "not written yet" "$t/out.txt" || { echo "it did not fail saying: not written yet"; exit 1; }
    /usr/bin/python3 grader/tests/check_reports.py "$t/r.json" "$t/r.xml" &&
    /usr/bin/python3 -c "import json, sys; s = json.load(open(sys.argv[1]))[\"score\"]; print(\"score\", s); sys.exit(s != 0)" "$t/r.json"'
# A release of some labs holds those alone, and its grader grades them alone.
pool_add "a release of lab01 and lab02 alone: only they are in it, and graded" 600 "" bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    chmod 711 "$t"   # the runs user (uid 65534, when root) passes through it
    export CUDA=0
    make --no-print-directory student-release LABS="lab01 lab02" RELEASE="$t/r.tar.gz" > /dev/null &&
    tar -xzf "$t/r.tar.gz" -C "$t" && cd "$t/parallelism-labs" || exit 1
    [ -d lab01_collectives ] && [ -d lab02_ddp ] || { echo "lab01 or lab02 is missing"; exit 1; }
    ! ls -d lab0[3-9]_* */solution 2>/dev/null || { echo "it holds more than lab01 and lab02"; exit 1; }
    make --no-print-directory -j2 build/grade build/ref build/lab01 build/lab02 > build.log 2>&1 || { tail -20 build.log; exit 1; }
    build/grade --quick > out.txt 2>&1
    [ $? -eq 1 ] && grep -q "== lab01" out.txt && grep -q "== lab02" out.txt && grep -q "not written yet" out.txt &&
        ! grep -q "== lab0[3-9]" out.txt || { tail -20 out.txt; echo "not lab01 and lab02 alone, failing as unfinished"; exit 1; }
    build/grade --lab lab04 > out4.txt 2>&1
    [ $? -ne 0 ] && grep -q "lab04 is not in this tree" out4.txt || { cat out4.txt; exit 1; }
    echo "lab01 and lab02 alone, graded alone"'
for lab in lab04 lab05 lab06; do
    pool_add "planted bugs of $lab" 900 "" build/grade --ref-cache "$REFCACHE" --lab "$lab" --mutants "grader/mutants/$lab/" --quick --watchdog 5 --limit 120
done
# Correct code passes on other machines' rounding: the runs whose margins
# the yardstick's matrix found smallest (scripts/yardstick-matrix.sh runs it
# all), their solutions and legal variants, under two other OpenBLAS kernels
# (Prescott: SSE3, no FMA; Haswell: AVX2), where this CPU runs them.
cpu_flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
closest="np4-1f1b-m8,np3-heads6,np4-naive-accum2,np3-stage1"
for ct in Prescott Haswell; do
    if [ "$(uname -m)" != x86_64 ] || { [ $ct = Haswell ] && ! grep -qw avx2 <<<"$cpu_flags"; }; then
        echo "--- SKIPPED: the closest runs under OPENBLAS_CORETYPE=$ct (this CPU cannot run that kernel)"
        skipped=$((skipped + 1))
        continue
    fi
    pool_add "the closest runs under OPENBLAS_CORETYPE=$ct: solutions and legal variants pass" 600 "" bash -c '
        set -e
        export OPENBLAS_CORETYPE=$1
        build/grade --ref-cache "$REFCACHE" --solutions --lab lab02,lab03,lab05,lab06 --runs "$2" | tail -n 1
        [ "$1" = Prescott ] || exit 0   # the legal variants under one of the two
        t=$(mktemp -d) && trap "rm -rf $t" EXIT
        for lab in lab04 lab05; do
            mkdir -p "$t/$lab" && cp grader/mutants/$lab/legal_*.patch "$t/$lab/"
            build/grade --ref-cache "$REFCACHE" --lab $lab --mutants "$t/$lab" --runs "$2" | tail -n 1
        done' _ "$ct" "$closest"
done
# Hidden runs (a second seed, marked hidden in the reports), on the fastest lab.
pool_add "grade --solutions --hidden-seed (json, junit)" 300 "" bash -c \
    'build/grade --ref-cache "$REFCACHE" --solutions --lab lab01 --json build/results-hidden.json --junit build/results-hidden.xml --hidden-seed 4242 &&
     /usr/bin/python3 grader/tests/check_reports.py build/results-hidden.json build/results-hidden.xml &&
     grep -q "\"visibility\": \"hidden\"" build/results-hidden.json'
# make gpu-check without a GPU (scripts/gpu-check.sh --dry-run): the
# pre-flight, the bundle for a GPU machine made and unpacked, its Open MPI
# alone (its plugins and help files its own), the grader through it, the
# table and the logs' archive, the GPU rows skipped and not failed; then
# with a 7 s deadline: a step cut short at it, the rest not run, the table
# and the archive still written, exit 1.
run "gpu-check --dry-run: pre-flight, bundle, budget, table" 240 bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    OUT=$t/a GPU_CHECK_WORK=$t/wa scripts/gpu-check.sh --dry-run > "$t/a.txt" 2>&1; rc=$?
    cat "$t/a.txt"
    [ $rc -eq 0 ] && grep -q "^pre-flight: gpu .* SKIP" "$t/a/gpu-check.txt" &&
        grep -q "every op: GPU against CPU.* SKIP .*no GPU" "$t/a/gpu-check.txt" &&
        ! grep -q " FAIL " "$t/a/gpu-check.txt" && tar -tzf "$t/a/gpu-check-logs.tar.gz" | grep -q "^logs/" ||
        { echo "the dry run: exit $rc, or its table or archive is not as it should be"; exit 1; }
    # The bundle'"'"'s Open MPI and PMIx found their plugins and help files.
    ! tar -xzOf "$t/a/gpu-check-logs.tar.gz" | grep -E "open the help file|usable compression library|was unable to be opened" ||
        { echo "the bundle'"'"'s Open MPI or PMIx looked outside the bundle"; exit 1; }
    OUT=$t/b GPU_CHECK_WORK=$t/wb scripts/gpu-check.sh --dry-run --deadline 7 > "$t/b.txt" 2>&1; rc=$?
    grep -E "CUT|NOT RUN|deadline" "$t/b.txt"
    [ $rc -eq 1 ] && grep -q "cut short at the deadline" "$t/b/gpu-check.txt" &&
        grep -q "NOT RUN" "$t/b/gpu-check.txt" && [ -s "$t/b/gpu-check-logs.tar.gz" ] ||
        { echo "with a 7 s deadline: exit $rc (1 wanted), or no step cut short, or no table or archive"; exit 1; }'

# Several nodes, tried on one machine (scripts/multinode.sh): two network
# namespaces joined by a veth pair are node1 and node2, 2 ranks on each,
# shared memory inside a node and TCP between, started by the README's
# commands. Each solution matches single-device training; a rank stopped on
# node2 is named. Skipped where namespaces cannot be made (not root, no
# CAP_NET_ADMIN).
if why=$(scripts/multinode.sh can); then
    mn=scripts/multinode.sh
    run "two nodes: the README's \"Several nodes\" commands are the ones run here" 10 $mn readme
    run "two nodes: each rank's comm_local_rank() is its rank mod 2" 60 $mn local-ranks
    run "two nodes: lab02_solution np=4 bucketed" 120 $mn run build/lab02_solution --steps 2 --layers 2 --strategy bucketed
    run "two nodes: lab03_solution np=4 stage 3" 120 $mn run build/lab03_solution --steps 2 --layers 2 --dim 128 --stage 3
    run "two nodes: lab04_solution np=4 --tp 2 (a tensor-parallel group on each node)" 120 \
        $mn run build/lab04_solution --steps 2 --layers 2 --tp 2
    run "two nodes: lab05_solution np=4 1f1b (stage 1 sends to stage 2 across)" 120 \
        $mn run build/lab05_solution --steps 2 --layers 2 --schedule 1f1b --micro 4
    run "two nodes: lab06_solution np=4 (one tensor-parallel group over both)" 120 \
        $mn run build/lab06_solution --steps 2 --layers 2 --seq 32
    run_failing "two nodes: ranks of a node talking over TCP are seen (--mca btl self,tcp)" 120 \
        "talked over TCP, not shared memory" $mn run --mca btl self,tcp build/lab02_solution --steps 2 --layers 2
    run "two nodes: a rank stopped on node2 is named, and node1's ranks say they wait for it" 90 $mn freeze
else
    skipped=$((skipped + 1))
    echo "--- SKIPPED: several nodes on one machine ($why)"
fi
pool_run
# Negative controls of the tolerances. One row of a weight matrix (512 of
# 867,072 parameters) off by a tenth of an AdamW step (lr = 1e-3) is caught
# by the bulk; one element off by 0.1 is further than AdamW can move an
# element in 8 steps (Adam's reach), and is caught by that. (One element off
# by a whole step is not an error a bug makes alone: correct code on another
# BLAS kernel moves a few elements that far; see the README's Grader section.)
run_failing "grade rejects a reference run with one row perturbed by a tenth of a step" 300 \
    "worst: block1.mlp.w1" build/grade --ref-cache "$REFCACHE" --solutions --lab ref --quick --perturb param/final/block1.mlp.w1:512:1e-4:512
run_failing "grade rejects a reference run with one element beyond Adam's reach" 300 \
    "further from the reference's than AdamW can move" build/grade --ref-cache "$REFCACHE" --solutions --lab ref --quick \
    --perturb param/final/block1.mlp.w1:17:0.1
# A grading's time budget: the runs left when it is spent fail unrun.
run_failing "grade --budget: the runs past the grading's budget fail, unrun" 120 \
    "graded within the time budget" build/grade --ref-cache "$REFCACHE" --solutions --lab lab02 --budget 1
# A planted bug that no longer fits its solution fails loudly, not silently.
run_failing "a stale planted bug is refused" 120 "no longer applies" bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    { echo "MUTANT: a patch whose context has drifted"; echo "EXPECT: anything"
      echo "--- a/lab02_ddp/solution/ddp.c"; echo "+++ b/lab02_ddp/solution/ddp.c"
      echo "@@ -1,2 +1,2 @@"; echo "-// a line the solution does not have"; echo "+// another"; echo " // nor this"; } > "$t/stale.patch"
    build/grade --ref-cache "$REFCACHE" --lab lab02 --mutant "$t/stale.patch" --quick'
# ---- the grader isolated: adversarial submissions --------------------------
# Each file under grader/tests/adversarial/NAME/ is a lab02 submission that
# tries to cheat or to break the grader. Graded with --submission, each must
# fail saying PATTERN (and never FORBIDDEN), with results.json written, the
# grader's work directory removed and no process of it left running.
adversarial() { adversarial_in lab02 np2-bucketed "$@"; }
adversarial_in() {
    local lab=$1 runs=$2 name=$3 pattern=$4 forbidden=${5:-}
    run "adversarial submission: $name" 300 bash -c '
        lab=$1 runs=$2 name=$3 pattern=$4 forbidden=$5
        t=$(mktemp -d) && trap "rm -rf $t" EXIT
        chmod 711 "$t"   # the runs user (uid 65534, when root) passes through it
        TMPDIR=$t build/grade --ref-cache "$REFCACHE" --submission "grader/tests/adversarial/$name" --lab "$lab" --runs "$runs" \
            --watchdog 5 --limit 60 --json "$t/results.json" > "$t/out.txt" 2>&1
        rc=$?
        tail -n 6 "$t/out.txt"
        [ $rc -ne 0 ] || { echo "it passed"; exit 1; }
        [ -s "$t/results.json" ] || { echo "no results.json"; exit 1; }
        grep -qF -- "$pattern" "$t/results.json" || { echo "results.json does not say: $pattern"; exit 1; }
        if [ -n "$forbidden" ] && grep -qF -- "$forbidden" "$t/results.json" "$t/out.txt"; then
            echo "it says: $forbidden"; exit 1
        fi
        ! ls -d "$t"/grade.* 2>/dev/null || { echo "the work directory is left behind"; exit 1; }
        if pgrep -x pl-adversary; then echo "a process of it is still running"; exit 1; fi
        echo "failed as it should: $pattern"' _ "$lab" "$runs" "$name" "$pattern" "$forbidden"
}
adversarial exec_solution "not written yet"
adversarial read_answers "not written yet" "SIGABRT"
# The daemon must be ended with its run (no process of it left, checked
# for every submission) without costing the run its time limit; whether
# the run then reads as "kept running after it" depends on whether the
# daemon still held the run's output when the run ended.
adversarial daemon "not written yet" "endless loop"
adversarial big_file "SIGXFSZ"
adversarial atexit_rewrite "not written yet"
adversarial hooks_reset "harness_hooks is called once"
adversarial malformed_loss "the dump's loss is text, not numbers"
adversarial malformed_unfinished "check/unfinished/ddp_sync_params is empty"
adversarial no_world_size "the dump has no meta/world_size"
adversarial include_secret "are not about lab02_ddp/ddp.c itself" "root:x:0"
adversarial pmpi_allreduce "ddp.c calls PMPI_Allreduce"
adversarial late_cleanup "core_add_cleanup after the harness started"
adversarial erase_measures "mem_reset_peaks after the harness sealed its measures"
adversarial oldpwd_solution "not written yet"
adversarial symlink_solution "is a symbolic link"
# Memory no allocator call makes, and the levers around the measures: the
# symbols a student's file calls and defines, and its own system calls.
adversarial real_malloc "ddp.c calls __real_malloc"
adversarial mmap_hoard "ddp.c calls mmap"
adversarial static_hoard "memory that no allocator call made"
adversarial syscall_asm "makes system calls of its own"
adversarial defines_fopen "ddp.c defines fopen"
# The lab's parallelism itself, not its side effects: lab04 computing whole
# layers, lab05's 1F1B in GPipe's order with its micro-batches "ended"
# between their passes, lab06 running the LayerNorms on the whole sequence.
adversarial_in lab04 np2 lab04_whole_layers "a rank computed whole layers"
adversarial_in lab05 np3-1f1b-m8 lab05_gpipe_as_1f1b "were freed before its backward pass"
adversarial_in lab06 np2 lab06_whole_sequence "the LayerNorms ran on more than this rank's tokens"
# As root, a run has its own /tmp, /var/tmp and /dev/shm: what it leaves
# there is gone with it.
if [ "$(id -u)" -eq 0 ]; then
    adversarial leaves_files "not written yet"
    run "a run's files in /tmp, /var/tmp and /dev/shm are gone with it" 10 bash -c '
        ! ls /tmp/pl-adversary-left /var/tmp/pl-adversary-left /dev/shm/pl-adversary-left 2>/dev/null'
fi
# As root, a submission is built as untrusted as it runs: the trusted tree
# hidden (an #include of the solution by its path finds nothing), limits on
# time and memory (#include "/dev/zero"), no standard input ("/dev/stdin").
if [ "$(id -u)" -eq 0 ]; then
    run "a submission's build is sandboxed: the solution by path, /dev/zero, /dev/stdin" 400 bash -c '
        t=$(mktemp -d) && trap "rm -rf $t" EXIT
        chmod 711 "$t"
        mkdir "$t/path" "$t/zero" "$t/stdin"
        printf "#include \"%s/lab02_ddp/solution/ddp.c\"\n" "$PWD" > "$t/path/ddp.c"
        printf "#include \"/dev/zero\"\n" > "$t/zero/ddp.c"
        printf "#include \"/dev/stdin\"\n" > "$t/stdin/ddp.c"
        for s in path zero stdin; do
            TMPDIR=$t timeout 300 build/grade --ref-cache "$REFCACHE" --submission "$t/$s" --lab lab02 --runs np2-bucketed --json "$t/$s.json" \
                > "$t/$s.out" 2>&1
            rc=$?
            [ $rc -eq 1 ] && grep -q "does not compile" "$t/$s.json" || { tail -5 "$t/$s.out"; echo "$s: exit $rc"; exit 1; }
            echo "$s: does not compile, as it should"
        done'
fi
# Late usage errors still leave a results.json and no work directory.
run "grader: a late usage error writes its reports and cleans up" 120 bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    for bad in "--lab lab9" "--perturb foo"; do
        TMPDIR=$t build/grade --ref-cache "$REFCACHE" --solutions --quick $bad --json "$t/r.json" > "$t/out.txt" 2>&1
        [ $? -eq 2 ] && [ -s "$t/r.json" ] && ! ls -d "$t"/grade.* 2>/dev/null || { cat "$t/out.txt"; echo "$bad"; exit 1; }
    done'
# The dump reader: a FIFO, /dev/zero and a huge sparse file are refused at
# once, without reading them; dumptool diff is exact without --tol.
run "dump reader refuses what is not a dump, at once" 60 bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    mkfifo "$t/fifo"
    timeout 5 build/dumptool show "$t/fifo" 2>&1 | grep -q "not a regular file" || exit 1
    timeout 5 build/dumptool show /dev/zero 2>&1 | grep -q "not a regular file" || exit 1
    truncate -s 8G "$t/sparse"
    timeout 5 build/dumptool show "$t/sparse" 2>&1 | grep -q "bad magic" || exit 1
    { printf "PLDUMP1\n"; printf "\x04\x00\x00\x00loss\x00\x00\x00\x00\x01\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00"; } > "$t/head"
    truncate -s 8G "$t/head"
    timeout 5 build/dumptool show "$t/head" 2>&1 | grep -q "truncated\|needs" || exit 1
    build/ref --steps 2 --layers 1 --dim 32 --heads 2 --seq 16 --device cpu --dump "$t/a.bin" > /dev/null &&
    build/ref --steps 2 --layers 1 --dim 32 --heads 2 --seq 16 --device cpu --seed 7 --dump "$t/b.bin" > /dev/null || exit 1
    out=$(build/dumptool diff "$t/a.bin" "$t/b.bin")
    [ $? -eq 1 ] && grep -q "tolerance 0 (exact" <<<"$out" && grep -q DIFFER <<<"$out"'

# Looking up every record of a dump is n log n, not n^2: 200,000 records
# are read and compared with themselves in seconds (they took minutes).
run "a dump of 200,000 records is read and compared in seconds" 60 bash -c '
    t=$(mktemp -d) && trap "rm -rf $t" EXIT
    /usr/bin/python3 -c "import sys; sys.path.insert(0, \"scripts\"); import pldump, numpy as np
pldump.write(sys.argv[1], {f\"a/{i}\": np.array([i], np.float32) for i in range(200000)})" "$t/many.bin" &&
    timeout 20 build/dumptool diff "$t/many.bin" "$t/many.bin" > /dev/null'

echo
if [ $failed -gt 0 ]; then
    echo "failed: ${failures[*]}"
fi
if [ $skipped -gt 0 ]; then
    echo "$passed passed, $failed failed, $skipped skipped"
else
    echo "$passed passed, $failed failed"
fi
[ $failed -eq 0 ]
