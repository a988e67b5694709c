// bench_given.h: --bench, each collective of collectives.c timed beside the
// library's (given: harness code).
#pragma once

#include <stddef.h>

#include "comm.h"
#include "dump.h"

// For each collective, a table of message sizes from min_bytes to max_bytes
// (doubling): time, spread, algbw, busbw and #wrong, yours and the
// library's, as nccl-tests prints them; then the ring all-reduce's
// alpha-beta model, fitted, and your ring against an ideal one. Each size:
// `warmup` untimed calls, then up to `iters` timed ones. Writes the dump's
// bench/ entries.
void bench_run(Comm *c, DumpWriter *dw, size_t min_bytes, size_t max_bytes, int iters, int warmup);
