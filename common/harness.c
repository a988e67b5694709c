// harness.c: the training labs' start, the reference run and the lines they print.
#include "harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <unistd.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include "core.h"
#include "dump.h"
#include "mem.h"
#include "ops.h"
#include "sandbox.h"
#include "trace.h"
#include "train.h"

static void remove_tmp(void);
static bool g_remove_tmp_added;   // by harness_start, or (lab01, without it) by harness_reference

Comm *harness_start(const Args *a, int *argc, char ***argv) {
    // The cleanups are the harness's alone: none of a constructor's, and
    // none added later (core.h).
    core_clear_cleanups();
    core_add_cleanup(remove_tmp);
    g_remove_tmp_added = true;
    core_seal_cleanups();
    Comm *c = comm_init(argc, argv, a->timeout);
    mem_init(a->device, comm_local_rank());
    ops_init();
    ops_set_tf32(a->tf32);
    if (a->trace) {   // the ranks agree on time zero: it is taken right after a barrier
        comm_barrier(c);
        trace_start(a->trace);
    }
    harness_close_sandbox(c, a);
    return c;
}

void harness_close_sandbox(Comm *c, const Args *a) {
    if (!sandbox_wanted()) return;
    // What the harness writes after this: rank 0's dump, opened now;
    // /proc/self/clear_refs, which mem_init opened. A trace would be a file
    // of its own, which graded runs do not ask for.
    CHECK(!a->trace, "--trace in a graded run (PL_SANDBOX=1): a graded run writes no file but its dump");
    CHECK(comm_rank(c) != 0 || a->dump, "a graded run (PL_SANDBOX=1) writes its dump where --dump says; pass it");
    if (comm_rank(c) == 0) dump_preopen(a->dump);
    sandbox_close();
}

void harness_check_fits(const Args *a, int rows, bool with_reference) {
    GptConfig need = {.B = rows, .T = a->seq, .C = a->dim, .NH = a->heads, .L = a->layers, .V = a->vocab,
                      .precision = gpt_precision_parse(a->precision)};
    GptConfig whole = need;
    whole.B = a->batch;
    char what[96];
    mem_check_fits(gpt_bytes_needed(&need), comm_local_size(), with_reference ? gpt_bytes_needed(&whole) : 0,
                   args_model_string(a, what, sizeof what));
}

// The private directories of this machine's runs whose rank 0 is gone:
// one killed by SIGKILL (or a power cut) could not remove its own. Only
// ours (this user's, this host's, named pl-run.HOST.PID.XXXXXX) whose
// process no longer exists.
static void sweep_stale(const char *tmp, const char *host) {
    DIR *d = opendir(tmp);
    if (!d) return;
    const size_t hl = strlen(host);
    for (struct dirent *e; (e = readdir(d));) {
        const char *n = e->d_name;
        if (strncmp(n, "pl-run.", 7) != 0 || strncmp(n + 7, host, hl) != 0 || n[7 + hl] != '.') continue;
        char *end;
        long pid = strtol(n + 8 + hl, &end, 10);
        if (end == n + 8 + hl || *end != '.' || strlen(end) != 7 || pid <= 0) continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;   // alive, or not ours to ask
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != getuid())
            continue;
        int fd = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0) core_remove_under(fd, 4);   // its dump and a kept reference's folders
        unlinkat(dirfd(d), n, AT_REMOVEDIR);
    }
    closedir(d);
}

// A private directory for the run's files: nobody else can read them or
// plant a link in their place. Its name holds the host and the process, so
// that the next run here removes it if this one cannot (sweep_stale).
static void private_dir(char *dir, size_t len) {
    const char *tmp = getenv("TMPDIR") && getenv("TMPDIR")[0] ? getenv("TMPDIR") : "/tmp";
    char host[64] = "host";
    if (gethostname(host, sizeof host) != 0) snprintf(host, sizeof host, "host");
    host[sizeof host - 1] = 0;
    for (char *h = host; *h; h++)
        if (*h == '/' || *h == '.') *h = '-';
    sweep_stale(tmp, host);
    snprintf(dir, len, "%s/pl-run.%s.%ld.XXXXXX", tmp, host, (long)getpid());
    CHECK(mkdtemp(dir), "cannot make a private directory in %s: %s (set TMPDIR to a writable "
          "directory)", tmp, strerror(errno));
}

