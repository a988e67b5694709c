// test_grader.c: the grader's own arithmetic against what it claims: Adam's
// reach bounds every AdamW run's element difference (searched over gradient
// sequences, the worst ones included), a tensor's bulk sets aside exactly its
// largest 1 in 1000 differences, the hang diagnosis names a rank the
// runtime saw stop answering, and the pipeline replay gives the zero-bubble
// and the interleaved schedules their formulas, a B split only where its
// stage ran a W of the same chunk and micro-batch.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "lab.h"
#include "pp_schedule.h"
#include "results.h"
#include "rounding.h"
#include "spec_train.h"
#include "testutil.h"

// A dump in memory: arrays of floats and one text.
typedef struct {
    DumpArray a[8];
    int n;
    DumpFile f;
} Mem;

static void add_f32(Mem *m, const char *name, const float *v, uint64_t n) {
    DumpArray *a = &m->a[m->n++];
    memset(a, 0, sizeof *a);
    a->name = (char *)name;
    a->type = DUMP_F32;
    a->ndim = 1;
    a->shape[0] = n;
    a->count = n;
    a->data = (void *)v;
    m->f = (DumpFile){m->a, m->n, NULL};
}

static void add_text(Mem *m, const char *name, const char *text) {
    DumpArray *a = &m->a[m->n++];
    memset(a, 0, sizeof *a);
    a->name = (char *)name;
    a->type = DUMP_TEXT;
    a->count = strlen(text);
    a->data = (void *)text;
    m->f = (DumpFile){m->a, m->n, NULL};
}

static const char *CONFIG = "steps 0\nlr 0.001\noptimizer adamw\nbeta1 0.899999976\nbeta2 0.949999988\n";

// AdamW's update of one element over a gradient sequence, as ops_adamw
// makes it (without weight decay: it only shrinks a difference).
static double adam_path(const double *g, int steps, double lr, double b1, double b2) {
    double m = 0, v = 0, p = 0;
    for (int t = 1; t <= steps; t++) {
        m = b1 * m + (1 - b1) * g[t - 1];
        v = b2 * v + (1 - b2) * g[t - 1] * g[t - 1];
        p -= lr / (1 - pow(b1, t)) * m / (sqrt(v / (1 - pow(b2, t))) + 1e-8);
    }
    return p;
}

START_TEST(adam_reach_bounds_every_gradient_sequence) {
    const int steps = 8;
    float loss[8] = {0};
    Mem m = {0};
    add_text(&m, "meta/config", CONFIG);
    add_f32(&m, "loss", loss, steps);
    double reach = adam_reach(&m.f), lr = 1e-3;
    // One step: the update is the gradient's sign, so two runs differ by at
    // most 2 lr; the bound is that, tight (and 1% for the float rounding).
    Mem one = {0};
    add_text(&one, "meta/config", CONFIG);
    add_f32(&one, "loss", loss, 1);
    ck_assert_msg(fabs(adam_reach(&one.f) - 2 * lr * 1.01) < 1e-12, "one step's reach %.9g, not 2 lr", adam_reach(&one.f));
    // Random sequences, and the ones that push hardest: a large gradient
    // last after small ones of the same sign, signs flipping, one spike.
    double worst = 0;
    srand(7);
    for (int trial = 0; trial < 20000; trial++) {
        double g[8], h[8];
        for (int t = 0; t < steps; t++) {
            int kind = trial % 4;
            double r = (double)rand() / RAND_MAX - 0.5;
            g[t] = kind == 0 ? r : kind == 1 ? pow(10.0, 4 * r) * (t % 2 ? -1 : 1)
                 : kind == 2 ? pow(1.25, t) * (r > 0 ? 1 : 0.01) : (t == trial % steps ? 100 : 1e-3 * r);
            h[t] = -g[t] * ((double)rand() / RAND_MAX);   // another run, the other way
        }
        double d = fabs(adam_path(g, steps, lr, 0.9, 0.95) - adam_path(h, steps, lr, 0.9, 0.95));
        worst = fmax(worst, d);
    }
    ck_assert_msg(worst <= reach, "an AdamW difference of %.6g beyond Adam's reach %.6g", worst, reach);
    ck_assert_msg(worst > 0.5 * reach, "the search reached only %.3g of the bound %.3g: not a search", worst, reach);
    // Not AdamW: no reach.
    Mem sgd = {0};
    add_text(&sgd, "meta/config", "steps 0\nlr 0.001\noptimizer sgd\n");
    add_f32(&sgd, "loss", loss, steps);
    ck_assert(isinf(adam_reach(&sgd.f)));
}
END_TEST

