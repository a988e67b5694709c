// main.c: lab07's harness. Students do not edit it.
//
//   mpirun -np N build/lab07 --tp t --pp p [--micro m] [--schedule gpipe|1f1b]
//
// The capstone: data, tensor (with sequence) and pipeline parallelism on
// one grid of N = dp x p x t ranks (grid.h). The student's grid.c places
// each rank on the grid and makes its three groups; the rest is the
// earlier labs' answers, given: each pipeline stage's units run
// tensor-parallel with sequence parallelism over its TP group (lab06's
// sp.c on lab06's split layers), the micro-batches go through the stages
// by lab05's schedule (pipeline.c) over the PP group, and after the
// pipeline's last backward pass the DP group averages the gradients.
// Every step prints the loss beside single-device training's.
//
// The given code of this lab is the solutions of labs 05 and 06 (the
// Makefile links their objects): README.md, "Building and releasing",
// says why lab07 is released only with them.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "data.h"
#include "dump.h"
#include "gpt.h"
#include "grid.h"
#include "grid_budget.h"
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "optim.h"
#include "pipeline.h"
#include "plan.h"
#include "pp_budget.h"
#include "report_given.h"
#include "sp.h"
#include "stage_given.h"
#include "tp_given.h"
#include "tp_layout.h"
#include "trace.h"
#include "verdict.h"

// ---- the student's unfinished functions ------------------------------------

static const char *const HOOKS[] = {"grid_coords", "grid_groups",         "grid_wire",       "grid_shard",
                                    "grid_after_backward", "grid_after_step", "grid_choose"};

void lab_todo(const char *function) { harness_todo(function); }

// ---- the grid, checked and printed -----------------------------------------

// World rank q's coordinates in Megatron's order (what grid.h asks for).
static GridDims megatron(GridDims n, int q) {
    return (GridDims){.dp = q / (n.tp * n.pp), .pp = q / n.tp % n.pp, .tp = q % n.tp};
}

static int world_rank_at(GridDims n, GridDims at) { return (at.dp * n.pp + at.pp) * n.tp + at.tp; }

static const char *fmt_at(GridDims at, char *buf, size_t len) {
    snprintf(buf, len, "(dp %d, pp %d, tp %d)", at.dp, at.pp, at.tp);
    return buf;
}

// One group, against the coordinates: its size, this rank's place in it
// (the coordinate along its axis), and its members, which must be the
// ranks that agree on the two other coordinates, in order.
static void check_group(Comm *group, const char *name, int axis, const Grid *g, const GridDims *all, int N) {
    const int size = axis == 0 ? g->n.dp : axis == 1 ? g->n.pp : g->n.tp;
    const int mine = axis == 0 ? g->at.dp : axis == 1 ? g->at.pp : g->at.tp;
    CHECK(group, "grid_groups left g->%s NULL: every rank needs its three groups (fix grid_groups in grid.c)", name);
    CHECK(comm_size(group) == size, "the %s of world rank %d has %d ranks; along its axis the grid has %d (fix "
          "grid_groups in grid.c: the color must pair the ranks that agree on the two other coordinates)", name,
          comm_rank(comm_world()), comm_size(group), size);
    CHECK(comm_rank(group) == mine, "world rank %d is rank %d of its %s, and its coordinate along that axis is %d: "
          "order the group by it (the key of comm_split; fix grid_groups in grid.c)", comm_rank(comm_world()),
          comm_rank(group), name, mine);
    int me = comm_rank(comm_world()), *members = malloc((size_t)size * sizeof *members);
    CHECK(members, "out of memory");
    comm_all_gather_host(group, &me, sizeof me, members);
    for (int k = 0; k < size; k++) {
        GridDims want = g->at;
        *(axis == 0 ? &want.dp : axis == 1 ? &want.pp : &want.tp) = k;
        int q = -1;
        for (int i = 0; i < N; i++)
            if (all[i].dp == want.dp && all[i].pp == want.pp && all[i].tp == want.tp) q = i;
        char b[64];
        CHECK(members[k] == q, "rank %d of world rank %d's %s is world rank %d; the rank at %s is %d (fix "
              "grid_groups in grid.c)", k, me, name, members[k], fmt_at(want, b, sizeof b), q);
    }
    free(members);
}

