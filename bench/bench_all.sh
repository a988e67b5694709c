#!/usr/bin/env bash
# bench_all.sh (make bench): the course's three speed figures in one table,
# with the machine they were measured on, printed and written to
# build/bench.md. Every figure is a ratio of two things measured in the same
# run on the same machine, which is what travels from machine to machine;
# the absolute figures beside them are this machine's alone. A benchmark:
# it prints, and never fails on a figure.
#   - build/ref against PyTorch (bench-ref): tokens/s, one thread each, and
#     the share of the one-thread sgemm ceiling; the same in bf16
#     (--precision bf16) against fp32 and against PyTorch in bf16;
#   - lab01's reference ring all-reduce against Open MPI's MPI_Allreduce at
#     2 ranks, from 64 KiB to 64 MiB, and its bus bandwidth at 64 MiB
#     against the ideal ring's (the ring's own reads, adds and writes
#     through shared memory, with no message: the limit no correct ring passes);
#   - lab02's best strategy against PyTorch DDP (gloo) at 2 and 4 ranks
#     (bench-lab02);
#   - how soon every README command answers, with the reference kept and not
#     (bench/first_line.py), and make test's last run by group with the
#     reference cache's hit rate (build/test-times.json, which tests/runner.py
#     writes).
set -uo pipefail
cd "$(dirname "$0")/.."
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
OUT=${BENCH_OUT:-build/bench.md}
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

cpu=$(lscpu | sed -n 's/^Model name:[[:space:]]*//p' | head -n 1)
if grep -q -w avx512f /proc/cpuinfo; then isa="AVX-512"; elif grep -q -w avx2 /proc/cpuinfo; then isa="AVX2"; else isa="SSE"; fi
built=$(make -s --no-print-directory print-opt 2>/dev/null)
cores=$(getconf _NPROCESSORS_ONLN)   # (nproc would obey OMP_NUM_THREADS=1)

echo "== bench-ref"
bench/bench_ref.sh | tee "$tmp/ref.txt"
echo "== lab01 --bench (2 ranks, 64 KiB to 64 MiB)"
mpirun --oversubscribe -np 2 build/lab01_solution --quiet --bench --min-kib 64 --max-mib 64 --iters 20 --warmup 3 \
    > "$tmp/lab01.txt" 2>&1
sed -n '/^all_reduce:/,/^$/p; /ideal ring/p; /ring all-reduce model/p' "$tmp/lab01.txt"
echo "== bench-lab02"
NPS="2 4" bench/bench_lab02.sh | tee "$tmp/lab02.txt"

echo "== how soon each README command answers (bench/first_line.py)"
/usr/bin/python3 bench/first_line.py | tee "$tmp/first.txt"
echo "== make test's last run (build/test-times.json)"
/usr/bin/python3 - build/test-times.json > "$tmp/tests.txt" << 'EOF'
import json, sys
try:
    t = json.load(open(sys.argv[1]))
except OSError:
    print("no build/test-times.json: run make test first, and make bench again")
    sys.exit(0)
print(f"| group | cases | wall | CPU |")
print(f"|---|---|---|---|")
for g, v in t["groups"].items():
    print(f"| {g} | {v['cases']} | {v['wall']:.0f} s | {v['cpu']:.0f} s |")
print(f"| all | {len(t['cases'])} | {t['wall']:.0f} s | {t['cpu']:.0f} s |")
rc = t.get("refcache", {})
n = rc.get("found", 0) + rc.get("trained", 0)
if n:
    print(f"\nthe reference cache in that run: {rc['found']} of {n} reference runs looked up were kept "
          f"({100 * rc['found'] / n:.0f}%), {rc['trained']} trained")
EOF
cat "$tmp/tests.txt"

