// An adversarial lab02 submission: code the loader runs before main (the resolver of an IFUNC
// symbol), where the sandbox of a graded run is not closed yet.
// ddp.c (reference solution): data parallelism from naive to bucketed and
// overlapped. See ddp.h for the hooks and README.md for the ideas.
#include "ddp.h"

#include "comm.h"
#include "core.h"

// 1. Rank 0's parameters to everyone, one unit at a time.
void ddp_sync_params(Ddp *d) {
    for (int u = 0; u < d->nunits; u++)
        comm_broadcast_typed(d->comm, d->params[u], d->model->units[u].size, d->param_type, 0);
}

// 2. Naive: one all-reduce per tensor, after the whole backward pass. The
// average over ranks of the gradient of each rank's mean loss is the
// gradient of the mean loss over the global batch.
static void reduce_naive(Ddp *d) {
    for (int u = 0; u < d->nunits; u++) {
        const GptUnit *unit = &d->model->units[u];
        for (int k = 0; k < unit->ntensors; k++)
            comm_all_reduce_typed(d->comm, comm_at(d->grads[u], unit->tensors[k].offset, d->grad_type),
                                  unit->tensors[k].count, d->grad_type, COMM_AVG);
    }
}

// 3. Flat: the gradients already lie in one buffer, so one all-reduce does
// them all: one latency instead of one per tensor.
static void reduce_flat(Ddp *d) { comm_all_reduce_typed(d->comm, d->grad_flat, d->nparams, d->grad_type, COMM_AVG); }

// 4. Bucketed: grad_flat[lo, bucket_end) is final; send it now, without waiting.
static void send_bucket(Ddp *d, size_t lo) {
    CHECK(d->nhandles < DDP_MAX_HANDLES, "more than %d buckets in flight; raise --bucket-kb",
          DDP_MAX_HANDLES);
    d->handles[d->nhandles++] = comm_all_reduce_async_typed(d->comm, comm_at(d->grad_flat, lo, d->grad_type),
                                                            d->bucket_end - lo, d->grad_type, COMM_AVG);
    d->bucket_end = lo;
}

void ddp_unit_done(Ddp *d, int u, bool last) {
    // 5. With accumulation, the earlier micro-batches only add up locally.
    if (d->strategy != DDP_BUCKETED || !last) return;
    // Unit u is final, so everything from its start to the end of the
    // bucket is: send once the bucket is big enough, and always at unit 0.
    size_t lo = d->unit_offset[u];
    if (d->bucket_end - lo >= d->bucket_elems || u == 0) send_bucket(d, lo);
}

void ddp_backward_done(Ddp *d, bool last) {
    if (!last) return;   // 5. no communication until the last micro-batch
    switch (d->strategy) {
    case DDP_NAIVE: reduce_naive(d); break;
    case DDP_FLAT: reduce_flat(d); break;
    case DDP_BUCKETED:
        // Every bucket must have arrived before the optimizer reads grad_flat.
        for (int i = 0; i < d->nhandles; i++) comm_wait(d->handles[i]);
        d->nhandles = 0;
        d->bucket_end = d->nparams;
        break;
    }
}

// The resolver runs while the program is loaded, before main: what it does
// (here, only a count) is outside the harness's reach.
static int g_before_main;
static void unit_count_impl(void) { g_before_main++; }
static void (*resolve_unit_count(void))(void) {
    g_before_main = 1;
    return unit_count_impl;
}
void ddp_adversary_count(void) __attribute__((ifunc("resolve_unit_count")));
