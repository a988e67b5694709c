// cuda_backend.c: the CUDA backend, loaded when a rank uses a GPU.
//
// The kernels (ops_cuda.cu), the device memory (mem_cuda.cu) and NCCL
// (comm_nccl.c) are built into build/libplcuda.so, which needs the CUDA
// runtime, cuBLAS and NCCL. The programs do not: they load it (dlopen) when
// a rank asks for a GPU, and find each of its functions by name the first
// time one is called. A run on the CPU loads none of it (those libraries
// are close to a gigabyte; loading them cost every process of a laptop run
// 50 ms of CPU), and a build with CUDA runs on a machine without them.
//
// Each function below stands for the function of the same name in the
// library (ops_cuda.h, mem_cuda.h, comm_internal.h), and takes its
// arguments to it. A few answer without loading it while no GPU is in use:
// how many GPUs there are when the machine has no GPU device at all, and
// the queries the CPU path makes of NCCL and TF32 (none queued, nothing to
// switch).
#ifdef PL_CUDA
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "comm_internal.h"
#include "core.h"
#include "mem.h"
#include "mem_cuda.h"
#include "ops_cuda.h"

static void *g_lib;        // the library, once loaded
static char g_why[600];    // why it could not be, once tried

// The library, loaded from the folder of the program (build/; the unit
// tests' build/tests/ looks one folder up); false (g_why says why) when it
// cannot be.
static bool load_backend(void) {
    if (g_lib) return true;
    if (g_why[0]) return false;
    char dir[PATH_MAX], path[PATH_MAX + 32];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    dir[n > 0 ? n : 0] = 0;
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    for (int up = 0; up < 2 && !g_lib; up++) {
        snprintf(path, sizeof path, "%s%s/libplcuda.so", dir, up ? "/.." : "");
        if (up && access(path, F_OK) != 0) break;
        g_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!g_lib) snprintf(g_why, sizeof g_why, "%s", dlerror());
    }
    if (g_lib) g_why[0] = 0;
    return g_lib != NULL;
}

static void *backend_function(const char *name) {
    CHECK(load_backend(), "cannot load the CUDA backend: %s", g_why);
    void *f = dlsym(g_lib, name);
    CHECK(f, "the CUDA backend has no %s: rebuild it (make)", name);
    return f;
}

// Whether the machine has a GPU device the CUDA driver could open (a Linux
// NVIDIA driver's device nodes, or WSL's): without one there is nothing to
// load the library for.
static bool gpu_devices(void) {
    return access("/dev/nvidiactl", F_OK) == 0 || access("/dev/nvidia0", F_OK) == 0 ||
           access("/dev/dxg", F_OK) == 0;
}

int mem_cuda_device_count(void) {
    if (!g_lib && !gpu_devices()) return 0;
    if (!load_backend()) return -1;
    static __typeof__(mem_cuda_device_count) *f;
    if (!f) f = backend_function("mem_cuda_device_count");
    return f();
}

const char *mem_cuda_missing(void) { return g_why; }

