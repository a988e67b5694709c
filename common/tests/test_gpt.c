// test_gpt.c: the whole model. Its gradient against finite differences, init
// slices against the whole, units one at a time against the whole model,
// micro-batch accumulation against the full batch, and a model cut into
// stages (activation sets of unit ranges) against the whole.
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "args.h"
#include "data.h"
#include "gpt.h"
#include "mem.h"
#include "ops.h"
#include "rng.h"
#include "testutil.h"
#include "train.h"

// A tiny model: every parameter's gradient can be probed.
static GptConfig tiny(float dropout) {
    GptConfig c = {.B = 2, .T = 5, .C = 8, .NH = 2, .L = 2, .V = 11, .dropout = dropout, .seed = 3};
    return c;
}

static void tiny_batch(const GptConfig *c, int *x, int *y) {
    for (int i = 0; i < c->B * c->T; i++) {
        x[i] = (int)(rng_u32(5, 0, (uint64_t)i) % (uint32_t)c->V);
        y[i] = (int)(rng_u32(5, 1, (uint64_t)i) % (uint32_t)c->V);
    }
}

// Parameters from normal(0, 0.3) (LayerNorm weights around 1): larger than
// the real init, so every path of the model carries a gradient well above
// the finite-difference noise.
static void big_params(const Gpt *m, float **params) {
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        rng_fill_normal(params[u], unit->size, 11, rng_stream(RNG_TEST, (uint32_t)u, 0), 0, 0.0f, 0.3f);
        for (int k = 0; k < unit->ntensors; k++)
            if (strstr(unit->tensors[k].name, "ln") && strstr(unit->tensors[k].name, ".w"))
                for (size_t i = 0; i < unit->tensors[k].count; i++) params[u][unit->tensors[k].offset + i] += 1.0f;
    }
}

static double loss_of(Gpt *m, float **params) { return gpt_forward(m, (void **)params); }

// A tiny model with large parameters, one batch, and the gradient of its loss.
static Gpt *tiny_with_gradients(GptConfig cfg, float ***params, float ***grads) {
    Gpt *m = gpt_create(&cfg);
    gpt_alloc_acts(m);
    *params = gpt_alloc_units(m, MEM_PARAMS, "params");
    *grads = gpt_alloc_units(m, MEM_GRADS, "grads");
    big_params(m, *params);
    int x[64], y[64];
    tiny_batch(&cfg, x, y);
    gpt_set_batch(m, x, y, 0, 0, 1.0f / (float)(cfg.B * cfg.T));
    gpt_forward(m, (void **)*params);
    gpt_backward(m, (void **)*params, (void **)*grads);
    return m;
}

// For each tensor, the derivative of the loss along a random direction d
// (unit norm over that tensor) by central differences, against g . d from
// the backward pass.
//
// Step and tolerance: the loss is ~2.5 and evaluated in fp32, so each
// evaluation carries a rounding error of a few ulps, ~1e-6 at most; with
// h = 1e-2 the difference quotient's rounding noise is at most
// 2e-6 / 2e-2 = 1e-4 and typically a quarter of that, and its truncation
// error is h^2/6 times the third derivative, a relative 1e-4 or so. The
// largest error measured on a correct model is 9e-6 (directional derivatives
// of 1e-3 to 6e-2), so the bound 5e-5 + 1e-3 |fd| leaves a margin of five
// while still catching a gradient that is 1% off in one block.
static int check_gradients(GptConfig cfg, char *report, size_t cap) {
    float **params, **grads;
    Gpt *m = tiny_with_gradients(cfg, &params, &grads);

    int bad = 0;
    size_t n = 0;
    report[0] = 0;
    const float h = 1e-2f;
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        for (int k = 0; k < unit->ntensors; k++) {
            const GptTensor *t = &unit->tensors[k];
            float *p = params[u] + t->offset;
            float *d = malloc(t->count * sizeof(float));
            float *saved = malloc(t->count * sizeof(float));
            rng_fill_normal(d, t->count, 13, rng_stream(RNG_TEST, (uint32_t)u, (uint32_t)k + 1), 0, 0, 1);
            double norm = 0, gd = 0;
            for (size_t i = 0; i < t->count; i++) norm += (double)d[i] * d[i];
            for (size_t i = 0; i < t->count; i++) {
                d[i] = (float)(d[i] / sqrt(norm));
                gd += (double)d[i] * grads[u][t->offset + i];
            }
            memcpy(saved, p, t->count * sizeof(float));
            for (size_t i = 0; i < t->count; i++) p[i] = saved[i] + h * d[i];
            double lp = loss_of(m, params);
            for (size_t i = 0; i < t->count; i++) p[i] = saved[i] - h * d[i];
            double lm = loss_of(m, params);
            memcpy(p, saved, t->count * sizeof(float));
            double fd = (lp - lm) / (2.0 * h);
            double err = fabs(fd - gd), bound = 5e-5 + 1e-3 * fabs(fd);
            if (getenv("GPT_FD_VERBOSE")) printf("%s.%s fd %.6g bw %.6g err %.2e\n", unit->name, t->name, fd, gd, err);
            if (err > bound) {
                bad++;
                n += (size_t)snprintf(report + n, n < cap ? cap - n : 0,
                                      "%s.%s: finite difference %.6g, backward %.6g\n", unit->name,
                                      t->name, fd, gd);
            }
            free(d);
            free(saved);
        }
    }
    gpt_free_units(m, params);
    gpt_free_units(m, grads);
    gpt_free(m);
    return bad;
}

