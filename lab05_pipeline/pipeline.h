// pipeline.h: pipeline parallelism, the interface between the harness
// (main.c and its given files) and the student's file (pipeline.c).
//
// The p ranks of a pipeline group hold one model between them, cut by
// depth: stage s holds the units [u0, u1) (the embeddings on the first
// stage, the head on the last). A step's batch is cut into m micro-batches;
// each stage runs its units forward on a micro-batch and sends the result
// (B/m rows x T x C activations) to the next stage, and the gradients of
// those activations come back the other way. The student's code orders the
// work (the schedule) and moves the data; the harness computes a
// micro-batch's pass over the stage's units when asked, and records every
// event for the bubble and the picture.
//
// With --precision bf16 the stage's weights and gradients are bf16, and so
// is what moves between the stages: the activations and their gradients
// are the model's precision (pp->type), 2 bytes an element where fp32 takes
// 4, so every message is half the bytes.
//
// With --recompute full (pp->recompute), recomputation at the stage
// boundaries, as GPipe does it: a micro-batch keeps only what crosses the
// boundary (its input, the received activations or the tokens on stage 0,
// and the message buffers below), and the stage's units run forward into
// ONE set of their activations that every micro-batch shares. Before a
// micro-batch's backward pass, pp_recompute runs the stage's units forward
// again from its kept input into that set. The dropout masks come out the
// same: they are keyed by the step and the global row (the micro-batch's
// rows of the batch), not by which pass draws them. (--recompute selective
// is the model's own, per block: nothing changes here.)
//
// The zero-bubble schedules (--schedule zb-h1 | zb-h2; Qi et al., "Zero
// Bubble Pipeline Parallelism", ICLR 2024) split a micro-batch's backward
// pass in two: pp_backward_input (B), the gradient of the stage's input,
// which the previous stage waits for, and pp_backward_weight (W), the
// gradients of the stage's parameters, which nobody waits for until the
// optimizer. B keeps what W needs (its activations, and the output
// gradients of its products and LayerNorms), so a micro-batch is alive
// until its W. Not under --recompute full, nor with --virtual (the harness
// refuses both).
//
// With --schedule interleaved --virtual v (Narayanan et al. 2021, "Efficient
// Large-Scale Language Model Training on GPU Clusters Using Megatron-LM",
// SC'21), the model is cut into p v virtual stages and each rank holds v of
// them, its model chunks: chunk c of stage s is virtual stage
// pp_virtual_stage(p, v, s, c), cut by pp_partition over p v stages. A
// micro-batch goes forward through virtual stage 0, 1, ..., p v - 1, so it
// visits every rank v times, and its gradient comes back the other way.
// Each of the harness's micro-batch calls below has a chunk form
// (pp_forward_chunk(pp, c, mb), ...) but pp_recompute and the split
// backward's (neither full recomputation nor the zero-bubble schedules run
// interleaved), and the plain ones are chunk 0's: a GPipe, 1F1B or
// zero-bubble run has one chunk, the stage.
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "comm.h"
#include "gpt.h"

enum { PP_MAX_MICRO = 256, PP_MAX_CHUNKS = 8 };

