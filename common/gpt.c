// gpt.c: the model as units; forward and backward one unit at a time.
#include "gpt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dump.h"
#include "ops.h"
#include "rng.h"

// ---- units and tensors -----------------------------------------------------

static void add_tensor(GptUnit *u, const char *name, int rows, int cols, float std, float value) {
    CHECK(u->ntensors < GPT_MAX_TENSORS, "unit %s has too many tensors", u->name);
    GptTensor *t = &u->tensors[u->ntensors++];
    t->name = name;
    t->ndim = cols > 0 ? 2 : 1;
    t->shape[0] = rows;
    t->shape[1] = cols > 0 ? cols : 1;
    t->offset = u->size;
    t->count = (size_t)rows * (size_t)(cols > 0 ? cols : 1);
    t->init_std = std;
    t->init_value = value;
    u->size += t->count;
}

Gpt *gpt_create(const GptConfig *cfg) {
    const GptConfig c = *cfg;
    CHECK(c.B > 0 && c.T > 0 && c.C > 0 && c.NH > 0 && c.L >= 0 && c.V > 0,
          "model sizes must be positive (B %d, T %d, C %d, NH %d, L %d, V %d)", c.B, c.T, c.C,
          c.NH, c.L, c.V);
    CHECK(c.C % c.NH == 0, "%d heads do not divide %d channels; pick --heads among the divisors of --dim",
          c.NH, c.C);
    CHECK(c.dropout >= 0 && c.dropout < 1, "dropout %g must be in [0, 1)", c.dropout);
    CHECK(c.precision == GPT_FP32 || c.precision == GPT_BF16, "precision %d is neither fp32 nor bf16", (int)c.precision);
    Gpt *m = calloc(1, sizeof *m);
    CHECK(m, "out of memory");
    m->cfg = c;
    m->nunits = c.L + 2;
    m->units = calloc((size_t)m->nunits, sizeof *m->units);
    CHECK(m->units, "out of memory");
    const float std = 0.02f, proj_std = 0.02f / sqrtf(2.0f * (float)(c.L > 0 ? c.L : 1));

    GptUnit *e = &m->units[0];
    e->kind = UNIT_EMBED;
    snprintf(e->name, sizeof e->name, "embed");
    add_tensor(e, "wte", c.V, c.C, std, 0);
    add_tensor(e, "wpe", c.T, c.C, std, 0);

    for (int l = 0; l < c.L; l++) {
        GptUnit *b = &m->units[1 + l];
        b->kind = UNIT_BLOCK;
        snprintf(b->name, sizeof b->name, "block%d", l);
        add_tensor(b, "ln1.w", c.C, 0, 0, 1);
        add_tensor(b, "ln1.b", c.C, 0, 0, 0);
        add_tensor(b, "attn.wq", c.C, c.C, std, 0);
        add_tensor(b, "attn.bq", c.C, 0, 0, 0);
        add_tensor(b, "attn.wk", c.C, c.C, std, 0);
        add_tensor(b, "attn.bk", c.C, 0, 0, 0);
        add_tensor(b, "attn.wv", c.C, c.C, std, 0);
        add_tensor(b, "attn.bv", c.C, 0, 0, 0);
        add_tensor(b, "attn.wo", c.C, c.C, proj_std, 0);
        add_tensor(b, "attn.bo", c.C, 0, 0, 0);
        add_tensor(b, "ln2.w", c.C, 0, 0, 1);
        add_tensor(b, "ln2.b", c.C, 0, 0, 0);
        add_tensor(b, "mlp.w1", c.C, 4 * c.C, std, 0);
        add_tensor(b, "mlp.b1", 4 * c.C, 0, 0, 0);
        add_tensor(b, "mlp.w2", 4 * c.C, c.C, proj_std, 0);
        add_tensor(b, "mlp.b2", c.C, 0, 0, 0);
    }

    GptUnit *h = &m->units[c.L + 1];
    h->kind = UNIT_HEAD;
    snprintf(h->name, sizeof h->name, "head");
    add_tensor(h, "lnf.w", c.C, 0, 0, 1);
    add_tensor(h, "lnf.b", c.C, 0, 0, 0);
    add_tensor(h, "lm_head", c.C, c.V, std, 0);

    for (int u = 0; u < m->nunits; u++) m->nparams += m->units[u].size;
    return m;
}

static void free_acts(Gpt *m);

double gpt_bytes_needed(const GptConfig *cfg) {
    double B = cfg->B, T = cfg->T, C = cfg->C, NH = cfg->NH, L = cfg->L, V = cfg->V;
    // Ψ, as gpt_create lays it out: embeddings, L blocks, final norm and head.
    double psi = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + C * V;
    double BT = B * T, BTC = BT * C, att = B * NH * T * T;
    // Floats of gpt_alloc_acts: per block 15 BTC, 4 BT and the attention;
    // the residual streams and their gradients; the head; the scratch.
    double acts = L * (15 * BTC + 4 * BT + att) + (L + 1) * 2 * BTC + BTC + 4 * BT + 3 * BT * V +
                  9 * BTC + att + 2 * BT /* tokens and targets, as ints */;
    // bf16's scratch besides (gpt.h): fp32 copies, the rounded product
    // inputs (in floats, half as many), the unit widened and its gradient.
    if (cfg->precision == GPT_BF16) {
        double unit = fmax(12 * C * C + 13 * C, fmax(V * C + T * C, C * V + 2 * C));
        acts += 6 * BTC + att + BT * V + BT * fmax(4 * C, V) / 2 + 2 * unit;
    }
    return (cfg->grads_fp32 ? 18 : 16) * psi + 4 * acts;
}

void gpt_free(Gpt *m) {
    if (!m) return;
    free_acts(m);
    free(m->units);
    free(m);
}

// ---- views -----------------------------------------------------------------

static float *tensor_of(const Gpt *m, int u, int k, float *unit) {
    return unit + m->units[u].tensors[k].offset;
}

GptEmbedView gpt_embed_view(const Gpt *m, float *unit) {
    GptEmbedView v = {tensor_of(m, 0, 0, unit), tensor_of(m, 0, 1, unit)};
    return v;
}

GptBlockView gpt_block_view(const Gpt *m, float *unit) {
    // Every block has the same layout; block 0's offsets serve them all.
    float *t[16];
    for (int k = 0; k < 16; k++) t[k] = tensor_of(m, 1, k, unit);
    GptBlockView v = {t[0], t[1], t[2], t[3], t[4], t[5], t[6], t[7],
                      t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15]};
    return v;
}

