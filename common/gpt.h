// gpt.h: the model, a small GPT built as units (docs/model.md).
//
// The model is a list of units: the embeddings, each transformer block, and
// the final norm with the LM head. Each unit owns one flat fp32 buffer of
// parameters with named tensors inside it, and the same layout serves its
// gradients and optimizer state. Units run one at a time:
//   - data parallelism reduces a unit's gradients as soon as its backward is done,
//   - ZeRO-3 gathers a unit's parameters just before it runs,
//   - pipeline stages own a range of units.
// So the parameters and gradients are passed in at every call, and a Gpt
// holds only the activations of one (micro-)batch.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bf16.h"
#include "mem.h"

typedef struct DumpWriter DumpWriter;

// The precision a model runs in (docs/model.md, "Mixed precision").
// GPT_FP32: every tensor fp32. GPT_BF16: the weights a unit runs on, its
// gradients and the activations kept for the backward pass are bf16 (2
// bytes an element); every matrix product takes bf16 inputs and sums in
// fp32; LayerNorm, GELU, attention's softmax, dropout, the residual adds and
// the cross-entropy compute in fp32 and store bf16 where they store; the
// LayerNorms' means and inverse deviations and the per-token losses stay
// fp32. The fp32 master weights and moments are the optimizer's (train.h).
typedef enum { GPT_FP32, GPT_BF16 } GptPrecision;

// Activation recomputation (Korthikanti et al. 2022), per block:
// GPT_RECOMPUTE_NONE keeps every activation the backward pass reads;
// GPT_RECOMPUTE_SELECTIVE keeps all but the attention core's probabilities
// (B, NH, T, T), which the backward pass makes again from the kept q and k;
// GPT_RECOMPUTE_FULL keeps only the block's input (the residual stream) and
// runs the block's forward again at the start of its backward pass. The
// recomputed tensors live in one shared set (Gpt.rc, scratch), not per
// block. Dropout's masks are keyed by (step, row, layer, site, position):
// recomputed, they are the same masks. The ops and their inputs are the
// same, so the training is the same to the bit.
typedef enum { GPT_RECOMPUTE_NONE, GPT_RECOMPUTE_SELECTIVE, GPT_RECOMPUTE_FULL } GptRecompute;

typedef struct {
    int B;          // rows this device runs at once (a micro-batch, or a rank's share)
    int T;          // tokens per row (and positions in wpe)
    int C;          // channels
    int NH;         // heads
    int L;          // blocks
    int V;          // vocabulary
    float dropout;  // probability (0: no dropout)
    uint64_t seed;  // of initialisation and dropout
    GptPrecision precision;   // GPT_FP32 (0, the default) or GPT_BF16
    // Under GPT_BF16: the parameter gradients in fp32 (4 bytes an element),
    // which the backward pass adds into in fp32 with no rounding, as
    // Megatron's fp32 gradient accumulation (--grad-reduce fp32).
    bool grads_fp32;
    GptRecompute recompute;   // GPT_RECOMPUTE_NONE (0, the default), SELECTIVE or FULL
} GptConfig;

enum { GPT_MAX_TENSORS = 16 };

typedef struct {
    const char *name;   // "attn.wq"
    int ndim;           // 1 or 2
    int shape[2];
    size_t offset;      // first element, in floats from the start of the unit
    size_t count;
    float init_std;     // normal(0, init_std) when > 0 ...
    float init_value;   // ... else this constant
} GptTensor;

typedef enum { UNIT_EMBED, UNIT_BLOCK, UNIT_HEAD } GptUnitKind;

typedef struct {
    GptUnitKind kind;
    char name[16];      // "embed", "block0", "head"
    int ntensors;
    GptTensor tensors[GPT_MAX_TENSORS];
    size_t size;        // floats in the unit
} GptUnit;

// Named views into a block unit's buffer (parameters or gradients alike).
typedef struct {
    float *ln1w, *ln1b;   // (C), (C)
    float *wq, *bq;       // (C, C), (C)   query weights, columns = heads * head size
    float *wk, *bk;       // (C, C), (C)
    float *wv, *bv;       // (C, C), (C)
    float *wo, *bo;       // (C, C), (C)   attention output projection
    float *ln2w, *ln2b;   // (C), (C)
    float *w1, *b1;       // (C, 4C), (4C) first MLP matrix
    float *w2, *b2;       // (4C, C), (C)  second MLP matrix
} GptBlockView;

