// spec_lab05.c: what the grader runs and checks for lab05 (pipeline parallelism).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "comm.h"
#include "core.h"
#include "lab.h"
#include "mem.h"
#include "pp_budget.h"
#include "pp_schedule.h"
#include "reading.h"
#include "results.h"
#include "spec_train.h"
#include "specs.h"

// The course's default shape (4 blocks), three steps. p = 3 cuts 4 blocks
// unevenly; m runs from 1 (no pipelining at all) to 8 (one row each), and
// below p - 1 (1F1B's warm-up cut short by m); more stages than blocks
// (--layers 2 at p = 4: the partition's second branch); np4-dp2-pp2 and
// np2-dp2-pp1 are grids. The quick subset holds a run of each kind of bug:
// p = 2 (scaling, accumulation), p = 3 (a deadlock needs three stages;
// 1F1B's memory bound; GPipe's order and overlap), p = 4 with m = 8, m
// below p - 1, more stages than blocks, the grid, and full recomputation
// at the stage boundaries (1F1B at p = 3: two stages make their
// micro-batches again, the last needs none). In bf16 mixed
// precision (bf16 weights, gradients and messages, an fp32 master copy and
// moments), against build/ref in bf16: p = 2, p = 3 cutting 4 blocks
// unevenly, and the grid, whose data-parallel all-reduce is bf16 too. The
// zero-bubble schedules: one of each in the quick subset (ZB-H1 at p = 2,
// ZB-H2 at p = 3: its order, its memory, its W's). The interleaved
// schedule: two in the quick subset (p = 3 and p = 4: its chunks, its
// warm-up, its ring of messages).
static const RunSpec LAB05_RUNS[] = {
    {"np1-gpipe-m2", 1, "--steps 3 --schedule gpipe --micro 2", false, false},
    {"np2-1f1b-m4", 2, "--steps 3 --schedule 1f1b --micro 4", true, false},
    {"np2-gpipe-m1", 2, "--steps 3 --schedule gpipe --micro 1", false, false},
    {"np3-1f1b-m8", 3, "--steps 3 --schedule 1f1b --micro 8", true, false},
    {"np3-gpipe-m4", 3, "--steps 3 --schedule gpipe --micro 4", true, false},
    {"np3-1f1b-m1", 3, "--steps 3 --schedule 1f1b --micro 1", false, false},
    {"np4-gpipe-m8", 4, "--steps 3 --schedule gpipe --micro 8", false, false},
    {"np4-1f1b-m8", 4, "--steps 3 --schedule 1f1b --micro 8", true, false},
    {"np4-1f1b-m2", 4, "--steps 3 --schedule 1f1b --micro 2", true, false},
    {"np4-layers2", 4, "--steps 3 --layers 2 --schedule 1f1b --micro 4", true, false},
    {"np3-layers1-gpipe", 3, "--steps 3 --layers 1 --schedule gpipe --micro 2", false, false},
    {"np4-dp2-pp2", 4, "--steps 3 --schedule 1f1b --micro 2 --pp 2", true, false},
    {"np2-dp2-pp1", 2, "--steps 3 --schedule gpipe --micro 2 --pp 1", false, false},
    // Full recomputation at the stage boundaries (the student's
    // pp_recompute): GPipe as published, each micro-batch keeping its input
    // and messages only; 1F1B with it (its last stage needs none: each
    // backward follows its own forward). Selective recomputation is the
    // model's, per block.
    {"np4-gpipe-m8-recompute-full", 4, "--steps 3 --schedule gpipe --micro 8 --recompute full", false, false},
    {"np3-1f1b-m4-recompute-full", 3, "--steps 3 --schedule 1f1b --micro 4 --recompute full", true, false},
    {"np3-1f1b-m4-recompute-selective", 3, "--steps 3 --schedule 1f1b --micro 4 --recompute selective", false, false},
    {"np2-1f1b-m4-bf16", 2, "--steps 3 --schedule 1f1b --micro 4 --precision bf16", true, false},
    {"np3-gpipe-m4-bf16", 3, "--steps 3 --schedule gpipe --micro 4 --precision bf16", false, false},
    {"np4-dp2-pp2-bf16", 4, "--steps 3 --schedule 1f1b --micro 2 --pp 2 --precision bf16", true, false},
    // The zero-bubble schedules on the split backward (Qi et al. 2024):
    // ZB-H1 at p = 2 and 4, ZB-H2 at p = 3 (4 blocks cut unevenly) and on a
    // grid of two pipelines of two stages, each at the fewest micro-batches
    // the batch allows above the schedule's least (m >= p; m >= 2p - 1).
    {"np2-zb-h1-m4", 2, "--steps 3 --schedule zb-h1 --micro 4", true, false},
    {"np3-zb-h2-m8", 3, "--steps 3 --schedule zb-h2 --micro 8", true, false},
    {"np4-zb-h1-m8", 4, "--steps 3 --schedule zb-h1 --micro 8", false, false},
    {"np4-dp2-pp2-zb-h2-m4", 4, "--steps 3 --schedule zb-h2 --micro 4 --pp 2", false, false},
    // The interleaved schedule (Megatron-LM's, v chunks a stage, p >= 3, m a
    // multiple of p): p = 3 with one unit a virtual stage (6 virtual stages
    // of the default 6 units: the partition's second branch); p = 4 with 10
    // blocks over 8 virtual stages (1 or 2 each: uneven, the first branch);
    // a grid of two pipelines of 3 stages, whose data-parallel all-reduce
    // covers both chunks of each stage.
    {"np3-interleaved-v2-m6", 3, "--steps 3 --schedule interleaved --virtual 2 --micro 6 --batch 6", true, false},
    {"np4-interleaved-v2-m4-layers10", 4, "--steps 3 --schedule interleaved --virtual 2 --micro 4 --layers 10", true,
     false},
    {"np6-dp2-pp3-interleaved", 6, "--steps 3 --schedule interleaved --virtual 2 --micro 3 --pp 3 --batch 6", false,
     false},
};

// Full recomputation at the stage boundaries is lab05's own (the model's
// per-block one recomputes other products): the reference trains without
// it, the same training to the bit, and the work check takes the
// recomputes out (check_work_recomputed). Selective is the model's in both.
static bool recompute_full(const Run *run) { return strstr(run->spec->flags, "--recompute full") != NULL; }

static const char *lab05_ref_flags(const LabSpec *lab, const Run *run, char *buf, size_t len) {
    (void)lab;
    static const char *const drop[] = {"schedule", "micro", "pp", "virtual", NULL},
                             *const drop_rc[] = {"schedule", "micro", "pp", "virtual", "recompute", NULL};
    return without_flags(run, recompute_full(run) ? drop_rc : drop, buf, len);
}

// The size of unit u in floats, from the dump's tensor names ("embed.wte",
// "block3.attn.wq", "head.lm_head"): units are embed, block0.., head.
static double unit_floats(const DumpFile *d, int u, int nunits) {
    char unit[32];
    if (u == 0) snprintf(unit, sizeof unit, "embed.");
    else if (u == nunits - 1) snprintf(unit, sizeof unit, "head.");
    else snprintf(unit, sizeof unit, "block%d.", u - 1);
    double n = 0;
    for (int i = 0; i < d->count; i++)
        if (strncmp(d->arrays[i].name, "param/final/", 12) == 0 &&
            strncmp(d->arrays[i].name + 12, unit, strlen(unit)) == 0)
            n += (double)d->arrays[i].count;
    return n;
}

// The median over tensors of ||grad/first (lab)|| / ||grad/first (ref)||.
static double grad_ratio(const Run *run) {
    double ratios[512];
    int n = 0;
    for (int i = 0; run->ref && i < run->dump->count && n < 512; i++) {
        const DumpArray *a = &run->dump->arrays[i];
        if (strncmp(a->name, "grad/first/", 11) != 0) continue;
        const DumpArray *b = dump_find(run->ref, a->name);
        if (!b || b->count != a->count) continue;
        double x = 0, y = 0;
        for (uint64_t e = 0; e < a->count; e++) x += dump_get(a, e) * dump_get(a, e), y += dump_get(b, e) * dump_get(b, e);
        if (y > 0) ratios[n++] = sqrt(x / y);
    }
    if (!n) return NAN;
    for (int i = 1; i < n; i++)   // insertion sort: a few dozen tensors
        for (int j = i; j > 0 && ratios[j] < ratios[j - 1]; j--) {
            double t = ratios[j];
            ratios[j] = ratios[j - 1], ratios[j - 1] = t;
        }
    return ratios[n / 2];
}

// Entry `name` of a dump when it is numbers in `ndim` dimensions, else NULL.
static const DumpArray *numbers(const DumpFile *d, const char *name, int ndim) {
    char why[200];
    return dump_expect(d, name, DUMP_KIND_NUMBERS, ndim, NULL, true, why, sizeof why) ? NULL : dump_find(d, name);
}