GptHeadView gpt_head_view(const Gpt *m, float *unit) {
    int u = m->cfg.L + 1;
    GptHeadView v = {tensor_of(m, u, 0, unit), tensor_of(m, u, 1, unit), tensor_of(m, u, 2, unit)};
    return v;
}

size_t gpt_elem_size(const Gpt *m) { return m->cfg.precision == GPT_BF16 ? sizeof(bf16) : sizeof(float); }

const char *gpt_recompute_name(GptRecompute r) {
    return r == GPT_RECOMPUTE_FULL ? "full" : r == GPT_RECOMPUTE_SELECTIVE ? "selective" : "none";
}

GptRecompute gpt_recompute_parse(const char *name) {
    CHECK(!name || !strcmp(name, "none") || !strcmp(name, "selective") || !strcmp(name, "full"),
          "recompute '%s' is none of none, selective, full", name);
    return !name ? GPT_RECOMPUTE_NONE
           : !strcmp(name, "full") ? GPT_RECOMPUTE_FULL
           : !strcmp(name, "selective") ? GPT_RECOMPUTE_SELECTIVE
                                         : GPT_RECOMPUTE_NONE;
}

GptPrecision gpt_grad_precision(const Gpt *m) { return m->cfg.grads_fp32 ? GPT_FP32 : m->cfg.precision; }

size_t gpt_grad_elem_size(const Gpt *m) { return gpt_grad_precision(m) == GPT_BF16 ? sizeof(bf16) : sizeof(float); }

bool gpt_grads_fp32_parse(GptPrecision p, const char *grad_reduce) {
    return p == GPT_BF16 && grad_reduce && strcmp(grad_reduce, "fp32") == 0;
}

const char *gpt_precision_name(GptPrecision p) { return p == GPT_BF16 ? "bf16" : "fp32"; }

GptPrecision gpt_precision_parse(const char *name) {
    CHECK(!name || strcmp(name, "fp32") == 0 || strcmp(name, "bf16") == 0, "precision '%s' is neither fp32 nor bf16",
          name);
    return name && strcmp(name, "bf16") == 0 ? GPT_BF16 : GPT_FP32;
}

static void **alloc_units(const Gpt *m, size_t elem, MemCategory cat, const char *what) {
    void **units = calloc((size_t)m->nunits, sizeof *units);
    CHECK(units, "out of memory");
    for (int u = 0; u < m->nunits; u++) {
        char name[64];
        snprintf(name, sizeof name, "%s %s", m->units[u].name, what);
        units[u] = mem_alloc(m->units[u].size * elem, cat, name);
    }
    return units;
}

float **gpt_alloc_units(const Gpt *m, MemCategory cat, const char *what) {
    return (float **)alloc_units(m, sizeof(float), cat, what);
}

void **gpt_alloc_run_units(const Gpt *m, MemCategory cat, const char *what) {
    return alloc_units(m, gpt_elem_size(m), cat, what);
}

void **gpt_alloc_grad_units(const Gpt *m, MemCategory cat, const char *what) {
    return alloc_units(m, gpt_grad_elem_size(m), cat, what);
}

void gpt_free_units(const Gpt *m, void *units) {
    void **list = units;
    if (!list) return;
    for (int u = 0; u < m->nunits; u++) mem_free(list[u]);
    free(list);
}

// ---- initialisation --------------------------------------------------------

void gpt_init_slice_host(const Gpt *m, int u, float *host, size_t offset, size_t count) {
    CHECK(u >= 0 && u < m->nunits, "unit %d does not exist", u);
    const GptUnit *unit = &m->units[u];
    CHECK(offset + count <= unit->size, "slice [%zu, %zu) is outside unit %s (%zu floats)", offset,
          offset + count, unit->name, unit->size);
    for (int k = 0; k < unit->ntensors; k++) {
        const GptTensor *t = &unit->tensors[k];
        size_t lo = offset > t->offset ? offset : t->offset;
        size_t hi = offset + count < t->offset + t->count ? offset + count : t->offset + t->count;
        if (lo >= hi) continue;
        float *dst = host + (lo - offset);
        if (t->init_std > 0)
            rng_fill_normal(dst, hi - lo, m->cfg.seed, rng_stream(RNG_INIT, (uint32_t)(32 * u + k), 0),
                            lo - t->offset, 0.0f, t->init_std);
        else
            for (size_t i = 0; i < hi - lo; i++) dst[i] = t->init_value;
    }
}

void gpt_init_slice(const Gpt *m, int u, float *out, size_t offset, size_t count) {
    // Made on the host, tensor by tensor, then copied to the device.
    float *host = malloc((count ? count : 1) * sizeof(float));
    CHECK(host, "out of memory initialising %s", m->units[u].name);
    gpt_init_slice_host(m, u, host, offset, count);
    mem_from_host(out, host, count * sizeof(float));
    free(host);
}

void gpt_init_units(const Gpt *m, float **params) {
    for (int u = 0; u < m->nunits; u++) gpt_init_slice(m, u, params[u], 0, m->units[u].size);
}

void gpt_init_run_slice(const Gpt *m, int u, void *out, size_t offset, size_t count) {
    if (m->cfg.precision == GPT_FP32) {
        gpt_init_slice(m, u, out, offset, count);
        return;
    }
    // bf16: made in fp32 on the host and rounded there, then copied.
    float *f = malloc((count ? count : 1) * sizeof *f);
    bf16 *h = malloc((count ? count : 1) * sizeof *h);
    CHECK(f && h, "out of memory initialising %s", m->units[u].name);
    gpt_init_slice_host(m, u, f, offset, count);
    for (size_t i = 0; i < count; i++) h[i] = bf16_from_float(f[i]);
    mem_from_host(out, h, count * sizeof *h);
    free(f);
    free(h);
}

void gpt_init_run_units(const Gpt *m, void **params) {
    for (int u = 0; u < m->nunits; u++) gpt_init_run_slice(m, u, params[u], 0, m->units[u].size);
}

// ---- activations -----------------------------------------------------------

static float *acts(size_t n, const char *name) { return mem_alloc_floats(n, MEM_ACTS, name); }
// A tensor kept between a pass and the next, in the model's precision.
static void *kept(const Gpt *m, size_t n, const char *name) { return mem_alloc(n * gpt_elem_size(m), MEM_ACTS, name); }

// What a set for [u0, u1) holds, in floats (and ints), for one function to
// allocate and another to count.
static bool has_stream(const Gpt *m, const GptActs *a, int u) {
    // stream[u]: the input of unit u, from u0's (received) to u1's (sent),
    // where it exists (not the tokens' slot 0, not past the head).
    return u >= a->u0 && u <= a->u1 && u >= 1 && u <= m->nunits - 1;
}

