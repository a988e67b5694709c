// comm.c: communicators, argument checks, byte counters, tracing and the
// watchdog. The data moves in a backend: comm_mpi.c, or comm_nccl.c for
// tensors on GPUs (chosen here once the device is known).
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm_internal.h"
#include "core.h"
#include "mem.h"
#include "trace.h"

// Inside the library's own MPI calls (>0): the MPI watch (mpi_watch.c)
// counts only the calls made outside, which bypass these counters. Static,
// read through comm_in_library: no other file can pretend to be the library.
static int comm_mpi_depth;

bool comm_in_library(void) { return comm_mpi_depth > 0; }
#define BACKEND(stmt)      \
    do {                   \
        comm_mpi_depth++;  \
        stmt;              \
        comm_mpi_depth--;  \
    } while (0)

static Comm g_world;
static const char *buffer_busy(const void *ptr, size_t bytes);
static const char *group_busy(const Comm *c);
static int idle_wait(MPI_Request *r);
static bool g_up;
static int g_local_rank;
static CommStats g_stats;

static const char *g_op_names[COMM_NOPS] = {"all_reduce", "reduce_scatter", "all_gather",
                                            "broadcast",  "send",           "recv",
                                            "barrier"};

const char *comm_op_name(CommOp op) { return (unsigned)op < COMM_NOPS ? g_op_names[op] : "?"; }

size_t comm_type_size(CommType t) {
    CHECK(t == COMM_F32 || t == COMM_BF16, "unknown element type %d; use COMM_F32 or COMM_BF16", (int)t);
    return t == COMM_BF16 ? 2 : 4;
}

const char *comm_type_name(CommType t) { return t == COMM_F32 ? "fp32" : t == COMM_BF16 ? "bf16" : "?"; }

// The backend of this run: MPI until the device is known, then NCCL when
// --comm allows it and every rank has a GPU of its own (device_chosen).
static Backend g_backend = BACKEND_MPI;
static enum { CHOOSE_AUTO, CHOOSE_MPI, CHOOSE_NCCL } g_choice = CHOOSE_AUTO;
static bool g_chosen;

// ---- the watchdog ----------------------------------------------------------
// The rank's state is a line saying what it is doing and since when. The
// main thread writes the slot not in use and then flips `g_wd_cur`, so the
// watchdog thread and the signal handler always read a whole line.
// A rank computes, waits in a communication call (watched: past --timeout
// it ends the run), or waits in a bookkeeping helper (comm_max_double and
// the like), which may rightly wait long for a rank working alone, such as
// rank 0 training the reference before the broadcast of its losses: past
// --timeout it ends the run only if a rank of this node stopped answering.
enum { WD_COMPUTING, WD_CALL, WD_HELPER };
typedef struct {
    char what[200];   // "recv of 4.10 kB from rank 0" or "computing; last call: ..."
    double since;     // core_now() when it began
    int in_call;      // WD_COMPUTING, WD_CALL or WD_HELPER
    const Comm *comm; // the group it waits on; NULL when not known
    int peer;         // send, recv: the group rank of the other side; -1: every rank of comm
} WdState;

static WdState g_wd[2];

// Signs of life, shared by the ranks of a node: each rank's watchdog thread
// writes core_now() into its slot every 50 ms (CLOCK_MONOTONIC is one clock
// for the whole machine). A rank that waits still beats; a rank stopped
// (SIGSTOP, a debugger) or frozen does not, so the rank whose beat is old is
// the one that stopped answering, whichever rank's watchdog fires.
typedef struct {
    volatile double beat;    // core_now() at the last sign of life; -1 once the rank has ended
    volatile int quiet;      // 1: this rank ends on a usage error it has said; no lines from the others
} NodeSlot;
static MPI_Win g_node_win = MPI_WIN_NULL;
static MPI_Comm g_node = MPI_COMM_NULL;
static NodeSlot *g_slots;    // (g_local_size), or NULL when the node's memory could not be shared
static int *g_slot_rank;     // (g_local_size) the world rank of each slot
static int g_local_size = 1;
// Where every rank runs, for naming the ranks of another node: their beats
// are in that node's memory, out of this node's sight.
enum { WD_HOST_LEN = 64 };
static char (*g_hosts)[WD_HOST_LEN];   // (world size) each rank's host name, or NULL
static volatile double g_woke_at;   // when this rank last found itself frozen (the watchdog saw a gap)
enum { HEARTBEAT_STALE_S = 1 };     // 20 beats missed: not a busy scheduler
static atomic_int g_wd_cur;
static _Atomic double g_timeout;
static pthread_t g_wd_thread;
static bool g_wd_running;
static atomic_int g_wd_stop;
// What the program is doing, for the watchdog's lines (two slots, as above).
static char g_wd_context[2][160];
static atomic_int g_wd_context_cur;

static void wd_vset(int in_call, const Comm *c, int peer, const char *fmt, va_list ap) {
    int next = 1 - atomic_load(&g_wd_cur);
    WdState *s = &g_wd[next];
    vsnprintf(s->what, sizeof s->what, fmt, ap);
    s->since = core_now();
    s->in_call = in_call;
    s->comm = c;
    s->peer = peer;
    atomic_store(&g_wd_cur, next);
}

