// ops_rules.c: what both devices' ops check alike (ops_rules.h).
#include "ops_rules.h"

#include <math.h>

#include "core.h"
#include "rng.h"

uint64_t ops_dropout_stream(float p, DropoutKey key) {
    CHECK(p >= 0.0f && p < 1.0f, "dropout probability %g: it must be in [0, 1)", p);
    CHECK(key.site >= 0 && key.site < 4, "dropout site %d: a layer has sites 0..3", key.site);
    CHECK(key.layer >= 0 && (int64_t)key.layer * 4 + key.site < (1 << 28),
          "dropout layer %d does not fit the generator's 28-bit stream field", key.layer);
    CHECK(key.step >= 0 && key.step < (1 << 28),
          "dropout step %d does not fit the generator's 28-bit stream field", key.step);
    return rng_stream(RNG_DROPOUT, (uint32_t)(key.layer * 4 + key.site), (uint32_t)key.step);
}

void ops_check_id(const char *op, int id, int m, int n) {
    CHECK(id >= -1 && id < n,
          "%s: id %d of row %d is outside [-1, %d): ids of rows another rank holds must be -1 "
          "(ops_vocab_ids makes them from the tokens)", op, id, m, n);
}

void ops_check_target(int y, int m, int V) {
    CHECK(y >= 0 && y < V, "cross-entropy: target %d of row %d is outside the vocabulary "
          "[0, %d); the data and the model disagree on V", y, m, V);
}

OpsAdamwScalars ops_adamw_scalars(float lr, float beta1, float beta2, float wd, int t) {
    double bc1 = 1.0 - pow((double)beta1, t);
    double bc2 = 1.0 - pow((double)beta2, t);
    return (OpsAdamwScalars){(float)(lr / bc1), (float)sqrt(bc2), 1.0f - lr * wd};
}
