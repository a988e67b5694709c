// optim.h: AdamW and SGD over any contiguous slice of a unit.
//
// A rank that owns a shard of a unit (ZeRO) updates just that slice: the
// update of each element depends only on that element's parameter, gradient
// and state, so the shards' updates together equal the whole unit's.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Args Args;

typedef enum { OPTIM_ADAMW, OPTIM_SGD } OptimKind;

typedef struct {
    OptimKind kind;
    float lr;
    float beta1, beta2, eps;   // AdamW
    float momentum;            // SGD
    float wd;                  // weight decay, decoupled (AdamW) or added to the gradient (SGD)
} OptimConfig;

// AdamW with lr and wd from the command line, beta1 0.9, beta2 0.95, eps 1e-8.
OptimConfig optim_from_args(const Args *a);

// Floats of state per parameter: 2 for AdamW (m and v), 1 for SGD with
// momentum, 0 for plain SGD.
int optim_state_per_param(const OptimConfig *o);

// One update of n parameters at step t (t >= 1). p, g, m, v: (n), on the
// device; m and v are the state (v unused by SGD; both unused by plain SGD).
void optim_update(const OptimConfig *o, int t, float *p, const float *g, float *m, float *v,
                  size_t n);
// Mixed precision: the update of the fp32 master p from the bf16 gradient
// g, then the bf16 working weights w written from it (ops_adamw_mixed).
// AdamW only.
void optim_update_mixed(const OptimConfig *o, int t, float *p, uint16_t *w, const uint16_t *g, float *m,
                        float *v, size_t n);
// Either, by the run's precision: fp32 (bf16 false, master NULL), the
// weights w updated in place with the fp32 gradient g (optim_update); bf16,
// bf16 weights w and gradient g, the update made on the fp32 master
// (optim_update_mixed). A master missing in bf16, or given in fp32, stops
// the run, saying so (the other buffers' element size would be wrong).
void optim_step(const OptimConfig *o, int t, bool bf16, void *w, const void *g, float *master, float *m, float *v,
                size_t n);

// bf16 weights w with fp32 gradients g (--grad-reduce fp32): the fp32
// master updated from g as fp32 training updates its weights, then w
// written from it (the numbers of optim_step with g widened from bf16).
void optim_step_fp32_grads(const OptimConfig *o, int t, uint16_t *w, const float *g, float *master, float *m,
                           float *v, size_t n);

// "AdamW lr 0.001 betas (0.9, 0.95) eps 1e-08 wd 0.1", and the same as
// "key value" lines for a dump's meta/config.
const char *optim_describe(const OptimConfig *o, char *buf, size_t len);
const char *optim_config_lines(const OptimConfig *o, char *buf, size_t len);
