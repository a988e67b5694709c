// An adversarial lab04 submission: the MLP without tensor parallelism. tp_split is honest, so the
// parameters, gradients and moments look split; but every rank all-gathers the MLP's whole weights and
// computes the whole layer (its hidden activations in static arrays), then keeps its own part of the
// weight gradients. The output and the input gradient are whole on every rank with no all-reduce.
// tp.c: tensor parallelism, the solution. See tp.h for the hooks and
// README.md for the pictures.
#include "tp.h"

#include <string.h>

#include "comm.h"
#include "core.h"
#include "ops.h"
#include "prec.h"

// ---- 0. the split -------------------------------------------------------------

// Block r of n equal blocks of `whole`.
static TpSplit block(TpSplitKind kind, int whole, const Tp *tp) {
    TpSplit s = {kind, tp->r * (whole / tp->t), whole / tp->t};
    return s;
}

TpSplit tp_split(const Tp *tp, GptUnitKind unit, const GptTensor *t) {
    const char *n = t->name;
    TpSplit whole = {TP_REPLICATED, 0, 0};
    switch (unit) {
    case UNIT_EMBED:   // wte by vocabulary rows; the positions replicated
        return strcmp(n, "wte") == 0 ? block(TP_ROWS, tp->V, tp) : whole;
    case UNIT_HEAD:    // lm_head by vocabulary columns
        return strcmp(n, "lm_head") == 0 ? block(TP_COLUMNS, tp->V, tp) : whole;
    case UNIT_BLOCK: break;
    }
    // Attention: q, k, v by whole heads (the columns of heads r NH/t ..), wo
    // by the same rows, so that each rank's heads meet their own rows of wo.
    if (!strcmp(n, "attn.wq") || !strcmp(n, "attn.wk") || !strcmp(n, "attn.wv")) return block(TP_COLUMNS, tp->C, tp);
    if (!strcmp(n, "attn.bq") || !strcmp(n, "attn.bk") || !strcmp(n, "attn.bv")) return block(TP_ROWS, tp->C, tp);
    if (!strcmp(n, "attn.wo")) return block(TP_ROWS, tp->C, tp);
    // The MLP: w1 by columns (and b1 with them); w2 by rows (Megatron), or by
    // columns (the naive version, b2 with them).
    if (!strcmp(n, "mlp.w1")) return block(TP_COLUMNS, 4 * tp->C, tp);
    if (!strcmp(n, "mlp.b1")) return block(TP_ROWS, 4 * tp->C, tp);
    if (!strcmp(n, "mlp.w2")) return tp->naive ? block(TP_COLUMNS, tp->C, tp) : block(TP_ROWS, 4 * tp->C, tp);
    if (!strcmp(n, "mlp.b2") && tp->naive) return block(TP_ROWS, tp->C, tp);
    return whole;   // LayerNorms, attn.bo, mlp.b2
}

// ---- 1. the lecture's MLP -------------------------------------------------------

// all-gather along the columns: each rank's (M, w) block lands in its
// columns of the whole (M, t w). comm_all_gather puts the blocks one after
// another, (t, M, w), so they are moved into place after.
static void gather_columns(Tp *tp, const float *mine, float *whole, float *scratch, int M, int w) {
    comm_all_gather(tp->group, mine, scratch, (size_t)tp->t * M * w);
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d(whole + (size_t)q * w, tp->t * w, scratch + (size_t)q * M * w, w, M, w);
}

void tp_naive_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    const int M = tp->B * tp->T, C = tp->C, H = 4 * C;
    ops_matmul_forward(a->h, x, p->w1, p->b1, M, C, tp->Ht);            // (M, Ht) my hidden columns
    ops_gelu_forward(a->hg, a->h, (size_t)M * tp->Ht);
    gather_columns(tp, a->hg, a->hg_all, tp->s.wide[0], M, tp->Ht);     // (M, 4C) on every rank
    ops_matmul_forward(tp->s.c[0], a->hg_all, p->w2, p->b2, M, H, tp->Cw);   // (M, Cw) my output columns
    gather_columns(tp, tp->s.c[0], out, tp->s.c[1], M, tp->Cw);         // (M, C) on every rank
}