START_TEST(bulk_sets_aside_the_largest_thousandth) {
    enum { N = 2000 };
    static float ref[N], lab[N];
    for (int i = 0; i < N; i++) ref[i] = lab[i] = 1.0f;
    Mem r = {0}, l = {0};
    add_f32(&r, "param/final/x.w", ref, N);
    add_f32(&l, "param/final/x.w", lab, N);
    // Two elements off (ceil(2000 / 1000) = 2 set aside): the bulk is exact.
    lab[3] += 1.0f, lab[1500] -= 1.0f;
    TensorError e;
    ck_assert(tensor_error(&l.f, &r.f, "param/final/x.w", &e));
    ck_assert_msg(e.bulk == 0 && e.rel > 0 && e.abs_ == 1.0, "bulk %g rel %g abs %g", e.bulk, e.rel, e.abs_);
    // A third: it counts, at its own size over the norm (sqrt(2000)).
    lab[7] += 0.5f;
    tensor_error(&l.f, &r.f, "param/final/x.w", &e);
    ck_assert_msg(fabs(e.bulk - 0.5 / sqrt(2000.0)) < 1e-9, "bulk %.9g, not 0.5 / sqrt(2000)", e.bulk);
    // A NaN is never set aside as rounding: infinitely wrong, and the bulk too
    // once more elements than the thousandth are off.
    lab[9] = NAN;
    tensor_error(&l.f, &r.f, "param/final/x.w", &e);
    ck_assert_msg(isinf(e.rel) && isinf(e.abs_), "a NaN: rel %g abs %g", e.rel, e.abs_);
    lab[10] = NAN, lab[11] = NAN;
    tensor_error(&l.f, &r.f, "param/final/x.w", &e);
    ck_assert_msg(isinf(e.bulk), "three NaNs: bulk %g", e.bulk);
}
END_TEST

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The bulk leaves out the largest ceil(n / 1000) squared differences, found
// by selection: against a full sort, on sizes and data that stress it (many
// ties, all equal, sorted, reversed, random).
START_TEST(bulk_agrees_with_a_sort) {
    enum { MAXN = 5003 };
    static float ref[MAXN], lab[MAXN];
    static double sq[MAXN];
    srand(11);
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + rand() % MAXN, kind = trial % 5;
        for (int i = 0; i < n; i++) {
            ref[i] = 1.0f;
            float d = kind == 0 ? (float)(rand() % 3) : kind == 1 ? 0.25f : kind == 2 ? (float)i / n
                    : kind == 3 ? (float)(n - i) / n : (float)rand() / RAND_MAX;
            lab[i] = 1.0f + d;
            double diff = (double)lab[i] - ref[i];
            sq[i] = diff * diff;
        }
        Mem r = {0}, l = {0};
        add_f32(&r, "param/final/x.w", ref, n);
        add_f32(&l, "param/final/x.w", lab, n);
        TensorError e;
        ck_assert(tensor_error(&l.f, &r.f, "param/final/x.w", &e));
        qsort(sq, (size_t)n, sizeof *sq, by_value);
        int keep = n - (n + 999) / 1000;
        double bulk = 0;
        for (int i = 0; i < keep; i++) bulk += sq[i];
        double want = sqrt(bulk) / sqrt((double)n);
        ck_assert_msg(fabs(e.bulk - want) <= 1e-12 * fmax(want, 1e-300) + 1e-300,
                      "n %d kind %d: bulk %.17g, a sort's %.17g", n, kind, e.bulk, want);
    }
}
END_TEST

