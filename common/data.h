// data.h: deterministic training batches.
//
// Step s reads one global batch of B rows of T+1 tokens: inputs x are tokens
// 0..T-1 of a row, targets y are tokens 1..T. The batch is a pure function of
// (seed, step, row), so every rank can make exactly the rows (data parallel)
// or the tokens (sequence parallel) it needs, and they tile the global batch.
//
// Two sources:
// - synthetic (the default): a fixed random Markov chain over V tokens in
//   which each token has DATA_BRANCH likely successors, so a small model
//   learns it quickly; the best possible loss is printed by data_describe.
// - a file (--data FILE): any file read as bytes (V = 256); row r of step s
//   starts at a position drawn from (seed, step, r).
#pragma once

#include <stddef.h>
#include <stdint.h>

enum { DATA_BRANCH = 4 };

typedef struct {
    int vocab;               // V
    int seq;                 // T
    int batch;               // B, rows of the global batch
    uint64_t seed;
    // synthetic source
    int *next;               // (V, DATA_BRANCH) successors of each token, or NULL
    float *next_prob;        // (V, DATA_BRANCH) their probabilities (cumulative)
    // file source
    const char *path;
    unsigned char *bytes;    // the whole file, or NULL
    size_t nbytes;
} Data;

// Open the source: synthetic when path is NULL, else the file's bytes (then
// vocab must be 256). Errors (missing file, file shorter than T+1 bytes)
// print one line and exit with code 2.
void data_open(Data *d, const char *path, int vocab, int seq, int batch, uint64_t seed);
void data_close(Data *d);

// Tokens of rows [row0, row0+nrows) and positions [t0, t0+nt) of step `step`.
// x, y: (nrows, nt) host arrays; x[i][j] = token t0+j of row row0+i, y the next.
void data_slice(const Data *d, int step, int row0, int nrows, int t0, int nt, int *x, int *y);
// The whole global batch: x, y (B, T).
void data_batch(const Data *d, int step, int *x, int *y);

// Rows of data-parallel rank r of n: rank r holds rows [r*B/n, (r+1)*B/n).
// When n does not divide B, every rank (all call it alike) stops with one
// line that says so and exit code 2.
void data_rank_rows(int batch, int n, int r, int *row0, int *nrows);
// Token span of sequence-parallel rank r of n: T must be a multiple of n
// (the same error otherwise).
void data_rank_span(int seq, int n, int r, int *t0, int *nt);

// One line: "synthetic Markov chain, V 256, entropy 1.27 nats/token (loss floor)"
// or "file input.txt, 1.2 MB, V 256".
const char *data_describe(const Data *d, char *buf, size_t len);
// The entropy rate of the synthetic chain in nats per token (the lowest
// reachable loss), or -1 for a file.
double data_entropy(const Data *d);
