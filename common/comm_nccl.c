// comm_nccl.c: the communication backend on NCCL, for ranks whose tensors
// live on a GPU of their own. comm.c chooses it (see comm.h) and keeps the
// counters, the handles and the watchdog; this file moves the data.
//
// Communicators. Each Comm of an NCCL run holds an NCCL communicator: rank 0
// of the group makes a unique id, MPI broadcasts it over the group's MPI
// communicator, and every member calls ncclCommInitRank. comm.c asks for it
// where every member is present: the world's in mem_init (once the device is
// known), a group's in comm_split. One way serves both, and also a group
// split before the device was known, which has no parent NCCL communicator
// for ncclCommSplit to split (it then starts at the group's first call).
//
// Streams and events. Everything runs on one communication stream, made
// non-blocking so that it never waits for the default stream on its own.
// Before each call the stream waits on an event recorded on the default
// stream, where the kernels run: the communication reads what the compute
// issued so far wrote, and overlaps the compute issued after it. A blocking
// call then records an event and waits for it: its result is ready for the
// host and for the next kernel. An asynchronous call records the handle's
// own event: comm_test queries it, comm_wait waits for it. A wait polls the
// event and NCCL's error state, so a failure NCCL reports ends the wait with
// its words (comm.c's watchdog names a wait that never ends).
//
// Sends and receives. An NCCL send holds its stream until the peer's receive
// runs, so two ranks that each send first and then receive, on one stream
// each, would wait for each other forever. Calls that must progress together
// go in one NCCL group: comm_sendrecv's pair, and the asynchronous sends and
// receives, which wait in a queue (each with an event marking the compute
// before it) and are launched together, with the blocking send or receive
// that follows them, at the next call of the library.
//
// Memory. NCCL's own buffers are not the program's: the device memory in use
// is measured around each step that makes NCCL allocate (a communicator's
// start, where every collective connects as NCCL_RUNTIME_CONNECT=0 asks; the
// first message between two ranks) and left out of mem's measure.
//
// What stays on MPI: the unique id's broadcast, a reduce-scatter or
// all-gather with unequal blocks (comm.c stages it through the host), the
// bookkeeping helpers (host memory), comm_split's grouping, the last barrier.
#ifdef PL_CUDA
#include <cuda_runtime_api.h>
#include <nccl.h>
#include <sched.h>
#include <stdlib.h>

#include "comm_internal.h"
#include "core.h"
#include "cuda_check.h"
#include "cuda_poll.h"
#include "mem.h"

#define NCCL_CHECK(call)                                              \
    do {                                                              \
        ncclResult_t res_ = (call);                                   \
        if (res_ != ncclSuccess) nccl_fail(__FILE__, __LINE__, #call, res_); \
    } while (0)

PL_NORETURN static void nccl_fail(const char *file, int line, const char *call, ncclResult_t res) {
    const char *last = ncclGetLastError(NULL);
    core_fail(file, line, "%s failed: %s%s%s", call, ncclGetErrorString(res), last && *last ? ": " : "",
              last ? last : "");
}

struct NcclComm {
    ncclComm_t comm;
    unsigned char *met;   // (size) 1 for each peer this rank has exchanged a message with
};

static bool g_setup;
static cudaStream_t g_stream;   // the communication stream
static cudaEvent_t g_ready;     // the compute issued so far, recorded before each call
static cudaEvent_t g_done;      // the end of a blocking call
static float *g_one;            // (1) on the device: what a barrier all-reduces

// Device memory in use on this rank's GPU, by every process.
static ptrdiff_t device_used(void) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return (ptrdiff_t)(total_b - free_b);
}

// A GPU is named by its PCI bus id, as NCCL names it when it refuses two
// ranks on one GPU; launchers that show each rank only its own GPU make
// every rank's GPU 0 without any sharing one.
NcclFit nccl_fit(char gpu_id[NCCL_GPU_ID_LEN]) {
    gpu_id[0] = 0;
    if (mem_device() != DEVICE_CUDA) return NCCL_ON_CPU;
    int dev = -1;
    CUDA_CHECK(cudaGetDevice(&dev));
    CUDA_CHECK(cudaDeviceGetPCIBusId(gpu_id, NCCL_GPU_ID_LEN, dev));
    return NCCL_USABLE;
}

