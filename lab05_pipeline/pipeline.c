// pipeline.c: YOUR FILE. Pipeline parallelism. See pipeline.h for the
// hooks, README.md for the pictures, and run
//     make lab05 && mpirun -np 4 build/lab05 --schedule 1f1b
// to see the loss beside single-device training's, each stage's memory
// beside the schedule's bound, the bubble and the schedule drawn.
//
// As given, the partition is lopsided, nothing moves between the stages
// and the schedules run nothing, so the program runs from the start (and
// learns nothing). Do the TODOs in order; delete a function's
// lab_todo(...) line once it is done.
//
// Tools: comm_send_async_typed(c, buf, n, pp->type, peer) (keep the handle:
// pp->send_act[mb] or pp->send_grad[mb]), comm_recv_typed(c, buf, n, pp->type,
// peer), comm_wait(handle); the buffers pp_act_in/out(pp, mb),
// pp_grad_in/out(pp, mb), pp_message_count(pp) elements of pp->type each
// (fp32, or bf16 with --precision bf16: the typed calls move either). The
// harness's work: pp_zero_grads, pp_begin_micro, pp_forward_compute,
// pp_recompute, pp_backward_compute, pp_end_micro, and for the zero-bubble
// schedules the backward pass in two, pp_backward_input (B) and
// pp_backward_weight (W) (pipeline.h).
#include "pipeline.h"

#include "comm.h"
#include "core.h"

// ---- 1. the partition -------------------------------------------------------------

void pp_partition(int nunits, int p, int s, int *u0, int *u1) {
    lab_todo(__func__);
    // TODO(lab05): the units of stage s, contiguous, in order, none empty,
    // with the blocks as even as possible: the embeddings ride with the
    // first stage and the head with the last, and the L = nunits - 2 blocks
    // are shared out (3 stages of 6 blocks: embed + 2, 2, 2 + head; of 4
    // blocks: embed + 1, 1, 2 + head, or any order of 1, 1, 2). With more
    // stages than blocks, every unit counts alike. As given: one unit on
    // each stage but the last, which takes the rest.
    *u0 = s;
    *u1 = s < p - 1 ? s + 1 : nunits;
}

// ---- 2. moving a micro-batch ------------------------------------------------------

void pp_send_activations(Pp *pp, int mb) {
    lab_todo(__func__);
    // TODO(lab05): send pp_act_out(pp, mb) to stage s + 1 without waiting for
    // it to arrive (comm_send_async_typed, pp_message_count(pp) elements of
    // pp->type; keep the handle in pp->send_act[mb]).
    (void)pp, (void)mb;
}

void pp_recv_activations(Pp *pp, int mb) {
    lab_todo(__func__);
    // TODO(lab05): receive pp_act_in(pp, mb) from stage s - 1 (comm_recv_typed,
    // the same count and type as the send).
    (void)pp, (void)mb;
}

void pp_send_gradients(Pp *pp, int mb) {
    lab_todo(__func__);
    // TODO(lab05): send pp_grad_out(pp, mb) to stage s - 1 (pp->send_grad[mb]).
    (void)pp, (void)mb;
}

void pp_recv_gradients(Pp *pp, int mb) {
    lab_todo(__func__);
    // TODO(lab05): receive pp_grad_in(pp, mb) from stage s + 1.
    (void)pp, (void)mb;
}

// ---- 3. GPipe ---------------------------------------------------------------------

void pp_gpipe(Pp *pp) {
    lab_todo(__func__);
    // TODO(lab05): zero the gradients once; then for every micro-batch:
    // begin it (its loss scaled by 1 / the tokens of the whole step, so that
    // the m micro-batches' gradients add up to the full batch's), receive its
    // activations (not on the first stage), compute forward, send them on
    // (not on the last). Then for every micro-batch: receive its gradients
    // (not on the last stage), compute backward, send them back (not on the
    // first), and, its sends finished, end it (5: free its activations).
    //
    // TODO(lab05) 6, in both schedules: with --recompute full
    // (pp->recompute), a micro-batch keeps only its input and messages, and
    // the stage's units run in one shared set of activations that the next
    // forward overwrites; make the micro-batch's activations again with
    // pp_recompute(pp, mb) before its pp_backward_compute.
    (void)pp;
}

