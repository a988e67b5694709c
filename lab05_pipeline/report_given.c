// report_given.c: what lab05's run reports at its end (report_given.h).
#include "report_given.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "core.h"
#include "ops.h"
#include "schedule_given.h"

// The last step's events, every stage's, gathered over the pipeline and
// replayed: with equal stages (the schedule's own bubble) and with the
// measured durations.
static void replay_events(Lab05End *e) {
    const Pp *pp = e->pp;
    const PpRun *run = pp->run;
    int p = pp->p, ne = run->nevents;
    e->counts = malloc((size_t)p * sizeof *e->counts);
    CHECK(e->counts, "out of memory");
    comm_all_gather_host(pp->group, &ne, sizeof ne, e->counts);
    int most = 0;
    for (int q = 0; q < p; q++) most = e->counts[q] > most ? e->counts[q] : most;
    // A stage with fewer events is padded (also when none ran any).
    e->width = most ? most : 1;
    size_t row = (size_t)e->width;
    e->ideal = calloc((size_t)p * row, sizeof *e->ideal);
    PpEvent *mine = calloc(row, sizeof *mine);
    CHECK(e->ideal && mine, "out of memory");
    memcpy(mine, run->events, (size_t)ne * sizeof *mine);
    comm_all_gather_host(pp->group, mine, row * sizeof *mine, e->ideal);
    free(mine);
    e->measured = malloc((size_t)p * row * sizeof *e->measured);
    CHECK(e->measured, "out of memory");
    memcpy(e->measured, e->ideal, (size_t)p * row * sizeof *e->measured);
    for (int q = 0; q < p; q++) e->ideal_rows[q] = e->ideal + q * row, e->measured_rows[q] = e->measured + q * row;
    e->bubble_ideal = pp_replay(p, e->ideal_rows, e->counts, true, &e->span_ideal);
    e->bubble_measured = pp_replay(p, e->measured_rows, e->counts, false, &e->span_measured);
    e->formula = e->interleaved ? pp_bubble_formula_interleaved(p, pp->v, pp->m)
                 : e->zb ? pp_zb_bubble_formula(p, pp->m) : pp_bubble_formula(p, pp->m);
    e->span_formula = pp_zb_span_bubble_formula(e->zb, p, pp->m);
    e->span_bubble_measured = pp_span_bubble(p, e->measured_rows, e->counts);
    // The order of F and B alone, recomputes aside: what the formula counts.
    PpEvent *order = malloc((size_t)p * row * sizeof *order), *order_rows[64];
    int order_n[64];
    CHECK(order, "out of memory");
    memcpy(order, e->ideal, (size_t)p * row * sizeof *order);
    for (int q = 0; q < p; q++)
        order_rows[q] = order + q * row, order_n[q] = pp_events_without(order_rows[q], e->counts[q], PP_PASS_R);
    e->bubble_order = pp_replay(p, order_rows, order_n, true, &e->span_order);
    e->span_bubble = pp_span_bubble(p, order_rows, order_n);
    free(order);
}

