// test_rng.c: Philox against its published answers, the slice property that
// the labs rely on, and the statistics of the uniforms and normals, each
// statistic with a broken generator that it must reject.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "rng.h"
#include "testutil.h"

// ---- Philox itself ---------------------------------------------------------

// Random123's tests/kat_vectors, the three "philox4x32 10" lines:
// counter (4 words), key (2 words), expected output (4 words).
START_TEST(test_philox_known_answers) {
    static const uint32_t kat[3][10] = {
        {0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000, 0x00000000,
         0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff,
         0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0,
         0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int v = 0; v < 3; v++) {
        uint32_t out[4];
        rng_philox4x32(kat[v], kat[v] + 4, out);
        for (int w = 0; w < 4; w++)
            ck_assert_msg(out[w] == kat[v][6 + w], "vector %d word %d: got %08x, want %08x", v, w,
                          out[w], kat[v][6 + w]);
    }
}
END_TEST

// The mapping from (seed, stream, index) to numbers, against values computed
// by a separate Python implementation of Philox and of the formulas in rng.c
// (it reproduces the three vectors above too). Index 2^32 + 7 puts a 1 in the
// counter's second word, so a swapped or dropped word shows.
START_TEST(test_rng_reference_values) {
    const uint64_t seed = 0x0123456789ABCDEFull;
    const uint64_t stream = rng_stream(RNG_TEST, 5, 6);
    const uint64_t index[3] = {0, 1, (1ull << 32) + 7};
    const uint32_t want_u32[3] = {0x3bf8d794, 0xf0f9685e, 0x192109d5};
    const float want_uniform[3] = {0x1.dfc6b8p-3f, 0x1.e1f2d0p-1f, 0x1.921090p-4f};
    const float want_normal[3] = {0x1.b1b03ep+0f, 0x1.d00774p-3f, -0x1.237e12p+0f};
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(rng_u32(seed, stream, index[i]), want_u32[i]);
        ck_assert_msg(rng_uniform(seed, stream, index[i]) == want_uniform[i],
                      "uniform %d: got %a, want %a", i, rng_uniform(seed, stream, index[i]),
                      want_uniform[i]);
        ck_assert_msg(rng_normal(seed, stream, index[i]) == want_normal[i],
                      "normal %d: got %a, want %a", i, rng_normal(seed, stream, index[i]),
                      want_normal[i]);
    }
}
END_TEST

// ---- what the labs rely on -------------------------------------------------

// A slice made alone equals the same elements of the whole, bit for bit, at
// offsets and lengths aligned to nothing, and across the 2^32 index boundary.
START_TEST(test_rng_slice_equals_whole) {
    enum { N = 1000 };
    const uint64_t seed = 1234, stream = rng_stream(RNG_INIT, 3, 0);
    static float whole_u[N], whole_n[N], part[N];  // (N) each
    rng_fill_uniform(whole_u, N, seed, stream, 0, -0.5f, 2.0f);
    rng_fill_normal(whole_n, N, seed, stream, 0, 0.1f, 0.02f);
    const int slices[][2] = {{0, 1}, {0, N}, {1, 7}, {13, 100}, {500, 333}, {999, 1}, {37, 0},
                             {255, 258}};
    for (size_t s = 0; s < sizeof slices / sizeof slices[0]; s++) {
        int off = slices[s][0], n = slices[s][1];
        rng_fill_uniform(part, (size_t)n, seed, stream, (uint64_t)off, -0.5f, 2.0f);
        ck_assert_msg(memcmp(part, whole_u + off, (size_t)n * sizeof(float)) == 0,
                      "uniform slice [%d, %d) differs from the whole", off, off + n);
        rng_fill_normal(part, (size_t)n, seed, stream, (uint64_t)off, 0.1f, 0.02f);
        ck_assert_msg(memcmp(part, whole_n + off, (size_t)n * sizeof(float)) == 0,
                      "normal slice [%d, %d) differs from the whole", off, off + n);
    }
    // Elements of the fill are exactly lo + (hi - lo) u and mean + std z.
    for (int k = 0; k < N; k += 97) {
        ck_assert(whole_u[k] == -0.5f + 2.5f * rng_uniform(seed, stream, (uint64_t)k));
        ck_assert(whole_n[k] == 0.1f + 0.02f * rng_normal(seed, stream, (uint64_t)k));
    }
    // Around index 2^32 the counter's high word turns over.
    float big[16], mid[8];
    const uint64_t base = (1ull << 32) - 8;
    rng_fill_normal(big, 16, seed, stream, base, 0.0f, 1.0f);
    rng_fill_normal(mid, 8, seed, stream, base + 4, 0.0f, 1.0f);
    ck_assert(memcmp(mid, big + 4, sizeof mid) == 0);
}
END_TEST