static void wd_set(int in_call, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void wd_set(int in_call, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wd_vset(in_call, NULL, -1, fmt, ap);
    va_end(ap);
}

// The same, for a wait on group c (on its rank peer alone, when peer >= 0).
static void wd_set_on(int in_call, const Comm *c, int peer, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void wd_set_on(int in_call, const Comm *c, int peer, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    wd_vset(in_call, c, peer, fmt, ap);
    va_end(ap);
}

// The library's own waits (starting NCCL) are watched like calls; then the
// line says again what the rank was doing before.
static WdState wd_save(void) { return g_wd[atomic_load(&g_wd_cur)]; }

static void wd_restore(const WdState *saved) {
    int next = 1 - atomic_load(&g_wd_cur);
    g_wd[next] = *saved;
    atomic_store(&g_wd_cur, next);
}

// NCCL's asynchronous sends and receives wait in a queue until the next call
// (comm_nccl.c). Before a wait, a test or any MPI call they are launched, or
// a partner waiting for them would never see them; launching them may wait
// for a partner's first message, so it is watched.
static void launch_queued(void) {
    if (g_backend != BACKEND_NCCL || nccl_queued() == 0) return;
    WdState saved = wd_save();
    wd_set(WD_CALL, "launching %d queued sends and receives (NCCL)", nccl_queued());
    BACKEND(nccl_flush());
    wd_restore(&saved);
}

// Async-signal-safe formatting: append text, and a number with one decimal.
static size_t put_str(char *buf, size_t n, size_t cap, const char *s) {
    while (*s && n + 1 < cap) buf[n++] = *s++;
    return n;
}

static size_t put_seconds(char *buf, size_t n, size_t cap, double s) {
    if (s < 0) s = 0;
    unsigned long tenths = (unsigned long)(s * 10.0 + 0.5);
    char digits[32];
    int k = 0;
    unsigned long whole = tenths / 10;
    do {
        digits[k++] = (char)('0' + whole % 10);
        whole /= 10;
    } while (whole && k < 30);
    while (k > 0 && n + 1 < cap) buf[n++] = digits[--k];
    if (n + 3 < cap) {
        buf[n++] = '.';
        buf[n++] = (char)('0' + tenths % 10);
        buf[n++] = ' ';
        buf[n++] = 's';
    }
    return n;
}

static size_t put_int(char *buf, size_t n, size_t cap, int v) {
    char digits[16];
    int k = 0;
    unsigned u = v < 0 ? 0u : (unsigned)v;
    do {
        digits[k++] = (char)('0' + u % 10);
        u /= 10;
    } while (u && k < 15);
    while (k > 0 && n + 1 < cap) buf[n++] = digits[--k];
    return n;
}

// "[lab01 rank 2] ", the start of every line the watchdog writes.
static size_t put_prefix(char *buf, size_t cap) {
    size_t n = put_str(buf, 0, cap, "[");
    n = put_str(buf, n, cap, core_program());
    n = put_str(buf, n, cap, " rank ");
    n = put_int(buf, n, cap, g_world.rank);
    return put_str(buf, n, cap, "] ");
}

// "[lab01 rank 2] <head>in <what> for 10.0 s<tail>\n" (in a call), or
// "[lab01 rank 2] <head><what> (for 10.0 s)<tail>\n", written with one write().
static void wd_report(const char *head, const char *tail) {
    const WdState *s = &g_wd[atomic_load(&g_wd_cur)];
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    double now = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
    char line[512];
    size_t cap = sizeof line;
    size_t n = put_prefix(line, cap);
    n = put_str(line, n, cap, head);
    if (s->in_call) n = put_str(line, n, cap, "in ");
    n = put_str(line, n, cap, s->what);
    n = put_str(line, n, cap, s->in_call ? " for " : " (for ");
    n = put_seconds(line, n, cap, now - s->since);
    if (!s->in_call) n = put_str(line, n, cap, ")");
    const char *context = g_wd_context[atomic_load(&g_wd_context_cur)];
    if (context[0]) {
        n = put_str(line, n, cap, " [while ");
        n = put_str(line, n, cap, context);
        n = put_str(line, n, cap, "]");
    }
    n = put_str(line, n, cap, tail);
    n = put_str(line, n, cap, "\n");
    ssize_t w = write(STDERR_FILENO, line, n);
    (void)w;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

// Seconds since this node's rank in slot i last showed a sign of life, or -1
// when it is not known (no shared slots, or no beat yet).
static double silence_of(int i) {
    if (!g_slots || !g_wd_running) return -1;
    double beat = g_slots[i].beat;
    return beat > 0 ? now_s() - beat : -1;
}

// This rank is ending: its silence from now on is no sign of a freeze.
static void mark_ended(void) {
    if (g_slots) g_slots[g_local_rank].beat = -1;
}

static bool peers_quiet(void) {
    for (int i = 0; g_slots && i < g_local_size; i++)
        if (g_slots[i].quiet) return true;
    return false;
}

// One line for each other rank of the node that stopped answering: the
// wait of this rank is theirs to explain. How many were named.
// Async-signal-safe.
static int report_silent_ranks(void) {
    int named = 0;
    for (int i = 0; g_slots && i < g_local_size; i++) {
        if (i == g_local_rank) continue;
        double quiet_for = silence_of(i);
        if (quiet_for < HEARTBEAT_STALE_S) continue;
        char line[256];
        size_t cap = sizeof line;
        size_t n = put_prefix(line, cap);
        n = put_str(line, n, cap, "rank ");
        n = put_int(line, n, cap, g_slot_rank[i]);
        n = put_str(line, n, cap, " stopped answering (no sign of life for ");
        n = put_seconds(line, n, cap, quiet_for);
        n = put_str(line, n, cap, ": stopped or frozen, not waiting)\n");
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
        named++;
    }
    return named;
}

// The longest silence among the other ranks of this node, in seconds.
static double node_silence(void) {
    double most = -1;
    for (int i = 0; g_slots && i < g_local_size; i++) {
        double quiet_for = silence_of(i);
        if (i != g_local_rank && quiet_for > most) most = quiet_for;
    }
    return most;
}

static bool on_this_node(int q) {
    for (int i = 0; g_slot_rank && i < g_local_size; i++)
        if (g_slot_rank[i] == q) return true;
    return false;
}

static int world_rank_of(const Comm *c, int r);

// The ranks this rank waits for that run on other nodes, one line a node
// (three nodes at most, then a count), when no rank of its own node
// explains the wait: their signs of life are in their own node's memory,
// out of this node's sight, so it cannot tell a frozen one from a waiting
// one. Their node's lines tell (report_silent_ranks there).
// Async-signal-safe.
enum { WD_NODE_LINES = 3 };
static void report_other_nodes(void) {
    const WdState *s = &g_wd[atomic_load(&g_wd_cur)];
    if (s->in_call == WD_COMPUTING || !s->comm || !g_hosts) return;
    const Comm *c = s->comm;
    int lo = s->peer >= 0 ? s->peer : 0, hi = s->peer >= 0 ? s->peer : c->size - 1;
    int lines = 0, more = 0;   // more: the nodes past WD_NODE_LINES
    for (int i = lo; i <= hi; i++) {
        int q = world_rank_of(c, i);
        bool said = on_this_node(q);   // or its node has had its line
        for (int j = lo; j < i && !said; j++) {
            int p = world_rank_of(c, j);
            said = !on_this_node(p) && strcmp(g_hosts[p], g_hosts[q]) == 0;
        }
        if (said) continue;
        if (lines == WD_NODE_LINES) {
            more++;
            continue;
        }
        lines++;
        const char *host = g_hosts[q];
        int many = 0;
        for (int j = i; j <= hi; j++) {
            int p = world_rank_of(c, j);
            many += !on_this_node(p) && strcmp(g_hosts[p], host) == 0;
        }
        char line[512];
        size_t cap = sizeof line;
        size_t n = put_prefix(line, cap);
        n = put_str(line, n, cap, many > 1 ? "it waits for ranks " : "it waits for rank ");
        for (int j = i, k = 0; j <= hi; j++) {
            int p = world_rank_of(c, j);
            if (on_this_node(p) || strcmp(g_hosts[p], host) != 0) continue;
            if (k++) n = put_str(line, n, cap, ", ");
            n = put_int(line, n, cap, p);
        }
        n = put_str(line, n, cap, " on ");
        n = put_str(line, n, cap, host);
        n = put_str(line, n, cap, ", another node, whose signs of life it cannot see: ");
        n = put_str(line, n, cap, host);
        n = put_str(line, n, cap, many > 1 ? "'s lines say if one stopped answering\n" : "'s lines say if it stopped answering\n");
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
    }
    if (more) {
        char line[256];
        size_t cap = sizeof line;
        size_t n = put_prefix(line, cap);
        n = put_str(line, n, cap, "it waits for ranks on ");
        n = put_int(line, n, cap, more);
        n = put_str(line, n, cap, more > 1 ? " more nodes too\n" : " more node too\n");
        ssize_t w = write(STDERR_FILENO, line, n);
        (void)w;
    }
}

// The launcher stops the other ranks with SIGTERM when one ends; each says
// where it was, so a hang shows every rank's side of it. A rank that was
// itself stopped (woken by the launcher to be ended) says that instead of
// the wait it was in, and a rank ending on another's usage error says nothing.
static void on_sigterm(int sig) {
    (void)sig;
    double own = silence_of(g_local_rank), woke = g_woke_at;
    if (peers_quiet()) {
        // the usage error is said once, by the rank that found it
    } else if (own >= HEARTBEAT_STALE_S || (woke > 0 && now_s() - woke < 2 * HEARTBEAT_STALE_S)) {
        wd_report("was stopped or frozen (no sign of life, so the other ranks waited for it) while ", "");
    } else {
        wd_report("stopped while ", "");
        if (report_silent_ranks() == 0) report_other_nodes();
    }
    mark_ended();
    core_run_cleanups();
    _exit(128 + SIGTERM);
}

static void *wd_main(void *arg) {
    (void)arg;
    double last = core_now();
    while (!atomic_load(&g_wd_stop)) {
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double now = core_now();
        // A long gap between two naps: this whole rank was stopped. Its wait
        // counts from the wake-up, so it does not blame the ranks it kept waiting.
        if (now - last >= HEARTBEAT_STALE_S) g_woke_at = now;
        last = now;
        if (g_slots) g_slots[g_local_rank].beat = now;
        const WdState *s = &g_wd[atomic_load(&g_wd_cur)];
        double timeout = atomic_load(&g_timeout);
        double since = s->since > g_woke_at ? s->since : g_woke_at;
        bool past = timeout > 0 && now - since > timeout;
        // A helper's wait ends the run only once a rank of this node has been
        // silent as long (a frozen rank, not a scheduler's pause).
        double frozen_for = timeout > HEARTBEAT_STALE_S ? timeout : HEARTBEAT_STALE_S;
        if (past && (s->in_call == WD_CALL || (s->in_call == WD_HELPER && node_silence() >= frozen_for))) {
            char tail[160];
            if (s->in_call == WD_CALL)
                snprintf(tail, sizeof tail,
                         " (--timeout %g); ending the run. A rank waits forever when its partner "
                         "never makes the matching call",
                         timeout);
            else
                snprintf(tail, sizeof tail, " (--timeout %g) for a rank that stopped answering; ending the run",
                         timeout);
            wd_report("watchdog: waited ", tail);
            if (report_silent_ranks() == 0) report_other_nodes();
            mark_ended();
            core_run_cleanups();
            _exit(EXIT_TIMEOUT);
        }
    }
    return NULL;
}

// Every call is described, timed and counted the same way.
typedef struct {
    CommOp op;
    int peer;        // send, recv: the group rank of the other side; -1
    int seq;         // its place in the log of events (-1: none)
    const Comm *comm;
    double t0;
    char what[200];
} CallInfo;

// Rank r of group c named by its world rank, the rank every line of the
// run is prefixed with, and by its rank in the group beside it when the two
// differ: "rank 3 (rank 1 of a group of 2)"; "rank 3" on the world.
static const char *name_rank(const Comm *c, int r, char *buf, size_t len) {
    const int q = world_rank_of(c, r);
    if (q == r && c->size == g_world.size) snprintf(buf, len, "rank %d", q);
    else snprintf(buf, len, "rank %d (rank %d of a group of %d)", q, r, c->size);
    return buf;
}

// "send of 4.10 kB to rank 1"; the bytes of a type other than float say it:
// "send of 2.05 kB bf16 to rank 1". The peer by its world rank (name_rank).
static void describe(CallInfo *ci, Comm *c, CommOp op, size_t bytes, CommType t, int peer, const char *extra) {
    char b[48], who[64] = "";
    if (peer >= 0 && peer < c->size) name_rank(c, peer, who, sizeof who);
    core_fmt_bytes((double)bytes, b, sizeof b);
    if (t != COMM_F32) snprintf(b + strlen(b), sizeof b - strlen(b), " %s", comm_type_name(t));
    ci->op = op;
    ci->peer = op == COMM_OP_SEND || op == COMM_OP_RECV ? peer : -1;
    ci->seq = -1;
    ci->comm = c;
    ci->t0 = core_now();
    if (op == COMM_OP_SEND)
        snprintf(ci->what, sizeof ci->what, "send of %s to %s%s", b, who, extra);
    else if (op == COMM_OP_RECV)
        snprintf(ci->what, sizeof ci->what, "recv of %s from %s%s", b, who, extra);
    else if (op == COMM_OP_BARRIER)
        snprintf(ci->what, sizeof ci->what, "barrier over %d ranks%s", c->size, extra);
    else if (op == COMM_OP_BROADCAST)
        snprintf(ci->what, sizeof ci->what, "broadcast of %s from %s over %d ranks%s", b, who, c->size,
                 extra);
    else
        snprintf(ci->what, sizeof ci->what, "%s of %s over %d ranks%s", comm_op_name(op), b,
                 c->size, extra);
}

// nccl-tests' bus factors: what one rank sends under the best algorithm.
static double bus_factor(CommOp op, int n) {
    switch (op) {
    case COMM_OP_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case COMM_OP_REDUCE_SCATTER:
    case COMM_OP_ALL_GATHER: return (double)(n - 1) / n;
    case COMM_OP_BROADCAST: return n > 1 ? 1.0 : 0.0;
    default: return 1.0;
    }
}

static void ledger_add(const Comm *c, CommOp op, size_t bytes, int peer);
static int log_post(const Comm *c, CommOp op, int peer);
static void log_done(const Comm *c, CommOp op, int peer, int seq);

// Counted, and its start logged: its place in the log (-1: none).
static int count(Comm *c, CommOp op, size_t bytes, int peer) {
    if (c->size == 1 && (op == COMM_OP_SEND || op == COMM_OP_RECV)) bytes = 0;
    ledger_add(c, op, bytes, peer);
    g_stats.calls[op]++;
    g_stats.bytes[op] += bytes;
    g_stats.bus_bytes[op] += (uint64_t)(bus_factor(op, c->size) * (double)bytes + 0.5);
    return log_post(c, op, peer);
}

// Busy time is the union of the operations' intervals, not their sum: two
// buckets in flight at once for 10 ms are 10 ms of communication, and the
// busy time of a step can never exceed the step. Operations under way are
// counted (blocking calls and asynchronous ones not yet seen to finish);
// the time from 0 to 1 and back to 0 is busy.
static int g_active;            // operations under way now
static double g_active_since;   // when g_active last went from 0 to 1

static void busy_begin(double t) {
    if (g_active++ == 0) g_active_since = t;
}

static void busy_end(double t) {
    if (--g_active == 0) g_stats.seconds_busy += t - g_active_since;
}

static void enter(CallInfo *ci) {
    busy_begin(ci->t0);
    wd_set_on(WD_CALL, ci->comm, ci->peer, "%s", ci->what);
}

static void leave(CallInfo *ci, int track) {
    double t1 = core_now();
    if (track == TRACE_TRACK_MAIN) {   // a blocking call: blocked all along
        busy_end(t1);
        g_stats.seconds_blocked += t1 - ci->t0;
        log_done(ci->comm, ci->op, ci->peer, ci->seq);
    }
    wd_set(WD_COMPUTING, "computing; its last call was %s", ci->what);
    if (trace_on()) {
        char args[220];
        snprintf(args, sizeof args, "\"what\": \"%s\"", ci->what);
        trace_span(comm_op_name(ci->op), "comm", track, ci->t0, t1, args);
    }
}

// ---- start and stop --------------------------------------------------------
static void abort_all(int code) {
    signal(SIGTERM, SIG_DFL);   // this rank has said why it stops; no second line
    mark_ended();
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

// A usage error once MPI is up: this rank says it (or rank 0 does), so the
// ranks the launcher then ends say nothing of their own.
static void usage_ending(void) {
    signal(SIGTERM, SIG_DFL);
    if (g_slots) g_slots[g_local_rank].quiet = 1;
}

// The node's shared slots; without them (an MPI that cannot share memory)
// the watchdog still works, it only cannot name a stopped rank.
static void node_slots_init(void) {
    BACKEND(MPI_CHECK(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &g_node)));
    MPI_CHECK(MPI_Comm_rank(g_node, &g_local_rank));
    MPI_CHECK(MPI_Comm_size(g_node, &g_local_size));
    g_slot_rank = calloc((size_t)g_local_size, sizeof *g_slot_rank);
    CHECK(g_slot_rank, "out of memory");
    BACKEND(MPI_CHECK(MPI_Allgather(&g_world.rank, 1, MPI_INT, g_slot_rank, 1, MPI_INT, g_node)));
    char host[MPI_MAX_PROCESSOR_NAME] = "", mine_host[WD_HOST_LEN] = "";
    int len = 0;
    MPI_CHECK(MPI_Get_processor_name(host, &len));
    snprintf(mine_host, sizeof mine_host, "%s", host);
    g_hosts = calloc((size_t)g_world.size, sizeof *g_hosts);
    CHECK(g_hosts, "out of memory");
    BACKEND(MPI_CHECK(MPI_Allgather(mine_host, WD_HOST_LEN, MPI_CHAR, g_hosts, WD_HOST_LEN, MPI_CHAR, MPI_COMM_WORLD)));
    NodeSlot *mine = NULL;
    int err;
    BACKEND(err = MPI_Win_allocate_shared((MPI_Aint)sizeof(NodeSlot), (int)sizeof(NodeSlot), MPI_INFO_NULL,
                                          g_node, &mine, &g_node_win));
    if (err != MPI_SUCCESS) {
        g_node_win = MPI_WIN_NULL;
        return;
    }
    MPI_Aint size;
    int unit;
    NodeSlot *first = NULL;
    if (MPI_Win_shared_query(g_node_win, 0, &size, &unit, &first) != MPI_SUCCESS) return;
    mine->beat = core_now();   // a rank frozen before its first beat still shows its age
    mine->quiet = 0;
    g_slots = first;
    BACKEND(MPI_CHECK(MPI_Barrier(g_node)));   // every slot is cleared before anyone reads one
}

// ---- the backend -----------------------------------------------------------
void comm_use_backend(const char *which) {
    CHECK(!g_chosen, "comm_use_backend(\"%s\") after the backend was chosen; call it before mem_init",
          which ? which : "auto");
    if (!which || strcmp(which, "auto") == 0) g_choice = CHOOSE_AUTO;
    else if (strcmp(which, "mpi") == 0) g_choice = CHOOSE_MPI;
    else if (strcmp(which, "nccl") == 0) g_choice = CHOOSE_NCCL;
    else core_usage_error("--comm must be auto, mpi or nccl, not '%s'", which);
}

const char *comm_backend_name(void) { return g_backend == BACKEND_NCCL ? "nccl" : "mpi"; }

// Make a group's NCCL communicator: collective over c, watched like a call
// (a member that never comes is named), and not counted as the program's
// communication. `why` says what asked for it.
static void nccl_start(Comm *c, const char *why) {
    WdState saved = wd_save();
    wd_set_on(WD_CALL, c, -1, "starting NCCL over %d ranks (%s)", c->size, why);
    BACKEND(nccl_comm_init(c));
    wd_restore(&saved);
}

// The GPUs the ranks of this node use, told apart by their ids (empty: a
// rank on the CPU); *mine_shared says whether another rank uses this rank's.
static int node_gpus(const char *id, bool *mine_shared) {
    char *all = calloc((size_t)g_local_size, NCCL_GPU_ID_LEN);
    CHECK(all, "out of memory");
    BACKEND(MPI_CHECK(MPI_Allgather(id, NCCL_GPU_ID_LEN, MPI_CHAR, all, NCCL_GPU_ID_LEN, MPI_CHAR, g_node)));
    int distinct = 0;
    *mine_shared = false;
    for (int i = 0; i < g_local_size; i++) {
        const char *gi = all + (size_t)i * NCCL_GPU_ID_LEN;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++) seen = strcmp(gi, all + (size_t)j * NCCL_GPU_ID_LEN) == 0;
        distinct += gi[0] && !seen;
        if (i != g_local_rank && id[0] && strcmp(gi, id) == 0) *mine_shared = true;
    }
    free(all);
    return distinct;
}

// Run by mem_init once the device is known (or by comm_init when mem_init
// came first). Every rank must take the same backend, or one rank would
// wait in NCCL for a partner waiting in MPI: the ranks share their reasons
// against NCCL and all take the worst. NCCL needs the tensors of every rank
// on a GPU of its own; the world's NCCL communicator is made here, while
// every rank is in this collective moment.
static void device_chosen(void) {
    if (!g_up || g_chosen) return;
    g_chosen = true;
    if (g_choice == CHOOSE_MPI) return;
    WdState saved = wd_save();
    wd_set_on(WD_CALL, &g_world, -1, "choosing the communication backend over %d ranks", g_world.size);
    char id[NCCL_GPU_ID_LEN];
    NcclFit fit = nccl_fit(id);
    bool shared;
    int gpus = node_gpus(id, &shared);
    if (fit == NCCL_USABLE && shared) fit = NCCL_SHARED_GPU;
    // The worst reason, the most ranks on one node, the fewest GPUs on one.
    int mine[3] = {(int)fit, g_local_size, -gpus}, worst[3];
    BACKEND(MPI_CHECK(MPI_Allreduce(mine, worst, 3, MPI_INT, MPI_MAX, MPI_COMM_WORLD)));
    wd_restore(&saved);
    fit = (NcclFit)worst[0];
    if (fit == NCCL_USABLE) {
        g_backend = BACKEND_NCCL;
        nccl_start(&g_world, "the world, at mem_init");
        return;
    }
    if (g_choice == CHOOSE_AUTO) return;   // MPI, which stages device buffers through the host
    // --comm nccl where it cannot work: every rank says the same, rank 0 prints it.
    int ranks = worst[1];
    gpus = -worst[2];
    if (fit == NCCL_NOT_BUILT)
        core_usage_error("--comm nccl: this build has no CUDA backend (nvcc was not found when it was "
                         "built); use --comm mpi, or install the CUDA toolkit and run make clean && make");
    if (fit == NCCL_ON_CPU)
        core_usage_error("--comm nccl: the tensors are on the CPU (no GPU is visible, or the program "
                         "chose the CPU); use --comm mpi instead (--comm mpi stages the buffers through "
                         "the host; NCCL needs one GPU per rank)");
    core_usage_error("--comm nccl: %d ranks run on a node where they use %d GPU%s, so ranks would share "
                     "a GPU, which NCCL refuses; run at most %d rank%s a node (one per GPU), or use "
                     "--comm mpi instead (--comm mpi stages the buffers through the host; NCCL needs "
                     "one GPU per rank)", ranks, gpus, gpus == 1 ? "" : "s", gpus, gpus == 1 ? "" : "s");
}

Comm *comm_init(int *argc, char ***argv, double timeout_s) {
    CHECK(!g_up, "comm_init called twice");
    int provided = 0;
    MPI_CHECK(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided));
    CHECK(provided >= MPI_THREAD_FUNNELED, "this MPI cannot run a watchdog thread beside the main one");
    // Errors come back to MPI_CHECK, which says what they mean, instead of
    // aborting inside MPI with its own words. Groups inherit this.
    MPI_CHECK(MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN));
    g_world.mpi = MPI_COMM_WORLD;
    MPI_CHECK(MPI_Comm_rank(MPI_COMM_WORLD, &g_world.rank));
    MPI_CHECK(MPI_Comm_size(MPI_COMM_WORLD, &g_world.size));
    g_world.members = g_world.size < 64 ? (UINT64_C(1) << g_world.size) - 1 : 0;
    BACKEND(mpi_ops_create());   // MPI's bf16 reductions
    core_set_rank(g_world.rank, g_world.size);
    core_set_abort_hook(abort_all);

    core_set_usage_hook(usage_ending);
    node_slots_init();

    g_up = true;
    g_timeout = timeout_s;
    wd_set(WD_COMPUTING, "computing (no call yet)");
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    comm_set_timeout(timeout_s);
    mem_set_free_check(buffer_busy);
    mem_set_device_hook(device_chosen);
    if (mem_device() == DEVICE_CUDA) device_chosen();   // mem_init came first
    return &g_world;
}