void tp_naive_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g,
                           const void *x, const float *dout, void *dx) {
    const int M = tp->B * tp->T, C = tp->C, H = 4 * C, Ht = tp->Ht;
    // The all-gather's backward: my columns of dout, no communication.
    float *dmine = tp->s.c[0];   // (M, Cw)
    ops_copy_2d(dmine, tp->Cw, dout + (size_t)tp->r * tp->Cw, C, M, tp->Cw);
    float *dhg_all = tp->s.wide[0];   // (M, 4C): this rank's partial sum of every hidden gradient
    ops_fill(dhg_all, 0, (size_t)M * H);
    ops_matmul_backward(dhg_all, g->w2, g->b2, dmine, a->hg_all, p->w2, M, H, tp->Cw);
    // The first all-gather's backward: a reduce-scatter along the columns
    // (the blocks laid out one after another first), so that each rank
    // holds the sum of its own columns.
    float *blocks = tp->s.wide[1];   // (t, M, Ht)
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d(blocks + (size_t)q * M * Ht, Ht, dhg_all + (size_t)q * Ht, H, M, Ht);
    float *dhg = blocks + (size_t)tp->r * M * Ht;   // in place: this rank's block
    comm_reduce_scatter_sum(tp->group, blocks, dhg, (size_t)tp->t * M * Ht);
    float *dh = tp->s.ht[0];
    ops_fill(dh, 0, (size_t)M * Ht);
    ops_gelu_backward(dh, dhg, a->h, (size_t)M * Ht);
    // Every rank's input gradient is a partial sum over its hidden columns.
    ops_matmul_backward(dx, g->w1, g->b1, dh, x, p->w1, M, C, Ht);
    comm_all_reduce_sum(tp->group, dx, (size_t)M * C);
}

// ---- 2. f and g -----------------------------------------------------------------

// In the run's type: in bf16 the partial sums travel as bf16, half the bytes.
void tp_f_backward(Tp *tp, void *dx, size_t n) { comm_all_reduce_typed(tp->group, dx, n, tp->type, COMM_SUM); }

void tp_g_forward(Tp *tp, void *x, size_t n) { comm_all_reduce_typed(tp->group, x, n, tp->type, COMM_SUM); }

// ---- 3. the Megatron MLP --------------------------------------------------------

// Whole weights and activations, up to the course's default width and batch.
enum { MAXC = 128, MAXM = 512 };
static float W1[MAXC * 4 * MAXC], B1[4 * MAXC], W2[4 * MAXC * MAXC], H[MAXM * 4 * MAXC], HG[MAXM * 4 * MAXC];
static float DW1[MAXC * 4 * MAXC], DB1[4 * MAXC], DW2[4 * MAXC * MAXC], DHG[MAXM * 4 * MAXC], DH[MAXM * 4 * MAXC];
static float BLOCKS[4 * MAXC * MAXC];

// The whole w1 (C, 4C), b1 (4C) and w2 (4C, C) from every rank's part.
static void gather_whole(Tp *tp, const TpBlockView *p) {
    const int C = tp->C, Ht = tp->Ht;
    comm_all_gather(tp->group, p->w1, BLOCKS, (size_t)tp->t * C * Ht);   // (t, C, Ht)
    for (int q = 0; q < tp->t; q++) ops_copy_2d(W1 + (size_t)q * Ht, 4 * C, BLOCKS + (size_t)q * C * Ht, Ht, C, Ht);
    comm_all_gather(tp->group, p->b1, B1, (size_t)tp->t * Ht);
    comm_all_gather(tp->group, p->w2, W2, (size_t)tp->t * Ht * C);       // rows: already in place
}

static void whole_forward(Tp *tp, const TpBlockView *p, const float *x, float *out) {
    const int M = tp->B * tp->T, C = tp->C;
    CHECK(C <= MAXC && M <= MAXM, "the adversary's arrays are too small");
    gather_whole(tp, p);
    ops_matmul_forward(H, x, W1, B1, M, C, 4 * C);
    ops_gelu_forward(HG, H, (size_t)M * 4 * C);
    ops_matmul_forward(out, HG, W2, p->b2, M, 4 * C, C);
}