# The figures, from the outputs.
ref_c=$(awk '/^C reference:/ {print $3}' "$tmp/ref.txt")
ref_t=$(awk '/^PyTorch:/ {print $2}' "$tmp/ref.txt")
ref_ratio=$(awk '/^C \/ PyTorch:/ {print $4}' "$tmp/ref.txt")
ref_ceiling=$(sed -n 's/^C reference:.*(\([0-9]*\)% of the ceiling).*/\1/p' "$tmp/ref.txt")
ref_outside=$(sed -n 's/.*outside sgemm: \([0-9]*\)%.*/\1/p' "$tmp/ref.txt")
ref_cb=$(awk '/^C reference bf16:/ {print $4}' "$tmp/ref.txt")
ref_tb=$(awk '/^PyTorch bf16:/ {print $3}' "$tmp/ref.txt")
ref_bf_fp=$(awk '/^C bf16 \/ C fp32:/ {print $NF}' "$tmp/ref.txt")
ref_bf_t=$(awk '/^C bf16 \/ PyTorch bf16:/ {print $NF}' "$tmp/ref.txt")
ref_isa=$(sed -n 's/^bf16 instructions: //p' "$tmp/ref.txt")
# all_reduce rows: size (B), count, | yours: time, iqr, algbw, busbw, #wrong | library: time, ...
busbw_pct=$(sed -n "s/^your ring's busbw at .* is \([0-9]*\)% of the ideal ring's.*/\1/p" "$tmp/lab01.txt")
read -r ar_small ar_big <<< "$(awk '
    /^all_reduce:/ {on = 1; next}
    on && /^$/ {on = 0}
    on && $1 ~ /^[0-9]+$/ {
        gsub(/\|/, " "); n = split($0, f, " ")
        bytes = f[1]; yours = f[3]; lib = f[8]
        r = lib / yours                  # > 1: the ring is faster
        if (bytes < 16 * 1048576) { if (small == "" || r < small) small = r }
        else { if (big == "" || r < big) big = r }
    }
    END { printf "%.2f %.2f\n", small, big }' "$tmp/lab01.txt")"
ddp2=$(awk '$1 == 2 && /PyTorch DDP \/ our best/ {print $NF}' "$tmp/lab02.txt")
ddp4=$(awk '$1 == 4 && /PyTorch DDP \/ our best/ {print $NF}' "$tmp/lab02.txt")

met() { awk -v x="${1:-0}" -v aim="$2" 'BEGIN {print (x != "" && x + 0 >= aim) ? "yes" : "no"}'; }
{
    echo "# make bench"
    echo
    echo "$cpu; $isa; $cores cores; built with \`$built\`; $(date -u +%Y-%m-%d)"
    echo
    echo "| figure | aim | measured | met |"
    echo "|---|---|---|---|"
    echo "| build/ref / PyTorch, tokens/s, one thread (${ref_c} against ${ref_t:-?}) | >= 1.5 | ${ref_ratio:-no PyTorch} | $(met "$ref_ratio" 1.5) |"
    echo "| build/ref, share of the one-thread sgemm ceiling | >= 80% | ${ref_ceiling}% (${ref_outside}% of the step outside sgemm) | $(met "$ref_ceiling" 80) |"
    echo "| build/ref --precision bf16 / fp32, tokens/s, one thread (${ref_cb:-?} against ${ref_c}) | - | ${ref_bf_fp:-?} | - |"
    echo "| build/ref bf16 / PyTorch bf16, tokens/s, one thread (${ref_cb:-?} against ${ref_tb:-?}) | - | ${ref_bf_t:-no PyTorch} | - |"
    echo "| lab01 ring all-reduce speed / MPI_Allreduce's, 2 ranks, 64 KiB to 8 MiB (the least) | >= 1.0 | $ar_small | $(met "$ar_small" 1.0) |"
    echo "| the same, 16 MiB and up (the least) | >= 1.5 | $ar_big | $(met "$ar_big" 1.5) |"
    echo "| lab01 ring busbw / the ideal ring's (the same all-reduce through shared memory, no message), 64 MiB | >= 50% | ${busbw_pct}% | $(met "$busbw_pct" 50) |"
    echo "| lab02 best strategy speed / PyTorch DDP's (gloo), 2 ranks | >= 1.5 | ${ddp2:-no PyTorch} | $(met "$ddp2" 1.5) |"
    echo "| the same, 4 ranks | >= 1.5 | ${ddp4:-no PyTorch} | $(met "$ddp4" 1.5) |"
    echo
    [ -n "$ref_isa" ] && { echo "bf16 instructions: $ref_isa"; echo; }
    echo "Ratios of two measurements in one run travel between machines; the tokens/s, the"
    echo "times and the bandwidths are this machine's alone."
    echo
    echo "How soon each README command answers (seconds; cold: the reference not kept yet, warm: kept):"
    echo
    echo '```'
    sed -n '/^seconds from the start/,$p' "$tmp/first.txt"
    echo '```'
    echo
    echo "make test's last run on this machine, by group:"
    echo
    cat "$tmp/tests.txt"
} > "$OUT"
echo
cat "$OUT"
echo "(written to $OUT)"
