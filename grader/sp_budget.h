// sp_budget.h: lab06's formulas, the one set that its program prints and
// the grader holds every run to: one layer's activations per rank, and the
// bytes sequence parallelism adds to tensor parallelism's (tp_layout.h's
// tp_bytes_per_step).
#pragma once

#include <stdbool.h>

// One layer's activations per rank, in bytes, for what this fp32 code keeps
// for the backward pass of a block and the block's input: s tokens, b rows,
// h channels, a heads, t ranks (lab06's README derives it tensor by tensor).
//   sp: 4 (2sbh + 14sbh/t + as^2b/t + 4sb/t);  not: 4 (4sbh + 12sbh/t + as^2b/t + 4sb)
double sp_layer_bytes(bool sp, double s, double b, double h, double a, double t);

// The bus bytes a rank sends per step to sum the replicated tensors'
// gradients over the group (each rank saw its own tokens): the LayerNorms,
// attn.bo and mlp.b2 of L blocks (6h), embed.wpe (s h) and lnf (2h).
double sp_replicated_bytes(int t, double L, double s, double h);
