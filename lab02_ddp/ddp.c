// ddp.c: YOUR FILE. Data parallelism: keep N replicas of the model
// identical while each trains on its own rows of the global batch. See
// ddp.h for the hooks, README.md for the ideas, and run
//     make lab02 && mpirun -np 4 build/lab02 --strategy naive
// to see, step by step, whether your training matches single-device training.
//
// Tools: comm_broadcast_typed, comm_all_reduce_typed, comm_all_reduce_async_typed
// with comm_wait (comm.h): each takes the buffer's element type, which is
// d->param_type for the parameters and d->grad_type for the gradients
// (fp32, or bf16 under --precision bf16), and comm_at(buf, i, type) is the
// address of element i. d->model->units[u] tells a unit's size and its
// tensors' offsets and counts, in elements. Delete a function's
// lab_todo(...) line once you have written it.
#include "ddp.h"

#include "comm.h"
#include "core.h"

void ddp_sync_params(Ddp *d) {
    lab_todo(__func__);
    // TODO(lab02) 1: every rank initialised its parameters from its own seed.
    // Make them all equal to rank 0's: one comm_broadcast_typed per unit
    // (d->params[u], d->model->units[u].size elements of d->param_type, root 0).
    (void)d;
}

void ddp_unit_done(Ddp *d, int u, bool last) {
    lab_todo(__func__);
    // TODO(lab02) 4: bucketed and overlapped (only when d->strategy is
    // DDP_BUCKETED). The backward pass runs from the last unit to the first,
    // so when unit u is done, grad_flat[d->unit_offset[u], d->bucket_end) is
    // final. Once that range holds at least d->bucket_elems elements (or u
    // is 0), start an asynchronous average over it:
    //     d->handles[d->nhandles++] = comm_all_reduce_async_typed(d->comm, ..., d->grad_type, COMM_AVG);
    // and move d->bucket_end down to the range's start. The next units'
    // backward passes then run while it travels.
    // TODO(lab02) 5: with --accum K, communicate only when `last` is true.
    (void)d;
    (void)u;
    (void)last;
}

void ddp_backward_done(Ddp *d, bool last) {
    lab_todo(__func__);
    // Every rank's d->grad_flat must hold the AVERAGE of all ranks' gradients
    // before the optimizer step (each rank's gradient is that of the mean
    // loss over its own rows; averaging gives the mean over the global batch).
    // TODO(lab02) 2: DDP_NAIVE: one comm_all_reduce_typed(..., COMM_AVG) per
    //     tensor: element tensor.offset of d->grads[u] (comm_at), tensor.count
    //     elements, for each tensor of each unit.
    // TODO(lab02) 3: DDP_FLAT: the gradients lie in one buffer: one call over
    //     d->grad_flat, d->nparams elements. Time both strategies: why is this faster?
    // TODO(lab02) 4: DDP_BUCKETED: wait for every handle you started, then
    //     reset d->nhandles = 0 and d->bucket_end = d->nparams for the next step.
    // TODO(lab02) 5: with --accum K, return without communicating until `last`.
    (void)d;
    (void)last;
}
