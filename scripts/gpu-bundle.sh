#!/usr/bin/env bash
# gpu-bundle.sh: everything `make gpu-check` needs on a GPU machine that has
# CUDA, cuBLAS and NCCL (perhaps only inside PyTorch's wheel) but none of the
# course's libraries, in one folder to carry there:
#
#   scripts/gpu-bundle.sh [DIR]          (DIR: build/gpu-bundle)
#
#   DIR/debs/           the Debian packages of Open MPI's runtime (mpirun, its
#                       plugins and help files, PMIx, hwloc, libevent, libfabric,
#                       UCX, ...) and of OpenBLAS, fetched with apt-get download;
#                       scripts/gpu-check.sh unpacks them there with dpkg -x into a
#                       private prefix (DIR/prefix), nothing installed
#   DIR/build.tar.gz    the programs the check runs, built here with CUDA
#   DIR/MANIFEST        what is in it: packages, the glibc they need, the sources'
#                       hash (a bundle older than the tree is refused there)
#
# The programs are built here, not there. The GPU machine has nvcc but no
# Open MPI, OpenBLAS or Check headers, and build/grade runs `make` before it
# grades: a build there would need the -dev packages too and, configured by
# what that machine finds, would be another build than the one tested here.
# Carried, the binaries the check runs are these (gpu-check.sh has make treat
# them as up to date there). They are built on Debian 12 (glibc 2.36) and
# need GLIBC_2.34 at most; the packages' libraries the version MANIFEST
# says. A machine whose glibc is at least that runs them (glibc keeps old
# symbol versions); the pre-flight there compares the two.
#
# Which packages: the ones that hold the libraries the programs and Open
# MPI's own programs and plugins load (ldd, transitively), found with
# dpkg -S, less glibc and the C++ runtime (libc6, libgcc-s1, libstdc++6:
# the machine's own; a second glibc cannot be mixed in, and a machine with
# nvcc has both). Those of every base image (zlib, libudev, libuuid, ...:
# BASE_LIKE) are carried too, but used there only where the machine lacks
# them (gpu-check.sh links those into DIR/fallback).
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${1:-build/gpu-bundle}
MULTIARCH=x86_64-linux-gnu

# The programs gpu-check.sh runs, and what build/grade reads besides them
# (the solutions' objects for its symbol checks, the libraries they link).
# build/libplcuda.so is the CUDA backend the programs load when a rank uses
# the GPU (common/cuda_backend.c): ldd of it names the CUDA libraries.
PROGRAMS=(build/ref build/grade build/gpu_check build/dumptool build/tests/test_comm_gpu
          build/lab01_solution build/lab02_solution build/lab03_solution build/lab04_solution
          build/lab05_solution build/lab06_solution build/lab07_solution build/libplcuda.so)
# The packages whose own files are needed (mpirun, its help files and
# configuration, PMIx's plugins, OpenBLAS); the rest follow from ldd.
SEEDS=(openmpi-bin openmpi-common libopenmpi3 libpmix2 libopenblas0-pthread)
NEVER=" libc6 libgcc-s1 libstdc++6 "
# Libraries of every Debian or Ubuntu base image: carried, but used there
# only where the machine lacks them, so that its own (newer) copy is not
# shadowed by ours for the programs of that machine the check runs too.
BASE_LIKE=" zlib1g libudev1 libuuid1 libatomic1 libzstd1 liblzma5 libbz2-1.0 libssl3 libcap2 libselinux1 "

say() { echo "[gpu-bundle] $*"; }
die() { echo "[gpu-bundle] $*" >&2; exit 1; }

command -v apt-get > /dev/null && command -v dpkg > /dev/null ||
    die "this needs Debian's apt-get and dpkg (a Debian or Ubuntu machine): it fetches .deb packages"
for p in "${SEEDS[@]}"; do
    dpkg -s "$p" > /dev/null 2>&1 || die "package $p is not installed here: make deps (its libraries are what the programs are built against)"
done

# 1. The programs, with CUDA.
say "building: ${PROGRAMS[*]}"
make --no-print-directory -j2 CUDA=1 "${PROGRAMS[@]}" > /dev/null ||
    die "make CUDA=1 failed (nvcc and cuBLAS/NCCL are needed here to build the GPU path)"
