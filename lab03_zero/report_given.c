// report_given.c: lab03's given code around its training loop (report_given.h).
#include "report_given.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"

Lab03Sizes lab03_sizes(const Gpt *m, Comm *c) {
    // Units padded to N shards, for the formulas: N times the student's own
    // shard_len, which may pad a little more than it must (zero.h's contract,
    // held here so that the bounds and the contract agree).
    // The printed expectations come from the model alone (each unit padded
    // to N shards of ceil(size / N)), never from the student's functions.
    int N = comm_size(c);
    double psi_pad = 0, unit1 = 0, unit2 = 0, model_pad = 0, model1 = 0, model2 = 0;
    for (int u = 0; u < m->nunits; u++) {
        size_t size = m->units[u].size, least = (size + (size_t)N - 1) / (size_t)N, len = shard_len(size, N);
        double pm = (double)N * (double)least;
        model_pad += pm;
        if (pm > model1) model2 = model1, model1 = pm;
        else if (pm > model2) model2 = pm;
        // An unfinished shard_len (it still calls lab_todo) is the verdict's
        // to report, with the other TODOs, after a run of the rest.
        CHECK((len >= least && len <= least + ZERO_MAX_PAD) || harness_unfinished("shard_len"),
              "shard_len(%zu, %d) returned %zu; it must be between ceil(size / N) = %zu and %zu "
              "(N shards cover the unit, padded by at most %d floats each): fix shard_len in zero.c",
              size, N, len, least, least + ZERO_MAX_PAD, ZERO_MAX_PAD);
        // Asked here too, so that an unfinished shard_offset is reported with
        // the rest even when no stage of this run calls it: a shard starts on
        // a shard boundary inside the padded unit.
        size_t off = shard_offset(size, N, comm_rank(c));
        CHECK(off == (size_t)comm_rank(c) * len || harness_unfinished("shard_offset"),
              "shard_offset(%zu, %d, %d) returned %zu, not rank %d's shard of %zu floats (%zu): fix "
              "shard_offset in zero.c", size, N, comm_rank(c), off, comm_rank(c), len, (size_t)comm_rank(c) * len);
        double p = (double)N * (double)len;
        psi_pad += p;
        if (p > unit1) unit2 = unit1, unit1 = p;
        else if (p > unit2) unit2 = p;
    }
    return (Lab03Sizes){psi_pad, unit1, unit2, model_pad, model1, model2};
}

// The elements of a unit of `size` this rank initialises: the whole, or
// (sharded) its shard's real elements, the padding left out.
static size_t own_part(size_t size, int N, int r, bool sharded, size_t *off) {
    *off = 0;
    if (!sharded) return size;
    size_t o = shard_offset(size, N, r), len = shard_len(size, N);
    *off = o;
    return o >= size ? 0 : (size - o < len ? size - o : len);
}

void lab03_init_params(const Setup *s, Zero *z) {
    const Gpt *model = s->model;
    int N = comm_size(s->c), r = comm_rank(s->c);
    for (int u = 0; u < model->nunits; u++) {
        size_t size = model->units[u].size, off;
        void *w = z->params[u] ? z->params[u] : z->param_shard[u];   // stage 3: this rank's shard
        size_t n = own_part(size, N, r, !z->params[u], &off);
        // bf16: rounded from the fp32 values, which the master keeps (whole
        // at stage 0, the shard from stage 1 on).
        gpt_init_run_slice(model, u, w, off, n);
        if (!z->master[u]) continue;
        n = own_part(size, N, r, z->stage > 0, &off);
        gpt_init_slice(model, u, z->master[u], off, n);
    }
}

// Free every buffer the Zero still points to (the student's code allocates
// them; the harness lets them go after the run). Stage 1's grad_shard is a
// view into grads (the reduce-scatter lands in place): it goes with grads.
void lab03_zero_teardown(Zero *z) {
    int N = comm_size(z->comm);
    for (int u = 0; u < z->nunits; u++) {
        if (z->gather_handle[u]) comm_wait(z->gather_handle[u]);   // a gather still in flight
        z->gather_handle[u] = NULL;
        uintptr_t shard = (uintptr_t)z->grad_shard[u], whole = (uintptr_t)z->grads[u];
        size_t padded = (size_t)N * shard_len(z->model->units[u].size, N);
        if (whole && shard >= whole && shard < whole + padded * z->elem) z->grad_shard[u] = NULL;
        void *all[] = {z->params[u], z->param_shard[u], z->grads[u], z->grad_shard[u], z->master[u],
                       z->m[u],      z->v[u],           z->gathered[u], z->unit_grad[u]};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
        z->params[u] = z->param_shard[u] = z->grads[u] = z->grad_shard[u] = z->gathered[u] = z->unit_grad[u] = NULL;
        z->master[u] = z->m[u] = z->v[u] = NULL;
    }
}

