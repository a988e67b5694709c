// model_given.c: the model around the student's split layers (model_given.h).
#include "model_given.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"

// ---- the layout ---------------------------------------------------------------

static TpSplit student_split(const void *ctx, GptUnitKind unit, const GptTensor *t) {
    return tp_split((const Tp *)ctx, unit, t);
}

void tpm_layout(TpModel *tm, const Gpt *m, Tp *tp) {
    memset(tm, 0, sizeof *tm);
    tm->m = m;
    tm->tp = tp;
    tm->nunits = m->nunits;
    tp_layout_make(&tm->L, m, tp->group, student_split, tp, tp->naive, "fix tp_split in tp.c");
    // The sizes the student's functions use.
    const TpLayout *L = &tm->L;
    int blk = m->cfg.L > 0 ? 1 : 0, head = m->nunits - 1;
    TpSplit q = blk ? tp_layout_split(L, blk, "attn.wq") : (TpSplit){TP_REPLICATED, 0, tp->C};
    TpSplit w1 = blk ? tp_layout_split(L, blk, "mlp.w1") : (TpSplit){TP_REPLICATED, 0, 4 * tp->C};
    TpSplit w2 = blk ? tp_layout_split(L, blk, "mlp.w2") : (TpSplit){TP_REPLICATED, 0, tp->C};
    TpSplit wte = tp_layout_split(L, 0, "wte"), lm = tp_layout_split(L, head, "lm_head");
    if (q.kind == TP_REPLICATED) q.count = tp->C;
    if (w1.kind == TP_REPLICATED) w1.count = 4 * tp->C;
    if (lm.kind == TP_REPLICATED) lm.first = 0, lm.count = tp->V;
    tp->Ct = q.count;
    tp->NHt = q.count / (tp->C / tp->NH);
    tp->Ht = w1.count;
    tp->Cw = w2.kind == TP_COLUMNS ? w2.count : tp->C;
    tp->v0 = wte.first, tp->nv = wte.count;
    tp->lm0 = lm.first, tp->nlm = lm.count;
}

// ---- activations ------------------------------------------------------------------

static float *acts(size_t n, const char *name) { return mem_alloc_floats(n, MEM_ACTS, name); }

void tpm_alloc_acts(TpModel *tm, int B, int T) {
    Tp *tp = tm->tp;
    const int L = tm->m->cfg.L, C = tp->C;
    const size_t M = (size_t)B * T, MC = M * C;
    tp->B = B, tp->T = T;
    tm->tokens = mem_alloc(M * sizeof(int), MEM_ACTS, "tokens");
    tm->targets = mem_alloc(M * sizeof(int), MEM_ACTS, "targets");
    tm->stream = calloc((size_t)tm->nunits + 1, sizeof *tm->stream);
    tm->dstream = calloc((size_t)tm->nunits + 1, sizeof *tm->dstream);
    float ***per_block[] = {&tm->ln1, &tm->ln1_mean, &tm->ln1_rstd, &tm->mid, &tm->ln2, &tm->ln2_mean, &tm->ln2_rstd};
    for (size_t i = 0; i < sizeof per_block / sizeof per_block[0]; i++)
        *per_block[i] = calloc((size_t)(L ? L : 1), sizeof(float *));
    tm->acts = calloc((size_t)(L ? L : 1), sizeof *tm->acts);
    for (int u = 1; u < tm->nunits; u++) {
        tm->stream[u] = acts(MC, "residual stream");
        tm->dstream[u] = acts(MC, "residual stream gradient");
    }
    const size_t att = (size_t)B * tp->NHt * T * T;
    for (int l = 0; l < L; l++) {
        tm->ln1[l] = acts(MC, "ln1");
        tm->ln1_mean[l] = acts(M, "ln1 mean");
        tm->ln1_rstd[l] = acts(M, "ln1 rstd");
        tm->mid[l] = acts(MC, "residual mid");
        tm->ln2[l] = acts(MC, "ln2");
        tm->ln2_mean[l] = acts(M, "ln2 mean");
        tm->ln2_rstd[l] = acts(M, "ln2 rstd");
        TpBlockActs *a = &tm->acts[l];
        a->q = acts(M * tp->Ct, "q");
        a->k = acts(M * tp->Ct, "k");
        a->v = acts(M * tp->Ct, "v");
        a->att = acts(att, "attention");
        a->y = acts(M * tp->Ct, "attention out");
        a->h = acts(M * tp->Ht, "mlp hidden");
        a->hg = acts(M * tp->Ht, "mlp gelu");
        a->hg_all = tp->naive ? acts(4 * MC, "mlp gelu, all-gathered") : NULL;
    }
    tm->lnf = acts(MC, "lnf");
    tm->lnf_mean = acts(M, "lnf mean");
    tm->lnf_rstd = acts(M, "lnf rstd");
    tm->losses = acts(M, "losses");
    tm->head.logits = acts(M * tp->nlm, "logits (this rank's columns)");
    tm->head.mx = acts(M, "row max");
    tm->head.sumexp = acts(M, "sum of exp");
    tm->head.target_logit = acts(M, "target logit");
    tm->head.target_ids = mem_alloc(M * sizeof(int), MEM_ACTS, "target ids");
    tm->branch = acts(MC, "scratch");
    tm->branch2 = acts(MC, "scratch");
    tm->dln = acts(MC, "scratch");
    TpScratch *s = &tp->s;
    for (int i = 0; i < 4; i++) s->ct[i] = acts(M * tp->Ct, "scratch");
    s->att = acts(att, "scratch");
    for (int i = 0; i < 2; i++) s->ht[i] = acts(M * tp->Ht, "scratch");
    for (int i = 0; i < 2; i++) s->wide[i] = tp->naive ? acts(4 * MC, "scratch") : NULL;
    for (int i = 0; i < 2; i++) s->c[i] = acts(MC, "scratch");
    s->logits = acts(M * tp->nlm, "scratch");
    s->ids = mem_alloc(M * sizeof(int), MEM_ACTS, "scratch ids");
}