// A block's activations (ACTS, of the model's precision where kept), the
// probabilities among them when `att`.
static void block_set_alloc(const Gpt *m, GptBlockActs *b, bool att) {
    const GptConfig c = m->cfg;
    size_t BT = (size_t)c.B * c.T, BTC = BT * c.C;
    b->ln1 = kept(m, BTC, "ln1");
    b->ln1_mean = acts(BT, "ln1 mean");
    b->ln1_rstd = acts(BT, "ln1 rstd");
    b->q = kept(m, BTC, "q");
    b->k = kept(m, BTC, "k");
    b->v = kept(m, BTC, "v");
    if (att) b->att = kept(m, (size_t)c.B * c.NH * c.T * c.T, "attention");
    b->y = kept(m, BTC, "attention out");
    b->mid = kept(m, BTC, "residual mid");
    b->ln2 = kept(m, BTC, "ln2");
    b->ln2_mean = acts(BT, "ln2 mean");
    b->ln2_rstd = acts(BT, "ln2 rstd");
    b->h = kept(m, 4 * BTC, "mlp hidden");
    b->hg = kept(m, 4 * BTC, "mlp gelu");
}

static void block_set_free(GptBlockActs *b) {
    void *all[] = {b->ln1, b->ln1_mean, b->ln1_rstd, b->q,        b->k,        b->v, b->att,
                   b->y,   b->mid,      b->ln2,      b->ln2_mean, b->ln2_rstd, b->h, b->hg};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) mem_free(all[i]);
    *b = (GptBlockActs){0};
}

GptActs *gpt_acts_create(const Gpt *m, int u0, int u1) {
    CHECK(0 <= u0 && u0 < u1 && u1 <= m->nunits, "units [%d, %d) are not a range of the model's %d", u0, u1,
          m->nunits);
    const GptConfig c = m->cfg;
    size_t BT = (size_t)c.B * c.T, BTC = BT * c.C;
    GptActs *a = calloc(1, sizeof *a);
    CHECK(a, "out of memory");
    a->u0 = u0, a->u1 = u1;
    if (u0 == 0) a->tokens = mem_alloc(BT * sizeof(int), MEM_ACTS, "tokens");
    if (u1 == m->nunits) a->targets = mem_alloc(BT * sizeof(int), MEM_ACTS, "targets");
    a->stream = calloc((size_t)m->nunits + 1, sizeof *a->stream);
    a->dstream = calloc((size_t)m->nunits + 1, sizeof *a->dstream);
    a->blocks = calloc((size_t)(c.L > 0 ? c.L : 1), sizeof *a->blocks);
    a->saved = calloc((size_t)m->nunits, sizeof *a->saved);
    a->saved_pending = calloc((size_t)m->nunits, sizeof *a->saved_pending);
    CHECK(a->stream && a->dstream && a->blocks && a->saved && a->saved_pending, "out of memory");
    for (int u = 0; u <= m->nunits; u++)
        if (has_stream(m, a, u)) {
            a->stream[u] = kept(m, BTC, "residual stream");
            a->dstream[u] = kept(m, BTC, "residual stream gradient");
        }
    for (int l = 0; l < c.L; l++) {
        // Under full recomputation a block keeps nothing of its own (its
        // input is the stream); selective keeps all but the probabilities.
        if (l + 1 < u0 || l + 1 >= u1 || c.recompute == GPT_RECOMPUTE_FULL) continue;
        block_set_alloc(m, &a->blocks[l], c.recompute == GPT_RECOMPUTE_NONE);
    }
    if (u1 == m->nunits) {
        a->lnf = kept(m, BTC, "lnf");
        a->lnf_mean = acts(BT, "lnf mean");
        a->lnf_rstd = acts(BT, "lnf rstd");
        if (c.precision == GPT_FP32) a->logits = acts(BT * c.V, "logits");
        a->probs = kept(m, BT * c.V, "probs");
        a->losses = acts(BT, "losses");
    }
    return a;
}

double gpt_acts_bytes(const Gpt *m, int u0, int u1) {
    size_t before = mem_live(MEM_ACTS);
    GptActs *a = gpt_acts_create(m, u0, u1);
    double bytes = (double)(mem_live(MEM_ACTS) - before);
    gpt_acts_free(m, a);
    return bytes;
}

void gpt_acts_free(const Gpt *m, GptActs *a) {
    if (!a) return;
    mem_free(a->tokens);
    mem_free(a->targets);
    for (int u = 0; u <= m->nunits; u++) {
        mem_free(a->stream[u]);
        mem_free(a->dstream[u]);
    }
    for (int l = 0; l < m->cfg.L; l++) block_set_free(&a->blocks[l]);
    for (int u = 0; a->saved && u < m->nunits; u++) mem_free(a->saved[u]);   // (a set made by hand may have none)
    free(a->saved);
    free(a->saved_pending);
    void *rest[] = {a->lnf, a->lnf_mean, a->lnf_rstd, a->logits, a->probs, a->losses};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    free(a->stream);
    free(a->dstream);
    free(a->blocks);
    free(a);
}

void gpt_alloc_scratch(Gpt *m) {
    CHECK(!m->s_c, "gpt_alloc_scratch called twice");
    const GptConfig c = m->cfg;
    size_t BT = (size_t)c.B * c.T, BTC = BT * c.C;
    m->s_c = acts(BTC, "scratch");
    m->s_c2 = acts(BTC, "scratch");
    m->s_4c = acts(4 * BTC, "scratch");
    m->s_4c2 = acts(4 * BTC, "scratch");
    m->s_att = acts((size_t)c.B * c.NH * c.T * c.T, "scratch");
    m->s_dq = acts(BTC, "scratch");
    m->s_dk = acts(BTC, "scratch");
    m->s_dv = acts(BTC, "scratch");
    m->s_logits = acts(BT * c.V, "scratch");
    if (c.precision == GPT_BF16) {
        size_t unit = 0;
        for (int u = 0; u < m->nunits; u++) unit = m->units[u].size > unit ? m->units[u].size : unit;
        m->s_x = acts(BTC, "scratch");
        m->s_y = acts(BTC, "scratch");
        m->s_h = acts(4 * BTC, "scratch");
        m->s_att2 = acts((size_t)c.B * c.NH * c.T * c.T, "scratch");
        m->s_probs = acts(BT * c.V, "scratch");
        m->s_unit = acts(unit, "scratch: the unit widened");
        m->s_gunit = acts(unit, "scratch: the unit's fp32 gradient");
        m->s_b16 = mem_alloc_bf16(BT * (size_t)(4 * c.C > c.V ? 4 * c.C : c.V), MEM_ACTS, "scratch");
    }
    // Recomputation's one shared set (gpt.h).
    if (c.recompute == GPT_RECOMPUTE_FULL && c.L > 0) block_set_alloc(m, &m->rc, true);
    if (c.recompute == GPT_RECOMPUTE_SELECTIVE && c.L > 0) m->rc.att = kept(m, (size_t)c.B * c.NH * c.T * c.T, "attention, recomputed");
}

