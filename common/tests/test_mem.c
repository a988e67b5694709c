// test_mem.c: per-category accounting and the independent heap measure.
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "ops.h"
#include "mem_cuda.h"
#include "rng.h"
#include "testutil.h"

START_TEST(peaks_per_category) {
    size_t base = mem_live_total();
    void *a = mem_alloc(1000, MEM_PARAMS, "a");
    void *b = mem_alloc(3000, MEM_GRADS, "b");
    ck_assert_uint_eq(mem_live(MEM_PARAMS), 1000);
    ck_assert_uint_eq(mem_live(MEM_GRADS), 3000);
    mem_free(b);
    void *c = mem_alloc(2000, MEM_GRADS, "c");
    void *d = mem_alloc(500, MEM_OPTIM, "d");
    // GRADS peaked at 3000 while 2000 is live; the total peaked at 4000
    // (a + b), not at the sum of the category peaks (5500).
    ck_assert_uint_eq(mem_live(MEM_GRADS), 2000);
    ck_assert_uint_eq(mem_peak(MEM_GRADS), 3000);
    ck_assert_uint_eq(mem_peak(MEM_OPTIM), 500);
    ck_assert_uint_eq(mem_peak_total() - base, 4000);
    mem_free(a);
    mem_free(c);
    mem_free(d);
    ck_assert_uint_eq(mem_live_total(), base);
    ck_assert_uint_eq(mem_live(MEM_PARAMS), 0);
    mem_reset_peaks();
    ck_assert_uint_eq(mem_peak(MEM_GRADS), 0);
    ck_assert_uint_eq(mem_peak_total(), base);
}
END_TEST

START_TEST(alloc_is_zeroed_and_copies_work) {
    size_t n = 1 << 16;
    float *x = mem_alloc_floats(n, MEM_ACTS, "x");
    float *host = malloc(n * sizeof(float));
    mem_to_host(host, x, n * sizeof(float));
    size_t nonzero = 0;
    for (size_t i = 0; i < n; i++) nonzero += host[i] != 0.0f;
    ck_assert_uint_eq(nonzero, 0);
    for (size_t i = 0; i < n; i++) host[i] = (float)i;
    mem_from_host(x, host, n * sizeof(float));
    float *y = mem_alloc_floats(n, MEM_ACTS, "y");
    mem_copy(y, x, n * sizeof(float));
    memset(host, 0, n * sizeof(float));
    mem_to_host(host, y, n * sizeof(float));
    for (size_t i = 0; i < n; i++) ck_assert_float_eq(host[i], (float)i);
    mem_zero(y, n * sizeof(float));
    mem_to_host(host, y, sizeof(float));
    ck_assert_float_eq(host[0], 0.0f);
    free(host);
    mem_free(x);
    mem_free(y);
}
END_TEST

// Blocks are handed to this sink so the compiler cannot drop an allocation
// whose result is never read.
static void *volatile sink;

START_TEST(measure_sees_allocations_that_bypass_mem) {
    size_t live0 = mem_measured_live();
    mem_reset_peaks();
    char *p = malloc(1 << 20);
    sink = p;
    ck_assert_uint_eq(mem_measured_live() - live0, 1 << 20);
    char *q = calloc(1000, 8);
    sink = q;
    ck_assert_uint_eq(mem_measured_live() - live0, (1 << 20) + 8000);
    p = realloc(p, 3 << 20);
    sink = p;
    ck_assert_uint_eq(mem_measured_live() - live0, (3 << 20) + 8000);
    void *r = NULL;
    ck_assert_int_eq(posix_memalign(&r, 4096, 12345), 0);
    void *s = aligned_alloc(64, 6400);
    sink = r;
    sink = s;
    ck_assert_uint_eq(mem_measured_live() - live0, (3 << 20) + 8000 + 12345 + 6400);
    free(p);
    free(q);
    free(r);
    free(s);
    ck_assert_uint_eq(mem_measured_live(), live0);
    ck_assert_uint_ge(mem_measured_peak() - live0, (3 << 20) + 8000 + 12345 + 6400);
    // The categories never see any of it.
    ck_assert_uint_eq(mem_live(MEM_OTHER), 0);
}
END_TEST

START_TEST(measure_covers_mem_alloc) {
    size_t live0 = mem_measured_live();
    float *x = mem_alloc_floats(1 << 20, MEM_PARAMS, "x");
    // mem_alloc rounds up to 64 bytes; 4 MiB is a multiple already.
    ck_assert_uint_eq(mem_measured_live() - live0, 4u << 20);
    mem_free(x);
    ck_assert_uint_eq(mem_measured_live(), live0);
}
END_TEST

