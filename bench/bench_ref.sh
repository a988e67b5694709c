#!/usr/bin/env bash
# bench_ref.sh (make bench-ref): tokens/s of the C reference trainer against
# PyTorch on the same model, step and thread count, and the ceiling both
# share: 6 FLOPs per matrix parameter per token plus attention, at this
# machine's one-thread sgemm rate. A benchmark, not a test: it prints figures.
# The same for --precision bf16 (build/ref's and PyTorch's, beside fp32's),
# and whether either side's bf16 products use the CPU's bf16 instructions.
set -euo pipefail
cd "$(dirname "$0")/.."
MODEL=(--layers 4 --dim 128 --heads 4 --seq 64 --batch 8 --vocab 256)
STEPS=${STEPS:-40}
L=4 C=128 T=64 V=256

# One thread everywhere: one rank per core is how the labs run.
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1

REPS=${REPS:-5}
have_torch=0
/usr/bin/python3 -c 'import torch' 2>/dev/null && have_torch=1

# The sgemm rate, the C trainer and PyTorch (each in fp32 and bf16) run REPS
# times each, in turn,
# and each keeps its best: on a shared machine (a cloud VM's speed wanders by
# 10% from one minute to the next) the best run is the one least disturbed,
# and taking all three in the same minutes keeps their ratios honest.
larger() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(b > a)}'; }   # is $2 > $1?
# build/ref's tokens/s from its "mean over steps" line.
ref_tps() {
    build/ref "${MODEL[@]}" --steps "$STEPS" --device cpu "$@" | grep '^mean over steps' |
        awk '{for (i = 1; i <= NF; i++) if ($i == "tokens/s") {sub(/k$/, "", $(i-1)); print $(i-1) * 1000}}'
}
# PyTorch's bf16 on a CPU without bf16 instructions can be a hundred times
# slower than its fp32 (minutes a run): its runs are sized to the CPU, from
# a probe of two steps, to take about ten seconds each, and fewer of them.
TB_STEPS=$STEPS TB_REPS=$REPS
if [ $have_torch = 1 ]; then
    probe=$(/usr/bin/python3 bench/torch_ref.py "${MODEL[@]}" --steps 2 --warmup 1 --precision bf16 | awk '/torch tokens\/s:/ {print $3}')
    # tokens a step: 8 x 64 = 512
    TB_STEPS=$(awk -v t="${probe:-0}" -v s="$STEPS" 'BEGIN {n = int(10 * t / 512); if (n < 3) n = 3; if (n > s) n = s; print n}')
    [ "$TB_STEPS" -lt "$STEPS" ] && TB_REPS=$(( REPS < 2 ? REPS : 2 ))
    echo "PyTorch bf16 probe: ${probe:-?} tokens/s: its runs take $TB_STEPS steps (and warm up 1), best of $TB_REPS"
fi
rate=0 c_tps=0 t_tps=0 t_line="" cb_tps=0 tb_tps=0 tb_line=""
for rep in $(seq "$REPS"); do
    r=$(build/sgemm_rate "${MODEL[@]}" | awk '/over one training step/ {print $(NF-3)}')
    if larger "$rate" "$r"; then rate=$r; fi
    tps=$(ref_tps)
    if larger "$c_tps" "$tps"; then c_tps=$tps; fi
    ctps=$tps
    tps=$(ref_tps --precision bf16)
    if [ -z "$tps" ]; then echo "build/ref --precision bf16 gave no tokens/s line" >&2; tps=0; fi
    if larger "$cb_tps" "$tps"; then cb_tps=$tps; fi
    cbtps=$tps ttps=- tbtps=-
    if [ $have_torch = 1 ]; then
        line=$(/usr/bin/python3 bench/torch_ref.py "${MODEL[@]}" --steps "$STEPS" --warmup 5)
        tps=$(echo "$line" | awk '/torch tokens\/s:/ {print $3}')
        if larger "$t_tps" "$tps"; then t_tps=$tps t_line=$line; fi
        ttps=$tps
        if [ "$rep" -le "$TB_REPS" ]; then
            line=$(/usr/bin/python3 bench/torch_ref.py "${MODEL[@]}" --steps "$TB_STEPS" --warmup 1 --precision bf16)
            tps=$(echo "$line" | awk '/torch tokens\/s:/ {print $3}')
            if larger "$tb_tps" "$tps"; then tb_tps=$tps tb_line=$line; fi
            tbtps=$tps
        fi
    fi
    # Each run's figures as they come (the best of them follow).
    printf 'run %d of %d: sgemm %s GFLOP/s; tokens/s: C %s, C bf16 %s, PyTorch %s, PyTorch bf16 %s\n' "$rep" "$REPS" \
        "$r" "$ctps" "$cbtps" "$ttps" "$tbtps"