void comm_set_timeout(double timeout_s) {
    atomic_store(&g_timeout, timeout_s);
    if (timeout_s > 0 && !g_wd_running) {
        atomic_store(&g_wd_stop, 0);
        CHECK(pthread_create(&g_wd_thread, NULL, wd_main, NULL) == 0, "cannot start the watchdog thread");
        g_wd_running = true;
    }
}

void comm_watchdog_context(const char *what) {
    int next = 1 - atomic_load(&g_wd_context_cur);
    snprintf(g_wd_context[next], sizeof g_wd_context[next], "%s", what ? what : "");
    atomic_store(&g_wd_context_cur, next);
}

void comm_finalize(void) {
    if (!g_up) return;
    launch_queued();
    // The last barrier is watched too: a rank that leaves early while others
    // still wait for it shows up here.
    CallInfo ci;
    describe(&ci, &g_world, COMM_OP_BARRIER, 0, COMM_F32, -1, " (finalize: waiting for every rank to finish)");
    wd_set_on(WD_CALL, &g_world, -1, "%s", ci.what);   // watched, but not counted: it is no lab's communication
    MPI_Request last;
    BACKEND(MPI_CHECK(MPI_Ibarrier(MPI_COMM_WORLD, &last)));
    BACKEND(MPI_CHECK(idle_wait(&last)));
    if (g_world.nccl) {
        BACKEND(nccl_comm_free(&g_world));
        nccl_shutdown();
    }
    g_backend = BACKEND_MPI;
    if (g_wd_running) {
        atomic_store(&g_wd_stop, 1);
        pthread_join(g_wd_thread, NULL);
        g_wd_running = false;
    }
    signal(SIGTERM, SIG_DFL);
    g_slots = NULL;
    if (g_node_win != MPI_WIN_NULL) BACKEND(MPI_CHECK(MPI_Win_free(&g_node_win)));
    if (g_node != MPI_COMM_NULL) MPI_CHECK(MPI_Comm_free(&g_node));
    free(g_slot_rank);
    g_slot_rank = NULL;
    free(g_hosts);
    g_hosts = NULL;
    BACKEND(mpi_ops_free());
    MPI_CHECK(MPI_Finalize());
    g_up = false;
}