bool nccl_on_device(const void *ptr) {
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, ptr) != cudaSuccess) {
        (void)cudaGetLastError();
        return false;
    }
    int dev = -1;
    CUDA_CHECK(cudaGetDevice(&dev));
    return (a.type == cudaMemoryTypeDevice && a.device == dev) || a.type == cudaMemoryTypeManaged;
}

// ---- communicators ---------------------------------------------------------
static void setup(void) {
    if (g_setup) return;
    // Every collective connects when a communicator starts, where its memory
    // is measured, rather than at its first use (unless the user said otherwise).
    setenv("NCCL_RUNTIME_CONNECT", "0", 0);
    CUDA_CHECK(cudaStreamCreateWithFlags(&g_stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_ready, cudaEventDisableTiming));
    CUDA_CHECK(cudaEventCreateWithFlags(&g_done, cudaEventDisableTiming));
    CUDA_CHECK(cudaMalloc((void **)&g_one, sizeof(float)));
    g_setup = true;
}

void nccl_comm_init(Comm *c) {
    ptrdiff_t before = device_used();
    setup();
    ncclUniqueId id;
    if (c->rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
    MPI_CHECK(MPI_Bcast(&id, (int)sizeof id, MPI_BYTE, 0, c->mpi));
    struct NcclComm *nc = calloc(1, sizeof *nc);
    CHECK(nc, "out of memory");
    nc->met = calloc((size_t)c->size, 1);
    CHECK(nc->met, "out of memory");
    NCCL_CHECK(ncclCommInitRank(&nc->comm, c->size, id, c->rank));
    mem_measured_exclude(device_used() - before);
    c->nccl = nc;
}

void nccl_comm_free(Comm *c) {
    nccl_flush();
    ptrdiff_t before = device_used();
    NCCL_CHECK(ncclCommDestroy(c->nccl->comm));
    mem_measured_exclude(device_used() - before);   // negative: NCCL gave its buffers back
    free(c->nccl->met);
    free(c->nccl);
    c->nccl = NULL;
}

void nccl_shutdown(void) {
    if (!g_setup) return;
    CUDA_CHECK(cudaStreamSynchronize(g_stream));
    CUDA_CHECK(cudaFree(g_one));
    CUDA_CHECK(cudaEventDestroy(g_ready));
    CUDA_CHECK(cudaEventDestroy(g_done));
    CUDA_CHECK(cudaStreamDestroy(g_stream));
    g_setup = false;
}

// ---- ordering and waiting --------------------------------------------------
// The communication stream waits for the compute issued so far: the kernels
// on the legacy default stream, which itself follows every blocking stream.
static void after_compute(void) {
    CUDA_CHECK(cudaEventRecord(g_ready, cudaStreamLegacy));
    CUDA_CHECK(cudaStreamWaitEvent(g_stream, g_ready, 0));
}

// An error NCCL found on its own (a peer gone, a network failure) ends the run.
static void check_async(struct NcclComm *nc) {
    ncclResult_t async = ncclSuccess;
    NCCL_CHECK(ncclCommGetAsyncError(nc->comm, &async));
    if (async != ncclSuccess && async != ncclInProgress)
        nccl_fail(__FILE__, __LINE__, "an NCCL operation", async);
}

static void wait_event(struct NcclComm *nc, cudaEvent_t ev) {
    for (;;) {
        cudaError_t e = pl_event_query(ev);
        if (e == cudaSuccess) return;
        if (e != cudaErrorNotReady)
            core_fail(__FILE__, __LINE__, "waiting for NCCL: %s", cudaGetErrorString(e));
        check_async(nc);
        sched_yield();
    }
}

static void release(NcclPending *p) {
    CUDA_CHECK(cudaEventDestroy(p->done));
    if (p->ready) CUDA_CHECK(cudaEventDestroy(p->ready));
    p->done = p->ready = NULL;
    p->finished = true;
}

void nccl_finish(NcclPending *p) {
    if (p->finished) return;
    if (p->queued) nccl_flush();
    wait_event(p->comm, p->done);
    release(p);
}

bool nccl_test(NcclPending *p) {
    if (p->finished) return true;
    if (p->queued) nccl_flush();
    cudaError_t e = pl_event_query(p->done);
    if (e == cudaErrorNotReady) {
        check_async(p->comm);
        return false;
    }
    if (e != cudaSuccess) core_fail(__FILE__, __LINE__, "testing an NCCL operation: %s", cudaGetErrorString(e));
    release(p);
    return true;
}

// Before a collective: the queued sends and receives go first, then the
// stream waits for the compute.
static struct NcclComm *begin(Comm *c) {
    nccl_flush();
    after_compute();
    return c->nccl;
}

// After it: a blocking call waits here; an asynchronous one gets its event.
static void end(struct NcclComm *nc, NcclPending *p) {
    if (p) {
        *p = (NcclPending){.comm = nc};
        CUDA_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(p->done, g_stream));
    } else {
        CUDA_CHECK(cudaEventRecord(g_done, g_stream));
        wait_event(nc, g_done);
    }
}

