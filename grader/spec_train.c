// spec_train.c: memory checks the training labs' specs share (spec_train.h).
#include "spec_train.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core.h"
#include "mem.h"

double largest_unit_floats(const DumpFile *f) {
    double largest = 0, size = 0;
    char unit[96] = "";
    for (int i = 0; f && i <= f->count; i++) {
        const char *name = i < f->count ? f->arrays[i].name : "";
        bool param = strncmp(name, "param/final/", 12) == 0;
        size_t len = param ? strcspn(name + 12, ".") : 0;
        // Tensors of one unit lie next to each other in the dump.
        if (!param || strncmp(unit, name + 12, len) != 0 || unit[len] != 0) {
            largest = fmax(largest, size);
            size = 0;
            snprintf(unit, sizeof unit, "%.*s", (int)len, param ? name + 12 : "");
        }
        if (param) size += (double)f->arrays[i].count;
    }
    return largest;
}

// Bytes as the tables print them, or exact when that would print the two
// figures alike ("3.47 MB, above 3.47 MB" says nothing).
static void two_figures(double a, double b, char *fa, char *fb, size_t len) {
    core_fmt_bytes(a, fa, len);
    core_fmt_bytes(b, fb, len);
    if (strcmp(fa, fb) == 0 && a != b) {
        snprintf(fa, len, "%.0f B", a);
        snprintf(fb, len, "%.0f B", b);
    }
}

static double peak_of(const DumpFile *d, int source, uint64_t r) {
    const DumpArray *peak = dump_find(d, "mem/peak");
    const DumpArray *a = dump_find(d, source == PEAK_TOTAL ? "mem/peak_total" : "mem/measured_peak");
    if (source >= 0) return peak && r < peak->shape[0] ? dump_get(peak, r * peak->shape[1] + (uint64_t)source) : INFINITY;
    return a && r < a->count ? dump_get(a, r) : INFINITY;
}

void check_peak(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                const char *diagnosis) {
    const DumpArray *peak = dump_find(run->dump, "mem/peak");
    char check[96], fig[160], bnd[256], b1[32], b2[32], diag[1024];
    snprintf(check, sizeof check, "memory %s per rank", what);
    if (!peak || peak->ndim != 2) {
        grade_check(g, run, check, false, "no mem/peak in the dump", why, "the harness did not write memory");
        return;
    }
    double worst = -1;
    uint64_t at = 0;
    for (uint64_t r = 0; r < peak->shape[0]; r++) {
        double v = peak_of(run->dump, source, r);
        if (!(v <= worst)) worst = v, at = r;
    }
    two_figures(worst, bound, b1, b2, sizeof b1);
    snprintf(fig, sizeof fig, "%s (rank %llu)", b1, (unsigned long long)at);
    snprintf(bnd, sizeof bnd, "<= %s: %s", b2, why);
    snprintf(diag, sizeof diag, "rank %llu's peak %s is %s, above %s: %s", (unsigned long long)at, what, b1, b2,
             diagnosis);
    grade_check(g, run, check, worst <= bound, fig, bnd, diag);
}

const char *excess_category(const Run *run, const double *expected, char *buf, size_t len) {
    double most = 0;
    int which = -1;
    for (uint64_t r = 0; r < 64; r++) {
        if (isinf(peak_of(run->dump, MEM_PARAMS, r))) break;
        for (int k = 0; k < MEM_NCAT; k++) {
            double over = peak_of(run->dump, k, r) - expected[k];
            if (over > most) most = over, which = k;
        }
    }
    char b[32];
    if (which < 0) snprintf(buf, len, "no category is above its share: the categories peaked at different times");
    else snprintf(buf, len, "%s more than the formula's share is tracked as %s", core_fmt_bytes(most, b, sizeof b),
                  mem_category_name((MemCategory)which));
    return buf;
}

// ---- the work the ops were asked for --------------------------------------------

static double sum_of(const DumpFile *d, const char *name, int *n, double *most) {
    const DumpArray *a = dump_find(d, name);
    double s = 0;
    *most = 0;
    *n = a ? (int)a->count : 0;
    for (uint64_t r = 0; a && r < a->count; r++) s += dump_get(a, r), *most = fmax(*most, dump_get(a, r));
    return a ? s : NAN;
}

