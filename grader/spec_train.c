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
