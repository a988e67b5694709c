// pipeline.c: pipeline parallelism, the solution. See pipeline.h for the
// hooks and README.md for the pictures.
#include "pipeline.h"

#include "comm.h"
#include "core.h"

// ---- 1. the partition -------------------------------------------------------------

void pp_partition(int nunits, int p, int s, int *u0, int *u1) {
    int L = nunits - 2;
    if (p <= L) {
        // The blocks shared as evenly as they go, [s L / p, (s + 1) L / p);
        // the embeddings ride with the first stage and the head with the last.
        *u0 = s == 0 ? 0 : 1 + s * L / p;
        *u1 = s == p - 1 ? nunits : 1 + (s + 1) * L / p;
    } else {
        // More stages than blocks: every unit counts alike.
        *u0 = s * nunits / p;
        *u1 = (s + 1) * nunits / p;
    }
}

// ---- 2. moving a micro-batch ------------------------------------------------------

// Sends return at once: the stage goes on computing while the message
// travels, and a receive on the other side can come in any order with
// this stage's own receives (two blocking sends towards each other would
// wait forever). Both ends move elements of the run's precision, pp->type
// (bf16: half the bytes of fp32).
void pp_send_activations(Pp *pp, int mb) {
    pp->send_act[mb] = comm_send_async_typed(pp->group, pp_act_out(pp, mb), pp_message_count(pp), pp->type, pp->s + 1);
}

void pp_recv_activations(Pp *pp, int mb) {
    comm_recv_typed(pp->group, pp_act_in(pp, mb), pp_message_count(pp), pp->type, pp->s - 1);
}

void pp_send_gradients(Pp *pp, int mb) {
    pp->send_grad[mb] = comm_send_async_typed(pp->group, pp_grad_out(pp, mb), pp_message_count(pp), pp->type, pp->s - 1);
}

void pp_recv_gradients(Pp *pp, int mb) {
    comm_recv_typed(pp->group, pp_grad_in(pp, mb), pp_message_count(pp), pp->type, pp->s + 1);
}

// ---- one micro-batch through this stage ---------------------------------------------

static void forward(Pp *pp, int mb, float loss_scale) {
    pp_begin_micro(pp, mb, loss_scale);
    if (pp->s > 0) pp_recv_activations(pp, mb);
    pp_forward_compute(pp, mb);
    if (pp->s < pp->p - 1) pp_send_activations(pp, mb);
}

static void backward(Pp *pp, int mb) {
    if (pp->s < pp->p - 1) pp_recv_gradients(pp, mb);
    // 6. Full recomputation: mb's activations made again from its kept
    // input, into the shared set, just before they are needed (nothing to
    // do where the set still holds them: pp_recompute knows).
    if (pp->recompute) pp_recompute(pp, mb);
    pp_backward_compute(pp, mb);
    if (pp->s > 0) pp_send_gradients(pp, mb);
    // 5. Its buffers go as soon as the sends from them are done.
    CommHandle **h[] = {&pp->send_act[mb], &pp->send_grad[mb]};
    for (int i = 0; i < 2; i++)
        if (*h[i]) comm_wait(*h[i]), *h[i] = NULL;
    pp_end_micro(pp, mb);
}

// Each micro-batch's loss is its share of the step's mean: scaled by the
// step's tokens, not the micro-batch's, so the m gradients add up to the
// full batch's.
static float loss_scale(const Pp *pp) { return 1.0f / ((float)pp->rows * (float)pp->T); }

// ---- 3. GPipe ---------------------------------------------------------------------

void pp_gpipe(Pp *pp) {
    pp_zero_grads(pp);
    for (int mb = 0; mb < pp->m; mb++) forward(pp, mb, loss_scale(pp));
    for (int mb = 0; mb < pp->m; mb++) backward(pp, mb);
}

// ---- 4. 1F1B ----------------------------------------------------------------------

