// sp.c: sequence parallelism, the solution. See sp.h for the hooks and
// README.md for the picture.
#include "sp.h"

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"
#include "prec.h"

// ---- 2. along the sequence ---------------------------------------------------------

// Rank q's tokens of row b are the q-th run of Tt C elements of that row.
// comm_all_gather_typed and comm_reduce_scatter_typed work on blocks laid
// one after another, (t, B, Tt, C): the runs move between the two layouts
// by a 2-D copy (B rows of Tt C elements, a row T C elements apart in the
// whole). All of it in the run's type: in bf16, half the bytes.

void sp_gather_tokens(Sp *sp, const void *local, void *whole) {
    const TpShard *tp = &sp->tp;
    const CommType type = tp->prec->type;
    const int run = sp->Tt * tp->C;
    const size_t block = (size_t)tp->B * run;
    comm_all_gather_typed(tp->group, local, sp->s.blocks, (size_t)tp->t * block, type);
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d_typed(comm_at(whole, (size_t)q * run, type), tp->T * tp->C, comm_at(sp->s.blocks, q * block, type),
                          run, tp->B, run, tp->prec->elem);
}

void sp_scatter_tokens(Sp *sp, const void *whole, void *local) {
    const TpShard *tp = &sp->tp;
    const CommType type = tp->prec->type;
    const int run = sp->Tt * tp->C;
    const size_t block = (size_t)tp->B * run;
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d_typed(comm_at(sp->s.blocks, q * block, type), run, comm_at_const(whole, (size_t)q * run, type),
                          tp->T * tp->C, tp->B, run, tp->prec->elem);
    comm_reduce_scatter_typed(tp->group, sp->s.blocks, local, (size_t)tp->t * block, type, COMM_SUM);
}

// ---- 4. dropout by the global token ------------------------------------------------

DropoutKey sp_dropout_key(const Sp *sp, int layer, int site) {
    DropoutKey k = {.seed = sp->seed, .layer = layer, .site = site, .step = sp->step, .row0 = sp->row0,
                    .t0 = sp->tp.r * sp->Tt, .c0 = 0, .Tg = sp->tp.T, .Cg = sp->tp.C};
    return k;
}

// ---- 1 and 3. the model on this rank's tokens ----------------------------------------
// (The run's type, common/prec.h: what is kept, gathered and scattered;
// LayerNorm, dropout and the residual adds in fp32 on sp->s.f32, which in
// fp32 is the buffer itself. f32[0] the input, f32[1] a LayerNorm's output
// or a branch, f32[2] dropout's, f32[3] the output or mid's gradient.)

static size_t local_elems(const Sp *sp) { return (size_t)sp->tp.B * sp->Tt * sp->tp.C; }
static size_t whole_elems(const Sp *sp) { return (size_t)sp->tp.B * sp->tp.T * sp->tp.C; }

// Each rank's gradient of a replicated tensor covers its own tokens: the
// sum over the group covers them all (fp32: the gradients are fp32 views).
// (lab07 sums them itself, once a step: sp->sums_deferred.)
static void sum_over_group(Sp *sp, float *grad, size_t n) {
    if (!sp->sums_deferred) comm_all_reduce_sum(sp->tp.group, grad, n);
}

// x_out = x + dropout(branch), on this rank's tokens; x_out kept.
static void residual(Sp *sp, void *x_out, const float *x, const float *branch, int layer, int site) {
    const Prec *pr = sp->tp.prec;
    if (sp->dropout > 0) {
        float *d = prec_write(pr, sp->s.local[1], sp->s.f32[2]);
        ops_dropout_forward(d, branch, sp->dropout, sp_dropout_key(sp, layer, site), sp->tp.B, sp->Tt, sp->tp.C);
        branch = d;
    }
    float *o = prec_write(pr, x_out, sp->s.f32[3]);
    ops_add(o, x, branch, local_elems(sp));
    prec_keep(pr, x_out, o, local_elems(sp));
}

// The gradient reaching a dropped-out branch: dout through the same mask.
static const float *branch_grad(Sp *sp, const float *dout, int layer, int site) {
    if (sp->dropout == 0) return dout;
    float *d = prec_write(sp->tp.prec, sp->s.local[1], sp->s.f32[2]);
    ops_fill(d, 0, local_elems(sp));
    ops_dropout_backward(d, dout, sp->dropout, sp_dropout_key(sp, layer, site), sp->tp.B, sp->Tt, sp->tp.C);
    return d;
}

// Half a block: x_out = x + dropout(layer(LN(x)) + bias), x and x_out this
// rank's tokens; the layer (attention, or the MLP) sees them all.
typedef struct {
    bool mlp;
    float *lnw, *lnb, *bias;        // the LayerNorm's weights and the bias after the layer
    float *mean, *rstd;             // what it keeps
    void *all;
} Half;

