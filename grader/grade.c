// grade.c: the grader (build/grade). Runs each lab over world sizes and
// seeds, compares the dumps with the trusted reference, and reports for
// students (a table) and instructors (Gradescope JSON, JUnit XML).
//
//   build/grade                      grade this tree's student files
//   build/grade --solutions          grade the reference solutions
//   build/grade --submission DIR     a student's files in a copy of the trusted tree
//   build/grade --lab lab01 --quick  one lab, the fast subset (make check-lab01)
//
// It judges only what the programs wrote into their dumps, never what they
// printed, and exits 0 only when every graded check passes.
#include <errno.h>
#include <glob.h>
#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <spawn.h>
#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "args.h"
#include "core.h"
#include "lab.h"
#include "labs.h"
#include "mem_cuda.h"
#include "results.h"
#include "refcache.h"
#include "rounding.h"
#include "specs.h"
#include "train.h"

extern char **environ;

// ---- running commands ------------------------------------------------------

// Run a shell command line (bash) and wait for it; returns its exit status
// (128 + signal when killed). For trusted commands (make, the reference).
// (posix_spawn: the grader holds the dumps it judges, hundreds of MB, which
// a fork would copy the page tables of for every command.)
static int shell(const char *cmd) {
    pid_t pid;
    char *argv[] = {"bash", "-c", (char *)cmd, NULL};
    int e = posix_spawn(&pid, "/bin/bash", NULL, NULL, argv, environ);
    CHECK(e == 0, "cannot start bash: %s", strerror(e));
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {}
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// The process group of the run in progress (0: none), for the signal
// handler: a grader stopped by a signal takes its run with it.
static volatile pid_t g_running;

// Limits of a submission's processes, set in the child before it runs
// anything: CPU seconds per process, the largest file it may write, how many
// processes its user may have (when it runs as its own user), and memory.
typedef struct {
    rlim_t cpu_s, file_bytes, nproc, data_bytes;
} Limits;

static void set_limit(int what, rlim_t v) {
    struct rlimit rl = {v, v};
    if (setrlimit(what, &rl) != 0) { /* a hard limit already lower: keep it */ }
}

// Every process left over from a run: the grader is the subreaper of what
// it starts (main), so a daemon that left its process group with setsid()
// is still the grader's descendant, and ends up as its child once its
// parents are gone. Kill those children and reap them, again and again,
// until none is left.
static void end_leftovers(void) {
    double t0 = core_now();
    for (;;) {
        int st;
        pid_t r;
        while ((r = waitpid(-1, &st, WNOHANG)) > 0) {}
        if (r < 0 && errno == ECHILD) return;   // no child left
        DIR *d = opendir("/proc");
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char path[300], buf[512];
            if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
            snprintf(path, sizeof path, "/proc/%s/stat", e->d_name);
            FILE *f = fopen(path, "r");
            if (!f) continue;
            size_t n = fread(buf, 1, sizeof buf - 1, f);
            fclose(f);
            buf[n] = 0;
            const char *close_paren = strrchr(buf, ')');   // the name may hold spaces
            int ppid = 0;
            if (close_paren && sscanf(close_paren + 2, "%*c %d", &ppid) == 1 && ppid == getpid())
                kill(atoi(e->d_name), SIGKILL);
        }
        if (d) closedir(d);
        struct timespec nap = {0, 20 * 1000 * 1000};
        nanosleep(&nap, NULL);
        if (core_now() - t0 > 10) return;   // a process stuck in the kernel: give up on it
    }
}