void tpm_free(TpModel *tm) {
    Tp *tp = tm->tp;
    mem_free(tm->tokens);
    mem_free(tm->targets);
    for (int u = 1; u < tm->nunits; u++) mem_free(tm->stream[u]), mem_free(tm->dstream[u]);
    for (int l = 0; l < tm->m->cfg.L; l++) {
        TpBlockActs *a = &tm->acts[l];
        void *all[] = {tm->ln1[l], tm->ln1_mean[l], tm->ln1_rstd[l], tm->mid[l], tm->ln2[l], tm->ln2_mean[l],
                       tm->ln2_rstd[l], a->q, a->k, a->v, a->att, a->y, a->h, a->hg, a->hg_all};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    }
    void *rest[] = {tm->lnf, tm->lnf_mean, tm->lnf_rstd, tm->losses, tm->head.logits, tm->head.mx, tm->head.sumexp,
                    tm->head.target_logit, tm->head.target_ids, tm->branch, tm->branch2, tm->dln, tp->s.ct[0],
                    tp->s.ct[1], tp->s.ct[2], tp->s.ct[3], tp->s.att, tp->s.ht[0], tp->s.ht[1], tp->s.wide[0],
                    tp->s.wide[1], tp->s.c[0], tp->s.c[1], tp->s.logits, tp->s.ids};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    free(tm->stream);
    free(tm->dstream);
    free(tm->ln1), free(tm->ln1_mean), free(tm->ln1_rstd), free(tm->mid), free(tm->ln2), free(tm->ln2_mean),
        free(tm->ln2_rstd);
    free(tm->acts);
    tp_layout_free(&tm->L);
}

void tpm_set_batch(TpModel *tm, const int *x, const int *y, int step, int row0, float loss_scale) {
    const Tp *tp = tm->tp;
    size_t M = (size_t)tp->B * tp->T;
    gpt_check_tokens(x, y, M, tp->V);
    mem_from_host(tm->tokens, x, M * sizeof(int));
    mem_from_host(tm->targets, y, M * sizeof(int));
    tm->step = step, tm->row0 = row0;
    tm->tp->loss_scale = loss_scale;
}

// ---- forward and backward: the single-device model's order (gpt.c) ---------------