START_TEST(hang_names_the_rank_that_stopped_answering) {
    char buf[2000];
    const char *out = "[lab02 rank 0] watchdog: waited in recv of 4 B from rank 1 for 2.0 s (--timeout 2); ending the run.\n"
                      "[lab02 rank 0] rank 1 stopped answering (no sign of life for 2.1 s: stopped or frozen, not waiting)\n"
                      "[lab02 rank 2] watchdog: waited in barrier over 3 ranks for 2.0 s (--timeout 2); ending the run.\n";
    const char *d = diagnose_hang(out, buf, sizeof buf);
    ck_assert_msg(d && strstr(d, "rank 1 stopped answering"), "%s", d ? d : "(none)");
    ck_assert_msg(!strstr(d, "rank 0 never reached") && !strstr(d, "rank 2 never reached"), "%s", d);
    // Every rank stopped while computing: no empty operation named.
    const char *computing = "[lab02 rank 0] stopped while computing for 3.0 s\n[lab02 rank 1] stopped while computing for 3.0 s\n";
    d = diagnose_hang(computing, buf, sizeof buf);
    ck_assert_msg(d && !strstr(d, "waits in :") && !strstr(d, "waits in  "), "%s", d ? d : "(none)");
    ck_assert_ptr_null(diagnose_hang("nothing about a hang\n", buf, sizeof buf));
    // A receive from a rank that left no line (gone on, or ended before its
    // watchdog spoke on a slow machine): a missing message, not collectives
    // in different orders, though another rank waits in a collective.
    const char *silent_peer = "[lab01 rank 2] watchdog: waited in recv of 0 B from rank 0 for 5.0 s (--timeout 5); "
                              "ending the run.\n"
                              "[lab01 rank 1] stopped while in comm_sum_double over 3 ranks for 5.0 s\n";
    d = diagnose_hang(silent_peer, buf, sizeof buf);
    ck_assert_msg(d && strstr(d, "rank 2 waits to receive from rank 0, which is not sending to it") &&
                  strstr(d, "missing or stray message"), "%s", d ? d : "(none)");
}
END_TEST

// On a group, the watchdog names a peer by its world rank, its rank in the
// group beside it: the pair is matched by world ranks (3 waits on 1 and 1 on
// 3, though each is rank 1 of its pipeline group).
START_TEST(hang_matches_peers_of_a_group_by_world_rank) {
    char buf[2000];
    const char *out = "[lab07 rank 1] watchdog: waited in recv of 4 B from rank 3 (rank 1 of a group of 2) for 2.0 s "
                      "(--timeout 2); ending the run.\n"
                      "[lab07 rank 3] stopped while in recv of 4 B from rank 1 (rank 0 of a group of 2) for 2.0 s\n";
    const char *d = diagnose_hang(out, buf, sizeof buf);
    ck_assert_msg(d && strstr(d, "ranks 1 and 3 both wait to recv from each other"), "%s", d ? d : "(none)");
    // A sendrecv's send half names its peer the same way.
    const char *half = "[lab07 rank 1] watchdog: waited in recv of 4 B from rank 3 (rank 1 of a group of 2) for 2.0 s "
                       "(--timeout 2); ending the run.\n"
                       "[lab07 rank 3] stopped while in recv of 4 B from rank 5 (rank 2 of a group of 3) while sending "
                       "to rank 1 (rank 0 of a group of 3) for 2.0 s\n"
                       "[lab07 rank 5] stopped while computing for 2.0 s\n";
    d = diagnose_hang(half, buf, sizeof buf);
    ck_assert_msg(d && !strstr(d, "rank 1 waits to receive from rank 3, which is not sending to it"), "%s",
                  d ? d : "(none)");
}
END_TEST

static void add_f64(Mem *m, const char *name, const double *v, uint64_t rows, uint64_t cols) {
    DumpArray *a = &m->a[m->n++];
    memset(a, 0, sizeof *a);
    a->name = (char *)name;
    a->type = DUMP_F64;
    a->ndim = cols ? 2 : 1;
    a->shape[0] = rows;
    a->shape[1] = cols;
    a->count = rows * (cols ? cols : 1);
    a->data = (void *)v;
    m->f = (DumpFile){m->a, m->n, NULL};
}