// Run a command line in its own process group, watched: past `limit`
// seconds, once the file `out_path` grows beyond `max_bytes`, or when the
// file `done_path` (the dump, renamed into place only when complete) has
// been there `grace` seconds while something of the run still runs, the
// whole group gets SIGTERM (each rank's watchdog then says where it was),
// and SIGKILL 10 s later. Sets *why to "time", "output" or "linger" when it
// stopped it. With `lim`, the child runs under those limits. Whatever of
// the run is left afterwards is killed.
static int watched(const char *cmd, const char *out_path, double limit, long max_bytes,
                   const char *done_path, double grace, const Limits *lim, const char **why) {
    *why = NULL;
    pid_t pid = fork();
    CHECK(pid >= 0, "cannot fork: %s", strerror(errno));
    if (pid == 0) {
        setpgid(0, 0);
        if (lim) {
            set_limit(RLIMIT_CPU, lim->cpu_s);
            set_limit(RLIMIT_FSIZE, lim->file_bytes);
            set_limit(RLIMIT_DATA, lim->data_bytes);
            if (lim->nproc) set_limit(RLIMIT_NPROC, lim->nproc);
        }
        execl("/bin/bash", "bash", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    setpgid(pid, pid);
    g_running = pid;
    double t0 = core_now(), termed = 0, done_at = 0;
    int st = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        struct timespec nap = {0, 50 * 1000 * 1000};
        nanosleep(&nap, NULL);
        double now = core_now();
        struct stat fs;
        if (!*why && now - t0 > limit) *why = "time";
        if (!*why && stat(out_path, &fs) == 0 && fs.st_size > max_bytes) *why = "output";
        if (done_path && done_at == 0 && stat(done_path, &fs) == 0) done_at = now;
        if (!*why && done_at > 0 && now - done_at > grace) *why = "linger";
        if (*why && termed == 0) {
            kill(-pid, SIGTERM);
            termed = now;
        } else if (*why && now - termed > 10) {
            kill(-pid, SIGKILL);
        }
    }
    kill(-pid, SIGKILL);   // anything of the group still alive
    g_running = 0;
    end_leftovers();       // and anything that left the group
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    return 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

// The last `cap` bytes of a file, NUL-terminated (malloc'd).
static char *read_tail(const char *path, size_t cap, bool *capped) {
    FILE *f = fopen(path, "rb");
    char *buf = malloc(cap + 1);
    CHECK(buf, "out of memory");
    buf[0] = 0;
    if (!f) return buf;
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    if (capped) *capped = size > (long)cap;
    fseek(f, size > (long)cap ? size - (long)cap : 0, SEEK_SET);
    size_t n = fread(buf, 1, cap, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

// Quote a string for bash: 'it'"'"'s'.
static void shell_quote(char *out, size_t len, const char *s) {
    CHECK(len >= 3, "shell_quote: no room");
    size_t n = 0;
    if (n + 1 < len) out[n++] = '\'';
    for (; *s && n + 5 < len; s++) {
        if (*s == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *s;
        }
    }
    if (n + 1 < len) out[n++] = '\'';
    out[n < len ? n : len - 1] = 0;
}

// ---- options ---------------------------------------------------------------

typedef struct {
    const char *tree;        // the trusted tree (harness, library, reference)
    const char *build_tree;  // where the graded programs are built
    bool solutions;
    const char *submission;
    const char *mutant;      // one file that replaces the student's file
    const char *labs;        // comma-separated ids, or NULL for all
    const char *runs;        // comma-separated run names, or NULL for all
    bool quick;
    const char *json, *junit;
    const char *margins;     // append each check's figure over its bound here (TSV)
    long hidden_seed;        // -1: none
    int limit;               // seconds per run
    int budget;              // seconds for every run of the grading together
    double started;          // when the grading began (core_now)
    int watchdog;            // seconds
    const char *keep;        // keep run directories under this path
    const char *ref_cache;   // keep and reuse the reference runs' dumps here (trusted gradings only)
    const char *perturb;     // NAME:INDEX:DELTA applied to every lab dump (self-test)
    char work[512];          // temporary directory (runs' directories inside)
    char priv[600];          // work/private, mode 0700: the reference's runs and the build logs
    char runs_dir[600];      // work/runs: the runs' directories (as root, a tmpfs of RUNS_BYTES)
    bool isolate;            // root: each run in a PID namespace as an unprivileged user
    bool net;                // and in a network namespace of its own (ip from iproute2 is there)
    int cuda;                // the trusted build's CUDA=0|1, passed to every make
} Options;

// Whether `name` is one of the comma-separated names in `list`.
static bool name_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p; p = strchr(p, ','), p = p ? p + 1 : NULL)
        if (strncmp(p, name, n) == 0 && (p[n] == ',' || p[n] == 0)) return true;
    return false;
}

static bool lab_selected(const Options *o, const char *id) { return !o->labs || name_listed(o->labs, id); }

static bool is_patch(const char *path) {
    size_t n = strlen(path);
    return n > 6 && strcmp(path + n - 6, ".patch") == 0;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// ---- building --------------------------------------------------------------

// The room of all the runs of one grading, as root (a tmpfs): a file of a
// run may be 1 GiB (RLIMIT_FSIZE), and a run's dump and output are
// megabytes.
#define RUNS_BYTES (2LL << 30)
// The largest dump the grader reads: a lab's is tens of MB at most.
#define DUMP_LIMIT_BYTES (128LL << 20)

// The unprivileged user a submission runs as when the grader is root: one
// of its own for each grading (100000 + the grader's process id, set in
// main; a user no account has), so that a submission cannot read or spoil
// what another grading running beside it writes.
static int g_run_uid = 65534;
#define RUN_UID g_run_uid
#define RUN_GID g_run_uid

// A copy of the trusted tree (with its build products, so only what changes
// is compiled again) into which the submission's files are dropped. Nothing
// of the solutions goes into it (sources, binaries, objects): the
// submission's code runs there and could read or run them.

static void make_copy(Options *o) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "%s/tree", o->work);
    char qsrc[1024], qdst[1024];
    shell_quote(qsrc, sizeof qsrc, o->tree);
    shell_quote(qdst, sizeof qdst, cmd);
    // The reference's cache holds the answers: never in the copy (make
    // test's, and --ref-cache's wherever it lies in the tree).
    char cache[PATH_MAX + 16] = "", rc[PATH_MAX], tree[PATH_MAX], qcache[PATH_MAX + 64] = "";
    if (o->ref_cache && realpath(o->ref_cache, rc) && realpath(o->tree, tree) &&
        strncmp(rc, tree, strlen(tree)) == 0 && rc[strlen(tree)] == '/') {
        snprintf(cache, sizeof cache, "--exclude=./%s", rc + strlen(tree) + 1);
        shell_quote(qcache, sizeof qcache, cache);
    }
    // Of build/, what make needs to compile the student's file alone: the
    // objects, the libraries (the CUDA backend's too), the stamps of the
    // flags they were made with, and build/ref (a target of every grading's
    // build); not the other
    // programs, the caches, the bundles and figures a tree's build/ collects.
    char line[4096 + PATH_MAX];
    snprintf(line, sizeof line,
             "mkdir -p %s && cd %s && { tar --exclude=.git --exclude='./lab*/solution' "
             "--exclude=./grader/mutants --exclude=./dist --exclude=./build %s -cf - . && "
             "tar --exclude='build/obj/*/solution' -cf - build/obj $(ls -d build/*.a build/ref build/.cflags "
             "build/.nvccflags build/.deps-ok build/.deps-check-ok build/config.mk build/libplcuda.so build/cuda-imports.* "
             "2>/dev/null); } | "
             "(cd %s && tar -ixpf -)",
             qdst, qsrc, qcache, qdst);
    CHECK(shell(line) == 0, "cannot copy the trusted tree %s into %s", o->tree, cmd);
    o->build_tree = strdup(cmd);
    // The copy is built by the runs' user (build), so it is that user's.
    if (o->isolate) {
        snprintf(line, sizeof line, "chown -R %d:%d %s", RUN_UID, RUN_GID, qdst);
        CHECK(shell(line) == 0, "cannot hand the copy %s to uid %d", cmd, RUN_UID);
    }
}

// Why place_submission refused the submission's file ("" when it is missing).
static char g_refused[1400];

// Drop the submission's file for `lab` into the copy; returns where it came from.
static void place_given(const Options *o, const LabSpec *lab) {
    for (const char *const *f = lab->given; f && *f; f++) {
        char src[1100], dst[1100], q1[1200], q2[1200], line[2600];
        snprintf(src, sizeof src, "%s/%s", o->tree, *f);
        snprintf(dst, sizeof dst, "%s/%s", o->build_tree, *f);
        shell_quote(q1, sizeof q1, src);
        shell_quote(q2, sizeof q2, dst);
        snprintf(line, sizeof line, "mkdir -p \"$(dirname %s)\" && cp %s %s", q2, q1, q2);
        CHECK(shell(line) == 0, "cannot copy %s (given to %s) into the grading tree", src, lab->id);
    }
}

static const char *place_submission(const Options *o, const LabSpec *lab, char *from, size_t len) {
    char dst[1024], q1[1100], q2[1100], line[2400];
    place_given(o, lab);
    snprintf(dst, sizeof dst, "%s/%s/%s", o->build_tree, lab->dir, lab->student_file);
    if (o->mutant && is_patch(o->mutant)) {
        // A planted bug: a small patch against the solution, applied to a
        // copy of it exactly (no fuzz), so a patch that no longer fits the
        // solution fails loudly instead of grading something else.
        char sol[1100], q1[1200], q2[1200], q3[1200], cmd[4000];
        snprintf(sol, sizeof sol, "%s/%s/solution/%s", o->tree, lab->dir, lab->student_file);
        shell_quote(q1, sizeof q1, sol);
        shell_quote(q2, sizeof q2, dst);
        shell_quote(q3, sizeof q3, o->mutant);
        snprintf(cmd, sizeof cmd, "patch --fuzz=0 --batch --quiet --reject-file=- -o %s %s %s >&2 && touch %s",
                 q2, q1, q3, q2);
        CHECK(shell(cmd) == 0, "the planted bug %s no longer applies to %s: make it again against the "
              "solution (diff -u)", o->mutant, sol);
        snprintf(from, len, "%s", o->mutant);
        return from;
    }
    if (o->mutant) {
        snprintf(from, len, "%s", o->mutant);
    } else {
        snprintf(from, len, "%s/%s/%s", o->submission, lab->dir, lab->student_file);
        if (!exists(from)) snprintf(from, len, "%s/%s", o->submission, lab->student_file);
        if (!exists(from)) return NULL;
    }
    // A plain file of the submission's own, and nothing else: a symbolic
    // link (to the solution, say) or a hard link is refused, not followed,
    // and the copy reads the file itself, never through a link.
    struct stat st;
    if (lstat(from, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1) {
        snprintf(g_refused, sizeof g_refused, "%s is %s: a submission's file must be a plain file of its own; "
                 "it is refused, not followed", from,
                 S_ISLNK(st.st_mode) ? "a symbolic link" : !S_ISREG(st.st_mode) ? "not a regular file"
                                                                               : "a hard link (it has other names)");
        return NULL;
    }
    shell_quote(q1, sizeof q1, from);
    shell_quote(q2, sizeof q2, dst);
    snprintf(line, sizeof line, "cp --no-dereference %s %s && touch %s", q1, q2, q2);
    CHECK(shell(line) == 0, "cannot copy %s into the grading tree", from);
    return from;
}

// The sandbox of a run when the grader is root, before the command it runs
// (which follows as "$@"): its own PID namespace (every process of the run
// ends with it), IPC namespace (System V segments, semaphores and message
// queues, and POSIX message queues, gone with it), mount namespace with
// fresh /tmp, /var/tmp and /dev/shm and the other directories everyone may
// write (/run/lock) masked (what the run leaves there is gone with it, and
// nothing of another run is there) with the grading's work directory ($0:
// the runs' directories, a file system of the grading's own, and the copy
// of the tree) and the tree the programs are built in ($1) bound back in
// place (read-only for a lab's runs, `ro`: a run cannot change the programs
// or the library the next run uses), a network namespace with only loopback
// (no network; Open MPI's ranks talk over it), and then the grading's own
// user. When the programs
// are built in a copy (a submission, a planted bug), the trusted tree ($2)
// is hidden under an empty tmpfs: neither the build nor the runs can reach
// the solutions, whatever the tree's permissions.
static void sandbox_prefix(const Options *o, bool ro, char *buf, size_t len) {
    char qwork[1100], qtree[1100], qhide[1100];
    bool hide = o->build_tree && o->tree && strcmp(o->build_tree, o->tree) != 0;
    shell_quote(qwork, sizeof qwork, o->work);
    shell_quote(qtree, sizeof qtree, o->build_tree ? o->build_tree : o->work);
    shell_quote(qhide, sizeof qhide, hide ? o->tree : "");
    snprintf(buf, len,
             "unshare --pid --fork --kill-child --mount-proc --mount --ipc%s sh -c '"
             "set -e; %s"
             "mount -t tmpfs -o mode=1777,size=1g tmpfs /dev/shm; mkdir /dev/shm/.w /dev/shm/.t; "
             "mount --rbind \"$0\" /dev/shm/.w; mount --bind \"$1\" /dev/shm/.t; "
             "if [ -n \"$2\" ]; then mount -t tmpfs -o size=1m,mode=0755 tmpfs \"$2\"; fi; "
             "mount -t tmpfs -o mode=1777,size=1g tmpfs /tmp; mount -t tmpfs -o mode=1777,size=1g tmpfs /var/tmp; "
             "for d in /run/lock /var/lock /dev/mqueue; do "
             "if [ -d \"$d\" ] && [ ! -L \"$d\" ]; then mount -t tmpfs -o mode=1777,size=1m tmpfs \"$d\"; fi; done; "
             "mkdir -p \"$0\" \"$1\"; mount --rbind /dev/shm/.w \"$0\"; mount --bind /dev/shm/.t \"$1\"; %s"
             "umount -R /dev/shm/.w; umount /dev/shm/.t; rmdir /dev/shm/.w /dev/shm/.t; shift 2; "
             "exec setpriv --reuid=%d --regid=%d --clear-groups \"$@\"' %s %s %s ",
             o->net ? " --net" : "", o->net ? "ip link set lo up; " : "",
             ro ? "mount -o remount,bind,ro \"$1\"; " : "", RUN_UID, RUN_GID, qwork, qtree, qhide);
}

// make TARGETS in the build tree; on failure the compiler's words go to `log`.
static bool build(const Options *o, const char *targets, const char *log) {
    char qt[1024], ql[1024], line[8000], inner[2400], qinner[2600], prefix[3000] = "";
    shell_quote(qt, sizeof qt, o->build_tree);
    shell_quote(ql, sizeof ql, log);
    // A submission's build (in the copy) is as untrusted as its runs: in the
    // same sandbox, as the same user, with no standard input (an #include of
    // /dev/stdin) and limits on CPU time, file size and memory (an #include
    // of /dev/zero), the trusted tree hidden. The trusted tree's own build
    // runs as it is.
    bool copy = o->isolate && strcmp(o->build_tree, o->tree) != 0;
    if (copy) sandbox_prefix(o, false, prefix, sizeof prefix);
    // The trusted build's configuration, not one the copy detects on its own.
    snprintf(inner, sizeof inner, "ulimit -t 900 -f 2097152 -v 16777216 && exec make -C %s --no-print-directory -j2 CUDA=%d %s",
             qt, o->cuda, targets);
    shell_quote(qinner, sizeof qinner, inner);
    snprintf(line, sizeof line, "timeout -k 10 1200 %sbash -c %s < /dev/null > %s 2>&1", prefix, qinner, ql);
    return shell(line) == 0;
}

// The compiler's words about the student's own file, from a build log:
// lines that start with its path ("lab02_ddp/ddp.c:12:5: error: ...",
// "lab02_ddp/ddp.c: In function ...") and the source lines and notes gcc
// prints under them. Nothing about other files is quoted: an
// `#include "/etc/passwd"` would otherwise show that file's lines to the
// student.
static void student_diagnostics(const char *log, const char *student, char *out, size_t len) {
    FILE *f = fopen(log, "r");
    size_t n = 0, plen = strlen(student);
    bool keep = false;
    char line[1024];
    out[0] = 0;
    while (f && fgets(line, sizeof line, f) && n + 1 < len) {
        bool ours = strncmp(line, student, plen) == 0 && line[plen] == ':';
        // gcc's excerpt under a diagnostic: "   12 | code" and "      |   ^~~".
        size_t lead = strspn(line, " 0123456789");
        bool excerpt = line[0] == ' ' && line[lead] == '|';
        if (ours) keep = true;
        else if (!excerpt) keep = false;
        if (keep) n += (size_t)snprintf(out + n, len - n, "%s", line);
    }
    if (f) fclose(f);
    if (n == 0)
        snprintf(out, len, "the compiler's errors are not about %s itself (a file it includes, or the link); "
                 "build it yourself with `make` to see them", student);
}

// ---- running a lab ---------------------------------------------------------



// A file the run left, as the grader may read it: a regular file, not a
// link (a run could point run.bin at the reference's answers, or
// output.txt at a file only the grader may read, and have them quoted).
static bool plain_file(const Options *o, const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_nlink == 1 &&
           (!o->isolate || st.st_uid == (uid_t)RUN_UID);
}

// A fresh name for a run's directory in the grading's work directory:
// "run-" and 16 random hex digits, the same for every lab, run and seed.
static void run_dir_name(const Options *o, char *out, size_t len) {
    uint64_t x = 0;
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(&x, sizeof x, 1, f) != 1) {
        static uint64_t n;
        x = (uint64_t)(core_now() * 1e9) ^ ((uint64_t)getpid() << 32) ^ ++n * 0x9e3779b97f4a7c15ull;
    }
    if (f) fclose(f);
    snprintf(out, len, "%s/run-%016llx", o->runs_dir[0] ? o->runs_dir : o->work, (unsigned long long)x);
}

static void run_program(const Options *o, Run *run, const char *dir, const char *program, int np,
                        const char *flags) {
    char qdir[1024], qbin[1024], line[12000], bin[1024];
    snprintf(run->dir, sizeof run->dir, "%s", dir);
    snprintf(bin, sizeof bin, "%s/build/%s", o->build_tree, program);
    shell_quote(qdir, sizeof qdir, dir);
    snprintf(line, sizeof line, "rm -rf %s", qdir);   // nothing of an earlier run may be read as this one's
    shell(line);
    shell_quote(qbin, sizeof qbin, bin);
    // Each run in its own directory, watched: a hard time limit beyond the
    // watchdog's, and a limit on what it may print.
    char path[1300], done[1300];
    snprintf(path, sizeof path, "%s/output.txt", dir);
    snprintf(done, sizeof done, "%s/run.bin", dir);
    CHECK(mkdir(dir, 0700) == 0, "cannot make %s: %s", dir, strerror(errno));
    // Open MPI's shared-memory segments go in the run's directory too: in a
    // fresh PID namespace every mpirun has the same PID, so the segments'
    // names in /dev/shm (derived from it) would collide with a previous
    // run's, and ranks would read a stale segment and crash at start.
    // Isolated (the grader is root): the run's directory belongs to the
    // unprivileged user it runs as, and is its HOME and TMPDIR (Open MPI
    // writes its session files there); a PID namespace ends every process
    // of the run with it. Only the lab's program runs so: make and the
    // reference are trusted.
    char prefix[3000] = "";
    if (o->isolate) {
        CHECK(chown(dir, RUN_UID, RUN_GID) == 0, "cannot hand %s to uid %d: %s", dir, RUN_UID, strerror(errno));
        sandbox_prefix(o, true, prefix, sizeof prefix);
    }
    // The run's environment is made, not inherited: PATH, its directory as
    // HOME and TMPDIR, one BLAS thread a rank (as the programs compute;
    // OpenBLAS told before it starts a pool whose idle threads spin), and
    // the machine's settings that change what runs (Open MPI's root
    // permission, OpenBLAS's kernel, the visible GPUs, where the libraries
    // are); nothing else of the grader's (not OLDPWD, not the trusted tree's
    // path).
    char keep[3000] = "";
    static const char *const pass[] = {"OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "OPENBLAS_CORETYPE",
                                       "OPENBLAS_L2_SIZE", "OPENBLAS_VERBOSE", "CUDA_VISIBLE_DEVICES",
                                       "LD_LIBRARY_PATH", NULL};
    for (const char *const *v = pass; *v; v++) {
        const char *val = getenv(*v);
        char q[1100];
        if (!val || strlen(val) > 1000) continue;
        shell_quote(q, sizeof q, val);
        size_t k = strlen(keep);
        snprintf(keep + k, sizeof keep - k, " %s=%s", *v, q);
    }
    char qpath[2100];
    shell_quote(qpath, sizeof qpath, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char inner[6000], qinner[6400];
    snprintf(inner, sizeof inner,
             "cd %s && exec env -i PATH=%s HOME=%s TMPDIR=%s OMPI_MCA_btl_vader_backing_directory=%s "
             "OPENBLAS_NUM_THREADS=1 PL_SANDBOX=1%s mpirun "
             "--oversubscribe -np %d %s %s --timeout %d --dump run.bin > output.txt 2>&1",
             qdir, qpath, qdir, qdir, qdir, keep, np, qbin, flags, o->watchdog);
    shell_quote(qinner, sizeof qinner, inner);
    snprintf(line, sizeof line, "exec %sbash -c %s", prefix, qinner);
    // Limits per process: CPU seconds a little past the time limit, files
    // of at most 1 GiB (the dump and the output are megabytes), 16 GiB of
    // data, and (as its own user) 4096 tasks, threads included.
    Limits lim = {(rlim_t)o->limit + 30, (rlim_t)1 << 30, o->isolate ? 4096 : 0, (rlim_t)16 << 30};
    double t0 = core_now();
    const char *why;
    // Once the dump is complete, the program has the watchdog's time (at
    // least 10 s) to end; a process it started that outlives it (a daemon
    // holding the output open keeps mpirun waiting) is stopped then.
    run->exit_code = watched(line, path, o->limit, OUTPUT_LIMIT_BYTES, done, o->watchdog > 10 ? o->watchdog : 10,
                             &lim, &why);
    run->seconds = core_now() - t0;
    run->timed_out = why && strcmp(why, "time") == 0;
    run->output_limited = why && strcmp(why, "output") == 0;
    run->lingered = why && strcmp(why, "linger") == 0;
    if (plain_file(o, path)) run->output = read_tail(path, 16384, &run->output_capped);
    else run->output = read_tail("/dev/null", 1, NULL);
    bool have = plain_file(o, done);
    // Its size against a bound before any of it is read: a dump grown with
    // records after the harness wrote it would cost the grader gigabytes.
    struct stat ds;
    bool small = have && stat(done, &ds) == 0 && ds.st_size <= DUMP_LIMIT_BYTES;
    run->dump = small ? dump_read(done, &run->dump_error) : NULL;
    if (!have) run->dump_error = exists(done) ? "its dump is not a plain file (a link?)" : "no dump file";
    else if (!small) run->dump_error = "its dump is larger than any lab's (128 MiB): not read";
}

// "NAME:INDEX:DELTA[:COUNT]": add DELTA to COUNT elements (1 unless given)
// of array NAME from INDEX on (self-test of the tolerances: an error of the
// shape a bug makes, however small, must be caught).
static void perturb(DumpFile *f, const char *spec) {
    char name[256];
    long index, count = 1;
    double delta;
    const char *c1 = strchr(spec, ':');
    CHECK(c1 && sscanf(c1 + 1, "%ld:%lf:%ld", &index, &delta, &count) >= 2 && (size_t)(c1 - spec) < sizeof name,
          "--perturb wants NAME:INDEX:DELTA[:COUNT], not '%s'", spec);
    memcpy(name, spec, (size_t)(c1 - spec));
    name[c1 - spec] = 0;
    for (int i = 0; i < f->count; i++)
        if (strcmp(f->arrays[i].name, name) == 0) {
            CHECK(f->arrays[i].type == DUMP_F32 && index >= 0 && count >= 1 &&
                  (uint64_t)(index + count) <= f->arrays[i].count,
                  "--perturb: %s has no f32 elements %ld to %ld", name, index, index + count - 1);
            for (long k = 0; k < count; k++) ((float *)f->arrays[i].data)[index + k] += (float)delta;
            return;
        }
    core_fail(__FILE__, __LINE__, "--perturb: the dump has no array %s", name);
}

// The reference runs of one configuration, shared by the runs that need it.
typedef struct {
    char flags[512];
    DumpFile *ref;
    Measured measured;
    bool ok;
    char error[2048];
} RefRuns;

enum { MAX_REFS = 256 };   // every lab's runs, listed and hidden, in one grading
static RefRuns g_refs[MAX_REFS];
static int g_nrefs;

// build/ref with `flags` (the trusted tree's) as each of the yardstick's
// runs (train_yardstick: the whole batch; micro-batches of 2 and of one row
// each, the latter also each its own mean; the whole batch rounded the other
// way): the largest difference between the first and the others is the
// honest size of "the same up to rounding", per tensor. Several orders
// rather than one, because a single sample of a rounding difference can
// come out small by chance, and the other rounding because micro-batches
// leave the forward pass and most of the matrix products bit-identical,
// while another machine rounds them all. The runs are the cache's
// (refcache.h: the tree's build/refcache, shared with the lab programs and
// the tests, or --ref-cache's), trained there when missing; where a
// submission could reach the cache, they are trained into the grading's
// private directory instead, read once, and removed before any lab runs.
static RefRuns *reference(const Options *o, const char *flags) {
    for (int i = 0; i < g_nrefs; i++)
        if (strcmp(g_refs[i].flags, flags) == 0) return &g_refs[i];
    CHECK(g_nrefs < MAX_REFS, "more than %d reference configurations in one grading", MAX_REFS);
    RefRuns *rr = &g_refs[g_nrefs++];
    memset(rr, 0, sizeof *rr);
    snprintf(rr->flags, sizeof rr->flags, "%s", flags);
    char bin[PATH_MAX + 16], root[PATH_MAX + 16], why[PATH_MAX + 100];
    snprintf(bin, sizeof bin, "%s/build/ref", o->tree);
    if (o->ref_cache) snprintf(root, sizeof root, "%s", o->ref_cache);
    else snprintf(root, sizeof root, "%s/refcache", o->priv);
    RefCache cache;
    if (!refcache_open(&cache, root, bin, why, sizeof why)) {
        snprintf(rr->error, sizeof rr->error, "%.2000s", why);
        return rr;
    }
    Args a = args_defaults();
    args_apply_flags(&a, flags);
    RefSet set;
    refcache_set(&cache, &a, &set);
    // An entry gone between the fill and its reading (the cache emptied
    // meanwhile: make clean, or another build's pruning) is trained again,
    // once.
    DumpFile *runs[YARDSTICK_MAX] = {0};
    for (int attempt = 0;; attempt++) {
        if (!refcache_fill(&cache, &set, refcache_jobs(&set), o->limit, NULL, NULL, rr->error, sizeof rr->error))
            return rr;
        int k = 0, gone = 0;
        const char *err = NULL;
        for (; k < set.n; k++) {
            runs[k] = dump_read(set.paths[k], &err);
            gone = !runs[k] && access(set.paths[k], F_OK) != 0;
            if (!o->ref_cache) unlink(set.paths[k]);   // read once: no answer stays on disk while labs run
            if (!runs[k]) break;
        }
        if (k == set.n) break;
        for (int j = 0; j < k; j++) dump_free(runs[j]);
        if (!gone || attempt > 0) {
            snprintf(rr->error, sizeof rr->error, "the reference run %s cannot be read back: %s", set.paths[k], err);
            return rr;
        }
        print0("note: the reference run %s was gone from the cache once made; training it again\n", set.paths[k]);
    }
    rr->ref = runs[0];
    measure_rounding(runs, set.n, &rr->measured);
    for (int k = 1; k < set.n; k++) dump_free(runs[k]);
    rr->ok = true;
    return rr;
}

// What the student's object calls, from its undefined symbols (nm -u): MPI
// or its profiling names (PMPI_*, which no counter of comm.h or mpi_watch.c
// sees), Open MPI's internals, or the dynamic loader (a way to any of those
// by name). comm.h is the only door to communication in every lab.
// What a student's file may call: the course's own interfaces (ops.h,
// comm.h, mem.h, core.h, optim.h and the lab's header), less the harness's
// levers among them, and the C library's functions that reach neither
// memory nor the machine (strings, printing, mathematics). Everything else
// steps around what the grader measures: an allocator (malloc, mmap,
// __real_malloc) is memory no category sees, MPI or NCCL called directly is
// communication no counter sees, as is memory the ranks share
// (comm_shared_alloc, lab01's benchmark's), a file or a system call (open,
// syscall, prctl, dlsym) reaches past the harness.
static const char *const ALLOWED_CALLS =
    "^((ops|comm|mem|core|optim|pp|prec|tp|tpg|sp)_[a-z0-9_]*|trace_(begin|end|span|on)|lab_todo|print0|printr|_GLOBAL_OFFSET_TABLE_|"
    "__stack_chk_fail|__assert_fail|abort|exit|mem(cpy|move|set|cmp)|str(cmp|ncmp|len|nlen|chr|rchr|str|cpy|ncpy|"
    "cat|ncat|tol|toul|tod|tof)|ato[ifl]|(v?s?n?|f)printf|puts|fputs|putchar|fputc|putc|fflush|stdout|stderr|"
    "__(v?s?n?|f|vf)printf_chk|__(memcpy|memmove|memset|strcpy|strcat|strncpy)_chk|__ctype_(b|tolower|toupper)_loc|"
    "tolower|toupper|l?l?abs|qsort|bsearch|s?rand|(__isoc99_)?sscanf|clock|time|clock_gettime|getenv|"
    "(sqrt|exp|exp2|expm1|log|log2|log10|log1p|pow|fabs|floor|ceil|round|lround|trunc|fmod|fmax|fmin|tanh|sinh|cosh|"
    "sin|cos|tan|atan|atan2|erf|erfc|hypot|cbrt|copysign|nearbyint|rint|lrint|ldexp|frexp)f?)$";
static const char *const HARNESS_LEVERS =
    "^(mem_(measured_exclude|set_free_check|set_device_hook|init|seal_peaks|start_resident|note_step)|"
    "core_(clear|seal)_cleanups|comm_(init|finalize|stats_seal|step_window|shared_alloc|events_start|events_stop|"
    "events_mark)|ops_(work_reset|work_seal|use_host|set_rounding|set_tf32|init))$";

// The first few lines a shell pipeline prints, joined by spaces ("" when none).
static void pipeline_words(const char *line, char *out, size_t len) {
    FILE *p = popen(line, "r");
    out[0] = 0;
    if (p) {
        size_t n = fread(out, 1, len - 1, p);
        out[n] = 0;
        pclose(p);
    }
    for (char *c = out; *c; c++)
        if (*c == '\n') *c = ' ';
    size_t n = strlen(out);
    while (n && out[n - 1] == ' ') out[--n] = 0;
}

// Returns whether the program may run: not when the student's file defines
// a name of the harness or of a library, since then every run would be
// another program (its measures included), and one that may never end (a
// fopen of its own made one wait for its time limit).
static bool check_symbols(Grader *g, const Options *o, const LabSpec *lab) {
    if (strcmp(lab->dir, ".") == 0 || !lab->student_file[0]) return true;
    char obj[1400], qobj[1500], line[4000], out[160], fig[200], diag[1200];
    const char *file = o->solutions ? "solution/" : "";
    snprintf(obj, sizeof obj, "%s/build/obj/%s/%s%.*s.o", o->build_tree, lab->dir, file,
             (int)(strlen(lab->student_file) - 2), lab->student_file);
    shell_quote(qobj, sizeof qobj, obj);

    // 1. What it calls.
    snprintf(line, sizeof line, "nm -u %s 2>/dev/null | awk '{print $NF}' | sed 's/@.*//' | "
             "{ grep -vE '%s' || true; } | head -n 6; nm -u %s 2>/dev/null | awk '{print $NF}' | "
             "grep -E '%s' | head -n 3", qobj, ALLOWED_CALLS, qobj, HARNESS_LEVERS);
    pipeline_words(line, out, sizeof out);
    snprintf(fig, sizeof fig, "%s", out[0] ? out : "none outside them");
    snprintf(diag, sizeof diag, "%s calls %s: a lab's code computes through ops.h, communicates through comm.h and "
             "allocates through mem.h, the interfaces whose calls the grader counts and checks; an allocator called "
             "another way (malloc, mmap, __real_malloc) is memory no measure sees, MPI (PMPI_ names included) or "
             "NCCL called directly is communication no counter sees, and a file, a system call or the dynamic "
             "loader (open, syscall, prctl, dlsym) or one of the harness's own levers reaches past the harness; "
             "the C library's strings, printing and mathematics are allowed", lab->student_file, out);
    grade_check(g, NULL, "only ops.h, comm.h and mem.h", out[0] == 0, fig,
                "the course's interfaces and the C library's strings, printing and mathematics", diag);

    // 2. What it defines: no name of the harness, the course's library or
    //    the C library (a definition of fopen or mem_report in the student's
    //    file would replace the one everything else calls).
    char base[200];   // the student's object, as the lab's directory holds it (its given version)
    snprintf(base, sizeof base, "%.*s.o", (int)(strlen(lab->student_file) - 2), lab->student_file);
    // The names the C, BLAS and MPI libraries define: listed once and kept
    // in the trusted tree's build/library-names.txt, whose first line names
    // the libraries as they are now (path, size, time): listed again when
    // one changes.
    static char libsyms[PATH_MAX + 40];
    char qlibsyms[PATH_MAX + 80];
    if (!libsyms[0]) {
        snprintf(libsyms, sizeof libsyms, "%s/build/library-names.txt", o->tree);
        shell_quote(qlibsyms, sizeof qlibsyms, libsyms);
        snprintf(line, sizeof line, "libs=\"$(gcc -print-file-name=libc.so.6) $(gcc -print-file-name=libm.so.6) "
                 "$(ldconfig -p 2>/dev/null | awk '/lib(openblas|cblas|blas|mpi)\\.so[ .]/ {print $NF}')\"; "
                 "key=\"libraries: $(stat -L -c '%%n %%s %%Y' $libs 2>/dev/null | tr '\\n' ' ')\"; "
                 "[ \"$(head -n 1 %s 2>/dev/null)\" = \"$key\" ] && exit 0; "
                 "{ echo \"$key\"; for l in $libs; do nm -D --defined-only \"$l\" 2>/dev/null | awk '{print $NF}' | "
                 "sed 's/@.*//'; done | sort -u; } > %s.$$ && mv %s.$$ %s",
                 qlibsyms, qlibsyms, qlibsyms, qlibsyms);
        CHECK(shell(line) == 0, "cannot list the names the C, BLAS and MPI libraries define into %s", libsyms);
    }
    shell_quote(qlibsyms, sizeof qlibsyms, libsyms);
    // And the names the course's library and the lab's harness define, from
    // the trusted tree's build (the copy's is the same code, and a
    // submission's runs could change the copy's), listed again whenever one
    // of them was built after the list was made.
    char names[PATH_MAX + 64], qnames[PATH_MAX + 128], tlib[PATH_MAX + 32], tdir[PATH_MAX + 64], qtlib[PATH_MAX + 96],
        qtdir[PATH_MAX + 128];
    snprintf(names, sizeof names, "%s/build/names-%s.txt", o->tree, lab->id);
    snprintf(tlib, sizeof tlib, "%s/build/libcommon.a", o->tree);
    snprintf(tdir, sizeof tdir, "%s/build/obj/%s", o->tree, lab->dir);
    shell_quote(qnames, sizeof qnames, names);
    shell_quote(qtlib, sizeof qtlib, tlib);
    shell_quote(qtdir, sizeof qtdir, tdir);
    snprintf(line, sizeof line, "mine=$(nm -g --defined-only %s 2>/dev/null | awk 'NF==3{print $3}' | sort -u); "
             "[ -n \"$mine\" ] || exit 0; c=%s; "
             "if [ ! -s \"$c\" ] || [ -n \"$(find %s %s -maxdepth 1 -name '*.[ao]' -newer \"$c\" | head -n 1)\" ]; then "
             "{ nm -g --defined-only %s 2>/dev/null; for f in %s/*.o; do [ \"${f##*/}\" = %s ] || "
             "nm -g --defined-only \"$f\" 2>/dev/null; done; } | awk 'NF==3{print $3}' | sort -u > \"$c.$$\" && "
             "mv \"$c.$$\" \"$c\"; fi; "
             "sort -m -u \"$c\" <(tail -n +2 %s) | comm -12 - <(printf '%%s\\n' \"$mine\") | head -n 5",
             qobj, qnames, qtlib, qtdir, qtlib, qtdir, base, qlibsyms);
    char bash_line[4200];
    char qline[4100];
    shell_quote(qline, sizeof qline, line);
    snprintf(bash_line, sizeof bash_line, "bash -c %s", qline);
    pipeline_words(bash_line, out, sizeof out);
    snprintf(fig, sizeof fig, "%s", out[0] ? out : "none of theirs");
    snprintf(diag, sizeof diag, "%s defines %s, a name the harness, the course's library or the C, BLAS or MPI "
             "libraries already have: the student's definition would replace theirs for the whole program (its measures and its "
             "checks included); make a helper static, or give it a name of its own", lab->student_file, out);
    bool own_names = out[0] == 0;
    grade_check(g, NULL, "no name of the harness's or the C library's", own_names, fig,
                "only the lab's functions and names of its own", diag);

    // 3. No system call of its own (an instruction, not a symbol).
    snprintf(line, sizeof line, "objdump -d --no-show-raw-insn %s 2>/dev/null | "
             "grep -cE '[[:space:]](syscall|sysenter|int[[:space:]]+\\$0x80)([[:space:]]|$)'", qobj);
    pipeline_words(line, out, sizeof out);
    bool none = out[0] == 0 || strcmp(out, "0") == 0;
    snprintf(fig, sizeof fig, "%s", none ? "none" : out);
    snprintf(diag, sizeof diag, "%s makes system calls of its own (%s syscall instructions): the kernel is reached "
             "through the harness alone", lab->student_file, out);
    grade_check(g, NULL, "no system call of its own", none, fig, "none", diag);

    // 4. Nothing of it runs before main: no constructor, destructor or
    //    initializer section, no function resolved by the loader (IFUNC).
    //    The harness closes a graded run's sandbox (sandbox.h) before the
    //    first hook it calls; code that runs earlier would run outside it.
    snprintf(line, sizeof line, "{ readelf -SW %s 2>/dev/null | grep -oE '[[:space:]]\\.(preinit_array|init_array|"
             "fini_array|ctors|dtors|init|fini)(\\.[^[:space:]]*)?' | sed 's/^[[:space:]]*//'; "
             "readelf -sW %s 2>/dev/null | awk '$4 == \"IFUNC\" {print \"IFUNC \" $8}'; } | sort -u | head -n 4",
             qobj, qobj);
    pipeline_words(line, out, sizeof out);
    snprintf(fig, sizeof fig, "%s", out[0] ? out : "none");
    snprintf(diag, sizeof diag, "%s has code that runs before main or after it (%s: a constructor, a destructor, an "
             "initializer section or a function the loader resolves): a graded run's sandbox closes when the "
             "harness starts, and a lab's code runs only when the harness calls it", lab->student_file, out);
    grade_check(g, NULL, "nothing runs before main", out[0] == 0, fig, "no constructor, destructor or IFUNC", diag);
    return own_names;
}

// Whether a failing check among results [from, g->n) says `expect`.
static bool said(const Grader *g, int from, const char *expect) {
    for (int k = from; k < g->n; k++) {
        const Result *r = &g->results[k];
        if (!r->pass && (strstr(r->diagnosis, expect) || strstr(r->figure, expect))) return true;
    }
    return false;
}

static bool header(const char *path, const char *key, char *out, size_t len);

// The order of a lab's runs: the spec's, but with a planted bug's `RUN:`
// header line (the run that names it) first, so that its grading usually
// ends after one run. A hint that no longer holds costs only time: the
// other runs follow in the spec's order.
static void run_order(const Options *o, const LabSpec *lab, const char *expect, int *order) {
    char hint[200] = "";
    if (expect && o->mutant && is_patch(o->mutant)) header(o->mutant, "RUN", hint, sizeof hint);
    int n = 0;
    for (int i = 0; i < lab->nruns; i++)
        if (hint[0] && strcmp(lab->runs[i].name, hint) == 0) order[n++] = i;
    CHECK(!hint[0] || n == 1, "%s: RUN: %s is not a run of %s", o->mutant, hint, lab->id);
    for (int i = 0; i < lab->nruns; i++)
        if (!(hint[0] && strcmp(lab->runs[i].name, hint) == 0)) order[n++] = i;
}

// Grade one lab. With `expect` (a planted bug's EXPECT line), stop at the
// first run whose diagnosis says it: the rest would only cost time.
// The references of the labs graded so far let go where the cache keeps
// them (a dump each, up to tens of MB): the next lab reads its own. A
// private cache's entries are read once, so those stay for the planted bugs
// that follow.
static void release_references(const Options *o) {
    if (!o->ref_cache) return;
    for (int i = 0; i < g_nrefs; i++) {
        dump_free(g_refs[i].ref);
        if (g_refs[i].ok) measured_free(&g_refs[i].measured);
    }
    g_nrefs = 0;
}

static void grade_lab_runs(Grader *g, Options *o, const LabSpec *lab, const char *expect);

static void grade_lab(Grader *g, Options *o, const LabSpec *lab, const char *expect) {
    grade_lab_runs(g, o, lab, expect);
    release_references(o);
}

static void grade_lab_runs(Grader *g, Options *o, const LabSpec *lab, const char *expect) {
    int first = g->n;
    g->lab = lab->id;
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/%s", o->tree, lab->dir);
    if (strcmp(lab->dir, ".") != 0 && !exists(dir)) return;   // not in this tree (yet)
    print0("\n== %s ==\n", lab->id);

    // Build what is graded.
    const char *program = lab->program;
    if (o->solutions) {
        char sol[1100];
        snprintf(sol, sizeof sol, "%s/%s/solution/%s", o->tree, lab->dir, lab->student_file);
        if (strcmp(lab->solution, lab->program) != 0 && !exists(sol)) {
            grade_check(g, NULL, "build", false, "no solution in this tree", "a solution",
                        "this tree has no reference solutions (a student release?)");
            return;
        }
        program = lab->solution;
    } else if (o->submission || o->mutant) {
        char from[1024];
        g_refused[0] = 0;
        if (strcmp(lab->solution, lab->program) != 0 && !place_submission(o, lab, from, sizeof from)) {
            grade_check(g, NULL, "build", false, g_refused[0] ? "refused" : "no file", lab->student_file,
                        g_refused[0] ? g_refused : "the submission has no file for this lab");
            return;
        }
    }
    char targets[256], log[700];
    snprintf(targets, sizeof targets, "build/%s build/ref", program);
    snprintf(log, sizeof log, "%s/build-%s.log", o->priv, lab->id);
    if (!build(o, targets, log)) {
        char student[600], text[1000];
        snprintf(student, sizeof student, "%s/%s", lab->dir, lab->student_file);
        student_diagnostics(log, student, text, sizeof text);
        grade_check(g, NULL, "build", false, "does not compile", "compiles", text);
        return;
    }

    if (!check_symbols(g, o, lab)) {
        print0("  %-10s not run: %s defines a name the program already has (above), so no run would be of "
               "this lab's code alone\n", lab->id, lab->student_file);
        return;
    }
    if (expect && said(g, first, expect)) return;   // a planted bug the build's checks already name

    int order[64];
    CHECK(lab->nruns <= 64, "%s has %d runs, more than 64", lab->id, lab->nruns);
    run_order(o, lab, expect, order);
    // The hidden runs: drawn from the hidden seed where the lab draws them
    // (other shapes, world sizes, budgets), else the listed runs again.
    RunSpec drawn[MAX_HIDDEN_RUNS];
    const int ndrawn = o->hidden_seed >= 0 && lab->hidden ? lab->hidden((uint64_t)o->hidden_seed, drawn,
                                                                           MAX_HIDDEN_RUNS) : 0;
    for (int h = 0; h < (o->hidden_seed >= 0 ? 2 : 1); h++)
        for (int i = 0; i < (h == 1 && lab->hidden ? ndrawn : lab->nruns); i++) {
            const RunSpec *spec = h == 1 && lab->hidden ? &drawn[i] : &lab->runs[order[i]];
            if (o->quick && !spec->quick) continue;
            // --runs hidden: every hidden run.
            if (o->runs && !name_listed(o->runs, spec->name) && !(h == 1 && name_listed(o->runs, "hidden")))
                continue;
            if (spec->gpu && mem_cuda_device_count() <= 0) {
                print0("  %-10s %-22s skipped: it needs a GPU, and none is visible\n", lab->id, spec->name);
                continue;
            }
            Run run;
            memset(&run, 0, sizeof run);
            run.spec = spec;
            run.lab = lab;
            run.hidden = h == 1;
            run.seed = h == 1 ? (uint64_t)o->hidden_seed : 1337;
            snprintf(run.name, sizeof run.name, "%s seed %llu", spec->name, (unsigned long long)run.seed);
            // A grading has a budget in all, not only each run a limit:
            // runs that sleep just under the limit would otherwise hold the
            // grader for hours.
            double spent = core_now() - o->started;
            if (o->budget > 0 && spent > o->budget) {
                char fig[96], bound[96], diag[400];
                snprintf(fig, sizeof fig, "not run (%.0f s spent)", spent);
                snprintf(bound, sizeof bound, "every run within --budget %d s in all", o->budget);
                snprintf(diag, sizeof diag, "the grading's time ran out before this run: its runs together may take "
                         "%d s, and those before it took %.0f s; a run that waits or sleeps until its time limit "
                         "(%d s each) uses it up", o->budget, spent, o->limit);
                grade_check(g, &run, "graded within the time budget", false, fig, bound, diag);
                print0("  %-10s %-22s not run: the grading's time budget (%d s) is spent\n", lab->id, run.name, o->budget);
                continue;
            }
            char flags[1024];
            // A training lab's program runs its own reference only for its
            // verdict on itself; the grader has its own (shared by runs), so
            // the program skips it (--no-ref), which also keeps the run's
            // directory free of the reference's answers.
            snprintf(flags, sizeof flags, "%s --seed %llu%s", spec->flags, (unsigned long long)run.seed,
                     lab->ref_flags && strcmp(lab->program, "ref") != 0 ? " --no-ref" : "");
            // A run's directory (its HOME and TMPDIR, its working directory)
            // names nothing: not the lab, the run, or whether it is hidden,
            // which the code it runs could otherwise read and act on. Kept
            // (--keep), it is renamed after the run to say which it was.
            char rdir[1200], kept[1200];
            run_dir_name(o, rdir, sizeof rdir);
            snprintf(kept, sizeof kept, "%s/%s-%s-%s", o->work, lab->id, spec->name, h ? "hidden" : "visible");
            if (h == 1 && lab->hidden) print0("  %-10s %-22s -np %d %s\n", lab->id, spec->name, spec->np, flags);
            print0("  %-10s %-22s ", lab->id, run.name);
            fflush(stdout);
            run_program(o, &run, rdir, program, spec->np, flags);
            if (o->keep) {
                char q1[1300], q2[1300], line[2700];
                shell_quote(q1, sizeof q1, rdir);
                shell_quote(q2, sizeof q2, kept);
                snprintf(line, sizeof line, "rm -rf %s && mv %s %s", q2, q1, q2);
                if (shell(line) == 0) snprintf(run.dir, sizeof run.dir, "%s", kept);
            }
            if (run.dump && o->perturb) perturb(run.dump, o->perturb);
            // A run that called an unwritten TODO fails for that alone: its
            // reference is not trained for it.
            char rflags[512];
            const char *want_ref = lab->ref_flags && !run_called_unfinished(&run)
                                       ? lab->ref_flags(lab, &run, rflags, sizeof rflags) : NULL;
            if (want_ref) {
                RefRuns *rc = reference(o, want_ref);
                if (!rc->ok) {
                    grade_check(g, &run, "reference", false, "failed", "runs", rc->error);
                    print0("reference failed\n");
                    free(run.output);
                    dump_free(run.dump);
                    continue;
                }
                run.ref = rc->ref;
                run.measured = &rc->measured;
            }
            int before = g->n;
            lab->check(g, lab, &run);
            int bad = 0;
            for (int k = before; k < g->n; k++) bad += !g->results[k].pass;
            print0("%.1f s, %d checks, %s\n", run.seconds, g->n - before, bad ? "FAILED" : "ok");
            free(run.output);
            dump_free(run.dump);
            if (expect && said(g, first, expect)) return;
        }
}

// ---- reports ---------------------------------------------------------------

static void json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
    }
    fputc('"', f);
}