static DropoutKey dropout_key(const TpModel *tm, int layer, int site) {
    DropoutKey k = {.seed = tm->m->cfg.seed, .layer = layer, .site = site, .step = tm->step, .row0 = tm->row0,
                    .t0 = 0, .c0 = 0, .Tg = tm->tp->T, .Cg = tm->tp->C};
    return k;
}

// x_out = x + dropout(branch). The branch is whole on every rank (after g),
// so every rank draws the same mask, as one device would.
static void residual(TpModel *tm, float *x_out, const float *x, const float *branch, int layer, int site) {
    const Tp *tp = tm->tp;
    if (tm->dropout > 0) {
        ops_dropout_forward(tm->branch2, branch, tm->dropout, dropout_key(tm, layer, site), tp->B, tp->T, tp->C);
        branch = tm->branch2;
    }
    ops_add(x_out, x, branch, (size_t)tp->B * tp->T * tp->C);
}

static const float *branch_grad(TpModel *tm, const float *dout, int layer, int site) {
    const Tp *tp = tm->tp;
    if (tm->dropout == 0) return dout;
    ops_fill(tm->branch2, 0, (size_t)tp->B * tp->T * tp->C);
    ops_dropout_backward(tm->branch2, dout, tm->dropout, dropout_key(tm, layer, site), tp->B, tp->T, tp->C);
    return tm->branch2;
}

static void block_forward(TpModel *tm, int u, float *params) {
    Tp *tp = tm->tp;
    const int M = tp->B * tp->T, C = tp->C, l = u - 1;
    TpBlockView p = tp_layout_block_view(&tm->L, u, params);
    TpBlockActs *a = &tm->acts[l];
    const float *x = tm->stream[u];
    const size_t MC = (size_t)M * C;
    ops_layernorm_forward(tm->ln1[l], tm->ln1_mean[l], tm->ln1_rstd[l], x, p.ln1w, p.ln1b, M, C);
    ops_fill(tm->branch, 0, MC);
    tp_attention_forward(tp, a, &p, tm->ln1[l], tm->branch);
    residual(tm, tm->mid[l], x, tm->branch, u, 1);
    ops_layernorm_forward(tm->ln2[l], tm->ln2_mean[l], tm->ln2_rstd[l], tm->mid[l], p.ln2w, p.ln2b, M, C);
    ops_fill(tm->branch, 0, MC);
    (tp->naive ? tp_naive_mlp_forward : tp_mlp_forward)(tp, a, &p, tm->ln2[l], tm->branch);
    residual(tm, tm->stream[u + 1], tm->mid[l], tm->branch, u, 2);
}

static void block_backward(TpModel *tm, int u, float *params, float *grads) {
    Tp *tp = tm->tp;
    const int M = tp->B * tp->T, C = tp->C, l = u - 1;
    const size_t MC = (size_t)M * C;
    TpBlockView p = tp_layout_block_view(&tm->L, u, params), g = tp_layout_block_view(&tm->L, u, grads);
    TpBlockActs *a = &tm->acts[l];
    float *dmid = tm->branch;
    const float *dbranch = branch_grad(tm, tm->dstream[u + 1], u, 2);
    ops_fill(tm->dln, 0, MC);
    (tp->naive ? tp_naive_mlp_backward : tp_mlp_backward)(tp, a, &p, &g, tm->ln2[l], dbranch, tm->dln);
    mem_copy(dmid, tm->dstream[u + 1], MC * sizeof(float));   // the residual path
    ops_layernorm_backward(dmid, g.ln2w, g.ln2b, tm->dln, tm->mid[l], p.ln2w, tm->ln2_mean[l], tm->ln2_rstd[l], M, C);
    dbranch = branch_grad(tm, dmid, u, 1);
    ops_fill(tm->dln, 0, MC);
    tp_attention_backward(tp, a, &p, &g, tm->ln1[l], dbranch, tm->dln);
    float *dx = tm->dstream[u];
    mem_copy(dx, dmid, MC * sizeof(float));
    ops_layernorm_backward(dx, g.ln1w, g.ln1b, tm->dln, tm->stream[u], p.ln1w, tm->ln1_mean[l], tm->ln1_rstd[l], M, C);
}