// Per stage: units, busy and idle, activations against the bound, every
// rank's.
static void gather_stages(Lab05End *e, const HarnessRun *h, const MemReport *mem) {
    const Pp *pp = e->pp;
    const PpRun *run = pp->run;
    int steps = h->a->steps, N = comm_size(h->c);
    double idle = h->seconds - run->busy_total;   // over steps 2..
    Lab05Stage mine = {pp->u0, pp->u1, run->max_live_ever, steps > 1 ? idle / (steps - 1) : 0,
                       steps > 1 ? (h->seconds - idle) / (steps - 1) : 0, mem->peak[MEM_ACTS], run->acts_set,
                       run->acts_scratch, run->acts_shared, run->stage_params,
                       {mem->peak[MEM_PARAMS], mem->peak[MEM_GRADS], mem->peak[MEM_OPTIM], mem->peak[MEM_ACTS]},
                       e->zb ? pp_budget_zb(e->zb, pp->p, pp->m, pp->s, run->stage_params, run->acts_scratch,
                                            run->acts_set, run->acts_saved, e->bf16)
                             : pp_budget(e->gpipe, pp->recompute, pp->p, pp->m, pp->s, run->stage_params,
                                         run->acts_scratch, run->acts_shared, run->acts_set, e->bf16),
                       run->recomputes_most, run->rc_matmul, run->rc_layernorm, ops_work().matmul,
                       run->rc_seconds_total, h->seconds, run->stale, run->stale_step, run->stale_mb,
                       run->stale_held, run->acts_saved, run->max_pending_ever, run->w_missing,
                       run->w_missing_step, run->w_missing_mb, {0}, {0}, {0}, {0}};
    if (e->interleaved)
        mine.budget = pp_budget_interleaved(pp->p, pp->v, pp->m, pp->s, run->stage_params, run->acts_scratch,
                                            run->acts_set, e->bf16);
    for (int c = 0; c < pp->v; c++)
        mine.vs[c] = pp->vs[c], mine.cu0[c] = pp->cu0[c], mine.cu1[c] = pp->cu1[c], mine.chunk_set[c] = run->chunk_set[c];
    e->stages = malloc((size_t)N * sizeof *e->stages);
    CHECK(e->stages, "out of memory");
    comm_all_gather_host(h->c, &mine, sizeof mine, e->stages);
    e->wall_idle = 0;
    for (int q = 0; q < pp->p; q++) {
        const Lab05Stage *l = &e->stages[q];
        e->wall_idle += l->busy + l->idle > 0 ? l->idle / (l->busy + l->idle) / pp->p : 0;
    }
}

// The schedule's name, as the papers write it.
static const char *schedule_name(const Lab05End *e) {
    return e->interleaved ? "interleaved 1F1B" : e->gpipe ? "GPipe" : e->zb == 1 ? "ZB-H1" : e->zb == 2 ? "ZB-H2"
                                                                                                   : "1F1B";
}

// Per stage under the zero-bubble schedules: k sets and k_w of what B
// keeps for W.
static void print_stages_zb(const Lab05End *e) {
    const Pp *pp = e->pp;
    const Gpt *model = pp->run->model;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    print0("\nper stage (pipeline 0), %s, p = %d, m = %d:\n", schedule_name(e), pp->p, pp->m);
    print0("  %-6s %-14s %9s %9s %10s %10s   %s\n", "stage", "units", "busy", "idle", "ACTS peak", "bound",
           e->zb == 1 ? "min(m, p) micro-batches' activations + min(m, s + 1) x what B keeps for W"
                      : "min(m, 2p - 1) micro-batches' activations + min(m, 2s + 1) x what B keeps for W");
    for (int q = 0; q < pp->p; q++) {
        const Lab05Stage *l = &e->stages[q];
        char units[48];
        snprintf(units, sizeof units, "%s..%s", model->units[l->u0].name, model->units[l->u1 - 1].name);
        print0("  %-6d %-14s %7.1f ms %6.1f ms %10s %10s   scratch %s + %d x %s + %d x %s (at most %d alive, %d "
               "between B and W)\n", q, units, l->busy * 1e3, l->idle * 1e3, core_fmt_bytes(l->acts_peak, b1, 32),
               core_fmt_bytes(l->budget.acts, b2, 32), core_fmt_bytes(l->acts_scratch, b3, 32), l->budget.k,
               core_fmt_bytes(l->acts_set, b4, 32), l->budget.k_w, core_fmt_bytes(l->acts_saved, b5, 32),
               l->max_live, l->max_pending);
    }
}