void gpt_alloc_acts(Gpt *m) {
    CHECK(!m->acts, "gpt_alloc_acts called twice");
    m->acts = gpt_acts_create(m, 0, m->nunits);
    gpt_alloc_scratch(m);
}

static void free_acts(Gpt *m) {
    gpt_acts_free(m, m->acts);
    m->acts = NULL;
    void *rest[] = {m->s_c,  m->s_c2,  m->s_4c,    m->s_4c2,   m->s_att,  m->s_dq,     m->s_dk,
                    m->s_dv, m->s_logits, m->s_x,  m->s_y,  m->s_h, m->s_att2, m->s_probs, m->s_unit,
                    m->s_gunit, m->s_b16};
    for (size_t i = 0; i < sizeof rest / sizeof rest[0]; i++) mem_free(rest[i]);
    block_set_free(&m->rc);
    m->s_c = NULL;
}

void gpt_check_tokens(const int *x, const int *y, size_t n, int V) {
    for (size_t i = 0; i < n; i++)
        CHECK(x[i] >= 0 && x[i] < V && y[i] >= 0 && y[i] < V, "token %d or %d at %zu is outside the vocabulary of %d",
              x[i], y[i], i, V);
}

void gpt_acts_set_batch(const Gpt *m, GptActs *a, const int *x, const int *y, int step, int row0,
                        float loss_scale) {
    size_t BT = (size_t)m->cfg.B * m->cfg.T;
    gpt_check_tokens(x, y, BT, m->cfg.V);
    if (a->tokens) mem_from_host(a->tokens, x, BT * sizeof(int));
    if (a->targets) mem_from_host(a->targets, y, BT * sizeof(int));
    a->step = step;
    a->row0 = row0;
    a->loss_scale = loss_scale;
}

void gpt_set_batch(Gpt *m, const int *x, const int *y, int step, int row0, float loss_scale) {
    CHECK(m->acts, "gpt_set_batch before gpt_alloc_acts");
    gpt_acts_set_batch(m, m->acts, x, y, step, row0, loss_scale);
}

// ---- precision: what the ops read and write ---------------------------------
//
// The ops compute in fp32. In fp32 they read and write the kept tensors
// themselves; in bf16 (GPT_BF16) a kept tensor is widened into fp32 scratch
// for the ops that read it (rd), an op writes into fp32 scratch (wr) and
// the result is rounded into the kept tensor (keep), and what comes after
// reads the rounded tensor, as the backward pass will. The matrix products
// take the bf16 tensors and weights themselves (mm_forward, mm_backward).
// In fp32 each helper is the plain call, so fp32 runs are the same to the bit.

static bool in_bf16(const Gpt *m) { return m->cfg.precision == GPT_BF16; }

// A kept tensor of n elements as an op reads it (fp32).
static const float *rd(const Gpt *m, const void *t, size_t n, float *scratch) {
    if (!in_bf16(m)) return t;
    ops_from_bf16(scratch, t, n);
    return scratch;
}

// Where an op writes a tensor to keep: the tensor (fp32), or scratch that keep() rounds into it (bf16).
static float *wr(const Gpt *m, void *t, float *scratch) { return in_bf16(m) ? scratch : t; }

static void keep(const Gpt *m, void *t, const float *v, size_t n) {
    if (in_bf16(m)) ops_to_bf16(t, v, n);
}

// The unit's parameters as the ops read them: the unit (fp32), or its
// widening in s_unit (bf16), the bf16 unit noted for the products' weights.
static float *unit_params(Gpt *m, int u, const void *params) {
    if (!in_bf16(m)) return (float *)params;
    m->run16 = params;
    m->run_size = m->units[u].size;
    ops_from_bf16(m->s_unit, params, m->units[u].size);
    return m->s_unit;
}

// A weight matrix of the unit running, as the bf16 products take it: the
// same element of the bf16 unit as w is of its widening.
static const bf16 *weight16(const Gpt *m, const float *w) {
    CHECK(m->run16 && w >= m->s_unit && w < m->s_unit + m->run_size, "a bf16 product's weights outside the unit running");
    return m->run16 + (w - m->s_unit);
}

// Where the unit's backward adds its parameter gradients: grads (fp32, or
// bf16's under grads_fp32), or a zeroed fp32 unit (bf16) that
// unit_grads_done then adds into grads.
static float *unit_grads(Gpt *m, int u, void *grads) {
    if (gpt_grad_precision(m) == GPT_FP32) return grads;
    ops_fill(m->s_gunit, 0, m->units[u].size);
    return m->s_gunit;
}

static void unit_grads_done(Gpt *m, int u, void *grads) {
    if (gpt_grad_precision(m) == GPT_BF16) ops_accumulate_bf16(grads, m->s_gunit, m->units[u].size);
}

// out (M, N) = inp (M, K) @ w (K, N) + bias: inp a kept tensor, w a view of the unit running.
static void mm_forward(const Gpt *m, float *out, const void *inp, const float *w, const float *bias, int M, int K,
                       int N) {
    if (in_bf16(m)) ops_matmul_forward_bf16(out, inp, weight16(m, w), bias, M, K, N);
    else ops_matmul_forward(out, inp, w, bias, M, K, N);
}

// The same product kept: out a kept tensor, made in fp32 scratch in bf16.
static void mm_keep(const Gpt *m, void *out, const void *inp, const float *w, const float *bias, int M, int K,
                    int N, float *scratch) {
    float *o = wr(m, out, scratch);
    mm_forward(m, o, inp, w, bias, M, K, N);
    keep(m, out, o, (size_t)M * N);
}

