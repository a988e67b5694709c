// train.c: the single-device reference training loop.
#include "train.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "ops.h"

Trainer *train_create(const Args *a, int micro) {
    CHECK(micro >= 1, "--micro must be at least 1");
    if (a->batch % micro != 0)
        core_usage_error("--micro %d does not divide the batch of %d rows; pick a divisor of %d",
                         micro, a->batch, a->batch);
    Trainer *t = calloc(1, sizeof *t);
    CHECK(t, "out of memory");
    t->args = *a;
    t->micro = micro;
    t->optim = optim_from_args(a);
    data_open(&t->data, a->data, a->vocab, a->seq, a->batch, a->seed);
    GptConfig cfg = {.B = a->batch / micro, .T = a->seq, .C = a->dim, .NH = a->heads,
                     .L = a->layers, .V = a->vocab, .dropout = (float)a->dropout, .seed = a->seed,
                     .precision = gpt_precision_parse(a->precision)};
    cfg.grads_fp32 = gpt_grads_fp32_parse(cfg.precision, a->grad_reduce);
    cfg.recompute = gpt_recompute_parse(a->recompute);
    t->model = gpt_create(&cfg);
    t->master = true;
    if (cfg.precision == GPT_BF16) {
        t->params = gpt_alloc_units(t->model, MEM_OPTIM, "master params");
        t->w = gpt_alloc_run_units(t->model, MEM_PARAMS, "params");
    } else {
        t->params = gpt_alloc_units(t->model, MEM_PARAMS, "params");
        t->w = (void **)t->params;
    }
    t->grads = gpt_alloc_grad_units(t->model, MEM_GRADS, "grads");
    t->m = gpt_alloc_units(t->model, MEM_OPTIM, "adam m");
    t->v = gpt_alloc_units(t->model, MEM_OPTIM, "adam v");
    gpt_init_units(t->model, t->params);
    if (cfg.precision == GPT_BF16)
        for (int u = 0; u < t->model->nunits; u++) ops_to_bf16(t->w[u], t->params[u], t->model->units[u].size);
    gpt_alloc_acts(t->model);
    size_t BT = (size_t)a->batch * a->seq;
    t->x = malloc(BT * sizeof *t->x);
    t->y = malloc(BT * sizeof *t->y);
    CHECK(t->x && t->y, "out of memory");
    return t;
}

void train_free(Trainer *t) {
    if (!t) return;
    if (t->w != (void **)t->params) gpt_free_units(t->model, t->w);
    gpt_free_units(t->model, t->params);
    gpt_free_units(t->model, t->grads);
    gpt_free_units(t->model, t->m);
    gpt_free_units(t->model, t->v);
    gpt_free(t->model);
    data_close(&t->data);
    free(t->x);
    free(t->y);
    free(t);
}

// grads[u] *= s, in the gradients' precision (bf16: in fp32, in `f`, a
// unit's scratch, rounded once).
static void scale_units(Trainer *t, int u, float s, float *f) {
    size_t n = t->model->units[u].size;
    if (gpt_grad_precision(t->model) == GPT_FP32) {
        ops_scale(t->grads[u], s, n);
        return;
    }
    ops_from_bf16(f, t->grads[u], n);
    ops_scale(f, s, n);
    ops_to_bf16(t->grads[u], f, n);
}

// grads += g, both bf16: the sum in fp32 (g widened into `f`), rounded to bf16 once.
static void add_bf16_units(Trainer *t, void **g, float *f) {
    for (int u = 0; u < t->model->nunits; u++) {
        size_t n = t->model->units[u].size;
        ops_from_bf16(f, g[u], n);
        ops_accumulate_bf16(t->grads[u], f, n);
    }
}

