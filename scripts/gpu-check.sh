#!/usr/bin/env bash
# gpu-check.sh: the GPU path checked in one budgeted run (make gpu-check).
#
#   bash scripts/gpu-check.sh [--dry-run] [--deadline SECONDS]
#
# A pre-flight first (the GPU, nvcc, compute-sanitizer, the MPI, BLAS and
# NCCL the programs will load, whether the grader's unprivileged runs can
# reach the tree, ulimits, /dev/shm); then every GPU op against the CPU's
# (each group of ops in a process of its own), build/ref trained on the GPU
# against the CPU's reference (held to the rounding both devices measure),
# comm.h on GPU buffers, NCCL named, compute-sanitizer (memcheck, racecheck)
# on programs whose exit code means the run, and every lab's solution graded
# on the GPU. One row per check, in one table.
#
# Budgeted: one deadline for the whole run (GPU_CHECK_DEADLINE or --deadline,
# 480 s); each step runs under `timeout` for the smaller of its own limit and
# the time left, the grader with short --limit, --watchdog and --budget; a
# step the deadline cuts says so, the steps after it are "not run", and the
# table is always written.
#
# Everything comes back in $OUT (build/gpu-check when unset): gpu-check.txt,
# the table, written row by row as it grows (each failed row with its first
# FAIL lines), and gpu-check-logs.tar.gz, every step's log.
#
# Self-contained: on a machine with CUDA but not the course's libraries,
# carry build/gpu-bundle (made here by scripts/gpu-bundle.sh: Open MPI's and
# OpenBLAS's Debian packages, and the programs built here). This script
# unpacks the packages with dpkg -x into build/gpu-prefix, points
# PATH, LD_LIBRARY_PATH and Open MPI's relocation variables at it, finds
# NCCL and cuBLAS where the machine has them (CUDA's lib64, or PyTorch's
# wheel), and unpacks the programs into build/ when the tree has none.
#
# --dry-run: the same script without a GPU (make test runs it): the
# pre-flight, the bundle made if missing and unpacked, the bundle's Open MPI
# run with the system's hidden (unshare --mount), the training check's
# machinery on the CPU, the budget and the table; the GPU rows are reported
# as skipped, not failed.
#
# Exit 0 when every check passed, 1 when one failed, was cut short or was
# not run, 77 when no GPU is visible (and nothing failed). A dry run exits 0
# when nothing that can run without a GPU failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
TREE=$PWD
MULTIARCH=x86_64-linux-gnu

# The tree's sources, hashed the same way where the bundle is made and where
# it is used: a bundle made from other sources is not trusted.
sources_hash() {
    find Makefile common grader tools bench lab[0-9][0-9]_* -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name Makefile \) \
        ! -path 'grader/mutants/*' -print0 2> /dev/null | LC_ALL=C sort -z | xargs -0 sha256sum | sha256sum | cut -c 1-16
}

DRY=0
DEADLINE=${GPU_CHECK_DEADLINE:-480}
while [ $# -gt 0 ]; do
    case "$1" in
    --dry-run) DRY=1 ;;
    --deadline) DEADLINE=${2:?--deadline needs seconds}; shift ;;
    --sources-hash) sources_hash; exit 0 ;;
    *) echo "usage: scripts/gpu-check.sh [--dry-run] [--deadline SECONDS]" >&2; exit 2 ;;
    esac
    shift
done
case "$DEADLINE" in '' | *[!0-9]*) echo "gpu-check: --deadline $DEADLINE is not a whole number of seconds" >&2; exit 2 ;; esac

T0=$SECONDS
# Kept back from the deadline for the table and the archive.
RESERVE=$((DEADLINE / 10 < 15 ? DEADLINE / 10 : 15))
left() { echo $((DEADLINE - RESERVE - (SECONDS - T0))); }

OUT=${OUT:-build/gpu-check}
mkdir -p "$OUT" && OUT=$(cd "$OUT" && pwd)
WORK=${GPU_CHECK_WORK:-build/gpu-check/run}
rm -rf "$WORK" && mkdir -p "$WORK/logs" && WORK=$(cd "$WORK" && pwd)
LOG=$WORK/logs
BUNDLE=${GPU_BUNDLE:-build/gpu-bundle}
TABLE=$OUT/gpu-check.txt
ARCHIVE=$OUT/gpu-check-logs.tar.gz
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# ---- the table ---------------------------------------------------------------

