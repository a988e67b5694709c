// optim.c: the optimizers, over the kernels of ops.h.
#include "optim.h"

#include <stdio.h>

#include "args.h"
#include "core.h"
#include "ops.h"

OptimConfig optim_from_args(const Args *a) {
    OptimConfig o = {.kind = OPTIM_ADAMW, .lr = (float)a->lr, .beta1 = 0.9f, .beta2 = 0.95f,
                     .eps = 1e-8f, .momentum = 0.0f, .wd = (float)a->wd};
    return o;
}

int optim_state_per_param(const OptimConfig *o) {
    if (o->kind == OPTIM_ADAMW) return 2;
    return o->momentum != 0.0f ? 1 : 0;
}

void optim_update(const OptimConfig *o, int t, float *p, const float *g, float *m, float *v,
                  size_t n) {
    CHECK(t >= 1, "optimizer steps count from 1, not %d", t);
    if (o->kind == OPTIM_ADAMW)
        ops_adamw(p, g, m, v, n, o->lr, o->beta1, o->beta2, o->eps, o->wd, t);
    else
        ops_sgd(p, g, o->momentum != 0.0f ? m : NULL, n, o->lr, o->momentum, o->wd);
}

void optim_update_mixed(const OptimConfig *o, int t, float *p, uint16_t *w, const uint16_t *g, float *m,
                        float *v, size_t n) {
    CHECK(t >= 1, "optimizer steps count from 1, not %d", t);
    CHECK(o->kind == OPTIM_ADAMW, "bf16 training updates with AdamW only");
    ops_adamw_mixed(p, w, g, m, v, n, o->lr, o->beta1, o->beta2, o->eps, o->wd, t);
}

void optim_step(const OptimConfig *o, int t, bool bf16, void *w, const void *g, float *master, float *m, float *v,
                size_t n) {
    CHECK(!bf16 || master || n == 0, "a bf16 update of %zu parameters without their fp32 master copy (NULL): AdamW "
          "updates the master and writes the bf16 parameters from it; allocate it where the moments are "
          "(lab03: z->master)", n);
    CHECK(bf16 || !master, "an fp32 update given a master copy: fp32 parameters are their own master; pass NULL");
    if (bf16) optim_update_mixed(o, t, master, w, g, m, v, n);
    else optim_update(o, t, w, g, m, v, n);
}

void optim_step_fp32_grads(const OptimConfig *o, int t, uint16_t *w, const float *g, float *master, float *m,
                           float *v, size_t n) {
    CHECK(master || n == 0, "a bf16 update of %zu parameters without their fp32 master copy (NULL)", n);
    CHECK(o->kind == OPTIM_ADAMW, "bf16 training updates with AdamW only");
    optim_update(o, t, master, g, m, v, n);
    ops_to_bf16(w, master, n);
}

const char *optim_describe(const OptimConfig *o, char *buf, size_t len) {
    if (o->kind == OPTIM_ADAMW)
        snprintf(buf, len, "AdamW lr %g betas (%g, %g) eps %g wd %g", o->lr, o->beta1, o->beta2,
                 o->eps, o->wd);
    else
        snprintf(buf, len, "SGD lr %g momentum %g wd %g", o->lr, o->momentum, o->wd);
    return buf;
}

const char *optim_config_lines(const OptimConfig *o, char *buf, size_t len) {
    snprintf(buf, len, "optimizer %s\nbeta1 %.9g\nbeta2 %.9g\neps %.9g\nwd %.9g\nmomentum %.9g\n",
             o->kind == OPTIM_ADAMW ? "adamw" : "sgd", o->beta1, o->beta2, o->eps, o->wd,
             o->momentum);
    return buf;
}
