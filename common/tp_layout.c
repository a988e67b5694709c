// tp_layout.c: a model cut by width (tp_layout.h).
#include "tp_layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "mem.h"
#include "dump.h"
#include "ops.h"

// ---- the layout ---------------------------------------------------------------

static const char *kind_name(TpSplitKind k) {
    return k == TP_ROWS ? "rows" : k == TP_COLUMNS ? "columns" : "replicated";
}

// The whole extent a split cuts: rows, or columns, of the tensor.
static int extent(const GptTensor *t, TpSplitKind k) { return k == TP_COLUMNS ? t->shape[1] : t->shape[0]; }

static int find_tensor(const Gpt *m, int u, const char *name) {
    for (int k = 0; k < m->units[u].ntensors; k++)
        if (strcmp(m->units[u].tensors[k].name, name) == 0) return k;
    CHECK(false, "unit %s has no tensor %s", m->units[u].name, name);
    return -1;
}

TpSplit tp_layout_split(const TpLayout *L, int u, const char *name) {
    return L->part[u][find_tensor(L->m, u, name)].split;
}

float *tp_layout_tensor(const TpLayout *L, int u, int k, float *unit) { return unit + L->part[u][k].offset; }

GptBlockView tp_layout_block_view(const TpLayout *L, int u, float *unit) {
    float *t[16];
    for (int k = 0; k < 16; k++) t[k] = tp_layout_tensor(L, u, k, unit);
    GptBlockView v = {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7], t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15]};
    return v;
}

GptEmbedView tp_layout_embed_view(const TpLayout *L, float *unit) {
    GptEmbedView v = {tp_layout_tensor(L, 0, 0, unit), tp_layout_tensor(L, 0, 1, unit)};
    return v;
}

GptHeadView tp_layout_head_view(const TpLayout *L, float *unit) {
    int u = L->nunits - 1;
    GptHeadView v = {tp_layout_tensor(L, u, 0, unit), tp_layout_tensor(L, u, 1, unit), tp_layout_tensor(L, u, 2, unit)};
    return v;
}

// Two tensors of block unit u cut alike: a's `ka` part and b's `kb` part
// hold the same indices. (Megatron pairs a column-parallel layer's columns
// with the next row-parallel layer's rows.)
static void check_pair(const TpLayout *L, int u, const char *a, TpSplitKind ka, const char *b, TpSplitKind kb,
                       const char *why, const char *fix) {
    TpSplit sa = tp_layout_split(L, u, a), sb = tp_layout_split(L, u, b);
    if (sa.kind == TP_REPLICATED && sb.kind == TP_REPLICATED) return;
    CHECK(sa.kind == ka && sb.kind == kb && sa.first == sb.first && sa.count == sb.count,
          "tp_split: rank %d holds %s of %s [%d, %d) but %s of %s [%d, %d): %s (%s)", L->r, kind_name(sa.kind), a,
          sa.first, sa.first + sa.count, kind_name(sb.kind), b, sb.first, sb.first + sb.count, why, fix);
}

// Every rank's parts of every tensor together make it exactly once.
static void check_parts(const TpLayout *L, const char *fix) {
    const Gpt *m = L->m;
    for (int u = 0; u < m->nunits; u++)
        for (int k = 0; k < m->units[u].ntensors; k++) {
            const GptTensor *t = &m->units[u].tensors[k];
            TpSplitKind kind = L->part[u][k].split.kind;
            int whole = extent(t, kind), covered = 0;
            for (int q = 0; q < L->t; q++) {
                TpSplit s = L->all[q * m->nunits + u][k];
                CHECK(s.kind == kind, "tp_split: rank %d holds %s of %s.%s, rank %d %s: every rank must cut a "
                      "tensor the same way (%s)", L->r, kind_name(kind), m->units[u].name, t->name, q,
                      kind_name(s.kind), fix);
                if (kind == TP_REPLICATED) continue;
                covered += s.count;
                for (int o = 0; o < q; o++) {
                    TpSplit x = L->all[o * m->nunits + u][k];
                    CHECK(x.first + x.count <= s.first || s.first + s.count <= x.first,
                          "tp_split: ranks %d and %d both hold %s [%d, %d) and [%d, %d) of %s.%s: the parts of a "
                          "split tensor must not overlap (%s)", o, q, kind_name(kind), x.first, x.first + x.count,
                          s.first, s.first + s.count, m->units[u].name, t->name, fix);
                }
            }
            CHECK(kind == TP_REPLICATED || covered == whole,
                  "tp_split: the %d ranks hold %d of the %d %s of %s.%s: together they must hold all of them (%s)",
                  L->t, covered, whole, kind_name(kind), m->units[u].name, t->name, fix);
        }
}