n_ok=0 n_fail=0 n_skip=0 n_cut=0 n_notrun=0
: > "$TABLE"
line() { echo "$*"; echo "$*" >> "$TABLE"; }
# row NAME SECONDS RESULT TEXT [LOGFILE]: one row; a failed one with the
# first lines of its log that say FAIL or error.
row() {
    local name=$1 secs=$2 result=$3 text=$4 file=${5:-}
    line "$(printf '%-52s %5s  %-7s %s' "$name" "${secs:+${secs}s}" "$result" "$text")"
    case "$result" in
    ok) n_ok=$((n_ok + 1)) ;;
    SKIP) n_skip=$((n_skip + 1)) ;;
    CUT) n_cut=$((n_cut + 1)) ;;
    "NOT RUN") n_notrun=$((n_notrun + 1)) ;;
    *) n_fail=$((n_fail + 1)) ;;
    esac
    if [ -n "$file" ] && [ "$result" != ok ] && [ "$result" != SKIP ] && [ -s "$file" ]; then
        grep -E 'FAIL|error at|[Ee]rror:|ERROR|failed|not found|Invalid|Race reported|Hazard' "$file" | grep -v '^\s*$' |
            head -n 4 | cut -c 1-160 | sed 's/^/        | /' | while IFS= read -r l; do line "$l"; done
        line "        | (all of it: logs/${file##*/} in $(basename "$ARCHIVE"))"
    fi
}
last_line() { grep -v '^\s*$' "$1" 2> /dev/null | tail -n 1 | cut -c 1-110; }
slug() { echo "$1" | tr -cs 'A-Za-z0-9.-' '_' | sed 's/^_//; s/_$//' | cut -c 1-80; }

finish() {
    trap - EXIT TERM INT HUP
    line ""
    line "$(printf '%d ok, %d failed, %d cut short, %d not run, %d skipped; %d s of the %d s deadline' \
        $n_ok $n_fail $n_cut $n_notrun $n_skip $((SECONDS - T0)) "$DEADLINE")"
    cp "$TABLE" "$LOG/gpu-check.txt" 2> /dev/null
    # At most 16 MiB comes back from a lent machine: a log past 2 MB keeps its end.
    find "$LOG" -type f -size +2M -exec sh -c 'tail -c 2000000 "$1" > "$1.t" && mv "$1.t" "$1"' _ {} \; 2> /dev/null
    tar -czf "$ARCHIVE" -C "$WORK" logs 2> /dev/null && line "the logs: $ARCHIVE; the table: $TABLE"
    local rc=0
    [ $((n_fail + n_cut + n_notrun)) -gt 0 ] && rc=1
    [ $rc -eq 0 ] && [ $DRY -eq 0 ] && [ "$HAVE_GPU" != 1 ] && rc=77
    exit $rc
}
HAVE_GPU=0
trap finish EXIT
trap 'line "(stopped by a signal)"; finish' TERM INT HUP

line "gpu-check · $(date -u +%Y-%m-%dT%H:%M:%SZ) · $(hostname) · deadline $DEADLINE s$([ $DRY -eq 1 ] && echo ' · dry run (no GPU rows)')"
line "$(printf '%-52s %6s  %-7s %s' check time result 'what it said')"

# ---- what each kind of step needs ----------------------------------------------

declare -A HAVE=() WHY=()
# need TAG OK WHY: record whether TAG is there, and why not.
need() { HAVE[$1]=$2; WHY[$1]=$3; }
missing_for() {   # the first missing need of a comma-separated list, as a sentence
    local t
    for t in ${1//,/ }; do
        [ "$t" = - ] && continue
        [ "${HAVE[$t]:-0}" = 1 ] || { echo "${WHY[$t]:-no $t}"; return; }
    done
}

# step NAME NEEDS LIMIT JUDGE COMMAND...: one row. NEEDS: the tags it needs
# (comma-separated, or -). JUDGE: plain (exit 0 passes; 77 is a skip),
# sanitizer (0 passes, 97 is compute-sanitizer's finding, anything else the
# program's own failure), refused (exit 2, the log saying "one GPU"). The
# word @BUDGET@ in COMMAND becomes the seconds it may take, less 15 (for the
# grader's --budget, so that it reports before it is stopped).
step() {
    local name=$1 needs=$2 own=$3 judge=$4
    shift 4
    local file why rem limit cut=0 t0 rc secs a args=()
    file=$LOG/$(slug "$name").log
    why=$(missing_for "$needs")
    if [ -n "$why" ]; then row "$name" "" SKIP "$why"; return; fi
    rem=$(left)
    if [ "$rem" -le 0 ]; then
        row "$name" "" "NOT RUN" "cut short at the deadline ($DEADLINE s): not started"
        return
    fi
    limit=$own
    [ "$rem" -lt "$own" ] && limit=$rem cut=1
    for a in "$@"; do args+=("${a//@BUDGET@/$((limit > 30 ? limit - 15 : 15))}"); done
    # (A dry run holds the step named GPU_CHECK_HOLD past any deadline: the
    # test of the deadline cuts a step with others after it whatever the
    # machine's speed, tests/scripts/gpu-check-dry-run.sh.)
    [ $DRY -eq 1 ] && [ "$name" = "${GPU_CHECK_HOLD:-}" ] && args=(sleep 100000)
    t0=$SECONDS
    timeout --kill-after=5 "$limit" "${args[@]}" > "$file" 2>&1 < /dev/null
    rc=$?
    secs=$((SECONDS - t0))
    if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
        if [ $cut -eq 1 ]; then
            row "$name" "$secs" CUT "cut short at the deadline after $secs s (its own limit: $own s); last: $(last_line "$file")" "$file"
        else
            row "$name" "$secs" FAIL "ran past its limit of $own s; last: $(last_line "$file")" "$file"
        fi
        return
    fi
    case "$judge" in
    sanitizer)
        if [ $rc -eq 0 ]; then row "$name" "$secs" ok "$(last_line "$file")"
        elif [ $rc -eq 97 ]; then row "$name" "$secs" FAIL "compute-sanitizer found errors (exit 97): $(grep -m 1 -E '^========= [A-Z]' "$file" | cut -c 1-90)" "$file"
        else row "$name" "$secs" FAIL "the program failed under the sanitizer (exit $rc), not a sanitizer finding: $(last_line "$file")" "$file"
        fi ;;
    refused)
        if [ $rc -eq 2 ] && grep -q -i 'one GPU' "$file"; then row "$name" "$secs" ok "refused (exit 2): $(grep -m 1 -i 'one GPU' "$file" | cut -c 1-90)"
        else row "$name" "$secs" FAIL "exit $rc (2 and 'one GPU' wanted): $(last_line "$file")" "$file"
        fi ;;
    *)
        if [ $rc -eq 0 ]; then row "$name" "$secs" ok "$(last_line "$file")"
        elif [ $rc -eq 77 ]; then row "$name" "$secs" SKIP "the program skipped: $(last_line "$file")"
        else row "$name" "$secs" FAIL "exit $rc: $(last_line "$file")" "$file"
        fi ;;
    esac
}