START_TEST(test_rng_deterministic) {
    const uint64_t seed = 42, stream = rng_stream(RNG_DROPOUT, 7, 9);
    float a[64], b[64];
    rng_fill_normal(a, 64, seed, stream, 100, 0.0f, 1.0f);
    rng_fill_normal(b, 64, seed, stream, 100, 0.0f, 1.0f);
    ck_assert(memcmp(a, b, sizeof a) == 0);
    for (uint64_t i = 0; i < 64; i++)
        ck_assert_uint_eq(rng_u32(seed, stream, i), rng_u32(seed, stream, i));
}
END_TEST

// How many of 256 values agree between two (seed, stream) pairs: two
// independent 32-bit sequences agree by chance with probability 2^-32 each.
static int rng_count_same(uint64_t seed_a, uint64_t stream_a, uint64_t seed_b, uint64_t stream_b) {
    int same = 0;
    for (uint64_t i = 0; i < 256; i++)
        same += rng_u32(seed_a, stream_a, i) == rng_u32(seed_b, stream_b, i);
    return same;
}

START_TEST(test_rng_seeds_and_streams_differ) {
    const uint64_t s = rng_stream(RNG_INIT, 1, 0);
    ck_assert_int_eq(rng_count_same(1, s, 1, s), 256);                  // control: same pair
    ck_assert_int_eq(rng_count_same(1, s, 2, s), 0);                    // seed
    ck_assert_int_eq(rng_count_same(1, s, 1 + (1ull << 32), s), 0);     // seed, high word only
    ck_assert_int_eq(rng_count_same(1, s, 1, s + 1), 0);                // stream
    ck_assert_int_eq(rng_count_same(1, s, 1, rng_stream(RNG_DATA, 1, 0)), 0);  // stream, high word
    // Index i of one stream is not index i + 1 of another (no shifted copies).
    int same = 0;
    for (uint64_t i = 0; i < 256; i++) same += rng_u32(1, s, i + 1) == rng_u32(1, s + 1, i);
    ck_assert_int_eq(same, 0);
}
END_TEST

START_TEST(test_rng_stream_layout) {
    ck_assert_uint_eq(rng_stream(0, 0, 0), 0);
    ck_assert_uint_eq(rng_stream(RNG_DATA, 1, 2), (2ull << 56) | (1ull << 28) | 2ull);
    ck_assert_uint_eq(rng_stream(255, (1u << 28) - 1, (1u << 28) - 1), ~0ull);
    // The fields do not overlap: the largest b and the smallest a differ.
    ck_assert(rng_stream(1, 0, (1u << 28) - 1) != rng_stream(1, 1, 0));
    ck_assert(rng_stream(1, (1u << 28) - 1, 0) != rng_stream(2, 0, 0));
}
END_TEST

// Out-of-range numbers end the run with a CHECK (exit code 3) rather than
// quietly sharing another stream's values.
START_TEST(test_rng_stream_a_too_big) {
    if (!freopen("/dev/null", "w", stderr)) { /* the message is not needed */ }
    rng_stream(RNG_INIT, 1u << 28, 0);
}
END_TEST

