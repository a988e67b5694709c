// report_given.c: lab07's figures beside their formulas (report_given.h).
#include "report_given.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "figure.h"
#include "grid_budget.h"
#include "ops.h"
#include "pp_budget.h"
#include "zero_budget.h"

// ---- the groups' ranks ---------------------------------------------------------------

// The world ranks of a group, in its order (malloc'd; collective over it).
static int *ranks_of(Comm *group) {
    const int me = comm_rank(comm_world());
    int *members = malloc((size_t)comm_size(group) * sizeof *members);
    CHECK(members, "out of memory");
    comm_all_gather_host(group, &me, sizeof me, members);
    return members;
}

static uint64_t mask_of(Comm *group, bool *fits) {
    const int n = comm_size(group);
    int *members = ranks_of(group);
    uint64_t mask = 0;
    for (int k = 0; k < n; k++) {
        if (members[k] >= 64) *fits = false;
        else mask |= (uint64_t)1 << members[k];
    }
    free(members);
    return mask;
}

// "{0 4}": the world ranks of a group (collective over it).
static const char *members_of(Comm *group, char *buf, size_t len) {
    const int n = comm_size(group);
    int *m = ranks_of(group);
    size_t o = (size_t)snprintf(buf, len, "{");
    for (int k = 0; k < n && o < len; k++) o += (size_t)snprintf(buf + o, len - o, k ? " %d" : "%d", m[k]);
    if (o < len) snprintf(buf + o, len - o, "}");
    free(m);
    return buf;
}

void grid_check_wiring(const Grid *g, const Pp *pp, const Sp *sp) {
    static const char *const what[] = {"the stage's layers (sp->tp.group: every block's all-gathers and "
                                       "reduce-scatters)", "the pipeline (pp->group: its sends and receives)"};
    static const char *const belongs[] = {"the TP group, the t ranks that split the stage's layers",
                                          "the PP group, the p stages of this replica that hold the same TP part"};
    Comm *given[] = {sp->tp.group, pp->group}, *want[] = {g->tp_group, g->pp_group};
    for (int i = 0; i < 2; i++) {
        char a[512], b[512];
        members_of(given[i], a, sizeof a);
        members_of(want[i], b, sizeof b);
        CHECK(strcmp(a, b) == 0, "grid_wire gives %s the world ranks %s on world rank %d; they belong on %s, %s: the "
              "collective was given the wrong communicator (fix grid_wire in grid.c)", what[i], a,
              comm_rank(comm_world()), belongs[i], b);
    }
}

void links_make(GridLinks *k, const Grid *g) {
    k->fits = comm_size(comm_world()) <= 64;
    k->tp = mask_of(g->tp_group, &k->fits);
    k->pp = mask_of(g->pp_group, &k->fits);
    k->dp = mask_of(g->dp_group, &k->fits);
}

// ---- this rank's facts and figures ---------------------------------------------------

// Payload bytes a step on each group, from this rank's ledger: a
// collective's group by its ranks, a send or a receive by its peer's.
static void measured_bytes(const GridLinks *k, int steps, double *tp, double *pp, double *dp, double *other) {
    CommLedgerLine lines[COMM_LEDGER_LINES];
    comm_ledger(lines);
    const uint64_t me = (uint64_t)1 << comm_rank(comm_world());
    *tp = *pp = *dp = *other = 0;
    for (int i = 0; i < COMM_LEDGER_LINES && lines[i].op >= 0; i++) {
        const CommLedgerLine *l = &lines[i];
        if (l->group_size <= 1) continue;   // a group of one moves nothing
        double bytes = (double)l->bytes * (double)l->calls / steps;
        bool p2p = l->op == COMM_OP_SEND || l->op == COMM_OP_RECV;
        uint64_t peer = l->group & ~me;
        if (!p2p && l->group == k->tp) *tp += bytes;
        else if ((!p2p && l->group == k->pp) || (p2p && (peer & k->pp) == peer)) *pp += bytes;
        else if (!p2p && l->group == k->dp) *dp += bytes;
        else *other += bytes;
    }
}

