#!/usr/bin/env bash
# gpu-check.sh: the GPU path, checked in one go on a machine with a GPU
# (make gpu-check). It builds with CUDA, compares every GPU op with the CPU
# op, trains build/ref on the GPU against the CPU's reference, grades every
# lab's solution on the GPU (one rank with NCCL; two and four ranks sharing
# the GPU through the MPI backend), runs compute-sanitizer on short runs,
# and prints one table. Exit 0 when every check passed, 1 when one failed,
# 77 when no GPU is visible. Meant to take under 8 minutes on one GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
MPIRUN=(mpirun --oversubscribe)
LOG=${GPU_CHECK_LOG:-build/gpu-check}
mkdir -p "$LOG"

if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "gpu-check: no GPU visible (nvidia-smi -L finds none); nothing to check here"
    exit 77
fi
gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | head -n 1)
echo "gpu-check on: $gpu"

rows=()
failed=0
# check NAME LIMIT COMMAND...: run it, its output to $LOG/NAME.log; a row
# of the table with its time and its last line.
check() {
    local name=$1 limit=$2
    shift 2
    local file="$LOG/${name//[^A-Za-z0-9_.-]/_}.log" t0=$SECONDS rc
    timeout --kill-after=10 "$limit" "$@" > "$file" 2>&1
    rc=$?
    local last
    last=$(grep -v '^\s*$' "$file" | tail -n 1 | cut -c 1-90)
    if [ $rc -eq 0 ]; then
        rows+=("$(printf '%-44s %5ds  ok     %s' "$name" $((SECONDS - t0)) "$last")")
    else
        failed=$((failed + 1))
        rows+=("$(printf '%-44s %5ds  FAIL   %s (exit %d; %s)' "$name" $((SECONDS - t0)) "$last" $rc "$file")")
    fi
    echo "${rows[-1]}"
}

jobs=$(nproc)
check "build with CUDA (sm_80, sm_90, PTX)" 600 make -j"$jobs" CUDA=1
check "every op: GPU against CPU" 300 build/gpu_check
check "comm.h on GPU buffers: NCCL, one rank" 120 "${MPIRUN[@]}" -np 1 build/tests/test_comm_gpu
check "comm.h on GPU buffers: MPI, one rank" 120 "${MPIRUN[@]}" -np 1 build/tests/test_comm_gpu --comm mpi
check "comm.h on GPU buffers: 2 ranks share it (MPI)" 120 "${MPIRUN[@]}" -np 2 build/tests/test_comm_gpu
check "build/ref: GPU against the CPU's reference" 300 build/grade --solutions --lab ref --runs gpu-against-cpu
check "build/ref --tf32 runs" 120 build/ref --device cuda --tf32 --steps 5
# Every lab's solution on the GPU, the fast subset of the grader's runs:
# one rank on the GPU uses NCCL; several share it through the MPI backend.
for lab in lab01 lab02 lab03 lab04 lab05 lab06; do
    check "grade $lab on the GPU (quick runs)" 600 build/grade --solutions --lab "$lab" --quick
done
# NCCL named, one rank (a single GPU can hold one NCCL rank).
check "lab02 np=1 --comm nccl" 120 "${MPIRUN[@]}" -np 1 build/lab02_solution --comm nccl --steps 3
check "lab03 np=1 --comm nccl stage 3" 120 "${MPIRUN[@]}" -np 1 build/lab03_solution --comm nccl --steps 3 --stage 3
check "lab06 np=1 --comm nccl" 120 "${MPIRUN[@]}" -np 1 build/lab06_solution --comm nccl --steps 3
check "lab02 np=2 --comm mpi (one GPU, staged)" 120 "${MPIRUN[@]}" -np 2 build/lab02_solution --comm mpi --steps 3
# Two ranks cannot share a GPU through NCCL: refused, saying why.
check "np=2 --comm nccl on one GPU is refused" 60 bash -c \
    "${MPIRUN[*]} -np 2 build/lab02_solution --comm nccl --steps 1 > '$LOG/nccl-shared.out' 2>&1; [ \$? -eq 2 ] && grep -q -i 'one GPU' '$LOG/nccl-shared.out'"
# compute-sanitizer: memory errors and races of the kernels, on short runs.
if command -v compute-sanitizer > /dev/null || [ -x /usr/local/cuda/bin/compute-sanitizer ]; then
    CS=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
    check "compute-sanitizer: build/ref" 300 "$CS" --error-exitcode 1 build/ref --device cuda --steps 2 --layers 1 --dim 64 --heads 4 --seq 32 --dropout 0.1
    check "compute-sanitizer: lab04 np=1" 300 "${MPIRUN[@]}" -np 1 "$CS" --error-exitcode 1 build/lab04_solution --steps 2 --layers 1 --no-ref
else
    rows+=("$(printf '%-44s %5s  SKIP   %s' "compute-sanitizer" "" "not installed")")
fi

echo
echo "gpu-check on $gpu"
printf '%-44s %6s  %-6s %s\n' "check" "time" "result" "last line"
printf '%s\n' "${rows[@]}"
echo
if [ $failed -gt 0 ]; then
    echo "$failed check(s) failed; their output is in $LOG/"
    exit 1
fi
echo "every check passed"
