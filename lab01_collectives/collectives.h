// collectives.h: the four collectives, built from point-to-point messages.
//
// The interface between the harness (main.c, with checks_given.c and
// bench_given.c) and the student's file (collectives.c). Every function is
// called by every rank of c with the same count, and must give exactly what
// the library's own collective gives (comm.h): the same sums, the same split
// of `count` into per-rank blocks (comm_block: the first count % N ranks
// hold one element more).
//
// Allowed: comm_send, comm_recv, comm_sendrecv (and comm_rank, comm_size,
// comm_block), ops.h for arithmetic on tensors, mem.h for buffers
// (mem_alloc_floats, mem_copy, and mem_free for every buffer allocated). Not
// allowed, and failed by the harness: the library's collectives, the
// bookkeeping helpers (comm_broadcast_host, ...: bytes nobody counts) and MPI
// called directly. Each call must also send no more bytes than the ring (a
// broadcast: each rank but the root receives the data once) and leave no
// COMM memory allocated.
#pragma once

#include <stddef.h>

#include "comm.h"

// Reduce-scatter (sum) around a ring: rank r ends with block r of the sum of
// every rank's `send`. send: (count), recv: (block length of rank r)
void ring_reduce_scatter(Comm *c, const float *send, float *recv, size_t count);

// All-gather around a ring: rank r gives block r; every rank ends with all.
// send: (block length of rank r), recv: (count)
void ring_all_gather(Comm *c, const float *send, float *recv, size_t count);

// All-reduce (sum) in place, as a reduce-scatter followed by an all-gather.
// buf: (count)
void ring_all_reduce(Comm *c, float *buf, size_t count);

// Broadcast buf from root to every rank. buf: (count)
void tree_broadcast(Comm *c, float *buf, size_t count, int root);

// Broadcast along a pipelined chain root -> root+1 -> ... in segments, for
// large messages (optional task; by default it may call tree_broadcast).
void chain_broadcast(Comm *c, float *buf, size_t count, int root);

// A function the student has not written yet says so by calling this first;
// the harness reports it as unfinished rather than as merely wrong.
void lab_todo(const char *function);