// The files of the run's private directory, removed however the run ends:
// its own dump, and the .partial it is written to until it is complete (a
// run that ends in the middle of writing one leaves that); and a cache made
// there when build/refcache could not be (its entries, its folders).
enum { TMP_FILES = HARNESS_MAX_REFS + 3, TMP_DIRS = 3 };
static char g_tmp_files[TMP_FILES][PATH_MAX + 80], g_tmp_dirs[TMP_DIRS][PATH_MAX + 40];

static void remove_tmp(void) {
    dump_remove_partial();   // --dump's own, where its file system cannot write it unnamed
    for (int k = 0; k < TMP_FILES; k++) {
        if (!g_tmp_files[k][0]) continue;
        unlink(g_tmp_files[k]);
        size_t n = strlen(g_tmp_files[k]);
        if (n + 9 < sizeof g_tmp_files[k]) {   // and its .partial
            memcpy(g_tmp_files[k] + n, ".partial", 9);
            unlink(g_tmp_files[k]);
            g_tmp_files[k][n] = 0;
        }
    }
    for (int k = 0; k < TMP_DIRS; k++)   // the innermost first
        if (g_tmp_dirs[k][0]) rmdir(g_tmp_dirs[k]);
}

static void note_tmp(int k, const char *path) { snprintf(g_tmp_files[k], sizeof g_tmp_files[k], "%s", path); }

// The folder this program was run from (build/): build/ref and the cache are there.
static void program_dir(char *out, size_t len) {
    ssize_t n = readlink("/proc/self/exe", out, len - 1);
    out[n > 0 ? n : 0] = 0;
    char *slash = strrchr(out, '/');
    if (slash) *slash = 0;
    else snprintf(out, len, ".");
}

// Rank 0: the cache and the reference's entries in it; false (why_off
// says) when there is no build/ref to train it with.
static bool find_reference(Reference *r, const Args *a) {
    char bin[PATH_MAX], ref[PATH_MAX + 8], root[PATH_MAX], why[PATH_MAX + 100];
    program_dir(bin, sizeof bin);
    snprintf(ref, sizeof ref, "%s/ref", bin);
    refcache_default_root(bin, root, sizeof root);
    if (access(ref, X_OK) != 0) {
        snprintf(r->why_off, sizeof r->why_off, "there is no %.160s to train the single-device reference with: "
                 "build it (make) and run again", ref);
        return false;
    }
    if (!refcache_open(&r->cache, root, ref, why, sizeof why)) {
        // No cache where it belongs (a read-only tree): one in the private
        // directory, removed at the end.
        char mine[PATH_MAX];
        snprintf(mine, sizeof mine, "%s/refcache", r->dir);
        print0("note: %s; the reference is kept in %s for this run only\n", why, mine);
        CHECK(refcache_open(&r->cache, mine, ref, why, sizeof why), "%s", why);
        snprintf(g_tmp_dirs[0], sizeof g_tmp_dirs[0], "%s", r->cache.dir);
        snprintf(g_tmp_dirs[1], sizeof g_tmp_dirs[1], "%s", mine);
        refcache_set(&r->cache, a, &r->set);
        for (int k = 0; k < r->set.n; k++) note_tmp(k + 1, r->set.paths[k]);
        snprintf(g_tmp_files[TMP_FILES - 1], sizeof g_tmp_files[0], "%s/rate", mine);
        return true;
    }
    refcache_set(&r->cache, a, &r->set);
    return true;
}

