// comm_mpi.c: the communication backend on Open MPI.
//
// MPI works on host memory. When the rank's tensors live on a GPU, each call
// copies its input to a host buffer, communicates that, and copies the result
// back: slow, but correct, and it lets several ranks share one GPU (which
// NCCL refuses).
//
// Elements are floats (MPI_FLOAT) or bf16. MPI has no bf16: it moves them
// as 2-byte integers (MPI_UINT16_T) and reduces them with two operations of
// its own, made once (MPI_Op_create) and freed at comm_finalize: a sum that
// adds in fp32 and rounds to bf16 after each addition, and a maximum.
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "bf16.h"
#include "comm_internal.h"
#include "core.h"
#include "mem.h"

static bool on_device(void) { return mem_device() == DEVICE_CUDA; }

static int as_int(size_t n, CommType t) {
    CHECK(n <= INT_MAX, "a message of %zu %s is more than MPI's int count allows; split it", n,
          comm_elements_word(t));
    return (int)n;
}

// ---- bf16 for MPI ------------------------------------------------------------
static MPI_Op g_bf16_sum = MPI_OP_NULL, g_bf16_max = MPI_OP_NULL;

// MPI's user operations: inout[i] = in[i] (op) inout[i], over *len elements.
// The sum adds in fp32 and rounds once, as NCCL's bf16 sum does at each step.
static void bf16_sum(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const bf16 *a = in;
    bf16 *b = inout;
    for (int i = 0; i < *len; i++) b[i] = bf16_from_float(bf16_to_float(a[i]) + bf16_to_float(b[i]));
}

// As Open MPI's MPI_MAX on floats: inout = inout > in ? inout : in.
static void bf16_max(void *in, void *inout, int *len, MPI_Datatype *type) {
    (void)type;
    const bf16 *a = in;
    bf16 *b = inout;
    for (int i = 0; i < *len; i++)
        if (!(bf16_to_float(b[i]) > bf16_to_float(a[i]))) b[i] = a[i];
}

void mpi_ops_create(void) {
    if (g_bf16_sum != MPI_OP_NULL) return;
    MPI_CHECK(MPI_Op_create(bf16_sum, 1, &g_bf16_sum));
    MPI_CHECK(MPI_Op_create(bf16_max, 1, &g_bf16_max));
}

void mpi_ops_free(void) {
    if (g_bf16_sum == MPI_OP_NULL) return;
    MPI_CHECK(MPI_Op_free(&g_bf16_sum));
    MPI_CHECK(MPI_Op_free(&g_bf16_max));
}

static MPI_Datatype mpi_type(CommType t) { return t == COMM_BF16 ? MPI_UINT16_T : MPI_FLOAT; }

// A receive that failed: a message longer than the receive is the common
// mistake (two ranks that disagree on what is sent), so it gets its own words.
static void check_recv(int err, size_t n, CommType t, int peer, const char *call) {
    if (err == MPI_SUCCESS) return;
    int cls = 0;
    MPI_Error_class(err, &cls);
    if (cls == MPI_ERR_TRUNCATE)
        core_fail(__FILE__, __LINE__,
                  "%s: the message from rank %d is longer than the %zu %s this receive expects: the "
                  "sender and the receiver disagree on its size (are they sending and receiving the "
                  "same block?)", call, peer, n, comm_elements_word(t));
    core_fail(__FILE__, __LINE__, "%s from rank %d failed: %s", call, peer, core_mpi_error_string(err));
}

static void *host_alloc(size_t bytes) {
    void *h = malloc(bytes ? bytes : 1);
    CHECK(h, "out of host memory (%zu bytes) for communication", bytes);
    return h;
}

// Stage `bytes` bytes of a device buffer on the host (or use the host buffer).
static void *to_host(const void *buf, size_t bytes, void *stage) {
    if (!on_device()) return (void *)buf;
    mem_to_host(stage, buf, bytes);
    return stage;
}

// Multiply n elements by s: floats in place; bf16 widened to fp32,
// multiplied and rounded back.
static void scale(void *out, size_t n, CommType t, float s) {
    if (t == COMM_F32) {
        float *f = out;
        for (size_t i = 0; i < n; i++) f[i] *= s;
    } else {
        bf16 *b = out;
        for (size_t i = 0; i < n; i++) b[i] = bf16_from_float(bf16_to_float(b[i]) * s);
    }
}