void tp_layout_make(TpLayout *L, const Gpt *m, Comm *group, TpSplitFn split, const void *ctx, bool naive_mlp,
                    const char *fix) {
    memset(L, 0, sizeof *L);
    L->m = m;
    L->group = group;
    L->t = comm_size(group), L->r = comm_rank(group);
    L->nunits = m->nunits;
    L->part = calloc((size_t)m->nunits, sizeof *L->part);
    L->all = calloc((size_t)m->nunits * L->t, sizeof *L->all);
    L->size = calloc((size_t)m->nunits, sizeof *L->size);
    CHECK(L->part && L->all && L->size, "out of memory");
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        for (int k = 0; k < unit->ntensors; k++) {
            const GptTensor *t = &unit->tensors[k];
            TpSplit s = split(ctx, unit->kind, t);
            if (s.kind == TP_REPLICATED) s.first = 0, s.count = extent(t, TP_ROWS);
            CHECK(s.kind == TP_REPLICATED || s.kind == TP_ROWS || (s.kind == TP_COLUMNS && t->ndim == 2),
                  "tp_split: %s.%s is %d-D and cannot be split by %s (%s)", unit->name, t->name, t->ndim,
                  kind_name(s.kind), fix);
            int whole = extent(t, s.kind);
            CHECK(s.count > 0 && s.first >= 0 && s.first + s.count <= whole,
                  "tp_split: rank %d's %s [%d, %d) of %s.%s are not inside its %d %s (%s)", L->r, kind_name(s.kind),
                  s.first, s.first + s.count, unit->name, t->name, whole, kind_name(s.kind), fix);
            TpPart *p = &L->part[u][k];
            p->split = s;
            p->rows = s.kind == TP_ROWS ? s.count : t->shape[0];
            p->cols = s.kind == TP_COLUMNS ? s.count : t->shape[1];
            p->offset = L->size[u];
            p->count = (size_t)p->rows * p->cols;
            L->size[u] += p->count;
            if (s.kind == TP_REPLICATED) L->replicated += p->count;
        }
        L->local += L->size[u];
    }
    TpSplit *mine = malloc((size_t)m->nunits * GPT_MAX_TENSORS * sizeof *mine);
    CHECK(mine, "out of memory");
    for (int u = 0; u < m->nunits; u++)
        for (int k = 0; k < GPT_MAX_TENSORS; k++) mine[u * GPT_MAX_TENSORS + k] = L->part[u][k].split;
    comm_all_gather_host(group, mine, (size_t)m->nunits * GPT_MAX_TENSORS * sizeof *mine, L->all);
    free(mine);
    check_parts(L, fix);
    // The pairs Megatron cuts alike, and whole heads.
    const int hs = m->cfg.C / m->cfg.NH;
    for (int u = 1; u <= m->cfg.L; u++) {
        static const char *const qkv[] = {"attn.wk", "attn.wv"}, *const bias[] = {"attn.bq", "attn.bk", "attn.bv"};
        const char *heads = "a rank's heads need their own q, k, v columns, biases and rows of attn.wo";
        for (int i = 0; i < 2; i++) check_pair(L, u, "attn.wq", TP_COLUMNS, qkv[i], TP_COLUMNS, heads, fix);
        for (int i = 0; i < 3; i++) check_pair(L, u, "attn.wq", TP_COLUMNS, bias[i], TP_ROWS, heads, fix);
        check_pair(L, u, "attn.wq", TP_COLUMNS, "attn.wo", TP_ROWS,
                   "a head's output must meet its own rows of attn.wo (slice wq, wk, wv and wo by the same heads)", fix);
        TpSplit q = tp_layout_split(L, u, "attn.wq");
        CHECK(q.kind == TP_REPLICATED || (q.first % hs == 0 && q.count % hs == 0),
              "tp_split: rank %d's columns [%d, %d) of attn.wq are not whole heads of %d channels: attention runs a "
              "head on one rank (%s)", L->r, q.first, q.first + q.count, hs, fix);
        check_pair(L, u, "mlp.w1", TP_COLUMNS, "mlp.b1", TP_ROWS, "b1 belongs to w1's columns", fix);
        if (naive_mlp) check_pair(L, u, "mlp.w2", TP_COLUMNS, "mlp.b2", TP_ROWS, "b2 belongs to w2's columns", fix);
        else check_pair(L, u, "mlp.w1", TP_COLUMNS, "mlp.w2", TP_ROWS,
                        "the hidden columns a rank computes are the rows of w2 it multiplies", fix);
    }
}

