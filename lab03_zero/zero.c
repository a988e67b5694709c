// zero.c: YOUR FILE. ZeRO stages 1, 2 and 3. See zero.h for the hooks,
// README.md for the ideas, and run
//     make lab03 && mpirun -np 4 build/lab03 --stage 1
// to see each rank's memory beside what the ZeRO paper's formulas predict,
// and whether training still matches single-device training.
//
// As given, every function does stage 0 (plain data parallelism: every rank
// keeps everything), whatever the stage, so the program runs from the start;
// each TODO makes one stage shard something. Delete a function's lab_todo(...)
// line once it handles every stage.
//
// Parameters and gradients are elements of z->type: floats, or bf16 with
// --precision bf16 (z->elem bytes each), so their buffers are void *: n of
// them take mem_alloc(n * z->elem, ...), and element i of buf is
// comm_at(buf, i, z->type). The optimizer's state is floats either way.
//
// Tools: mem_alloc(n * z->elem, MEM_PARAMS | MEM_GRADS, "name"),
// mem_alloc_floats(n, MEM_OPTIM, "name"), mem_free;
// comm_reduce_scatter_typed(c, whole, shard, N * shard_len, z->type, COMM_AVG)
// and comm_all_gather_typed(c, shard, whole, N * shard_len, z->type) (both in
// place when shard is this rank's own shard of whole), their _async_typed
// forms + comm_wait; optim_step(&z->optim, t, z->type == COMM_BF16, params,
// grads, master, m, v, n) updates any n consecutive parameters (master: NULL
// in fp32).
#include "zero.h"

#include "comm.h"
#include "core.h"
#include "mem.h"

size_t shard_len(size_t size, int N) {
    lab_todo(__func__);
    // TODO(lab03): every shard has the same length, enough for N of them to
    // cover `size` (the last shard padded): the smallest L with N L >= size.
    (void)N;
    return size;
}

size_t shard_offset(size_t size, int N, int r) {
    lab_todo(__func__);
    // TODO(lab03): where rank r's shard starts in the (padded) unit.
    (void)size;
    (void)N;
    (void)r;
    return 0;
}

void zero_setup(Zero *z) {
    if (z->stage > 0) lab_todo(__func__);
    // TODO(lab03): allocate only what the stage keeps (zero.h lists it):
    //   stage 1: the optimizer's state for this rank's shard only (shard_len
    //            floats each: m, v and, in bf16, master);
    //            grads stays whole (padded to N shard_len, so that a
    //            reduce-scatter splits it evenly), and grad_shard is no buffer
    //            of its own: it points at this rank's shard of grads
    //            (comm_at(grads[u], shard_offset, z->type)), where the
    //            reduce-scatter lands in place (the harness frees it with grads);
    //   stage 2: no whole grads at all, only grad_shard (shard_len elements);
    //   stage 3: no whole params either, only param_shard.
    //   Stages 1-2 keep params whole but padded (the all-gather fills N shards).
    for (int u = 0; u < z->nunits; u++) {
        size_t size = z->model->units[u].size;
        z->params[u] = mem_alloc(size * z->elem, MEM_PARAMS, "params");
        z->grads[u] = mem_alloc(size * z->elem, MEM_GRADS, "grads");
        if (z->type == COMM_BF16) z->master[u] = mem_alloc_floats(size, MEM_OPTIM, "master params");
        z->m[u] = mem_alloc_floats(size, MEM_OPTIM, "adam m");
        z->v[u] = mem_alloc_floats(size, MEM_OPTIM, "adam v");
    }
}

void *zero_before_forward(Zero *z, int u) {
    if (z->stage == 3) lab_todo(__func__);
    // TODO(lab03) stage 3: all-gather the unit's parameters from the shards
    // into a buffer of N shard_len elements (z->gathered[u], counted as
    // PARAMS) and return it. With z->prefetch, also start the gather of unit
    // u + 1 asynchronously (comm_all_gather_async_typed; keep the handle in
    // z->gather_handle[u + 1]) so it travels while unit u computes.
    return z->params[u];
}

void zero_after_forward(Zero *z, int u) {
    if (z->stage == 3) lab_todo(__func__);
    // TODO(lab03) stage 3: free the gathered unit: it is needed again only
    // in the backward pass, and gathered again then.
    (void)z;
    (void)u;
}

void *zero_before_backward(Zero *z, int u, void **grad) {
    if (z->stage >= 2) lab_todo(__func__);
    // TODO(lab03) stages 2-3: the unit's whole gradient should exist only
    // while its backward pass runs: allocate it here (z->unit_grad[u], N
    // shard_len elements, GRADS) and hand it out through *grad.
    // Stage 3: gather the unit's parameters again (and, with z->prefetch,
    // start gathering unit u - 1: the backward pass goes down the units).
    *grad = z->grads[u];
    return z->params[u];
}

void zero_after_backward(Zero *z, int u) {
    if (z->stage >= 2) lab_todo(__func__);
    // TODO(lab03) stages 2-3: average the unit's gradient over the ranks and
    // keep only your shard of it (one comm_reduce_scatter_typed with COMM_AVG
    // into z->grad_shard[u]), then free the whole gradient at once; stage 3:
    // free the gathered parameters too.
    (void)z;
    (void)u;
}

void zero_step(Zero *z, int t) {
    if (z->stage > 0) lab_todo(__func__);
    // TODO(lab03):
    //   stage 1: reduce-scatter each unit's whole gradient in place, into
    //            grad_shard (its own shard of grads);
    //   stages 1-2: update only this rank's shard of the parameters
    //            (comm_at(params[u], shard_offset, z->type), with grad_shard,
    //            master, m, v; count only the real parameters, not the
    //            padding), then all-gather params[u] in place so every rank
    //            has the whole unit again;
    //   stage 3: update param_shard with grad_shard: nothing to gather.
    for (int u = 0; u < z->nunits; u++) {
        size_t size = z->model->units[u].size;
        comm_all_reduce_typed(z->comm, z->grads[u], size, z->type, COMM_AVG);
        optim_step(&z->optim, t, z->type == COMM_BF16, z->params[u], z->grads[u], z->master[u], z->m[u], z->v[u], size);
    }
}
