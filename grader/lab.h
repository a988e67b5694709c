// lab.h: a lab as the grader knows it: what it runs (LabSpec, RunSpec) and
// everything about one run of it (Run). Types alone; every piece of the
// grader reads them, and they read nothing of the grader.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"

typedef struct Grader Grader;       // the checks recorded so far (results.h)
typedef struct Measured Measured;   // the rounding measured on the reference (rounding.h)
struct LabSpec;

#define OUTPUT_LIMIT_BYTES (20L << 20)   // what one run may print before it is stopped

// One run of a lab: a world size and flags.
typedef struct {
    const char *name;     // "np3"
    int np;               // ranks
    const char *flags;    // extra flags for the lab's program
    bool quick;           // part of `make check-labNN` (the fast subset)
    bool gpu;             // needs a GPU: skipped (and said) where none is visible
} RunSpec;

// Everything about one run, for the checks.
typedef struct Run {
    const RunSpec *spec;
    const struct LabSpec *lab;   // the lab it is a run of (NULL: none): its words and gradient factors
    char name[96];            // "np3 seed 1337"
    uint64_t seed;
    bool hidden;
    int exit_code;            // of mpirun
    bool timed_out;
    bool output_capped;       // it printed more than the grader keeps (its tail is kept)
    bool output_limited;      // it printed more than OUTPUT_LIMIT_BYTES and was stopped
    bool lingered;            // its dump was complete, but a process of it kept running and was stopped
    double seconds;
    char *output;             // the last part of what it printed
    DumpFile *dump;           // NULL when it wrote none
    const char *dump_error;
    DumpFile *ref;            // the reference run of the same configuration, if the lab has one
    const Measured *measured; // and the rounding measured on it
    char dir[1200];           // its working directory
} Run;

// The words of the labs' diagnoses (LabSpec.words): a diagnosis speaks of
// what the lab it grades teaches, and of nothing else.
enum {
    WORDS_DATA_PARALLEL = 1 << 0,   // replicas, gradients averaged over the ranks, a unit's all-reduce
    WORDS_SHARDS = 1 << 1,          // ZeRO's shards of a unit
};

// A factor the gradients can be off by in a lab's run, and the bug that
// makes it ("x t", "x dp", "1/t", ...): check_equivalence names the cause
// whose factor the measured ratio is.
typedef struct {
    double factor;
    char cause[400];
} RatioCause;
enum { MAX_RATIO_CAUSES = 8 };

typedef struct LabSpec {
    const char *id;           // "lab01"
    const char *dir;          // "lab01_collectives"
    const char *student_file; // "collectives.c"
    const char *program;      // the binary in build/ for the student's file: "lab01"
    const char *solution;     // and for the solution: "lab01_solution"
    const RunSpec *runs;
    int nruns;
    // Flags of the reference run that matches a lab run (NULL: no reference;
    // the function returning NULL: none for this run, which trains nothing).
    const char *(*ref_flags)(const struct LabSpec *lab, const Run *run, char *buf, size_t len);
    void (*check)(Grader *g, const struct LabSpec *lab, const Run *run);
    unsigned words;           // WORDS_*: the concepts its diagnoses may name
    // The factors a gradient of this run can be off by, and their causes (NULL: none).
    int (*ratio_causes)(const Run *run, RatioCause *out);
    // Other labs' solution files this lab's harness is built on (lab07: labs
    // 05 and 06's answers, given to its students; the Makefile's
    // LAB_USES_<dir>), NULL-ended, or NULL: copied into the grading tree
    // when this lab's submission is placed, never before (the labs are
    // graded in order, lab07 after the labs whose answers it holds).
    const char *const *given;
    // With --hidden-seed: the hidden runs drawn from the seed (specs.h,
    // hidden_run), at most `max`, returning how many; NULL: the listed runs
    // again with the hidden seed.
    int (*hidden)(uint64_t seed, RunSpec *out, int max);
} LabSpec;

enum { MAX_HIDDEN_RUNS = 8 };
