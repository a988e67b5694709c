// bench_given.c: --bench, the nccl-tests tables of every collective, yours
// beside the library's, the ring all-reduce's alpha-beta model and the ideal
// ring it is held to (given; the student does not edit it).
#include "bench_given.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks_given.h"
#include "core.h"

// The time of one size: the median over the timed calls (one preempted
// call, on a machine with other work, moves a mean but not a median) and
// the spread of the calls around it.
typedef struct {
    double median;   // seconds per call: the median of the slowest rank's time per call
    double spread;   // the interquartile range of those times, as a fraction of the median
} Timing;

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// Quantile q of n sorted values, interpolated between the two nearest.
static double quantile(const double *sorted, int n, double q) {
    double pos = q * (n - 1);
    int i = (int)pos;
    if (i + 1 >= n) return sorted[n - 1];
    return sorted[i] + (pos - i) * (sorted[i + 1] - sorted[i]);
}

// Each call timed on its own, after `warmup` untimed calls. A barrier before
// each call starts every rank together, so a call's time is its own and not
// the wait for a rank still finishing the call before. A call takes as long
// as its slowest rank. run: the student's or the library's (COLL's).
static Timing time_calls(Comm *c, void (*run)(Comm *c, Bufs *b), Bufs *b, int warmup, int iters) {
    int N = comm_size(c);
    for (int i = 0; i < warmup; i++) run(c, b);
    double *mine = malloc((size_t)iters * sizeof *mine);          // (iters) this rank's seconds per call
    double *all = malloc((size_t)iters * N * sizeof *all);        // (N, iters) every rank's
    CHECK(mine && all, "out of memory");
    for (int i = 0; i < iters; i++) {
        comm_barrier(c);
        double t0 = core_now();
        run(c, b);
        mine[i] = core_now() - t0;
    }
    comm_all_gather_host(c, mine, (size_t)iters * sizeof *mine, all);
    double *slowest = mine;   // (iters) reused: the slowest rank's seconds per call
    for (int i = 0; i < iters; i++) {
        slowest[i] = all[i];
        for (int q = 1; q < N; q++) slowest[i] = fmax(slowest[i], all[(size_t)q * iters + i]);
    }
    qsort(slowest, (size_t)iters, sizeof *slowest, cmp_double);
    Timing t = {.median = quantile(slowest, iters, 0.5)};
    double iqr = quantile(slowest, iters, 0.75) - quantile(slowest, iters, 0.25);
    t.spread = t.median > 0 ? iqr / t.median : 0;
    free(mine);
    free(all);
    return t;
}

// The limit a ring all-reduce is held to on one node: the ring's own reads,
// adds and writes with no message at all. Each rank adds its left
// neighbour's block straight out of that rank's memory (N - 1 steps), then
// copies the finished blocks the same way (N - 1 steps): per rank,
// (N - 1)/N of the vector read twice and written once, then read and written
// once more. Warm buffers, every rank at once, a barrier after each step (a
// ring's neighbours wait for each other too). A ring made of comm_send and
// comm_recv does all of that and more (each message is copied on its way, at
// least once), so no correct ring's busbw can pass this one's. Returns its
// busbw in bytes/s (best of 5), 0 when the ranks do not share one node's
// memory; its result is checked exactly, as the collectives' are.
static double ideal_ring_busbw(Comm *c, size_t bytes) {
    int N = comm_size(c), r = comm_rank(c);
    CommShared *sh = comm_shared_alloc(c, bytes);
    if (!sh) return 0;
    size_t count = bytes / sizeof(float);
    float *mine = comm_shared_peer(sh, r), *left = comm_shared_peer(sh, (r + N - 1) % N);
    double best = 1e30;
    long wrong = 0;
    for (int rep = 0; rep < 6; rep++) {
        for (size_t i = 0; i < count; i++) mine[i] = (float)(r + 1);   // warms the pages too
        comm_barrier(c);
        double t0 = core_now();
        for (int s = 0; s < N - 1; s++) {   // reduce-scatter: add the left's partial sum of block r - s - 1
            size_t off, len;
            comm_block(count, N, (r - s - 1 + 2 * N) % N, &off, &len);
            for (size_t i = off; i < off + len; i++) mine[i] += left[i];
            comm_barrier(c);
        }
        for (int s = 0; s < N - 1; s++) {   // all-gather: copy the left's finished block r - s
            size_t off, len;
            comm_block(count, N, (r - s + N) % N, &off, &len);
            memcpy(mine + off, left + off, len * sizeof(float));
            comm_barrier(c);
        }
        double dt = comm_max_double(c, core_now() - t0);
        if (rep > 0 && dt < best) best = dt;   // the first is a warm-up
        for (size_t i = 0; i < count; i++) wrong += mine[i] != (float)(N * (N + 1) / 2);
    }
    comm_shared_free(sh);
    wrong = (long)comm_sum_double(c, (double)wrong);
    CHECK(wrong == 0, "the ideal ring's all-reduce is wrong in %ld elements", wrong);
    return 2.0 * (N - 1) / N * (double)bytes / best;
}