START_TEST(test_rng_stream_purpose_too_big) {
    if (!freopen("/dev/null", "w", stderr)) { /* the message is not needed */ }
    rng_stream(256, 0, 0);
}
END_TEST

// ---- statistics ------------------------------------------------------------
//
// Each statistic is a z-score with a bound of 5 standard errors: a true source
// fails one with probability 5.7e-7 (two-sided normal tail). The tests use
// fixed seeds, so the outcome is the same on every run; the rate says how
// unlucky the seed would have to be.

enum { NSAMPLE = 1000000 };
static const double Z_BOUND = 5.0;

// Which of a normal sample's statistics reject it, as bits (0: none).
enum { BAD_MEAN = 1, BAD_VAR = 2, BAD_TAIL1 = 4, BAD_TAIL2 = 8, BAD_TAIL3 = 16 };

static int normal_sample_rejects(const float *z, size_t n) {
    double sum = 0.0, sum2 = 0.0;
    size_t beyond[3] = {0, 0, 0};  // |z| > 1, 2, 3
    for (size_t i = 0; i < n; i++) {
        double v = z[i];
        sum += v;
        sum2 += v * v;
        for (int s = 0; s < 3; s++) beyond[s] += fabs(v) > s + 1;
    }
    double mean = sum / n;
    double var = sum2 / n - mean * mean;
    int bad = 0;
    // The mean of n standard normals has standard error 1/sqrt(n); the sample
    // variance has standard error sqrt(2/n) (the variance of z^2 is 2).
    if (fabs(mean) > Z_BOUND / sqrt((double)n)) bad |= BAD_MEAN;
    if (fabs(var - 1.0) > Z_BOUND * sqrt(2.0 / n)) bad |= BAD_VAR;
    // Two-sided tail probabilities of the standard normal, erfc(k / sqrt 2);
    // a count of n trials has binomial standard error sqrt(p (1 - p) / n).
    const double p[3] = {0.31731050786291415, 0.04550026389635844, 0.0026997960632601913};
    for (int s = 0; s < 3; s++) {
        double frac = (double)beyond[s] / n;
        if (fabs(frac - p[s]) > Z_BOUND * sqrt(p[s] * (1.0 - p[s]) / n)) bad |= BAD_TAIL1 << s;
    }
    return bad;
}

// Pearson's chi-square of a uniform sample over 100 equal bins of [0, 1).
static double uniform_chi_square(const float *u, size_t n) {
    enum { BINS = 100 };
    size_t count[BINS] = {0};
    for (size_t i = 0; i < n; i++) count[(int)(u[i] * BINS)]++;
    double expect = (double)n / BINS, chi2 = 0.0;
    for (int b = 0; b < BINS; b++) chi2 += (count[b] - expect) * (count[b] - expect) / expect;
    return chi2;
}
// For a true uniform source the statistic follows chi-square with 99 degrees
// of freedom, which exceeds 181.1 with probability 1e-6 (mean 99, sd 14).
static const double CHI2_99_BOUND = 181.1;

START_TEST(test_rng_normal_statistics) {
    float *z = malloc(NSAMPLE * sizeof *z);  // (NSAMPLE)
    ck_assert_ptr_nonnull(z);
    rng_fill_normal(z, NSAMPLE, 2024, rng_stream(RNG_TEST, 1, 0), 0, 0.0f, 1.0f);
    // Count in the loop and assert once: each Check assertion costs a write to
    // the test's parent process, too slow a million times over.
    size_t not_finite = 0;
    for (size_t i = 0; i < NSAMPLE; i++) not_finite += !isfinite(z[i]);
    ck_assert_uint_eq(not_finite, 0);
    ck_assert_int_eq(normal_sample_rejects(z, NSAMPLE), 0);
    free(z);
}
END_TEST