static void facts(const GridReport *r, double *f) {
    const Pp *pp = r->pp;
    const PpRun *run = r->run;
    const int nunits = run->m->nunits;
    memset(f, 0, F_COUNT * sizeof *f);
    f[F_STAGE] = pp->s;
    f[F_EMBED] = pp->u0 == 0;
    f[F_HEAD] = pp->u1 == nunits;
    f[F_BLOCKS] = (pp->u1 - pp->u0) - f[F_EMBED] - f[F_HEAD];
    for (int i = 0; i < r->st->nrep; i++) f[F_REP_FLOATS] += (double)r->st->rep[i].n;
    f[F_NREP] = r->st->nrep;
    f[F_N] = (double)r->st->n, f[F_PADDED] = (double)r->st->padded, f[F_SHARD] = (double)r->st->shard_len;
    f[F_SCRATCH] = run->acts_scratch, f[F_SET] = run->acts_set;
    if (r->links->fits) measured_bytes(r->links, r->steps, &f[F_TP], &f[F_PP], &f[F_DP], &f[F_OTHER]);
    f[F_PARAMS] = r->mem->peak[MEM_PARAMS], f[F_GRADS] = r->mem->peak[MEM_GRADS];
    f[F_OPTIM] = r->mem->peak[MEM_OPTIM], f[F_ACTS] = r->mem->peak[MEM_ACTS];
}

// The formulas at a rank's facts.
typedef struct {
    GridBytes bytes;
    ZeroBudget state;
    PpBudget acts;
} GridFormula;

static GridFormula formula_at(const GridReport *r, const double *f) {
    const Grid *g = r->g;
    const Pp *pp = r->pp;
    GridFormula o;
    o.bytes = grid_bytes(g->n.tp, g->n.pp, (int)f[F_STAGE], g->n.dp, r->st->zero, pp->m, pp->micro_rows, pp->T,
                         pp->C, (int)f[F_BLOCKS], f[F_EMBED] != 0, f[F_HEAD] != 0, f[F_REP_FLOATS], (int)f[F_NREP],
                         f[F_PADDED], r->run->sp->recompute == GPT_RECOMPUTE_FULL);
    o.state = zero_budget(r->st->zero, false, f[F_PADDED], g->n.dp, 0, 0, false);
    o.acts = pp_budget(r->gpipe, false, g->n.pp, pp->m, (int)f[F_STAGE], f[F_N], f[F_SCRATCH], 0, f[F_SET], false);
    return o;
}

static const char *pair(double measured, double formula, char *buf, size_t len) {
    char a[32], b[32];
    core_fmt_bytes(measured, a, sizeof a);
    core_fmt_bytes(formula, b, sizeof b);
    // Equal to the byte, or the figure the formula bounds.
    snprintf(buf, len, "%s%s%s", a, measured == formula ? "" : " / ", measured == formula ? "" : b);
    return buf;
}

