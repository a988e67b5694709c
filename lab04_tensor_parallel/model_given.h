// model_given.h: the model around the student's split layers (given; the
// student does not edit it). The harness lays each rank's part of every
// unit out as tp_split says, initialises it as the same slice of the
// single-device model, runs the units forward and backward (common/tp_net.c
// does the LayerNorms, residual adds and dropout, around the split layers of
// tp.c), probes the student's layers on their own, and gathers the parts
// back into whole units for the dump.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpt.h"
#include "tp.h"
#include "tp_net.h"

typedef struct {
    const Gpt *m;          // the whole model: shapes, initialisation, dropout seed
    Tp *tp;
    TpLayout L;            // this rank's parts of every unit (common/tp_layout.h)
    int nunits;
    // The model around the student's layers (common/tp_net.h): its order,
    // LayerNorms, residual adds and dropout, its activations (net.dropout:
    // the probability).
    TpNet net;
    Prec prec;             // the run's precision (tp->prec points here)
    // What the student's layers keep (tp.h): a set a block, or under
    // --recompute full one set shared by the blocks (net.rc's).
    TpBlockActs *acts;     // (nsets)
    int nsets;             // L, or 1 (--recompute full)
    TpHeadActs head;
} TpModel;

// Lay this rank's parts out as tp_split says (checked over the group:
// tp_layout.h) and fill tp's sizes. Collective over tp->group. The parts
// are then allocated, initialised and gathered with tp_layout_*(&tm->L).
void tpm_layout(TpModel *tm, const Gpt *m, Tp *tp);
// Activations for B rows of T tokens (ACTS), kept in bf16 or fp32 (the
// run's precision: tp->prec, tp->type); free them and the layout.
// recompute (--recompute full): a block keeps its input alone (the residual
// stream), and the composition's and the layers' kept tensors are one set
// for the block running (tp_net.h: TpNet.rc).
void tpm_alloc_acts(TpModel *tm, int B, int T, bool bf16, bool recompute);
void tpm_free(TpModel *tm);

// The batch: x, y (B, T) host tokens; dropout keyed by step and row0.
void tpm_set_batch(TpModel *tm, const int *x, const int *y, int step, int row0, float loss_scale);
// Unit u forward and backward: tp_net_unit_forward(&tm->net, ...) and
// tp_net_unit_backward (common/tp_net.h).
double tpm_loss(const TpModel *tm);   // the mean loss over this rank's B T tokens

// The student's layers on their own, before training, on random parameters
// (biases and all, non-zero) and random inputs, the same on every rank of
// the group. Each figure is the group's worst.
typedef struct {
    double attn_bias, mlp_bias;   // the output's shift when the bias after g grows by 1 (1 is right)
    double attn_out_agree, mlp_out_agree;   // 1 when every rank's output is the same
    double attn_dx_agree, mlp_dx_agree, head_dx_agree;   // 1 when every rank's input gradient is
    double head_loss_err;   // the cross-entropy against the whole vocabulary's, in double
    double embed_err;       // the embedding's output against wte[token] + wpe[t]
    // The cross-entropy's parts as tp_head_forward left them in TpHeadActs,
    // against the whole vocabulary's (each the worst row's, 0 right):
    int ce_max;      // the row maximum: 1 this rank's columns' own; 2 wrong otherwise
    int ce_sumexp;   // the sum of exponentials: 1 the ranks' sums combined by their maximum, not
                     // added; 2 each rank's taken against its own maximum, added; 3 wrong otherwise
    int ce_target;   // the target's logit: 1 picked at its id in every rank's columns (no lm0),
                     // summed; 2 on the rank that holds it only, not summed; 3 wrong otherwise
} TpProbe;
TpProbe tpm_probe(TpModel *tm);