double train_grads(Trainer *t) {
    Gpt *model = t->model;
    const int rows = model->cfg.B, T = t->args.seq;
    data_batch(&t->data, t->step, t->x, t->y);
    for (int u = 0; u < model->nunits; u++)
        mem_zero(t->grads[u], model->units[u].size * gpt_grad_elem_size(model));
    // Each micro-batch's loss gradient is scaled by 1 / (tokens in the whole
    // batch), so the micro-batches' gradients add up to the full batch's;
    // or (micro_mean) by its own tokens, and the K averaged at the end.
    float scale = 1.0f / (float)((size_t)(t->micro_mean ? rows : t->args.batch) * T);
    // bf16, each micro-batch its own mean (the data-parallel ranks' way):
    // each micro-batch's gradient is made whole in bf16, as a rank's is,
    // then added into the sum in bf16, as a reduction of the ranks' bf16
    // gradients adds them: two roundings a micro-batch, where accumulating
    // in place rounds once (gpt_unit_backward). fp32 gradients
    // (--grad-reduce fp32) add up as fp32 training's do.
    const bool apart = t->micro_mean && gpt_grad_precision(model) == GPT_BF16 && t->micro > 1;
    void **own = apart ? gpt_alloc_run_units(model, MEM_OTHER, "micro-batch gradient") : t->grads;
    size_t largest = 0;   // a unit's fp32 scratch for the bf16 sums and scaling below
    for (int u = 0; u < model->nunits; u++) largest = model->units[u].size > largest ? model->units[u].size : largest;
    float *f = apart ? mem_alloc_floats(largest, MEM_OTHER, "widened gradient") : NULL;
    double loss = 0;
    for (int k = 0; k < t->micro; k++) {
        size_t off = (size_t)k * rows * T;
        gpt_set_batch(model, t->x + off, t->y + off, t->step, k * rows, scale);
        loss += gpt_forward(model, t->w);
        if (apart)
            for (int u = 0; u < model->nunits; u++) mem_zero(own[u], model->units[u].size * sizeof(bf16));
        gpt_backward(model, t->w, own);
        if (apart) add_bf16_units(t, own, f);
    }
    if (apart) gpt_free_units(model, own);
    if (t->micro_mean && t->micro > 1)
        for (int u = 0; u < model->nunits; u++) scale_units(t, u, 1.0f / (float)t->micro, f);
    mem_free(f);
    return loss / t->micro;
}

void train_update(Trainer *t) {
    t->step++;
    const bool bf16 = t->model->cfg.precision == GPT_BF16;
    for (int u = 0; u < t->model->nunits; u++) {
        size_t n = t->model->units[u].size;
        if (bf16 && t->model->cfg.grads_fp32)
            optim_step_fp32_grads(&t->optim, t->step, t->w[u], t->grads[u], t->params[u], t->m[u], t->v[u], n);
        else
            optim_step(&t->optim, t->step, bf16, t->w[u], t->grads[u], bf16 ? t->params[u] : NULL, t->m[u], t->v[u],
                       n);
        // Without a master copy, what the next step starts from is the bf16 weights alone.
        if (bf16 && !t->master) ops_from_bf16(t->params[u], t->w[u], n);
    }
}

double train_step(Trainer *t) {
    double loss = train_grads(t);
    train_update(t);
    return loss;
}

int train_yardstick(int batch, bool bf16, YardstickRun *runs, int max) {
    OpsRounding own = ops_rounding_default();
    OpsRounding other = own == OPS_ROUNDING_ALT ? OPS_ROUNDING_NATIVE : OPS_ROUNDING_ALT;
    int n = 0;
    if (n < max) runs[n++] = (YardstickRun){1, false, own};
    // Micro-batches of two halves and of one row each: the coarsest and the
    // finest grouping of the rows' sums. (The finest, not the next divisor:
    // on some BLAS kernels micro-batches of 2 and 4 rows sum exactly as the
    // whole batch does, and leave no sample, while a pipeline of 8
    // micro-batches or 8 data-parallel ranks sum row by row.)
    // The finest twice: scaled by the whole batch's tokens (accumulation, a
    // pipeline) and each row its own mean, then averaged (data-parallel
    // ranks, whose 1 / (rows x T) is a power of two where 1 / (B T) is not:
    // at 3 ranks this alone moved AdamW's moments 4 times further than
    // any other sample).
    if (batch % 2 == 0 && n < max - 1) runs[n++] = (YardstickRun){2, false, own};
    if (batch > 2 && n < max - 1) runs[n++] = (YardstickRun){batch, false, own};
    if (batch > 1 && n < max - 1) runs[n++] = (YardstickRun){batch, true, own};
    if (n < max) runs[n++] = (YardstickRun){1, false, other};
    if (bf16 && n < max) runs[n++] = (YardstickRun){1, false, OPS_ROUNDING_PARTIALS};
    return n;
}