START_TEST(whole_model_gradient_matches_finite_differences) {
    char report[4096];
    int bad = check_gradients(tiny(0.0f), report, sizeof report);
    ck_assert_msg(bad == 0, "%d tensors disagree:\n%s", bad, report);
}
END_TEST

START_TEST(gradient_with_dropout_matches_finite_differences) {
    // The masks depend on (seed, layer, site, step, position) only, so the
    // loss is a fixed function of the parameters and can be differentiated.
    char report[4096];
    int bad = check_gradients(tiny(0.2f), report, sizeof report);
    ck_assert_msg(bad == 0, "%d tensors disagree:\n%s", bad, report);
}
END_TEST

START_TEST(finite_differences_catch_a_wrong_gradient) {
    // Negative control: scale one tensor's gradient by 1.2 before comparing;
    // the same comparison must flag it. Done by hand here on one tensor.
    GptConfig cfg = tiny(0.0f);
    float **params, **grads;
    Gpt *m = tiny_with_gradients(cfg, &params, &grads);
    const GptTensor *t = &m->units[1].tensors[2];   // block0 attn.wq
    float *p = params[1] + t->offset;
    double gd = 0;
    const float h = 1e-2f;
    // Direction: the gradient itself (normalised), the most sensitive one.
    double norm = 0;
    for (size_t i = 0; i < t->count; i++) norm += (double)grads[1][t->offset + i] * grads[1][t->offset + i];
    norm = sqrt(norm);
    ck_assert(norm > 1e-3);
    for (size_t i = 0; i < t->count; i++) gd += 1.2 * grads[1][t->offset + i] * (grads[1][t->offset + i] / norm);
    for (size_t i = 0; i < t->count; i++) p[i] += h * (float)(grads[1][t->offset + i] / norm);
    double lp = gpt_forward(m, (void **)params);
    for (size_t i = 0; i < t->count; i++) p[i] -= 2 * h * (float)(grads[1][t->offset + i] / norm);
    double lm = gpt_forward(m, (void **)params);
    double fd = (lp - lm) / (2.0 * h);
    ck_assert_msg(fabs(fd - gd) > 5e-5 + 1e-3 * fabs(fd),
                  "a gradient 20%% too large passed: fd %g, wrong %g", fd, gd);
    gpt_free_units(m, params);
    gpt_free_units(m, grads);
    gpt_free(m);
}
END_TEST

