// ppfigure.c: lab05's schedules on one time axis, from their dumps.
//
//   ppfigure -o OUT.svg A.dump B.dump ...
//
// Each dump is a run of lab05 (--dump FILE): its last step's passes, stage
// by stage (pp/events/kind, mb, chunk). They are replayed with equal stages
// (pp_replay: F 1, B 2; split, B 1 and W 1; a chunk's pass 1/v of these)
// and drawn one above another, each run's panel and its micro-batches alive,
// on one time axis: the longest step sets the scale, so that the bubbles
// compare at a glance, and the most micro-batches alive of any run sets the
// strips' height, so that their memory does.
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dump.h"
#include "pp_schedule.h"
#include "schedule_given.h"

static const char USAGE[] =
    "usage: ppfigure -o OUT.svg A.dump B.dump ...\n"
    "\n"
    "Draws the schedules of lab05's runs (each written with --dump FILE), one\n"
    "above another on one time axis, replayed with equal stages (F 1, B 2;\n"
    "split, B 1 and W 1; a chunk's pass 1/v of these): a panel per run, a box\n"
    "per pass, and the micro-batches alive on each stage beneath it; each\n"
    "titled with its schedule, p, m, v, its bubble beside its formula, and the\n"
    "most micro-batches alive.\n"
    "\n"
    "  make lab05-schedules   the five schedules at p = 4, m = 8, into\n"
    "                         docs/figures/lab05-schedules.svg\n"
    "\n"
    "exit codes: 0 drawn; 2 bad command line, or a file that is not a run of\n"
    "lab05 with its schedule's events\n";

typedef struct {
    const char *path;
    int p, m, v, gpipe, zb, interleaved, recompute;
    int *n;             // (p) passes a stage
    PpEvent *events;    // (p, width) the passes, stage by stage
    PpEvent **rows;     // (p) a stage's first pass
    double span, bubble, bubble_fb, formula;
    int most;           // micro-batches alive at most on a stage (interleaved: their chunks)
    double memory;      // what they hold, in micro-batches' activations of a whole stage
} Run;

static const DumpArray *need(const DumpFile *f, const char *path, const char *name, int ndim) {
    const DumpArray *a = dump_find(f, name);
    if (!a || a->type != DUMP_I64 || a->ndim != ndim)
        core_usage_error("%s is a dump of lab05 without %s (an i64 array of %d dimension%s): it was written by "
                         "another version of lab05; run it again with --dump", path, name, ndim, ndim == 1 ? "" : "s");
    return a;
}

static int scalar(const DumpFile *f, const char *path, const char *name) {
    return (int)dump_get(need(f, path, name, 0), 0);
}

