// test_trace.c: every rank's spans end up in one Chrome trace file that a
// JSON parser accepts, with the communication calls and their sizes in it.
//   mpirun -np 3 --oversubscribe build/tests/test_trace
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "core.h"
#include "harness.h"
#include "mem.h"
#include "testutil.h"
#include "trace.h"

static Comm *W;
static char path[256];

// Count occurrences of needle in the file.
static int count_in_file(const char *file, const char *needle) {
    FILE *f = fopen(file, "r");
    if (!f) return -1;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    int k = 0;
    for (const char *p = buf; (p = strstr(p, needle)); p++) k++;
    return k;
}

START_TEST(spans_of_every_rank_in_one_file) {
    int N = comm_size(W);
    comm_barrier(W);   // the harness's start: time zero right after a barrier
    trace_start(path);
    float *x = mem_alloc_floats(1000, MEM_COMM, "x");
    trace_begin("forward", "compute");
    trace_begin("block 0", "compute");
    trace_end();
    trace_end();
    comm_all_reduce(W, x, 1000, COMM_SUM);
    comm_wait(comm_all_reduce_async(W, x, 1000, COMM_AVG));
    harness_trace_write(W);
    mem_free(x);
    long wrong = 0;
    int ok_json = 1;
    if (comm_rank(W) == 0) {
        // per rank: forward, block 0, the blocking all-reduce and the async
        // one (the barrier before trace_start is not traced)
        wrong += count_in_file(path, "\"ph\":\"X\"") != 4 * N;
        wrong += count_in_file(path, "\"name\":\"forward\"") != N;
        wrong += count_in_file(path, "\"name\":\"all_reduce\"") != 2 * N;
        wrong += count_in_file(path, "all_reduce of 4.00 kB over") != 2 * N;
        wrong += count_in_file(path, "\"tid\":1,\"ts\"") != N;   // the async one, own track
        char cmd[512], out[4096];
        snprintf(cmd, sizeof cmd,
                 "python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); "
                 "ev=[e for e in d[\"traceEvents\"] if e[\"ph\"]==\"X\"]; "
                 "assert all(e[\"dur\"]>=0 and e[\"ts\"]>=0 for e in ev); "
                 "print(len({e[\"pid\"] for e in ev}))' %s",
                 path);
        int rc = test_run_command(cmd, out, sizeof out);
        if (rc == 127) {
            printf("SKIP json parse of the trace: python3 not found\n");
        } else {
            ok_json = rc == 0 && atoi(out) == N;
            if (!ok_json) printf("json check failed (exit %d): %s\n", rc, out);
        }
        if (wrong == 0) unlink(path); else printf("kept %s for a look\n", path);
    }
    long total = (long)comm_sum_double(W, (double)(wrong + !ok_json));
    ck_assert_msg(total == 0, "the trace file is wrong in %ld ways", total);
}
END_TEST

static Suite *trace_suite(void) {
    Suite *s = suite_create("trace");
    TCase *tc = tcase_create("trace");
    tcase_add_test(tc, spans_of_every_rank_in_one_file);
    suite_add_tcase(s, tc);
    return s;
}

int main(int argc, char **argv) {
    core_set_program("test_trace");
    W = comm_init(&argc, &argv, 60);
    mem_init("cpu", comm_local_rank());
    snprintf(path, sizeof path, "/tmp/pl_test_trace_%d.json", (int)getpid());
    // Every rank must use rank 0's file name.
    char buf[256];
    memcpy(buf, path, sizeof buf);
    char *all = malloc(sizeof buf * (size_t)comm_size(W));
    comm_all_gather_host(W, buf, sizeof buf, all);
    memcpy(path, all, sizeof path);
    free(all);
    int rc = test_run_suite_mpi(trace_suite(), W);
    comm_finalize();
    return rc;
}