// Its backward (ops_matmul_backward's +=); in bf16 the fp32 dout is rounded
// to bf16 first, as the product's input. w is read for dinp only (W's
// calls pass NULL for both).
static void mm_backward(Gpt *m, float *dinp, float *dw, float *dbias, const float *dout, const void *inp,
                        const float *w, int M, int K, int N) {
    if (in_bf16(m)) {
        ops_to_bf16(m->s_b16, dout, (size_t)M * N);
        ops_matmul_backward_bf16(dinp, dw, dbias, m->s_b16, inp, dinp ? weight16(m, w) : NULL, M, K, N);
    } else {
        ops_matmul_backward(dinp, dw, dbias, dout, inp, w, M, K, N);
    }
}

// The backward pass whole, or its B part (gpt.h's split): the input
// gradient alone, the output gradients the W part needs kept.
typedef enum { BWD_ALL, BWD_INPUT } BwdPart;

// A product's backward, or under BWD_INPUT its input gradient alone, its
// output gradient kept in `save` for W (which makes the weight's and the
// bias's from it: the same call with dinp NULL, so the same bits).
static void mm_backward_part(Gpt *m, BwdPart part, float *save, float *dinp, float *dw, float *dbias,
                             const float *dout, const void *inp, const float *w, int M, int K, int N) {
    if (part == BWD_INPUT) {
        mem_copy(save, dout, (size_t)M * N * sizeof(float));
        dw = NULL, dbias = NULL;
    }
    mm_backward(m, dinp, dw, dbias, dout, inp, w, M, K, N);
}

// The same for a LayerNorm: under BWD_INPUT dx alone, dout kept for W.
static void ln_backward_part(BwdPart part, float *save, float *dx, float *dw, float *db, const float *dout,
                             const float *x, const float *w, const float *mean, const float *rstd, int M, int C) {
    if (part == BWD_INPUT) {
        mem_copy(save, dout, (size_t)M * C * sizeof(float));
        dw = NULL, db = NULL;
    }
    ops_layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, M, C);
}

// What a unit's B keeps for its W, fp32 (gpt.h): a block's output gradients
// of its products and LayerNorms, 11 (B, T, C) in all; the head's of
// lm_head (B, T, V) and of its LayerNorm (B, T, C); nothing of the
// embeddings' (their W reads dstream[1]).
typedef struct {
    float *d2, *d1, *dln2, *dwo, *dq, *dk, *dv, *dln1;   // (B, T, C), d1 (B, T, 4C)
} BlockSaved;

static size_t saved_floats(const Gpt *m, int u) {
    const GptConfig c = m->cfg;
    size_t BT = (size_t)c.B * c.T;
    switch (m->units[u].kind) {
    case UNIT_BLOCK: return 11 * BT * c.C;
    case UNIT_HEAD: return BT * ((size_t)c.V + c.C);
    default: return 0;
    }
}

static BlockSaved block_saved(const Gpt *m, float *base) {
    size_t BTC = (size_t)m->cfg.B * m->cfg.T * m->cfg.C;
    BlockSaved v = {base, base + BTC, base + 5 * BTC, base + 6 * BTC, base + 7 * BTC, base + 8 * BTC,
                    base + 9 * BTC, base + 10 * BTC};
    return v;
}

// ---- forward and backward --------------------------------------------------

static DropoutKey dropout_key(const Gpt *m, const GptActs *a, int layer, int site) {
    DropoutKey k = {.seed = m->cfg.seed, .layer = layer, .site = site, .step = a->step,
                    .row0 = a->row0, .t0 = 0, .c0 = 0, .Tg = m->cfg.T, .Cg = m->cfg.C};
    return k;
}

static void embed_forward(Gpt *m, GptActs *a, const void *params) {
    const GptConfig c = m->cfg;
    const size_t BTC = (size_t)c.B * c.T * c.C;
    GptEmbedView p = gpt_embed_view(m, unit_params(m, 0, params));
    float *out = wr(m, a->stream[1], m->s_x);   // (B, T, C)
    if (c.dropout > 0) {
        ops_embedding_forward(m->s_c, a->tokens, p.wte, p.wpe, c.B, c.T, c.C, 0);
        ops_dropout_forward(out, m->s_c, c.dropout, dropout_key(m, a, 0, 0), c.B, c.T, c.C);
    } else {
        ops_embedding_forward(out, a->tokens, p.wte, p.wpe, c.B, c.T, c.C, 0);
    }
    keep(m, a->stream[1], out, BTC);
}

static void embed_backward(Gpt *m, GptActs *a, void *grads) {
    const GptConfig c = m->cfg;
    const size_t BTC = (size_t)c.B * c.T * c.C;
    GptEmbedView g = gpt_embed_view(m, unit_grads(m, 0, grads));
    const float *dout = rd(m, a->dstream[1], BTC, m->s_x);
    if (c.dropout > 0) {
        ops_fill(m->s_c, 0, BTC);
        ops_dropout_backward(m->s_c, dout, c.dropout, dropout_key(m, a, 0, 0), c.B, c.T, c.C);
        dout = m->s_c;
    }
    ops_embedding_backward(g.wte, g.wpe, dout, a->tokens, c.B, c.T, c.C, 0);
    unit_grads_done(m, 0, grads);
}

// x_out = x + dropout(branch): the residual add, with the branch's dropout.
static void residual(Gpt *m, const GptActs *a, float *x_out, const float *x, const float *branch, int layer,
                     int site) {
    const GptConfig c = m->cfg;
    size_t BTC = (size_t)c.B * c.T * c.C;
    if (c.dropout > 0) {
        ops_dropout_forward(m->s_c2, branch, c.dropout, dropout_key(m, a, layer, site), c.B, c.T, c.C);
        branch = m->s_c2;
    }
    ops_add(x_out, x, branch, BTC);
}

// The activations block u's passes use: its own (s->blocks), or, where they
// are recomputed, the shared set (gpt.h).
static GptBlockActs block_acts(const Gpt *m, const GptActs *s, int u) {
    if (m->cfg.recompute == GPT_RECOMPUTE_FULL) return m->rc;
    GptBlockActs a = s->blocks[u - 1];
    if (m->cfg.recompute == GPT_RECOMPUTE_SELECTIVE) a.att = m->rc.att;
    return a;
}