Comm *comm_world(void) {
    CHECK(g_up, "comm_world() before comm_init()");
    return &g_world;
}

int comm_rank(const Comm *c) { return c->rank; }
int comm_size(const Comm *c) { return c->size; }
int comm_local_rank(void) { return g_local_rank; }
int comm_local_size(void) { return g_local_size; }

// In an NCCL run a group gets its NCCL communicator here, where every rank
// of c is (comm_split is collective over c): a group's first call may be a
// send that only two of its ranks make, too late to start NCCL over all.
Comm *comm_split(Comm *c, int color, int key) {
    CHECK(color >= 0, "comm_split: color must be >= 0, not %d", color);
    Comm *g = calloc(1, sizeof *g);
    CHECK(g, "out of memory");
    launch_queued();
    BACKEND(MPI_CHECK(MPI_Comm_split(c->mpi, color, key, &g->mpi)));
    MPI_CHECK(MPI_Comm_rank(g->mpi, &g->rank));
    MPI_CHECK(MPI_Comm_size(g->mpi, &g->size));
    // Which world ranks it holds, for the ledger and the log of events.
    g->world = malloc((size_t)g->size * sizeof *g->world);
    CHECK(g->world, "out of memory");
    BACKEND(MPI_CHECK(MPI_Allgather(&g_world.rank, 1, MPI_INT, g->world, 1, MPI_INT, g->mpi)));
    for (int q = 0; q < g->size && g_world.size < 64; q++) g->members |= UINT64_C(1) << g->world[q];
    if (g_backend == BACKEND_NCCL) nccl_start(g, "a group from comm_split");
    return g;
}

void comm_free(Comm *c) {
    if (!c || c == &g_world) return;
    launch_queued();
    if (c->nccl) {
        // NCCL frees the communicator under the operations still on it.
        const char *user = group_busy(c);
        CHECK(!user, "comm_free: the %s is still in flight on this group; comm_wait(handle) before "
                     "freeing the group", user);
        WdState saved = wd_save();
        wd_set_on(WD_CALL, c, -1, "freeing NCCL over %d ranks (comm_free)", c->size);
        BACKEND(nccl_comm_free(c));
        wd_restore(&saved);
    }
    MPI_CHECK(MPI_Comm_free(&c->mpi));
    free(c->world);
    free(c);
}

void comm_block(size_t count, int n, int r, size_t *offset, size_t *len) {
    CHECK(n > 0 && r >= 0 && r < n, "comm_block: rank %d of %d", r, n);
    size_t base = count / (size_t)n, extra = count % (size_t)n;
    size_t ur = (size_t)r;
    *len = base + (ur < extra ? 1 : 0);
    *offset = ur * base + (ur < extra ? ur : extra);
}

// ---- argument checks -------------------------------------------------------
static void check_buf(const void *p, size_t count, CommType t, const char *op, const char *which) {
    CHECK(t == COMM_F32 || t == COMM_BF16, "%s: unknown element type %d; use COMM_F32 or COMM_BF16", op,
          (int)t);
    // A count computed as end - start with the end before the start wraps
    // around to a huge number: say that, not "too large for MPI".
    CHECK(count <= SIZE_MAX / 2, "%s: a count of %zu %s for the %s buffer is a negative number that "
          "wrapped around (%lld): an end before its start? check the offsets it is computed from",
          op, count, comm_elements_word(t), which, (long long)count);
    CHECK(p || count == 0, "%s: the %s buffer is NULL but count is %zu", op, which, count);
    // Past the end of its block: the count, or the element type (a bf16
    // buffer given as COMM_F32 is read twice as far), is wrong.
    MemCategory cat = MEM_OTHER;
    size_t left = count ? mem_bytes_after(p, &cat) : SIZE_MAX, bytes = count * comm_type_size(t);
    CHECK(left == SIZE_MAX || bytes <= left, "%s: %zu %s (%zu bytes) for the %s buffer, which has %zu bytes left "
          "(%zu %s) in its block (%s): the count or the element type is wrong (a bf16 buffer given as COMM_F32 is "
          "read twice as far)", op, count, comm_elements_word(t), bytes, which, left, left / comm_type_size(t),
          comm_elements_word(t), mem_category_name(cat));
    CHECK(g_backend != BACKEND_NCCL || count == 0 || nccl_on_device(p),
          "%s: the %s buffer is not in the GPU's memory, which is all NCCL moves; give a buffer "
          "from mem_alloc", op, which);
}

