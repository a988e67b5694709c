// spec_train.c: memory checks the training labs' specs share (spec_train.h).
#include "spec_train.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "reading.h"

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

// On a GPU the independent measure is the device's used memory: every
// process on the GPU counts in it (ranks that share it count each other's
// contexts and tensors), with the CUDA context, cudaMalloc's rounding and
// the libraries' lazy workspaces, none of which the formula knows. It is
// printed there, and not held to a bound (the tracked categories are).
static bool on_gpu(const DumpFile *d) {
    const DumpArray *c = dump_find(d, "meta/config");
    const char *dev = c && c->type == DUMP_TEXT ? strstr((const char *)c->data, "\ndevice ") : NULL;
    return dev && strncmp(dev + 8, "cuda", 4) == 0;
}

void check_peak_at_least(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                         const char *diagnosis) {
    const DumpArray *peak = dump_find(run->dump, "mem/peak");
    char check[96], fig[160], bnd[256], b1[32], b2[32];
    snprintf(check, sizeof check, "memory %s per rank holds what it must", what);
    double least = INFINITY;
    uint64_t at = 0;
    for (uint64_t r = 0; peak && r < peak->shape[0]; r++) {
        double v = peak_of(run->dump, source, r);
        if (v < least) least = v, at = r;
    }
    if (!peak) least = 0;
    two_figures(least, bound, b1, b2, sizeof b1);
    snprintf(fig, sizeof fig, "%s (rank %llu)", b1, (unsigned long long)at);
    snprintf(bnd, sizeof bnd, ">= %s: %s", b2, why);
    grade_check(g, run, check, least >= bound, fig, bnd, diagnosis);
}

// Within 16 fp32 units of the last place of a bf16 value (bf16's spacing
// is 2^16 of them).
static bool on_bf16_grid(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    uint32_t low = u & 0xffffu;
    return low <= 16 || 0x10000u - low <= 16;
}

void check_master_kept(Grader *g, const Run *run) {
    const DumpFile *d = run->dump;
    if (!config_is(d, "precision", "bf16")) return;
    const DumpArray *loss = dump_find(d, "loss");
    double S = loss ? (double)loss->count : 0, lr = config_value(d, "lr", NAN), b1 = config_value(d, "beta1", 0.9),
           b2 = config_value(d, "beta2", 0.95), eps = config_value(d, "eps", 1e-8), wd = config_value(d, "wd", 0.1);
    double c1 = 1 - pow(b1, S), c2 = 1 - pow(b2, S);
    double before = 0, after = 0, total = 0;
    for (int i = 0; i < d->count; i++) {
        const DumpArray *p = &d->arrays[i];
        if (strncmp(p->name, "param/final/", 12) != 0 || p->ndim != 2) continue;   // the matrices
        char mn[200], vn[200];
        snprintf(mn, sizeof mn, "optim/m/%s", p->name + 12);
        snprintf(vn, sizeof vn, "optim/v/%s", p->name + 12);
        const DumpArray *m = dump_find(d, mn), *v = dump_find(d, vn);
        if (!m || !v || m->count != p->count || v->count != p->count) continue;
        for (uint64_t e = 0; e < p->count; e++) {
            double w = dump_get(p, e), step = lr * (dump_get(m, e) / c1) / (sqrt(dump_get(v, e) / c2) + eps);
            after += on_bf16_grid((float)w);
            before += on_bf16_grid((float)((w + step) / (1 - lr * wd)));
            total++;
        }
    }
    if (total == 0 || !(S >= 1) || !isfinite(lr)) return;
    double worst = fmax(before, after) / total;
    char fig[160], diag[700];
    snprintf(fig, sizeof fig, "%.2f%% of the matrices' master weights on bf16's grid (%s their last update)",
             100 * worst, before >= after ? "before" : "after");
    snprintf(diag, sizeof diag, "%.0f%% of the fp32 master weights are bf16 values %s their last update (a master "
             "kept in fp32 from step to step: about 0.05%%): the master is %s the bf16 parameters, so it keeps "
             "nothing of its own and every update smaller than half a bf16 step (2^-9 of the weight) is lost; keep "
             "the fp32 master from step to step, update it, and write the bf16 parameters from it",
             100 * worst, before >= after ? "before" : "after",
             before >= after ? "read back from" : "overwritten from");
    grade_check(g, run, "the master weights are kept between steps", worst <= 0.01, fig,
                "<= 1% (a kept master: about 0.05%)", diag);

    // The moments, the same way: fp32 moments of bf16 gradients lie anywhere
    // (m mixes gradients times 0.1, v their squares times 0.05); moments
    // stored in bf16 lie on its grid. Zeros (untouched elements) aside.
    double on = 0, nonzero = 0;
    for (int i = 0; i < d->count; i++) {
        const DumpArray *a = &d->arrays[i];
        if (strncmp(a->name, "optim/m/", 8) != 0 && strncmp(a->name, "optim/v/", 8) != 0) continue;
        for (uint64_t e = 0; e < a->count; e++) {
            float x = (float)dump_get(a, e);
            if (x == 0) continue;
            on += on_bf16_grid(x);
            nonzero++;
        }
    }
    if (nonzero == 0) return;
    // In the first steps fp32 moments lie on bf16's grid more often: m is
    // then (1 - beta1) times a few bf16 gradients, and 1 - 0.9 in fp32 has
    // trailing zero bits. AdamW's m simulated in fp32 on random bf16
    // gradients: 20% on the grid after one step, 2% after two, 0.2% after
    // three, 0.05% from four on; moments stored in bf16: all of them.
    const double bound = S >= 3 ? 0.01 : S == 2 ? 0.10 : 0.50;
    char bound_text[120];
    snprintf(bound_text, sizeof bound_text, "<= %.0f%% (fp32 moments: about %s)", 100 * bound,
             S >= 4 ? "0.05%" : S == 3 ? "0.2%" : S == 2 ? "2%, after two steps" : "20%, after one step");
    snprintf(fig, sizeof fig, "%.2f%% of AdamW's moments on bf16's grid", 100 * on / nonzero);
    snprintf(diag, sizeof diag, "%.0f%% of AdamW's moments are bf16 values (moments kept in fp32: about 0.05%% from the fourth step): "
             "they are stored in bf16, or rounded through it between steps; m and v stay fp32 in mixed precision "
             "(12 bytes a parameter with the master), since v's small squared gradients and each step's (1 - beta) "
             "of a new gradient round away at 2^-8", 100 * on / nonzero);
    grade_check(g, run, "AdamW's moments kept in fp32", on <= bound * nonzero, fig, bound_text, diag);
}

