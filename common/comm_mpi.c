// comm_mpi.c: the communication backend on Open MPI.
//
// MPI works on host memory. When the rank's tensors live on a GPU, each call
// copies its input to a host buffer, communicates that, and copies the result
// back: slow, but correct, and it lets several ranks share one GPU (which
// NCCL refuses).
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"
#include "core.h"
#include "mem.h"

static bool on_device(void) { return mem_device() == DEVICE_CUDA; }

static int as_int(size_t n) {
    CHECK(n <= INT_MAX, "a message of %zu floats is more than MPI's int count allows; split it",
          n);
    return (int)n;
}

// A receive that failed: a message longer than the receive is the common
// mistake (two ranks that disagree on what is sent), so it gets its own words.
static void check_recv(int err, size_t n, int peer, const char *call) {
    if (err == MPI_SUCCESS) return;
    int cls = 0;
    MPI_Error_class(err, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        core_fail(__FILE__, __LINE__,
                  "%s: the message from rank %d is longer than the %zu floats this receive expects: the "
                  "sender and the receiver disagree on its size (are they sending and receiving the "
                  "same block?)", call, peer, n);
    core_fail(__FILE__, __LINE__, "%s from rank %d failed: %s", call, peer, core_mpi_error_string(err));
}

static void *host_alloc(size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    CHECK(h, "out of host memory (%zu bytes) for communication", bytes);
    return h;
}

// Stage n floats of a device buffer on the host (or use the host buffer).
static float *to_host(const float *buf, size_t n, float *stage) {
    if (!on_device()) return (float *)buf;
    mem_to_host(stage, buf, n * sizeof(float));
    return stage;
}

// After the data arrived: scale for an average, copy to the device, free.
void mpi_finish(MpiPending *p) {
    if (p->done) return;
    p->done = true;
    if (p->req != MPI_REQUEST_NULL) check_recv(MPI_Wait(&p->req, MPI_STATUS_IGNORE), p->out_count, -1, "comm_wait");
    float *out = p->stage ? p->stage : p->host_out;
    // Where the block belongs may overlap where it landed (this rank's block
    // begins less than a block into the buffer): memmove.
    if (p->landed && out && p->landed != out) memmove(out, p->landed, p->out_count * sizeof(float));
    if (out && p->scale != 1.0f)
        for (size_t i = 0; i < p->out_count; i++) out[i] *= p->scale;
    if (p->stage && p->dev_out) mem_from_host(p->dev_out, p->stage, p->out_count * sizeof(float));
    free(p->stage);
    free(p->aux);
    p->stage = NULL;
    p->aux = NULL;
}

bool mpi_test(MpiPending *p) {
    if (p->done) return true;
    int done = 0;
    if (p->req != MPI_REQUEST_NULL) MPI_CHECK(MPI_Test(&p->req, &done, MPI_STATUS_IGNORE));
    else done = 1;
    if (done) mpi_finish(p);
    return done;
}

// Blocking calls finish here; non-blocking ones hand their state to *p.
static void finish_or_keep(MpiPending *t, MpiPending *p) {
    if (p)
        *p = *t;
    else
        mpi_finish(t);
}

// A pending operation whose result (out_count floats) lands in `out`.
static MpiPending pending(float *out, size_t out_count, float scale) {
    MpiPending t = {.req = MPI_REQUEST_NULL, .out_count = out_count, .scale = scale};
    if (on_device()) {
        t.dev_out = out;
    } else {
        t.host_out = out;
    }
    return t;
}

// MPI's operation for a reduction, and the factor its result is then
// multiplied by: 1/N for an average, 1 for a sum or a maximum.
static MPI_Op mpi_op(CommReduce op) { return op == COMM_MAX ? MPI_MAX : MPI_SUM; }
static float mpi_scale(Comm *c, CommReduce op) { return op == COMM_AVG ? 1.0f / (float)c->size : 1.0f; }

void mpi_all_reduce(Comm *c, float *buf, size_t n, CommReduce op, MpiPending *p) {
    MpiPending t = pending(buf, n, mpi_scale(c, op));
    if (on_device()) t.stage = host_alloc(n * sizeof(float));
    float *h = to_host(buf, n, t.stage);
    if (p)
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h, as_int(n), MPI_FLOAT, mpi_op(op), c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, h, as_int(n), MPI_FLOAT, mpi_op(op), c->mpi));
    finish_or_keep(&t, p);
}

// The per-rank counts and displacements of comm_block, as MPI wants them;
// kept (in t->aux) until the operation ends, as MPI requires for
// non-blocking collectives. One extra float at the end serves as the
// receive buffer of an empty block.
static int *block_counts(Comm *c, size_t n, MpiPending *t) {
    int *counts = host_alloc((2 * (size_t)c->size + 2) * sizeof(int));
    int *displs = counts + c->size;
    for (int r = 0; r < c->size; r++) {
        size_t off, len;
        comm_block(n, c->size, r, &off, &len);
        counts[r] = as_int(len);
        displs[r] = as_int(off);
    }
    t->aux = counts;
    return counts;
}

