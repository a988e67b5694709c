// harness.h: what the training labs' harnesses share: the single-device
// reference run they are measured against, the verdict at the end, and the
// lines they print.
//
// The reference is the yardstick's runs (train.h's train_yardstick: the
// whole batch, micro-batches of two sizes, the other rounding), the measured
// size of "the same training up to rounding", as the grader measures it:
// runs of build/ref with the same flags, trained once and kept
// (refcache.h), so that a run whose reference is kept starts at once. When
// it is not kept yet, the run says so first, runs its steps, and trains it
// at the end, before the verdict (build/ref's processes, never in the lab's:
// each rank's measured memory is the lab's alone); not while a TODO is
// unwritten, whose verdict needs no reference to fail.
#pragma once

#include <limits.h>
#include <stdbool.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "gpt.h"
#include "mem.h"
#include "refcache.h"
#include "train.h"

typedef struct DumpWriter DumpWriter;

enum { HARNESS_MAX_REFS = YARDSTICK_MAX };

typedef struct Reference {
    bool on;           // compared with single-device training (false with --no-ref, or when why_off says)
    bool ready;        // the reference's runs are at hand; false: they train at the run's end
    int steps;
    double *loss;      // (steps) the reference's loss at each step, on every rank, once ready
    // Rank 0: a private directory (mode 0700) for this run's own dump without
    // --dump; removed by harness_reference_free.
    char dir[256];
    // Rank 0: the kept reference runs (the yardstick's, the reference itself
    // first), files of the cache.
    RefCache cache;
    RefSet set;
    char own_dump[300];   // where this run's dump goes: --dump, or a file in dir
    char why_off[300];    // why a run that asked for the reference is not compared with it
} Reference;

// What every training lab does first, after args_parse: MPI (comm_init),
// the rank's device (mem_init), the ops on it (ops_init, --tf32) and
// --trace. Returns the world.
Comm *harness_start(const Args *a, int *argc, char ***argv);
// In a graded run (PL_SANDBOX=1, sandbox.h): rank 0's dump opened, then the
// kernel's filter closed on the process, before any student code runs.
// harness_start calls it last; lab01, which has no harness_start, after its
// set-up.
void harness_close_sandbox(Comm *c, const Args *a);

// Refused before anything is allocated when the run cannot fit this node's
// memory: each rank's replica for `rows` rows of the batch (an upper
// estimate from the shapes) and, first, on rank 0, the reference's whole
// batch when `with_reference` (mem_check_fits says how).
void harness_check_fits(const Args *a, int rows, bool with_reference);

// The reference of training `a` (the reference's flags: the model, the
// data, the precision) looked up in the cache on rank 0 (the other ranks
// wait); with `on` false only the private directory is made. When it is not
// kept yet, rank 0 says so, with how many runs and roughly how long.
// Collective.
Reference harness_reference(Comm *c, const Args *a, bool on);
// At the run's end (harness_finish calls it): a reference not kept yet is
// trained now, before the verdict, unless a TODO the run called is
// unwritten (then the run is not compared: why_off says so). Collective.
void harness_reference_complete(Comm *c, Reference *r);
void harness_reference_free(Reference *r);
// (The verdict at the end of a run, the grader's own checks on this run's
// dump at own_dump, is grader/verdict.h's verdict_of_lab_run.)

// The peaks and the counters reset for the last time: from here on
// mem_reset_peaks and comm_stats_reset end the run, so that nothing the
// lab's code does can erase what it allocated or sent. Each training lab
// calls it after its last reset, before the training loop.
void harness_seal_measures(void);

// The lab's final parameters (whole units, canonical layout, on rank 0)
// against the reference's: the relative Frobenius error over the whole
// model, and the tensor holding the largest single difference. Rank 0
// only; -1 without a reference.
double harness_param_error(const Reference *r, const Gpt *m, float **units, char *worst, size_t len);

// Sum of squares of all parameters, per rank, gathered: (N) on every rank
// (whether the replicas agree). units: this rank's whole units.
void harness_sumsq_per_rank(Comm *c, const Gpt *m, void **units, CommType t, double *out);

// The student's hooks: a lab names them once; its lab_todo() passes the
// name of an unfinished one to harness_todo(). At the end, each unfinished
// hook is printed (rank 0) and every hook goes into the dump as
// "check/unfinished/<name>" (1 while it still calls lab_todo), for the grader.
// harness_hooks is called once, first thing in main, before any student
// code runs; a second call is refused (a CHECK).
void harness_hooks(const char *const *names, int n);
void harness_todo(const char *function);
int harness_print_unfinished(void);   // how many are unfinished
bool harness_unfinished(const char *hook);   // has this hook called lab_todo?
bool harness_any_unfinished(void);           // has any hook?
void harness_dump_unfinished(DumpWriter *w);