// Interleaved: per stage its chunks (virtual stage: units), busy and idle,
// its ACTS peak beside scratch + k chunk-sets.
static void print_chunk_stages(const Lab05End *e) {
    const Pp *pp = e->pp;
    const Gpt *model = pp->run->model;
    int p = pp->p, m = pp->m, v = pp->v;
    char b1[32], b2[32], b3[32], b4[32];
    print0("\nper stage (pipeline 0), interleaved 1F1B, p = %d, m = %d, v = %d chunks a stage (virtual stage: "
           "units):\n", p, m, v);
    print0("  %-6s %-34s %9s %9s %10s %10s   %s\n", "stage", "chunks", "busy", "idle", "ACTS peak", "bound",
           "min((p - s - 1) 2 + (v - 1) p + 1, m v) chunk-sets, each the largest chunk's");
    for (int q = 0; q < p; q++) {
        const Lab05Stage *l = &e->stages[q];
        char chunks[160] = "";
        for (int c = 0; c < v; c++) {
            size_t at = strlen(chunks);
            if (l->cu1[c] - l->cu0[c] == 1)
                snprintf(chunks + at, sizeof chunks - at, "%s%d: %s", c ? ", " : "", l->vs[c], model->units[l->cu0[c]].name);
            else
                snprintf(chunks + at, sizeof chunks - at, "%s%d: %s..%s", c ? ", " : "", l->vs[c],
                         model->units[l->cu0[c]].name, model->units[l->cu1[c] - 1].name);
        }
        print0("  %-6d %-34s %7.1f ms %6.1f ms %10s %10s   scratch %s + %d x %s (at most %d alive)\n", q, chunks,
               l->busy * 1e3, l->idle * 1e3, core_fmt_bytes(l->acts_peak, b1, 32),
               core_fmt_bytes(l->budget.acts, b2, 32), core_fmt_bytes(l->acts_scratch, b3, 32), l->budget.k,
               core_fmt_bytes(l->acts_set, b4, 32), l->max_live);
    }
}

static void print_stages(const Lab05End *e) {
    if (e->zb) {
        print_stages_zb(e);
        return;
    }
    if (e->interleaved) {
        print_chunk_stages(e);
        return;
    }
    const Pp *pp = e->pp;
    const Gpt *model = pp->run->model;
    int p = pp->p, m = pp->m;
    char b1[32], b2[32], b3[32], b4[32], b5[32];
    print0("\nper stage (pipeline 0), %s, p = %d, m = %d:\n", schedule_name(e), p, m);
    const bool rc = pp->recompute;
    print0("  %-6s %-14s %9s %9s %10s %10s   %s%s\n", "stage", "units", "busy", "idle", "ACTS peak", "bound",
           e->gpipe ? "m micro-batches' " : "min(m, p - s) micro-batches' ",
           rc ? "boundaries (input and messages) + the shared set" : "activations");
    for (int q = 0; q < p; q++) {
        const Lab05Stage *l = &e->stages[q];
        char units[48], shared[48] = "";
        snprintf(units, sizeof units, "%s..%s", model->units[l->u0].name, model->units[l->u1 - 1].name);
        if (rc) snprintf(shared, sizeof shared, " + shared %s", core_fmt_bytes(l->acts_shared, b5, 32));
        print0("  %-6d %-14s %7.1f ms %6.1f ms %10s %10s   scratch %s%s + %d x %s (at most %d alive)\n", q, units,
               l->busy * 1e3, l->idle * 1e3, core_fmt_bytes(l->acts_peak, b1, 32), core_fmt_bytes(l->budget.acts, b2, 32),
               core_fmt_bytes(l->acts_scratch, b3, 32), shared, l->budget.k,
               core_fmt_bytes(l->acts_set, b4, 32), l->max_live);
    }
}

