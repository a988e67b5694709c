#!/usr/bin/env bash
# bench_gpu.sh: tokens/s and model FLOP utilisation of the reference trainer
# on one GPU, on a GPT-2-small-sized model (12 layers, 768 channels, 12
# heads, 1024 tokens, vocabulary 50257), in fp32 and with --tf32, against
# the card's peak; beside PyTorch on the same model where PyTorch with CUDA
# is installed. A benchmark: it prints figures, it never fails on them.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! command -v nvidia-smi > /dev/null || ! nvidia-smi -L > /dev/null 2>&1; then
    echo "bench-gpu: no GPU visible; nothing to measure here"
    exit 0
fi
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
# Dense peaks (TFLOP/s) from the vendor's data sheets: plain fp32 on the
# CUDA cores, and TF32 on the tensor cores (without sparsity).
case "$name" in
*H200* | *H100*SXM* | *H100\ 80GB\ HBM3*) fp32=67; tf32=494.7 ;;
*H100*PCIe* | *H100*) fp32=51; tf32=378 ;;
*A100*) fp32=19.5; tf32=156 ;;
*L40S*) fp32=91.6; tf32=183 ;;
*) fp32=0; tf32=0 ;;
esac
B=${BENCH_BATCH:-8} T=1024 L=12 C=768 NH=12 V=50257 STEPS=${BENCH_STEPS:-8}
SHAPE="--layers $L --dim $C --heads $NH --seq $T --vocab $V --batch $B --steps $STEPS --device cuda"
# Model FLOPs per token (Kaplan et al., the PaLM appendix's count): 6 N for
# the weights' products forward and backward, plus attention's 12 L T C.
flops_per_token=$(python3 -c "
L,C,T,V=$L,$C,$T,$V
N = L*(12*C*C+13*C) + V*C + T*C + 2*C + C*V
print(6*N + 12*L*T*C)")
echo "bench-gpu on $name: GPT $L layers, $C channels, $NH heads, $T tokens, vocabulary $V, batch $B"
printf '%-26s %12s %10s %8s\n' "run" "tokens/s" "TFLOP/s" "MFU"
for mode in fp32 tf32; do
    flag=$([ $mode = tf32 ] && echo --tf32)
    out=$(build/ref $SHAPE $flag 2>&1)
    tps=$(grep -oE "[0-9.]+k tokens/s" <<<"$out" | tail -n 1 | grep -oE "[0-9.]+")
    if [ -z "$tps" ]; then
        echo "build/ref $mode did not run:"; tail -n 5 <<<"$out"; continue
    fi
    python3 -c "
tps = $tps * 1e3; f = tps * $flops_per_token / 1e12
peak = $([ $mode = tf32 ] && echo $tf32 || echo $fp32)
print('%-26s %12.0f %10.1f %8s' % ('build/ref $mode', tps, f, ('%.1f%%' % (100 * f / peak)) if peak else '?'))"
done
if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2> /dev/null; then
    for mode in fp32 tf32; do
        line=$(python3 bench/torch_ref.py --device cuda $([ $mode = tf32 ] && echo --tf32) --impl linear \
               --layers $L --dim $C --heads $NH --seq $T --vocab $V --batch $B --steps $STEPS --warmup 2)
        tps=$(awk '/torch tokens\/s:/ {print $3}' <<<"$line")
        python3 -c "
f = $tps * $flops_per_token / 1e12; peak = $([ $mode = tf32 ] && echo $tf32 || echo $fp32)
print('%-26s %12.0f %10.1f %8s' % ('PyTorch $mode', $tps, f, ('%.1f%%' % (100 * f / peak)) if peak else '?'))"
    done
else
    echo "PyTorch with CUDA is not installed here: no PyTorch figure"
fi
echo "(peaks: $fp32 TFLOP/s fp32, $tf32 TFLOP/s TF32 dense, from the data sheet of $name)"
