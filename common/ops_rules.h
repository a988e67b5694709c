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

#ifdef __cplusplus
}
#endif