// The last step's schedule of pipeline 0, replayed again here from the
// order of events the harness recorded (pp/events/kind, pp/events/mb and,
// interleaved, pp/events/chunk), with equal stages: its F and B alone (the
// formula's), recomputes aside (*recomputes: how many there were).
static double replayed_bubble(const DumpFile *d, int p, int *recomputes) {
    const DumpArray *kinds = numbers(d, "pp/events/kind", 2), *mbs = numbers(d, "pp/events/mb", 2);
    const DumpArray *chunks = numbers(d, "pp/events/chunk", 2);
    if (!kinds || !mbs || (int)kinds->shape[0] != p || mbs->shape[0] != kinds->shape[0] ||
        mbs->shape[1] != kinds->shape[1] || (chunks && chunks->count != kinds->count))
        return -1;
    int most = (int)kinds->shape[1];
    PpEvent *all = calloc((size_t)p * most, sizeof *all), *rows[64];
    int n[64];
    *recomputes = 0;
    for (int s = 0; s < p && s < 64; s++) {
        rows[s] = all + (size_t)s * most;
        n[s] = 0;
        for (int k = 0; k < most; k++) {
            uint64_t at = (uint64_t)s * most + k;
            int kind = (int)dump_get(kinds, at), mb = (int)dump_get(mbs, at);
            if (kind < 0) break;
            rows[s][n[s]++] = (PpEvent){kind, mb, 0, 0, 0, chunks ? (int)dump_get(chunks, at) : 0};
        }
        int fb = pp_events_without(rows[s], n[s], PP_PASS_R);
        *recomputes += n[s] - fb, n[s] = fb;
    }
    double span, bubble = pp_replay(p, rows, n, true, &span);
    free(all);
    return bubble;
}

// The harness's record per rank: its stage, its units [u0, u1), the most
// micro-batches alive at once, the activation bytes the schedule's bound is
// made of (scratch + k sets; under full recomputation + the shared set),
// and full recomputation's record (passes made again, the most in a step,
// and their multiply-adds and LayerNorm rows; backward passes on
// activations not made again, and the first: step, micro-batch, the one
// whose activations it ran on), a field an entry (pp/rank_stage/...), one
// number per rank.
typedef struct {
    const DumpArray *stage, *u0, *u1, *max_live, *acts_scratch, *acts_set, *acts_shared, *recomputes, *rc_matmul,
        *rc_layernorm, *stale, *stale_step, *stale_mb, *stale_held;
} RankStage;

// The record of a dump of N ranks: true when whole, else false with the
// entry that is missing or not one number per rank in `missing`.
static bool rank_stage_read(const DumpFile *d, int N, RankStage *rs, char *missing, size_t len) {
    static const char *const fields[] = {"stage",       "u0",         "u1",         "max_live",     "acts_scratch",
                                         "acts_set",    "acts_shared", "recomputes", "rc_matmul",    "rc_layernorm",
                                         "stale",       "stale_step", "stale_mb",   "stale_held"};
    const DumpArray **at[] = {&rs->stage,      &rs->u0,         &rs->u1,         &rs->max_live, &rs->acts_scratch,
                              &rs->acts_set,   &rs->acts_shared, &rs->recomputes, &rs->rc_matmul, &rs->rc_layernorm,
                              &rs->stale,      &rs->stale_step, &rs->stale_mb,   &rs->stale_held};
    for (int i = 0; i < (int)(sizeof fields / sizeof fields[0]); i++) {
        char name[64];
        snprintf(name, sizeof name, "pp/rank_stage/%s", fields[i]);
        *at[i] = numbers(d, name, 1);
        if (!*at[i] || (int)(*at[i])->shape[0] != N) {
            snprintf(missing, len, "%s", name);
            return false;
        }
    }
    return true;
}

// Rank q's value of a field of the record.
static double rank_field(const DumpArray *field, int q) { return dump_get(field, (uint64_t)q); }

// Interleaved: per rank and chunk, its virtual stage and units [u0, u1)
// (pp/rank_chunk/..., (N, v) each); one chunk, the stage, otherwise.
typedef struct {
    const DumpArray *vs, *u0, *u1;
    int v;
} RankChunks;

static bool rank_chunks_read(const DumpFile *d, int N, int v, RankChunks *ch) {
    ch->vs = numbers(d, "pp/rank_chunk/vs", 2), ch->u0 = numbers(d, "pp/rank_chunk/u0", 2);
    ch->u1 = numbers(d, "pp/rank_chunk/u1", 2), ch->v = v;
    const DumpArray *f[3] = {ch->vs, ch->u0, ch->u1};
    for (int i = 0; i < 3; i++)
        if (!f[i] || (int)f[i]->shape[0] != N || (int)f[i]->shape[1] != v) return false;
    return true;
}

// Rank q's chunk c's value of a field.
static int chunk_field(const RankChunks *ch, const DumpArray *f, int q, int c) {
    return (int)dump_get(f, (uint64_t)q * ch->v + c);
}

// The parameters of rank q's units, every chunk's (ch NULL: its stage's, [u0, u1)).
static double rank_params(const DumpFile *d, const RankStage *per, const RankChunks *ch, int q, int nunits) {
    double n = 0;
    for (int c = 0; c < (ch ? ch->v : 1); c++) {
        int u0 = ch ? chunk_field(ch, ch->u0, q, c) : (int)rank_field(per->u0, q);
        int u1 = ch ? chunk_field(ch, ch->u1, q, c) : (int)rank_field(per->u1, q);
        for (int u = u0; u < u1; u++) n += unit_floats(d, u, nunits);
    }
    return n;
}

// A step's messages, call by call: each micro-batch's activations to the
// next stage and their gradients back, one send and one receive each way
// per neighbour; on the data-parallel group, one all-reduce per unit of
// the stage.
typedef struct {
    const RankStage *per;
    const RankChunks *ch;   // interleaved (NULL: one chunk a stage)
    int p, m, dp, nunits;
    double message;   // bytes of one micro-batch's activations
    double elem;      // bytes of an element: 4, or 2 in bf16
} Lab05Step;

// Interleaved (p >= 3): each chunk's micro-batches forward to the next
// virtual stage and their gradients back, but the last virtual stage's
// (the head, on stage p - 1) and the first's (the embeddings, on stage 0);
// stage p - 1's next is stage 0 round the ring, a link of neither
// neighbour (LEDGER_OTHER).
static int interleaved_wants(int s, const Lab05Step *k, double params, int units, LedgerWant *w) {
    int p = k->p, v = k->ch->v, n = 0;
    double per_chunk = k->m * k->message, out = (v - (s == p - 1)) * per_chunk, in = (v - (s == 0)) * per_chunk;
    LedgerGroup next = s == p - 1 ? LEDGER_OTHER : LEDGER_NEXT, prev = s == 0 ? LEDGER_OTHER : LEDGER_PREV;
    w[n++] = (LedgerWant){next, COMM_OP_SEND, out, out / k->message, "each chunk's micro-batches' activations, once", 0};
    w[n++] = (LedgerWant){next, COMM_OP_RECV, out, out / k->message, "each chunk's micro-batches' output gradients, once", 0};
    w[n++] = (LedgerWant){prev, COMM_OP_RECV, in, in / k->message, "each chunk's micro-batches' activations, once", 0};
    w[n++] = (LedgerWant){prev, COMM_OP_SEND, in, in / k->message, "each chunk's micro-batches' input gradients, once", 0};
    if (k->dp > 1)
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_REDUCE, k->elem * params, units,
                              "the data-parallel all-reduce of the stage's units, one each", 0};
    return n;
}

static int lab05_wants(const Run *run, int rank, LedgerWant *w, const void *ctx) {
    const Lab05Step *k = ctx;
    int s = rank % k->p, n = 0;
    int u0 = (int)rank_field(k->per->u0, rank), u1 = (int)rank_field(k->per->u1, rank);
    double bytes = k->m * k->message, params = 0;
    if (k->ch) {
        int units = 0;
        for (int c = 0; c < k->ch->v; c++) units += chunk_field(k->ch, k->ch->u1, rank, c) - chunk_field(k->ch, k->ch->u0, rank, c);
        return interleaved_wants(s, k, rank_params(run->dump, k->per, k->ch, rank, k->nunits), units, w);
    }
    for (int u = u0; u < u1; u++) params += unit_floats(run->dump, u, k->nunits);
    if (s < k->p - 1) {
        w[n++] = (LedgerWant){LEDGER_NEXT, COMM_OP_SEND, bytes, k->m, "each micro-batch's activations, once", 0};
        w[n++] = (LedgerWant){LEDGER_NEXT, COMM_OP_RECV, bytes, k->m, "each micro-batch's output gradient, once", 0};
    }
    if (s > 0) {
        w[n++] = (LedgerWant){LEDGER_PREV, COMM_OP_RECV, bytes, k->m, "each micro-batch's activations, once", 0};
        w[n++] = (LedgerWant){LEDGER_PREV, COMM_OP_SEND, bytes, k->m, "each micro-batch's input gradient, once", 0};
    }
    if (k->dp > 1)
        w[n++] = (LedgerWant){LEDGER_OUTER, COMM_OP_ALL_REDUCE, k->elem * params, u1 - u0,
                              "the data-parallel all-reduce of the stage's units, one each", 0};
    return n;
}

// The first send in the logs that comes after a W with no other pass
// between: a W run between a B and the send of the gradient it made (a W
// makes no message). Its rank, the W's micro-batch and the send's peer in
// *rank, *mb, *peer; false if none.
static bool w_before_send(const CommEvent *const *ev, const int *n, int N, int *rank, int *mb, int *peer) {
    for (int r = 0; r < N; r++)
        for (int i = 0, w = -1; i < n[r]; i++) {
            const CommEvent *e = &ev[r][i];
            if (e->kind == COMM_EVENT_MARK) w = e->op == PP_PASS_W ? pp_mark_mb(e->peer) : -1;
            if (e->kind == COMM_EVENT_POST && e->op == COMM_OP_SEND && w >= 0) {
                *rank = r, *mb = w, *peer = e->peer;
                return true;
            }
        }
    return false;
}

