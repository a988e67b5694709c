// sp.c: YOUR FILE. Sequence parallelism on top of tensor parallelism. See
// sp.h for the hooks, README.md for the picture, and run
//     make lab06 && mpirun -np 4 build/lab06
// to see the loss beside single-device training's (dropout on), each
// rank's activations per layer beside the formulas, and what is missing.
//
// As given, every function does nothing, so the program runs from the
// start (and learns nothing). Do the TODOs in order; delete a function's
// lab_todo(...) line once it is done.
//
// Tools: the given split layers (tp_given.h: tpg_attention_forward/backward,
// tpg_mlp_*, tpg_embed_*, tpg_head_*: input whole, output a partial sum);
// ops.h (ops_layernorm_forward/backward, ops_dropout_forward/backward,
// ops_add, ops_add_bias, ops_bias_backward, ops_copy_2d, ops_positions_*);
// on sp->tp.group: comm_all_gather_typed, comm_reduce_scatter_typed (in the
// run's type, sp->tp.prec->type; comm_at for an element's address),
// comm_all_reduce_sum (the fp32 gradients).
// Scratch: sp->s.whole[0..1] (B, T, C), sp->s.local[0..1] (B, Tt, C),
// sp->s.blocks (t, B, Tt, C), all of the run's type; sp->s.f32[0..3]
// (B, Tt, C) and sp->s.whole32 (B, T, C) fp32 for bf16's widenings.
//
// Precision: write each function once for fp32 and bf16 (sp.h): LayerNorm,
// dropout and the residual adds compute in fp32 on prec_read's widening
// (prec_write where to compute a result, prec_keep to round it into a kept
// tensor, prec_round to send an fp32 one); in an fp32 run each of these is
// the buffer itself. Start with fp32 (--precision fp32, the default).
#include "sp.h"

#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"
#include "prec.h"

// ---- 2. along the sequence ---------------------------------------------------------

void sp_gather_tokens(Sp *sp, const void *local, void *whole) {
    lab_todo(__func__);
    // TODO(lab06): every rank's (B, Tt, C) into the whole (B, T, C), rank q's
    // tokens at [q Tt, (q + 1) Tt) of every row. comm_all_gather_typed lays
    // the ranks' blocks one after another, (t, B, Tt, C): move each into
    // place (ops_copy_2d_typed: B rows of Tt C elements, T C elements apart
    // in the whole; sp->tp.prec->elem bytes an element).
    (void)sp, (void)local, (void)whole;
}

void sp_scatter_tokens(Sp *sp, const void *whole, void *local) {
    lab_todo(__func__);
    // TODO(lab06): the sum over the group of this rank's tokens of whole:
    // lay each rank's tokens together first (the reverse of the gather's
    // move), then comm_reduce_scatter_typed (COMM_SUM). Along the tokens,
    // not the channels.
    (void)sp, (void)whole, (void)local;
}

// ---- 4. dropout by the global token ------------------------------------------------

DropoutKey sp_dropout_key(const Sp *sp, int layer, int site) {
    lab_todo(__func__);
    // TODO(lab06): the key of this rank's tokens (ops.h, DropoutKey): which
    // token of the row is this rank's first? (Tg and Cg: the whole row's.)
    DropoutKey k = {.seed = sp->seed, .layer = layer, .site = site, .step = sp->step, .row0 = sp->row0,
                    .t0 = 0, .c0 = 0, .Tg = sp->tp.T, .Cg = sp->tp.C};
    return k;
}

// ---- 1 and 3. the model on this rank's tokens ----------------------------------------

void sp_block_forward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, const void *x, void *out) {
    lab_todo(__func__);
    // TODO(lab06): for attention, then the MLP, on this rank's Tt tokens:
    // LayerNorm (keep its statistics in a), all-gather the tokens (into
    // a->ln1_all / ln2_all, kept for the backward pass), the given layer on
    // all of them (a partial sum), reduce-scatter along the tokens, the bias
    // once, dropout (layer u, site 1 or 2, with sp_dropout_key) and the
    // residual add (a->mid between the two).
    (void)sp, (void)u, (void)a, (void)p, (void)x, (void)out;
}

void sp_block_backward(Sp *sp, int u, SpBlockActs *a, const GptBlockView *p, GptBlockView *g, const void *x,
                       const void *dout, void *dx) {
    lab_todo(__func__);
    // TODO(lab06): the forward pass backwards: a reduce-scatter's backward
    // is an all-gather, an all-gather's a reduce-scatter. 3: the gradients
    // of the LayerNorm weights, attn.bo and mlp.b2 come from this rank's
    // tokens only: sum them over the group. (bf16: carry mid's gradient
    // from the MLP's half to attention's in fp32, as single-device training
    // does, and round into dx once at the end.)
    // TODO(lab06) 5, --recompute selective (sp->recompute ==
    // GPT_RECOMPUTE_SELECTIVE): the given attention layer kept its
    // probabilities (the 5as^2b/t term) in one buffer that every block
    // writes (tp.att_again), not in a->layers, so what it holds now is the
    // last block's. Before attention's backward, make this block's again
    // from its kept q and k: tpg_attention_again. (Keeping them per layer
    // instead is what recomputation saves.)
    // TODO(lab06) 6, --recompute full (GPT_RECOMPUTE_FULL): the harness
    // kept this block's input x alone, and gave every block the same set a,
    // which holds what the last block's forward left there. First run this
    // block's forward again from x into a (one call), its output into
    // sp->s.again (scratch: the residual stream after the block is the next
    // block's input, kept), then the backward as always. Dropout's masks
    // come out the same if the key does (the same u, the same step). Then
    // delete the lab_todo line below.
    if (sp->recompute == GPT_RECOMPUTE_FULL) lab_todo("sp_block_backward under --recompute full (TODO 6)");
    (void)sp, (void)u, (void)a, (void)p, (void)g, (void)x, (void)dout, (void)dx;
}

void sp_embed_forward(Sp *sp, const GptEmbedView *p, const int *tokens, void *out) {
    lab_todo(__func__);
    // TODO(lab06): the given lookup (a partial sum over all tokens),
    // reduce-scattered to this rank's tokens, their positions added, dropout
    // (layer 0, site 0).
    (void)sp, (void)p, (void)tokens, (void)out;
}

void sp_embed_backward(Sp *sp, GptEmbedView *g, const int *tokens, const void *dout) {
    lab_todo(__func__);
    // TODO(lab06): backwards; embed.wpe's gradient summed over the group.
    (void)sp, (void)g, (void)tokens, (void)dout;
}

void sp_head_forward(Sp *sp, SpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                     float *losses) {
    lab_todo(__func__);
    // TODO(lab06): the final LayerNorm on this rank's tokens, all-gathered
    // (into a->lnf_all), then the given cross-entropy.
    (void)sp, (void)a, (void)p, (void)x, (void)targets, (void)losses;
}

void sp_head_backward(Sp *sp, SpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x, void *dx) {
    lab_todo(__func__);
    // TODO(lab06): backwards; the final LayerNorm's gradients summed over
    // the group.
    (void)sp, (void)a, (void)p, (void)g, (void)x, (void)dx;
}
