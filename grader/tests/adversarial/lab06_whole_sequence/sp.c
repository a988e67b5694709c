// An adversarial lab06 submission: tensor parallelism alone on the whole sequence, for the LayerNorms.
// Each rank all-gathers the block's input and runs every LayerNorm on all T tokens (as tensor parallelism
// alone does), then hands back only its own tokens: the results are sequence parallelism's, the work
// is not.
// sp.c: sequence parallelism, the solution. See sp.h for the hooks and
// README.md for the picture.
#include "sp.h"

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"

// ---- 2. along the sequence ---------------------------------------------------------

// Rank q's tokens of row b are the q-th run of Tt C floats of that row.
// comm_all_gather and comm_reduce_scatter work on blocks laid one after
// another, (t, B, Tt, C): the runs move between the two layouts by a 2-D
// copy (B rows of Tt C floats, a row T C floats apart in the whole).

void sp_gather_tokens(Sp *sp, const float *local, float *whole) {
    const TpShard *tp = &sp->tp;
    const int run = sp->Tt * tp->C;
    const size_t block = (size_t)tp->B * run;
    comm_all_gather(tp->group, local, sp->s.blocks, (size_t)tp->t * block);
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d(whole + (size_t)q * run, tp->T * tp->C, sp->s.blocks + q * block, run, tp->B, run);
}

void sp_scatter_tokens(Sp *sp, const float *whole, float *local) {
    const TpShard *tp = &sp->tp;
    const int run = sp->Tt * tp->C;
    const size_t block = (size_t)tp->B * run;
    for (int q = 0; q < tp->t; q++)
        ops_copy_2d(sp->s.blocks + q * block, run, whole + (size_t)q * run, tp->T * tp->C, tp->B, run);
    comm_reduce_scatter_sum(tp->group, sp->s.blocks, local, (size_t)tp->t * block);
}

// ---- 4. dropout by the global token ------------------------------------------------

DropoutKey sp_dropout_key(const Sp *sp, int layer, int site) {
    DropoutKey k = {.seed = sp->seed, .layer = layer, .site = site, .step = sp->step, .row0 = sp->row0,
                    .t0 = sp->tp.r * sp->Tt, .c0 = 0, .Tg = sp->tp.T, .Cg = sp->tp.C};
    return k;
}

// ---- 1 and 3. the model on this rank's tokens ----------------------------------------

static size_t local_floats(const Sp *sp) { return (size_t)sp->tp.B * sp->Tt * sp->tp.C; }

// Each rank's gradient of a replicated tensor covers its own tokens: the
// sum over the group covers them all.
static void sum_over_group(Sp *sp, float *grad, size_t n) { comm_all_reduce_sum(sp->tp.group, grad, n); }

// x_out = x + dropout(branch), on this rank's tokens.
static void residual(Sp *sp, float *x_out, const float *x, const float *branch, int layer, int site) {
    if (sp->dropout > 0) {
        ops_dropout_forward(sp->s.local[1], branch, sp->dropout, sp_dropout_key(sp, layer, site), sp->tp.B, sp->Tt,
                            sp->tp.C);
        branch = sp->s.local[1];
    }
    ops_add(x_out, x, branch, local_floats(sp));
}

// The gradient reaching a dropped-out branch: dout through the same mask.
static const float *branch_grad(Sp *sp, const float *dout, int layer, int site) {
    if (sp->dropout == 0) return dout;
    ops_fill(sp->s.local[1], 0, local_floats(sp));
    ops_dropout_backward(sp->s.local[1], dout, sp->dropout, sp_dropout_key(sp, layer, site), sp->tp.B, sp->Tt,
                         sp->tp.C);
    return sp->s.local[1];
}

// Half a block: x_out = x + dropout(layer(LN(x)) + bias), x and x_out this
// rank's tokens; the layer (attention, or the MLP) sees them all.
typedef struct {
    bool mlp;
    float *lnw, *lnb, *bias;        // the LayerNorm's weights and the bias after the layer
    float *mean, *rstd, *all;       // what it keeps
} Half;