// Every function the library must have (each below stands for one).
static const char *const FUNCTIONS[] = {
    "mem_cuda_device_count", "mem_cuda_set_device", "mem_cuda_malloc", "mem_cuda_free", "mem_cuda_copy",
    "mem_cuda_zero", "mem_cuda_used", "ops_cuda_init", "ops_cuda_set_tf32", "ops_cuda_matmul_forward",
    "ops_cuda_matmul_backward", "ops_cuda_matmul_forward_bf16", "ops_cuda_matmul_backward_bf16", "ops_cuda_add",
    "ops_cuda_accumulate", "ops_cuda_scale", "ops_cuda_fill", "ops_cuda_to_bf16", "ops_cuda_from_bf16",
    "ops_cuda_accumulate_bf16", "ops_cuda_gelu_forward", "ops_cuda_gelu_backward", "ops_cuda_layernorm_forward",
    "ops_cuda_layernorm_backward", "ops_cuda_attention_forward", "ops_cuda_attention_backward",
    "ops_cuda_embedding_forward", "ops_cuda_embedding_backward", "ops_cuda_crossentropy_forward",
    "ops_cuda_crossentropy_backward", "ops_cuda_add_bias", "ops_cuda_bias_backward", "ops_cuda_copy_2d",
    "ops_cuda_copy_2d_bytes", "ops_cuda_accumulate_2d", "ops_cuda_vocab_ids", "ops_cuda_rows_forward",
    "ops_cuda_rows_backward", "ops_cuda_positions_forward", "ops_cuda_positions_backward", "ops_cuda_row_max",
    "ops_cuda_row_sumexp", "ops_cuda_pick", "ops_cuda_ce_from_parts", "ops_cuda_ce_parts_backward",
    "ops_cuda_dropout_forward", "ops_cuda_dropout_backward", "ops_cuda_sum", "ops_cuda_sumsq",
    "ops_cuda_sumsq_bf16", "ops_cuda_adamw", "ops_cuda_adamw_mixed", "ops_cuda_sgd", "nccl_fit", "nccl_comm_init",
    "nccl_comm_free", "nccl_shutdown", "nccl_on_device", "nccl_all_reduce", "nccl_reduce_scatter",
    "nccl_all_gather", "nccl_broadcast", "nccl_send", "nccl_recv", "nccl_sendrecv", "nccl_barrier", "nccl_flush",
    "nccl_queued", "nccl_finish", "nccl_test",
};

int mem_cuda_verify_backend(char *why, size_t len) {
    if (!load_backend()) {
        snprintf(why, len, "cannot load the CUDA backend: %s", g_why);
        return -1;
    }
    int missing = 0;
    why[0] = 0;
    for (size_t i = 0; i < sizeof FUNCTIONS / sizeof FUNCTIONS[0]; i++)
        if (!dlsym(g_lib, FUNCTIONS[i])) {
            size_t n = strlen(why);
            snprintf(why + n, len - n, "%s%s", missing++ ? ", " : "the CUDA backend lacks ", FUNCTIONS[i]);
        }
    return missing;
}

// ---- device memory (mem_cuda.h) -----------------------------------------

void mem_cuda_set_device(int dev) {
    static __typeof__(mem_cuda_set_device) *f;
    if (!f) f = backend_function("mem_cuda_set_device");
    f(dev);
}

void *mem_cuda_malloc(size_t bytes) {
    static __typeof__(mem_cuda_malloc) *f;
    if (!f) f = backend_function("mem_cuda_malloc");
    return f(bytes);
}

void mem_cuda_free(void *ptr) {
    static __typeof__(mem_cuda_free) *f;
    if (!f) f = backend_function("mem_cuda_free");
    f(ptr);
}

void mem_cuda_copy(void *dst, const void *src, size_t bytes, int kind) {
    static __typeof__(mem_cuda_copy) *f;
    if (!f) f = backend_function("mem_cuda_copy");
    f(dst, src, bytes, kind);
}

void mem_cuda_zero(void *ptr, size_t bytes) {
    static __typeof__(mem_cuda_zero) *f;
    if (!f) f = backend_function("mem_cuda_zero");
    f(ptr, bytes);
}

size_t mem_cuda_used(void) {
    if (!g_lib) return 0;
    static __typeof__(mem_cuda_used) *f;
    if (!f) f = backend_function("mem_cuda_used");
    return f();
}

// ---- the kernels (ops_cuda.h) -------------------------------------------

void ops_cuda_init(void) {
    static __typeof__(ops_cuda_init) *f;
    if (!f) f = backend_function("ops_cuda_init");
    f();
}

void ops_cuda_set_tf32(bool on) {
    if (!g_lib) return;   // no GPU in use: nothing to switch
    static __typeof__(ops_cuda_set_tf32) *f;
    if (!f) f = backend_function("ops_cuda_set_tf32");
    f(on);
}

void ops_cuda_matmul_forward(float *out, const float *inp, const float *w, const float *bias, int M, int K, int N) {
    static __typeof__(ops_cuda_matmul_forward) *f;
    if (!f) f = backend_function("ops_cuda_matmul_forward");
    f(out, inp, w, bias, M, K, N);
}

