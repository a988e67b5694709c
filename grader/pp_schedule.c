// pp_schedule.c: the replay of a pipeline schedule (pp_schedule.h).
#include "pp_schedule.h"

#include <math.h>

#include <stdint.h>
#include <stdlib.h>

double pp_bubble_formula(int p, int m) { return (double)(p - 1) / (double)(m + p - 1); }
double pp_bubble_formula_interleaved(int p, int v, int m) { return (double)(p - 1) / (double)(v * m + p - 1); }

int pp_mark_arg(int chunk, int mb) { return chunk * PP_MARK_CHUNK + mb; }
int pp_mark_mb(int arg) { return arg % PP_MARK_CHUNK; }
int pp_mark_chunk(int arg) { return arg / PP_MARK_CHUNK; }

int pp_events_chunks(PpEvent *const *ev, const int *n, int p) {
    int v = 1;
    for (int s = 0; s < p; s++)
        for (int k = 0; k < n[s]; k++) v = ev[s][k].chunk + 1 > v ? ev[s][k].chunk + 1 : v;
    return v;
}

double pp_zb_bubble_formula(int p, int m) { return (double)(p - 1) / (double)(3 * m + p - 1); }

// Replayed with F = B = W = 1, ZB-H1's stage s starts at s (its first
// forward waits for s others) and every stage ends with the step, at
// 3m + p - 1: idle p - 1 - s within its span, p (p - 1) / 2 over the stages,
// of spans that add up to p (3m + (p - 1) / 2). ZB-H2's stage s runs from s
// to 3m + s without a gap.
double pp_zb_span_bubble_formula(int c, int p, int m) {
    return c == 1 ? (double)(p - 1) / (double)(6 * m + p - 1) : 0;
}

// Each kind of pass: its length with equal stages, and what it waits for
// besides its stage's previous pass: the pass of kind `on` of the same
// micro-batch on stage s + dir (nothing where that stage does not exist).
static const struct {
    double units;
    int dir, on;
    char letter;
    const char *name;
} PASS[PP_PASS_KINDS] = {
    [PP_PASS_F] = {1, -1, PP_PASS_F, 'F', "forward"},
    [PP_PASS_B] = {2, +1, PP_PASS_B, 'B', "backward"},
    [PP_PASS_R] = {1, +1, PP_PASS_B, 'R', "recompute"},   // the backward's first part (pp_schedule.h)
    [PP_PASS_W] = {1, 0, PP_PASS_B, 'W', "weight gradient"},   // after its own stage's B: nobody else's
};

static bool known(int kind) { return kind >= 0 && kind < PP_PASS_KINDS; }
double pp_pass_units(int kind) { return known(kind) ? PASS[kind].units : 0; }
char pp_pass_letter(int kind) { return known(kind) ? PASS[kind].letter : '?'; }
const char *pp_pass_name(int kind) { return known(kind) ? PASS[kind].name : "unknown pass"; }

bool pp_split_b(const PpEvent *row, int n, int k) {
    if (row[k].kind != PP_PASS_B) return false;
    for (int j = 0; j < n; j++)
        if (row[j].kind == PP_PASS_W && row[j].chunk == row[k].chunk && row[j].mb == row[k].mb) return true;
    return false;
}

double pp_event_units(const PpEvent *row, int n, int k) {
    return pp_split_b(row, n, k) ? 1 : pp_pass_units(row[k].kind);
}

int pp_events_without(PpEvent *ev, int n, int kind) {
    int k = 0;
    for (int i = 0; i < n; i++)
        if (ev[i].kind != kind) ev[k++] = ev[i];
    return k;
}

// The end of the event of stage s that is (kind, chunk, mb), if it has been
// replayed; -1 if it has not (yet), -2 if stage s has no such event.
static double end_of(PpEvent **ev, const int *n, const int *done, int s, int kind, int chunk, int mb) {
    for (int k = 0; k < n[s]; k++)
        if (ev[s][k].kind == kind && ev[s][k].chunk == chunk && ev[s][k].mb == mb)
            return k < done[s] ? ev[s][k].end : -1;
    return -2;
}

// The neighbour a pass of chunk c on stage s waits for, dir stages away
// (PASS[kind].dir): virtual stage c p + s + dir, on stage *from, chunk
// *chunk (round-robin); false where there is none (the first virtual stage's
// forward, the last's backward).
static bool neighbour(int p, int v, int s, int c, int dir, int *from, int *chunk) {
    int k = c * p + s + dir;
    if (k < 0 || k >= p * v) return false;
    *from = k % p, *chunk = k / p;
    return true;
}