// Rank 0: the reference's losses, from its first run's dump.
static void read_reference_losses(Reference *r) {
    const char *err = NULL;
    DumpFile *f = dump_read(r->set.paths[0], &err);
    CHECK(f, "cannot read the reference's dump %s back: %s", r->set.paths[0], err);
    const DumpArray *loss = dump_find(f, "loss");
    CHECK(loss && loss->count == (uint64_t)r->steps, "the reference's dump %s has no loss of %d steps",
          r->set.paths[0], r->steps);
    for (int s = 0; s < r->steps; s++) r->loss[s] = dump_get(loss, (uint64_t)s);
    dump_free(f);
}

// Every rank learns what rank 0 found: whether the run is compared, whether
// the reference is at hand, and its losses when it is.
static void share_reference(Comm *c, Reference *r) {
    double state[2] = {r->on, r->ready};
    comm_broadcast_host(c, state, sizeof state, 0);
    r->on = state[0] != 0;
    r->ready = state[1] != 0;
    if (r->on && r->ready) comm_broadcast_host(c, r->loss, (size_t)r->steps * sizeof *r->loss, 0);
}

Reference harness_reference(Comm *c, const Args *a, bool on) {
    Reference r = {.on = on, .steps = a->steps};
    r.loss = calloc((size_t)(a->steps ? a->steps : 1), sizeof *r.loss);
    CHECK(r.loss, "out of memory");
    // The private directory holds the dump when --dump names no place, and
    // the reference's cache when the tree has none.
    if (comm_rank(c) == 0 && (on || !a->dump)) {
        private_dir(r.dir, sizeof r.dir);
        snprintf(g_tmp_dirs[TMP_DIRS - 1], sizeof g_tmp_dirs[0], "%s", r.dir);
        char own[300];
        snprintf(own, sizeof own, "%s/run.bin", r.dir);
        note_tmp(0, own);
    }
    if (comm_rank(c) == 0) {
        if (!g_remove_tmp_added) core_add_cleanup(remove_tmp), g_remove_tmp_added = true;
        if (a->dump) snprintf(r.own_dump, sizeof r.own_dump, "%s", a->dump);
        else snprintf(r.own_dump, sizeof r.own_dump, "%s/run.bin", r.dir);
    }
    if (on && comm_rank(c) == 0) {
        if (!find_reference(&r, a)) {
            r.on = false;
            print0("note: %s\n", r.why_off);
        } else if (refcache_missing(&r.set) == 0) {
            refcache_count(&r.cache, &r.set, r.set.n, 0);
            r.ready = true;
            read_reference_losses(&r);
        } else {
            int jobs = refcache_jobs(&r.set);
            print0("the single-device reference of this training is not kept yet: %d runs of build/ref train after "
                   "your steps, %d at a time (about %.0f s here), and are kept in %s: the next run with these flags "
                   "starts at once\n", refcache_missing(&r.set), jobs,
                   refcache_estimate(&r.cache, &r.set, jobs), r.cache.root);
        }
    }
    share_reference(c, &r);
    // From here on, memory is the lab's own.
    mem_reset_peaks();
    comm_stats_reset();
    return r;
}

// Each reference run as it ends.
static void reference_run_done(int k, double seconds, void *ctx) {
    const Reference *r = ctx;
    const YardstickRun *y = &r->set.runs[k];
    char what[96];
    if (y->micro > 1)
        snprintf(what, sizeof what, "%d micro-batches%s", y->micro, y->micro_mean ? ", each its own mean" : "");
    else
        snprintf(what, sizeof what, "the whole batch");
    print0("  reference run %d of %d (%s, %s rounding): %.1f s\n", k + 1, r->set.n, what,
           ops_rounding_name(y->rounding), seconds);
}