// The independent measure over its bound fails on the CPU (the heap) and is
// not graded on a GPU, where it is every process's use of the device.
START_TEST(the_independent_measure_is_not_bounded_on_a_gpu) {
    static const double peak[6] = {0}, measured[1] = {1e9};
    static const char *const configs[] = {"steps 1\ndevice cpu\n", "steps 1\ndevice cuda:0\n"};
    for (int gpu = 0; gpu < 2; gpu++) {
        Mem m = {0};
        add_f64(&m, "mem/peak", peak, 1, 6);
        add_f64(&m, "mem/measured_peak", measured, 1, 0);
        add_text(&m, "meta/config", configs[gpu]);
        Grader g = {0};
        Run run;
        memset(&run, 0, sizeof run);
        run.dump = &m.f;
        check_peak(&g, &run, PEAK_HEAP, "heap (independent measure)", 1e6, "1 MB", "over");
        ck_assert_int_eq(g.n, gpu ? 0 : 1);
        if (!gpu) ck_assert(!g.results[0].pass);
        free(g.results);
    }
}
END_TEST

// A log of events, as comm.h writes it (the k-th send from a to b pairs
// with the k-th receive at b from a).
typedef struct {
    CommEvent e[64];
    int n;
} Log;

static void ev(Log *l, int kind, int op, int peer, int seq) {
    l->e[l->n++] = (CommEvent){kind, op, peer, seq, kind == COMM_EVENT_MARK ? 0 : 3};
}

// GPipe over two stages and two micro-batches as the solution runs it
// (receives blocking, sends started and waited after the backward pass),
// with a barrier over both after every forward when `barrier`.
static void gpipe_logs(Log *l, bool barrier) {
    memset(l, 0, 2 * sizeof *l);
    for (int mb = 0; mb < 2; mb++) {   // the forwards
        ev(&l[0], COMM_EVENT_MARK, 0, mb, -1);
        ev(&l[0], COMM_EVENT_POST, COMM_OP_SEND, 1, mb);
        ev(&l[1], COMM_EVENT_POST, COMM_OP_RECV, 0, mb);
        ev(&l[1], COMM_EVENT_DONE, COMM_OP_RECV, 0, mb);
        ev(&l[1], COMM_EVENT_MARK, 0, mb, -1);
        for (int s = 0; barrier && s < 2; s++) {
            ev(&l[s], COMM_EVENT_POST, COMM_OP_BARRIER, -1, mb);
            ev(&l[s], COMM_EVENT_DONE, COMM_OP_BARRIER, -1, mb);
        }
    }
    for (int mb = 0; mb < 2; mb++) {   // the backwards
        ev(&l[1], COMM_EVENT_MARK, 1, mb, -1);
        ev(&l[1], COMM_EVENT_POST, COMM_OP_SEND, 0, mb);
        ev(&l[1], COMM_EVENT_DONE, COMM_OP_SEND, 0, mb);
        ev(&l[0], COMM_EVENT_POST, COMM_OP_RECV, 1, mb);
        ev(&l[0], COMM_EVENT_DONE, COMM_OP_RECV, 1, mb);
        ev(&l[0], COMM_EVENT_MARK, 1, mb, -1);
        ev(&l[0], COMM_EVENT_DONE, COMM_OP_SEND, 1, mb);
    }
}

