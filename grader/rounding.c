// rounding.c: the size of "the same training up to rounding" and the
// tolerances made of it (rounding.h).
#include "rounding.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "reading.h"

// ---- a tensor against the reference's --------------------------------------

// Reorder v[0, n) so that v[k] is the value a sort would put there, the
// values before it no larger and those after it no smaller (quickselect:
// linear time on average, where sorting a million squared differences of
// one tensor took a lab's verdict seconds). v holds no NaN.
static void select_kth(double *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        // The median of three as the pivot: sorted or constant data stay linear.
        int64_t mid = lo + (hi - lo) / 2;
        double a = v[lo], b = v[mid], c = v[hi];
        double pivot = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot) i++;
            while (v[j] > pivot) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        // Now v[lo, j] <= pivot <= v[i, hi], and what lies between is the pivot.
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else return;
    }
}

bool tensor_error(const DumpFile *lab, const DumpFile *ref, const char *name, TensorError *e) {
    e->rel = e->bulk = e->abs_ = INFINITY;
    const DumpArray *a = dump_find(lab, name), *b = dump_find(ref, name);
    if (!a || !b) return false;
    DumpDiff d = dump_diff(a, b);
    if (!d.shape_ok) return false;
    // The unit: the arrays whose names share "<section>/<unit>." (section
    // being e.g. "param/final", the unit the part up to the next dot).
    const char *slash = strrchr(name, '/');
    const char *dot = slash ? strchr(slash, '.') : NULL;
    size_t plen = dot ? (size_t)(dot - name) + 1 : strlen(name);
    double unit_sq = 0, unit_n = 0;
    for (int i = 0; i < ref->count; i++)
        if (strncmp(ref->arrays[i].name, name, plen) == 0 && ref->arrays[i].type != DUMP_TEXT)
            unit_sq += dump_sumsq(&ref->arrays[i]), unit_n += (double)ref->arrays[i].count;
    double own = sqrt(dump_sumsq(b));
    double share = unit_n > 0 ? sqrt(unit_sq * (double)b->count / unit_n) : 0;
    double scale = fmax(own, share);
    scale = scale > 0 ? scale : 1.0;
    // The squared differences, the largest apart, so that the bulk can
    // leave them out. A NaN in either counts as infinitely wrong.
    double *sq = malloc((a->count ? a->count : 1) * sizeof *sq);
    CHECK(sq, "out of memory");
    bool f32 = a->type == DUMP_F32 && b->type == DUMP_F32;
    const float *fa = a->data, *fb = b->data;
    for (uint64_t i = 0; i < a->count; i++) {
        double x = f32 ? fa[i] : dump_get(a, i), y = f32 ? fb[i] : dump_get(b, i);
        double diff = x == y || (isnan(x) && isnan(y)) ? 0 : fabs(x - y);
        sq[i] = isnan(diff) ? INFINITY : diff * diff;
    }
    uint64_t keep = a->count - (a->count + 999) / 1000;   // all but the largest ceil(n / 1000)
    if (keep < a->count) select_kth(sq, (int64_t)a->count, (int64_t)keep);
    double all = 0, bulk = 0;
    for (uint64_t i = 0; i < a->count; i++) {
        all += sq[i];
        if (i < keep) bulk += sq[i];
    }
    free(sq);
    e->rel = sqrt(all) / scale;
    e->bulk = sqrt(bulk) / scale;
    e->abs_ = d.max_abs;
    return true;
}

double adam_reach(const DumpFile *ref) {
    const DumpArray *config = dump_find(ref, "meta/config");
    if (!config || config->type != DUMP_TEXT || !strstr((const char *)config->data, "\noptimizer adamw\n"))
        return INFINITY;
    double lr = config_value(ref, "lr", NAN), b1 = config_value(ref, "beta1", NAN),
           b2 = config_value(ref, "beta2", NAN);
    const DumpArray *loss = dump_find(ref, "loss");   // a loss a step
    double steps = loss ? (double)loss->count : NAN;
    if (!(lr > 0 && b1 >= 0 && b1 < 1 && b2 > 0 && b2 < 1 && steps >= 1)) return INFINITY;
    // One step's update is lr m_hat / (sqrt(v_hat) + eps), and by
    // Cauchy-Schwarz over the gradients of steps 1..t,
    //   |m_hat / sqrt(v_hat)| <= sqrt(1 - b2^t) / (1 - b1^t) (1 - b1) / sqrt(1 - b2)
    //                            sqrt(sum_{j<t} (b1^2 / b2)^j),
    // 1 at t = 1 (the step is the gradient's sign), 1.17 at most for the
    // betas here. Two runs' updates differ by at most twice that; the
    // decoupled weight decay multiplies both by the same 1 - lr wd, which
    // only shrinks a difference.
    double reach = 0, series = 0, r = b1 * b1 / b2;
    for (int t = 1; t <= (int)steps; t++) {
        series += pow(r, t - 1);
        double u = sqrt(1 - pow(b2, t)) / (1 - pow(b1, t)) * (1 - b1) / sqrt(1 - b2) * sqrt(series);
        reach += 2 * lr * u;
    }
    return reach * 1.01;   // and the float rounding of the updates themselves
}

// ---- the rounding measured on the yardstick's runs -------------------------

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
            if (tensor_error(runs[k], runs[0], name, &e)) {
                m->grad_rel[t] = fmax(m->grad_rel[t], e.rel);
                m->grad_abs[t] = fmax(m->grad_abs[t], e.abs_);
            }
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
    m->grad_abs = calloc(n, sizeof(double));
    m->param_bulk = calloc(n, sizeof(double));
    m->m_bulk = calloc(n, sizeof(double));
    m->v_bulk = calloc(n, sizeof(double));
    CHECK(m->names && m->grad_rel && m->grad_abs && m->param_bulk && m->m_bulk && m->v_bulk, "out of memory");
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
    free(m->grad_abs);
    free(m->param_bulk);
    free(m->m_bulk);
    free(m->v_bulk);
    memset(m, 0, sizeof *m);
}

// ---- the tolerance of AdamW's moments --------------------------------------

static double moment_bound(const Measured *m, int t, int which) {
    return TOL_FACTOR * fmax(REL_FLOOR, fmax(which ? m->v_bulk[t] : m->m_bulk[t], which ? m->v_bulk_median : m->m_bulk_median));
}

bool moment_within_tol(const Run *run, int t, int which, double *ratio) {
    const Measured *m = run->measured;
    char name[160];
    snprintf(name, sizeof name, "optim/%s/%s", which ? "v" : "m", m->names[t]);
    TensorError e;
    tensor_error(run->dump, run->ref, name, &e);
    *ratio = e.bulk / moment_bound(m, t, which);
    return *ratio <= 1;
}
