// comm_internal.h: what comm.c and its backends share (not for labs).
#pragma once

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>

#include "comm.h"

struct NcclComm;   // comm_nccl.c: a group's NCCL communicator

struct Comm {
    MPI_Comm mpi;
    int rank, size;
    struct NcclComm *nccl;   // in an NCCL run, the group's NCCL communicator; NULL until made
    int *world;              // (size) the world rank of each rank of the group; NULL for the world
    uint64_t members;        // the group's world ranks, bit r for world rank r (0 when the world has over 63)
};

// The library that moves the data of the buffers: MPI (host memory, or
// device memory staged through the host) or NCCL (device memory, GPU to GPU).
typedef enum { BACKEND_MPI, BACKEND_NCCL } Backend;

// What messages call elements of type t: "floats" (as they always have), "bf16 elements".
static inline const char *comm_elements_word(CommType t) { return t == COMM_F32 ? "floats" : "bf16 elements"; }

// An operation the MPI backend has started and not finished. For device
// buffers the data travels through a host copy (`stage`), which is copied
// back to `dev_out` when the operation completes.
typedef struct {
    MPI_Request req;
    void *stage;         // host staging buffer (malloc'd), or NULL
    void *dev_out;       // device destination of the result, or NULL
    size_t out_count;    // elements to copy back and to scale
    void *host_out;      // host result to scale (buffers on the host), or NULL
    void *landed;        // where MPI leaves a host result that is not host_out (an in-place
                         // reduce-scatter: the start of the buffer), moved to host_out, or NULL
    float scale;         // 1, or 1/N for an average
    CommType type;       // of the elements (their size, and how to scale them)
    void *aux;           // counts and displacements MPI reads until the end (malloc'd), or NULL
    bool done;           // finished: the result is in place
} MpiPending;

// An operation the NCCL backend has enqueued on the communication stream
// and not yet seen finished. The events are CUDA's (cudaEvent_t is a
// struct CUevent_st *), named here without CUDA's headers.
typedef struct {
    struct CUevent_st *done;    // recorded on the communication stream after the operation
    struct CUevent_st *ready;   // a queued send or receive: the compute issued before it, or NULL
    struct NcclComm *comm;      // whose errors a wait watches
    bool queued;                // an asynchronous send or receive not launched yet (comm_nccl.c)
    bool finished;              // seen finished: the events are released
} NcclPending;

// A handle's operation, in the backend that started it (an NCCL run sends
// the few calls NCCL cannot make through MPI).
typedef struct {
    Backend backend;
    MpiPending mpi;
    NcclPending nccl;
} Pending;

// ---- the MPI backend (comm_mpi.c) ----------------------------------------
// Each starts the operation; with p == NULL it runs to completion instead
// (the blocking MPI call, the fastest the library offers). Counts are in
// elements of type t.
void mpi_all_reduce(Comm *c, void *buf, size_t n, CommType t, CommReduce op, MpiPending *p);
void mpi_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op,
                        MpiPending *p);
void mpi_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t, MpiPending *p);
void mpi_broadcast(Comm *c, void *buf, size_t n, CommType t, int root, MpiPending *p);
void mpi_send(Comm *c, const void *buf, size_t n, CommType t, int peer, MpiPending *p);
void mpi_recv(Comm *c, void *buf, size_t n, CommType t, int peer, MpiPending *p);
void mpi_sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src,
                  CommType t);
void mpi_barrier(Comm *c, MpiPending *p);
void mpi_finish(MpiPending *p);   // wait, scale, copy back, free the staging buffer
bool mpi_test(MpiPending *p);     // finished? (then finish it)
// The MPI operations that reduce bf16 (MPI has none): made after MPI_Init,
// freed before MPI_Finalize.
void mpi_ops_create(void);
void mpi_ops_free(void);

// ---- the NCCL backend (comm_nccl.c) ----------------------------------------
// Why NCCL cannot serve this rank, from the mildest reason to the most basic.
typedef enum {
    NCCL_USABLE,       // the tensors are on this rank's own GPU
    NCCL_SHARED_GPU,   // another rank of this node uses the same GPU
    NCCL_ON_CPU,       // the tensors are on the CPU
    NCCL_NOT_BUILT,    // this build has no CUDA backend
} NcclFit;
enum { NCCL_GPU_ID_LEN = 32 };

