// testutil.h: running Check suites, alone or under mpirun.
#pragma once

#include <check.h>

typedef struct Comm Comm;

// Run a suite in Check's fork mode (each test in its own process), print
// Check's summary line, and return the exit status (0 when all passed).
int test_run_suite(Suite *s);

// Run a suite on every rank of an MPI program. Check's fork mode does not mix
// with MPI, so tests run in no-fork mode; each rank prints its own failures
// with its rank, rank 0 prints Check's summary line, and the status returned
// (the same on every rank) is 0 only when every rank passed every test.
// Tests must make their collective calls before any assertion, and assert on
// values agreed across ranks, so that one rank's failure cannot strand the
// others in a collective.
int test_run_suite_mpi(Suite *s, Comm *c);

// Run a shell command, capture its stdout and stderr (at most cap bytes,
// NUL-terminated) and return its exit status (or 128 + signal).
int test_run_command(const char *cmd, char *out, size_t cap);

// mpirun refuses to start as root unless told; tests that launch it say so
// (a no-op for other users).
void test_allow_mpirun_as_root(void);