double pp_replay(int p, PpEvent **ev, const int *n, bool equal, double *makespan) {
    int *done = calloc((size_t)p, sizeof *done), v = pp_events_chunks(ev, n, p);
    double busy = 0, last = 0;
    int left = 0;
    for (int s = 0; s < p; s++) left += n[s];
    // Each pass runs every stage's next event whose inputs are ready; a pass
    // that runs none means an event waits for one that never comes.
    while (left > 0) {
        int ran = 0;
        for (int s = 0; s < p; s++) {
            if (done[s] == n[s]) continue;
            PpEvent *e = &ev[s][done[s]];
            if (!known(e->kind)) continue;   // never runs: the pass stalls
            double ready = done[s] ? ev[s][done[s] - 1].end : 0;
            int from, chunk;
            if (neighbour(p, v, s, e->chunk, PASS[e->kind].dir, &from, &chunk)) {
                double dep = end_of(ev, n, done, from, PASS[e->kind].on, chunk, e->mb);
                if (dep < 0) continue;   // not yet (or never: the pass stalls)
                ready = dep > ready ? dep : ready;
            }
            double d = equal ? pp_event_units(ev[s], n[s], done[s]) / v : e->seconds;
            e->start = ready;
            e->end = ready + d;
            busy += d;
            last = e->end > last ? e->end : last;
            done[s]++, left--, ran++;
        }
        if (!ran) {
            free(done);
            *makespan = last;
            return -1;
        }
    }
    free(done);
    *makespan = last;
    return last > 0 ? (p * last - busy) / (p * last) : 0;
}

double pp_span_bubble(int p, PpEvent *const *ev, const int *n) {
    double span = 0, busy = 0;
    for (int s = 0; s < p; s++) {
        if (!n[s]) continue;
        double first = ev[s][0].start, last = ev[s][0].end;
        for (int k = 0; k < n[s]; k++) {
            first = ev[s][k].start < first ? ev[s][k].start : first;
            last = ev[s][k].end > last ? ev[s][k].end : last;
            busy += ev[s][k].end - ev[s][k].start;
        }
        span += last - first;
    }
    return span > 0 ? (span - busy) / span : 0;
}

// ---- the timeline ----------------------------------------------------------------

static bool p2p(const CommEvent *e) { return e->op == COMM_OP_SEND || e->op == COMM_OP_RECV; }

// The index in rank q's log of the start that the end e (of rank r) waits
// for, or -1: for a receive, q's send to r of the same place; for a send,
// q's receive from r; for a collective, q's start of the same place on the
// same group.
static int start_of(const CommEvent *const *ev, const int *n, int r, const CommEvent *e, int q) {
    for (int i = 0; i < n[q]; i++) {
        const CommEvent *f = &ev[q][i];
        if (f->kind != COMM_EVENT_POST || f->seq != e->seq || f->group != e->group) continue;
        if (p2p(e) ? f->op == (e->op == COMM_OP_SEND ? COMM_OP_RECV : COMM_OP_SEND) && f->peer == r
                   : !p2p(f))
            return i;
    }
    return -1;
}