// The grid drawn: a row per replica, a box per stage holding its TP group's
// ranks, each rank with its bytes a step on its TP group; an arrow between
// stages with the PP bytes a rank sends and receives; the DP groups' links
// between the replicas with their bytes. One colour per kind of link.
static void grid_figure(const char *path, const GridReport *r, const double *all) {
    const GridDims n = r->g->n;
    const double cell = 120, gap = 70, pad = 14, rowh = 150, top = 70, left = 30;
    const double boxw = n.tp * cell + 2 * pad;
    const int W = (int)(left * 2 + n.pp * boxw + (n.pp - 1) * gap), H = (int)(top + n.dp * rowh + 70);
    char title[160];
    snprintf(title, sizeof title, "lab07: %d ranks = %d data-parallel x %d pipeline x %d tensor-parallel%s, bytes a "
             "step and rank", n.dp * n.pp * n.tp, n.dp, n.pp, n.tp, r->st->zero ? " (ZeRO-1)" : "");
    FILE *f = fig_open(path, W < 560 ? 560 : W, H, title);
    static const char *const tp_c = "#1f77b4", *const pp_c = "#d62728", *const dp_c = "#2ca02c";
    char b[32];
    for (int d = 0; d < n.dp; d++)
        for (int s = 0; s < n.pp; s++) {
            const double x = left + s * (boxw + gap), y = top + d * rowh;
            fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='none' stroke='%s' "
                       "stroke-width='2' rx='8'/>\n", x, y, boxw, rowh - 50, tp_c);
            fprintf(f, "<text x='%.0f' y='%.0f' font-size='12' text-anchor='end'>dp %d · stage %d</text>\n", x + boxw,
                    y - 4, d, s);
            for (int k = 0; k < n.tp; k++) {
                const int q = (d * n.pp + s) * n.tp + k;
                const double *fq = all + (size_t)q * F_COUNT, cx = x + pad + k * cell;
                fprintf(f, "<rect x='%.0f' y='%.0f' width='%.0f' height='%.0f' fill='#f4f4f4' stroke='#444'/>\n",
                        cx, y + pad, cell - 10, rowh - 50 - 2 * pad);
                fprintf(f, "<text x='%.0f' y='%.0f' font-size='13' font-weight='bold'>rank %d</text>\n", cx + 6,
                        y + pad + 18, q);
                fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>TP %s</text>\n", cx + 6, y + pad + 36,
                        tp_c, core_fmt_bytes(fq[F_TP], b, sizeof b));
                fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>DP %s</text>\n", cx + 6, y + pad + 52,
                        dp_c, core_fmt_bytes(fq[F_DP], b, sizeof b));
                if (d + 1 < n.dp)   // the DP group's link to the next replica
                    fprintf(f, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='2' "
                               "stroke-dasharray='4 3'/>\n", cx + 30, y + rowh - 50 - pad, cx + 30, y + rowh + pad,
                            dp_c);
            }
            if (s + 1 < n.pp) {   // the PP link to the next stage
                const int q = (d * n.pp + s) * n.tp;
                const double ay = y + (rowh - 50) / 2;
                fprintf(f, "<line x1='%.0f' y1='%.0f' x2='%.0f' y2='%.0f' stroke='%s' stroke-width='3'/>\n",
                        x + boxw, ay, x + boxw + gap - 6, ay, pp_c);
                fprintf(f, "<polygon points='%.0f,%.0f %.0f,%.0f %.0f,%.0f' fill='%s'/>\n", x + boxw + gap, ay,
                        x + boxw + gap - 8, ay - 5, x + boxw + gap - 8, ay + 5, pp_c);
                // The link's bytes: stage s's PP bytes, less (past stage 0)
                // its link back, which moves as many.
                const double link = all[(size_t)q * F_COUNT + F_PP] / (s > 0 ? 2 : 1);
                fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>PP %s</text>\n", x + boxw + 4, ay - 8,
                        pp_c, core_fmt_bytes(link, b, sizeof b));
            }
        }
    static const char *const legend[] = {"a blue box: a TP group; TP: its gathers and scatters around every layer, "
                                         "each micro-batch", "red: the PP link to the next stage, each TP rank to "
                                         "its own; the residual stream, each micro-batch",
                                         "green, dashed: the DP group's link between replicas; the gradients, once a "
                                         "step"};
    const char *const colour[] = {tp_c, pp_c, dp_c};
    for (int i = 0; i < 3; i++)
        fprintf(f, "<text x='%.0f' y='%.0f' font-size='11' fill='%s'>%s</text>\n", left, (double)H - 50 + 15 * i,
                colour[i], legend[i]);
    fig_close(f, path);
}

