// test_comm_gpu.c: every call of comm.h on GPU buffers, through the backend
// the run chose (NCCL when each rank has a GPU of its own, MPI otherwise),
// with results that are exact whatever the summation order, read back to the
// host and counted wrong element by element; then the same calls on bf16
// buffers (the typed forms), bit for bit: through NCCL's ncclBfloat16 where
// NCCL moves the data (--comm nccl), through MPI's own bf16 operations on
// host copies otherwise (--comm mpi). Skips (exit 77) without a GPU,
// unless --on-cpu asks to check the test itself on the CPU (through MPI).
//   mpirun -np N build/tests/test_comm_gpu [--comm nccl|mpi]
// Not in make test (no GPU there); the device checks run it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "bf16.h"
#include "comm.h"
#include "core.h"
#include "mem.h"

static int N, R;

// Small whole numbers: every sum of them is exact in float.
static float input(int r, size_t i) { return (float)((r + 1) * 1000 + (int)(i % 997)); }

static float *device_input(int r, size_t n) {
    float *h = malloc((n ? n : 1) * sizeof *h), *d = mem_alloc_floats(n, MEM_COMM, "x");
    for (size_t i = 0; i < n; i++) h[i] = input(r, i);
    mem_from_host(d, h, n * sizeof *h);
    free(h);
    return d;
}

// Wrong elements of d[0..n) against want(i).
static long wrong_of(const float *d, size_t n, float (*want)(size_t i)) {
    float *h = malloc((n ? n : 1) * sizeof *h);
    mem_to_host(h, d, n * sizeof *h);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) wrong += fabsf(h[i] - want(i)) > 1e-6f * fabsf(want(i));
    free(h);
    return wrong;
}

static size_t g_off;   // where the block checked starts, for the wanted values below
static float sum_of(size_t i) {
    float s = 0;
    for (int q = 0; q < N; q++) s += input(q, g_off + i);
    return s;
}
static float avg_of(size_t i) { return sum_of(i) / (float)N; }
static float max_of(size_t i) { return input(N - 1, g_off + i); }
static int g_from;
static float from_of(size_t i) { return input(g_from, g_off + i); }
static size_t g_count;   // an all-gather's count
static float all_of(size_t i) {   // element i comes from the rank whose block holds it
    for (int q = 0; q < N; q++) {
        size_t off, len;
        comm_block(g_count, N, q, &off, &len);
        if (i < off + len) return input(q, i);
    }
    return -1;
}

// ---- bf16 --------------------------------------------------------------------
// Whole numbers from 1 to 29 times 2^(i % 5 - 2), the same power on every
// rank: every partial sum over up to 8 ranks (8 * 29 < 256) is exact in
// bf16, whatever the order.
static bf16 bf_input(int r, size_t i) {
    return bf16_from_float((float)(((r + 1) * 7 + (int)(i % 13) * 3) % 29 + 1) * ldexpf(1.0f, (int)(i % 5) - 2));
}

static bf16 *bf_device_input(int r, size_t n) {
    bf16 *h = malloc((n ? n : 1) * sizeof *h), *d = mem_alloc_bf16(n, MEM_COMM, "bf16 x");
    for (size_t i = 0; i < n; i++) h[i] = bf_input(r, i);
    mem_from_host(d, h, n * sizeof *h);
    free(h);
    return d;
}

// As comm.h defines them: the sum (exact here) rounded to bf16; the average,
// that sum times 1/N in fp32 rounded to bf16; the largest.
static float bf_exact_sum(size_t i) {
    float s = 0;
    for (int q = 0; q < N; q++) s += bf16_to_float(bf_input(q, g_off + i));
    return s;
}
static bf16 bf_sum_of(size_t i) { return bf16_from_float(bf_exact_sum(i)); }
static bf16 bf_avg_of(size_t i) { return bf16_from_float(bf_exact_sum(i) * (1.0f / (float)N)); }
static bf16 bf_max_of(size_t i) {
    bf16 m = bf_input(0, g_off + i);
    for (int q = 1; q < N; q++)
        if (bf16_to_float(bf_input(q, g_off + i)) > bf16_to_float(m)) m = bf_input(q, g_off + i);
    return m;
}
static bf16 bf_from_of(size_t i) { return bf_input(g_from, g_off + i); }
static bf16 bf_all_of(size_t i) {
    for (int q = 0; q < N; q++) {
        size_t off, len;
        comm_block(g_count, N, q, &off, &len);
        if (i < off + len) return bf_input(q, i);
    }
    return 0xffff;
}

