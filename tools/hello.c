// hello.c: a first run of the runtime every lab stands on.
//   mpirun -np 4 build/hello
// Each rank starts, the lecture's first all-reduce runs, and each rank
// reports the memory it used and the bytes it communicated, as every lab
// will at the end of a run.
#include <stdio.h>
#include <stdlib.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "dump.h"
#include "harness.h"
#include "mem.h"
#include "trace.h"

int main(int argc, char **argv) {
    Args a = args_defaults();
    int mib = 16;
    ArgExtra extras[] = {
        {"mib", ARG_INT, &mib, "size of the timed all-reduce, in MiB", 1, 1024, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(ARGS_TIMEOUT | ARGS_DEVICE | ARGS_TRACE | ARGS_DUMP, "it trains nothing");
    args_parse(&a, argc, argv, "A first run of the runtime: an all-reduce, memory and bytes per rank.",
               extras);
    Comm *w = comm_init(&argc, &argv, a.timeout);
    mem_init(a.device, comm_local_rank());
    if (a.trace) {   // time zero right after a barrier, on every rank
        comm_barrier(w);
        trace_start(a.trace);
    }
    int N = comm_size(w);
    print0("[hello] %d rank%s · %s · %s\n", N, N == 1 ? "" : "s", mem_device_name(),
           comm_backend_name());

    // The lecture's example: every rank holds [1, 2, 3]; the sum over N ranks
    // is [N, 2N, 3N] on every rank.
    float host[3] = {1, 2, 3};
    float *x = mem_alloc_floats(3, MEM_OTHER, "x");
    mem_from_host(x, host, sizeof host);
    comm_all_reduce(w, x, 3, COMM_SUM);
    mem_to_host(host, x, sizeof host);
    mem_free(x);
    // Rank 0 prints what every rank holds (one printer keeps the lines in order).
    float *seen = malloc((size_t)N * sizeof host);
    comm_all_gather_host(w, host, sizeof host, seen);
    int wrong = 0;
    for (int q = 0; q < N; q++) {
        const float *v = seen + 3 * q;
        print0("rank %d: [1 2 3] all-reduced is [%g %g %g]\n", q, v[0], v[1], v[2]);
        wrong += v[0] != N || v[1] != 2 * N || v[2] != 3 * N;
    }
    free(seen);

    // A larger all-reduce, timed; the slowest rank's time is the one that counts.
    size_t n = (size_t)mib << 18;   // floats in `mib` MiB
    float *big = mem_alloc_floats(n, MEM_COMM, "big");
    comm_all_reduce(w, big, n, COMM_SUM);   // warm-up
    comm_barrier(w);
    comm_stats_reset();
    double t0 = core_now();
    trace_begin("timed all-reduce", "comm");
    comm_all_reduce(w, big, n, COMM_AVG);
    trace_end();
    double dt = comm_max_double(w, core_now() - t0);
    CommStats s = comm_stats();
    double busbw = (double)s.bus_bytes[COMM_OP_ALL_REDUCE] / dt / 1e9;
    char b1[32], b2[32];
    print0("all-reduce of %s: %.2f ms, bus bandwidth %.2f GB/s (each rank sent %s)\n",
           core_fmt_bytes((double)n * 4, b1, sizeof b1), dt * 1e3, busbw,
           core_fmt_bytes((double)s.bus_bytes[COMM_OP_ALL_REDUCE], b2, sizeof b2));
    mem_free(big);

    // Memory: every rank's peak by category, beside the independent measure.
    harness_print_memory(w, NULL);
    harness_trace_write(w);
    // --dump: what every program writes (metadata, memory and bytes per rank).
    if (a.dump) {
        DumpWriter *d = dump_create(comm_rank(w) == 0 ? a.dump : NULL);
        dump_run_meta(d, w, "hello", &a, NULL);
        dump_rank_stats(d, w, NULL);
        dump_close(d);
    }
    int any_wrong = (int)comm_sum_double(w, wrong);
    print0("%s\n", any_wrong ? "WRONG: the all-reduce gave a wrong sum" : "all ranks agree");
    comm_finalize();
    return any_wrong ? 1 : 0;
}
