// test_report.c: each rank's memory peaks and byte counters reach rank 0's
// dump in the right row, with the run's metadata.
//   mpirun -np 3 --oversubscribe build/tests/test_report
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "dump.h"
#include "mem.h"
#include "testutil.h"

static Comm *W;

START_TEST(rank_stats_land_in_their_rows) {
    int N = comm_size(W), r = comm_rank(W);
    char path[256];
    // rank 0's process id names the file
    int pid = (int)comm_max_double(W, r == 0 ? (double)getpid() : 0.0);
    snprintf(path, sizeof path, "/tmp/pl_test_report_%d.bin", pid);

    // Rank r: (r + 1) kB of parameters and 2 kB of gradients at once, then a
    // known set of calls.
    mem_reset_peaks();
    comm_stats_reset();
    void *p = mem_alloc((size_t)(r + 1) * 1000, MEM_PARAMS, "p");
    void *g = mem_alloc(2000, MEM_GRADS, "g");
    float *x = mem_alloc_floats(100, MEM_COMM, "x");
    comm_all_reduce(W, x, 100, COMM_SUM);
    comm_broadcast(W, x, 10, 0);
    if (N > 1 && r == 0) comm_send(W, x, 5, 1);
    if (N > 1 && r == 1) comm_recv(W, x, 5, 0);
    mem_free(p);
    mem_free(g);
    mem_free(x);

    Args a = args_defaults();
    a.steps = 7;
    DumpWriter *w = dump_create(r == 0 ? path : NULL);
    dump_run_meta(w, W, "test_report", &a, "stage 2\n");
    dump_rank_stats(w, W, NULL);
    dump_close(w);

    long wrong = 0;
    if (r == 0) {
        const char *err = NULL;
        DumpFile *f = dump_read(path, &err);
        if (!f) {
            printf("cannot read the dump back: %s\n", err);
            wrong++;
        } else {
            const DumpArray *peak = dump_find(f, "mem/peak");
            const DumpArray *total = dump_find(f, "mem/peak_total");
            const DumpArray *measured = dump_find(f, "mem/measured_peak");
            const DumpArray *calls = dump_find(f, "comm/calls");
            const DumpArray *bus = dump_find(f, "comm/bus_bytes");
            const DumpArray *cfg = dump_find(f, "meta/config");
            wrong += !peak || !total || !measured || !calls || !bus || !cfg;
            if (!wrong) {
                wrong += peak->shape[0] != (uint64_t)N || peak->shape[1] != MEM_NCAT;
                for (int q = 0; q < N; q++) {
                    wrong += dump_get(peak, (uint64_t)(q * MEM_NCAT + MEM_PARAMS)) != (q + 1) * 1000.0;
                    wrong += dump_get(peak, (uint64_t)(q * MEM_NCAT + MEM_GRADS)) != 2000.0;
                    wrong += dump_get(total, (uint64_t)q) != (q + 1) * 1000.0 + 2400.0;
                    wrong += dump_get(measured, (uint64_t)q) < (q + 1) * 1000.0 + 2400.0;
                    wrong += dump_get(calls, (uint64_t)(q * COMM_NOPS + COMM_OP_ALL_REDUCE)) != 1;
                    wrong += dump_get(calls, (uint64_t)(q * COMM_NOPS + COMM_OP_SEND)) != (N > 1 && q == 0);
                    wrong += dump_get(calls, (uint64_t)(q * COMM_NOPS + COMM_OP_RECV)) != (N > 1 && q == 1);
                    double want = (double)(uint64_t)(2.0 * (N - 1) / N * 400 + 0.5);
                    wrong += dump_get(bus, (uint64_t)(q * COMM_NOPS + COMM_OP_ALL_REDUCE)) != want;
                }
                wrong += strstr((const char *)cfg->data, "steps 7\n") == NULL;
                wrong += strstr((const char *)cfg->data, "stage 2\n") == NULL;
                wrong += dump_get(dump_find(f, "meta/world_size"), 0) != N;
            }
            dump_free(f);
        }
        unlink(path);
    }
    long total_wrong = (long)comm_sum_double(W, (double)wrong);
    ck_assert_msg(total_wrong == 0, "%ld facts wrong in the dump", total_wrong);
}
END_TEST

static Suite *report_suite(void) {
    Suite *s = suite_create("report");
    TCase *tc = tcase_create("report");
    tcase_add_test(tc, rank_stats_land_in_their_rows);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) {
    core_set_program("test_report");
    W = comm_init(&argc, &argv, 60);
    mem_init("cpu", comm_local_rank());
    int rc = test_run_suite_mpi(report_suite(), W);
    comm_finalize();
    return rc;
}
