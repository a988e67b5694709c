// model_given.c: the model around the student's split layers (model_given.h).
#include "model_given.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"
#include "tp_net.h"
#include "tp_probe.h"

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

// ---- the student's layers, as the composition calls them (common/tp_net.h) -----------

static void attention_forward(void *tp, void *a, const GptBlockView *p, const void *x, void *out) {
    tp_attention_forward(tp, a, p, x, out);
}

static void attention_backward(void *tp, void *a, const GptBlockView *p, GptBlockView *g, const void *x,
                               const float *dout, void *dx) {
    tp_attention_backward(tp, a, p, g, x, dout, dx);
}

static void mlp_forward(void *ctx, void *a, const GptBlockView *p, const void *x, void *out) {
    Tp *tp = ctx;
    (tp->naive ? tp_naive_mlp_forward : tp_mlp_forward)(tp, a, p, x, out);
}

static void mlp_backward(void *ctx, void *a, const GptBlockView *p, GptBlockView *g, const void *x,
                         const float *dout, void *dx) {
    Tp *tp = ctx;
    (tp->naive ? tp_naive_mlp_backward : tp_mlp_backward)(tp, a, p, g, x, dout, dx);
}

static void embed_forward(void *tp, const GptEmbedView *p, const int *tokens, void *out) {
    tp_embed_forward(tp, p, tokens, out);
}

static void embed_backward(void *tp, GptEmbedView *g, const int *tokens, const float *dout) {
    tp_embed_backward(tp, g, tokens, dout);
}

static void head_forward(void *tp, TpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                         float *losses) {
    tp_head_forward(tp, a, p, x, targets, losses);
}

static void head_backward(void *tp, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x,
                          void *dx) {
    tp_head_backward(tp, a, p, g, x, dx);
}

static const TpNetLayers student_layers = {
    .attention_forward = attention_forward, .mlp_forward = mlp_forward,
    .attention_backward = attention_backward, .mlp_backward = mlp_backward,
    .embed_forward = embed_forward, .embed_backward = embed_backward,
    .head_forward = head_forward, .head_backward = head_backward,
};

// ---- activations ------------------------------------------------------------------

static float *acts(size_t n, const char *name) { return mem_alloc_floats(n, MEM_ACTS, name); }

static size_t zmax(size_t a, size_t b) { return a > b ? a : b; }

