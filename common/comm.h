// comm.h: the only door to communication.
//
// A communicator is a group of ranks (the world, or a group made by
// comm_split). Every collective is offered blocking and asynchronous (a
// handle to wait on). Buffers live on the rank's device (from mem_alloc).
// Counts are in elements: floats for the float forms, elements of the
// given type for the typed forms (below the float ones), fp32 or bf16.
//
// Every call adds to per-operation counters of calls, payload bytes and bus
// bytes (what a rank sends under a bandwidth-optimal algorithm, with
// nccl-tests' factors), so a lab can print and the grader can check how much
// it communicated.
//
// A watchdog notes which call each rank is in. When a rank has waited in one
// call longer than the timeout, it prints what it waits on and the run ends;
// as the launcher stops the other ranks, each of them prints its own line.
//
// Two backends move the data, the same on every rank of a run:
// - MPI (comm_mpi.c) works on host memory; buffers on a GPU are copied to
//   the host, communicated, and copied back. Any device, any number of
//   ranks per GPU.
// - NCCL (comm_nccl.c) moves GPU buffers directly, GPU to GPU. It needs the
//   tensors of every rank on a GPU that no other rank of its node uses.
// --comm auto (the default) takes NCCL when that holds; --comm mpi never
// does; --comm nccl where it cannot work is a usage error. The choice is
// made when mem_init picks the device; the world gets its NCCL communicator
// then, and each group in comm_split.
// Through NCCL, every call runs on one communication stream, after the
// compute already issued (the kernels on the default stream). A blocking
// call returns when its result is on the GPU; an asynchronous one records an
// event that comm_test queries and comm_wait waits for. Asynchronous sends
// and receives are launched together (one NCCL group, so that two ranks
// sending to each other both progress) by the next call of this library
// that is not one of them: a wait, a test, comm_progress, any other call.
// A reduce-scatter or all-gather whose count N does not divide goes through
// MPI (NCCL wants equal blocks), as do the bookkeeping helpers at the end of
// this file (host memory).
// Counters, busy and blocked time and the watchdog are the same for both;
// the watchdog's line names NCCL when it moves the data.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Comm Comm;
typedef struct CommHandle CommHandle;

// How a reduction combines the ranks' buffers, element by element: the sum,
// the average (the sum times 1/N), or the maximum (how ranks that each hold
// a slice of a row agree on the row's largest value). All three move, and
// are counted as, the same bytes.
typedef enum { COMM_SUM, COMM_AVG, COMM_MAX } CommReduce;

// The type of a buffer's elements: float, or bf16 (2 bytes, stored as
// uint16_t: bf16.h; mem_alloc_bf16).
typedef enum { COMM_F32, COMM_BF16 } CommType;
size_t comm_type_size(CommType t);        // bytes per element: 4, 2
const char *comm_type_name(CommType t);   // "fp32", "bf16"

typedef enum {
    COMM_OP_ALL_REDUCE,
    COMM_OP_REDUCE_SCATTER,
    COMM_OP_ALL_GATHER,
    COMM_OP_BROADCAST,
    COMM_OP_SEND,
    COMM_OP_RECV,
    COMM_OP_BARRIER,
    COMM_NOPS
} CommOp;

// Start communication (MPI, and the device chosen by mem_init later). The
// watchdog ends the run when one call waits longer than timeout_s seconds
// (0 turns it off). Returns the world communicator.
Comm *comm_init(int *argc, char ***argv, double timeout_s);
void comm_finalize(void);
Comm *comm_world(void);

int comm_rank(const Comm *c);
int comm_size(const Comm *c);
int comm_local_rank(void);            // rank among the processes on this node
int comm_local_size(void);            // processes on this node (1 before comm_init)
const char *comm_backend_name(void);  // "mpi" or "nccl" (MPI until mem_init has picked the device)
// The backend to use: "auto" (the default), "mpi" or "nccl" (see the top of
// this file). Before mem_init; args_parse calls it with --comm.
void comm_use_backend(const char *which);

// Split c into groups: ranks with the same color form one group, ordered by
// key (then by rank in c). Collective over c. Free with comm_free.
Comm *comm_split(Comm *c, int color, int key);
void comm_free(Comm *c);

