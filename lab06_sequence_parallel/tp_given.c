// tp_given.c: tensor parallelism's split layers, given (tp_given.h).
#include "tp_given.h"

#include <string.h>

#include "core.h"
#include "ops.h"

// ---- Megatron's cut ------------------------------------------------------------

static TpSplit block(TpSplitKind kind, int whole, const TpShard *tp) {
    TpSplit s = {kind, tp->r * (whole / tp->t), whole / tp->t};
    return s;
}

TpSplit tpg_split(const void *ctx, GptUnitKind unit, const GptTensor *t) {
    const TpShard *tp = ctx;
    const char *n = t->name;
    TpSplit whole = {TP_REPLICATED, 0, 0};
    if (unit == UNIT_EMBED) return strcmp(n, "wte") == 0 ? block(TP_ROWS, tp->V, tp) : whole;
    if (unit == UNIT_HEAD) return strcmp(n, "lm_head") == 0 ? block(TP_COLUMNS, tp->V, tp) : whole;
    if (!strcmp(n, "attn.wq") || !strcmp(n, "attn.wk") || !strcmp(n, "attn.wv")) return block(TP_COLUMNS, tp->C, tp);
    if (!strcmp(n, "attn.bq") || !strcmp(n, "attn.bk") || !strcmp(n, "attn.bv")) return block(TP_ROWS, tp->C, tp);
    if (!strcmp(n, "attn.wo")) return block(TP_ROWS, tp->C, tp);
    if (!strcmp(n, "mlp.w1")) return block(TP_COLUMNS, 4 * tp->C, tp);
    if (!strcmp(n, "mlp.b1") || !strcmp(n, "mlp.w2")) return block(TP_ROWS, 4 * tp->C, tp);
    return whole;   // LayerNorms, embed.wpe, attn.bo, mlp.b2
}

void tpg_sizes(TpShard *tp, const TpLayout *L) {
    int head = L->nunits - 1;
    bool blocks = L->nunits > 2;
    tp->Ct = blocks ? tp_layout_split(L, 1, "attn.wq").count : tp->C;
    tp->NHt = tp->Ct / (tp->C / tp->NH);
    tp->Ht = blocks ? tp_layout_split(L, 1, "mlp.w1").count : 4 * tp->C;
    TpSplit wte = tp_layout_split(L, 0, "wte"), lm = tp_layout_split(L, head, "lm_head");
    tp->v0 = wte.first, tp->nv = wte.count;
    tp->lm0 = lm.first, tp->nlm = lm.count;
}

// ---- attention by heads, the MLP by hidden columns --------------------------------
// (common/prec.h: in fp32 each prec_ call is the plain ops.h one.)

// A layer's forward pass made during a backward pass (tp->recomputing) is
// recomputation: its products and time go to the counters.
typedef struct {
    OpsWork work;
    double t0;
} Again;

static Again again_begin(void) { return (Again){ops_work(), core_now()}; }

static void again_end(TpShard *tp, Again a) {
    if (!tp->recomputing) return;
    tp->again_work += ops_work().matmul - a.work.matmul;
    tp->again_s += core_now() - a.t0;
}

void tpg_attention_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const void *x, void *out) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    const Prec *pr = tp->prec;
    Again again = again_begin();
    prec_matmul_keep(pr, a->q, x, p->wq, p->bq, M, C, Ct);
    prec_matmul_keep(pr, a->k, x, p->wk, p->bk, M, C, Ct);
    prec_matmul_keep(pr, a->v, x, p->wv, p->bv, M, C, Ct);
    void *att = a->att ? a->att : tp->att_again;   // (selective: not kept for the backward pass)
    prec_attention_keep(pr, a->y, att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    prec_matmul_keep(pr, out, a->y, p->wo, NULL, M, Ct, C);
    again_end(tp, again);
}

void tpg_attention_again(TpShard *tp, TpLayerActs *a) {
    CHECK(tp->att_again, "tpg_attention_again without --recompute selective: there is no shared buffer to make "
          "the probabilities again into");
    OpsWork before = ops_work();
    double t0 = core_now();
    // The output again too (the same call), into scratch, and let go.
    prec_attention_keep(tp->prec, tp->ct[0], tp->att_again, a->q, a->k, a->v, tp->B, tp->T, tp->Ct, tp->NHt);
    // (Always recomputation, whoever calls it, so counted whether or not
    // the flag is set.)
    tp->again_work += ops_work().matmul - before.matmul;
    tp->again_s += core_now() - t0;
}