// The alpha-beta model of the ring all-reduce: T(n) = a + b n, with
// a = 2 (N - 1) alpha (one latency per step) and b = 2 (N - 1) / N / B
// (each rank sends that share of the bytes at bandwidth B). The adds and,
// in a ring that sends in segments, each segment's latency are also
// proportional to n: B holds them too (the README's fuller formula). Fitted by
// least squares on relative errors, so small and large sizes count alike;
// the times are the medians, so one slow call does not bend the line.
// n: (points) bytes, t: (points) seconds per call.
static void print_alpha_beta(int N, const double *n, const double *t, int points) {
    double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int i = 0; i < points; i++) {
        double w = 1.0 / (t[i] * t[i]);
        sw += w, sx += w * n[i], sy += w * t[i];
        sxx += w * n[i] * n[i], sxy += w * n[i] * t[i];
    }
    double b = (sw * sxy - sx * sy) / (sw * sxx - sx * sx);
    double a = (sy - b * sx) / sw;
    double alpha = a / (2.0 * (N - 1)), bw = 2.0 * (N - 1) / N / b;
    print0("\nring all-reduce model: T(n) = 2(N-1) alpha + 2(N-1)/N n / B, fitted: alpha = %.1f us per step, "
           "B = %.2f GB/s (the links, the adds and the segments' latencies in one)\n", alpha * 1e6, bw / 1e9);
}

// One collective's table in the dump: bench/<func>/bytes, student_s, library_s.
static void dump_bench(DumpWriter *dw, const char *func, const double *sizes, const double *t_student,
                       const double *t_lib, int nsizes) {
    char name[64];
    uint64_t shape = (uint64_t)nsizes;
    snprintf(name, sizeof name, "bench/%s/bytes", func);
    dump_f64(dw, name, sizes, 1, &shape);
    snprintf(name, sizeof name, "bench/%s/student_s", func);
    dump_f64(dw, name, t_student, 1, &shape);
    snprintf(name, sizeof name, "bench/%s/library_s", func);
    dump_f64(dw, name, t_lib, 1, &shape);
}