typedef struct {
    float *wte;           // (V, C) token embeddings
    float *wpe;           // (T, C) position embeddings
} GptEmbedView;

typedef struct {
    float *lnfw, *lnfb;   // (C), (C)
    float *lm_head;       // (C, V)
} GptHeadView;

// Activations of one block, kept for its backward. The void * tensors are
// of the model's precision (float, or bf16 under GPT_BF16); the LayerNorms'
// statistics are fp32 in both.
typedef struct {
    void *ln1;                          // (B, T, C)
    float *ln1_mean, *ln1_rstd;         // (B, T), (B, T)
    void *q, *k, *v;                    // (B, T, C) each
    void *att;                          // (B, NH, T, T) attention probabilities
    void *y;                            // (B, T, C) attention output, before its projection
    void *mid;                          // (B, T, C) residual stream after attention
    void *ln2;                          // (B, T, C)
    float *ln2_mean, *ln2_rstd;         // (B, T), (B, T)
    void *h, *hg;                       // (B, T, 4C) MLP hidden, before and after GELU
} GptBlockActs;

// The activations of one (micro-)batch of cfg.B rows for the units
// [u0, u1): what their forward passes keep for their backward passes. A
// pipeline stage holds its own units' only, one set per micro-batch in
// flight; everyone else uses the model's set of every unit (gpt_alloc_acts).
typedef struct {
    int u0, u1;                 // the units it serves
    // The batch on the device: tokens for the embeddings, targets for the head.
    int *tokens, *targets;      // (B, T) each (only where those units are in range)
    int step, row0;             // for dropout: the step, and the global row of local row 0
    float loss_scale;           // gradient of the loss is scaled by this (1 / tokens averaged over)
    // The residual stream between units: stream[u] is the input of unit u
    // (stream[0] is unused: the embeddings read tokens), and dstream[u] its
    // gradient. In a set for [u0, u1): u0's input (what a pipeline stage
    // receives) to u1's (what it sends); NULL outside. The model's
    // precision, both (what a pipeline stage sends: 4 or 2 bytes an element).
    void **stream, **dstream;   // (nunits + 1) of (B, T, C)
    GptBlockActs *blocks;       // (L), those of the blocks in range
    void *lnf;                  // (B, T, C) the head's, when in range (the model's precision)
    float *lnf_mean, *lnf_rstd; // (B, T), (B, T)
    float *logits;              // (B, T, V) fp32 (NULL under GPT_BF16, where they are scratch)
    void *probs;                // (B, T, V) the model's precision
    float *losses;              // (B, T) fp32
    // The backward pass split (gpt_acts_backward_input, then _weight): what
    // unit u's B pass kept for its W pass (fp32, NULL outside), and whether
    // its W is still to run.
    float **saved;              // (nunits)
    bool *saved_pending;        // (nunits)
} GptActs;

typedef struct {
    GptConfig cfg;
    int nunits;                 // L + 2
    GptUnit *units;             // (nunits)
    size_t nparams;             // Ψ, the sum of unit sizes
    GptActs *acts;              // the set of every unit (gpt_alloc_acts), used by the calls without a set
    // Scratch of one unit's passes, shared by every set (gpt_alloc_scratch).
    float *s_c, *s_c2, *s_4c, *s_4c2, *s_att, *s_dq, *s_dk, *s_dv;
    float *s_logits;            // (B, T, V)
    // GPT_BF16's scratch besides: fp32 copies of bf16 activations for the
    // ops that read fp32 (s_x, s_y (B, T, C), s_h (B, T, 4C), s_att2 (B, NH,
    // T, T), s_probs (B, T, V)); a matrix product's fp32 gradient input
    // rounded to bf16 (s_b16, (B, T, max(4C, V))); the unit running widened
    // to fp32 (s_unit: its LayerNorm weights and biases are read there) and
    // its parameter gradients in fp32 before they are added into the bf16
    // ones (s_gunit), each of the largest unit's size.
    float *s_x, *s_y, *s_h, *s_att2, *s_probs, *s_unit, *s_gunit;
    bf16 *s_b16;
    const bf16 *run16;          // the bf16 unit whose widening s_unit holds
    size_t run_size;            // its elements
    // Recomputation's shared set (scratch): under GPT_RECOMPUTE_FULL a whole
    // block's activations, under SELECTIVE its probabilities (rc.att) alone;
    // every block's forward and backward use it in place of their own.
    GptBlockActs rc;
} Gpt;

