// plan.c: the planner. For a model, a batch and N GPUs, every layout of
// data, tensor (with sequence) and pipeline parallelism, ZeRO stage,
// recomputation and micro-batch that fits a GPU's memory, fastest first:
// memory per GPU by category, the step's time and what dominates it,
// tokens/s and MFU, from the labs' formulas (grader/plan.h; docs/plan.md).
//   build/plan --model llama3-405b --gpus 8192 --batch 2048 --gpu H100
//   build/plan --layers 4 --dim 128 --heads 4 --seq 64 --vocab 256 --batch 8 --gpus 4 --gpu H100
//   build/plan ... --peak 149e9 --efficiency 1 --alpha 2.4e-6 --beta 6.46e9   (this machine's rates)
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "core.h"
#include "plan.h"

static const char *rc_name(GptRecompute rc) { return gpt_recompute_name(rc); }

static double gb(double x) { return x / 1e9; }

int main(int argc, char **argv) {
    const char *model = NULL, *gpu = "H100", *layout = NULL, *arch = "gpt";
    const char *config = NULL;
    int kv = 0, ffn = 0, gpus = 0, node = 8, top = 10;
    double eff = 0.75, alpha = 0, beta = 0, peak = 0;
    ArgExtra extras[] = {
        {"model", ARG_CHOICE, &model, "a preset: its shape (the shape flags are then refused)", 1, 0,
         "gpt3-175b|llama3-8b|llama3-70b|llama3-405b", "NAME"},
        {"arch", ARG_CHOICE, &arch, "without --model: the block, the course's GPT-2 or Llama 3's", 1, 0, "gpt|llama", NULL},
        {"kv-heads", ARG_INT, &kv, "key/value heads (grouped-query attention; default: --heads)", 1, 1 << 16, NULL, NULL},
        {"ffn", ARG_INT, &ffn, "the MLP's hidden width (default 4 x --dim)", 1, 1 << 24, NULL, NULL},
        {"gpus", ARG_INT, &gpus, "GPUs in all (required)", 1, 1 << 24, NULL, NULL},
        {"gpu", ARG_CHOICE, &gpu, "the GPU (figures in docs/plan.md)", 1, 0, "H100|H200", "NAME"},
        {"node-gpus", ARG_INT, &node, "GPUs a node (NVLink inside, the network between)", 1, 1024, NULL, NULL},
        {"top", ARG_INT, &top, "configurations to print", 1, 1 << 20, NULL, "K"},
        {"efficiency", ARG_DOUBLE, &eff, "the share of the bf16 peak the matrix products reach", 0.01, 1, NULL, "X"},
        {"peak", ARG_DOUBLE, &peak, "the peak in FLOP/s (0: --gpu's; a measured rate with --efficiency 1, "
         "e.g. build/sgemm_rate's on a CPU)", 1, 1e20, NULL, "FLOP/S"},
        {"alpha", ARG_DOUBLE, &alpha, "a message's latency in seconds, inside a node and between nodes alike (0: "
         "--gpu's; e.g. lab01's fitted alpha, 2.4e-6)", 0, 1, NULL, "S"},
        {"beta", ARG_DOUBLE, &beta, "a GPU's bandwidth one way in bytes/s, inside a node and between nodes alike (0: "
         "--gpu's; e.g. lab01's fitted B, 6.46e9)", 1, 1e15, NULL, "BYTES/S"},
        {"layout", ARG_STRING, &layout, "T,P,DP: say where this layout ranks, and its best configuration", 1, 0, NULL, "T,P,DP"},
        {"config", ARG_STRING, &config, "T,P,V,DP,SP,ZERO,RECOMPUTE,B: this configuration's figures alone, one "
         "\"name value\" a line (RECOMPUTE 0 none, 1 selective, 2 full)", 1, 0, NULL, "LIST"},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_BATCH | ARGS_SEQ | ARGS_DIM | ARGS_HEADS | ARGS_LAYERS | ARGS_VOCAB | ARGS_PRECISION,
               "it trains nothing: it plans");
    Args a = args_defaults();
    a.precision = "bf16";
    args_parse(&a, argc, argv,
               "The planner: memory per GPU and step time of every layout of data, tensor (with sequence) and "
               "pipeline parallelism, ZeRO and recomputation that fits, fastest first, from the labs' formulas "
               "(docs/plan.md). --batch is the global batch in sequences.",
               extras);
    if (!args_given("gpus")) core_usage_error("--gpus is required: the GPUs in all (e.g. --gpus 8192)");
    PlanModel M;
    if (model) {
        static const char *const shape[] = {"layers", "dim", "heads", "seq", "vocab", "kv-heads", "ffn", "arch"};
        for (size_t i = 0; i < sizeof shape / sizeof shape[0]; i++)
            if (args_given(shape[i]) && strcmp(shape[i], "seq"))
                core_usage_error("--model %s sets the shape; drop --%s, or give the whole shape without --model",
                                 model, shape[i]);
        M = *plan_model(model);
        if (args_given("seq")) M.s = a.seq;   // the long-context stage: the same model, longer sequences
    } else {
        M = (PlanModel){"custom", strcmp(arch, "llama") ? PLAN_GPT : PLAN_LLAMA, a.layers, a.dim, a.heads,
                        kv ? kv : a.heads, ffn ? ffn : 4 * a.dim, a.seq, a.vocab};
        if (M.a % M.kv) core_usage_error("--kv-heads %d does not divide --heads %d: each key/value head serves a "
                                         "group of query heads", M.kv, M.a);
        if (M.arch == PLAN_GPT && (M.kv != M.a || M.f != 4 * M.h))
            core_usage_error("the course's GPT block has a key/value head a head and an MLP of 4 x --dim; use --arch "
                             "llama for --kv-heads or --ffn");
    }
    if (!args_given("batch") && !model) core_usage_error("--batch is required: the global batch, in sequences");
    int batch = args_given("batch") ? a.batch : 0;
    if (!batch) core_usage_error("--batch is required with --model: the global batch, in sequences (Llama 3 405B: "
                                 "2048 of 8192 tokens, 16M tokens)");
    PlanGpu G = *plan_gpu(gpu);
    G.node_gpus = node;
    if (peak > 0) G.peak = peak;
    if (alpha > 0) G.nvlink_alpha = G.net_alpha = alpha;
    if (beta > 0) G.nvlink_bw = G.net_bw = beta;
    bool bf16 = strcmp(a.precision, "fp32") != 0;
    int lt = 0, lp = 0, ldp = 0;
    if (layout && (sscanf(layout, "%d,%d,%d", &lt, &lp, &ldp) != 3 || lt < 1 || lp < 1 || ldp < 1))
        core_usage_error("--layout %s: give three sizes T,P,DP (e.g. --layout 8,16,64)", layout);
    if (layout && lt * lp * ldp != gpus)
        core_usage_error("--layout %s makes %d GPUs, not --gpus %d", layout, lt * lp * ldp, gpus);

    if (config) {
        PlanConfig c = {0};
        int sp, rc;
        if (sscanf(config, "%d,%d,%d,%d,%d,%d,%d,%d", &c.t, &c.p, &c.v, &c.dp, &sp, &c.zero, &rc, &c.b) != 8 ||
            rc < 0 || rc > 2 || c.zero < 0 || c.zero > 3)
            core_usage_error("--config %s: give T,P,V,DP,SP,ZERO,RECOMPUTE,B (e.g. --config 1,1,1,2,0,2,0,8)", config);
        c.sp = sp, c.rc = (GptRecompute)rc, c.bf16 = bf16;
        PlanResult r = plan_evaluate(&M, &G, gpus, batch, eff, c);
        if (!r.valid) core_usage_error("--config %s is not a configuration of this model: %s", config, r.invalid);
        printf("params %.0f\ngrads %.0f\noptim %.0f\nacts %.0f\ntotal %.0f\ntp_bytes %.0f\npp_bytes %.0f\ndp_bytes "
               "%.0f\nstep %.6g\nmfu %.4f\n", r.params, r.grads, r.optim, r.acts, r.total, r.tp_bytes, r.pp_bytes,
               r.dp_bytes, r.step, r.mfu);
        printf("m %d\nlayers %d\nk %d\nt_compute %.6g\nt_bubble %.6g\nt_tp %.6g\nt_pp %.6g\nt_dp %.6g\n", r.m, r.layers,
               r.k, r.t_compute, r.t_bubble, r.t_tp, r.t_pp, r.t_dp);
        // Each stage as a lab measures a rank of it (plan_stage: lab05's
        // partition; bytes sent and received, per group).
        for (int s = 0; s < c.p; s++) {
            PlanStage S = plan_stage(&M, gpus, batch, c, s);
            printf("stage%d.blocks %d\nstage%d.embed %d\nstage%d.head %d\nstage%d.k %d\nstage%d.params %.0f\n"
                   "stage%d.grads %.0f\nstage%d.optim %.0f\nstage%d.acts %.0f\nstage%d.layer_acts %.0f\n"
                   "stage%d.tp_bytes %.0f\nstage%d.pp_bytes %.0f\nstage%d.dp_bytes %.0f\n",
                   s, S.blocks, s, S.embed, s, S.head, s, S.k, s, S.params, s, S.grads, s, S.optim, s, S.acts, s,
                   S.layer_acts, s, S.tp_bytes, s, S.pp_bytes, s, S.dp_bytes);
        }
        return 0;
    }
    PlanParams P = plan_params(&M);
    printf("[plan] %s · %s · %dL %dC %dH (%d kv) f %d · s %d · V %d · %.4g B params (blocks %.4g B, embeddings %.4g B, "
           "head %.4g B) · %.4g GFLOPs a token (6 N_matmul + 12 L s h)\n",
           M.name, M.arch == PLAN_GPT ? "GPT-2 block" : "Llama block (GQA, SwiGLU, untied)", M.L, M.h, M.a, M.kv, M.f,
           M.s, M.V, P.total / 1e9, M.L * P.block / 1e9, P.embed / 1e9, P.head / 1e9, plan_flops_per_token(&M) / 1e9);
    printf("%d x %s (%.0f TFLOP/s bf16 at %.0f%%, %.0f GB; NVLink %.0f GB/s, network %.0f GB/s a GPU one way; nodes "
           "of %d) · batch %d x %d = %.3g M tokens · %s\n",
           gpus, G.name, G.peak / 1e12, 100 * eff, G.hbm / 1e9, G.nvlink_bw / 1e9, G.net_bw / 1e9, G.node_gpus, batch,
           M.s, (double)batch * M.s / 1e6, bf16 ? "bf16, fp32 master weights and moments" : "fp32");

    PlanChoice *list;
    int n = plan_search(&M, &G, gpus, batch, eff, bf16, &list);
    if (n == 0) {
        printf("no configuration fits %d x %.0f GB: more GPUs, a smaller batch or a smaller model\n", gpus, G.hbm / 1e9);
        free(list);
        return 1;
    }
    printf("%d configurations fit; the fastest %d:\n", n, top < n ? top : n);
    printf("  #    t   p  v    dp  sp zero recompute  b    m   params  grads  optim   acts  total GB   step s  "
           "Mtok/s   MFU  dominated by\n");
    for (int i = 0; i < n && i < top; i++) {
        const PlanConfig *c = &list[i].c;
        const PlanResult *r = &list[i].r;
        printf("%3d %4d %3d %2d %5d %3s %4d %-9s %2d %4d %8.2f %6.2f %6.2f %6.2f %9.2f %8.3f %7.3f %4.1f%%  %s\n", i + 1,
               c->t, c->p, c->v, c->dp, c->sp ? "on" : "off", c->zero, rc_name(c->rc), c->b, r->m, gb(r->params),
               gb(r->grads), gb(r->optim), gb(r->acts), gb(r->total), r->step, r->tokens_per_s / 1e6, 100 * r->mfu,
               plan_dominant(r));
    }
    printf("why, for the first %d (seconds of the step):\n", n < 3 ? n : 3);
    for (int i = 0; i < n && i < 3; i++) {
        const PlanResult *r = &list[i].r;
        printf("  %d: compute %.3f, bubble %.3f, TP %.3f (%s, %.3g GB a GPU), PP %.3f (%s, %.3g GB), DP %.3f (%s, %.3g "
               "GB): %s dominates\n",
               i + 1, r->t_compute, r->t_bubble, r->t_tp, r->tp_net ? "network" : "NVLink", gb(r->tp_bytes), r->t_pp,
               r->pp_net ? "network" : "NVLink", gb(r->pp_bytes), r->t_dp, r->dp_net ? "network" : "NVLink",
               gb(r->dp_bytes), plan_dominant(r));
    }
    if (layout) {
        int at = -1, rank = plan_layout_rank(list, n, lt, lp, ldp, &at);
        if (!rank) {
            printf("layout t %d p %d dp %d: no configuration of it fits\n", lt, lp, ldp);
        } else {
            const PlanChoice *ch = &list[at];
            printf("layout t %d p %d dp %d: ranks %d among the layouts that fit (configuration #%d): v %d sp %s zero %d "
                   "recompute %s b %d, %.2f GB, step %.3f s, MFU %.1f%% (%.0f TFLOP/s a GPU)\n",
                   lt, lp, ldp, rank, at + 1, ch->c.v, ch->c.sp ? "on" : "off", ch->c.zero, rc_name(ch->c.rc), ch->c.b,
                   gb(ch->r.total), ch->r.step, 100 * ch->r.mfu, ch->r.mfu * G.peak / 1e12);
        }
    }
    free(list);
    return 0;
}
