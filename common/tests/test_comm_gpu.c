// test_comm_gpu.c: every call of comm.h on GPU buffers, through the backend
// the run chose (NCCL when each rank has a GPU of its own, MPI otherwise),
// with results that are exact whatever the summation order, read back to the
// host and counted wrong element by element. Skips (exit 77) without a GPU,
// unless --on-cpu asks to check the test itself on the CPU (through MPI).
//   mpirun -np N build/tests/test_comm_gpu [--comm nccl|mpi]
// Not in make test (no GPU there); the device checks run it.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
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