// A run of lab05 with its schedule's events, or a usage error that says
// what the file is instead.
static void load(Run *r, const char *path) {
    const char *err;
    DumpFile *f = dump_read(path, &err);
    if (!f) core_usage_error("cannot read %s: %s", path, err);
    const DumpArray *prog = dump_find(f, "meta/program");
    if (!prog || prog->type != DUMP_TEXT || strcmp(prog->data, "lab05") != 0)
        core_usage_error("%s is not a dump of lab05 (its program: %s): ppfigure draws lab05's schedules, from "
                         "`build/lab05_solution --dump FILE` (or build/lab05)", path,
                         prog && prog->type == DUMP_TEXT ? (const char *)prog->data : "not named");
    r->path = path;
    r->p = scalar(f, path, "pp/p"), r->m = scalar(f, path, "pp/m"), r->v = scalar(f, path, "pp/v");
    r->gpipe = scalar(f, path, "pp/gpipe"), r->zb = scalar(f, path, "pp/zero_bubble");
    r->interleaved = scalar(f, path, "pp/interleaved"), r->recompute = scalar(f, path, "pp/recompute");
    const DumpArray *kind = need(f, path, "pp/events/kind", 2), *mb = need(f, path, "pp/events/mb", 2),
                    *chunk = need(f, path, "pp/events/chunk", 2);
    int p = r->p, width = (int)kind->shape[1];
    if (p < 1 || p > 1024 || r->m < 1 || r->v < 1 || (int)kind->shape[0] != p ||
        memcmp(kind->shape, mb->shape, sizeof kind->shape) != 0 ||
        memcmp(kind->shape, chunk->shape, sizeof kind->shape) != 0)
        core_usage_error("%s: its events (pp/events/kind, mb, chunk) are not (p, E) for its p = %d stages", path, p);
    r->n = calloc((size_t)p, sizeof *r->n);
    r->rows = calloc((size_t)p, sizeof *r->rows);
    r->events = calloc((size_t)p * (width > 0 ? width : 1), sizeof *r->events);
    CHECK(r->n && r->rows && r->events, "out of memory");
    int total = 0;
    for (int s = 0; s < p; s++) {
        r->rows[s] = r->events + (size_t)s * width;
        for (int k = 0; k < width; k++) {
            size_t at = (size_t)s * width + k;
            int kd = (int)dump_get(kind, at);
            if (kd < 0) break;   // past the stage's last pass
            if (kd >= PP_PASS_KINDS)
                core_usage_error("%s: stage %d's pass %d is of kind %d, none of F, B, R, W (0 to 3)", path, s, k, kd);
            r->rows[s][k] = (PpEvent){.kind = kd, .mb = (int)dump_get(mb, at), .chunk = (int)dump_get(chunk, at)};
            r->n[s]++;
        }
        total += r->n[s];
    }
    if (total == 0)
        core_usage_error("%s holds no passes (pp/events/kind lists none on any stage): no schedule to draw", path);
    dump_free(f);
    r->bubble = pp_replay(p, r->rows, r->n, true, &r->span);
    if (r->bubble < 0)
        core_usage_error("%s: its passes cannot be replayed (a stage waits for a pass no stage ran)", path);
    // The bubble of F and B alone, recomputes aside, as the formula counts
    // it (the drawn replay keeps them: what the run did).
    r->bubble_fb = r->bubble;
    if (r->recompute) {
        PpEvent *order = malloc((size_t)p * width * sizeof *order), **rows = malloc((size_t)p * sizeof *rows);
        int *n = malloc((size_t)p * sizeof *n);
        CHECK(order && rows && n, "out of memory");
        memcpy(order, r->events, (size_t)p * width * sizeof *order);
        for (int s = 0; s < p; s++)
            rows[s] = order + (size_t)s * width, n[s] = pp_events_without(rows[s], r->n[s], PP_PASS_R);
        double span;
        r->bubble_fb = pp_replay(p, rows, n, true, &span);
        free(order), free(rows), free(n);
    }
    r->formula = r->interleaved ? pp_bubble_formula_interleaved(p, r->v, r->m)
                 : r->zb ? pp_zb_bubble_formula(p, r->m) : pp_bubble_formula(p, r->m);
    r->most = pp_alive_most(p, r->rows, r->n);
    // Interleaved, what is alive is a micro-batch's chunk: 1/v of a
    // stage's activations.
    r->memory = (double)r->most / (r->interleaved ? r->v : 1);
}

// The schedule's name, as the papers write it (lab05's own words).
static const char *schedule_name(const Run *r) {
    return r->interleaved ? "interleaved 1F1B" : r->gpipe ? "GPipe" : r->zb == 1 ? "ZB-H1" : r->zb == 2 ? "ZB-H2"
                                                                                                    : "1F1B";
}

static const char *formula_text(const Run *r) {
    return r->interleaved ? "(p - 1)/(v m + p - 1)" : r->zb ? "(p - 1)/(3m + p - 1)" : "(p - 1)/(m + p - 1)";
}

// The time axis beneath the runs: a tick every `step` units (F = 1).
static void axis(FILE *f, double span, double y) {
    const double x0 = 70, w = 860;
    double step = span <= 20 ? 1 : span <= 50 ? 5 : span <= 200 ? 10 : span <= 1000 ? 50 : 100;
    fprintf(f, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"black\"/>\n", x0, y, x0 + w, y);
    for (double t = 0; t <= span + 1e-9; t += step) {
        double x = x0 + w * t / span;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%g\" x2=\"%.1f\" y2=\"%g\" stroke=\"black\"/>\n", x, y, x, y + 5);
        fprintf(f, "<text x=\"%.1f\" y=\"%g\" text-anchor=\"middle\">%g</text>\n", x, y + 18, t);
    }
    fprintf(f, "<text x=\"%g\" y=\"%g\">time in forward passes of a stage (F 1, B 2; split, B 1 and W 1; "
               "a chunk's pass 1/v of these)</text>\n", x0, y + 36);
}