// `again`: full recomputation's second forward pass, at the start of the
// backward pass: the activations the backward reads, up to the MLP's GELU
// (not its second product, nor the block's output, which the next block
// has used already).
static void block_forward(Gpt *m, GptActs *s, int u, const void *params, bool again) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T, C = c.C;
    const size_t BTC = (size_t)M * C, BHTT = (size_t)c.B * c.NH * c.T * c.T;
    GptBlockView p = gpt_block_view(m, unit_params(m, u, params));
    GptBlockActs set = block_acts(m, s, u), *a = &set;
    const float *x = rd(m, s->stream[u], BTC, m->s_x);   // (B, T, C)

    float *ln1 = wr(m, a->ln1, m->s_c);
    ops_layernorm_forward(ln1, a->ln1_mean, a->ln1_rstd, x, p.ln1w, p.ln1b, M, C);
    keep(m, a->ln1, ln1, BTC);
    mm_keep(m, a->q, a->ln1, p.wq, p.bq, M, C, C, m->s_c);
    mm_keep(m, a->k, a->ln1, p.wk, p.bk, M, C, C, m->s_c);
    mm_keep(m, a->v, a->ln1, p.wv, p.bv, M, C, C, m->s_c);
    float *y = wr(m, a->y, m->s_c), *att = wr(m, a->att, m->s_att);
    ops_attention_forward(y, att, rd(m, a->q, BTC, m->s_dq), rd(m, a->k, BTC, m->s_dk),
                          rd(m, a->v, BTC, m->s_dv), c.B, c.T, C, c.NH);
    keep(m, a->att, att, BHTT);
    keep(m, a->y, y, BTC);
    mm_forward(m, m->s_c, a->y, p.wo, p.bo, M, C, C);
    float *mid = wr(m, a->mid, m->s_y);
    residual(m, s, mid, x, m->s_c, u, 1);
    keep(m, a->mid, mid, BTC);

    const float *mid32 = rd(m, a->mid, BTC, m->s_y);
    float *ln2 = wr(m, a->ln2, m->s_c);
    ops_layernorm_forward(ln2, a->ln2_mean, a->ln2_rstd, mid32, p.ln2w, p.ln2b, M, C);
    keep(m, a->ln2, ln2, BTC);
    mm_keep(m, a->h, a->ln2, p.w1, p.b1, M, C, 4 * C, m->s_4c);
    float *hg = wr(m, a->hg, m->s_4c2);
    ops_gelu_forward(hg, rd(m, a->h, 4 * BTC, m->s_4c), 4 * BTC);
    keep(m, a->hg, hg, 4 * BTC);
    if (again) return;
    mm_forward(m, m->s_c, a->hg, p.w2, p.b2, M, 4 * C, C);
    float *out = wr(m, s->stream[u + 1], m->s_x);   // (B, T, C); x is read no more
    residual(m, s, out, mid32, m->s_c, u, 2);
    keep(m, s->stream[u + 1], out, BTC);
}

// The gradient reaching a dropped-out branch: dout through the same mask.
static const float *branch_grad(Gpt *m, const GptActs *a, const float *dout, int layer, int site) {
    const GptConfig c = m->cfg;
    if (c.dropout == 0) return dout;
    ops_fill(m->s_c2, 0, (size_t)c.B * c.T * c.C);
    ops_dropout_backward(m->s_c2, dout, c.dropout, dropout_key(m, a, layer, site), c.B, c.T, c.C);
    return m->s_c2;
}

// Selective recomputation: the probabilities again from the kept q and k
// (the attention's output again too, into scratch, and let go).
static void attention_again(Gpt *m, const GptBlockActs *a) {
    const GptConfig c = m->cfg;
    const size_t BTC = (size_t)c.B * c.T * c.C, BHTT = (size_t)c.B * c.NH * c.T * c.T;
    float *att = wr(m, a->att, m->s_att);
    ops_attention_forward(m->s_c2, att, rd(m, a->q, BTC, m->s_dq), rd(m, a->k, BTC, m->s_dk),
                          rd(m, a->v, BTC, m->s_dv), c.B, c.T, c.C, c.NH);
    keep(m, a->att, att, BHTT);
}

// Under BWD_INPUT: no parameter gradient (grads unused), the output
// gradients kept in s->saved[u] for block_weight.
static void block_backward(Gpt *m, GptActs *s, int u, const void *params, void *grads, BwdPart part) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T, C = c.C;
    const size_t BTC = (size_t)M * C, BHTT = (size_t)c.B * c.NH * c.T * c.T;
    if (c.recompute == GPT_RECOMPUTE_FULL) block_forward(m, s, u, params, true);
    GptBlockView p = gpt_block_view(m, unit_params(m, u, params));
    GptBlockView g = part == BWD_ALL ? gpt_block_view(m, unit_grads(m, u, grads)) : (GptBlockView){0};
    BlockSaved k = part == BWD_INPUT ? block_saved(m, s->saved[u]) : (BlockSaved){0};
    GptBlockActs set = block_acts(m, s, u), *a = &set;
    if (c.recompute == GPT_RECOMPUTE_SELECTIVE) attention_again(m, a);
    const float *dout = rd(m, s->dstream[u + 1], BTC, m->s_y);   // (B, T, C)
    float *dmid = m->s_c;                    // (B, T, C)
    float *dln = m->s_dq;                    // (B, T, C), reused below

    // MLP branch: out = mid + dropout(gelu(ln2(mid) @ w1 + b1) @ w2 + b2)
    const float *dbranch = branch_grad(m, s, dout, u, 2);
    ops_fill(m->s_4c, 0, 4 * BTC);
    mm_backward_part(m, part, k.d2, m->s_4c, g.w2, g.b2, dbranch, a->hg, p.w2, M, 4 * C, C);
    ops_fill(m->s_4c2, 0, 4 * BTC);
    ops_gelu_backward(m->s_4c2, m->s_4c, rd(m, a->h, 4 * BTC, m->s_h), 4 * BTC);
    ops_fill(dln, 0, BTC);
    mm_backward_part(m, part, k.d1, dln, g.w1, g.b1, m->s_4c2, a->ln2, p.w1, M, C, 4 * C);
    mem_copy(dmid, dout, BTC * sizeof(float));   // the residual path
    ln_backward_part(part, k.dln2, dmid, g.ln2w, g.ln2b, dln, rd(m, a->mid, BTC, m->s_x), p.ln2w, a->ln2_mean,
                     a->ln2_rstd, M, C);

    // Attention branch: mid = x + dropout(attention(ln1(x)) @ wo + bo)
    dbranch = branch_grad(m, s, dmid, u, 1);
    float *dy = m->s_4c;   // (B, T, C), the first part of a free scratch
    ops_fill(dy, 0, BTC);
    mm_backward_part(m, part, k.dwo, dy, g.wo, g.bo, dbranch, a->y, p.wo, M, C, C);
    ops_fill(m->s_dq, 0, BTC);
    ops_fill(m->s_dk, 0, BTC);
    ops_fill(m->s_dv, 0, BTC);
    // (bf16: q, k, v widened into the free s_4c2, the probabilities into s_att2)
    ops_attention_backward(m->s_dq, m->s_dk, m->s_dv, m->s_att, dy, rd(m, a->att, BHTT, m->s_att2),
                           rd(m, a->q, BTC, m->s_4c2), rd(m, a->k, BTC, m->s_4c2 + BTC),
                           rd(m, a->v, BTC, m->s_4c2 + 2 * BTC), c.B, c.T, C, c.NH);
    dln = m->s_4c2;        // (B, T, C)
    ops_fill(dln, 0, BTC);
    mm_backward_part(m, part, k.dq, dln, g.wq, g.bq, m->s_dq, a->ln1, p.wq, M, C, C);
    mm_backward_part(m, part, k.dk, dln, g.wk, g.bk, m->s_dk, a->ln1, p.wk, M, C, C);
    mm_backward_part(m, part, k.dv, dln, g.wv, g.bv, m->s_dv, a->ln1, p.wv, M, C, C);
    float *dx = wr(m, s->dstream[u], m->s_y);   // (B, T, C); dout is read no more
    mem_copy(dx, dmid, BTC * sizeof(float));     // the residual path
    ln_backward_part(part, k.dln1, dx, g.ln1w, g.ln1b, dln, rd(m, s->stream[u], BTC, m->s_x), p.ln1w, a->ln1_mean,
                     a->ln1_rstd, M, C);
    keep(m, s->dstream[u], dx, BTC);
    if (part == BWD_ALL) unit_grads_done(m, u, grads);
}

