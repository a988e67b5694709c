// ops_rules.h: what both devices' ops check alike (ops.c on the CPU and
// ops_cuda.cu on the GPU), one message each wherever the op ran, and the key
// of a dropout mask. A leaf: ops.h and ops_cuda.h stand on it.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- dropout keyed by global position (ops.h: ops_dropout_forward) ----
typedef struct {
    uint64_t seed;
    int layer, site, step;
    int row0, t0, c0;     // global coordinates of local element (0, 0, 0)
    int Tg, Cg;           // global tokens per row and channels
} DropoutKey;

// ---- the checks both devices make, in ops.c: one message each, wherever the op ran ----
// The stream of a dropout key; stops the run on a p outside [0, 1) or a key
// field that does not fit the generator's stream.
uint64_t ops_dropout_stream(float p, DropoutKey key);
// An id of row m in [-1, n) (ops_rows_forward's rule), else stop the run naming it.
void ops_check_id(const char *op, int id, int m, int n);
// A cross-entropy target of row m in [0, V), else stop the run naming it.
void ops_check_target(int y, int m, int V);

// ---- what both devices compute alike, on the host ----
// AdamW's per-step scalars, as torch.optim.AdamW arranges the update:
//   p (1 - lr wd) - step_size m / (sqrt(v) / bc2_sqrt + eps),
// the bias corrections 1 - beta^t made in double (1 - 0.95^t loses digits in
// float when t is small, and these numbers scale every update), so that
// both devices, and the fp32 and mixed-precision steps, scale it by the
// same floats.
typedef struct {
    float step_size;   // lr / (1 - beta1^t)
    float bc2_sqrt;    // sqrt(1 - beta2^t)
    float decay;       // 1 - lr wd, on the old p
} OpsAdamwScalars;
OpsAdamwScalars ops_adamw_scalars(float lr, float beta1, float beta2, float wd, int t);

#ifdef __cplusplus
}
#endif
