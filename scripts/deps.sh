#!/usr/bin/env bash
# deps.sh: the packages the course needs, on Debian or Ubuntu, by what needs them.
#
#   scripts/deps.sh [TARGET]          install what TARGET needs and is missing (apt-get; through sudo when not root)
#   scripts/deps.sh --check [TARGET]  say what is missing and which target needs it; exit 1 if anything TARGET needs is
#   scripts/deps.sh --list [TARGET]   print the packages TARGET needs
#
# The targets, each needing what the one before it needs:
#   demo   make demo: a C compiler, Open MPI and OpenBLAS (the programs the demo runs)
#   build  make: the same and Check, the C unit-test framework (make builds the unit tests too)
#   test   make test (the default): the same and Python with NumPy and PyTorch (the independent model
#          oracle), and iproute2 (the grader's runs without a network, the two-node tests)
# `make demo` installs the first, `make test` the last; `make` checks the second before it compiles.
set -euo pipefail

# What each piece needs, as "target^test command^what^package", in the targets' order.
PIECES=(
    "demo^command -v cc >/dev/null && command -v make >/dev/null^a C compiler and make^build-essential"
    "demo^command -v pkg-config >/dev/null^pkg-config^pkg-config"
    "demo^command -v mpicc >/dev/null && mpicc --showme:compile >/dev/null 2>&1^Open MPI (mpicc)^libopenmpi-dev"
    "demo^command -v mpirun >/dev/null^Open MPI's launcher (mpirun)^openmpi-bin"
    "demo^pkg-config --exists openblas 2>/dev/null^OpenBLAS (cblas)^libopenblas-dev"
    "build^pkg-config --exists check 2>/dev/null^Check, the C unit-test framework^check"
    "test^[ -x /usr/bin/python3 ]^Python 3^python3"
    "test^/usr/bin/python3 -c 'import numpy' 2>/dev/null^NumPy for /usr/bin/python3^python3-numpy"
    "test^/usr/bin/python3 -c 'import torch' 2>/dev/null^PyTorch for /usr/bin/python3^python3-torch"
    "test^command -v ip >/dev/null || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]^ip, for the grader's runs without a network^iproute2"
)
TARGETS=(demo build test)

rank() { case "$1" in demo) echo 0 ;; build) echo 1 ;; test) echo 2 ;; *) echo -1 ;; esac; }

# The pieces TARGET needs: "target^what^package" of those missing (all: every one).
pieces() {
    local want=$1 all=${2:-} p target cond what pkg
    for p in "${PIECES[@]}"; do
        IFS='^' read -r target cond what pkg <<<"$p"
        [ "$(rank "$target")" -le "$(rank "$want")" ] || continue
        if [ -n "$all" ] || ! bash -c "$cond" >/dev/null 2>&1; then echo "$target^$what^$pkg"; fi
    done
}

# Which make targets need a piece of target t.
needed_by() {
    case "$1" in
    demo) echo "make demo, make and make test need it" ;;
    build) echo "make and make test need it" ;;
    test) echo "make test needs it" ;;
    esac
}

usage() {
    echo "usage: scripts/deps.sh [--check | --list] [demo | build | test]   (default: test, everything)" >&2
    exit 2
}

mode=install target=test
for a in "$@"; do
    case "$a" in
    --check) mode=check ;;
    --list) mode=list ;;
    --install) mode=install ;;
    demo | build | test) target=$a ;;
    *) usage ;;
    esac
done

case "$mode" in
list)
    pieces "$target" all | cut -d'^' -f3
    exit 0
    ;;
check)
    m=$(pieces "$target")
    [ -z "$m" ] && exit 0
    echo "missing for make$([ "$target" = build ] || echo " $target"):" >&2
    pkgs=()
    while IFS='^' read -r t what pkg; do
        echo "  - $what: package $pkg ($(needed_by "$t"))" >&2
        pkgs+=("$pkg")
    done <<<"$m"
    echo "install them with: scripts/deps.sh $target   (or: sudo apt-get install -y ${pkgs[*]})" >&2
    exit 1
    ;;
esac

m=$(pieces "$target")
if [ -z "$m" ]; then
    exit 0
fi
pkgs=()
while IFS='^' read -r t what pkg; do pkgs+=("$pkg"); done <<<"$m"
echo "installing what make$([ "$target" = build ] || echo " $target") needs: ${pkgs[*]}"
if ! command -v apt-get >/dev/null 2>&1; then
    echo "this is not a Debian or Ubuntu system (no apt-get); install the equivalents of: ${pkgs[*]}" >&2
    exit 1
fi
SUDO=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "not root and no sudo: run as root: apt-get install -y ${pkgs[*]}" >&2; exit 1; }
    SUDO=(sudo)
fi
export DEBIAN_FRONTEND=noninteractive
"${SUDO[@]}" apt-get update -q
"${SUDO[@]}" apt-get install -y -q --no-install-recommends "${pkgs[@]}"
m=$(pieces "$target")
if [ -n "$m" ]; then
    echo "still missing after the install:" >&2
    echo "$m" | cut -d'^' -f2,3 | tr '^' ' ' >&2
    exit 1
fi
echo "all that make$([ "$target" = build ] || echo " $target") needs is installed"
