// model_given.h: lab06's model (given; the student does not edit it). The
// harness lays the tensor-parallel parts out (common/tp_layout.h, with the
// given split), allocates each mode's activations, and runs the units:
// with --sp on, the student's sequence-parallel functions (sp.c); with
// --sp off, tensor parallelism alone, to compare: lab04's composition
// (common/tp_net.h) around the given layers, with all-reduces (lab04's f
// and g) around them.
//
// --precision bf16 (common/prec.h): the parameters and gradients are bf16
// units, which the harness widens into fp32 views for the functions (and
// adds their fp32 gradient into once); what is kept and what passes between
// the units is bf16. The probe runs the student's functions in fp32 (its
// own fp32 scratch) whatever the run's precision: its measures are exact
// there, and a mistake of placement shows the same in both.
#pragma once

#include <stdbool.h>

#include "sp.h"
#include "tp_layout.h"
#include "tp_net.h"

typedef struct {
    const Gpt *m;
    Sp *sp;
    bool on;               // --sp on
    Prec prec;             // the run's precision (sp->tp.prec points here)
    TpLayout L;
    int nunits;
    int *tokens, *targets;           // (B, T) the whole batch, on every rank
    void **stream, **dstream;        // (nunits + 1), the run's type: (B, Tt, C) with SP, (B, T, C) without
    SpBlockActs *acts;               // (L) with SP; under --recompute full acts[0] alone, every block's
    int nsets;                       // how many of them are allocated: L, or 1 under --recompute full
    SpHeadActs head;                 // with SP (without: the same lnf_all holds the whole LayerNorm output)
    float *losses;                   // (B, T)
    float *partial;                  // (B, T, C) scratch, counted in ACTS (neither mode uses it)
    // Without SP (and in the probe, to compare): the composition, on the
    // buffers above, with its scratch (net.branch, net.branch2, net.dln;
    // in bf16 net.unit32 and net.gunit32, the unit running widened and its
    // fp32 gradient, in both modes).
    TpNet net;
    TpNetBlock *off;                 // (L) what it keeps of each block
    TpLayerActs *off_layers;         // (L) and of each block's layers
    double layer_bytes[2];           // one block's kept activations and its input, measured: [0] off, [1] on
    // The blocks' forward passes' products (with SP; ops_work's
    // multiply-adds), counted by the harness around sp_block_forward: what
    // full recomputation makes again.
    double block_fwd_work;
} SpModel;

// The layout (given split) and the sizes; the activations of the mode, in
// bf16 or fp32; free.
void spm_create(SpModel *sm, const Gpt *m, Sp *sp, bool on, bool bf16);
void spm_free(SpModel *sm);

void spm_set_batch(SpModel *sm, const int *x, const int *y, int step, int row0, float loss_scale);
// Unit u's forward and backward passes; params and grads this rank's parts
// of the unit, of the run's type (gradients ADD).
void spm_unit_forward(SpModel *sm, int u, void *params);
void spm_unit_backward(SpModel *sm, int u, void *params, void *grads);
double spm_loss(const SpModel *sm);   // the mean loss over the B T tokens

// The student's functions on their own, before training, on random
// parameters and inputs, against tensor parallelism alone.
typedef struct {
    int gather;          // 0 right; 1 wrong
    int scatter;         // 0 right; 1 split along the channels; 2 wrong otherwise
    int dropout_t0;      // 0 keyed by the global token; 1 by the local index; 2 otherwise
    double block_fwd, block_bwd;   // relative error of the block's output and input gradient (dropout off)
    double block_resid;  // the input gradient's, attn.wo and mlp.w2 zero: dx = dout, the residual path
    // --recompute selective: the input gradient's error (dropout off) when
    // the shared probabilities are overwritten between the forward and the
    // backward pass, as the later blocks leave them: 0 if the backward
    // makes them again (0 without recomputation). --recompute full: the
    // same with the whole set overwritten; again_dropout the same with
    // dropout on (the masks drawn again must be the forward's); again_work
    // the forward products that backward pass made (0: none made again).
    double again, again_dropout, again_work;
    // Dropout on, the masks the block applies against the ones the harness
    // keys by (seed, layer, site, step, global token, channel): bit 1
    // attention's site (1), bit 2 the MLP's (2); the backward's measured
    // where the forward's are right.
    int dropout_fwd, dropout_bwd;
    // The embedding on this rank's tokens against wte[token] + wpe[r Tt + t]:
    // 0 right; 1 the positions of the local index (pos0 missing); 2 wrong.
    int embed;
    double embed_err;
} SpProbe;
SpProbe spm_probe(SpModel *sm);

// The three recomputation modes measured (--recompute-figure, with SP):
// for each, a fresh model of that mode beside the run's (its own
// activations, scratch and Sp, configured as `like`), on the run's
// parameters and one batch, forward and backward passes with no optimizer
// step. out[k] for GptRecompute k, on this rank: the rise of its ACTS peak
// over one pass (mem.h's tracked peak, reset first, the other modes' models
// freed: what sp.c keeps alive included), the products of a pass and those
// made again; then the median seconds of `passes` passes (the group's
// slowest rank), the three modes' passes taken in turn after one untimed
// round.
typedef struct {
    double acts_peak, seconds, work, again_work;
} SpModeMeasure;
void spm_measure_modes(const Gpt *m, const Sp *like, bool bf16, void **params, void **grads, const int *x,
                       const int *y, int step, int row0, float loss_scale, int passes, SpModeMeasure out[3]);