static void check_one_work(Grader *g, const Run *run, const char *name, const char *what, double times,
                           bool balanced, const char *more) {
    int n, nref;
    double most, ref_most;
    double mine = sum_of(run->dump, name, &n, &most), ref = run->ref ? sum_of(run->ref, name, &nref, &ref_most) : NAN;
    char check[96], fig[160], bound[160], diag[1024];
    snprintf(check, sizeof check, "%s, all ranks together", what);
    if (!(ref > 0) || isnan(mine)) {
        grade_check(g, run, check, false, isnan(mine) ? "not in the dump" : "not in the reference's dump",
                    "single-device training's", "the harness or the reference did not write the ops' work (ops.h)");
        return;
    }
    double ratio = mine / (times * ref);
    snprintf(fig, sizeof fig, "x%.3f of single-device training's", mine / ref);
    snprintf(bound, sizeof bound, "x%.3f (%s) +- 0.5%%", times,
             times == 1 ? "the model's work, shared out" : "the ranks that repeat it");
    if (ratio > 1)
        snprintf(diag, sizeof diag, "the ranks together asked ops.h for %.2f times the %s this run's split needs "
                 "(single-device training's x %g): %s", ratio, what, times, more);
    else
        snprintf(diag, sizeof diag, "the ranks together asked ops.h for %.2f of the %s this run's split needs "
                 "(single-device training's x %g): the rest was computed outside ops.h (by a loop over a tensor's "
                 "memory, which a GPU's memory does not allow) or not at all", ratio, what, times);
    grade_check(g, run, check, fabs(ratio - 1) <= 0.005, fig, bound, diag);
    if (!balanced || n <= 1) return;
    double share = mine / n;
    snprintf(check, sizeof check, "%s, each rank its share", what);
    if (!(mine > 0)) {   // nothing to share: the check above says why
        snprintf(diag, sizeof diag, "no rank asked ops.h for any %s: there is no share to compare", what);
        grade_check(g, run, check, false, "none asked for", "x1.000 +- 0.5%", diag);
        return;
    }
    snprintf(fig, sizeof fig, "the most: x%.3f of an equal share", most / share);
    snprintf(diag, sizeof diag, "one rank asked ops.h for %.2f times an equal share (1/%d) of the run's %s: the "
             "ranks of this lab split the work alike, so one of them computed what belongs to another", most / share,
             n, what);
    grade_check(g, run, check, most <= share * 1.005, fig, "x1.000 +- 0.5%", diag);
}

void check_work(Grader *g, const Run *run, double matmul_times, double layernorm_times, bool balanced,
                const char *more_matmul, const char *more_layernorm) {
    check_one_work(g, run, "ops/matmul", "matrix products", matmul_times, balanced, more_matmul);
    check_one_work(g, run, "ops/layernorm", "LayerNorm rows", layernorm_times, balanced, more_layernorm);
}

// ---- the kernel's count -------------------------------------------------------------

void check_resident(Grader *g, const Run *run) {
    const DumpArray *res = dump_find(run->dump, "mem/resident_growth"), *heap = dump_find(run->dump, "mem/heap_growth");
    const char *check = "memory the kernel counts";
    char fig[160], bound[160], diag[1024], b1[32], b2[32], b3[32];
    if (!res || !heap || res->count != heap->count) {
        grade_check(g, run, check, false, "not in the dump", "the resident memory of every rank",
                    "the harness did not write the kernel's count of resident memory (mem.h)");
        return;
    }
    double worst = -INFINITY, worst_res = 0, worst_heap = 0;
    uint64_t at = 0;
    bool unknown = false;
    for (uint64_t r = 0; r < res->count; r++) {
        double grown = dump_get(res, r), h = dump_get(heap, r);
        if (grown < 0) unknown = true;
        if (grown - h > worst) worst = grown - h, worst_res = grown, worst_heap = h, at = r;
    }
    if (unknown) {
        grade_check(g, run, check, false, "unreadable", "the resident memory of every rank",
                    "a rank could not read or reset its resident high-water mark (/proc/self/status, "
                    "/proc/self/clear_refs)");
        return;
    }
    snprintf(fig, sizeof fig, "rank %llu: %s resident, the heap %s", (unsigned long long)at,
             core_fmt_bytes(worst_res, b1, sizeof b1), core_fmt_bytes(worst_heap, b2, sizeof b2));
    snprintf(bound, sizeof bound, "the heap's rise + %s (the libraries' own buffers)",
             core_fmt_bytes(RESIDENT_SLACK, b3, sizeof b3));
    snprintf(diag, sizeof diag, "rank %llu's resident memory rose %s during training, %s more than every allocation "
             "the heap saw (tracked or not): memory that no allocator call made, from mmap, a static array or the "
             "allocator called around its wrap, holds data the measures above do not see; a lab's memory comes "
             "from mem_alloc", (unsigned long long)at, b1, core_fmt_bytes(worst, b3, sizeof b3));
    grade_check(g, run, check, worst <= RESIDENT_SLACK, fig, bound, diag);
    grade_set_ratio(g, fmax(worst, 0) / RESIDENT_SLACK);
}