// The checks that say whether a run did the lab's work at all: it ran to
// its dump, every TODO is written, and it computes what the lab computes
// (trains as the reference does, with the lab's share of the work on each
// rank; lab01's collectives exact). A lab's build checks (it compiles, it
// calls only the course's interfaces) gate all of its runs.
static bool gates(const Result *r) {
    static const char *const names[] = {"run ends", "every TODO written", "loss per step", "first-step gradient",
                                        "final parameters", "build", "only ops.h, comm.h and mem.h",
                                        "no name of the harness's or the C library's", "no system call of its own",
                                        "nothing runs before main",
                                        "matrix products, all ranks together", "LayerNorm rows, all ranks together",
                                        "matrix products, each rank its share", "LayerNorm rows, each rank its share",
                                        NULL};
    for (const char *const *n = names; *n; n++)
        if (strcmp(r->check, *n) == 0) return true;
    return strstr(r->check, " exact") != NULL;
}

// Why check i earns no point although it passed, or NULL: a gate of its run
// (or of its lab's build) failed. A check that an unfinished file or another
// algorithm passes (its memory below a bound, its bytes, its events) is
// worth nothing on its own.
static const char *no_points(const Grader *g, int i) {
    const Result *r = &g->results[i];
    if (!r->pass) return NULL;
    for (int k = 0; k < g->n; k++) {
        const Result *q = &g->results[k];
        if (q->pass || !gates(q) || strcmp(q->lab, r->lab) != 0) continue;
        if (strcmp(q->run, "build") == 0) return "no points: this lab's build checks failed";
        if (strcmp(q->run, r->run) == 0)
            return strcmp(q->check, "every TODO written") == 0 ? "no points until every TODO of this run is written"
                   : strcmp(q->check, "run ends") == 0        ? "no points: this run did not end with its results"
                                                               : "no points until this run computes what the lab computes";
    }
    return NULL;
}

