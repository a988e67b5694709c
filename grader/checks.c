// checks.c: the checks every lab shares (checks.h): did the run end
// normally, does it train like the reference, does it move the bytes its
// formula says; and the sentences that say what probably went wrong.
#include "checks.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "reading.h"
#include "rounding.h"

// ---- hangs -----------------------------------------------------------------

typedef struct {
    int rank;
    bool in_call;
    char what[200];      // "recv of 4 B from rank 3 (rank 1 of a group of 2)", "all_reduce of 4 kB over 4 ranks", ...
    char context[160];   // what the program was doing: "checking ring_all_reduce, count 4099", or ""
} Wait;

// The watchdog's lines: "[prog rank R] watchdog: waited in WHAT for S s [while CONTEXT] (...)"
// and "[prog rank R] stopped while in WHAT for S s [while CONTEXT]" / "stopped while computing...".
// R is a world rank, and so is every peer in WHAT: "recv of 4 B from rank 3" on the world, "recv of 4 B
// from rank 3 (rank 1 of a group of 2)" on a group (common/comm.c, name_rank): the first number after
// " rank " is the one to match with another line's R.
static int parse_waits(const char *out, Wait *w, int cap) {
    int n = 0;
    for (const char *p = out; p && *p && n < cap; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        if (len >= sizeof line) continue;
        memcpy(line, p, len);
        line[len] = 0;
        const char *rk = strstr(line, " rank ");
        const char *in = strstr(line, "watchdog: waited in ");
        const char *st = strstr(line, "] stopped while ");
        if (!rk || (!in && !st)) continue;
        Wait x = {atoi(rk + 6), false, "", ""};
        const char *what;
        if (in) {
            what = in + strlen("watchdog: waited in ");
            x.in_call = true;
        } else {
            what = st + strlen("] stopped while ");
            x.in_call = strncmp(what, "in ", 3) == 0;
            if (x.in_call) what += 3;
        }
        snprintf(x.what, sizeof x.what, "%s", what);
        char *ctx = strstr(x.what, " [while ");
        if (ctx) {
            snprintf(x.context, sizeof x.context, "%s", ctx + strlen(" [while "));
            x.context[strcspn(x.context, "]")] = 0;
            *ctx = 0;
        }
        char *cut = strstr(x.what, " for ");
        if (x.in_call && cut) *cut = 0;
        // A rank may have both lines; keep the first.
        bool seen = false;
        for (int i = 0; i < n; i++) seen |= w[i].rank == x.rank;
        if (!seen) w[n++] = x;
    }
    return n;
}

// The operation a wait is in: "recv", "send", "all_reduce", ...
static void op_of(const Wait *w, char *op, size_t len) {
    const char *what = w->what;
    if (strncmp(what, "wait for ", 9) == 0) what += 9;
    size_t k = strcspn(what, " ");
    snprintf(op, len, "%.*s", (int)(k < len ? k : len - 1), what);
}

static int peer_of(const Wait *w) {
    const char *p = strstr(w->what, " rank ");
    return p ? atoi(p + 6) : -1;
}

static const Wait *wait_of(const Wait *w, int n, int rank) {
    for (int i = 0; i < n; i++)
        if (w[i].rank == rank) return &w[i];
    return NULL;
}

static bool is_op(const Wait *w, const char *op) {
    char o[32];
    op_of(w, o, sizeof o);
    return w->in_call && strcmp(o, op) == 0;
}

// Whether rank w is (also) sending to `to`: a send, or a sendrecv's send half.
static bool sends_to(const Wait *w, int to) {
    const char *half = w->in_call ? strstr(w->what, "while sending to rank ") : NULL;
    return (is_op(w, "send") && peer_of(w) == to) || (half && atoi(half + strlen("while sending to rank ")) == to);
}

// A cycle of at least three ranks, each waiting in a blocking send to the
// next: every rank sends before it receives, and no send can finish. Returns
// its length and writes the ranks, in order, into `ring`.
static int send_cycle(const Wait *w, int n, char *ring, size_t len) {
    for (int i = 0; i < n; i++) {
        const Wait *x = &w[i];
        int steps = 0;
        size_t m = (size_t)snprintf(ring, len, "%d", x->rank);
        while (is_op(x, "send") && steps <= n) {
            x = wait_of(w, n, peer_of(x));
            steps++;
            if (!x) break;
            if (m + 16 < len) m += (size_t)snprintf(ring + m, len - m, " -> %d", x->rank);
            if (x->rank == w[i].rank) return steps >= 3 ? steps : 0;
        }
    }
    return 0;
}

// The rank a "[prog rank R] rank N stopped answering (...)" line names: the
// runtime's own word that rank N was stopped or frozen, not waiting. -1: none.
static int silent_rank(const char *out) {
    const char *p = out ? strstr(out, " stopped answering (") : NULL;
    if (!p) return -1;
    const char *b = p;
    while (b > out && b[-1] != ' ') b--;   // the number before " stopped answering"
    return b > out + 5 && strncmp(b - 5, "rank ", 5) == 0 ? atoi(b) : -1;
}

