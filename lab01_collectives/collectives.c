// collectives.c: YOUR FILE. Build the four collectives from point-to-point
// messages. See collectives.h for what each function must do, README.md for
// the ideas, and run
//     make lab01 && mpirun -np 4 build/lab01
// to see which of them give exactly what the library's own collectives give.
//
// Tools you may use:
//   comm_rank(c), comm_size(c)                      who am I, how many are we
//   comm_block(count, N, b, &off, &len)             where block b of count lies
//   comm_send(c, buf, n, peer), comm_recv(c, buf, n, peer)
//   comm_sendrecv(c, send, ns, dst, recv, nr, src)  both at once: no deadlock
//   ops_add(out, a, b, n), ops_accumulate(y, x, n)  out = a + b, y += x
//   mem_alloc_floats(n, MEM_COMM, "name"), mem_free(p), mem_copy(dst, src, bytes)
// Delete the lab_todo(...) line of a function once you have written it.
#include "collectives.h"

#include "comm.h"
#include "mem.h"
#include "ops.h"

void ring_reduce_scatter(Comm *c, const float *send, float *recv, size_t count) {
    lab_todo(__func__);
    // TODO(lab01): reduce-scatter around the ring. Rank r must end with block
    // r of the sum of every rank's `send` in `recv`.
    // - Each rank talks only to its neighbours: next = (r + 1) % N and
    //   prev = (r + N - 1) % N.
    // - N - 1 steps. At step s, send the partial sum of block (r - s - 1)
    //   to next and receive the partial sum of block (r - s - 2) from prev
    //   (one comm_sendrecv), then add your own part of that block to it: that
    //   is what you send at step s + 1.
    // - At the last step the block you receive is block r: add your own part
    //   and store it in recv. (Draw it for N = 3 before you write it.)
    // - Blocks may differ in length by one (comm_block), or be empty.
    // - With N = 1 there is no one to talk to: block 0 is all of `send`.
    (void)c;
    (void)send;
    (void)recv;
    (void)count;
}

void ring_all_gather(Comm *c, const float *send, float *recv, size_t count) {
    lab_todo(__func__);
    // TODO(lab01): all-gather around the ring. Put your block (send) at its
    // place in recv (it may be there already: send == recv + offset), then in
    // N - 1 steps pass blocks on: at step s send block (r - s) to next and
    // receive block (r - s - 1) from prev, straight into its place in recv.
    (void)c;
    (void)send;
    (void)recv;
    (void)count;
}

void ring_all_reduce(Comm *c, float *buf, size_t count) {
    lab_todo(__func__);
    // TODO(lab01): all-reduce in place = reduce-scatter, then all-gather.
    // After a reduce-scatter into this rank's block of buf, an all-gather of
    // buf in place hands every reduced block to every rank. Can your
    // reduce-scatter work in place (recv = buf + offset of block r)? Which
    // block does it read last?
    (void)c;
    (void)buf;
    (void)count;
}

void tree_broadcast(Comm *c, float *buf, size_t count, int root) {
    lab_todo(__func__);
    // TODO(lab01): broadcast from any root along a binomial tree.
    // Work with ranks relative to the root: vr = (r - root + N) % N. In round
    // k (mask = 1, 2, 4, ...) every rank with vr < mask has the data and
    // sends it to vr + mask (if that rank exists); the ranks with
    // mask <= vr < 2 mask receive from vr - mask. Convert back: real rank =
    // (vr + root) % N.
    (void)c;
    (void)buf;
    (void)count;
    (void)root;
}

void chain_broadcast(Comm *c, float *buf, size_t count, int root) {
    // OPTIONAL(lab01): a pipelined chain root -> root+1 -> ... in segments of
    // (say) 64k floats: receive segment k from the previous rank, pass it to
    // the next. For large messages it beats the tree (README: why?). Until
    // you write it, the tree serves.
    tree_broadcast(c, buf, count, root);
}