void check_peak(Grader *g, const Run *run, int source, const char *what, double bound, const char *why,
                const char *diagnosis) {
    if (source == PEAK_HEAP && on_gpu(run->dump)) return;
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
    // The heap holds the tracked memory too: when that explains the
    // excess, the cause is what is tracked (a tensor kept whole, a buffer
    // kept twice), not an allocation around mem_alloc.
    double tracked = source == PEAK_HEAP ? peak_of(run->dump, PEAK_TOTAL, at) : INFINITY;
    // (Untracked, the heap holds the harness's own: one unit gathered on the
    // host for the dump, and bookkeeping.)
    double untracked_allowed = 4 * largest_unit_floats(run->dump) + (1 << 20);
    if (source == PEAK_HEAP && isfinite(tracked) && worst - tracked <= untracked_allowed) {
        char b3[32];
        snprintf(diag, sizeof diag, "rank %llu's peak %s is %s, above %s, and the tracked memory makes %s of it: "
                 "the excess is memory the lab tracks, more than its formula holds (a tensor kept whole where a "
                 "part would do, a buffer kept twice, more micro-batches or activations alive than the schedule "
                 "needs): the memory checks above name the category", (unsigned long long)at, what, b1, b2,
                 core_fmt_bytes(tracked, b3, sizeof b3));
    } else {
        snprintf(diag, sizeof diag, "rank %llu's peak %s is %s, above %s: %s", (unsigned long long)at, what, b1, b2,
                 diagnosis);
    }
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
                           const char *why, bool balanced, const char *more) {
    int n, nref;
    double most, ref_most;
    double mine = sum_of(run->dump, name, &n, &most), ref = run->ref ? sum_of(run->ref, name, &nref, &ref_most) : NAN;
    char check[96], fig[160], bound[160], diag[1024];
    snprintf(check, sizeof check, "%s, all ranks together", what);
    if (!run->ref) goto shares;   // a run without its reference (--no-ref): nothing to compare the sum with
    if (!(ref > 0) || isnan(mine)) {
        grade_check(g, run, check, false, isnan(mine) ? "not in the dump" : "not in the reference's dump",
                    "single-device training's", "the harness or the reference did not write the ops' work (ops.h)");
        return;
    }
    double ratio = mine / (times * ref);
    snprintf(fig, sizeof fig, "x%.3f of single-device training's", mine / ref);
    snprintf(bound, sizeof bound, "x%.3f (%s) +- 0.5%%", times,
             why ? why : times == 1 ? "the model's work, shared out" : times == round(times) ? "the ranks that repeat it"
                 : "the model's work and what this run's design adds");
    if (ratio > 1)
        snprintf(diag, sizeof diag, "the ranks together asked ops.h for %.2f times the %s this run's split needs "
                 "(single-device training's x %g): %s", ratio, what, times, more);
    else
        snprintf(diag, sizeof diag, "the ranks together asked ops.h for %.2f of the %s this run's split needs "
                 "(single-device training's x %g): the rest was computed outside ops.h (by a loop over a tensor's "
                 "memory, which a GPU's memory does not allow) or not at all", ratio, what, times);
    grade_check(g, run, check, fabs(ratio - 1) <= 0.005, fig, bound, diag);
shares:
    if (!balanced || n <= 1 || isnan(mine)) return;
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

double recompute_w2_times(const Run *run) {
    const DumpFile *d = run->dump;
    const DumpArray *ref_work = run->ref ? dump_find(run->ref, "ops/matmul") : NULL, *loss = dump_find(d, "loss");
    if (!config_is(d, "recompute", "full") || !ref_work) return 1;
    double ref_sum = 0;
    for (uint64_t q = 0; q < ref_work->count; q++) ref_sum += dump_get(ref_work, q);
    if (!(ref_sum > 0)) return 1;
    double C = config_value(d, "dim", 0), rows = config_value(d, "batch", 0) * config_value(d, "seq", 0);
    return 1 + (loss ? (double)loss->count : 0) * config_value(d, "layers", 0) * rows * 4 * C * C / ref_sum;
}

void check_work(Grader *g, const Run *run, double matmul_times, double layernorm_times, bool balanced,
                const char *more_matmul, const char *more_layernorm) {
    check_work_why(g, run, matmul_times, NULL, layernorm_times, balanced, more_matmul, more_layernorm);
}

void check_work_why(Grader *g, const Run *run, double matmul_times, const char *matmul_why, double layernorm_times,
                    bool balanced, const char *more_matmul, const char *more_layernorm) {
    check_one_work(g, run, "ops/matmul", "matrix products", matmul_times, matmul_why, balanced, more_matmul);
    check_one_work(g, run, "ops/layernorm", "LayerNorm rows", layernorm_times, NULL, balanced, more_layernorm);
}

// ---- the memory live after each step ---------------------------------------------

void check_live_growth(Grader *g, const Run *run) {
    const DumpArray *live = dump_find(run->dump, "mem/live_per_step");
    const char *check = "memory live after each step";
    if (!live || live->ndim != 2) {
        grade_check(g, run, check, false, "not in the dump", "the live total after every step",
                    "the harness did not note the memory live after each step (mem.h)");
        return;
    }
    uint64_t S = live->shape[1], at = 0;
    double worst = -INFINITY, first = 0, last = 0;
    for (uint64_t r = 0; r < live->shape[0]; r++) {
        double a = dump_get(live, r * S), b = dump_get(live, r * S + S - 1);
        if (b - a > worst) worst = b - a, at = r, first = a, last = b;
    }
    char fig[160], bound[160], diag[700], b1[32], b2[32], b3[32];
    snprintf(fig, sizeof fig, "rank %llu: %s after step 1, %s after step %llu", (unsigned long long)at,
             core_fmt_bytes(first, b1, sizeof b1), core_fmt_bytes(last, b2, sizeof b2), (unsigned long long)S);
    snprintf(bound, sizeof bound, "the same, + %s", core_fmt_bytes(LIVE_GROWTH_SLACK, b3, sizeof b3));
    snprintf(diag, sizeof diag, "rank %llu's memory live after each step grew by %s over %llu steps: a buffer "
             "allocated every step (a send buffer, a copy for a collective, a gathered tensor) is never freed; the "
             "memory table's live column shows its category", (unsigned long long)at,
             core_fmt_bytes(last - first, b1, sizeof b1), (unsigned long long)S);
    grade_check(g, run, check, S < 2 || worst <= LIVE_GROWTH_SLACK, fig, bound, diag);
}

// ---- the kernel's count -------------------------------------------------------------

void check_resident(Grader *g, const Run *run) {
    // On a GPU the driver maps host memory of its own after the seal (the
    // kernels' modules loaded lazily at their first launch, pinned staging),
    // which no allocator call of the run makes: not held to the slack there.
    if (on_gpu(run->dump)) return;
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

void check_resident_seal(Grader *g, const Run *run) {
    if (on_gpu(run->dump)) return;
    const DumpArray *seal = dump_find(run->dump, "mem/resident_seal"), *heap = dump_find(run->dump, "mem/heap_seal");
    const char *check = "memory resident before training";
    char fig[160], bound[200], diag[1024], b1[32], b2[32], b3[32];
    if (!seal || !heap || seal->count != heap->count) {
        grade_check(g, run, check, false, "not in the dump", "the resident memory of every rank at the seal",
                    "the harness did not write the kernel's count of resident memory at its seal (mem.h)");
        return;
    }
    double worst = -INFINITY, worst_res = 0;
    uint64_t at = 0;
    for (uint64_t r = 0; r < seal->count; r++) {
        double res = dump_get(seal, r), outside = res - dump_get(heap, r);
        if (res < 0) return;   // unreadable: check_resident says so
        if (outside > worst) worst = outside, worst_res = res, at = r;
    }
    snprintf(fig, sizeof fig, "rank %llu: %s resident at the seal, %s of it outside the heap",
             (unsigned long long)at, core_fmt_bytes(worst_res, b1, sizeof b1), core_fmt_bytes(worst, b2, sizeof b2));
    snprintf(bound, sizeof bound, "outside the heap, at most %s (the program, MPI and BLAS)",
             core_fmt_bytes(RESIDENT_SEAL_MOST, b3, sizeof b3));
    snprintf(diag, sizeof diag, "rank %llu held %s in RAM outside the heap when the harness sealed its measures, "
             "before training began, where the program and its libraries need at most %s: memory was touched "
             "before the harness's seal (a static array filled in a constructor, or in a hook the harness calls "
             "before training), and it is held through the run where no measure of the training sees it; a lab's "
             "memory comes from mem_alloc", (unsigned long long)at, b2, b3);
    grade_check(g, run, check, worst <= RESIDENT_SEAL_MOST, fig, bound, diag);
    grade_set_ratio(g, fmax(worst, 0) / RESIDENT_SEAL_MOST);
}

// ---- the bookkeeping helpers inside the steps ------------------------------------------

void check_step_helpers(Grader *g, const Run *run, double calls, double bytes) {
    const DumpArray *nc = dump_find(run->dump, "comm/step_helper_calls"),
                    *nb = dump_find(run->dump, "comm/step_helper_bytes"), *loss = dump_find(run->dump, "loss");
    const char *check = "bookkeeping helpers inside the steps";
    char fig[160], bound[160], diag[1024], b1[32], b2[32];
    if (!nc || !nb || nc->count != nb->count || !loss) {
        grade_check(g, run, check, false, "not in the dump", "every rank's helper calls",
                    "the harness did not write the helpers' calls and bytes inside the steps (comm.h)");
        return;
    }
    const double steps = (double)loss->count, most_calls = calls * steps, most_bytes = bytes * steps;
    double worst = 0, wc = 0, wb = 0;
    uint64_t at = 0;
    for (uint64_t r = 0; r < nc->count; r++) {
        double c = dump_get(nc, r), b = dump_get(nb, r);
        double over = fmax(c - most_calls, 0) + fmax(b - most_bytes, 0);
        if (over > worst || (r == 0 && over == 0)) worst = over, wc = c, wb = b, at = r;
    }
    snprintf(fig, sizeof fig, "rank %llu: %.0f calls, %s", (unsigned long long)at, wc,
             core_fmt_bytes(wb, b1, sizeof b1));
    snprintf(bound, sizeof bound, "at most %.0f calls and %s (the given code's)", most_calls,
             core_fmt_bytes(most_bytes, b2, sizeof b2));
    snprintf(diag, sizeof diag, "rank %llu called comm.h's bookkeeping helpers (comm_all_gather_host, "
             "comm_broadcast_host, comm_sum_double, ...) %.0f times inside the training steps, moving %s, where "
             "the lab's given code makes %.0f calls of %s: the helpers are for results and timings, and their bytes "
             "are counted by no ledger, so a step's tensors move through the collectives (comm_all_reduce, "
             "comm_all_gather, ...) alone", (unsigned long long)at, wc, b1, most_calls, b2);
    grade_check(g, run, check, worst == 0, fig, bound, diag);
}

// ---- the ledger ----------------------------------------------------------------------

static LedgerGroup group_class(uint64_t mask, int size, int op, int rank, int N, int inner, int middle) {
    const int block = inner * middle;   // a middle group's span (inner when there is none)
    uint64_t one = 1, base = (uint64_t)(rank / inner * inner), in = 0, mid = 0, out = 0;
    for (int q = 0; q < inner; q++) in |= one << (base + (uint64_t)q);
    for (int q = rank / block * block + rank % inner; middle > 1 && q < rank / block * block + block; q += inner)
        mid |= one << q;
    for (int q = rank % block; q < N; q += block) out |= one << q;
    if (op == COMM_OP_SEND || op == COMM_OP_RECV) {
        if (size != 2) return LEDGER_OTHER;
        uint64_t peer = mask & ~(one << rank);
        // Along the middle axis when there is one (lab07's stages), else the inner.
        const int step = middle > 1 ? inner : 1, at = middle > 1 ? rank / inner % middle : rank % inner,
                  len = middle > 1 ? middle : inner;
        if (at < len - 1 && peer == one << (rank + step)) return LEDGER_NEXT;
        if (at > 0 && peer == one << (rank - step)) return LEDGER_PREV;
        return LEDGER_OTHER;
    }
    if (mask == in) return LEDGER_INNER;
    if (middle > 1 && mask == mid) return LEDGER_MIDDLE;
    if (mask == out) return LEDGER_OUTER;
    if (N < 64 && mask == (one << N) - 1) return LEDGER_WORLD;
    return LEDGER_OTHER;
}

static const char *group_words(LedgerGroup k, const char *const *names) {
    static const char *const words[] = {NULL, NULL, "the whole world", "its next stage", "its previous stage",
                                        "a group of no step's"};
    return k <= LEDGER_OUTER ? names[k] : k == LEDGER_MIDDLE ? names[2] : words[k];
}

// The group whose `op` calls are short of exactly `excess` bytes (what group
// k has too many of), or -1: a collective moved from there to k.
static int moved_from(const LedgerWant *w, int nw, double (*bytes)[COMM_NOPS], int op, int k, double steps,
                      double excess) {
    for (int j = 0; j < nw && excess > 0.5; j++)
        if (w[j].op == op && (int)w[j].group != k && fabs(w[j].bytes * steps - bytes[w[j].group][op] - excess) <= 0.5)
            return (int)w[j].group;
    return -1;
}

// An all-reduce written as its two halves: a reduce-scatter of n on a group,
// then an all-gather of the same n on the same group (in place, the same
// sum on every rank). A ring all-reduce is these two steps: the same bus
// bytes and the same 2 (N - 1) latencies, so each such pair counts as one
// all-reduce of n, as far as the all-reduces the step wants on that group
// fall short. Pairs of the size of an all-reduce the rank makes on that
// group are taken first (a lab's legitimate gathers and scatters of other
// sizes, lab04's naive MLP's, stay what they are).
static void fold_halves(const DumpArray *led, int r, int N, int inner, int middle, const LedgerWant *w, int nw,
                        double steps, double (*bytes)[COMM_NOPS], double (*calls)[COMM_NOPS]) {
    const uint64_t lines = led->shape[1];
    double used_rs[COMM_LEDGER_LINES] = {0}, used_ag[COMM_LEDGER_LINES] = {0};
    if (lines > COMM_LEDGER_LINES) return;
#define LINE(i, f) dump_get(led, ((uint64_t)r * lines + (i)) * 5 + (f))
    for (int j = 0; j < nw; j++) {
        if (w[j].op != COMM_OP_ALL_REDUCE) continue;
        const int k = (int)w[j].group;
        double short_by = w[j].bytes * steps - bytes[k][COMM_OP_ALL_REDUCE];
        for (int pass = 0; pass < 2 && short_by > 0.5; pass++)
            for (uint64_t a = 0; a < lines && short_by > 0.5; a++) {
                if ((int)LINE(a, 0) != COMM_OP_REDUCE_SCATTER || LINE(a, 1) <= 1) continue;
                uint64_t mask = (uint64_t)LINE(a, 2);
                if ((int)group_class(mask, (int)LINE(a, 1), COMM_OP_REDUCE_SCATTER, r, N, inner, middle) != k) continue;
                double size = LINE(a, 3);
                bool like_all_reduce = false;
                for (uint64_t c = 0; c < lines; c++)
                    like_all_reduce |= (int)LINE(c, 0) == COMM_OP_ALL_REDUCE && (uint64_t)LINE(c, 2) == mask &&
                                       LINE(c, 3) == size;
                if (pass == 0 && !like_all_reduce) continue;
                for (uint64_t b = 0; b < lines && short_by > 0.5 && size > 0; b++) {
                    if ((int)LINE(b, 0) != COMM_OP_ALL_GATHER || (uint64_t)LINE(b, 2) != mask || LINE(b, 3) != size)
                        continue;
                    double pairs = fmin(LINE(a, 4) - used_rs[a], LINE(b, 4) - used_ag[b]);
                    pairs = fmin(pairs, floor((short_by + 0.5) / size));
                    if (!(pairs > 0)) continue;
                    used_rs[a] += pairs, used_ag[b] += pairs;
                    bytes[k][COMM_OP_ALL_REDUCE] += pairs * size, calls[k][COMM_OP_ALL_REDUCE] += pairs;
                    bytes[k][COMM_OP_REDUCE_SCATTER] -= pairs * size, calls[k][COMM_OP_REDUCE_SCATTER] -= pairs;
                    bytes[k][COMM_OP_ALL_GATHER] -= pairs * size, calls[k][COMM_OP_ALL_GATHER] -= pairs;
                    short_by -= pairs * size;
                }
            }
    }
#undef LINE
}

void check_ledger(Grader *g, const Run *run, int inner, const char *const *names, LedgerWants want,
                  const void *ctx) {
    check_ledger_grid(g, run, inner, 1, names, want, ctx);
}

void check_ledger_grid(Grader *g, const Run *run, int inner, int middle, const char *const *names, LedgerWants want,
                       const void *ctx) {
    const DumpArray *led = dump_find(run->dump, "comm/ledger"), *full = dump_find(run->dump, "comm/ledger_full"),
                    *loss = dump_find(run->dump, "loss");
    int N = (int)dump_scalar(run->dump, "meta/world_size", 0);
    const char *ops_check = "collectives by operation, group and size", *calls_check = "calls per collective";
    // The ledger names groups by their world ranks, a bit each: a world of
    // more than 63 ranks (a cluster, not the grader's runs) is not checked.
    if (N > 63) return;
    if (!led || led->ndim != 3 || (int)led->shape[0] != N || led->shape[2] != 5 || !loss) {
        grade_check(g, run, ops_check, false, "no comm/ledger", "every rank's calls",
                    "the harness did not write its ledger of calls (comm.h)");
        return;
    }
    double steps = (double)loss->count;
    // The worst line of each check, over the ranks.
    bool ops_ok = true, calls_ok = true;
    char ops_fig[160] = "as the formula has them", ops_diag[1024] = "", calls_fig[160] = "", calls_diag[1024] = "";
    double calls_worst = 0;
    for (int r = 0; r < N; r++) {
        LedgerWant w[LEDGER_MAX];
        int nw = want(run, r, w, ctx);
        double bytes[LEDGER_NGROUPS][COMM_NOPS] = {{0}}, calls[LEDGER_NGROUPS][COMM_NOPS] = {{0}};
        for (uint64_t i = 0; i < led->shape[1]; i++) {
            uint64_t at = ((uint64_t)r * led->shape[1] + i) * 5;
            int op = (int)dump_get(led, at), size = (int)dump_get(led, at + 1);
            if (op < 0 || op >= COMM_NOPS || size <= 1) continue;   // a group of one moves nothing
            LedgerGroup k = group_class((uint64_t)dump_get(led, at + 2), size, op, r, N, inner, middle);
            bytes[k][op] += dump_get(led, at + 3) * dump_get(led, at + 4);
            calls[k][op] += dump_get(led, at + 4);
        }
        fold_halves(led, r, N, inner, middle, w, nw, steps, bytes, calls);
        char b1[32], b2[32];
        if (full && (uint64_t)r < full->count && dump_get(full, (uint64_t)r) > 0 && ops_ok) {
            ops_ok = false;
            snprintf(ops_fig, sizeof ops_fig, "rank %d: over %d kinds of call", r, COMM_LEDGER_LINES);
            snprintf(ops_diag, sizeof ops_diag, "rank %d made collectives of more than %d different sizes or groups: "
                     "a step of this lab needs a handful (one size per tensor it moves)", r, COMM_LEDGER_LINES);
        }
        // A collective on the wrong group first: calls where no step has
        // any, with the group they belong on short of the same bytes.
        for (int k = 0; k < LEDGER_NGROUPS && ops_ok; k++)
            for (int op = 0; op < COMM_NOPS && ops_ok; op++) {
                bool wanted = false;
                for (int j = 0; j < nw; j++) wanted |= (int)w[j].group == k && w[j].op == op;
                if (wanted || !calls[k][op]) continue;
                for (int j = 0; j < nw && ops_ok; j++) {
                    double short_by = w[j].bytes * steps - bytes[w[j].group][op];
                    if (w[j].op != op || !(short_by > 0.5)) continue;
                    ops_ok = false;
                    const char *opname = comm_op_name((CommOp)op);
                    snprintf(ops_fig, sizeof ops_fig, "rank %d: %s over %s", r, opname,
                             group_words((LedgerGroup)k, names));
                    snprintf(ops_diag, sizeof ops_diag, "rank %d made %.0f %s calls over %s (%s), which no step of "
                             "this lab needs, and its %s calls over %s are short of %s (%s): they belong on %s, and "
                             "the collective was given the wrong communicator", r, calls[k][op], opname,
                             group_words((LedgerGroup)k, names), core_fmt_bytes(bytes[k][op], b1, sizeof b1),
                             opname, group_words(w[j].group, names), core_fmt_bytes(short_by, b2, sizeof b2),
                             w[j].what, group_words(w[j].group, names));
                }
            }
        for (int k = 0; k < LEDGER_NGROUPS; k++)
            for (int op = 0; op < COMM_NOPS; op++) {
                const LedgerWant *wanted = NULL;
                for (int j = 0; j < nw; j++)
                    if ((int)w[j].group == k && w[j].op == op) wanted = &w[j];
                double want_bytes = wanted ? wanted->bytes * steps : 0, want_calls = wanted ? wanted->calls * steps : 0;
                if (!calls[k][op] && !want_bytes) continue;
                const char *opname = comm_op_name((CommOp)op), *grp = group_words((LedgerGroup)k, names);
                if (fabs(bytes[k][op] - want_bytes) > 0.5 && ops_ok) {
                    ops_ok = false;
                    core_fmt_bytes(bytes[k][op], b1, sizeof b1);
                    core_fmt_bytes(want_bytes, b2, sizeof b2);
                    if (strcmp(b1, b2) == 0) snprintf(b1, sizeof b1, "%.0f B", bytes[k][op]), snprintf(b2, sizeof b2, "%.0f B", want_bytes);
                    snprintf(ops_fig, sizeof ops_fig, "rank %d: %s over %s, %s", r, opname, grp, b1);
                    if (!wanted)
                        snprintf(ops_diag, sizeof ops_diag, "rank %d made %.0f %s call%s over %s (%s in all), which "
                                 "no step of this lab needs: a collective added (to keep copies in sync?), or one that "
                                 "belongs on another group", r, calls[k][op], opname, calls[k][op] == 1 ? "" : "s", grp, b1);
                    else if (!calls[k][op])
                        snprintf(ops_diag, sizeof ops_diag, "rank %d made no %s over %s, where %d steps need %s (%s): "
                                 "they ran on another communicator, or not at all", r, opname, grp, (int)steps, b2,
                                 wanted->what);
                    else if (moved_from(w, nw, bytes, op, k, steps, bytes[k][op] - want_bytes) >= 0) {
                        const LedgerGroup from = (LedgerGroup)moved_from(w, nw, bytes, op, k, steps,
                                                                         bytes[k][op] - want_bytes);
                        snprintf(ops_diag, sizeof ops_diag, "rank %d's %s calls over %s moved %s where %d steps need "
                                 "%s (%s), and its %s calls over %s are short of exactly the %.0f bytes more: a "
                                 "collective that belongs on %s was given the wrong communicator", r, opname, grp, b1,
                                 (int)steps, b2, wanted->what, opname, group_words(from, names),
                                 bytes[k][op] - want_bytes, group_words(from, names));
                    } else
                        snprintf(ops_diag, sizeof ops_diag, "rank %d's %s calls over %s moved %s where %d steps need "
                                 "%s (%s), %+.0f bytes: %s", r, opname, grp, b1, (int)steps, b2, wanted->what,
                                 bytes[k][op] - want_bytes, bytes[k][op] > want_bytes
                                     ? "a collective added (a few bytes: one to keep copies in sync?), one too "
                                       "large, or one run on this group that belongs on another"
                                     : "a collective missing, one too small, or run on another group");
                }
                const double least = wanted ? fmax(wanted->least, 1) * steps : 0;
                if (wanted && want_bytes > 0 && calls[k][op] > 0 && calls[k][op] < least &&
                    least / calls[k][op] > calls_worst) {
                    calls_ok = false;
                    calls_worst = least / calls[k][op];
                    snprintf(calls_fig, sizeof calls_fig, "rank %d: %.0f %s over %s, at least %.0f", r, calls[k][op],
                             opname, grp, least);
                    snprintf(calls_diag, sizeof calls_diag, "rank %d made %.0f %s calls over %s where %d steps need "
                             "at least %.0f (%s): each step makes its own, and each micro-batch its own where the "
                             "schedule moves one at a time, so fewer calls carry two steps' or two micro-batches' "
                             "bytes in one (a step's skipped and the next one's doubled, or messages held back and "
                             "sent together)", r, calls[k][op], opname, grp, (int)steps, least, wanted->what);
                }
                if (wanted && calls[k][op] > want_calls && calls[k][op] / want_calls > calls_worst) {
                    calls_ok = false;
                    calls_worst = calls[k][op] / want_calls;
                    snprintf(calls_fig, sizeof calls_fig, "rank %d: %.0f %s over %s, x%.1f", r, calls[k][op], opname,
                             grp, calls_worst);
                    snprintf(calls_diag, sizeof calls_diag, "rank %d made %.0f %s calls over %s where %d steps need "
                             "%.0f at most (%s): the same bytes in %.1f times the calls; every call pays the "
                             "network's latency once, so a collective cut into pieces (one per token, per row or per "
                             "tensor where one would do) is slower by the calls, not the bytes", r, calls[k][op],
                             opname, grp, (int)steps, want_calls, wanted->what, calls_worst);
                }
            }
    }
    grade_check(g, run, ops_check, ops_ok, ops_fig, "the formula's operations, groups and bytes, exactly", ops_diag);
    grade_check(g, run, calls_check, calls_ok, calls_ok ? "within the formula's" : calls_fig,
                "the formula's calls per operation and group, at most and at least", calls_diag);
}

// ---- the factors of a tensor-parallel grid ------------------------------------------

// The factors a tensor-parallel run's gradients can be off by, and why.
int tp_ratio_causes(const Run *run, const char *prefix, RatioCause *out) {
    char tn[32], dn[32];
    snprintf(tn, sizeof tn, "%s/t", prefix);
    snprintf(dn, sizeof dn, "%s/dp", prefix);
    int t = (int)dump_scalar(run->dump, tn, 1), dp = (int)dump_scalar(run->dump, dn, 1), n = 0;
    if (t > 1) {
        out[n].factor = t;
        snprintf(out[n++].cause, sizeof out->cause, "which is t = %d: a gradient already whole on every rank of the "
                 "group was summed over it again (f's backward around an input gradient that is not a partial sum, "
                 "or a replicated tensor's gradient all-reduced), or the loss counted once per rank of the group", t);
        out[n].factor = 1.0 / t;
        snprintf(out[n++].cause, sizeof out->cause, "which is 1/t = 1/%d: a partial sum was kept where the group's "
                 "sum belongs (an all-reduce of f's backward or g's forward missing), a replicated tensor's gradient "
                 "averaged over the group where its sum belongs (each rank saw T/t of the tokens), or the loss "
                 "divided by t", t);
    }
    if (dp > 1) {
        out[n].factor = dp;
        snprintf(out[n++].cause, sizeof out->cause, "which is dp = %d: the loss was scaled by 1 / (this group's B T "
                 "tokens) instead of tp->loss_scale (1 / the whole batch's): the data-parallel all-reduce adds the "
                 "%d groups' gradients, so each group's must be its share of the batch's mean", dp, dp);
        out[n].factor = 1.0 / dp;
        snprintf(out[n++].cause, sizeof out->cause, "which is 1/dp = 1/%d: the gradients were divided by the %d "
                 "data-parallel groups once more than the loss scale does", dp, dp);
    }
    return n;
}
