// tp_net.c: a tensor-parallel model composed around its split layers (tp_net.h).
#include "tp_net.h"

#include "mem.h"
#include "ops.h"

static size_t rows(const TpNet *n) { return (size_t)n->B * n->T; }

DropoutKey tp_net_dropout_key(const TpNet *n, int layer, int site) {
    DropoutKey k = {.seed = n->seed, .layer = layer, .site = site, .step = n->step, .row0 = n->row0,
                    .t0 = 0, .c0 = 0, .Tg = n->T, .Cg = n->C};
    return k;
}

// x_out = x + dropout(branch). The branch is whole on every rank, so every
// rank draws the same mask, as one device would.
static void residual(TpNet *n, float *x_out, const float *x, const float *branch, int layer, int site) {
    if (n->dropout > 0) {
        ops_dropout_forward(n->branch2, branch, n->dropout, tp_net_dropout_key(n, layer, site), n->B, n->T, n->C);
        branch = n->branch2;
    }
    ops_add(x_out, x, branch, rows(n) * n->C);
}

// The gradient reaching a dropped-out branch: dout through the same mask.
static const float *branch_grad(TpNet *n, const float *dout, int layer, int site) {
    if (n->dropout == 0) return dout;
    ops_fill(n->branch2, 0, rows(n) * n->C);
    ops_dropout_backward(n->branch2, dout, n->dropout, tp_net_dropout_key(n, layer, site), n->B, n->T, n->C);
    return n->branch2;
}

// ---- a block: x + attention(LN(x)), then the same with the MLP ----------------------

void tp_net_block_forward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, const float *x, float *out) {
    const int M = (int)rows(n), C = n->C;
    const size_t MC = rows(n) * C;
    ops_layernorm_forward(k->ln1.out, k->ln1.mean, k->ln1.rstd, x, p->ln1w, p->ln1b, M, C);
    ops_fill(n->branch, 0, MC);
    n->layers->attention_forward(n->ctx, k->layers, p, k->ln1.out, n->branch);
    residual(n, k->mid, x, n->branch, u, 1);
    ops_layernorm_forward(k->ln2.out, k->ln2.mean, k->ln2.rstd, k->mid, p->ln2w, p->ln2b, M, C);
    ops_fill(n->branch, 0, MC);
    n->layers->mlp_forward(n->ctx, k->layers, p, k->ln2.out, n->branch);
    residual(n, out, k->mid, n->branch, u, 2);
}

void tp_net_block_backward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, GptBlockView *g, const float *x,
                           const float *dout, float *dx) {
    const int M = (int)rows(n), C = n->C;
    const size_t MC = rows(n) * C;
    float *dmid = n->branch;
    const float *dbranch = branch_grad(n, dout, u, 2);
    ops_fill(n->dln, 0, MC);
    n->layers->mlp_backward(n->ctx, k->layers, p, g, k->ln2.out, dbranch, n->dln);
    mem_copy(dmid, dout, MC * sizeof(float));   // the residual path
    ops_layernorm_backward(dmid, g->ln2w, g->ln2b, n->dln, k->mid, p->ln2w, k->ln2.mean, k->ln2.rstd, M, C);
    dbranch = branch_grad(n, dmid, u, 1);
    ops_fill(n->dln, 0, MC);
    n->layers->attention_backward(n->ctx, k->layers, p, g, k->ln1.out, dbranch, n->dln);
    mem_copy(dx, dmid, MC * sizeof(float));
    ops_layernorm_backward(dx, g->ln1w, g->ln1b, n->dln, x, p->ln1w, k->ln1.mean, k->ln1.rstd, M, C);
}

// ---- the embeddings and the head ------------------------------------------------------

static void embed_forward(TpNet *n, float *params) {
    GptEmbedView p = tp_layout_embed_view(n->L, params);
    float *out = n->dropout > 0 ? n->branch : n->stream[1];
    ops_fill(out, 0, rows(n) * n->C);
    n->layers->embed_forward(n->ctx, &p, n->tokens, out);
    if (n->dropout > 0)
        ops_dropout_forward(n->stream[1], out, n->dropout, tp_net_dropout_key(n, 0, 0), n->B, n->T, n->C);
}