static Half half(bool mlp, SpBlockActs *a, GptBlockView *p) {
    Half h = {mlp, mlp ? p->ln2w : p->ln1w, mlp ? p->ln2b : p->ln1b, mlp ? p->b2 : p->bo,
              mlp ? a->ln2_mean : a->ln1_mean, mlp ? a->ln2_rstd : a->ln1_rstd, mlp ? a->ln2_all : a->ln1_all};
    return h;
}

static void half_forward(Sp *sp, Half h, SpBlockActs *a, const GptBlockView *p, const void *x, void *x_out,
                         int u) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const int Mt = tp->B * sp->Tt;
    const size_t n = local_elems(sp);
    const float *x32 = prec_read(pr, x, n, sp->s.f32[0]);
    void *ln = sp->s.local[0];
    float *ln32 = prec_write(pr, ln, sp->s.f32[1]);
    ops_layernorm_forward(ln32, h.mean, h.rstd, x32, h.lnw, h.lnb, Mt, tp->C);   // this rank's tokens
    prec_keep(pr, ln, ln32, n);
    sp_gather_tokens(sp, ln, h.all);             // g forward: all-gather along the sequence
    void *partial = sp->s.whole[0];
    (h.mlp ? tpg_mlp_forward : tpg_attention_forward)(tp, &a->layers, p, h.all, partial);
    void *branch = sp->s.local[0];
    sp_scatter_tokens(sp, partial, branch);      // reduce-scatter along the sequence, not all-reduce
    float *b32 = prec_open(pr, branch, n, sp->s.f32[1]);
    ops_add_bias(b32, h.bias, Mt, tp->C);        // once per token
    residual(sp, x_out, x32, b32, u, h.mlp ? 2 : 1);
}

static void half_backward(Sp *sp, Half h, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, Half hg,
                          const void *x, const float *dout, float *dx, int u) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const int Mt = tp->B * sp->Tt, C = tp->C;
    const size_t n = local_elems(sp);
    // The branch's gradient in the run's type: the layer's product takes it
    // rounded so (in bf16), and the bias's gradient is of the same.
    const void *dbranch = prec_round(pr, branch_grad(sp, dout, u, h.mlp ? 2 : 1), n, sp->s.local[0]);
    ops_bias_backward(hg.bias, prec_read(pr, dbranch, n, sp->s.f32[1]), Mt, C);
    sum_over_group(sp, hg.bias, (size_t)C);
    void *dall = sp->s.whole[0], *dpartial = sp->s.whole[1];
    sp_gather_tokens(sp, dbranch, dall);         // the reduce-scatter's backward: all-gather
    mem_zero(dpartial, whole_elems(sp) * pr->elem);
    // 5. Selective recomputation: the probabilities were not kept (one
    // buffer for all blocks, the last block's in it): make this block's again.
    if (!h.mlp && sp->recompute == GPT_RECOMPUTE_SELECTIVE) tpg_attention_again(tp, &a->layers);
    (h.mlp ? tpg_mlp_backward : tpg_attention_backward)(tp, &a->layers, p, g, h.all,
                                                        prec_read(pr, dall, whole_elems(sp), sp->s.whole32), dpartial);
    void *dln = sp->s.local[0];
    sp_scatter_tokens(sp, dpartial, dln);        // the all-gather's backward: reduce-scatter
    if (dx != dout) mem_copy(dx, dout, n * sizeof(float));   // the residual path
    ops_layernorm_backward(dx, hg.lnw, hg.lnb, prec_read(pr, dln, n, sp->s.f32[1]), prec_read(pr, x, n, sp->s.f32[0]),
                           h.lnw, h.mean, h.rstd, Mt, C);
    sum_over_group(sp, hg.lnw, (size_t)C);
    sum_over_group(sp, hg.lnb, (size_t)C);
}

void sp_block_forward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, const void *x, void *out) {
    half_forward(sp, half(false, a, (GptBlockView *)p), a, p, x, a->mid, u);
    half_forward(sp, half(true, a, (GptBlockView *)p), a, p, a->mid, out, u);
}