void tp_layout_free(TpLayout *L) {
    free(L->part);
    free(L->all);
    free(L->size);
    memset(L, 0, sizeof *L);
}

// ---- the parts -----------------------------------------------------------------

void **tp_layout_alloc_elems(const TpLayout *L, size_t elem, MemCategory cat, const char *what) {
    void **units = calloc((size_t)L->nunits, sizeof *units);
    CHECK(units, "out of memory");
    for (int u = 0; u < L->nunits; u++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", L->m->units[u].name, what);
        units[u] = mem_alloc(L->size[u] * elem, cat, name);
    }
    return units;
}

float **tp_layout_alloc(const TpLayout *L, MemCategory cat, const char *what) {
    return (float **)tp_layout_alloc_elems(L, sizeof(float), cat, what);
}

void tp_layout_free_units(const TpLayout *L, float **units) {
    if (!units) return;
    for (int u = 0; u < L->nunits; u++) mem_free(units[u]);
    free(units);
}

// Where this rank's part of tensor k of unit u comes from in the whole unit:
// `rows` runs of `len` floats, run i from whole offset `from + i * stride`.
typedef struct {
    size_t from, stride;
    int rows, len;
} Runs;

static Runs runs_of(const GptTensor *t, TpSplit s) {
    size_t cols = (size_t)t->shape[1];
    if (s.kind == TP_COLUMNS) return (Runs){t->offset + (size_t)s.first, cols, t->shape[0], s.count};
    if (s.kind == TP_ROWS) return (Runs){t->offset + (size_t)s.first * cols, 0, 1, (int)((size_t)s.count * cols)};
    return (Runs){t->offset, 0, 1, (int)t->count};
}

void tp_layout_init_unit(const TpLayout *L, int u, float *unit) {
    for (int k = 0; k < L->m->units[u].ntensors; k++) {
        const TpPart *p = &L->part[u][k];
        Runs r = runs_of(&L->m->units[u].tensors[k], p->split);
        for (int i = 0; i < r.rows; i++)
            gpt_init_slice(L->m, u, unit + p->offset + (size_t)i * r.len, r.from + i * r.stride, (size_t)r.len);
    }
}

void tp_layout_init(const TpLayout *L, float **params) {
    for (int u = 0; u < L->nunits; u++) tp_layout_init_unit(L, u, params[u]);
}

void tp_layout_parts_from_whole(const TpLayout *L, int u, float *local, const float *whole) {
    for (int k = 0; k < L->m->units[u].ntensors; k++) {
        const TpPart *p = &L->part[u][k];
        Runs r = runs_of(&L->m->units[u].tensors[k], p->split);
        for (int i = 0; i < r.rows; i++)
            mem_from_host(local + p->offset + (size_t)i * r.len, whole + r.from + i * r.stride,
                          (size_t)r.len * sizeof(float));
    }
}

