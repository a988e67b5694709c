#!/usr/bin/env bash
# multinode.sh: the README's "Several nodes" commands, tried on one machine.
# Two network namespaces, joined by a virtual Ethernet cable (a veth pair,
# eth0 on each side), are two nodes: node1 (10.77.0.1) and node2
# (10.77.0.2), each with its own host name (unshare --uts). mpirun runs on
# node1 and starts node2's daemon through this script's `agent`, which
# takes ssh's place (Open MPI's plm_rsh_agent): it enters node2 with
# `ip netns exec` instead of logging in. Open MPI moves the data through
# shared memory inside a node and TCP between them, over eth0 alone.
#
#   scripts/multinode.sh can             exit 0 when the two nodes can be made here (root, CAP_NET_ADMIN), else 77
#   scripts/multinode.sh run LAB ARGS    LAB ARGS under the README's mpirun line, 2 ranks on each node;
#                                        then the bytes each node's eth0 and loopback carried
#   scripts/multinode.sh local-ranks     comm_local_rank() of each rank is its rank mod 2 (the GPU it takes)
#   scripts/multinode.sh freeze          a rank stopped on node2 is named, and node1's ranks name it too
#   scripts/multinode.sh readme          the README's "Several nodes" commands are the ones run here
#
# Every command makes the nodes, does its work and removes them again, on
# failure too (an EXIT trap; a run killed outright leaves them for the next
# run to remove). Runs take turns (flock), so two at once do not collide.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SELF="$ROOT/scripts/multinode.sh"
NODES=(node1 node2)
NETNS_PREFIX=pl-                       # the namespaces: pl-node1, pl-node2
SUBNET=10.77.0                         # node k is $SUBNET.k/24, on eth0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

# What the README's "Several nodes" shows, word for word (readme checks it).
HOSTS_FILE=$'node1 slots=2\nnode2 slots=2'
ENV_LINE="export OMPI_MCA_btl=self,vader,tcp OMPI_MCA_btl_tcp_if_include=eth0 OMPI_MCA_oob_tcp_if_include=eth0"
MPIRUN_LINE="mpirun --hostfile hosts -np 4 --map-by ppr:2:node --bind-to numa"
README_RUN="$MPIRUN_LINE build/lab04_solution --steps 2 --layers 2 --tp 2"

# ---- the launcher's agent: ssh's place -------------------------------------
# Open MPI calls it as `agent HOST COMMAND...` (COMMAND: node2's orted and
# its arguments, as ssh would pass them to a remote shell).
if [ "${1:-}" = agent ]; then
    host=$2
    shift 2
    case " ${NODES[*]} " in *" $host "*) ;; *) echo "multinode.sh agent: no node named '$host'" >&2; exit 255 ;; esac
    exec ip netns exec "$NETNS_PREFIX$host" unshare --uts sh -c 'hostname "$0" && exec sh -c "$1"' "$host" "$*"
fi

# ---- making and removing the nodes -----------------------------------------
nodes_down() {
    local n p
    for n in "${NODES[@]}"; do
        ip netns list 2>/dev/null | grep -qx "$NETNS_PREFIX$n\( .*\)\?" || continue
        # What is left running inside (a run killed outright) is ours: end it.
        for p in $(ip netns pids "$NETNS_PREFIX$n" 2>/dev/null); do kill -KILL "$p" 2>/dev/null; done
        ip netns del "$NETNS_PREFIX$n"   # the veth pair goes with its ends
    done
    # /tmp and /dev/shm are the machine's, shared by the nodes: Open MPI
    # names its files there by host name (a run killed outright leaves them).
    for n in "${NODES[@]}"; do rm -rf /tmp/ompi."$n".* /dev/shm/vader_segment."$n".*; done
}

nodes_up() {
    nodes_down
    local k
    for k in 1 2; do ip netns add "$NETNS_PREFIX${NODES[k - 1]}" || return 1; done
    ip link add name eth0 netns "$NETNS_PREFIX${NODES[0]}" type veth peer name eth0 netns "$NETNS_PREFIX${NODES[1]}" || return 1
    for k in 1 2; do
        local ns=$NETNS_PREFIX${NODES[k - 1]}
        ip -n "$ns" addr add "$SUBNET.$k/24" dev eth0 && ip -n "$ns" link set lo up && ip -n "$ns" link set eth0 up || return 1
    done
}

# on NODE COMMAND...: COMMAND inside NODE, under NODE's host name.
on() {
    local host=$1
    shift
    ip netns exec "$NETNS_PREFIX$host" unshare --uts sh -c 'hostname "$0" && exec "$@"' "$host" "$@"
}

