// test_plan.c: the planner (grader/plan.h) against what is known without
// it: the presets' parameter counts as their papers and model cards state
// them, FLOPs a token counted matrix by matrix, a memory figure worked by
// hand in docs/plan.md, and the Llama 3 paper's 405B layouts (table 4).
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan.h"
#include "sp_budget.h"
#include "testutil.h"
#include "tp_layout.h"

// A published count given to d decimals (in billions) holds ours to within
// half its last digit: the published figure is ours rounded.
static void published(const char *model, double billions, int decimals) {
    double ours = plan_params(plan_model(model)).total / 1e9, half = 0.5 * pow(10, -decimals);
    ck_assert_msg(fabs(ours - billions) <= half, "%s: %.4f B parameters, published %.*f B", model, ours, decimals,
                  billions);
}

START_TEST(parameters_are_the_published_counts) {
    // Llama 3 model cards (Hugging Face, meta-llama/Llama-3.1-*): 8.03B, 70.6B, 405.9B (rounded as published).
    published("llama3-8b", 8.03, 2);
    published("llama3-70b", 70.6, 1);
    published("llama3-405b", 405.9, 1);
    // GPT-3 (Brown et al. 2020, table 2.1): 175.0B, without saying what it
    // counts; ours (the course's untied LM head, learned positions, biases)
    // is within the tied head's 0.62B of it: V h = 50257 x 12288.
    double gpt3 = plan_params(plan_model("gpt3-175b")).total;
    ck_assert_msg(fabs(gpt3 - 175.0e9) <= 50257.0 * 12288, "GPT-3: %.4g parameters", gpt3);
    // A negative control: the 70B's count is not the 405B's.
    ck_assert(fabs(plan_params(plan_model("llama3-70b")).total / 1e9 - 405.9) > 1);
}
END_TEST

START_TEST(flops_are_six_n_and_the_attention) {
    // Matrix by matrix, forward 2 x weights a token, backward twice that:
    // q, k, v, o, gate, up, down, and the LM head; plus QK^T and AV, 2 s h
    // each forward, 3x with the backward (PaLM's 12 L s h).
    const PlanModel *m = plan_model("llama3-405b");
    double h = m->h, hkv = (double)m->kv * (m->h / m->a), f = m->f;
    double per_layer = h * h + h * hkv + h * hkv + h * h + h * f + h * f + f * h;
    double expect = 6 * (m->L * per_layer + h * m->V) + 3 * m->L * (2.0 * m->s * h + 2.0 * m->s * h);
    ck_assert_double_eq_tol(plan_flops_per_token(m), expect, 1e-9 * expect);
    // Without the attention's 12 L s h, 6 N less the embedding's 6 V h
    // (a lookup makes no FLOPs) and the norms' weights (no products).
    double N = plan_params(m).total, attention = 12.0 * m->L * m->s * h;
    double rest = plan_flops_per_token(m) - attention - (6 * N - 6 * h * m->V);
    ck_assert_msg(rest <= 0 && -rest <= 6 * (m->L * 2 * h + h), "%.6g FLOPs left over", rest);
}
END_TEST

START_TEST(memory_worked_by_hand) {
    // docs/plan.md, "A figure worked by hand": Llama 3 8B on 8 H100s, data
    // parallel alone, ZeRO-1, bf16, full recomputation, 1 sequence a
    // micro-batch, batch 64 (m = 8).
    const PlanModel *m = plan_model("llama3-8b");
    PlanConfig c = {1, 1, 1, 8, false, 1, GPT_RECOMPUTE_FULL, 1, true};
    PlanResult r = plan_evaluate(m, plan_gpu("H100"), 8, 64, 0.75, c);
    ck_assert(r.valid);
    // psi: the 32 blocks, the embedding and the head, each padded to 8 shards
    // (all divide by 8 already): 8,030,261,248.
    double psi = 32 * (2.0 * 4096 * 4096 + 2.0 * 4096 * 1024 + 3.0 * 4096 * 14336 + 2 * 4096) + 128256.0 * 4096 +
                 (4096 + 4096.0 * 128256);
    ck_assert_double_eq_tol(psi, 8030261248.0, 0.5);
    ck_assert_double_eq_tol(r.params, 2 * psi, 1);
    ck_assert_double_eq_tol(r.grads, 2 * psi, 1);
    ck_assert_double_eq_tol(r.optim, 12 * psi / 8, 1);
    // Activations: one micro-batch alive (no pipeline): each layer's input,
    // 2 s h bytes, 32 of them; the block made again once (2 (8 + 4 + 2 x
    // 0.25) s h + 6 s f + 2 a s^2 bytes, b = 1); the fp32 logits 4 s V.
    double s = 8192, h = 4096;
    double layers = 32 * 2 * s * h;
    double again = 2 * (8 * s * h / 2 + 2 * s * h + 2 * s * 1024 + 3 * s * 14336 + 32 * s * s);
    double logits = 4 * s * 128256;
    ck_assert_double_eq_tol(r.acts, layers + again + logits, 1);
}
END_TEST