// After the data arrived: scale for an average, copy to the device, free.
void mpi_finish(MpiPending *p) {
    if (p->done) return;
    p->done = true;
    if (p->req != MPI_REQUEST_NULL)
        check_recv(MPI_Wait(&p->req, MPI_STATUS_IGNORE), p->out_count, p->type, -1, "comm_wait");
    void *out = p->stage ? p->stage : p->host_out;
    size_t bytes = p->out_count * comm_type_size(p->type);
    // Where the block belongs may overlap where it landed (this rank's block
    // begins less than a block into the buffer): memmove.
    if (p->landed && out && p->landed != out) memmove(out, p->landed, bytes);
    if (out && p->scale != 1.0f) scale(out, p->out_count, p->type, p->scale);
    if (p->stage && p->dev_out) mem_from_host(p->dev_out, p->stage, bytes);
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

// A pending operation whose result (out_count elements of type ty) lands in `out`.
static MpiPending pending(void *out, size_t out_count, CommType ty, float scale) {
    MpiPending t = {.req = MPI_REQUEST_NULL, .out_count = out_count, .scale = scale, .type = ty};
    if (on_device()) {
        t.dev_out = out;
    } else {
        t.host_out = out;
    }
    return t;
}

// MPI's operation for a reduction, and the factor its result is then
// multiplied by: 1/N for an average, 1 for a sum or a maximum.
static MPI_Op mpi_op(CommReduce op, CommType t) {
    if (t == COMM_BF16) {
        CHECK(g_bf16_sum != MPI_OP_NULL, "a bf16 reduction before comm_init made its MPI operations");
        return op == COMM_MAX ? g_bf16_max : g_bf16_sum;
    }
    return op == COMM_MAX ? MPI_MAX : MPI_SUM;
}
static float mpi_scale(Comm *c, CommReduce op) { return op == COMM_AVG ? 1.0f / (float)c->size : 1.0f; }

void mpi_all_reduce(Comm *c, void *buf, size_t n, CommType ty, CommReduce op, MpiPending *p) {
    size_t es = comm_type_size(ty);
    MpiPending t = pending(buf, n, ty, mpi_scale(c, op));
    if (on_device()) t.stage = host_alloc(n * es);
    void *h = to_host(buf, n * es, t.stage);
    if (p)
        MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, h, as_int(n, ty), mpi_type(ty), mpi_op(op, ty), c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Allreduce(MPI_IN_PLACE, h, as_int(n, ty), mpi_type(ty), mpi_op(op, ty), c->mpi));
    finish_or_keep(&t, p);
}

// The per-rank counts and displacements of comm_block, as MPI wants them;
// kept (in t->aux) until the operation ends, as MPI requires for
// non-blocking collectives. Two extra ints at the end (room for one
// element of any type) serve as the receive buffer of an empty block.
static int *block_counts(Comm *c, size_t n, MpiPending *t) {
    int *counts = host_alloc((2 * (size_t)c->size + 2) * sizeof(int));
    int *displs = counts + c->size;
    for (int r = 0; r < c->size; r++) {
        size_t off, len;
        comm_block(n, c->size, r, &off, &len);
        counts[r] = as_int(len, t->type);
        displs[r] = as_int(off, t->type);
    }
    t->aux = counts;
    return counts;
}