// What each stage waited for: the last step's log of every rank replayed
// with what each end of an operation waits for (pp_replay_timeline). A
// stage that has its input and waits for anything else (a barrier after
// every forward, a blocking send, every input received before the first
// pass) keeps its order, so the bubble of the order alone does not show it;
// the stages no longer overlap in time, and this does.
static void check_overlap(Grader *g, const Run *run, int N, int p) {
    // Per rank and event: its kind (-1 past the rank's last), op, peer,
    // place among its kind and group, a field an entry, (N, E) each.
    static const char *const fields[5] = {"pp/timeline/kind", "pp/timeline/op", "pp/timeline/peer",
                                          "pp/timeline/seq", "pp/timeline/group"};
    const DumpArray *tl[5];
    const char *check = "stages wait only for their inputs";
    if (N > 63) return;   // the log names groups by bit masks of world ranks
    for (int f = 0; f < 5; f++) {
        tl[f] = numbers(run->dump, fields[f], 2);
        if (!tl[f] || (int)tl[f]->shape[0] != N || tl[f]->shape[1] != tl[0]->shape[1]) {
            char fig[64];
            snprintf(fig, sizeof fig, "no %s", fields[f]);
            grade_check(g, run, check, false, fig, "every rank's log of the last step",
                        "the dump was not written by lab05's harness");
            return;
        }
    }
    int most = (int)tl[0]->shape[1], *n = calloc((size_t)N, sizeof *n);
    CommEvent *all = calloc((size_t)N * most, sizeof *all);
    const CommEvent **ev = calloc((size_t)N, sizeof *ev);
    for (int r = 0; r < N; r++) {
        ev[r] = all + (size_t)r * most;
        for (int k = 0; k < most; k++) {
            uint64_t at = (uint64_t)r * most + k;
            if (dump_get(tl[0], at) < 0) break;
            all[at] = (CommEvent){(int32_t)dump_get(tl[0], at), (int32_t)dump_get(tl[1], at),
                                  (int32_t)dump_get(tl[2], at), (int32_t)dump_get(tl[3], at),
                                  (uint64_t)dump_get(tl[4], at)};
            n[r]++;
        }
    }
    double order;
    PpLate late;
    double bubble = pp_replay_timeline(N, p, ev, n, &order, &late);
    char fig[200], bound[200], diag[1024], cause[300] = "";
    snprintf(fig, sizeof fig, "%.1f%% idle", 100 * bubble);
    snprintf(bound, sizeof bound, "the order's own %.1f%% (+- 0.5%%)", 100 * order);
    if (late.cause_rank >= 0) {
        const CommEvent *e = &late.cause;
        int members = 0;
        for (int q = 0; q < 64; q++) members += (int)((e->group >> q) & 1);
        if (e->op == COMM_OP_SEND)
            snprintf(cause, sizeof cause, "rank %d's send to rank %d, which waited until rank %d asked for the "
                     "message (a blocking send, or a wait on the send before the next pass: wait on a send only when "
                     "its buffer is needed again)", late.cause_rank, e->peer, e->peer);
        else if (e->op == COMM_OP_RECV)
            snprintf(cause, sizeof cause, "rank %d's receive from rank %d, of a message sent late", late.cause_rank,
                     e->peer);
        else
            snprintf(cause, sizeof cause, "a %s over %d ranks on rank %d (every rank of it waits for the slowest)",
                     comm_op_name((CommOp)e->op), members, late.cause_rank);
    }
    char chunk[32] = "";
    if (dump_scalar(run->dump, "pp/interleaved", 0) != 0) snprintf(chunk, sizeof chunk, " (its chunk %d)", late.chunk);
    if (bubble < 0)
        snprintf(diag, sizeof diag, "the last step's log cannot be replayed: an operation waits for one no rank "
                 "started");
    else
        snprintf(diag, sizeof diag, "replayed with equal stages and what each operation waits for, the step leaves "
                 "%.1f%% idle where its order of passes leaves %.1f%%: the first pass to start late is stage %d's "
                 "%s of micro-batch %d%s, %.0f forward pass%s later than its input allows, held by %s. The order of "
                 "passes is right; the stages wait for each other besides their inputs, so they no longer overlap",
                 100 * bubble, 100 * order, late.rank, pp_pass_name(late.kind), late.mb, chunk, late.late,
                 late.late == 1 ? "" : "es", cause[0] ? cause : "something before it");
    int w_rank, w_mb, w_peer;
    if (bubble > order + 0.005 && w_before_send(ev, n, N, &w_rank, &w_mb, &w_peer)) {
        size_t len = strlen(diag);
        snprintf(diag + len, sizeof diag - len, ". Rank %d ran the W of micro-batch %d before sending the gradient "
                 "its B had made to rank %d: the previous stage waits for that gradient, and nobody waits for W; "
                 "send it as soon as B is done, then run W", w_rank, w_mb, w_peer);
    }
    grade_check(g, run, check, bubble >= 0 && order >= 0 && bubble <= order + 0.005, fig, bound, diag);
    free(n);
    free(all);
    free(ev);
}

// The element of every message between the stages: each send and receive
// of the ledger (comm/ledger: op, group size, group, bytes a call, calls)
// moves one micro-batch's (B/m) T C elements, `elems`, of the run's
// precision: 4 bytes each in fp32, 2 in bf16. A message of the other
// precision's size is a type given wrong at one end; the bytes check
// cannot tell which end, nor a message of the other size from one sent
// twice, and this can.
static void check_message_elements(Grader *g, const Run *run, int N, double elems, bool bf16) {
    const DumpArray *led = dump_find(run->dump, "comm/ledger");
    const char *check = "messages in the run's precision";
    double E = bf16 ? 2 : 4;
    char fig[200], bound[120], diag[900];
    snprintf(bound, sizeof bound, "(B/m) T C elements of %d bytes (%s), every send and receive", (int)E,
             bf16 ? "bf16" : "fp32");
    if (!led || led->ndim != 3 || (int)led->shape[0] != N || led->shape[2] != 5 || elems <= 0) return;
    for (int r = 0; r < N; r++)
        for (uint64_t i = 0; i < led->shape[1]; i++) {
            uint64_t at = ((uint64_t)r * led->shape[1] + i) * 5;
            int op = (int)dump_get(led, at);
            if (op != COMM_OP_SEND && op != COMM_OP_RECV) continue;
            double e = dump_get(led, at + 3) / elems;
            if (fabs(e - E) < 1e-9) continue;
            bool send = op == COMM_OP_SEND;
            snprintf(fig, sizeof fig, "rank %d: %ss of %.4g bytes an element", r, send ? "send" : "receive", e);
            if (bf16 && fabs(e - 4) < 1e-9)
                snprintf(diag, sizeof diag, "rank %d's %ss move a micro-batch's (B/m) T C elements at 4 bytes each "
                         "in a bf16 run: %s", r, send ? "send" : "receive", send
                         ? "the messages were sent as fp32 (comm_send_async, or COMM_F32), twice the message's "
                           "bytes read from a buffer that holds half of them: send pp_message_count(pp) elements "
                           "of pp->type (comm_send_async_typed)"
                         : "the messages were received as fp32 (comm_recv, or COMM_F32) where the stages send "
                           "bf16. Over MPI the message fits and the numbers come out right, but the receive "
                           "expects twice the bytes sent, and NCCL, which matches sizes exactly, would wait for the "
                           "rest: receive pp_message_count(pp) elements of pp->type (comm_recv_typed)");
            else if (!bf16 && fabs(e - 2) < 1e-9)
                snprintf(diag, sizeof diag, "rank %d's %ss move a micro-batch's (B/m) T C elements at 2 bytes each "
                         "in an fp32 run: COMM_BF16 written where pp->type belongs, so only the first half of each "
                         "message's bytes moved and the rest of the receiver's buffer kept what it held; move "
                         "pp_message_count(pp) elements of pp->type, whatever the run's precision", r,
                         send ? "send" : "receive");
            else
                snprintf(diag, sizeof diag, "rank %d's %ss move %.4g bytes a call where a micro-batch's message is "
                         "%.0f elements of %d bytes (pp_message_count(pp) elements of pp->type)", r,
                         send ? "send" : "receive", dump_get(led, at + 3), elems, (int)E);
            grade_check(g, run, check, false, fig, bound, diag);
            return;
        }
    grade_check(g, run, check, true, bf16 ? "2 bytes an element, every one" : "4 bytes an element, every one", bound, NULL);
}

// Under full recomputation at the stage boundaries, the recomputes' work
// (pp_recompute's, counted by the harness as it ran them) comes on top of
// single-device training's: taken out, the rest is the model's work shared
// out, as check_work holds it without recomputation. (What the recomputes
// cost, the program prints.)
static void check_work_recomputed(Grader *g, const Run *run, const RankStage *per, int N) {
    static const char *const names[2] = {"ops/matmul", "ops/layernorm"}, *const what[2] = {"matrix products",
                                                                                           "LayerNorm rows"};
    const DumpArray *again_of[2] = {per->rc_matmul, per->rc_layernorm};
    if (!run->ref) return;   // a run without its reference: nothing to compare the sum with
    for (int k = 0; k < 2; k++) {
        const DumpArray *a = dump_find(run->dump, names[k]), *b = dump_find(run->ref, names[k]);
        char check[96], fig[200], bound[160], diag[900];
        snprintf(check, sizeof check, "%s, all ranks together", what[k]);
        snprintf(bound, sizeof bound, "x1.000 (the model's work, shared out; the recomputes aside) +- 0.5%%");
        if (!a || !b || (int)a->count != N) {
            grade_check(g, run, check, false, "not in the dump", "single-device training's",
                        "the harness or the reference did not write the ops' work (ops.h)");
            continue;
        }
        double mine = 0, again = 0, ref = 0;
        for (int q = 0; q < N; q++) mine += dump_get(a, (uint64_t)q), again += rank_field(again_of[k], q);
        for (uint64_t r = 0; r < b->count; r++) ref += dump_get(b, r);
        double ratio = ref > 0 ? (mine - again) / ref : NAN;
        snprintf(fig, sizeof fig, "x%.3f of single-device training's, the recomputes aside (they add x%.3f)", ratio,
                 ref > 0 ? again / ref : NAN);
        if (ratio > 1)
            snprintf(diag, sizeof diag, "besides the recomputes, the ranks together asked ops.h for %.2f times "
                     "single-device training's %s: a stage computed units that are not its own, or a micro-batch "
                     "more than once (a forward pass run again by pp_forward_compute is not a recompute: "
                     "pp_recompute makes the activations again, once, into the shared set)", ratio, what[k]);
        else
            snprintf(diag, sizeof diag, "besides the recomputes, the ranks together asked ops.h for %.2f of "
                     "single-device training's %s: the rest was computed outside ops.h or not at all", ratio, what[k]);
        grade_check(g, run, check, fabs(ratio - 1) <= 0.005, fig, bound, diag);
    }
}