static void embed_forward(TpModel *tm, float *params) {
    Tp *tp = tm->tp;
    TpEmbedView p = tp_layout_embed_view(&tm->L, params);
    float *out = tm->dropout > 0 ? tm->branch : tm->stream[1];
    ops_fill(out, 0, (size_t)tp->B * tp->T * tp->C);
    tp_embed_forward(tp, &p, tm->tokens, out);
    if (tm->dropout > 0)
        ops_dropout_forward(tm->stream[1], out, tm->dropout, dropout_key(tm, 0, 0), tp->B, tp->T, tp->C);
}

static void embed_backward(TpModel *tm, float *grads) {
    TpEmbedView g = tp_layout_embed_view(&tm->L, grads);
    tp_embed_backward(tm->tp, &g, tm->tokens, branch_grad(tm, tm->dstream[1], 0, 0));
}

static void head_forward(TpModel *tm, float *params) {
    Tp *tp = tm->tp;
    const int M = tp->B * tp->T;
    TpHeadView p = tp_layout_head_view(&tm->L, params);
    ops_layernorm_forward(tm->lnf, tm->lnf_mean, tm->lnf_rstd, tm->stream[tm->nunits - 1], p.lnfw, p.lnfb, M, tp->C);
    ops_fill(tm->losses, 0, (size_t)M);
    tp_head_forward(tp, &tm->head, &p, tm->lnf, tm->targets, tm->losses);
}

static void head_backward(TpModel *tm, float *params, float *grads) {
    Tp *tp = tm->tp;
    const int M = tp->B * tp->T;
    const size_t MC = (size_t)M * tp->C;
    TpHeadView p = tp_layout_head_view(&tm->L, params), g = tp_layout_head_view(&tm->L, grads);
    ops_fill(tm->dln, 0, MC);
    tp_head_backward(tp, &tm->head, &p, &g, tm->lnf, tm->dln);
    float *dx = tm->dstream[tm->nunits - 1];
    ops_fill(dx, 0, MC);
    ops_layernorm_backward(dx, g.lnfw, g.lnfb, tm->dln, tm->stream[tm->nunits - 1], p.lnfw, tm->lnf_mean,
                           tm->lnf_rstd, M, tp->C);
}

void tpm_unit_forward(TpModel *tm, int u, float *params) {
    switch (tm->m->units[u].kind) {
    case UNIT_EMBED: embed_forward(tm, params); break;
    case UNIT_BLOCK: block_forward(tm, u, params); break;
    case UNIT_HEAD: head_forward(tm, params); break;
    }
}

void tpm_unit_backward(TpModel *tm, int u, float *params, float *grads) {
    switch (tm->m->units[u].kind) {
    case UNIT_EMBED: embed_backward(tm, grads); break;
    case UNIT_BLOCK: block_backward(tm, u, params, grads); break;
    case UNIT_HEAD: head_backward(tm, params, grads); break;
    }
}

double tpm_loss(const TpModel *tm) {
    size_t M = (size_t)tm->tp->B * tm->tp->T;
    return ops_sum(tm->losses, M) / (double)M;
}

// ---- the probe ----------------------------------------------------------------------

// Random values of a stream, the same on every rank.
static float *random_host(size_t n, uint32_t which, float std) {
    float *x = malloc(n * sizeof *x);
    CHECK(x, "out of memory");
    rng_fill_normal(x, n, 0x7e57ull, rng_stream(RNG_TEST, 4000 + which, 0), 0, 0, std);
    return x;
}

static float *device_copy(const float *host, size_t n) {
    float *d = mem_alloc_floats(n, MEM_OTHER, "probe");
    mem_from_host(d, host, n * sizeof(float));
    return d;
}

