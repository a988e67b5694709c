// checks_given.c: each collective of collectives.c run beside the library's
// own on exact inputs and checked, and the demo on tiny tensors (given; the
// student does not edit it).
#include "checks_given.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collectives.h"
#include "core.h"
#include "mem.h"

// ---- which student functions are still unwritten ---------------------------

static int g_todo[NCOLL];

void lab_todo(const char *function) {
    for (int k = 0; k < NCOLL; k++)
        if (strcmp(function, COLL[k].func) == 0) g_todo[k] = 1;
}

bool checks_unwritten(Coll k) { return g_todo[k] != 0; }

// ---- running one collective, the student's or the library's ----------------

static void yours_reduce_scatter(Comm *c, Bufs *b) { ring_reduce_scatter(c, b->in, b->out, b->count); }
static void yours_all_gather(Comm *c, Bufs *b) { ring_all_gather(c, b->in, b->out, b->count); }
static void yours_all_reduce(Comm *c, Bufs *b) { ring_all_reduce(c, b->out, b->count); }
static void yours_tree_broadcast(Comm *c, Bufs *b) { tree_broadcast(c, b->out, b->count, b->root); }
static void yours_chain_broadcast(Comm *c, Bufs *b) { chain_broadcast(c, b->out, b->count, b->root); }

static void library_reduce_scatter(Comm *c, Bufs *b) { comm_reduce_scatter(c, b->in, b->out, b->count, COMM_SUM); }
static void library_all_gather(Comm *c, Bufs *b) { comm_all_gather(c, b->in, b->out, b->count); }
static void library_all_reduce(Comm *c, Bufs *b) { comm_all_reduce(c, b->out, b->count, COMM_SUM); }
static void library_broadcast(Comm *c, Bufs *b) { comm_broadcast(c, b->out, b->count, b->root); }

const Collective COLL[NCOLL] = {
    [C_REDUCE_SCATTER] = {.name = "reduce_scatter", .func = "ring_reduce_scatter", .yours = yours_reduce_scatter,
                          .library = library_reduce_scatter, .layout = WHOLE_TO_BLOCK, .passes = 1,
                          .least = "(N-1)·count floats of a ring"},
    [C_ALL_GATHER] = {.name = "all_gather", .func = "ring_all_gather", .yours = yours_all_gather,
                      .library = library_all_gather, .layout = BLOCK_TO_WHOLE, .passes = 1,
                      .least = "(N-1)·count floats of a ring"},
    [C_ALL_REDUCE] = {.name = "all_reduce", .func = "ring_all_reduce", .yours = yours_all_reduce,
                      .library = library_all_reduce, .layout = ONE_BUFFER, .passes = 2,
                      .least = "2(N-1)·count floats of a ring"},
    [C_TREE_BCAST] = {.name = "broadcast tree", .func = "tree_broadcast", .yours = yours_tree_broadcast,
                      .library = library_broadcast, .layout = ONE_BUFFER, .rooted = true, .passes = 1,
                      .least = "(N-1)·count floats of a broadcast"},
    [C_CHAIN_BCAST] = {.name = "broadcast chain", .func = "chain_broadcast", .yours = yours_chain_broadcast,
                       .library = library_broadcast, .layout = ONE_BUFFER, .rooted = true, .passes = 1,
                       .least = "(N-1)·count floats of a broadcast"},
};

// The watchdog's timeout during a check: a check takes milliseconds, so a
// hung one should cost seconds, not the whole run's --timeout.
static double g_timeout, g_check_timeout;
enum { CHECK_TIMEOUT_S = 10 };
static uint64_t g_seed;

void checks_init(uint64_t seed, double timeout) {
    g_seed = seed;
    g_timeout = timeout;
    g_check_timeout = timeout > 0 ? fmin(timeout, CHECK_TIMEOUT_S) : 0;   // 0: no watchdog at all
}

// Element i of rank r's input: an integer in [-8, 8], shifted by the seed so
// that every --seed gives other inputs (a result cannot be learnt by heart).
static float input_value(int r, size_t i) {
    return (float)((int)(((uint64_t)r * 7 + i * 3 + g_seed) % 17) - 8);
}

