// pp_schedule.h: a pipeline schedule's events, replayed (lab05's harness
// and its grader share it).
//
// Each stage records the order of its passes over micro-batches, of each
// kind (PpPass), and how long each took. The replay runs that order again
// as a dependency graph, on one core per stage: an event starts when its
// stage's previous event has ended and when the neighbour's pass it waits
// for has: for F of micro-batch i on stage s > 0, F of i on stage s - 1
// (its activations); for B of i on stage s < p - 1, B of i on stage s + 1
// (its gradients); W of i waits for nobody else (its own stage's B of i
// came first). What is left idle is the schedule's own bubble, free of the
// noise of a machine with fewer cores than ranks.
//
// Interleaved (--schedule interleaved --virtual v): each stage holds v model
// chunks, chunk c of stage s being virtual stage c p + s of the p v the
// model is cut into (round-robin), and a pass is of one chunk. Its
// neighbours are virtual stage k - 1 and k + 1: for F of chunk c on stage 0
// (c > 0), F of chunk c - 1 on stage p - 1; for B of chunk c on stage
// p - 1 (c < v - 1), B of chunk c + 1 on stage 0. A chunk is 1/v of the
// stage's units: with equal stages its passes take 1/v of a whole stage's.
// v is read from the events: one more than the largest chunk among them
// (1 when every pass is chunk 0's: GPipe, 1F1B and the zero-bubble
// schedules).
#pragma once

#include <stdbool.h>

#include "comm.h"

// The kinds of pass. R is full recomputation's forward again at the stage
// boundary (GPipe's): the stage's units run forward once more from the
// micro-batch's kept input, just before its backward pass. It needs only
// that input, but it is counted as the backward pass's first part, waiting
// for the gradient as B does (where the lectures draw it, and where a
// schedule that recomputes on the gradient's arrival puts it); a schedule
// that runs it earlier, while the gradient travels, replays no later.
// W is the backward pass's second half where it is split (the zero-bubble
// schedules, Qi et al. 2024): B then computes the input gradient alone, the
// one the previous stage waits for, and W the parameter gradients, which
// nobody waits for. A micro-batch with a W on a stage had its backward pass
// split there: its B is the first half.
typedef enum { PP_PASS_F, PP_PASS_B, PP_PASS_R, PP_PASS_W, PP_PASS_KINDS } PpPass;
// Its length in the replay with equal stages: F 1, B 2 (the whole
// backward; its first half, where split, 1: pp_event_units), R 1 (a forward
// again), W 1; its letter in the pictures ('F', 'B', 'R', 'W') and its name
// ("forward", "backward", "recompute", "weight gradient"). Another kind
// (read from a dump): 0, '?', "unknown pass".
double pp_pass_units(int kind);
char pp_pass_letter(int kind);
const char *pp_pass_name(int kind);

typedef struct {
    int kind;        // PpPass
    int mb;          // micro-batch
    double seconds;  // how long it took (measured)
    double start, end;   // set by the replay
    int chunk;       // the stage's model chunk (interleaved; 0 otherwise)
} PpEvent;

// Whether event k of a stage's n events (row) is the first half of a split
// backward pass: a B whose (chunk, micro-batch) has a W on the same stage.
bool pp_split_b(const PpEvent *row, int n, int k);
// Event k's length with equal stages, of a whole stage: pp_pass_units, a
// split B 1 (the replay takes 1/v of it for a chunk's pass).
double pp_event_units(const PpEvent *row, int n, int k);

// ev[s] the events of stage s in the order it ran them (n[s] of them).
// equal: pp_event_units (F 1, B 2: the lectures' picture, where the bubble
// of F and B alone is exactly (p - 1) / (m + p - 1); F, B and W 1 each where
// the backward is split; 1/v of these, v chunks a stage); else the measured
// seconds.
// Returns the idle fraction of the replayed timeline, (p T - busy) / (p T)
// for makespan T, and the makespan in *makespan; -1 when the events cannot
// all run (one waits for an event no stage recorded).
double pp_replay(int p, PpEvent **ev, const int *n, bool equal, double *makespan);