// A check's points: one, but none for the reference against itself (the
// grader's own self-test) and a lab's build checks (conditions, not work).
static int max_points(const Result *r) { return strcmp(r->lab, "ref") == 0 || strcmp(r->run, "build") == 0 ? 0 : 1; }

// Gradescope's results.json: one test per check, one point each (max_points);
// a check earns its point only when its run's gates pass (no_points).
static void write_json(const Grader *g, const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    int score = 0;
    for (int i = 0; i < g->n; i++) score += g->results[i].pass && !no_points(g, i) ? max_points(&g->results[i]) : 0;
    fprintf(f, "{\n  \"score\": %d,\n  \"visibility\": \"visible\",\n  \"tests\": [", score);
    for (int i = 0; i < g->n; i++) {
        const Result *r = &g->results[i];
        const char *why = no_points(g, i);
        bool earned = r->pass && !why;
        int max = max_points(r);
        char name[400], out[1800];
        snprintf(name, sizeof name, "%s %s: %s", r->lab, r->run, r->check);
        snprintf(out, sizeof out, "%s%s%s (bound: %s)%s%s", why ? why : "", why ? " (the check itself passes: " : "",
                 r->figure, r->bound, why ? ")" : "", r->diagnosis[0] ? "\n" : "");
        size_t n = strlen(out);
        snprintf(out + n, sizeof out - n, "%s", r->diagnosis);
        fprintf(f, "%s\n    {\"name\": ", i ? "," : "");
        json_string(f, name);
        fprintf(f, ", \"score\": %d, \"max_score\": %d, \"status\": \"%s\", \"visibility\": \"%s\", \"output\": ",
                earned ? max : 0, max, earned ? "passed" : "failed", r->hidden ? "hidden" : "visible");
        json_string(f, out);
        fputc('}', f);
    }
    fprintf(f, "\n  ]\n}\n");
    CHECK(fclose(f) == 0, "writing %s failed", path);
}

