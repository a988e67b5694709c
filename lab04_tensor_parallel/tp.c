// tp.c: YOUR FILE. Tensor parallelism. See tp.h for the hooks, README.md
// for the pictures, and run
//     make lab04 && mpirun -np 4 build/lab04
// to see the loss beside single-device training's, each rank's parameters
// and bytes beside their formulas, and what is still missing.
//
// As given, every tensor is replicated and every function does nothing, so
// the program runs from the start (and learns nothing). Do the TODOs in
// order; delete a function's lab_todo(...) line once it is done.
//
// Tools (ops.h): ops_matmul_forward/backward (bias may be NULL),
// ops_add_bias, ops_bias_backward, ops_gelu_forward/backward,
// ops_attention_forward/backward, ops_copy_2d (a block of columns of one
// matrix into another), ops_fill; ops_vocab_ids, ops_rows_forward/backward,
// ops_positions_forward/backward, ops_row_max, ops_row_sumexp, ops_pick,
// ops_ce_from_parts, ops_ce_parts_backward. Communication (comm.h), on
// tp->group: comm_all_reduce(c, buf, n, COMM_SUM or COMM_MAX),
// comm_all_gather, comm_reduce_scatter_sum, and the typed forms
// (comm_all_reduce_typed(c, buf, n, tp->type, COMM_SUM)) for the buffers of
// the run's type.
//
// Precision (tp.h, common/prec.h): the Megatron layers, the embedding and
// the head are written once for fp32 and bf16. What they keep and hand on
// (`void *`) is of the run's type: make it with prec_matmul_keep,
// prec_gelu_keep, prec_attention_keep, prec_add_bias and read it back with
// prec_matmul_backward, prec_gelu_backward, prec_attention_backward;
// prec_matmul leaves a product in fp32; prec_open / prec_keep give an fp32
// view of such a buffer to write into and round it back. Each is the plain
// ops.h call in fp32. The naive MLP runs in fp32 only: use ops.h there.
#include "tp.h"

#include <string.h>

#include "comm.h"
#include "core.h"
#include "ops.h"
#include "prec.h"

// ---- 0. the split -------------------------------------------------------------

TpSplit tp_split(const Tp *tp, GptUnitKind unit, const GptTensor *t) {
    lab_todo(__func__);
    // TODO(lab04): say which part of tensor t this rank (tp->r of tp->t)
    // holds: TP_COLUMNS or TP_ROWS with the first index and the count, or
    // TP_REPLICATED. Fill it in as you do each TODO below:
    //   1 and 3: mlp.w1 and mlp.b1 by the hidden columns; mlp.w2 by rows
    //            (Megatron) or by columns with mlp.b2 (tp->naive);
    //   4: attn.wq, wk, wv and their biases by whole heads (rank r holds heads
    //      [r NH/t, (r+1) NH/t)), attn.wo by the same rows;
    //   5: embed.wte by vocabulary rows, head.lm_head by vocabulary columns.
    // (unit is UNIT_EMBED, UNIT_BLOCK or UNIT_HEAD; t->name as in gpt.c.)
    (void)tp;
    (void)unit;
    (void)t;
    TpSplit whole = {TP_REPLICATED, 0, 0};
    return whole;
}

// ---- 1. the lecture's MLP -------------------------------------------------------

void tp_naive_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    lab_todo(__func__);
    // TODO(lab04): every matrix split by output columns. h = x @ w1 + b1 on
    // this rank's Ht hidden columns, GELU, then all-gather the hidden
    // activations into a->hg_all (M, 4C) on every rank. comm_all_gather lays
    // the ranks' blocks one after another, (t, M, Ht): move each into its
    // columns with ops_copy_2d (tp->s.wide has room). Then this rank's Cw
    // output columns (w2 and b2 split by columns), all-gathered into out.
    (void)tp, (void)a, (void)p, (void)x, (void)out;
}

void tp_naive_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g, const void *x,
                           const float *dout, void *dx) {
    lab_todo(__func__);
    // TODO(lab04): the backward of each all-gather is a reduce-scatter (or,
    // for the output, just taking this rank's columns of dout). Every rank's
    // gradient of the whole hidden activations is a partial sum over its
    // output columns: reduce-scatter it, so that each rank holds the sum for
    // its own hidden columns. Its input gradient dx is then a partial sum
    // over its hidden columns: sum it over the group.
    (void)tp, (void)a, (void)p, (void)g, (void)x, (void)dout, (void)dx;
}

// ---- 2. f and g -----------------------------------------------------------------