void mpi_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType ty, CommReduce op,
                        MpiPending *p) {
    size_t es = comm_type_size(ty);
    MpiPending t = pending(recv, 0, ty, mpi_scale(c, op));
    int *counts = block_counts(c, n, &t);
    int *displs = counts + c->size;
    size_t mine = (size_t)counts[c->rank];
    t.out_count = mine;
    // In place (recv is this rank's block of send, so send is writable): MPI
    // takes the input from the receive buffer and leaves this rank's block
    // of the result at the buffer's START, not at its block; it is moved
    // there when the operation finishes.
    bool in_place = n > 0 && recv == comm_at_const(send, (size_t)displs[c->rank], ty);
    const void *hs = send;
    void *hr = recv;
    if (on_device() && in_place) {
        // The whole input staged; the result's block lands at its start,
        // which is what mpi_finish copies to recv on the device.
        t.stage = host_alloc(n * es);
        hr = to_host(send, n * es, t.stage);
        hs = MPI_IN_PLACE;
    } else if (on_device()) {
        // One staging buffer: this rank's block of the result, then the input.
        t.stage = host_alloc((mine + n) * es);
        hr = t.stage;
        hs = to_host(send, n * es, comm_at(t.stage, mine, ty));
    } else if (in_place) {
        hr = (void *)send;
        hs = MPI_IN_PLACE;
        t.landed = hr;
    }
    if (mine == 0 && !in_place) hr = counts + 2 * c->size;   // MPI wants a valid pointer
    if (p)
        MPI_CHECK(MPI_Ireduce_scatter(hs, hr, counts, mpi_type(ty), mpi_op(op, ty), c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Reduce_scatter(hs, hr, counts, mpi_type(ty), mpi_op(op, ty), c->mpi));
    finish_or_keep(&t, p);
}

void mpi_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType ty, MpiPending *p) {
    MpiPending t = pending(recv, n, ty, 1.0f);
    int *counts = block_counts(c, n, &t);
    int *displs = counts + c->size;
    size_t mine = (size_t)counts[c->rank];
    bool in_place = send == comm_at(recv, (size_t)displs[c->rank], ty);
    const void *hs = in_place ? MPI_IN_PLACE : send;
    void *hr = recv;
    if (on_device()) {
        t.stage = host_alloc(n * comm_type_size(ty));
        hr = t.stage;
        // In place or not, this rank's block goes into its slot of the staging buffer.
        mem_to_host(comm_at(hr, (size_t)displs[c->rank], ty), send, mine * comm_type_size(ty));
        hs = MPI_IN_PLACE;
    }
    if (p)
        MPI_CHECK(MPI_Iallgatherv(hs, counts[c->rank], mpi_type(ty), hr, counts, displs, mpi_type(ty),
                                  c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Allgatherv(hs, counts[c->rank], mpi_type(ty), hr, counts, displs, mpi_type(ty),
                                 c->mpi));
    finish_or_keep(&t, p);
}

void mpi_broadcast(Comm *c, void *buf, size_t n, CommType ty, int root, MpiPending *p) {
    size_t bytes = n * comm_type_size(ty);
    MpiPending t = pending(buf, n, ty, 1.0f);
    if (on_device()) t.stage = host_alloc(bytes);
    void *h = buf;
    if (on_device()) h = c->rank == root ? to_host(buf, bytes, t.stage) : t.stage;
    if (p)
        MPI_CHECK(MPI_Ibcast(h, as_int(n, ty), mpi_type(ty), root, c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Bcast(h, as_int(n, ty), mpi_type(ty), root, c->mpi));
    finish_or_keep(&t, p);
}

void mpi_send(Comm *c, const void *buf, size_t n, CommType ty, int peer, MpiPending *p) {
    MpiPending t = pending(NULL, 0, ty, 1.0f);
    const void *h = buf;
    if (on_device()) {
        t.stage = host_alloc(n * comm_type_size(ty));
        h = to_host(buf, n * comm_type_size(ty), t.stage);
    }
    if (p)
        MPI_CHECK(MPI_Isend(h, as_int(n, ty), mpi_type(ty), peer, 0, c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Send(h, as_int(n, ty), mpi_type(ty), peer, 0, c->mpi));
    finish_or_keep(&t, p);
}

void mpi_recv(Comm *c, void *buf, size_t n, CommType ty, int peer, MpiPending *p) {
    MpiPending t = pending(buf, n, ty, 1.0f);
    void *h = buf;
    if (on_device()) h = t.stage = host_alloc(n * comm_type_size(ty));
    if (p)
        MPI_CHECK(MPI_Irecv(h, as_int(n, ty), mpi_type(ty), peer, 0, c->mpi, &t.req));
    else
        check_recv(MPI_Recv(h, as_int(n, ty), mpi_type(ty), peer, 0, c->mpi, MPI_STATUS_IGNORE), n, ty, peer,
                   "comm_recv");
    finish_or_keep(&t, p);
}

void mpi_sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src,
                  CommType ty) {
    size_t es = comm_type_size(ty);
    MpiPending t = pending(recv, nr, ty, 1.0f);
    const void *hs = send;
    void *hr = recv;
    if (on_device()) {
        t.stage = host_alloc((nr + ns) * es);
        hr = t.stage;
        hs = to_host(send, ns * es, comm_at(t.stage, nr, ty));
    }
    check_recv(MPI_Sendrecv(hs, as_int(ns, ty), mpi_type(ty), dst, 0, hr, as_int(nr, ty), mpi_type(ty), src,
                            0, c->mpi, MPI_STATUS_IGNORE),
               nr, ty, src, "comm_sendrecv");
    mpi_finish(&t);
}

void mpi_barrier(Comm *c, MpiPending *p) {
    MpiPending t = pending(NULL, 0, COMM_F32, 1.0f);
    if (p)
        MPI_CHECK(MPI_Ibarrier(c->mpi, &t.req));
    else
        MPI_CHECK(MPI_Barrier(c->mpi));
    finish_or_keep(&t, p);
}
