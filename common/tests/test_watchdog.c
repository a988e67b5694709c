// test_watchdog.c: a deadlocked run ends within its timeout, non-zero, and
// every rank names what it was waiting on; a correct run is left alone.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "testutil.h"

static char out[1 << 16];

static int run(int np, const char *mode, double *seconds) {
    const char *prog = getenv("DEADLOCK_PROG") ? getenv("DEADLOCK_PROG") : "build/tests/deadlock";
    char cmd[1024];
    // `timeout` is the backstop: if the watchdog failed, the test still ends.
    snprintf(cmd, sizeof cmd, "timeout 60 mpirun --oversubscribe -np %d %s --timeout 2 --mode %s",
             np, prog, mode);
    double t0 = core_now();
    int rc = test_run_command(cmd, out, sizeof out);
    *seconds = core_now() - t0;
    return rc;
}

START_TEST(deadlock_is_ended_and_explained) {
    double s;
    int rc = run(3, "deadlock", &s);
    ck_assert_msg(rc != 0 && rc != 124, "a deadlocked run exited %d:\n%s", rc, out);
    ck_assert_msg(s < 30, "the deadlocked run took %.1f s to end (timeout 2 s)", s);
    // One line per rank, each naming its own wait.
    ck_assert_msg(strstr(out, "rank 0] ") && strstr(out, "recv of 4 B from rank 1"),
                  "rank 0's wait is not named:\n%s", out);
    ck_assert_msg(strstr(out, "rank 1] ") && strstr(out, "recv of 4 B from rank 0"),
                  "rank 1's wait is not named:\n%s", out);
    ck_assert_msg(strstr(out, "rank 2] ") && strstr(out, "barrier over 3 ranks"),
                  "rank 2's wait is not named:\n%s", out);
    ck_assert_msg(strstr(out, "watchdog: waited in "), "no watchdog line:\n%s", out);
}
END_TEST

START_TEST(correct_run_is_left_alone) {
    double s;
    int rc = run(3, "ok", &s);
    ck_assert_msg(rc == 0, "a correct run exited %d:\n%s", rc, out);
    ck_assert_ptr_nonnull(strstr(out, "no deadlock"));
    ck_assert_ptr_null(strstr(out, "watchdog"));
}
END_TEST

START_TEST(failed_check_stops_every_rank) {
    double s;
    int rc = run(3, "fail", &s);
    ck_assert_msg(rc != 0 && rc != 124, "a failed CHECK exited %d:\n%s", rc, out);
    ck_assert_msg(s < 30, "the failing run took %.1f s to end", s);
    ck_assert_msg(strstr(out, "[deadlock rank 1] error at ") && strstr(out, "rank 1 fails on purpose"),
                  "the failing rank's message is missing:\n%s", out);
}
END_TEST

// A rank stopped (SIGSTOP) is alive but silent: the ranks waiting for it
// must name it, and no line may blame a rank that was only waiting.
START_TEST(frozen_rank_is_named) {
    double s;
    int rc = run(3, "freeze", &s);
    ck_assert_msg(rc != 0 && rc != 124, "a run with a frozen rank exited %d:\n%s", rc, out);
    ck_assert_msg(s < 30, "the run with a frozen rank took %.1f s to end", s);
    // Whichever waiting rank's watchdog fires first names it (rank 0 waits
    // for it in a receive, rank 2 in a barrier; either may come first).
    ck_assert_msg(strstr(out, "rank 0] rank 1 stopped answering (no sign of life for ") ||
                      strstr(out, "rank 2] rank 1 stopped answering (no sign of life for "),
                  "no waiting rank names rank 1 as the one that stopped answering:\n%s", out);
    ck_assert_msg(!strstr(out, "rank 0 stopped answering") && !strstr(out, "rank 2 stopped answering"),
                  "a waiting rank is blamed:\n%s", out);
}
END_TEST

// A usage error found by one rank once MPI is up ends every rank (none
// waits in MPI_Finalize for the others), with code 2 and the line once.
START_TEST(usage_error_on_one_rank_ends_all) {
    double s;
    int rc = run(3, "usage", &s);
    ck_assert_msg(rc == 2, "a usage error on rank 1 exited %d:\n%s", rc, out);
    ck_assert_msg(s < 10, "the run with a usage error on rank 1 took %.1f s to end", s);
    const char *line = "rank 1 alone finds a usage error";
    const char *p = strstr(out, "deadlock (rank 1): rank 1 alone finds a usage error");
    ck_assert_msg(p && !strstr(p + strlen("deadlock (rank 1): ") + strlen(line), line),
                  "the line is not there once:\n%s", out);
    ck_assert_msg(!strstr(out, "stopped while"), "another rank adds a line of its own:\n%s", out);
}
END_TEST

static Suite *watchdog_suite(void) {
    Suite *s = suite_create("watchdog");
    TCase *tc = tcase_create("watchdog");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, deadlock_is_ended_and_explained);
    tcase_add_test(tc, correct_run_is_left_alone);
    tcase_add_test(tc, failed_check_stops_every_rank);
    tcase_add_test(tc, frozen_rank_is_named);
    tcase_add_test(tc, usage_error_on_one_rank_ends_all);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) {
    test_allow_mpirun_as_root();
    return test_run_suite(watchdog_suite());
}