const char *diagnose_hang(const char *output, char *buf, size_t len) {
    Wait w[64];
    int n = parse_waits(output, w, 64);
    int silent = silent_rank(output);
    if (n == 0 && silent < 0) return NULL;
    size_t m = 0;
    char ring[160];
    // The runtime saw a rank stop answering: it is the one to look at, and
    // the others only waited for it.
    if (silent >= 0) {
        m += (size_t)snprintf(buf + m, len - m,
                              "rank %d stopped answering: it was stopped or frozen (no sign of life from it, and "
                              "not waiting in a call), and the other ranks only waited for it: a rank stopped "
                              "by a signal (SIGSTOP, a debugger), or a machine out of memory and swapping. ",
                              silent);
        goto context;
    }
    // Two ranks waiting on each other in the same direction.
    for (int i = 0; i < n; i++)
        for (int j = i + 1; j < n; j++) {
            char oi[32], oj[32];
            op_of(&w[i], oi, sizeof oi);
            op_of(&w[j], oj, sizeof oj);
            if (peer_of(&w[i]) == w[j].rank && peer_of(&w[j]) == w[i].rank && strcmp(oi, oj) == 0 &&
                (strcmp(oi, "recv") == 0 || strcmp(oi, "send") == 0)) {
                m += (size_t)snprintf(buf + m, len - m,
                                      "ranks %d and %d both wait to %s %s each other, a deadlock: both %s first. "
                                      "Order the two calls differently on the two ranks, or use comm_sendrecv. ",
                                      w[i].rank, w[j].rank, oi, strcmp(oi, "recv") == 0 ? "from" : "to",
                                      strcmp(oi, "recv") == 0 ? "receive" : "send (a large message is not buffered)");
                goto context;
            }
        }
    // Three or more ranks round a ring, each in a send to the next: a deadlock
    // no pair shows, since every rank waits on a different one.
    int cycle = send_cycle(w, n, ring, sizeof ring);
    if (cycle) {
        m += (size_t)snprintf(buf + m, len - m,
                              "a cycle of blocking sends (a deadlock of %d ranks, %s): every rank sends before "
                              "it receives, and a message too large to buffer waits for its receive; use "
                              "comm_sendrecv or let every other rank receive first. ", cycle, ring);
        goto context;
    }
    // A rank waiting to receive from one that is not sending to it: the
    // message was never sent, went to another rank, or an earlier receive
    // took it. The peer that has gone on (not in any call) says most.
    {
        const Wait *waiter = NULL, *peer = NULL;
        for (int i = 0; i < n; i++) {
            if (!is_op(&w[i], "recv")) continue;
            // A peer without a line of its own (gone on, or ended before
            // its watchdog spoke, as on a slow machine) is not sending either.
            const Wait *p = wait_of(w, n, peer_of(&w[i]));
            if (p && sends_to(p, w[i].rank)) continue;
            if (!waiter || (peer && (!p || (!p->in_call && peer->in_call)))) waiter = &w[i], peer = p;
        }
        if (waiter) {
            m += (size_t)snprintf(buf + m, len - m,
                                  "rank %d waits to receive from rank %d, which is not sending to it: rank %d is "
                                  "%s%s. A missing or stray message: a send that was skipped (a condition off by "
                                  "one?), went to another rank, or was taken by another receive. ",
                                  waiter->rank, peer_of(waiter), peer_of(waiter), peer && peer->in_call ? "in " : "",
                                  peer && peer->in_call ? peer->what : "past it, computing or in a call the watchdog "
                                                                       "does not watch");
            goto context;
        }
    }
    {
        // Ranks in different collectives, or some not in any call.
        char first[32] = "";
        bool mixed = false;
        int computing = -1;
        for (int i = 0; i < n; i++) {
            if (!w[i].in_call) {
                computing = w[i].rank;
                continue;
            }
            char op[32];
            op_of(&w[i], op, sizeof op);
            if (!first[0]) snprintf(first, sizeof first, "%s", op);
            else if (strcmp(first, op) != 0) mixed = true;
        }
        if (computing >= 0 && first[0])
            m += (size_t)snprintf(buf + m, len - m,
                                  "rank %d never reached the call the others wait in (%s): it was computing, "
                                  "stuck in a loop or past a collective it skipped (a collective inside "
                                  "`if (rank == ...)` hangs the others). ", computing, first);
        else if (mixed)
            m += (size_t)snprintf(buf + m, len - m,
                                  "the ranks wait in different calls: they call collectives in different orders, "
                                  "or a rank skipped one; every rank must make the same collective calls in the "
                                  "same order. ");
        else if (first[0])
            m += (size_t)snprintf(buf + m, len - m,
                                  "every rank waits in %s: a message or a rank is missing (a send without its "
                                  "receive, or a group that does not include every rank that calls). ", first);
        else
            m += (size_t)snprintf(buf + m, len - m,
                                  "the ranks were stopped while computing, in no communication call: an endless "
                                  "loop in computation? ");
    }
context:
    // What the program was doing when it hung (the lab's harness names it).
    for (int i = 0; i < n && m + 1 < len; i++)
        if (w[i].context[0]) {
            m += (size_t)snprintf(buf + m, len - m, "It hung while %s. ", w[i].context);
            break;
        }
    if (m + 1 < len) m += (size_t)snprintf(buf + m, len - m, "The watchdog's lines:");
    for (int i = 0; i < n && m + 1 < len; i++)
        m += (size_t)snprintf(buf + m, len - m, " [rank %d] %s%s;", w[i].rank, w[i].in_call ? "in " : "", w[i].what);
    return buf;
}

// ---- did it run ------------------------------------------------------------

static const char *signal_name(int signo) {
    switch (signo) {
    case 6: return " (SIGABRT, an abort)";
    case 7: return " (SIGBUS)";
    case 8: return " (SIGFPE, arithmetic)";
    case 9: return " (SIGKILL)";
    case 11: return " (SIGSEGV, a bad memory access)";
    case 24: return " (SIGXCPU, past the CPU time limit)";
    case 25: return " (SIGXFSZ, a file past the size limit)";
    case 31: return " (SIGSYS, a system call the graded run's sandbox refuses)";
    default: return "";
    }
}

// The first line of `out` that contains `what`, quoted into buf (or "").
static const char *quote_line(const char *out, const char *what, char *buf, size_t len) {
    const char *p = strstr(out, what);
    buf[0] = 0;
    if (!p) return buf;
    const char *b = p;
    while (b > out && b[-1] != '\n') b--;
    size_t n = strcspn(b, "\n");
    snprintf(buf, len, "%.*s", (int)(n < 300 ? n : 300), b);
    return buf;
}