// The Llama 3 paper (Llama Team, AI @ Meta 2024, arXiv 2407.21783 v3),
// section 3.3.2, table 4 (page 10):
// 405B pre-training at 8K tokens, 16M tokens a batch (2048 sequences), on
// 8,192 GPUs (TP 8, CP 1, PP 16, DP 64) and 16,384 (TP 8, CP 1, PP 16, DP
// 128). Both must fit the planner's H100 and come within its K = 3 fastest
// layouts: of the layouts that fit, the planner leaves out what
// separates the first few (overlap of communication with compute, the
// paper's own pipeline tweaks), and a published layout below them would
// say its model of the step is wrong, not just rough.
START_TEST(llama3_405b_published_layouts_rank_near_the_top) {
    const PlanModel *m = plan_model("llama3-405b");
    const PlanGpu *g = plan_gpu("H100");
    struct { int gpus, t, p, dp; } rows[] = {{8192, 8, 16, 64}, {16384, 8, 16, 128}};
    for (int i = 0; i < 2; i++) {
        PlanChoice *list;
        int n = plan_search(m, g, rows[i].gpus, 2048, 0.75, true, &list);
        int at = -1, rank = plan_layout_rank(list, n, rows[i].t, rows[i].p, rows[i].dp, &at);
        ck_assert_msg(rank >= 1 && rank <= 3, "%d GPUs: the published layout ranks %d", rows[i].gpus, rank);
        ck_assert(list[at].r.total <= g->hbm);
        // A negative control: data parallelism alone does not fit.
        ck_assert_int_eq(plan_layout_rank(list, n, 1, 1, rows[i].gpus, NULL), 0);
        free(list);
    }
}
END_TEST

// A stage's figures (plan_stage) are the labs' formulas at the labs' shapes:
// lab04's and lab06's bytes of a step (tp_bytes_per_step_typed, with SP
// sp_replicated_bytes) and psi_local (the replicated tensors whole, the
// rest 1/t), and lab05's partition (the embeddings with the first stage's
// blocks, the head with the last's, the blocks as even as they go).
START_TEST(stages_are_the_labs_formulas) {
    // lab06's graded shape: 2 blocks, 128 channels, 4 heads, 64 tokens, 8
    // rows, vocabulary 256; t = 2, fp32.
    PlanModel gpt = {"lab06", PLAN_GPT, 2, 128, 4, 4, 512, 64, 256};
    double h = 128, s = 64, V = 256, L = 2, M = 8 * s;
    double rep = L * 6 * h + s * h + 2 * h, all = L * (12 * h * h + 13 * h) + V * h + s * h + 2 * h + h * V;
    double psi_local = rep + (all - rep) / 2;
    for (int sp = 0; sp < 2; sp++) {
        PlanConfig c = {2, 1, 1, 1, sp, 0, GPT_RECOMPUTE_NONE, 8, false};
        PlanStage st = plan_stage(&gpt, 2, 8, c, 0);
        ck_assert_double_eq_tol(st.params, 4 * psi_local, 0.5);
        ck_assert_double_eq_tol(st.optim, 8 * psi_local, 0.5);
        double want = tp_bytes_per_step_typed(false, 2, 1, M, h, 2, psi_local, 4).total +
                      (sp ? sp_replicated_bytes(2, L, s, h) : 0);
        ck_assert_msg(fabs(st.tp_bytes - want) <= 0.5, "sp %d: %.0f bytes, lab06's %.0f", sp, st.tp_bytes, want);
        ck_assert_double_eq_tol(st.layer_acts, sp_layer_bytes(sp, s, 8, h, 4, 2, 4), 0.5);
    }
    // A negative control: lab04's bytes without SP are not lab06's with it.
    PlanConfig on = {2, 1, 1, 1, true, 0, GPT_RECOMPUTE_NONE, 8, false}, off = on;
    off.sp = false;
    ck_assert(plan_stage(&gpt, 2, 8, on, 0).tp_bytes > plan_stage(&gpt, 2, 8, off, 0).tp_bytes);
    // lab05 at p = 3 on 4 blocks: [embed, b0], [b1], [b2, b3, head].
    PlanModel l5 = {"lab05", PLAN_GPT, 4, 128, 4, 4, 512, 64, 256};
    PlanConfig c = {1, 3, 1, 1, false, 0, GPT_RECOMPUTE_NONE, 2, false};
    int blocks[3] = {1, 1, 2};
    for (int q = 0; q < 3; q++) {
        PlanStage st = plan_stage(&l5, 3, 8, c, q);
        ck_assert_int_eq(st.blocks, blocks[q]);
        ck_assert(st.embed == (q == 0) && st.head == (q == 2));
        // Each boundary's messages both ways, M h floats each, m = 4 micro-batches.
        ck_assert_double_eq_tol(st.pp_bytes, 4 * 2.0 * (q == 1 ? 2 : 1) * 4 * 2 * 64 * 128, 0.5);
    }
}
END_TEST

int main(void) {
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, parameters_are_the_published_counts);
    tcase_add_test(tc, flops_are_six_n_and_the_attention);
    tcase_add_test(tc, memory_worked_by_hand);
    tcase_add_test(tc, llama3_405b_published_layouts_rank_near_the_top);
    tcase_add_test(tc, stages_are_the_labs_formulas);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