// How `count` elements are split over n ranks: rank r holds `len` elements
// from `offset`; the first count % n ranks hold one more than the rest.
// Reduce-scatter and all-gather use this split.
void comm_block(size_t count, int n, int r, size_t *offset, size_t *len);

// All-reduce in place: every rank ends with the sum (or average, or maximum)
// of buf over all ranks. buf: (count)
void comm_all_reduce(Comm *c, float *buf, size_t count, CommReduce op);
// Reduce-scatter: sum (or average, or maximum) `send` over ranks; rank r
// receives block r of the result (comm_block).
// send: (count), recv: (block length of rank r)
// recv may be send + offset, this rank's own block of send (in place, as
// NCCL's recvbuff == sendbuff + rank * recvcount): the result then replaces
// that block, and the other blocks of send are left undefined.
void comm_reduce_scatter(Comm *c, const float *send, float *recv, size_t count, CommReduce op);
// All-gather: rank r contributes block r; every rank receives the whole.
// send: (block length of rank r), recv: (count). send may be recv + offset.
void comm_all_gather(Comm *c, const float *send, float *recv, size_t count);
// Broadcast buf from root to every rank. buf: (count)
void comm_broadcast(Comm *c, float *buf, size_t count, int root);
// Point to point; messages between two ranks arrive in the order sent.
void comm_send(Comm *c, const float *buf, size_t count, int peer);
void comm_recv(Comm *c, float *buf, size_t count, int peer);
// Send to dst and receive from src at once (no deadlock when both sides call it).
void comm_sendrecv(Comm *c, const float *send, size_t send_count, int dst, float *recv,
                   size_t recv_count, int src);
void comm_barrier(Comm *c);

// Named forms for reading labs aloud.
static inline void comm_all_reduce_sum(Comm *c, float *buf, size_t n) { comm_all_reduce(c, buf, n, COMM_SUM); }
static inline void comm_all_reduce_avg(Comm *c, float *buf, size_t n) { comm_all_reduce(c, buf, n, COMM_AVG); }
static inline void comm_reduce_scatter_sum(Comm *c, const float *s, float *r, size_t n) { comm_reduce_scatter(c, s, r, n, COMM_SUM); }
static inline void comm_reduce_scatter_avg(Comm *c, const float *s, float *r, size_t n) { comm_reduce_scatter(c, s, r, n, COMM_AVG); }

// ---- typed forms -----------------------------------------------------------
// The same operations on `count` elements of type t (buffers of uint16_t for
// COMM_BF16); bytes are counted at the element's size (count *
// comm_type_size(t)) in the counters, the bus bytes and the ledger. The
// float forms above are these with COMM_F32. Blocks, offsets and "send +
// offset" (in place) are in elements: comm_at gives the address.
//
// bf16 reductions, on either backend:
// - COMM_SUM adds pairwise in fp32 and rounds to bf16 after each addition
//   (what NCCL's bf16 reductions do). The result depends on the order and
//   the number of additions, which the backend chooses: over N ranks it can
//   lose the low bits of each addend (a term under 2^-9 of the running sum
//   is lost outright). A lab that needs an exact sum widens to fp32 and
//   reduces in fp32 (twice the bytes).
// - COMM_AVG is that sum times 1/N, rounded to bf16 once more, through MPI
//   (and so for an uneven reduce-scatter in an NCCL run); through NCCL it is
//   ncclAvg, which may scale each input by 1/N before it adds, so the two
//   backends may differ in the last bits (a rounding or a few).
// - COMM_MAX is exact (a comparison, no rounding).
// MPI has no bf16 type: it moves bf16 as 2-byte integers (MPI_UINT16_T) and
// reduces them with MPI operations of this library's own (comm_mpi.c);
// NCCL uses its ncclBfloat16. Moves (gather, broadcast, send and receive)
// are copies of the bits on both.
void comm_all_reduce_typed(Comm *c, void *buf, size_t count, CommType t, CommReduce op);
void comm_reduce_scatter_typed(Comm *c, const void *send, void *recv, size_t count, CommType t,
                               CommReduce op);
void comm_all_gather_typed(Comm *c, const void *send, void *recv, size_t count, CommType t);
void comm_broadcast_typed(Comm *c, void *buf, size_t count, CommType t, int root);
void comm_send_typed(Comm *c, const void *buf, size_t count, CommType t, int peer);
void comm_recv_typed(Comm *c, void *buf, size_t count, CommType t, int peer);
void comm_sendrecv_typed(Comm *c, const void *send, size_t send_count, int dst, void *recv,
                         size_t recv_count, int src, CommType t);