// The student's coordinates and groups, checked on every rank: every place
// of the grid taken once, in Megatron's order, and each group the ranks
// along one axis through this rank.
static void grid_check(const Grid *g, Comm *world, GridDims *all) {
    const int N = comm_size(world);
    comm_all_gather_host(world, &g->at, sizeof g->at, all);
    char b1[64], b2[64];
    for (int q = 0; q < N; q++) {
        GridDims at = all[q];
        CHECK(at.dp >= 0 && at.dp < g->n.dp && at.pp >= 0 && at.pp < g->n.pp && at.tp >= 0 && at.tp < g->n.tp,
              "grid_coords puts world rank %d at %s, off the grid of %d x %d x %d (fix grid_coords in grid.c)", q,
              fmt_at(at, b1, sizeof b1), g->n.dp, g->n.pp, g->n.tp);
        for (int o = 0; o < q; o++)
            CHECK(world_rank_at(g->n, all[o]) != world_rank_at(g->n, at),
                  "grid_coords puts world ranks %d and %d both at %s: every place of the grid holds one rank (fix "
                  "grid_coords in grid.c)", o, q, fmt_at(at, b1, sizeof b1));
        GridDims want = megatron(g->n, q);
        CHECK(at.dp == want.dp && at.pp == want.pp && at.tp == want.tp,
              "grid_coords puts world rank %d at %s; Megatron's order puts it at %s: tensor-parallel innermost, so "
              "that a TP group's ranks are consecutive, on one node's fastest links (fix grid_coords in grid.c)", q,
              fmt_at(at, b1, sizeof b1), fmt_at(want, b2, sizeof b2));
    }
    check_group(g->tp_group, "tp_group", 2, g, all, N);
    check_group(g->pp_group, "pp_group", 1, g, all, N);
    check_group(g->dp_group, "dp_group", 0, g, all, N);
}

// "{0 2}": the world ranks of the group along `axis` through `at`.
static const char *members(GridDims n, GridDims at, int axis, char *buf, size_t len) {
    const int size = axis == 0 ? n.dp : axis == 1 ? n.pp : n.tp;
    size_t o = (size_t)snprintf(buf, len, "{");
    for (int k = 0; k < size && o < len; k++) {
        *(axis == 0 ? &at.dp : axis == 1 ? &at.pp : &at.tp) = k;
        o += (size_t)snprintf(buf + o, len - o, k ? " %d" : "%d", world_rank_at(n, at));
    }
    if (o < len) snprintf(buf + o, len - o, "}");
    return buf;
}

// The grid drawn (a row per replica, a box per stage holding its TP
// group), then each rank's coordinates and groups.
static void grid_print(const Grid *g, const GridDims *all, int N) {
    GridDims n = g->n;
    print0("grid: %d ranks = %d data-parallel x %d pipeline x %d tensor-parallel (tensor innermost, then pipeline, "
           "then data)\n", N, n.dp, n.pp, n.tp);
    for (int d = 0; d < n.dp; d++) {
        char line[1024];
        size_t o = (size_t)snprintf(line, sizeof line, "  dp %-3d", d);
        for (int s = 0; s < n.pp && o < sizeof line; s++) {
            o += (size_t)snprintf(line + o, sizeof line - o, "%s[", s ? "  ->  " : " ");
            for (int k = 0; k < n.tp && o < sizeof line; k++)
                o += (size_t)snprintf(line + o, sizeof line - o, " %d", world_rank_at(n, (GridDims){d, s, k}));
            o += (size_t)snprintf(line + o, sizeof line - o, " ]");
        }
        print0("%s\n", line);
    }
    print0("  rank  dp  pp  tp   TP group      PP group      DP group\n");
    for (int q = 0; q < N; q++) {
        char t[64], p[64], d[64];
        print0("  %4d %3d %3d %3d   %-13s %-13s %s\n", q, all[q].dp, all[q].pp, all[q].tp, members(n, all[q], 2, t, 64),
               members(n, all[q], 1, p, 64), members(n, all[q], 0, d, 64));
    }
}

// ---- the model gathered (bookkeeping, after training) -------------------------------

// Unit u whole on world rank 0's host (NULL elsewhere): the TP group of the
// first replica's stage that holds it gathers its parts, and its rank 0
// hands the unit to world rank 0.
static float *gather_unit(const Pp *pp, const Grid *g, Comm *world, int u, float *const *units) {
    float *whole = stage_holds(pp, u) ? tp_layout_gather_unit(pp->run->L, u, units[u]) : NULL;
    const bool give = whole && g->at.dp == 0;
    size_t bytes = give ? pp->run->m->units[u].size * sizeof(float) : 0;
    size_t *lens = comm_rank(world) == 0 ? malloc((size_t)comm_size(world) * sizeof *lens) : NULL;
    float *out = comm_gather_host(world, whole, bytes, 0, lens);
    free(lens);
    free(whole);
    return out;
}