// 1 when every rank of the group holds the same n floats (to a relative
// 1e-6 of their size: an all-reduce may round alike or not), else 0.
static double agree(const Tp *tp, const float *dev, size_t n) {
    float *h = malloc(n * sizeof *h);
    mem_to_host(h, dev, n * sizeof(float));
    double s[2] = {0, 0};
    for (size_t i = 0; i < n; i++) s[0] += h[i] * (double)(i % 7 + 1), s[1] += (double)h[i] * h[i];
    free(h);
    double *all = malloc((size_t)tp->t * sizeof s);
    comm_all_gather_host(tp->group, s, sizeof s, all);
    double ok = 1;
    for (int q = 1; q < tp->t; q++)
        for (int i = 0; i < 2; i++)
            if (fabs(all[2 * q + i] - all[i]) > 1e-6 * (fabs(all[i]) + sqrt(all[1]) + 1e-30)) ok = 0;
    free(all);
    return ok;
}

// Whether a float the student's code computed is b, to a relative 1e-4
// (a float's sums of a few hundred terms against the host's in double).
static bool near(float a, double b) { return fabs(a - b) <= 1e-4 * (1 + fabs(b)); }

static int imax(int a, int b) { return a > b ? a : b; }

// The mean of (b - a) over n floats, divided by delta.
static double mean_shift(const float *a, const float *b, size_t n, double delta) {
    float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    mem_to_host(ha, a, n * sizeof(float));
    mem_to_host(hb, b, n * sizeof(float));
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)hb[i] - ha[i];
    free(ha);
    free(hb);
    return s / (double)n / delta;
}

// One layer (attention or the MLP) of block unit 1 on random parameters:
// its output's agreement over ranks and its shift with the bias after g,
// and its input gradient's agreement.
static void probe_layer(TpModel *tm, float *params, float *grads, const float *x, const float *dout, bool mlp,
                        double *bias, double *out_agree, double *dx_agree) {
    Tp *tp = tm->tp;
    const size_t MC = (size_t)tp->B * tp->T * tp->C;
    TpBlockView p = tp_layout_block_view(&tm->L, 1, params), g = tp_layout_block_view(&tm->L, 1, grads);
    TpBlockActs *a = &tm->acts[0];
    void (*fwd)(Tp *, TpBlockActs *, const TpBlockView *, const float *, float *) =
        !mlp ? tp_attention_forward : tp->naive ? tp_naive_mlp_forward : tp_mlp_forward;
    void (*bwd)(Tp *, TpBlockActs *, const TpBlockView *, TpBlockView *, const float *, const float *, float *) =
        !mlp ? tp_attention_backward : tp->naive ? tp_naive_mlp_backward : tp_mlp_backward;
    float *out1 = tm->branch, *out2 = tm->branch2;
    ops_fill(out1, 0, MC);
    fwd(tp, a, &p, x, out1);
    *out_agree = agree(tp, out1, MC);
    // The bias after g (replicated: b2 in the naive MLP is split, and its
    // shift is whole only when gathered, which the same measure sees).
    float *b = mlp ? p.b2 : p.bo;
    size_t nb = (size_t)(mlp && tp->naive ? tp->Cw : tp->C);
    float *one = random_host(nb, 99, 0);
    for (size_t i = 0; i < nb; i++) one[i] = 1.0f;
    float *d_one = device_copy(one, nb);
    ops_accumulate(b, d_one, nb);
    ops_fill(out2, 0, MC);
    fwd(tp, a, &p, x, out2);
    *bias = mean_shift(out1, out2, MC, 1.0);
    ops_scale(d_one, -1.0f, nb);
    ops_accumulate(b, d_one, nb);
    mem_free(d_one);
    free(one);
    ops_fill(out1, 0, MC);
    fwd(tp, a, &p, x, out1);   // the activations of the first parameters again
    ops_fill(tm->dln, 0, MC);
    bwd(tp, a, &p, &g, x, dout, tm->dln);
    *dx_agree = agree(tp, tm->dln, MC);
}