// The zero-bubble schedules' bubble: the step's (every stage from the
// step's start to its end) and within each stage's own span (its first pass
// to its last), each beside its formula.
static void print_bubble_zb(const Lab05End *e) {
    const Pp *pp = e->pp;
    int N = comm_size(comm_world()), cores = (int)sysconf(_SC_NPROCESSORS_ONLN), p = pp->p, m = pp->m;
    print0("\nthe bubble (idle share of the stages' time), %s, F 1, B 1, W 1:\n", schedule_name(e));
    print0("  the step: (p - 1) / (3m + p - 1)        %5.1f%%   (1F1B's at this p and m: (p - 1) / (m + p - 1) = "
           "%.1f%%)\n", 100 * e->formula, 100 * pp_bubble_formula(p, m));
    print0("  replayed, equal stages                  %5.1f%%   the schedule's own\n", 100 * e->bubble_order);
    print0("  replayed, measured durations            %5.1f%%   one core per stage; unequal stages add to it\n",
           100 * e->bubble_measured);
    print0("  wall clock                              %5.1f%%   %d ranks on %d cores: the OS blurs it\n",
           100 * e->wall_idle, N, cores);
    print0("  within each stage's span (first pass to last):\n");
    print0("    %-37s %5.1f%%\n", e->zb == 1 ? "(p - 1) / (6m + p - 1)" : "(p - 1)(F + B - 2W) = 0",
           100 * e->span_formula);
    print0("    replayed, equal stages                %5.1f%%\n", 100 * e->span_bubble);
    print0("    replayed, measured durations          %5.1f%%\n", 100 * e->span_bubble_measured);
    if (e->zb == 2)
        print0("  ZB-H2's zero bubble is within each stage's span: its stages start and end p - 1 passes apart, so a "
               "step that starts every stage together and ends with the last leaves ZB-H1's bubble. The paper closes "
               "it by starting the next step's forwards before the last stage ends (its optimizer "
               "post-validation), which this lab does not do.\n");
}

static void print_bubble(const Lab05End *e) {
    if (e->zb) {
        print_bubble_zb(e);
        return;
    }
    int N = comm_size(comm_world()), cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    print0("\nthe bubble (idle share of the stages' time):\n");
    if (e->interleaved) {
        print0("  (p - 1) / (v m + p - 1)                 %5.1f%%   1F1B's (p - 1) / (m + p - 1): %.1f%%\n",
               100 * e->formula, 100 * pp_bubble_formula(e->pp->p, e->pp->m));
        print0("  replayed, equal stages (F 1/v, B 2/v)   %5.1f%%   the schedule's own, a chunk's pass 1/v of a "
               "stage's\n", 100 * e->bubble_order);
    } else {
        print0("  (p - 1) / (m + p - 1)                   %5.1f%%\n", 100 * e->formula);
        print0("  replayed, equal stages (F 1, B 2)       %5.1f%%   the schedule's own\n", 100 * e->bubble_order);
    }
    if (e->pp->recompute && e->span_order > 0)
        print0("  the same with its recomputes (R 1)      %5.1f%%   a step %.2f times as long: more work, not more "
               "idle\n", 100 * e->bubble_ideal, e->span_ideal / e->span_order);
    print0("  replayed, measured durations            %5.1f%%   one core per stage; unequal stages add to it\n",
           100 * e->bubble_measured);
    print0("  wall clock                              %5.1f%%   %d ranks on %d cores: the OS blurs it\n",
           100 * e->wall_idle, N, cores);
}

