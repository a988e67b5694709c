// args.h: the command line every program shares.
//
// Every program takes the same model, data and run flags; a lab adds its own
// (ArgExtra). Unknown flags, bad numbers and impossible combinations print
// one line that says what to do, on rank 0, and exit with code 2.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct Args {
    // run
    int steps;            // training steps
    uint64_t seed;        // seed of initialisation, data and dropout
    double lr;            // learning rate
    double wd;            // AdamW weight decay, on every parameter
    double dropout;       // dropout probability (0: none)
    double timeout;       // seconds a rank may wait in one call before the watchdog ends the run (0: never)
    const char *device;   // "cpu", "cuda" or "auto"
    const char *comm;     // "auto", "mpi" or "nccl": the library that moves the buffers (comm.h)
    bool tf32;            // TF32 matrix units for the matrix products on a GPU (never in graded runs)
    const char *precision;   // "fp32" or "bf16" (bf16 weights, gradients and activations, fp32 master weights)
    const char *grad_reduce; // "fp32", "bf16", or NULL: the gradients' type, as the precision's (bf16 in bf16)
    const char *recompute;   // "none", "selective" or "full": activation recomputation (gpt.h)
    // model: B batch, T sequence, C channels, NH heads, L layers, V vocabulary
    int batch;            // B, rows of the global batch
    int seq;              // T, tokens per row
    int dim;              // C, channels
    int heads;            // NH, attention heads
    int layers;           // L, transformer blocks
    int vocab;            // V, vocabulary size (256 with --data)
    // input and output
    const char *data;     // a file whose bytes are the training text, or NULL for synthetic data
    const char *dump;     // result file for the grader, or NULL
    const char *trace;    // Chrome trace file (open in Perfetto), or NULL
} Args;

// ARG_INPUT and ARG_OUTPUT are file names checked at parse time, before any
// work: an input must be a readable file (not a directory), an output must
// be creatable (checked on rank 0, which writes the outputs, by creating it
// and removing it again, so nothing is left behind when the run then fails).
typedef enum { ARG_INT, ARG_U64, ARG_DOUBLE, ARG_STRING, ARG_FLAG, ARG_CHOICE, ARG_INPUT, ARG_OUTPUT } ArgType;

// A flag of one program. For ARG_CHOICE, `choices` is "a|b|c" and the value is
// stored as a string (const char *) that is one of them.
typedef struct {
    const char *name;     // without the dashes: "stage"
    ArgType type;
    void *value;          // int *, uint64_t *, double *, const char **, bool *; holds the default
    const char *help;     // one line
    double min, max;      // accepted range for numbers (inclusive); ignored when min > max
    const char *choices;  // for ARG_CHOICE
    const char *metavar;  // what --help calls the value ("DIR"); NULL: N, X, FILE or WHICH by type
} ArgExtra;

// The shared flags, as a set: a program says which it takes (args_takes).
enum {
    ARGS_STEPS = 1 << 0, ARGS_SEED = 1 << 1, ARGS_LR = 1 << 2, ARGS_WD = 1 << 3,
    ARGS_DROPOUT = 1 << 4, ARGS_BATCH = 1 << 5, ARGS_SEQ = 1 << 6, ARGS_DIM = 1 << 7,
    ARGS_HEADS = 1 << 8, ARGS_LAYERS = 1 << 9, ARGS_VOCAB = 1 << 10, ARGS_DATA = 1 << 11,
    ARGS_DUMP = 1 << 12, ARGS_TRACE = 1 << 13, ARGS_TIMEOUT = 1 << 14, ARGS_DEVICE = 1 << 15,
    ARGS_COMM = 1 << 16, ARGS_TF32 = 1 << 17,
    // Groups: the model and its training, and what every training program takes.
    ARGS_MODEL = ARGS_STEPS | ARGS_LR | ARGS_WD | ARGS_DROPOUT | ARGS_BATCH | ARGS_SEQ | ARGS_DIM |
                 ARGS_HEADS | ARGS_LAYERS | ARGS_VOCAB | ARGS_DATA,
    ARGS_ALL = (1 << 18) - 1,
    // --precision, taken by the programs that train in bf16 too (ARGS_ALL | ARGS_PRECISION).
    ARGS_PRECISION = 1 << 18,
    // --grad-reduce, taken by those that keep whole gradients (build/ref, lab02).
    ARGS_GRAD_REDUCE = 1 << 19,
    // --recompute, taken by the programs whose blocks can recompute (build/ref so far).
    ARGS_RECOMPUTE = 1 << 20,
};

// Before args_parse: the shared flags this program takes (ARGS_ALL unless
// told) and, in a few words, why it takes no others ("it trains nothing").
// The others are not listed by --help, and giving one is a usage error.
// A program that takes --device takes --comm too: where the tensors live
// and how they move are chosen together.
void args_takes(unsigned shared, const char *why_not);

// The defaults: the course's small model (4 layers, 128 channels, 4 heads,
// 64 tokens, batch 8, vocabulary 256).
Args args_defaults(void);

// Parse argv into *a (which holds the defaults) and into the extras (a list
// ended by an entry whose name is NULL; extras may be NULL). `--help` prints
// the usage, `about` first, and exits 0. Errors exit with code 2: a flag
// this program does not take, a bad value, a combination the program cannot
// use (a vocabulary too small for the synthetic data, --comm nccl with the
// tensors on the CPU), an input file that cannot be read or an output that
// cannot be created. --comm is handed to comm (comm_use_backend).
void args_parse(Args *a, int argc, char **argv, const char *about, const ArgExtra *extras);

// True when the user gave this flag on the command line (so a program can
// tell a default from a choice).
bool args_given(const char *name);

// The flags as given on the command line (after the program's name, joined
// by spaces), for a program that describes its own run.
const char *args_command_line(void);

// The flags that decide a reference run (build/ref's), every one spelled
// out (the defaults too) in one order, so that two descriptions of the same
// training are the same string: the key of the kept reference runs
// (refcache.h). --dump, --trace, --timeout and --comm change no number and
// are left out.
const char *args_reference_flags(const Args *a, char *buf, size_t len);
// The shared flags in `flags` (a line of the program's own making, such as
// the grader's reference flags) applied to *a, without touching what
// args_given reports. A flag that is not a shared one, or a bad value, is a
// usage error.
void args_apply_flags(Args *a, const char *flags);

// One line describing the model: "GPT 4L 128C 4H T64 B8 V256".
const char *args_model_string(const Args *a, char *buf, size_t len);