double pp_replay_timeline(int N, int p, const CommEvent *const *ev, const int *n, double *order_bubble,
                          PpLate *late) {
    if (N < 1 || p < 1 || p > N || p > 64) return -1;
    int most = 1;
    for (int r = 0; r < N; r++) most = n[r] > most ? n[r] : most;
    double *at = calloc((size_t)N * most, sizeof *at), *raised = calloc((size_t)N * most, sizeof *raised);
    double *clock = calloc((size_t)N, sizeof *clock);   // N >= 1
    int *next = calloc((size_t)N, sizeof *next);
    *late = (PpLate){-1, 0, 0, 0, -1, {0, 0, 0, 0, 0}, 0};
    *order_bubble = -1;
    int left = 0, v = 1;   // v: the chunks, one more than the largest any pass of pipeline 0 marks
    for (int r = 0; r < N; r++) left += n[r];
    for (int r = 0; r < p; r++)
        for (int i = 0; i < n[r]; i++)
            if (ev[r][i].kind == COMM_EVENT_MARK && pp_mark_chunk(ev[r][i].peer) + 1 > v)
                v = pp_mark_chunk(ev[r][i].peer) + 1;
    // Each pass's length with equal stages, 1/v of a stage's (a B split
    // where its rank's log has a W of the same chunk and micro-batch, the
    // same mark's argument: pp_event_units).
    double *len = calloc((size_t)N * most, sizeof *len);
    for (int r = 0; r < N; r++)
        for (int i = 0; i < n[r]; i++) {
            const CommEvent *e = &ev[r][i];
            if (e->kind != COMM_EVENT_MARK) continue;
            double units = pp_pass_units(e->op);
            for (int j = 0; e->op == PP_PASS_B && j < n[r]; j++)
                if (ev[r][j].kind == COMM_EVENT_MARK && ev[r][j].op == PP_PASS_W && ev[r][j].peer == e->peer)
                    units = 1;
            len[(size_t)r * most + i] = units / v;
        }
    // Each pass over the ranks runs every event that can run; a pass that
    // runs none leaves an end waiting for a start that never comes.
    while (left > 0) {
        int ran = 0;
        for (int r = 0; r < N; r++)
            while (next[r] < n[r]) {
                const CommEvent *e = &ev[r][next[r]];
                double t = clock[r];
                if (e->kind == COMM_EVENT_DONE) {
                    for (int q = 0; q < N && q < 64; q++) {
                        bool member = p2p(e) ? q == e->peer : (e->group >> q) & 1;
                        if (!member || q == r) continue;
                        int k = start_of(ev, n, r, e, q);
                        if (k < 0 || k >= next[q]) {   // not yet replayed (or never)
                            t = -1;
                            break;
                        }
                        if (at[(size_t)q * most + k] > t) t = at[(size_t)q * most + k];
                    }
                    if (t < 0) break;
                    raised[(size_t)r * most + next[r]] = t - clock[r];
                }
                at[(size_t)r * most + next[r]] = t;
                clock[r] = t + len[(size_t)r * most + next[r]];
                next[r]++, left--, ran++;
            }
        if (!ran) break;
    }
    double bubble = -1;
    if (left == 0) {
        // Pipeline 0's passes, in the order each stage ran them, for the
        // order's own replay and the comparison.
        PpEvent *rows[64] = {0};
        int counts[64] = {0}, *index = calloc((size_t)p * most, sizeof *index);
        double busy = 0, span = 0;
        for (int s = 0; s < p && s < 64; s++) {
            rows[s] = calloc((size_t)most, sizeof **rows);
            counts[s] = 0;
            for (int i = 0; i < n[s]; i++) {
                const CommEvent *e = &ev[s][i];
                if (e->kind != COMM_EVENT_MARK) continue;
                double d = len[(size_t)s * most + i], end = at[(size_t)s * most + i] + d;
                busy += d;
                span = end > span ? end : span;
                index[(size_t)s * most + counts[s]] = i;
                rows[s][counts[s]++] = (PpEvent){e->op, pp_mark_mb(e->peer), d, 0, 0, pp_mark_chunk(e->peer)};
            }
        }
        bubble = span > 0 ? (p * span - busy) / (p * span) : 0;
        double order_span;
        *order_bubble = pp_replay(p, rows, counts, true, &order_span);
        // The first pass later than its order allows, and what held it.
        double first = INFINITY;
        for (int s = 0; *order_bubble >= 0 && s < p; s++)
            for (int j = 0; j < counts[s]; j++) {
                int i = index[(size_t)s * most + j];
                double t = at[(size_t)s * most + i], over = t - rows[s][j].start;
                if (over > 1e-9 && t < first)
                    first = t, *late = (PpLate){s, rows[s][j].kind, rows[s][j].mb, over, -1, {0, 0, 0, 0, 0},
                                                rows[s][j].chunk};
            }
        // Back from that pass along what set each time (the event before it
        // on its rank, or the start an end waited for) to the first end that
        // waited for something other than a message: what held it.
        int r = late->rank, i = -1;
        for (int j = 0; r >= 0 && j < counts[r]; j++)
            if (rows[r][j].kind == late->kind && rows[r][j].mb == late->mb && rows[r][j].chunk == late->chunk)
                i = index[(size_t)r * most + j];
        for (int steps = 0; r >= 0 && i > 0 && steps < N * most; steps++) {
            const CommEvent *e = &ev[r][i - 1];
            if (e->kind != COMM_EVENT_DONE || raised[(size_t)r * most + i - 1] <= 1e-9) {
                i--;
                continue;
            }
            late->cause_rank = r, late->cause = *e;
            if (e->op != COMM_OP_RECV) break;
            int q = e->peer, k = start_of(ev, n, r, e, q);
            if (k < 0) break;
            r = q, i = k;
        }
        for (int s = 0; s < p && s < 64; s++) free(rows[s]);
        free(index);
    }
    free(at);
    free(raised);
    free(clock);
    free(next);
    free(len);
    return bubble;
}