// Full recomputation at the stage boundaries: each backward pass ran on its
// own micro-batch's activations, made again (pp_recompute) since the last
// pass that filled the shared set with another's. The harness notes the
// backward passes that found another micro-batch's there and ran on them.
static void check_recomputed(Grader *g, const Run *run, const RankStage *per, int N) {
    int at = -1, total = 0;
    for (int q = 0; q < N; q++) {
        int n = (int)rank_field(per->stale, q);
        total += n;
        if (n > 0 && at < 0) at = q;
    }
    char fig[160], diag[700] = "", held[64];
    if (at < 0) {
        snprintf(fig, sizeof fig, "every backward pass on its own micro-batch's activations");
    } else {
        int s = (int)rank_field(per->stage, at), mb = (int)rank_field(per->stale_mb, at);
        int h = (int)rank_field(per->stale_held, at), step = (int)rank_field(per->stale_step, at);
        if (h >= 0) snprintf(held, sizeof held, "micro-batch %d's", h);
        else snprintf(held, sizeof held, "none of this step's");
        snprintf(fig, sizeof fig, "%d backward pass%s on activations not made again", total, total == 1 ? "" : "es");
        snprintf(diag, sizeof diag, "micro-batch %d's backward pass on stage %d ran on activations that were not made "
                 "again (in step %d the shared set held %s): under --recompute full call pp_recompute(pp, mb) before "
                 "pp_backward_compute, for every micro-batch (it returns at once where the set holds mb's still)", mb,
                 s, step + 1, held);
    }
    grade_check(g, run, "activations made again before each backward pass", total == 0, fig,
                "none on another micro-batch's", diag);
}

// The factors a pipeline's gradients can be off by, and why.
static int lab05_ratio_causes(const Run *run, RatioCause *out) {
    int m = (int)dump_scalar(run->dump, "pp/m", 1), n = 0;
    if (m > 1) {
        out[n].factor = m;
        snprintf(out[n++].cause, sizeof out->cause, "which is m = %d: each micro-batch's loss was scaled by 1 / (its "
                 "own tokens) instead of 1 / (the step's), so the m micro-batches add up to m times the mean", m);
        out[n].factor = 1.0 / m;
        snprintf(out[n++].cause, sizeof out->cause, "which is 1/m = 1/%d: the micro-batches' gradients were divided "
                 "by m on top of the loss scale, which already averages over the step's tokens", m);
    }
    return n;
}

// ---- the zero-bubble schedules -------------------------------------------------

// The last step's passes of pipeline 0 (pp/events/kind and pp/events/mb),
// rows[s] stage s's n[s] in order, from *all (free it); false when the
// dump has none of p rows.
static bool zb_events(const DumpFile *d, int p, PpEvent **all, PpEvent **rows, int *n) {
    const DumpArray *kinds = numbers(d, "pp/events/kind", 2), *mbs = numbers(d, "pp/events/mb", 2);
    if (p > 64 || !kinds || !mbs || (int)kinds->shape[0] != p || mbs->shape[0] != kinds->shape[0] ||
        mbs->shape[1] != kinds->shape[1])
        return false;
    int most = (int)kinds->shape[1];
    *all = calloc((size_t)p * most, sizeof **all);
    for (int s = 0; s < p; s++) {
        rows[s] = *all + (size_t)s * most;
        n[s] = 0;
        for (int k = 0; k < most; k++) {
            uint64_t at = (uint64_t)s * most + k;
            if (dump_get(kinds, at) < 0) break;
            rows[s][n[s]++] = (PpEvent){(int)dump_get(kinds, at), (int)dump_get(mbs, at), 0, 0, 0, 0};
        }
    }
    return true;
}

// The order of passes, held to the schedule's (Qi et al. 2024, figure 3,
// as its authors' get_hand_schedule builds it): stage s warms up with
// c (p - s - 1) forwards; then for each micro-batch i in turn, a forward
// while any is left, B of i, and W of the oldest micro-batch waiting for
// its W once i >= c s; then the W's left. The first pass out of place is
// named, and an order that is 1F1B's (whole backward passes, or each W
// right after its own B) is called so: it leaves 1F1B's bubble.
static void check_zb_order(Grader *g, const Run *run, PpEvent *const *rows, const int *n, int p, int m, int c) {
    const char *name = c == 1 ? "ZB-H1" : "ZB-H2";
    char fig[200], bound[200], diag[900];
    snprintf(bound, sizeof bound, "%s's: c (p - s - 1) forwards, then F, B, and W from i >= c s, then the W's left "
             "(c = %d)", name, c);
    // Per stage, the first place where its order leaves the schedule's: the
    // pass the schedule runs there (kind -2: none, the stage ran more); the
    // stage with the earliest such place is named.
    int at_s = -1, at_k = 0, want_kind = 0, want_mb = 0;
    for (int s = 0; s < p; s++) {
        int warmup = c * (p - s - 1), f = 0, w = 0, k = 0, kind = -1, mb = 0;
        for (int i = -warmup; i < m + c * s && kind == -1; i++) {
            int want[3][2], nw = 0;
            if (i < 0) {
                want[nw][0] = PP_PASS_F, want[nw++][1] = f++;
            } else if (i < m) {
                if (f < m) want[nw][0] = PP_PASS_F, want[nw++][1] = f++;
                want[nw][0] = PP_PASS_B, want[nw++][1] = i;
                if (i >= c * s) want[nw][0] = PP_PASS_W, want[nw++][1] = w++;
            } else {
                want[nw][0] = PP_PASS_W, want[nw++][1] = w++;
            }
            for (int j = 0; j < nw && kind == -1; j++) {
                if (k >= n[s] || rows[s][k].kind != want[j][0] || rows[s][k].mb != want[j][1])
                    kind = want[j][0], mb = want[j][1];
                else k++;
            }
        }
        if (kind == -1 && k < n[s]) kind = -2;   // passes beyond the schedule's
        if (kind != -1 && (at_s < 0 || k < at_k)) at_s = s, at_k = k, want_kind = kind, want_mb = mb;
    }
    if (at_s < 0) {
        grade_check(g, run, "the order of passes", true, "the schedule's on every stage", bound, NULL);
        return;
    }
    // 1F1B's order: no W at all (whole backward passes), or every W right
    // after its own B.
    bool whole = true, adjacent = true;
    for (int s = 0; s < p; s++)
        for (int k = 0; k < n[s]; k++) {
            if (rows[s][k].kind == PP_PASS_W) whole = false;
            if (rows[s][k].kind == PP_PASS_W && (k == 0 || rows[s][k - 1].kind != PP_PASS_B ||
                                                  rows[s][k - 1].mb != rows[s][k].mb))
                adjacent = false;
        }
    const PpEvent *e = at_k < n[at_s] ? &rows[at_s][at_k] : NULL;
    char ran[80], instead[80];
    if (e) snprintf(ran, sizeof ran, "%s of micro-batch %d", pp_pass_name(e->kind), e->mb);
    else snprintf(ran, sizeof ran, "nothing (the stage's passes end there)");
    if (want_kind >= 0) snprintf(instead, sizeof instead, "%s of micro-batch %d", pp_pass_name(want_kind), want_mb);
    else snprintf(instead, sizeof instead, "nothing (its %d passes are done)", 3 * m);
    snprintf(fig, sizeof fig, "stage %d's pass %d: %s", at_s, at_k + 1, ran);
    int len = snprintf(diag, sizeof diag, "stage %d's pass %d is %s where %s runs %s", at_s, at_k + 1, ran, name,
                       instead);
    if (whole)
        snprintf(diag + len, sizeof diag - len, ". The schedule falls back to 1F1B: its backward passes are whole "
                 "(pp_backward_compute), not split into B (pp_backward_input) and W (pp_backward_weight), so there "
                 "is no W to fill the gaps");
    else if (adjacent)
        snprintf(diag + len, sizeof diag - len, ". The schedule falls back to 1F1B: every W runs right after its own "
                 "B, which is 1F1B's order with the backward pass in two and leaves 1F1B's bubble; %s holds stage "
                 "s's W's %s passes behind its B's, where they fill the gaps", name, c == 1 ? "s" : "2s");
    else
        snprintf(diag + len, sizeof diag - len, ": warm up with %s forwards, then for each micro-batch i a forward "
                 "while any is left, B of i, and from i >= %s the W of the oldest micro-batch waiting for one; then "
                 "the W's left", c == 1 ? "p - s - 1" : "2 (p - s - 1)", c == 1 ? "s" : "2s");
    grade_check(g, run, "the order of passes", false, fig, bound, diag);
}