// Element i of a buffer of type t: what buf + i is for a float *.
static inline void *comm_at(void *buf, size_t i, CommType t) { return (char *)buf + i * comm_type_size(t); }
static inline const void *comm_at_const(const void *buf, size_t i, CommType t) {
    return (const char *)buf + i * comm_type_size(t);
}

// Asynchronous forms: start the operation and return at once. The buffers
// must not be touched until comm_wait(handle) returns; comm_wait frees the
// handle. comm_test says whether it has finished (and lets it progress).
CommHandle *comm_all_reduce_async(Comm *c, float *buf, size_t count, CommReduce op);
CommHandle *comm_reduce_scatter_async(Comm *c, const float *send, float *recv, size_t count,
                                      CommReduce op);
CommHandle *comm_all_gather_async(Comm *c, const float *send, float *recv, size_t count);
CommHandle *comm_broadcast_async(Comm *c, float *buf, size_t count, int root);
CommHandle *comm_send_async(Comm *c, const float *buf, size_t count, int peer);
CommHandle *comm_recv_async(Comm *c, float *buf, size_t count, int peer);
CommHandle *comm_barrier_async(Comm *c);
// The typed forms of the above (see the typed forms of the blocking calls).
CommHandle *comm_all_reduce_async_typed(Comm *c, void *buf, size_t count, CommType t, CommReduce op);
CommHandle *comm_reduce_scatter_async_typed(Comm *c, const void *send, void *recv, size_t count,
                                            CommType t, CommReduce op);
CommHandle *comm_all_gather_async_typed(Comm *c, const void *send, void *recv, size_t count, CommType t);
CommHandle *comm_broadcast_async_typed(Comm *c, void *buf, size_t count, CommType t, int root);
CommHandle *comm_send_async_typed(Comm *c, const void *buf, size_t count, CommType t, int peer);
CommHandle *comm_recv_async_typed(Comm *c, void *buf, size_t count, CommType t, int peer);
void comm_wait(CommHandle *h);
bool comm_test(CommHandle *h);
// Asynchronous operations started and not yet waited on (finished or not).
int comm_inflight(void);
// Let every asynchronous operation in flight advance. MPI moves the data of
// a non-blocking collective only inside its own calls, so a program that
// computes while one is in flight calls this between pieces of compute.
void comm_progress(void);

// Counters of this rank, over all communicators, since start or the last reset.
typedef struct {
    uint64_t calls[COMM_NOPS];
    uint64_t bytes[COMM_NOPS];      // payload: the size of the buffer the operation is about, in
                                    // bytes (count times the element's size)
    uint64_t bus_bytes[COMM_NOPS];  // payload times the bus factor: 2(N-1)/N all-reduce,
                                    // (N-1)/N reduce-scatter and all-gather, 1 broadcast, send, recv
    double seconds_busy;     // time during which at least one operation was under way (a blocking
                             // call; an async one from its start until a test, progress or wait sees
                             // it finished); overlapping operations count once, so never above wall time
    double seconds_blocked;  // time this rank waited in them (blocking calls and comm_wait): the
                             // communication not hidden behind compute
    // Communication the counters above cannot see: the bookkeeping helpers
    // below (each call counts itself), and MPI called directly, outside this
    // library (seen through MPI's profiling interface, mpi_watch.c).
    uint64_t helper_calls;
    uint64_t helper_bytes;      // their payload: an all-gather's whole, the part a rank gives to a
                                // gather, a broadcast's buffer, a reduction's 8 bytes
    // The same, made inside the training steps (between harness_step_begin
    // and harness_step_end, the lab's step: its student code and what the
    // given code does there), where a step's data moves through the
    // counted collectives alone.
    uint64_t step_helper_calls;
    uint64_t step_helper_bytes;
    char last_helper[32];       // "comm_broadcast_host"
    uint64_t direct_mpi_calls;
    char first_direct_mpi[32];  // "MPI_Allreduce"
} CommStats;
CommStats comm_stats(void);
void comm_stats_reset(void);
// After this, comm_stats_reset ends the run (harness_seal_measures), and so
// does comm_shared_alloc (lab01's benchmark's, not a training step's).
void comm_stats_seal(void);
// The harness's bracket around a training step (harness_step_begin opens it,
// harness_step_end closes it before its own bookkeeping): the helpers called
// while it is open count as the step's (step_helper_calls, step_helper_bytes).
void comm_step_window(bool open);
uint64_t comm_stats_total_bus_bytes(const CommStats *s);
const char *comm_op_name(CommOp op);   // "all_reduce", ...

