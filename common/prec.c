// prec.c: the tensors a tensor-parallel layer keeps, in the run's precision (prec.h).
#include "prec.h"

#include "core.h"
#include "ops.h"

void prec_init(Prec *p, bool in_bf16, size_t cap, size_t att) {
    *p = (Prec){.bf16 = in_bf16, .type = in_bf16 ? COMM_BF16 : COMM_F32, .elem = in_bf16 ? sizeof(bf16) : sizeof(float)};
    if (!in_bf16) return;
    p->cap = cap, p->att = att;
    for (int i = 0; i < 4; i++) p->s[i] = mem_alloc_floats(cap, MEM_ACTS, "bf16 widening scratch");
    p->s_att = mem_alloc_floats(att, MEM_ACTS, "bf16 widening scratch");
    p->s_b16 = mem_alloc_bf16(cap, MEM_ACTS, "bf16 rounding scratch");
}

void prec_free(Prec *p) {
    if (!p->bf16) return;
    for (int i = 0; i < 4; i++) mem_free(p->s[i]);
    mem_free(p->s_att);
    mem_free(p->s_b16);
    p->bf16 = false;
}

void *prec_alloc(const Prec *p, size_t n, MemCategory cat, const char *name) {
    return p->bf16 ? (void *)mem_alloc_bf16(n, cat, name) : (void *)mem_alloc_floats(n, cat, name);
}

static void fits(const Prec *p, size_t n, size_t cap) {
    CHECK(n <= cap, "a bf16 tensor of %zu elements is larger than its widening scratch (%zu)", n, cap);
    (void)p;
}

void prec_keep(const Prec *p, void *dst, const float *src, size_t n) {
    if (p->bf16) ops_to_bf16(dst, src, n);
    else if (dst != src) mem_copy(dst, src, n * sizeof(float));
}

const float *prec_read(const Prec *p, const void *src, size_t n, float *scratch) {
    if (!p->bf16) return src;
    ops_from_bf16(scratch, src, n);
    return scratch;
}

float *prec_open(const Prec *p, void *t, size_t n, float *scratch) {
    if (!p->bf16) return t;
    ops_from_bf16(scratch, t, n);
    return scratch;
}

float *prec_write(const Prec *p, void *t, float *scratch) { return p->bf16 ? scratch : t; }

const void *prec_round(const Prec *p, const float *src, size_t n, void *scratch) {
    if (!p->bf16) return src;
    ops_to_bf16(scratch, src, n);
    return scratch;
}

// A kept input widened into scratch i.
static const float *in(const Prec *p, const void *t, size_t n, int i) {
    if (p->bf16) fits(p, n, p->cap);
    return prec_read(p, t, n, p->bf16 ? p->s[i] : NULL);
}

void prec_matmul(const Prec *p, float *out, const void *inp, const float *w, const float *bias, int M, int K, int N) {
    ops_matmul_forward(out, in(p, inp, (size_t)M * K, 0), w, bias, M, K, N);
}

void prec_matmul_keep(const Prec *p, void *out, const void *inp, const float *w, const float *bias, int M, int K,
                      int N) {
    if (!p->bf16) {
        ops_matmul_forward(out, inp, w, bias, M, K, N);
        return;
    }
    fits(p, (size_t)M * N, p->cap);
    prec_matmul(p, p->s[1], inp, w, bias, M, K, N);
    ops_to_bf16(out, p->s[1], (size_t)M * N);
}

void prec_matmul_backward(const Prec *p, float *dinp, float *dw, float *dbias, const float *dout, const void *inp,
                          const float *w, int M, int K, int N) {
    if (!p->bf16) {
        ops_matmul_backward(dinp, dw, dbias, dout, inp, w, M, K, N);
        return;
    }
    const size_t MN = (size_t)M * N;
    fits(p, MN, p->cap);
    ops_to_bf16(p->s_b16, dout, MN);   // the product's gradient input, as gpt.c's mm_backward rounds it
    ops_from_bf16(p->s[2], p->s_b16, MN);
    ops_matmul_backward(dinp, dw, dbias, p->s[2], in(p, inp, (size_t)M * K, 0), w, M, K, N);
}

void prec_add_bias(const Prec *p, void *out, const float *bias, int M, int N) {
    if (!p->bf16) {
        ops_add_bias(out, bias, M, N);
        return;
    }
    const size_t MN = (size_t)M * N;
    float *o = (float *)in(p, out, MN, 0);
    ops_add_bias(o, bias, M, N);
    ops_to_bf16(out, o, MN);
}

void prec_gelu_keep(const Prec *p, void *out, const void *x, size_t n) {
    if (!p->bf16) {
        ops_gelu_forward(out, x, n);
        return;
    }
    ops_gelu_forward(p->s[1], in(p, x, n, 0), n);
    ops_to_bf16(out, p->s[1], n);
}

void prec_gelu_backward(const Prec *p, float *dx, const float *dout, const void *x, size_t n) {
    ops_gelu_backward(dx, dout, in(p, x, n, 0), n);
}

void prec_attention_keep(const Prec *p, void *y, void *att, const void *q, const void *k, const void *v, int B,
                         int T, int C, int NH) {
    if (!p->bf16) {
        ops_attention_forward(y, att, q, k, v, B, T, C, NH);
        return;
    }
    const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    fits(p, na, p->att);
    ops_attention_forward(p->s[3], p->s_att, in(p, q, n, 0), in(p, k, n, 1), in(p, v, n, 2), B, T, C, NH);
    ops_to_bf16(att, p->s_att, na);
    ops_to_bf16(y, p->s[3], n);
}

void prec_attention_backward(const Prec *p, float *dq, float *dk, float *dv, float *scratch, const float *dy,
                             const void *att, const void *q, const void *k, const void *v, int B, int T, int C,
                             int NH) {
    const size_t n = (size_t)B * T * C, na = (size_t)B * NH * T * T;
    if (p->bf16) fits(p, na, p->att);
    const float *a = prec_read(p, att, na, p->s_att);
    ops_attention_backward(dq, dk, dv, scratch, dy, a, in(p, q, n, 0), in(p, k, n, 1), in(p, v, n, 2), B, T, C, NH);
}