static Half half(bool mlp, SpBlockActs *a, GptBlockView *p) {
    Half h = {mlp, mlp ? p->ln2w : p->ln1w, mlp ? p->ln2b : p->ln1b, mlp ? p->b2 : p->bo,
              mlp ? a->ln2_mean : a->ln1_mean, mlp ? a->ln2_rstd : a->ln1_rstd, mlp ? a->ln2_all : a->ln1_all};
    return h;
}

// The whole sequence's LayerNorm statistics, kept per block and half, and
// its input gradient.
enum { MAXL = 8, MAXBT = 512, MAXC = 128 };
static float MEAN[2 * MAXL][MAXBT], RSTD[2 * MAXL][MAXBT], DXW[MAXBT * MAXC];

static void half_forward(Sp *sp, Half h, SpBlockActs *a, const GptBlockView *p, const float *x, float *x_out,
                         int u) {
    TpShard *tp = &sp->tp;
    const int Mt = tp->B * sp->Tt;
    float *xw = sp->s.whole[1];
    sp_gather_tokens(sp, x, xw);                 // the whole sequence's input, then its LayerNorm whole
    CHECK(u <= MAXL && tp->B * tp->T <= MAXBT, "the adversary's arrays are too small");
    ops_layernorm_forward(h.all, MEAN[2 * (u - 1) + h.mlp], RSTD[2 * (u - 1) + h.mlp], xw, h.lnw, h.lnb,
                          tp->B * tp->T, tp->C);
    float *partial = sp->s.whole[0];
    (h.mlp ? tpg_mlp_forward : tpg_attention_forward)(tp, &a->layers, p, h.all, partial);
    float *branch = sp->s.local[0];
    sp_scatter_tokens(sp, partial, branch);      // reduce-scatter along the sequence, not all-reduce
    ops_add_bias(branch, h.bias, Mt, tp->C);     // once per token
    residual(sp, x_out, x, branch, u, h.mlp ? 2 : 1);
}

static void half_backward(Sp *sp, Half h, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, Half hg,
                          const float *x, const float *dout, float *dx, int u) {
    TpShard *tp = &sp->tp;
    const int Mt = tp->B * sp->Tt, C = tp->C;
    const float *dbranch = branch_grad(sp, dout, u, h.mlp ? 2 : 1);
    ops_bias_backward(hg.bias, dbranch, Mt, C);
    sum_over_group(sp, hg.bias, (size_t)C);
    float *dall = sp->s.whole[0], *dpartial = sp->s.whole[1];
    sp_gather_tokens(sp, dbranch, dall);         // the reduce-scatter's backward: all-gather
    ops_fill(dpartial, 0, (size_t)tp->B * tp->T * C);
    (h.mlp ? tpg_mlp_backward : tpg_attention_backward)(tp, &a->layers, p, g, h.all, dall, dpartial);
    float *dln = sp->s.local[0];
    sp_scatter_tokens(sp, dpartial, dln);        // the all-gather's backward: reduce-scatter
    if (dx != dout) mem_copy(dx, dout, local_floats(sp) * sizeof(float));   // the residual path
    // The LayerNorm's backward on the whole sequence: its gradient and input gathered, every rank the
    // whole weight gradients (no sum over the group), its own tokens of the input gradient.
    const int BT = tp->B * tp->T;
    sp_gather_tokens(sp, dln, dall);
    float *xw = sp->s.whole[1];
    sp_gather_tokens(sp, x, xw);
    ops_fill(DXW, 0, (size_t)BT * C);
    ops_layernorm_backward(DXW, hg.lnw, hg.lnb, dall, xw, h.lnw, MEAN[2 * (u - 1) + h.mlp], RSTD[2 * (u - 1) + h.mlp],
                           BT, C);
    ops_accumulate_2d(dx, sp->Tt * C, DXW + (size_t)tp->r * sp->Tt * C, tp->T * C, tp->B, sp->Tt * C);
}