done

# FLOPs per token: 6 per parameter of the matrix products (q, k, v, o, w1,
# w2 per block and the LM head; embeddings are lookups, not products), plus
# attention's two products per layer, forward and backward, over the causal
# half of the T x T scores: 6 L T C.
flops=$(awk -v L=$L -v C=$C -v T=$T -v V=$V 'BEGIN {print 6 * (L * 12 * C * C + C * V) + 6 * L * T * C}')
ceiling=$(awk -v r="$rate" -v f="$flops" 'BEGIN {print r * 1e9 / f}')

printf 'model: GPT %dL %dC 4H, T %d, B 8, V %d, one thread; best of %d runs of %d steps each\n' $L $C $T $V "$REPS" "$STEPS"
isa=$(grep -q -w avx512f /proc/cpuinfo && echo AVX-512 || { grep -q -w avx2 /proc/cpuinfo && echo AVX2 || echo SSE; })
printf 'CPU: %s (%s); the C code built with: %s\n' "$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)" "$isa" \
    "$(make -s --no-print-directory print-opt 2>/dev/null)"
[ -n "${OPENBLAS_CORETYPE:-}" ] && echo "OpenBLAS kernels forced by OPENBLAS_CORETYPE=$OPENBLAS_CORETYPE (for both sides)"
printf 'sgemm rate (1 thread, these shapes): %.1f GFLOP/s; %.2f MFLOP per token; ceiling %.1fk tokens/s\n' \
    "$rate" "$(awk -v f="$flops" 'BEGIN {print f / 1e6}')" "$(awk -v c="$ceiling" 'BEGIN {print c / 1e3}')"
printf 'C reference:  %7.1fk tokens/s  (%.0f%% of the ceiling)\n' \
    "$(awk -v t="$c_tps" 'BEGIN {print t / 1e3}')" "$(awk -v t="$c_tps" -v c="$ceiling" 'BEGIN {print 100 * t / c}')"
# The step's time not explained by its matrix products at the measured
# sgemm rate: GELU, LayerNorm, softmax, the optimizer, the copies.
printf 'share of the C step outside sgemm: %.0f%%\n' "$(awk -v t="$c_tps" -v c="$ceiling" 'BEGIN {print 100 * (1 - t / c)}')"

if [ $have_torch = 1 ]; then
    printf 'PyTorch:      %7.1fk tokens/s  (%.0f%% of the ceiling)   [%s]\n' \
        "$(awk -v t="$t_tps" 'BEGIN {print t / 1e3}')" "$(awk -v t="$t_tps" -v c="$ceiling" 'BEGIN {print 100 * t / c}')" "$t_line"
    printf 'C / PyTorch:  %.2f\n' "$(awk -v a="$c_tps" -v b="$t_tps" 'BEGIN {print a / b}')"
else
    echo "PyTorch: not installed for /usr/bin/python3 (python3-torch); no comparison"
fi

