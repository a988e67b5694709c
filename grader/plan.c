// plan.c: the planner's arithmetic (plan.h). Each per-rank figure calls the
// lab's own formula; what is the planner's own (the counts of a Llama
// block, the α-β times, the links) is stated in docs/plan.md.
#include "plan.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "pp_budget.h"
#include "pp_schedule.h"
#include "sp_budget.h"
#include "tp_layout.h"
#include "zero_budget.h"

// ---- presets -----------------------------------------------------------------------

// GPT-3 175B: Brown et al. 2020, table 2.1 (96 layers, d_model 12288, 96
// heads, context 2048; the GPT-2 vocabulary of 50257). Llama 3: Grattafiori
// et al. 2024 (arXiv 2407.21783), table 3 (layers, model and FFN dimension,
// heads, 8 key/value heads, vocabulary 128,256) and section 3.4 (8K tokens
// in the main pre-training stage).
static const PlanModel MODELS[] = {
    {"gpt3-175b", PLAN_GPT, 96, 12288, 96, 96, 4 * 12288, 2048, 50257},
    {"llama3-8b", PLAN_LLAMA, 32, 4096, 32, 8, 14336, 8192, 128256},
    {"llama3-70b", PLAN_LLAMA, 80, 8192, 64, 8, 28672, 8192, 128256},
    {"llama3-405b", PLAN_LLAMA, 126, 16384, 128, 8, 53248, 8192, 128256},
};

// H100 SXM5 and H200 SXM: NVIDIA's datasheets (989 TFLOP/s dense bf16 both;
// 80 GB HBM3, 141 GB HBM3e; NVLink 900 GB/s a GPU, both directions: 450
// one way). The network: one 400 Gb/s NIC a GPU (ConnectX-7 in the DGX
// H100 and H200; the Llama 3 paper, section 3.3.1: "400 Gbps interconnects
// between GPUs"), 50 GB/s one way. The latencies are assumptions of the
// order of NCCL's small-message times, not measured (docs/plan.md).
static const PlanGpu GPUS[] = {
    {"H100", 989e12, 80e9, 450e9, 3e-6, 50e9, 10e-6, 8},
    {"H200", 989e12, 141e9, 450e9, 3e-6, 50e9, 10e-6, 8},
};

const PlanModel *plan_model(const char *name) {
    for (size_t i = 0; i < sizeof MODELS / sizeof MODELS[0]; i++)
        if (!strcmp(MODELS[i].name, name)) return &MODELS[i];
    return NULL;
}

const PlanGpu *plan_gpu(const char *name) {
    for (size_t i = 0; i < sizeof GPUS / sizeof GPUS[0]; i++)
        if (!strcasecmp(GPUS[i].name, name)) return &GPUS[i];
    return NULL;
}

// ---- the model's counts ------------------------------------------------------------

PlanParams plan_params(const PlanModel *m) {
    double h = m->h, f = m->f, V = m->V, hkv = (double)m->kv * (m->h / m->a);
    double attn = 2 * h * h + 2 * h * hkv;   // q and o (h, h); k and v (h, h_kv)
    PlanParams P;
    if (m->arch == PLAN_GPT) {
        // docs/model.md's unit table: biases on every product, two LayerNorms (w, b).
        double mlp = 2 * h * f;
        P.block = attn + mlp + (2 * h + 2 * hkv) + f + h + 4 * h;
        P.embed = V * h + (double)m->s * h;
        P.head = 2 * h + h * V;
        P.matmul = m->L * (attn + mlp) + h * V;
        // Whole on every TP rank (lab04's replicated): ln1, ln2 (w, b),
        // attn.bo and mlp.b2 (added once, after g); embed.wpe; lnf (w, b).
        P.block_rep = 6 * h, P.embed_rep = (double)m->s * h, P.head_rep = 2 * h;
    } else {
        // SwiGLU's gate, up (h, f) and down (f, h); two RMSNorm weights.
        double mlp = 3 * h * f;
        P.block = attn + mlp + 2 * h;
        P.embed = V * h;
        P.head = h + h * V;
        P.matmul = m->L * (attn + mlp) + h * V;
        P.block_rep = 2 * h, P.embed_rep = 0, P.head_rep = h;   // the RMSNorms' weights
    }
    P.total = m->L * P.block + P.embed + P.head;
    return P;
}

double plan_flops_per_token(const PlanModel *m) {
    return 6 * plan_params(m).matmul + 12.0 * m->L * m->s * m->h;
}