void grid_report(Comm *c, const GridReport *r) {
    const int N = comm_size(c);
    double mine[F_COUNT], *all = malloc((size_t)N * F_COUNT * sizeof *all);
    CHECK(all, "out of memory");
    facts(r, mine);
    comm_all_gather_host(c, mine, sizeof mine, all);
    if (comm_rank(c) == 0 && r->links->fits) {
        printf("bytes a step on each group (a figure alone: the formula's exactly; measured / formula where they "
               "differ; grid_budget.h):\n");
        printf("  rank  stage  TP (gathers, scatters, all-reduces)  PP (sends and receives)  DP (%s)\n",
               r->st->zero ? "reduce-scatter + all-gather" : "all-reduce");
        for (int q = 0; q < N; q++) {
            const double *f = all + (size_t)q * F_COUNT;
            GridFormula o = formula_at(r, f);
            char t[80], p[80], d[80];
            printf("  %4d  %5.0f  %-35s  %-23s  %s%s\n", q, f[F_STAGE], pair(f[F_TP], o.bytes.tp, t, sizeof t),
                   pair(f[F_PP], o.bytes.pp, p, sizeof p), pair(f[F_DP], o.bytes.dp, d, sizeof d),
                   f[F_OTHER] > 0 ? "  (and bytes on no group of the grid's)" : "");
        }
        printf("activations a rank allocates (measured / formula where they differ; grid_acts):\n");
        printf("  rank  the scratch          a micro-batch's set  parameters (floats)\n");
        for (int q = 0; q < N; q++) {
            const double *f = all + (size_t)q * F_COUNT;
            GridActs ga = grid_acts(r->g->n.tp, r->pp->micro_rows, r->pp->T, r->pp->C, r->run->m->cfg.NH,
                                    r->run->m->cfg.V, (int)f[F_BLOCKS], f[F_EMBED] != 0, f[F_HEAD] != 0,
                                    r->run->sp->recompute);
            double psi = grid_stage_params(r->g->n.tp, r->pp->T, r->pp->C, r->run->m->cfg.V, (int)f[F_BLOCKS],
                                           f[F_EMBED] != 0, f[F_HEAD] != 0);
            char a[80], b[80], n[64];
            if (f[F_N] == psi) snprintf(n, sizeof n, "%.0f", psi);
            else snprintf(n, sizeof n, "%.0f / %.0f", f[F_N], psi);
            printf("  %4d  %-20s %-20s %s\n", q, pair(f[F_SCRATCH], ga.scratch, a, sizeof a),
                   pair(f[F_SET], ga.set, b, sizeof b), n);
        }
        printf("memory per rank, peak (measured / formula: zero_budget over the DP group, pp_budget's activations "
               "at most):\n");
        printf("  rank  PARAMS               GRADS                OPTIM                ACTS\n");
        for (int q = 0; q < N; q++) {
            const double *f = all + (size_t)q * F_COUNT;
            GridFormula o = formula_at(r, f);
            char a[80], b[80], d[80], e[80];
            printf("  %4d  %-20s %-20s %-20s %s\n", q, pair(f[F_PARAMS], o.state.params, a, sizeof a),
                   pair(f[F_GRADS], o.state.grads, b, sizeof b), pair(f[F_OPTIM], o.state.optim, d, sizeof d),
                   pair(f[F_ACTS], o.acts.acts, e, sizeof e));
        }
    }
    if (comm_rank(c) == 0 && r->figure && r->links->fits) grid_figure(r->figure, r, all);
    if (comm_rank(c) == 0 && r->choice && r->choice->on) {
        double most = 0;
        int at = 0;
        for (int q = 0; q < N; q++) {
            const double *f = all + (size_t)q * F_COUNT;
            double total = f[F_PARAMS] + f[F_GRADS] + f[F_OPTIM] + f[F_ACTS];
            if (total > most) most = total, at = q;
        }
        printf("the choice, measured: rank %d held the most, %.2f MB (PARAMS + GRADS + OPTIM + ACTS), %s the "
               "budget's %.2f MB; the lab's formulas said %.2f MB, the planner's count %.2f MB (a layer's kept "
               "tensors, without the scratch and the head's buffers: x%.2f of the measured)\n", at, most / 1e6,
               most <= r->choice->budget ? "within" : "OVER", r->choice->budget / 1e6, r->choice->planned / 1e6,
               r->choice->planner / 1e6, r->choice->planner / most);
    }
    free(all);
}

