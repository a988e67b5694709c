#!/usr/bin/env bash
# bench_gpu.sh: tokens/s and model FLOP utilisation of the reference trainer
# on one GPU, on a GPT-2-small-sized model (12 layers, 768 channels, 12
# heads, 1024 tokens, vocabulary 50257), in fp32, with --tf32 and with
# --precision bf16 (bf16 products summed in fp32 on the tensor cores),
# against the card's peak for each; beside PyTorch on the same model where
# PyTorch with CUDA is installed. The FLOPs are the products ops.h counted (below). A benchmark: it prints figures, it never fails on them.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "bench-gpu: no GPU visible; nothing to measure here"
    exit 0
fi
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
# Dense peaks (TFLOP/s) from the vendor's data sheets: plain fp32 on the
# CUDA cores, and TF32 and bf16 on the tensor cores (without sparsity).
case "$name" in
*H200* | *H100*SXM* | *H100\ 80GB\ HBM3*) fp32=67; tf32=494.7; bf16=989.4 ;;
*H100*PCIe* | *H100*) fp32=51; tf32=378; bf16=756.5 ;;
*A100*) fp32=19.5; tf32=156; bf16=312 ;;
*L40S*) fp32=91.6; tf32=183; bf16=362 ;;
*) fp32=0; tf32=0; bf16=0 ;;
esac
peak_of() { case $1 in tf32) echo $tf32 ;; bf16) echo $bf16 ;; *) echo $fp32 ;; esac; }
flag_of() { case $1 in tf32) echo --tf32 ;; bf16) echo --precision bf16 ;; esac; }
B=${BENCH_BATCH:-8} T=1024 L=12 C=768 NH=12 V=50257 STEPS=${BENCH_STEPS:-8}
SHAPE="--layers $L --dim $C --heads $NH --seq $T --vocab $V --batch $B --steps $STEPS --device cuda"
# Model FLOPs per token: the matrix products that run, as ops.h counts the
# multiply-adds build/ref asks for (two FLOPs each), over the run's tokens.
# That is the PaLM appendix's 6 N + 12 L T C with N the weights that take
# part in a product (per layer 12 C^2, and the LM head's V C): wte and wpe
# are lookups, and counting them as 6 N would overstate the FLOPs by 1.28
# at this shape. The formula is printed beside the count.
formula_per_token=$(python3 -c "print(6 * ($L * 12 * $C * $C + $V * $C) + 12 * $L * $T * $C)")
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT
flops_per_token=$formula_per_token   # until a run counts them
echo "bench-gpu on $name: GPT $L layers, $C channels, $NH heads, $T tokens, vocabulary $V, batch $B"
printf '%-26s %12s %10s %8s\n' "run" "tokens/s" "TFLOP/s" "MFU"
for mode in fp32 tf32 bf16; do
    out=$(build/ref $SHAPE $(flag_of $mode) --dump "$tmp/$mode.bin" 2>&1)
    tps=$(grep -oE "[0-9.]+k tokens/s" <<<"$out" | tail -n 1 | grep -oE "[0-9.]+")
    madds=$(build/dumptool show "$tmp/$mode.bin" 2> /dev/null | awk '$1 == "ops/matmul" {gsub(/[][,]/, "", $NF); print $NF}')
    if [ -z "$tps" ] || [ -z "$madds" ]; then
        echo "build/ref $mode did not run:"; tail -n 5 <<<"$out"; continue
    fi
    flops_per_token=$(python3 -c "print(2 * $madds / ($B * $T * $STEPS))")
    echo "  $mode: $flops_per_token FLOPs a token counted (the formula: $formula_per_token)"
    python3 -c "
tps = $tps * 1e3; f = tps * $flops_per_token / 1e12
peak = $(peak_of $mode)
print('%-26s %12.0f %10.1f %8s' % ('build/ref $mode', tps, f, ('%.1f%%' % (100 * f / peak)) if peak else '?'))"
done
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
    # bf16: autocast and bf16 weights with an fp32 master, the faster
    # (torch_ref.py --precision bf16), named after the table.
    for mode in fp32 tf32 bf16; do
        line=$(python3 bench/torch_ref.py --device cuda $(flag_of $mode) --impl linear \
               --layers $L --dim $C --heads $NH --seq $T --vocab $V --batch $B --steps $STEPS --warmup 2)
        tps=$(awk '/torch tokens\/s:/ {print $3}' <<<"$line")
        if [ -z "$tps" ]; then echo "PyTorch $mode did not run:"; tail -n 5 <<<"$line"; continue; fi
        [ $mode = bf16 ] && torch_bf16=$(sed -n 's/.*, \(bf16 by [a-z]*\), .*/\1/p' <<<"$line")
        python3 -c "
f = $tps * $flops_per_token / 1e12; peak = $(peak_of $mode)
print('%-26s %12.0f %10.1f %8s' % ('PyTorch $mode', $tps, f, ('%.1f%%' % (100 * f / peak)) if peak else '?'))"
    done
    [ -n "${torch_bf16:-}" ] && echo "(PyTorch bf16: $torch_bf16, the faster of autocast and bf16 weights with an fp32 master)"
else
    echo "PyTorch with CUDA is not installed here: no PyTorch figure"
fi
echo "(peaks: $fp32 TFLOP/s fp32, $tf32 TFLOP/s TF32 dense, $bf16 TFLOP/s bf16 dense, from the data sheet of $name)"