double plan_layer_acts(const PlanModel *m, bool sp, GptRecompute rc, double b, double t, double E) {
    double s = m->s, h = m->h, a = m->a;
    if (m->arch == PLAN_GPT) return sp_layer_bytes_mode(sp, rc, s, b, h, a, t, E);
    double sbh = s * b * h, hkv = (double)m->kv * (m->h / m->a);
    if (rc == GPT_RECOMPUTE_FULL) return E * sbh / (sp ? t : 1);
    // Replicated over the TP group without SP: the two norms' inputs and
    // outputs (8sbh in bf16); split: q (sbh), k and v (2 sb h_kv), the
    // attention's output (sbh), SwiGLU's gate, up and their product (3sbf);
    // and the probabilities (as^2b).
    double whole = 4 * sbh, split = 2 * sbh + 2 * s * b * hkv + 3 * s * b * m->f;
    double att = rc == GPT_RECOMPUTE_SELECTIVE ? 0 : a * s * s * b;
    return E * (whole / (sp ? t : 1) + split / t + att / t);
}

// ---- one configuration ------------------------------------------------------------

// The smallest multiple of k at or above x.
static double pad(double x, int k) { return ceil(x / k) * k; }

// α-β time of a ring collective over k ranks moving `bus` bus bytes a rank
// in `calls` calls of `steps_per_call` ring steps each (an all-reduce 2(k - 1),
// an all-gather or reduce-scatter k - 1): lab01's model.
static double ab(double bus, double calls, double steps_per_call, double alpha, double beta) {
    return calls * steps_per_call * alpha + bus / beta;
}

const char *plan_dominant(const PlanResult *r) {
    double c = r->t_compute, terms[] = {c, r->t_bubble, r->t_tp, r->t_pp, r->t_dp};
    static const char *const names[] = {"compute", "the pipeline's bubble", "TP's all-reduces (activations)",
                                        "PP's sends", "DP's gradient reduction"};
    int best = 0;
    for (int i = 1; i < 5; i++)
        if (terms[i] > terms[best]) best = i;
    return names[best];
}

// Why c is not a configuration of this model on `gpus` GPUs for a global
// batch of `batch` sequences (NULL: it is one); its micro-batches a step in *mbs.
static const char *plan_invalid(const PlanModel *m, int gpus, int batch, const PlanConfig *c, int *mbs) {
    int t = c->t, p = c->p, v = c->v, dp = c->dp;
    if (t < 1 || p < 1 || v < 1 || dp < 1 || c->b < 1) return "every size is 1 or more";
    if (t * p * dp != gpus) return "t p dp is not the GPUs";
    if (m->a % t || m->kv % t) return "t does not divide the heads (and the key/value heads)";
    if (batch % dp) return "dp does not divide the batch";
    if ((batch / dp) % c->b) return "the micro-batch does not divide a data-parallel rank's batch";
    if (p * v > m->L) return "more pipeline chunks than layers";
    if (v > 1 && p < 2) return "interleaving needs 2 stages or more";
    if (c->sp && t < 2) return "sequence parallelism needs t >= 2";
    if (c->sp && m->s % t) return "t does not divide the tokens (sequence parallelism)";
    *mbs = batch / dp / c->b;
    if (v > 1 && *mbs % p) return "the interleaved schedule needs m a multiple of p";
    return NULL;
}