void sp_block_backward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                       const void *dout, void *dx) {
    const Prec *pr = sp->tp.prec;
    const size_t n = local_elems(sp);
    // 6. Full recomputation: a is every block's set, the last forward's in
    // it. This block's forward again, from its input x (the residual stream
    // the harness keeps), into a; its output into scratch (the stream holds
    // the next block's input). The same u and step, so the same masks.
    if (sp->recompute == GPT_RECOMPUTE_FULL) sp_block_forward(sp, u, a, p, x, sp->s.again);
    // The MLP half leaves the gradient of mid in dmid (fp32: dx itself); the
    // attention half takes it from there and adds its own.
    const float *dout32 = prec_read(pr, dout, n, sp->s.f32[3]);
    float *dmid = prec_write(pr, dx, sp->s.f32[3]);   // (bf16: dout's widening, added to in place)
    half_backward(sp, half(true, a, (GptBlockView *)p), a, p, g, half(true, a, g), a->mid, dout32, dmid, u);
    half_backward(sp, half(false, a, (GptBlockView *)p), a, p, g, half(false, a, g), x, dmid, dmid, u);
    prec_keep(pr, dx, dmid, n);
}

// ---- the embeddings and the head -------------------------------------------------------

void sp_embed_forward(Sp *sp, const GptEmbedView *p, const int *tokens, void *out) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const size_t n = local_elems(sp);
    // The lookup is vocabulary-parallel over all tokens: a partial sum,
    // reduce-scattered to each rank's tokens (where lab04 all-reduced).
    void *partial = sp->s.whole[0];
    tpg_embed_forward(tp, p, tokens, partial);
    void *x = sp->dropout > 0 ? sp->s.local[0] : out;
    sp_scatter_tokens(sp, partial, x);
    float *x32 = prec_open(pr, x, n, sp->s.f32[0]);
    ops_positions_forward(x32, p->wpe, tp->B, sp->Tt, tp->C, tp->r * sp->Tt);   // this rank's positions
    float *o = x32;
    if (sp->dropout > 0) {
        o = prec_write(pr, out, sp->s.f32[1]);
        ops_dropout_forward(o, x32, sp->dropout, sp_dropout_key(sp, 0, 0), tp->B, sp->Tt, tp->C);
    }
    prec_keep(pr, out, o, n);
}

void sp_embed_backward(Sp *sp, GptEmbedView *g, const int *tokens, const void *dout) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const size_t n = local_elems(sp);
    const float *d = prec_read(pr, dout, n, sp->s.f32[0]);
    if (sp->dropout > 0) {
        float *dd = prec_write(pr, sp->s.local[0], sp->s.f32[1]);
        ops_fill(dd, 0, n);
        ops_dropout_backward(dd, d, sp->dropout, sp_dropout_key(sp, 0, 0), tp->B, sp->Tt, tp->C);
        d = dd;
    }
    ops_positions_backward(g->wpe, d, tp->B, sp->Tt, tp->C, tp->r * sp->Tt);
    sum_over_group(sp, g->wpe, (size_t)tp->T * tp->C);   // each rank saw its own positions
    void *dall = sp->s.whole[0];
    sp_gather_tokens(sp, prec_round(pr, d, n, sp->s.local[1]), dall);   // the reduce-scatter's backward
    tpg_embed_backward(tp, g, tokens, prec_read(pr, dall, whole_elems(sp), sp->s.whole32));
}

void sp_head_forward(Sp *sp, SpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                     float *losses) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const size_t n = local_elems(sp);
    void *ln = sp->s.local[0];
    float *ln32 = prec_write(pr, ln, sp->s.f32[1]);
    ops_layernorm_forward(ln32, a->lnf_mean, a->lnf_rstd, prec_read(pr, x, n, sp->s.f32[0]), p->lnfw, p->lnfb,
                          tp->B * sp->Tt, tp->C);
    prec_keep(pr, ln, ln32, n);
    sp_gather_tokens(sp, ln, a->lnf_all);                // g before the column-parallel lm_head
    tpg_head_forward(tp, &a->ce, p, a->lnf_all, targets, losses);
}

void sp_head_backward(Sp *sp, SpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x, void *dx) {
    TpShard *tp = &sp->tp;
    const Prec *pr = tp->prec;
    const size_t n = local_elems(sp);
    void *dpartial = sp->s.whole[1];
    mem_zero(dpartial, whole_elems(sp) * pr->elem);
    tpg_head_backward(tp, &a->ce, p, g, a->lnf_all, dpartial);
    void *dln = sp->s.local[0];
    sp_scatter_tokens(sp, dpartial, dln);                // g's backward: reduce-scatter
    float *d = prec_open(pr, dx, n, sp->s.f32[3]);      // zeros
    ops_layernorm_backward(d, g->lnfw, g->lnfb, prec_read(pr, dln, n, sp->s.f32[1]), prec_read(pr, x, n, sp->s.f32[0]),
                           p->lnfw, a->lnf_mean, a->lnf_rstd, tp->B * sp->Tt, tp->C);
    prec_keep(pr, dx, d, n);
    sum_over_group(sp, g->lnfw, (size_t)tp->C);
    sum_over_group(sp, g->lnfb, (size_t)tp->C);
}