// The first of the stage's replicated tensors whose parameters differ
// between the ranks of the TP group ("" when none): their gradients, each
// rank's from its own tokens, were not summed over the group. Collective
// over the world (each TP group compares its own; rank 0 hears of any).
static void replicated_differs(Comm *c, const GridReport *r, char *name, size_t len) {
    const GridStep *st = r->st;
    const int t = comm_size(r->g->tp_group);
    double *mine = malloc((size_t)(st->nrep + 1) * sizeof *mine), *all = malloc((size_t)t * (st->nrep + 1) * sizeof *all);
    CHECK(mine && all, "out of memory");
    for (int i = 0; i < st->nrep; i++) {
        const float *w = st->params + (st->rep[i].grad - st->grads);
        mine[i] = ops_sumsq(w, st->rep[i].n);
    }
    comm_all_gather_host(r->g->tp_group, mine, (size_t)st->nrep * sizeof *mine, all);
    int first = -1;
    for (int i = 0; i < st->nrep && first < 0; i++)
        for (int q = 1; q < t; q++)
            if (all[(size_t)q * st->nrep + i] != all[i]) first = i;
    char here[96] = "";
    if (first >= 0) snprintf(here, sizeof here, "%s of stage %d", st->rep[first].name, r->pp->s);
    // Rank 0 names the first rank's finding.
    const int N = comm_size(c);
    char *names = malloc((size_t)N * sizeof here);
    CHECK(names, "out of memory");
    comm_all_gather_host(c, here, sizeof here, names);
    name[0] = 0;
    for (int q = 0; q < N && !name[0]; q++) snprintf(name, len, "%s", names + (size_t)q * sizeof here);
    free(names), free(mine), free(all);
}

void grid_report_dump(DumpWriter *dw, Comm *c, const GridReport *r) {
    char differs[96];
    replicated_differs(c, r, differs, sizeof differs);
    dump_text(dw, "lab07/replicated_differs_name", differs[0] ? differs : "-");
    const int N = comm_size(c);
    double mine[F_COUNT], *all = malloc((size_t)N * F_COUNT * sizeof *all);
    CHECK(all, "out of memory");
    facts(r, mine);
    comm_all_gather_host(c, mine, sizeof mine, all);
    uint64_t shape[2] = {(uint64_t)N, F_COUNT};
    dump_f64(dw, "lab07/rank", all, 2, shape);
    dump_scalar_f64(dw, "lab07/early_sync", comm_max_double(c, r->run->early_sync));
    dump_scalar_f64(dw, "lab07/early_bytes", comm_max_double(c, r->run->early_bytes));
    if (r->choice) grid_choice_dump(dw, r->choice);
    dump_scalar_f64(dw, "lab07/t", r->g->n.tp);
    dump_scalar_f64(dw, "lab07/p", r->g->n.pp);
    dump_scalar_f64(dw, "lab07/dp", r->g->n.dp);
    dump_scalar_f64(dw, "lab07/zero", r->st->zero);
    dump_scalar_f64(dw, "lab07/micro_rows", r->pp->micro_rows);
    free(all);
}

void grid_choice_dump(DumpWriter *dw, const GridChoiceReport *choice) {
    if (!choice->on) return;
    dump_scalar_f64(dw, "lab07/choice/ok", choice->ok);
    dump_scalar_f64(dw, "lab07/choice/budget", choice->budget);
    dump_scalar_f64(dw, "lab07/choice/planned", choice->planned);
    dump_scalar_f64(dw, "lab07/choice/gpus", choice->gpus);
    dump_scalar_f64(dw, "lab07/choice/t", choice->t);
    dump_scalar_f64(dw, "lab07/choice/p", choice->p);
    dump_scalar_f64(dw, "lab07/choice/m", choice->m);
    dump_scalar_f64(dw, "lab07/choice/best_t", choice->best_t);
    dump_scalar_f64(dw, "lab07/choice/best_p", choice->best_p);
    dump_scalar_f64(dw, "lab07/choice/best_m", choice->best_m);
}
