// tp_layout.h: a model cut by width over the t ranks of a tensor-parallel
// group (labs 04 and 06).
//
// Each tensor of each unit is replicated on every rank, or split by rows or
// by columns into one part per rank, as a split function says. A rank's
// unit buffer holds its parts one after another, in the unit's tensor
// order (gpt.h); this file lays them out, checks that the ranks' parts
// make whole tensors, initialises them as the same slices of the
// single-device model, and gathers them back into whole units.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "args.h"
#include "comm.h"
#include "gpt.h"

typedef struct DumpWriter DumpWriter;

typedef enum {
    TP_REPLICATED,   // every rank holds all of it
    TP_ROWS,         // rank holds rows [first, first + count) (a 1-D tensor: elements)
    TP_COLUMNS,      // rank holds columns [first, first + count) of every row
} TpSplitKind;

typedef struct {
    TpSplitKind kind;
    int first, count;   // rows or columns of the whole tensor (unused when replicated)
} TpSplit;

typedef struct {
    TpSplit split;
    int rows, cols;        // this rank's shape of the tensor
    size_t offset, count;  // where it lies in this rank's unit buffer, and its floats
} TpPart;

typedef struct {
    const Gpt *m;          // the whole model: shapes, initialisation
    Comm *group;           // the tensor-parallel group
    int t, r;              // its size, this rank's place in it
    int nunits;
    TpPart (*part)[GPT_MAX_TENSORS];     // [unit][tensor] this rank's
    TpSplit (*all)[GPT_MAX_TENSORS];     // [rank of group * nunits + unit][tensor] every rank's
    size_t *size;          // (nunits) floats of this rank's part of each unit
    size_t local;          // their sum: the parameters this rank holds
    size_t replicated;     // of which replicated
} TpLayout;

// A rank's parts of each tensor: split(ctx, unit kind, tensor) for this rank.
typedef TpSplit (*TpSplitFn)(const void *ctx, GptUnitKind unit, const GptTensor *t);

// Ask split for every tensor of every unit and lay this rank's parts out;
// then check over the group that the parts make whole tensors (disjoint,
// covering), that attention is cut by whole heads, and that the pairs of
// layers Megatron cuts alike are (q, k, v and their biases by the columns
// of attn.wo's rows; mlp.w1's columns with mlp.b1 and, naive_mlp false,
// mlp.w2's rows; naive_mlp true, mlp.w2's columns with mlp.b2). A failure
// stops the run naming the tensors and ending with `fix` ("fix tp_split in
// tp.c"). Collective over group.
void tp_layout_make(TpLayout *L, const Gpt *m, Comm *group, TpSplitFn split, const void *ctx, bool naive_mlp,
                    const char *fix);
void tp_layout_free(TpLayout *L);
// The part of tensor `name` of unit u this rank holds.
TpSplit tp_layout_split(const TpLayout *L, int u, const char *name);
// Tensor k of unit u in this rank's unit buffer.
float *tp_layout_tensor(const TpLayout *L, int u, int k, float *unit);

// Named views of this rank's unit buffers: gpt.h's views, with the shapes
// of this rank's parts (a column-parallel attn.wq is (C, Ct), say).
GptBlockView tp_layout_block_view(const TpLayout *L, int u, float *unit);
GptEmbedView tp_layout_embed_view(const TpLayout *L, float *unit);
GptHeadView tp_layout_head_view(const TpLayout *L, float *unit);

// This rank's parts of every unit, zero-filled (category cat); free them.
float **tp_layout_alloc(const TpLayout *L, MemCategory cat, const char *what);
// The same of elements of `elem` bytes (a run's type: 2 for bf16).
void **tp_layout_alloc_elems(const TpLayout *L, size_t elem, MemCategory cat, const char *what);
void tp_layout_free_units(const TpLayout *L, float **units);
// Initialise this rank's parts as the same slices of the single-device
// model's initial parameters (gpt_init_slice, row by row for columns).
void tp_layout_init(const TpLayout *L, float **params);
// The same for unit u alone (a pipeline stage initialises the units it holds).
void tp_layout_init_unit(const TpLayout *L, int u, float *unit);
// This rank's parts of unit u (device) from the whole unit on the host.
void tp_layout_parts_from_whole(const TpLayout *L, int u, float *local, const float *whole);
// Whole units on the host of the group's rank 0 (NULL elsewhere), from
// every rank's parts (bookkeeping: not counted as communication).
float *tp_layout_gather_unit(const TpLayout *L, int u, const float *unit);
float **tp_layout_gather(const TpLayout *L, float **units);
// The same a unit at a time, each written to w (by the world's rank 0) as
// "<prefix>/<unit>.<tensor>" and freed: one whole unit on the host at once.
void tp_layout_dump(const TpLayout *L, float **units, DumpWriter *w, const char *prefix);
// The same for units of type t (COMM_BF16: each widened into scratch, fp32
// on the device, of the largest unit's part, before it is gathered).
void tp_layout_dump_typed(const TpLayout *L, void *const *units, CommType t, float *scratch, DumpWriter *w,
                          const char *prefix);
// Sums of squares of this rank's replicated and split parameters.
void tp_layout_sumsq(const TpLayout *L, float **units, double *replicated, double *split);
// The replicated tensors of `units` compared over the ranks of c (the
// group, or the world: every rank lays its units out alike): the name
// "unit.tensor" of the first whose sum of squares differs between ranks
// in buf ("" when all agree). Returns the first rank of c on which that
// tensor is all zeros, or -1 (none, or none differs). Collective over c.
int tp_layout_replicated_differs(const TpLayout *L, Comm *c, float **units, char *buf, size_t len);
// The same for units of type t (COMM_BF16: widened into scratch, as above).
int tp_layout_replicated_differs_typed(const TpLayout *L, Comm *c, void *const *units, CommType t, float *scratch,
                                       char *buf, size_t len);

// ---- shapes and bytes -------------------------------------------------------------

// Refuse (a usage error, exit 2), before any work, t ranks that cannot cut
// this shape (they must divide N, the heads, the channels, the vocabulary
// and, with `sequence`, the tokens), naming a shape they would cut.
void tp_check_shape(const Args *a, int t, int N, bool sequence);

// Bytes each rank sends per step (bus bytes, as comm.h counts them) for M
// rows of C channels through L blocks: per block two all-reduces of M C
// each way (Megatron; the naive MLP's gathers instead), the embedding's and
// the LM head's all-reduces of M C and the cross-entropy's three of M, and
// the data-parallel all-reduce of the psi_local parameters a rank holds.
typedef struct {
    double block, embed_head, dp, total;
    double again;   // of block: full recomputation's forwards again (0 without)
} TpBytes;
TpBytes tp_bytes_per_step(bool naive, int t, int dp, double M, double C, int L, double psi_local);
// The same with the activations, their gradients and the data-parallel
// gradients of `elem` bytes an element (2 in bf16; the cross-entropy's
// three of M stay fp32).
TpBytes tp_bytes_per_step_typed(bool naive, int t, int dp, double M, double C, int L, double psi_local, double elem);
// The same under full recomputation too (recompute true): each block's
// forward runs again in its backward pass, and its communication with it,
// the same bytes again: per block attention's g and the MLP's (Megatron), or
// attention's g and the naive MLP's two all-gathers. In `again`, and in
// `block` and `total`.
TpBytes tp_bytes_per_step_recompute(bool naive, int t, int dp, double M, double C, int L, double psi_local,
                                    double elem, bool recompute);