// Why a rank died of a signal, from the signal and what the run printed.
static void diagnose_crash(const char *out, int signo, char *diag, size_t len) {
    // What glibc, the sanitizers and assert() print before an abort says more than the signal.
    static const char *const said[] = {"double free", "free(): ", "malloc(): ", "corrupted ", "munmap_chunk",
                                       "realloc(): ", "stack smashing", "Assertion", "AddressSanitizer",
                                       "runtime error:", NULL};
    char line[320];
    for (const char *const *w = said; *w; w++)
        if (quote_line(out, *w, line, sizeof line)[0]) {
            snprintf(diag, len, "the program said \"%s\": %s", line,
                     strstr(line, "Sanitizer") || strstr(line, "runtime error")
                         ? "the sanitizer names the file and line"
                         : strstr(line, "Assertion") ? "an assertion failed"
                         : "the allocator found its bookkeeping damaged: a buffer freed twice, a pointer "
                           "that mem_alloc/malloc did not return, or a write past the end of a buffer "
                           "(run with SAN=1 builds for the file and line)");
            return;
        }
    switch (signo) {
    case 11:
    case 7:
        snprintf(diag, len, "signal %d is a read or write outside a buffer: check the offsets and lengths "
                 "of blocks and shards, and that no buffer is used after mem_free (a build with SAN=1 "
                 "names the line)", signo);
        break;
    case 6:
        snprintf(diag, len, "signal 6 is an abort: the C library or an assert() stopped the program; "
                 "the lines it printed before are above in the run's output");
        break;
    case 8:
        snprintf(diag, len, "signal 8 is an arithmetic fault: an integer division by zero (a count "
                 "divided by N - 1 at N = 1, or by a block length of 0?)");
        break;
    case 24:
        snprintf(diag, len, "signal 24: the process used more CPU time than the grader allows a run: an "
                 "endless loop in computation?");
        break;
    case 25:
        snprintf(diag, len, "signal 25: the program wrote a file larger than the grader allows (1 GiB); a "
                 "lab writes only its dump and its output, a few megabytes");
        break;
    case 31: {
        // The sandbox's handler printed which call it refused, and why.
        if (quote_line(out, "the sandbox of a graded run refused", line, sizeof line)[0])
            snprintf(diag, len, "the program said \"%s\"", line);
        else
            snprintf(diag, len, "signal 31: the program made a system call that a graded run's sandbox refuses "
                     "(a new process, another program, System V IPC, a file opened for writing): a lab's code "
                     "computes, communicates and allocates through the course's interfaces alone");
        break;
    }
    case 9:
        snprintf(diag, len, "signal 9: the process was killed from outside, most often by the kernel "
                 "when memory ran out (something allocated far too much?)");
        break;
    default:
        snprintf(diag, len, "the program died of signal %d", signo);
    }
}

// ---- a dump's shape ----------------------------------------------------------

// Every value the checks read, checked for kind and shape before any check
// reads it: a malformed dump is a failed run with its reason, never a
// grader that stops (a division by a world size of 0, text read as numbers).
static const char *dump_malformed(const Run *run, char *why, size_t len) {
    const DumpFile *d = run->dump;
    const char *bad;
    uint64_t one[1] = {1};
    if ((bad = dump_expect(d, "meta/world_size", DUMP_KIND_NUMBERS, 0, NULL, true, why, len))) return bad;
    double n = dump_get(dump_find(d, "meta/world_size"), 0);
    if (!(n >= 1 && n <= 4096 && n == floor(n)) || (run->spec && run->spec->np > 0 && n != run->spec->np)) {
        snprintf(why, len, "the dump's meta/world_size is %g, not the run's %d ranks", n, run->spec ? run->spec->np : 0);
        return why;
    }
    uint64_t N = (uint64_t)n;
    // Texts are the run's description, lab01's names of foreign calls and
    // the names a harness reports (".../*_name"); everything else is
    // numbers, and a table has a row per rank.
    for (int i = 0; i < d->count; i++) {
        const char *name = d->arrays[i].name;
        size_t nl = strlen(name);
        bool text = strcmp(name, "meta/program") == 0 || strcmp(name, "meta/config") == 0 ||
                    (nl > 13 && strcmp(name + nl - 13, "/foreign_call") == 0) ||
                    (nl > 5 && strcmp(name + nl - 5, "_name") == 0);
        if ((bad = dump_expect(d, name, text ? DUMP_KIND_TEXT : DUMP_KIND_NUMBERS, -1, NULL, true, why, len)))
            return bad;
        if (strncmp(name, "check/unfinished/", 17) == 0 &&
            (bad = dump_expect(d, name, DUMP_KIND_NUMBERS, -1, one, true, why, len)))
            return bad;
    }
    uint64_t cat[2] = {N, MEM_NCAT}, ops[2] = {N, COMM_NOPS}, rows[1] = {N};
    static const char *const mem2[] = {"mem/peak", "mem/live", NULL}, *const comm2[] = {"comm/calls", "comm/bytes", "comm/bus_bytes", NULL},
                             *const per_rank[] = {"mem/peak_total", "mem/measured_peak", "mem/resident_seal", "mem/resident_growth",
                                                  "mem/heap_growth", "ops/matmul", "ops/layernorm", "comm/helper_calls",
                                                  "comm/direct_mpi_calls", "mem/heap_seal", "comm/helper_bytes", "comm/step_helper_calls",
                                                  "comm/step_helper_bytes", NULL};
    for (const char *const *k = mem2; *k; k++)
        if ((bad = dump_expect(d, *k, DUMP_KIND_NUMBERS, 2, cat, false, why, len))) return bad;
    for (const char *const *k = comm2; *k; k++)
        if ((bad = dump_expect(d, *k, DUMP_KIND_NUMBERS, 2, ops, false, why, len))) return bad;
    for (const char *const *k = per_rank; *k; k++)
        if ((bad = dump_expect(d, *k, DUMP_KIND_NUMBERS, 1, rows, false, why, len))) return bad;
    if ((bad = dump_expect(d, "loss", DUMP_KIND_NUMBERS, 1, NULL, false, why, len))) return bad;
    // Arrays the reference has too are compared element by element: the same shape.
    for (int i = 0; run->ref && i < d->count; i++) {
        const DumpArray *a = &d->arrays[i], *b = dump_find(run->ref, a->name);
        if (!b || strncmp(a->name, "meta/", 5) == 0 || strncmp(a->name, "mem/", 4) == 0 ||
            strncmp(a->name, "comm/", 5) == 0 || strncmp(a->name, "ops/", 4) == 0 || strcmp(a->name, "loss") == 0)
            continue;
        if ((bad = dump_expect(d, a->name, DUMP_KIND_NUMBERS, b->ndim, b->shape, true, why, len))) return bad;
    }
    return NULL;
}