START_TEST(init_slices_equal_the_whole) {
    GptConfig cfg = {.B = 1, .T = 16, .C = 32, .NH = 4, .L = 2, .V = 50, .seed = 99};
    Gpt *m = gpt_create(&cfg);
    float **whole = gpt_alloc_units(m, MEM_PARAMS, "whole");
    gpt_init_units(m, whole);
    long wrong = 0;
    for (int u = 0; u < m->nunits; u++) {
        size_t n = m->units[u].size;
        // Slices that cut across tensor boundaries, as ZeRO shards do.
        for (int parts = 1; parts <= 7; parts += 3)
            for (int r = 0; r < parts; r++) {
                size_t off = n * (size_t)r / (size_t)parts, end = n * (size_t)(r + 1) / (size_t)parts;
                float *slice = mem_alloc_floats(end - off + 1, MEM_OTHER, "slice");
                gpt_init_slice(m, u, slice, off, end - off);
                wrong += memcmp(slice, whole[u] + off, (end - off) * sizeof(float)) != 0;
                mem_free(slice);
            }
    }
    ck_assert_int_eq(wrong, 0);
    // The scales of docs/model.md: std 0.02, projections 0.02 / sqrt(2L),
    // LayerNorm weights 1, biases 0.
    GptBlockView b = gpt_block_view(m, whole[1]);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < cfg.C * cfg.C; i++) s1 += (double)b.wq[i] * b.wq[i];
    for (int i = 0; i < cfg.C * cfg.C; i++) s2 += (double)b.wo[i] * b.wo[i];
    s1 = sqrt(s1 / (cfg.C * cfg.C));
    s2 = sqrt(s2 / (cfg.C * cfg.C));
    ck_assert_msg(fabs(s1 - 0.02) < 0.002, "wq std %g, not 0.02", s1);
    ck_assert_msg(fabs(s2 - 0.01) < 0.001, "wo std %g, not 0.02 / sqrt(4)", s2);
    ck_assert_float_eq(b.ln1w[5], 1.0f);
    ck_assert_float_eq(b.bq[5], 0.0f);
    gpt_free_units(m, whole);
    gpt_free(m);
}
END_TEST

START_TEST(parameter_count_matches_the_formula) {
    GptConfig cfg = {.B = 1, .T = 64, .C = 128, .NH = 4, .L = 4, .V = 256, .seed = 1};
    Gpt *m = gpt_create(&cfg);
    size_t V = 256, T = 64, C = 128, L = 4;
    size_t psi = V * C + T * C + L * (12 * C * C + 13 * C) + 2 * C + C * V;
    ck_assert_uint_eq(m->nparams, psi);
    gpt_free(m);
}
END_TEST

// Relative Frobenius difference of two sets of units.
static double rel_diff(const Gpt *m, float **a, float **b) {
    double num = 0, den = 0;
    for (int u = 0; u < m->nunits; u++)
        for (size_t i = 0; i < m->units[u].size; i++) {
            double d = (double)a[u][i] - b[u][i];
            num += d * d;
            den += (double)b[u][i] * b[u][i];
        }
    return sqrt(num / den);
}

START_TEST(micro_batches_add_up_to_the_full_batch) {
    // The honest size of "the same up to summation order": accumulating the
    // gradient over K micro-batches reorders the sums over rows. Measured
    // here on the default lab model (printed), and bounded: fp32 has 6e-8
    // relative precision, and sums over up to 512 rows lose a few bits, so a
    // relative Frobenius difference below 1e-5 is expected; a wrong loss
    // scale (a factor K) or a missed micro-batch (1/K of the data) gives
    // differences of order 1.
    Args a = args_defaults();
    Trainer *full = train_create(&a, 1);
    double loss_full = train_grads(full);
    for (int k = 2; k <= 8; k *= 2) {
        Trainer *acc = train_create(&a, k);
        double loss_acc = train_grads(acc);
        double d = rel_diff(full->model, (float **)acc->grads, (float **)full->grads);
        printf("micro-batches %d: gradient rel. Frobenius difference %.2e, loss difference %.2e\n",
               k, d, fabs(loss_acc - loss_full));
        ck_assert_msg(d < 1e-5, "K = %d: gradients differ by %g", k, d);
        ck_assert_msg(fabs(loss_acc - loss_full) < 1e-5, "K = %d: loss differs by %g", k,
                      fabs(loss_acc - loss_full));
        train_free(acc);
    }
    // Negative control: one micro-batch left out (the others' gradients only)
    // is far outside the bound.
    Trainer *acc = train_create(&a, 4);
    train_grads(acc);
    Gpt *m = acc->model;
    int rows = m->cfg.B;
    for (int u = 0; u < m->nunits; u++) mem_zero(acc->grads[u], m->units[u].size * sizeof(float));
    for (int k = 0; k < 3; k++) {
        size_t off = (size_t)k * rows * a.seq;
        gpt_set_batch(m, acc->x + off, acc->y + off, 0, k * rows, 1.0f / (float)(a.batch * a.seq));
        gpt_forward(m, (void **)acc->params);
        gpt_backward(m, (void **)acc->params, (void **)acc->grads);
    }
    double d = rel_diff(full->model, (float **)acc->grads, (float **)full->grads);
    ck_assert_msg(d > 1e-2, "a missing micro-batch went unnoticed (difference %g)", d);
    train_free(acc);
    train_free(full);
}
END_TEST

