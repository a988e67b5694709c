// data.c: deterministic training batches (see data.h).
//
// Every token is a pure function of (seed, step, row, position), made from
// the counter-based rng, so a rank that needs rows 4..7 or tokens 32..63 makes
// exactly those and they equal the same part of the global batch.
//
// Streams of RNG_DATA used here:
//   rng_stream(RNG_DATA, 0, 0)            the chain's table of successors
//   rng_stream(RNG_DATA, 1 + step, row)   row `row` of step `step`:
//       synthetic: index 0 its first token, index p >= 1 the choice of token p
//       file:      indices 0 and 1 the offset where the row starts
#include "data.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "rng.h"

// The chance of each of a token's successors, most likely first. Fixed, so
// every token has the same next-token entropy and the chain's entropy rate
// (the best loss any model can reach) is simply that entropy.
static const double DATA_PROB[DATA_BRANCH] = {0.60, 0.25, 0.10, 0.05};

// rng_stream takes 28-bit numbers; steps and rows must fit.
enum { DATA_MAX_STREAM = 1 << 28 };

// ---- opening ---------------------------------------------------------------

// Each token gets DATA_BRANCH distinct successors, drawn uniformly; a draw
// that repeats an earlier successor is thrown away and drawn again.
static void data_build_chain(Data *d) {
    int V = d->vocab;
    d->next = malloc((size_t)V * DATA_BRANCH * sizeof *d->next);            // (V, DATA_BRANCH)
    d->next_prob = malloc((size_t)V * DATA_BRANCH * sizeof *d->next_prob);  // (V, DATA_BRANCH)
    CHECK(d->next && d->next_prob, "out of host memory for a Markov chain over %d tokens", V);

    uint64_t stream = rng_stream(RNG_DATA, 0, 0);
    for (int v = 0; v < V; v++) {
        int *succ = d->next + (size_t)v * DATA_BRANCH;
        // Token v's draws are numbered from v << 32, so tokens never share one.
        uint64_t draw = (uint64_t)v << 32;
        for (int k = 0; k < DATA_BRANCH; k++) {
            int cand;
            int repeated;
            do {
                // 32 random bits scaled onto [0, V) by a multiply-high.
                cand = (int)(((uint64_t)rng_u32(d->seed, stream, draw++) * (uint64_t)V) >> 32);
                repeated = 0;
                for (int j = 0; j < k; j++) repeated |= succ[j] == cand;
            } while (repeated);
            succ[k] = cand;
        }
        // Cumulative, so a uniform u picks the first successor with u < next_prob.
        double cum = 0.0;
        for (int k = 0; k < DATA_BRANCH; k++) {
            cum += DATA_PROB[k];
            d->next_prob[(size_t)v * DATA_BRANCH + k] = (float)cum;
        }
        // The last bound is exactly 1, so some successor is always chosen.
        d->next_prob[(size_t)v * DATA_BRANCH + DATA_BRANCH - 1] = 1.0f;
    }
}

// The whole file into d->bytes, read in chunks so that any readable file
// works (a pipe, a file whose size is not known in advance).
static void data_read_file(Data *d) {
    FILE *f = fopen(d->path, "rb");
    if (!f)
        core_usage_error("cannot open --data file %s (%s); give the path of a readable file",
                         d->path, strerror(errno));
    size_t cap = 1 << 20, n = 0;
    unsigned char *buf = malloc(cap);
    CHECK(buf, "out of host memory reading %s", d->path);
    for (;;) {
        if (n == cap) {
            cap *= 2;
            buf = realloc(buf, cap);
            CHECK(buf, "out of host memory reading %s (%zu bytes so far)", d->path, n);
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0) break;
    }
    int failed = ferror(f);
    int err = errno;
    fclose(f);
    if (failed) {
        free(buf);
        core_usage_error("cannot read --data file %s (%s); give the path of a readable file",
                         d->path, strerror(err));
    }
    d->bytes = buf;
    d->nbytes = n;
}

void data_open(Data *d, const char *path, int vocab, int seq, int batch, uint64_t seed) {
    CHECK(seq >= 1, "sequence length T = %d; it must be at least 1", seq);
    CHECK(batch >= 1, "batch B = %d; it must be at least 1 row", batch);
    CHECK(batch <= DATA_MAX_STREAM, "batch B = %d is more rows than the data streams number "
          "(%d); use a smaller --batch", batch, DATA_MAX_STREAM);
    memset(d, 0, sizeof *d);
    d->vocab = vocab;
    d->seq = seq;
    d->batch = batch;
    d->seed = seed;
    d->path = path;

    if (!path) {
        if (vocab < DATA_BRANCH + 1)   // a choice of the user's, not a bug (args refuses it first)
            core_usage_error("--vocab %d is too small for the synthetic data, in which each token has "
                             "%d successors; use --vocab %d or more", vocab, DATA_BRANCH, DATA_BRANCH + 1);
        data_build_chain(d);
        return;
    }

    if (vocab != 256)
        core_usage_error("--data reads bytes, so the vocabulary is 256; drop --vocab or set "
                         "--vocab 256");
    data_read_file(d);
    if (d->nbytes < (size_t)seq + 1) {
        size_t n = d->nbytes;
        free(d->bytes);
        d->bytes = NULL;
        core_usage_error("--data file %s has %zu bytes, fewer than the %d a row of T+1 tokens "
                         "needs; use a longer file or a smaller --seq", path, n, seq + 1);
    }
}

void data_close(Data *d) {
    free(d->next);
    free(d->next_prob);
    free(d->bytes);
    memset(d, 0, sizeof *d);
}