static void draw(Lab05End *e) {
    const Pp *pp = e->pp;
    int p = pp->p, m = pp->m;
    if (e->bubble_ideal >= 0) {
        if (e->zb)
            print0("\nthe last step's schedule, replayed with equal stages (F1 = micro-batch 1 forward, B1 its input "
                   "gradient, W1 its weight gradients):\n");
        else if (e->interleaved)
            print0("\nthe last step's schedule, replayed with equal stages (F1a = micro-batch 1 forward on the "
                   "stage's chunk a (its first), F1b on chunk b, B1aB1a the backward on chunk a; a chunk's forward "
                   "is 1/v of a stage's):\n");
        else
            print0("\nthe last step's schedule, replayed with equal stages (F1 = micro-batch 1 forward, B1B1 its "
                   "backward%s):\n", e->pp->recompute ? ", R1 its activations made again" : "");
        pp_draw_ascii(p, e->ideal_rows, e->counts, e->span_ideal);
    } else {
        print0("\nthe schedule cannot be replayed: a stage waits for a pass no stage ran\n");
    }
    if (e->figure && comm_rank(comm_world()) == 0) {
        int N = comm_size(comm_world()), cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
        char caption[224], label[160];
        char rc[96] = "";
        if (pp->recompute) snprintf(rc, sizeof rc, "; with its recomputes %.1f%%", 100 * e->bubble_ideal);
        if (e->zb)
            snprintf(rc, sizeof rc, "; within the stages' spans %.1f%% (formula %.1f%%)", 100 * e->span_bubble,
                     100 * e->span_formula);
        char name[64];
        if (e->interleaved) snprintf(name, sizeof name, "interleaved 1F1B, v = %d chunks a stage", pp->v);
        else snprintf(name, sizeof name, "%s", schedule_name(e));
        snprintf(caption, sizeof caption, "%s, p = %d stages, m = %d micro-batches: bubble %.1f%% (formula %.1f%%)%s",
                 name, p, m, 100 * e->bubble_order, 100 * e->formula, rc);
        snprintf(label, sizeof label, "replayed on one core per stage, with the durations measured with %d ranks on "
                 "%d core%s%s", N, cores, cores == 1 ? "" : "s", N > cores ? " (ranks shared cores: slower passes)" : "");
        pp_draw_svg(e->figure, p, e->ideal_rows, e->measured_rows, e->counts,
                    e->span_ideal > 0 ? e->span_ideal : 1, e->span_measured > 0 ? e->span_measured : 1, caption,
                    label);
        print0("wrote %s\n", e->figure);
    }
}

// Per stage: its memory by category, measured beside pp_budget's formulas.
static void print_memory(const Lab05End *e) {
    const Pp *pp = e->pp;
    print0("\nmemory per stage (pipeline 0), measured (formula), %s:\n",
           e->bf16 ? "bf16 with fp32 master weights: 2 + 2 + 12 bytes a parameter of the stage"
                   : "fp32 AdamW: 4 + 4 + 8 bytes a parameter of the stage");
    print0("  %-6s %10s   %-21s %-21s %-21s %-21s\n", "stage", "parameters", "PARAMS", "GRADS", "OPTIM", "ACTS");
    for (int q = 0; q < pp->p; q++) {
        const Lab05Stage *l = &e->stages[q];
        const double want[4] = {l->budget.params, l->budget.grads, l->budget.optim, l->budget.acts};
        char cell[4][48], b1[32], b2[32];
        for (int c = 0; c < 4; c++)
            snprintf(cell[c], sizeof cell[c], "%s (%s)", core_fmt_bytes(l->peak[c], b1, 32),
                     core_fmt_bytes(want[c], b2, 32));
        print0("  %-6d %9.3fM   %-21s %-21s %-21s %-21s\n", q, l->psi / 1e6, cell[0], cell[1], cell[2], cell[3]);
    }
}

// A count of multiply-adds, "327 M" or "1.31 G".
static const char *fmt_work(double x, char *buf, size_t len) {
    if (x >= 1e9) snprintf(buf, len, "%.3g G", x / 1e9);
    else snprintf(buf, len, "%.3g M", x / 1e6);
    return buf;
}

// Full recomputation's cost per stage: the passes made again, their
// products beside the stage's (all steps), their time beside the wall
// clock and beside the stage's passes (steps 2..), as measured.
static void print_recompute(const Lab05End *e, int steps) {
    const Pp *pp = e->pp;
    if (!pp->recompute) return;
    print0("\nrecomputation at the stage boundaries: each micro-batch's activations made again before its backward "
           "pass (not where the shared set still held them):\n");
    print0("  %-6s %-11s %-26s %s\n", "stage", "made again", "multiply-adds again",
           "time again (steps 2..): of the wall clock, of the stage's passes");
    double again = 0, all = 0;
    for (int q = 0; q < pp->p; q++) {
        const Lab05Stage *l = &e->stages[q];
        char work[64], w1[24], w2[24];
        snprintf(work, sizeof work, "%s of %s (%.1f%%)", fmt_work(l->rc_matmul, w1, sizeof w1),
                 fmt_work(l->matmul, w2, sizeof w2), l->matmul > 0 ? 100 * l->rc_matmul / l->matmul : 0);
        double passes = l->busy * (steps - 1);
        print0("  %-6d %2d of %-5d %-26s %.1f ms: %.1f%%, %.1f%%\n", q, l->recomputes, pp->m, work,
               l->rc_seconds * 1e3, l->seconds > 0 ? 100 * l->rc_seconds / l->seconds : 0,
               passes > 0 ? 100 * l->rc_seconds / passes : 0);
        again += l->rc_matmul, all += l->matmul;
    }
    print0("  pipeline 0: %.1f%% of its products made again (a forward pass is a third of a forward and backward's "
           "products: at most 25%%)\n", all > 0 ? 100 * again / all : 0);
}