// A stage's figures on one GPU: stage s of p, nb blocks in all and at most
// cb in one chunk, with the embeddings and the head or not, mbs
// micro-batches a step. Also, for the step's time, its TP bus bytes a
// micro-batch (*tp_mb) and, with SP, the replicated gradients' once a step
// (*rep).
static PlanStage stage_eval(const PlanModel *m, const PlanConfig *c, int mbs, int s, int nb, int cb, bool embed,
                            bool head, double *tp_mb, double *rep) {
    PlanParams P = plan_params(m);
    PlanStage S = {.blocks = nb, .chunk_blocks = cb, .embed = embed, .head = head};
    const double E = c->bf16 ? 2 : 4, b = c->b, t = c->t, M = (double)m->s * b, h = m->h;
    const bool full = c->rc == GPT_RECOMPUTE_FULL;

    // The state: each unit's replicated tensors whole and the rest 1/t
    // (lab04's psi_replicated + psi_split / t); under ZeRO each unit padded
    // to dp equal shards (lab03's); ZeRO-3 gathers the two largest.
    int shards = c->zero ? c->dp : 1;
    double unit = pad(P.block_rep + (P.block - P.block_rep) / t, shards);
    double em = embed ? pad(P.embed_rep + (P.embed - P.embed_rep) / t, shards) : 0;
    double hd = head ? pad(P.head_rep + (P.head - P.head_rep) / t, shards) : 0;
    double psi = nb * unit + em + hd;
    double u[4] = {nb > 0 ? unit : 0, nb > 1 ? unit : 0, em, hd}, u1 = 0, u2 = 0;
    for (int i = 0; i < 4; i++)
        if (u[i] > u1) u2 = u1, u1 = u[i];
        else if (u[i] > u2) u2 = u[i];
    ZeroBudget z = zero_budget(c->zero, true, psi, c->dp, u1, u2, c->bf16);

    // The activations: k micro-batches' sets of the largest chunk's blocks
    // (pp_budget's k), and a scratch every micro-batch shares:
    // recomputation's set, a block's activations made again (full) or its
    // probabilities (selective), once for all the blocks; on the head's
    // stage the fp32 logits of a micro-batch, split over the vocabulary.
    S.layer_acts = plan_layer_acts(m, c->sp, c->rc, b, t, E);
    double whole = plan_layer_acts(m, c->sp, GPT_RECOMPUTE_NONE, b, t, E);
    double kept = plan_layer_acts(m, c->sp, GPT_RECOMPUTE_SELECTIVE, b, t, E);
    double rc_shared = full ? whole : c->rc == GPT_RECOMPUTE_SELECTIVE ? whole - kept : 0;
    double scratch = rc_shared + (head ? 4 * M * m->V / t : 0);
    PpBudget pb = c->v > 1 ? pp_budget_interleaved(c->p, c->v, mbs, s, psi, scratch, cb * S.layer_acts, c->bf16)
                           : pp_budget(false, false, c->p, mbs, s, psi, scratch, 0, cb * S.layer_acts, c->bf16);
    S.params = z.params, S.grads = z.grads, S.optim = z.optim, S.acts = pb.acts, S.k = pb.k;

    // TP: lab04's count for the stage's blocks (under full recomputation
    // the blocks' forward collectives again) and its ends, the embedding's
    // all-reduce of M h and the head's with the cross-entropy's three of M
    // (fp32), a micro-batch; with SP, lab06's sum of the replicated
    // tensors' fp32 gradients over the group, once a step.
    TpBytes all = tp_bytes_per_step_recompute(false, c->t, 1, M, h, nb, 0, E, full);
    // C = 0: the cross-entropy's three of M alone.
    TpBytes ce = tp_bytes_per_step_recompute(false, c->t, 1, M, 0, 0, 0, E, false);
    double end = (all.embed_head - ce.embed_head) / 2;
    double mb = all.block + (embed ? end : 0) + (head ? end + ce.embed_head : 0);
    double rep_params = nb * P.block_rep + (embed ? P.embed_rep : 0) + (head ? P.head_rep : 0);
    double reps = c->sp ? 2.0 * (t - 1) / t * 4 * rep_params : 0;
    S.tp_bytes = mbs * mb + reps;
    if (tp_mb) *tp_mb = mb;
    if (rep) *rep = reps;

    // PP: each micro-batch's activations, E s b h / t a TP rank, and their
    // gradient across each of the stage's chunk boundaries, sent on one side
    // and received on the other (lab05's count): 2 v - [s = 0] - [s = p - 1]
    // boundaries interleaved, (s > 0) + (s < p - 1) otherwise.
    int p = c->p, links = c->v > 1 ? 2 * c->v - (s == 0) - (s == p - 1) : (s > 0) + (s < p - 1);
    S.pp_bytes = 2.0 * links * mbs * E * M * h / t;

    // DP: the stage's gradients reduced over dp, an all-reduce's bus bytes
    // (ZeRO 0 to 2 alike, as lab03 counts them), ZeRO-3 gathering the
    // parameters for each micro-batch's forward and backward and
    // reduce-scattering its gradients (lab03's 1.5 x for one micro-batch).
    double ring = (double)(c->dp - 1) / c->dp;
    S.dp_bytes = c->zero == 3 ? mbs * 3 * ring * E * psi : 2 * ring * E * psi;
    return S;
}