void bench_run(Comm *c, DumpWriter *dw, size_t min_bytes, size_t max_bytes, int iters, int warmup) {
    int N = comm_size(c);
    // The collectives timed, in the order of their tables, with nccl-tests'
    // bus factor: the bandwidth a rank's link needs, relative to algbw. How
    // each runs, yours and the library's, and on what buffers: COLL.
    const struct {
        Coll k;
        double bus_factor;
    } timed[] = {
        {C_ALL_REDUCE, 2.0 * (N - 1) / N},
        {C_REDUCE_SCATTER, (double)(N - 1) / N},
        {C_ALL_GATHER, (double)(N - 1) / N},
        {C_TREE_BCAST, 1.0},
        {C_CHAIN_BCAST, 1.0},
    };
    int nsizes = 0;
    for (size_t s = min_bytes; s <= max_bytes; s *= 2) nsizes++;
    double *sizes = calloc((size_t)nsizes, sizeof(double));
    double *t_student = calloc((size_t)nsizes, sizeof(double)), *t_lib = calloc((size_t)nsizes, sizeof(double));
    double ar_fit_t[64], ar_fit_n[64];
    int ar_points = 0;
    double big_student = 0, big_lib = 0, last_bus = 0;   // last_bus: your all-reduce's at the largest size
    long ar_wrong = 0;                                   // elements your all-reduce got wrong, all sizes (-1: unwritten)
    for (size_t o = 0; o < sizeof timed / sizeof timed[0]; o++) {
        Coll k = timed[o].k;
        double fac = timed[o].bus_factor;
        // A table of yours beside the library's needs yours: an unwritten
        // function is said, not timed (its figures stay 0 in the dump).
        if (checks_unwritten(k)) {
            print0("\n%s: not timed: %s is not written yet (it calls lab_todo)\n", COLL[k].name, COLL[k].func);
            for (int i = 0; i < nsizes; i++) sizes[i] = (double)(min_bytes << i), t_student[i] = t_lib[i] = 0;
            if (k == C_ALL_REDUCE) ar_wrong = -1;
            dump_bench(dw, COLL[k].func, sizes, t_student, t_lib, nsizes);
            continue;
        }
        print0("\n%s: %d ranks, time: the median over the calls of the slowest rank's time per call; "
               "iqr%%: their spread\n", COLL[k].name, N);
        // The library's column is comm.h's call: Open MPI's collective, or
        // NCCL's on GPUs (--comm).
        char lib[32];
        snprintf(lib, sizeof lib, "library (%s)", comm_backend_name());
        print0("  %10s %10s | %10s %5s %8s %8s %6s | %-34s\n", "", "", "yours", "", "", "", "", lib);
        print0("  %10s %10s | %10s %5s %8s %8s %6s | %10s %5s %8s %8s %6s\n", "size (B)", "count", "time (us)",
               "iqr%", "algbw", "busbw", "#wrong", "time (us)", "iqr%", "algbw", "busbw", "#wrong");
        int i = 0;
        for (size_t bytes = min_bytes; bytes <= max_bytes; bytes *= 2, i++) {
            size_t count = bytes / sizeof(float);
            // Fewer calls for large messages: about 1 GB moved per measurement.
            int it = iters;
            while (it > 3 && (double)it * (double)bytes > 1e9) it /= 2;
            Bufs b = bufs_make(c, k, count, 0, false);
            Timing mine = time_calls(c, COLL[k].yours, &b, warmup, it);
            Timing theirs = time_calls(c, COLL[k].library, &b, warmup, it);
            double ts = mine.median, tl = theirs.median;
            bufs_free(&b);
            // #wrong: one more call of each on exact inputs, against the naive result.
            Finding f, lib;
            check_one(c, k, count, 0, false, &f, &lib);
            long wrong = (long)comm_sum_double(c, (double)f.wrong);
            long lib_wrong = (long)comm_sum_double(c, (double)lib.wrong);
            double algs = (double)bytes / ts / 1e9, algl = (double)bytes / tl / 1e9;
            print0("  %10zu %10zu | %10.1f %5.0f %8.2f %8.2f %6ld | %10.1f %5.0f %8.2f %8.2f %6ld\n", bytes,
                   count, ts * 1e6, mine.spread * 100, algs, algs * fac, wrong, tl * 1e6, theirs.spread * 100,
                   algl, algl * fac, lib_wrong);
            sizes[i] = (double)bytes;
            t_student[i] = ts;
            t_lib[i] = tl;
            if (k == C_ALL_REDUCE) {
                if (ar_points < 64) ar_fit_n[ar_points] = (double)bytes, ar_fit_t[ar_points++] = ts;
                if (bytes >= (16u << 20)) big_student += ts, big_lib += tl;   // the speed goal: 16 MiB and above
                last_bus = algs * fac;
                ar_wrong += wrong;
            }
        }
        dump_bench(dw, COLL[k].func, sizes, t_student, t_lib, nsizes);
    }

    if (ar_wrong != 0)
        print0("\nyour all_reduce is %s: no model, no ratio to the ideal ring or the library\n",
               ar_wrong < 0 ? "not written yet" : "wrong (#wrong above)");
    if (N > 1 && ar_points >= 2 && ar_wrong == 0) print_alpha_beta(N, ar_fit_n, ar_fit_t, ar_points);
    double ideal = N > 1 ? ideal_ring_busbw(c, max_bytes) : 0;
    if (ideal > 0) {
        print0("ideal ring all-reduce at %zu B (the ring's reads, adds and writes straight from the neighbour's "
               "memory, no message): busbw %.2f GB/s\n", max_bytes, ideal / 1e9);
        if (ar_wrong == 0)
            print0("your ring's busbw at %zu B is %.0f%% of the ideal ring's\n", max_bytes,
                   100.0 * last_bus * 1e9 / ideal);
    } else if (N > 1) {
        print0("(no ideal ring: the ranks do not share one node's memory)\n");
    }
    if (big_lib > 0 && ar_wrong == 0)
        print0("all_reduce at 16 MiB and above: yours / library time = %.2f\n", big_student / big_lib);
    dump_scalar_f64(dw, "bench/ideal_ring_busbw", ideal);
    free(sizes);
    free(t_student);
    free(t_lib);
}
