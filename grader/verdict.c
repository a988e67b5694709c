// verdict.c: recording checks, the measured rounding, the table, and the
// verdict a lab program gives on itself (verdict.h). Shared by build/grade
// and the lab programs, so both judge a run the same way.
#include "verdict.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "grade.h"
#include "harness.h"

// ---- recording -------------------------------------------------------------

void grade_check(Grader *g, const Run *run, const char *check, bool pass, const char *figure,
                 const char *bound, const char *diagnosis) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 64;
        g->results = realloc(g->results, (size_t)g->cap * sizeof *g->results);
        CHECK(g->results, "out of memory");
    }
    Result *r = &g->results[g->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->lab, sizeof r->lab, "%s", g->lab ? g->lab : "");
    snprintf(r->run, sizeof r->run, "%s", run ? run->name : "build");
    snprintf(r->check, sizeof r->check, "%s", check);
    r->pass = pass;
    r->hidden = run && run->hidden;
    snprintf(r->figure, sizeof r->figure, "%s", figure ? figure : "");
    snprintf(r->bound, sizeof r->bound, "%s", bound ? bound : "");
    if (!pass && diagnosis) snprintf(r->diagnosis, sizeof r->diagnosis, "%s", diagnosis);
    r->ratio = NAN;
}

void grade_set_ratio(Grader *g, double ratio) {
    if (g->n > 0) g->results[g->n - 1].ratio = ratio;
}

int grader_failed(const Grader *g) {
    int failed = 0;
    for (int i = 0; i < g->n; i++) failed += !g->results[i].pass;
    return failed;
}

void grader_free(Grader *g) {
    free(g->results);
    memset(g, 0, sizeof *g);
}

// Columns as wide as their longest entry (up to a cap), so long run names
// and figures keep the table straight.
static int width(const Grader *g, size_t field, int lo, int hi) {
    int w = lo;
    for (int i = 0; i < g->n; i++) {
        int n = (int)strlen((const char *)&g->results[i] + field);
        if (n > w) w = n;
    }
    return w < hi ? w : hi;
}

void grader_print_table(const Grader *g) {
    int wl = width(g, offsetof(Result, lab), 3, 8), wr = width(g, offsetof(Result, run), 3, 40),
        wc = width(g, offsetof(Result, check), 5, 44), wf = width(g, offsetof(Result, figure), 6, 48);
    print0("\n%-*s  %-*s  %-*s  %-6s  %-*s  %s\n", wl, "lab", wr, "run", wc, "check", "result", wf, "figure",
           "bound");
    for (int i = 0; i < g->n; i++) {
        const Result *r = &g->results[i];
        print0("%-*s  %-*s  %-*s  %-6s  %-*s  %s%s\n", wl, r->lab, wr, r->run, wc, r->check,
               r->pass ? "ok" : "FAIL", wf, r->figure, r->bound, r->hidden ? "  (hidden)" : "");
    }
    int failed = grader_failed(g);
    if (failed) {
        print0("\nwhat went wrong, and what usually causes it:\n");
        for (int i = 0; i < g->n; i++) {
            const Result *r = &g->results[i];
            if (!r->pass && r->diagnosis[0]) print0("  %s %s, %s:\n    %s\n", r->lab, r->run, r->check, r->diagnosis);
        }
    }
    print0("\n%d of %d checks passed%s\n", g->n - failed, g->n, failed ? "" : ": all good");
}

// ---- the measured rounding ---------------------------------------------------

static double median(const double *v, int n) {
    if (n == 0) return 0;
    double *t = malloc((size_t)n * sizeof *t);
    CHECK(t, "out of memory");
    memcpy(t, v, (size_t)n * sizeof *t);
    for (int i = 1; i < n; i++)   // insertion sort: n is a few dozen
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    double m = t[n / 2];
    free(t);
    return m;
}

void measure_rounding(DumpFile *const *runs, int nruns, Measured *m) {
    memset(m, 0, sizeof *m);
    const DumpArray *l0 = dump_find(runs[0], "loss");
    for (uint64_t s = 0; l0 && s < l0->count; s++) m->loss_ulp = fmax(m->loss_ulp, fabs(dump_get(l0, s)) * FLT_EPSILON);
    measured_alloc(m, runs[0]->count);
    for (int i = 0; i < runs[0]->count; i++) {
        const char *name = runs[0]->arrays[i].name;
        if (strncmp(name, "param/final/", 12) != 0) continue;
        snprintf(m->names[m->ntensors++], sizeof m->names[0], "%s", name + 12);
    }
    m->nsamples = nruns - 1;
    for (int k = 1; k < nruns; k++) {
        const DumpArray *lk = dump_find(runs[k], "loss");
        for (uint64_t s = 0; l0 && lk && s < l0->count && s < lk->count; s++)
            m->loss = fmax(m->loss, fabs(dump_get(l0, s) - dump_get(lk, s)));
        for (int t = 0; t < m->ntensors; t++) {
            char name[160];
            TensorError e;
            snprintf(name, sizeof name, "param/final/%s", m->names[t]);
            if (tensor_error(runs[k], runs[0], name, &e)) m->param_bulk[t] = fmax(m->param_bulk[t], e.bulk);
            snprintf(name, sizeof name, "grad/first/%s", m->names[t]);
            if (tensor_error(runs[k], runs[0], name, &e)) m->grad_rel[t] = fmax(m->grad_rel[t], e.rel);
            snprintf(name, sizeof name, "optim/m/%s", m->names[t]);
            if (tensor_error(runs[k], runs[0], name, &e)) m->m_bulk[t] = fmax(m->m_bulk[t], e.bulk);
            snprintf(name, sizeof name, "optim/v/%s", m->names[t]);
            if (tensor_error(runs[k], runs[0], name, &e)) m->v_bulk[t] = fmax(m->v_bulk[t], e.bulk);
        }
    }
    measured_medians(m);
    m->adam_reach = adam_reach(runs[0]);
}