typedef struct {
    Comm *group;        // the pipeline group: p consecutive ranks; stage s is rank s of it
    int p, s;           // stages, and this rank's
    int m;              // micro-batches per step
    int rows;           // the rows of the batch this pipeline runs in one step (all m micro-batches)
    int micro_rows;     // rows per micro-batch: rows / m
    int T, C;           // tokens per row, channels
    int u0, u1;         // this stage's units [u0, u1), from pp_partition
    // The elements of the messages (activations and their gradients):
    // COMM_F32 (floats) or, with --precision bf16, COMM_BF16 (2 bytes each);
    // elem = comm_type_size(type) bytes. The buffers are void *: comm.h's
    // _typed calls move them (comm_send_async_typed(c, buf, n, pp->type, peer)).
    CommType type;
    size_t elem;
    // Asynchronous sends of micro-batch mb in flight, for the student's code
    // to start and wait on: its activations to the next stage, its
    // gradients to the previous one. A micro-batch's buffers cannot be
    // freed (pp_end_micro) while a send from them is in flight.
    CommHandle *send_act[PP_MAX_MICRO], *send_grad[PP_MAX_MICRO];
    // --recompute full: a micro-batch's activations are made again
    // (pp_recompute) before its backward pass.
    bool recompute;
    // --schedule interleaved: v model chunks on this rank (1 otherwise);
    // chunk c holds the units [cu0[c], cu1[c]), virtual stage vs[c]
    // (chunk 0's are u0, u1 too). The sends of chunk c's micro-batch mb in
    // flight: chunk_send_act[c][mb] (its activations to the next virtual
    // stage) and chunk_send_grad[c][mb] (its input gradient to the previous).
    int v;
    int cu0[PP_MAX_CHUNKS], cu1[PP_MAX_CHUNKS], vs[PP_MAX_CHUNKS];
    CommHandle *chunk_send_act[PP_MAX_CHUNKS][PP_MAX_MICRO], *chunk_send_grad[PP_MAX_CHUNKS][PP_MAX_MICRO];
    struct PpRun *run;  // the harness's own state (pipeline_given.h)
} Pp;

// ---- given: the harness's work on one micro-batch (pipeline_given.c) ---------

// Zero this stage's gradients (once a step: the micro-batches add into them).
void pp_zero_grads(Pp *pp);
// Micro-batch mb's activations for this stage's units are allocated (ACTS;
// with pp->recompute, its boundary alone) and its rows of the batch
// loaded. loss_scale: the gradient of each token's loss is scaled by it
// (1 / the tokens the loss averages over).
void pp_begin_micro(Pp *pp, int mb, float loss_scale);
// This stage's units forward on mb (its input must have arrived).
void pp_forward_compute(Pp *pp, int mb);
// This stage's units backward on mb (the gradient of its output must have
// arrived), ADDING into this stage's gradients. With pp->recompute it reads
// the shared set, which must hold mb's activations (pp_recompute).
void pp_backward_compute(Pp *pp, int mb);
// With pp->recompute: this stage's units forward again on mb, from its kept
// input, into the shared set (the same masks, the same values), for its
// backward pass. Where the set still holds mb's activations (mb's forward
// was this stage's last pass, as on the last stage in 1F1B) there is
// nothing to make again, and it returns at once; without pp->recompute,
// too. Its time is recorded as its own pass (R), its products counted.
void pp_recompute(Pp *pp, int mb);
// The backward pass in two, for the zero-bubble schedules. B: this stage's
// units' input gradients on mb, in reverse order (the gradient of its
// output must have arrived); the gradient to send back, pp_grad_out, is
// ready when it returns. It keeps the output gradients W needs (ACTS).
// W: their parameter gradients, ADDING into this stage's gradients, and
// what B kept is let go. B then W is pp_backward_compute to the bit, with
// any passes between them.
void pp_backward_input(Pp *pp, int mb);
void pp_backward_weight(Pp *pp, int mb);
// mb's activations are freed (its sends must have finished; after its
// backward pass, or its W where it was split).
void pp_end_micro(Pp *pp, int mb);
// The buffers of mb to move, (micro_rows, T, C) each, pp_message_count(pp)
// elements of pp->type: the input this stage receives from stage s - 1 and
// the output it sends to s + 1; the gradient of its output, received from
// s + 1, and of its input, sent to s - 1. NULL where there is no such
// neighbour.
void *pp_act_in(Pp *pp, int mb);
void *pp_act_out(Pp *pp, int mb);
void *pp_grad_in(Pp *pp, int mb);
void *pp_grad_out(Pp *pp, int mb);
size_t pp_message_count(const Pp *pp);

// ---- given: the same, of chunk c of this rank (--schedule interleaved) --------