void tpm_alloc_acts(TpModel *tm, int B, int T, bool bf16, bool recompute) {
    Tp *tp = tm->tp;
    TpNet *n = &tm->net;
    const int L = tm->m->cfg.L, C = tp->C;
    const size_t M = (size_t)B * T, MC = M * C;
    CHECK(!(bf16 && tp->naive), "the naive MLP runs in fp32 only; run it without --precision bf16 (or with --mlp "
          "megatron)");
    tp->B = B, tp->T = T;
    // The run's precision: bf16's widening scratch holds the largest operand
    // of a product (M rows of C, Ct, Ht or this rank's vocabulary columns:
    // the head's logits, the widest where V > 4C) and one attention's
    // probabilities.
    const size_t att = (size_t)B * tp->NHt * T * T;
    prec_init(&tm->prec, bf16, M * zmax(zmax((size_t)C, (size_t)tp->Ct), zmax((size_t)tp->Ht, (size_t)tp->nlm)), att);
    const Prec *pr = &tm->prec;
    tp->prec = pr, tp->type = pr->type;
    n->layers = &student_layers, n->ctx = tp, n->m = tm->m, n->L = &tm->L, n->prec = pr;
    n->B = B, n->T = T, n->C = C, n->seed = tm->m->cfg.seed;
    n->tokens = mem_alloc(M * sizeof(int), MEM_ACTS, "tokens");
    n->targets = mem_alloc(M * sizeof(int), MEM_ACTS, "targets");
    n->stream = calloc((size_t)tm->nunits + 1, sizeof *n->stream);
    n->dstream = calloc((size_t)tm->nunits + 1, sizeof *n->dstream);
    // A set of kept tensors a block; under full recomputation one, shared:
    // each block's input is the residual stream, kept whatever the mode.
    tm->nsets = recompute && L > 0 ? 1 : L;
    n->blocks = calloc((size_t)(L ? L : 1), sizeof *n->blocks);
    tm->acts = calloc((size_t)(L ? L : 1), sizeof *tm->acts);
    for (int u = 1; u < tm->nunits; u++) {
        n->stream[u] = prec_alloc(pr, MC, MEM_ACTS, "residual stream");
        n->dstream[u] = prec_alloc(pr, MC, MEM_ACTS, "residual stream gradient");
    }
    n->rc = recompute && L > 0 ? &n->blocks[0] : NULL;
    for (int l = 0; l < tm->nsets; l++) {
        tp_net_block_alloc(&n->blocks[l], M, C, MEM_ACTS, pr);
        TpBlockActs *a = &tm->acts[l];
        n->blocks[l].layers = a;
        a->q = prec_alloc(pr, M * tp->Ct, MEM_ACTS, "q");
        a->k = prec_alloc(pr, M * tp->Ct, MEM_ACTS, "k");
        a->v = prec_alloc(pr, M * tp->Ct, MEM_ACTS, "v");
        a->att = prec_alloc(pr, att, MEM_ACTS, "attention");
        a->y = prec_alloc(pr, M * tp->Ct, MEM_ACTS, "attention out");
        a->h = prec_alloc(pr, M * tp->Ht, MEM_ACTS, "mlp hidden");
        a->hg = prec_alloc(pr, M * tp->Ht, MEM_ACTS, "mlp gelu");
        a->hg_all = tp->naive ? acts(4 * MC, "mlp gelu, all-gathered") : NULL;
    }
    n->lnf.out = prec_alloc(pr, MC, MEM_ACTS, "lnf");
    n->lnf.mean = acts(M, "lnf mean");
    n->lnf.rstd = acts(M, "lnf rstd");
    n->losses = acts(M, "losses");
    tp_net_head_alloc(&tm->head, M, tp->nlm, MEM_ACTS);
    n->head = &tm->head;
    n->branch = prec_alloc(pr, MC, MEM_ACTS, "scratch");
    n->branch2 = acts(MC, "scratch");
    n->dln = prec_alloc(pr, MC, MEM_ACTS, "scratch");
    size_t unit = 0;
    for (int u = 0; u < tm->nunits; u++) unit = zmax(unit, tm->L.size[u]);
    tp_net_alloc_bf16(n, M, C, unit);
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
    TpNet *n = &tm->net;
    mem_free(n->tokens);
    mem_free(n->targets);
    for (int u = 1; u < tm->nunits; u++) mem_free(n->stream[u]), mem_free(n->dstream[u]);
    for (int l = 0; l < tm->nsets; l++) {
        tp_net_block_free(&n->blocks[l]);
        TpBlockActs *a = &tm->acts[l];
        void *all[] = {a->q, a->k, a->v, a->att, a->y, a->h, a->hg, a->hg_all};
        for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    }
    tp_net_head_free(&tm->head);
    void *rest[] = {n->lnf.out, n->lnf.mean, n->lnf.rstd, n->losses, n->branch, n->branch2, n->dln, tp->s.ct[0],
                    tp->s.ct[1], tp->s.ct[2], tp->s.ct[3], tp->s.att, tp->s.ht[0], tp->s.ht[1], tp->s.wide[0],
                    tp->s.wide[1], tp->s.c[0], tp->s.c[1], tp->s.logits, tp->s.ids};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    free(n->stream);
    free(n->dstream);
    free(n->blocks);
    free(tm->acts);
    tp_net_free_bf16(n);
    prec_free(&tm->prec);
    tp_layout_free(&tm->L);
}

void tpm_set_batch(TpModel *tm, const int *x, const int *y, int step, int row0, float loss_scale) {
    TpNet *n = &tm->net;
    size_t M = (size_t)n->B * n->T;
    gpt_check_tokens(x, y, M, tm->tp->V);
    mem_from_host(n->tokens, x, M * sizeof(int));
    mem_from_host(n->targets, y, M * sizeof(int));
    n->step = step, n->row0 = row0;
    tm->tp->loss_scale = loss_scale;
}

double tpm_loss(const TpModel *tm) {
    size_t M = (size_t)tm->net.B * tm->net.T;
    return ops_sum(tm->net.losses, M) / (double)M;
}

// ---- the probe ----------------------------------------------------------------------

// Random values of a stream, the same on every rank.
static float *random_host(size_t n, uint32_t which, float std) {
    return tp_probe_random(n, 0x7e57ull, 4000 + which, std);
}

static int imax(int a, int b) { return a > b ? a : b; }