// A block's W: its parameter gradients from what its B kept and its
// activations, the same calls as the whole backward's with no input
// gradient (the tensors in the same order).
static void block_weight(Gpt *m, GptActs *s, int u, void *grads) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T, C = c.C;
    const size_t BTC = (size_t)M * C;
    GptBlockView g = gpt_block_view(m, unit_grads(m, u, grads));
    GptBlockActs set = block_acts(m, s, u), *a = &set;
    BlockSaved k = block_saved(m, s->saved[u]);
    mm_backward(m, NULL, g.w2, g.b2, k.d2, a->hg, NULL, M, 4 * C, C);
    mm_backward(m, NULL, g.w1, g.b1, k.d1, a->ln2, NULL, M, C, 4 * C);
    ops_layernorm_backward(NULL, g.ln2w, g.ln2b, k.dln2, rd(m, a->mid, BTC, m->s_x), NULL, a->ln2_mean,
                           a->ln2_rstd, M, C);
    mm_backward(m, NULL, g.wo, g.bo, k.dwo, a->y, NULL, M, C, C);
    mm_backward(m, NULL, g.wq, g.bq, k.dq, a->ln1, NULL, M, C, C);
    mm_backward(m, NULL, g.wk, g.bk, k.dk, a->ln1, NULL, M, C, C);
    mm_backward(m, NULL, g.wv, g.bv, k.dv, a->ln1, NULL, M, C, C);
    ops_layernorm_backward(NULL, g.ln1w, g.ln1b, k.dln1, rd(m, s->stream[u], BTC, m->s_x), NULL, a->ln1_mean,
                           a->ln1_rstd, M, C);
    unit_grads_done(m, u, grads);
}



static void head_forward(Gpt *m, GptActs *a, const void *params) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T;
    const size_t BTC = (size_t)M * c.C, MV = (size_t)M * c.V;
    const int u = c.L + 1;
    GptHeadView p = gpt_head_view(m, unit_params(m, u, params));
    const float *x = rd(m, a->stream[u], BTC, m->s_x);
    float *lnf = wr(m, a->lnf, m->s_c);
    ops_layernorm_forward(lnf, a->lnf_mean, a->lnf_rstd, x, p.lnfw, p.lnfb, M, c.C);
    keep(m, a->lnf, lnf, BTC);
    float *logits = in_bf16(m) ? m->s_logits : a->logits;   // bf16 keeps only the probabilities
    mm_forward(m, logits, a->lnf, p.lm_head, NULL, M, c.C, c.V);
    float *probs = wr(m, a->probs, m->s_probs);
    ops_crossentropy_forward(a->losses, probs, logits, a->targets, M, c.V);
    keep(m, a->probs, probs, MV);
}

static void head_backward(Gpt *m, GptActs *a, const void *params, void *grads, BwdPart part) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T, u = c.L + 1;
    const size_t BTC = (size_t)M * c.C, MV = (size_t)M * c.V;
    GptHeadView p = gpt_head_view(m, unit_params(m, u, params));
    GptHeadView g = part == BWD_ALL ? gpt_head_view(m, unit_grads(m, u, grads)) : (GptHeadView){0};
    float *saved = part == BWD_INPUT ? a->saved[u] : NULL;   // dlogits (B, T, V), then dlnf (B, T, C)
    ops_fill(m->s_logits, 0, MV);
    ops_crossentropy_backward(m->s_logits, rd(m, a->probs, MV, m->s_probs), a->targets, a->loss_scale, M, c.V);
    ops_fill(m->s_c, 0, BTC);
    mm_backward_part(m, part, saved, m->s_c, g.lm_head, NULL, m->s_logits, a->lnf, p.lm_head, M, c.C, c.V);
    float *dx = wr(m, a->dstream[u], m->s_y);
    ops_fill(dx, 0, BTC);
    ln_backward_part(part, saved ? saved + MV : NULL, dx, g.lnfw, g.lnfb, m->s_c, rd(m, a->stream[u], BTC, m->s_x),
                     p.lnfw, a->lnf_mean, a->lnf_rstd, M, c.C);
    keep(m, a->dstream[u], dx, BTC);
    if (part == BWD_ALL) unit_grads_done(m, u, grads);
}

static void head_weight(Gpt *m, GptActs *a, void *grads) {
    const GptConfig c = m->cfg;
    const int M = c.B * c.T, u = c.L + 1;
    const size_t BTC = (size_t)M * c.C, MV = (size_t)M * c.V;
    GptHeadView g = gpt_head_view(m, unit_grads(m, u, grads));
    mm_backward(m, NULL, g.lm_head, NULL, a->saved[u], a->lnf, NULL, M, c.C, c.V);
    ops_layernorm_backward(NULL, g.lnfw, g.lnfb, a->saved[u] + MV, rd(m, a->stream[u], BTC, m->s_x), NULL,
                           a->lnf_mean, a->lnf_rstd, M, c.C);
    unit_grads_done(m, u, grads);
}