// ---- 4. 1F1B ----------------------------------------------------------------------

void pp_1f1b(Pp *pp) {
    lab_todo(__func__);
    // TODO(lab05): the same passes in another order: p - s - 1 forwards (at
    // most m), then one forward and one backward in turn until every
    // micro-batch has gone forward, then the backwards left. At most p - s
    // micro-batches are alive on stage s at once. (6: pp_recompute before
    // each backward pass, with pp->recompute.)
    (void)pp;
}

// ---- 7. ZB-H1 and 8. ZB-H2: zero bubble -----------------------------------------

void pp_zb_h1(Pp *pp) {
    lab_todo(__func__);
    // TODO(lab05): 1F1B's passes on the backward pass split in two: B
    // (pp_backward_input: the gradient of the stage's input, which the
    // previous stage waits for: send it back at once) and W
    // (pp_backward_weight: the parameter gradients, which nobody waits for;
    // the micro-batch is alive until its W, then end it). Warm up with
    // p - s - 1 forwards, as 1F1B; then for each micro-batch i in turn: a
    // forward while any is left, B of i, and, once i >= s, W of the oldest
    // micro-batch still waiting for its W; then the W's left. The W's fill
    // the gaps 1F1B's stages spend waiting (README: the pictures).
    (void)pp;
}

void pp_zb_h2(Pp *pp) {
    lab_todo(__func__);
    // TODO(lab05): ZB-H1 with twice the warm-up, 2 (p - s - 1) forwards, and
    // the W's held back until i >= 2s: no stage waits between its first
    // pass and its last, at the price of up to 2p - 1 micro-batches alive.
    (void)pp;
}

// ---- 9. interleaved: which virtual stages a rank holds ----------------------------

int pp_virtual_stage(int p, int v, int s, int c) {
    lab_todo(__func__);
    // TODO(lab05): the virtual stage of chunk c of stage s, of the p v the
    // model is cut into: round-robin, stage s holding s, s + p, s + 2p, ...
    // so that a micro-batch goes round the ranks v times. As given: the
    // chunks contiguous, stage s holding s v .. s v + v - 1 (1F1B's stages
    // cut finer, which interleaving is not).
    (void)p;
    return s * v + c;
}

// ---- 10. interleaved 1F1B ---------------------------------------------------------

void pp_interleaved(Pp *pp) {
    lab_todo(__func__);
    // TODO(lab05): Megatron-LM's interleaved schedule over this rank's
    // pp->v chunks (the chunk forms of the harness's calls: pp_begin_chunk,
    // pp_forward_chunk, pp_backward_chunk, pp_end_chunk, and the buffers
    // pp_chunk_act_in/out, pp_chunk_grad_in/out, NULL where a chunk has no
    // such neighbour; the handles pp->chunk_send_act[c][mb] and
    // chunk_send_grad[c][mb]). A chunk's input comes from the previous
    // virtual stage, on the rank before this one round the ring (stage 0's
    // from stage p - 1), its output goes to the next rank round the ring.
    // Zero the gradients once; number the m v passes of each kind k = 0 ..
    // m v - 1: the k-th is of chunk (k mod p v) div p (for a backward pass,
    // v - 1 minus that: the chunks in reverse) and micro-batch
    // (k div p v) p + k mod p. Warm up with (p - s - 1) 2 + (v - 1) p
    // forwards (at most m v), then one forward and one backward in turn,
    // then the backwards left; end each chunk's micro-batch as soon as its
    // backward pass is done and its sends have finished.
    (void)pp;
}