// n elements of type t from the device, as fp32 on the host (bf16 widened, exactly).
static void to_host_f32(float *out, const void *dev, size_t n, CommType t) {
    if (t == COMM_F32) {
        mem_to_host(out, dev, n * sizeof(float));
        return;
    }
    bf16 *h = malloc((n ? n : 1) * sizeof *h);
    CHECK(h, "out of memory");
    mem_to_host(h, dev, n * sizeof *h);
    for (size_t i = 0; i < n; i++) out[i] = bf16_to_float(h[i]);
    free(h);
}

// Bookkeeping after the measured run: host memory, uncounted traffic.
float **lab03_gather_whole(const Setup *s, const Zero *z, void *const *whole, void *const *shard, CommType t,
                           bool sharded) {
    const Gpt *m = s->model;
    int N = comm_size(s->c);
    float **out = calloc((size_t)m->nunits, sizeof *out);
    for (int u = 0; u < m->nunits; u++) {
        size_t size = m->units[u].size;
        if (whole[u] && (!sharded || z->stage == 0)) {
            out[u] = malloc(size * sizeof(float));
            to_host_f32(out[u], whole[u], size, t);
            continue;
        }
        size_t len = shard_len(size, N);
        float *mine = malloc(len * sizeof(float)), *all = malloc((size_t)N * len * sizeof(float));
        to_host_f32(mine, shard[u], len, t);
        comm_all_gather_host(s->c, mine, len * sizeof(float), all);
        out[u] = all;
        free(mine);
    }
    return out;
}

void lab03_print_memory(const Setup *s, const Outcome *o, const ZeroBudget *b, int stage, double model_pad,
                        bool bf16) {
    Comm *c = s->c;
    int N = comm_size(c);
    double psi = (double)s->model->nparams;
    MemReport *all = malloc((size_t)N * sizeof *all);
    comm_all_gather_host(c, &o->mem, sizeof o->mem, all);
    double peak[MEM_NCAT] = {0}, heap = 0, total = 0;
    for (int q = 0; q < N; q++) {
        for (int k = 0; k < MEM_NCAT; k++) peak[k] = fmax(peak[k], all[q].peak[k]);
        heap = fmax(heap, all[q].measured_peak);
        total = fmax(total, all[q].peak_total);
    }
    char m1[32], m2[32];
    print0("\nmemory per rank (the largest over ranks), ZeRO-%d, N = %d, psi = %.0f (%.0f padded to N shards):\n",
           stage, N, psi, model_pad);
    print0("  %-7s %10s %10s   %s\n", "", "measured", "expected",
           bf16 ? "formula (bf16 with fp32 master weights: the paper's 2 + 2 + 12)" : "formula (fp32 AdamW)");
    print0("  %-7s %10s %10s   %s\n", "PARAMS", core_fmt_bytes(peak[MEM_PARAMS], m1, 32), core_fmt_bytes(b->params, m2, 32), b->params_why);
    print0("  %-7s %10s %10s   %s\n", "GRADS", core_fmt_bytes(peak[MEM_GRADS], m1, 32), core_fmt_bytes(b->grads, m2, 32), b->grads_why);
    print0("  %-7s %10s %10s   %s\n", "OPTIM", core_fmt_bytes(peak[MEM_OPTIM], m1, 32), core_fmt_bytes(b->optim, m2, 32), b->optim_why);
    print0("  %-7s %10s %10s   %s\n", "ACTS", core_fmt_bytes(peak[MEM_ACTS], m1, 32), "", "activations of this rank's rows (ZeRO does not shard them)");
    print0("  %-7s %10s %10s   %s\n", "total", core_fmt_bytes(total, m1, 32), core_fmt_bytes(b->params + b->grads + b->optim + peak[MEM_ACTS], m2, 32), "peak of the sum");
    // The heap is above the total by what the library and the harness
    // allocate around mem_alloc, whatever the student's code does: said
    // here, with its bound (the grader's), so that nobody hunts a leak that
    // is not theirs. (On a GPU the measure is the device's memory in use.)
    if (mem_device() == DEVICE_CUDA) {
        print0("  %-7s %10s %10s   %s\n", "GPU", core_fmt_bytes(heap, m1, 32), "",
               "the independent measure: the device's memory in use");
    } else {
        print0("  %-7s %10s %10s   %s\n", "heap", core_fmt_bytes(heap, m1, 32), "",
               "the independent measure: every allocation of the program, which is");
        print0("  %-7s %10s %10s   the total + %s of the library's own: the initialisation makes each unit\n",
               "", "", "", core_fmt_bytes(heap - total, m1, 32));
        print0("  %-7s %10s %10s   on the host (one at a time, up to %s), and bookkeeping (under 1 MiB)\n", "",
               "", "", core_fmt_bytes(b->untracked - (1 << 20), m2, 32));
    }
    free(all);
    harness_print_memory(c, &o->mem);
    double per_step = (double)comm_stats_total_bus_bytes(&o->comm) / (s->a.steps ? s->a.steps : 1);
    int E = bf16 ? 2 : 4;   // bytes an element moved
    double model_bytes = (stage == 3 ? 3.0 : 2.0) * (N - 1) / N * E * (stage == 0 ? psi : model_pad);
    print0("bytes each rank sent per step: %s (bus bytes); the stage's formula %s x %d psi = %s\n",
           core_fmt_bytes(per_step, m1, 32), stage == 3 ? "3(N-1)/N" : "2(N-1)/N", E, core_fmt_bytes(model_bytes, m2, 32));
}