// A host input as the layers take it: of the run's type on the device. In
// bf16 the host values are rounded first, so that the sums the probe
// compares against are of what the layers saw.
static void *probe_input(const Prec *pr, float *host, size_t n) {
    if (!pr->bf16) return tp_probe_on_device(host, n);
    bf16 *h = malloc(n * sizeof *h);
    CHECK(h, "out of memory");
    for (size_t i = 0; i < n; i++) h[i] = bf16_from_float(host[i]), host[i] = bf16_to_float(h[i]);
    bf16 *d = mem_alloc_bf16(n, MEM_OTHER, "probe");
    mem_from_host(d, h, n * sizeof *h);
    free(h);
    return d;
}

// A buffer of the run's type copied into fp32 (f, on the device).
static float *probe_f32(const Prec *pr, float *f, const void *t, size_t n) {
    if (pr->bf16) ops_from_bf16(f, t, n);
    else mem_copy(f, t, n * sizeof(float));
    return f;
}

// One layer (attention or the MLP) of block unit 1 on random parameters:
// its output's agreement over ranks and its shift with the bias after g,
// and its input gradient's agreement.
static void probe_layer(TpModel *tm, float *params, float *grads, const void *x, const float *dout, bool mlp,
                        float *f1, float *f2, double *bias, double *out_agree, double *dx_agree) {
    Tp *tp = tm->tp;
    const Prec *pr = tp->prec;
    const size_t MC = (size_t)tp->B * tp->T * tp->C;
    TpBlockView p = tp_layout_block_view(&tm->L, 1, params), g = tp_layout_block_view(&tm->L, 1, grads);
    TpBlockActs *a = &tm->acts[0];
    TpLayerForward fwd = mlp ? student_layers.mlp_forward : student_layers.attention_forward;
    TpLayerBackward bwd = mlp ? student_layers.mlp_backward : student_layers.attention_backward;
    void *out = tm->net.branch, *dx = tm->net.dln;   // the run's type
    mem_zero(out, MC * pr->elem);
    fwd(tp, a, &p, x, out);
    const float *out1 = probe_f32(pr, f1, out, MC);
    *out_agree = tp_probe_agree(tp->group, out1, MC);
    // The bias after g (replicated: b2 in the naive MLP is split, and its
    // shift is whole only when gathered, which the same measure sees).
    float *b = mlp ? p.b2 : p.bo;
    size_t nb = (size_t)(mlp && tp->naive ? tp->Cw : tp->C);
    float *one = random_host(nb, 99, 0);
    for (size_t i = 0; i < nb; i++) one[i] = 1.0f;
    float *d_one = tp_probe_on_device(one, nb);
    ops_accumulate(b, d_one, nb);
    mem_zero(out, MC * pr->elem);
    fwd(tp, a, &p, x, out);
    *bias = tp_probe_mean_shift(out1, probe_f32(pr, f2, out, MC), MC, 1.0);
    ops_scale(d_one, -1.0f, nb);
    ops_accumulate(b, d_one, nb);
    mem_free(d_one);
    free(one);
    mem_zero(out, MC * pr->elem);
    fwd(tp, a, &p, x, out);   // the activations of the first parameters again
    mem_zero(dx, MC * pr->elem);
    bwd(tp, a, &p, &g, x, dout, dx);
    *dx_agree = tp_probe_agree(tp->group, probe_f32(pr, f1, dx, MC), MC);
}

