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

void tpg_attention_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const float *x, float *out) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    ops_matmul_forward(a->q, x, p->wq, p->bq, M, C, Ct);
    ops_matmul_forward(a->k, x, p->wk, p->bk, M, C, Ct);
    ops_matmul_forward(a->v, x, p->wv, p->bv, M, C, Ct);
    ops_attention_forward(a->y, a->att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    ops_matmul_forward(out, a->y, p->wo, NULL, M, Ct, C);
}

void tpg_attention_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const float *x,
                            const float *dout, float *dx) {
    const int M = tp->B * tp->T, C = tp->C, Ct = tp->Ct;
    const size_t n = (size_t)M * Ct;
    float *dy = tp->ct[0], *dq = tp->ct[1], *dk = tp->ct[2], *dv = tp->ct[3];
    ops_fill(dy, 0, n);
    ops_matmul_backward(dy, g->wo, NULL, dout, a->y, p->wo, M, Ct, C);
    ops_fill(dq, 0, n);
    ops_fill(dk, 0, n);
    ops_fill(dv, 0, n);
    ops_attention_backward(dq, dk, dv, tp->att, dy, a->att, a->q, a->k, a->v, tp->B, tp->T, Ct, tp->NHt);
    ops_matmul_backward(dx, g->wq, g->bq, dq, x, p->wq, M, C, Ct);
    ops_matmul_backward(dx, g->wk, g->bk, dk, x, p->wk, M, C, Ct);
    ops_matmul_backward(dx, g->wv, g->bv, dv, x, p->wv, M, C, Ct);
}

void tpg_mlp_forward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, const float *x, float *out) {
    const int M = tp->B * tp->T, C = tp->C, Ht = tp->Ht;
    ops_matmul_forward(a->h, x, p->w1, p->b1, M, C, Ht);
    ops_gelu_forward(a->hg, a->h, (size_t)M * Ht);
    ops_matmul_forward(out, a->hg, p->w2, NULL, M, Ht, C);
}

void tpg_mlp_backward(TpShard *tp, TpLayerActs *a, const GptBlockView *p, GptBlockView *g, const float *x,
                      const float *dout, float *dx) {
    const int M = tp->B * tp->T, C = tp->C, Ht = tp->Ht;
    float *dhg = tp->ht[0], *dh = tp->ht[1];
    ops_fill(dhg, 0, (size_t)M * Ht);
    ops_matmul_backward(dhg, g->w2, NULL, dout, a->hg, p->w2, M, Ht, C);
    ops_fill(dh, 0, (size_t)M * Ht);
    ops_gelu_backward(dh, dhg, a->h, (size_t)M * Ht);
    ops_matmul_backward(dx, g->w1, g->b1, dh, x, p->w1, M, C, Ht);
}

// ---- the vocabulary-parallel embedding and cross-entropy ----------------------------

void tpg_embed_forward(TpShard *tp, const GptEmbedView *p, const int *tokens, float *out) {
    const int M = tp->B * tp->T;
    ops_vocab_ids(tp->ids, tokens, tp->v0, tp->nv, (size_t)M);
    ops_rows_forward(out, tp->ids, p->wte, tp->nv, M, tp->C);
}

void tpg_embed_backward(TpShard *tp, GptEmbedView *g, const int *tokens, const float *dout) {
    const int M = tp->B * tp->T;
    ops_vocab_ids(tp->ids, tokens, tp->v0, tp->nv, (size_t)M);
    ops_rows_backward(g->wte, dout, tp->ids, tp->nv, M, tp->C);
}

void tpg_head_forward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, const float *x, const int *targets,
                      float *losses) {
    const int M = tp->B * tp->T;
    ops_matmul_forward(a->logits, x, p->lm_head, NULL, M, tp->C, tp->nlm);
    ops_row_max(a->mx, a->logits, M, tp->nlm);
    comm_all_reduce(tp->group, a->mx, (size_t)M, COMM_MAX);
    ops_row_sumexp(a->sumexp, a->logits, a->mx, M, tp->nlm);
    comm_all_reduce_sum(tp->group, a->sumexp, (size_t)M);
    ops_vocab_ids(a->target_ids, targets, tp->lm0, tp->nlm, (size_t)M);
    ops_pick(a->target_logit, a->logits, a->target_ids, M, tp->nlm);
    comm_all_reduce_sum(tp->group, a->target_logit, (size_t)M);
    ops_ce_from_parts(losses, a->mx, a->sumexp, a->target_logit, M);
}

void tpg_head_backward(TpShard *tp, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const float *x, float *dx) {
    const int M = tp->B * tp->T;
    ops_fill(tp->dlogits, 0, (size_t)M * tp->nlm);
    ops_ce_parts_backward(tp->dlogits, a->logits, a->mx, a->sumexp, a->target_ids, tp->loss_scale, M, tp->nlm);
    ops_matmul_backward(dx, g->lm_head, NULL, tp->dlogits, x, p->lm_head, M, tp->C, tp->nlm);
}
