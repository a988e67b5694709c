// sp_budget.h: lab06's formulas, the one set that its program prints and
// the grader holds every run to: one layer's activations per rank, and the
// bytes sequence parallelism adds to tensor parallelism's (tp_layout.h's
// tp_bytes_per_step).
#pragma once

#include <stdbool.h>

#include "gpt.h"

// One layer's activations per rank, in bytes, for what this code keeps for
// the backward pass of a block and the block's input: s tokens, b rows, h
// channels, a heads, t ranks, E bytes a kept element (4 fp32, 2 bf16); the
// LayerNorms' statistics are fp32 in both (lab06's README derives it tensor
// by tensor).
//   sp: E (2sbh + 14sbh/t + as^2b/t) + 16sb/t;  not: E (4sbh + 12sbh/t + as^2b/t) + 16sb
double sp_layer_bytes(bool sp, double s, double b, double h, double a, double t, double E);

// The attention's probabilities of a layer per rank, E as^2b/t: what
// selective recomputation (--recompute selective) keeps once for all the
// layers (the block running's) instead of once per layer.
double sp_att_bytes(double s, double b, double a, double t, double E);
// One block's set (sp_layer_bytes without the block's input, E sbh/t with
// sp, E sbh without): what full recomputation (--recompute full) keeps once
// for all the layers (the block running's) instead of once per layer.
double sp_set_bytes(bool sp, double s, double b, double h, double a, double t, double E);
// sp_layer_bytes for a recomputation mode: none, all of it; selective,
// without sp_att_bytes; full, the block's input alone (Korthikanti et al.'s
// 2sbh/t at E = 2).
double sp_layer_bytes_mode(bool sp, GptRecompute rc, double s, double b, double h, double a, double t, double E);
// The bytes full recomputation adds to a step's: the blocks' forward
// collectives made again, half of the blocks' (tp_layout.h's TpBytes.block:
// forward and backward alike); 0 in the other modes.
double sp_recompute_bytes(GptRecompute rc, double block_bytes);

// Korthikanti et al.'s 16-bit count of a layer (34sbh + 5as^2b, TP 10sbh +
// (24sbh + 5as^2b)/t, TP + SP (34sbh + 5as^2b)/t) minus ours in bf16, term
// by term, in bytes: paper - ours = masks + attn_dropout - ln_stats - ln_whole.
typedef struct {
    double masks;          // the two dropout masks, sbh bytes each (/t with SP): ours redraws them from the key
    double attn_dropout;   // attention's dropout mask and output, 3as^2b/t: ours has no attention dropout
    double ln_stats;       // the LayerNorms' mean and rstd, fp32, 16sb (/t with SP): the paper leaves them out
    double ln_whole;       // with SP, the LayerNorms' outputs kept all-gathered: 4sbh - 4sbh/t
} SpPaperTerms;
SpPaperTerms sp_paper_terms(bool sp, double s, double b, double h, double a, double t);

// The bus bytes a rank sends per step to sum the replicated tensors' fp32
// gradients over the group (each rank saw its own tokens): the LayerNorms,
// attn.bo and mlp.b2 of L blocks (6h), embed.wpe (s h) and lnf (2h).
double sp_replicated_bytes(int t, double L, double s, double h);