void measured_alloc(Measured *m, int ntensors) {
    size_t n = (size_t)ntensors + 1;
    m->names = calloc(n, sizeof *m->names);
    m->grad_rel = calloc(n, sizeof(double));
    m->param_bulk = calloc(n, sizeof(double));
    m->m_bulk = calloc(n, sizeof(double));
    m->v_bulk = calloc(n, sizeof(double));
    CHECK(m->names && m->grad_rel && m->param_bulk && m->m_bulk && m->v_bulk, "out of memory");
}

void measured_medians(Measured *m) {
    m->param_bulk_median = median(m->param_bulk, m->ntensors);
    m->grad_rel_median = median(m->grad_rel, m->ntensors);
    m->m_bulk_median = median(m->m_bulk, m->ntensors);
    m->v_bulk_median = median(m->v_bulk, m->ntensors);
}

void measured_free(Measured *m) {
    free(m->names);
    free(m->grad_rel);
    free(m->param_bulk);
    free(m->m_bulk);
    free(m->v_bulk);
    memset(m, 0, sizeof *m);
}

const LabSpec *lab_spec(const char *id) {
    for (int i = 0; i < NLABS; i++)
        if (strcmp(LABS[i]->id, id) == 0) return LABS[i];
    return NULL;
}

// ---- a lab program's verdict on itself ---------------------------------------

int verdict_of_run(const char *lab_id, const char *dump_path, const char *const *ref_paths, int nref,
                   int np, const char *flags) {
    const LabSpec *lab = lab_spec(lab_id);
    CHECK(lab, "verdict_of_run: no lab %s", lab_id);
    RunSpec spec = {"this run", np, flags ? flags : "", false, false};
    Run run;
    memset(&run, 0, sizeof run);
    run.spec = &spec;
    snprintf(run.name, sizeof run.name, "this run");
    run.output = "";
    run.dump = dump_read(dump_path, &run.dump_error);
    CHECK(run.dump, "cannot read this run's own dump %s back: %s", dump_path, run.dump_error);
    DumpFile *refs[8] = {0};
    Measured measured;
    memset(&measured, 0, sizeof measured);
    CHECK(nref <= 8, "verdict_of_run: at most 8 reference runs");
    for (int k = 0; k < nref; k++) {
        const char *err = NULL;
        refs[k] = dump_read(ref_paths[k], &err);
        CHECK(refs[k], "cannot read the reference's dump %s back: %s", ref_paths[k], err);
    }
    if (nref > 0) {
        measure_rounding(refs, nref, &measured);
        run.ref = refs[0];
        run.measured = &measured;
    }
    Grader g = {0};
    g.lab = lab->id;
    lab->check(&g, lab, &run);
    int failed = grader_failed(&g);
    printf("\nverdict: the grader's checks of this run (build/grade runs the same on its runs)\n");
    for (int i = 0; i < g.n; i++) {
        const Result *r = &g.results[i];
        printf("  %-4s  %-46s %s   (bound: %s)\n", r->pass ? "ok" : "FAIL", r->check, r->figure, r->bound);
    }
    for (int i = 0; i < g.n; i++) {
        const Result *r = &g.results[i];
        if (!r->pass && r->diagnosis[0]) printf("  %s:\n    %s\n", r->check, r->diagnosis);
    }
    if (nref == 0 && lab->ref_flags)
        printf("  (without the reference run, --no-ref: the training is not compared with single-device training)\n");
    printf("%d of %d checks passed: %s\n", g.n - failed, g.n, failed ? "the grader would FAIL this run" : "the grader would pass this run");
    fflush(stdout);
    grader_free(&g);
    if (nref > 0) measured_free(&measured);
    for (int k = 0; k < nref; k++) dump_free(refs[k]);
    dump_free(run.dump);
    return failed;
}

int verdict_of_lab_run(Comm *c, const char *lab_id, const Reference *r) {
    int failed = 0;
    if (comm_rank(c) == 0) {
        const char *refs[HARNESS_MAX_REFS];
        for (int k = 0; k < r->npaths; k++) refs[k] = r->paths[k];
        failed = verdict_of_run(lab_id, r->own_dump, refs, r->on ? r->npaths : 0, comm_size(c),
                                args_command_line());
    }
    return (int)comm_max_double(c, (double)failed);
}