Bufs bufs_make(Comm *c, Coll k, size_t count, int root, bool in_place) {
    int r = comm_rank(c);
    size_t off, len;
    comm_block(count, comm_size(c), r, &off, &len);
    Bufs b = {.count = count, .root = root};
    float *host = malloc((count ? count : 1) * sizeof(float));
    switch (COLL[k].layout) {
    case WHOLE_TO_BLOCK:
        b.in_count = count, b.out_count = len;
        b.in = mem_alloc_floats(count, MEM_COMM, "input");
        b.own_in = true;
        b.out = mem_alloc_floats(len, MEM_COMM, "output");
        for (size_t i = 0; i < count; i++) host[i] = input_value(r, i);
        mem_from_host(b.in, host, count * sizeof(float));
        break;
    case BLOCK_TO_WHOLE:
        b.in_count = len, b.out_count = count;
        b.out = mem_alloc_floats(count, MEM_COMM, "output");
        b.own_in = !in_place;
        b.in = in_place ? b.out + off : mem_alloc_floats(len, MEM_COMM, "input");
        for (size_t i = 0; i < len; i++) host[i] = input_value(r, off + i);
        mem_from_host(b.in, host, len * sizeof(float));
        break;
    case ONE_BUFFER:
        b.in_count = b.out_count = count;
        b.in = b.out = mem_alloc_floats(count, MEM_COMM, "data");
        for (size_t i = 0; i < count; i++) host[i] = input_value(r, i);
        // Ranks other than the root start from garbage that must be replaced.
        if (COLL[k].rooted && r != root)
            for (size_t i = 0; i < count; i++) host[i] = 1000.0f + (float)r;
        mem_from_host(b.in, host, count * sizeof(float));
        break;
    }
    free(host);
    return b;
}

void bufs_free(Bufs *b) {
    if (b->own_in) mem_free(b->in);
    mem_free(b->out);
}

// ---- checks ----------------------------------------------------------------

// The exact result on rank r, computed naively on the host: element i of
// what collective k leaves in this rank's output.
static float expected(Comm *c, Coll k, size_t count, int root, size_t i) {
    int N = comm_size(c), r = comm_rank(c);
    size_t off, len;
    comm_block(count, N, r, &off, &len);
    float sum = 0;
    switch (k) {
    case C_REDUCE_SCATTER:
        for (int q = 0; q < N; q++) sum += input_value(q, off + i);
        return sum;
    case C_ALL_REDUCE:
        for (int q = 0; q < N; q++) sum += input_value(q, i);
        return sum;
    case C_ALL_GATHER:
        for (int q = 0; q < N; q++) {
            size_t qo, ql;
            comm_block(count, N, q, &qo, &ql);
            if (i >= qo && i < qo + ql) return input_value(q, i);
        }
        return NAN;
    default: return input_value(root, i);
    }
}

// The bytes a ring (or, for a broadcast, any tree or chain) must send over
// all ranks together, for one call: each of the N - 1 other blocks of every
// rank crosses one link once per phase (COLL's `passes`), and a broadcast
// reaches each of the N - 1 other ranks once. No correct algorithm of these
// sends less; more is data sent twice.
static double formula_bytes(Coll k, int N, size_t count) {
    double n = (double)(N - 1) * (double)count * sizeof(float);
    return COLL[k].passes * n;
}

static Finding compare(Comm *c, Coll k, size_t count, int root, const Bufs *b) {
    Finding f = {0, -1, 0, 0, -1, "", 0, 0};
    size_t n = b->out_count;
    float *h = malloc((n ? n : 1) * sizeof(float));
    mem_to_host(h, b->out, n * sizeof(float));
    for (size_t i = 0; i < n; i++) {
        float want = expected(c, k, count, root, i);
        if (h[i] != want && f.wrong++ == 0) f.first = (long)i, f.got = h[i], f.want = want;
    }
    free(h);
    return f;
}

static const char *mode_name(Coll k, bool in_place) {
    if (k != C_ALL_GATHER) return "";
    return in_place ? ", in place" : ", out of place";
}