#ifdef PL_CUDA
// This rank alone (comm.c compares the GPUs of a node): NCCL_USABLE with the
// PCI bus id of its GPU in gpu_id, or why not (gpu_id "").
NcclFit nccl_fit(char gpu_id[NCCL_GPU_ID_LEN]);
void nccl_comm_init(Comm *c);   // collective over c: c->nccl made (its device memory left out of mem's measure)
void nccl_comm_free(Comm *c);
void nccl_shutdown(void);       // after the last communicator: the stream and the events go
bool nccl_on_device(const void *ptr);   // a device (or managed) pointer, which NCCL can move
// As the MPI backend's: p == NULL waits for the result; otherwise it is
// enqueued and p says when it is done. The counts of reduce-scatter and
// all-gather are divisible by c->size (comm.c sends the others to MPI).
void nccl_all_reduce(Comm *c, void *buf, size_t n, CommType t, CommReduce op, NcclPending *p);
void nccl_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op,
                         NcclPending *p);
void nccl_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t, NcclPending *p);
void nccl_broadcast(Comm *c, void *buf, size_t n, CommType t, int root, NcclPending *p);
void nccl_send(Comm *c, const void *buf, size_t n, CommType t, int peer, NcclPending *p);
void nccl_recv(Comm *c, void *buf, size_t n, CommType t, int peer, NcclPending *p);
void nccl_sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src,
                   CommType t);
void nccl_barrier(Comm *c, NcclPending *p);
void nccl_flush(void);              // launch the queued asynchronous sends and receives
int nccl_queued(void);              // asynchronous sends and receives queued, not launched yet
void nccl_finish(NcclPending *p);   // wait for it, release its events
bool nccl_test(NcclPending *p);     // finished? (then release its events)
#else
// A build without CUDA never chooses NCCL (nccl_fit says so), so nothing
// below is ever called.
#include <stdlib.h>
static inline NcclFit nccl_fit(char gpu_id[NCCL_GPU_ID_LEN]) { gpu_id[0] = 0; return NCCL_NOT_BUILT; }
static inline void nccl_comm_init(Comm *c) { (void)c; abort(); }
static inline void nccl_comm_free(Comm *c) { (void)c; abort(); }
static inline void nccl_shutdown(void) {}
static inline bool nccl_on_device(const void *ptr) { (void)ptr; return false; }
static inline void nccl_all_reduce(Comm *c, void *b, size_t n, CommType t, CommReduce op, NcclPending *p) { (void)c; (void)b; (void)n; (void)t; (void)op; (void)p; abort(); }
static inline void nccl_reduce_scatter(Comm *c, const void *s, void *r, size_t n, CommType t, CommReduce op, NcclPending *p) { (void)c; (void)s; (void)r; (void)n; (void)t; (void)op; (void)p; abort(); }
static inline void nccl_all_gather(Comm *c, const void *s, void *r, size_t n, CommType t, NcclPending *p) { (void)c; (void)s; (void)r; (void)n; (void)t; (void)p; abort(); }
static inline void nccl_broadcast(Comm *c, void *b, size_t n, CommType t, int root, NcclPending *p) { (void)c; (void)b; (void)n; (void)t; (void)root; (void)p; abort(); }
static inline void nccl_send(Comm *c, const void *b, size_t n, CommType t, int peer, NcclPending *p) { (void)c; (void)b; (void)n; (void)t; (void)peer; (void)p; abort(); }
static inline void nccl_recv(Comm *c, void *b, size_t n, CommType t, int peer, NcclPending *p) { (void)c; (void)b; (void)n; (void)t; (void)peer; (void)p; abort(); }
static inline void nccl_sendrecv(Comm *c, const void *s, size_t ns, int dst, void *r, size_t nr, int src, CommType t) { (void)c; (void)s; (void)ns; (void)dst; (void)r; (void)nr; (void)src; (void)t; abort(); }
static inline void nccl_barrier(Comm *c, NcclPending *p) { (void)c; (void)p; abort(); }
static inline void nccl_flush(void) {}
static inline int nccl_queued(void) { return 0; }
static inline void nccl_finish(NcclPending *p) { (void)p; abort(); }
static inline bool nccl_test(NcclPending *p) { (void)p; abort(); }
#endif
