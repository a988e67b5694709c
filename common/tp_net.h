// tp_net.h: a tensor-parallel model composed around its split layers (labs
// 04 and 06). The single-device model's order (gpt.c): the embeddings,
// each block, the head; inside a block the LayerNorms, the residual adds
// and dropout, which every rank of the group does alike on every token.
// The layers split over the group are called through a table
// (TpNetLayers), so that each lab plugs in its own.
//
// The layers are whole on both sides: each takes its input the same on
// every rank and leaves its output the same on every rank, so whatever
// communication that takes is the layer's. lab04 plugs in the student's
// layers (tp.c: Megatron's f and g inside them); lab06's --sp off plugs in
// its given split layers with an all-reduce around each.
//
// Full recomputation (TpNet.rc, lab04's --recompute full): a block keeps
// only its input, the residual stream stream[u] the model keeps anyway; its
// forward pass keeps its activations in one set shared by the blocks, and
// its backward pass first runs the block's forward again into that set,
// from stream[u]: the layers whole, their communication (g's all-reduces)
// again. A layer sees its forward called twice a step on the same input,
// into a set another block has just used: it must be a pure function of x
// and p. Dropout's masks are keyed (tp_net_dropout_key): drawn again, the
// same.
//
// M = B * T rows: every token of this rank's batch; C channels.
//
// Precision (common/prec.h): what a layer keeps and what passes between the
// layers and the composition (the residual stream, the LayerNorms' outputs,
// a layer's output and input gradient: `void *`) is of the run's type, bf16
// or fp32; what is computed on the way (a branch's gradient, dropout, the
// residual adds) is fp32, as gpt.c does it. In bf16 a unit's parameters are
// bf16 (2 bytes) and the layers see them widened to fp32; its gradient is
// made in fp32 and added into the bf16 one once (ops_accumulate_bf16).
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gpt.h"
#include "mem.h"
#include "ops.h"
#include "prec.h"
#include "tp_layout.h"

// What the vocabulary-parallel head keeps: this rank's logits and the
// cross-entropy's parts. A rank holds the columns [lm0, lm0 + nlm) of
// head.lm_head: the logits of the token ids lm0 .. lm0 + nlm - 1.
typedef struct {
    float *logits;        // (M, nlm) the logits of this rank's vocabulary columns (fp32 in bf16 too: the
                          // cross-entropy computes from fp32 logits, as gpt.c's)
    float *mx;            // (M) the row maximum over the WHOLE vocabulary
    float *sumexp;        // (M) sum over the whole vocabulary of exp(logit - mx)
    float *target_logit;  // (M) the target's logit
    int *target_ids;      // (M) targets inside [lm0, lm0 + nlm), minus lm0; -1 elsewhere
} TpHeadActs;

// A split layer of a block (attention, or the MLP). ctx is the lab's (its
// group, sizes and scratch), acts what the layer keeps for its backward
// pass (the lab's type: TpNetBlock.layers). Forward: x (M, C) whole, out
// (M, C) whole, the bias after the layer included, both of the run's type;
// out is zeroed by the caller. Backward: dout (M, C) whole, fp32; the
// parameter gradients ADD into g (fp32); dx (M, C) of the run's type,
// zeroed by the caller, whole.
typedef void (*TpLayerForward)(void *ctx, void *acts, const GptBlockView *p, const void *x, void *out);
typedef void (*TpLayerBackward)(void *ctx, void *acts, const GptBlockView *p, GptBlockView *g, const void *x,
                                const float *dout, void *dx);

typedef struct {
    TpLayerForward attention_forward, mlp_forward;
    TpLayerBackward attention_backward, mlp_backward;
    // The embeddings: out (M, C) of the run's type, zeroed by the caller,
    // = wte[token] + wpe[t], whole (tokens (M) on the device). The backward
    // ADDS into g from dout (M, C) fp32, whole.
    void (*embed_forward)(void *ctx, const GptEmbedView *p, const int *tokens, void *out);
    void (*embed_backward)(void *ctx, GptEmbedView *g, const int *tokens, const float *dout);
    // The LM head and the cross-entropy: x (M, C) the final LayerNorm's
    // output, whole, of the run's type; losses (M) fp32, zeroed by the
    // caller, each token's. The backward: the mean loss's gradient into g
    // (+=) and dx (M, C) of the run's type, zeroed by the caller, whole.
    void (*head_forward)(void *ctx, TpHeadActs *a, const GptHeadView *p, const void *x, const int *targets,
                         float *losses);
    void (*head_backward)(void *ctx, TpHeadActs *a, const GptHeadView *p, GptHeadView *g, const void *x,
                          void *dx);
} TpNetLayers;