void tp_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    (void)a;
    const Prec *pr = tp->prec;
    const size_t n = (size_t)tp->B * tp->T * tp->C;
    float *o = prec_open(pr, out, n, tp->s.c[1]);
    whole_forward(tp, p, prec_read(pr, x, n, tp->s.c[0]), o);
    prec_keep(pr, out, o, n);
}

void tp_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g, const void *x,
                     const float *dout, void *dx) {
    (void)a;
    const Prec *pr = tp->prec;
    const int M = tp->B * tp->T, C = tp->C, Ht = tp->Ht, r = tp->r;
    const float *x32 = prec_read(pr, x, (size_t)M * C, tp->s.c[0]);
    whole_forward(tp, p, x32, tp->s.c[1]);   // the hidden activations again (W1, W2, H, HG)
    ops_fill(DHG, 0, (size_t)M * 4 * C);
    ops_fill(DW2, 0, (size_t)4 * C * C);
    ops_matmul_backward(DHG, DW2, g->b2, dout, HG, W2, M, 4 * C, C);
    ops_accumulate(g->w2, DW2 + (size_t)r * Ht * C, (size_t)Ht * C);     // this rank's rows of w2
    ops_fill(DH, 0, (size_t)M * 4 * C);
    ops_gelu_backward(DH, DHG, H, (size_t)M * 4 * C);
    ops_fill(DW1, 0, (size_t)C * 4 * C);
    ops_fill(DB1, 0, (size_t)4 * C);
    float *d = prec_open(pr, dx, (size_t)M * C, tp->s.c[1]);
    ops_matmul_backward(d, DW1, DB1, DH, x32, W1, M, C, 4 * C);            // the whole input gradient
    prec_keep(pr, dx, d, (size_t)M * C);
    ops_accumulate_2d(g->w1, Ht, DW1 + (size_t)r * Ht, 4 * C, C, Ht);    // this rank's columns of w1
    ops_accumulate(g->b1, DB1 + (size_t)r * Ht, (size_t)Ht);
}

// ---- 4. attention by heads ------------------------------------------------------

void tp_attention_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    const Prec *pr = tp->prec;
    // f: the identity. Then this rank's heads, whole: no communication inside.
    prec_matmul_keep(pr, a->q, x, p->wq, p->bq, M, C, Ct);
    prec_matmul_keep(pr, a->k, x, p->wk, p->bk, M, C, Ct);
    prec_matmul_keep(pr, a->v, x, p->wv, p->bv, M, C, Ct);
    prec_attention_keep(pr, a->y, a->att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    prec_matmul_keep(pr, out, a->y, p->wo, NULL, M, Ct, C);   // row-parallel: a partial sum
    tp_g_forward(tp, out, (size_t)M * C);
    prec_add_bias(pr, out, p->bo, M, C);
}

void tp_attention_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g,
                           const void *x, const float *dout, void *dx) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    const size_t n = (size_t)M * Ct;
    const Prec *pr = tp->prec;
    float *dy = tp->s.ct[0], *dq = tp->s.ct[1], *dk = tp->s.ct[2], *dv = tp->s.ct[3];
    ops_bias_backward(g->bo, dout, M, C);
    ops_fill(dy, 0, n);
    prec_matmul_backward(pr, dy, g->wo, NULL, dout, a->y, p->wo, M, Ct, C);
    ops_fill(dq, 0, n);
    ops_fill(dk, 0, n);
    ops_fill(dv, 0, n);
    prec_attention_backward(pr, dq, dk, dv, tp->s.att, dy, a->att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    float *d = prec_open(pr, dx, (size_t)M * C, tp->s.c[0]);   // dx in fp32 (zeros)
    prec_matmul_backward(pr, d, g->wq, g->bq, dq, x, p->wq, M, C, Ct);
    prec_matmul_backward(pr, d, g->wk, g->bk, dk, x, p->wk, M, C, Ct);
    prec_matmul_backward(pr, d, g->wv, g->bv, dv, x, p->wv, M, C, Ct);
    prec_keep(pr, dx, d, (size_t)M * C);   // this rank's partial sum, in the run's type
    tp_f_backward(tp, dx, (size_t)M * C);
}