int main(int argc, char **argv) {
    core_set_program("ppfigure");
    const char *out = NULL;
    const char **paths = malloc((size_t)argc * sizeof *paths);
    CHECK(paths, "out of memory");
    int nruns = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            printf("%s", USAGE);
            return 0;
        } else if (strcmp(argv[i], "-o") == 0) {
            if (i + 1 >= argc) core_usage_error("-o needs a file: ppfigure -o OUT.svg A.dump B.dump ...");
            out = argv[++i];
        } else if (argv[i][0] == '-') {
            core_usage_error("%s is not a flag of ppfigure (see ppfigure --help)", argv[i]);
        } else {
            paths[nruns++] = argv[i];
        }
    }
    if (!out) core_usage_error("say where to draw: ppfigure -o OUT.svg A.dump B.dump ... (see ppfigure --help)");
    if (nruns == 0) core_usage_error("no dump to draw: ppfigure -o OUT.svg A.dump B.dump ... (see ppfigure --help)");

    Run *runs = calloc((size_t)nruns, sizeof *runs);
    CHECK(runs, "out of memory");
    double span = 0, most = 1;
    for (int i = 0; i < nruns; i++) {
        load(&runs[i], paths[i]);
        span = runs[i].span > span ? runs[i].span : span;
        most = runs[i].memory > most ? runs[i].memory : most;
    }
    if (span <= 0) span = 1;

    // A run: its title, its panel (p rows of 34), the alive strip's title
    // and its rows, then a gap.
    double H = 50;
    for (int i = 0; i < nruns; i++) H += 2 * runs[i].p * 34 + 30 + 50;
    FILE *f = fopen(out, "w");
    if (!f) core_usage_error("cannot create -o file %s: %s", out, strerror(errno));
    // 960 wide: room for a stage's peak of two digits after the axis's end.
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"960\" height=\"%g\" font-family=\"sans-serif\" "
               "font-size=\"12\">\n<text x=\"8\" y=\"20\" font-size=\"14\">%d schedule%s, replayed with equal "
               "stages, on one time axis; the micro-batches alive beneath each, on one scale</text>\n",
            H + 50, nruns, nruns == 1 ? "" : "s");
    double y = 60;
    for (int i = 0; i < nruns; i++) {
        const Run *r = &runs[i];
        char title[320], alive[240], rc[64] = "";
        if (r->recompute) snprintf(rc, sizeof rc, ", with its recomputes %.1f%%", 100 * r->bubble);
        snprintf(title, sizeof title, "%s, p = %d, m = %d, v = %d: bubble %.1f%% replayed%s, formula %s = %.1f%%",
                 schedule_name(r), r->p, r->m, r->v, 100 * r->bubble_fb, rc, formula_text(r), 100 * r->formula);
        if (r->interleaved)
            snprintf(alive, sizeof alive, "%s: micro-batches' chunks alive on each stage, the most %d (a chunk "
                     "1/v of a stage: %g micro-batches)", schedule_name(r), r->most, r->memory);
        else
            snprintf(alive, sizeof alive, "%s: micro-batches alive on each stage, the most %d", schedule_name(r),
                     r->most);
        pp_svg_panel(f, r->p, r->rows, r->n, r->span, span, y, title);
        y += r->p * 34 + 30;
        pp_svg_alive(f, r->p, r->rows, r->n, r->span, span, most * (r->interleaved ? r->v : 1), y, alive);
        y += r->p * 34 + 50;
    }
    axis(f, span, y - 40);
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0) core_usage_error("writing -o file %s failed", out);
    printf("wrote %s: %d schedule%s on one time axis\n", out, nruns, nruns == 1 ? "" : "s");
    for (int i = 0; i < nruns; i++) {
        free(runs[i].n), free(runs[i].rows), free(runs[i].events);
    }
    free(runs), free(paths);
    return 0;
}
