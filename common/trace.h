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

typedef struct Comm Comm;

// Turn tracing on for this rank (collective over c: ranks agree on time zero).
void trace_init(Comm *c, const char *path);
bool trace_on(void);
// Spans nest on one track (tid); begin/end must pair up.
void trace_begin(const char *name, const char *cat);
void trace_end(void);
// A finished span with explicit times (core_now() seconds) on a given track,
// for asynchronous work such as a collective that runs behind compute.
// args_json is a JSON object body without braces ("\"bytes\": 4096") or NULL.
void trace_span(const char *name, const char *cat, int track, double t0, double t1,
                const char *args_json);
enum { TRACE_TRACK_MAIN = 0, TRACE_TRACK_COMM_ASYNC = 1 };
// Gather all ranks' spans to rank 0 and write the file (collective over c).
void trace_write(Comm *c);