void harness_reference_complete(Comm *c, Reference *r) {
    bool todo = comm_max_double(c, harness_any_unfinished() ? 1 : 0) > 0;
    if (!r->on || r->ready) return;
    if (comm_rank(c) == 0) {
        int jobs = refcache_jobs(&r->set);
        double est = refcache_estimate(&r->cache, &r->set, jobs);
        if (todo) {
            r->on = false;
            snprintf(r->why_off, sizeof r->why_off, "a TODO this run called is not written yet, so it is not "
                     "compared with single-device training; once they are, the reference trains here (%d runs "
                     "of build/ref, about %.0f s) and is kept", refcache_missing(&r->set), est);
        } else {
            print0("training the single-device reference once: %d runs of build/ref, %d at a time (about %.0f s "
                   "here), kept in %s\n", refcache_missing(&r->set), jobs, est, r->cache.root);
            fflush(stdout);
            char err[2048];
            double t0 = core_now();
            CHECK(refcache_fill(&r->cache, &r->set, jobs, 0, reference_run_done, r, err, sizeof err),
                  "cannot train the single-device reference: %s", err);
            print0("  the reference: %.1f s in all\n", core_now() - t0);
            r->ready = true;
            read_reference_losses(r);
        }
    }
    share_reference(c, r);
}

void harness_seal_measures(void) {
    ops_release_scratch();
    mem_seal_peaks();
    comm_stats_seal();
    ops_work_reset();
    ops_work_seal();
}

void harness_reference_free(Reference *r) {
    remove_tmp();
    r->dir[0] = 0;
    r->ready = false;
    free(r->loss);
    r->loss = NULL;
}