static float **gather_model(const Pp *pp, const Grid *g, Comm *world, float *const *units) {
    const int nunits = pp->run->m->nunits;
    float **out = comm_rank(world) == 0 ? calloc((size_t)nunits, sizeof *out) : NULL;
    for (int u = 0; u < nunits; u++) {
        float *w = gather_unit(pp, g, world, u, units);
        if (out) out[u] = w;
        else free(w);
    }
    return out;
}

// A TODO the run cannot go on without: say what is missing, write the dump
// the grader reads (the run's configuration and the unfinished hooks), and
// stop. Collective.
static PL_NORETURN void stop_unfinished(Comm *c, const Args *a, const char *why) {
    harness_print_unfinished();
    print0("%s\n", why);
    DumpWriter *dw = dump_create(comm_rank(c) == 0 ? a->dump : NULL);
    dump_run_meta(dw, c, "lab07", a, "");
    harness_dump_unfinished(dw);
    dump_close(dw);
    comm_finalize();
    harness_exit(1);
}

// ---- choosing a configuration (--budget-mb) -----------------------------------------

static GridChoiceReport g_choice;

// The planner (grader/plan.h) on this lab's model, with this lab's own
// limits: t divides the heads, the tokens, the channels and the vocabulary
// (tp_check_shape's), p the units, dp the batch, m a replica's rows. The
// figures of the "GPUs" are a laptop's, stated in README.md: the choice is
// the planner's on them, not a measurement.
typedef struct {
    PlanModel model;
    PlanGpu gpu;
    int gpus, batch, nunits;
} ChoiceCtx;

static const double CPU_PEAK = 100e9, CPU_ALPHA = 2e-6, CPU_BW = 7.7e9;

static GridPlan plan_one(const void *ctx, GridChoice c) {
    const ChoiceCtx *k = ctx;
    const PlanModel *m = &k->model;
    GridPlan out = {false, 0, 0, 0};
    if (c.t < 1 || c.p < 1 || c.dp < 1 || c.m < 1 || (long long)c.t * c.p * c.dp != k->gpus || c.rc < GPT_RECOMPUTE_NONE ||
        c.rc > GPT_RECOMPUTE_FULL)
        return out;
    if (m->a % c.t || m->s % c.t || m->h % c.t || m->V % c.t || c.p > k->nunits || k->batch % c.dp ||
        (k->batch / c.dp) % c.m)
        return out;
    // The step's time: the planner's (compute at the peak, each group's
    // collectives by the alpha-beta model, the bubble). It counts stages of
    // whole layers; this lab's p stages share the units (the embeddings and
    // the head among them), and for p beyond the layers the planner's
    // figure at p = L stands.
    PlanConfig pc = {.t = c.t, .p = c.p < m->L ? c.p : m->L, .v = 1, .dp = c.dp, .sp = c.t > 1, .zero = 0,
                     .rc = c.rc, .b = k->batch / c.dp / c.m, .bf16 = false};
    PlanResult r = plan_evaluate(m, &k->gpu, c.t * pc.p * c.dp, k->batch, 1.0, pc);
    if (!r.valid) return out;
    // The memory: this lab's own formulas (grid_budget.h), which its runs
    // measure to the byte: every stage's parameters, gradients and moments,
    // and its scratch and 1F1B's micro-batches alive; the fullest stage.
    const double b = (double)k->batch / c.dp / c.m;
    for (int s = 0; s < c.p; s++) {
        int u0, u1;
        pp_partition(k->nunits, c.p, s, &u0, &u1);
        const bool embed = u0 == 0, head = u1 == k->nunits;
        const int blocks = u1 - u0 - embed - head;
        GridActs ga = grid_acts(c.t, b, m->s, m->h, m->a, m->V, blocks, embed, head, c.rc);
        const double psi = grid_stage_params(c.t, m->s, m->h, m->V, blocks, embed, head);
        PpBudget pb = pp_budget(false, false, c.p, c.m, s, psi, ga.scratch, 0, ga.set, false);
        const double bytes = pb.params + pb.grads + pb.optim + pb.acts;
        if (bytes > out.bytes) out.bytes = bytes;
    }
    out.valid = true, out.seconds = r.step, out.planner_bytes = r.total;
    return out;
}