// ---- recording what the dump needs -----------------------------------------

// fp32 copies of units of `precision` (bf16 ones widened, exactly).
static float **snapshot(const Trainer *t, void **units, GptPrecision precision) {
    float **copy = gpt_alloc_units(t->model, MEM_OTHER, "dump copy");
    for (int u = 0; u < t->model->nunits; u++) {
        size_t n = t->model->units[u].size;
        if (precision == GPT_BF16) ops_from_bf16(copy[u], units[u], n);
        else mem_copy(copy[u], units[u], n * sizeof(float));
    }
    return copy;
}

void train_history_init(TrainHistory *h, const Trainer *t, bool tensors) {
    const Args *a = &t->args;
    size_t steps = (size_t)(a->steps ? a->steps : 1), BT = (size_t)a->batch * a->seq;
    *h = (TrainHistory){0};
    h->loss = malloc(steps * sizeof *h->loss);
    h->x = malloc(steps * BT * sizeof *h->x);
    h->y = malloc(steps * BT * sizeof *h->y);
    CHECK(h->loss && h->x && h->y, "out of memory");
    h->tensors = tensors;
    if (tensors) h->init_params = snapshot(t, (void **)t->params, GPT_FP32);
    h->work0 = ops_work();
}

double train_step_recorded(Trainer *t, TrainHistory *h) {
    const Args *a = &t->args;
    double loss = train_grads(t);
    if (h->steps == 0 && h->tensors) h->first_grads = snapshot(t, t->grads, gpt_grad_precision(t->model));
    train_update(t);
    CHECK(isfinite(loss), "the loss became %g at step %d; try a smaller --lr", loss, h->steps + 1);
    size_t BT = (size_t)a->batch * a->seq, s = (size_t)h->steps;
    if (h->steps < a->steps) {
        h->loss[s] = (float)loss;
        for (size_t i = 0; i < BT; i++) h->x[s * BT + i] = t->x[i], h->y[s * BT + i] = t->y[i];
        h->steps++;
    }
    return loss;
}

void train_history_dump(const TrainHistory *h, const Trainer *t, DumpWriter *w, Comm *c) {
    const Args *a = &t->args;
    char extra[512], optim[256];
    snprintf(extra, sizeof extra, "%sdropout %.9g\nmicro %d\nmaster %s\n",
             optim_config_lines(&t->optim, optim, sizeof optim), a->dropout, t->micro, t->master ? "on" : "off");
    dump_run_meta(w, c, "ref", a, extra);
    uint64_t steps = (uint64_t)h->steps;
    dump_f32(w, "loss", h->loss, 1, &steps);
    uint64_t bshape[3] = {steps, (uint64_t)a->batch, (uint64_t)a->seq};
    dump_i64(w, "batch/x", h->x, 3, bshape);
    dump_i64(w, "batch/y", h->y, 3, bshape);
    if (h->init_params) gpt_dump_units(t->model, w, "param/init", h->init_params);
    if (h->first_grads) gpt_dump_units(t->model, w, "grad/first", h->first_grads);
    gpt_dump_units(t->model, w, "param/final", t->params);
    gpt_dump_units(t->model, w, "optim/m", t->m);
    gpt_dump_units(t->model, w, "optim/v", t->v);
    if (c) {
        dump_rank_stats(w, c, NULL);   // the work among them (a process that trained once)
    } else {
        // This training's work alone: a lab's own reference runs train the
        // yardstick's samples one after another in one process.
        OpsWork now = ops_work();
        double mm = now.matmul - h->work0.matmul, ln = now.layernorm - h->work0.layernorm;
        uint64_t one = 1;
        dump_f64(w, "ops/matmul", &mm, 1, &one);
        dump_f64(w, "ops/layernorm", &ln, 1, &one);
    }
}

void train_history_free(TrainHistory *h, const Trainer *t) {
    gpt_free_units(t->model, h->init_params);
    gpt_free_units(t->model, h->first_grads);
    free(h->loss);
    free(h->x);
    free(h->y);
    *h = (TrainHistory){0};
}