// ---- collectives -----------------------------------------------------------
static ncclRedOp_t nccl_op(CommReduce op) {
    return op == COMM_MAX ? ncclMax : op == COMM_AVG ? ncclAvg : ncclSum;
}

// NCCL's name for the elements. Its bf16 reductions add in fp32 and round to
// bf16 after each addition; its ncclAvg may scale each input before adding.
static ncclDataType_t nccl_type(CommType t) { return t == COMM_BF16 ? ncclBfloat16 : ncclFloat; }

void nccl_all_reduce(Comm *c, void *buf, size_t n, CommType t, CommReduce op, NcclPending *p) {
    struct NcclComm *nc = begin(c);
    if (n) NCCL_CHECK(ncclAllReduce(buf, buf, n, nccl_type(t), nccl_op(op), nc->comm, g_stream));
    end(nc, p);
}

// In place (recv == send + rank * len, as comm.h allows) is NCCL's own
// in-place reduce-scatter; the other blocks of send are then left changed.
void nccl_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op,
                         NcclPending *p) {
    CHECK(n % (size_t)c->size == 0, "nccl_reduce_scatter: %zu elements in %d unequal blocks", n, c->size);
    size_t len = n / (size_t)c->size;
    struct NcclComm *nc = begin(c);
    if (len) NCCL_CHECK(ncclReduceScatter(send, recv, len, nccl_type(t), nccl_op(op), nc->comm, g_stream));
    end(nc, p);
}

// In place (send == recv + rank * len) is NCCL's in-place all-gather.
void nccl_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t, NcclPending *p) {
    CHECK(n % (size_t)c->size == 0, "nccl_all_gather: %zu elements in %d unequal blocks", n, c->size);
    size_t len = n / (size_t)c->size;
    struct NcclComm *nc = begin(c);
    if (len) NCCL_CHECK(ncclAllGather(send, recv, len, nccl_type(t), nc->comm, g_stream));
    end(nc, p);
}

void nccl_broadcast(Comm *c, void *buf, size_t n, CommType t, int root, NcclPending *p) {
    struct NcclComm *nc = begin(c);
    if (n) NCCL_CHECK(ncclBroadcast(buf, buf, n, nccl_type(t), root, nc->comm, g_stream));
    end(nc, p);
}

// A barrier is an all-reduce of one float: no rank finishes it before every
// rank has started it.
void nccl_barrier(Comm *c, NcclPending *p) {
    struct NcclComm *nc = begin(c);
    NCCL_CHECK(ncclAllReduce(g_one, g_one, 1, ncclFloat, ncclSum, nc->comm, g_stream));
    end(nc, p);
}

// ---- sends and receives ----------------------------------------------------
typedef struct {
    struct NcclComm *comm;
    bool send;          // a send (else a receive)
    void *buf;          // (n) elements of type t
    size_t n;
    CommType t;
    int peer;
    NcclPending *p;     // the handle's state, for a queued one
} P2p;