void lab05_report(Lab05End *e, const HarnessRun *h, const MemReport *mem) {
    replay_events(e);
    gather_stages(e, h, mem);
    print_stages(e);
    print_bubble(e);
    draw(e);
    print_memory(e);
    print_recompute(e, h->a->steps);
}

// ---- the dump ------------------------------------------------------------------

// Per rank: its stage, units, the most micro-batches alive, the activation
// bytes the bound is made of, and full recomputation's record; a field an
// entry.
static void dump_rank_stage(DumpWriter *dw, const Lab05End *e) {
    enum { NI = 9, NF = 5 };
    static const char *const ints[NI] = {"stage", "u0", "u1", "max_live", "recomputes", "stale", "stale_step",
                                         "stale_mb", "stale_held"};
    static const char *const floats[NF] = {"acts_scratch", "acts_set", "acts_shared", "rc_matmul", "rc_layernorm"};
    int N = comm_size(comm_world()), p = e->pp->p;
    int64_t *iv = malloc((size_t)NI * N * sizeof *iv);
    double *fv = malloc((size_t)NF * N * sizeof *fv);
    CHECK(iv && fv, "out of memory");
    for (int q = 0; q < N; q++) {
        const Lab05Stage *l = &e->stages[q];
        const int64_t i[NI] = {q % p, l->u0, l->u1, l->max_live, l->recomputes, l->stale, l->stale_step,
                               l->stale_mb, l->stale_held};
        const double f[NF] = {l->acts_scratch, l->acts_set, l->acts_shared, l->rc_matmul, l->rc_layernorm};
        for (int k = 0; k < NI; k++) iv[(size_t)k * N + q] = i[k];
        for (int k = 0; k < NF; k++) fv[(size_t)k * N + q] = f[k];
    }
    uint64_t n = (uint64_t)N;
    char name[64];
    for (int k = 0; k < NI; k++)
        snprintf(name, sizeof name, "pp/rank_stage/%s", ints[k]), dump_i64(dw, name, iv + (size_t)k * N, 1, &n);
    for (int k = 0; k < NF; k++)
        snprintf(name, sizeof name, "pp/rank_stage/%s", floats[k]), dump_f64(dw, name, fv + (size_t)k * N, 1, &n);
    free(iv), free(fv);
}

// Per rank, the split backward's record: the bytes B keeps for W, the most
// micro-batches between their B and their W, the B's whose W never came
// and the first (step, micro-batch; -1: none).
static void dump_rank_split(DumpWriter *dw, const Lab05End *e) {
    enum { NI = 4 };
    static const char *const ints[NI] = {"max_pending", "w_missing", "w_missing_step", "w_missing_mb"};
    int N = comm_size(comm_world());
    int64_t *iv = malloc((size_t)NI * N * sizeof *iv);
    double *saved = malloc((size_t)N * sizeof *saved);
    CHECK(iv && saved, "out of memory");
    for (int q = 0; q < N; q++) {
        const Lab05Stage *l = &e->stages[q];
        const int64_t i[NI] = {l->max_pending, l->w_missing, l->w_missing_step, l->w_missing_mb};
        for (int k = 0; k < NI; k++) iv[(size_t)k * N + q] = i[k];
        saved[q] = l->acts_saved;
    }
    uint64_t n = (uint64_t)N;
    char name[64];
    for (int k = 0; k < NI; k++)
        snprintf(name, sizeof name, "pp/rank_stage/%s", ints[k]), dump_i64(dw, name, iv + (size_t)k * N, 1, &n);
    dump_f64(dw, "pp/rank_stage/acts_saved", saved, 1, &n);
    free(iv), free(saved);
}

