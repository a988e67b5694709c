// refcache.c: the reference runs, trained once and kept (refcache.h).
#include "refcache.h"

#include <cblas.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core.h"
#include "dump.h"
#include "gpt.h"
#include "mem.h"
#include "mem_cuda.h"
#include "ops.h"

extern char **environ;

// The folders of the latest builds of build/ref are kept, and any used in
// the last hours (a cache shared by several trees, the tests' releases among
// them, holds several builds at once).
enum { KEEP_BUILDS = 3, KEEP_USED_S = 6 * 3600 };

static uint64_t hash_string(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void refcache_default_root(const char *bindir, char *out, size_t len) {
    const char *env = getenv("PL_REFCACHE");
    if (env && env[0]) snprintf(out, len, "%s", env);
    else snprintf(out, len, "%s/refcache", bindir);
}

// The folders of other builds of build/ref (16 hex digits): the newest
// KEEP_BUILDS - 1 kept beside this one, and every one used in the last
// KEEP_USED_S seconds (refcache_open marks its folder used).
static void prune_builds(const RefCache *rc) {
    DIR *d = opendir(rc->root);
    if (!d) return;
    char names[64][17];
    time_t when[64];
    int n = 0;
    const char *mine = strrchr(rc->dir, '/') + 1;
    struct dirent *e;
    while ((e = readdir(d)) && n < 64) {
        if (strlen(e->d_name) != 16 || strspn(e->d_name, "0123456789abcdef") != 16 || strcmp(e->d_name, mine) == 0)
            continue;
        char path[PATH_MAX + 20];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", rc->root, e->d_name);
        if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode)) continue;
        snprintf(names[n], sizeof names[n], "%s", e->d_name);
        when[n++] = st.st_mtime;
    }
    closedir(d);
    for (int i = 0; i < n; i++) {
        int newer = 0;
        for (int j = 0; j < n; j++) newer += when[j] > when[i] || (when[j] == when[i] && j < i);
        if (newer < KEEP_BUILDS - 1 || time(NULL) - when[i] < KEEP_USED_S) continue;
        char path[PATH_MAX + 40];
        snprintf(path, sizeof path, "%s/%.16s", rc->root, names[i]);
        int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) core_remove_under(fd, 0);
        rmdir(path);
    }
}

bool refcache_open(RefCache *rc, const char *root, const char *ref, char *why, size_t len) {
    memset(rc, 0, sizeof *rc);
    uint64_t id;
    if (!core_hash_file(ref, &id)) {
        snprintf(why, len, "cannot read the reference program %s (%s); build it with make", ref, strerror(errno));
        return false;
    }
    snprintf(rc->ref, sizeof rc->ref, "%s", ref);
    snprintf(rc->root, sizeof rc->root, "%s", root);
    snprintf(rc->dir, sizeof rc->dir, "%s/%016llx", root, (unsigned long long)id);
    mkdir(root, 0700);
    bool fresh = mkdir(rc->dir, 0700) == 0;
    struct stat st;
    if (stat(rc->dir, &st) != 0 || !S_ISDIR(st.st_mode) || access(rc->dir, W_OK | X_OK) != 0) {
        snprintf(why, len, "cannot make the reference cache %s (%s)", rc->dir, strerror(errno));
        return false;
    }
    utimensat(AT_FDCWD, rc->dir, NULL, 0);   // the build last used: the one kept
    if (fresh) prune_builds(rc);
    rc->parallel_ok = true;
    return true;
}

// The device the reference trains on, as the key names it.
static const char *device_of(const char *device) {
    if (strcmp(device, "auto") != 0) return device;
    return mem_cuda_device_count() > 0 ? "cuda" : "cpu";   // as mem_init chooses
}

void refcache_set(const RefCache *rc, const Args *asked, RefSet *set) {
    memset(set, 0, sizeof *set);
    // --device auto is the device it picks here: one entry for both names.
    Args resolved = *asked;
    resolved.device = device_of(asked->device);
    const Args *a = &resolved;
    args_reference_flags(a, set->flags, sizeof set->flags);
    set->n = train_yardstick(a->batch, gpt_precision_parse(a->precision) == GPT_BF16, set->runs, YARDSTICK_MAX);
    uint64_t data = 0;
    if (a->data) CHECK(core_hash_file(a->data, &data), "cannot read --data %s: %s", a->data, strerror(errno));
    const char *kernel = openblas_get_corename();
    for (int k = 0; k < set->n; k++) {
        const YardstickRun *y = &set->runs[k];
        char key[2048];
        snprintf(key, sizeof key, "%s|micro %d|mean %d|rounding %s|blas %s|device %s|data %016llx", set->flags,
                 y->micro, y->micro_mean, ops_rounding_name(y->rounding), kernel ? kernel : "?",
                 device_of(a->device), (unsigned long long)data);
        snprintf(set->paths[k], sizeof set->paths[k], "%s/%016llx.bin", rc->dir,
                 (unsigned long long)hash_string(key));
    }
    // Six multiply-adds a parameter a token (forward and backward), and
    // attention's scores and mixing: an estimate of the work, not a count.
    double C = a->dim, L = a->layers, T = a->seq, P = 2.0 * a->vocab * C + T * C + L * 12 * C * C;
    set->flops = (6 * P + 12 * L * T * C) * (double)a->batch * T * a->steps;
}