# ---- the grader's runs, as another user, must reach the tree ---------------------
# As root, build/grade runs each lab program as an unprivileged user (its own
# uid, like 65534 an account of nobody's): every directory above the tree
# must let others pass, or every graded run fails at its start. Where one
# does not (a tree under /root), the tree is copied to /var/tmp and the
# check runs from there.
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }
reaches_tree() { as_nobody test -r "$TREE/Makefile" -a -x "$TREE/scripts" 2> /dev/null; }
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null && ! reaches_tree && [ -z "${GPU_CHECK_MOVED_FROM:-}" ]; then
    dst=$(mktemp -d /var/tmp/gpu-check-tree.XXXXXX) && chmod 755 "$dst" &&
        tar --exclude=./.git --exclude=./build/gpu-check --exclude=./build/gpu-prefix --exclude=./build/refcache -cf - . | tar -xf - -C "$dst" || { echo "gpu-check: cannot copy the tree to /var/tmp" >&2; exit 1; }
    line "(uid 65534 cannot reach $TREE: copied to $dst, and run from there)"
    trap - EXIT
    again=(--deadline $((DEADLINE - (SECONDS - T0))))
    [ $DRY -eq 1 ] && again+=(--dry-run)
    GPU_CHECK_MOVED_FROM=$TREE OUT=$OUT GPU_CHECK_WORK=$dst/build/gpu-check/run exec bash "$dst/scripts/gpu-check.sh" "${again[@]}"
fi
[ -n "${GPU_CHECK_MOVED_FROM:-}" ] && line "(copied from $GPU_CHECK_MOVED_FROM: uid 65534 could not reach it)"

# ---- the bundle: Open MPI, OpenBLAS and the programs, carried ---------------------

manifest() { awk -v k="$1" '$1 == k {sub("^" k " ", ""); print; exit}' "$BUNDLE/MANIFEST" 2> /dev/null; }
HERE_HASH=$(sources_hash)
CARRIED=0 BUNDLE_MPI=
if [ $DRY -eq 1 ] && { [ ! -f "$BUNDLE/MANIFEST" ] || [ "$(manifest sources)" != "$HERE_HASH" ]; }; then
    # A dry run makes the bundle it checks (the same as for a device run),
    # where it can: the programs in it are a CUDA build.
    if command -v nvcc > /dev/null || [ -x /usr/local/cuda/bin/nvcc ]; then
        step "bundle: made here (scripts/gpu-bundle.sh)" - 240 plain scripts/gpu-bundle.sh "$BUNDLE"
    else
        row "bundle: made here (scripts/gpu-bundle.sh)" "" SKIP "no nvcc here: a bundle carries a CUDA build"
    fi
