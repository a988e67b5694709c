// model_given.h: the model around the student's split layers (given; the
// student does not edit it). The harness lays each rank's part of every
// unit out as tp_split says, initialises it as the same slice of the
// single-device model, runs the units forward and backward (LayerNorm,
// residual adds and dropout here, the split layers in tp.c), probes the
// student's layers on their own, and gathers the parts back into whole
// units for the dump.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpt.h"
#include "tp.h"

typedef struct {
    TpSplit split;
    int rows, cols;        // this rank's shape of the tensor
    size_t offset, count;  // where it lies in this rank's unit buffer, and its floats
} TpPart;

typedef struct {
    const Gpt *m;          // the whole model: shapes, initialisation, dropout seed
    Tp *tp;
    int nunits;
    TpPart (*part)[GPT_MAX_TENSORS];     // [unit][tensor] this rank's
    TpSplit (*all)[GPT_MAX_TENSORS];     // [rank of group * nunits + unit][tensor] every rank's
    size_t *size;          // (nunits) floats of this rank's part of each unit
    size_t local;          // their sum: the parameters this rank holds
    size_t replicated;     // of which replicated
    // Activations: the harness's own, and the student's (tp.h).
    int *tokens, *targets;           // (M) on the device
    float **stream, **dstream;       // (nunits + 1) of (M, C)
    float **ln1, **ln1_mean, **ln1_rstd, **mid, **ln2, **ln2_mean, **ln2_rstd;   // (L) per block
    TpBlockActs *acts;               // (L)
    TpHeadActs head;
    float *lnf, *lnf_mean, *lnf_rstd, *losses;
    float *branch, *branch2, *dln;   // (M, C) scratch
    int step, row0;                  // for dropout: the step and the global row of local row 0
    float dropout;
} TpModel;

// Ask tp_split for every tensor, check that the parts make whole tensors
// (every rank's parts, gathered: disjoint, covering, heads whole, the pairs
// of layers cut alike) and fill tp's sizes. Collective over tp->group.
void tpm_layout(TpModel *tm, const Gpt *m, Tp *tp);
// This rank's parts of every unit, zero-filled (category cat); free them.
float **tpm_alloc_units(const TpModel *tm, int cat, const char *what);
void tpm_free_units(const TpModel *tm, float **units);
// Initialise this rank's parts as the same slices of the single-device
// model's initial parameters (gpt_init_slice, row by row for columns).
void tpm_init(const TpModel *tm, float **params);
// Activations for B rows of T tokens (ACTS); free them.
void tpm_alloc_acts(TpModel *tm, int B, int T);
void tpm_free_acts(TpModel *tm);

// Named views of this rank's unit buffers.
TpBlockView tpm_block_view(const TpModel *tm, int u, float *unit);
TpEmbedView tpm_embed_view(const TpModel *tm, float *unit);
TpHeadView tpm_head_view(const TpModel *tm, float *unit);

// The batch: x, y (B, T) host tokens; dropout keyed by step and row0.
void tpm_set_batch(TpModel *tm, const int *x, const int *y, int step, int row0, float loss_scale);
void tpm_unit_forward(TpModel *tm, int u, float *params);
void tpm_unit_backward(TpModel *tm, int u, float *params, float *grads);
double tpm_loss(const TpModel *tm);   // the mean loss over this rank's B T tokens

// Whole units on the host of the group's rank 0 (NULL elsewhere), from
// every rank's parts (bookkeeping: not counted as communication).
float **tpm_gather_whole(const TpModel *tm, float **units);
// The same one unit at a time, each written to w (on the world's rank 0)
// as "<prefix>/<unit>.<tensor>" and freed: one whole unit on the host at a time.
typedef struct DumpWriter DumpWriter;
void tpm_dump_whole(const TpModel *tm, float **units, DumpWriter *w, const char *prefix);
// Sums of squares of this rank's replicated and split parameters.
void tpm_sumsq(const TpModel *tm, float **units, double *replicated, double *split);

// The student's layers on their own, before training, on random parameters
// (biases and all, non-zero) and random inputs, the same on every rank of
// the group. Each figure is the group's worst.
typedef struct {
    double attn_bias, mlp_bias;   // the output's shift when the bias after g grows by 1 (1 is right)
    double attn_out_agree, mlp_out_agree;   // 1 when every rank's output is the same
    double attn_dx_agree, mlp_dx_agree, head_dx_agree;   // 1 when every rank's input gradient is
    double head_loss_err;   // the cross-entropy against the whole vocabulary's, in double
    double embed_err;       // the embedding's output against wte[token] + wpe[t]
} TpProbe;
TpProbe tpm_probe(TpModel *tm);
