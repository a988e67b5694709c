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
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "train.h"

// Train one run and, with `dump`, write its dump; `quiet`: one line, not one a step.
static void train_run(Comm *w, const Args *a, int micro, bool micro_mean, OpsRounding rounding, bool master,
                      const char *dump, bool quiet) {
    ops_set_rounding(rounding);
    Trainer *t = train_create(a, micro);
    t->micro_mean = micro_mean;
    t->master = master;
    const bool bf16 = t->model->cfg.precision == GPT_BF16;
    const char *how = ops_rounding() == OPS_ROUNDING_ALT        ? ", the other rounding (--rounding alt)"
                      : ops_rounding() == OPS_ROUNDING_PARTIALS ? ", bf16 partial products (--rounding partials)"
                                                                : "";
    if (!quiet) {
        char model[96], optim[128], data[160];
        char rc[48] = "";
        if (t->model->cfg.recompute != GPT_RECOMPUTE_NONE)
            snprintf(rc, sizeof rc, " · %s recomputation", gpt_recompute_name(t->model->cfg.recompute));
        print0("[ref] 1 rank · %s · %s · %s%s%s%s · %s · %s\n", mem_device_name(),
               gpt_describe(t->model, model, sizeof model), gpt_precision_name(t->model->cfg.precision),
               bf16 ? (t->master ? " (fp32 master weights)" : " (no master weights: --master off)") : "",
               t->model->cfg.grads_fp32 ? ", fp32 gradients" : "", rc,
               optim_describe(&t->optim, optim, sizeof optim), data_describe(&t->data, data, sizeof data));
        if (micro > 1)
            print0("batch %d rows x %d tokens in %d micro-batches of %d rows, %d steps%s\n", a->batch,
                   a->seq, micro, a->batch / micro, a->steps, how);
        else
            print0("batch %d rows x %d tokens, %d steps%s\n", a->batch, a->seq, a->steps, how);
    }

    TrainHistory h;
    train_history_init(&h, t, dump != NULL);
    size_t BT = (size_t)a->batch * a->seq;

    double total_time = 0, loss = 0;
    int timed_steps = 0;
    for (int s = 0; s < a->steps; s++) {
        double t0 = core_now();
        loss = train_step_recorded(t, &h);
        double dt = core_now() - t0;
        if (s > 0) {   // the first step warms caches up; it is not timed
            total_time += dt;
            timed_steps++;
        }
        if (!quiet)
            print0("step %4d/%d  loss %.4f  %6.1f ms  %6.1fk tok/s\n", s + 1, a->steps, loss, dt * 1e3,
                   (double)BT / dt / 1e3);
    }
    if (timed_steps > 0 && !quiet)
        print0("mean over steps 2..%d: %.1f ms/step, %.1fk tokens/s\n", a->steps,
               total_time / timed_steps * 1e3, (double)BT * timed_steps / total_time / 1e3);

    // Memory: 16 bytes per parameter with AdamW, plus activations: in fp32
    // 4 parameters, 4 gradients, 8 moments; in bf16 (the ZeRO paper's
    // 2 + 2 + K, K = 12) 2 parameters, 2 gradients, and 12 of optimizer
    // state: the fp32 master weights and the two fp32 moments; fp32
    // gradients (--grad-reduce fp32) 4.
    double psi = (double)t->model->nparams;
    const int G = (int)gpt_grad_elem_size(t->model);
    char b1[32], b2[32], b3[32], b4[32], b5[32], b6[32];
    if (!quiet)
        print0("memory: PARAMS %s (%dΨ = %s)  GRADS %s (%dΨ)  OPTIM %s (%s)  ACTS %s  measured heap peak %s\n",
               core_fmt_bytes((double)mem_peak(MEM_PARAMS), b1, sizeof b1), bf16 ? 2 : 4,
               core_fmt_bytes((bf16 ? 2 : 4) * psi, b2, sizeof b2),
               core_fmt_bytes((double)mem_peak(MEM_GRADS), b3, sizeof b3), G,
               core_fmt_bytes((double)mem_peak(MEM_OPTIM), b4, sizeof b4),
               bf16 ? "12Ψ: master 4Ψ + moments 8Ψ" : "8Ψ",
               core_fmt_bytes((double)mem_peak(MEM_ACTS), b5, sizeof b5),
               core_fmt_bytes((double)mem_measured_peak(), b6, sizeof b6));

    if (dump) {
        DumpWriter *d = dump_create(dump);
        train_history_dump(&h, t, d, w);
        dump_close(d);
        if (quiet)
            print0("micro %d%s, %s rounding: loss %.4f after %d steps: wrote %s\n", micro,
                   micro_mean ? " (each its own mean)" : "", ops_rounding_name(rounding), loss, a->steps, dump);
        else
            print0("wrote %s\n", dump);
    }
    train_history_free(&h, t);
    train_free(t);
}