// Run the student's collective and the library's on the same exact inputs;
// each is compared with the naive result. The counters are reset before the
// student's call, so afterwards they hold that call alone.
void check_one(Comm *c, Coll k, size_t count, int root, bool in_place, Finding *student, Finding *library) {
    char what[160], where[32] = "";
    if (COLL[k].rooted) snprintf(where, sizeof where, ", root %d", root);
    snprintf(what, sizeof what, "checking %s, count %zu%s%s", COLL[k].func, count, where, mode_name(k, in_place));
    comm_watchdog_context(what);
    comm_set_timeout(g_check_timeout);

    Bufs s = bufs_make(c, k, count, root, in_place);
    size_t live = mem_live(MEM_COMM);
    comm_stats_reset();
    COLL[k].yours(c, &s);
    CommStats st = comm_stats();
    size_t live_after = mem_live(MEM_COMM);
    *student = compare(c, k, count, root, &s);
    for (int op = 0; op < COMM_NOPS; op++)
        if (op != COMM_OP_SEND && op != COMM_OP_RECV && st.calls[op] > 0) student->used_collective = op;
    if (st.direct_mpi_calls > 0)
        snprintf(student->foreign, sizeof student->foreign, "%s", st.first_direct_mpi);
    else if (st.helper_calls > 0)
        snprintf(student->foreign, sizeof student->foreign, "%s", st.last_helper);
    student->sent = (double)st.bytes[COMM_OP_SEND];
    student->leaked = live_after > live ? (double)(live_after - live) : 0;
    bufs_free(&s);

    snprintf(what, sizeof what, "checking %s, count %zu%s%s: the library's own", COLL[k].func, count, where,
             mode_name(k, in_place));
    comm_watchdog_context(what);
    Bufs l = bufs_make(c, k, count, root, in_place);
    COLL[k].library(c, &l);
    *library = compare(c, k, count, root, &l);
    bufs_free(&l);
    comm_set_timeout(g_timeout);
    comm_watchdog_context(NULL);
}

enum { MAX_COUNTS = 16, OUT_OF_PLACE = 0, IN_PLACE = 1 };

typedef struct {
    long wrong[NCOLL];       // wrong elements over all ranks and counts
    long library_wrong[NCOLL];
    int64_t wrong_by_mode[NCOLL][MAX_COUNTS][2];   // per count, out of place and in place (-1: not run)
    int64_t wrong_by_root[NCOLL][64];   // broadcasts: wrong elements per root (roots < 64)
    int runs[NCOLL];
    int used_collective[NCOLL];
    char foreign[NCOLL][32]; // the first helper or direct MPI call seen
    double sent[NCOLL], formula[NCOLL];   // bytes sent over all ranks and calls, and the ring's
    double leaked[NCOLL];    // COMM bytes left allocated by its calls, over all ranks
    char first[NCOLL][200];  // the first failure, in words
} Results;

// Gather every rank's findings; every rank keeps the totals and the first failure.
static void record(Comm *c, Results *res, Coll k, int ci, size_t count, int root, bool in_place) {
    int N = comm_size(c);
    Finding f, lib;
    check_one(c, k, count, root, in_place, &f, &lib);
    res->library_wrong[k] += (long)comm_sum_double(c, (double)lib.wrong);
    Finding *all = malloc((size_t)N * sizeof *all);
    comm_all_gather_host(c, &f, sizeof f, all);
    res->runs[k]++;
    int64_t *mode = &res->wrong_by_mode[k][ci][in_place ? IN_PLACE : OUT_OF_PLACE];
    if (*mode < 0) *mode = 0;
    res->formula[k] += formula_bytes(k, N, count);
    for (int q = 0; q < N; q++) {
        if (all[q].used_collective >= 0) res->used_collective[k] = all[q].used_collective;
        if (all[q].foreign[0] && !res->foreign[k][0])
            snprintf(res->foreign[k], sizeof res->foreign[k], "%s", all[q].foreign);
        res->sent[k] += all[q].sent;
        res->leaked[k] += all[q].leaked;
        if (all[q].wrong > 0 && res->wrong[k] == 0) {
            char where[48] = "";
            if (COLL[k].rooted) snprintf(where, sizeof where, ", root %d", root);
            snprintf(res->first[k], sizeof res->first[k],
                     "count %zu%s%s: rank %d has %ld wrong elements, the first at [%ld]: %g, want %g",
                     count, where, mode_name(k, in_place), q, all[q].wrong, all[q].first,
                     (double)all[q].got, (double)all[q].want);
        }
        res->wrong[k] += all[q].wrong;
        *mode += all[q].wrong;
        if (root < 64) res->wrong_by_root[k][root] += all[q].wrong;
    }
    free(all);
}