void mpi_reduce_scatter(Comm *c, const float *send, float *recv, size_t n, CommReduce op,
                        MpiPending *p) {
    MpiPending t = pending(recv, 0, mpi_scale(c, op));
    int *counts = block_counts(c, n, &t);
    int *displs = counts + c->size;
    size_t mine = (size_t)counts[c->rank];
    t.out_count = mine;
    // In place (recv is this rank's block of send, so send is writable): MPI
    // takes the input from the receive buffer and leaves this rank's block
    // of the result at the buffer's START, not at its block; it is moved
    // there when the operation finishes.
    bool in_place = n > 0 && recv == send + displs[c->rank];
    const void *hs = send;
    float *hr = recv;
    if (on_device() && in_place) {
        // The whole input staged; the result's block lands at its start,
        // which is what mpi_finish copies to recv on the device.
        t.stage = host_alloc(n * sizeof(float));
        hr = to_host(send, n, t.stage);
        hs = MPI_IN_PLACE;
    } else if (on_device()) {
        // One staging buffer: this rank's block of the result, then the input.
        t.stage = host_alloc((mine + n) * sizeof(float));
        hr = t.stage;
        hs = to_host(send, n, t.stage + mine);
    } else if (in_place) {
        hr = (float *)send;
        hs = MPI_IN_PLACE;
        t.landed = hr;
    }
    if (mine == 0 && !in_place) hr = (float *)(counts + 2 * c->size);   // MPI wants a valid pointer
    if (p)
        MPI_CHECK(MPI_Ireduce_scatter(hs, hr, counts, MPI_FLOAT, mpi_op(op), c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Reduce_scatter(hs, hr, counts, MPI_FLOAT, mpi_op(op), c->mpi));
    finish_or_keep(&t, p);
}

void mpi_all_gather(Comm *c, const float *send, float *recv, size_t n, MpiPending *p) {
    MpiPending t = pending(recv, n, 1.0f);
    int *counts = block_counts(c, n, &t);
    int *displs = counts + c->size;
    size_t mine = (size_t)counts[c->rank];
    bool in_place = send == recv + displs[c->rank];
    const void *hs = in_place ? MPI_IN_PLACE : (const void *)send;
    float *hr = recv;
    if (on_device()) {
        t.stage = host_alloc(n * sizeof(float));
        hr = t.stage;
        // In place or not, this rank's block goes into its slot of the staging buffer.
        mem_to_host(hr + displs[c->rank], send, mine * sizeof(float));
        hs = MPI_IN_PLACE;
    }
    if (p)
        MPI_CHECK(MPI_Iallgatherv(hs, counts[c->rank], MPI_FLOAT, hr, counts, displs, MPI_FLOAT,
                                  c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Allgatherv(hs, counts[c->rank], MPI_FLOAT, hr, counts, displs, MPI_FLOAT,
                                 c->mpi));
    finish_or_keep(&t, p);
}

void mpi_broadcast(Comm *c, float *buf, size_t n, int root, MpiPending *p) {
    MpiPending t = pending(buf, n, 1.0f);
    if (on_device()) t.stage = host_alloc(n * sizeof(float));
    float *h = buf;
    if (on_device()) h = c->rank == root ? to_host(buf, n, t.stage) : t.stage;
    if (p)
        MPI_CHECK(MPI_Ibcast(h, as_int(n), MPI_FLOAT, root, c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Bcast(h, as_int(n), MPI_FLOAT, root, c->mpi));
    finish_or_keep(&t, p);
}

void mpi_send(Comm *c, const float *buf, size_t n, int peer, MpiPending *p) {
    MpiPending t = pending(NULL, 0, 1.0f);
    const float *h = buf;
    if (on_device()) {
        t.stage = host_alloc(n * sizeof(float));
        h = to_host(buf, n, t.stage);
    }
    if (p)
        MPI_CHECK(MPI_Isend(h, as_int(n), MPI_FLOAT, peer, 0, c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Send(h, as_int(n), MPI_FLOAT, peer, 0, c->mpi));
    finish_or_keep(&t, p);
}

void mpi_recv(Comm *c, float *buf, size_t n, int peer, MpiPending *p) {
    MpiPending t = pending(buf, n, 1.0f);
    float *h = buf;
    if (on_device()) h = t.stage = host_alloc(n * sizeof(float));
    if (p)
        MPI_CHECK(MPI_Irecv(h, as_int(n), MPI_FLOAT, peer, 0, c->mpi, &t.req));
    else
        check_recv(MPI_Recv(h, as_int(n), MPI_FLOAT, peer, 0, c->mpi, MPI_STATUS_IGNORE), n, peer, "comm_recv");
    finish_or_keep(&t, p);
}

void mpi_sendrecv(Comm *c, const float *send, size_t ns, int dst, float *recv, size_t nr, int src) {
    MpiPending t = pending(recv, nr, 1.0f);
    const float *hs = send;
    float *hr = recv;
    if (on_device()) {
        t.stage = host_alloc((nr + ns) * sizeof(float));
        hr = t.stage;
        hs = to_host(send, ns, t.stage + nr);
    }
    check_recv(MPI_Sendrecv(hs, as_int(ns), MPI_FLOAT, dst, 0, hr, as_int(nr), MPI_FLOAT, src, 0,
                            c->mpi, MPI_STATUS_IGNORE),
               nr, src, "comm_sendrecv");
    mpi_finish(&t);
}

void mpi_barrier(Comm *c, MpiPending *p) {
    MpiPending t = pending(NULL, 0, 1.0f);
    if (p)
        MPI_CHECK(MPI_Ibarrier(c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Barrier(c->mpi));
    finish_or_keep(&t, p);
}
