// grade.h: the grader's pieces (grade.c runs and reports, checks.c compares,
// specs.c says what each lab runs and checks).
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dump.h"

// One run of a lab: a world size and flags.
typedef struct {
    const char *name;     // "np3"
    int np;               // ranks
    const char *flags;    // extra flags for the lab's program
    bool quick;           // part of `make check-labNN` (the fast subset)
    bool gpu;             // needs a GPU: skipped (and said) where none is visible
} RunSpec;

// What the reference measured for one configuration: the size of "the same
// up to rounding" (build/ref's yardstick runs, train_yardstick: micro-batches
// and the other rounding, against the plain run). Tolerances are TOL_FACTOR
// times these measured figures:
// - the loss per step: the measured difference, but never below one float
//   rounding of the loss itself (loss_ulp), since no two summation orders
//   can be asked to agree better than that;
// - a tensor's relative error (the first gradient: all of it; parameters and
//   moments: its bulk, see TensorError): its measured one, but never below
//   the median over tensors, because one sample of a rounding difference can
//   come out small by chance;
// - a single element of the final parameters: Adam's reach (adam_reach), the
//   most two runs of AdamW with the same settings can differ by, whatever
//   their gradients: after AdamW steps an element whose gradient is near zero
//   turns rounding into a step of up to lr either way (Adam divides by the
//   root mean square of each element's own gradients), so no measured sample
//   bounds the few such elements; Adam's own bound does.
typedef struct {
    double loss;              // largest per-step loss difference
    double loss_ulp;          // largest float rounding of a loss (|loss| * FLT_EPSILON)
    int ntensors;
    char (*names)[96];        // tensor names (without the "param/final/" prefix)
    double *grad_rel;         // per tensor: relative error of the first gradient
    double *param_bulk;       // per tensor: bulk relative error of the final parameters
    double *m_bulk, *v_bulk;  // per tensor: the same for AdamW's final moments
    double grad_rel_median, param_bulk_median, m_bulk_median, v_bulk_median;
    double adam_reach;        // the largest difference AdamW allows an element (INFINITY: not AdamW)
    int nsamples;             // the yardstick's runs besides the reference
} Measured;

// A tensor of a run against the reference's (tensor_error).
typedef struct {
    double rel;    // ||lab - ref|| over the tensor's scale
    double bulk;   // the same without its largest ceil(n / 1000) element differences
    double abs_;   // the largest element difference
} TensorError;

// Everything about one run, for the checks.
typedef struct {
    const RunSpec *spec;
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

// One graded check's outcome.
typedef struct {
    char lab[16], run[96], check[96];
    bool pass, hidden;
    char figure[160], bound[160], diagnosis[1024];
    double ratio;   // the figure over its bound (a check passes at <= 1), NaN when it has none
} Result;

// The checks recorded so far.
typedef struct Grader {
    Result *results;
    int n, cap;
    const char *lab;   // the lab being graded
} Grader;

// Record one graded check. figure and bound say what was measured and what
// it had to be; diagnosis (when it fails) what probably went wrong.
void grade_check(Grader *g, const Run *run, const char *check, bool pass, const char *figure,
                 const char *bound, const char *diagnosis);
// The last recorded check's figure over its bound, for the yardstick's
// margins (build/grade --margins).
void grade_set_ratio(Grader *g, double ratio);

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
    // Flags of the reference run that matches a lab run (NULL: no reference).
    const char *(*ref_flags)(const struct LabSpec *lab, const Run *run, char *buf, size_t len);
    void (*check)(Grader *g, const struct LabSpec *lab, const Run *run);
    unsigned words;           // WORDS_*: the concepts its diagnoses may name
    // The factors a gradient of this run can be off by, and their causes (NULL: none).
    int (*ratio_causes)(const Run *run, RatioCause *out);
} LabSpec;

extern const LabSpec *const LABS[];
extern const int NLABS;

// ---- shared checks (checks.c) ----

// The run ended normally with a readable dump; otherwise one failing check
// that says how it ended (crash, hang with the watchdog's lines, no dump).
bool check_ran(Grader *g, const Run *run, bool nonzero_exit_is_failure);
// Losses, final parameters (and the first gradient when both dumps have it)
// against the reference, per tensor, with tolerances of TOL_FACTOR times
// the measured rounding.
void check_equivalence(Grader *g, const Run *run, int world_size);
// Each rank's bus bytes (all operations, dump "comm/bus_bytes") against the
// lab's formula: between `least` (the fewest a legitimate variant moves;
// `expected` where there is none) and `expected`, 0.5% either way (each call
// rounds its bus bytes to a byte). Fewer bytes are another algorithm, not a
// saving; the diagnosis lists the rank's collectives. Returns the ratio.
double check_comm_volume(Grader *g, const Run *run, double expected, double least, const char *formula,
                         const char *diagnosis_if_more);