float *tp_layout_gather_unit(const TpLayout *L, int u, const float *unit_dev) {
    const GptUnit *unit = &L->m->units[u];
    float *mine = malloc(L->size[u] * sizeof(float));
    CHECK(mine, "out of memory");
    mem_to_host(mine, unit_dev, L->size[u] * sizeof(float));
    size_t lens[64];
    CHECK(L->t <= 64, "at most 64 tensor-parallel ranks");
    float *parts = comm_gather_host(L->group, mine, L->size[u] * sizeof(float), 0, lens);
    free(mine);
    if (L->r != 0) return NULL;
    float *out = malloc(unit->size * sizeof(float));
    CHECK(out, "out of memory");
    size_t base = 0;   // rank q's part of the unit in parts
    for (int q = 0; q < L->t; base += lens[q] / sizeof(float), q++) {
        size_t at = 0;   // its tensors one after another, as tp_layout_make laid them out
        for (int k = 0; k < unit->ntensors; k++) {
            TpSplit s = L->all[q * L->nunits + u][k];
            Runs r = runs_of(&unit->tensors[k], s);
            for (int i = 0; i < r.rows; i++, at += (size_t)r.len)
                if (s.kind != TP_REPLICATED || q == 0)
                    memcpy(out + r.from + i * r.stride, parts + base + at, (size_t)r.len * sizeof(float));
        }
    }
    free(parts);
    return out;
}

float **tp_layout_gather(const TpLayout *L, float **units) {
    float **out = L->r == 0 ? calloc((size_t)L->nunits, sizeof *out) : NULL;
    for (int u = 0; u < L->nunits; u++) {
        float *whole = tp_layout_gather_unit(L, u, units[u]);
        if (out) out[u] = whole;
    }
    return out;
}

// Unit u of units as fp32 on the device: itself, or widened into scratch (bf16).
static const float *widen_unit(const TpLayout *L, void *const *units, int u, CommType t, float *scratch) {
    if (t == COMM_F32) return units[u];
    CHECK(scratch, "a bf16 unit widened without scratch");
    ops_from_bf16(scratch, units[u], L->size[u]);
    return scratch;
}

void tp_layout_dump(const TpLayout *L, float **units, DumpWriter *w, const char *prefix) {
    tp_layout_dump_typed(L, (void *const *)units, COMM_F32, NULL, w, prefix);
}

void tp_layout_dump_typed(const TpLayout *L, void *const *units, CommType t, float *scratch, DumpWriter *w,
                          const char *prefix) {
    for (int u = 0; u < L->nunits; u++) {
        float *whole = tp_layout_gather_unit(L, u, widen_unit(L, units, u, t, scratch));
        if (whole) gpt_dump_host_unit(L->m, w, prefix, u, whole);
        free(whole);
    }
}

void tp_layout_sumsq(const TpLayout *L, float **units, double *replicated, double *split) {
    *replicated = *split = 0;
    for (int u = 0; u < L->nunits; u++)
        for (int k = 0; k < L->m->units[u].ntensors; k++) {
            const TpPart *p = &L->part[u][k];
            double s = ops_sumsq(units[u] + p->offset, p->count);
            if (p->split.kind == TP_REPLICATED) *replicated += s;
            else *split += s;
        }
}

int tp_layout_replicated_differs(const TpLayout *L, Comm *c, float **units, char *buf, size_t len) {
    return tp_layout_replicated_differs_typed(L, c, (void *const *)units, COMM_F32, NULL, buf, len);
}

int tp_layout_replicated_differs_typed(const TpLayout *L, Comm *c, void *const *units, CommType t, float *scratch,
                                       char *buf, size_t len) {
    int n = 0, N = comm_size(c), zero_on = -1;
    for (int u = 0; u < L->nunits; u++)
        for (int k = 0; k < L->m->units[u].ntensors; k++) n += L->part[u][k].split.kind == TP_REPLICATED;
    double *mine = malloc((size_t)(n ? n : 1) * sizeof *mine), *all = malloc((size_t)N * (n ? n : 1) * sizeof *all);
    CHECK(mine && all, "out of memory");
    int i = 0;
    for (int u = 0; u < L->nunits; u++) {
        const float *unit = widen_unit(L, units, u, t, scratch);
        for (int k = 0; k < L->m->units[u].ntensors; k++) {
            const TpPart *p = &L->part[u][k];
            if (p->split.kind == TP_REPLICATED) mine[i++] = ops_sumsq(unit + p->offset, p->count);
        }
    }
    comm_all_gather_host(c, mine, (size_t)n * sizeof *mine, all);
    buf[0] = 0;
    i = 0;
    for (int u = 0; u < L->nunits && !buf[0]; u++)
        for (int k = 0; k < L->m->units[u].ntensors && !buf[0]; k++) {
            if (L->part[u][k].split.kind != TP_REPLICATED) continue;
            bool differs = false;
            for (int q = 1; q < N; q++) differs |= all[(size_t)q * n + i] != all[i];
            if (differs) {
                snprintf(buf, len, "%s.%s", L->m->units[u].name, L->m->units[u].tensors[k].name);
                for (int q = N - 1; q >= 0; q--)
                    if (all[(size_t)q * n + i] == 0) zero_on = q;
            }
            i++;
        }
    free(mine);
    free(all);
    return zero_on;
}