static void xml_text(FILE *f, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n' || *s == '\t') fputc(*s, f);
        }
    }
}

static void write_junit(const Grader *g, const char *path) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write %s", path);
    int failed = 0;
    for (int i = 0; i < g->n; i++) failed += !g->results[i].pass;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites tests=\"%d\" failures=\"%d\">\n",
            g->n, failed);
    for (int i = 0; i < g->n;) {   // one suite per lab
        int j = i, fl = 0;
        while (j < g->n && strcmp(g->results[j].lab, g->results[i].lab) == 0) fl += !g->results[j++].pass;
        fprintf(f, "  <testsuite name=\"%s\" tests=\"%d\" failures=\"%d\">\n", g->results[i].lab, j - i, fl);
        for (int k = i; k < j; k++) {
            const Result *r = &g->results[k];
            fputs("    <testcase classname=\"", f);
            xml_text(f, r->lab);
            fputc('.', f);
            xml_text(f, r->run);
            fputs("\" name=\"", f);
            xml_text(f, r->check);
            fputs("\">", f);
            if (!r->pass) {
                fputs("<failure message=\"", f);
                xml_text(f, r->figure);
                fputs(" (bound: ", f);
                xml_text(f, r->bound);
                fputs(")\">", f);
                xml_text(f, r->diagnosis);
                fputs("</failure>", f);
            }
            fputs("</testcase>\n", f);
        }
        fputs("  </testsuite>\n", f);
        i = j;
    }
    fputs("</testsuites>\n", f);
    CHECK(fclose(f) == 0, "writing %s failed", path);
}