// As above, of chunk c's units and its own activations: micro-batch mb of
// chunk c is begun, run forward and backward, and ended on its own (the
// gradients of chunk c's units are added into). A chunk's buffers are NULL
// where its virtual stage has no such neighbour: no input on virtual stage
// 0 (the embeddings), no output on the last (the head). The neighbour of
// virtual stage k is k - 1 (its input) and k + 1 (its output), wherever
// pp_virtual_stage put them.
void pp_begin_chunk(Pp *pp, int c, int mb, float loss_scale);
void pp_forward_chunk(Pp *pp, int c, int mb);
void pp_backward_chunk(Pp *pp, int c, int mb);
void pp_end_chunk(Pp *pp, int c, int mb);
void *pp_chunk_act_in(Pp *pp, int c, int mb);
void *pp_chunk_act_out(Pp *pp, int c, int mb);
void *pp_chunk_grad_in(Pp *pp, int c, int mb);
void *pp_chunk_grad_out(Pp *pp, int c, int mb);

// ---- the student's functions (pipeline.c), in the order of the TODOs ---------

// 1. The units [*u0, *u1) of stage s of p, for a model of nunits units
//    (embed, L blocks, head): contiguous, in order, none empty, the L
//    blocks as even as possible (the embeddings on the first stage, the
//    head on the last; with more stages than blocks, the units).
void pp_partition(int nunits, int p, int s, int *u0, int *u1);

// 2. Move micro-batch mb's data between neighbouring stages (pp->group):
//    activations forward to stage s + 1, their gradients back to s - 1.
//    A receive returns when the data is here; a send may return at once
//    (comm_send_async_typed into pp->send_act[mb] or send_grad[mb]). Both
//    ends move pp_message_count(pp) elements of pp->type.
void pp_send_activations(Pp *pp, int mb);
void pp_recv_activations(Pp *pp, int mb);
void pp_send_gradients(Pp *pp, int mb);
void pp_recv_gradients(Pp *pp, int mb);

// 3. One training step, GPipe: every micro-batch forward, then every one
//    backward, the gradients added up so that the step equals one
//    full-batch step. Every send is finished when it returns.
void pp_gpipe(Pp *pp);

// 4. One training step, 1F1B: p - s - 1 forwards to warm up, then one
//    forward and one backward in turn, then the remaining backwards; at
//    most p - s micro-batches alive on stage s at once, whatever m is.
//    5. In both: free a micro-batch's activations as soon as its backward
//    pass is done (and its sends have finished).
//    6. In both, with pp->recompute: make a micro-batch's activations
//    again (pp_recompute) before its backward pass.
void pp_1f1b(Pp *pp);

// 7. One training step, ZB-H1 (the paper's figure 3, top), on the split
//    backward: stage s warms up with p - s - 1 forwards, as 1F1B; then,
//    for each micro-batch i in turn, one forward (while any is left), B of
//    i, and W of the oldest micro-batch still waiting for its W once i >= s;
//    then the W's left. W fills the gaps 1F1B leaves; at most p micro-batches
//    alive on every stage. The harness refuses m < p.
void pp_zb_h1(Pp *pp);
// 8. ZB-H2 (figure 3, bottom): the same with twice the warm-up,
//    2 (p - s - 1) forwards, and the W's held back until i >= 2s: every
//    stage is busy from its first pass to its last, with at most 2p - 1
//    micro-batches alive. The harness refuses m < 2p - 1.
void pp_zb_h2(Pp *pp);

// 9. Interleaved: the virtual stage that chunk c of stage s holds, of the
//    p v that pp_partition cuts the model into (0 <= c < v): round-robin,
//    so that stage s holds virtual stages s, s + p, s + 2p, ... and a
//    micro-batch's forward pass goes round the ranks v times.
int pp_virtual_stage(int p, int v, int s, int c);

// 10. One training step, interleaved 1F1B (Megatron-LM's schedule): the
//    m v passes of each kind (every chunk of every micro-batch) numbered
//    k = 0 .. m v - 1, groups of p micro-batches going through chunk 0,
//    then chunk 1, ... (backward passes through the chunks in reverse);
//    (p - s - 1) 2 + (v - 1) p forwards to warm up (at most m v), then one
//    forward and one backward in turn, then the backwards left. m is a
//    multiple of p. Every send is finished when it returns.
void pp_interleaved(Pp *pp);

// A function the student has not written yet says so by calling this first.
void lab_todo(const char *function);