enum { QUEUE_MAX = 64 };
static P2p g_queue[QUEUE_MAX];   // asynchronous sends and receives not launched yet
static int g_nqueue;

static void p2p_call(const P2p *op) {
    if (op->n == 0) return;   // nothing to move: neither side calls NCCL
    if (op->send) NCCL_CHECK(ncclSend(op->buf, op->n, nccl_type(op->t), op->peer, op->comm->comm, g_stream));
    else NCCL_CHECK(ncclRecv(op->buf, op->n, nccl_type(op->t), op->peer, op->comm->comm, g_stream));
}

// Launch the queue and `now` (a blocking call's n_now operations) in one group.
static void launch(const P2p *now, int n_now) {
    int total = g_nqueue + n_now;
    if (total == 0) return;
    for (int i = 0; i < g_nqueue; i++) CUDA_CHECK(cudaStreamWaitEvent(g_stream, g_queue[i].p->ready, 0));
    if (n_now) after_compute();
    // Two ranks connect at their first message: NCCL's buffers for it are measured and left out.
    bool first = false;
    for (int i = 0; i < total; i++) {
        const P2p *op = i < g_nqueue ? &g_queue[i] : &now[i - g_nqueue];
        first = first || (op->n && !op->comm->met[op->peer]);
    }
    ptrdiff_t before = first ? device_used() : 0;
    NCCL_CHECK(ncclGroupStart());
    for (int i = 0; i < total; i++) p2p_call(i < g_nqueue ? &g_queue[i] : &now[i - g_nqueue]);
    NCCL_CHECK(ncclGroupEnd());
    if (first) {
        mem_measured_exclude(device_used() - before);
        for (int i = 0; i < total; i++) {
            const P2p *op = i < g_nqueue ? &g_queue[i] : &now[i - g_nqueue];
            if (op->n) op->comm->met[op->peer] = 1;
        }
    }
    for (int i = 0; i < g_nqueue; i++) {
        CUDA_CHECK(cudaEventRecord(g_queue[i].p->done, g_stream));
        g_queue[i].p->queued = false;
    }
    g_nqueue = 0;
}

void nccl_flush(void) { launch(NULL, 0); }

// Asynchronous (p): queued, with an event marking the compute before it.
// Blocking: launched with the queue, then waited for.
static void p2p(P2p op, NcclPending *p) {
    if (p) {
        if (g_nqueue == QUEUE_MAX) nccl_flush();
        *p = (NcclPending){.comm = op.comm, .queued = true};
        CUDA_CHECK(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventCreateWithFlags(&p->done, cudaEventDisableTiming));
        CUDA_CHECK(cudaEventRecord(p->ready, cudaStreamLegacy));
        op.p = p;
        g_queue[g_nqueue++] = op;
        return;
    }
    launch(&op, 1);
    CUDA_CHECK(cudaEventRecord(g_done, g_stream));
    wait_event(op.comm, g_done);
}

void nccl_send(Comm *c, const void *buf, size_t n, CommType t, int peer, NcclPending *p) {
    p2p((P2p){.comm = c->nccl, .send = true, .buf = (void *)buf, .n = n, .t = t, .peer = peer}, p);
}

void nccl_recv(Comm *c, void *buf, size_t n, CommType t, int peer, NcclPending *p) {
    p2p((P2p){.comm = c->nccl, .send = false, .buf = buf, .n = n, .t = t, .peer = peer}, p);
}

void nccl_sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src,
                   CommType t) {
    P2p pair[2] = {
        {.comm = c->nccl, .send = true, .buf = (void *)send, .n = ns, .t = t, .peer = dst},
        {.comm = c->nccl, .send = false, .buf = recv, .n = nr, .t = t, .peer = src},
    };
    launch(pair, 2);
    CUDA_CHECK(cudaEventRecord(g_done, g_stream));
    wait_event(c->nccl, g_done);
}

int nccl_queued(void) { return g_nqueue; }
#endif
