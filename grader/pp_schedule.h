// pp_schedule.h: a pipeline schedule's events, replayed (lab05's harness
// and its grader share it).
//
// Each stage records the order of its forward (F) and backward (B) passes
// over micro-batches and how long each took. The replay runs that order
// again as a dependency graph, on one core per stage: an event starts when
// its stage's previous event has ended and, for F of micro-batch i on
// stage s > 0, when F of i on stage s - 1 has ended (its activations), and
// for B of i on stage s < p - 1, when B of i on stage s + 1 has (its
// gradients). What is left idle is the schedule's own bubble, free of the
// noise of a machine with fewer cores than ranks.
#pragma once

#include <stdbool.h>

typedef struct {
    int kind;        // 0 F, 1 B
    int mb;          // micro-batch
    double seconds;  // how long it took (measured)
    double start, end;   // set by the replay
} PpEvent;

// ev[s] the events of stage s in the order it ran them (n[s] of them).
// equal: F takes 1 and B 2 on every stage (the lectures' picture, where
// the bubble is exactly (p - 1) / (m + p - 1)); else the measured seconds.
// Returns the idle fraction of the replayed timeline, (p T - busy) / (p T)
// for makespan T, and the makespan in *makespan; -1 when the events cannot
// all run (one waits for an event no stage recorded).
double pp_replay(int p, PpEvent **ev, const int *n, bool equal, double *makespan);

// The bubble of GPipe and 1F1B with equal stages: (p - 1) / (m + p - 1).
double pp_bubble_formula(int p, int m);
