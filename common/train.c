// train.c: the single-device reference training loop.
#include "train.h"

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
                     .L = a->layers, .V = a->vocab, .dropout = (float)a->dropout, .seed = a->seed};
    t->model = gpt_create(&cfg);
    t->params = gpt_alloc_units(t->model, MEM_PARAMS, "params");
    t->grads = gpt_alloc_units(t->model, MEM_GRADS, "grads");
    t->m = gpt_alloc_units(t->model, MEM_OPTIM, "adam m");
    t->v = gpt_alloc_units(t->model, MEM_OPTIM, "adam v");
    gpt_init_units(t->model, t->params);
    gpt_alloc_acts(t->model);
    size_t BT = (size_t)a->batch * a->seq;
    t->x = malloc(BT * sizeof *t->x);
    t->y = malloc(BT * sizeof *t->y);
    CHECK(t->x && t->y, "out of memory");
    return t;
}

void train_free(Trainer *t) {
    if (!t) return;
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

double train_grads(Trainer *t) {
    Gpt *model = t->model;
    const int rows = model->cfg.B, T = t->args.seq;
    data_batch(&t->data, t->step, t->x, t->y);
    for (int u = 0; u < model->nunits; u++)
        mem_zero(t->grads[u], model->units[u].size * sizeof(float));
    // Each micro-batch's loss gradient is scaled by 1 / (tokens in the whole
    // batch), so the micro-batches' gradients add up to the full batch's.
    float scale = 1.0f / (float)((size_t)t->args.batch * T);
    double loss = 0;
    for (int k = 0; k < t->micro; k++) {
        size_t off = (size_t)k * rows * T;
        gpt_set_batch(model, t->x + off, t->y + off, t->step, k * rows, scale);
        loss += gpt_forward(model, t->params);
        gpt_backward(model, t->params, t->grads);
    }
    return loss / t->micro;
}

void train_update(Trainer *t) {
    t->step++;
    for (int u = 0; u < t->model->nunits; u++)
        optim_update(&t->optim, t->step, t->params[u], t->grads[u], t->m[u], t->v[u],
                     t->model->units[u].size);
}

double train_step(Trainer *t) {
    double loss = train_grads(t);
    train_update(t);
    return loss;
}