fi
if [ -f "$BUNDLE/MANIFEST" ]; then
    BUNDLE=$(cd "$BUNDLE" && pwd)
    t0=$SECONDS
    file=$LOG/bundle-unpack.log
    # Unpacked beside the bundle, not in it (the bundle is what travels),
    # inside the tree (the grader's runs reach it there).
    U=${GPU_CHECK_PREFIX:-build/gpu-prefix}
    rm -rf "$U" "${BUNDLE:?}"/prefix "${BUNDLE:?}"/prefix-base "${BUNDLE:?}"/fallback "${BUNDLE:?}"/bin
    mkdir -p "$U" && U=$(cd "$U" && pwd)
    P=$U/prefix
    B=$U/prefix-base
    mkdir -p "$P" "$B" "$U/fallback" "$U/bin"
    unpack_ok=1
    # dpkg -x where dpkg is (any Debian or Ubuntu), else ar and tar.
    undeb() {
        if command -v dpkg-deb > /dev/null; then dpkg-deb -x "$1" "$2"
        else (cd "$2" && ar p "$1" "$(ar t "$1" | grep '^data\.tar')" | tar -x --auto-compress -f - 2> /dev/null ||
              ar p "$1" "$(ar t "$1" | grep '^data\.tar')" | tar -xJf -); fi
    }
    while read -r kind deb _; do
        [ "$kind" = primary ] && dst=$P || dst=$B
        undeb "$BUNDLE/debs/$deb" "$dst" >> "$file" 2>&1 || { unpack_ok=0; echo "cannot unpack $deb" >> "$file"; }
    done < <(awk '$1 == "deb" {print $2, $3}' "$BUNDLE/MANIFEST")
    # The base image's libraries: ours only where the machine lacks them (by
    # soname: the name of the link a package ships, libz.so.1).
    used_base=()
    cache=$(ldconfig -p 2> /dev/null)
    while read -r so; do
        name=${so##*/}
        grep -q "^\s*$name " <<< "$cache" && continue
        ln -sf "$so" "$U/fallback/$name" && used_base+=("$name")
    done < <(find "$B" -regextype posix-extended -regex '.*/lib[^/]*\.so\.[0-9]+' 2> /dev/null)
    PU=$P/usr
    LIBS=$PU/lib/$MULTIARCH/openblas-pthread:$PU/lib/$MULTIARCH:$P/lib/$MULTIARCH:$PU/lib/$MULTIARCH/openmpi/lib:$U/fallback
    # Open MPI relocated (OPAL_PREFIX and its directories, its plugins' path
    # named too), PMIx relocated, all by mpirun, a script: the grader's runs
    # keep only PATH and LD_LIBRARY_PATH of the environment.
    cat > "$U/bin/mpirun" << EOF
#!/bin/sh
# mpirun of the Open MPI unpacked from build/gpu-bundle into build/gpu-prefix (written by
# scripts/gpu-check.sh): its relocation variables set here, since the
# grader's runs keep only PATH and LD_LIBRARY_PATH of the environment.
export OPAL_PREFIX='$PU' OPAL_SYSCONFDIR='$P/etc/openmpi'
# PMIx: Debian's configuration names its plugins' folder absolutely, so
# that folder and the help files are named here too.
export PMIX_PREFIX='$PU/lib/$MULTIARCH/pmix2' PMIX_PKGDATADIR='$PU/lib/$MULTIARCH/pmix2/share/pmix'
export PMIX_MCA_mca_base_component_path='$PU/lib/$MULTIARCH/pmix2/lib/pmix'
export OMPI_MCA_mca_base_component_path='$PU/lib/$MULTIARCH/openmpi/lib/openmpi3'
case ":\${LD_LIBRARY_PATH:-}:" in *':$PU/lib/$MULTIARCH:'*) ;; *) export LD_LIBRARY_PATH='$LIBS'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH} ;; esac
# Ranks copy through each other's memory (CMA) unless Yama forbids it.
if [ "\$(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 0)" != 0 ]; then
    export OMPI_MCA_btl_vader_single_copy_mechanism=\${OMPI_MCA_btl_vader_single_copy_mechanism:-none}