static void check_peer(Comm *c, int peer, const char *op, bool self_ok) {
    CHECK(peer >= 0 && peer < c->size, "%s: rank %d does not exist in a group of %d ranks", op,
          peer, c->size);
    CHECK(self_ok || peer != c->rank,
          "%s: rank %d talking to itself would wait forever; copy the data instead", op, peer);
}

static bool overlap(const void *a, size_t na, const void *b, size_t nb) {
    const char *x = a, *y = b;
    return na && nb && x < y + nb && y < x + na;
}

static CommReduce reduction(CommReduce op) {
    CHECK(op == COMM_SUM || op == COMM_AVG || op == COMM_MAX,
          "unknown reduction %d; use COMM_SUM, COMM_AVG or COMM_MAX", (int)op);
    return op;
}

// ---- handles ---------------------------------------------------------------
// Handles in flight form a list, so comm_progress can reach them all.
struct CommHandle {
    CallInfo ci;
    Pending pending;      // the operation, in the backend that started it
    const Comm *comm;     // the group it runs on
    bool ended;           // seen finished (by a test, a progress call or its wait): no longer busy
    bool logged;          // its end is in the log of events (a test found it done, or its wait)
    const void *buf[2];   // the buffers the operation reads or writes until it is waited on
    size_t bytes[2];
    CommHandle *prev, *next;
};

static CommHandle *g_inflight;

static CommHandle *uses(CommHandle *h, const void *a, size_t na, const void *b, size_t nb) {
    h->buf[0] = a, h->bytes[0] = na;
    h->buf[1] = b, h->bytes[1] = nb;
    return h;
}

int comm_inflight(void) {
    int n = 0;
    for (CommHandle *h = g_inflight; h; h = h->next) n++;
    return n;
}

// mem_free asks this before it frees: a buffer an operation in flight still
// uses must not go (MPI would read or write freed memory later).
static const char *buffer_busy(const void *ptr, size_t bytes) {
    for (CommHandle *h = g_inflight; h; h = h->next)
        for (int i = 0; i < 2; i++)
            if (overlap(ptr, bytes ? bytes : 1, h->buf[i], h->bytes[i])) return h->ci.what;
    return NULL;
}

// comm_free asks this: an operation in flight on the group, or NULL.
static const char *group_busy(const Comm *c) {
    for (CommHandle *h = g_inflight; h; h = h->next)
        if (h->comm == c) return h->ci.what;
    return NULL;
}

static CommHandle *start(CallInfo *ci, Comm *c, size_t bytes, bool nccl) {
    CommHandle *h = calloc(1, sizeof *h);
    CHECK(h, "out of memory");
    ci->seq = count(c, ci->op, bytes, ci->peer);
    busy_begin(ci->t0);
    h->ci = *ci;
    h->pending.backend = nccl ? BACKEND_NCCL : BACKEND_MPI;
    h->comm = c;
    h->next = g_inflight;
    if (g_inflight) g_inflight->prev = h;
    g_inflight = h;
    return h;
}

// The backend that started the operation finishes it (waits, and copies
// back or releases what it holds) or says whether it has finished.
static void pending_finish(Pending *p) {
    if (p->backend == BACKEND_NCCL) nccl_finish(&p->nccl);
    else mpi_finish(&p->mpi);
}

static bool pending_test(Pending *p) {
    return p->backend == BACKEND_NCCL ? nccl_test(&p->nccl) : mpi_test(&p->mpi);
}

// An asynchronous operation ends when it is first seen finished: in a test,
// in a progress call, or at the end of its wait.
static void handle_ended(CommHandle *h, double t) {
    if (h->ended) return;
    h->ended = true;
    busy_end(t);
}

void comm_wait(CommHandle *h) {
    CHECK(h, "comm_wait(NULL)");
    launch_queued();
    double t0 = core_now();
    wd_set_on(WD_CALL, h->comm, h->ci.peer, "wait for %s", h->ci.what);
    BACKEND(pending_finish(&h->pending));
    double t1 = core_now();
    // Waiting for an operation already finished waits for nothing.
    if (!h->ended) g_stats.seconds_blocked += t1 - t0;
    handle_ended(h, t1);
    if (!h->logged) log_done(h->comm, h->ci.op, h->ci.peer, h->ci.seq);
    leave(&h->ci, TRACE_TRACK_COMM_ASYNC);
    if (h->prev) h->prev->next = h->next;
    else g_inflight = h->next;
    if (h->next) h->next->prev = h->prev;
    free(h);
}

bool comm_test(CommHandle *h) {
    CHECK(h, "comm_test(NULL)");
    launch_queued();
    bool done;
    BACKEND(done = pending_test(&h->pending));
    if (done) handle_ended(h, core_now());
    if (done && !h->logged) log_done(h->comm, h->ci.op, h->ci.peer, h->ci.seq), h->logged = true;
    return done;
}

void comm_progress(void) {
    launch_queued();
    for (CommHandle *h = g_inflight; h; h = h->next) {
        if (h->ended) continue;
        bool done;
        BACKEND(done = pending_test(&h->pending));
        if (done) handle_ended(h, core_now());
    }
}

// A collective over one rank moves nothing and is finished as soon as it
// starts: seen so now, it is not counted busy until the next progress call.
// (Through NCCL it is still a copy on the GPU, seen finished later; and a
// queued send to oneself must wait for its receive.)
static CommHandle *launched(Comm *c, CommHandle *h) {
    if (c->size == 1 && h->pending.backend == BACKEND_MPI) {
        bool done;
        BACKEND(done = mpi_test(&h->pending.mpi));
        if (done) handle_ended(h, core_now());
    }
    return h;
}

// ---- the operations --------------------------------------------------------
// Every operation has one implementation, on `n` elements of type t; the
// float forms of comm.h and the typed forms both call it, with the name a
// message gives the call. Bytes are n times the element's size.
static size_t bytes_of(size_t n, CommType t) { return n * comm_type_size(t); }

// "send + 12", or for another type than float "comm_at(send, 12, COMM_BF16)":
// where a block of `base` starts, as the caller would write it.
static const char *block_at(char *buf, size_t cap, const char *base, size_t off, CommType t) {
    if (t == COMM_F32) snprintf(buf, cap, "%s + %zu", base, off);
    else snprintf(buf, cap, "comm_at(%s, %zu, COMM_BF16)", base, off);
    return buf;
}

// Which backend moves this call's data: NCCL in an NCCL run, except for a
// reduce-scatter or all-gather with unequal blocks (`even` false: N does not
// divide the count). NCCL wants equal blocks, so those go through MPI,
// staged through the host as comm_mpi.c stages any device buffer, with the
// same results. A group split before the backend was chosen gets its NCCL
// communicator here, at its first call (every member must make one).
static bool use_nccl(Comm *c, bool even, const char *call) {
    if (g_backend != BACKEND_NCCL) return false;
    if (!even) {
        launch_queued();
        return false;
    }
    if (!c->nccl) nccl_start(c, call);
    return true;
}

// The watchdog's and the trace's lines say which library moved the data.
static const char *tag(bool nccl) { return nccl ? " (NCCL)" : ""; }
static const char *tag_async(bool nccl) { return nccl ? " (async, NCCL)" : " (async)"; }

static bool even_blocks(const Comm *c, size_t n) { return n % (size_t)c->size == 0; }