# bf16 (--precision bf16; docs/model.md, "Mixed precision"). build/ref's
# bf16 products are sgemm's on fp32 copies of their inputs, so the fp32
# ceiling above is theirs too.
printf 'C reference bf16: %7.1fk tokens/s  (%.0f%% of the same ceiling)\n' \
    "$(awk -v t="$cb_tps" 'BEGIN {print t / 1e3}')" "$(awk -v t="$cb_tps" -v c="$ceiling" 'BEGIN {print 100 * t / c}')"
printf 'C bf16 / C fp32: %.2f\n' "$(awk -v a="$cb_tps" -v b="$c_tps" 'BEGIN {print a / b}')"
if [ $have_torch = 1 ]; then
    printf 'PyTorch bf16: %7.1fk tokens/s  (%.0f%% of the ceiling)   [%s]\n' \
        "$(awk -v t="$tb_tps" 'BEGIN {print t / 1e3}')" "$(awk -v t="$tb_tps" -v c="$ceiling" 'BEGIN {print 100 * t / c}')" "$tb_line"
    printf 'PyTorch bf16 / PyTorch fp32: %.2f\n' "$(awk -v a="$tb_tps" -v b="$t_tps" 'BEGIN {print a / b}')"
    printf 'C bf16 / PyTorch bf16: %.2f\n' "$(awk -v a="$cb_tps" -v b="$tb_tps" 'BEGIN {print a / b}')"
fi

# Whether the bf16 products use the CPU's bf16 instructions (AVX512_BF16's
# dot products, AMX's bf16 tiles). build/ref's do not whatever the CPU: it
# widens to fp32 and calls cblas_sgemm (common/ops.c). PyTorch 1.13 sends CPU
# bf16 products to oneDNN, whose verbose mode names the kernel that ran; the
# probe times one of the model's products in both precisions.
cpu_bf16=""
for f in avx512_bf16 amx_bf16; do grep -q -w $f /proc/cpuinfo && cpu_bf16="$cpu_bf16${cpu_bf16:+ and }$f"; done
blas=$(ldd build/ref | awk '/libopenblas/ {print $3; exit}')
if [ -n "$blas" ] && nm -D --defined-only "$(readlink -f "$blas")" 2> /dev/null | grep -q -w cblas_sbgemm; then
    sb="this OpenBLAS exports cblas_sbgemm, unused"
else
    sb="this OpenBLAS exports no cblas_sbgemm"
fi
c_says="build/ref's bf16 products do not use them (widened to fp32 for cblas_sgemm; $sb)"
t_says="PyTorch: not installed"
if [ $have_torch = 1 ]; then
    probe=$(ONEDNN_VERBOSE=1 DNNL_VERBOSE=1 /usr/bin/python3 bench/torch_ref.py "${MODEL[@]}" --mm-rate 2>&1)
    kern=$(awk -F, '$2 == "exec" && $3 == "cpu" && $4 == "matmul" {print $5}' <<<"$probe" | sort -u | paste -sd/ -)
    mm=$(sed -n 's/^torch matmul \([0-9x@ ]*\), .*: fp32 \([0-9.]*\) GFLOP\/s, bf16 \([0-9.]*\) GFLOP\/s, bf16 \/ fp32 \([0-9.]*\);.*/\1: bf16 \3 against fp32 \2 GFLOP\/s, x\4/p' <<<"$probe")
    if [ -n "$kern" ]; then
        case "$kern" in
        *amx*) used="so they use amx_bf16" ;;
        *bf16*) used="so they use avx512_bf16" ;;
        *) used="a kernel without bf16 instructions" ;;
        esac
        t_says="PyTorch's go through oneDNN, kernel $kern ($used; $mm)"
    else
        t_says="PyTorch's bf16 products did not go through oneDNN (mkldnn: $(sed -n 's/.*mkldnn available: //p' <<<"$probe"); $mm)"
    fi
fi
printf 'bf16 instructions: this CPU has %s; %s; %s\n' "${cpu_bf16:-neither avx512_bf16 nor amx_bf16}" "$c_says" "$t_says"