// f's forward and g's backward are the identity: nothing to write.
void tp_f_backward(Tp *tp, void *dx, size_t n) {
    lab_todo(__func__);
    // TODO(lab04): f's backward: sum the input gradient over the group. It
    // is n elements of the run's type (tp->type: in bf16, 2 bytes each).
    (void)tp, (void)dx, (void)n;
}

void tp_g_forward(Tp *tp, void *x, size_t n) {
    lab_todo(__func__);
    // TODO(lab04): g's forward: sum the row-parallel layer's partial outputs
    // (n elements of type tp->type).
    (void)tp, (void)x, (void)n;
}

// ---- 3. the Megatron MLP --------------------------------------------------------

void tp_mlp_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    lab_todo(__func__);
    // TODO(lab04): f; a->h = x @ w1 + b1 (column-parallel: Ht columns);
    // a->hg = GELU(a->h), local; out = a->hg @ w2 (row-parallel: a partial
    // sum, no bias yet); g; then b2, once. All kept in the run's type
    // (prec_matmul_keep, prec_gelu_keep, prec_add_bias with tp->prec).
    (void)tp, (void)a, (void)p, (void)x, (void)out;
}

void tp_mlp_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g, const void *x,
                     const float *dout, void *dx) {
    lab_todo(__func__);
    // TODO(lab04): the forward pass backwards. g's backward is the identity;
    // b2's gradient is the same on every rank; dx is a partial sum until f's
    // backward: make it in fp32 (prec_open(tp->prec, dx, M C, tp->s.c[0])),
    // then prec_keep it into dx before f. Scratch: tp->s.ht[0], tp->s.ht[1]
    // (M, Ht).
    (void)tp, (void)a, (void)p, (void)g, (void)x, (void)dout, (void)dx;
}

// ---- 4. attention by heads ------------------------------------------------------

void tp_attention_forward(Tp *tp, TpBlockActs *a, const TpBlockView *p, const void *x, void *out) {
    lab_todo(__func__);
    // TODO(lab04): f; q, k, v for this rank's heads (M, Ct each);
    // prec_attention_keep on them (Ct channels, tp->NHt heads); out =
    // a->y @ wo (row-parallel); g; then bo, once.
    (void)tp, (void)a, (void)p, (void)x, (void)out;
}

void tp_attention_backward(Tp *tp, TpBlockActs *a, const TpBlockView *p, TpBlockView *g,
                           const void *x, const float *dout, void *dx) {
    lab_todo(__func__);
    // TODO(lab04): backwards through wo, attention and q, k, v (dx made in
    // fp32 as the MLP's); f's backward last. Scratch: tp->s.ct[0..3] (M,
    // Ct), tp->s.att.
    (void)tp, (void)a, (void)p, (void)g, (void)x, (void)dout, (void)dx;
}

// ---- 5. the vocabulary-parallel embedding and cross-entropy ---------------------

void tp_embed_forward(Tp *tp, const TpEmbedView *p, const int *tokens, void *out) {
    lab_todo(__func__);
    // TODO(lab04): this rank holds rows [tp->v0, tp->v0 + tp->nv) of wte.
    // Look up the tokens in that range (the others give a zero row:
    // ops_vocab_ids, then ops_rows_forward), sum over the group, then add
    // the positions (ops_positions_forward). The ops write fp32: through
    // prec_open and prec_keep on out.
    (void)tp, (void)p, (void)tokens, (void)out;
}

void tp_embed_backward(Tp *tp, TpEmbedView *g, const int *tokens, const float *dout) {
    lab_todo(__func__);
    // TODO(lab04): dout is whole on every rank; no communication.
    (void)tp, (void)g, (void)tokens, (void)dout;
}

void tp_head_forward(Tp *tp, TpHeadActs *a, const TpHeadView *p, const void *x, const int *targets,
                     float *losses) {
    lab_todo(__func__);
    // TODO(lab04): the logits of this rank's nlm vocabulary columns only
    // (fp32: prec_matmul);
    // loss = log sum_v exp(l_v - mx) + mx - l_target, with the row maximum,
    // the sum of exponentials and the target's logit each combined over the
    // group (which one first, and why?).
    (void)tp, (void)a, (void)p, (void)x, (void)targets, (void)losses;
}

void tp_head_backward(Tp *tp, TpHeadActs *a, const TpHeadView *p, TpHeadView *g, const void *x,
                      void *dx) {
    lab_todo(__func__);
    // TODO(lab04): softmax minus one-hot on this rank's columns
    // (ops_ce_parts_backward, scale tp->loss_scale), then back through
    // lm_head; lm_head is column-parallel.
    (void)tp, (void)a, (void)p, (void)g, (void)x, (void)dx;
}