TpProbe tpm_probe(TpModel *tm) {
    Tp *tp = tm->tp;
    TpNet *n = &tm->net;
    const Gpt *m = tm->m;
    const int M = tp->B * tp->T, C = tp->C, V = tp->V;
    const size_t MC = (size_t)M * C;
    TpProbe pr = {.attn_bias = 1, .mlp_bias = 1, .attn_out_agree = 1, .mlp_out_agree = 1, .attn_dx_agree = 1,
                  .mlp_dx_agree = 1, .head_dx_agree = 1};
    const Prec *prec = tp->prec;
    float *hx = random_host(MC, 1, 1.0f), *hd = random_host(MC, 2, 1.0f);
    void *x = probe_input(prec, hx, MC);
    float *dout = tp_probe_on_device(hd, MC);
    // fp32 copies of what the layers leave in the run's type.
    float *f1 = mem_alloc_floats(MC, MEM_OTHER, "probe"), *f2 = mem_alloc_floats(MC, MEM_OTHER, "probe");
    // Blocks: unit 1's parts of a random whole unit (every tensor non-zero).
    if (m->cfg.L > 0) {
        float *whole = random_host(m->units[1].size, 3, 0.3f);
        float *params = mem_alloc_floats(tm->L.size[1], MEM_OTHER, "probe params");
        float *grads = mem_alloc_floats(tm->L.size[1], MEM_OTHER, "probe grads");
        tp_layout_parts_from_whole(&tm->L, 1, params, whole);
        probe_layer(tm, params, grads, x, dout, false, f1, f2, &pr.attn_bias, &pr.attn_out_agree, &pr.attn_dx_agree);
        probe_layer(tm, params, grads, x, dout, true, f1, f2, &pr.mlp_bias, &pr.mlp_out_agree, &pr.mlp_dx_agree);
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
    mem_from_host(n->targets, ht, (size_t)M * sizeof(int));
    TpHeadView p = tp_layout_head_view(&tm->L, params), g = tp_layout_head_view(&tm->L, grads);
    float *losses = n->losses;
    ops_fill(losses, 0, (size_t)M);
    tp_head_forward(tp, &tm->head, &p, x, n->targets, losses);
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
        pr.ce_max = imax(pr.ce_max, tp_probe_near(hmx[i], mx) ? 0 : tp_probe_near(hmx[i], own_mx) ? 1 : 2);
        pr.ce_sumexp = imax(pr.ce_sumexp, tp_probe_near(hse[i], s)           ? 0
                                          : tp_probe_near(hse[i], s_largest) ? 1
                                          : tp_probe_near(hse[i], s_own)     ? 2
                                                                             : 3);
        pr.ce_target = imax(pr.ce_target, tp_probe_near(htl[i], target)      ? 0
                                          : tp_probe_near(htl[i], unshifted) ? 1
                                          : tp_probe_near(htl[i], held)      ? 2
                                                                             : 3);
    }
    free(row);
    free(all_cols);
    pr.head_loss_err = worst;
    tp->loss_scale = 1.0f / (float)M;
    mem_zero(n->dln, MC * prec->elem);
    tp_head_backward(tp, &tm->head, &p, &g, x, n->dln);
    pr.head_dx_agree = tp_probe_agree(tp->group, probe_f32(prec, f1, n->dln, MC), MC);
    mem_free(params);
    mem_free(grads);
    free(whole);
    free(hl);
    // The embedding: exactly wte[token] + wpe[t] (one row of each is added).
    whole = random_host(m->units[0].size, 7, 1.0f);
    // (bf16: the table's values bf16's, as the parameters a bf16 run widens are)
    for (size_t i = 0; prec->bf16 && i < m->units[0].size; i++) whole[i] = bf16_to_float(bf16_from_float(whole[i]));
    params = mem_alloc_floats(tm->L.size[0], MEM_OTHER, "probe params");
    tp_layout_parts_from_whole(&tm->L, 0, params, whole);
    mem_from_host(n->tokens, ht, (size_t)M * sizeof(int));
    TpEmbedView e = tp_layout_embed_view(&tm->L, params);
    mem_zero(n->branch, MC * prec->elem);
    tp_embed_forward(tp, &e, n->tokens, n->branch);
    float *got = malloc(MC * sizeof *got);
    mem_to_host(got, probe_f32(prec, f1, n->branch, MC), MC * sizeof(float));
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
    mem_free(f1);
    mem_free(f2);
    free(hx);
    free(hd);
    // The group's worst.
    double *const f[] = {&pr.attn_out_agree, &pr.mlp_out_agree, &pr.attn_dx_agree, &pr.mlp_dx_agree, &pr.head_dx_agree};
    tp_probe_min(tp->group, f, sizeof f / sizeof f[0]);
    double *const w[] = {&pr.head_loss_err, &pr.embed_err};
    tp_probe_max(tp->group, w, sizeof w / sizeof w[0]);
    int *const codes[] = {&pr.ce_max, &pr.ce_sumexp, &pr.ce_target};
    tp_probe_max_int(tp->group, codes, sizeof codes / sizeof codes[0]);
    double *b[] = {&pr.attn_bias, &pr.mlp_bias};
    for (size_t i = 0; i < 2; i++) {   // the one farthest from 1
        double hi = comm_max_double(tp->group, *b[i]), lo = -comm_max_double(tp->group, -*b[i]);
        *b[i] = fabs(hi - 1) >= fabs(lo - 1) ? hi : lo;
    }
    return pr;
}