# cluster COMMAND...: COMMAND on node1, in a directory holding `hosts` (and
# build/, the tree's), with the README's variables and the agent set.
cluster() {
    (
        cd "$WORK" && eval "$ENV_LINE" && export OMPI_MCA_plm_rsh_agent="$SELF agent" &&
            on node1 "$@"
    )
}

if [ "${1:-}" = can ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "multinode.sh: two nodes on one machine need root (network namespaces)"
        exit 77
    fi
    probe=${NETNS_PREFIX}probe-$$
    if ! ip netns add "$probe" 2> /dev/null; then
        echo "multinode.sh: cannot make a network namespace here (no CAP_SYS_ADMIN: a container without it?)"
        exit 77
    fi
    why=
    ip link add name a netns "$probe" type veth peer name b netns "$probe" 2> /dev/null ||
        why="cannot make a veth pair (no CAP_NET_ADMIN?)"
    ip netns exec "$probe" unshare --uts true 2> /dev/null || why="cannot give a namespace its own host name (unshare --uts)"
    ip netns del "$probe"
    [ -z "$why" ] || { echo "multinode.sh: $why"; exit 77; }
    exit 0
fi

cmd=${1:-}
shift || true
case "$cmd" in run | local-ranks | freeze | readme) ;; *) sed -n '2,20s/^# \{0,1\}//p' "$0"; exit 2 ;; esac

if [ "$cmd" = readme ]; then
    # The subsection, from its heading to the next one.
    section=$(awk '/^### Several nodes/{on=1; next} /^#/{on=0} on' "$ROOT/README.md")
    missing=0
    while IFS= read -r line; do
        if grep -qxF -- "$line" <<<"$section"; then
            echo "in the README: $line"
        else
            echo "NOT in the README's \"Several nodes\": $line"
            missing=$((missing + 1))
        fi
    done <<<"$HOSTS_FILE"$'\n'"$ENV_LINE"$'\n'"$README_RUN"
    [ $missing -eq 0 ]
    exit
fi

exec 9> /tmp/pl-multinode.lock
flock -w 600 9 || { echo "multinode.sh: another run held the nodes for 10 minutes"; exit 1; }
WORK=$(mktemp -d)
trap 'nodes_down; rm -rf "$WORK"' EXIT
trap 'exit 130' INT TERM
nodes_up || { echo "multinode.sh: could not make the two nodes"; exit 1; }
printf '%s\n' "$HOSTS_FILE" > "$WORK/hosts"
ln -s "$ROOT/build" "$WORK/build"

# Bytes an interface of a node has sent.
tx_bytes() { ip netns exec "$NETNS_PREFIX$1" cat "/sys/class/net/$2/statistics/tx_bytes"; }

case "$cmd" in
run)
    echo "\$ cat hosts"
    cat "$WORK/hosts"
    echo "\$ $ENV_LINE"
    echo "\$ $MPIRUN_LINE $*"
    echo "(from node1, with OMPI_MCA_plm_rsh_agent=\"scripts/multinode.sh agent\" in ssh's place)"
    cluster $MPIRUN_LINE "$@"
    rc=$?
    # Inside a node the ranks share memory (vader): TCP between two ranks of
    # a node would go over its loopback, megabytes of it (--mca btl self,tcp
    # shows it); the 17 kB there without it are Open MPI's own start-up.
    # Between nodes, eth0 is the only way.
    bad=0
    for n in "${NODES[@]}"; do
        eth=$(tx_bytes "$n" eth0) lo=$(tx_bytes "$n" lo)
        echo "$n sent $eth bytes on eth0 (to the other node), $lo on its loopback"
        [ "$eth" -gt 200000 ] || { echo "FAILED: $n sent under 200 kB to the other node"; bad=1; }
        [ "$lo" -lt 100000 ] || { echo "FAILED: two ranks of $n talked over TCP, not shared memory"; bad=1; }
    done
    [ $rc -eq 0 ] && [ $bad -eq 0 ]
    exit
    ;;
local-ranks)
    # comm_local_rank() picks a rank's GPU (rank r of a node uses GPU r mod
    # count); no program prints it, so a 10-line one, linked as build/hello
    # is, prints it beside the launcher's OMPI_COMM_WORLD_LOCAL_RANK.
    [ -f "$ROOT/build/libcommon.a" ] || { echo "FAILED: no build/libcommon.a (make first)"; exit 1; }
    cat > "$WORK/where.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "comm.h"