// Every candidate the planner can judge, fastest first, for the printout.
typedef struct {
    GridChoice c;
    GridPlan f;
} Candidate;
static int by_seconds(const void *a, const void *b) {
    double x = ((const Candidate *)a)->f.seconds, y = ((const Candidate *)b)->f.seconds;
    return (x > y) - (x < y);
}

// Every candidate the planner can judge for `gpus` GPUs, fastest first, in
// *out (malloc'd): t among the divisors of the GPUs, p among those of the
// rest, m among those of a replica's rows, each recomputation. Returns how
// many. Divisors only, so that thousands of GPUs take no time.
static int plan_list(const ChoiceCtx *k, int gpus, Candidate **out) {
    int n = 0, cap = 256;
    Candidate *all = malloc((size_t)cap * sizeof *all);
    CHECK(all, "out of memory");
    for (int tt = 1; tt <= gpus; tt++)
        for (int pp = 1; gpus % tt == 0 && pp <= gpus / tt; pp++) {
            if ((gpus / tt) % pp) continue;
            const int dp = gpus / tt / pp, rows = k->batch / dp;
            for (int mm = 1; k->batch % dp == 0 && mm <= rows; mm++)
                for (int rc = GPT_RECOMPUTE_NONE; rows % mm == 0 && rc <= GPT_RECOMPUTE_FULL; rc++) {
                    GridChoice x = {tt, pp, dp, mm, (GptRecompute)rc};
                    GridPlan f = plan_one(k, x);
                    if (!f.valid) continue;
                    if (n == cap) {
                        cap *= 2;
                        all = realloc(all, (size_t)cap * sizeof *all);
                        CHECK(all, "out of memory");
                    }
                    all[n].c = x, all[n].f = f, n++;
                }
        }
    qsort(all, (size_t)n, sizeof *all, by_seconds);
    *out = all;
    return n;
}