int main(int argc, char **argv) {
    Args a = args_defaults();
    int micro = 1;
    const char *rounding = ops_rounding_name(ops_rounding_default());
    bool micro_mean = false;
    const char *master = "on", *yardstick = NULL;
    ArgExtra extras[] = {
        {"micro", ARG_INT, &micro, "split each step's batch into K micro-batches (gradient accumulation)", 1, 1 << 20, NULL, NULL},
        {"micro-mean", ARG_FLAG, &micro_mean, "each micro-batch's gradient its own mean, then averaged (as data-parallel "
         "ranks make it; the grader's yardstick)", 0, 0, NULL, NULL},
        {"rounding", ARG_CHOICE, &rounding, "native; alt: another machine's rounding (libm's exp, split-K "
         "products); partials: bf16 products' two parts rounded before they are added, as tensor-parallel ranks "
         "add them (the grader's yardstick)", 0, 0, "native|alt|partials", NULL},
        {"master", ARG_CHOICE, &master, "bf16: off drops the fp32 master weights between steps (each update starts "
         "from the bf16 weights: small updates round away; a control, not a way to train)", 0, 0, "on|off", NULL},
        {"yardstick", ARG_STRING, &yardstick, "train the yardstick's runs K (train.h's train_yardstick, by index) one "
         "after another, each into its dump: the reference cache's way of training several in one process",
         1, 0, NULL, "K:FILE,..."},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes((ARGS_ALL | ARGS_PRECISION | ARGS_GRAD_REDUCE | ARGS_RECOMPUTE) & ~ARGS_TRACE, "it writes no trace");
    args_parse(&a, argc, argv,
               "The single-device reference: trains the course's small GPT with AdamW on one device.",
               extras);
    if (args_given("master") && strcmp(a.precision, "bf16") != 0)
        core_usage_error("--master is about bf16's fp32 master weights; add --precision bf16");
    if (yardstick && (args_given("micro") || args_given("micro-mean") || args_given("rounding") || a.dump))
        core_usage_error("--yardstick names each run's micro-batches, rounding and dump; drop --micro, --micro-mean, "
                         "--rounding and --dump");
    // The yardstick's runs asked for: index and dump each.
    YardstickRun y[YARDSTICK_MAX];
    int ny = train_yardstick(a.batch, strcmp(a.precision, "bf16") == 0, y, YARDSTICK_MAX), nwant = 0, want[16];
    char *paths[16];
    if (yardstick) {
        char *copy = strdup(yardstick), *save = NULL;
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
            char *colon = strchr(item, ':');
            int k = atoi(item);
            if (!colon || colon == item || k < 0 || k >= ny || !colon[1] || nwant == 16)
                core_usage_error("--yardstick wants K:FILE,... with K from 0 to %d, not '%s'", ny - 1, item);
            want[nwant] = k;
            paths[nwant++] = colon + 1;
        }
    }
    Comm *w = comm_init(&argc, &argv, a.timeout);
    if (comm_size(w) != 1)
        core_usage_error("build/ref is the single-device reference; run it alone, not under "
                         "mpirun -np %d", comm_size(w));
    mem_init(a.device, comm_local_rank());
    harness_check_fits(&a, a.batch / micro, false);   // one rank; it is the reference
    ops_init();
    ops_set_tf32(a.tf32);
    if (!yardstick) {
        train_run(w, &a, micro, micro_mean, ops_rounding_parse(rounding), strcmp(master, "on") == 0, a.dump, false);
    } else {
        // Each run's dump holds its own work and peaks, as a process of its
        // own would.
        for (int i = 0; i < nwant; i++) {
            const YardstickRun *r = &y[want[i]];
            mem_reset_peaks();
            comm_stats_reset();
            ops_work_reset();
            train_run(w, &a, r->micro, r->micro_mean, r->rounding, true, paths[i], true);
        }
    }
    comm_finalize();
    return 0;
}
