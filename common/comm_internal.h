// comm_internal.h: what comm.c and its backends share (not for labs).
#pragma once

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "comm.h"

struct Comm {
    MPI_Comm mpi;
    int rank, size;
};

// An operation the MPI backend has started and not finished. For device
// buffers the data travels through a host copy (`stage`), which is copied
// back to `dev_out` when the operation completes.
typedef struct {
    MPI_Request req;
    float *stage;        // host staging buffer (malloc'd), or NULL
    float *dev_out;      // device destination of the result, or NULL
    size_t out_count;    // floats to copy back and to scale
    float *host_out;     // host result to scale (buffers on the host), or NULL
    float *landed;       // where MPI leaves a host result that is not host_out (an in-place
                         // reduce-scatter: the start of the buffer), moved to host_out, or NULL
    float scale;         // 1, or 1/N for an average
    void *aux;           // counts and displacements MPI reads until the end (malloc'd), or NULL
    bool done;           // finished: the result is in place
} MpiPending;

// Each starts the operation; with p == NULL it runs to completion instead
// (the blocking MPI call, the fastest the library offers).
void mpi_all_reduce(Comm *c, float *buf, size_t n, CommReduce op, MpiPending *p);
void mpi_reduce_scatter(Comm *c, const float *send, float *recv, size_t n, CommReduce op,
                        MpiPending *p);
void mpi_all_gather(Comm *c, const float *send, float *recv, size_t n, MpiPending *p);
void mpi_broadcast(Comm *c, float *buf, size_t n, int root, MpiPending *p);
void mpi_send(Comm *c, const float *buf, size_t n, int peer, MpiPending *p);
void mpi_recv(Comm *c, float *buf, size_t n, int peer, MpiPending *p);
void mpi_sendrecv(Comm *c, const float *send, size_t ns, int dst, float *recv, size_t nr, int src);
void mpi_barrier(Comm *c, MpiPending *p);
void mpi_finish(MpiPending *p);   // wait, scale, copy back, free the staging buffer
bool mpi_test(MpiPending *p);     // finished? (then finish it)