PlanStage plan_stage(const PlanModel *m, int gpus, int batch, PlanConfig c, int s) {
    int mbs;
    if (plan_invalid(m, gpus, batch, &c, &mbs) || s < 0 || s >= c.p) return (PlanStage){0};
    // lab05's partition (pp_partition over the p v virtual stages; virtual
    // stage j = c p + s is chunk c of stage s).
    int V = c.p * c.v, nb = 0, cb = 0;
    bool embed = false, head = false;
    for (int ch = 0; ch < c.v; ch++) {
        int j = ch * c.p + s, n = (j + 1) * m->L / V - j * m->L / V;
        nb += n, cb = n > cb ? n : cb;
        embed |= j == 0, head |= j == V - 1;
    }
    return stage_eval(m, &c, mbs, s, nb, cb, embed, head, NULL, NULL);
}

PlanResult plan_evaluate(const PlanModel *m, const PlanGpu *g, int gpus, int batch, double eff, PlanConfig c) {
    PlanResult r;
    memset(&r, 0, sizeof r);
    r.invalid = plan_invalid(m, gpus, batch, &c, &r.m);
    if (r.invalid) return r;
    r.valid = true;
    int t = c.t, p = c.p, v = c.v, dp = c.dp;
    PlanParams P = plan_params(m);
    const double E = c.bf16 ? 2 : 4, b = c.b, s = m->s, h = m->h;
    int chunk_layers = (m->L + p * v - 1) / (p * v);
    r.layers = chunk_layers * v;

    // ---- memory: the first stage (embeddings, the most micro-batches
    // alive) and the last (the head, the logits), each with the most blocks
    // a stage holds; the fuller of the two.
    double tp_first, tp_last, rep_first, rep_last;
    PlanStage first = stage_eval(m, &c, r.m, 0, r.layers, chunk_layers, true, p == 1, &tp_first, &rep_first);
    PlanStage last = stage_eval(m, &c, r.m, p - 1, r.layers, chunk_layers, p == 1, true, &tp_last, &rep_last);
    const PlanStage *full = last.params + last.grads + last.optim + last.acts >
                                    first.params + first.grads + first.optim + first.acts
                                ? &last
                                : &first;
    r.params = full->params, r.grads = full->grads, r.optim = full->optim, r.acts = full->acts;
    r.total = r.params + r.grads + r.optim + r.acts;
    r.k = first.k;

    // ---- time: one micro-batch's forward and backward on a stage, m of
    // them through the pipeline and its bubble, then the gradients' reduction.
    double tokens_mb = s * b;
    double model_flops = plan_flops_per_token(m) * tokens_mb / (t * p);
    double extra = 0;   // recomputation's forwards again
    double layer_fwd = (2.0 * (P.matmul - h * m->V) / m->L + 4 * s * h) * tokens_mb;   // a block's forward FLOPs
    if (c.rc == GPT_RECOMPUTE_FULL) extra = layer_fwd * m->L / (t * p);
    if (c.rc == GPT_RECOMPUTE_SELECTIVE) extra = 4.0 * s * h * tokens_mb * m->L / (t * p);
    double t_mb = (model_flops + extra) / (eff * g->peak);

    // TP (and SP: the same bus bytes as all-gathers and reduce-scatters):
    // the last stage's (the head's end, the larger), a call per all-reduce.
    r.tp_net = t > g->node_gpus;
    double tp_alpha = r.tp_net ? g->net_alpha : g->nvlink_alpha, tp_beta = r.tp_net ? g->net_bw : g->nvlink_bw;
    double t_rep = 0;
    if (t > 1) {
        // A block's 4 (6 with its forward again), the head's 1 + 3, the embedding's.
        double calls = r.layers * (c.rc == GPT_RECOMPUTE_FULL ? 6 : 4) + 4 + (p == 1);
        t_mb += ab(tp_last, calls, 2.0 * (t - 1), tp_alpha, tp_beta);
        if (c.sp) t_rep = ab(fmax(rep_first, rep_last), 1, 2.0 * (t - 1), tp_alpha, tp_beta);
    }
    r.tp_bytes = tp_last * r.m + fmax(rep_first, rep_last);
    // PP: each micro-batch's activations forward and their gradient back
    // across each of the stage's v chunk boundaries, sbh/t a TP rank
    // (Megatron's scatter of the message over the TP group): what a middle
    // stage sends.
    r.pp_net = (double)t * p > g->node_gpus;
    double pp_mb = p > 1 ? 2.0 * v * E * tokens_mb * h / t : 0;
    double t_pp_mb = p > 1 ? ab(pp_mb, 2.0 * v, 1, r.pp_net ? g->net_alpha : g->nvlink_alpha,
                                r.pp_net ? g->net_bw : g->nvlink_bw)
                           : 0;
    r.pp_bytes = pp_mb * r.m;
    double slot = t_mb + t_pp_mb;
    double bubble = v > 1 ? pp_bubble_formula_interleaved(p, v, r.m) : pp_bubble_formula(p, r.m);
    double pipe = r.m * slot / (1 - bubble);

    // DP: the fuller stage's gradients (stage_eval's count).
    r.dp_net = (double)t * p * dp > g->node_gpus;
    if (dp > 1) {
        r.dp_bytes = fmax(first.dp_bytes, last.dp_bytes);
        double calls = c.zero == 3 ? r.m * 3.0 * r.layers : 2.0;   // ZeRO-3: a call a unit
        r.t_dp = ab(r.dp_bytes, calls, dp - 1, r.dp_net ? g->net_alpha : g->nvlink_alpha,
                    r.dp_net ? g->net_bw : g->nvlink_bw);
    }

    r.step = pipe + t_rep + r.t_dp;
    r.t_bubble = pipe * bubble;
    r.t_compute = r.m * (model_flops + extra) / (eff * g->peak);
    r.t_tp = r.m * (t_mb - (model_flops + extra) / (eff * g->peak)) + t_rep;
    r.t_pp = r.m * t_pp_mb;
    r.tokens_per_s = batch * s / r.step;
    r.mfu = plan_flops_per_token(m) * r.tokens_per_s / (gpus * g->peak);
    return r;
}