START_TEST(timeline_finds_a_stage_that_had_its_input_and_waited) {
    Log l[2];
    const CommEvent *evs[2] = {l[0].e, l[1].e};
    double order;
    PpLate late;
    // Waiting only for inputs: the order's bubble, (p - 1) / (m + p - 1).
    gpipe_logs(l, false);
    int n[2] = {l[0].n, l[1].n};
    double b = pp_replay_timeline(2, 2, evs, n, &order, &late);
    ck_assert_double_eq_tol(b, 1.0 / 3, 1e-12);
    ck_assert_double_eq_tol(order, 1.0 / 3, 1e-12);
    ck_assert_int_eq(late.rank, -1);
    // A barrier after every forward: the same order, so the same order's
    // bubble, but stage 0's second forward waits for stage 1's first: by one
    // forward pass, held by the barrier. By hand: stage 0 runs F0 [0, 1],
    // F1 [2, 3], B0 [6, 8], B1 [8, 10]; stage 1 F0 [1, 2], F1 [3, 4], B0
    // [4, 6], B1 [6, 8]: busy 12 of 2 x 10, idle 8/20 (without: 6/18).
    gpipe_logs(l, true);
    n[0] = l[0].n, n[1] = l[1].n;
    b = pp_replay_timeline(2, 2, evs, n, &order, &late);
    ck_assert_double_eq_tol(order, 1.0 / 3, 1e-12);
    ck_assert_double_eq_tol(b, 8.0 / 20, 1e-12);
    ck_assert_int_eq(late.rank, 0);
    ck_assert_int_eq(late.kind, 0);
    ck_assert_int_eq(late.mb, 1);
    ck_assert_double_eq_tol(late.late, 1, 1e-12);
    ck_assert_int_eq(late.cause.op, COMM_OP_BARRIER);
}
END_TEST

// ---- the replay of pipeline schedules: the split backward and the chunks ----

// Stage s's passes under ZB-H1 (c = 1) or ZB-H2 (c = 2), as the solution
// orders them: c (p - s - 1) forwards, then for each micro-batch i a
// forward while any is left, B of i and, from i >= c s, the oldest W.
static int zb_row(PpEvent *row, int c, int p, int m, int s) {
    int n = 0, f = 0, w = 0;
    for (; f < c * (p - s - 1); f++) row[n++] = (PpEvent){PP_PASS_F, f, 0, 0, 0, 0};
    for (int i = 0; i < m; i++) {
        if (f < m) row[n++] = (PpEvent){PP_PASS_F, f++, 0, 0, 0, 0};
        row[n++] = (PpEvent){PP_PASS_B, i, 0, 0, 0, 0};
        if (i >= c * s) row[n++] = (PpEvent){PP_PASS_W, w++, 0, 0, 0, 0};
    }
    while (w < m) row[n++] = (PpEvent){PP_PASS_W, w++, 0, 0, 0, 0};
    return n;
}

START_TEST(replay_of_the_zero_bubble_schedules_is_their_formula) {
    enum { P = 4, M = 8 };
    PpEvent all[P][3 * M], *rows[P];
    int n[P];
    for (int c = 1; c <= 2; c++) {
        for (int s = 0; s < P; s++) rows[s] = all[s], n[s] = zb_row(all[s], c, P, M, s);
        double span, bubble = pp_replay(P, rows, n, true, &span);
        // F, B and W 1 each: a step of 3m + p - 1 passes for both.
        ck_assert_double_eq_tol(span, 3 * M + P - 1, 1e-12);
        ck_assert_double_eq_tol(bubble, pp_zb_bubble_formula(P, M), 1e-12);
        ck_assert_double_eq_tol(pp_span_bubble(P, rows, n), pp_zb_span_bubble_formula(c, P, M), 1e-12);
    }
    // Negative control: ZB-H2's passes with the W's gone, each B then the
    // whole backward (2): no W to fill the gaps, 1F1B's step and bubble.
    for (int s = 0; s < P; s++) n[s] = pp_events_without(rows[s], n[s], PP_PASS_W);
    double span, bubble = pp_replay(P, rows, n, true, &span);
    ck_assert_double_eq_tol(span, 3 * (M + P - 1), 1e-12);
    ck_assert_double_eq_tol(bubble, pp_bubble_formula(P, M), 1e-12);
}
END_TEST