// ---- shapes and bytes ----------------------------------------------------------------

// The smallest multiple of t at or above x.
static int up_to(int x, int t) { return (x + t - 1) / t * t; }

void tp_check_shape(const Args *a, int t, int N, bool sequence) {
    // A shape t divides: heads a multiple of t, channels a multiple of the
    // heads, a vocabulary (and tokens) a multiple of t.
    int heads = up_to(a->heads, t), dim = up_to(a->dim, heads);
    char shape[128];
    int n = snprintf(shape, sizeof shape, "--heads %d --dim %d", heads, dim);
    if (a->vocab % t) n += snprintf(shape + n, sizeof shape - (size_t)n, " --vocab %d", up_to(a->vocab, t));
    if (sequence && a->seq % t) snprintf(shape + n, sizeof shape - (size_t)n, " --seq %d", up_to(a->seq, t));
    if (N % t)
        core_usage_error("--tp %d does not divide %d ranks: the ranks form groups of %d; use -np %d, or --tp "
                         "among the divisors of %d", t, N, t, (N / t + 1) * t, N);
    if (a->heads % t)
        core_usage_error("tensor parallelism splits whole heads: %d ranks cannot split %d heads; use -np (or --tp) "
                         "among the divisors of %d, or a shape that %d divides (%s)", t, a->heads, a->heads, t, shape);
    if (a->dim % t)
        core_usage_error("tensor parallelism splits the channels and the MLP's 4C: %d ranks cannot split %d "
                         "channels; use a shape that %d divides (%s)", t, a->dim, t, shape);
    if (a->vocab % t)
        core_usage_error("the vocabulary-parallel embedding splits the vocabulary: %d ranks cannot split %d "
                         "tokens; use --vocab %d (a multiple of %d)", t, a->vocab, up_to(a->vocab, t), t);
    if (sequence && a->seq % t)
        core_usage_error("sequence parallelism splits the tokens of every row: %d ranks cannot split %d tokens; "
                         "use --seq %d (a multiple of %d)", t, a->seq, up_to(a->seq, t), t);
}

// Bus bytes of one all-reduce, or one all-gather or reduce-scatter, of n
// floats over k ranks (nccl-tests' factors).
static double ar(double n, int k) { return 2.0 * (k - 1) / k * 4 * n; }
static double ag(double n, int k) { return (double)(k - 1) / k * 4 * n; }

TpBytes tp_bytes_per_step(bool naive, int t, int dp, double M, double C, int L, double psi_local) {
    return tp_bytes_per_step_typed(naive, t, dp, M, C, L, psi_local, 4);
}

TpBytes tp_bytes_per_step_typed(bool naive, int t, int dp, double M, double C, int L, double psi_local, double elem) {
    return tp_bytes_per_step_recompute(naive, t, dp, M, C, L, psi_local, elem, false);
}

TpBytes tp_bytes_per_step_recompute(bool naive, int t, int dp, double M, double C, int L, double psi_local,
                                    double elem, bool recompute) {
    TpBytes b;
    const double e = elem / 4;   // the activations and the gradients in the run's type; the loss's parts fp32
    // Each layer's forward (g's all-reduce; the naive MLP's gathers) and backward.
    double attn_f = ar(M * C, t), mlp_f = naive ? ag(4 * M * C, t) + ag(M * C, t) : ar(M * C, t);
    double attn = attn_f + ar(M * C, t), mlp = mlp_f + (naive ? ag(4 * M * C, t) + ar(M * C, t) : ar(M * C, t));
    b.again = recompute ? e * L * (attn_f + mlp_f) : 0;
    b.block = e * L * (attn + mlp) + b.again;
    b.embed_head = e * (ar(M * C, t) + ar(M * C, t)) + 3 * ar(M, t);
    b.dp = e * ar(psi_local, dp);
    b.total = b.block + b.embed_head + b.dp;
    return b;
}
