// plan.h: memory per GPU and step time of a model trained with data, tensor
// (with sequence) and pipeline parallelism, ZeRO and recomputation, from the
// labs' own formulas: the planner build/plan prints these, and lab07 holds
// its runs to the same calls. Every per-rank figure is one of the labs':
// ZeRO's state (zero_budget.h, lab03), tensor parallelism's bytes
// (tp_layout.h, lab04), a pipeline stage's micro-batches alive (pp_budget.h,
// lab05) and bubble (pp_schedule.h), a layer's activations (sp_budget.h,
// lab06). docs/plan.md states the formulas and their sources.
//
// Names: L layers, h channels, a heads, kv key/value heads, f the MLP's
// hidden width, s tokens a sequence, V vocabulary, b sequences a
// micro-batch, m micro-batches a step, t p v dp the tensor, pipeline,
// virtual (chunks a stage) and data-parallel sizes.
#pragma once

#include <stdbool.h>

#include "gpt.h"

typedef enum {
    PLAN_GPT,     // the course's block (GPT-2): LayerNorms, biases, learned positions, GELU MLP of f = 4h, a = kv
    PLAN_LLAMA,   // Llama 3: RMSNorms, no biases, rotary positions, grouped-query attention, SwiGLU (three matrices)
} PlanArch;

typedef struct {
    const char *name;
    PlanArch arch;
    int L, h, a, kv, f, s, V;
} PlanModel;

// The model's parameter counts: a block, the embedding unit (tokens and,
// GPT, positions), the head unit (final norm and an untied LM head), all.
typedef struct {
    double block, embed, head, total;
    double matmul;   // of total, the weights of matrix products (blocks' and the LM head's): 6 x this a token
    // Of block, embed and head, what tensor parallelism keeps whole on every
    // rank of its group (lab04's psi_replicated): the norms' weights (and
    // biases), the biases added after g (GPT's attn.bo, mlp.b2), the learned
    // positions. The rest is split t ways.
    double block_rep, embed_rep, head_rep;
} PlanParams;
PlanParams plan_params(const PlanModel *m);

// Model FLOPs a token, forward and backward, PaLM's convention (Chowdhery et
// al. 2022, appendix B): 6 x the products' weights + 12 L s h for the
// attention's two products (not halved for the causal mask).
double plan_flops_per_token(const PlanModel *m);

// One layer's kept activations per GPU for a micro-batch of b sequences, in
// bytes, E a kept element's bytes (2 bf16, 4 fp32). GPT: lab06's formula
// (sp_layer_bytes_mode), what the course's code keeps. Llama: Korthikanti
// et al.'s count without dropout, for grouped-query attention and SwiGLU
// (docs/plan.md derives it): E (8sbh + (4sbh + 4sb h_kv + 6sbf)/t + as^2b/t)
// (with SP everything /t), selective without the as^2b term, full E sbh
// (/t with SP).
double plan_layer_acts(const PlanModel *m, bool sp, GptRecompute rc, double b, double t, double E);

typedef struct {
    const char *name;
    double peak;            // dense bf16 FLOP/s
    double hbm;             // bytes
    double nvlink_bw, nvlink_alpha;   // per GPU, one direction (bytes/s), and a message's latency (s)
    double net_bw, net_alpha;         // the network per GPU, one direction, and its latency
    int node_gpus;
} PlanGpu;
// "H100" or "H200" (NULL: unknown): docs/plan.md gives the figures' sources.
const PlanGpu *plan_gpu(const char *name);
// "gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b" (NULL: unknown).
const PlanModel *plan_model(const char *name);

typedef enum { PLAN_1F1B, PLAN_INTERLEAVED } PlanSchedule;

typedef struct {
    int t, p, v, dp;
    bool sp;
    int zero;            // 0 to 3, over the data-parallel group
    GptRecompute rc;
    int b;               // sequences a micro-batch
    bool bf16;           // bf16 with fp32 master weights and moments (2 + 2 + 12), or fp32 (4 + 4 + 8)
} PlanConfig;

typedef struct {
    bool valid;            // the sizes divide what they split
    const char *invalid;   // why not
    int m;                 // micro-batches a step on each pipeline
    int layers;            // the most layers a stage holds
    int k;                 // micro-batches (interleaved: chunk-sets) alive on stage 0 (pp_budget's k)
    double params, grads, optim, acts, total;   // bytes per GPU, the fuller of the first and the last stage
    double tp_bytes, pp_bytes, dp_bytes;        // bus bytes a GPU sends a step, per group (PP: a middle stage's sends)
    double t_compute, t_tp, t_pp, t_dp, t_bubble, step;   // seconds a step (t_bubble: of step, the pipeline's idle)
    double tokens_per_s, mfu;
    bool tp_net, pp_net, dp_net;   // whether the group's collectives cross the network
} PlanResult;

// Evaluate one configuration on `gpus` GPUs for a global batch of `batch`
// sequences, at `eff` of the peak for the compute.
PlanResult plan_evaluate(const PlanModel *m, const PlanGpu *g, int gpus, int batch, double eff, PlanConfig c);

// One pipeline stage's figures as a lab measures them on a rank of it: the
// stage holds the blocks of lab05's partition (over its p v virtual stages,
// virtual stage j = c p + s holding blocks [j L / (p v), (j + 1) L / (p v)),
// the embeddings with the first, the head with the last), its state by
// ZeRO's stage, its activations by the schedule, and the bus bytes of each
// group as comm.h counts a rank's: an all-reduce's 2(k - 1)/k of its
// payload, and a send and a receive each their payload (so a pipeline
// boundary counts both of its messages, the activations and their
// gradient, on either side). plan_evaluate's figures are the fuller of the
// first and the last stage with the most blocks any stage holds.
typedef struct {
    int blocks;            // the blocks it holds, all its chunks'
    int chunk_blocks;      // the most blocks of one of its chunks
    bool embed, head;      // whether it holds the embeddings, the head
    int k;                 // micro-batches (interleaved: chunk-sets) alive at most (pp_budget's k)
    double params, grads, optim, acts;   // bytes per GPU
    double layer_acts;     // of acts, one layer's for one micro-batch (plan_layer_acts)
    double tp_bytes, pp_bytes, dp_bytes; // bus bytes a step, per group, sent and received
} PlanStage;
// Stage s (0 <= s < p) of a valid configuration (plan_evaluate's r.valid).
PlanStage plan_stage(const PlanModel *m, int gpus, int batch, PlanConfig c, int s);

// The term of a step that dominates ("compute", "the bubble", "TP's all-reduces", ...).
const char *plan_dominant(const PlanResult *r);

// ---- the search -------------------------------------------------------------------

typedef struct {
    PlanConfig c;
    PlanResult r;
} PlanChoice;

// Every configuration of the search space (t among the divisors of the
// heads, p v dp, sp, ZeRO 0 to 3, recomputation none, selective, full,
// micro-batches of 1, 2, 4 or 8 sequences, v 1, 2 or 4; in the precision
// given) that is valid and fits the GPU's memory, fastest first, in *out
// (malloc'd; free it). Returns how many.
int plan_search(const PlanModel *m, const PlanGpu *g, int gpus, int batch, double eff, bool bf16, PlanChoice **out);

// The place (1 = the fastest) of layout (t, p, dp) among the layouts of a
// sorted list, each layout placed by its fastest configuration; its first
// entry in *index. 0 when the layout is not in the list (not feasible).
int plan_layout_rank(const PlanChoice *list, int n, int t, int p, int dp, int *index);