// Every B (pp_backward_input) followed by its W (pp_backward_weight): a B
// whose W never ran leaves its micro-batch's parameter gradients out of
// the step.
static void check_zb_weights(Grader *g, const Run *run, int N) {
    const DumpArray *missing = numbers(run->dump, "pp/rank_stage/w_missing", 1),
                    *step = numbers(run->dump, "pp/rank_stage/w_missing_step", 1),
                    *mb = numbers(run->dump, "pp/rank_stage/w_missing_mb", 1),
                    *stage = numbers(run->dump, "pp/rank_stage/stage", 1);
    const char *check = "every B followed by its W";
    if (!missing || !step || !mb || !stage || (int)missing->shape[0] != N) {
        grade_check(g, run, check, false, "no pp/rank_stage/w_missing", "one number per rank",
                    "the dump was not written by lab05's harness");
        return;
    }
    int at = -1, total = 0;
    for (int q = 0; q < N; q++) {
        int k = (int)rank_field(missing, q);
        total += k;
        if (k > 0 && at < 0) at = q;
    }
    char fig[160], diag[600] = "";
    snprintf(fig, sizeof fig, "%d B pass%s without a W", total, total == 1 ? "" : "es");
    if (at >= 0)
        snprintf(diag, sizeof diag, "micro-batch %d's W never ran on stage %d (step %d): its B computed the input "
                 "gradient and sent it back, but its parameter gradients (pp_backward_weight) never reached the "
                 "stage's gradients, so the step's gradient misses a micro-batch; run every micro-batch's W before "
                 "the step ends (the W's left after the last B, too)", (int)rank_field(mb, at),
                 (int)rank_field(stage, at), (int)rank_field(step, at) + 1);
    grade_check(g, run, check, total == 0, fig, "none", diag);
}

// The zero-bubble schedules' bubble with F, B and W 1 each, held to the
// formulas to the pass: the step lasts 3m + p - 1 (a bubble of
// (p - 1) / (3m + p - 1)), and the stages' spans (first pass to last) hold
// (p - 1) / (6m + p - 1) idle under ZB-H1, none under ZB-H2.
static void check_zb_bubble(Grader *g, const Run *run, PpEvent **rows, int *n, int p, int m, int c) {
    const char *name = c == 1 ? "ZB-H1" : "ZB-H2";
    double span, bubble = pp_replay(p, rows, n, true, &span), want = 3.0 * m + p - 1;
    char fig[200], bound[240], diag[900];
    snprintf(fig, sizeof fig, "%.1f%%: a step of %g passes", 100 * bubble, span);
    snprintf(bound, sizeof bound, "(p - 1) / (3m + p - 1) = %.1f%%: a step of 3m + p - 1 = %g passes, to the pass",
             100 * pp_zb_bubble_formula(p, m), want);
    if (bubble < 0)
        snprintf(diag, sizeof diag, "the schedule cannot be replayed: a stage's pass waits for a pass its neighbour "
                 "never ran (every stage must run F, B and W of every micro-batch)");
    else
        snprintf(diag, sizeof diag, "replayed with F, B and W 1 each, the step takes %g passes where %s takes 3m + "
                 "p - 1 = %g: %s", span, name, want, span > want
                 ? "a stage waits where a W could have filled the gap, or a forward or B is held back (the order of "
                   "passes says where)"
                 : "fewer passes than the schedule runs: some were never run");
    grade_check(g, run, "the schedule's bubble", bubble >= 0 && fabs(span - want) < 0.5, fig, bound, diag);
    if (bubble < 0) return;
    // Within the stages' spans, in passes: idle = the spans' sum - the work.
    double spans = 0, busy = 0, want_idle = c == 1 ? p * (p - 1) / 2.0 : 0;
    for (int s = 0; s < p; s++) {
        double first = INFINITY, last = 0;
        for (int k = 0; k < n[s]; k++) {
            busy += rows[s][k].end - rows[s][k].start;
            first = fmin(first, rows[s][k].start), last = fmax(last, rows[s][k].end);
        }
        spans += n[s] ? last - first : 0;
    }
    double sb = spans > 0 ? (spans - busy) / spans : 0;
    snprintf(fig, sizeof fig, "%.1f%%: %g pass%s idle", 100 * sb, spans - busy, spans - busy == 1 ? "" : "es");
    snprintf(bound, sizeof bound, "%s = %.1f%%: %g pass%s idle, to the pass", c == 1 ? "(p - 1) / (6m + p - 1)"
             : "0 ((p - 1)(F + B - 2W))", 100 * pp_zb_span_bubble_formula(c, p, m), want_idle,
             want_idle == 1 ? "" : "es");
    snprintf(diag, sizeof diag, "replayed with F, B and W 1 each, the stages' spans (each stage's first pass to its "
             "last) hold %g pass(es) idle where %s's hold %g: a stage waits between its first pass and its last (the "
             "order of passes says where)", spans - busy, name, want_idle);
    grade_check(g, run, "the bubble within the stages' spans", fabs(spans - busy - want_idle) < 0.5, fig, bound,
                diag);
}

// Interleaved: chunk c of stage s holds virtual stage c p + s (the
// student's pp_virtual_stage), so that a micro-batch goes round the ranks v
// times. Chunks of consecutive virtual stages on one rank (stage s holding
// s v .. s v + v - 1) are 1F1B's stages cut finer: the pipeline fills and
// drains through p stages of whole-stage passes, and the bubble does not
// fall.
static void check_round_robin(Grader *g, const Run *run, int N, int p, const RankChunks *ch) {
    int v = ch->v, bad = -1, contiguous = 0;
    for (int q = 0; q < N; q++)
        for (int c = 0; c < v; c++) {
            int s = q % p, k = chunk_field(ch, ch->vs, q, c);
            if (k != c * p + s && bad < 0) bad = q * v + c;
            contiguous += k == s * v + c;
        }
    char fig[160], diag[700] = "";
    if (bad < 0) {
        snprintf(fig, sizeof fig, "chunk c of stage s is virtual stage c p + s, every one");
    } else {
        int q = bad / v, c = bad % v, s = q % p, k = chunk_field(ch, ch->vs, q, c);
        snprintf(fig, sizeof fig, "stage %d's chunk %d is virtual stage %d", s, c, k);
        if (contiguous == N * v)
            snprintf(diag, sizeof diag, "every stage holds consecutive virtual stages (stage s: s v .. s v + v - 1, "
                     "contiguous chunks): that is 1F1B over p stages, each cut into v pieces, and a micro-batch goes "
                     "round the ranks once, so the pipeline fills and drains through whole stages and the bubble "
                     "does not fall; round-robin, stage s holds s, s + p, s + 2p, ... (pp_virtual_stage returns "
                     "c p + s)");
        else
            snprintf(diag, sizeof diag, "stage %d's chunk %d holds virtual stage %d where the interleaved schedule "
                     "puts %d: round-robin, chunk c of stage s is virtual stage c p + s (pp_virtual_stage), and the "
                     "schedule's messages go round the ring on that assumption", s, c, k, c * p + s);
    }
    grade_check(g, run, "chunks round-robin", bad < 0, fig, "virtual stage c p + s", diag);
}

// Interleaved: a run that hung with every stage waiting for a send of its
// own to be taken (the watchdog's "waited in wait for send ... to rank", or
// a rank's "stopped while in wait for send" as the run ended),
// three stages or more round the ring: each waits for the next to take its
// message, and the next is waiting for its own. A stage that receives a
// backward pass's gradient only when the pass comes (1F1B's way) and waits
// for its gradient sends before going on makes this ring.
static void check_ring_hang(Grader *g, const Run *run) {
    if (!strstr(run->spec->flags, "--schedule interleaved") || !run->output) return;
    int waiting = 0;
    // Each rank's line: its own watchdog's ("waited in wait for send"), or
    // what a rank said as the run ended ("stopped while in wait for send").
    for (const char *at = run->output; (at = strstr(at, " in wait for send")); at++) waiting++;
    if (waiting < 3 || waiting < run->spec->np) return;
    char fig[96];
    snprintf(fig, sizeof fig, "%d ranks each waiting for a send of its own", waiting);
    grade_check(g, run, "stages round the ring", false, fig, "no stage waiting in its own send",
                "every stage waits for a send of its own to be taken, each by the next round the ring, which "
                "waits for its own: a deadlock of the ring. Receive each backward pass's gradient ahead of it "
                "(comm_recv_async_typed into pp_chunk_grad_in as soon as its chunk's forward pass has made the "
                "buffer, one receive ahead, in the order of the backward passes): a stage that waits for its own "
                "gradient's send before it receives the next gradient holds up the stage behind it");
}

// Interleaved: a run that hung with the last stage waiting to receive a
// gradient before its first backward pass of the step (the harness's
// "[while stage p-1 of p, 0 backward passes into step k]"). Its first
// backward pass is of micro-batch 0's last chunk, the head's, which needs no
// gradient from anyone; one that waits for a gradient is of another chunk,
// whose gradient only a later virtual stage's backward pass can send, and
// every stage behind waits the same way: the backward passes went through
// the chunks in forward order.
static void check_backward_order_hang(Grader *g, const Run *run) {
    if (!strstr(run->spec->flags, "--schedule interleaved") || !run->output) return;
    bool found = false;
    int step = 0;
    for (const char *line = run->output; line && *line && !found; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        const char *eol = strchr(line, '\n'), *w = strstr(line, "watchdog: waited in wait for recv");
        const char *at = strstr(line, "[while stage ");
        if (!w || !at || (eol && (w > eol || at > eol))) continue;
        int s = -1, p = 0, b = -1, k = 0;
        if (sscanf(at, "[while stage %d of %d, %d backward passes into step %d", &s, &p, &b, &k) == 4 &&
            p >= 2 && s == p - 1 && b == 0)
            found = true, step = k;
    }
    if (!found) return;
    char fig[96];
    snprintf(fig, sizeof fig, "the last stage waits for a gradient before its first backward pass (step %d)", step);
    grade_check(g, run, "backward passes in reverse chunk order", false, fig,
                "the last stage's first backward pass needs no gradient",
                "the last stage waited to receive an output gradient before its first backward pass of the step: "
                "that pass is not of micro-batch 0's last chunk (the head's, which needs no gradient and must come "
                "first), so the backward passes go through the chunks in forward order. A chunk's gradient comes "
                "from the virtual stage after it, whose backward pass comes first: the backward passes go through "
                "the chunks in reverse, v - 1 down to 0 (the k-th backward pass is of chunk v - 1 - (k mod p v) div "
                "p), and the gradient receives posted ahead follow the same order");
}

