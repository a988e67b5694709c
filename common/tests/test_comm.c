// test_comm.c: every collective, blocking and async, on exact inputs, against
// a naive computation. Run under mpirun at several world sizes:
//   mpirun -np 3 --oversubscribe build/tests/test_comm
//
// Inputs are small integers stored as floats, so every partial sum is an
// exact integer and the result is the same whatever order the backend adds
// in: any difference is a real error, counted element by element. The bf16
// forms get the same, on small integers times powers of two (exact in bf16,
// every partial sum too), compared bit for bit; and sums that must round,
// checked against every result bf16's rounding after each addition allows.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <mpi.h>

#include "bf16.h"
#include "comm.h"
#include "core.h"
#include "mem.h"
#include "testutil.h"

static Comm *W;

// Element i of rank r's input: a small integer, different per rank and index.
static float input(int r, size_t i) { return (float)((int)((r + 1) * 7 + (i % 13) * 3) % 29 - 9); }

// The exact sum over n ranks, computed naively.
static float naive_sum(Comm *c, size_t i) {
    float s = 0;
    for (int r = 0; r < comm_size(c); r++) s += input(r, i);
    return s;
}

static long agree(long wrong) { return (long)comm_sum_double(W, (double)wrong); }

static const size_t COUNTS[] = {0, 1, 2, 3, 5, 7, 8, 13, 1000, 4099, 65537};
enum { NCOUNTS = sizeof COUNTS / sizeof COUNTS[0] };

static float *make_input(Comm *c, size_t n) {
    float *x = mem_alloc_floats(n, MEM_COMM, "test input");
    for (size_t i = 0; i < n; i++) x[i] = input(comm_rank(c), i);
    return x;
}

// Count the elements of got that differ from want(i).
static long count_wrong_sum(Comm *c, const float *got, size_t off, size_t len, float scale) {
    long wrong = 0;
    for (size_t i = 0; i < len; i++) {
        float want = scale == 1.0f ? naive_sum(c, off + i) : naive_sum(c, off + i) * scale;
        if (got[i] != want) wrong++;
    }
    return wrong;
}

START_TEST(all_reduce_exact) {
    long wrong = 0;
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 4; mode++) {
            size_t n = COUNTS[k];
            CommReduce op = mode & 1 ? COMM_AVG : COMM_SUM;
            float *x = make_input(W, n);
            if (mode & 2)
                comm_wait(comm_all_reduce_async(W, x, n, op));
            else
                comm_all_reduce(W, x, n, op);
            wrong += count_wrong_sum(W, x, 0, n, op == COMM_AVG ? 1.0f / (float)comm_size(W) : 1.0f);
            mem_free(x);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "all-reduce: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(checker_catches_one_wrong_element) {
    // Negative control: the counting above must see a single corrupted value.
    size_t n = 1000;
    float *x = make_input(W, n);
    comm_all_reduce(W, x, n, COMM_SUM);
    if (comm_rank(W) == comm_size(W) - 1) x[n / 2] += 1.0f;
    long total = agree(count_wrong_sum(W, x, 0, n, 1.0f));
    mem_free(x);
    ck_assert_int_eq(total, 1);
}
END_TEST

START_TEST(reduce_scatter_exact) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 8; mode++) {
            size_t n = COUNTS[k], off, len;
            comm_block(n, N, r, &off, &len);
            CommReduce op = mode & 1 ? COMM_AVG : COMM_SUM;
            float *x = make_input(W, n);
            // mode & 4: in place, into this rank's own block of the input
            // (the backend must move it there from the start of the buffer,
            // where MPI leaves it).
            float *y = mode & 4 ? x + off : mem_alloc_floats(len, MEM_COMM, "block");
            if (mode & 2)
                comm_wait(comm_reduce_scatter_async(W, x, y, n, op));
            else
                comm_reduce_scatter(W, x, y, n, op);
            wrong += count_wrong_sum(W, y, off, len, op == COMM_AVG ? 1.0f / (float)N : 1.0f);
            if (!(mode & 4)) mem_free(y);
            mem_free(x);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "reduce-scatter: %ld wrong elements over all ranks", total);
}
END_TEST

// Element i of rank r's input for the maximum: small integers from -14 to 4,
// most of them negative (a maximum that starts from 0 is caught), the largest
// held by a different rank for different i.
static float max_input(int r, size_t i) { return (float)((int)((r + 1) * 5 + (i % 11) * 7) % 19 - 14); }

// Count the elements of got that differ from the largest of the ranks' values.
static long count_wrong_max(Comm *c, const float *got, size_t off, size_t len) {
    long wrong = 0;
    for (size_t i = 0; i < len; i++) {
        float want = max_input(0, off + i);
        for (int r = 1; r < comm_size(c); r++)
            if (max_input(r, off + i) > want) want = max_input(r, off + i);
        wrong += got[i] != want;
    }
    return wrong;
}