// The ledger: this rank's calls since start or the last reset, one line per
// distinct operation, size of one call and group. A step's formula says
// which collectives it needs, of what size, on which group and how often;
// the ledger is what the rank did, call by call (the totals above cannot
// tell 119 small all-reduces from one large one).
typedef struct {
    int32_t op;          // CommOp
    int32_t group_size;  // ranks of the group (a send or a receive: the two sides, 2)
    uint64_t group;      // its world ranks, bit r for world rank r (0 where the world has over 63)
    uint64_t bytes;      // the payload of each call
    uint64_t calls;
} CommLedgerLine;
enum { COMM_LEDGER_LINES = 64 };
// Copies the lines into out[COMM_LEDGER_LINES] (op -1 past the last) and
// returns how many calls found the ledger full (counted above, not in it).
uint64_t comm_ledger(CommLedgerLine *out);

// The order of events, for a replay of what waited for what (lab05's
// harness logs each step's schedule): each operation's start (a blocking
// call's entry, an asynchronous one's start) and its end (a blocking call's
// return, the wait or the first test that finds it done), and the caller's
// own marks between them. Sends and receives between two ranks pair up in
// order (the k-th send from a to b is the k-th receive at b from a), and
// collectives on a group in order, so a replay can say what each end waited
// for. The harness's alone: a lab's own code does not call these.
typedef enum { COMM_EVENT_POST, COMM_EVENT_DONE, COMM_EVENT_MARK } CommEventKind;
typedef struct {
    int32_t kind;    // CommEventKind
    int32_t op;      // CommOp; a mark: the caller's number (lab05: 0 a forward pass begins, 1 a backward)
    int32_t peer;    // a send or a receive: the world rank of the other side; a mark: the caller's; else -1
    int32_t seq;     // its place among the sends from this rank to peer, the receives from peer, or the
                     // collectives on its group, from 0 at comm_events_start
    uint64_t group;  // the group's world ranks, bit r for world rank r
} CommEvent;
// Log into buf (cap events) from now on, the places counted from 0.
void comm_events_start(CommEvent *buf, int cap);
// Stop; the events there were (those past cap are lost: the count says so).
int comm_events_stop(void);
void comm_events_mark(int what, int arg);

// The watchdog: change the timeout (seconds; 0 turns it off) for what
// follows, and name what the program is doing, for its lines ("checking
// ring_all_reduce, count 4099"; NULL clears it).
void comm_set_timeout(double timeout_s);
void comm_watchdog_context(const char *what);

// Bookkeeping between ranks (results, timings): host memory, raw bytes, not
// counted in the statistics above and not traced.
// Every rank gives `bytes` bytes; every rank receives them all, rank by rank.
void comm_all_gather_host(Comm *c, const void *send, size_t bytes, void *recv);
// Every rank gives a different number of bytes; root receives them all in a
// malloc'd buffer (NULL elsewhere) and each rank's length in lens (size N, on root).
void *comm_gather_host(Comm *c, const void *send, size_t bytes, int root, size_t *lens);
// Root's `bytes` bytes to every rank.
void comm_broadcast_host(Comm *c, void *buf, size_t bytes, int root);
double comm_max_double(Comm *c, double v);   // the largest v over ranks, on every rank

// Host memory the ranks of c share, when they all run on one node: each
// rank's `bytes` bytes, which every rank of c can read and write
// (comm_shared_peer(s, q) is rank q's part). For benchmarks that measure what
// the node's memory allows without any message (lab01's ideal ring); NULL,
// on every rank, when c's ranks span nodes. Collective over c, as is the free.
typedef struct CommShared CommShared;
CommShared *comm_shared_alloc(Comm *c, size_t bytes);
void *comm_shared_peer(CommShared *s, int q);
void comm_shared_free(CommShared *s);
double comm_sum_double(Comm *c, double v);