// The bubble of GPipe and 1F1B with equal stages: (p - 1) / (m + p - 1).
double pp_bubble_formula(int p, int m);
// The interleaved schedule's with equal stages, v chunks a stage (Narayanan
// et al. 2021, section 2.2.2): the fill and the drain take (p - 1) chunk
// passes, 1/v of a stage's, so (p - 1) / (v m + p - 1).
double pp_bubble_formula_interleaved(int p, int v, int m);

// The chunks of a set of events: one more than the largest chunk among them.
int pp_events_chunks(PpEvent *const *ev, const int *n, int p);

// A pass's mark in comm.h's log of events (comm_events_mark(kind, arg)):
// arg = pp_mark_arg(chunk, mb), the micro-batch alone for chunk 0;
// pp_mark_mb and pp_mark_chunk read it back.
enum { PP_MARK_CHUNK = 1 << 16 };
int pp_mark_arg(int chunk, int mb);
int pp_mark_mb(int arg);
int pp_mark_chunk(int arg);

// After a replay: the idle share of the stages' own spans (each stage's
// first pass to its last), sum (span - busy) / sum span. The step's bubble
// (pp_replay's) counts a stage idle from the step's start to its first
// pass and from its last pass to the step's end as well.
double pp_span_bubble(int p, PpEvent *const *ev, const int *n);

// The zero-bubble schedules of Qi et al. 2024 (figure 3), c = 1 for ZB-H1
// and 2 for ZB-H2, with F = B = W = 1: the step lasts 3m + p - 1 for both,
// so its bubble is (p - 1) / (3m + p - 1) (1F1B's (p - 1) / (m + p - 1) is
// three times the idle time: F 1 and B + W 2 there); within each stage's
// span ZB-H1 leaves (p - 1) / (6m + p - 1) and ZB-H2 nothing (the paper's
// (p - 1)(F + B - 2W) = 0: ZB-H2's stages are busy from their first pass to
// their last, and they start and end p - 1 passes apart).
double pp_zb_bubble_formula(int p, int m);
double pp_zb_span_bubble_formula(int c, int p, int m);

// Stage s's events without those of one kind, in order, in place; returns
// how many are left (the order of F and B alone: pp_events_without(.., PP_PASS_R)).
int pp_events_without(PpEvent *ev, int n, int kind);

// The timeline: every rank's log of one step (comm.h's events; its marks
// are the passes, what the PpPass, arg the chunk and micro-batch
// (pp_mark_arg)), replayed with equal stages (pp_event_units, 1/v of it)
// and with what each end of an operation waits for: a receive its send's
// start, a send its receive's start (a message leaves when the other side
// asks for it, as a large one does), a collective every member's start. A
// schedule whose stages wait only for their inputs replays as its order
// does (pp_replay); one whose stages also wait for each other (a barrier, a
// blocking send, a receive of every input before the first pass) replays
// later, though its order is the same.
typedef struct {
    int rank, kind, mb;   // the first pass (in replayed time) that starts later than its order allows; rank -1: none
    double late;          // by how much (F = 1); kind: a PpPass
    int cause_rank;       // and what it waited for: an event of cause_rank's log (-1: not found)
    CommEvent cause;
    int chunk;            // the late pass's chunk (interleaved; 0 otherwise)
} PpLate;
// Ranks 0 .. p - 1 are pipeline 0. Returns the bubble of pipeline 0 in the
// timeline (-1: the logs cannot all run, an end waits for a start no rank
// logged), the order's bubble in *order_bubble, the first late pass in *late.
double pp_replay_timeline(int N, int p, const CommEvent *const *ev, const int *n, double *order_bubble,
                          PpLate *late);