// COMM_MAX: all-reduce (blocking and async) and reduce-scatter (blocking and
// async, in place or not); it moves the bytes of a sum. Summing instead must
// be caught (on more than one rank, where the two differ).
START_TEST(max_exact) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 6; mode++) {   // 0, 1: all-reduce; 2..5 reduce-scatter
            size_t n = COUNTS[k], off = 0, len = n;
            float *x = mem_alloc_floats(n, MEM_COMM, "test input");
            for (size_t i = 0; i < n; i++) x[i] = max_input(r, i);
            bool async = mode & 1;
            if (mode < 2) {
                if (async)
                    comm_wait(comm_all_reduce_async(W, x, n, COMM_MAX));
                else
                    comm_all_reduce(W, x, n, COMM_MAX);
                wrong += count_wrong_max(W, x, 0, n);
            } else {
                comm_block(n, N, r, &off, &len);
                float *y = mode >= 4 ? x + off : mem_alloc_floats(len, MEM_COMM, "block");
                if (async)
                    comm_wait(comm_reduce_scatter_async(W, x, y, n, COMM_MAX));
                else
                    comm_reduce_scatter(W, x, y, n, COMM_MAX);
                wrong += count_wrong_max(W, y, off, len);
                if (mode < 4) mem_free(y);
            }
            mem_free(x);
        }

    // The counters: a maximum moves what a sum moves. The sum, checked as
    // a maximum, is the negative control.
    size_t n = 1000, off, len;
    comm_block(n, N, r, &off, &len);
    float *x = mem_alloc_floats(n, MEM_COMM, "test input"), *y = mem_alloc_floats(len, MEM_COMM, "block");
    CommStats as[2];   // COMM_MAX, COMM_SUM
    long summed_wrong = 0;
    for (int s = 0; s < 2; s++) {
        for (size_t i = 0; i < n; i++) x[i] = max_input(r, i);
        comm_stats_reset();
        comm_all_reduce(W, x, n, s == 0 ? COMM_MAX : COMM_SUM);
        if (s == 1) summed_wrong = count_wrong_max(W, x, 0, n);
        comm_reduce_scatter(W, x, y, n, s == 0 ? COMM_MAX : COMM_SUM);
        as[s] = comm_stats();
    }
    mem_free(x);
    mem_free(y);
    long bad_bytes = memcmp(as[0].calls, as[1].calls, sizeof as[0].calls) != 0 ||
                     memcmp(as[0].bytes, as[1].bytes, sizeof as[0].bytes) != 0 ||
                     memcmp(as[0].bus_bytes, as[1].bus_bytes, sizeof as[0].bus_bytes) != 0;
    long total = agree(wrong), summed = agree(summed_wrong), bad = agree(bad_bytes);
    ck_assert_msg(total == 0, "max: %ld wrong elements over all ranks", total);
    ck_assert_msg(N == 1 ? summed == 0 : summed > 0,
                  "a sum checked as a maximum: %ld wrong elements over all ranks", summed);
    ck_assert_msg(bad == 0, "max: the counters differ from a sum's on %ld ranks", bad);
}
END_TEST