// A B is split where its stage runs a W of the same chunk and micro-batch:
// a W of another chunk of the same micro-batch leaves it whole.
START_TEST(a_split_backward_is_matched_on_chunk_and_micro_batch) {
    // One stage, two chunks (v = 2: a pass 1/2 of a stage's): micro-batch
    // 0 forward through chunk 0 and 1, its backward through chunk 1 split
    // (B then W), through chunk 0 whole.
    PpEvent row[5] = {{PP_PASS_F, 0, 0, 0, 0, 0}, {PP_PASS_F, 0, 0, 0, 0, 1}, {PP_PASS_B, 0, 0, 0, 0, 1},
                      {PP_PASS_B, 0, 0, 0, 0, 0}, {PP_PASS_W, 0, 0, 0, 0, 1}};
    PpEvent *rows[1] = {row};
    int n[1] = {5};
    ck_assert(pp_split_b(row, 5, 2));
    ck_assert(!pp_split_b(row, 5, 3));   // by micro-batch alone it would be split
    ck_assert_double_eq_tol(pp_event_units(row, 5, 2), 1, 1e-12);
    ck_assert_double_eq_tol(pp_event_units(row, 5, 3), 2, 1e-12);
    double span, bubble = pp_replay(1, rows, n, true, &span);
    // (1 + 1 + 1 + 2 + 1) / 2: matched by micro-batch alone, 2.5.
    ck_assert_double_eq_tol(span, 3, 1e-12);
    ck_assert_double_eq_tol(bubble, 0, 1e-12);
    ck_assert_double_eq_tol(row[4].start, row[3].end, 1e-12);
}
END_TEST

// Megatron-LM's interleaved order (the solution's): the k-th pass of a kind
// is of chunk (k mod p v) div p (backward: the chunks in reverse) and
// micro-batch (k div p v) p + k mod p; (p - s - 1) 2 + (v - 1) p forwards
// to warm up, then one forward and one backward in turn.
static int interleaved_row(PpEvent *row, int p, int v, int m, int s) {
    int n = 0, total = m * v, warmup = (p - s - 1) * 2 + (v - 1) * p, f = 0, b = 0;
    warmup = warmup < total ? warmup : total;
    for (int k = 0; k < 2 * total; k++) {
        bool fwd = f < warmup || (f < total && (f - warmup) <= b);
        int j = fwd ? f++ : b++, c = j % (p * v) / p;
        row[n++] = (PpEvent){fwd ? PP_PASS_F : PP_PASS_B, j / (p * v) * p + j % p, 0, 0, 0, fwd ? c : v - 1 - c};
    }
    return n;
}

START_TEST(replay_of_the_interleaved_schedule_is_its_formula) {
    enum { P = 4, V = 2, M = 8 };
    PpEvent all[P][2 * M * V], *rows[P];
    int n[P];
    for (int s = 0; s < P; s++) rows[s] = all[s], n[s] = interleaved_row(all[s], P, V, M, s);
    ck_assert_int_eq(pp_events_chunks(rows, n, P), V);
    double span, bubble = pp_replay(P, rows, n, true, &span);
    ck_assert_double_eq_tol(bubble, pp_bubble_formula_interleaved(P, V, M), 1e-12);
    // A chunk's pass 1/v of a stage's: a step of 3m (busy) + 3 (p - 1) / v.
    ck_assert_double_eq_tol(span, 3 * M + 3.0 * (P - 1) / V, 1e-12);
    ck_assert(bubble < pp_bubble_formula(P, M) - 0.1);   // 15.8% against 1F1B's 27.3%
}
END_TEST

int main(void) {
    Suite *s = suite_create("grader");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, adam_reach_bounds_every_gradient_sequence);
    tcase_add_test(tc, bulk_sets_aside_the_largest_thousandth);
    tcase_add_test(tc, bulk_agrees_with_a_sort);
    tcase_add_test(tc, hang_names_the_rank_that_stopped_answering);
    tcase_add_test(tc, hang_matches_peers_of_a_group_by_world_rank);
    tcase_add_test(tc, timeline_finds_a_stage_that_had_its_input_and_waited);
    tcase_add_test(tc, replay_of_the_zero_bubble_schedules_is_their_formula);
    tcase_add_test(tc, a_split_backward_is_matched_on_chunk_and_micro_batch);
    tcase_add_test(tc, replay_of_the_interleaved_schedule_is_its_formula);
    tcase_add_test(tc, the_independent_measure_is_not_bounded_on_a_gpu);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