double harness_param_error(const Reference *r, const Gpt *m, float **units, char *worst, size_t len) {
    if (!r->on || !r->ready) return -1;
    const char *err = NULL;
    DumpFile *f = dump_read(r->set.paths[0], &err);
    CHECK(f, "cannot read the reference's parameters back from %s: %s", r->set.paths[0], err);
    // Over the whole model: a tensor whose exact gradient is zero (the key
    // bias: softmax ignores a shift) moves by rounding noise alone under
    // Adam, so its own relative error says nothing.
    double num = 0, den = 0, worst_abs = 0;
    snprintf(worst, len, "-");
    for (int u = 0; u < m->nunits; u++) {
        const GptUnit *unit = &m->units[u];
        float *host = malloc(unit->size * sizeof(float));
        CHECK(host, "out of memory");
        mem_to_host(host, units[u], unit->size * sizeof(float));
        for (int k = 0; k < unit->ntensors; k++) {
            const GptTensor *t = &unit->tensors[k];
            char name[128];
            snprintf(name, sizeof name, "param/final/%s.%s", unit->name, t->name);
            const DumpArray *ref = dump_find(f, name);
            CHECK(ref && ref->count == t->count, "the reference has no %s of %zu floats", name, t->count);
            const float *want = ref->data;
            for (size_t i = 0; i < t->count; i++) {
                double d = (double)host[t->offset + i] - want[i];
                num += d * d;
                den += (double)want[i] * want[i];
                if (!(fabs(d) <= worst_abs)) {
                    worst_abs = fabs(d);
                    snprintf(worst, len, "%s.%s", unit->name, t->name);
                }
            }
        }
        free(host);
    }
    dump_free(f);
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

void harness_sumsq_per_rank(Comm *c, const Gpt *m, void **units, CommType t, double *out) {
    double mine = 0;
    for (int u = 0; u < m->nunits; u++)
        mine += t == COMM_BF16 ? ops_sumsq_bf16(units[u], m->units[u].size) : ops_sumsq(units[u], m->units[u].size);
    comm_all_gather_host(c, &mine, sizeof mine, out);
}

enum { MAX_HOOKS = 32 };
static const char *const *g_hooks;
static int g_nhooks;
static int g_todo[MAX_HOOKS];

void harness_hooks(const char *const *names, int n) {
    // Fixed once, by the harness, first thing in main: a second call (from
    // the student's file, to empty the list) would hide unfinished hooks.
    static bool fixed;
    CHECK(!fixed, "harness_hooks is called once, by the lab's harness; a second call (from the "
          "student's file?) would hide the unfinished hooks: remove it");
    CHECK(names && n > 0 && n <= MAX_HOOKS, "harness_hooks takes 1 to %d hooks", MAX_HOOKS);
    fixed = true;
    g_hooks = names;
    g_nhooks = n;
}

void harness_todo(const char *function) {
    for (int k = 0; k < g_nhooks; k++)
        if (strcmp(function, g_hooks[k]) == 0) {
            // Said at once, the first time (the run goes on: its verdict
            // says what the missing function does to the training).
            if (!g_todo[k] && core_rank() == 0) {
                printf("%s: not written yet (it calls lab_todo); the run goes on without it\n", function);
                fflush(stdout);
            }
            g_todo[k] = 1;
        }
}

bool harness_unfinished(const char *hook) {
    for (int k = 0; k < g_nhooks; k++)
        if (strcmp(hook, g_hooks[k]) == 0) return g_todo[k] != 0;
    return false;
}

bool harness_any_unfinished(void) {
    for (int k = 0; k < g_nhooks; k++)
        if (g_todo[k]) return true;
    return false;
}

int harness_print_unfinished(void) {
    int n = 0;
    for (int k = 0; k < g_nhooks; k++) {
        if (g_todo[k]) print0("%s: not written yet (it calls lab_todo)\n", g_hooks[k]);
        n += g_todo[k];
    }
    return n;
}

void harness_dump_unfinished(DumpWriter *w) {
    for (int k = 0; k < g_nhooks; k++) {
        char name[96];
        snprintf(name, sizeof name, "check/unfinished/%s", g_hooks[k]);
        dump_scalar_i64(w, name, g_todo[k]);
    }
}

void harness_print_step(const Reference *r, int step, int steps, double loss, double seconds,
                        double comm_busy, double comm_blocked, double tokens) {
    mem_note_step();
    char ref[64] = "";
    if (r->on && r->ready) snprintf(ref, sizeof ref, " (ref %.4f, |d| %.1e)", r->loss[step], fabs(loss - r->loss[step]));
    print0("step %4d/%d  loss %.4f%s  %6.1f ms (compute %.1f, comm %.1f, exposed %.1f)  %5.1fk tok/s\n",
           step + 1, steps, loss, ref, seconds * 1e3, (seconds - comm_blocked) * 1e3, comm_busy * 1e3,
           comm_blocked * 1e3, tokens / seconds / 1e3);
}

HarnessRun harness_run(Comm *c, const Args *a, Reference *ref, const char *lab, HarnessVerdict verdict) {
    HarnessRun h = {.c = c, .a = a, .ref = ref, .lab = lab, .verdict = verdict};
    h.losses = calloc((size_t)(a->steps ? a->steps : 1), sizeof *h.losses);
    CHECK(h.losses, "out of memory");
    return h;
}

void harness_step_begin(HarnessRun *h) {
    h->before = comm_stats();
    h->t0 = core_now();
    comm_step_window(true);
}

double harness_step_end(HarnessRun *h, int step, double loss, double divisor) {
    Comm *c = h->c;
    comm_step_window(false);   // what follows is the harness's bookkeeping
    double dt = comm_max_double(c, core_now() - h->t0);
    CommStats after = comm_stats();
    double global = comm_sum_double(c, loss) / divisor;
    double busy = comm_max_double(c, after.seconds_busy - h->before.seconds_busy);
    double blocked = comm_max_double(c, after.seconds_blocked - h->before.seconds_blocked);
    double sent = comm_max_double(c, (double)(comm_stats_total_bus_bytes(&after) -
                                               comm_stats_total_bus_bytes(&h->before)));
    h->losses[step] = (float)global;
    h->last_seconds = dt;
    if (step > 0) h->seconds += dt, h->busy += busy, h->blocked += blocked, h->sent += sent;
    if (!h->quiet)
        harness_print_step(h->ref, step, h->a->steps, global, dt, busy, blocked, (double)h->a->batch * h->a->seq);
    return global;
}

void harness_print_mean_step(const HarnessRun *h, bool hidden) {
    int n = h->a->steps - 1;
    if (n < 1) return;
    // A share hidden of no traffic means nothing (one rank: its collectives
    // send no byte), so it is printed only when bytes moved.
    char share[32] = "";
    if (hidden && h->sent > 0 && h->busy > 0)
        snprintf(share, sizeof share, ": %.0f%% hidden", 100.0 * (1 - h->blocked / h->busy));
    print0("mean over steps 2..%d: %.1f ms/step (compute %.1f, comm %.1f, exposed %.1f%s)\n", h->a->steps,
           h->seconds / n * 1e3, (h->seconds - h->blocked) / n * 1e3, h->busy / n * 1e3, h->blocked / n * 1e3,
           share);
}

PL_NORETURN void harness_finish(HarnessRun *h, const HarnessEnd *e) {
    Comm *c = h->c;
    const Args *a = h->a;
    Reference *ref = h->ref;
    const Gpt *model = e->model;
    bool root = comm_rank(c) == 0;
    harness_reference_complete(c, ref);   // trained now when it was not kept yet
    double loss_err = 0;
    for (int s = 0; ref->on && s < a->steps; s++) loss_err = fmax(loss_err, fabs(h->losses[s] - ref->loss[s]));
    char worst[96] = "-";
    double perr = -1;
    if (root && ref->on) {
        float **units = e->params;
        if (e->host) {   // harness_param_error reads tracked memory
            units = gpt_alloc_units(model, MEM_OTHER, "final params");
            for (int u = 0; u < model->nunits; u++)
                mem_from_host(units[u], e->params[u], model->units[u].size * sizeof(float));
        }
        perr = harness_param_error(ref, model, units, worst, sizeof worst);
        if (e->host) gpt_free_units(model, units);
    }
    harness_print_unfinished();
    if (ref->on)
        print0("against single-device training: loss |d| <= %.1e, parameters rel. error %.1e (largest difference "
               "in %s)\n", loss_err, perr, worst);
    if (e->print_more) e->print_more(e->ctx);

    uint64_t steps = (uint64_t)a->steps;
    dump_f32(e->dw, "loss", h->losses, 1, &steps);
    if (root) {
        void (*dump_units)(const Gpt *, DumpWriter *, const char *, float **) =
            e->host ? gpt_dump_host_units : gpt_dump_units;
        dump_units(model, e->dw, "param/final", e->params);
        if (e->m) dump_units(model, e->dw, "optim/m", e->m);
        if (e->v) dump_units(model, e->dw, "optim/v", e->v);
    }
    if (e->dump_more) e->dump_more(e->dw, e->ctx);
    harness_dump_unfinished(e->dw);
    dump_rank_stats(e->dw, c, e->mem);
    dump_close(e->dw);
    harness_trace_write(c);
    // The grader's own checks on this dump: what build/grade will say.
    int verdict = h->verdict ? h->verdict(c, h->lab, ref) : 0;
    if (e->afterwards) e->afterwards(e->ctx);
    harness_reference_free(ref);
    free(h->losses);
    for (int g = 0; g < 4; g++) comm_free(e->groups[g]);
    comm_finalize();
    harness_exit(verdict ? 1 : 0);
}

void harness_print_memory(Comm *c, const MemReport *report) {
    int N = comm_size(c);
    MemReport mine = report ? *report : mem_report();
    MemReport *all = malloc((size_t)N * sizeof *all);
    CHECK(all, "out of memory");
    comm_all_gather_host(c, &mine, sizeof mine, all);
    if (comm_rank(c) == 0) mem_print_reports(all, N);
    free(all);
}

void harness_trace_write(Comm *c) {
    // --trace is every rank's flag: all ranks gather, or none does. The path
    // is copied because taking the spans ends tracing (trace_path() is NULL then).
    char *path = trace_path() ? strdup(trace_path()) : NULL;
    if (!path) return;
    int rank = comm_rank(c);
    size_t len;
    char *mine = trace_take_json(rank, &len);
    size_t *lens = rank == 0 ? malloc((size_t)comm_size(c) * sizeof *lens) : NULL;
    char *all = comm_gather_host(c, mine, len, 0, lens);
    if (rank == 0) {
        trace_write_file(path, all, lens, comm_size(c));
        print0("trace: %s (open it in https://ui.perfetto.dev)\n", path);
    }
    free(all);
    free(lens);
    free(mine);
    free(path);
}

PL_NORETURN void harness_exit(int code) {
    fflush(NULL);
    core_run_cleanups();
    _exit(code);
}