START_TEST(all_gather_exact) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 4; mode++) {
            size_t n = COUNTS[k], off, len;
            comm_block(n, N, r, &off, &len);
            // Rank r's block holds the values rank r would hold: input(r, i).
            float *out = mem_alloc_floats(n, MEM_COMM, "gathered");
            float *mine = (mode & 1) ? out + off : mem_alloc_floats(len, MEM_COMM, "block");
            for (size_t i = 0; i < len; i++) mine[i] = input(r, off + i);
            if (mode & 2)
                comm_wait(comm_all_gather_async(W, mine, out, n));
            else
                comm_all_gather(W, mine, out, n);
            for (int q = 0; q < N; q++) {
                size_t qo, ql;
                comm_block(n, N, q, &qo, &ql);
                for (size_t i = 0; i < ql; i++) wrong += out[qo + i] != input(q, qo + i);
            }
            if (!(mode & 1)) mem_free(mine);
            mem_free(out);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "all-gather: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(broadcast_from_every_root) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int root = 0; root < N; root++)
        for (int k = 0; k < NCOUNTS; k++)
            for (int async = 0; async < 2; async++) {
                size_t n = COUNTS[k];
                float *x = make_input(W, n);   // every rank starts with its own values
                if (async)
                    comm_wait(comm_broadcast_async(W, x, n, root));
                else
                    comm_broadcast(W, x, n, root);
                for (size_t i = 0; i < n; i++) wrong += x[i] != input(root, i);
                mem_free(x);
            }
    (void)r;
    long total = agree(wrong);
    ck_assert_msg(total == 0, "broadcast: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(point_to_point_ring) {
    int N = comm_size(W), r = comm_rank(W);
    int next = (r + 1) % N, prev = (r + N - 1) % N;
    long wrong = 0;
    for (int k = 0; k < NCOUNTS; k++) {
        size_t n = COUNTS[k];
        float *x = make_input(W, n);
        float *y = mem_alloc_floats(n, MEM_COMM, "recv");
        // sendrecv around the ring (works for N = 1: a rank may sendrecv with itself)
        comm_sendrecv(W, x, n, next, y, n, prev);
        for (size_t i = 0; i < n; i++) wrong += y[i] != input(prev, i);
        if (N > 1) {
            // async send and recv, both posted before either waits
            mem_zero(y, n * sizeof(float));
            CommHandle *hr = comm_recv_async(W, y, n, prev);
            CommHandle *hs = comm_send_async(W, x, n, next);
            comm_wait(hs);
            comm_wait(hr);
            for (size_t i = 0; i < n; i++) wrong += y[i] != input(prev, i);
            // blocking send and recv, ordered so the ring cannot deadlock
            // even for messages too large to be buffered: even ranks send
            // first, odd ranks receive first (for odd N, rank N-1 sends to
            // rank 0, which receives once its own send has completed).
            mem_zero(y, n * sizeof(float));
            if (r % 2 == 0) {
                comm_send(W, x, n, next);
                comm_recv(W, y, n, prev);
            } else {
                comm_recv(W, y, n, prev);
                comm_send(W, x, n, next);
            }
            for (size_t i = 0; i < n; i++) wrong += y[i] != input(prev, i);
        }
        mem_free(x);
        mem_free(y);
    }
    comm_barrier(W);
    comm_wait(comm_barrier_async(W));
    long total = agree(wrong);
    ck_assert_msg(total == 0, "point to point: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(split_into_groups) {
    int N = comm_size(W), r = comm_rank(W);
    // Two groups: even and odd world ranks, ordered by descending world rank.
    Comm *g = comm_split(W, r % 2, -r);
    int want_size = (N + 1 - r % 2) / 2;
    long wrong = comm_size(g) != want_size;
    // Group rank 0 is the highest world rank of the group.
    int top = (N - 1) - ((N - 1) % 2 != r % 2);
    wrong += (comm_rank(g) == 0) != (r == top);
    // All-reduce inside the group: each member gives its world rank + 1.
    float x = (float)(r + 1);
    comm_all_reduce(g, &x, 1, COMM_SUM);
    float want = 0;
    for (int q = r % 2; q < N; q += 2) want += (float)(q + 1);
    wrong += x != want;
    comm_free(g);
    long total = agree(wrong);
    ck_assert_msg(total == 0, "comm_split: %ld wrong facts over all ranks", total);
}
END_TEST

START_TEST(byte_counters) {
    int N = comm_size(W);
    size_t n = 1000;
    float *x = make_input(W, n);
    float *y = mem_alloc_floats(n, MEM_COMM, "y");
    comm_stats_reset();
    comm_all_reduce(W, x, n, COMM_SUM);
    comm_wait(comm_all_reduce_async(W, x, n, COMM_AVG));
    comm_reduce_scatter(W, x, y, n, COMM_SUM);
    comm_all_gather(W, y, x, n);
    comm_broadcast(W, x, n, 0);
    CommStats s = comm_stats();
    mem_free(x);
    mem_free(y);
    double B = 4.0 * (double)n;
    long wrong = 0;
    wrong += s.calls[COMM_OP_ALL_REDUCE] != 2;
    wrong += s.bytes[COMM_OP_ALL_REDUCE] != (uint64_t)(2 * B);
    wrong += s.bus_bytes[COMM_OP_ALL_REDUCE] != 2 * (uint64_t)(2.0 * (N - 1) / N * B + 0.5);
    wrong += s.bytes[COMM_OP_REDUCE_SCATTER] != (uint64_t)B;
    wrong += s.bus_bytes[COMM_OP_REDUCE_SCATTER] != (uint64_t)((double)(N - 1) / N * B + 0.5);
    wrong += s.bus_bytes[COMM_OP_ALL_GATHER] != (uint64_t)((double)(N - 1) / N * B + 0.5);
    wrong += s.bus_bytes[COMM_OP_BROADCAST] != (N > 1 ? (uint64_t)B : 0);
    wrong += s.calls[COMM_OP_SEND] != 0 || s.calls[COMM_OP_RECV] != 0;
    // Bookkeeping calls are not counted as communication; each counts itself
    // as a helper call, and none is a direct MPI call.
    comm_sum_double(W, 1.0);
    CommStats s2 = comm_stats();
    wrong += memcmp(s.calls, s2.calls, sizeof s.calls) != 0 || memcmp(s.bytes, s2.bytes, sizeof s.bytes) != 0 ||
             memcmp(s.bus_bytes, s2.bus_bytes, sizeof s.bus_bytes) != 0;
    wrong += s2.helper_calls != s.helper_calls + 1 || strcmp(s2.last_helper, "comm_sum_double") != 0;
    wrong += s2.direct_mpi_calls != 0;
    long total = agree(wrong);
    ck_assert_msg(total == 0, "byte counters: %ld wrong counts over all ranks", total);
}
END_TEST

// MPI called directly, outside the library, is seen (MPI's profiling
// interface, mpi_watch.c); the library's own MPI calls are not.
START_TEST(direct_mpi_calls_are_seen) {
    Comm *W = comm_world();
    comm_stats_reset();
    float *x = mem_alloc_floats(8, MEM_COMM, "x");
    comm_all_reduce_sum(W, x, 8);
    comm_barrier(W);
    comm_sum_double(W, 1.0);
    CommStats s = comm_stats();
    long wrong = s.direct_mpi_calls != 0;
    double v = 1, out = 0;
    MPI_Allreduce(&v, &out, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    s = comm_stats();
    wrong += s.direct_mpi_calls != 1 || strcmp(s.first_direct_mpi, "MPI_Allreduce") != 0;
    comm_stats_reset();
    wrong += comm_stats().direct_mpi_calls != 0;
    mem_free(x);
    ck_assert_msg(agree(wrong) == 0, "direct MPI calls: %ld wrong over all ranks", agree(wrong));
}
END_TEST

// In-flight operations are counted until waited on; a message to oneself
// moves no bytes.
START_TEST(inflight_and_self_messages) {
    Comm *W = comm_world();
    int N = comm_size(W), r = comm_rank(W);
    float *x = mem_alloc_floats(64, MEM_COMM, "x"), *y = mem_alloc_floats(64, MEM_COMM, "y");
    long wrong = comm_inflight() != 0;
    CommHandle *h = comm_all_reduce_async(W, x, 64, COMM_SUM);
    wrong += comm_inflight() != 1;
    comm_wait(h);
    wrong += comm_inflight() != 0;
    comm_stats_reset();
    comm_sendrecv(W, x, 64, r, y, 64, r);
    CommStats s = comm_stats();
    wrong += s.bytes[COMM_OP_SEND] != 0 || s.bytes[COMM_OP_RECV] != 0;
    if (N > 1) {
        comm_sendrecv(W, x, 64, (r + 1) % N, y, 64, (r + N - 1) % N);
        wrong += comm_stats().bytes[COMM_OP_SEND] != 256;
    }
    mem_free(x);
    mem_free(y);
    ck_assert_msg(agree(wrong) == 0, "in flight / self messages: %ld wrong over all ranks", agree(wrong));
}
END_TEST

START_TEST(block_split_tiles) {
    long wrong = 0;
    for (int n = 1; n <= 9; n++)
        for (size_t count = 0; count < 40; count++) {
            size_t next = 0;
            for (int r = 0; r < n; r++) {
                size_t off, len;
                comm_block(count, n, r, &off, &len);
                wrong += off != next;
                wrong += len != count / n && len != count / n + 1;
                next = off + len;
            }
            wrong += next != count;
        }
    ck_assert_int_eq(wrong, 0);
}
END_TEST

START_TEST(progress_and_timing) {
    // An operation in flight finishes through comm_progress alone, and its
    // time counts as busy; waiting on it counts as blocked, never more.
    size_t n = 4099;
    float *x = make_input(W, n);
    CommStats before = comm_stats();
    CommHandle *h = comm_all_reduce_async(W, x, n, COMM_SUM);
    double t0 = core_now();
    while (!comm_test(h) && core_now() - t0 < 30) comm_progress();
    comm_wait(h);   // already finished: returns at once, without scaling twice
    CommStats after = comm_stats();
    long wrong = count_wrong_sum(W, x, 0, n, 1.0f);
    double busy = after.seconds_busy - before.seconds_busy, blocked = after.seconds_blocked - before.seconds_blocked;
    wrong += !(busy >= blocked && blocked >= 0);
    mem_free(x);
    // An average finished by progress is scaled exactly once.
    float *y = make_input(W, n);
    h = comm_all_reduce_async(W, y, n, COMM_AVG);
    while (!comm_test(h)) comm_progress();
    comm_wait(h);
    wrong += count_wrong_sum(W, y, 0, n, 1.0f / (float)comm_size(W));
    mem_free(y);
    long total = agree(wrong);
    ck_assert_msg(total == 0, "progress: %ld wrong over all ranks", total);
}
END_TEST

START_TEST(overlapping_ops_count_once) {
    // Two asynchronous operations in flight over the same 30 ms are 30 ms of
    // communication, not 60: busy time is the union of their intervals. No
    // progress call in between, so neither is seen to finish before its wait:
    // both were under way all along, and busy covers the 30 ms. On one rank
    // they move nothing and end as they start: busy is next to nothing.
    size_t n = 4099;
    float *x = make_input(W, n), *y = make_input(W, n);
    comm_barrier(W);
    CommStats before = comm_stats();
    double t0 = core_now();
    CommHandle *a = comm_all_reduce_async(W, x, n, COMM_SUM);
    CommHandle *b = comm_all_reduce_async(W, y, n, COMM_SUM);
    // Both are in flight from t1 on (a busy machine may start them well after
    // t0): busy covers at least the 30 ms from t1.
    double computing = 0.030, t1 = core_now();
    while (core_now() - t1 < computing) {
    }
    comm_wait(a);
    comm_wait(b);
    double wall = core_now() - t0;
    CommStats after = comm_stats();
    double busy = after.seconds_busy - before.seconds_busy;
    double blocked = after.seconds_blocked - before.seconds_blocked;
    long wrong = count_wrong_sum(W, x, 0, n, 1.0f) + count_wrong_sum(W, y, 0, n, 1.0f);
    bool alone = comm_size(W) == 1;
    long bad_busy = !(busy <= wall && (alone ? busy < computing / 10 : busy >= computing) && blocked >= 0 &&
                      blocked <= busy);
    mem_free(x);
    mem_free(y);
    long total = agree(wrong), bad = agree(bad_busy);
    ck_assert_msg(total == 0, "overlapping all-reduces: %ld wrong over all ranks", total);
    ck_assert_msg(bad == 0, "busy %.1f ms, blocked %.1f ms, wall %.1f ms: busy must lie in [%.0f ms, wall] "
                  "(near 0 on one rank) and blocked in [0, busy] (on %ld ranks it does not)",
                  busy * 1e3, blocked * 1e3, wall * 1e3, computing * 1e3, bad);
}
END_TEST

START_TEST(busy_includes_the_open_interval) {
    // Read while an operation is in flight, the counter already holds its
    // time so far; the wait then adds only what follows.
    size_t n = 1000;
    float *x = make_input(W, n);
    CommStats before = comm_stats();
    CommHandle *h = comm_all_reduce_async(W, x, n, COMM_SUM);
    double t0 = core_now();
    while (core_now() - t0 < 0.010) {
    }
    CommStats mid = comm_stats();
    comm_wait(h);
    CommStats after = comm_stats();
    bool alone = comm_size(W) == 1;   // then it has ended already (above)
    long bad = !((alone || mid.seconds_busy - before.seconds_busy >= 0.010) &&
                 after.seconds_busy >= mid.seconds_busy);
    bad += count_wrong_sum(W, x, 0, n, 1.0f) != 0;
    mem_free(x);
    long total = agree(bad);
    ck_assert_msg(total == 0, "busy time read mid-flight: %ld wrong over all ranks", total);
}
END_TEST

// ---- bf16 -------------------------------------------------------------------
// Element i of rank r's bf16 input: input(r, i) (an integer in [-9, 19])
// times 2^(i % 5 - 2), the same power of two on every rank. Every partial
// sum over up to 13 ranks is an integer under 256 in magnitude times that
// power: exact in bf16, so the result is the same in any order and is
// compared bit for bit.
static float bf_scale(size_t i) { return ldexpf(1.0f, (int)(i % 5) - 2); }
static bf16 bf_input(int r, size_t i) { return bf16_from_float(input(r, i) * bf_scale(i)); }
static bf16 bf_max_input(int r, size_t i) { return bf16_from_float(max_input(r, i) * bf_scale(i)); }

static bf16 *make_bf16(int r, size_t n, bool for_max) {
    bf16 *x = mem_alloc_bf16(n, MEM_COMM, "bf16 input");
    for (size_t i = 0; i < n; i++) x[i] = for_max ? bf_max_input(r, i) : bf_input(r, i);
    return x;
}

// The naive reference of element i, as comm.h defines it: the sum (exact
// here, in fp32), rounded to bf16; the average is that sum times 1/N in
// fp32, rounded to bf16; the maximum is the largest input.
static bf16 bf_want(CommReduce op, size_t i) {
    int N = comm_size(W);
    if (op == COMM_MAX) {
        bf16 m = bf_max_input(0, i);
        for (int r = 1; r < N; r++)
            if (bf16_to_float(bf_max_input(r, i)) > bf16_to_float(m)) m = bf_max_input(r, i);
        return m;
    }
    float s = 0;
    for (int r = 0; r < N; r++) s += bf16_to_float(bf_input(r, i));
    return bf16_from_float(op == COMM_AVG ? s * (1.0f / (float)N) : s);
}

// Elements of got[0..len) whose bits differ from bf_want(op, off + i).
static long count_wrong_bf16(const bf16 *got, size_t off, size_t len, CommReduce op) {
    long wrong = 0;
    for (size_t i = 0; i < len; i++) wrong += got[i] != bf_want(op, off + i);
    return wrong;
}

static const CommReduce BF_OPS[] = {COMM_SUM, COMM_AVG, COMM_MAX};

START_TEST(bf16_all_reduce_exact) {
    long wrong = 0;
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 6; mode++) {   // op: mode / 2; async: mode & 1
            size_t n = COUNTS[k];
            CommReduce op = BF_OPS[mode / 2];
            bf16 *x = make_bf16(comm_rank(W), n, op == COMM_MAX);
            if (mode & 1)
                comm_wait(comm_all_reduce_async_typed(W, x, n, COMM_BF16, op));
            else
                comm_all_reduce_typed(W, x, n, COMM_BF16, op);
            wrong += count_wrong_bf16(x, 0, n, op);
            mem_free(x);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 all-reduce: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(bf16_checker_catches_one_wrong_element) {
    // Negative control: one element one bf16 unit off, on one rank, is seen.
    size_t n = 1000;
    bf16 *x = make_bf16(comm_rank(W), n, false);
    comm_all_reduce_typed(W, x, n, COMM_BF16, COMM_SUM);
    if (comm_rank(W) == comm_size(W) - 1) x[n / 2] ^= 1;
    long total = agree(count_wrong_bf16(x, 0, n, COMM_SUM));
    mem_free(x);
    ck_assert_int_eq(total, 1);
}
END_TEST

START_TEST(bf16_reduce_scatter_exact) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int k = 0; k < NCOUNTS; k++)   // counts that N divides and counts it does not
        for (int mode = 0; mode < 12; mode++) {   // op: mode % 3; async, in place: the bits of mode / 3
            size_t n = COUNTS[k], off, len;
            comm_block(n, N, r, &off, &len);
            CommReduce op = BF_OPS[mode % 3];
            bool async = (mode / 3) & 1, in_place = (mode / 3) & 2;
            bf16 *x = make_bf16(r, n, op == COMM_MAX);
            // In place: into this rank's own block of the input.
            bf16 *y = in_place ? comm_at(x, off, COMM_BF16) : mem_alloc_bf16(len, MEM_COMM, "block");
            if (async)
                comm_wait(comm_reduce_scatter_async_typed(W, x, y, n, COMM_BF16, op));
            else
                comm_reduce_scatter_typed(W, x, y, n, COMM_BF16, op);
            wrong += count_wrong_bf16(y, off, len, op);
            if (!in_place) mem_free(y);
            mem_free(x);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 reduce-scatter: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(bf16_all_gather_exact) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int k = 0; k < NCOUNTS; k++)
        for (int mode = 0; mode < 4; mode++) {   // in place: mode & 1; async: mode & 2
            size_t n = COUNTS[k], off, len;
            comm_block(n, N, r, &off, &len);
            bf16 *out = mem_alloc_bf16(n, MEM_COMM, "gathered");
            bf16 *mine = (mode & 1) ? out + off : mem_alloc_bf16(len, MEM_COMM, "block");
            for (size_t i = 0; i < len; i++) mine[i] = bf_input(r, off + i);
            if (mode & 2)
                comm_wait(comm_all_gather_async_typed(W, mine, out, n, COMM_BF16));
            else
                comm_all_gather_typed(W, mine, out, n, COMM_BF16);
            for (int q = 0; q < N; q++) {
                size_t qo, ql;
                comm_block(n, N, q, &qo, &ql);
                for (size_t i = 0; i < ql; i++) wrong += out[qo + i] != bf_input(q, qo + i);
            }
            if (!(mode & 1)) mem_free(mine);
            mem_free(out);
        }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 all-gather: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(bf16_broadcast_from_every_root) {
    long wrong = 0;
    int N = comm_size(W), r = comm_rank(W);
    for (int root = 0; root < N; root++)
        for (int k = 0; k < NCOUNTS; k++)
            for (int async = 0; async < 2; async++) {
                size_t n = COUNTS[k];
                bf16 *x = make_bf16(r, n, false);   // every rank starts with its own values
                if (async)
                    comm_wait(comm_broadcast_async_typed(W, x, n, COMM_BF16, root));
                else
                    comm_broadcast_typed(W, x, n, COMM_BF16, root);
                for (size_t i = 0; i < n; i++) wrong += x[i] != bf_input(root, i);
                mem_free(x);
            }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 broadcast: %ld wrong elements over all ranks", total);
}
END_TEST

START_TEST(bf16_point_to_point_ring) {
    int N = comm_size(W), r = comm_rank(W);
    int next = (r + 1) % N, prev = (r + N - 1) % N;
    long wrong = 0;
    for (int k = 0; k < NCOUNTS; k++) {
        size_t n = COUNTS[k];
        bf16 *x = make_bf16(r, n, false), *y = mem_alloc_bf16(n, MEM_COMM, "recv");
        comm_sendrecv_typed(W, x, n, next, y, n, prev, COMM_BF16);
        for (size_t i = 0; i < n; i++) wrong += y[i] != bf_input(prev, i);
        if (N > 1) {
            mem_zero(y, n * sizeof(bf16));
            CommHandle *hr = comm_recv_async_typed(W, y, n, COMM_BF16, prev);
            CommHandle *hs = comm_send_async_typed(W, x, n, COMM_BF16, next);
            comm_wait(hs);
            comm_wait(hr);
            for (size_t i = 0; i < n; i++) wrong += y[i] != bf_input(prev, i);
            // Blocking, ordered as in point_to_point_ring so the ring cannot deadlock.
            mem_zero(y, n * sizeof(bf16));
            if (r % 2 == 0) {
                comm_send_typed(W, x, n, COMM_BF16, next);
                comm_recv_typed(W, y, n, COMM_BF16, prev);
            } else {
                comm_recv_typed(W, y, n, COMM_BF16, prev);
                comm_send_typed(W, x, n, COMM_BF16, next);
            }
            for (size_t i = 0; i < n; i++) wrong += y[i] != bf_input(prev, i);
        }
        mem_free(x);
        mem_free(y);
    }
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 point to point: %ld wrong elements over all ranks", total);
}
END_TEST

// The ledger line of op with `bytes` a call, or NULL.
static const CommLedgerLine *ledger_line(const CommLedgerLine *l, CommOp op, uint64_t bytes) {
    for (int i = 0; i < COMM_LEDGER_LINES && l[i].op >= 0; i++)
        if (l[i].op == (int32_t)op && l[i].bytes == bytes) return &l[i];
    return NULL;
}

START_TEST(bf16_byte_counters) {
    // bf16 calls count 2 bytes an element, float calls 4, mixed in one run.
    int N = comm_size(W), r = comm_rank(W);
    size_t n = 1000, off, len;
    comm_block(n, N, r, &off, &len);
    bf16 *x = make_bf16(r, n, false), *y = mem_alloc_bf16(n, MEM_COMM, "y");
    float *f = make_input(W, n);
    comm_stats_reset();
    comm_all_reduce_typed(W, x, n, COMM_BF16, COMM_SUM);
    comm_wait(comm_all_reduce_async_typed(W, x, n, COMM_BF16, COMM_AVG));
    comm_all_reduce(W, f, n, COMM_SUM);
    comm_reduce_scatter_typed(W, x, y, n, COMM_BF16, COMM_SUM);
    comm_all_gather_typed(W, y, x, n, COMM_BF16);
    comm_broadcast_typed(W, x, n, COMM_BF16, 0);
    comm_sendrecv_typed(W, x, n, (r + 1) % N, y, n, (r + N - 1) % N, COMM_BF16);
    CommStats s = comm_stats();
    CommLedgerLine led[COMM_LEDGER_LINES];
    comm_ledger(led);
    mem_free(x);
    mem_free(y);
    mem_free(f);
    double B = 2.0 * (double)n, F = 4.0 * (double)n;
    uint64_t ar_bus = (uint64_t)(2.0 * (N - 1) / N * B + 0.5), rs_bus = (uint64_t)((double)(N - 1) / N * B + 0.5);
    long wrong = 0;
    wrong += comm_type_size(COMM_BF16) != 2 || comm_type_size(COMM_F32) != 4;
    wrong += strcmp(comm_type_name(COMM_BF16), "bf16") != 0 || strcmp(comm_type_name(COMM_F32), "fp32") != 0;
    wrong += comm_at(y, 3, COMM_BF16) != (void *)(y + 3) || comm_at(f, 3, COMM_F32) != (void *)(f + 3);
    wrong += s.calls[COMM_OP_ALL_REDUCE] != 3;
    wrong += s.bytes[COMM_OP_ALL_REDUCE] != (uint64_t)(2 * B + F);
    wrong += s.bus_bytes[COMM_OP_ALL_REDUCE] != 2 * ar_bus + (uint64_t)(2.0 * (N - 1) / N * F + 0.5);
    wrong += s.bytes[COMM_OP_REDUCE_SCATTER] != (uint64_t)B || s.bus_bytes[COMM_OP_REDUCE_SCATTER] != rs_bus;
    wrong += s.bytes[COMM_OP_ALL_GATHER] != (uint64_t)B || s.bus_bytes[COMM_OP_ALL_GATHER] != rs_bus;
    wrong += s.bytes[COMM_OP_BROADCAST] != (uint64_t)B || s.bus_bytes[COMM_OP_BROADCAST] != (N > 1 ? (uint64_t)B : 0);
    // A message to itself (one rank) moves nothing.
    wrong += s.bytes[COMM_OP_SEND] != (N > 1 ? (uint64_t)B : 0) || s.bytes[COMM_OP_RECV] != (N > 1 ? (uint64_t)B : 0);
    // The ledger: one line for the two bf16 all-reduces (2n bytes each), one for the float one (4n).
    const CommLedgerLine *lb = ledger_line(led, COMM_OP_ALL_REDUCE, (uint64_t)B);
    const CommLedgerLine *lf = ledger_line(led, COMM_OP_ALL_REDUCE, (uint64_t)F);
    wrong += !lb || lb->calls != 2 || !lf || lf->calls != 1;
    wrong += !ledger_line(led, COMM_OP_REDUCE_SCATTER, (uint64_t)B) || !ledger_line(led, COMM_OP_ALL_GATHER, (uint64_t)B);
    long total = agree(wrong);
    ck_assert_msg(total == 0, "bf16 byte counters: %ld wrong counts over all ranks", total);
}
END_TEST

// ---- bf16 sums that must round ------------------------------------------------
// Each element has one large value, on rank i % N, and the same small value
// on every other rank; their exact sum needs more than bf16's 8 bits. comm.h
// says a bf16 sum adds pairwise in fp32 and rounds to bf16 after each
// addition, in an order the backend picks. The results that allows, for
// every order and grouping, are computed here (all the ways to split the
// ranks in two, recursively); the result must be one of them. At N = 2 there
// is one addition, so one result, given below: the correctly rounded sum
// (ties to even), not the exact one.
typedef struct {
    float big, small, at2;   // at2: the sum at N = 2, rounded to bf16 by hand
} RoundCase;
static const RoundCase ROUND_CASES[] = {
    {1.0f, 0x1p-8f, 1.0f},                             // 1 + 2^-8: a tie, to the even 1
    {1.0f + 0x1p-7f, 0x1p-8f, 1.0f + 0x1p-6f},         // a tie, up to the even 1 + 2^-6
    {1.0f, 0x1p-9f, 1.0f},                             // a quarter unit: down
    {1.0f, 3 * 0x1p-9f, 1.0f + 0x1p-7f},               // three quarters of a unit: up
    {256.0f, 1.0f, 256.0f},                            // 257: a tie, to the even 256
    {-1.0f - 0x1p-7f, -0x1p-8f, -1.0f - 0x1p-6f},      // negative: a tie, to the even (away from 0)
    {3.0f, 0x1p-6f, 3.0f + 0x1p-6f},                   // exact: no rounding to do
};
enum { NROUND = sizeof ROUND_CASES / sizeof ROUND_CASES[0] };

static float round_input(int r, size_t i) {
    const RoundCase *rc = &ROUND_CASES[i % NROUND];
    return r == (int)((i / NROUND) % (size_t)comm_size(W)) ? rc->big : rc->small;
}

// The bf16 results of summing the ranks in `mask`, in every order and grouping.
enum { ROUND_SET = 64, ROUND_MAX_RANKS = 6 };
typedef struct {
    int n;
    bf16 v[ROUND_SET];
} BfSet;

static void set_add(BfSet *s, bf16 v) {
    for (int k = 0; k < s->n; k++)
        if (s->v[k] == v) return;
    if (s->n < ROUND_SET) s->v[s->n++] = v;
}

static void sums_of(BfSet *sets, bool *done, unsigned mask, size_t i) {
    if (done[mask]) return;
    done[mask] = true;
    BfSet *s = &sets[mask];
    s->n = 0;
    if ((mask & (mask - 1)) == 0) {   // one rank: its value
        set_add(s, bf16_from_float(round_input(__builtin_ctz(mask), i)));
        return;
    }
    for (unsigned a = (mask - 1) & mask; a; a = (a - 1) & mask) {   // a, mask - a: the two halves
        unsigned b = mask & ~a;
        sums_of(sets, done, a, i);
        sums_of(sets, done, b, i);
        for (int p = 0; p < sets[a].n; p++)
            for (int q = 0; q < sets[b].n; q++)
                set_add(s, bf16_from_float(bf16_to_float(sets[a].v[p]) + bf16_to_float(sets[b].v[q])));
    }
}

// Is got one of the sums bf16 allows for element i?
static bool allowed_sum(bf16 got, size_t i) {
    int N = comm_size(W);
    static BfSet sets[1u << ROUND_MAX_RANKS];
    bool done[1u << ROUND_MAX_RANKS] = {false};
    unsigned all = (1u << N) - 1;
    sums_of(sets, done, all, i);
    for (int k = 0; k < sets[all].n; k++)
        if (sets[all].v[k] == got) return true;
    return false;
}

START_TEST(bf16_sums_round) {
    int N = comm_size(W), r = comm_rank(W);
    size_t n = 4 * NROUND, off, len;   // each case with its large value on every rank (N <= 4)
    comm_block(n, N, r, &off, &len);
    long wrong = 0, rounded = 0, disagree = 0;
    for (int mode = 0; mode < 3; mode++) {   // all-reduce, async all-reduce, reduce-scatter
        bf16 *x = mem_alloc_bf16(n, MEM_COMM, "rounding input"), *y = mem_alloc_bf16(len, MEM_COMM, "block");
        for (size_t i = 0; i < n; i++) x[i] = bf16_from_float(round_input(r, i));
        size_t o = 0, l = n;
        const bf16 *got = x;
        if (mode == 0) comm_all_reduce_typed(W, x, n, COMM_BF16, COMM_SUM);
        if (mode == 1) comm_wait(comm_all_reduce_async_typed(W, x, n, COMM_BF16, COMM_SUM));
        if (mode == 2) comm_reduce_scatter_typed(W, x, y, n, COMM_BF16, COMM_SUM), o = off, l = len, got = y;
        for (size_t i = 0; i < l; i++) {
            const RoundCase *rc = &ROUND_CASES[(o + i) % NROUND];
            float exact = rc->big + (float)(N - 1) * rc->small;   // exact in fp32
            if (N <= ROUND_MAX_RANKS) wrong += !allowed_sum(got[i], o + i);
            if (N == 2) wrong += got[i] != bf16_from_float(rc->at2);
            rounded += bf16_to_float(got[i]) != exact;
        }
        // An all-reduce leaves the same bits on every rank (rank 0's, gathered).
        if (mode < 2) {
            bf16 *all = malloc((size_t)N * n * sizeof *all);
            comm_all_gather_host(W, x, n * sizeof *x, all);
            disagree += memcmp(all, x, n * sizeof *x) != 0;
            free(all);
        }
        mem_free(x);
        mem_free(y);
    }
    long total = agree(wrong), total_rounded = agree(rounded), bad = agree(disagree);
    ck_assert_msg(total == 0, "bf16 sums: %ld results no order of bf16 additions gives, over all ranks", total);
    ck_assert_msg(bad == 0, "bf16 all-reduce: %ld ranks hold other bits than rank 0", bad);
    // At N = 2, six of the seven cases round (the exact sum is not a bf16):
    // over 4 * 7 elements, two all-reduces on every rank and one
    // reduce-scatter over all ranks, 24 * (2 N + 1) = 120 elements.
    if (N == 2) ck_assert_msg(total_rounded == 120, "bf16 sums at N = 2: %ld rounded, not 120", total_rounded);
    if (N == 1) ck_assert_msg(total_rounded == 0, "bf16 sums at N = 1: %ld changed", total_rounded);
}
END_TEST

static Suite *comm_suite(void) {
    Suite *s = suite_create("comm");
    TCase *tc = tcase_create("collectives");
    tcase_add_test(tc, all_reduce_exact);
    tcase_add_test(tc, checker_catches_one_wrong_element);
    tcase_add_test(tc, reduce_scatter_exact);
    tcase_add_test(tc, max_exact);
    tcase_add_test(tc, all_gather_exact);
    tcase_add_test(tc, broadcast_from_every_root);
    tcase_add_test(tc, point_to_point_ring);
    tcase_add_test(tc, split_into_groups);
    tcase_add_test(tc, byte_counters);
    tcase_add_test(tc, direct_mpi_calls_are_seen);
    tcase_add_test(tc, inflight_and_self_messages);
    tcase_add_test(tc, block_split_tiles);
    tcase_add_test(tc, overlapping_ops_count_once);
    tcase_add_test(tc, busy_includes_the_open_interval);
    tcase_add_test(tc, progress_and_timing);
    tcase_add_test(tc, bf16_all_reduce_exact);
    tcase_add_test(tc, bf16_checker_catches_one_wrong_element);
    tcase_add_test(tc, bf16_reduce_scatter_exact);
    tcase_add_test(tc, bf16_all_gather_exact);
    tcase_add_test(tc, bf16_broadcast_from_every_root);
    tcase_add_test(tc, bf16_point_to_point_ring);
    tcase_add_test(tc, bf16_byte_counters);
    tcase_add_test(tc, bf16_sums_round);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) {
    core_set_program("test_comm");
    W = comm_init(&argc, &argv, 60);
    mem_init("cpu", comm_local_rank());
    print0("test_comm: %d ranks\n", comm_size(W));
    int rc = test_run_suite_mpi(comm_suite(), W);
    comm_finalize();
    return rc;
}