// --budget-mb: the student's choice, the planner's list beside it, and
// whether a faster candidate fits (the grader's check). A budget that no
// candidate fits, or GPUs that no grid of this model uses, is refused
// before the student's grid_choose runs. Where the run is only a plan
// (--gpus other than the ranks), it ends here with a dump of the choice.
static void choose(const Args *a, int N, int gpus, double budget_mb, int *t, int *p, int *micro,
                   GptRecompute *rc_out) {
    ChoiceCtx k = {.model = {.name = "lab07", .arch = PLAN_GPT, .L = a->layers, .h = a->dim, .a = a->heads,
                             .kv = a->heads, .f = 4 * a->dim, .s = a->seq, .V = a->vocab},
                   .gpu = {.name = "a laptop's cores (README.md)", .peak = CPU_PEAK, .hbm = 1e12, .nvlink_bw = CPU_BW,
                           .nvlink_alpha = CPU_ALPHA, .net_bw = CPU_BW, .net_alpha = CPU_ALPHA, .node_gpus = gpus},
                   .gpus = gpus, .batch = a->batch, .nunits = a->layers + 2};
    const double budget = budget_mb * 1e6;
    // The planner's list: every candidate, fastest first.
    Candidate *all;
    int n = plan_list(&k, gpus, &all), best = -1, least = -1;
    for (int i = 0; i < n; i++) {
        if (best < 0 && all[i].f.bytes <= budget) best = i;
        if (least < 0 || all[i].f.bytes < all[least].f.bytes) least = i;
    }
    if (n == 0)
        core_usage_error("no grid of %d GPUs runs this model: t x p x dp = %d with t dividing its %d heads (and the "
                         "channels, tokens and vocabulary), p at most its %d units and dp dividing its batch of %d "
                         "rows has no solution; choose another --gpus (at most %d x %d x %d = %d for this model)",
                         gpus, gpus, a->heads, k.nunits, a->batch, a->heads, k.nunits, a->batch,
                         a->heads * k.nunits * a->batch);
    if (best < 0) {
        const double need = ceil(all[least].f.bytes / 1e4) / 100;   // MB, rounded up to what fits
        core_usage_error("--budget-mb %g: no configuration of this model on %d GPUs fits; the smallest (t %d, p %d, "
                         "dp %d, m %d, recompute %s) needs %.2f MB a rank: use --budget-mb %.2f or more, or more "
                         "GPUs", budget_mb, gpus, all[least].c.t, all[least].c.p, all[least].c.dp, all[least].c.m,
                         gpt_recompute_name(all[least].c.rc), all[least].f.bytes / 1e6, need);
    }
    GridChoice c = {0, 0, 0, 0, GPT_RECOMPUTE_NONE};
    bool found = grid_choose(gpus, a->batch, budget, plan_one, &k, &c);
    if (harness_unfinished("grid_choose"))
        stop_unfinished(comm_world(), a, "--budget-mb needs TODO 6 in grid.c (the choice); without it, give the "
                        "grid yourself: --tp, --pp, --micro");
    print0("choosing a configuration for %d GPUs within %.2f MB a rank (the planner on %s: %.0f GFLOP/s, %.1f us, "
           "%.2f GB/s), fastest first:\n", gpus, budget_mb, k.gpu.name, CPU_PEAK / 1e9, CPU_ALPHA * 1e6, CPU_BW / 1e9);
    print0("     t   p  dp   m  recompute   memory a rank (the planner's count)   a step (planned)\n");
    for (int i = 0; i < n && (i < 8 || i <= best); i++) {
        if (i >= 8 && i < best) {   // the list between the first 8 and the one that fits, left out
            if (i == 8) print0("   ... (%d more, none fits)\n", best - 8);
            continue;
        }
        print0("   %3d %3d %3d %3d  %-9s   %8.2f MB %s (%8.2f MB)        %9.3f ms%s\n", all[i].c.t, all[i].c.p,
               all[i].c.dp, all[i].c.m, gpt_recompute_name(all[i].c.rc), all[i].f.bytes / 1e6,
               all[i].f.bytes <= budget ? "  " : "> ", all[i].f.planner_bytes / 1e6, all[i].f.seconds * 1e3,
               i == best ? "   <- the fastest that fits" : "");
    }
    CHECK(found, "grid_choose found no configuration within %.2f MB, where the list has t %d, p %d, dp %d, m %d at "
          "%.2f MB: every t dividing the GPUs, p dividing the rest, m from 1 to a replica's rows and each "
          "recomputation must be tried (fix grid_choose in grid.c)", budget_mb, all[best].c.t, all[best].c.p,
          all[best].c.dp, all[best].c.m, all[best].f.bytes / 1e6);
    GridPlan mine = plan_one(&k, c);
    const bool ok = mine.valid && mine.bytes <= budget && mine.seconds <= all[best].f.seconds * (1 + 1e-12);
    print0("grid_choose: t %d, p %d, dp %d, m %d, recompute %s (%.2f MB a rank, %.3f ms a step planned)%s\n", c.t,
           c.p, c.dp, c.m, gpt_recompute_name(c.rc), mine.bytes / 1e6, mine.seconds * 1e3,
           ok ? "" : ": not the planner's fastest that fits");
    g_choice.on = true, g_choice.ok = ok, g_choice.budget = budget, g_choice.planned = mine.bytes;
    g_choice.planner = mine.planner_bytes;
    g_choice.best_t = all[best].c.t, g_choice.best_p = all[best].c.p, g_choice.best_m = all[best].c.m;
    g_choice.gpus = gpus, g_choice.t = c.t, g_choice.p = c.p, g_choice.m = c.m;
    free(all);
    if (gpus != N) {
        print0("to run it: mpirun --oversubscribe -np %d build/lab07 --tp %d --pp %d --micro %d --recompute %s\n",
               gpus, c.t, c.p, c.m, gpt_recompute_name(c.rc));
        // Only a plan: the dump holds the choice alone, for the grader.
        DumpWriter *dw = dump_create(comm_rank(comm_world()) == 0 ? a->dump : NULL);
        dump_run_meta(dw, comm_world(), "lab07", a, "");
        harness_dump_unfinished(dw);
        grid_choice_dump(dw, &g_choice);
        dump_close(dw);
        comm_finalize();
        harness_exit(ok ? 0 : 1);
    }
    *t = c.t, *p = c.p, *micro = c.m, *rc_out = c.rc;
}

// ---- the flags, checked before any work ------------------------------------------

// --gpus's most: the planner's list and grid_choose's search over the
// divisors take well under a second up to here.
enum { PLAN_MAX_GPUS = 4096 };

// Before MPI starts: the flags that go together. --budget-mb chooses t, p,
// m and the recomputation, and plans 1F1B's memory; --gpus is its own.
static void check_flags(double budget_mb, const char *schedule) {
    if (args_given("gpus") && budget_mb <= 0)
        core_usage_error("--gpus plans a grid for that many GPUs, which is --budget-mb's work: add --budget-mb X "
                         "(the MB a rank may hold), or drop --gpus");
    static const char *const chosen[] = {"tp", "pp", "micro", "recompute"};
    for (int i = 0; i < 4 && budget_mb > 0; i++)
        if (args_given(chosen[i]))
            core_usage_error("--budget-mb chooses t, p, m and the recomputation, so --%s would be replaced: drop "
                             "--%s, or drop --budget-mb and give the grid yourself", chosen[i], chosen[i]);
    if (budget_mb > 0 && strcmp(schedule, "1f1b") != 0)
        core_usage_error("--budget-mb plans the memory of 1F1B (lab05's schedule, a stage holds at most p "
                         "micro-batches), not GPipe's: drop --schedule gpipe");
}

