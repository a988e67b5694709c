// results.c: the checks recorded so far, and their table (results.h).
#include "results.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "lab.h"

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
