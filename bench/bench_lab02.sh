#!/usr/bin/env bash
# bench_lab02.sh (make bench-lab02): data-parallel step time of the three
# strategies of lab02's solution at 2 and 4 ranks, on a model large enough
# that communication matters, beside PyTorch DistributedDataParallel (gloo)
# on the same model, global batch and world size. A benchmark: it prints
# figures and asserts nothing. On a 2-core machine 4 ranks are oversubscribed.
set -euo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
MODEL=(--layers 4 --dim 256 --heads 4 --seq 64 --batch 8 --vocab 256)
STEPS=${STEPS:-12}
NPS=${NPS:-"2 4"}

ms_of() { sed -n 's/^mean over steps [^:]*: \([0-9.]*\) ms\/step.*/\1/p'; }
hidden_of() { sed -n 's/.*exposed [0-9.]*: \([0-9]*\)% hidden.*/\1/p'; }

echo "model: GPT 4L 256C 4H, T 64, global batch 8, V 256 (3.4M parameters); $STEPS steps, the first untimed"
printf '%-4s %-10s %10s %8s\n' np strategy ms/step hidden
for np in $NPS; do
    best=""
    for strategy in naive flat bucketed; do
        out=$(mpirun --oversubscribe -np "$np" build/lab02_solution "${MODEL[@]}" --steps "$STEPS" --no-ref \
              --strategy "$strategy" --bucket-kb 1024 --device cpu)
        ms=$(echo "$out" | ms_of)
        printf '%-4s %-10s %10s %7s%%\n' "$np" "$strategy" "$ms" "$(echo "$out" | hidden_of)"
        if [ -z "$best" ] || awk -v a="$ms" -v b="$best" 'BEGIN {exit !(a < b)}'; then best=$ms; fi
    done
    if /usr/bin/python3 -c 'import torch.distributed' 2>/dev/null; then
        line=$(/usr/bin/python3 bench/torch_ddp.py --np "$np" "${MODEL[@]}" --steps "$STEPS" --warmup 2)
        tms=$(echo "$line" | sed -n 's/.*ms\/step \([0-9.]*\).*/\1/p')
        printf '%-4s %-10s %10s          [%s]\n' "$np" "torch DDP" "$tms" "$line"
        printf '%-4s PyTorch DDP / our best = %.2f\n' "$np" "$(awk -v a="$tms" -v b="$best" 'BEGIN {print a / b}')"
    else
        echo "PyTorch (python3-torch) not installed: no comparison"
    fi
done