bool check_ran(Grader *g, const Run *run, bool nonzero_exit_is_failure) {
    char fig[160], diag[1024];
    const char *hang = diagnose_hang(run->output, diag, sizeof diag);
    if (run->output_limited) {
        grade_check(g, run, "run ends", false, "printed more than 20 MB", "at most 20 MB of output",
                    "the program printed so much that it was stopped: a print inside a loop (one that "
                    "never ends?)");
        return false;
    }
    if (run->lingered) {
        grade_check(g, run, "run ends", false, "its processes did not end", "ends after its dump",
                    "the program wrote its dump, but a process it started (a fork or a daemon of the "
                    "student's code) kept running after it, and was stopped: every process a run starts "
                    "must end with it");
        return false;
    }
    if (run->timed_out) {
        snprintf(fig, sizeof fig, "stopped after %.0f s", run->seconds);
        grade_check(g, run, "run ends", false, fig, "ends within the time limit",
                    hang ? hang : "it ran past the time limit and no rank's watchdog spoke: an endless loop "
                                  "in computation (not in a communication call)?");
        return false;
    }
    if (strstr(run->output, "watchdog: waited")) {
        grade_check(g, run, "run ends", false, "hung; ended by the watchdog", "no hang", hang);
        return false;
    }
    if (!run->dump) {
        const char *err = strstr(run->output, "error at ");
        const char *sig = strstr(run->output, "exited on signal");
        // A rank killed by a signal is reported by mpirun either in words
        // ("exited on signal N") or, when it died before its launcher had
        // registered it (a constructor's crash), as the exit code 128 + N.
        int signo = sig ? atoi(sig + strlen("exited on signal"))
                        : run->exit_code > 128 && run->exit_code < 128 + 32 ? run->exit_code - 128 : 0;
        if (strstr(run->output, "without calling \"finalize\"") || strstr(run->output, "did not call \"init\"")) {
            snprintf(fig, sizeof fig, "ended early (exit %d)", run->exit_code);
            grade_check(g, run, "run ends", false, fig, "a complete dump",
                        "a rank ended the program early, without writing its results: an exit() or a "
                        "return from main in the student's code?");
        } else if (run->exit_code == 0) {
            snprintf(fig, sizeof fig, "exit 0 but %s", run->dump_error ? run->dump_error : "no dump");
            grade_check(g, run, "run ends", false, fig, "a complete dump",
                        "it exited 0 without writing its results: did the harness finish (a return or "
                        "exit() in the student's code ends the program early)?");
        } else if (signo > 0) {
            snprintf(fig, sizeof fig, "crashed: signal %d%s (exit %d)", signo, signal_name(signo), run->exit_code);
            diagnose_crash(run->output, signo, diag, sizeof diag);
            grade_check(g, run, "run ends", false, fig, "exit 0", diag);
        } else {
            snprintf(fig, sizeof fig, "failed (exit %d)", run->exit_code);
            snprintf(diag, sizeof diag, "%.600s", err ? err : run->output + (strlen(run->output) > 600 ? strlen(run->output) - 600 : 0));
            grade_check(g, run, "run ends", false, fig, "exit 0", diag);
        }
        return false;
    }
    const char *malformed = dump_malformed(run, diag, sizeof diag);
    if (malformed) {
        grade_check(g, run, "run ends", false, "a malformed dump", "a dump the grader can read", malformed);
        return false;
    }
    if (nonzero_exit_is_failure && run->exit_code != 0) {
        snprintf(fig, sizeof fig, "exit %d", run->exit_code);
        grade_check(g, run, "run ends", false, fig, "exit 0", "it wrote its dump but exited non-zero");
        return false;
    }
    snprintf(fig, sizeof fig, "%.1f s", run->seconds);
    grade_check(g, run, "run ends", true, fig, "ends with a dump", NULL);
    return true;
}

// ---- equivalence with the reference ----------------------------------------

// Squared error per shard of each unit, for the "one shard wrong" diagnosis.
// Units are the tensors' name prefixes ("block2"), in dump order, which is
// the units' flat layout.
static int wrong_shards(const DumpFile *lab, const DumpFile *ref, int N) {
    if (N < 2) return 0;
    double *per_shard = calloc((size_t)N, sizeof(double));
    double total = 0;
    for (int i = 0; i < ref->count;) {
        const char *name = ref->arrays[i].name;
        if (strncmp(name, "param/final/", 12) != 0) {
            i++;
            continue;
        }
        const char *dot = strchr(name + 12, '.');
        size_t plen = dot ? (size_t)(dot - name) : strlen(name);
        // The unit: consecutive tensors with the same prefix.
        uint64_t size = 0;
        int j = i;
        while (j < ref->count && strncmp(ref->arrays[j].name, name, plen) == 0 && ref->arrays[j].name[plen] == '.')
            size += ref->arrays[j++].count;
        uint64_t shard = (size + (uint64_t)N - 1) / (uint64_t)N, pos = 0;
        for (int k = i; k < j; k++) {
            const DumpArray *b = &ref->arrays[k], *a = dump_find(lab, b->name);
            for (uint64_t e = 0; a && a->count == b->count && e < b->count; e++, pos++) {
                double d = dump_get(a, e) - dump_get(b, e);
                per_shard[pos / shard] += d * d;
                total += d * d;
            }
        }
        i = j > i ? j : i + 1;
    }
    // A bit per shard that holds more than 1% of the error.
    int who = 0;
    for (int r = 0; r < N && r < 30 && total > 0; r++)
        if (per_shard[r] > 0.01 * total) who |= 1 << r;
    free(per_shard);
    return who;
}

static double frob_ratio(const DumpFile *lab, const DumpFile *ref, const char *prefix) {
    double a = 0, b = 0;
    size_t plen = strlen(prefix);
    for (int i = 0; i < ref->count; i++) {
        if (strncmp(ref->arrays[i].name, prefix, plen) != 0) continue;
        const DumpArray *x = dump_find(lab, ref->arrays[i].name);
        if (!x || x->count != ref->arrays[i].count) continue;
        for (uint64_t e = 0; e < x->count; e++) {
            a += dump_get(x, e) * dump_get(x, e);
            b += dump_get(&ref->arrays[i], e) * dump_get(&ref->arrays[i], e);
        }
    }
    return b > 0 ? sqrt(a / b) : 0;
}

// What the parameters a run started from say, for a first step that is off:
// "check/init_sumsq_per_rank" (the lab's) against the reference's param/init.
static const char *start_diagnosis(const DumpFile *lab, const DumpFile *ref) {
    static char buf[400];
    const DumpArray *init = dump_find(lab, "check/init_sumsq_per_rank");
    buf[0] = 0;
    if (!init || init->type == DUMP_TEXT || init->count == 0) return buf;
    double want = 0;
    bool have = false;
    for (int i = 0; i < ref->count; i++)
        if (strncmp(ref->arrays[i].name, "param/init/", 11) == 0 && ref->arrays[i].type != DUMP_TEXT)
            want += dump_sumsq(&ref->arrays[i]), have = true;
    if (!have) return buf;
    bool equal = true;
    for (uint64_t r = 1; r < init->count; r++) equal &= dump_get(init, r) == dump_get(init, 0);
    double got = dump_get(init, 0);
    bool rank0 = fabs(got - want) <= 1e-5 * want;
    if (!equal)
        snprintf(buf, sizeof buf, ". The replicas did not start equal (each rank's initial parameters differ): "
                 "broadcast rank 0's parameters to every rank before training");
    else if (!rank0)
        snprintf(buf, sizeof buf, ". The replicas started equal, but not from rank 0's parameters (their sum of "
                 "squares is %.6g, rank 0's initialisation gives %.6g): broadcast from root 0, after the "
                 "parameters are initialised", got, want);
    else
        snprintf(buf, sizeof buf, ". The ranks started from the reference's parameters, so look at the "
                 "forward pass and the rows each rank reads");
    return buf;
}