START_TEST(training_steps_with_micro_batches_stay_together) {
    // Ten AdamW steps with K = 4 against K = 1: the parameters drift apart
    // only by rounding (Adam normalises each update, so tiny gradient
    // differences can move an element by up to lr per step; the relative
    // Frobenius difference stays far below lr * steps / |p|).
    Args a = args_defaults();
    a.steps = 10;
    Trainer *full = train_create(&a, 1);
    Trainer *acc = train_create(&a, 4);
    double max_loss_diff = 0;
    for (int s = 0; s < a.steps; s++) {
        double l1 = train_step(full), l2 = train_step(acc);
        if (fabs(l1 - l2) > max_loss_diff) max_loss_diff = fabs(l1 - l2);
    }
    double d = rel_diff(full->model, acc->params, full->params);
    printf("10 steps, micro-batches 4 vs 1: parameter rel. Frobenius difference %.2e, "
           "largest loss difference %.2e\n", d, max_loss_diff);
    ck_assert_msg(d < 1e-4, "parameters differ by %g after 10 steps", d);
    ck_assert_msg(max_loss_diff < 1e-4, "losses differ by %g", max_loss_diff);
    train_free(full);
    train_free(acc);
}
END_TEST

// A pipeline's view: the units cut into two stages, each with its own
// activation set, the stream between them copied across, must give the
// whole model's loss and gradients to the bit (the same operations in
// the same order), dropout included; in either precision (bf16: the stream
// and its gradient cross as 2-byte elements).
static void check_stage_sets(GptPrecision precision) {
    GptConfig c = tiny(0.1f);
    c.precision = precision;
    int x[10], y[10];
    tiny_batch(&c, x, y);
    Gpt *whole = gpt_create(&c), *cut = gpt_create(&c);
    const size_t E = gpt_elem_size(whole);
    float **master = gpt_alloc_units(whole, MEM_PARAMS, "params");
    void **params = gpt_alloc_run_units(whole, MEM_PARAMS, "params");
    void **g1 = gpt_alloc_run_units(whole, MEM_GRADS, "grads"), **g2 = gpt_alloc_run_units(whole, MEM_GRADS, "grads");
    big_params(whole, master);
    for (int u = 0; u < whole->nunits; u++) {
        if (precision == GPT_BF16) ops_to_bf16(params[u], master[u], whole->units[u].size);
        else mem_copy(params[u], master[u], whole->units[u].size * sizeof(float));
    }
    gpt_alloc_acts(whole);
    gpt_set_batch(whole, x, y, 3, 0, 0.1f);
    double l1 = gpt_forward(whole, params);
    gpt_backward(whole, params, g1);

    gpt_alloc_scratch(cut);
    int k = 2;   // units [0, 2) and [2, 4)
    GptActs *a = gpt_acts_create(cut, 0, k), *b = gpt_acts_create(cut, k, cut->nunits);
    ck_assert_ptr_null(a->targets);
    ck_assert_ptr_null(b->tokens);
    ck_assert_ptr_null(a->stream[k + 1]);
    gpt_acts_set_batch(cut, a, x, y, 3, 0, 0.1f);
    gpt_acts_set_batch(cut, b, x, y, 3, 0, 0.1f);
    size_t BTC = (size_t)c.B * c.T * c.C;
    for (int u = 0; u < k; u++) gpt_acts_forward(cut, a, u, params[u]);
    mem_copy(b->stream[k], a->stream[k], BTC * E);   // stage 0 sends, stage 1 receives
    for (int u = k; u < cut->nunits; u++) gpt_acts_forward(cut, b, u, params[u]);
    double l2 = gpt_acts_loss(cut, b);
    ck_assert_msg(l1 == l2, "the loss differs: %.9g and %.9g", l1, l2);
    for (int u = cut->nunits - 1; u >= k; u--) gpt_acts_backward(cut, b, u, params[u], g2[u]);
    mem_copy(a->dstream[k], b->dstream[k], BTC * E);   // and the gradient comes back
    for (int u = k - 1; u >= 0; u--) gpt_acts_backward(cut, a, u, params[u], g2[u]);
    for (int u = 0; u < whole->nunits; u++)
        ck_assert_msg(memcmp(g1[u], g2[u], whole->units[u].size * E) == 0, "unit %d's gradient differs", u);
    // The two sets hold what the whole set holds, and the stream between
    // them and its gradient twice (stage 0's output is stage 1's input).
    double whole_set = gpt_acts_bytes(cut, 0, cut->nunits);
    double two = gpt_acts_bytes(cut, 0, k) + gpt_acts_bytes(cut, k, cut->nunits);
    ck_assert_msg(fabs(two - whole_set - 2.0 * BTC * E) < 1, "sets of %g and %g bytes", two, whole_set);
    // Negative control: the gradient that did not come back leaves stage 0's
    // units with a different gradient.
    for (int u = 0; u < k; u++) mem_zero(g2[u], whole->units[u].size * E);
    mem_zero(a->dstream[k], BTC * E);
    for (int u = k - 1; u >= 0; u--) gpt_acts_backward(cut, a, u, params[u], g2[u]);
    ck_assert(memcmp(g1[1], g2[1], whole->units[1].size * E) != 0);
    gpt_acts_free(cut, a);
    gpt_acts_free(cut, b);
    gpt_free_units(whole, master);
    gpt_free_units(whole, params);
    gpt_free_units(whole, g1);
    gpt_free_units(whole, g2);
    gpt_free(whole);
    gpt_free(cut);
}