// The yardstick's margins: one line a check, appended, "lab run check
// pass ratio what expect" (tab-separated; ratio is the figure over its bound,
// "-" for a check without one). `what` names the graded code (solutions, a
// planted bug's file), `expect` its EXPECT line ("PASS" for correct code).
// scripts/yardstick.py reads these into the separation table.
static void write_margins(const Grader *g, const char *path, const char *what, const char *expect) {
    FILE *f = fopen(path, "a");
    CHECK(f, "cannot write %s", path);
    for (int i = 0; i < g->n; i++) {
        const Result *r = &g->results[i];
        fprintf(f, "%s\t%s\t%s\t%d\t", r->lab, r->run, r->check, r->pass);
        if (isnan(r->ratio)) fputs("-", f);
        else fprintf(f, "%.6g", r->ratio);
        fprintf(f, "\t%s\t%s\n", what, expect);
    }
    CHECK(fclose(f) == 0, "writing %s failed", path);
}

// ---- planted bugs ------------------------------------------------------------

static void remove_work(const Options *o) {
    if (o->keep) return;
    if (o->runs_dir[0]) umount2(o->runs_dir, MNT_DETACH);   // the runs' tmpfs, as root (none otherwise)
    char q[600], line[700];
    shell_quote(q, sizeof q, o->work);
    snprintf(line, sizeof line, "rm -rf %s", q);
    shell(line);
}

