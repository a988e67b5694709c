// dump.h: result files, the grader's only evidence.
//
// A dump is a list of named arrays with shapes. The harness writes it on
// rank 0 (after gathering what the other ranks hold); the grader and
// build/dumptool read it back and compare two of them.
//
// File format (all integers little-endian):
//   magic    8 bytes  "PLDUMP1\n"
//   then records until the end of the file, each:
//     u32    name length L, then L bytes of name (UTF-8, no NUL)
//     u32    dtype: 0 = f32, 1 = f64, 2 = i64, 3 = text (UTF-8 bytes)
//     u32    ndim (0 to 8), then ndim u64 dimensions
//     data   product of dimensions times the element size (1 for text),
//            row-major
// Names are paths: "loss", "param/final/block0.attn.wq", "mem/peak".
// What the course's programs write is listed in docs/dump-format.md.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum { DUMP_F32 = 0, DUMP_F64 = 1, DUMP_I64 = 2, DUMP_TEXT = 3 } DumpType;

enum { DUMP_MAX_DIMS = 8 };

typedef struct {
    char *name;
    DumpType type;
    int ndim;
    uint64_t shape[DUMP_MAX_DIMS];
    uint64_t count;      // product of the shape (bytes for text)
    void *data;          // count elements of the type (text: count bytes plus a NUL)
    // The sum of the squares of the elements, once a reader asked for it
    // (the grader's dump_sumsq keeps it here: a unit's norm is asked for
    // once for each of its tensors).
    bool sumsq_known;
    double sumsq;
} DumpArray;

// ---- writing (one process) ----
typedef struct DumpWriter DumpWriter;
// Open for writing; NULL path gives a writer that writes nothing (so callers
// need no branches). Errors (cannot create the file) abort with a clear line.
// The file appears under its name, whole, at dump_close; until then it has
// no name (or, where the file system cannot do that, path.partial).
DumpWriter *dump_create(const char *path);
// Create the file now, for the dump_create(path) that comes later: a graded
// run opens its dump before the sandbox refuses new files (sandbox.h).
void dump_preopen(const char *path);
void dump_f32(DumpWriter *w, const char *name, const float *data, int ndim, const uint64_t *shape);
void dump_f64(DumpWriter *w, const char *name, const double *data, int ndim, const uint64_t *shape);
void dump_i64(DumpWriter *w, const char *name, const int64_t *data, int ndim, const uint64_t *shape);
void dump_text(DumpWriter *w, const char *name, const char *text);
// Scalars, stored as one-element arrays of ndim 0.
void dump_scalar_f64(DumpWriter *w, const char *name, double v);
void dump_scalar_i64(DumpWriter *w, const char *name, int64_t v);
void dump_close(DumpWriter *w);
// Remove the path.partial of a writer still open, if it has one: for a
// cleanup at exit (async-signal-safe: one unlink).
void dump_remove_partial(void);

// ---- reading ----
typedef struct {
    DumpArray *arrays;
    int count;
    DumpArray **by_name;   // the arrays sorted by name, for dump_find's binary search (dump_read makes it)
} DumpFile;
// Read a whole dump, record by record (the magic first, each record's size
// against the file's). Returns NULL and sets *err (a static sentence) when
// the file is missing, not a regular file (a FIFO, a device), not a dump,
// or truncated.
DumpFile *dump_read(const char *path, const char **err);
void dump_free(DumpFile *f);
const DumpArray *dump_find(const DumpFile *f, const char *name);
// Element i of a numeric array as a double.
double dump_get(const DumpArray *a, uint64_t i);

// ---- sealing: a dump that says whether it is whole ----
// The reference runs are kept on disk and read back by later runs
// (refcache.h); a file cut short, extended or changed anywhere must not be
// trusted. dump_seal appends a last record, "seal/hash" (i64, a scalar),
// holding a 64-bit hash of every byte before it; dump_sealed says whether
// the file ends with that record and the hash of the bytes before it
// matches (false, with *why, otherwise). Both read the file in chunks:
// no copy of it is held in memory.
bool dump_seal(const char *path, const char **why);
bool dump_sealed(const char *path, const char **why);

// ---- what every program of the course writes ----
// Collective over c: every rank calls them; rank 0 writes (with the writer it
// made; the others pass any writer, NULL included).
typedef struct Comm Comm;
typedef struct Args Args;
// meta/program, meta/world_size, meta/seed and meta/config (one "key value"
// per line: the model, data, run flags, device and backend, then `extra`
// lines of the program's own, if any).
void dump_run_meta(DumpWriter *w, Comm *c, const char *program, const Args *a, const char *extra);
// Each rank's memory peaks (mem/peak, mem/peak_total, mem/measured_peak:
// `mem` from mem_report(), or NULL for now) and communication counters
// (comm/calls, comm/bytes, comm/bus_bytes), gathered to rank 0: tables with
// a row per rank.
typedef struct MemReport MemReport;
void dump_rank_stats(DumpWriter *w, Comm *c, const MemReport *mem);

// ---- comparing ----
typedef struct {
    double max_abs;      // max |a - b|
    double rel_frob;     // ||a - b|| / ||b|| (||a - b|| when ||b|| is 0)
    uint64_t argmax;     // where max_abs is reached
    bool shape_ok;       // same type class and shape
} DumpDiff;
// Compare two numeric arrays element by element (b is the reference).
DumpDiff dump_diff(const DumpArray *a, const DumpArray *b);