static void embed_backward(TpNet *n, float *grads) {
    GptEmbedView g = tp_layout_embed_view(n->L, grads);
    n->layers->embed_backward(n->ctx, &g, n->tokens, branch_grad(n, n->dstream[1], 0, 0));
}

static void head_forward(TpNet *n, float *params) {
    const int M = (int)rows(n), u = n->m->nunits - 1;
    GptHeadView p = tp_layout_head_view(n->L, params);
    ops_layernorm_forward(n->lnf.out, n->lnf.mean, n->lnf.rstd, n->stream[u], p.lnfw, p.lnfb, M, n->C);
    ops_fill(n->losses, 0, (size_t)M);
    n->layers->head_forward(n->ctx, n->head, &p, n->lnf.out, n->targets, n->losses);
}

static void head_backward(TpNet *n, float *params, float *grads) {
    const int M = (int)rows(n), u = n->m->nunits - 1;
    const size_t MC = rows(n) * n->C;
    GptHeadView p = tp_layout_head_view(n->L, params), g = tp_layout_head_view(n->L, grads);
    ops_fill(n->dln, 0, MC);
    n->layers->head_backward(n->ctx, n->head, &p, &g, n->lnf.out, n->dln);
    float *dx = n->dstream[u];
    ops_fill(dx, 0, MC);
    ops_layernorm_backward(dx, g.lnfw, g.lnfb, n->dln, n->stream[u], p.lnfw, n->lnf.mean, n->lnf.rstd, M, n->C);
}

// ---- the units ---------------------------------------------------------------------------

void tp_net_unit_forward(TpNet *n, int u, float *params) {
    switch (n->m->units[u].kind) {
    case UNIT_EMBED: embed_forward(n, params); break;
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(n->L, u, params);
        tp_net_block_forward(n, u, &n->blocks[u - 1], &p, n->stream[u], n->stream[u + 1]);
        break;
    }
    case UNIT_HEAD: head_forward(n, params); break;
    }
}

void tp_net_unit_backward(TpNet *n, int u, float *params, float *grads) {
    switch (n->m->units[u].kind) {
    case UNIT_EMBED: embed_backward(n, grads); break;
    case UNIT_BLOCK: {
        GptBlockView p = tp_layout_block_view(n->L, u, params), g = tp_layout_block_view(n->L, u, grads);
        tp_net_block_backward(n, u, &n->blocks[u - 1], &p, &g, n->stream[u], n->dstream[u + 1], n->dstream[u]);
        break;
    }
    case UNIT_HEAD: head_backward(n, params, grads); break;
    }
}

// ---- allocation ------------------------------------------------------------------------

void tp_net_block_alloc(TpNetBlock *k, size_t M, int C, MemCategory cat) {
    const size_t MC = M * (size_t)C;
    k->ln1.out = mem_alloc_floats(MC, cat, "ln1");
    k->ln1.mean = mem_alloc_floats(M, cat, "ln1 mean");
    k->ln1.rstd = mem_alloc_floats(M, cat, "ln1 rstd");
    k->mid = mem_alloc_floats(MC, cat, "residual mid");
    k->ln2.out = mem_alloc_floats(MC, cat, "ln2");
    k->ln2.mean = mem_alloc_floats(M, cat, "ln2 mean");
    k->ln2.rstd = mem_alloc_floats(M, cat, "ln2 rstd");
    k->layers = NULL;
}

void tp_net_block_free(TpNetBlock *k) {
    float *all[] = {k->ln1.out, k->ln1.mean, k->ln1.rstd, k->mid, k->ln2.out, k->ln2.mean, k->ln2.rstd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}

void tp_net_head_alloc(TpHeadActs *a, size_t M, int nlm, MemCategory cat) {
    a->logits = mem_alloc_floats(M * (size_t)nlm, cat, "logits (this rank's columns)");
    a->mx = mem_alloc_floats(M, cat, "row max");
    a->sumexp = mem_alloc_floats(M, cat, "sum of exp");
    a->target_logit = mem_alloc_floats(M, cat, "target logit");
    a->target_ids = mem_alloc(M * sizeof(int), cat, "target ids");
}

void tp_net_head_free(TpHeadActs *a) {
    void *all[] = {a->logits, a->mx, a->sumexp, a->target_logit, a->target_ids};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
}