void ops_cuda_matmul_backward(float *dinp, float *dw, float *dbias, const float *dout, const float *inp, const float *w, int M, int K, int N) {
    static __typeof__(ops_cuda_matmul_backward) *f;
    if (!f) f = backend_function("ops_cuda_matmul_backward");
    f(dinp, dw, dbias, dout, inp, w, M, K, N);
}

void ops_cuda_matmul_forward_bf16(float *out, const uint16_t *inp, const uint16_t *w, const float *bias, int M, int K, int N) {
    static __typeof__(ops_cuda_matmul_forward_bf16) *f;
    if (!f) f = backend_function("ops_cuda_matmul_forward_bf16");
    f(out, inp, w, bias, M, K, N);
}

void ops_cuda_matmul_backward_bf16(float *dinp, float *dw, float *dbias, const uint16_t *dout, const uint16_t *inp, const uint16_t *w, int M, int K, int N) {
    static __typeof__(ops_cuda_matmul_backward_bf16) *f;
    if (!f) f = backend_function("ops_cuda_matmul_backward_bf16");
    f(dinp, dw, dbias, dout, inp, w, M, K, N);
}

void ops_cuda_add(float *out, const float *a, const float *b, size_t n) {
    static __typeof__(ops_cuda_add) *f;
    if (!f) f = backend_function("ops_cuda_add");
    f(out, a, b, n);
}

void ops_cuda_accumulate(float *y, const float *x, size_t n) {
    static __typeof__(ops_cuda_accumulate) *f;
    if (!f) f = backend_function("ops_cuda_accumulate");
    f(y, x, n);
}

void ops_cuda_scale(float *x, float s, size_t n) {
    static __typeof__(ops_cuda_scale) *f;
    if (!f) f = backend_function("ops_cuda_scale");
    f(x, s, n);
}

void ops_cuda_fill(float *x, float v, size_t n) {
    static __typeof__(ops_cuda_fill) *f;
    if (!f) f = backend_function("ops_cuda_fill");
    f(x, v, n);
}

void ops_cuda_to_bf16(uint16_t *out, const float *x, size_t n) {
    static __typeof__(ops_cuda_to_bf16) *f;
    if (!f) f = backend_function("ops_cuda_to_bf16");
    f(out, x, n);
}

void ops_cuda_from_bf16(float *out, const uint16_t *x, size_t n) {
    static __typeof__(ops_cuda_from_bf16) *f;
    if (!f) f = backend_function("ops_cuda_from_bf16");
    f(out, x, n);
}

void ops_cuda_accumulate_bf16(uint16_t *y, const float *x, size_t n) {
    static __typeof__(ops_cuda_accumulate_bf16) *f;
    if (!f) f = backend_function("ops_cuda_accumulate_bf16");
    f(y, x, n);
}

void ops_cuda_gelu_forward(float *out, const float *x, size_t n) {
    static __typeof__(ops_cuda_gelu_forward) *f;
    if (!f) f = backend_function("ops_cuda_gelu_forward");
    f(out, x, n);
}

void ops_cuda_gelu_backward(float *dx, const float *dout, const float *x, size_t n) {
    static __typeof__(ops_cuda_gelu_backward) *f;
    if (!f) f = backend_function("ops_cuda_gelu_backward");
    f(dx, dout, x, n);
}

void ops_cuda_layernorm_forward(float *out, float *mean, float *rstd, const float *x, const float *w, const float *b, int M, int C) {
    static __typeof__(ops_cuda_layernorm_forward) *f;
    if (!f) f = backend_function("ops_cuda_layernorm_forward");
    f(out, mean, rstd, x, w, b, M, C);
}

void ops_cuda_layernorm_backward(float *dx, float *dw, float *db, const float *dout, const float *x, const float *w, const float *mean, const float *rstd, int M, int C) {
    static __typeof__(ops_cuda_layernorm_backward) *f;
    if (!f) f = backend_function("ops_cuda_layernorm_backward");
    f(dx, dw, db, dout, x, w, mean, rstd, M, C);
}

void ops_cuda_attention_forward(float *out, float *att, const float *q, const float *k, const float *v, int B, int T, int C, int NH) {
    static __typeof__(ops_cuda_attention_forward) *f;
    if (!f) f = backend_function("ops_cuda_attention_forward");
    f(out, att, q, k, v, B, T, C, NH);
}