void lab03_dump_more(DumpWriter *dw, void *ctx) {
    Lab03End *e = ctx;
    Comm *c = e->s->c;
    int steps = e->s->a.steps;
    // The prefetch of the rank that overlapped least (one without it is
    // what the grader looks for).
    for (int st = 0; st < steps; st++) {
        e->o->prefetch_fwd[st] = -(int64_t)comm_max_double(c, -(double)e->o->prefetch_fwd[st]);
        e->o->prefetch_bwd[st] = -(int64_t)comm_max_double(c, -(double)e->o->prefetch_bwd[st]);
    }
    uint64_t nsteps = (uint64_t)steps, nr = (uint64_t)comm_size(c);
    // Named for ZeRO, not check/: whether the updated shards reached every
    // rank is lab03's own check (the shared one would call it an all-reduce).
    dump_f64(dw, "zero/param_sumsq_per_rank", e->sumsq, 1, &nr);
    dump_scalar_i64(dw, "zero/stage", e->stage);
    dump_scalar_i64(dw, "zero/prefetch", e->prefetch);
    dump_scalar_f64(dw, "zero/psi_padded", e->psi_pad);
    dump_scalar_f64(dw, "zero/unit_largest", e->unit1);
    dump_scalar_f64(dw, "zero/unit_second", e->unit2);
    dump_scalar_f64(dw, "mem/acts_expected", e->acts_expected);
    dump_scalar_i64(dw, "zero/units", e->s->model->nunits);
    dump_i64(dw, "zero/prefetch_fwd", e->o->prefetch_fwd, 1, &nsteps);
    dump_i64(dw, "zero/prefetch_bwd", e->o->prefetch_bwd, 1, &nsteps);
}

void lab03_write_figure(const char *path, const double peaks[2][4][MEM_NCAT], int N, double psi, bool unfinished) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write the figure to %s", path);
    const char *colors[MEM_NCAT] = {"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#bab0ac"};
    const char *names[2] = {"fp32", "bf16"};
    double top = 0;
    for (int p = 0; p < 2; p++)
        for (int s = 0; s < 4; s++) {
            double t = 0;
            for (int k = 0; k < MEM_NCAT; k++) t += peaks[p][s][k];
            top = fmax(top, t);
        }
    // Each stage: its fp32 bar and its bf16 bar side by side.
    int W = 900, H = 440, x0 = 40, y0 = 370, bar = 60, pair = 2 * bar + 6, gap = 44;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" font-family=\"sans-serif\" font-size=\"12\">\n", W, H);
    fprintf(f, "<text x=\"%d\" y=\"24\" font-size=\"14\">ZeRO: memory per rank by category, measured "
               "(the largest rank), N = %d, psi = %.2fM, fp32 beside bf16 (2 + 2 + 12)%s</text>\n",
            x0, N, psi / 1e6, unfinished ? " (an unfinished zero.c: not ZeRO's figure yet)" : "");
    for (int s = 0; s < 4; s++) {
        int xs = x0 + gap / 2 + s * (pair + gap);
        for (int p = 0; p < 2; p++) {
            double y = y0, total = 0;
            int x = xs + p * (bar + 6);
            for (int k = 0; k < MEM_NCAT; k++) {
                double h = peaks[p][s][k] / top * (y0 - 60);
                total += peaks[p][s][k];
                if (h <= 0) continue;
                fprintf(f, "<rect x=\"%d\" y=\"%.1f\" width=\"%d\" height=\"%.1f\" fill=\"%s\"><title>stage %d %s %s %.2f MB</title></rect>\n",
                        x, y - h, bar, h, colors[k], s, names[p], mem_category_name((MemCategory)k), peaks[p][s][k] / 1e6);
                y -= h;
            }
            fprintf(f, "<text x=\"%d\" y=\"%.1f\" font-size=\"11\">%.1f MB</text>\n", x + 4, y - 6, total / 1e6);
            fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n", x + 16, y0 + 14, names[p]);
        }
        fprintf(f, "<text x=\"%d\" y=\"%d\">stage %d</text>\n", xs + bar - 16, y0 + 32, s);
    }
    for (int k = 0; k < MEM_NCAT; k++) {
        int lx = x0 + 4 * (pair + gap) + 10, ly = 60 + 20 * k;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n", lx, ly,
                colors[k], lx + 16, ly + 11, mem_category_name((MemCategory)k));
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n</svg>\n", x0, y0, x0 + 4 * (pair + gap), y0);
    CHECK(fclose(f) == 0, "writing %s failed", path);
}