// The value of header line "KEY: value" at the top of a planted bug (before its diff).
static bool header(const char *path, const char *key, char *out, size_t len) {
    FILE *f = fopen(path, "r");
    CHECK(f, "cannot read %s", path);
    char line[1024];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f) && strncmp(line, "--- ", 4) != 0) {
        const char *p = line;
        if (strncmp(p, "// ", 3) == 0) p += 3;   // the older form: comments in a .c copy
        if (strncmp(p, key, klen) == 0 && p[klen] == ':') {
            p += klen + 1;
            while (*p == ' ') p++;
            snprintf(out, len, "%s", p);
            out[strcspn(out, "\r\n")] = 0;
            found = true;
        }
    }
    fclose(f);
    return found;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// Grade each planted bug of `dir` (NAME.patch) and check its answer: a
// failure whose diagnosis says its EXPECT line, or, for "EXPECT: PASS" (a
// legal variant of the solution), no failure at all. Returns how many did
// not get their answer.
static int check_mutants(Options *o, const LabSpec *lab, const char *dir) {
    char pattern[1100];
    snprintf(pattern, sizeof pattern, "%s/*.patch", dir);
    glob_t gl;
    CHECK(glob(pattern, 0, NULL, &gl) == 0 && gl.gl_pathc > 0, "no planted bugs (*.patch) in %s", dir);
    qsort(gl.gl_pathv, gl.gl_pathc, sizeof *gl.gl_pathv, by_name);
    int wrong = 0;
    double t0 = core_now();
    // The wrong answers again at the end, where a log cut to its tail still
    // shows them: the patch, what it got, its first failed check.
    char recap[4096] = "";
    size_t rn = 0;
    for (size_t i = 0; i < gl.gl_pathc; i++) {
        const char *path = gl.gl_pathv[i];
        char expect[512], what[512] = "";
        CHECK(header(path, "EXPECT", expect, sizeof expect), "%s has no EXPECT: line before its diff", path);
        header(path, "MUTANT", what, sizeof what);
        bool legal = strcmp(expect, "PASS") == 0;
        o->mutant = path;
        Grader g = {0};
        print0("\n%s: %s\n", path, what);
        double t1 = core_now();
        o->started = t1;   // each planted bug is a grading of its own, with its own budget
        grade_lab(&g, o, lab, legal ? NULL : expect);
        int failed = grader_failed(&g);
        bool ok = legal ? failed == 0 : said(&g, 0, expect);
        if (o->margins) {
            const char *base = strrchr(path, '/');
            write_margins(&g, o->margins, base ? base + 1 : path, expect);
        }
        print0("%s %s (%.0f s): %s\n", ok ? "answered" : "WRONG ANSWER", path, core_now() - t1,
               legal ? (failed ? "a legal variant failed" : "a legal variant passes")
                     : (ok ? "caught with the diagnosis it should get" : failed ? "caught, but not saying its EXPECT" : "NOT caught"));
        if (!ok) {
            print0("  EXPECT: %s\n", expect);
            const Result *first = NULL;
            for (int k = 0; k < g.n; k++)
                if (!g.results[k].pass) {
                    print0("  FAIL %s, %s: %s | %s\n", g.results[k].run, g.results[k].check, g.results[k].figure,
                           g.results[k].diagnosis);
                    if (!first) first = &g.results[k];
                }
            if (rn < sizeof recap)
                rn += (size_t)snprintf(recap + rn, sizeof recap - rn, "  %s: %s%s%s%s%.200s\n", path,
                                       legal ? "a legal variant failed" : failed ? "not its EXPECT" : "NOT caught",
                                       first ? "; first failed: " : "", first ? first->check : "", first ? ": " : "",
                                       first ? first->diagnosis : "");
            wrong++;
        }
        grader_free(&g);
    }
    print0("\n%s: %zu planted bugs, %zu answered as expected, %d not (%.0f s)\n%s", lab->id, gl.gl_pathc,
           gl.gl_pathc - (size_t)wrong, wrong, core_now() - t0, recap);
    globfree(&gl);
    return wrong;
}

// ---- ending, however it ends -------------------------------------------------

// What the cleanup needs: the grader's results so far and where its reports
// go, and the work directory. The reports are written and the directory
// removed on every exit: a normal one, a failed CHECK, a late usage error,
// SIGTERM or SIGINT.
static Options *g_opts;
static Grader *g_grader;
static bool g_reported;

static void write_reports(Grader *g) {
    if (g_reported) return;
    g_reported = true;
    if (g_opts->json) write_json(g, g_opts->json);
    if (g_opts->junit) write_junit(g, g_opts->junit);
}

static void last_words(void) {
    if (g_running > 0) kill(-g_running, SIGKILL);
    static Grader none_graded;
    if (!g_grader) g_grader = &none_graded;
    if (!g_reported && (g_opts->json || g_opts->junit)) {
        // The grader itself stopped (its error is on stderr): the reports
        // say so, with whatever was graded before.
        Run none;
        memset(&none, 0, sizeof none);
        snprintf(none.name, sizeof none.name, "grader");
        g_grader->lab = "grader";
        grade_check(g_grader, &none, "grading ends", false, "stopped early", "grades every run",
                    "the grader stopped before it finished: its last line (on its standard error) says why");
        write_reports(g_grader);
    }
    if (g_opts->work[0]) remove_work(g_opts);
}

static void on_signal(int sig) {
    core_run_cleanups();
    _exit(128 + sig);
}

// ---- main ------------------------------------------------------------------