void ops_cuda_attention_backward(float *dq, float *dk, float *dv, float *scratch, const float *dout, const float *att, const float *q, const float *k, const float *v, int B, int T, int C, int NH) {
    static __typeof__(ops_cuda_attention_backward) *f;
    if (!f) f = backend_function("ops_cuda_attention_backward");
    f(dq, dk, dv, scratch, dout, att, q, k, v, B, T, C, NH);
}

void ops_cuda_embedding_forward(float *out, const int *tokens, const float *wte, const float *wpe, int B, int T, int C, int pos0) {
    static __typeof__(ops_cuda_embedding_forward) *f;
    if (!f) f = backend_function("ops_cuda_embedding_forward");
    f(out, tokens, wte, wpe, B, T, C, pos0);
}

void ops_cuda_embedding_backward(float *dwte, float *dwpe, const float *dout, const int *tokens, int B, int T, int C, int pos0) {
    static __typeof__(ops_cuda_embedding_backward) *f;
    if (!f) f = backend_function("ops_cuda_embedding_backward");
    f(dwte, dwpe, dout, tokens, B, T, C, pos0);
}

void ops_cuda_crossentropy_forward(float *losses, float *probs, const float *logits, const int *targets, int M, int V) {
    static __typeof__(ops_cuda_crossentropy_forward) *f;
    if (!f) f = backend_function("ops_cuda_crossentropy_forward");
    f(losses, probs, logits, targets, M, V);
}

void ops_cuda_crossentropy_backward(float *dlogits, const float *probs, const int *targets, float scale, int M, int V) {
    static __typeof__(ops_cuda_crossentropy_backward) *f;
    if (!f) f = backend_function("ops_cuda_crossentropy_backward");
    f(dlogits, probs, targets, scale, M, V);
}

void ops_cuda_add_bias(float *out, const float *bias, int M, int N) {
    static __typeof__(ops_cuda_add_bias) *f;
    if (!f) f = backend_function("ops_cuda_add_bias");
    f(out, bias, M, N);
}

void ops_cuda_bias_backward(float *dbias, const float *dout, int M, int N) {
    static __typeof__(ops_cuda_bias_backward) *f;
    if (!f) f = backend_function("ops_cuda_bias_backward");
    f(dbias, dout, M, N);
}

void ops_cuda_copy_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols) {
    static __typeof__(ops_cuda_copy_2d) *f;
    if (!f) f = backend_function("ops_cuda_copy_2d");
    f(dst, dst_ld, src, src_ld, rows, cols);
}

void ops_cuda_copy_2d_bytes(void *dst, size_t dst_pitch, const void *src, size_t src_pitch, size_t width, size_t rows) {
    static __typeof__(ops_cuda_copy_2d_bytes) *f;
    if (!f) f = backend_function("ops_cuda_copy_2d_bytes");
    f(dst, dst_pitch, src, src_pitch, width, rows);
}

void ops_cuda_accumulate_2d(float *dst, int dst_ld, const float *src, int src_ld, int rows, int cols) {
    static __typeof__(ops_cuda_accumulate_2d) *f;
    if (!f) f = backend_function("ops_cuda_accumulate_2d");
    f(dst, dst_ld, src, src_ld, rows, cols);
}

void ops_cuda_vocab_ids(int *ids, const int *tokens, int v0, int nv, size_t n) {
    static __typeof__(ops_cuda_vocab_ids) *f;
    if (!f) f = backend_function("ops_cuda_vocab_ids");
    f(ids, tokens, v0, nv, n);
}

void ops_cuda_rows_forward(float *out, const int *ids, const float *table, int nrows, int M, int C) {
    static __typeof__(ops_cuda_rows_forward) *f;
    if (!f) f = backend_function("ops_cuda_rows_forward");
    f(out, ids, table, nrows, M, C);
}

void ops_cuda_rows_backward(float *dtable, const float *dout, const int *ids, int nrows, int M, int C) {
    static __typeof__(ops_cuda_rows_backward) *f;
    if (!f) f = backend_function("ops_cuda_rows_backward");
    f(dtable, dout, ids, nrows, M, C);
}