int main(int argc, char **argv) {
    Comm *w = comm_init(&argc, &argv, 0);
    char host[64] = "";
    gethostname(host, sizeof host - 1);
    const char *env = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    printf("rank %d on %s: local rank %d of %d (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK: %s)\n", comm_rank(w), host,
           comm_local_rank(), comm_local_size(), env ? env : "unset");
    comm_finalize();
    return 0;
}
EOF
    # The program rules' flags, read from the Makefile (not copied here).
    flags=$(make -s --no-print-directory -C "$ROOT" -f Makefile -f - pl-link-flags <<<'pl-link-flags: ; @echo $(CC) $(CFLAGS) $(WRAP) @ $(LIB) $(LDLIBS)')
    cc_flags=${flags%%@*} link_flags=${flags#*@}
    (cd "$ROOT" && $cc_flags "$WORK/where.c" $link_flags -o "$WORK/where") || { echo "FAILED: the probe does not build"; exit 1; }
    out=$(cluster $MPIRUN_LINE "$WORK/where" 2>&1)
    rc=$?
    sort <<<"$out"
    wrong=0
    for r in 0 1 2 3; do
        want="rank $r on node$((r / 2 + 1)): local rank $((r % 2)) of 2 (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK: $((r % 2)))"
        grep -qxF "$want" <<<"$out" || { echo "FAILED: not said: $want"; wrong=1; }
    done
    [ $rc -eq 0 ] && [ $wrong -eq 0 ] && echo "every rank's local rank is its rank mod 2: rank r of a node uses GPU r mod count"
    [ $rc -eq 0 ] && [ $wrong -eq 0 ]
    exit
    ;;
freeze)
    # Rank 3 (node2's second rank) is stopped with SIGSTOP once training has
    # begun; every rank then waits for it. Its node2 partner can see its
    # heartbeat stop; node1's ranks cannot (it is in node2's memory), and
    # must name node2's ranks they wait for.
    log=$WORK/freeze.log
    t0=$SECONDS
    cluster $MPIRUN_LINE build/lab02_solution --steps 1000 --no-ref --timeout 3 > "$log" 2>&1 &
    job=$!
    while ! grep -q '^step    2/' "$log" && kill -0 $job 2> /dev/null && [ $((SECONDS - t0)) -lt 60 ]; do sleep 0.2; done
    # The scan looks again for up to 10 s while the job runs: once in four
    # clean-clone runs of make test on a loaded machine, one pass of it did
    # not see rank 3, though the job was at its fourth step.
    pid=
    t1=$SECONDS
    while [ -z "$pid" ] && kill -0 $job 2> /dev/null && [ $((SECONDS - t1)) -lt 10 ]; do
        for p in $(ip netns pids "${NETNS_PREFIX}node2"); do
            [ "$(cat "/proc/$p/comm" 2> /dev/null)" = lab02_solution ] &&
                tr '\0' '\n' < "/proc/$p/environ" 2> /dev/null | grep -qx OMPI_COMM_WORLD_RANK=3 && pid=$p
        done
        [ -n "$pid" ] || sleep 0.2
    done
    [ -n "$pid" ] || { cat "$log"; echo "FAILED: rank 3 was not found training on node2"; kill $job; exit 1; }
    echo "rank 3 (pid $pid, on node2) stopped at $((SECONDS - t0)) s, after step 2"
    kill -STOP "$pid"
    t1=$SECONDS
    wait $job
    rc=$?
    echo "the run ended $((SECONDS - t1)) s later, exit code $rc; the watchdog's lines:"
    grep -F "[lab02_solution rank " "$log"
    bad=0
    expect() { grep -qF -- "$2" "$log" || { echo "FAILED: $1 (no line says: $2)"; bad=1; }; }
    expect "node2's rank 2 does not name rank 3" "rank 2] rank 3 stopped answering (no sign of life for "
    grep -qE "rank [01]\] it waits for ranks? ([0-9]+, )*3(, [0-9]+)* on node2, another node" "$log" ||
        { echo "FAILED: no rank of node1 names rank 3 on node2"; bad=1; }
    ! grep -qE "rank [012] stopped answering" "$log" || { echo "FAILED: a rank that only waited is blamed"; bad=1; }
    [ $rc -eq 4 ] || { echo "FAILED: exit code $rc, not the watchdog's 4"; bad=1; }
    [ $((SECONDS - t1)) -lt 30 ] || { echo "FAILED: the run took $((SECONDS - t1)) s to end"; bad=1; }
    [ $bad -eq 0 ] || { echo "(all of it: $(tail -n 40 "$log"))"; exit 1; }
    exit 0
    ;;
esac