static void all_reduce(Comm *c, void *buf, size_t n, CommType t, CommReduce op, const char *name) {
    check_buf(buf, n, t, name, "data");
    bool nccl = use_nccl(c, true, "its first call: all_reduce");
    CallInfo ci;
    describe(&ci, c, COMM_OP_ALL_REDUCE, bytes_of(n, t), t, -1, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), -1);
    enter(&ci);
    if (nccl) BACKEND(nccl_all_reduce(c, buf, n, t, reduction(op), NULL));
    else BACKEND(mpi_all_reduce(c, buf, n, t, reduction(op), NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_all_reduce(Comm *c, float *buf, size_t n, CommReduce op) {
    all_reduce(c, buf, n, COMM_F32, op, "comm_all_reduce");
}
void comm_all_reduce_typed(Comm *c, void *buf, size_t n, CommType t, CommReduce op) {
    all_reduce(c, buf, n, t, op, "comm_all_reduce_typed");
}

static void check_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t,
                                 const char *name) {
    size_t off, len;
    comm_block(n, c->size, c->rank, &off, &len);
    check_buf(send, n, t, name, "send");
    check_buf(recv, len, t, name, "recv");
    char at[64];
    CHECK(recv == comm_at_const(send, off, t) || !overlap(send, bytes_of(n, t), recv, bytes_of(len, t)),
          "%s: recv overlaps send but is not this rank's block of it (%s): receive in place at %s, or give "
          "the result its own buffer", name, block_at(at, sizeof at, "send", off, t), at);
}

static void reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op,
                           const char *name) {
    check_reduce_scatter(c, send, recv, n, t, name);
    bool nccl = use_nccl(c, even_blocks(c, n), "its first call: reduce_scatter");
    CallInfo ci;
    describe(&ci, c, COMM_OP_REDUCE_SCATTER, bytes_of(n, t), t, -1, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), ci.peer);
    enter(&ci);
    if (nccl) BACKEND(nccl_reduce_scatter(c, send, recv, n, t, reduction(op), NULL));
    else BACKEND(mpi_reduce_scatter(c, send, recv, n, t, reduction(op), NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_reduce_scatter(Comm *c, const float *send, float *recv, size_t n, CommReduce op) {
    reduce_scatter(c, send, recv, n, COMM_F32, op, "comm_reduce_scatter");
}
void comm_reduce_scatter_typed(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op) {
    reduce_scatter(c, send, recv, n, t, op, "comm_reduce_scatter_typed");
}

static void check_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t,
                             const char *name) {
    size_t off, len;
    comm_block(n, c->size, c->rank, &off, &len);
    check_buf(send, len, t, name, "send");
    check_buf(recv, n, t, name, "recv");
    char at[64];
    CHECK(send == comm_at(recv, off, t) || !overlap(send, bytes_of(len, t), recv, bytes_of(n, t)),
          "%s: send overlaps recv but is not this rank's block of it (%s)", name,
          block_at(at, sizeof at, "recv", off, t));
}

static void all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t, const char *name) {
    check_all_gather(c, send, recv, n, t, name);
    bool nccl = use_nccl(c, even_blocks(c, n), "its first call: all_gather");
    CallInfo ci;
    describe(&ci, c, COMM_OP_ALL_GATHER, bytes_of(n, t), t, -1, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), ci.peer);
    enter(&ci);
    if (nccl) BACKEND(nccl_all_gather(c, send, recv, n, t, NULL));
    else BACKEND(mpi_all_gather(c, send, recv, n, t, NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_all_gather(Comm *c, const float *send, float *recv, size_t n) {
    all_gather(c, send, recv, n, COMM_F32, "comm_all_gather");
}
void comm_all_gather_typed(Comm *c, const void *send, void *recv, size_t n, CommType t) {
    all_gather(c, send, recv, n, t, "comm_all_gather_typed");
}

static void broadcast(Comm *c, void *buf, size_t n, CommType t, int root, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, root, name, true);
    bool nccl = use_nccl(c, true, "its first call: broadcast");
    CallInfo ci;
    describe(&ci, c, COMM_OP_BROADCAST, bytes_of(n, t), t, root, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), ci.peer);
    enter(&ci);
    if (nccl) BACKEND(nccl_broadcast(c, buf, n, t, root, NULL));
    else BACKEND(mpi_broadcast(c, buf, n, t, root, NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_broadcast(Comm *c, float *buf, size_t n, int root) {
    broadcast(c, buf, n, COMM_F32, root, "comm_broadcast");
}
void comm_broadcast_typed(Comm *c, void *buf, size_t n, CommType t, int root) {
    broadcast(c, buf, n, t, root, "comm_broadcast_typed");
}

static void send_(Comm *c, const void *buf, size_t n, CommType t, int peer, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, peer, name, false);
    bool nccl = use_nccl(c, true, "its first call: send");
    CallInfo ci;
    describe(&ci, c, COMM_OP_SEND, bytes_of(n, t), t, peer, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), ci.peer);
    enter(&ci);
    if (nccl) BACKEND(nccl_send(c, buf, n, t, peer, NULL));
    else BACKEND(mpi_send(c, buf, n, t, peer, NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_send(Comm *c, const float *buf, size_t n, int peer) { send_(c, buf, n, COMM_F32, peer, "comm_send"); }
void comm_send_typed(Comm *c, const void *buf, size_t n, CommType t, int peer) {
    send_(c, buf, n, t, peer, "comm_send_typed");
}

static void recv_(Comm *c, void *buf, size_t n, CommType t, int peer, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, peer, name, false);
    bool nccl = use_nccl(c, true, "its first call: recv");
    CallInfo ci;
    describe(&ci, c, COMM_OP_RECV, bytes_of(n, t), t, peer, tag(nccl));
    ci.seq = count(c, ci.op, bytes_of(n, t), ci.peer);
    enter(&ci);
    if (nccl) BACKEND(nccl_recv(c, buf, n, t, peer, NULL));
    else BACKEND(mpi_recv(c, buf, n, t, peer, NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

void comm_recv(Comm *c, float *buf, size_t n, int peer) { recv_(c, buf, n, COMM_F32, peer, "comm_recv"); }
void comm_recv_typed(Comm *c, void *buf, size_t n, CommType t, int peer) {
    recv_(c, buf, n, t, peer, "comm_recv_typed");
}

static void sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src, CommType t,
                     const char *name) {
    check_buf(send, ns, t, name, "send");
    check_buf(recv, nr, t, name, "recv");
    check_peer(c, dst, name, true);
    check_peer(c, src, name, true);
    CHECK(!overlap(send, bytes_of(ns, t), recv, bytes_of(nr, t)), "%s: send and recv overlap; use two buffers",
          name);
    bool nccl = use_nccl(c, true, "its first call: sendrecv");
    CallInfo ci;
    char extra[112], who[64];
    snprintf(extra, sizeof extra, " while sending to %s%s", name_rank(c, dst, who, sizeof who), tag(nccl));
    describe(&ci, c, COMM_OP_RECV, bytes_of(nr, t), t, src, extra);
    // Only bytes that reach another rank count: a message to itself moves nothing.
    int sent = count(c, COMM_OP_SEND, dst == c->rank ? 0 : bytes_of(ns, t), dst);
    ci.seq = count(c, COMM_OP_RECV, src == c->rank ? 0 : bytes_of(nr, t), src);
    enter(&ci);
    if (nccl) BACKEND(nccl_sendrecv(c, send, ns, dst, recv, nr, src, t));
    else BACKEND(mpi_sendrecv(c, send, ns, dst, recv, nr, src, t));
    leave(&ci, TRACE_TRACK_MAIN);
    log_done(c, COMM_OP_SEND, dst, sent);
}

void comm_sendrecv(Comm *c, const float *send, size_t ns, int dst, float *recv, size_t nr, int src) {
    sendrecv(c, send, ns, dst, recv, nr, src, COMM_F32, "comm_sendrecv");
}
void comm_sendrecv_typed(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src,
                         CommType t) {
    sendrecv(c, send, ns, dst, recv, nr, src, t, "comm_sendrecv_typed");
}

void comm_barrier(Comm *c) {
    bool nccl = use_nccl(c, true, "its first call: barrier");
    CallInfo ci;
    describe(&ci, c, COMM_OP_BARRIER, 0, COMM_F32, -1, tag(nccl));
    ci.seq = count(c, ci.op, 0, -1);
    enter(&ci);
    if (nccl) BACKEND(nccl_barrier(c, NULL));
    else BACKEND(mpi_barrier(c, NULL));
    leave(&ci, TRACE_TRACK_MAIN);
}

// The asynchronous forms: the same checks and counts, then start and return.
static CommHandle *all_reduce_async(Comm *c, void *buf, size_t n, CommType t, CommReduce op, const char *name) {
    check_buf(buf, n, t, name, "data");
    bool nccl = use_nccl(c, true, "its first call: all_reduce_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_ALL_REDUCE, bytes_of(n, t), t, -1, tag_async(nccl));
    CommHandle *h = uses(start(&ci, c, bytes_of(n, t), nccl), buf, bytes_of(n, t), NULL, 0);
    if (nccl) BACKEND(nccl_all_reduce(c, buf, n, t, reduction(op), &h->pending.nccl));
    else BACKEND(mpi_all_reduce(c, buf, n, t, reduction(op), &h->pending.mpi));
    return launched(c, h);
}

CommHandle *comm_all_reduce_async(Comm *c, float *buf, size_t n, CommReduce op) {
    return all_reduce_async(c, buf, n, COMM_F32, op, "comm_all_reduce_async");
}
CommHandle *comm_all_reduce_async_typed(Comm *c, void *buf, size_t n, CommType t, CommReduce op) {
    return all_reduce_async(c, buf, n, t, op, "comm_all_reduce_async_typed");
}

static CommHandle *reduce_scatter_async(Comm *c, const void *send, void *recv, size_t n, CommType t,
                                        CommReduce op, const char *name) {
    check_reduce_scatter(c, send, recv, n, t, name);
    bool nccl = use_nccl(c, even_blocks(c, n), "its first call: reduce_scatter_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_REDUCE_SCATTER, bytes_of(n, t), t, -1, tag_async(nccl));
    size_t off, len;
    comm_block(n, c->size, c->rank, &off, &len);
    CommHandle *h = uses(start(&ci, c, bytes_of(n, t), nccl), send, bytes_of(n, t), recv, bytes_of(len, t));
    if (nccl) BACKEND(nccl_reduce_scatter(c, send, recv, n, t, reduction(op), &h->pending.nccl));
    else BACKEND(mpi_reduce_scatter(c, send, recv, n, t, reduction(op), &h->pending.mpi));
    return launched(c, h);
}

// (Its checks name the call comm_reduce_scatter, as they always have.)
CommHandle *comm_reduce_scatter_async(Comm *c, const float *send, float *recv, size_t n, CommReduce op) {
    return reduce_scatter_async(c, send, recv, n, COMM_F32, op, "comm_reduce_scatter");
}
CommHandle *comm_reduce_scatter_async_typed(Comm *c, const void *send, void *recv, size_t n, CommType t,
                                            CommReduce op) {
    return reduce_scatter_async(c, send, recv, n, t, op, "comm_reduce_scatter_async_typed");
}

static CommHandle *all_gather_async(Comm *c, const void *send, void *recv, size_t n, CommType t,
                                    const char *name) {
    check_all_gather(c, send, recv, n, t, name);
    bool nccl = use_nccl(c, even_blocks(c, n), "its first call: all_gather_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_ALL_GATHER, bytes_of(n, t), t, -1, tag_async(nccl));
    size_t off, len;
    comm_block(n, c->size, c->rank, &off, &len);
    CommHandle *h = uses(start(&ci, c, bytes_of(n, t), nccl), recv, bytes_of(n, t), send, bytes_of(len, t));
    if (nccl) BACKEND(nccl_all_gather(c, send, recv, n, t, &h->pending.nccl));
    else BACKEND(mpi_all_gather(c, send, recv, n, t, &h->pending.mpi));
    return launched(c, h);
}

// (Its checks name the call comm_all_gather, as they always have.)
CommHandle *comm_all_gather_async(Comm *c, const float *send, float *recv, size_t n) {
    return all_gather_async(c, send, recv, n, COMM_F32, "comm_all_gather");
}
CommHandle *comm_all_gather_async_typed(Comm *c, const void *send, void *recv, size_t n, CommType t) {
    return all_gather_async(c, send, recv, n, t, "comm_all_gather_async_typed");
}

static CommHandle *broadcast_async(Comm *c, void *buf, size_t n, CommType t, int root, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, root, name, true);
    bool nccl = use_nccl(c, true, "its first call: broadcast_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_BROADCAST, bytes_of(n, t), t, root, tag_async(nccl));
    CommHandle *h = uses(start(&ci, c, bytes_of(n, t), nccl), buf, bytes_of(n, t), NULL, 0);
    if (nccl) BACKEND(nccl_broadcast(c, buf, n, t, root, &h->pending.nccl));
    else BACKEND(mpi_broadcast(c, buf, n, t, root, &h->pending.mpi));
    return launched(c, h);
}

CommHandle *comm_broadcast_async(Comm *c, float *buf, size_t n, int root) {
    return broadcast_async(c, buf, n, COMM_F32, root, "comm_broadcast_async");
}
CommHandle *comm_broadcast_async_typed(Comm *c, void *buf, size_t n, CommType t, int root) {
    return broadcast_async(c, buf, n, t, root, "comm_broadcast_async_typed");
}

static CommHandle *send_async(Comm *c, const void *buf, size_t n, CommType t, int peer, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, peer, name, true);
    bool nccl = use_nccl(c, true, "its first call: send_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_SEND, bytes_of(n, t), t, peer, tag_async(nccl));
    CommHandle *h =
        uses(start(&ci, c, peer == c->rank ? 0 : bytes_of(n, t), nccl), buf, bytes_of(n, t), NULL, 0);
    if (nccl) BACKEND(nccl_send(c, buf, n, t, peer, &h->pending.nccl));
    else BACKEND(mpi_send(c, buf, n, t, peer, &h->pending.mpi));
    return launched(c, h);
}

CommHandle *comm_send_async(Comm *c, const float *buf, size_t n, int peer) {
    return send_async(c, buf, n, COMM_F32, peer, "comm_send_async");
}
CommHandle *comm_send_async_typed(Comm *c, const void *buf, size_t n, CommType t, int peer) {
    return send_async(c, buf, n, t, peer, "comm_send_async_typed");
}

static CommHandle *recv_async(Comm *c, void *buf, size_t n, CommType t, int peer, const char *name) {
    check_buf(buf, n, t, name, "data");
    check_peer(c, peer, name, true);
    bool nccl = use_nccl(c, true, "its first call: recv_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_RECV, bytes_of(n, t), t, peer, tag_async(nccl));
    CommHandle *h =
        uses(start(&ci, c, peer == c->rank ? 0 : bytes_of(n, t), nccl), buf, bytes_of(n, t), NULL, 0);
    if (nccl) BACKEND(nccl_recv(c, buf, n, t, peer, &h->pending.nccl));
    else BACKEND(mpi_recv(c, buf, n, t, peer, &h->pending.mpi));
    return launched(c, h);
}

CommHandle *comm_recv_async(Comm *c, float *buf, size_t n, int peer) {
    return recv_async(c, buf, n, COMM_F32, peer, "comm_recv_async");
}
CommHandle *comm_recv_async_typed(Comm *c, void *buf, size_t n, CommType t, int peer) {
    return recv_async(c, buf, n, t, peer, "comm_recv_async_typed");
}

CommHandle *comm_barrier_async(Comm *c) {
    bool nccl = use_nccl(c, true, "its first call: barrier_async");
    CallInfo ci;
    describe(&ci, c, COMM_OP_BARRIER, 0, COMM_F32, -1, tag_async(nccl));
    CommHandle *h = start(&ci, c, 0, nccl);
    if (nccl) BACKEND(nccl_barrier(c, &h->pending.nccl));
    else BACKEND(mpi_barrier(c, &h->pending.mpi));
    return launched(c, h);
}

// ---- statistics ------------------------------------------------------------
// MPI called directly, outside this library (mpi_watch.c).
void mpi_watch_collect(CommStats *s);
void mpi_watch_reset(void);

CommStats comm_stats(void) {
    CommStats s = g_stats;
    // Operations under way now count up to now, so the difference of two
    // readings is right even while one is in flight.
    if (g_active > 0) s.seconds_busy += core_now() - g_active_since;
    mpi_watch_collect(&s);
    return s;
}

// ---- the ledger and the log of events ----------------------------------------

static CommLedgerLine g_ledger[COMM_LEDGER_LINES];
static int g_ledger_n;
static uint64_t g_ledger_full;

static int world_rank_of(const Comm *c, int r) { return c->world ? c->world[r] : r; }

// The group of an operation: its communicator's ranks, or for a send or a
// receive the two sides.
static uint64_t group_of(const Comm *c, CommOp op, int peer, int *size) {
    if (op == COMM_OP_SEND || op == COMM_OP_RECV) {
        int me = g_world.rank, other = world_rank_of(c, peer);
        *size = me == other ? 1 : 2;
        return g_world.size < 64 ? (UINT64_C(1) << me) | (UINT64_C(1) << other) : 0;
    }
    *size = c->size;
    return c->members;
}

static void ledger_add(const Comm *c, CommOp op, size_t bytes, int peer) {
    int size;
    uint64_t group = group_of(c, op, peer, &size);
    for (int i = 0; i < g_ledger_n; i++) {
        CommLedgerLine *l = &g_ledger[i];
        if (l->op == (int32_t)op && l->group == group && l->group_size == size && l->bytes == bytes) {
            l->calls++;
            return;
        }
    }
    if (g_ledger_n == COMM_LEDGER_LINES) {
        g_ledger_full++;
        return;
    }
    g_ledger[g_ledger_n++] = (CommLedgerLine){(int32_t)op, size, group, bytes, 1};
}

uint64_t comm_ledger(CommLedgerLine *out) {
    for (int i = 0; i < COMM_LEDGER_LINES; i++)
        out[i] = i < g_ledger_n ? g_ledger[i] : (CommLedgerLine){-1, 0, 0, 0, 0};
    return g_ledger_full;
}

static CommEvent *g_ev;
static int g_ev_cap, g_ev_n;
// The places: per (group, kind of call, peer), how many so far.
enum { EV_PLACES = 256 };
typedef struct {
    uint64_t group;
    int kind, peer, next;   // kind: 0 sends, 1 receives, 2 collectives
} EvPlace;
static EvPlace g_places[EV_PLACES];
static int g_nplaces;

static void log_event(int kind, int op, int peer, int seq, uint64_t group) {
    if (!g_ev) return;
    if (g_ev_n < g_ev_cap) g_ev[g_ev_n] = (CommEvent){kind, op, peer, seq, group};
    g_ev_n++;
}

// An operation starts: its place among its kind, logged; -1 when no log is on.
static int log_post(const Comm *c, CommOp op, int peer) {
    if (!g_ev) return -1;
    int size, kind = op == COMM_OP_SEND ? 0 : op == COMM_OP_RECV ? 1 : 2;
    uint64_t group = group_of(c, op, peer, &size);
    int other = kind < 2 ? world_rank_of(c, peer) : -1, seq = -1;
    for (int i = 0; i < g_nplaces && seq < 0; i++)
        if (g_places[i].group == group && g_places[i].kind == kind && g_places[i].peer == other)
            seq = g_places[i].next++;
    if (seq < 0) {
        CHECK(g_nplaces < EV_PLACES, "the log of events holds %d pairs of ranks and groups at most", EV_PLACES);
        g_places[g_nplaces++] = (EvPlace){group, kind, other, 1};
        seq = 0;
    }
    log_event(COMM_EVENT_POST, op, other, seq, group);
    return seq;
}

static void log_done(const Comm *c, CommOp op, int peer, int seq) {
    if (!g_ev || seq < 0) return;
    int size;
    uint64_t group = group_of(c, op, peer, &size);
    log_event(COMM_EVENT_DONE, op, op == COMM_OP_SEND || op == COMM_OP_RECV ? world_rank_of(c, peer) : -1, seq,
              group);
}

void comm_events_start(CommEvent *buf, int cap) {
    g_ev = buf, g_ev_cap = cap, g_ev_n = 0, g_nplaces = 0;
}

int comm_events_stop(void) {
    g_ev = NULL;
    return g_ev_n;
}

void comm_events_mark(int what, int arg) { log_event(COMM_EVENT_MARK, what, arg, -1, 0); }

static bool g_stats_sealed;
static bool g_step_open;   // inside a training step (comm_step_window)

void comm_stats_seal(void) { g_stats_sealed = true; }

void comm_step_window(bool open) { g_step_open = open; }

void comm_stats_reset(void) {
    CHECK(!g_stats_sealed, "comm_stats_reset after the harness sealed its counters: the bytes and calls a run "
          "makes are the harness's to count, not to erase");
    memset(&g_stats, 0, sizeof g_stats);
    g_ledger_n = 0, g_ledger_full = 0;
    g_active_since = core_now();   // what is still in flight counts from here
    mpi_watch_reset();
}

uint64_t comm_stats_total_bus_bytes(const CommStats *s) {
    uint64_t t = 0;
    for (int i = 0; i < COMM_NOPS; i++) t += s->bus_bytes[i];
    return t;
}

// ---- bookkeeping between ranks ---------------------------------------------
// These move bytes the counters do not count: each call counts itself, so
// a lab can tell that student code used one.
// Each is watched as WD_HELPER until it returns (wd_restore(&saved)).
// `bytes`: the call's payload (CommStats's helper_bytes).
static WdState helper_call(Comm *c, const char *name, size_t bytes) {
    launch_queued();
    g_stats.helper_calls++;
    g_stats.helper_bytes += bytes;
    if (g_step_open) g_stats.step_helper_calls++, g_stats.step_helper_bytes += bytes;
    snprintf(g_stats.last_helper, sizeof g_stats.last_helper, "%s", name);
    WdState saved = wd_save();
    wd_set_on(WD_HELPER, c, -1, "%s over %d ranks", name, c->size);
    return saved;
}

// The wait of the harness's own host-side collectives (the reference's
// losses, the measures and the verdict's gathers, the last barrier), where
// one rank often works alone while the others wait: they wait asleep, not
// in MPI's progress loop. That loop spins (it yields when ranks outnumber
// cores, and still takes the cores): 4 ranks on 2 cores took 23 s to train
// a reference one rank trains in 2 s, the three waiting ranks spinning
// beside it. A wait that ends within 2 ms (every rank there at once, as
// after a step) never sleeps.
static int idle_wait(MPI_Request *r) {
    double t0 = now_s();
    for (;;) {
        int done = 0;
        int rc = MPI_Test(r, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS || done) return rc;
        if (now_s() - t0 > 2e-3) {
            struct timespec nap = {0, 200 * 1000};
            nanosleep(&nap, NULL);
        }
    }
}

void comm_all_gather_host(Comm *c, const void *send, size_t bytes, void *recv) {
    CHECK(bytes <= INT32_MAX, "comm_all_gather_host: %zu bytes is too many", bytes);
    WdState saved = helper_call(c, "comm_all_gather_host", bytes * (size_t)c->size);
    MPI_Request r;
    BACKEND(MPI_CHECK(MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    wd_restore(&saved);
}

void *comm_gather_host(Comm *c, const void *send, size_t bytes, int root, size_t *lens) {
    CHECK(bytes <= INT32_MAX, "comm_gather_host: %zu bytes is too many", bytes);
    WdState saved = helper_call(c, "comm_gather_host", bytes);
    int mine = (int)bytes;
    int *counts = NULL, *displs = NULL;
    char *out = NULL;
    if (c->rank == root) {
        counts = malloc(2 * (size_t)c->size * sizeof(int));
        CHECK(counts, "out of memory");
        displs = counts + c->size;
    }
    MPI_Request r;
    BACKEND(MPI_CHECK(MPI_Igather(&mine, 1, MPI_INT, counts, 1, MPI_INT, root, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    if (c->rank == root) {
        size_t total = 0;
        for (int r = 0; r < c->size; r++) {
            CHECK(total + (size_t)counts[r] <= INT32_MAX, "comm_gather_host: more than 2 GB");
            displs[r] = (int)total;
            total += (size_t)counts[r];
            if (lens) lens[r] = (size_t)counts[r];
        }
        out = malloc(total ? total : 1);
        CHECK(out, "out of memory gathering %zu bytes", total);
    }
    BACKEND(MPI_CHECK(MPI_Igatherv(send, mine, MPI_BYTE, out, counts, displs, MPI_BYTE, root, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    wd_restore(&saved);
    free(counts);
    return out;
}

void comm_broadcast_host(Comm *c, void *buf, size_t bytes, int root) {
    CHECK(bytes <= INT32_MAX, "comm_broadcast_host: %zu bytes is too many", bytes);
    WdState saved = helper_call(c, "comm_broadcast_host", bytes);
    MPI_Request r;
    BACKEND(MPI_CHECK(MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    wd_restore(&saved);
}

double comm_max_double(Comm *c, double v) {
    double out;
    WdState saved = helper_call(c, "comm_max_double", sizeof v);
    MPI_Request r;
    BACKEND(MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_MAX, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    wd_restore(&saved);
    return out;
}

struct CommShared {
    MPI_Comm node;   // c's ranks, when they are all of one node
    MPI_Win win;
    void **part;     // (size) each rank's part
};

CommShared *comm_shared_alloc(Comm *c, size_t bytes) {
    // Memory every rank of the node reads and writes moves data with no
    // message at all: a benchmark's (lab01's ideal ring), never a step's.
    CHECK(!g_stats_sealed, "comm_shared_alloc after the harness sealed its counters: memory the ranks share moves "
          "data no counter sees; a training lab's ranks communicate through comm.h's collectives");
    WdState saved = helper_call(c, "comm_shared_alloc", bytes * (size_t)c->size);
    MPI_Comm node;
    BACKEND(MPI_CHECK(MPI_Comm_split_type(c->mpi, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node)));
    int n;
    MPI_CHECK(MPI_Comm_size(node, &n));
    CommShared *s = NULL;
    if (n == c->size) {   // the same on every rank: each node holds fewer than all when c spans nodes
        s = calloc(1, sizeof *s);
        CHECK(s && (s->part = calloc((size_t)n, sizeof *s->part)), "out of memory");
        s->node = node;
        MPI_Info info;
        MPI_CHECK(MPI_Info_create(&info));
        MPI_CHECK(MPI_Info_set(info, "alloc_shared_noncontig", "true"));   // each part in its own pages
        void *mine;
        BACKEND(MPI_CHECK(MPI_Win_allocate_shared((MPI_Aint)bytes, 1, info, node, &mine, &s->win)));
        MPI_CHECK(MPI_Info_free(&info));
        for (int q = 0; q < n; q++) {
            MPI_Aint size;
            int unit;
            MPI_CHECK(MPI_Win_shared_query(s->win, q, &size, &unit, &s->part[q]));
        }
    } else {
        MPI_CHECK(MPI_Comm_free(&node));
    }
    wd_restore(&saved);
    return s;
}

void *comm_shared_peer(CommShared *s, int q) { return s->part[q]; }

void comm_shared_free(CommShared *s) {
    if (!s) return;
    BACKEND(MPI_CHECK(MPI_Win_free(&s->win)));
    MPI_CHECK(MPI_Comm_free(&s->node));
    free(s->part);
    free(s);
}

double comm_sum_double(Comm *c, double v) {
    double out;
    WdState saved = helper_call(c, "comm_sum_double", sizeof v);
    MPI_Request r;
    BACKEND(MPI_CHECK(MPI_Iallreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, c->mpi, &r)));
    BACKEND(MPI_CHECK(idle_wait(&r)));
    wd_restore(&saved);
    return out;
}