// The sentence for an equivalence check that failed by at most a few times
// its bound while the first step agreed: the size of the rounding that
// machines legitimately differ by, not yet a bug.
static const char *near_rounding(double ratio, bool first_step_ok, char *buf, size_t len) {
    buf[0] = 0;
    if (ratio <= 3 && first_step_ok)
        snprintf(buf, len, " This is only %.1f times the bound, close to the rounding that correct code on "
                 "another machine, BLAS kernel or GPU may show, while the first step agrees: run again with "
                 "--steps 1 and compare the first-step gradient; a bug in the update usually shows there at "
                 "once, and if it does not, report the run (the yardstick may be short).", ratio);
    return buf;
}

// The causes of this lab whose factor `ratio` is (within 3%), joined into
// buf ("" when none): "x2.00 the reference's, which is t = 2: ...; or dp = 2: ...".
static const char *ratio_cause(const Run *run, double ratio, const char *what, char *buf, size_t len) {
    const LabSpec *spec = run->lab;
    RatioCause causes[MAX_RATIO_CAUSES];
    int n = spec && spec->ratio_causes ? spec->ratio_causes(run, causes) : 0, found = 0;
    size_t used = 0;
    buf[0] = 0;
    for (int i = 0; i < n && used < len; i++) {
        if (!(fabs(ratio - causes[i].factor) <= 0.03 * causes[i].factor) || causes[i].factor == 1) continue;
        int k = found++ == 0 ? snprintf(buf, len, "%s are x%.3f the reference's, %s", what, ratio, causes[i].cause)
                             : snprintf(buf + used, len - used, "; or %s", causes[i].cause);
        used += k > 0 ? (size_t)k : 0;
    }
    return buf;
}

// The norm of dump array `name` over the reference's (0 when either is missing).
static double array_ratio(const DumpFile *lab, const DumpFile *ref, const char *name) {
    const DumpArray *x = dump_find(lab, name), *y = dump_find(ref, name);
    if (!x || !y || x->count != y->count || x->type == DUMP_TEXT) return 0;
    double b = dump_sumsq(y);
    return b > 0 ? sqrt(dump_sumsq(x) / b) : 0;
}

// The first moments that differ, when one of the lab's factors explains
// most of them while the whole does not (the replicated tensors' gradients
// averaged over the TP group: they alone are x1/t): "the first moments of
// block0.ln1.w and 9 other tensors (of 12 that differ) are x0.500 the
// reference's, which is 1/t = 1/2: ..." ("" when none does).
static const char *moments_cause(const Run *run, const Measured *m, char *buf, size_t len) {
    const LabSpec *spec = run->lab;
    RatioCause causes[MAX_RATIO_CAUSES];
    int nc = spec && spec->ratio_causes ? spec->ratio_causes(run, causes) : 0, nbad = 0;
    int count[MAX_RATIO_CAUSES] = {0};
    double a[MAX_RATIO_CAUSES] = {0}, b[MAX_RATIO_CAUSES] = {0};
    char first[MAX_RATIO_CAUSES][96];
    buf[0] = 0;
    for (int t = 0; t < m->ntensors && nc > 0; t++) {
        double r;
        if (moment_within_tol(run, t, 0, &r)) continue;
        nbad++;
        char name[160];
        snprintf(name, sizeof name, "optim/m/%s", m->names[t]);
        double q = array_ratio(run->dump, run->ref, name);
        for (int i = 0; i < nc; i++)
            if (causes[i].factor != 1 && fabs(q - causes[i].factor) <= 0.03 * causes[i].factor) {
                if (count[i]++ == 0) snprintf(first[i], sizeof first[i], "%s", m->names[t]);
                double y = dump_sumsq(dump_find(run->ref, name));
                a[i] += q * q * y, b[i] += y;
            }
    }
    int best = -1;
    for (int i = 0; i < nc; i++)
        if (count[i] > 0 && (best < 0 || count[i] > count[best])) best = i;
    if (best < 0 || 2 * count[best] < nbad || !(b[best] > 0)) return buf;
    char what[300];
    if (count[best] == 1)
        snprintf(what, sizeof what, "the first moments of %s (of %d tensors that differ)", first[best], nbad);
    else
        snprintf(what, sizeof what, "the first moments of %s and %d other tensors (of %d that differ)", first[best],
                 count[best] - 1, nbad);
    return ratio_cause(run, sqrt(a[best] / b[best]), what, buf, len);
}