static void lab05_check(Grader *g, const LabSpec *lab, const Run *run) {
    (void)lab;
    if (!check_ran(g, run, false)) {
        check_ring_hang(g, run);
        check_backward_order_hang(g, run);
        return;
    }
    check_hooks_written(g, run);
    const DumpFile *d = run->dump;
    int N = (int)dump_scalar(d, "meta/world_size", 0), p = (int)dump_scalar(d, "pp/p", 1);
    int m = (int)dump_scalar(d, "pp/m", 1), dp = (int)dump_scalar(d, "pp/dp", 1);
    bool gpipe = dump_scalar(d, "pp/gpipe", 0) != 0, bf16 = config_is(d, "precision", "bf16");
    bool rc = dump_scalar(d, "pp/recompute", 0) != 0, il = dump_scalar(d, "pp/interleaved", 0) != 0;
    int v = il ? (int)dump_scalar(d, "pp/v", 1) : 1;
    // The zero-bubble schedules: 1 ZB-H1, 2 ZB-H2 (0: GPipe, 1F1B or interleaved).
    int zb = (int)dump_scalar(d, "pp/zero_bubble", 0);
    RankStage per;
    RankChunks chunks, *ch = il ? &chunks : NULL;
    char fig[200], bound[200], diag[800], missing[64];
    if (!rank_stage_read(d, N, &per, missing, sizeof missing) ||
        (il && (v < 1 || !rank_chunks_read(d, N, v, &chunks)))) {
        if (il) snprintf(missing, sizeof missing, "pp/rank_chunk entries of (N, v = %d)", v);
        snprintf(fig, sizeof fig, "no %s", missing);
        grade_check(g, run, "the harness's record", false, fig, "one number per rank in each pp/rank_stage entry",
                    "the dump was not written by lab05's harness");
        return;
    }

    // The partition: blocks as even as possible, over the stages or,
    // interleaved, over the p v virtual stages.
    int most = 0, least = 1 << 30, nunits = 0;
    for (int pass = 0; pass < 2; pass++)   // the units first, then each stage's blocks
        for (int q = 0; q < p; q++)
            for (int c = 0; c < v; c++) {
                int u0 = ch ? chunk_field(ch, ch->u0, q, c) : (int)rank_field(per.u0, q);
                int u1 = ch ? chunk_field(ch, ch->u1, q, c) : (int)rank_field(per.u1, q);
                if (pass == 0) {
                    nunits = u1 > nunits ? u1 : nunits;
                    continue;
                }
                int blocks = u1 - u0 - (u0 == 0) - (u1 == nunits);
                most = blocks > most ? blocks : most;
                least = blocks < least ? blocks : least;
            }
    int L = nunits - 2;
    snprintf(fig, sizeof fig, "%d to %d blocks a %sstage", least, most, il ? "virtual " : "");
    grade_check(g, run, "stages balanced", p * v > L || most - least <= 1, fig, "differing by one at most",
                il ? "the virtual stages hold unequal numbers of blocks: the slowest sets the pace of the whole "
                     "pipeline, so pp_partition must share the blocks as evenly as it can over the p v stages"
                   : "the stages hold unequal numbers of blocks: the slowest stage sets the pace of the whole "
                     "pipeline, so pp_partition must share the blocks as evenly as it can");
    if (il) check_round_robin(g, run, N, p, ch);

    check_equivalence(g, run, N);
    check_master_kept(g, run);
    if (rc) {
        check_recomputed(g, run, &per, N);
        check_work_recomputed(g, run, &per, N);
    } else if (zb) {
        // The split backward passes over a LayerNorm's rows twice, B for the
        // input gradient and W for its weight and bias: three passes a row
        // where the whole backward makes two. The products split exactly.
        check_work(g, run, 1, 1.5, false,
                   "a stage computed units that are not its own, or a micro-batch more than once: each stage runs its own units, once forward, once B and once W per micro-batch",
                   "a stage ran LayerNorms of units that are not its own, or a micro-batch more than once (the split backward's B and W pass over each LayerNorm's rows once each: x1.5 of single-device training's)");
    } else {
        check_work(g, run, 1, 1, false,
                   "a stage computed units that are not its own, or a micro-batch more than once: each stage runs its own units, once forward and once backward per micro-batch",
                   "a stage ran LayerNorms of units that are not its own, or a micro-batch more than once");
    }
    check_resident(g, run);
    check_resident_seal(g, run);
    check_step_helpers(g, run, 0, 0);
    check_live_growth(g, run);

    // The gradient of one step: m micro-batches added, each scaled by the
    // step's tokens.
    double ratio = grad_ratio(run);
    if (!isnan(ratio)) {
        snprintf(fig, sizeof fig, "x%.3f the reference's (median over tensors)", ratio);
        if (fabs(ratio - m) < 0.02 * m && m > 1)
            snprintf(diag, sizeof diag, "the first step's gradients are m = %d times the reference's: each "
                     "micro-batch's loss was scaled by 1 / (its own tokens) instead of 1 / (the step's tokens), so "
                     "the %d micro-batches add up to %d times the mean", m, m, m);
        else
            snprintf(diag, sizeof diag, "the first step's gradients are %.3f times the reference's: the "
                     "micro-batches must add up to the full batch's gradient (each scaled by 1 / the step's "
                     "tokens, none lost, none counted twice)", ratio);
        grade_check(g, run, "gradients of the step's micro-batches add up", fabs(ratio - 1) < 0.01, fig, "x1.000",
                    diag);
    }
    int zeroed = (int)dump_scalar(d, "pp/zeroed_between", 0);
    snprintf(fig, sizeof fig, "%d backward pass%s found them zeroed", zeroed, zeroed == 1 ? "" : "es");
    snprintf(diag, sizeof diag, "the gradients were zeroed after an earlier micro-batch's backward pass, so each "
             "micro-batch overwrites the one before instead of adding to it: zero them once a step, before the first "
             "backward pass");
    grade_check(g, run, "gradients accumulated over micro-batches", zeroed == 0, fig, "none", diag);

    // Memory: each stage's activations against the schedule's bound.
    int unfreed = (int)dump_scalar(d, "pp/unfreed", 0), unwaited = (int)dump_scalar(d, "pp/unwaited", 0);
    snprintf(fig, sizeof fig, "%d never freed, %d sends never waited on", unfreed, unwaited);
    grade_check(g, run, "every micro-batch ended", !unfreed && !unwaited, fig, "none",
                unfreed ? "micro-batches were still alive at the end of the step: end each one (pp_end_micro) once "
                          "its backward pass is done and its sends have finished"
                        : "sends were never waited on: wait on each (comm_wait) before its micro-batch ends");
    int worst_q = -1;
    double worst_over = 0;
    for (int q = 0; q < N; q++) {
        int s = (int)rank_field(per.stage, q), live = (int)rank_field(per.max_live, q);
        int k = il ? pp_budget_interleaved(p, v, m, s, 0, 0, 0, bf16).k : gpipe ? m : (p - s < m ? p - s : m);
        if (zb) k = pp_budget_zb(zb, p, m, s, 0, 0, 0, 0, bf16).k;
        if (live - k > worst_over) worst_over = live - k, worst_q = q;
    }
    if (worst_q >= 0 && zb) {
        int s = (int)rank_field(per.stage, worst_q), live = (int)rank_field(per.max_live, worst_q);
        snprintf(fig, sizeof fig, "stage %d: %d alive at once", s, live);
        snprintf(diag, sizeof diag, "stage %d held %d micro-batches at once; %s keeps at most %d there (%s): a "
                 "micro-batch is alive from its forward pass to its W, and %s", s, live, zb == 1 ? "ZB-H1" : "ZB-H2",
                 pp_budget_zb(zb, p, m, s, 0, 0, 0, 0, bf16).k, zb == 1 ? "min(m, p)" : "min(m, 2p - 1)",
                 zb == 1 ? "after p - s - 1 forwards each forward comes with a B, and the W's follow from the s-th "
                           "on: more forwards ahead of the B's, or W's held back longer, hold more"
                         : "after 2 (p - s - 1) forwards each forward comes with a B, and the W's follow from the "
                           "2s-th on: more forwards ahead of the B's, or W's held back longer, hold more");
    } else if (worst_q >= 0 && il) {
        int s = (int)rank_field(per.stage, worst_q), live = (int)rank_field(per.max_live, worst_q);
        snprintf(fig, sizeof fig, "stage %d: %d chunk-sets alive at once", s, live);
        snprintf(diag, sizeof diag, "stage %d held %d chunks' micro-batches' activations at once; the interleaved "
                 "schedule keeps at most %d there (its warm-up's (p - s - 1) 2 + (v - 1) p forwards and one more, at "
                 "most m v): after the warm-up, one forward and one backward in turn, each chunk's micro-batch ended "
                 "as soon as its backward pass is done and its sends have finished", s, live,
                 pp_budget_interleaved(p, v, m, s, 0, 0, 0, bf16).k);
    } else if (worst_q >= 0) {
        int s = (int)rank_field(per.stage, worst_q), live = (int)rank_field(per.max_live, worst_q);
        snprintf(fig, sizeof fig, "stage %d: %d alive at once", s, live);
        snprintf(diag, sizeof diag, "stage %d held %d micro-batches' activations at once; %s keeps at most %d there "
                 "(%s): %s", s, live, gpipe ? "GPipe" : "1F1B", gpipe ? m : (p - s < m ? p - s : m),
                 gpipe ? "m" : "min(m, p - s)",
                 gpipe ? "a micro-batch begun twice?" : "after p - s - 1 forwards, one forward and one backward in "
                 "turn, each micro-batch ended as soon as its backward pass is done; holding every micro-batch is "
                 "GPipe's memory");
    } else {
        snprintf(fig, sizeof fig, "within the bound on every stage");
    }
    grade_check(g, run, "micro-batches alive per stage", worst_q < 0, fig,
                zb == 1 ? "min(m, p) (ZB-H1)" : zb == 2 ? "min(m, 2p - 1) (ZB-H2)"
                : il ? "min((p - s - 1) 2 + (v - 1) p + 1, m v) chunk-sets (interleaved)"
                : gpipe ? "m (GPipe)" : "min(m, p - s) (1F1B)", diag);
    // The stages' memory: pp_budget's formulas, for each rank's own stage
    // (its parameters from the dump's tensors, its activations' scratch and
    // set as the harness measured them before any of the student's code).
    double *psi = calloc((size_t)N, sizeof *psi), stage_max = 0, stage_min = INFINITY, acts_bound = 0;
    const DumpArray *saved = numbers(d, "pp/rank_stage/acts_saved", 1);
    if (saved && (int)saved->shape[0] != N) saved = NULL;
    if (zb && !saved)
        grade_check(g, run, "the harness's record", false, "no pp/rank_stage/acts_saved",
                    "one number per rank: the bytes B keeps for W", "the dump was not written by lab05's harness");
    PpBudget *bud = calloc((size_t)N, sizeof *bud);
    for (int q = 0; q < N; q++) {
        int s = (int)rank_field(per.stage, q);
        psi[q] = rank_params(d, &per, ch, q, nunits);
        bud[q] = il ? pp_budget_interleaved(p, v, m, s, psi[q], rank_field(per.acts_scratch, q),
                                            rank_field(per.acts_set, q), bf16)
                    : pp_budget(gpipe, rc, p, m, s, psi[q], rank_field(per.acts_scratch, q),
                                rank_field(per.acts_shared, q), rank_field(per.acts_set, q), bf16);
        if (zb && saved)
            bud[q] = pp_budget_zb(zb, p, m, s, psi[q], rank_field(per.acts_scratch, q), rank_field(per.acts_set, q),
                                  rank_field(saved, q), bf16);
        stage_max = fmax(stage_max, psi[q]), stage_min = fmin(stage_min, psi[q]);
        acts_bound = fmax(acts_bound, bud[q].acts);
    }
    const DumpArray *peak = dump_find(d, "mem/peak");
    if (peak && peak->ndim == 2 && (int)peak->shape[0] == N) {
        int at = -1;
        double over = 0, acts_at = 0, bound_at = 0;
        for (int q = 0; q < N; q++) {
            double bound = bud[q].acts + 65536;
            double acts = dump_get(peak, (uint64_t)q * peak->shape[1] + MEM_ACTS);
            if (acts - bound > over || at < 0) over = acts - bound, at = q, acts_at = acts, bound_at = bound;
        }
        char b1[32], b2[32];
        snprintf(fig, sizeof fig, "%s (rank %d)", core_fmt_bytes(acts_at, b1, sizeof b1), at);
        snprintf(bound, sizeof bound, "<= %s: %s + 64 KiB", core_fmt_bytes(bound_at, b2, sizeof b2), bud[at].acts_why);
        snprintf(diag, sizeof diag, "rank %d's peak ACTS is %s, above %s: more micro-batches' activations were alive "
                 "at once than the schedule needs, or activations allocated outside pp_begin_micro", at,
                 core_fmt_bytes(acts_at, b1, sizeof b1), core_fmt_bytes(bound_at, b2, sizeof b2));
        grade_check(g, run, "memory ACTS per rank", over <= 0, fig, bound, diag);
    }
    // Bytes: per micro-batch, its activations to the next stage and their
    // gradients back, each counted where it is sent and where it is
    // received, and the data-parallel all-reduce of the stage's gradients;
    // rank by rank. Elements of the run's precision: bf16 moves 2 bytes an
    // element, half of fp32's.
    const DumpArray *bus = dump_find(d, "comm/bus_bytes");
    const DumpArray *loss = dump_find(d, "loss");
    double steps = loss ? (double)loss->count : 0, E = bf16 ? 2 : 4;
    double elems = config_value(d, "batch", 0) / dp / m * config_value(d, "seq", 0) * config_value(d, "dim", 0);
    double message = elems * E, worst_ratio = 1, worst_sent = 0, worst_want = 0;
    bool have_bus = bus && bus->ndim == 2 && (int)bus->shape[0] == N && bus->shape[1] == COMM_NOPS;
    int worst_rank = 0;
    for (int q = 0; q < N; q++) {
        int s = (int)rank_field(per.stage, q);
        // Interleaved: every chunk's messages both ways, but the embeddings'
        // input and the head's output: 2 v - [s = 0] - [s = p - 1] links' worth.
        int links = il ? 2 * v - (s == 0) - (s == p - 1) : (s > 0) + (s < p - 1);
        double want = steps * (m * message * 2 * links + 2.0 * (dp - 1) / dp * E * psi[q]), sent = 0;
        for (uint64_t j = 0; have_bus && j < bus->shape[1]; j++) sent += dump_get(bus, (uint64_t)q * bus->shape[1] + j);
        double ratio = want > 0 ? sent / want : (sent > 0 ? INFINITY : 1);
        if (q == 0 || fabs(ratio - 1) > fabs(worst_ratio - 1)) worst_ratio = ratio, worst_rank = q, worst_sent = sent, worst_want = want;
    }
    char b1[32], b2[32];
    snprintf(fig, sizeof fig, "rank %d: %s, x%.3f", worst_rank, core_fmt_bytes(worst_sent, b1, sizeof b1), worst_ratio);
    snprintf(diag, sizeof diag, "rank %d moved %s where its stage's messages make %s: %s", worst_rank,
             core_fmt_bytes(worst_sent, b1, sizeof b1), core_fmt_bytes(worst_want, b2, sizeof b2),
             worst_ratio > 1 ? "a micro-batch's activations or gradients are sent more than once, or to stages that "
                               "are not neighbours, or moved as elements of the other precision (the check of the "
                               "messages' precision says which)"
                             : "some micro-batches' activations or gradients were never sent, or moved as elements "
                               "of the other precision (the check of the messages' precision says which)");
    grade_check(g, run, "bytes communicated per rank", have_bus && fabs(worst_ratio - 1) <= 0.005, fig,
                il ? "steps x (m micro-batches x (B/m) T C elements, each way, of every chunk but the embeddings' input "
                     "and the head's output, sent and received + the data-parallel all-reduce), each rank within 0.5%"
                : bf16 ? "steps x (m micro-batches x (B/m) T C bf16 elements (2 bytes), each way, per neighbour, sent "
                       "and received + the data-parallel all-reduce at 2 bytes), each rank within 0.5%"
                     : "steps x (m micro-batches x (B/m) T C floats, each way, per neighbour, sent and received + the "
                       "data-parallel all-reduce), each rank within 0.5%",
                diag);
    check_message_elements(g, run, N, elems, bf16);
    Lab05Step k = {&per, ch, p, m, dp, nunits, message, E};
    static const char *const names[] = {"its pipeline", "its data-parallel group"};
    check_ledger(g, run, p, names, lab05_wants, &k);
    // The state: a stage holds its units whole, nothing else; in bf16 the
    // fp32 master copy beside the moments (OPTIM held from below too).
    PpBudget b = pp_budget(gpipe, rc, p, m, 0, stage_max, 0, 0, 0, bf16);
    const char *beyond = "a stage holds parameters, gradients or optimizer state beyond its own units";
    check_peak(g, run, MEM_PARAMS, "PARAMS", b.params, b.params_why, beyond);
    check_peak(g, run, MEM_GRADS, "GRADS", b.grads, b.grads_why, beyond);
    check_peak(g, run, MEM_OPTIM, "OPTIM", b.optim, b.optim_why, beyond);
    if (bf16) {
        PpBudget least = pp_budget(gpipe, rc, p, m, 0, stage_min, 0, 0, 0, bf16);
        check_peak_at_least(g, run, MEM_OPTIM, "OPTIM", least.optim,
                            "12 bytes per parameter of the smallest stage (the fp32 master copy and the two moments)",
                            "the optimizer's state is smaller than the fp32 master copy and the two moments of the "
                            "stage's units: without the master, AdamW updates the bf16 weights themselves and every "
                            "update below half a bf16 step (2^-9 of the weight) rounds away");
    }
    double state = b.params + b.grads + b.optim;
    char why[200];
    snprintf(why, sizeof why, "%s bytes per parameter of the largest stage + the schedule's activations + 64 KiB",
             bf16 ? "2 + 2 + 12" : "16");
    check_peak(g, run, PEAK_TOTAL, "total (tracked)", state + acts_bound + 65536, why,
               "memory tracked beyond a stage's parameters, gradients and optimizer state and the schedule's "
               "activations: a buffer kept that should not be (a copy of a message), or one allocated again every "
               "step");
    snprintf(why, sizeof why, "%s bytes per parameter of a stage + the schedule's activations + one unit (gathered "
             "for the dump) + 1 MiB", bf16 ? "2 + 2 + 12" : "16");
    check_peak(g, run, PEAK_HEAP, "heap (independent measure)",
               state + acts_bound + 65536 + 4 * largest_unit_floats(d) + (1 << 20), why,
               "memory allocated around mem_alloc (malloc, calloc) shows here and nowhere else: allocate through "
               "mem_alloc, and free what you allocate");
    free(psi);
    free(bud);

    // The zero-bubble schedules: their order, their W's, their bubble to the
    // pass (F, B and W 1 each).
    PpEvent *zb_all = NULL, *zb_rows[64];
    int zb_n[64];
    if (zb && zb_events(d, p, &zb_all, zb_rows, zb_n)) {
        check_zb_order(g, run, zb_rows, zb_n, p, m, zb);
        check_zb_weights(g, run, N);
        check_zb_bubble(g, run, zb_rows, zb_n, p, m, zb);
        free(zb_all);
        check_overlap(g, run, N, p);
        return;
    }
    if (zb) {
        grade_check(g, run, "the order of passes", false, "no pp/events", "the last step's passes of every stage",
                    "the dump was not written by lab05's harness");
        return;
    }

    // The bubble: the schedule's order of forward and backward passes
    // replayed with equal stages must leave exactly (p - 1) / (m + p - 1)
    // idle (recomputes aside: they are the backward passes' first part).
    int recomputes = 0;
    double formula = il ? pp_bubble_formula_interleaved(p, v, m) : pp_bubble_formula(p, m),
           replay = replayed_bubble(d, p, &recomputes);
    snprintf(fig, sizeof fig, "%.1f%%", 100 * replay);
    snprintf(bound, sizeof bound, "%s = %.1f%% (+- 0.5%%)%s", il ? "(p - 1) / (v m + p - 1)" : "(p - 1) / (m + p - 1)",
             100 * formula, recomputes ? ", of F and B (the recomputes aside)" : "");
    if (replay >= 0 && il && fabs(replay - pp_bubble_formula(p, m)) <= 0.005)
        snprintf(diag, sizeof diag, "replayed with equal stages (a chunk's pass 1/v of a stage's), the schedule "
                 "leaves %.1f%% idle, 1F1B's (p - 1) / (m + p - 1), where the interleaved schedule leaves %.1f%%: it "
                 "fell back to 1F1B, each micro-batch's chunks run one after the other as one stage's, the pipeline "
                 "filling through whole stages; interleaved, the first chunks of p micro-batches go round the ranks "
                 "before any last chunk's forward ((p - s - 1) 2 + (v - 1) p forwards to warm up)", 100 * replay,
                 100 * formula);
    else if (replay >= 0 && il)
        snprintf(diag, sizeof diag, "replayed with equal stages (a chunk's pass 1/v of a stage's), the schedule "
                 "leaves %.1f%% idle where the interleaved schedule leaves %.1f%%: a stage waits for work it could "
                 "have done earlier (a forward held back, a backward waiting for a later micro-batch, or the chunks "
                 "in another order than Megatron-LM's: groups of p micro-batches through chunk 0, then chunk 1, ...)",
                 100 * replay, 100 * formula);
    else if (replay < 0)
        snprintf(diag, sizeof diag, "the schedule cannot be replayed: a stage's pass waits for a pass its neighbour "
                 "never ran (every stage must run F and B of every micro-batch)");
    else
        snprintf(diag, sizeof diag, "replayed with equal stages, the schedule leaves %.1f%% idle where %s leaves "
                 "%.1f%%: a stage waits for work it could have done earlier (a forward held back, or a backward "
                 "waiting for a later micro-batch)", 100 * replay, gpipe ? "GPipe" : "1F1B", 100 * formula);
    grade_check(g, run, "the schedule's bubble", replay >= 0 && fabs(replay - formula) <= 0.005, fig, bound, diag);
    check_overlap(g, run, N, p);
}

