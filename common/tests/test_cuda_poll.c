// test_cuda_poll.c: pl_event_query (cuda_poll.h) against a model of the two
// runtime functions it relies on, as CUDA documents them: cudaEventQuery
// answers cudaErrorNotReady while the work is under way and records that as
// the last error; cudaGetLastError returns the last error and resets it.
// The model's two functions, defined here, take the place of libcudart's in
// this program (no GPU is needed, nor touched). A wait that polls until the
// work is done must leave no error for the next launch's check to find; the
// control, polling with cudaEventQuery alone, leaves "not ready" behind,
// which is what ended every NCCL run at its first kernel after a wait.
#include <stdio.h>

#if PL_CUDA
#include "cuda_poll.h"
#include "testutil.h"

static int g_busy;                        // queries still to answer "not ready"
static cudaError_t g_last = cudaSuccess;  // the runtime's last error

cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t event) {
    (void)event;
    if (g_busy > 0) {
        g_busy--;
        g_last = cudaErrorNotReady;
        return cudaErrorNotReady;
    }
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGetLastError(void) {
    cudaError_t e = g_last;
    g_last = cudaSuccess;
    return e;
}

START_TEST(a_wait_leaves_no_error_behind) {
    g_busy = 3, g_last = cudaSuccess;
    int polls = 0;
    while (pl_event_query(NULL) != cudaSuccess) polls++;
    ck_assert_int_eq(polls, 3);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);   // the next launch's check
}
END_TEST

START_TEST(polling_with_the_query_alone_does) {
    g_busy = 3, g_last = cudaSuccess;
    while (cudaEventQuery(NULL) != cudaSuccess) {
    }
    ck_assert_int_eq(cudaGetLastError(), cudaErrorNotReady);
}
END_TEST

START_TEST(a_query_of_finished_work_changes_nothing) {
    g_busy = 0, g_last = cudaSuccess;
    ck_assert_int_eq(pl_event_query(NULL), cudaSuccess);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}
END_TEST

int main(void) {
    Suite *s = suite_create("cuda_poll");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_wait_leaves_no_error_behind);
    tcase_add_test(tc, polling_with_the_query_alone_does);
    tcase_add_test(tc, a_query_of_finished_work_changes_nothing);
    suite_add_tcase(s, tc);
    return test_run_suite(s);
}
#else
int main(void) {
    puts("test_cuda_poll: a build without CUDA has no event to poll");
    return 0;
}
#endif