// One step's line: loss beside the reference's, time and its split into
// compute, communication and communication left exposed, tokens/s.
void harness_print_step(const Reference *r, int step, int steps, double loss, double seconds,
                        double comm_busy, double comm_blocked, double tokens);

// ---- the training loop's bracket and the run's end ---------------------------
// Each training lab's loop is its own; around it the harness keeps the
// clock, the counters, the losses and, at the end, everything that compares
// the run with the reference and hands it to the grader:
//
//     HarnessRun run = harness_run(c, &a, &ref, "lab02", verdict_of_lab_run);
//     for (int s = 0; s < a.steps; s++) {
//         harness_step_begin(&run);
//         ... the lab's step: forward, backward, communication, optimizer ...
//         harness_step_end(&run, s, loss, N);
//     }
//     ... the lab's own figures and lines ...
//     harness_finish(&run, &(HarnessEnd){...});   // dump, verdict, exit
//
// The verdict comes in as a function (grader/verdict.h's verdict_of_lab_run)
// so that common/ does not depend on the grader above it.
typedef int (*HarnessVerdict)(Comm *c, const char *lab, const Reference *ref);

typedef struct {
    Comm *c;
    const Args *a;
    Reference *ref;
    const char *lab;
    HarnessVerdict verdict;
    bool quiet;          // no step lines (lab03's extra trainings for its figure)
    float *losses;       // (steps) each step's loss over the global batch
    // Sums over steps 2.. (the first warms up), each step's slowest rank.
    double seconds, busy, blocked, sent;
    double last_seconds; // the step just ended, the slowest rank's
    // The step in progress.
    CommStats before;
    double t0;
} HarnessRun;

HarnessRun harness_run(Comm *c, const Args *a, Reference *ref, const char *lab, HarnessVerdict verdict);
void harness_step_begin(HarnessRun *h);
// The step's end: its time (the slowest rank's), its communication (busy and
// blocked, the slowest rank's; bus bytes sent, the most any rank sent), its
// loss over the global batch, sum(loss) / divisor over c's ranks (every rank
// passes its own: the mean of its rows, or 0 where it has none), and the step
// line. Collective. Returns the global loss.
double harness_step_end(HarnessRun *h, int step, double loss, double divisor);
// "mean over steps 2..S: X ms/step (compute, comm, exposed)", with the share
// of communication hidden when `hidden` and bytes moved. Rank 0 prints.
void harness_print_mean_step(const HarnessRun *h, bool hidden);

// What the run's end needs from the lab.
typedef struct {
    DumpWriter *dw;
    const MemReport *mem;   // mem_report() right after the loop
    const Gpt *model;
    // Rank 0: the final parameters and, when not NULL, Adam's moments, as
    // whole units in the canonical layout; on the host when `host`, else in
    // tracked memory. NULL on the other ranks.
    float **params, **m, **v;
    bool host;
    // The lab's own lines after the comparison with the reference, and its
    // own dump entries; called on every rank (collectives allowed). Either
    // may be NULL.
    void (*print_more)(void *ctx);
    void (*dump_more)(DumpWriter *dw, void *ctx);
    void *ctx;
    // After the verdict, before the exit: what the lab does once the graded
    // run is over and handed in (lab03's trainings for its figure), or NULL.
    void (*afterwards)(void *ctx);
    Comm *groups[4];   // the lab's groups (comm_split), freed at the very end; NULL-padded
} HarnessEnd;

// The end of every training lab: the unfinished hooks, the error against the
// reference (the losses, the parameters), the dump (loss, param/final,
// optim/m and optim/v, the lab's entries, the unfinished hooks, the ranks'
// measures), the trace, the verdict, and the exit with the verdict's code.
PL_NORETURN void harness_finish(HarnessRun *h, const HarnessEnd *e);

// Every rank's memory peaks (`mine`: this rank's, from mem_report() when
// the lab's work ended; NULL: now), gathered and printed on rank 0 as a
// table, a row per rank. Collective.
void harness_print_memory(Comm *c, const MemReport *mine);
// Every rank's trace (--trace) gathered to rank 0, which writes the file.
// Collective; nothing when tracing is off.
void harness_trace_write(Comm *c);

// End the process once its dump is complete and its verdict printed (after
// comm_finalize): flush, run the harness's own cleanups, then _exit(code),
// so that no handler the student's code registered (atexit, a destructor)
// runs after the dump and rewrites it.
PL_NORETURN void harness_exit(int code);
