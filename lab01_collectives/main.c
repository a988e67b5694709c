// main.c: lab01's harness. Students do not edit it.
//
//   mpirun -np 4 build/lab01            demo, then every check
//   mpirun -np 2 build/lab01 --bench    and the nccl-tests-style tables
//
// Each collective of collectives.c runs beside the library's own on exact
// inputs and every element that differs is counted (checks_given.c); --bench
// times them (bench_given.c). This file is the run around them: flags,
// set-up, the dump and the verdict.
#include <stdbool.h>
#include <stddef.h>

#include "args.h"
#include "bench_given.h"
#include "checks_given.h"
#include "comm.h"
#include "core.h"
#include "dump.h"
#include "harness.h"
#include "mem.h"
#include "ops.h"
#include "verdict.h"

int main(int argc, char **argv) {
    Args a = args_defaults();
    // Every call here takes milliseconds (seconds for --bench's largest):
    // a hang is over in seconds, not the two minutes a training step may need.
    a.timeout = 20;
    bool do_bench = false, quiet = false;
    int min_kib = 1, max_mib = 64, iters = 20, warmup = 5;
    ArgExtra extras[] = {
        {"bench", ARG_FLAG, &do_bench, "time every collective, yours beside the library's (each call alone after a barrier, the median; busbw as nccl-tests reports it)", 0, 0, NULL, NULL},
        {"min-kib", ARG_INT, &min_kib, "smallest message of --bench, in KiB", 1, 1 << 20, NULL, NULL},
        {"max-mib", ARG_INT, &max_mib, "largest message of --bench, in MiB", 1, 4096, NULL, NULL},
        {"iters", ARG_INT, &iters, "timed calls per size, each timed on its own (fewer for large sizes)", 1, 100000, NULL, NULL},
        {"warmup", ARG_INT, &warmup, "untimed calls before timing", 0, 1000, NULL, NULL},
        {"quiet", ARG_FLAG, &quiet, "skip the demo", 0, 0, NULL, NULL},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    // The seed shifts the exact inputs; no model is trained and no trace is drawn.
    args_takes(ARGS_SEED | ARGS_TIMEOUT | ARGS_DEVICE | ARGS_DUMP, "it trains nothing");
    args_parse(&a, argc, argv,
               "lab01: the four collectives from point-to-point messages, checked exactly and timed.",
               extras);
    if ((size_t)min_kib * 1024 > (size_t)max_mib << 20)
        core_usage_error("--min-kib %d is above --max-mib %d", min_kib, max_mib);
    checks_init(a.seed, a.timeout);
    Comm *c = comm_init(&argc, &argv, a.timeout);
    mem_init(a.device, comm_local_rank());
    ops_init();
    ops_set_tf32(a.tf32);
    harness_close_sandbox(c, &a);   // a graded run's: before any student code
    print0("[lab01] %d rank%s · %s · %s\n", comm_size(c), comm_size(c) == 1 ? "" : "s", mem_device_name(),
           comm_backend_name());

    // No reference to train here; this gives the run its private directory
    // (for its dump when --dump is not given), which the verdict reads.
    Reference own = harness_reference(c, &a, false);
    DumpWriter *dw = dump_create(comm_rank(c) == 0 ? own.own_dump : NULL);
    dump_run_meta(dw, c, "lab01", &a, NULL);
    if (!quiet) checks_demo(c);
    int failed = checks_run(c, dw);
    dump_scalar_i64(dw, "check/failed", failed);
    // The checks reset the counters before every call they watch; the dump's
    // comm/ figures start afresh here and cover the benchmark, if any.
    comm_stats_reset();
    if (do_bench) bench_run(c, dw, (size_t)min_kib * 1024, (size_t)max_mib << 20, iters, warmup);
    dump_rank_stats(dw, c, NULL);
    dump_close(dw);
    // The grader's own checks on this dump: what build/grade will say.
    int verdict = verdict_of_lab_run(c, "lab01", &own);
    harness_reference_free(&own);
    comm_finalize();
    harness_exit(failed || verdict ? 1 : 0);
}