ls build/obj/common/*.cu.o > /dev/null 2>&1 || die "build/ has no CUDA objects: the programs must be a CUDA build (make CUDA=1)"

# 2. The packages: the seeds, and every package that holds a library an ELF
#    file of theirs or of the programs loads.
is_elf() { [ -f "$1" ] && [ "$(head -c 4 "$1" 2>/dev/null | od -An -c | tr -d ' ')" = '177ELF' ]; }
owner() {   # the package holding library file $1 ("" when none: CUDA's, found there)
    local f=$1 r
    r=$(readlink -f "$f")
    for p in "$f" "$r" "${f#/usr}" "/usr$f" "${r#/usr}" "/usr$r"; do
        dpkg -S "$p" 2> /dev/null | head -n 1 | cut -d: -f1 && return
    done
    true
}
elfs=()
for p in "${SEEDS[@]}"; do
    while read -r f; do is_elf "$f" && elfs+=("$f"); done < <(dpkg -L "$p")
done
elfs+=("${PROGRAMS[@]}")
mapfile -t libs < <(for f in "${elfs[@]}"; do ldd "$f" 2> /dev/null; done | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u)
declare -A pkgs=()
for p in "${SEEDS[@]}"; do pkgs[$p]=1; done
from_machine=()
for l in "${libs[@]}"; do
    p=$(owner "$l")
    if [ -z "$p" ]; then
        from_machine+=("$(basename "$l")")   # no package: CUDA's own (cuBLAS, cudart, NCCL)
    elif [[ $NEVER == *" $p "* ]]; then
        from_machine+=("$(basename "$l")")
    else
        pkgs[$p]=1
    fi
done
primary=() fallback=()
for p in $(printf '%s\n' "${!pkgs[@]}" | sort); do
    if [[ $BASE_LIKE == *" $p "* ]]; then fallback+=("$p"); else primary+=("$p"); fi
done

rm -rf "$DIR"
mkdir -p "$DIR/debs"
say "fetching ${#primary[@]} packages, and ${#fallback[@]} the machine likely has (used only where it lacks them)"
fetch() { (cd "$DIR/debs" && apt-get -q -o APT::Sandbox::User=root download "$@" > /dev/null); }
if ! fetch "${primary[@]}" "${fallback[@]}" 2> "$DIR/apt.err"; then
    # No package lists yet (a fresh machine): read them once, then again.
    say "apt-get download failed ($(head -n 1 "$DIR/apt.err")); apt-get update, then again"
    apt-get -q update > /dev/null 2>&1 || die "apt-get update failed: no access to the Debian archive?"
    fetch "${primary[@]}" "${fallback[@]}" 2> "$DIR/apt.err" || die "apt-get download failed: $(cat "$DIR/apt.err")"
fi
rm -f "$DIR/apt.err"

# 3. Unpacked here into a scratch prefix: every library the programs and
#    Open MPI load must come from it or be the machine's own glibc/C++/CUDA.
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
for d in "$DIR"/debs/*.deb; do dpkg -x "$d" "$scratch"; done
P=$scratch/usr/lib/$MULTIARCH
export LD_LIBRARY_PATH=$P/openblas-pthread:$P:$scratch/lib/$MULTIARCH:$P/openmpi/lib
missing=$(for f in "${PROGRAMS[@]}" "$scratch"/usr/bin/orterun "$P"/openmpi/lib/openmpi3/*.so; do
    ldd "$f" 2> /dev/null | awk -v f="$f" '/not found/ {print $1 " (" f ")"}'
done | grep -v -E '^lib(cuda|cublas|cublasLt|cudart|nccl)\.so' | sort -u || true)
[ -z "$missing" ] || die "libraries the bundle lacks: $missing"
# The newest glibc symbol version any of it asks for (objdump fails on the
# files that are not ELF; only the versions it prints count).
glibc_needed=$( { find "$scratch" "${PROGRAMS[@]}" -type f \( -name '*.so*' -o -perm -u+x \) -print0 |
    xargs -0 objdump -T 2> /dev/null || true; } | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -n 1)

# 4. The programs, and what build/grade reads beside them.
mapfile -t objects < <(find build/obj -path 'build/obj/lab*' -name '*.o' | sort)
tar -czf "$DIR/build.tar.gz" "${PROGRAMS[@]}" build/libcommon.a build/libverdict.a build/.deps-ok "${objects[@]}"

# 5. What is in it.
{
    echo "made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(ldd --version | head -n 1 | awk '{print "glibc " $NF}'), $(nvcc --version 2> /dev/null | grep -o 'release [0-9.]*' || echo 'nvcc ?')"
    echo "sources $(scripts/gpu-check.sh --sources-hash)"
    echo "glibc_needed ${glibc_needed#GLIBC_}"
    echo "primary ${primary[*]}"
    echo "fallback ${fallback[*]}"
    echo "from_machine $(printf '%s\n' "${from_machine[@]}" | sort -u | tr '\n' ' ')"
    echo "programs ${PROGRAMS[*]}"
    for p in "${primary[@]}"; do for d in "$DIR"/debs/"${p}"_*.deb; do echo "deb primary $(basename "$d") $(stat -c %s "$d")"; done; done
    for p in "${fallback[@]}"; do for d in "$DIR"/debs/"${p}"_*.deb; do echo "deb fallback $(basename "$d") $(stat -c %s "$d")"; done; done
} > "$DIR/MANIFEST"

size=$(du -sb "$DIR" | cut -f 1)
say "wrote $DIR: $(ls "$DIR"/debs | wc -l) packages ($(du -sh "$DIR/debs" | cut -f 1)), the programs ($(du -sh "$DIR/build.tar.gz" | cut -f 1)), $((size / 1048576)) MiB in all (a device run carries at most 64 MiB with the tree)"
say "needs glibc ${glibc_needed#GLIBC_} or newer there; from the machine: $(printf '%s\n' "${from_machine[@]}" | sort -u | tr '\n' ' ')"
say "on the GPU machine, with $DIR carried: bash scripts/gpu-check.sh"