// Wrong elements of d[0..n): other bits than want(i), or with tol > 0, a
// value more than tol * |want(i)| away from it.
static long bf_wrong_of(const bf16 *d, size_t n, bf16 (*want)(size_t i), float tol) {
    bf16 *h = malloc((n ? n : 1) * sizeof *h);
    mem_to_host(h, d, n * sizeof *h);
    long wrong = 0;
    for (size_t i = 0; i < n; i++) {
        bf16 w = want(i);
        if (tol == 0) wrong += h[i] != w;
        else wrong += !(fabsf(bf16_to_float(h[i]) - bf16_to_float(w)) <= tol * fabsf(bf16_to_float(w)));
    }
    free(h);
    return wrong;
}

// Sums that must round, at N = 2 (one addition: one result in any order):
// rank 0 holds a, rank 1 holds b; want is a + b rounded to bf16, ties to
// even, not the exact sum (which needs more than bf16's 8 bits).
static const float ROUND_A[] = {1.0f, 1.0f + 0x1p-7f, 1.0f, 1.0f, 256.0f, -1.0f - 0x1p-7f, 3.0f};
static const float ROUND_B[] = {0x1p-8f, 0x1p-8f, 0x1p-9f, 3 * 0x1p-9f, 1.0f, -0x1p-8f, 0x1p-6f};
static const float ROUND_WANT[] = {1.0f, 1.0f + 0x1p-6f, 1.0f, 1.0f + 0x1p-7f, 256.0f, -1.0f - 0x1p-6f, 3.0f + 0x1p-6f};
enum { NROUND = sizeof ROUND_A / sizeof ROUND_A[0] };

static long check(Comm *w, const char *what, long wrong) {
    long all = (long)comm_sum_double(w, (double)wrong);
    print0("  %-4s %-44s %ld wrong\n", all ? "FAIL" : "ok", what, all);
    return all;
}

