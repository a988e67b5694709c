// trace.h: a per-rank timeline in Chrome trace format (open it in Perfetto,
// ui.perfetto.dev, or chrome://tracing).
//
// Each rank records spans (begin, end, name, category) in memory; at the end
// rank 0 gathers every rank's spans and writes one JSON file, one track per
// rank. Communication calls record their own spans (with bytes and peer in
// their arguments); labs mark compute: trace_begin("forward block 2", "compute").
// When tracing is off (no --trace), every call returns at once.
#pragma once

#include <stdbool.h>
#include <stddef.h>

// Turn tracing on for this rank; time zero is now (the harness starts every
// rank's trace right after a barrier, so that the ranks agree on it).
void trace_start(const char *path);
bool trace_on(void);
const char *trace_path(void);   // the file given to trace_start, while tracing
// Spans nest on one track (tid); begin/end must pair up.
void trace_begin(const char *name, const char *cat);
void trace_end(void);
// A finished span with explicit times (core_now() seconds) on a given track,
// for asynchronous work such as a collective that runs behind compute.
// args_json is a JSON object body without braces ("\"bytes\": 4096") or NULL.
void trace_span(const char *name, const char *cat, int track, double t0, double t1,
                const char *args_json);
enum { TRACE_TRACK_MAIN = 0, TRACE_TRACK_COMM_ASYNC = 1 };
// The end of this rank's trace: its spans as the body of a JSON array
// (malloc'd, *len bytes, not NUL-terminated; NULL when tracing is off), and
// tracing off. The harness gathers every rank's (harness_trace_write) and
// rank 0 writes them, one track per rank, into one file.
char *trace_take_json(int rank, size_t *len);
void trace_write_file(const char *path, const char *all, const size_t *lens, int n);
