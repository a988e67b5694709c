#!/usr/bin/env bash
# yardstick-matrix.sh: does correct code pass on every machine, and is every
# planted bug still caught? The grader's verdict on the reference solutions
# and the legal variants under each legitimate change of rounding, and on
# every planted bug, with each check's figure over its bound recorded, then
# the separation table (scripts/yardstick.py).
#
#   scripts/yardstick-matrix.sh [OUT]      (default build/yardstick; about an hour on 2 cores)
#   QUICK=1 scripts/yardstick-matrix.sh    the quick runs only (make check-labNN's)
#
# The configurations, each in a copy of this tree built for it (CUDA=0):
#   OPENBLAS_CORETYPE = the machine's own, Prescott (SSE3, no FMA), Haswell
#   (AVX2), SkylakeX (AVX-512) and Zen, where this CPU has the instructions:
#   OpenBLAS's dynamic build runs any of them on such a machine;
#   ARCH = x86-64 (no vector extensions past SSE2), x86-64-v3 (AVX2) and
#   native; ROUNDING=alt (libm's expf, split-K products: another device's
#   rounding, ops.h). The reference and the labs run under the same
#   configuration, as they would on that machine.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/yardstick}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
quick=${QUICK:+--quick}
labs=(ref lab02 lab03 lab04 lab05 lab06)   # lab01's checks are exact: no rounding in them
flags=$(grep -m1 '^flags' /proc/cpuinfo 2>/dev/null || true)
has() { grep -qw "$1" <<<"$flags"; }

# One tree a build configuration, copied from what git tracks (and what is
# changed but not committed), built once.
tree_for() {   # NAME MAKEVARS...
    local name=$1 dir="$OUT/tree-$1"
    shift
    if [ ! -x "$dir/build/grade" ]; then
        rm -rf "$dir" && mkdir -p "$dir"
        git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$dir" 2>/dev/null
        make -C "$dir" --no-print-directory -j2 CUDA=0 "$@" > "$OUT/build-$name.log" 2>&1 ||
            { echo "the $name build failed: $OUT/build-$name.log" >&2; return 1; }
    fi
    echo "$dir"
}

# grade_config NAME TREE [VAR=VALUE...]: the solutions and the legal variants,
# under the environment given; margins to OUT/NAME.tsv.
grade_config() {
    local name=$1 dir=$2
    shift 2
    local tsv="$OUT/$name.tsv"
    rm -f "$tsv"
    echo "== $name ($*)"
    local t0=$SECONDS
    env "$@" "$dir/build/grade" --solutions --lab "$(IFS=,; echo "${labs[*]}")" $quick --margins "$tsv" \
        > "$OUT/$name.log" 2>&1
    echo "   solutions: $(tail -n 1 "$OUT/$name.log")"
    for lab in "${labs[@]}"; do
        local legal=("$dir"/grader/mutants/"$lab"/legal_*.patch)
        [ -e "${legal[0]}" ] || continue
        local ldir="$OUT/legal-$name-$lab"
        rm -rf "$ldir" && mkdir -p "$ldir" && cp "${legal[@]}" "$ldir/"
        env "$@" "$dir/build/grade" --lab "$lab" --mutants "$ldir" $quick --margins "$tsv" \
            > "$OUT/$name-legal-$lab.log" 2>&1
        echo "   legal variants of $lab: $(tail -n 1 "$OUT/$name-legal-$lab.log")"
    done
    echo "   ($((SECONDS - t0)) s)"
}

native=$(tree_for native) || exit 1
grade_config default "$native"
for ct in Prescott Haswell SkylakeX Zen; do
    case $ct in
    Haswell | Zen) has avx2 && has fma || { echo "== $ct: skipped (this CPU has no AVX2/FMA)"; continue; } ;;
    SkylakeX) has avx512f || { echo "== $ct: skipped (this CPU has no AVX-512)"; continue; } ;;
    esac
    grade_config "coretype-$ct" "$native" OPENBLAS_CORETYPE=$ct
done
for arch in x86-64 x86-64-v3; do
    [ "$arch" = x86-64-v3 ] && ! has avx2 && { echo "== ARCH=$arch: skipped (no AVX2)"; continue; }
    t=$(tree_for "arch-$arch" ARCH=$arch) && grade_config "arch-$arch" "$t" ARCH=$arch
done
t=$(tree_for rounding-alt ROUNDING=alt) && grade_config rounding-alt "$t" ROUNDING=alt

# The planted bugs, once, on the machine's own configuration.
rm -f "$OUT/bugs.tsv"
for lab in lab02 lab03 lab04 lab05 lab06; do
    "$native/build/grade" --lab "$lab" --mutants "$native/grader/mutants/$lab" --quick --watchdog 5 --limit 120 \
        --margins "$OUT/bugs.tsv" > "$OUT/bugs-$lab.log" 2>&1
    echo "== planted bugs of $lab: $(tail -n 1 "$OUT/bugs-$lab.log")"
done

/usr/bin/python3 scripts/yardstick.py "$OUT"/*.tsv | tee "$OUT/separation.md"