int refcache_missing(const RefSet *set) {
    int n = 0;
    for (int k = 0; k < set->n; k++) n += !dump_sealed(set->paths[k], NULL);
    return n;
}

// The rate build/ref trained at here last time, FLOP/s (root/rate).
static double read_rate(const RefCache *rc) {
    char path[PATH_MAX + 8];
    snprintf(path, sizeof path, "%s/rate", rc->root);
    FILE *f = fopen(path, "r");
    double r = 0;
    if (f) {
        if (fscanf(f, "%lf", &r) != 1) r = 0;
        fclose(f);
    }
    return r > 1e6 && r < 1e16 ? r : 1e10;   // a guess the first time: ten GFLOP/s on one core
}

static void write_rate(const RefCache *rc, double r) {
    char path[PATH_MAX + 8], tmp[PATH_MAX + 40];
    snprintf(path, sizeof path, "%s/rate", rc->root);
    snprintf(tmp, sizeof tmp, "%s.%d", path, (int)getpid());
    FILE *f = fopen(tmp, "w");
    if (!f) return;
    fprintf(f, "%.6g\n", r);
    if (fclose(f) == 0) rename(tmp, path);
    else unlink(tmp);
}

double refcache_estimate(const RefCache *rc, const RefSet *set, int jobs) {
    int missing = refcache_missing(set);
    int rounds = (missing + (jobs > 0 ? jobs : 1) - 1) / (jobs > 0 ? jobs : 1);
    return rounds * set->flops / read_rate(rc);
}

// The CPUs this process's parent may use: under mpirun a rank is bound to
// one core, and the build/ref it starts would all share it.
static bool parent_cpus(cpu_set_t *set) {
    CPU_ZERO(set);
    return sched_getaffinity(getppid(), sizeof *set, set) == 0 && CPU_COUNT(set) > 0;
}

int refcache_jobs(const RefSet *set) {
    cpu_set_t cpus;
    int n = parent_cpus(&cpus) ? CPU_COUNT(&cpus) : 1;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) > n) n = CPU_COUNT(&cpus);
    // Each run holds the whole batch's model: as many as a third of the
    // memory free holds.
    Args a = args_defaults();
    args_apply_flags(&a, set->flags);
    GptConfig cfg = {.B = a.batch, .T = a.seq, .C = a.dim, .NH = a.heads, .L = a.layers, .V = a.vocab,
                     .precision = gpt_precision_parse(a.precision)};
    double each = gpt_bytes_needed(&cfg), avail = mem_available();
    if (each > 0 && avail > 0 && avail / 3 / each < n) n = (int)(avail / 3 / each);
    return n < 1 ? 1 : n > set->n ? set->n : n;
}

void refcache_count(const RefCache *rc, const RefSet *set, int found, int trained) {
    char path[PATH_MAX + 16], line[1200];
    snprintf(path, sizeof path, "%s/lookups", rc->root);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (fd < 0) return;
    int n = snprintf(line, sizeof line, "%d %d %.1100s\n", found, trained, set->flags);
    if (write(fd, line, (size_t)n) != n) { /* a count lost is no error */ }
    close(fd);
}

// ---- training the missing entries -------------------------------------------

// The environment build/ref runs in: this process's, less what a launcher
// put there for its ranks (a rank that starts build/ref must not make it
// think it is a rank of the job). Open MPI's OPAL_PREFIX stays: a relocated
// Open MPI (the GPU bundle's) is found by it.
static char **child_environment(void) {
    static const char *const drop[] = {"OMPI_", "PMIX_", "PRTE_", "ORTE_", "PMI_", "SLURM_", NULL};
    int n = 0;
    while (environ[n]) n++;
    char **env = calloc((size_t)n + 3, sizeof *env);
    CHECK(env, "out of memory");
    int m = 0;
    // A singleton that starts no daemon of its own (Open MPI forks an orted
    // for one otherwise, and two starting at once can fail MPI_Init).
    static char isolated[] = "OMPI_MCA_ess_singleton_isolated=1";
    env[m++] = isolated;
    // One BLAS thread, from the start (build/ref asks for one, but OpenBLAS
    // starts its pool before it can, and the idle threads spin a while).
    static char one_thread[] = "OPENBLAS_NUM_THREADS=1";
    env[m++] = one_thread;
    for (int i = 0; i < n; i++) {
        bool keep = strncmp(environ[i], "OMPI_ALLOW_RUN_AS_ROOT", 22) == 0;
        if (strncmp(environ[i], "OPENBLAS_NUM_THREADS=", 21) == 0) continue;
        for (const char *const *p = drop; *p && !keep; p++)
            if (strncmp(environ[i], *p, strlen(*p)) == 0) goto skip;
        env[m++] = environ[i];
    skip:;
    }
    return env;
}

