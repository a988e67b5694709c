// collectives.c (reference solution): the four collectives from send and
// receive. See collectives.h for what each must do and README.md for why.
#include "collectives.h"

#include "comm.h"
#include "mem.h"
#include "ops.h"

// Messages travel in segments of this many floats (256 KB): small enough
// that a received segment is still in cache when it is added, large enough
// that the per-message latency is paid rarely.
enum { SEG = 1 << 16 };

static int next_rank(Comm *c) { return (comm_rank(c) + 1) % comm_size(c); }
static int prev_rank(Comm *c) { return (comm_rank(c) + comm_size(c) - 1) % comm_size(c); }

// Block b of count over N ranks, as comm_block splits it.
static void block(Comm *c, size_t count, int b, size_t *off, size_t *len) {
    int N = comm_size(c);
    comm_block(count, N, ((b % N) + N) % N, off, len);
}

// The ring reduce-scatter, on `own` (this rank's contribution, read only)
// into `result` (this rank's block of the sum). Over N - 1 steps, each block
// travels once around the ring and collects every rank's part on the way:
// at step s rank r sends the partial sum of block r - s - 1 to rank r + 1 and
// receives the partial sum of block r - s - 2 from rank r - 1, adds its own
// part, and sends that on at step s + 1. After step N - 2 it has received
// block r with everyone's part but its own, and adds that last.
// Segment by segment, so that each message's data is still in cache when it
// is added. `own` and `result` may be the same buffer's block r region
// (all-reduce in place), since block r is read only in the last step.
static void reduce_scatter_ring(Comm *c, const float *own, float *result, size_t count) {
    int N = comm_size(c), r = comm_rank(c);
    size_t my_off, my_len;
    block(c, count, r, &my_off, &my_len);
    if (N == 1) {
        mem_copy(result, own + my_off, my_len * sizeof(float));
        return;
    }
    size_t max_len = (count + (size_t)N - 1) / (size_t)N;   // the largest block
    size_t seg_len = max_len < SEG ? max_len : SEG;
    // A partial sum is forwarded only when it has further to go than the
    // next rank: never with two ranks.
    float *outgoing = N > 2 ? mem_alloc_floats(seg_len, MEM_COMM, "ring outgoing") : NULL;   // (seg_len)
    float *incoming = mem_alloc_floats(seg_len, MEM_COMM, "ring incoming");   // (seg_len)
    // Segment k of every block, all the way around the ring, then segment k + 1.
    for (size_t k = 0; k * seg_len < max_len; k++) {
        size_t lo = k * seg_len;
        for (int s = 0; s < N - 1; s++) {
            size_t so, sl, ro, rl;
            block(c, count, r - s - 1, &so, &sl);
            block(c, count, r - s - 2, &ro, &rl);
            // The part of segment k inside each block (blocks differ by one element).
            size_t send_n = sl > lo ? (sl - lo < seg_len ? sl - lo : seg_len) : 0;
            size_t recv_n = rl > lo ? (rl - lo < seg_len ? rl - lo : seg_len) : 0;
            // At step 0 the block to send is this rank's own part, unreduced.
            const float *send = s == 0 ? own + so + lo : outgoing;
            comm_sendrecv(c, send, send_n, next_rank(c), incoming, recv_n, prev_rank(c));
            if (s < N - 2)
                ops_add(outgoing, incoming, own + ro + lo, recv_n);         // forward it next step
            else
                ops_add(result + lo, incoming, own + ro + lo, recv_n);      // block r, complete
        }
    }
    if (outgoing) mem_free(outgoing);
    mem_free(incoming);
}

void ring_reduce_scatter(Comm *c, const float *send, float *recv, size_t count) {
    reduce_scatter_ring(c, send, recv, count);
}

// The ring all-gather, in place in `buf` whose block r is this rank's: at
// step s rank r sends block r - s to rank r + 1 and receives block r - s - 1
// from rank r - 1, which it sends on at step s + 1.
static void all_gather_ring(Comm *c, float *buf, size_t count) {
    int N = comm_size(c), r = comm_rank(c);
    for (int s = 0; s < N - 1; s++) {
        size_t so, sl, ro, rl;
        block(c, count, r - s, &so, &sl);
        block(c, count, r - s - 1, &ro, &rl);
        comm_sendrecv(c, buf + so, sl, next_rank(c), buf + ro, rl, prev_rank(c));
    }
}

void ring_all_gather(Comm *c, const float *send, float *recv, size_t count) {
    size_t off, len;
    block(c, count, comm_rank(c), &off, &len);
    if (send != recv + off) mem_copy(recv + off, send, len * sizeof(float));
    all_gather_ring(c, recv, count);
}

void ring_all_reduce(Comm *c, float *buf, size_t count) {
    // Reduce-scatter: block r of the sum lands in buf's block r, in place;
    // then the all-gather hands every block to every rank.
    size_t off, len;
    block(c, count, comm_rank(c), &off, &len);
    reduce_scatter_ring(c, buf, buf + off, count);
    all_gather_ring(c, buf, count);
}

// Binomial tree: in round k (mask = 2^k) every rank that already has the data
// (relative rank below mask) sends it to the rank mask further on. After
// ceil(log2 N) rounds everyone has it; the root sends log2 N times.
void tree_broadcast(Comm *c, float *buf, size_t count, int root) {
    int N = comm_size(c), r = comm_rank(c);
    int vr = (r - root + N) % N;   // rank relative to the root
    for (int mask = 1; mask < N; mask <<= 1) {
        if (vr < mask) {
            if (vr + mask < N) comm_send(c, buf, count, (vr + mask + root) % N);
        } else if (vr < 2 * mask) {
            comm_recv(c, buf, count, (vr - mask + root) % N);
        }
    }
}

// Pipelined chain: root -> root+1 -> ... -> root-1, in segments. Each rank
// receives segment k from its predecessor and passes it on while the
// predecessor already sends segment k + 1, so for large messages the time is
// about one message's transfer plus N - 2 segments, not log2 N transfers.
void chain_broadcast(Comm *c, float *buf, size_t count, int root) {
    int N = comm_size(c), r = comm_rank(c);
    int vr = (r - root + N) % N;
    for (size_t lo = 0; lo < count; lo += SEG) {
        size_t n = count - lo < SEG ? count - lo : SEG;
        if (vr > 0) comm_recv(c, buf + lo, n, prev_rank(c));
        if (vr < N - 1) comm_send(c, buf + lo, n, next_rank(c));
    }
}