void ops_cuda_positions_forward(float *out, const float *wpe, int B, int T, int C, int pos0) {
    static __typeof__(ops_cuda_positions_forward) *f;
    if (!f) f = backend_function("ops_cuda_positions_forward");
    f(out, wpe, B, T, C, pos0);
}

void ops_cuda_positions_backward(float *dwpe, const float *dout, int B, int T, int C, int pos0) {
    static __typeof__(ops_cuda_positions_backward) *f;
    if (!f) f = backend_function("ops_cuda_positions_backward");
    f(dwpe, dout, B, T, C, pos0);
}

void ops_cuda_row_max(float *mx, const float *x, int M, int N) {
    static __typeof__(ops_cuda_row_max) *f;
    if (!f) f = backend_function("ops_cuda_row_max");
    f(mx, x, M, N);
}

void ops_cuda_row_sumexp(float *sumexp, const float *x, const float *mx, int M, int N) {
    static __typeof__(ops_cuda_row_sumexp) *f;
    if (!f) f = backend_function("ops_cuda_row_sumexp");
    f(sumexp, x, mx, M, N);
}

void ops_cuda_pick(float *out, const float *x, const int *ids, int M, int N) {
    static __typeof__(ops_cuda_pick) *f;
    if (!f) f = backend_function("ops_cuda_pick");
    f(out, x, ids, M, N);
}

void ops_cuda_ce_from_parts(float *losses, const float *mx, const float *sumexp, const float *target_logit, int M) {
    static __typeof__(ops_cuda_ce_from_parts) *f;
    if (!f) f = backend_function("ops_cuda_ce_from_parts");
    f(losses, mx, sumexp, target_logit, M);
}

void ops_cuda_ce_parts_backward(float *dlogits, const float *x, const float *mx, const float *sumexp, const int *ids, float scale, int M, int N) {
    static __typeof__(ops_cuda_ce_parts_backward) *f;
    if (!f) f = backend_function("ops_cuda_ce_parts_backward");
    f(dlogits, x, mx, sumexp, ids, scale, M, N);
}

void ops_cuda_dropout_forward(float *out, const float *x, float p, DropoutKey key, int B, int T, int C) {
    static __typeof__(ops_cuda_dropout_forward) *f;
    if (!f) f = backend_function("ops_cuda_dropout_forward");
    f(out, x, p, key, B, T, C);
}

void ops_cuda_dropout_backward(float *dx, const float *dout, float p, DropoutKey key, int B, int T, int C) {
    static __typeof__(ops_cuda_dropout_backward) *f;
    if (!f) f = backend_function("ops_cuda_dropout_backward");
    f(dx, dout, p, key, B, T, C);
}

double ops_cuda_sum(const float *x, size_t n) {
    static __typeof__(ops_cuda_sum) *f;
    if (!f) f = backend_function("ops_cuda_sum");
    return f(x, n);
}

double ops_cuda_sumsq(const float *x, size_t n) {
    static __typeof__(ops_cuda_sumsq) *f;
    if (!f) f = backend_function("ops_cuda_sumsq");
    return f(x, n);
}

double ops_cuda_sumsq_bf16(const uint16_t *x, size_t n) {
    static __typeof__(ops_cuda_sumsq_bf16) *f;
    if (!f) f = backend_function("ops_cuda_sumsq_bf16");
    return f(x, n);
}

void ops_cuda_adamw(float *p, const float *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t) {
    static __typeof__(ops_cuda_adamw) *f;
    if (!f) f = backend_function("ops_cuda_adamw");
    f(p, g, m, v, n, lr, beta1, beta2, eps, wd, t);
}

void ops_cuda_adamw_mixed(float *p, uint16_t *w, const uint16_t *g, float *m, float *v, size_t n, float lr, float beta1, float beta2, float eps, float wd, int t) {
    static __typeof__(ops_cuda_adamw_mixed) *f;
    if (!f) f = backend_function("ops_cuda_adamw_mixed");
    f(p, w, g, m, v, n, lr, beta1, beta2, eps, wd, t);
}

void ops_cuda_sgd(float *p, const float *g, float *buf, size_t n, float lr, float mu, float wd) {
    static __typeof__(ops_cuda_sgd) *f;
    if (!f) f = backend_function("ops_cuda_sgd");
    f(p, g, buf, n, lr, mu, wd);
}