START_TEST(stage_sets_equal_the_whole_model) { check_stage_sets(GPT_FP32); }
END_TEST

START_TEST(bf16_stage_sets_equal_the_whole_model) { check_stage_sets(GPT_BF16); }
END_TEST

// bf16 training holds the ZeRO paper's 2 + 2 + 12 bytes a parameter, and
// its activation set keeps each kept tensor at 2 bytes: against the fp32
// set, counted from the shapes (gpt.h's GptActs), it holds 2 bytes less
// for each kept element and no fp32 logits.
START_TEST(bf16_memory_is_the_papers) {
    Args a = args_defaults();
    a.layers = 2;
    a.precision = "bf16";
    size_t before[MEM_NCAT];
    for (int k = 0; k < MEM_NCAT; k++) before[k] = mem_live((MemCategory)k);
    Trainer *t = train_create(&a, 1);
    double psi = (double)t->model->nparams;
    ck_assert_msg(mem_live(MEM_PARAMS) - before[MEM_PARAMS] == 2 * psi, "PARAMS %zu, 2Ψ = %g",
                  mem_live(MEM_PARAMS) - before[MEM_PARAMS], 2 * psi);
    ck_assert_msg(mem_live(MEM_GRADS) - before[MEM_GRADS] == 2 * psi, "GRADS %zu", mem_live(MEM_GRADS) - before[MEM_GRADS]);
    ck_assert_msg(mem_live(MEM_OPTIM) - before[MEM_OPTIM] == 12 * psi, "OPTIM %zu, 12Ψ = %g",
                  mem_live(MEM_OPTIM) - before[MEM_OPTIM], 12 * psi);
    GptConfig c = t->model->cfg;
    Gpt *f = gpt_create(&(GptConfig){.B = c.B, .T = c.T, .C = c.C, .NH = c.NH, .L = c.L, .V = c.V, .seed = c.seed});
    double BT = (double)c.B * c.T, BTC = BT * c.C, BHTT = (double)c.B * c.NH * c.T * c.T, L = c.L;
    double kept = L * (15 * BTC + BHTT) + 2 * (L + 1) * BTC + BTC + BT * c.V;
    double d = gpt_acts_bytes(f, 0, f->nunits) - gpt_acts_bytes(t->model, 0, t->model->nunits);
    ck_assert_msg(d == 2 * kept + 4 * BT * c.V, "the bf16 set is %g bytes smaller, %g expected", d,
                  2 * kept + 4 * BT * c.V);
    gpt_free(f);
    train_free(t);
}
END_TEST