// One entry being made: its lock (held until it is whole in the cache), the
// file build/ref writes it to (renamed into place by dump_close, so that its
// appearance says the run is done), and the process making it.
typedef struct {
    int k;            // the yardstick run
    int lock;
    int job;          // the process making it
    bool done;
    char tmp[PATH_MAX + 96];
} Entry;

// One build/ref process, training its entries one after another.
typedef struct {
    pid_t pid;        // 0: ended
    double t0, last;  // when it started, when its last entry came
    char log[PATH_MAX + 96];
} Job;

// The last lines build/ref printed, for the error.
static void tail_of(const char *path, char *out, size_t len) {
    out[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return;
    char buf[1800];
    fseek(f, 0, SEEK_END);
    long size = ftell(f), from = size > (long)sizeof buf - 1 ? size - (long)sizeof buf + 1 : 0;
    fseek(f, from, SEEK_SET);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    while (n && buf[n - 1] == '\n') buf[--n] = 0;
    const char *start = buf;
    for (int lines = 0; n > 0 && lines < 8; n--)
        if (buf[n - 1] == '\n' && ++lines == 8) start = buf + n;
    snprintf(out, len, "%s", start);
}

// Start build/ref for the entries of job j (entry e is job j's when e % njobs == j).
static bool start_job(const RefCache *rc, const RefSet *set, Entry *e, int n, int j, int njobs, Job *job, char **env,
                      char *err, size_t len) {
    snprintf(job->log, sizeof job->log, "%s/job%d.%d.log", rc->dir, j, (int)getpid());
    // build/ref FLAGS --yardstick K:TMP,K:TMP...
    char words[2048], runs[8 * (PATH_MAX + 110)];
    snprintf(words, sizeof words, "%s", set->flags);
    size_t at = 0;
    for (int i = j; i < n; i += njobs)
        at += (size_t)snprintf(runs + at, sizeof runs - at, "%s%d:%s", at ? "," : "", e[i].k, e[i].tmp);
    char *argv[64];
    int argc = 0;
    argv[argc++] = (char *)rc->ref;
    char *save = NULL;
    for (char *t = strtok_r(words, " ", &save); t && argc < 58; t = strtok_r(NULL, " ", &save)) argv[argc++] = t;
    argv[argc++] = "--yardstick";
    argv[argc++] = runs;
    argv[argc] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 1, job->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    // The children may use every CPU the parent may, not only this rank's
    // (the binding is inherited: widened for the spawn, then restored).
    cpu_set_t mine, wide;
    bool widen = sched_getaffinity(0, sizeof mine, &mine) == 0 && parent_cpus(&wide);
    if (widen) sched_setaffinity(0, sizeof wide, &wide);
    int rc_spawn = posix_spawn(&job->pid, rc->ref, &fa, NULL, argv, env);
    if (widen) sched_setaffinity(0, sizeof mine, &mine);
    posix_spawn_file_actions_destroy(&fa);
    if (rc_spawn != 0) {
        snprintf(err, len, "cannot start %s: %s", rc->ref, strerror(rc_spawn));
        job->pid = 0;
        return false;
    }
    job->t0 = job->last = core_now();
    return true;
}

// An entry whose dump build/ref finished: read back whole, sealed, renamed
// into place, its lock let go.
static bool finish_entry(const RefSet *set, Entry *e, char *err, size_t len) {
    const char *why = NULL;
    DumpFile *f = dump_read(e->tmp, &why);
    bool ok = f != NULL;
    dump_free(f);
    ok = ok && dump_seal(e->tmp, &why) && rename(e->tmp, set->paths[e->k]) == 0;
    if (!ok) snprintf(err, len, "the reference run `build/ref %s` (yardstick run %d) left a dump that %s", set->flags,
                      e->k, why ? why : "cannot be put in the cache");
    unlink(e->tmp);
    close(e->lock);
    e->done = true;
    return ok;
}

// Why a job failed, from how it ended and its last lines.
static void job_failed(const RefSet *set, const Job *job, int status, char *err, size_t len) {
    char last[1800], how[96];
    tail_of(job->log, last, sizeof last);
    if (WIFSIGNALED(status)) snprintf(how, sizeof how, "killed by %s", strsignal(WTERMSIG(status)));
    else snprintf(how, sizeof how, "exit %d", WEXITSTATUS(status));
    snprintf(err, len, "the reference run `build/ref %s` failed (%s): %s", set->flags, how,
             last[0] ? last : "it printed nothing");
}

bool refcache_fill(RefCache *rc, RefSet *set, int jobs, double limit, void (*done)(int k, double s, void *ctx),
                   void *ctx, char *err, size_t len) {
    err[0] = 0;
    if (jobs < 1 || !rc->parallel_ok) jobs = 1;
    // The missing entries' locks, taken in the yardstick's order (two
    // processes filling the same set never wait for each other in a
    // circle); an entry found whole once its lock is taken was made by
    // another process meanwhile.
    Entry e[YARDSTICK_MAX];
    int n = 0, found = 0, trained = 0;
    for (int k = 0; k < set->n; k++) {
        if (dump_sealed(set->paths[k], NULL)) {
            found++;
            continue;
        }
        char lockpath[PATH_MAX + 72];
        snprintf(lockpath, sizeof lockpath, "%s.lock", set->paths[k]);
        int lock = open(lockpath, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (lock >= 0) flock(lock, LOCK_EX);
        if (dump_sealed(set->paths[k], NULL)) {
            if (lock >= 0) close(lock);
            found++;
            continue;
        }
        e[n] = (Entry){.k = k, .lock = lock};
        snprintf(e[n].tmp, sizeof e[n].tmp, "%s.%d.tmp", set->paths[k], (int)getpid());
        n++;
    }
    // The entries dealt out to the processes, and each process watched.
    int njobs = jobs < n ? jobs : n;
    Job job[YARDSTICK_MAX];
    memset(job, 0, sizeof job);
    char **env = child_environment();
    bool ok = true;
    for (int j = 0; j < njobs && ok; j++) ok = start_job(rc, set, e, n, j, njobs, &job[j], env, err, len);
    for (int i = 0; i < n; i++) e[i].job = i % (njobs ? njobs : 1);
    double busy = 0, work = 0;
    for (int running = njobs; ok && running > 0;) {
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        // The entries whose dumps appeared, in each process's order.
        for (int i = 0; i < n && ok; i++) {
            Job *jb = &job[e[i].job];
            if (e[i].done || access(e[i].tmp, F_OK) != 0) continue;
            if (!finish_entry(set, &e[i], err, len)) {
                ok = false;
                break;
            }
            double now = core_now(), secs = now - jb->last;
            jb->last = now;
            busy += secs;
            work += set->flops;
            trained++;
            if (done) done(e[i].k, secs, ctx);
        }
        // The processes that ended, and one past its limit.
        for (int j = 0; j < njobs && ok; j++) {
            if (job[j].pid == 0) continue;
            int status, left = 0;
            pid_t w = waitpid(job[j].pid, &status, WNOHANG);
            for (int i = j; i < n; i += njobs) left += !e[i].done && access(e[i].tmp, F_OK) != 0;
            if (w == 0 && limit > 0 && core_now() - job[j].last > limit) {
                kill(job[j].pid, SIGKILL);
                waitpid(job[j].pid, &status, 0);
                snprintf(err, len, "the reference run `build/ref %s` ran past its limit of %.0f s", set->flags, limit);
                job[j].pid = 0;
                ok = false;
            } else if (w == job[j].pid) {
                job[j].pid = 0;
                running--;
                if (left > 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                    job_failed(set, &job[j], status, err, len);
                    ok = false;
                } else {
                    unlink(job[j].log);
                }
            }
        }
    }
    // On a failure, the processes still going are stopped, and what they
    // left is removed.
    for (int j = 0; j < njobs; j++) {
        if (job[j].pid > 0) {
            kill(job[j].pid, SIGKILL);
            waitpid(job[j].pid, NULL, 0);
        }
        if (!ok) unlink(job[j].log);
    }
    for (int i = 0; i < n; i++)
        if (!e[i].done) {
            unlink(e[i].tmp);
            char partial[PATH_MAX + 110];
            snprintf(partial, sizeof partial, "%s.partial", e[i].tmp);
            unlink(partial);
            if (e[i].lock >= 0) close(e[i].lock);
        }
    free(env);
    if (ok && busy > 0) write_rate(rc, work / busy);
    refcache_count(rc, set, found, trained);
    return ok;
}