START_TEST(many_blocks_in_random_order) {
    // Exercises the pointer maps' growth and their deletion (entries shifted
    // back): the live counts must return exactly to where they started.
    enum { N = 20000 };
    typedef struct {
        void *p;
        int from_mem;
    } Block;
    Block *blocks = malloc(N * sizeof *blocks);
    size_t live0 = mem_measured_live(), cat0 = mem_live_total();
    size_t sum = 0;
    for (int i = 0; i < N; i++) {
        size_t bytes = 1 + rng_u32(7, 0, (uint64_t)i) % 256;
        blocks[i].from_mem = i % 2;
        blocks[i].p = i % 2 ? mem_alloc(bytes, MEM_ACTS, "block") : malloc(bytes);
        sum += bytes;
    }
    ck_assert_uint_ge(mem_measured_live() - live0, sum);
    for (int i = N - 1; i > 0; i--) {   // Fisher-Yates shuffle
        int j = (int)(rng_u32(7, 1, (uint64_t)i) % (uint32_t)(i + 1));
        Block t = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = t;
    }
    for (int i = 0; i < N; i++) {
        if (blocks[i].from_mem)
            mem_free(blocks[i].p);
        else
            free(blocks[i].p);
    }
    ck_assert_uint_eq(mem_live_total(), cat0);
    ck_assert_uint_eq(mem_measured_live(), live0);
    free(blocks);
}
END_TEST

START_TEST(bytes_after_a_pointer) {
    // The bytes left in the block holding a pointer, from its start, its
    // middle and its last byte; none past its end or in untracked memory.
    char *a = mem_alloc(1000, MEM_GRADS, "a"), *b = mem_alloc(24, MEM_COMM, "b");
    static char host[8];
    MemCategory cat = MEM_OTHER;
    ck_assert_uint_eq(mem_bytes_after(a, &cat), 1000);
    ck_assert_int_eq(cat, MEM_GRADS);
    ck_assert_uint_eq(mem_bytes_after(a + 600, NULL), 400);
    ck_assert_uint_eq(mem_bytes_after(a + 999, NULL), 1);
    ck_assert_uint_eq(mem_bytes_after(b + 8, &cat), 16);
    ck_assert_int_eq(cat, MEM_COMM);
    ck_assert_uint_eq(mem_bytes_after(host, NULL), SIZE_MAX);
    mem_free(a);
    ck_assert_uint_eq(mem_bytes_after(a + 600, NULL), SIZE_MAX);
    mem_free(b);
}
END_TEST

START_TEST(block_of_a_pointer_among_many) {
    // The block found by address among blocks allocated and freed in a
    // shuffled order: its start, size and name, from any byte inside it.
    enum { N = 64 };
    char *p[N];
    for (int i = 0; i < N; i++) {
        char name[16];
        snprintf(name, sizeof name, "block %d", i);
        p[i] = mem_alloc((size_t)(i + 1) * 8, MEM_ACTS, name);
    }
    for (int i = 0; i < N; i += 3) mem_free(p[i]), p[i] = NULL;
    for (int i = 0; i < N; i++) {
        MemBlock b;
        if (!p[i]) continue;
        ck_assert(mem_block_of(p[i] + (size_t)i * 8 + 7, &b));
        ck_assert_ptr_eq(b.start, p[i]);
        ck_assert_uint_eq(b.bytes, (size_t)(i + 1) * 8);
        char want[16];
        snprintf(want, sizeof want, "block %d", i);
        ck_assert_str_eq(b.name, want);
        mem_check_extent("test", "p", p[i] + 8, (size_t)i * 4, 2);   // exactly to the end: fine
    }
    for (int i = 0; i < N; i++) mem_free(p[i]);
    ck_assert(!mem_block_of(p[1], NULL));
}
END_TEST

START_TEST(bf16_copy_with_float_size_fails) {
    // 16 bf16 elements copied as if 4 bytes each: past the end of the
    // destination's block, stopped with the call's name (exit 3).
    uint16_t *a = mem_alloc_bf16(16, MEM_ACTS, "a"), *b = mem_alloc_bf16(16, MEM_ACTS, "b");
    ops_copy_2d_typed(b, 16, a, 16, 1, 16, sizeof(float));
}
END_TEST

START_TEST(free_of_unknown_pointer_fails) {
    static float not_mine[4];
    mem_free(not_mine);   // must end the process with a clear message
}
END_TEST

START_TEST(unknown_device_is_a_usage_error) { mem_init("tpu", 0); }
END_TEST

#ifdef PL_CUDA
// The CUDA backend is a library of its own (cuda_backend.c): it loads
// without a GPU, every function the programs stand in for is in it, and its
// calls into the program find what the program exports.
START_TEST(cuda_backend_loads_whole) {
    char why[4096];
    int missing = mem_cuda_verify_backend(why, sizeof why);
    ck_assert_msg(missing == 0, "%s", why);
}
END_TEST
#endif

static Suite *mem_suite(void) {
    Suite *s = suite_create("mem");
    TCase *tc = tcase_create("mem");
    tcase_add_test(tc, peaks_per_category);
    tcase_add_test(tc, alloc_is_zeroed_and_copies_work);
    tcase_add_test(tc, measure_sees_allocations_that_bypass_mem);
    tcase_add_test(tc, measure_covers_mem_alloc);
    tcase_add_test(tc, many_blocks_in_random_order);
    tcase_add_test(tc, bytes_after_a_pointer);
    tcase_add_test(tc, block_of_a_pointer_among_many);
    tcase_add_exit_test(tc, bf16_copy_with_float_size_fails, 3);
    tcase_add_exit_test(tc, free_of_unknown_pointer_fails, 3);
    tcase_add_exit_test(tc, unknown_device_is_a_usage_error, 2);
#ifdef PL_CUDA
    tcase_add_test(tc, cuda_backend_loads_whole);
#endif
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return test_run_suite(mem_suite()); }