// Per rank and chunk (interleaved; one chunk otherwise): its virtual stage,
// its units [u0, u1) and one micro-batch's activations of them (bytes), a
// field an entry, (N, v) each.
static void dump_rank_chunks(DumpWriter *dw, const Lab05End *e) {
    int N = comm_size(comm_world()), v = e->pp->v;
    size_t n = (size_t)N * v;
    int64_t *vs = malloc(n * sizeof *vs), *u0 = malloc(n * sizeof *u0), *u1 = malloc(n * sizeof *u1);
    double *set = malloc(n * sizeof *set);
    CHECK(vs && u0 && u1 && set, "out of memory");
    for (int q = 0; q < N; q++)
        for (int c = 0; c < v; c++) {
            const Lab05Stage *l = &e->stages[q];
            size_t at = (size_t)q * v + c;
            vs[at] = l->vs[c], u0[at] = l->cu0[c], u1[at] = l->cu1[c], set[at] = l->chunk_set[c];
        }
    uint64_t shape[2] = {(uint64_t)N, (uint64_t)v};
    dump_i64(dw, "pp/rank_chunk/vs", vs, 2, shape);
    dump_i64(dw, "pp/rank_chunk/u0", u0, 2, shape);
    dump_i64(dw, "pp/rank_chunk/u1", u1, 2, shape);
    dump_f64(dw, "pp/rank_chunk/acts_set", set, 2, shape);
    free(vs), free(u0), free(u1), free(set);
}

// The last step's events of pipeline 0, for the grader's own replay: per
// stage and event, the kind (a PpPass: 0 F, 1 B, 2 R, 3 W; -1 past a
// stage's last), the micro-batch and the chunk (0 there).
static void dump_events(DumpWriter *dw, const Lab05End *e) {
    int p = e->pp->p, w = e->width;
    int64_t *kind = malloc((size_t)p * w * sizeof *kind), *mb = calloc((size_t)p * w, sizeof *mb);
    int64_t *chunk = calloc((size_t)p * w, sizeof *chunk);
    CHECK(kind && mb && chunk, "out of memory");
    for (int q = 0; q < p; q++)
        for (int k = 0; k < w; k++) {
            bool ran = k < e->counts[q];
            kind[(size_t)q * w + k] = ran ? e->ideal_rows[q][k].kind : -1;
            if (ran) mb[(size_t)q * w + k] = e->ideal_rows[q][k].mb, chunk[(size_t)q * w + k] = e->ideal_rows[q][k].chunk;
        }
    uint64_t shape[2] = {(uint64_t)p, (uint64_t)w};
    dump_i64(dw, "pp/events/kind", kind, 2, shape);
    dump_i64(dw, "pp/events/mb", mb, 2, shape);
    dump_i64(dw, "pp/events/chunk", chunk, 2, shape);
    free(kind), free(mb), free(chunk);
}

