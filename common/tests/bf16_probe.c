// bf16_probe IN OUT: the bf16 rules of ops.h on inputs made elsewhere
// (tests/torch_bf16.py makes them and checks the answers with PyTorch).
// IN, a dump: x (n floats), a (M, K) and b (K, N). OUT, a dump: x_bf16 (x
// to bf16 and back: the rounded values), ab (a and b rounded to bf16, then
// ops_matmul_forward_bf16: fp32 accumulation).
#include <stdio.h>
#include <stdlib.h>

#include "core.h"
#include "dump.h"
#include "mem.h"
#include "ops.h"

static const DumpArray *need(const DumpFile *f, const char *name, int ndim) {
    const DumpArray *a = dump_find(f, name);
    CHECK(a && a->type == DUMP_F32 && a->ndim == ndim, "bf16_probe: the input has no %d-d float array %s", ndim, name);
    return a;
}

int main(int argc, char **argv) {
    CHECK(argc == 3, "usage: bf16_probe IN OUT");
    mem_init("cpu", 0);
    ops_init();
    const char *err = NULL;
    DumpFile *in = dump_read(argv[1], &err);
    CHECK(in, "bf16_probe: cannot read %s: %s", argv[1], err);
    const DumpArray *x = need(in, "x", 1), *a = need(in, "a", 2), *b = need(in, "b", 2);
    int M = (int)a->shape[0], K = (int)a->shape[1], N = (int)b->shape[1];
    CHECK((int)b->shape[0] == K, "bf16_probe: a is (%d, %d) but b has %d rows", M, K, (int)b->shape[0]);

    size_t n = x->count;
    bf16 *xb = malloc((n ? n : 1) * sizeof *xb), *ab = malloc((size_t)M * K * sizeof *ab),
         *bb = malloc((size_t)K * N * sizeof *bb);
    float *xr = malloc((n ? n : 1) * sizeof *xr), *out = malloc((size_t)M * N * sizeof *out);
    CHECK(xb && ab && bb && xr && out, "bf16_probe: out of memory");
    ops_to_bf16(xb, x->data, n);
    ops_from_bf16(xr, xb, n);
    ops_to_bf16(ab, a->data, (size_t)M * K);
    ops_to_bf16(bb, b->data, (size_t)K * N);
    ops_matmul_forward_bf16(out, ab, bb, NULL, M, K, N);

    DumpWriter *w = dump_create(argv[2]);
    dump_f32(w, "x_bf16", xr, 1, (uint64_t[]){n});
    dump_f32(w, "ab", out, 2, (uint64_t[]){(uint64_t)M, (uint64_t)N});
    dump_close(w);
    dump_free(in);
    free(xb), free(ab), free(bb), free(xr), free(out);
    return 0;
}