// After MPI starts, on every rank alike: the grid fits the ranks, the model
// and the batch, and the run the memory, before any rank takes its place.
// Returns a replica's rows of the batch.
static int check_grid(const Args *a, int N, int t, int p, int micro, bool with_ref) {
    const int nunits = a->layers + 2;
    const long long tp = (long long)t * p;   // up to 2^32: no int holds it
    if (tp > N)
        core_usage_error("--tp %d x --pp %d = %lld is more than the %d ranks: the grid is N = dp x p x t; use a t "
                         "and a p whose product divides %d, or more ranks", t, p, tp, N, N);
    if (N % tp)
        core_usage_error("--tp %d x --pp %d = %lld does not divide %d ranks: the grid is N = dp x p x t; use -np "
                         "%lld, or a t and a p whose product divides %d", t, p, tp, N, tp * (N / tp + 1), N);
    if (p > nunits)
        core_usage_error("%d stages for %d units (the embeddings, %d blocks, the head): a stage needs a unit; use "
                         "--pp %d or fewer", p, nunits, a->layers, nunits);
    tp_check_shape(a, t, N, true);
    const int dp = N / (int)tp;
    int row0, rows;   // the first replica's rows; every replica has as many
    data_rank_rows(a->batch, dp, 0, &row0, &rows);
    if (rows % micro)
        core_usage_error("--micro %d does not divide a replica's %d rows of the batch (%d rows over %d replica%s); "
                         "use --micro among the divisors of %d", micro, rows, a->batch, dp, dp == 1 ? "" : "s", rows);
    harness_check_fits(a, rows, with_ref);
    return rows;
}

