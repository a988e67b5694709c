// pp_budget.h: what a pipeline stage holds per rank, in bytes: the one set
// of formulas that lab05's program prints, the grader holds every run to,
// and lab05's README states.
//
// A stage keeps its units whole, psi_s parameters: fp32 AdamW 4 bytes of
// parameters, 4 of gradients and 8 of moments a parameter (16 psi_s); bf16
// with fp32 master weights (the ZeRO paper's mixed precision) 2, 2 and 12
// (the master copy and the two moments: 16 psi_s again, a quarter of it
// working weights and gradients). Its activations: the scratch every
// micro-batch shares plus k micro-batches' sets of its units, k = m for
// GPipe and min(m, p - s) for 1F1B; interleaved (v chunks a stage,
// Megatron-LM's order), k chunk-sets with k = min(w + 1, m v), w = (p - s -
// 1) 2 + (v - 1) p the warm-up's forwards (Narayanan et al. 2021; Megatron's
// schedules.py), each counted as the stage's largest chunk's set (the
// chunks of the first and the last stage hold the embeddings and the head:
// their sets are not the others' size). Under full recomputation at the stage
// boundaries (lab05's --recompute full, GPipe as published) a micro-batch's
// set is its boundary alone (its input, the tokens on stage 0, and its
// messages) and the stage's units run forward into one shared set of their
// activations: scratch + the shared set + k boundaries. Each measured from
// the model's shapes before any of the student's code runs, in the model's
// precision (bf16's kept tensors at 2 bytes an element, its LayerNorm
// statistics and its scratch's widened copies at 4).
//
// On the backward pass split into B and W (the zero-bubble schedules,
// pp_budget_zb) a micro-batch is alive from its forward pass to its W, k of
// them at most (ZB-H1 min(m, p) on every stage, ZB-H2 min(m, 2p - 1)), and
// between its B and its W it keeps what B computed for W, the output
// gradients of the units' products and LayerNorms (fp32; the model's
// gpt_saved_bytes), k_w of them at most: stage s holds its W's c s passes
// behind its B's (c = 1 for ZB-H1, 2 for ZB-H2), so k_w = min(m, c s + 1).
// Both peaks come at once, on the B of micro-batch c s: scratch + k sets +
// k_w x what B keeps.
#pragma once

#include <stdbool.h>

typedef struct {
    int k;                                   // micro-batches whose activations the schedule keeps at most
    double params, grads, optim, acts;       // each category's peak
    const char *params_why, *grads_why, *optim_why, *acts_why;   // the formulas, in words
    int k_w;                                 // micro-batches between their B and their W at most (0: not split)
} PpBudget;

// Stage s of p, m micro-batches, GPipe or 1F1B, with full recomputation at
// the stage boundaries or not; psi_s parameters; the activations' scratch,
// the shared set (0 without recomputation) and one micro-batch's set (its
// boundary under recomputation), in bytes (measured).
PpBudget pp_budget(bool gpipe, bool recompute, int p, int m, int s, double psi_s, double acts_scratch,
                   double acts_shared, double acts_set, bool bf16);

// The zero-bubble schedules (c = 1 ZB-H1, 2 ZB-H2): the same state, and
// activations of scratch + k sets + k_w x acts_saved, the bytes B keeps for
// W on the stage's units (measured from the model's shapes, as acts_set).
PpBudget pp_budget_zb(int c, int p, int m, int s, double psi_s, double acts_scratch, double acts_set,
                      double acts_saved, bool bf16);

// Interleaved, v chunks a stage: the same state (psi_s the parameters of all
// the stage's chunks), and activations of scratch + k x the largest chunk's
// set, k = min((p - s - 1) 2 + (v - 1) p + 1, m v) (fp32 or bf16; no
// recomputation at the stage boundaries).
PpBudget pp_budget_interleaved(int p, int v, int m, int s, double psi_s, double acts_scratch, double chunk_set_max,
                               bool bf16);