// Why a collective failed, in a few words for the table.
static const char *verdict(const Results *res, Coll k, char *buf, size_t len) {
    if (g_todo[k]) return "FAIL: not written yet (it calls lab_todo)";
    if (res->used_collective[k] >= 0) return "FAIL: calls a library collective";
    if (res->foreign[k][0]) {
        snprintf(buf, len, "FAIL: calls %s", res->foreign[k]);
        return buf;
    }
    if (res->wrong[k] > 0) return "FAIL";
    if (res->sent[k] > res->formula[k]) return "FAIL: sends too many bytes";
    if (res->leaked[k] > 0) return "FAIL: leaks COMM memory";
    return "ok";
}

int checks_run(Comm *c, DumpWriter *dw) {
    int N = comm_size(c);
    Results results, *res = &results;
    // Counts of every kind: none, fewer than N, not a multiple of N, larger
    // than one 64k-float segment, and a multiple of N whose blocks are
    // several segments long (so a segment's offset is tested apart from the
    // blocks' split).
    size_t all_counts[] = {0, 1, 2, 3, (size_t)N - 1, (size_t)N, (size_t)N + 1, 7, 13, 1000, 4099, 65537,
                           262147, (size_t)N * 200000};
    size_t counts[MAX_COUNTS], largest = 0;
    int ncounts = 0;
    for (size_t i = 0; i < sizeof all_counts / sizeof all_counts[0]; i++) {   // each once
        bool seen = false;
        for (int j = 0; j < ncounts; j++) seen |= counts[j] == all_counts[i];
        if (!seen) counts[ncounts++] = all_counts[i];
        if (all_counts[i] > largest) largest = all_counts[i];
    }
    memset(res, 0, sizeof *res);
    for (int k = 0; k < NCOLL; k++) {
        res->used_collective[k] = -1;
        for (int i = 0; i < MAX_COUNTS; i++) res->wrong_by_mode[k][i][0] = res->wrong_by_mode[k][i][1] = -1;
    }
    for (int k = 0; k < NCOLL; k++) {
        int64_t wrong_per_count[MAX_COUNTS];
        for (int i = 0; i < ncounts; i++) {
            long before = res->wrong[k];
            if (COLL[k].rooted) {
                // Every root for small counts; the first and last for large ones.
                for (int root = 0; root < N; root++) {
                    if (counts[i] > 1000 && root != 0 && root != N - 1) continue;
                    record(c, res, (Coll)k, i, counts[i], root, true);
                }
            } else if (k == C_ALL_GATHER) {   // the one collective with both modes
                record(c, res, (Coll)k, i, counts[i], 0, false);
                record(c, res, (Coll)k, i, counts[i], 0, true);
            } else {
                record(c, res, (Coll)k, i, counts[i], 0, k == C_ALL_REDUCE);
            }
            wrong_per_count[i] = res->wrong[k] - before;
        }
        char name[80];
        uint64_t shape = (uint64_t)ncounts, shape2[2] = {(uint64_t)ncounts, 2};
        snprintf(name, sizeof name, "check/%s/wrong", COLL[k].func);
        dump_i64(dw, name, wrong_per_count, 1, &shape);
        // Per count, out of place (column 0) and in place (column 1); -1 where not run.
        snprintf(name, sizeof name, "check/%s/wrong_by_mode", COLL[k].func);
        dump_i64(dw, name, &res->wrong_by_mode[k][0][0], 2, shape2);
        snprintf(name, sizeof name, "check/%s/unfinished", COLL[k].func);
        dump_scalar_i64(dw, name, g_todo[k]);
        if (COLL[k].rooted) {
            uint64_t nroots = (uint64_t)(N < 64 ? N : 64);
            snprintf(name, sizeof name, "check/%s/wrong_by_root", COLL[k].func);
            dump_i64(dw, name, res->wrong_by_root[k], 1, &nroots);
        }
        // The library collective it called (a CommOp), or -1.
        snprintf(name, sizeof name, "check/%s/library_call", COLL[k].func);
        dump_scalar_i64(dw, name, res->used_collective[k]);
        // A helper or MPI function it called ("MPI_Allreduce"); empty when none.
        snprintf(name, sizeof name, "check/%s/foreign_call", COLL[k].func);
        dump_text(dw, name, res->foreign[k]);
        snprintf(name, sizeof name, "check/%s/bytes_sent", COLL[k].func);
        dump_scalar_f64(dw, name, res->sent[k]);
        snprintf(name, sizeof name, "check/%s/bytes_formula", COLL[k].func);
        dump_scalar_f64(dw, name, res->formula[k]);
        snprintf(name, sizeof name, "check/%s/leaked_bytes", COLL[k].func);
        dump_scalar_f64(dw, name, res->leaked[k]);
    }
    int64_t c64[MAX_COUNTS];
    for (int i = 0; i < ncounts; i++) c64[i] = (int64_t)counts[i];
    uint64_t shape = (uint64_t)ncounts;
    dump_i64(dw, "check/counts", c64, 1, &shape);
    // Scratch buffers never freed are still here: the harness's own are all freed.
    double live = (double)mem_live(MEM_COMM);
    double *live_all = malloc((size_t)N * sizeof *live_all);
    comm_all_gather_host(c, &live, sizeof live, live_all);
    double live_max = 0;
    int live_rank = 0;
    for (int q = 0; q < N; q++)
        if (live_all[q] > live_max) live_max = live_all[q], live_rank = q;
    uint64_t nranks = (uint64_t)N;
    dump_f64(dw, "check/comm_live_bytes", live_all, 1, &nranks);
    free(live_all);

    // The table.
    int failed = 0;
    print0("\nchecks: each collective against the library's own, exact inputs, %d counts from 0 to %zu\n",
           ncounts, largest);
    print0("  %-16s %-20s %5s %14s %12s   %s\n", "collective", "function", "runs", "wrong elements",
           "sent/needed", "result");
    for (int k = 0; k < NCOLL; k++) {
        char buf[64], ratio[16] = "-";
        const char *v = verdict(res, (Coll)k, buf, sizeof buf);
        if (res->formula[k] > 0) snprintf(ratio, sizeof ratio, "%.2f", res->sent[k] / res->formula[k]);
        failed += strcmp(v, "ok") != 0;
        print0("  %-16s %-20s %5d %14ld %12s   %s\n", COLL[k].name, COLL[k].func, res->runs[k], res->wrong[k],
               ratio, v);
    }
    for (int k = 0; k < NCOLL; k++) {
        char b1[32], b2[32];
        if (res->library_wrong[k] > 0) {
            print0("  the LIBRARY's %s gave %ld wrong elements: the backend is broken, not your code\n",
                   COLL[k].name, res->library_wrong[k]);
            failed++;
        }
        if (g_todo[k]) continue;
        if (res->used_collective[k] >= 0)
            print0("  %s called comm_%s; build it from comm_send, comm_recv and comm_sendrecv\n",
                   COLL[k].func, comm_op_name((CommOp)res->used_collective[k]));
        else if (strncmp(res->foreign[k], "MPI_", 4) == 0)
            print0("  %s calls %s directly: MPI outside comm.h moves bytes nobody counts; build it from "
                   "comm_send, comm_recv and comm_sendrecv\n", COLL[k].func, res->foreign[k]);
        else if (res->foreign[k][0])
            print0("  %s calls %s: bookkeeping helpers move bytes nobody counts; build it from comm_send, "
                   "comm_recv and comm_sendrecv\n", COLL[k].func, res->foreign[k]);
        if (res->wrong[k] > 0) print0("  %s: %s\n", COLL[k].func, res->first[k]);
        if (res->sent[k] > res->formula[k])
            print0("  %s sent %s over all ranks and checks, %.2f times the %s (%s)\n", COLL[k].func,
                   core_fmt_bytes(res->sent[k], b1, sizeof b1), res->sent[k] / res->formula[k],
                   COLL[k].least, core_fmt_bytes(res->formula[k], b2, sizeof b2));
        if (res->leaked[k] > 0)
            print0("  %s left %s of COMM memory allocated over its calls: a scratch buffer it never frees\n",
                   COLL[k].func, core_fmt_bytes(res->leaked[k], b1, sizeof b1));
    }
    if (live_max > 0) {
        char b[32];
        print0("  COMM memory still allocated after the checks: %s on rank %d (a buffer never freed)\n",
               core_fmt_bytes(live_max, b, sizeof b), live_rank);
        failed += failed == 0;
    }
    print0(failed ? "%d of %d collectives FAILED\n" : "all %d collectives exact, sending no more than needed\n",
           failed ? failed : NCOLL, NCOLL);
    return failed;
}