fi
exec '$PU/bin/orterun' "\$@"
EOF
    chmod 755 "$U/bin/mpirun" && ln -sf mpirun "$U/bin/mpiexec"
    # Here too: a program started without mpirun (build/ref, the grader's
    # reference runs) starts Open MPI's runtime as a singleton, from these.
    BUNDLE_MPI=$PU
    RELOCATION=(OPAL_PREFIX OPAL_SYSCONFDIR OMPI_MCA_mca_base_component_path PMIX_PREFIX PMIX_PKGDATADIR
                PMIX_MCA_mca_base_component_path)
    export OPAL_PREFIX=$PU OPAL_SYSCONFDIR=$P/etc/openmpi
    export OMPI_MCA_mca_base_component_path=$PU/lib/$MULTIARCH/openmpi/lib/openmpi3
    export PMIX_PREFIX=$PU/lib/$MULTIARCH/pmix2 PMIX_PKGDATADIR=$PU/lib/$MULTIARCH/pmix2/share/pmix
    export PMIX_MCA_mca_base_component_path=$PU/lib/$MULTIARCH/pmix2/lib/pmix
    export LD_LIBRARY_PATH=$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    export PATH=$U/bin:$PU/bin:$PATH

    # The programs: the tree's own build/ where it has one (a machine that
    # builds, this one in a dry run), else the bundle's.
    read -r -a programs <<< "$(manifest programs)"
    REAL_MAKE=$(command -v make || true)
    old_files=()
    if [ ! -x build/ref ]; then
        tar -xzf "$BUNDLE/build.tar.gz" >> "$file" 2>&1 || unpack_ok=0
        CARRIED=1
        # build/grade runs make before it grades: the carried programs are
        # taken as up to date (make --old-file), so nothing is rebuilt, and
        # nothing needs a compiler or the -dev packages.
        for f in "${programs[@]}"; do old_files+=("--old-file=$f"); done
    elif [ $DRY -eq 1 ]; then
        # A dry run keeps the tree's build/, and unpacks the bundle's beside it
        # to see that they load.
        mkdir -p "$WORK/carried" && tar -xzf "$BUNDLE/build.tar.gz" -C "$WORK/carried" >> "$file" 2>&1 || unpack_ok=0
    fi
    # make without the relocation (the machine's own mpicc, which the
    # Makefile asks for flags, answers for the machine's Open MPI), and with
    # the carried programs taken as up to date.
    if [ -n "$REAL_MAKE" ]; then
        {
            echo '#!/bin/sh'
            echo '# make as scripts/gpu-check.sh runs it: without the bundle'"'"'s Open MPI relocation, carried programs up to date'
            printf 'exec env%s %s' "$(printf ' -u %s' "${RELOCATION[@]}")" "$REAL_MAKE"
            printf ' %s' "${old_files[@]}"
            echo ' "$@"'
        } > "$U/bin/make"
        chmod 755 "$U/bin/make"
    fi
    text="$(awk '$1 == "deb"' "$BUNDLE/MANIFEST" | wc -l) packages into $P"
    [ ${#used_base[@]} -gt 0 ] && text+="; base libraries this machine lacks: ${used_base[*]}"
    [ $CARRIED -eq 1 ] && text+="; the programs into build/"
    [ $unpack_ok -eq 1 ] && row "pre-flight: bundle unpacked" $((SECONDS - t0)) ok "$text" || row "pre-flight: bundle unpacked" $((SECONDS - t0)) FAIL "$text" "$file"
    if [ "$(manifest sources)" != "$HERE_HASH" ] && [ $CARRIED -eq 1 ]; then
        row "pre-flight: bundle of these sources" "" FAIL "no: the bundle's programs are of sources $(manifest sources), the tree's $HERE_HASH: run scripts/gpu-bundle.sh again"
        need bins 0 "the bundle's programs are not of these sources"
    fi
else
    row "pre-flight: bundle" "" SKIP "none in $BUNDLE (scripts/gpu-bundle.sh makes it): the machine's own Open MPI and OpenBLAS"
fi

# Where there is no bundle's build and no build/: build here, with CUDA.
if [ ! -x build/ref ]; then
    if command -v make > /dev/null && command -v nvcc > /dev/null; then
        step "build with CUDA (sm_80, sm_90, PTX)" - 600 plain make -j"$(nproc)" CUDA=1 all
    else
        row "build" "" FAIL "no build/ref, no bundle, and no make or nvcc here to build"
    fi
fi

# NCCL, cuBLAS and the CUDA runtime (the CUDA backend's, build/libplcuda.so,
# which the programs load when a rank uses the GPU): where its run path (CUDA's
# lib64 where it was built) finds none, from NCCL_HOME, CUDA's other
# folders or PyTorch's wheel (its nvidia/ packages).
for so in $(ldd build/libplcuda.so build/gpu_check 2> /dev/null | awk '/not found/ {print $1}' | sort -u); do
    for d in ${NCCL_HOME:+$NCCL_HOME/lib} ${CUDA_HOME:+$CUDA_HOME/lib64} /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib \
        /usr/local/cuda-*/lib64 /usr/lib/$MULTIARCH /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib \
        /opt/torch/.venv/lib/python3*/site-packages/nvidia/cu*/lib /usr/local/lib/python3*/dist-packages/nvidia/*/lib; do
        if [ -e "$d/$so" ]; then
            export LD_LIBRARY_PATH=$LD_LIBRARY_PATH${LD_LIBRARY_PATH:+:}$d
            break
        fi
    done
done

# ---- the pre-flight: five seconds, the table's first rows ---------------------------

pre() { row "pre-flight: $1" "" "$2" "$3"; }
resolved() { ldd "$1" 2> /dev/null | awk -v l="$2" '$1 ~ "^" l {print ($3 == "not" ? "not found" : $3); exit}'; }

# The GPU, as the driver and as the CUDA runtime see it.
if command -v nvidia-smi > /dev/null && gpu=$(timeout 5 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2> /dev/null | head -n 1) && [ -n "$gpu" ]; then
    if [ $DRY -eq 1 ]; then
        need gpu 0 "dry run: no GPU rows"
        pre gpu SKIP "$gpu (a dry run uses no GPU)"
    else
        cuda=$(timeout 5 build/gpu_check --devices 2>&1 | head -n 1)
        if timeout 5 build/gpu_check --devices > /dev/null 2>&1; then
            need gpu 1 ""
            HAVE_GPU=1
            pre gpu ok "$gpu; $cuda"
        else
            need gpu 0 "the CUDA runtime sees no GPU (pre-flight: gpu)"
            pre gpu FAIL "nvidia-smi sees $gpu, the CUDA runtime does not: $cuda"
        fi
    fi
else
    need gpu 0 "no GPU visible$([ $DRY -eq 1 ] && echo ' (dry run)')"
    pre gpu SKIP "none visible (nvidia-smi: $(command -v nvidia-smi > /dev/null && echo 'finds none' || echo 'not installed')): every GPU row is skipped"
fi
if command -v nvcc > /dev/null; then
    pre nvcc ok "$(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*') at $(command -v nvcc)$([ $CARRIED -eq 1 ] && echo '; not needed: the programs are carried')"
else
    pre nvcc "$([ $CARRIED -eq 1 ] && echo ok || echo SKIP)" "none$([ $CARRIED -eq 1 ] && echo ': not needed, the programs are carried' || echo ': no build here')"
fi
CS=$(command -v compute-sanitizer || { [ -x /usr/local/cuda/bin/compute-sanitizer ] && echo /usr/local/cuda/bin/compute-sanitizer; } || true)
if [ -n "$CS" ]; then
    need sanitizer 1 ""
    pre compute-sanitizer ok "$(timeout 5 "$CS" --version 2> /dev/null | grep -o -m 1 'Version [0-9.]*' || echo '?') at $CS"
else
    need sanitizer 0 "no compute-sanitizer (pre-flight)"
    pre compute-sanitizer SKIP "none: skips the 3 compute-sanitizer rows"
fi
# Every library of every program, from the bundle or the machine.
notfound=$(for f in build/ref build/grade build/gpu_check build/tests/test_comm_gpu build/lab0?_solution build/libplcuda.so; do
    [ -e "$f" ] && ldd "$f" 2> /dev/null | awk -v f="${f#build/}" '/not found/ {print $1 "(" f ")"}'
done | sort -u | head -n 6 | tr '\n' ' ')
if [ ! -x build/ref ]; then
    need bins 0 "no programs (build/ref missing)"
    pre programs FAIL "build/ref missing: every row is skipped"
elif [ -n "$notfound" ]; then
    need bins 0 "the programs cannot load their libraries (pre-flight: programs)"
    pre programs FAIL "libraries not found: $notfound: every row is skipped"
else
    [ "${HAVE[bins]:-1}" = 1 ] && need bins 1 ""
    pre programs ok "$([ $CARRIED -eq 1 ] && echo "carried ($(manifest made | cut -c 1-60))" || echo "the tree's build/"), sources $HERE_HASH; every library found"
fi
glibc=$(ldd --version 2> /dev/null | head -n 1 | awk '{print $NF}')
needed=$(manifest glibc_needed)
if [ -n "$needed" ] && [ "$(printf '%s\n%s\n' "$needed" "$glibc" | sort -V | head -n 1)" != "$needed" ]; then
    need bins 0 "glibc $glibc here, the bundle needs $needed"
    pre glibc FAIL "$glibc here; the bundle's libraries need $needed: every row is skipped"
else
    pre glibc ok "$glibc${needed:+ (the bundle needs $needed)}"
fi
mpi=$(command -v mpirun || true)
if [ -n "$mpi" ] && mv=$(timeout 5 mpirun --version 2> /dev/null | head -n 1) && [ -n "$mv" ]; then
    need mpi 1 ""
    pre mpi ok "$mv at $mpi$([ -n "$BUNDLE_MPI" ] && echo " (it sets OPAL_PREFIX=$BUNDLE_MPI)"); libmpi: $(resolved build/ref libmpi.so)"
else
    need mpi 0 "no working mpirun (pre-flight: mpi)"
    pre mpi FAIL "no working mpirun (${mpi:-none}): skips every row that starts ranks"
fi
pre blas "$([ "$(resolved build/ref libopenblas)" = "not found" ] && echo FAIL || echo ok)" "libopenblas: $(resolved build/ref libopenblas)${OPENBLAS_CORETYPE:+ (OPENBLAS_CORETYPE $OPENBLAS_CORETYPE)}"
nccl=$(resolved build/ref libnccl.so)
cublas=$(resolved build/ref libcublas.so)
if [ -n "$nccl" ] && [ "$nccl" != "not found" ]; then
    need nccl 1 ""
    pre nccl ok "$(readlink -f "$nccl"); cuBLAS $(readlink -f "$cublas" 2> /dev/null || echo "$cublas")"
else
    need nccl 0 "no libnccl.so.2 (pre-flight: nccl)"
    pre nccl SKIP "libnccl.so.2 not found (NCCL_HOME, CUDA, PyTorch's wheel searched): skips the NCCL rows"
fi
if command -v make > /dev/null; then
    need make 1 ""
    pre make ok "$(command -v make)$([ $CARRIED -eq 1 ] && echo ': the carried programs count as up to date')"
else
    need make 0 "no make: build/grade runs it before it grades (pre-flight)"
    pre make SKIP "none: build/grade runs make before it grades: skips the 6 grade rows"
fi
# The grader's isolated runs: another uid, in namespaces of their own.
if [ "$(id -u)" = 0 ] && command -v setpriv > /dev/null; then
    if as_nobody env LD_LIBRARY_PATH="${LD_LIBRARY_PATH:-}" build/gpu_check --list > /dev/null 2>&1; then
        devs=$(for d in /dev/nvidiactl /dev/nvidia0 /dev/nvidia-uvm; do [ -e "$d" ] && { as_nobody test -r "$d" -a -w "$d" && echo "$d rw" || echo "$d NOT rw"; }; done | tr '\n' ' ')
        iso=$(unshare --pid --fork --mount-proc --mount true 2> /dev/null && echo "namespaces: yes" || echo "namespaces: no (the grader runs them as root)")
        pre "uid 65534" ok "runs the programs from $TREE; ${devs:-no /dev/nvidia*}; $iso"
    else
        pre "uid 65534" FAIL "cannot run build/gpu_check from $TREE (a directory above it closed to others, or the bundle's libraries): the graded runs will fail"
    fi
else
    pre "uid 65534" SKIP "not root: the grader runs every lab as this user"
fi
pre ulimit ok "open files $(ulimit -n), processes $(ulimit -u), locked memory $(ulimit -l), stack $(ulimit -s), virtual memory $(ulimit -v), cores $(ulimit -c)"
shm=$(df -B1M --output=size,avail /dev/shm 2> /dev/null | tail -n 1 | awk '{print $1 " MiB, " $2 " MiB free"}')
shm_mb=$(df -B1M --output=size /dev/shm 2> /dev/null | tail -n 1 | tr -d ' ')
if [ -n "$shm_mb" ] && [ "$shm_mb" -lt 512 ]; then
    export NCCL_SHM_DISABLE=1
    pre /dev/shm ok "$shm: under 512 MiB, so NCCL_SHM_DISABLE=1 (README: Several nodes)"
else
    pre /dev/shm ok "${shm:-not mounted}"
fi

line "(pre-flight done: $((SECONDS - T0)) s since the start)"

# ---- the checks ------------------------------------------------------------------------

MPIRUN=(mpirun --oversubscribe)
# A dry run shows the bundle's Open MPI working alone: the machine's own
# Open MPI, PMIx, OpenBLAS and their plugins hidden under empty files and
# folders, in a mount namespace of the step's own.
HIDE=()
if [ $DRY -eq 1 ] && [ "${HAVE[mpi]}" = 1 ] && [ -n "$BUNDLE_MPI" ] && [ "$(id -u)" = 0 ] && unshare --mount true 2> /dev/null; then
    cat > "$WORK/hide-system-mpi.sh" << 'EOF'
set -e
mkdir -p /tmp/.gpu-check-empty && : > /tmp/.gpu-check-empty.f
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/pmix2 /usr/share/openmpi /etc/openmpi \
         /usr/lib/x86_64-linux-gnu/openblas-pthread /usr/lib/x86_64-linux-gnu/ucx; do
    [ -d "$d" ] && mount --bind /tmp/.gpu-check-empty "$d"
done
for f in /usr/lib/x86_64-linux-gnu/lib{mpi,open-pal,open-rte,pmix,hwloc,event_core,event_pthreads,fabric,ucp,uct,ucs,openblas,gfortran}*.so* \
         /usr/bin/orterun /usr/bin/orted /usr/bin/mpirun.openmpi; do
    [ -f "$f" ] && [ ! -L "$f" ] && mount --bind /tmp/.gpu-check-empty.f "$f"
done
exec "$@"
EOF
    HIDE=(unshare --mount bash "$WORK/hide-system-mpi.sh")
fi
if [ $DRY -eq 1 ] && [ -d "$WORK/carried/build" ]; then
    # The bundle's programs, unpacked beside the tree's: every library found,
    # Open MPI's and OpenBLAS's from the bundle.
    step "bundle: its programs load its libraries" - 30 plain "${HIDE[@]}" bash -c '
        bad=0
        for f in "$1"/build/ref "$1"/build/grade "$1"/build/gpu_check "$1"/build/lab0?_solution "$1"/build/libplcuda.so; do
            ldd "$f" | grep "not found" | grep -v -E "lib(cuda|cublas|cublasLt|cudart|nccl)\.so" && bad=1
            ldd "$f" | grep -E "libmpi|libopenblas" | grep -v -F "$2" && { echo "$f: not from the bundle"; bad=1; }
        done
        echo "every program: libmpi and libopenblas from $2"; exit $bad' _ "$WORK/carried" "$P"
fi
step "Open MPI$([ -n "$BUNDLE_MPI" ] && echo " (bundle's$([ ${#HIDE[@]} -gt 0 ] && echo ", system's hidden"))"): lab02 np=2, CPU" \
    bins,mpi 90 plain "${HIDE[@]}" "${MPIRUN[@]}" -np 2 build/lab02_solution --device cpu --steps 2
if [ $DRY -eq 1 ]; then
    # The grader as the device's grade rows run it (its runs as another user,
    # with PATH and LD_LIBRARY_PATH alone), on the CPU.
    step "grade lab01 on the CPU (quick runs): the grader's way" bins,mpi,make 90 plain \
        build/grade --solutions --lab lab01 --quick --limit 60 --watchdog 30 --budget @BUDGET@
    step "training check's machinery: CPU against CPU" bins 60 plain build/gpu_check --training --device cpu -- --steps 3 --layers 1 --dim 32 --heads 2 --seq 16
    step "training check's machinery in bf16: CPU against CPU" bins 60 plain build/gpu_check --training --device cpu -- --steps 3 --layers 1 --dim 32 --heads 2 --seq 16 --precision bf16
fi
step "every op: GPU against CPU (a process per group)" bins,gpu 180 plain build/gpu_check --group-limit 60
step "build/ref: GPU against CPU, both devices' rounding" bins,gpu 150 plain build/gpu_check --training
step "build/ref in bf16: GPU against CPU (cuBLAS's bf16 products)" bins,gpu 150 plain build/gpu_check --training -- --steps 8 --precision bf16
step "lab03 np=1 --comm nccl stage 3 in bf16 (NCCL's bf16 reductions)" bins,gpu,mpi,nccl 60 plain "${MPIRUN[@]}" -np 1 build/lab03_solution --comm nccl --steps 3 --stage 3 --precision bf16
step "lab02 np=1 --comm nccl in bf16 (ncclBfloat16 buckets)" bins,gpu,mpi,nccl 60 plain "${MPIRUN[@]}" -np 1 build/lab02_solution --comm nccl --steps 3 --precision bf16
step "lab02 np=2 --comm mpi in bf16, fp32 gradients (--grad-reduce fp32)" bins,gpu,mpi 60 plain "${MPIRUN[@]}" -np 2 build/lab02_solution --comm mpi --steps 3 --precision bf16 --grad-reduce fp32
step "comm.h on GPU buffers: NCCL, one rank" bins,gpu,mpi,nccl 90 plain "${MPIRUN[@]}" -np 1 build/tests/test_comm_gpu
step "comm.h on GPU buffers: MPI, one rank" bins,gpu,mpi 90 plain "${MPIRUN[@]}" -np 1 build/tests/test_comm_gpu --comm mpi
step "comm.h on GPU buffers: 2 ranks share it (MPI)" bins,gpu,mpi 90 plain "${MPIRUN[@]}" -np 2 build/tests/test_comm_gpu
step "lab02 np=1 --comm nccl" bins,gpu,mpi,nccl 60 plain "${MPIRUN[@]}" -np 1 build/lab02_solution --comm nccl --steps 3
step "lab03 np=1 --comm nccl stage 3" bins,gpu,mpi,nccl 60 plain "${MPIRUN[@]}" -np 1 build/lab03_solution --comm nccl --steps 3 --stage 3
step "lab06 np=1 --comm nccl" bins,gpu,mpi,nccl 60 plain "${MPIRUN[@]}" -np 1 build/lab06_solution --comm nccl --steps 3
step "lab02 np=2 --comm mpi (one GPU, staged)" bins,gpu,mpi 60 plain "${MPIRUN[@]}" -np 2 build/lab02_solution --comm mpi --steps 3
# Two ranks cannot share a GPU through NCCL: refused, saying why.
step "np=2 --comm nccl on one GPU is refused" bins,gpu,mpi,nccl 60 refused "${MPIRUN[@]}" -np 2 build/lab02_solution --comm nccl --steps 1
step "build/ref --tf32 runs" bins,gpu 60 plain build/ref --device cuda --tf32 --steps 5
# compute-sanitizer on programs whose exit code means the run (a lab program
# grades itself, and would fail for its verdict as well as for a finding):
# 97 is the sanitizer's own code, so only it says "found errors".
step "compute-sanitizer memcheck: build/ref" bins,gpu,sanitizer 90 sanitizer "${CS:-compute-sanitizer}" --tool memcheck --target-processes application-only --print-limit 20 --error-exitcode 97 \
    build/ref --device cuda --steps 2 --layers 1 --dim 64 --heads 4 --seq 32 --dropout 0.1
step "compute-sanitizer memcheck: every op group" bins,gpu,sanitizer 120 sanitizer "${CS:-compute-sanitizer}" --tool memcheck --target-processes application-only --print-limit 20 --error-exitcode 97 \
    build/gpu_check --group all
step "compute-sanitizer racecheck: the reductions" bins,gpu,sanitizer 90 sanitizer "${CS:-compute-sanitizer}" --tool racecheck --target-processes application-only --print-limit 20 --error-exitcode 97 \
    build/gpu_check --group elementwise,layernorm,attention,crossentropy,bias,ce_parts
# Every lab's solution on the GPU, the fast subset of the grader's runs: one
# rank on the GPU uses NCCL; several share it through the MPI backend.
for lab in lab01 lab02 lab03 lab04 lab05 lab06; do
    step "grade $lab on the GPU (quick runs)" bins,gpu,mpi,make 120 plain \
        build/grade --solutions --lab "$lab" --quick --limit 60 --watchdog 30 --budget @BUDGET@ --ref-cache "$WORK/refcache"
done
exit   # the EXIT trap writes the summary and the archive, and sets the exit code