static void dump_more(DumpWriter *dw, void *ctx) { grid_report_dump(dw, comm_world(), ctx); }

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    // The hooks are fixed before any student code runs (harness.h).
    harness_hooks(HOOKS, (int)(sizeof HOOKS / sizeof HOOKS[0]));
    Args a = args_defaults();
    a.dropout = 0.1;   // as lab06: the masks, keyed by the global row and token, are part of the check
    int t = 1, p = 1, micro = 2, zero = 0, gpus = 0;
    double budget_mb = 0;
    const char *schedule = "1f1b";
    bool no_ref = false;
    const char *figure = NULL;
    ArgExtra extras[] = {
        {"tp", ARG_INT, &t, "t: tensor-parallel ranks per stage (consecutive ranks), with sequence parallelism", 1,
         1 << 16, NULL, NULL},
        {"pp", ARG_INT, &p, "p: pipeline stages per replica; the ranks left over, N / (t p), are data-parallel", 1,
         1 << 16, NULL, NULL},
        {"micro", ARG_INT, &micro, "m: micro-batches per step (m divides a replica's rows of the batch)", 1,
         PP_MAX_MICRO, NULL, NULL},
        {"schedule", ARG_CHOICE, &schedule, "the pipeline schedule (lab05's)", 0, 0, "gpipe|1f1b", NULL},
        {"zero", ARG_INT, &zero, "1: ZeRO-1 over the data-parallel group (the optimizer's state sharded over the "
         "replicas), 0: none", 0, 1, NULL, NULL},
        {"budget-mb", ARG_DOUBLE, &budget_mb, "choose t, p and m (grid_choose, TODO 6): the planner's fastest whose "
         "memory a rank fits this many MB, then run it (0: give them yourself; with --tp, --pp, --micro, "
         "--recompute: refused)", 0, 1e9, NULL, NULL},
        {"gpus", ARG_INT, &gpus, "with --budget-mb: choose for this many GPUs (1 to 4096) and print the choice, "
         "without training (default: the ranks)", 0, PLAN_MAX_GPUS, NULL, NULL},
        {"figure", ARG_OUTPUT, &figure, "draw the grid and each rank's bytes a step on its TP, PP and DP links (SVG)",
         0, 0, NULL, NULL},
        {"no-ref", ARG_FLAG, &no_ref, "skip the single-device reference run", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_ALL | ARGS_RECOMPUTE, NULL);
    args_parse(&a, argc, argv,
               "lab07: data, tensor (with sequence) and pipeline parallelism on one grid of ranks, checked against "
               "single-device training.",
               extras);
    check_flags(budget_mb, schedule);
    Comm *c = harness_start(&a, &argc, &argv);
    const int N = comm_size(c), r = comm_rank(c), nunits = a.layers + 2;
    GptRecompute rc_chosen = gpt_recompute_parse(a.recompute);
    if (budget_mb > 0) choose(&a, N, gpus ? gpus : N, budget_mb, &t, &p, &micro, &rc_chosen);
    a.recompute = gpt_recompute_name(rc_chosen);   // the dump records the mode run
    const int rows = check_grid(&a, N, t, p, micro, !no_ref), dp = N / (t * p);

    // The grid: the student's coordinates and groups, checked on every rank.
    Grid g = {.n = {.dp = dp, .pp = p, .tp = t}};
    g.at = grid_coords(g.n, r);
    grid_groups(&g, c);
    if (harness_unfinished("grid_coords") || harness_unfinished("grid_groups"))
        stop_unfinished(c, &a, "the ranks have no place on the grid yet, so nothing can train: write TODO 1 in "
                        "grid.c");
    GridDims *all = malloc((size_t)N * sizeof *all);
    CHECK(all, "out of memory");
    grid_check(&g, c, all);
    const int row0 = g.at.dp * rows;   // this replica's rows of the batch
    Reference ref = harness_reference(c, &a, !no_ref);

    GptConfig cfg = {.B = rows / micro, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .dropout = (float)a.dropout, .seed = a.seed, .precision = GPT_FP32};
    Gpt *model = gpt_create(&cfg);
    Sp sp = {.tp = {.t = t, .r = g.at.tp, .B = cfg.B, .T = a.seq, .C = a.dim, .NH = a.heads, .V = a.vocab},
             .Tt = a.seq / t, .dropout = (float)a.dropout, .seed = a.seed, .recompute = rc_chosen};
    Pp pp = {.p = p, .s = g.at.pp, .m = micro, .rows = rows, .micro_rows = cfg.B, .T = a.seq, .C = a.dim};
    // The student's wiring of the given code (TODO 2).
    grid_wire(&g, &pp, &sp);
    if (harness_unfinished("grid_wire"))
        stop_unfinished(c, &a, "the stage's layers and the pipeline have no groups yet, so nothing can train: write "
                        "TODO 2 in grid.c");
    CHECK(sp.tp.group && pp.group, "grid_wire left %s NULL: the stage's layers talk on the TP group, the pipeline "
          "on the PP group (fix grid_wire in grid.c)", sp.tp.group ? "pp->group" : "sp->tp.group");
    grid_check_wiring(&g, &pp, &sp);
    TpLayout L;
    tp_layout_make(&L, model, g.tp_group, tpg_split, &sp.tp, false, "the given split of tp_given.c");
    tpg_sizes(&sp.tp, &L);
    pp_partition(nunits, p, pp.s, &pp.u0, &pp.u1);   // lab05's
    int *x = malloc((size_t)rows * a.seq * sizeof *x), *y = malloc((size_t)rows * a.seq * sizeof *y);
    CHECK(x && y, "out of memory");
    PpRun run;
    GridStep st;
    mem_reset_peaks();
    stage_create(&pp, &run, model, &sp, &L, row0, x, y, &g, &st, zero);
    float *mom_m = mem_alloc_floats(st.shard_len, MEM_OPTIM, "adam m (this rank's shard)");
    float *mom_v = mem_alloc_floats(st.shard_len, MEM_OPTIM, "adam v (this rank's shard)");
    GridLinks links;
    links_make(&links, &g);

    const bool gpipe = strcmp(schedule, "gpipe") == 0;
    char desc[96];
    print0("[lab07] %d rank%s · %s · %s · %s · fp32 · %d data-parallel%s x %d pipeline (%s, %d micro-batch%s of %d "
           "row%s) x %d tensor-parallel with sequence parallelism · dropout %g\n", N, N == 1 ? "" : "s",
           mem_device_name(), comm_backend_name(), gpt_describe(model, desc, sizeof desc), dp,
           zero ? " with ZeRO-1" : "", p, gpipe ? "GPipe" : "1F1B", micro, micro == 1 ? "" : "es", cfg.B,
           cfg.B == 1 ? "" : "s", t, a.dropout);
    grid_print(&g, all, N);

    OptimConfig optim = optim_from_args(&a);
    Data data;
    data_open(&data, a.data, a.vocab, a.seq, a.batch, a.seed);
    DumpWriter *dw = dump_create(r == 0 ? ref.own_dump : NULL);
    char extra[160];
    snprintf(extra, sizeof extra, "tp %d\npp %d\ndp %d\nmicro %d\nschedule %s\nzero %d\n", t, p, dp, micro,
             schedule, zero);
    dump_run_meta(dw, c, "lab07", &a, extra);
    HarnessRun hr = harness_run(c, &a, &ref, "lab07", verdict_of_lab_run);
    ops_release_scratch();
    mem_reset_peaks();
    comm_stats_reset();
    harness_seal_measures();

    for (int s = 0; s < a.steps; s++) {
        harness_step_begin(&hr);
        data_slice(&data, s, row0, rows, 0, a.seq, x, y);
        stage_step_begin(&pp, s);
        (gpipe ? pp_gpipe : pp_1f1b)(&pp);   // lab05's schedules, over the stage's micro-batch API
        // The student's grid_after_backward made the gradients the step's
        // after the last micro-batch; the optimizer updates this rank's
        // shard (--zero 1) or all of the stage's parts, and the student's
        // grid_after_step gathers the shards back.
        CHECK(run.done == micro, "the schedule ran %d backward passes on stage %d, of %d micro-batches", run.done,
              pp.s, micro);
        trace_begin("optimizer", "compute");
        optim_step(&optim, s + 1, false, st.params + st.shard_off, st.grads + st.shard_off, NULL, mom_m, mom_v,
                   st.shard_len);
        trace_end();
        trace_begin("grid_after_step", "comm");
        grid_after_step(&g, &st);
        trace_end();
        // The loss is the last stage's (every rank of its TP group has it:
        // one of them counts), the mean over the replicas.
        bool counts = pp.s == p - 1 && g.at.tp == 0;
        harness_step_end(&hr, s, counts ? run.loss : 0, dp);
    }
    MemReport mem = mem_report();
    harness_print_mean_step(&hr, false);
    harness_print_memory(c, &mem);
    GridReport rep = {.g = &g, .pp = &pp, .run = &run, .st = &st, .links = &links, .mem = &mem, .gpipe = gpipe,
                      .steps = a.steps, .figure = figure, .choice = &g_choice};
    grid_report(c, &rep);

    // Afterwards, not measured: the moments' shards gathered over the DP
    // group (--zero 1), and the whole model gathered on rank 0.
    // (On the host, outside the ledger of the step's calls.)
    float *fm = mom_m, *fv = mom_v;
    if (zero) {
        float *sm = malloc(st.shard_len * sizeof *sm), *sv = malloc(st.shard_len * sizeof *sv);
        fm = malloc(st.padded * sizeof *fm), fv = malloc(st.padded * sizeof *fv);
        CHECK(sm && sv && fm && fv, "out of memory");
        mem_to_host(sm, mom_m, st.shard_len * sizeof *sm);
        mem_to_host(sv, mom_v, st.shard_len * sizeof *sv);
        comm_all_gather_host(g.dp_group, sm, st.shard_len * sizeof *sm, fm);
        comm_all_gather_host(g.dp_group, sv, st.shard_len * sizeof *sv, fv);
        free(sm), free(sv);
        float *dm = mem_alloc_floats(st.padded, MEM_OTHER, "adam m gathered"),
              *dv = mem_alloc_floats(st.padded, MEM_OTHER, "adam v gathered");
        mem_from_host(dm, fm, st.padded * sizeof *fm);
        mem_from_host(dv, fv, st.padded * sizeof *fv);
        free(fm), free(fv);
        fm = dm, fv = dv;
    }
    float **um = calloc((size_t)nunits, sizeof *um), **uv = calloc((size_t)nunits, sizeof *uv);
    CHECK(um && uv, "out of memory");
    for (int u = pp.u0; u < pp.u1; u++) um[u] = fm + (run.params[u] - st.params), uv[u] = fv + (run.params[u] - st.params);
    float **whole = gather_model(&pp, &g, c, run.params), **whole_m = gather_model(&pp, &g, c, um),
          **whole_v = gather_model(&pp, &g, c, uv);
    free(all);
    harness_finish(&hr, &(HarnessEnd){.dw = dw, .mem = &mem, .model = model, .params = whole, .m = whole_m,
                                      .v = whole_v, .host = true, .dump_more = dump_more, .ctx = &rep,
                                      .groups = {g.tp_group, g.pp_group, g.dp_group}});
}