// The units and their tensors for a configuration (no memory for tensors).
// CHECKs the configuration (heads divide channels, sizes positive).
Gpt *gpt_create(const GptConfig *cfg);
// Bytes a device holds to train this configuration with AdamW: parameters,
// gradients and two moments (16 bytes a parameter, in fp32 as in bf16 with
// its fp32 master copy) and the activations gpt_alloc_acts makes for cfg->B
// rows (counted at 4 bytes an element in either precision, with bf16's
// extra scratch). An upper estimate from the shapes
// alone (no allocation), in double: large shapes overflow size_t products.
double gpt_bytes_needed(const GptConfig *cfg);
void gpt_free(Gpt *m);

// Named views of unit buffers (the same layout for parameters and gradients).
GptEmbedView gpt_embed_view(const Gpt *m, float *unit);
GptBlockView gpt_block_view(const Gpt *m, float *unit);
GptHeadView gpt_head_view(const Gpt *m, float *unit);

// Allocate one buffer per unit (zero-filled), counted under `cat`: of fp32
// elements (gpt_alloc_units), or of the model's precision (gpt_alloc_run_units:
// what the unit calls below take as params and grads). Free either.
float **gpt_alloc_units(const Gpt *m, MemCategory cat, const char *what);
void **gpt_alloc_run_units(const Gpt *m, MemCategory cat, const char *what);
void gpt_free_units(const Gpt *m, void *units);
// Bytes of one element of the model's precision (4 or 2), and its name ("fp32", "bf16").
size_t gpt_elem_size(const Gpt *m);
// "none", "selective", "full" (as --recompute takes them), and back.
const char *gpt_recompute_name(GptRecompute r);
GptRecompute gpt_recompute_parse(const char *name);
// The same of the parameter gradients (4 under grads_fp32), and units of them.
size_t gpt_grad_elem_size(const Gpt *m);
GptPrecision gpt_grad_precision(const Gpt *m);
void **gpt_alloc_grad_units(const Gpt *m, MemCategory cat, const char *what);
// grads_fp32 from --grad-reduce (NULL: the precision's own type).
bool gpt_grads_fp32_parse(GptPrecision p, const char *grad_reduce);
const char *gpt_precision_name(GptPrecision p);
GptPrecision gpt_precision_parse(const char *name);   // "fp32" (or NULL) or "bf16", as --precision takes it

// Initialise elements [offset, offset + count) of unit u's flat buffer, which
// `out` holds (out[0] is element `offset`): the same values whatever slice
// is asked for, as docs/model.md says.
void gpt_init_slice(const Gpt *m, int u, float *out, size_t offset, size_t count);
// The same slice into host memory (`host` on the host, whatever the device).
void gpt_init_slice_host(const Gpt *m, int u, float *host, size_t offset, size_t count);
void gpt_init_units(const Gpt *m, float **params);   // every unit, whole
// The same in the model's precision (bf16: rounded from those fp32 values,
// to the nearest even, on the host).
void gpt_init_run_slice(const Gpt *m, int u, void *out, size_t offset, size_t count);
void gpt_init_run_units(const Gpt *m, void **params);

// Activations for B rows (ACTS) of every unit, and the scratch; call once
// before the first forward. The calls below without a set use these.
void gpt_alloc_acts(Gpt *m);

// The batch: x, y (B, T) host tokens; step and row0 key the dropout masks;
// loss_scale is 1 / (the number of tokens the loss averages over), e.g.
// 1 / (B T) for this batch alone, or 1 / (global batch tokens) when several
// micro-batches add up to one step.
void gpt_set_batch(Gpt *m, const int *x, const int *y, int step, int row0, float loss_scale);

