// tp_probe.c: what the tensor-parallel labs' probes share (tp_probe.h).
#include "tp_probe.h"

#include <math.h>
#include <stdlib.h>

#include "core.h"
#include "mem.h"
#include "rng.h"

float *tp_probe_random(size_t n, uint64_t seed, uint32_t stream, float std) {
    float *x = malloc(n * sizeof *x);
    CHECK(x, "out of memory");
    rng_fill_normal(x, n, seed, rng_stream(RNG_TEST, stream, 0), 0, 0, std);
    return x;
}

float *tp_probe_on_device(const float *host, size_t n) {
    float *d = mem_alloc_floats(n, MEM_OTHER, "probe");
    mem_from_host(d, host, n * sizeof(float));
    return d;
}

// A weighted sum and the sum of squares of every rank's copy, compared.
double tp_probe_agree(Comm *group, const float *dev, size_t n) {
    const int t = comm_size(group);
    float *h = malloc(n * sizeof *h);
    CHECK(h, "out of memory");
    mem_to_host(h, dev, n * sizeof(float));
    double s[2] = {0, 0};
    for (size_t i = 0; i < n; i++) s[0] += h[i] * (double)(i % 7 + 1), s[1] += (double)h[i] * h[i];
    free(h);
    double *all = malloc((size_t)t * sizeof s);
    CHECK(all, "out of memory");
    comm_all_gather_host(group, s, sizeof s, all);
    double ok = 1;
    for (int q = 1; q < t; q++)
        for (int i = 0; i < 2; i++)
            if (fabs(all[2 * q + i] - all[i]) > 1e-6 * (fabs(all[i]) + sqrt(all[1]) + 1e-30)) ok = 0;
    free(all);
    return ok;
}

double tp_probe_token_error(const float *got_dev, const float *want, int B, int T, int t0, int Tt, int C) {
    size_t run = (size_t)Tt * C, n = (size_t)B * run;
    float *got = malloc(n * sizeof *got);
    CHECK(got, "out of memory");
    mem_to_host(got, got_dev, n * sizeof(float));
    double d = 0, w = 0;
    for (int b = 0; b < B; b++)
        for (size_t i = 0; i < run; i++) {
            double x = got[(size_t)b * run + i], y = want[((size_t)b * T + (size_t)t0) * C + i];
            d += (x - y) * (x - y), w += y * y;
        }
    free(got);
    return isfinite(d) ? sqrt(d / (w > 0 ? w : 1)) : INFINITY;
}

double tp_probe_mean_shift(const float *a, const float *b, size_t n, double delta) {
    float *ha = malloc(n * sizeof *ha), *hb = malloc(n * sizeof *hb);
    CHECK(ha && hb, "out of memory");
    mem_to_host(ha, a, n * sizeof(float));
    mem_to_host(hb, b, n * sizeof(float));
    double s = 0;
    for (size_t i = 0; i < n; i++) s += (double)hb[i] - ha[i];
    free(ha);
    free(hb);
    return s / (double)n / delta;
}

bool tp_probe_near(float a, double b) { return fabs(a - b) <= 1e-4 * (1 + fabs(b)); }

void tp_probe_max(Comm *group, double *const v[], size_t n) {
    for (size_t i = 0; i < n; i++) *v[i] = comm_max_double(group, *v[i]);
}

void tp_probe_min(Comm *group, double *const v[], size_t n) {
    for (size_t i = 0; i < n; i++) *v[i] = -comm_max_double(group, -*v[i]);
}

void tp_probe_max_int(Comm *group, int *const v[], size_t n) {
    for (size_t i = 0; i < n; i++) *v[i] = (int)comm_max_double(group, *v[i]);
}

int tp_probe_any_bits(Comm *group, int bits, int nbits) {
    int any = 0;
    for (int b = 0; b < nbits; b++)
        if (comm_max_double(group, bits & (1 << b)) > 0) any |= 1 << b;
    return any;
}