// ---- the search -------------------------------------------------------------------

static int by_step(const void *x, const void *y) {
    double a = ((const PlanChoice *)x)->r.step, b = ((const PlanChoice *)y)->r.step;
    return a < b ? -1 : a > b;
}

int plan_search(const PlanModel *m, const PlanGpu *g, int gpus, int batch, double eff, bool bf16, PlanChoice **out) {
    static const int vs[] = {1, 2, 4}, bs[] = {1, 2, 4, 8};
    static const GptRecompute rcs[] = {GPT_RECOMPUTE_NONE, GPT_RECOMPUTE_SELECTIVE, GPT_RECOMPUTE_FULL};
    int n = 0, cap = 1024;
    PlanChoice *list = malloc(cap * sizeof *list);
    for (int t = 1; t <= m->a && t <= gpus; t *= 2) {
        if (gpus % t) continue;
        for (int p = 1; p <= m->L && t * p <= gpus; p++) {
            if ((gpus / t) % p) continue;
            int dp = gpus / t / p;
            for (size_t iv = 0; iv < sizeof vs / sizeof vs[0]; iv++)
                for (int sp = 0; sp < 2; sp++)
                    for (int zero = 0; zero <= 3; zero++)
                        for (size_t ir = 0; ir < 3; ir++)
                            for (size_t ib = 0; ib < sizeof bs / sizeof bs[0]; ib++) {
                                PlanConfig c = {t, p, vs[iv], dp, sp, zero, rcs[ir], bs[ib], bf16};
                                PlanResult r = plan_evaluate(m, g, gpus, batch, eff, c);
                                if (!r.valid || r.total > g->hbm) continue;
                                if (n == cap) list = realloc(list, (cap *= 2) * sizeof *list);
                                list[n++] = (PlanChoice){c, r};
                            }
        }
    }
    qsort(list, n, sizeof *list, by_step);
    *out = list;
    return n;
}

int plan_layout_rank(const PlanChoice *list, int n, int t, int p, int dp, int *index) {
    // The layouts met so far (t p dp = the GPUs: t and p name one).
    enum { MAX_LAYOUTS = 4096 };
    static int seen[MAX_LAYOUTS][2];
    int rank = 0;
    for (int i = 0; i < n; i++) {
        const PlanConfig *c = &list[i].c;
        bool met = false;
        for (int j = 0; j < rank && !met; j++) met = seen[j][0] == c->t && seen[j][1] == c->p;
        if (met) continue;
        if (c->t == t && c->p == p && c->dp == dp) {
            if (index) *index = i;
            return rank + 1;
        }
        if (rank < MAX_LAYOUTS) seen[rank][0] = c->t, seen[rank][1] = c->p;
        rank++;
    }
    return 0;
}
