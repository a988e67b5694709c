// core.c: error checks, rank-aware printing, clock.
#include "core.h"

#include <dirent.h>
#include <fcntl.h>
#include <mpi.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int g_rank = -1;
static int g_world = 0;
static const char *g_program = "pl";
static void (*g_abort_hook)(int) = NULL;
static void (*g_usage_hook)(void) = NULL;

// The launcher tells each process its rank in the environment; reading it lets
// a program print argument errors once, before MPI is up.
static int rank_from_env(void) {
    static const char *names[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
                                  "SLURM_PROCID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v) return atoi(v);
    }
    return 0;
}

int core_rank(void) { return g_rank >= 0 ? g_rank : rank_from_env(); }
int core_world_size(void) { return g_world; }

void core_set_rank(int rank, int world_size) {
    g_rank = rank;
    g_world = world_size;
}

void core_set_program(const char *name) {
    const char *slash = strrchr(name, '/');
    g_program = slash ? slash + 1 : name;
}

const char *core_program(void) { return g_program; }

void core_set_abort_hook(void (*hook)(int)) { g_abort_hook = hook; }

static void (*g_cleanups[8])(void);
static volatile sig_atomic_t g_ncleanups;

void core_run_cleanups(void) {
    // Each runs once, even when this is reached again from a signal.
    while (g_ncleanups > 0) {
        void (*fn)(void) = g_cleanups[--g_ncleanups];
        fn();
    }
}

static bool g_cleanups_sealed;

void core_add_cleanup(void (*fn)(void)) {
    CHECK(!g_cleanups_sealed, "core_add_cleanup after the harness started: the cleanups are the harness's own "
          "(they run after the run's dump is written, so nothing else may add one)");
    static bool registered;
    if (!registered) atexit(core_run_cleanups), registered = true;
    if (g_ncleanups < 8) g_cleanups[g_ncleanups++] = fn;
}

void core_seal_cleanups(void) { g_cleanups_sealed = true; }

// What was registered before (a constructor of any file, before main) is
// dropped: the harness registers its own next.
void core_clear_cleanups(void) {
    CHECK(!g_cleanups_sealed, "core_clear_cleanups after the cleanups were sealed");
    g_ncleanups = 0;
}

// Format into one buffer and write it with one call, so lines from several
// ranks sharing a terminal do not interleave mid-line.
static void vwrite_line(FILE *f, const char *prefix, const char *fmt, va_list ap) {
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s", prefix);
    if (n < 0) n = 0;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    if (m < 0) m = 0;
    size_t len = strlen(buf);
    fflush(f);
    if (fwrite(buf, 1, len, f) != len) { /* nothing useful to do */ }
    fflush(f);
}

PL_NORETURN void core_fail(const char *file, int line, const char *fmt, ...) {
    char prefix[256];
    snprintf(prefix, sizeof prefix, "[%s rank %d] error at %s:%d: ", g_program, core_rank(), file,
             line);
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s%s\n", prefix, msg);
    fflush(stderr);
    core_run_cleanups();
    if (g_abort_hook) g_abort_hook(EXIT_CHECK);
    exit(EXIT_CHECK);
}

void core_set_usage_hook(void (*hook)(void)) { g_usage_hook = hook; }