// ---- the demo --------------------------------------------------------------

// Rank 0 prints what every rank holds: n floats of `buf` (device).
static void show(Comm *c, const char *label, const float *buf, size_t n) {
    int N = comm_size(c);
    float host[16] = {0};
    mem_to_host(host, buf, n * sizeof(float));
    float *all = malloc((size_t)N * sizeof host);
    comm_all_gather_host(c, host, sizeof host, all);
    if (comm_rank(c) == 0) {
        for (int q = 0; q < N && q < 8; q++) {
            char line[256];
            int m = snprintf(line, sizeof line, "    rank %d %-7s [", q, label);
            for (size_t i = 0; i < n; i++)
                m += snprintf(line + m, sizeof line - (size_t)m, "%s%g", i ? " " : "", (double)all[q * 16 + i]);
            printf("%s]\n", line);
        }
        if (N > 8) printf("    ... (%d ranks)\n", N);
    }
    free(all);
}

void checks_demo(Comm *c) {
    int N = comm_size(c), r = comm_rank(c);
    float host[16];
    print0("\nThe four collectives on tiny tensors (your implementations; compare with what "
           "the comment says they should give):\n");

    print0("\nall_reduce: every rank holds [1 2 3]; afterwards every rank holds the sum, [N 2N 3N] = [%d %d %d]\n",
           N, 2 * N, 3 * N);
    float *x = mem_alloc_floats(3, MEM_OTHER, "demo");
    host[0] = 1, host[1] = 2, host[2] = 3;
    mem_from_host(x, host, 3 * sizeof(float));
    show(c, "before", x, 3);
    ring_all_reduce(c, x, 3);
    show(c, "after", x, 3);
    mem_free(x);

    size_t n = (size_t)(N < 8 ? N : 8);
    print0("\nreduce_scatter of %zu elements: rank r holds (r + 1) * [1 2 ...]; rank r receives element r of the sum,\n"
           "  (r + 1) * N (N + 1) / 2\n", n);
    float *in = mem_alloc_floats(n, MEM_OTHER, "demo in");
    float *out = mem_alloc_floats(1, MEM_OTHER, "demo out");
    for (size_t i = 0; i < n; i++) host[i] = (float)((r + 1) * (int)(i + 1));
    mem_from_host(in, host, n * sizeof(float));
    show(c, "before", in, n);
    if ((size_t)N == n) {
        ring_reduce_scatter(c, in, out, n);
        show(c, "after", out, 1);
    }
    mem_free(in);
    mem_free(out);

    print0("\nall_gather: rank r holds [10*r]; afterwards every rank holds [0 10 20 ...]\n");
    float *mine = mem_alloc_floats(1, MEM_OTHER, "demo in");
    float *all = mem_alloc_floats((size_t)N, MEM_OTHER, "demo out");
    host[0] = 10.0f * (float)r;
    mem_from_host(mine, host, sizeof(float));
    show(c, "before", mine, 1);
    ring_all_gather(c, mine, all, (size_t)N);
    show(c, "after", all, n);
    mem_free(mine);
    mem_free(all);

    int root = N - 1;
    print0("\nbroadcast from rank %d: it holds [7 8 9], the others [0 0 0]; afterwards all hold [7 8 9]\n", root);
    float *b = mem_alloc_floats(3, MEM_OTHER, "demo");
    host[0] = r == root ? 7 : 0, host[1] = r == root ? 8 : 0, host[2] = r == root ? 9 : 0;
    mem_from_host(b, host, 3 * sizeof(float));
    show(c, "before", b, 3);
    tree_broadcast(c, b, 3, root);
    show(c, "after", b, 3);
    mem_free(b);
}

