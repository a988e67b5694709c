#!/usr/bin/env bash
# deps.sh: the packages the course needs, on Debian or Ubuntu.
#
#   scripts/deps.sh            install what is missing (apt-get; through sudo when not root)
#   scripts/deps.sh --check    say what is missing and which packages bring it; exit 1 if anything is
#   scripts/deps.sh --list     print the package list
#
# `make deps` runs the first form; `make`, `make demo` and `make test` run the
# check, and the last two install what is missing first.
set -euo pipefail

# Build and test: compiler, Open MPI, Check, OpenBLAS (cblas), pkg-config;
# Python with NumPy and PyTorch for the independent model oracle.
PACKAGES=(build-essential pkg-config openmpi-bin libopenmpi-dev check libopenblas-dev
          python3 python3-numpy python3-torch iproute2)

# What each piece of the build needs, as "test command|what|packages".
missing() {
    local out=()
    command -v cc >/dev/null 2>&1 && command -v make >/dev/null 2>&1 ||
        out+=("a C compiler and make|build-essential")
    command -v pkg-config >/dev/null 2>&1 || out+=("pkg-config|pkg-config")
    { command -v mpicc >/dev/null 2>&1 && mpicc --showme:compile >/dev/null 2>&1; } ||
        out+=("Open MPI (mpicc)|libopenmpi-dev")
    command -v mpirun >/dev/null 2>&1 || out+=("Open MPI's launcher (mpirun)|openmpi-bin")
    pkg-config --exists check 2>/dev/null || out+=("Check, the C unit-test framework|check")
    pkg-config --exists openblas 2>/dev/null || out+=("OpenBLAS (cblas)|libopenblas-dev")
    /usr/bin/python3 -c 'import numpy' 2>/dev/null || out+=("NumPy for /usr/bin/python3|python3-numpy")
    /usr/bin/python3 -c 'import torch' 2>/dev/null || out+=("PyTorch for /usr/bin/python3|python3-torch")
    command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ] ||
        out+=("ip, for the grader's runs without a network|iproute2")
    printf '%s\n' "${out[@]+"${out[@]}"}"
}

case "${1:-}" in
--list)
    printf '%s\n' "${PACKAGES[@]}"
    exit 0
    ;;
--check)
    m=$(missing)
    [ -z "$m" ] && exit 0
    echo "missing for the build and tests:" >&2
    pkgs=()
    while IFS='|' read -r what pkg; do
        echo "  - $what: package $pkg" >&2
        pkgs+=("$pkg")
    done <<<"$m"
    echo "install them with: make deps   (or: sudo apt-get install -y ${pkgs[*]})" >&2
    exit 1
    ;;
"" | --install) ;;
*)
    echo "usage: scripts/deps.sh [--check | --list]" >&2
    exit 2
    ;;
esac

m=$(missing)
if [ -z "$m" ]; then
    exit 0
fi
pkgs=()
while IFS='|' read -r what pkg; do pkgs+=("$pkg"); done <<<"$m"
echo "installing missing packages: ${pkgs[*]}"
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
m=$(missing)
if [ -n "$m" ]; then
    echo "still missing after the install:" >&2
    echo "$m" >&2
    exit 1
fi
echo "all dependencies are installed"