static void check_unit(const Gpt *m, const GptActs *a, int u, const char *what) {
    CHECK(m->s_c, "%s before the scratch was allocated (gpt_alloc_acts or gpt_alloc_scratch)", what);
    CHECK(a, "%s without activations (gpt_alloc_acts, or a set from gpt_acts_create)", what);
    CHECK(u >= 0 && u < m->nunits, "unit %d does not exist (the model has %d)", u, m->nunits);
    CHECK(u >= a->u0 && u < a->u1, "%s: unit %d is not in this set's units [%d, %d)", what, u, a->u0, a->u1);
}

void gpt_acts_forward(Gpt *m, GptActs *a, int u, const void *params) {
    check_unit(m, a, u, "a unit's forward pass");
    switch (m->units[u].kind) {
    case UNIT_EMBED: embed_forward(m, a, params); break;
    case UNIT_BLOCK: block_forward(m, a, u, params, false); break;
    case UNIT_HEAD: head_forward(m, a, params); break;
    }
}

void gpt_acts_backward(Gpt *m, GptActs *a, int u, const void *params, void *grads) {
    check_unit(m, a, u, "a unit's backward pass");
    CHECK(!a->saved_pending[u], "unit %d's whole backward pass while its split one waits for its W "
          "(gpt_acts_backward_weight)", u);
    switch (m->units[u].kind) {
    case UNIT_EMBED: embed_backward(m, a, grads); break;
    case UNIT_BLOCK: block_backward(m, a, u, params, grads, BWD_ALL); break;
    case UNIT_HEAD: head_backward(m, a, params, grads, BWD_ALL); break;
    }
}

void gpt_acts_backward_input(Gpt *m, GptActs *a, int u, const void *params) {
    check_unit(m, a, u, "a unit's B pass");
    CHECK(m->cfg.recompute != GPT_RECOMPUTE_FULL, "the backward pass split into B and W under full "
          "recomputation: W reads the block's activations after B, which full recomputation no longer holds; "
          "run --recompute none or selective");
    CHECK(!a->saved_pending[u], "unit %d's B pass twice before its W", u);
    size_t n = saved_floats(m, u);
    if (n) a->saved[u] = mem_alloc_floats(n, MEM_ACTS, "output gradients kept for W");
    a->saved_pending[u] = true;
    switch (m->units[u].kind) {
    case UNIT_EMBED: break;   // nothing waits for an input gradient of the embeddings: all of it is W
    case UNIT_BLOCK: block_backward(m, a, u, params, NULL, BWD_INPUT); break;
    case UNIT_HEAD: head_backward(m, a, params, NULL, BWD_INPUT); break;
    }
}

void gpt_acts_backward_weight(Gpt *m, GptActs *a, int u, void *grads) {
    check_unit(m, a, u, "a unit's W pass");
    CHECK(a->saved_pending[u], "unit %d's W pass before its B pass (gpt_acts_backward_input)", u);
    switch (m->units[u].kind) {
    case UNIT_EMBED: embed_backward(m, a, grads); break;
    case UNIT_BLOCK: block_weight(m, a, u, grads); break;
    case UNIT_HEAD: head_weight(m, a, grads); break;
    }
    mem_free(a->saved[u]);
    a->saved[u] = NULL;
    a->saved_pending[u] = false;
}

double gpt_saved_bytes(const Gpt *m, int u0, int u1) {
    double floats = 0;
    for (int u = u0; u < u1; u++) floats += (double)saved_floats(m, u);
    return floats * sizeof(float);
}

void gpt_unit_forward(Gpt *m, int u, const void *params) { gpt_acts_forward(m, m->acts, u, params); }

void gpt_unit_backward(Gpt *m, int u, const void *params, void *grads) {
    gpt_acts_backward(m, m->acts, u, params, grads);
}

double gpt_acts_loss(const Gpt *m, const GptActs *a) {
    CHECK(a && a->losses, "the loss of a set without the head");
    size_t BT = (size_t)m->cfg.B * m->cfg.T;
    return ops_sum(a->losses, BT) / (double)BT;
}

double gpt_loss(const Gpt *m) { return gpt_acts_loss(m, m->acts); }

double gpt_forward(Gpt *m, void **params) {
    for (int u = 0; u < m->nunits; u++) gpt_unit_forward(m, u, params[u]);
    return gpt_loss(m);
}

void gpt_backward(Gpt *m, void **params, void **grads) {
    for (int u = m->nunits - 1; u >= 0; u--) gpt_unit_backward(m, u, params[u], grads[u]);
}

// ---- output ----------------------------------------------------------------

void gpt_dump_host_unit(const Gpt *m, DumpWriter *w, const char *prefix, int u, const float *host) {
    const GptUnit *unit = &m->units[u];
    for (int k = 0; k < unit->ntensors; k++) {
        const GptTensor *t = &unit->tensors[k];
        char name[128];
        snprintf(name, sizeof name, "%s/%s.%s", prefix, unit->name, t->name);
        uint64_t shape[2] = {(uint64_t)t->shape[0], (uint64_t)t->shape[1]};
        dump_f32(w, name, host + t->offset, t->ndim, shape);
    }
}

void gpt_dump_units(const Gpt *m, DumpWriter *w, const char *prefix, float **units) {
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        float *host = malloc(unit->size * sizeof(float));
        CHECK(host, "out of memory dumping %s", unit->name);
        mem_to_host(host, units[u], unit->size * sizeof(float));
        gpt_dump_host_unit(m, w, prefix, u, host);
        free(host);
    }
}

void gpt_dump_units_of(const Gpt *m, DumpWriter *w, const char *prefix, void **units, GptPrecision p) {
    if (p == GPT_FP32) {
        gpt_dump_units(m, w, prefix, (float **)units);
        return;
    }
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        bf16 *h = malloc(unit->size * sizeof *h);
        float *host = malloc(unit->size * sizeof *host);
        CHECK(h && host, "out of memory dumping %s", unit->name);
        mem_to_host(h, units[u], unit->size * sizeof *h);
        for (size_t i = 0; i < unit->size; i++) host[i] = bf16_to_float(h[i]);
        gpt_dump_host_unit(m, w, prefix, u, host);
        free(h);
        free(host);
    }
}

void gpt_dump_host_units(const Gpt *m, DumpWriter *w, const char *prefix, float **units) {
    for (int u = 0; u < m->nunits; u++) gpt_dump_host_unit(m, w, prefix, u, units[u]);
}

const char *gpt_describe(const Gpt *m, char *buf, size_t len) {
    snprintf(buf, len, "GPT %dL %dC %dH · %.2fM params", m->cfg.L, m->cfg.C, m->cfg.NH,
             (double)m->nparams / 1e6);
    return buf;
}