// One LayerNorm's output and statistics, kept for its backward pass.
typedef struct {
    void *out;             // (M, C) the run's type
    float *mean, *rstd;    // (M) fp32
} TpNorm;

// What a block keeps from its forward pass for its backward pass.
typedef struct {
    TpNorm ln1;            // the first LayerNorm: attention's input
    void *mid;             // (M, C) the residual stream between attention and the MLP (the run's type)
    TpNorm ln2;            // the second: the MLP's input
    void *layers;          // what the block's split layers keep (the lab's type)
} TpNetBlock;

typedef struct {
    const TpNetLayers *layers;
    void *ctx;             // the layers' first argument
    const Gpt *m;          // the whole model: its units
    const TpLayout *L;     // this rank's parts of every unit: their views
    const Prec *prec;      // the run's precision (NULL: fp32)
    int B, T, C;
    // Dropout: the probability (0: none), and its masks' keys: the seed,
    // the step, and the global row of local row 0.
    float dropout;
    uint64_t seed;
    int step, row0;
    // Activations and scratch, allocated by the lab.
    int *tokens, *targets;         // (M) on the device
    void **stream, **dstream;      // (nunits + 1) of (M, C), the run's type: unit u reads stream[u], writes
                                   // stream[u + 1]; their gradients
    TpNetBlock *blocks;            // (L)
    TpNorm lnf;                    // the final LayerNorm
    TpHeadActs *head;
    float *losses;                 // (M) each token's loss
    void *branch, *dln;            // (M, C) scratch of the run's type: a layer's output, its input gradient
    float *branch2;                // (M, C) scratch, fp32
    // bf16's scratch (tp_net_alloc_bf16; NULL in fp32): three fp32 (M, C),
    // and the unit running widened to fp32 and its fp32 gradient, each of
    // the largest unit's part.
    float *f32[3], *unit32, *gunit32;
    // Full recomputation (NULL: off, and `blocks` holds each block's set):
    // the one set every block's forward keeps into, made again at the start
    // of each block's backward pass; `blocks` is then not read. What the
    // forwards made again cost, counted here: multiply-adds (ops_work),
    // bus bytes sent (comm_stats) and seconds.
    TpNetBlock *rc;
    double again_work, again_bytes, again_s;
} TpNet;

// Unit u forward, from stream[u] (the embeddings: from tokens) into
// stream[u + 1] (the head: into losses); params its parts on this rank, of
// the run's type.
void tp_net_unit_forward(TpNet *n, int u, void *params);
// Unit u backward, from dstream[u + 1] (the head: from the mean loss) into
// dstream[u]; gradients ADD into grads (the run's type; the embeddings
// write no dstream).
void tp_net_unit_backward(TpNet *n, int u, void *params, void *grads);

// One block on any buffers of the run's type: x, out, dout, dx (M, C); u
// is its unit (1 .. L), the layer of its dropout masks; k what it keeps;
// p and g fp32 views. dx may be dout. out NULL: recomputation's forward
// again, which makes what k keeps and writes no output (the next block has
// read it already); its layers still run whole, their g's with them (the
// MLP's kept hidden activations come from its one forward call).
void tp_net_block_forward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, const void *x, void *out);
void tp_net_block_backward(TpNet *n, int u, TpNetBlock *k, const GptBlockView *p, GptBlockView *g, const void *x,
                           const void *dout, void *dx);

// bf16's scratch of the composition (ACTS; nothing in fp32), for M rows of
// C and units of up to `unit` elements; free it.
void tp_net_alloc_bf16(TpNet *n, size_t M, int C, size_t unit);
void tp_net_free_bf16(TpNet *n);

// The key of dropout's mask at (layer, site) on every token and channel:
// the one single-device training draws (layer 0 the embeddings', layer u
// site 1 attention's, site 2 the MLP's).
DropoutKey tp_net_dropout_key(const TpNet *n, int layer, int site);

// A block's own kept activations (not its layers'), M rows of C, in
// category cat, of prec's type (NULL: fp32); free them.
void tp_net_block_alloc(TpNetBlock *k, size_t M, int C, MemCategory cat, const Prec *prec);
void tp_net_block_free(TpNetBlock *k);
// The head's, M rows and nlm vocabulary columns, in category cat; free them.
void tp_net_head_alloc(TpHeadActs *a, size_t M, int nlm, MemCategory cat);
void tp_net_head_free(TpHeadActs *a);