PL_NORETURN void core_usage_error(const char *fmt, ...) {
    char msg[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    int up = 0, down = 0;
    MPI_Initialized(&up);
    MPI_Finalized(&down);
    if (!up || down) {
        // Before MPI every rank parses the same command line and finds the
        // same mistake: rank 0 alone says it.
        // The others wait a moment before they exit: mpirun ends the job
        // at the first rank that exits with an error, and a rank 0 not yet
        // scheduled (a loaded machine) was ended before its line got out.
        if (core_rank() == 0) {
            fprintf(stderr, "%s: %s\n", g_program, msg);
            fflush(stderr);
        } else {
            struct timespec nap = {0, 500 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        exit(EXIT_USAGE);
    }
    // MPI is up. Finalizing would wait for ranks that never found the
    // mistake, so the job is aborted instead. When every rank found it,
    // rank 0 says it and its abort ends the others while they wait here;
    // a mistake found on this rank alone is said by this rank after the wait.
    if (g_usage_hook) g_usage_hook();   // the other ranks end without a line of their own
    if (core_rank() != 0) {
        double until = core_now() + 1.0;
        while (core_now() < until) {
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
        }
        fprintf(stderr, "%s (rank %d): %s\n", g_program, core_rank(), msg);
    } else {
        fprintf(stderr, "%s: %s\n", g_program, msg);
    }
    fflush(stderr);
    core_run_cleanups();
    if (g_abort_hook) g_abort_hook(EXIT_USAGE);
    exit(EXIT_USAGE);
}

void print0(const char *fmt, ...) {
    if (core_rank() != 0) return;
    va_list ap;
    va_start(ap, fmt);
    vwrite_line(stdout, "", fmt, ap);
    va_end(ap);
}

void printr(const char *fmt, ...) {
    char prefix[32];
    snprintf(prefix, sizeof prefix, "[rank %d] ", core_rank());
    va_list ap;
    va_start(ap, fmt);
    vwrite_line(stdout, prefix, fmt, ap);
    va_end(ap);
}

double core_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

const char *core_fmt_bytes(double bytes, char *buf, size_t len) {
    const char *units[] = {"B", "kB", "MB", "GB", "TB"};
    int u = 0;
    double v = bytes < 0 ? -bytes : bytes;
    while (v >= 1000.0 && u < 4) {
        v /= 1000.0;
        u++;
    }
    if (bytes < 0) v = -v;
    if (u == 0)
        snprintf(buf, len, "%.0f B", v);
    else
        snprintf(buf, len, "%.*f %s", v < 10 ? 2 : (v < 100 ? 1 : 0), v, units[u]);
    return buf;
}

const char *core_mpi_error_string(int err) {
    static char buf[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(err, buf, &len) != MPI_SUCCESS) snprintf(buf, sizeof buf, "MPI error %d", err);
    return buf;
}

// FNV-1a's multiply over 8-byte words (bytes at the tail), then a final mix.
bool core_hash_fd(int fd, uint64_t n, uint64_t *out) {
    static uint8_t buf[1 << 20];
    uint64_t h = 1469598103934665603ull, done = 0;
    if (lseek(fd, 0, SEEK_SET) != 0) return false;
    while (done < n) {
        size_t want = n - done < sizeof buf ? (size_t)(n - done) : sizeof buf;
        ssize_t got = read(fd, buf, want);
        if (got <= 0) return false;
        size_t k = 0;
        for (; k + 8 <= (size_t)got; k += 8) {
            uint64_t w;
            memcpy(&w, buf + k, 8);
            h = (h ^ w) * 1099511628211ull;
        }
        for (; k < (size_t)got; k++) h = (h ^ buf[k]) * 1099511628211ull;
        done += (uint64_t)got;
    }
    h ^= h >> 31;
    h *= 0x9e3779b97f4a7c15ull;
    *out = h ^ (h >> 29);
    return true;
}

bool core_hash_file(const char *path, uint64_t *out) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return false;
    off_t size = lseek(fd, 0, SEEK_END);
    bool ok = size >= 0 && core_hash_fd(fd, (uint64_t)size, out);
    close(fd);
    return ok;
}

void core_remove_under(int fd, int depth) {
    DIR *d = fdopendir(fd);
    if (!d) {
        close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        struct stat st;
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
        if (S_ISDIR(st.st_mode) && depth > 0) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub >= 0) core_remove_under(sub, depth - 1);
        }
        unlinkat(dirfd(d), e->d_name, S_ISDIR(st.st_mode) ? AT_REMOVEDIR : 0);
    }
    closedir(d);
}