// (Memory per rank against a bound: check_peak, spec_train.h.)

enum { TOL_FACTOR = 10 };
// A tensor's relative error is never asked to be below one float rounding
// (FLT_EPSILON): at some shapes the reference's summation orders happen to
// round alike (the micro-batches align with the matrix product's own
// blocks), and a measured difference of 0 says nothing of another order.
#define REL_FLOOR 1.1920929e-7
#define OUTPUT_LIMIT_BYTES (20L << 20)   // what one run may print before it is stopped

// A sentence explaining the watchdog's lines in an output, or NULL.
const char *diagnose_hang(const char *output, char *buf, size_t len);

// The error of tensor `name` (e.g. "param/final/block0.attn.wq") of `lab`
// against `ref`: ||lab - ref|| over a scale, the same over the tensor's bulk,
// and the largest element difference. The scale is the tensor's own norm, or,
// when that is smaller, what its share of its unit's norm would be
// (sqrt(n_tensor / n_unit) times the unit's norm): a tensor whose exact
// gradient is zero (the key bias, since softmax ignores a shift) holds only
// rounding, and its error is measured against the size of its unit's values
// instead. The bulk leaves out the largest ceil(n / 1000) element
// differences, the few elements whose near-zero gradient Adam turned into a
// step (Adam's reach bounds those). False (and infinite errors) when the
// tensor is missing or its shape differs.
bool tensor_error(const DumpFile *lab, const DumpFile *ref, const char *name, TensorError *e);

// The most two AdamW runs with the same settings (the dump's meta/config: lr,
// beta1, beta2, steps) can differ by in one element, whatever their
// gradients: 2 lr sum_t max|m_t / sqrt(v_t)|; INFINITY when the optimizer is
// not AdamW. (checks.c)
double adam_reach(const DumpFile *ref);

// The rounding of "the same training up to rounding", measured on the
// yardstick's reference runs of one configuration: runs[0] the reference, the
// others its micro-batched and otherwise rounded twins. (verdict.c)
void measure_rounding(DumpFile *const *runs, int nruns, Measured *m);
void measured_free(Measured *m);
// Room for ntensors tensors' figures (zeroed; ntensors itself is the caller's
// to set as it fills them), and the four medians over them (verdict.c).
void measured_alloc(Measured *m, int ntensors);
void measured_medians(Measured *m);

// The table of checks, and under it each failure's diagnosis (rank 0).
void grader_print_table(const Grader *g);
int grader_failed(const Grader *g);
void grader_free(Grader *g);

// The lab's spec by id ("lab02"), or NULL.
const LabSpec *lab_spec(const char *id);

// Whether array `name` of a dump is of `kind`, with `ndim` dimensions (-1:
// any) and, where shape[k] is not 0, that size in dimension k; numbers must
// not be empty. NULL when it is (or it is absent and not `required`), else
// the reason, in `why`: "the dump's loss is text, not numbers".
typedef enum { DUMP_KIND_NUMBERS, DUMP_KIND_TEXT } DumpKind;
const char *dump_expect(const DumpFile *d, const char *name, DumpKind kind, int ndim, const uint64_t *shape,
                        bool required, char *why, size_t len);

// AdamW's moment `which` (0: m, 1: v) of tensor t against the reference's:
// its bulk relative error over its bound (TOL_FACTOR times the measured
// rounding) into *ratio; true when at most 1. (checks.c)
bool moment_within_tol(const Run *run, int t, int which, double *ratio);

// Small helpers.
double dump_scalar(const DumpFile *f, const char *name, double missing);

// ---- shared by the training labs' specs (specs.c) ----

// The reference flags of a lab run: its flags without the lab's own (listed
// in `drop`, each with its value), plus the run's seed.
const char *without_flags(const Run *run, const char *const *drop, char *buf, size_t len);
// A number of the run's configuration (the dump's meta/config: "batch",
// "seq", "dim", ...), or `missing`.
double config_value(const DumpFile *d, const char *key, double missing);
// Parameters in a dump (the sum of the param/final/ tensors' sizes).
double count_params(const DumpFile *f);
// The student's hooks that still call lab_todo ("check/unfinished/<name>").
void check_hooks_written(Grader *g, const Run *run);