int main(int argc, char **argv) {
    Args a = args_defaults();
    Options o = {0};
    bool solutions = false, quick = false;
    const char *submission = NULL, *mutant = NULL, *labs = NULL, *json = NULL, *junit = NULL,
               *keep = NULL, *pert = NULL, *mutants = NULL, *runs = NULL, *margins = NULL, *ref_cache = NULL;
    int hidden = -1, limit = 300, watchdog = 60, budget = 1800;
    ArgExtra extras[] = {
        {"solutions", ARG_FLAG, &solutions, "grade the reference solutions", 0, 0, NULL, NULL},
        {"submission", ARG_STRING, &submission, "grade the student files in DIR (DIR/labNN_topic/file.c or DIR/file.c)", 1, 0, NULL, "DIR"},
        {"mutant", ARG_STRING, &mutant, "grade FILE in place of the student's file (with --lab): a .c file, or a planted bug as a .patch against the solution", 1, 0, NULL, NULL},
        {"mutants", ARG_STRING, &mutants, "grade every planted bug DIR/*.patch of one lab (with --lab) and check each gets the diagnosis its EXPECT line names (EXPECT: PASS for a legal variant)", 1, 0, NULL, "DIR"},
        {"lab", ARG_STRING, &labs, "only these labs (comma-separated ids: ref,lab01)", 1, 0, NULL, "IDS"},
        {"quick", ARG_FLAG, &quick, "the fast subset of runs (make check-labNN)", 0, 0, NULL, NULL},
        {"runs", ARG_STRING, &runs, "only the runs of these names (comma-separated, as the table names them: np2-flat; hidden: every hidden run)", 1, 0, NULL, "NAMES"},
        {"json", ARG_OUTPUT, &json, "write Gradescope's results.json here", 1, 0, NULL, NULL},
        {"junit", ARG_OUTPUT, &junit, "write JUnit XML here", 1, 0, NULL, NULL},
        {"margins", ARG_OUTPUT, &margins, "append each check's figure over its bound to FILE (tab-separated; scripts/yardstick.py reads it)", 1, 0, NULL, NULL},
        {"hidden-seed", ARG_INT, &hidden, "also run hidden tests: runs drawn from this seed (other world sizes, shapes and budgets, within what each lab supports), trained with it", 0, 2147483647.0, NULL, NULL},
        {"limit", ARG_INT, &limit, "hard time limit of one run, in seconds", 5, 86400, NULL, NULL},
        {"budget", ARG_INT, &budget, "seconds every run of the grading may take together (0: no budget); the runs past it fail, unrun", 0, 864000, NULL, NULL},
        {"watchdog", ARG_INT, &watchdog, "the programs' --timeout (a hang ends with each rank's line)", 1, 86400, NULL, NULL},
        {"keep", ARG_STRING, &keep, "keep every run's directory under DIR", 1, 0, NULL, "DIR"},
        {"ref-cache", ARG_STRING, &ref_cache, "the cache of reference runs (default: the tree's build/refcache, or $PL_REFCACHE), shared with the lab programs and the tests; with --submission used only where the runs are isolated and DIR is inside the trusted tree (hidden from them)", 1, 0, NULL, "DIR"},
        {"perturb", ARG_STRING, &pert, "self-test: add DELTA to COUNT elements (default 1) from INDEX on of array NAME of every lab dump", 1, 0, NULL, "NAME:INDEX:DELTA[:COUNT]"},
        {NULL, 0, NULL, NULL, 0, 0, NULL, NULL},
    };
    args_takes(0, "it runs each lab with the flags of its spec");
    args_parse(&a, argc, argv,
               "The grader: runs each lab over world sizes and seeds and checks its dumps against the "
               "trusted reference.",
               extras);
    // From here on, every exit writes the reports and removes the work
    // directory (usage errors included).
    o.json = json;
    o.junit = junit;
    g_opts = &o;
    core_add_cleanup(last_words);
    signal(SIGTERM, on_signal);
    signal(SIGINT, on_signal);
    signal(SIGHUP, on_signal);
    if ((solutions != 0) + (submission != NULL) + (mutant != NULL) + (mutants != NULL) > 1)
        core_usage_error("pick one of --solutions, --submission, --mutant and --mutants");
    if (mutants && (!labs || strchr(labs, ',')))
        core_usage_error("--mutants grades one lab's planted bugs: say which with --lab");
    if (mutant && !labs) core_usage_error("--mutant replaces one lab's file: say which with --lab");
    if (submission && !exists(submission)) core_usage_error("--submission %s does not exist", submission);
    if (mutant && !exists(mutant)) core_usage_error("--mutant %s does not exist", mutant);
    if (watchdog >= limit) core_usage_error("--watchdog %d must be below --limit %d", watchdog, limit);
    if (labs) {   // every id named must exist
        char copy[256];
        snprintf(copy, sizeof copy, "%s", labs);
        for (char *tok = strtok(copy, ","); tok; tok = strtok(NULL, ",")) {
            if (!lab_spec(tok)) {
                char ids[256] = "";
                for (int i = 0; i < NLABS; i++)
                    snprintf(ids + strlen(ids), sizeof ids - strlen(ids), "%s%s", i ? ", " : "", LABS[i]->id);
                core_usage_error("--lab %s: no such lab; the labs are %s", tok, ids);
            }
        }
    }
    {
        long index;
        double delta;
        const char *c1 = pert ? strchr(pert, ':') : NULL;
        long count = 1;
        if (pert && (!c1 || c1 == pert || sscanf(c1 + 1, "%ld:%lf:%ld", &index, &delta, &count) < 2 || count < 1))
            core_usage_error("--perturb wants NAME:INDEX:DELTA[:COUNT] (param/final/block1.mlp.w1:512:1e-4:512), "
                             "not '%s'", pert);
    }
    if (geteuid() == 0) {
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 0);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 0);
    }
    // The trusted tree: the one this grader was built in (build/grade -> ..).
    char self[PATH_MAX], tree[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    CHECK(n > 0, "cannot find where build/grade lives");
    self[n] = 0;
    snprintf(tree, sizeof tree, "%s", self);
    for (int up = 0; up < 2; up++) *strrchr(tree, '/') = 0;   // strip build/grade
    o.tree = tree;
    o.build_tree = tree;
    o.solutions = solutions;
    o.submission = submission;
    o.mutant = mutant;
    o.labs = labs;
    o.quick = quick;
    o.runs = runs;
    o.json = json;
    o.junit = junit;
    o.margins = margins;
    o.hidden_seed = hidden;
    o.limit = limit;
    o.budget = budget;
    o.started = core_now();
    o.watchdog = watchdog;
    o.keep = keep;
    // The reference runs are the cache's: the tree's build/refcache (where
    // the lab programs keep theirs), PL_REFCACHE, or --ref-cache's.
    static char default_cache[PATH_MAX + 32];
    char tree_build[PATH_MAX + 8];
    snprintf(tree_build, sizeof tree_build, "%s/build", tree);
    refcache_default_root(tree_build, default_cache, sizeof default_cache);
    if (!ref_cache) ref_cache = default_cache;
    o.ref_cache = ref_cache;
    mkdir(ref_cache, 0700);
    CHECK(exists(ref_cache), "--ref-cache %s: cannot make that directory", ref_cache);
    o.perturb = pert;
    // Every process a run starts stays the grader's descendant, even one
    // that leaves its process group (setsid): see end_leftovers.
    CHECK(prctl(PR_SET_CHILD_SUBREAPER, 1) == 0, "cannot become the subreaper of the runs: %s", strerror(errno));
    // The trusted build's configuration: CUDA objects in its build/ mean CUDA=1.
    {
        char pat[PATH_MAX + 64];
        glob_t gl;
        snprintf(pat, sizeof pat, "%s/build/obj/common/*.cu.o", tree);
        o.cuda = glob(pat, 0, NULL, &gl) == 0 && gl.gl_pathc > 0;
        globfree(&gl);
    }
    // Isolation: as root, every run of a lab program in a PID namespace as
    // an unprivileged user; otherwise the limits alone, said once.
    if (geteuid() == 0) {
        g_run_uid = 100000 + (int)getpid();
        // The sandbox, tried on a directory of its own: with a network
        // namespace where iproute2's ip can bring loopback up, else without.
        char pdir[] = "/tmp/pl-probe.XXXXXX", pre[3000], probe[3100];
        CHECK(mkdtemp(pdir), "cannot make a directory in /tmp: %s", strerror(errno));
        Options p = o;
        snprintf(p.work, sizeof p.work, "%s", pdir);
        p.build_tree = pdir;
        for (int net = 1; net >= 0 && !o.isolate; net--) {
            p.net = o.net = net;
            sandbox_prefix(&p, false, pre, sizeof pre);
            snprintf(probe, sizeof probe, "%strue > /dev/null 2>&1", pre);
            o.isolate = shell(probe) == 0;
        }
        rmdir(pdir);
        if (o.isolate && !o.net)
            print0("note: the runs are not cut off from the network: ip (Debian's iproute2) is missing here\n");
        if (!o.isolate)
            print0("note: the runs are not isolated: unshare or setpriv (util-linux) failed here (a container "
                   "without CAP_SYS_ADMIN?); each run has limits on CPU time, file size and memory, but runs "
                   "as root and can read the grader's files\n");
    } else {
        print0("note: the grader is not root, so each run has limits on CPU time, file size and memory and "
               "its leftover processes are ended, but it runs as this user and can read what this user can "
               "(run the grader as root to run each submission as uid %d in its own PID namespace)\n", RUN_UID);
    }
    // A submission's build and runs must not reach the answers kept on
    // disk: only where they are isolated, with the trusted tree (and the
    // cache in it) hidden from them.
    if (ref_cache && submission) {
        char rc[PATH_MAX], tree[PATH_MAX];
        bool inside = realpath(ref_cache, rc) && realpath(o.tree, tree) && strncmp(rc, tree, strlen(tree)) == 0 &&
                      rc[strlen(tree)] == '/';
        if (!o.isolate || !inside) {
            print0("note: the reference cache %s is not used: with --submission it would keep the reference's "
                   "answers where the submission could read them (it needs root with isolated runs, and the cache "
                   "inside the trusted tree, %s); the reference runs are trained for this grading alone\n",
                   ref_cache, o.tree);
            o.ref_cache = NULL;
        }
    }
    if (keep) {
        snprintf(o.work, sizeof o.work, "%s", keep);
        char q[600], line[700];
        shell_quote(q, sizeof q, keep);
        snprintf(line, sizeof line, "mkdir -p %s", q);
        CHECK(shell(line) == 0, "cannot make %s", keep);
    } else {
        const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
        snprintf(o.work, sizeof o.work, "%s/grade.XXXXXX", tmp);
        CHECK(mkdtemp(o.work), "cannot make a temporary directory in %s", tmp);
    }
    // The runs' directories may be entered (not listed) by the runs' user;
    // the grader's own files lie in a private directory inside.
    if (o.isolate) CHECK(chmod(o.work, 0711) == 0, "cannot open %s to the runs: %s", o.work, strerror(errno));
    // ...and every directory above it must let that user pass.
    for (char up[sizeof o.work], *slash; o.isolate && (snprintf(up, sizeof up, "%s", o.work), 1);) {
        while ((slash = strrchr(up, '/')) && slash != up) {
            *slash = 0;
            struct stat st;
            CHECK(stat(up, &st) == 0 && (st.st_mode & S_IXOTH),
                  "the runs' user (uid %d) cannot pass through %s on the way to %s: chmod o+x it, or set "
                  "TMPDIR to a directory it can reach", RUN_UID, up, o.work);
        }
        break;
    }
    // The runs' directories. As root, on a file system of the grading's own:
    // a tmpfs of RUNS_BYTES, mounted in a mount namespace of the grader's
    // (gone with the grader however it ends, and seen by no one else), so
    // that the runs of one grading, whatever each file's size, cannot fill
    // a disk that another grading or the machine uses.
    snprintf(o.runs_dir, sizeof o.runs_dir, "%s/runs", o.work);
    CHECK(mkdir(o.runs_dir, 0711) == 0 || errno == EEXIST, "cannot make %s: %s", o.runs_dir, strerror(errno));
    if (o.isolate && !keep) {
        char opts[64];
        snprintf(opts, sizeof opts, "size=%lld,mode=0711", (long long)RUNS_BYTES);
        CHECK(unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0 &&
                  mount("tmpfs", o.runs_dir, "tmpfs", MS_NOSUID | MS_NODEV, opts) == 0,
              "cannot give the runs a file system of their own (a tmpfs on %s in a mount namespace of the "
              "grader's): %s", o.runs_dir, strerror(errno));
    }
    snprintf(o.priv, sizeof o.priv, "%s/private", o.work);
    CHECK(mkdir(o.priv, 0700) == 0 || errno == EEXIST, "cannot make %s: %s", o.priv, strerror(errno));
    CHECK(chmod(o.priv, 0700) == 0, "cannot make %s private: %s", o.priv, strerror(errno));
    // The trusted reference first: every comparison needs it.
    char log[700];
    snprintf(log, sizeof log, "%s/build-ref.log", o.priv);
    if (!build(&o, "build/ref", log)) {
        char *text = read_tail(log, 2000, NULL);
        core_fail(__FILE__, __LINE__, "the trusted tree does not build build/ref:\n%s", text);
    }
    if (submission || mutant || mutants) make_copy(&o);
    if (mutants) {
        const LabSpec *lab = lab_spec(labs);
        int bad = check_mutants(&o, lab, mutants);
        g_reported = true;   // no reports in this mode
        return bad ? 1 : 0;
    }
    print0("grading %s (%s)\n",
           solutions ? "the reference solutions" : submission ? submission : mutant ? mutant : "the student files of this tree",
           tree);
    static Grader g;
    g_grader = &g;
    for (int i = 0; i < NLABS; i++) {
        if (!lab_selected(&o, LABS[i]->id)) continue;
        // A release of some labs holds only their directories: the others
        // are not graded (and named, when asked for by --lab).
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s", tree, LABS[i]->dir);
        if (!exists(dir)) {
            if (labs) print0("%s is not in this tree (no %s/): not graded\n", LABS[i]->id, LABS[i]->dir);
            continue;
        }
        grade_lab(&g, &o, LABS[i], NULL);
    }
    CHECK(g.n > 0, "nothing was graded (no lab of this tree matched --lab %s)", labs ? labs : "");
    grader_print_table(&g);
    write_reports(&g);
    if (margins) write_margins(&g, margins, solutions ? "solutions" : submission ? submission : mutant ? mutant : "student files",
                               solutions ? "PASS" : "-");
    int failed = 0;
    for (int i = 0; i < g.n; i++) failed += !g.results[i].pass;
    return failed ? 1 : 0;
}