// ---- 5. the vocabulary-parallel embedding and cross-entropy ---------------------

void tp_embed_forward(Tp *tp, const TpEmbedView *p, const int *tokens, void *out) {
    const int M = tp->B * tp->T;
    const size_t MC = (size_t)M * tp->C;
    const Prec *pr = tp->prec;
    // Each token's row is on exactly one rank: the others add a zero row.
    ops_vocab_ids(tp->s.ids, tokens, tp->v0, tp->nv, (size_t)M);
    float *e = prec_open(pr, out, MC, tp->s.c[0]);
    ops_rows_forward(e, tp->s.ids, p->wte, tp->nv, M, tp->C);
    prec_keep(pr, out, e, MC);   // (exact in bf16: wte's rows are bf16 values, and so is their sum with zeros)
    tp_g_forward(tp, out, MC);
    e = prec_open(pr, out, MC, tp->s.c[0]);
    ops_positions_forward(e, p->wpe, tp->B, tp->T, tp->C, 0);
    prec_keep(pr, out, e, MC);
}

void tp_embed_backward(Tp *tp, TpEmbedView *g, const int *tokens, const float *dout) {
    const int M = tp->B * tp->T;
    // dout is whole on every rank: each takes its own rows. No communication.
    ops_vocab_ids(tp->s.ids, tokens, tp->v0, tp->nv, (size_t)M);
    ops_rows_backward(g->wte, dout, tp->s.ids, tp->nv, M, tp->C);
    ops_positions_backward(g->wpe, dout, tp->B, tp->T, tp->C, 0);
}

void tp_head_forward(Tp *tp, TpHeadActs *a, const TpHeadView *p, const void *x, const int *targets,
                     float *losses) {
    const int M = tp->B * tp->T;
    // f: the identity. Logits of this rank's vocabulary columns only, fp32.
    prec_matmul(tp->prec, a->logits, x, p->lm_head, NULL, M, tp->C, tp->nlm);   // (M, nlm)
    // loss = log sum_v exp(l_v - mx) + mx - l_target, each part combined
    // over the group: the maximum first, so that every rank's exponentials
    // are taken against the same one and can be added.
    ops_row_max(a->mx, a->logits, M, tp->nlm);
    comm_all_reduce(tp->group, a->mx, (size_t)M, COMM_MAX);
    ops_row_sumexp(a->sumexp, a->logits, a->mx, M, tp->nlm);
    comm_all_reduce_sum(tp->group, a->sumexp, (size_t)M);
    ops_vocab_ids(a->target_ids, targets, tp->lm0, tp->nlm, (size_t)M);
    ops_pick(a->target_logit, a->logits, a->target_ids, M, tp->nlm);   // 0 where another rank has it
    comm_all_reduce_sum(tp->group, a->target_logit, (size_t)M);
    ops_ce_from_parts(losses, a->mx, a->sumexp, a->target_logit, M);
}

void tp_head_backward(Tp *tp, TpHeadActs *a, const TpHeadView *p, TpHeadView *g, const void *x,
                      void *dx) {
    const int M = tp->B * tp->T;
    const size_t MC = (size_t)M * tp->C;
    // softmax - onehot on this rank's columns: every part it needs is here.
    float *dlogits = tp->s.logits;   // (M, nlm)
    ops_fill(dlogits, 0, (size_t)M * tp->nlm);
    ops_ce_parts_backward(dlogits, a->logits, a->mx, a->sumexp, a->target_ids, tp->loss_scale, M, tp->nlm);
    float *d = prec_open(tp->prec, dx, MC, tp->s.c[0]);
    prec_matmul_backward(tp->prec, d, g->lm_head, NULL, dlogits, x, p->lm_head, M, tp->C, tp->nlm);
    prec_keep(tp->prec, dx, d, MC);
    tp_f_backward(tp, dx, MC);   // lm_head is column-parallel
}
