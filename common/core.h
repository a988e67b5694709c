// core.h: error checks, rank-aware printing and a monotonic clock.
//
// Every check prints the rank, the file and line, and a sentence that says
// what was wrong and what to do, then ends the whole run (all ranks), so a
// failure on one rank never leaves the others hanging.
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#ifdef __cplusplus
#define PL_NORETURN [[noreturn]]
#else
#define PL_NORETURN _Noreturn
#endif

// Exit codes shared by every program of the course.
enum {
    EXIT_USAGE = 2,     // bad command line or impossible configuration
    EXIT_CHECK = 3,     // a CHECK failed at run time
    EXIT_TIMEOUT = 4,   // the watchdog ended a run that stopped making progress
};

// The rank of this process in the world, or -1 before it is known.
// Before MPI starts it is read from the launcher's environment (mpirun, srun),
// so even argument errors are printed once, by rank 0.
int core_rank(void);
int core_world_size(void);
void core_set_rank(int rank, int world_size);

// The program's short name ("lab03", "ref"), used to prefix messages.
void core_set_program(const char *name);
const char *core_program(void);

// Print the failure (rank, file, line, message) and end every rank.
PL_NORETURN void core_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

// A mistake in how the program was called: one line, exit code 2 on every
// rank. Before comm_init every rank finds it and rank 0 says it. After,
// the job is aborted rather than finalized, so a rank that did not find it
// never waits: rank 0 says it when it found it too, else the rank that did
// says it (after up to a second's wait for rank 0).
PL_NORETURN void core_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// Hook run by core_usage_error once MPI is up, before the wait (comm sets it:
// the other ranks of the node then end without a line of their own).
void core_set_usage_hook(void (*hook)(void));

// Cleanups (removing a run's temporary files) run once however the process
// ends: a normal exit, a failed check, a usage error, the watchdog, or
// SIGTERM from the launcher. Each must be async-signal-safe (unlink, rmdir
// of paths it already holds). At most 8.
void core_add_cleanup(void (*fn)(void));
void core_run_cleanups(void);

// What is under the directory open as `fd` (which it closes) removed,
// `depth` levels down at most; links are removed, not followed.
void core_remove_under(int fd, int depth);
// The training labs' harness owns the cleanups: it clears what was added
// before it started (a constructor's), adds its own, then seals them, and
// from then on core_add_cleanup fails the run (a cleanup runs after the dump
// is written, so one of the student's could rewrite it).
void core_clear_cleanups(void);
void core_seal_cleanups(void);

// Hook run by core_fail before the process ends (comm sets it to MPI_Abort).
void core_set_abort_hook(void (*hook)(int exit_code));

// printf on rank 0 only (or when the rank is not known yet).
void print0(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
// printf with a "[rank r] " prefix, on every rank, in one write.
void printr(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

// Seconds on a monotonic clock (never jumps back; for timing only).
double core_now(void);

// Human-readable byte count into buf: "512 B", "1.66 MB" (decimal units).
const char *core_fmt_bytes(double bytes, char *buf, size_t len);

// A 64-bit hash of the first `n` bytes of the file open as fd (read from
// its start, in chunks; no copy of it is kept): to tell whether a kept file
// is whole (dump_seal) and whether a program or an input changed
// (refcache.h). False when the bytes cannot be read.
bool core_hash_fd(int fd, uint64_t n, uint64_t *out);
// The same of a whole file by path (false when it cannot be read).
bool core_hash_file(const char *path, uint64_t *out);

// CHECK(cond, "sentence %d", x): if cond is false, report and end the run.
#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) core_fail(__FILE__, __LINE__, __VA_ARGS__);               \
    } while (0)

// MPI_CHECK(MPI_Send(...)): an MPI call that must succeed.
#define MPI_CHECK(call)                                                        \
    do {                                                                       \
        int mpi_err_ = (call);                                                 \
        if (mpi_err_ != 0 /* MPI_SUCCESS */)                                   \
            core_fail(__FILE__, __LINE__, "%s failed: %s", #call,              \
                      core_mpi_error_string(mpi_err_));                        \
    } while (0)
const char *core_mpi_error_string(int err);

// CUDA_CHECK and NCCL_CHECK live in the CUDA sources (they need the CUDA
// headers); they report through core_fail in the same way.