void sp_block_forward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, const float *x, float *out) {
    half_forward(sp, half(false, a, (GptBlockView *)p), a, p, x, a->mid, u);
    half_forward(sp, half(true, a, (GptBlockView *)p), a, p, a->mid, out, u);
}

void sp_block_backward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, const float *x,
                       const float *dout, float *dx) {
    // The MLP half leaves the gradient of mid in dx; the attention half
    // takes it from there and adds its own.
    half_backward(sp, half(true, a, (GptBlockView *)p), a, p, g, half(true, a, g), a->mid, dout, dx, u);
    half_backward(sp, half(false, a, (GptBlockView *)p), a, p, g, half(false, a, g), x, dx, dx, u);
}

// ---- the embeddings and the head -------------------------------------------------------

void sp_embed_forward(Sp *sp, const GptEmbedView *p, const int *tokens, float *out) {
    TpShard *tp = &sp->tp;
    // The lookup is vocabulary-parallel over all tokens: a partial sum,
    // reduce-scattered to each rank's tokens (where lab04 all-reduced).
    float *partial = sp->s.whole[0];
    tpg_embed_forward(tp, p, tokens, partial);
    float *x = sp->dropout > 0 ? sp->s.local[0] : out;
    sp_scatter_tokens(sp, partial, x);
    ops_positions_forward(x, p->wpe, tp->B, sp->Tt, tp->C, tp->r * sp->Tt);   // this rank's positions
    if (sp->dropout > 0)
        ops_dropout_forward(out, x, sp->dropout, sp_dropout_key(sp, 0, 0), tp->B, sp->Tt, tp->C);
}

void sp_embed_backward(Sp *sp, GptEmbedView *g, const int *tokens, const float *dout) {
    TpShard *tp = &sp->tp;
    const float *d = dout;
    if (sp->dropout > 0) {
        ops_fill(sp->s.local[0], 0, local_floats(sp));
        ops_dropout_backward(sp->s.local[0], dout, sp->dropout, sp_dropout_key(sp, 0, 0), tp->B, sp->Tt, tp->C);
        d = sp->s.local[0];
    }
    ops_positions_backward(g->wpe, d, tp->B, sp->Tt, tp->C, tp->r * sp->Tt);
    sum_over_group(sp, g->wpe, (size_t)tp->T * tp->C);   // each rank saw its own positions
    float *dall = sp->s.whole[0];
    sp_gather_tokens(sp, d, dall);                       // the reduce-scatter's backward
    tpg_embed_backward(tp, g, tokens, dall);
}

void sp_head_forward(Sp *sp, SpHeadActs *a, const GptHeadView *p, const float *x, const int *targets,
                     float *losses) {
    TpShard *tp = &sp->tp;
    float *ln = sp->s.local[0];
    ops_layernorm_forward(ln, a->lnf_mean, a->lnf_rstd, x, p->lnfw, p->lnfb, tp->B * sp->Tt, tp->C);
    sp_gather_tokens(sp, ln, a->lnf_all);                // g-bar before the column-parallel lm_head
    tpg_head_forward(tp, &a->ce, p, a->lnf_all, targets, losses);
}

void sp_head_backward(Sp *sp, SpHeadActs *a, const GptHeadView *p, GptHeadView *g, const float *x, float *dx) {
    TpShard *tp = &sp->tp;
    float *dpartial = sp->s.whole[1];
    ops_fill(dpartial, 0, (size_t)tp->B * tp->T * tp->C);
    tpg_head_backward(tp, &a->ce, p, g, a->lnf_all, dpartial);
    float *dln = sp->s.local[0];
    sp_scatter_tokens(sp, dpartial, dln);                // g-bar's backward: reduce-scatter
    ops_layernorm_backward(dx, g->lnfw, g->lnfb, dln, x, p->lnfw, a->lnf_mean, a->lnf_rstd, tp->B * sp->Tt, tp->C);
    sum_over_group(sp, g->lnfw, (size_t)tp->C);
    sum_over_group(sp, g->lnfb, (size_t)tp->C);
}