// The bf16 model is the fp32 model rounded at 2^-8 at every kept tensor:
// on the same (bf16) weights and batch, its loss and gradient are the fp32
// model's within what that rounding makes (measured on the default model,
// 2 layers: loss 2e-6 relative, the whole gradient 0.38% relative
// Frobenius, its worst tensor 0.76%). The bounds: the loss within 1e-4
// relative, every tensor's gradient within 5% (the key biases, whose
// gradient is zero but for rounding, aside), the whole within 2%. Negative
// control: the same comparison catches one tensor's gradient 10% off.
static double tensor_rel(const Gpt *m, int u, const GptTensor *t, float **a, float **b) {
    double num = 0, den = 0;
    for (size_t i = t->offset; i < t->offset + t->count; i++) {
        double d = (double)a[u][i] - b[u][i];
        num += d * d, den += (double)b[u][i] * b[u][i];
    }
    (void)m;
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

START_TEST(bf16_model_is_the_fp32_model_rounded) {
    Args a = args_defaults();
    a.layers = 2;
    a.precision = "bf16";
    Trainer *h = train_create(&a, 1);
    a.precision = "fp32";
    Trainer *f = train_create(&a, 1);
    Gpt *m = f->model;
    for (int u = 0; u < m->nunits; u++) ops_from_bf16(f->params[u], h->w[u], m->units[u].size);   // the same weights
    double lh = train_grads(h), lf = train_grads(f);
    float **gh = gpt_alloc_units(m, MEM_OTHER, "widened");
    for (int u = 0; u < m->nunits; u++) ops_from_bf16(gh[u], h->grads[u], m->units[u].size);
    float **gf = (float **)f->grads;
    printf("bf16 against fp32, same weights: loss %.7f and %.7f (relative %.1e), gradient relative Frobenius %.2e\n",
           lh, lf, fabs(lh - lf) / lf, rel_diff(m, gh, gf));
    ck_assert_msg(fabs(lh - lf) < 1e-4 * lf, "losses %.7f and %.7f", lh, lf);
    ck_assert_msg(rel_diff(m, gh, gf) < 2e-2, "gradients differ by %g", rel_diff(m, gh, gf));
    double worst = 0;
    for (int u = 0; u < m->nunits; u++)
        for (int k = 0; k < m->units[u].ntensors; k++) {
            const GptTensor *t = &m->units[u].tensors[k];
            if (strstr(t->name, "attn.bk")) continue;   // zero but for rounding: softmax ignores it
            double r = tensor_rel(m, u, t, gh, gf);
            worst = r > worst ? r : worst;
            ck_assert_msg(r < 5e-2, "%s.%s: gradient %g relative away", m->units[u].name, t->name, r);
        }
    printf("worst tensor %.2e\n", worst);
    // Negative control: mlp.w1 of block 1 off by 10% is seen.
    const GptTensor *w1 = &m->units[2].tensors[12];
    ck_assert_str_eq(w1->name, "mlp.w1");
    for (size_t i = w1->offset; i < w1->offset + w1->count; i++) gh[2][i] *= 1.1f;
    ck_assert(tensor_rel(m, 2, w1, gh, gf) > 5e-2);
    gpt_free_units(m, gh);
    train_free(h);
    train_free(f);
}
END_TEST

// --grad-reduce fp32: the bf16 model's gradients kept in fp32, 4 psi of
// GRADS. Over one batch, rounded to bf16 they are the bf16 gradients to
// the bit: each element is the same fp32 sum, which bf16 gradients round
// once (ops_accumulate_bf16 into zeros).
START_TEST(bf16_with_fp32_gradients) {
    Args a = args_defaults();
    a.layers = 2;
    a.precision = "bf16";
    Trainer *h = train_create(&a, 1);
    a.grad_reduce = "fp32";
    size_t grads0 = mem_live(MEM_GRADS);
    Trainer *f = train_create(&a, 1);
    Gpt *m = f->model;
    double psi = (double)m->nparams;
    ck_assert_msg(mem_live(MEM_GRADS) - grads0 == 4 * psi, "GRADS %zu, 4 psi = %g", mem_live(MEM_GRADS) - grads0,
                  4 * psi);
    ck_assert(gpt_grad_precision(m) == GPT_FP32 && gpt_grad_elem_size(m) == 4);
    double lh = train_grads(h), lf = train_grads(f);
    ck_assert(lh == lf);   // the same forward pass
    size_t differ = 0;
    for (int u = 0; u < m->nunits; u++) {
        size_t k = m->units[u].size;
        bf16 *b = malloc(k * sizeof *b), *r = malloc(k * sizeof *r);
        float *g = malloc(k * sizeof *g);
        mem_to_host(b, h->grads[u], k * sizeof *b);
        mem_to_host(g, f->grads[u], k * sizeof *g);
        for (size_t i = 0; i < k; i++) r[i] = bf16_from_float(g[i]);
        differ += (size_t)(memcmp(b, r, k * sizeof *b) != 0);
        free(b), free(r), free(g);
    }
    ck_assert_msg(differ == 0, "%zu units' rounded fp32 gradients differ from the bf16 ones", differ);
    train_free(h);
    train_free(f);
}
END_TEST

// Recomputation is the same training to the bit: selective and full against
// none, fp32 and bf16, with dropout (its masks are keyed, so recomputed
// they are the same) and micro-batches, over 3 AdamW steps: losses,
// parameters and moments equal bit for bit. What each keeps, counted from
// the shapes (gpt.h): selective holds one block's probabilities (B NH T T)
// where none holds L; full holds one block's whole set where none holds L,
// and no block of its own.
static bool units_equal(const Gpt *m, void **a, void **b, size_t elem) {
    bool same = true;
    for (int u = 0; u < m->nunits; u++) {
        size_t n = m->units[u].size * elem;
        char *x = malloc(n), *y = malloc(n);
        mem_to_host(x, a[u], n);
        mem_to_host(y, b[u], n);
        same &= memcmp(x, y, n) == 0;
        free(x), free(y);
    }
    return same;
}

START_TEST(recomputation_is_the_same_training) {
    const char *precisions[] = {"fp32", "bf16"}, *modes[] = {"selective", "full"};
    for (int pi = 0; pi < 2; pi++) {
        Args a = args_defaults();
        a.layers = 2;
        a.dropout = 0.1;
        a.precision = precisions[pi];
        size_t before = mem_live(MEM_ACTS);
        Trainer *none = train_create(&a, 2);
        double acts_none = (double)(mem_live(MEM_ACTS) - before);
        double l0[3];
        for (int s = 0; s < 3; s++) l0[s] = train_step(none);
        const GptConfig c = none->model->cfg;
        size_t E = gpt_elem_size(none->model);
        double BT = (double)c.B * c.T, BTC = BT * c.C, BHTT = (double)c.B * c.NH * c.T * c.T;
        double block = (15 * BTC + BHTT) * (double)E + 4 * BT * 4;   // a block's set: kept tensors, LN statistics
        for (int mi = 0; mi < 2; mi++) {
            a.recompute = modes[mi];
            before = mem_live(MEM_ACTS);
            Trainer *t = train_create(&a, 2);
            double acts = (double)(mem_live(MEM_ACTS) - before);
            double saved = mi == 0 ? (c.L - 1) * BHTT * (double)E : (c.L - 1) * block;
            ck_assert_msg(acts_none - acts == saved, "%s %s: %g bytes fewer ACTS, %g expected", a.precision,
                          modes[mi], acts_none - acts, saved);
            for (int s = 0; s < 3; s++) {
                double l = train_step(t);
                ck_assert_msg(l == l0[s], "%s %s: step %d loss %.9g, without recomputation %.9g", a.precision,
                              modes[mi], s + 1, l, l0[s]);
            }
            ck_assert_msg(units_equal(t->model, t->w, none->w, E), "%s %s: the weights differ", a.precision,
                          modes[mi]);
            ck_assert_msg(units_equal(t->model, (void **)t->params, (void **)none->params, 4) &&
                              units_equal(t->model, (void **)t->m, (void **)none->m, 4) &&
                              units_equal(t->model, (void **)t->v, (void **)none->v, 4),
                          "%s %s: the master weights or the moments differ", a.precision, modes[mi]);
            train_free(t);
        }
        train_free(none);
    }
}
END_TEST

// The backward pass split into B and W (gpt.h) is the whole backward pass
// to the bit: two micro-batches, whole: forward and backward of the first,
// then of the second; split: both forwards, the Bs of the first and of the
// second (the second's B running on the scratch between the first's B and
// W), then the Ws in the micro-batches' order, each in the units' order
// (the reverse of B's), in fp32, bf16, bf16 with fp32 gradients, and under
// selective recomputation; dropout on. B keeps gpt_saved_bytes until W.
// Negative control: the second micro-batch's W left out.
static void check_split(GptConfig c) {
    int x[2][10], y[2][10];
    tiny_batch(&c, x[0], y[0]);
    for (int i = 0; i < 10; i++) x[1][i] = (x[0][i] * 7 + 3) % c.V, y[1][i] = (y[0][i] * 5 + 1) % c.V;
    Gpt *m = gpt_create(&c);
    gpt_alloc_scratch(m);
    const size_t E = gpt_grad_elem_size(m);
    float **master = gpt_alloc_units(m, MEM_PARAMS, "params");
    void **params = gpt_alloc_run_units(m, MEM_PARAMS, "params");
    void **g1 = gpt_alloc_grad_units(m, MEM_GRADS, "grads"), **g2 = gpt_alloc_grad_units(m, MEM_GRADS, "grads");
    big_params(m, master);
    for (int u = 0; u < m->nunits; u++) {
        if (c.precision == GPT_BF16) ops_to_bf16(params[u], master[u], m->units[u].size);
        else mem_copy(params[u], master[u], m->units[u].size * sizeof(float));
    }
    GptActs *a[2];
    for (int k = 0; k < 2; k++) {
        a[k] = gpt_acts_create(m, 0, m->nunits);
        gpt_acts_set_batch(m, a[k], x[k], y[k], 3, k * c.B, 0.05f);
    }
    for (int k = 0; k < 2; k++) {
        for (int u = 0; u < m->nunits; u++) gpt_acts_forward(m, a[k], u, params[u]);
        for (int u = m->nunits - 1; u >= 0; u--) gpt_acts_backward(m, a[k], u, params[u], g1[u]);
    }
    for (int k = 0; k < 2; k++)
        for (int u = 0; u < m->nunits; u++) gpt_acts_forward(m, a[k], u, params[u]);
    size_t before = mem_live(MEM_ACTS);
    for (int k = 0; k < 2; k++)
        for (int u = m->nunits - 1; u >= 0; u--) gpt_acts_backward_input(m, a[k], u, params[u]);
    double kept = (double)(mem_live(MEM_ACTS) - before);
    ck_assert_msg(kept == 2 * gpt_saved_bytes(m, 0, m->nunits), "B kept %g bytes for W, %g expected", kept,
                  2 * gpt_saved_bytes(m, 0, m->nunits));
    for (int k = 0; k < 2; k++)
        for (int u = 0; u < m->nunits; u++) gpt_acts_backward_weight(m, a[k], u, g2[u]);
    ck_assert_msg(mem_live(MEM_ACTS) == before, "W left %zu bytes", mem_live(MEM_ACTS) - before);
    for (int u = 0; u < m->nunits; u++)
        ck_assert_msg(memcmp(g1[u], g2[u], m->units[u].size * E) == 0, "%s %s: unit %d's gradient differs",
                      gpt_precision_name(c.precision), gpt_recompute_name(c.recompute), u);
    // Negative control: the second micro-batch's B without its W.
    for (int u = 0; u < m->nunits; u++) mem_zero(g2[u], m->units[u].size * E);
    for (int k = 0; k < 2; k++)
        for (int u = m->nunits - 1; u >= 0; u--) gpt_acts_backward_input(m, a[k], u, params[u]);
    for (int u = 0; u < m->nunits; u++) gpt_acts_backward_weight(m, a[0], u, g2[u]);
    ck_assert(memcmp(g1[1], g2[1], m->units[1].size * E) != 0);
    for (int k = 0; k < 2; k++) gpt_acts_free(m, a[k]);   // (a[1]'s kept gradients freed with it)
    gpt_free_units(m, master);
    gpt_free_units(m, params);
    gpt_free_units(m, g1);
    gpt_free_units(m, g2);
    gpt_free(m);
}

START_TEST(split_backward_is_the_whole_backward) {
    GptConfig c = tiny(0.1f);
    check_split(c);
    c.precision = GPT_BF16;
    check_split(c);
    c.grads_fp32 = true;
    check_split(c);
    c = tiny(0.1f);
    c.recompute = GPT_RECOMPUTE_SELECTIVE;
    check_split(c);
}
END_TEST

static Suite *gpt_suite(void) {
    Suite *s = suite_create("gpt");
    TCase *tc = tcase_create("gpt");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, whole_model_gradient_matches_finite_differences);
    tcase_add_test(tc, gradient_with_dropout_matches_finite_differences);
    tcase_add_test(tc, finite_differences_catch_a_wrong_gradient);
    tcase_add_test(tc, init_slices_equal_the_whole);
    tcase_add_test(tc, parameter_count_matches_the_formula);
    tcase_add_test(tc, micro_batches_add_up_to_the_full_batch);
    tcase_add_test(tc, training_steps_with_micro_batches_stay_together);
    tcase_add_test(tc, stage_sets_equal_the_whole_model);
    tcase_add_test(tc, bf16_stage_sets_equal_the_whole_model);
    tcase_add_test(tc, bf16_memory_is_the_papers);
    tcase_add_test(tc, bf16_model_is_the_fp32_model_rounded);
    tcase_add_test(tc, bf16_with_fp32_gradients);
    tcase_add_test(tc, recomputation_is_the_same_training);
    tcase_add_test(tc, split_backward_is_the_whole_backward);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    mem_init("cpu", 0);
    ops_init();
    return test_run_suite(gpt_suite());
}