// Run unit u forward: reads stream[u] (or the tokens), writes stream[u + 1];
// the head unit computes the per-token losses. params: the unit's
// parameters in the model's precision (float *, or bf16 * under GPT_BF16).
void gpt_unit_forward(Gpt *m, int u, const void *params);
// Run unit u backward: reads dstream[u + 1] (the head starts from the loss),
// writes dstream[u], and ADDS its parameter gradients into grads (the
// gradients' precision, gpt_grad_precision; under GPT_BF16 the unit's
// gradient is made in fp32 and added into bf16 grads with one rounding an
// element, ops_accumulate_bf16, or into fp32 ones as fp32 training adds).
void gpt_unit_backward(Gpt *m, int u, const void *params, void *grads);

// The mean loss over this batch's B T tokens (after the head's forward).
double gpt_loss(const Gpt *m);

// Stop the run (CHECK) when a token or target of a batch of n is outside
// the vocabulary [0, V): gpt_set_batch's check, for a program that loads
// batches its own way.
void gpt_check_tokens(const int *x, const int *y, size_t n, int V);

// ---- activation sets of a range of units (pipeline stages) ----
// The scratch every set shares (ACTS), once per model: gpt_alloc_acts makes
// it; a program of sets alone calls this first.
void gpt_alloc_scratch(Gpt *m);
// A set for units [u0, u1) (ACTS), zero-filled; free it. (x, y) and the
// rest as gpt_set_batch; the unit calls as above, on set a.
GptActs *gpt_acts_create(const Gpt *m, int u0, int u1);
void gpt_acts_free(const Gpt *m, GptActs *a);
void gpt_acts_set_batch(const Gpt *m, GptActs *a, const int *x, const int *y, int step, int row0,
                        float loss_scale);
void gpt_acts_forward(Gpt *m, GptActs *a, int u, const void *params);
void gpt_acts_backward(Gpt *m, GptActs *a, int u, const void *params, void *grads);
double gpt_acts_loss(const Gpt *m, const GptActs *a);   // after the head's forward
// The backward pass in two (Qi et al. 2024, "Zero Bubble Pipeline
// Parallelism"): B, the input gradient, which the unit before waits for,
// reads dstream[u + 1] and writes dstream[u]; W, the parameter gradients,
// which nobody waits for, ADDS them into grads (as gpt_acts_backward does).
// B keeps what W needs beyond the set's activations: the output gradients of
// the unit's products and LayerNorms, fp32 (a block 11 (B, T, C), the head
// (B, T, V + C), the embeddings nothing: all of theirs is W), allocated by B
// (ACTS) and freed by W. B then W, at once or later (other units' and
// micro-batches' passes between), is gpt_acts_backward to the bit: the same
// calls on the same values, each product's and LayerNorm's input gradient
// in B and its weight's in W. Not under full recomputation (W reads the
// activations B used).
void gpt_acts_backward_input(Gpt *m, GptActs *a, int u, const void *params);
void gpt_acts_backward_weight(Gpt *m, GptActs *a, int u, void *grads);
// The bytes B keeps for W over units [u0, u1).
double gpt_saved_bytes(const Gpt *m, int u0, int u1);
// The bytes of one set for [u0, u1) (what gpt_acts_create allocates).
double gpt_acts_bytes(const Gpt *m, int u0, int u1);

// All units in order, then all units in reverse (units of the model's precision).
double gpt_forward(Gpt *m, void **params);
void gpt_backward(Gpt *m, void **params, void **grads);

// Write every tensor of the units as "<prefix>/<unit>.<tensor>" (f32, its
// shape), copied from the device. The units must be whole (canonical layout).
void gpt_dump_units(const Gpt *m, DumpWriter *w, const char *prefix, float **units);
// The same for units of precision p (bf16 widened to fp32, exactly).
void gpt_dump_units_of(const Gpt *m, DumpWriter *w, const char *prefix, void **units, GptPrecision p);
// The same from whole units already on the host: all of them, or unit u.
void gpt_dump_host_units(const Gpt *m, DumpWriter *w, const char *prefix, float **units);
void gpt_dump_host_unit(const Gpt *m, DumpWriter *w, const char *prefix, int u, const float *host);

// "GPT 4L 128C 4H · 0.87M params"
const char *gpt_describe(const Gpt *m, char *buf, size_t len);
