// ref.c: the single-device reference trainer (build/ref).
//   build/ref --steps 50
// Trains the course's small GPT on one device. Every lab's distributed run is
// checked against what this program does.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "dump.h"
#include "mem.h"
#include "ops.h"
#include "train.h"

// Per-step records for the dump: the losses and the batches.
typedef struct {
    float *loss;       // (steps)
    int64_t *x, *y;    // (steps, B, T)
} History;

static void dump_run(const Trainer *t, DumpWriter *w, Comm *c, const History *h, float **init_params,
                     float **first_grads) {
    const Args *a = &t->args;
    char extra[512], optim[256];
    snprintf(extra, sizeof extra, "%sdropout %.9g\nmicro %d\n",
             optim_config_lines(&t->optim, optim, sizeof optim), a->dropout, t->micro);
    dump_run_meta(w, c, "ref", a, extra);
    uint64_t steps = (uint64_t)a->steps;
    dump_f32(w, "loss", h->loss, 1, &steps);
    uint64_t bshape[3] = {steps, (uint64_t)a->batch, (uint64_t)a->seq};
    dump_i64(w, "batch/x", h->x, 3, bshape);
    dump_i64(w, "batch/y", h->y, 3, bshape);
    gpt_dump_units(t->model, w, "param/init", init_params);
    if (first_grads) gpt_dump_units(t->model, w, "grad/first", first_grads);
    gpt_dump_units(t->model, w, "param/final", t->params);
    gpt_dump_units(t->model, w, "optim/m", t->m);
    gpt_dump_units(t->model, w, "optim/v", t->v);
    dump_rank_stats(w, c, NULL);
}

// Copy every unit (for the initial parameters and the first gradient, which
// the dump wants after training has changed them). Counted under OTHER: they
// are not part of training.
static float **snapshot(const Trainer *t, float **units) {
    if (!t->args.dump) return NULL;
    float **copy = gpt_alloc_units(t->model, MEM_OTHER, "dump copy");
    for (int u = 0; u < t->model->nunits; u++)
        mem_copy(copy[u], units[u], t->model->units[u].size * sizeof(float));
    return copy;
}

int main(int argc, char **argv) {
    Args a = args_defaults();
    int micro = 1;
    ArgExtra extras[] = {
        {"micro", ARG_INT, &micro, "split each step's batch into K micro-batches (gradient accumulation)", 1, 1 << 20, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_parse(&a, argc, argv,
               "The single-device reference: trains the course's small GPT with AdamW on one device.",
               extras);
    Comm *w = comm_init(&argc, &argv, a.timeout);
    if (comm_size(w) != 1)
        core_usage_error("build/ref is the single-device reference; run it alone, not under "
                         "mpirun -np %d", comm_size(w));
    mem_init(a.device, comm_local_rank());
    ops_init();

    Trainer *t = train_create(&a, micro);
    char model[96], optim[128], data[160];
    print0("[ref] 1 rank · %s · %s · %s · %s\n", mem_device_name(),
           gpt_describe(t->model, model, sizeof model), optim_describe(&t->optim, optim, sizeof optim),
           data_describe(&t->data, data, sizeof data));
    if (micro > 1)
        print0("batch %d rows x %d tokens in %d micro-batches of %d rows, %d steps\n", a.batch,
               a.seq, micro, a.batch / micro, a.steps);
    else
        print0("batch %d rows x %d tokens, %d steps\n", a.batch, a.seq, a.steps);

    History h = {0};
    size_t BT = (size_t)a.batch * a.seq;
    h.loss = malloc((size_t)(a.steps ? a.steps : 1) * sizeof *h.loss);
    h.x = malloc((size_t)(a.steps ? a.steps : 1) * BT * sizeof *h.x);
    h.y = malloc((size_t)(a.steps ? a.steps : 1) * BT * sizeof *h.y);
    CHECK(h.loss && h.x && h.y, "out of memory");
    float **init_params = snapshot(t, t->params);
    float **first_grads = NULL;

    double total_time = 0;
    int timed_steps = 0;
    for (int s = 0; s < a.steps; s++) {
        double t0 = core_now();
        double loss = train_grads(t);
        if (s == 0) first_grads = snapshot(t, t->grads);
        train_update(t);
        double dt = core_now() - t0;
        CHECK(isfinite(loss), "the loss became %g at step %d; try a smaller --lr", loss, s + 1);
        h.loss[s] = (float)loss;
        for (size_t i = 0; i < BT; i++) {
            h.x[(size_t)s * BT + i] = t->x[i];
            h.y[(size_t)s * BT + i] = t->y[i];
        }
        if (s > 0) {   // the first step warms caches up; it is not timed
            total_time += dt;
            timed_steps++;
        }
        print0("step %4d/%d  loss %.4f  %6.1f ms  %6.1fk tok/s\n", s + 1, a.steps, loss, dt * 1e3,
               (double)BT / dt / 1e3);
    }
    if (timed_steps > 0)
        print0("mean over steps 2..%d: %.1f ms/step, %.1fk tokens/s\n", a.steps,
               total_time / timed_steps * 1e3, (double)BT * timed_steps / total_time / 1e3);

    // Memory: 16 bytes per parameter for fp32 AdamW (4 parameters, 4
    // gradients, 8 moments), plus activations.
    double psi = (double)t->model->nparams;
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    print0("memory: PARAMS %s (4Ψ = %s)  GRADS %s  OPTIM %s (8Ψ)  ACTS %s  measured heap peak %s\n",
           core_fmt_bytes((double)mem_peak(MEM_PARAMS), b1, sizeof b1),
           core_fmt_bytes(4 * psi, b2, sizeof b2),
           core_fmt_bytes((double)mem_peak(MEM_GRADS), b3, sizeof b3),
           core_fmt_bytes((double)mem_peak(MEM_OPTIM), b4, sizeof b4),
           core_fmt_bytes((double)mem_peak(MEM_ACTS), b5, sizeof b5),
           core_fmt_bytes((double)mem_measured_peak(), b6, sizeof b6));

    if (a.dump) {
        DumpWriter *d = dump_create(a.dump);
        dump_run(t, d, w, &h, init_params, first_grads);
        dump_close(d);
        print0("wrote %s\n", a.dump);
    }
    gpt_free_units(t->model, init_params);
    gpt_free_units(t->model, first_grads);
    free(h.loss);
    free(h.x);
    free(h.y);
    train_free(t);
    comm_finalize();
    return 0;
}