// ---- batches ---------------------------------------------------------------

// A synthetic row walked from position 0 to t0 + nt (the walk is cheap, and
// starting anywhere else would need the token before); positions [t0, t0+nt)
// go to x and [t0+1, t0+nt] to y as they pass. x, y: (nt)
static void data_walk_row(const Data *d, uint64_t stream, int t0, int nt, int *x, int *y) {
    int V = d->vocab;
    int tok = (int)(((uint64_t)rng_u32(d->seed, stream, 0) * (uint64_t)V) >> 32);
    int last = t0 + nt;  // y needs one token past the span
    for (int p = 0; p <= last; p++) {
        if (p > 0) {
            // Choose among tok's successors with the uniform numbered p.
            float u = rng_uniform(d->seed, stream, (uint64_t)p);
            const int *succ = d->next + (size_t)tok * DATA_BRANCH;
            const float *cum = d->next_prob + (size_t)tok * DATA_BRANCH;
            int k = 0;
            while (k < DATA_BRANCH - 1 && u >= cum[k]) k++;
            tok = succ[k];
        }
        if (p >= t0 && p < last) x[p - t0] = tok;
        if (p > t0) y[p - t0 - 1] = tok;
    }
}

// Where a file row starts: uniform over the nbytes - T offsets from which
// T+1 bytes fit. 64 random bits, so files past 4 GB are covered too (the
// bias of the remainder is below 2^-32 for any file that fits in memory).
static size_t data_file_offset(const Data *d, uint64_t stream) {
    uint64_t count = (uint64_t)d->nbytes - (uint64_t)d->seq;
    uint64_t r = (uint64_t)rng_u32(d->seed, stream, 0) << 32 | rng_u32(d->seed, stream, 1);
    return (size_t)(r % count);
}

void data_slice(const Data *d, int step, int row0, int nrows, int t0, int nt, int *x, int *y) {
    CHECK(step >= 0 && step < DATA_MAX_STREAM - 1, "step %d is outside the steps the data "
          "streams number (0 to %d); use fewer --steps", step, DATA_MAX_STREAM - 2);
    CHECK(row0 >= 0 && nrows >= 0 && row0 + nrows <= d->batch,
          "rows [%d, %d) are not inside the batch of %d rows", row0, row0 + nrows, d->batch);
    CHECK(t0 >= 0 && nt >= 0 && t0 + nt <= d->seq,
          "positions [%d, %d) are not inside a row of %d tokens", t0, t0 + nt, d->seq);
    CHECK(d->next || d->bytes, "data_slice on a closed source; call data_open first");

    for (int i = 0; i < nrows; i++) {
        uint64_t stream = rng_stream(RNG_DATA, (uint32_t)step + 1, (uint32_t)(row0 + i));
        int *xi = x + (size_t)i * nt;  // (nt) this row's inputs
        int *yi = y + (size_t)i * nt;  // (nt) this row's targets
        if (d->next) {
            data_walk_row(d, stream, t0, nt, xi, yi);
        } else {
            const unsigned char *row = d->bytes + data_file_offset(d, stream);
            for (int j = 0; j < nt; j++) {
                xi[j] = row[t0 + j];
                yi[j] = row[t0 + j + 1];
            }
        }
    }
}

void data_batch(const Data *d, int step, int *x, int *y) {
    data_slice(d, step, 0, d->batch, 0, d->seq, x, y);
}

// ---- splitting the batch over ranks ----------------------------------------

void data_rank_rows(int batch, int n, int r, int *row0, int *nrows) {
    CHECK(n >= 1 && r >= 0 && r < n, "rank %d of %d data-parallel ranks does not exist", r, n);
    if (batch % n != 0) {
        // The multiples of n on either side of the batch: the nearest
        // batches this world size can split.
        int below = batch / n * n, above = below + n;
        char which[64];
        if (below > 0) snprintf(which, sizeof which, "--batch %d or %d", below, above);
        else snprintf(which, sizeof which, "--batch %d", above);
        core_usage_error("the global batch of %d rows does not split over %d data-parallel "
                         "ranks; use a world size that divides %d, or a batch it divides (%s "
                         "with %d ranks)", batch, n, batch, which, n);
    }
    *nrows = batch / n;
    *row0 = r * *nrows;
}

void data_rank_span(int seq, int n, int r, int *t0, int *nt) {
    CHECK(n >= 1 && r >= 0 && r < n, "rank %d of %d sequence-parallel ranks does not exist", r, n);
    if (seq % n != 0)
        core_usage_error("the sequence of %d tokens does not split over %d sequence-parallel "
                         "ranks; use a number of ranks that divides %d", seq, n, seq);
    *nt = seq / n;
    *t0 = r * *nt;
}

// ---- description -----------------------------------------------------------

double data_entropy(const Data *d) {
    if (!d->next) return -1.0;
    double h = 0.0;
    for (int k = 0; k < DATA_BRANCH; k++) h -= DATA_PROB[k] * log(DATA_PROB[k]);
    return h;
}

const char *data_describe(const Data *d, char *buf, size_t len) {
    if (d->next) {
        snprintf(buf, len, "synthetic Markov chain, V %d, entropy %.2f nats/token (loss floor)",
                 d->vocab, data_entropy(d));
    } else {
        char size[32];
        snprintf(buf, len, "file %s, %s, V %d", d->path,
                 core_fmt_bytes((double)d->nbytes, size, sizeof size), d->vocab);
    }
    return buf;
}