TpProbe tpm_probe(TpModel *tm) {
    Tp *tp = tm->tp;
    const Gpt *m = tm->m;
    const int M = tp->B * tp->T, C = tp->C, V = tp->V;
    const size_t MC = (size_t)M * C;
    TpProbe pr = {.attn_bias = 1, .mlp_bias = 1, .attn_out_agree = 1, .mlp_out_agree = 1, .attn_dx_agree = 1,
                  .mlp_dx_agree = 1, .head_dx_agree = 1};
    float *hx = random_host(MC, 1, 1.0f), *hd = random_host(MC, 2, 1.0f);
    float *x = device_copy(hx, MC), *dout = device_copy(hd, MC);
    // Blocks: unit 1's parts of a random whole unit (every tensor non-zero).
    if (m->cfg.L > 0) {
        float *whole = random_host(m->units[1].size, 3, 0.3f);
        float *params = mem_alloc_floats(tm->L.size[1], MEM_OTHER, "probe params");
        float *grads = mem_alloc_floats(tm->L.size[1], MEM_OTHER, "probe grads");
        tp_layout_parts_from_whole(&tm->L, 1, params, whole);
        probe_layer(tm, params, grads, x, dout, false, &pr.attn_bias, &pr.attn_out_agree, &pr.attn_dx_agree);
        probe_layer(tm, params, grads, x, dout, true, &pr.mlp_bias, &pr.mlp_out_agree, &pr.mlp_dx_agree);
        mem_free(params);
        mem_free(grads);
        free(whole);
    }
    // The head: logits spread over several units, so that the rows' maxima
    // differ from rank to rank; the loss against the whole vocabulary's in
    // double, from the whole lm_head, on the first 64 rows (the host's sums
    // cost rows x C x V: at GPT-2's vocabulary, every row would take minutes).
    int u = m->nunits - 1;
    float *whole = random_host(m->units[u].size, 5, 3.0f / sqrtf((float)C));
    float *params = mem_alloc_floats(tm->L.size[u], MEM_OTHER, "probe params");
    float *grads = mem_alloc_floats(tm->L.size[u], MEM_OTHER, "probe grads");
    tp_layout_parts_from_whole(&tm->L, u, params, whole);
    int *ht = malloc((size_t)M * sizeof *ht);
    for (int i = 0; i < M; i++) ht[i] = (int)(rng_u32(0x7e57ull, rng_stream(RNG_TEST, 4006, 0), (uint64_t)i) % (uint32_t)V);
    mem_from_host(tm->targets, ht, (size_t)M * sizeof(int));
    TpHeadView p = tp_layout_head_view(&tm->L, params), g = tp_layout_head_view(&tm->L, grads);
    float *losses = tm->losses;
    ops_fill(losses, 0, (size_t)M);
    tp_head_forward(tp, &tm->head, &p, x, tm->targets, losses);
    // The loss and its parts (TpHeadActs) of the first R rows, on the host;
    // every rank's columns of lm_head, for the parts each rank computes.
    const int R = M < 64 ? M : 64;
    float *hl = malloc(4 * (size_t)R * sizeof *hl), *hmx = hl + R, *hse = hl + 2 * R, *htl = hl + 3 * R;
    mem_to_host(hl, losses, (size_t)R * sizeof(float));
    mem_to_host(hmx, tm->head.mx, (size_t)R * sizeof(float));
    mem_to_host(hse, tm->head.sumexp, (size_t)R * sizeof(float));
    mem_to_host(htl, tm->head.target_logit, (size_t)R * sizeof(float));
    int cols[2] = {tp->lm0, tp->nlm}, *all_cols = malloc(2 * (size_t)tp->t * sizeof *all_cols);
    comm_all_gather_host(tp->group, cols, sizeof cols, all_cols);
    const GptTensor *lm = &m->units[u].tensors[2];
    double worst = 0;
    double *row = malloc((size_t)V * sizeof *row);
    for (int i = 0; i < R; i++) {
        double mx = -INFINITY;
        for (int v = 0; v < V; v++) {
            double z = 0;
            for (int c = 0; c < C; c++) z += (double)hx[(size_t)i * C + c] * whole[lm->offset + (size_t)c * V + v];
            row[v] = z;
            mx = fmax(mx, z);
        }
        // Each rank's columns: their maximum, and their exponentials against
        // the whole row's maximum and against their own.
        double s = 0, s_largest = 0, s_own = 0, own_mx = mx, unshifted = 0, target = row[ht[i]];
        for (int q = 0; q < tp->t; q++) {
            int lm0 = all_cols[2 * q], nlm = all_cols[2 * q + 1];
            double qmx = -INFINITY, sq = 0, sq_own = 0;
            for (int v = lm0; v < lm0 + nlm; v++) qmx = fmax(qmx, row[v]);
            for (int v = lm0; v < lm0 + nlm; v++) sq += exp(row[v] - mx), sq_own += exp(row[v] - qmx);
            s += sq, s_largest = fmax(s_largest, sq), s_own += sq_own;
            if (q == tp->r) own_mx = qmx;
            if (ht[i] < nlm) unshifted += row[lm0 + ht[i]];   // its id read as a place among q's columns
        }
        double held = ht[i] >= tp->lm0 && ht[i] < tp->lm0 + tp->nlm ? target : 0;
        double want = log(s) + mx - target;
        worst = fmax(worst, fabs(hl[i] - want) / (1 + fabs(want)));
        if (!(hl[i] == hl[i])) worst = INFINITY;
        pr.ce_max = imax(pr.ce_max, near(hmx[i], mx) ? 0 : near(hmx[i], own_mx) ? 1 : 2);
        pr.ce_sumexp = imax(pr.ce_sumexp, near(hse[i], s) ? 0 : near(hse[i], s_largest) ? 1 : near(hse[i], s_own) ? 2 : 3);
        pr.ce_target = imax(pr.ce_target, near(htl[i], target) ? 0 : near(htl[i], unshifted) ? 1 : near(htl[i], held) ? 2 : 3);
    }
    free(row);
    free(all_cols);
    pr.head_loss_err = worst;
    tp->loss_scale = 1.0f / (float)M;
    ops_fill(tm->dln, 0, MC);
    tp_head_backward(tp, &tm->head, &p, &g, x, tm->dln);
    pr.head_dx_agree = agree(tp, tm->dln, MC);
    mem_free(params);
    mem_free(grads);
    free(whole);
    free(hl);
    // The embedding: exactly wte[token] + wpe[t] (one row of each is added).
    whole = random_host(m->units[0].size, 7, 1.0f);
    params = mem_alloc_floats(tm->L.size[0], MEM_OTHER, "probe params");
    tp_layout_parts_from_whole(&tm->L, 0, params, whole);
    mem_from_host(tm->tokens, ht, (size_t)M * sizeof(int));
    TpEmbedView e = tp_layout_embed_view(&tm->L, params);
    ops_fill(tm->branch, 0, MC);
    tp_embed_forward(tp, &e, tm->tokens, tm->branch);
    float *got = malloc(MC * sizeof *got);
    mem_to_host(got, tm->branch, MC * sizeof(float));
    worst = 0;
    for (int i = 0; i < M; i++)
        for (int c = 0; c < C; c++) {
            double want = (double)whole[(size_t)ht[i] * C + c] + whole[(size_t)V * C + (size_t)(i % tp->T) * C + c];
            double err = fabs(got[(size_t)i * C + c] - want) / (1 + fabs(want));
            worst = err <= worst ? worst : err;
        }
    pr.embed_err = worst;
    mem_free(params);
    free(whole);
    free(got);
    free(ht);
    mem_free(x);
    mem_free(dout);
    free(hx);
    free(hd);
    // The group's worst.
    double *f[] = {&pr.attn_out_agree, &pr.mlp_out_agree, &pr.attn_dx_agree, &pr.mlp_dx_agree, &pr.head_dx_agree};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = -comm_max_double(tp->group, -*f[i]);
    double *w[] = {&pr.head_loss_err, &pr.embed_err};
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) *w[i] = comm_max_double(tp->group, *w[i]);
    int *codes[] = {&pr.ce_max, &pr.ce_sumexp, &pr.ce_target};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) *codes[i] = (int)comm_max_double(tp->group, *codes[i]);
    double *b[] = {&pr.attn_bias, &pr.mlp_bias};
    for (size_t i = 0; i < 2; i++) {   // the one farthest from 1
        double hi = comm_max_double(tp->group, *b[i]), lo = -comm_max_double(tp->group, -*b[i]);
        *b[i] = fabs(hi - 1) >= fabs(lo - 1) ? hi : lo;
    }
    return pr;
}