void tpg_attention_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                            const float *dout, void *dx) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    const size_t n = (size_t)M * Ct;
    const Prec *pr = tp->prec;
    float *dy = tp->ct[0], *dq = tp->ct[1], *dk = tp->ct[2], *dv = tp->ct[3];
    ops_fill(dy, 0, n);
    prec_matmul_backward(pr, dy, g->wo, NULL, dout, a->y, p->wo, M, Ct, C);
    ops_fill(dq, 0, n);
    ops_fill(dk, 0, n);
    ops_fill(dv, 0, n);
    const void *att = a->att ? a->att : tp->att_again;
    prec_attention_backward(pr, dq, dk, dv, tp->att, dy, att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    float *d = prec_open(pr, dx, (size_t)M * C, tp->mc);
    prec_matmul_backward(pr, d, g->wq, g->bq, dq, x, p->wq, M, C, Ct);
    prec_matmul_backward(pr, d, g->wk, g->bk, dk, x, p->wk, M, C, Ct);
    prec_matmul_backward(pr, d, g->wv, g->bv, dv, x, p->wv, M, C, Ct);
    prec_keep(pr, dx, d, (size_t)M * C);   // this rank's partial sum, rounded once in bf16
}

void tpg_mlp_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const void *x, void *out) {
    const int M = tp->B * tp->T, C = tp->C, Ht = tp->Ht;
    const Prec *pr = tp->prec;
    Again again = again_begin();
    prec_matmul_keep(pr, a->h, x, p->w1, p->b1, M, C, Ht);
    prec_gelu_keep(pr, a->hg, a->h, (size_t)M * Ht);
    prec_matmul_keep(pr, out, a->hg, p->w2, NULL, M, Ht, C);
    again_end(tp, again);
}

void tpg_mlp_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                      const float *dout, void *dx) {
    const int M = tp->B * tp->T, C = tp->C, Ht = tp->Ht;
    const Prec *pr = tp->prec;
    float *dhg = tp->ht[0], *dh = tp->ht[1];
    ops_fill(dhg, 0, (size_t)M * Ht);
    prec_matmul_backward(pr, dhg, g->w2, NULL, dout, a->hg, p->w2, M, Ht, C);
    ops_fill(dh, 0, (size_t)M * Ht);
    prec_gelu_backward(pr, dh, dhg, a->h, (size_t)M * Ht);
    float *d = prec_open(pr, dx, (size_t)M * C, tp->mc);
    prec_matmul_backward(pr, d, g->w1, g->b1, dh, x, p->w1, M, C, Ht);
    prec_keep(pr, dx, d, (size_t)M * C);
}

// ---- the vocabulary-parallel embedding and cross-entropy ----------------------------

void tpg_embed_forward(TpShard *tp, const GptEmbedView *p, const int *tokens, void *out) {
    const int M = tp->B * tp->T;
    const size_t MC = (size_t)M * tp->C;
    ops_vocab_ids(tp->ids, tokens, tp->v0, tp->nv, (size_t)M);
    float *e = prec_write(tp->prec, out, tp->mc);
    ops_rows_forward(e, tp->ids, p->wte, tp->nv, M, tp->C);
    prec_keep(tp->prec, out, e, MC);   // (exact in bf16: wte's rows are bf16 values, the others zero)
}

void tpg_embed_backward(TpShard *tp, GptEmbedView *g, const int *tokens, const float *dout) {
    const int M = tp->B * tp->T;
    ops_vocab_ids(tp->ids, tokens, tp->v0, tp->nv, (size_t)M);
    ops_rows_backward(g->wte, dout, tp->ids, tp->nv, M, tp->C);
}

void tpg_head_forward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                      float *losses) {
    const int M = tp->B * tp->T;
    prec_matmul(tp->prec, a->logits, x, p->lm_head, NULL, M, tp->C, tp->nlm);   // fp32 logits
    ops_row_max(a->mx, a->logits, M, tp->nlm);
    comm_all_reduce(tp->group, a->mx, (size_t)M, COMM_MAX);
    ops_row_sumexp(a->sumexp, a->logits, a->mx, M, tp->nlm);
    comm_all_reduce_sum(tp->group, a->sumexp, (size_t)M);
    ops_vocab_ids(a->target_ids, targets, tp->lm0, tp->nlm, (size_t)M);
    ops_pick(a->target_logit, a->logits, a->target_ids, M, tp->nlm);
    comm_all_reduce_sum(tp->group, a->target_logit, (size_t)M);
    ops_ce_from_parts(losses, a->mx, a->sumexp, a->target_logit, M);
}

void tpg_head_backward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x, void *dx) {
    const int M = tp->B * tp->T;
    const size_t MC = (size_t)M * tp->C;
    ops_fill(tp->dlogits, 0, (size_t)M * tp->nlm);
    ops_ce_parts_backward(tp->dlogits, a->logits, a->mx, a->sumexp, a->target_ids, tp->loss_scale, M, tp->nlm);
    float *d = prec_open(tp->prec, dx, MC, tp->mc);
    prec_matmul_backward(tp->prec, d, g->lm_head, NULL, tp->dlogits, x, p->lm_head, M, tp->C, tp->nlm);
    prec_keep(tp->prec, dx, d, MC);
}