// The statistic must reject broken normals, each through the test meant for
// its fault: a shifted mean, a scale 1% too large, and values with the right
// mean and variance but the wrong shape (Box-Muller on one uniform instead of
// two, and a uniform stretched to variance 1).
START_TEST(test_rng_normal_statistics_reject_broken) {
    float *z = malloc(NSAMPLE * sizeof *z);  // (NSAMPLE)
    ck_assert_ptr_nonnull(z);
    const uint64_t seed = 2024, stream = rng_stream(RNG_TEST, 1, 0);

    rng_fill_normal(z, NSAMPLE, seed, stream, 0, 0.01f, 1.0f);
    ck_assert(normal_sample_rejects(z, NSAMPLE) & BAD_MEAN);

    rng_fill_normal(z, NSAMPLE, seed, stream, 0, 0.0f, 1.01f);
    ck_assert(normal_sample_rejects(z, NSAMPLE) & BAD_VAR);

    for (size_t i = 0; i < NSAMPLE; i++) {
        double u = 1.0 - rng_uniform(seed, stream, i);  // (0, 1]
        z[i] = (float)(sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * u));
    }
    int bad = normal_sample_rejects(z, NSAMPLE);
    ck_assert_msg(bad != 0, "Box-Muller on one uniform passed");

    for (size_t i = 0; i < NSAMPLE; i++)
        z[i] = (float)(sqrt(12.0) * (rng_uniform(seed, stream, i) - 0.5));
    bad = normal_sample_rejects(z, NSAMPLE);
    ck_assert_msg(bad & (BAD_TAIL1 | BAD_TAIL2 | BAD_TAIL3), "a stretched uniform passed the "
                  "tail tests (rejected by %d)", bad);
    free(z);
}
END_TEST

START_TEST(test_rng_uniform_statistics) {
    float *u = malloc(NSAMPLE * sizeof *u);  // (NSAMPLE)
    ck_assert_ptr_nonnull(u);
    rng_fill_uniform(u, NSAMPLE, 7, rng_stream(RNG_TEST, 2, 0), 0, 0.0f, 1.0f);
    size_t out_of_range = 0, not_24_bit = 0;
    for (size_t i = 0; i < NSAMPLE; i++) {
        out_of_range += !(u[i] >= 0.0f && u[i] < 1.0f);
        // 24 bits of precision: every value is a whole number of 2^-24.
        float scaled = u[i] * 16777216.0f;
        not_24_bit += scaled != floorf(scaled);
    }
    ck_assert_uint_eq(out_of_range, 0);
    ck_assert_uint_eq(not_24_bit, 0);
    double chi2 = uniform_chi_square(u, NSAMPLE);
    ck_assert_msg(chi2 < CHI2_99_BOUND, "chi-square %.1f over 100 bins (bound %.1f)", chi2,
                  CHI2_99_BOUND);

    // Negative control: u^1.02 leans 2% toward 0 at most; the same test must
    // reject it.
    for (size_t i = 0; i < NSAMPLE; i++) u[i] = powf(u[i], 1.02f);
    double chi2_bad = uniform_chi_square(u, NSAMPLE);
    ck_assert_msg(chi2_bad > CHI2_99_BOUND, "chi-square %.1f of a biased source passed",
                  chi2_bad);
    free(u);
}
END_TEST

static Suite *rng_suite(void) {
    Suite *s = suite_create("rng");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, test_philox_known_answers);
    tcase_add_test(tc, test_rng_reference_values);
    tcase_add_test(tc, test_rng_slice_equals_whole);
    tcase_add_test(tc, test_rng_deterministic);
    tcase_add_test(tc, test_rng_seeds_and_streams_differ);
    tcase_add_test(tc, test_rng_stream_layout);
    tcase_add_exit_test(tc, test_rng_stream_a_too_big, EXIT_CHECK);
    tcase_add_exit_test(tc, test_rng_stream_purpose_too_big, EXIT_CHECK);
    tcase_add_test(tc, test_rng_normal_statistics);
    tcase_add_test(tc, test_rng_normal_statistics_reject_broken);
    tcase_add_test(tc, test_rng_uniform_statistics);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(rng_suite()); }