// ---- NCCL (comm_internal.h) ---------------------------------------------

NcclFit nccl_fit(char gpu_id[NCCL_GPU_ID_LEN]) {
    if (mem_device() != DEVICE_CUDA) {
        gpu_id[0] = 0;
        return NCCL_ON_CPU;
    }
    static __typeof__(nccl_fit) *f;
    if (!f) f = backend_function("nccl_fit");
    return f(gpu_id);
}

void nccl_comm_init(Comm *c) {
    static __typeof__(nccl_comm_init) *f;
    if (!f) f = backend_function("nccl_comm_init");
    f(c);
}

void nccl_comm_free(Comm *c) {
    static __typeof__(nccl_comm_free) *f;
    if (!f) f = backend_function("nccl_comm_free");
    f(c);
}

void nccl_shutdown(void) {
    if (!g_lib) return;
    static __typeof__(nccl_shutdown) *f;
    if (!f) f = backend_function("nccl_shutdown");
    f();
}

bool nccl_on_device(const void *ptr) {
    if (!g_lib) return false;
    static __typeof__(nccl_on_device) *f;
    if (!f) f = backend_function("nccl_on_device");
    return f(ptr);
}

void nccl_all_reduce(Comm *c, void *buf, size_t n, CommType t, CommReduce op, NcclPending *p) {
    static __typeof__(nccl_all_reduce) *f;
    if (!f) f = backend_function("nccl_all_reduce");
    f(c, buf, n, t, op, p);
}

void nccl_reduce_scatter(Comm *c, const void *send, void *recv, size_t n, CommType t, CommReduce op, NcclPending *p) {
    static __typeof__(nccl_reduce_scatter) *f;
    if (!f) f = backend_function("nccl_reduce_scatter");
    f(c, send, recv, n, t, op, p);
}

void nccl_all_gather(Comm *c, const void *send, void *recv, size_t n, CommType t, NcclPending *p) {
    static __typeof__(nccl_all_gather) *f;
    if (!f) f = backend_function("nccl_all_gather");
    f(c, send, recv, n, t, p);
}

void nccl_broadcast(Comm *c, void *buf, size_t n, CommType t, int root, NcclPending *p) {
    static __typeof__(nccl_broadcast) *f;
    if (!f) f = backend_function("nccl_broadcast");
    f(c, buf, n, t, root, p);
}

void nccl_send(Comm *c, const void *buf, size_t n, CommType t, int peer, NcclPending *p) {
    static __typeof__(nccl_send) *f;
    if (!f) f = backend_function("nccl_send");
    f(c, buf, n, t, peer, p);
}

void nccl_recv(Comm *c, void *buf, size_t n, CommType t, int peer, NcclPending *p) {
    static __typeof__(nccl_recv) *f;
    if (!f) f = backend_function("nccl_recv");
    f(c, buf, n, t, peer, p);
}

void nccl_sendrecv(Comm *c, const void *send, size_t ns, int dst, void *recv, size_t nr, int src, CommType t) {
    static __typeof__(nccl_sendrecv) *f;
    if (!f) f = backend_function("nccl_sendrecv");
    f(c, send, ns, dst, recv, nr, src, t);
}

void nccl_barrier(Comm *c, NcclPending *p) {
    static __typeof__(nccl_barrier) *f;
    if (!f) f = backend_function("nccl_barrier");
    f(c, p);
}

void nccl_flush(void) {
    if (!g_lib) return;
    static __typeof__(nccl_flush) *f;
    if (!f) f = backend_function("nccl_flush");
    f();
}

int nccl_queued(void) {
    if (!g_lib) return 0;
    static __typeof__(nccl_queued) *f;
    if (!f) f = backend_function("nccl_queued");
    return f();
}

void nccl_finish(NcclPending *p) {
    static __typeof__(nccl_finish) *f;
    if (!f) f = backend_function("nccl_finish");
    f(p);
}

bool nccl_test(NcclPending *p) {
    static __typeof__(nccl_test) *f;
    if (!f) f = backend_function("nccl_test");
    return f(p);
}
#endif