void pp_1f1b(Pp *pp) {
    pp_zero_grads(pp);
    int warmup = pp->p - pp->s - 1 < pp->m ? pp->p - pp->s - 1 : pp->m;
    int f = 0, b = 0;
    while (f < warmup) forward(pp, f++, loss_scale(pp));
    while (f < pp->m) {   // the steady state: one forward, one backward
        forward(pp, f++, loss_scale(pp));
        backward(pp, b++);
    }
    while (b < pp->m) backward(pp, b++);   // the cool-down
}

// ---- the backward pass in two: B, then W ------------------------------------------

// B: the input gradient, sent back at once (the previous stage waits for
// it). The micro-batch stays alive: its W needs its activations and what B
// kept.
static void backward_input(Pp *pp, int mb) {
    if (pp->s < pp->p - 1) pp_recv_gradients(pp, mb);
    pp_backward_input(pp, mb);
    if (pp->s > 0) pp_send_gradients(pp, mb);
}

// W: the parameter gradients, which nobody waits for; then the micro-batch
// goes (5), its sends done.
static void backward_weight(Pp *pp, int mb) {
    pp_backward_weight(pp, mb);
    CommHandle **h[] = {&pp->send_act[mb], &pp->send_grad[mb]};
    for (int i = 0; i < 2; i++)
        if (*h[i]) comm_wait(*h[i]), *h[i] = NULL;
    pp_end_micro(pp, mb);
}

// ---- 7. ZB-H1 and 8. ZB-H2 (Qi et al. 2024, figure 3) ------------------------------

// 1F1B's order on the split backward, each stage's W's held s passes
// behind its B's: they fill the gaps where 1F1B's stages wait for a
// gradient. (main refuses m < p.)
void pp_zb_h1(Pp *pp) {
    pp_zero_grads(pp);
    int warmup = pp->p - pp->s - 1;
    int f = 0, w = 0;
    while (f < warmup) forward(pp, f++, loss_scale(pp));
    for (int i = 0; i < pp->m; i++) {
        if (f < pp->m) forward(pp, f++, loss_scale(pp));
        backward_input(pp, i);
        if (i >= pp->s) backward_weight(pp, w++);
    }
    while (w < pp->m) backward_weight(pp, w++);   // the cool-down: the W's left
}

// Twice the warm-up and the W's held 2s passes behind: the first B reaches
// every stage just as its forwards run out, and no stage waits between its
// first pass and its last. (main refuses m < 2p - 1.)
void pp_zb_h2(Pp *pp) {
    pp_zero_grads(pp);
    int warmup = 2 * (pp->p - pp->s - 1);
    int f = 0, w = 0;
    while (f < warmup) forward(pp, f++, loss_scale(pp));
    for (int i = 0; i < pp->m; i++) {
        if (f < pp->m) forward(pp, f++, loss_scale(pp));
        backward_input(pp, i);
        if (i >= 2 * pp->s) backward_weight(pp, w++);
    }
    while (w < pp->m) backward_weight(pp, w++);
}

// ---- 9. interleaved: the chunks round-robin ---------------------------------------

// Rank s holds virtual stages s, s + p, s + 2p, ...: a micro-batch goes
// round the ranks v times, each pass over a chunk 1/v of a stage's, so the
// pipeline fills and drains in (p - 1) chunk passes instead of p - 1 stage
// passes.
int pp_virtual_stage(int p, int v, int s, int c) {
    (void)v;
    return c * p + s;
}

// ---- 10. interleaved 1F1B ---------------------------------------------------------

// Megatron-LM's numbering (schedules.py, forward_backward_pipelining_with_
// interleaving): the k-th pass of a kind is of chunk (k mod p v) div p, the
// backward passes going through the chunks in reverse, and of micro-batch
// (k div p v) p + k mod p: p micro-batches through chunk 0, the same p
// through chunk 1, ..., then the next p. Chunk c's micro-batch mb is
// forward pass number forward_index.
static int chunk_of(const Pp *pp, int k, bool forward) {
    int c = k % (pp->p * pp->v) / pp->p;
    return forward ? c : pp->v - 1 - c;
}
static int micro_of(const Pp *pp, int k) { return k / (pp->p * pp->v) * pp->p + k % pp->p; }
static int forward_index(const Pp *pp, int c, int mb) { return mb / pp->p * pp->p * pp->v + c * pp->p + mb % pp->p; }