// Two hidden runs of 2 to 4 ranks, p stages a pipeline and N/p pipelines,
// the first quick and fp32, the second bf16, each on a schedule main.c
// accepts at its p: ZB-H1 m >= p, ZB-H2 m >= 2p - 1, interleaved p >= 3
// and m a multiple of p, with v chunks that leave every virtual stage a
// unit; full recomputation on GPipe and 1F1B alone (the zero-bubble W and
// the interleaved chunks keep what it would free). A micro-batch of one or
// two rows.
static int lab05_hidden(uint64_t seed, RunSpec *out, int max) {
    Draw d = draw_start(seed, "lab05");
    static const char *const scheds[] = {"gpipe", "1f1b", "zb-h1", "zb-h2", "interleaved"},
                             *const rcs[] = {"none", "selective", "full"};
    static const int seqs[] = {32, 48, 64};
    int n = 0;
    for (int k = 0; k < 2 && n < max; k++) {
        int np, p, L, v;
        const char *sched;
        do {
            np = draw_int(&d, 2, 4), sched = draw_word(&d, scheds, 5), L = draw_int(&d, 1, 6);
            do p = draw_int(&d, 1, np);
            while (np % p);
            v = strcmp(sched, "interleaved") == 0 ? draw_int(&d, 2, 3) : 1;
        } while (p * v > L + 2 || (v > 1 && p < 3));
        const int least = strcmp(sched, "zb-h1") == 0 ? p : strcmp(sched, "zb-h2") == 0 ? 2 * p - 1 : 1;
        const int m = v > 1 ? p * draw_int(&d, 1, 2) : draw_int(&d, least, 8), rows = m * (m <= 4 ? draw_int(&d, 1, 2) : 1);
        const bool full_ok = strcmp(sched, "gpipe") == 0 || strcmp(sched, "1f1b") == 0;
        char virt[24] = "";
        if (v > 1) snprintf(virt, sizeof virt, " --virtual %d", v);
        hidden_run(&out[n], n, np, k == 0, "--steps 3 --layers %d --seq %d --batch %d --pp %d --schedule %s%s "
                   "--micro %d --recompute %s%s", L, draw_pick(&d, seqs, 3), np / p * rows, p, sched, virt, m,
                   draw_word(&d, rcs, full_ok ? 3 : 2), k == 1 ? " --precision bf16" : ""), n++;
    }
    return n;
}