// The last step's log of every rank (comm.h's events, the passes among
// them), for the grader's replay of what each pass waited for: per rank and
// event, its kind, op, peer, place and group (kind -1, the rest 0, past a
// rank's last).
static void dump_timeline(DumpWriter *dw, const Lab05End *e) {
    const PpRun *run = e->pp->run;
    Comm *c = comm_world();
    int N = comm_size(c), nlog = run->nlog < PPRUN_MAX_LOG ? run->nlog : PPRUN_MAX_LOG, most = 1;
    int *nlogs = malloc((size_t)N * sizeof *nlogs);
    CHECK(nlogs, "out of memory");
    comm_all_gather_host(c, &nlog, sizeof nlog, nlogs);
    for (int q = 0; q < N; q++) most = nlogs[q] > most ? nlogs[q] : most;
    size_t n = (size_t)N * most;
    CommEvent *logs = malloc(n * sizeof *logs), *mine = calloc((size_t)most, sizeof *mine);
    CHECK(logs && mine, "out of memory");
    memcpy(mine, run->log, (size_t)nlog * sizeof *mine);
    comm_all_gather_host(c, mine, (size_t)most * sizeof *mine, logs);
    int64_t *field[5];
    for (int f = 0; f < 5; f++) CHECK(field[f] = malloc(n * sizeof *field[f]), "out of memory");
    for (int q = 0; q < N; q++)
        for (int k = 0; k < most; k++) {
            size_t at = (size_t)q * most + k;
            const CommEvent *ev = &logs[at];
            field[0][at] = k < nlogs[q] ? ev->kind : -1;
            field[1][at] = ev->op, field[2][at] = ev->peer, field[3][at] = ev->seq, field[4][at] = (int64_t)ev->group;
        }
    static const char *const names[5] = {"pp/timeline/kind", "pp/timeline/op", "pp/timeline/peer",
                                         "pp/timeline/seq", "pp/timeline/group"};
    uint64_t shape[2] = {(uint64_t)N, (uint64_t)most};
    for (int f = 0; f < 5; f++) dump_i64(dw, names[f], field[f], 2, shape), free(field[f]);
    free(logs), free(mine), free(nlogs);
}

void lab05_dump_more(DumpWriter *dw, void *ctx) {
    const Lab05End *e = ctx;
    const Pp *pp = e->pp;
    const PpRun *run = pp->run;
    Comm *c = comm_world();
    dump_scalar_i64(dw, "pp/p", pp->p);
    dump_scalar_i64(dw, "pp/m", pp->m);
    dump_scalar_i64(dw, "pp/dp", comm_size(c) / pp->p);
    dump_scalar_i64(dw, "pp/gpipe", e->gpipe);
    dump_scalar_i64(dw, "pp/interleaved", e->interleaved);
    dump_scalar_i64(dw, "pp/v", pp->v);
    dump_scalar_i64(dw, "pp/recompute", pp->recompute);
    dump_scalar_i64(dw, "pp/stage_units_most", run->most);
    dump_scalar_i64(dw, "pp/stage_units_least", run->least);
    dump_scalar_f64(dw, "pp/bubble_formula", e->formula);
    dump_scalar_f64(dw, "pp/bubble_replay", e->bubble_order);
    dump_scalar_f64(dw, "pp/bubble_replay_recompute", e->bubble_ideal);
    dump_scalar_f64(dw, "pp/bubble_replay_measured", e->bubble_measured);
    dump_scalar_f64(dw, "pp/bubble_wall", e->wall_idle);
    dump_scalar_i64(dw, "pp/zeroed_between", (int64_t)comm_max_double(c, run->zeroed_between));
    dump_scalar_i64(dw, "pp/unfreed", (int64_t)comm_max_double(c, run->unfreed));
    dump_scalar_i64(dw, "pp/unwaited", (int64_t)comm_max_double(c, run->unwaited));
    dump_scalar_i64(dw, "pp/zero_bubble", e->zb);
    dump_scalar_f64(dw, "pp/bubble_span_formula", e->span_formula);
    dump_scalar_f64(dw, "pp/bubble_span_replay", e->span_bubble);
    dump_rank_stage(dw, e);
    dump_rank_split(dw, e);
    dump_rank_chunks(dw, e);
    dump_events(dw, e);
    dump_timeline(dw, e);
    dump_scalar_i64(dw, "pp/timeline_lost", (int64_t)comm_max_double(c, run->nlog > PPRUN_MAX_LOG));
    dump_scalar_f64(dw, "pp/stage_params", comm_max_double(c, run->stage_params));
}