void check_equivalence(Grader *g, const Run *run, int N) {
    // TF32 matrix products round to 10 bits of mantissa: such a run is not
    // the same training up to fp32 rounding, and is not graded.
    if (config_value(run->dump, "tf32", 0) != 0) {
        grade_check(g, run, "an fp32 run", false, "--tf32", "no --tf32",
                    "a run with --tf32 rounds its matrix products to 10 bits of mantissa, far beyond fp32's "
                    "rounding: it is not graded; run without --tf32");
        return;
    }
    // Without a reference (a lab program run with --no-ref) there is nothing
    // to compare with; the other checks still run.
    if (!run->ref || !run->measured) return;
    const DumpFile *lab = run->dump, *ref = run->ref;
    const Measured *m = run->measured;
    // The words a diagnosis may use: data parallelism's (replicas, averaged
    // gradients, a unit's all-reduce) and ZeRO's shards only in the labs
    // that teach them.
    const LabSpec *spec = run->lab;
    unsigned words = spec ? spec->words : 0;
    bool dp = words & WORDS_DATA_PARALLEL, shards = words & WORDS_SHARDS;
    char fig[160], bound[160], diag[1024], near[400];

    // The first gradient, when the lab dumps it: the clearest evidence, and
    // nothing has amplified its rounding yet.
    bool have_grad = false, grad_ok = true;
    int grad_bad = 0, grad_stale = 0;
    char bad_unit[96] = "";
    bool one_unit = true;   // every wrong tensor in the same unit
    char grad_worst[96] = "";
    double grad_worst_rel = 0, grad_ratio = 0;
    for (int t = 0; t < m->ntensors; t++) {
        char name[160];
        snprintf(name, sizeof name, "grad/first/%s", m->names[t]);
        const DumpArray *a = dump_find(lab, name), *b = dump_find(ref, name);
        if (!a || !b) continue;
        have_grad = true;
        TensorError e;
        tensor_error(lab, ref, name, &e);
        double tol = TOL_FACTOR * fmax(REL_FLOOR, fmax(m->grad_rel[t], m->grad_rel_median));
        if (!(e.rel / tol <= grad_ratio)) grad_ratio = e.rel / tol;
        if (!(e.rel <= tol)) {
            grad_bad++;
            // A gradient that is (nearly) missing: all-reduced too early, or a copy never updated.
            double nb = dump_sumsq(b);
            if (nb > 0 && dump_sumsq(a) < 1e-4 * nb) grad_stale++;
            size_t ulen = strcspn(m->names[t], ".");
            if (!bad_unit[0]) snprintf(bad_unit, sizeof bad_unit, "%.*s", (int)ulen, m->names[t]);
            else if (strncmp(bad_unit, m->names[t], ulen) != 0 || bad_unit[ulen] != 0) one_unit = false;
            if (!(e.rel <= grad_worst_rel)) grad_worst_rel = e.rel, snprintf(grad_worst, sizeof grad_worst, "%s", m->names[t]);
        }
    }
    // Per-step losses.
    bool loss_ok = false;
    const DumpArray *ll = dump_find(lab, "loss"), *lr = dump_find(ref, "loss");
    if (!ll || !lr || ll->count != lr->count) {
        snprintf(fig, sizeof fig, "%llu steps", ll ? (unsigned long long)ll->count : 0ull);
        snprintf(bound, sizeof bound, "%llu steps", lr ? (unsigned long long)lr->count : 0ull);
        grade_check(g, run, "loss per step", false, fig, bound, "the dump's loss array is missing or has the wrong length");
    } else {
        double worst = 0, tol = TOL_FACTOR * fmax(m->loss, m->loss_ulp);
        uint64_t at = 0, first = lr->count;   // the worst step, and the first above tolerance
        for (uint64_t s = 0; s < lr->count; s++) {
            double d = fabs(dump_get(ll, s) - dump_get(lr, s));
            if (!(d <= worst)) worst = d, at = s;   // NaN counts as the worst
            if (!(d <= tol) && first == lr->count) first = s;
        }
        snprintf(fig, sizeof fig, "max |dloss| %.2e (step %llu)", worst, (unsigned long long)at + 1);
        snprintf(bound, sizeof bound, "<= %.1e (%dx measured)", tol, TOL_FACTOR);
        diag[0] = 0;
        if (first < lr->count) {
            uint64_t f = first;
            int n = snprintf(diag, sizeof diag, "the loss first leaves the reference at step %llu (%.6g, the "
                             "reference's %.6g)", (unsigned long long)f + 1, dump_get(ll, f), dump_get(lr, f));
            if (f > 0 && have_grad && grad_bad > 0)
                snprintf(diag + n, sizeof diag - (size_t)n, "; the steps before agree, so the forward pass and "
                         "the start were right, and the first step's gradients are wrong (the first-step "
                         "gradient check says how)");
            else if (f > 0 && have_grad)
                snprintf(diag + n, sizeof diag - (size_t)n, "; the steps before agree and the first step's "
                         "gradients are right, so an update differs: the optimizer's (its step count, its "
                         "moments), or the gradients from the second step on (gradients not zeroed between "
                         "steps, a buffer of the step before read again)");
            else if (f > 0)
                snprintf(diag + n, sizeof diag - (size_t)n, "; the steps before agree, so the forward pass and "
                         "the start were right and an update differs (the gradients or the optimizer)");
            else
                snprintf(diag + n, sizeof diag - (size_t)n, "; already the first step differs, so the model "
                         "did not start from the reference's parameters or the forward pass or the data "
                         "differ%s", start_diagnosis(lab, ref));
        }
        loss_ok = worst <= tol;
        grade_check(g, run, "loss per step", loss_ok, fig, bound, diag);
        grade_set_ratio(g, tol > 0 ? worst / tol : INFINITY);
    }

    if (have_grad) {
        double ratio = frob_ratio(lab, ref, "grad/first/");
        char cause[1024];
        snprintf(fig, sizeof fig, "%d of %d tensors differ (worst x%.2g of bound)", grad_bad, m->ntensors, grad_ratio);
        snprintf(bound, sizeof bound, "rel <= %dx measured (median %.1e)", TOL_FACTOR, m->grad_rel_median);
        // One tensor off by one of the lab's factors (wte's gradient summed
        // over the group once too often) names its cause too.
        char worst_name[200], worst_what[160], worst_cause[1024] = "";
        snprintf(worst_name, sizeof worst_name, "grad/first/%s", grad_worst);
        snprintf(worst_what, sizeof worst_what, "%s's gradients", grad_worst);
        if (grad_worst[0] && grad_bad < m->ntensors)
            ratio_cause(run, frob_ratio(lab, ref, worst_name), worst_what, worst_cause, sizeof worst_cause);
        if (ratio_cause(run, ratio, "the gradients", cause, sizeof cause)[0])
            snprintf(diag, sizeof diag, "%s", cause);
        else if (worst_cause[0])
            snprintf(diag, sizeof diag, "%d of %d tensors differ, the worst %s: %s", grad_bad, m->ntensors,
                     grad_worst, worst_cause);
        else if (dp && N > 1 && fabs(ratio - N) < 0.05 * N)
            snprintf(diag, sizeof diag, "the gradients are %.2f times the reference's, about N = %d: they "
                     "were summed over the ranks instead of averaged", ratio, N);
        else if (dp && N > 1 && fabs(ratio - 1.0 / N) < 0.05 / N)
            snprintf(diag, sizeof diag, "the gradients are 1/%d of the reference's: divided by N twice "
                     "(an average of averages)", N);
        else if (dp && grad_bad > 0 && one_unit && grad_bad < m->ntensors)
            snprintf(diag, sizeof diag, "only the gradients of %s differ from the reference (worst %s, relative "
                     "error %.2e), the other units' are right: that unit's all-reduce was not finished before "
                     "the optimizer read it (started but never waited on?), or never started",
                     bad_unit, grad_worst, grad_worst_rel);
        else if (dp && grad_stale > 0)
            snprintf(diag, sizeof diag, "%d tensors have (almost) no gradient after the averaging: they "
                     "were all-reduced before their backward pass was done, or from a copy that was not "
                     "updated (worst: %s)", grad_stale, grad_worst);
        else if (grad_stale > 0)
            snprintf(diag, sizeof diag, "%d tensors have (almost) no gradient where the reference has one "
                     "(worst: %s): their backward pass never reached them, or it was read before it was done",
                     grad_stale, grad_worst);
        else
            snprintf(diag, sizeof diag, "worst: %s, relative error %.2e (norm ratio to the reference %.3f)",
                     grad_worst, grad_worst_rel, ratio);
        grad_ok = grad_bad == 0;
        grade_check(g, run, "first-step gradient", grad_ok, fig, bound, diag);
        grade_set_ratio(g, grad_ratio);
    }
    bool first_step_ok = loss_ok && grad_ok;

    // A factor of the lab's that the first moments of the tensors that
    // differ are off by, when the first step's gradients cannot tell.
    bool have_moments = dump_find(lab, "optim/m/head.lm_head") && dump_find(ref, "optim/m/head.lm_head");
    char moments_named[1024] = "";
    if (have_moments && (!have_grad || !grad_ok)) moments_cause(run, m, moments_named, sizeof moments_named);

    // Final parameters, tensor by tensor: the bulk against the measured
    // rounding, every element within Adam's reach.
    int bad = 0, missing = 0, beyond_reach = 0;
    char worst_name[96] = "", reach_name[96] = "";
    double worst_rel = 0, param_ratio = 0, worst_abs = 0;
    for (int t = 0; t < m->ntensors; t++) {
        char name[160];
        snprintf(name, sizeof name, "param/final/%s", m->names[t]);
        if (!dump_find(lab, name)) {
            missing++;
            continue;
        }
        TensorError e;
        tensor_error(lab, ref, name, &e);
        double tol_rel = TOL_FACTOR * fmax(REL_FLOOR, fmax(m->param_bulk[t], m->param_bulk_median));
        double r = fmax(e.bulk / tol_rel, e.abs_ / m->adam_reach);
        if (!(r <= param_ratio)) param_ratio = r;
        if (!(e.abs_ <= worst_abs)) worst_abs = e.abs_, snprintf(reach_name, sizeof reach_name, "%s", m->names[t]);
        if (!(e.abs_ <= m->adam_reach)) beyond_reach++;
        if (!(e.bulk <= tol_rel) || !(e.abs_ <= m->adam_reach)) {
            bad++;
            if (!(e.bulk <= worst_rel) || !worst_name[0])
                worst_rel = e.bulk, snprintf(worst_name, sizeof worst_name, "%s", m->names[t]);
        }
    }
    snprintf(fig, sizeof fig, "%d of %d tensors differ%s (worst x%.2g of bound)", bad + missing, m->ntensors,
             missing ? " or missing" : "", missing ? INFINITY : param_ratio);
    snprintf(bound, sizeof bound, "bulk rel <= %dx measured (median %.1e), abs <= %.1e (Adam's reach)", TOL_FACTOR,
             m->param_bulk_median, m->adam_reach);
    diag[0] = 0;
    if (missing) {
        snprintf(diag, sizeof diag, "%d final parameter tensors are missing from the dump", missing);
    } else if (bad) {
        int shard_bits = shards ? wrong_shards(lab, ref, N) : 0, nshards = __builtin_popcount((unsigned)shard_bits);
        char list[128] = "";
        for (int q = 0, k = 0; q < N && q < 30; q++)
            if (shard_bits >> q & 1) k += snprintf(list + k, sizeof list - (size_t)k, "%s%d", k ? ", " : "", q);
        const DumpArray *sums = dump_find(lab, "check/param_sumsq_per_rank");
        const DumpArray *init = dump_find(lab, "check/init_sumsq_per_rank");
        bool init_differ = false;
        for (uint64_t r = 1; init && r < init->count; r++) init_differ |= dump_get(init, r) != dump_get(init, 0);
        bool others_differ = false;
        if (sums && sums->count > 1) {
            // Replicas kept equal are equal to the bit: the same numbers, updated the same way.
            for (uint64_t r = 1; r < sums->count; r++) others_differ |= dump_get(sums, r) != dump_get(sums, 0);
        }
        if (beyond_reach)
            snprintf(diag, sizeof diag, "%d tensors have elements further from the reference's than AdamW can move "
                     "an element in %llu steps (worst %s, %.3g; Adam's reach %.3g): the update itself is wrong (a "
                     "step applied twice, a learning rate or a bias correction off), or the values are garbage",
                     beyond_reach, lr ? (unsigned long long)lr->count : 0ull, reach_name, worst_abs, m->adam_reach);
        else if (init_differ)
            snprintf(diag, sizeof diag, "the replicas did not start equal (each rank's initial parameters "
                     "differ): broadcast rank 0's parameters to every rank before training");
        else if (others_differ)
            snprintf(diag, sizeof diag, "the ranks' replicas differ from each other: their gradients were not "
                     "all made equal (an all-reduce missing, not waited on, or of a stale buffer)");
        else if (nshards == 1)
            snprintf(diag, sizeof diag, "only shard %s of each unit (the part rank %s holds) is wrong: check "
                     "which slice a rank updates and gathers (shard_offset, the padding of the last shard)",
                     list, list);
        else if (nshards > 1 && nshards < N && !(shard_bits & 1))
            snprintf(diag, sizeof diag, "the error lies in the shards of ranks %s, while rank 0's shard is "
                     "right: the shards' offsets are off (rank 0's is 0 whatever the formula): check "
                     "shard_offset and the padding (every shard is shard_len long)", list);
        else if (moments_named[0])
            snprintf(diag, sizeof diag, "worst: %s, bulk relative error %.2e; AdamW's first moments name a factor "
                     "(the final optimizer state's check): %s", worst_name, worst_rel, moments_named);
        else
            snprintf(diag, sizeof diag, "worst: %s, bulk relative error %.2e.%s", worst_name, worst_rel,
                     near_rounding(param_ratio, first_step_ok, near, sizeof near));
    }
    grade_check(g, run, "final parameters", bad == 0 && missing == 0, fig, bound, diag);
    grade_set_ratio(g, missing ? INFINITY : param_ratio);

    // AdamW's moments, when the lab dumps them (gathered from the shards):
    // the first moment is a running mean of the gradients, so gradients
    // summed instead of averaged show in it even where Adam's normalised
    // step hides them in the parameters.
    if (have_moments) {
        int mbad = 0;
        char mworst[160] = "";
        double mworst_ratio = 0;
        for (int t = 0; t < m->ntensors; t++)
            for (int which = 0; which < 2; which++) {
                char name[160];
                snprintf(name, sizeof name, "optim/%s/%s", which ? "v" : "m", m->names[t]);
                double r;
                if (!moment_within_tol(run, t, which, &r)) mbad++;
                if (!(r <= mworst_ratio)) mworst_ratio = r, snprintf(mworst, sizeof mworst, "%s", name);
            }
        double ratio = frob_ratio(lab, ref, "optim/m/");
        char cause[1024];
        snprintf(fig, sizeof fig, "%d of %d tensors differ (worst x%.2g of bound)", mbad, 2 * m->ntensors, mworst_ratio);
        snprintf(bound, sizeof bound, "bulk rel <= %dx measured (median %.1e)", TOL_FACTOR, m->m_bulk_median);
        if ((!have_grad || !grad_ok) &&
            ratio_cause(run, ratio, "AdamW's first moments (a running mean of the gradients)", cause,
                        sizeof cause)[0])
            snprintf(diag, sizeof diag, "%s", cause);
        else if (moments_named[0])
            snprintf(diag, sizeof diag, "%s", moments_named);
        else if (have_grad && grad_ok && mbad > 0)
            snprintf(diag, sizeof diag, "worst: %s (first-moment norm ratio %.3f). The first step's gradients are "
                     "right, so the gradients of a later step differ: not zeroed between steps (each step's added to "
                     "the last's), a buffer of the step before read again, or the optimizer's own state", mworst,
                     ratio);
        else if (dp && N > 1 && fabs(ratio - N) < 0.05 * N)
            snprintf(diag, sizeof diag, "AdamW's first moment is %.2f times the reference's, about N = %d: the "
                     "gradients were summed over the ranks instead of averaged", ratio, N);
        else
            snprintf(diag, sizeof diag, "worst: %s, %.3g times its bound (first-moment norm ratio %.3f).%s", mworst,
                     mworst_ratio, ratio, near_rounding(mworst_ratio, first_step_ok, near, sizeof near));
        grade_check(g, run, "final optimizer state", mbad == 0, fig, bound, diag);
        grade_set_ratio(g, mworst_ratio);
    }
}