const LabSpec LAB05 = {
    .id = "lab05", .dir = "lab05_pipeline", .student_file = "pipeline.c", .program = "lab05",
    .solution = "lab05_solution", .runs = LAB05_RUNS, .nruns = sizeof LAB05_RUNS / sizeof LAB05_RUNS[0],
    .ref_flags = lab05_ref_flags, .check = lab05_check, .ratio_causes = lab05_ratio_causes,
    .hidden = lab05_hidden,
};

// ---- the formulas (pp_budget.h) -------------------------------------------

PpBudget pp_budget(bool gpipe, bool recompute, int p, int m, int s, double psi_s, double acts_scratch,
                   double acts_shared, double acts_set, bool bf16) {
    // P bytes a parameter, G a gradient, K of optimizer state.
    const double P = bf16 ? 2 : 4, G = P, K = bf16 ? 12 : 8;
    int k = gpipe ? m : (p - s < m ? p - s : m);
    const char *acts_why = recompute
        ? (gpipe ? "scratch + the shared set of its units' activations + m x one micro-batch's boundary (its input and "
                   "messages)"
                 : "scratch + the shared set of its units' activations + min(m, p - s) x one micro-batch's boundary "
                   "(its input and messages)")
        : (gpipe ? "scratch + m x one micro-batch's activations of its units"
                 : "scratch + min(m, p - s) x one micro-batch's activations of its units");
    return (PpBudget){k, P * psi_s, G * psi_s, K * psi_s, acts_scratch + (recompute ? acts_shared : 0) + k * acts_set,
                      bf16 ? "2 bytes per parameter of the stage's units (bf16)" : "4 bytes per parameter of the stage's units",
                      bf16 ? "2 bytes per parameter of the stage's units (bf16)" : "4 bytes per parameter of the stage's units",
                      bf16 ? "12 bytes per parameter of the stage's units (the fp32 master copy and the two moments)"
                           : "8 bytes per parameter of the stage's units (the two moments)",
                      acts_why, 0};
}

PpBudget pp_budget_zb(int c, int p, int m, int s, double psi_s, double acts_scratch, double acts_set,
                      double acts_saved, bool bf16) {
    PpBudget b = pp_budget(false, false, p, m, s, psi_s, acts_scratch, 0, acts_set, bf16);
    int most = c == 1 ? p : 2 * p - 1;
    b.k = most < m ? most : m;
    b.k_w = c * s + 1 < m ? c * s + 1 : m;
    b.acts = acts_scratch + b.k * acts_set + b.k_w * acts_saved;
    b.acts_why = c == 1 ? "scratch + min(m, p) x one micro-batch's activations of its units + min(m, s + 1) x what "
                          "its B keeps for its W"
                        : "scratch + min(m, 2p - 1) x one micro-batch's activations of its units + min(m, 2s + 1) x "
                          "what its B keeps for its W";
    return b;
}

PpBudget pp_budget_interleaved(int p, int v, int m, int s, double psi_s, double acts_scratch, double chunk_set_max,
                               bool bf16) {
    PpBudget b = pp_budget(false, false, p, m, s, psi_s, acts_scratch, 0, chunk_set_max, bf16);
    int k = (p - s - 1) * 2 + (v - 1) * p + 1;
    b.k = k < m * v ? k : m * v;
    b.acts = acts_scratch + b.k * chunk_set_max;
    b.acts_why = "scratch + min((p - s - 1) 2 + (v - 1) p + 1, m v) x the largest of its chunks' activations of one "
                 "micro-batch";
    return b;
}