int main(int argc, char **argv) {
    Args a = args_defaults();
    bool on_cpu = false;
    ArgExtra extras[] = {
        {"on-cpu", ARG_FLAG, &on_cpu, "run without a GPU too (through MPI: checks this test itself)", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_TIMEOUT | ARGS_DEVICE, "it trains nothing");
    args_parse(&a, argc, argv, "The calls of comm.h on GPU buffers, checked exactly.", extras);
    Comm *w = comm_init(&argc, &argv, a.timeout);
    mem_init(a.device, comm_local_rank());
    N = comm_size(w), R = comm_rank(w);
    if (mem_device() != DEVICE_CUDA && !on_cpu) {
        print0("test_comm_gpu: no GPU, skipped\n");
        comm_finalize();
        return 77;
    }
    print0("test_comm_gpu: %d ranks · %s · %s\n", N, mem_device_name(), comm_backend_name());
    size_t counts[] = {0, 1, 7, 1000, 4099, (size_t)N * 1024, (size_t)N * 262144 + 3};
    long failed = 0;
    for (size_t k = 0; k < sizeof counts / sizeof counts[0]; k++) {
        size_t n = counts[k], off, len;
        comm_block(n, N, R, &off, &len);
        char what[96];
        float *x = device_input(R, n), *y = mem_alloc_floats(n, MEM_COMM, "y");
        long wrong = 0;
        g_off = 0;
        comm_all_reduce(w, x, n, COMM_SUM), wrong += wrong_of(x, n, sum_of);
        mem_free(x), x = device_input(R, n);
        comm_wait(comm_all_reduce_async(w, x, n, COMM_AVG)), wrong += wrong_of(x, n, avg_of);
        mem_free(x), x = device_input(R, n);
        comm_all_reduce(w, x, n, COMM_MAX), wrong += wrong_of(x, n, max_of);
        snprintf(what, sizeof what, "all_reduce sum, avg (async), max of %zu", n);
        failed += check(w, what, wrong);

        // Reduce-scatter into its own buffer, then in place (NCCL's layout).
        wrong = 0;
        mem_free(x), x = device_input(R, n);
        g_off = off;
        comm_reduce_scatter(w, x, y, n, COMM_SUM), wrong += wrong_of(y, len, sum_of);
        comm_wait(comm_reduce_scatter_async(w, x, x + off, n, COMM_SUM)), wrong += wrong_of(x + off, len, sum_of);
        snprintf(what, sizeof what, "reduce_scatter, in place (async) of %zu%s", n, n % (size_t)N ? " (MPI)" : "");
        failed += check(w, what, wrong);

        // All-gather from its own buffer, then in place.
        wrong = 0;
        mem_free(x), x = device_input(R, n);
        g_count = n;
        comm_all_gather(w, x + off, y, n), wrong += wrong_of(y, n, all_of);
        comm_wait(comm_all_gather_async(w, x + off, x, n)), wrong += wrong_of(x, n, all_of);
        snprintf(what, sizeof what, "all_gather, in place (async) of %zu%s", n, n % (size_t)N ? " (MPI)" : "");
        failed += check(w, what, wrong);

        // Broadcast from the last rank; a ring of messages three ways.
        wrong = 0;
        mem_free(x), x = device_input(R, n);
        g_off = 0, g_from = N - 1;
        comm_broadcast(w, x, n, N - 1), wrong += wrong_of(x, n, from_of);
        int next = (R + 1) % N, prev = (R + N - 1) % N;
        mem_free(x), x = device_input(R, n);
        g_from = prev;
        comm_sendrecv(w, x, n, next, y, n, prev), wrong += wrong_of(y, n, from_of);
        if (N > 1) {
            mem_zero(y, n * sizeof(float));
            CommHandle *hr = comm_recv_async(w, y, n, prev), *hs = comm_send_async(w, x, n, next);
            comm_wait(hs), comm_wait(hr), wrong += wrong_of(y, n, from_of);
            mem_zero(y, n * sizeof(float));
            if (R % 2 == 0) comm_send(w, x, n, next), comm_recv(w, y, n, prev);
            else comm_recv(w, y, n, prev), comm_send(w, x, n, next);
            wrong += wrong_of(y, n, from_of);
        }
        snprintf(what, sizeof what, "broadcast, sendrecv, async and blocking ring of %zu", n);
        failed += check(w, what, wrong);
        mem_free(x);
        mem_free(y);

        // bf16: the same calls, bit for bit. NCCL's average (ncclAvg) scales
        // each input by 1/N (itself rounded to bf16) before it adds: within
        // a rounding per rank of the average comm.h defines (MPI's, to the bit).
        bool nccl = strcmp(comm_backend_name(), "nccl") == 0;
        float avg_tol = nccl ? (float)(N + 2) * 0x1p-8f : 0;
        bf16 *bx = bf_device_input(R, n), *by = mem_alloc_bf16(n, MEM_COMM, "bf16 y");
        wrong = 0;
        g_off = 0;
        comm_all_reduce_typed(w, bx, n, COMM_BF16, COMM_SUM), wrong += bf_wrong_of(bx, n, bf_sum_of, 0);
        mem_free(bx), bx = bf_device_input(R, n);
        comm_wait(comm_all_reduce_async_typed(w, bx, n, COMM_BF16, COMM_AVG)), wrong += bf_wrong_of(bx, n, bf_avg_of, avg_tol);
        mem_free(bx), bx = bf_device_input(R, n);
        comm_all_reduce_typed(w, bx, n, COMM_BF16, COMM_MAX), wrong += bf_wrong_of(bx, n, bf_max_of, 0);
        snprintf(what, sizeof what, "bf16 all_reduce sum, avg (async), max of %zu", n);
        failed += check(w, what, wrong);

        wrong = 0;
        mem_free(bx), bx = bf_device_input(R, n);
        g_off = off;
        comm_reduce_scatter_typed(w, bx, by, n, COMM_BF16, COMM_SUM), wrong += bf_wrong_of(by, len, bf_sum_of, 0);
        comm_wait(comm_reduce_scatter_async_typed(w, bx, bx + off, n, COMM_BF16, COMM_SUM));
        wrong += bf_wrong_of(bx + off, len, bf_sum_of, 0);
        mem_free(bx), bx = bf_device_input(R, n);
        g_count = n;
        comm_all_gather_typed(w, bx + off, by, n, COMM_BF16), wrong += bf_wrong_of(by, n, bf_all_of, 0);
        comm_wait(comm_all_gather_async_typed(w, bx + off, bx, n, COMM_BF16)), wrong += bf_wrong_of(bx, n, bf_all_of, 0);
        snprintf(what, sizeof what, "bf16 reduce_scatter, all_gather, in place of %zu%s", n,
                 n % (size_t)N ? " (MPI)" : "");
        failed += check(w, what, wrong);

        wrong = 0;
        mem_free(bx), bx = bf_device_input(R, n);
        g_off = 0, g_from = N - 1;
        comm_broadcast_typed(w, bx, n, COMM_BF16, N - 1), wrong += bf_wrong_of(bx, n, bf_from_of, 0);
        mem_free(bx), bx = bf_device_input(R, n);
        g_from = prev;
        comm_sendrecv_typed(w, bx, n, next, by, n, prev, COMM_BF16), wrong += bf_wrong_of(by, n, bf_from_of, 0);
        if (N > 1) {
            mem_zero(by, n * sizeof(bf16));
            CommHandle *hr = comm_recv_async_typed(w, by, n, COMM_BF16, prev);
            CommHandle *hs = comm_send_async_typed(w, bx, n, COMM_BF16, next);
            comm_wait(hs), comm_wait(hr), wrong += bf_wrong_of(by, n, bf_from_of, 0);
            mem_zero(by, n * sizeof(bf16));
            if (R % 2 == 0) comm_send_typed(w, bx, n, COMM_BF16, next), comm_recv_typed(w, by, n, COMM_BF16, prev);
            else comm_recv_typed(w, by, n, COMM_BF16, prev), comm_send_typed(w, bx, n, COMM_BF16, next);
            wrong += bf_wrong_of(by, n, bf_from_of, 0);
        }
        snprintf(what, sizeof what, "bf16 broadcast, sendrecv, async and blocking ring of %zu", n);
        failed += check(w, what, wrong);

        // Negative control, once: one element one bf16 unit off is seen.
        if (n == 1000) {
            bf16 one;
            mem_to_host(&one, by + n / 2, sizeof one);
            one ^= 1;
            if (R == N - 1) mem_from_host(by + n / 2, &one, sizeof one);
            long seen = (long)comm_sum_double(w, (double)bf_wrong_of(by, n, bf_from_of, 0));
            failed += check(w, "bf16 checker sees one element one unit off", seen != 1);
        }
        mem_free(bx);
        mem_free(by);
    }

    // bf16 sums that round (N = 2 only: one addition, one right answer).
    if (N == 2) {
        bf16 h[NROUND], *d = mem_alloc_bf16(NROUND, MEM_COMM, "bf16 rounding");
        for (int k = 0; k < NROUND; k++) h[k] = bf16_from_float(R == 0 ? ROUND_A[k] : ROUND_B[k]);
        mem_from_host(d, h, sizeof h);
        comm_all_reduce_typed(w, d, NROUND, COMM_BF16, COMM_SUM);
        mem_to_host(h, d, sizeof h);
        long wrong = 0;
        for (int k = 0; k < NROUND; k++) wrong += h[k] != bf16_from_float(ROUND_WANT[k]);
        mem_free(d);
        failed += check(w, "bf16 sums round to nearest even, once", wrong);
    }

    // Groups: even and odd ranks, each with its own communicator.
    Comm *g = comm_split(w, R % 2, R);
    float *x = device_input(R, 64);
    comm_all_reduce(g, x, 64, COMM_SUM);
    float *h = malloc(64 * sizeof *h);
    mem_to_host(h, x, 64 * sizeof *h);
    long wrong = 0;
    for (size_t i = 0; i < 64; i++) {
        float s = 0;
        for (int q = R % 2; q < N; q += 2) s += input(q, i);
        wrong += h[i] != s;
    }
    free(h);
    mem_free(x);
    comm_barrier(g);
    comm_wait(comm_barrier_async(g));
    comm_free(g);
    comm_barrier(w);
    failed += check(w, "comm_split: all_reduce and barriers in groups", wrong);

    // Everything freed: what the device still holds beyond the start is not
    // the program's (NCCL's buffers are left out of the measure). Only with a
    // GPU per rank: the measure is the whole device's, other ranks included.
    if (strcmp(comm_backend_name(), "nccl") == 0) {
        char b[32];
        size_t live = mem_measured_live();
        print0("  measured device memory after every free: %s (NCCL's own buffers left out)\n",
               core_fmt_bytes((double)live, b, sizeof b));
        failed += check(w, "measured device memory back under 64 MB", live > (64u << 20));
    }
    comm_finalize();
    return failed ? 1 : 0;
}
