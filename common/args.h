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

typedef enum { ARG_INT, ARG_U64, ARG_DOUBLE, ARG_STRING, ARG_FLAG, ARG_CHOICE } ArgType;

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

// The defaults: the course's small model (4 layers, 128 channels, 4 heads,
// 64 tokens, batch 8, vocabulary 256).
Args args_defaults(void);

// Parse argv into *a (which holds the defaults) and into the extras (a list
// ended by an entry whose name is NULL; extras may be NULL). `--help` prints
// the usage, `about` first, and exits 0. Errors exit with code 2.
void args_parse(Args *a, int argc, char **argv, const char *about, const ArgExtra *extras);

// True when the user gave this flag on the command line (so a program can
// tell a default from a choice).
bool args_given(const char *name);

// The flags as given on the command line (after the program's name, joined
// by spaces), for a program that describes its own run.
const char *args_command_line(void);

// One line describing the model: "GPT 4L 128C 4H T64 B8 V256".
const char *args_model_string(const Args *a, char *buf, size_t len);