// ---- communication volume --------------------------------------------------

// What a rank's collectives were, from the dump's per-operation counters:
// "all_reduce 12 calls 6.9 MB, send 3 calls 1.2 kB".
static void calls_of(const DumpFile *d, uint64_t rank, char *buf, size_t len) {
    const DumpArray *calls = dump_find(d, "comm/calls"), *bytes = dump_find(d, "comm/bytes");
    size_t n = 0;
    buf[0] = 0;
    if (!calls || !bytes || calls->ndim != 2 || rank >= calls->shape[0]) return;
    for (uint64_t k = 0; k < calls->shape[1] && k < COMM_NOPS && n + 1 < len; k++) {
        double c = dump_get(calls, rank * calls->shape[1] + k), b = dump_get(bytes, rank * bytes->shape[1] + k);
        if (c == 0) continue;
        char fb[32];
        n += (size_t)snprintf(buf + n, len - n, "%s%s %.0f call%s %s", n ? ", " : "", comm_op_name((CommOp)k), c,
                              c == 1 ? "" : "s", core_fmt_bytes(b, fb, sizeof fb));
    }
    if (!n) snprintf(buf, len, "no collective at all");
}

double check_comm_volume(Grader *g, const Run *run, double expected, double least, const char *formula,
                         const char *diagnosis_if_more) {
    const DumpArray *bus = dump_find(run->dump, "comm/bus_bytes");
    char fig[160], bound[320], b1[32], b2[32], b3[32], diag[1000], calls[400];
    if (!bus || bus->ndim != 2) {
        grade_check(g, run, "bytes communicated per rank", false, "no comm/bus_bytes", formula,
                    "the harness did not write its counters");
        return 0;
    }
    // The rank that sent the most, and the one that sent the least.
    double most = -1, fewest = INFINITY;
    uint64_t at_most = 0, at_least = 0;
    for (uint64_t r = 0; r < bus->shape[0]; r++) {
        double total = 0;
        for (uint64_t k = 0; k < bus->shape[1]; k++) total += dump_get(bus, r * bus->shape[1] + k);
        if (total > most) most = total, at_most = r;
        if (total < fewest) fewest = total, at_least = r;
    }
    // The formula is what the lab's algorithm moves, and `least` the fewest
    // bytes a legitimate variant of it moves (ZeRO-3 keeping the last unit
    // gathered from its forward to its backward, as FSDP does): more is the
    // lab's cost done wrong, and fewer is not a saving but another algorithm
    // (the whole weights gathered once instead of tensor parallelism), or
    // communication that never happened. Each call rounds its bus bytes to
    // a byte: 0.5% either way.
    bool above = expected > 0 ? most > 1.005 * expected : most > 0;
    bool below = least > 0 && fewest < 0.995 * least;
    double worst = above || !below ? most : fewest;
    uint64_t at = above || !below ? at_most : at_least;
    double worst_ratio = expected > 0 ? worst / expected : (worst > 0 ? INFINITY : 1);
    snprintf(fig, sizeof fig, "%s (rank %llu, x%.3f)", core_fmt_bytes(worst, b1, sizeof b1), (unsigned long long)at,
             worst_ratio);
    if (least < expected)
        snprintf(bound, sizeof bound, "%s to %s = %s", core_fmt_bytes(least, b3, sizeof b3), formula,
                 core_fmt_bytes(expected, b2, sizeof b2));
    else
        snprintf(bound, sizeof bound, "= %s = %s", formula, core_fmt_bytes(expected, b2, sizeof b2));
    calls_of(run->dump, at, calls, sizeof calls);
    if (above)
        snprintf(diag, sizeof diag, "%.2f times the bytes the formula allows: %s. Rank %llu's collectives: %s",
                 worst_ratio, diagnosis_if_more, (unsigned long long)at, calls);
    else
        snprintf(diag, sizeof diag, "%.2f of the bytes the lab's algorithm needs (%s): fewer is not a saving but "
                 "another algorithm, or communication that never happened (a collective skipped, or data moved "
                 "around comm.h). Rank %llu's collectives: %s", worst_ratio, formula, (unsigned long long)at, calls);
    grade_check(g, run, "bytes communicated per rank", !above && !below, fig, bound, diag);
    grade_set_ratio(g, worst_ratio);
    return worst_ratio;
}
