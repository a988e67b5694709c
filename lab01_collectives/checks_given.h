// checks_given.h: each collective of collectives.c checked exactly against
// the library's own, and shown on tiny tensors (given: harness code).
//
// The inputs are small integers stored as floats: every partial sum is an
// exact integer, so any order of addition gives the same bits, and every
// element that differs from the naive result is counted, rank by rank, as
// nccl-tests does.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "comm.h"
#include "dump.h"

typedef enum { C_REDUCE_SCATTER, C_ALL_GATHER, C_ALL_REDUCE, C_TREE_BCAST, C_CHAIN_BCAST, NCOLL } Coll;

// What each rank holds before and after one call, on the device, and the
// call's arguments.
typedef struct {
    float *in, *out;
    size_t in_count, out_count;
    bool own_in;     // `in` is a buffer of its own (not `out` or a block of it)
    size_t count;    // the collective's count (the whole vector)
    int root;        // a broadcast's root
} Bufs;

// How a collective's buffers are laid out.
typedef enum {
    WHOLE_TO_BLOCK,   // in: (count), out: (this rank's block)
    BLOCK_TO_WHOLE,   // in: (this rank's block), out: (count); in place: `in` is the block of `out`
    ONE_BUFFER,       // in = out: (count), in place
} Layout;

// One collective: the student's function beside the library's, run on the
// same buffers.
typedef struct {
    const char *name;                    // as the tables print it: "all_reduce"
    const char *func;                    // the student's function: "ring_all_reduce"
    void (*yours)(Comm *c, Bufs *b);     // collectives.c's
    void (*library)(Comm *c, Bufs *b);   // comm.h's own
    Layout layout;
    bool rooted;                         // a broadcast: the ranks but the root start from garbage
    int passes;                          // the least it sends, over all ranks: passes · (N-1) · count floats
    const char *least;                   // that least, in words
} Collective;

extern const Collective COLL[NCOLL];   // in the order of Coll

// The seed of the exact inputs, and the run's watchdog timeout (a check
// runs under a shorter one of its own). Call once, before anything below.
void checks_init(uint64_t seed, double timeout);

// Buffers for collective k over `count` elements, holding this rank's exact
// input; in_place: an all-gather's input is its block of the output.
Bufs bufs_make(Comm *c, Coll k, size_t count, int root, bool in_place);
void bufs_free(Bufs *b);

// What one rank found for one call: wrong elements, the first of them, and
// what the call did besides: a library collective, a call the counters
// cannot see, bytes sent, COMM memory left allocated.
typedef struct {
    long wrong;
    long first;           // index of the first wrong element, or -1
    float got, want;
    int used_collective;  // a CommOp called that is not send/recv, or -1
    char foreign[32];     // a bookkeeping helper or MPI called directly ("MPI_Allreduce"), or ""
    double sent;          // bytes sent to other ranks
    double leaked;        // COMM bytes allocated by the call and still allocated after it
} Finding;

// One call of the student's collective and one of the library's on fresh
// exact inputs, each compared with the naive result (this rank's findings).
void check_one(Comm *c, Coll k, size_t count, int root, bool in_place, Finding *student, Finding *library);

// Whether the student's function for collective k still calls lab_todo
// (known once the checks have called it).
bool checks_unwritten(Coll k);

// Every collective at every count (broadcasts from every root, the
// all-gather in both modes): the table, the diagnoses, the dump's check/
// entries. Returns how many failed.
int checks_run(Comm *c, DumpWriter *dw);

// The collectives on tiny tensors, what every rank holds before and after.
void checks_demo(Comm *c);
