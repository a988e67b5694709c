// zero.c (reference solution): ZeRO stages 1, 2 and 3. See zero.h for the
// hooks and README.md for the ideas.
#include "zero.h"

#include "comm.h"
#include "core.h"
#include "mem.h"

size_t shard_len(size_t size, int N) { return (size + (size_t)N - 1) / (size_t)N; }
size_t shard_offset(size_t size, int N, int r) { return (size_t)r * shard_len(size, N); }

static int world(const Zero *z) { return comm_size(z->comm); }
static size_t size_of(const Zero *z, int u) { return z->model->units[u].size; }
static size_t len_of(const Zero *z, int u) { return shard_len(size_of(z, u), world(z)); }
// The unit padded to N whole shards: what reduce-scatter and all-gather move.
static size_t padded(const Zero *z, int u) { return (size_t)world(z) * len_of(z, u); }
static size_t offset_of(const Zero *z, int u) {
    return shard_offset(size_of(z, u), world(z), comm_rank(z->comm));
}
// The real parameters in this rank's shard (the padding is not updated).
static size_t real_len(const Zero *z, int u) {
    size_t off = offset_of(z, u), size = size_of(z, u), len = len_of(z, u);
    return off >= size ? 0 : (size - off < len ? size - off : len);
}
// n parameters or gradients, of the run's element type; element i of buf.
static void *elems(const Zero *z, size_t n, MemCategory cat, const char *what) {
    return mem_alloc(n * z->elem, cat, what);
}
static void *at(const Zero *z, void *buf, size_t i) { return comm_at(buf, i, z->type); }
static bool mixed(const Zero *z) { return z->type == COMM_BF16; }   // bf16 with an fp32 master

void zero_setup(Zero *z) {
    for (int u = 0; u < z->nunits; u++) {
        size_t whole = padded(z, u), shard = len_of(z, u);
        if (z->stage < 3) z->params[u] = elems(z, whole, MEM_PARAMS, "params");
        else z->param_shard[u] = elems(z, shard, MEM_PARAMS, "param shard");
        if (z->stage < 2) z->grads[u] = elems(z, whole, MEM_GRADS, "grads");
        // Stage 1: this rank's shard of the whole gradient, where the
        // reduce-scatter lands in place; stages 2-3: all there is of it.
        if (z->stage == 1) z->grad_shard[u] = at(z, z->grads[u], offset_of(z, u));
        if (z->stage >= 2) z->grad_shard[u] = elems(z, shard, MEM_GRADS, "grad shard");
        // The optimizer's state, sharded from stage 1 on: the moments, and
        // in bf16 the fp32 master copy of the parameters it updates.
        size_t state = z->stage == 0 ? whole : shard;
        if (mixed(z)) z->master[u] = mem_alloc_floats(state, MEM_OPTIM, "master params");
        z->m[u] = mem_alloc_floats(state, MEM_OPTIM, "adam m");
        z->v[u] = mem_alloc_floats(state, MEM_OPTIM, "adam v");
    }
}

// ---- stage 3: parameters gathered just before a unit runs ----

static void start_gather(Zero *z, int u) {
    if (z->gathered[u]) return;   // gathered already, or on its way
    z->gathered[u] = elems(z, padded(z, u), MEM_PARAMS, "gathered params");
    z->gather_handle[u] =
        comm_all_gather_async_typed(z->comm, z->param_shard[u], z->gathered[u], padded(z, u), z->type);
}

static void *finish_gather(Zero *z, int u) {
    if (z->gather_handle[u]) comm_wait(z->gather_handle[u]);
    z->gather_handle[u] = NULL;
    return z->gathered[u];
}

static void release(Zero *z, int u) {
    mem_free(z->gathered[u]);
    z->gathered[u] = NULL;
}

void *zero_before_forward(Zero *z, int u) {
    if (z->stage < 3) return z->params[u];
    start_gather(z, u);
    if (z->prefetch && u + 1 < z->nunits) start_gather(z, u + 1);   // the next unit, while this one runs
    return finish_gather(z, u);
}

void zero_after_forward(Zero *z, int u) {
    if (z->stage == 3) release(z, u);
}

void *zero_before_backward(Zero *z, int u, void **grad) {
    if (z->stage < 2) {
        *grad = z->grads[u];
        return z->params[u];
    }
    // Stages 2 and 3: the unit's whole gradient exists only during its backward pass.
    z->unit_grad[u] = elems(z, padded(z, u), MEM_GRADS, "unit gradient");
    *grad = z->unit_grad[u];
    if (z->stage == 2) return z->params[u];
    start_gather(z, u);
    if (z->prefetch && u > 0) start_gather(z, u - 1);   // the backward pass goes down the units
    return finish_gather(z, u);
}

void zero_after_backward(Zero *z, int u) {
    if (z->stage < 2) return;
    // Average the unit's gradient over the ranks, keep only this rank's
    // shard of it, and let the whole go at once.
    comm_reduce_scatter_typed(z->comm, z->unit_grad[u], z->grad_shard[u], padded(z, u), z->type, COMM_AVG);
    mem_free(z->unit_grad[u]);
    z->unit_grad[u] = NULL;
    if (z->stage == 3) release(z, u);
}

void zero_step(Zero *z, int t) {
    for (int u = 0; u < z->nunits; u++) {
        size_t off = offset_of(z, u), n = real_len(z, u);
        switch (z->stage) {
        case 0:   // plain data parallelism: everyone averages everything and updates everything
            comm_all_reduce_typed(z->comm, z->grads[u], size_of(z, u), z->type, COMM_AVG);
            optim_step(&z->optim, t, mixed(z), z->params[u], z->grads[u], z->master[u], z->m[u], z->v[u], size_of(z, u));
            break;
        case 1:   // the whole gradient is here: reduce-scatter it, in place, to the shards
            comm_reduce_scatter_typed(z->comm, z->grads[u], z->grad_shard[u], padded(z, u), z->type, COMM_AVG);
            /* fall through */
        case 2:   // update this rank's shard, then everyone gathers the whole unit
            optim_step(&z->optim, t, mixed(z), at(z, z->params[u], off), z->grad_shard[u], z->master[u], z->m[u], z->v[u], n);
            comm_all_gather_typed(z->comm, at(z, z->params[u], off), z->params[u], padded(z, u), z->type);
            break;
        case 3:   // the shard is all there is
            optim_step(&z->optim, t, mixed(z), z->param_shard[u], z->grad_shard[u], z->master[u], z->m[u], z->v[u], n);
            break;
        }
    }
}