// A chunk's neighbours are round the ring: virtual stage c p + s takes its
// input from c p + s - 1 (stage s - 1; stage 0's chunk c from stage p - 1's
// chunk c - 1) and sends its output to c p + s + 1. The harness's buffers
// are NULL where there is no neighbour (the embeddings' input, the head's
// output).
typedef struct {
    Pp *pp;
    int prev, next, total;
    int f, b;              // forward and backward passes done
    int posted;            // backward passes whose gradient's receive is posted
    CommHandle *grad;      // that receive's, for backward pass b (NULL: none, the head's)
} Ring;

// The gradient of the next backward pass is received ahead of it, as soon
// as its chunk's forward pass has made the buffer: its sender waits for
// its send to be taken before it goes on, and round the ring of stages a
// receive posted only when its backward pass comes makes every stage wait
// for the next (a deadlock). Messages carry no tag and match in the order
// posted: one receive ahead, in the order of the backward passes, which is
// the order the next stage sends them (p >= 3: no activation shares the link).
static void post_gradient(Ring *r) {
    Pp *pp = r->pp;
    if (r->posted > r->b || r->b >= r->total) return;
    int c = chunk_of(pp, r->b, false), mb = micro_of(pp, r->b);
    if (forward_index(pp, c, mb) >= r->f) return;   // its buffers come with its forward pass
    void *in = pp_chunk_grad_in(pp, c, mb);
    r->grad = in ? comm_recv_async_typed(pp->group, in, pp_message_count(pp), pp->type, r->next) : NULL;
    r->posted = r->b + 1;
}

static void forward_chunk(Ring *r) {
    Pp *pp = r->pp;
    int c = chunk_of(pp, r->f, true), mb = micro_of(pp, r->f);
    size_t n = pp_message_count(pp);
    pp_begin_chunk(pp, c, mb, loss_scale(pp));
    void *in = pp_chunk_act_in(pp, c, mb);
    if (in) comm_recv_typed(pp->group, in, n, pp->type, r->prev);
    pp_forward_chunk(pp, c, mb);
    void *out = pp_chunk_act_out(pp, c, mb);
    if (out) pp->chunk_send_act[c][mb] = comm_send_async_typed(pp->group, out, n, pp->type, r->next);
    r->f++;
    post_gradient(r);
}

static void backward_chunk(Ring *r) {
    Pp *pp = r->pp;
    int c = chunk_of(pp, r->b, false), mb = micro_of(pp, r->b);
    if (r->grad) comm_wait(r->grad), r->grad = NULL;   // its gradient, received ahead
    pp_backward_chunk(pp, c, mb);
    void *out = pp_chunk_grad_out(pp, c, mb);
    if (out) pp->chunk_send_grad[c][mb] = comm_send_async_typed(pp->group, out, pp_message_count(pp), pp->type, r->prev);
    r->b++;
    post_gradient(r);
    CommHandle **h[] = {&pp->chunk_send_act[c][mb], &pp->chunk_send_grad[c][mb]};
    for (int i = 0; i < 2; i++)
        if (*h[i]) comm_wait(*h[i]), *h[i] = NULL;
    pp_end_chunk(pp, c, mb);
}

void pp_interleaved(Pp *pp) {
    pp_zero_grads(pp);
    int p = pp->p;
    Ring r = {pp, (pp->s + p - 1) % p, (pp->s + 1) % p, pp->m * pp->v, 0, 0, 0, NULL};
    // The warm-up: every stage runs the first chunks' (v - 1) p forwards
    // before the last chunk's first, and 2 more for each stage after it
    // (1F1B's p - s - 1, twice: a micro-batch crosses each later stage
    // twice, once each way, before this stage's backward pass).
    int warmup = (p - pp->s - 1) * 2 + (pp->v - 1) * p;
    if (warmup > r.total) warmup = r.total;
    while (r.f < warmup) forward_chunk(&r);
    while (r.f < r.total) {   // the steady state: one forward, one backward
        forward_chunk(&r);
        backward_chunk(&r);
    }
    while (r.b < r.total) backward_chunk(&r);   // the cool-down
}
