// args.c: the shared command line.
#include "args.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "core.h"
#include "data.h"

Args args_defaults(void) {
    Args a = {
        .steps = 50,
        .seed = 1337,
        .lr = 1e-3,
        .wd = 0.1,
        .dropout = 0.0,
        .timeout = 120,
        .device = "auto",
        .comm = "auto",
        .tf32 = false,
        .precision = "fp32",
        .recompute = "none",
        .batch = 8,
        .seq = 64,
        .dim = 128,
        .heads = 4,
        .layers = 4,
        .vocab = 256,
        .data = NULL,
        .dump = NULL,
        .trace = NULL,
    };
    return a;
}

// The shared flags, described by the same table as a program's extras. The
// value pointers are filled in by bind_common for the Args being parsed.
enum { NCOMMON = 21 };

static void bind_common(Args *a, ArgExtra *t) {
    // In the order of the ARGS_ bits (args.h).
    ArgExtra common[NCOMMON] = {
        {"steps", ARG_INT, &a->steps, "training steps", 0, 1e9, NULL, NULL},
        {"seed", ARG_U64, &a->seed, "seed of initialisation, data and dropout", 0, 2147483647.0, NULL, NULL},
        {"lr", ARG_DOUBLE, &a->lr, "learning rate", 0, 10, NULL, NULL},
        {"wd", ARG_DOUBLE, &a->wd, "AdamW weight decay (on every parameter)", 0, 10, NULL, NULL},
        {"dropout", ARG_DOUBLE, &a->dropout, "dropout probability", 0, 0.95, NULL, NULL},
        {"batch", ARG_INT, &a->batch, "B: rows in the global batch", 1, 1 << 20, NULL, NULL},
        {"seq", ARG_INT, &a->seq, "T: tokens per row", 1, 1 << 20, NULL, NULL},
        {"dim", ARG_INT, &a->dim, "C: channels", 1, 1 << 16, NULL, NULL},
        {"heads", ARG_INT, &a->heads, "NH: attention heads (must divide C)", 1, 1 << 12, NULL, NULL},
        {"layers", ARG_INT, &a->layers, "L: transformer blocks", 0, 1 << 12, NULL, NULL},
        {"vocab", ARG_INT, &a->vocab, "V: vocabulary size (256 with --data)", 2, 1 << 24, NULL, NULL},
        {"data", ARG_INPUT, &a->data, "train on this file's bytes instead of synthetic data", 1, 0, NULL, NULL},
        {"dump", ARG_OUTPUT, &a->dump, "write results for the grader to this file", 1, 0, NULL, NULL},
        {"trace", ARG_OUTPUT, &a->trace, "write a Chrome trace (open in Perfetto) to this file", 1, 0, NULL, NULL},
        {"timeout", ARG_DOUBLE, &a->timeout, "seconds a rank may wait in one call before the run is ended (0: never)", 0, 1e6, NULL, NULL},
        {"device", ARG_CHOICE, &a->device, "where tensors live and kernels run", 1, 0, "cpu|cuda|auto", NULL},
        {"comm", ARG_CHOICE, &a->comm, "how buffers move: nccl GPU to GPU (a GPU per rank), mpi through the host", 1, 0, "auto|mpi|nccl", NULL},
        {"tf32", ARG_FLAG, &a->tf32, "TF32 matrix units for the matrix products on a GPU: faster, never in graded runs", 0, 0, NULL, NULL},
        {"precision", ARG_CHOICE, &a->precision, "fp32, or bf16: bf16 weights, gradients and activations with fp32 "
         "master weights and moments", 1, 0, "fp32|bf16", NULL},
        {"grad-reduce", ARG_CHOICE, &a->grad_reduce, "with --precision bf16: the gradients' type, accumulated and "
         "all-reduced in it: bf16 (the default, half the bytes) or fp32 (no bits lost in the sums)", 1, 0,
         "bf16|fp32", NULL},
        {"recompute", ARG_CHOICE, &a->recompute, "activation recomputation: none, selective (the attention's "
         "probabilities made again in the backward pass) or full (each block's forward again from its input)", 1, 0,
         "none|selective|full", NULL},
    };
    memcpy(t, common, sizeof common);
}

static unsigned g_takes = ARGS_ALL;
static const char *g_why_not;

void args_takes(unsigned shared, const char *why_not) {
    g_takes = shared & ARGS_DEVICE ? shared | ARGS_COMM : shared;
    g_why_not = why_not;
}

static bool takes(int k) { return (g_takes >> k) & 1u; }

// The command line after the program's name, as given.
static char g_line[1024];
const char *args_command_line(void) { return g_line; }

// Flags given on the command line, for args_given.
enum { MAX_GIVEN = 64 };
static char g_given[MAX_GIVEN][64];
static int g_ngiven;

bool args_given(const char *name) {
    for (int i = 0; i < g_ngiven; i++)
        if (strcmp(g_given[i], name) == 0) return true;
    return false;
}

// Edit distance, to suggest the flag the user probably meant.
static int distance(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 40 || lb > 40) return 99;
    int d[41][41];
    for (size_t i = 0; i <= la; i++) d[i][0] = (int)i;
    for (size_t j = 0; j <= lb; j++) d[0][j] = (int)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            int sub = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            int del = d[i - 1][j] + 1, ins = d[i][j - 1] + 1;
            d[i][j] = sub < del ? (sub < ins ? sub : ins) : (del < ins ? del : ins);
        }
    return d[la][lb];
}

static bool in_choices(const char *choices, const char *v) {
    size_t n = strlen(v);
    const char *p = choices;
    while (*p) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, v, n) == 0) return true;
        if (!bar) break;
        p = bar + 1;
    }
    return false;
}

static void print_flag(const ArgExtra *e) {
    char left[64];
    const char *kind = e->type == ARG_INT || e->type == ARG_U64 ? " N"
                       : e->type == ARG_DOUBLE ? " X"
                       : e->type == ARG_STRING || e->type == ARG_INPUT || e->type == ARG_OUTPUT ? " FILE"
                       : e->type == ARG_CHOICE ? " WHICH"
                                               : "";
    if (e->metavar) snprintf(left, sizeof left, "--%s %s", e->name, e->metavar);
    else snprintf(left, sizeof left, "--%s%s", e->name, kind);
    char def[96] = "";
    switch (e->type) {
    case ARG_INT: snprintf(def, sizeof def, " (default %d)", *(int *)e->value); break;
    case ARG_U64:
        snprintf(def, sizeof def, " (default %llu)", (unsigned long long)*(uint64_t *)e->value);
        break;
    case ARG_DOUBLE: snprintf(def, sizeof def, " (default %g)", *(double *)e->value); break;
    case ARG_STRING:
    case ARG_INPUT:
    case ARG_OUTPUT:
        if (*(const char **)e->value) snprintf(def, sizeof def, " (default %s)", *(const char **)e->value);
        break;
    case ARG_CHOICE: snprintf(def, sizeof def, ": %s (default %s)", e->choices, *(const char **)e->value); break;
    case ARG_FLAG: break;
    }
    printf("  %-22s %s%s\n", left, e->help, def);
}

static void usage(const char *about, const ArgExtra *common, const ArgExtra *extras) {
    if (core_rank() != 0) return;
    printf("usage: %s [flags]\n", core_program());
    if (about) printf("%s\n", about);
    if (extras && extras[0].name) {
        printf("\n%s flags:\n", core_program());
        for (const ArgExtra *e = extras; e->name; e++) print_flag(e);
    }
    printf("\nshared flags:\n");
    for (int i = 0; i < NCOMMON; i++)
        if (takes(i)) print_flag(&common[i]);
    printf("  %-22s %s\n", "--help", "print this and exit");
    printf("\nFlags take their value as --flag VALUE or --flag=VALUE.\n");
}

// An input must be a file this process can read. Every rank checks it (each
// reads it), before MPI starts, so all of them stop alike.
static void check_input(const char *flag, const char *path) {
    // stat before open: opening a FIFO for reading waits for a writer, and
    // would hang the run here, silently.
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        core_usage_error("--%s %s is a directory; give the path of a file in it", flag, path);
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode))
        core_usage_error("--%s %s is not a regular file (a FIFO, a device or a socket); give the path of a "
                         "file", flag, path);
    int fd = open(path, O_RDONLY | O_NONBLOCK);
    if (fd < 0)
        core_usage_error("cannot open --%s file %s (%s); give the path of a readable file", flag, path,
                         strerror(errno));
    close(fd);
}

// An output must be creatable: made here and removed again, or opened for
// writing (without changing it) when it exists. Rank 0 writes the outputs,
// so rank 0 checks: two ranks creating and removing one name would race.
// Of what is not a regular file, only the null device is taken (to drop
// the output): a device such as /dev/full fails at the first write, after
// the run, and a FIFO without a reader would hang here.
static void check_output(const char *flag, const char *path) {
    if (core_rank() != 0) return;
    struct stat st, null;
    const bool exists = stat(path, &st) == 0;
    if (exists && S_ISDIR(st.st_mode))
        core_usage_error("--%s %s is a directory; give a file name (e.g. %s/out)", flag, path, path);
    const bool is_null = exists && S_ISCHR(st.st_mode) && stat("/dev/null", &null) == 0 &&
                         S_ISCHR(null.st_mode) && st.st_rdev == null.st_rdev;
    if (exists && !S_ISREG(st.st_mode) && !is_null)
        core_usage_error("--%s %s is not a regular file (a device, a FIFO or a socket), where the output could "
                         "not be written whole; give a file name, or /dev/null to drop it", flag, path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
    bool made = fd >= 0;
    if (!made && errno == EEXIST) fd = open(path, O_WRONLY);
    if (fd < 0)
        core_usage_error("cannot create --%s file %s (%s); check that its directory exists and is writable",
                         flag, path, strerror(errno));
    close(fd);
    if (made) unlink(path);
}

static void set_value(const ArgExtra *e, const char *v) {
    char *end = NULL;
    errno = 0;
    switch (e->type) {
    case ARG_INT:
    case ARG_U64: {
        long long x = strtoll(v, &end, 10);
        if (end == v || *end || errno)
            core_usage_error("--%s wants a whole number, not '%s'", e->name, v);
        if (e->min <= e->max && ((double)x < e->min || (double)x > e->max))
            core_usage_error("--%s %s is out of range: use %.0f to %.0f", e->name, v, e->min, e->max);
        if (e->type == ARG_U64)
            *(uint64_t *)e->value = (uint64_t)x;
        else
            *(int *)e->value = (int)x;
        break;
    }
    case ARG_DOUBLE: {
        double x = strtod(v, &end);
        if (end == v || *end || errno || !isfinite(x))
            core_usage_error("--%s wants a number, not '%s'", e->name, v);
        if (e->min <= e->max && (x < e->min || x > e->max))
            core_usage_error("--%s %s is out of range: use %g to %g", e->name, v, e->min, e->max);
        *(double *)e->value = x;
        break;
    }
    case ARG_STRING:
    case ARG_INPUT:
    case ARG_OUTPUT:
        if (!*v) core_usage_error("--%s wants a value, not an empty string", e->name);
        if (e->type == ARG_INPUT) check_input(e->name, v);
        if (e->type == ARG_OUTPUT) check_output(e->name, v);
        *(const char **)e->value = v;
        break;
    case ARG_CHOICE:
        if (!in_choices(e->choices, v))
            core_usage_error("--%s must be one of %s, not '%s'", e->name, e->choices, v);
        *(const char **)e->value = v;
        break;
    case ARG_FLAG: *(bool *)e->value = true; break;
    }
}

// Checks that concern several flags at once.
static void check_combinations(const Args *a) {
    // NCCL moves GPU buffers only; whether each rank gets a GPU of its own
    // is known once the device is chosen (comm.c checks it then).
    if (strcmp(a->comm, "nccl") == 0) {
        if (strcmp(a->device, "cpu") == 0)
            core_usage_error("--comm nccl needs the tensors on a GPU, but --device cpu keeps them on the "
                             "CPU; use --comm mpi instead (--comm mpi stages the buffers through the host; "
                             "NCCL needs one GPU per rank)");
#ifndef PL_CUDA
        core_usage_error("--comm nccl: this build has no CUDA backend (nvcc was not found when it was "
                         "built); use --comm mpi, or install the CUDA toolkit and run make clean && make");
#endif
    }
    if (a->dim % a->heads != 0)
        core_usage_error("%d heads do not divide %d channels; pick --heads among the divisors "
                         "of --dim (e.g. --heads %d)",
                         a->heads, a->dim, a->dim % 4 == 0 ? 4 : 1);
    if (a->grad_reduce && strcmp(a->precision, "bf16") != 0)
        core_usage_error("--grad-reduce is the type of bf16 training's gradients; fp32 training's are fp32: add "
                         "--precision bf16, or drop --grad-reduce");
    if (a->data && a->vocab != 256) {
        if (args_given("vocab"))
            core_usage_error("--data reads bytes, so the vocabulary is 256; drop --vocab or set "
                             "--vocab 256");
    }
    // The synthetic chain gives each token DATA_BRANCH distinct successors,
    // which a smaller vocabulary cannot hold (drawing them would never end).
    if (!a->data && a->vocab < DATA_BRANCH + 1 && (g_takes & ARGS_VOCAB))
        core_usage_error("--vocab %d is too small for the synthetic data, in which each token has %d "
                         "successors; use --vocab %d or more", a->vocab, DATA_BRANCH, DATA_BRANCH + 1);
    // A regular --data file must hold one row of T+1 bytes (the size of a
    // pipe or device is not known before it is read; data_open checks it).
    struct stat st;
    if (a->data && stat(a->data, &st) == 0 && S_ISREG(st.st_mode) && st.st_size < (off_t)a->seq + 1)
        core_usage_error("--data file %s has %lld bytes, fewer than the %d a row of T+1 tokens needs; "
                         "use a longer file or a smaller --seq", a->data, (long long)st.st_size, a->seq + 1);
}

void args_parse(Args *a, int argc, char **argv, const char *about, const ArgExtra *extras) {
    if (argc > 0) core_set_program(argv[0]);
    ArgExtra common[NCOMMON];
    bind_common(a, common);
    g_ngiven = 0;
    g_line[0] = 0;
    for (int i = 1, n = 0; i < argc && n + 2 < (int)sizeof g_line; i++)
        n += snprintf(g_line + n, sizeof g_line - (size_t)n, "%s%s", i > 1 ? " " : "", argv[i]);

    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(about, common, extras);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0 || !arg[2])
            core_usage_error("unexpected argument '%s': flags start with -- (see --help)", arg);
        char name[64];
        const char *eq = strchr(arg + 2, '=');
        size_t len = eq ? (size_t)(eq - arg - 2) : strlen(arg + 2);
        if (len >= sizeof name) core_usage_error("unknown flag '%.40s...' (see --help)", arg);
        memcpy(name, arg + 2, len);
        name[len] = 0;

        const ArgExtra *e = NULL;
        for (const ArgExtra *x = extras; x && x->name && !e; x++)
            if (strcmp(x->name, name) == 0) e = x;
        for (int k = 0; k < NCOMMON && !e; k++)
            if (strcmp(common[k].name, name) == 0) {
                if (!takes(k))
                    core_usage_error("--%s is not a flag of this program%s%s%s; see --help", name,
                                     g_why_not ? " (" : "", g_why_not ? g_why_not : "", g_why_not ? ")" : "");
                e = &common[k];
            }
        if (!e) {
            const char *best = NULL;
            int bestd = 3;
            for (const ArgExtra *x = extras; x && x->name; x++)
                if (distance(name, x->name) < bestd) bestd = distance(name, x->name), best = x->name;
            for (int k = 0; k < NCOMMON; k++)
                if (takes(k) && distance(name, common[k].name) < bestd)
                    bestd = distance(name, common[k].name), best = common[k].name;
            if (best) core_usage_error("unknown flag --%s; did you mean --%s? (see --help)", name, best);
            core_usage_error("unknown flag --%s (see --help)", name);
        }
        if (args_given(name)) core_usage_error("--%s is given twice", name);
        if (g_ngiven < MAX_GIVEN) snprintf(g_given[g_ngiven++], sizeof g_given[0], "%s", name);

        if (e->type == ARG_FLAG) {
            if (eq) core_usage_error("--%s takes no value", name);
            set_value(e, "");
            continue;
        }
        const char *v;
        if (eq) {
            v = eq + 1;
        } else {
            if (i + 1 >= argc) core_usage_error("--%s needs a value (see --help)", name);
            v = argv[++i];
        }
        set_value(e, v);
    }
    if (a->data && !args_given("vocab")) a->vocab = 256;
    check_combinations(a);
    comm_use_backend(a->comm);
}

const char *args_model_string(const Args *a, char *buf, size_t len) {
    snprintf(buf, len, "GPT %dL %dC %dH T%d B%d V%d", a->layers, a->dim, a->heads, a->seq,
             a->batch, a->vocab);
    return buf;
}

const char *args_reference_flags(const Args *a, char *buf, size_t len) {
    int n = snprintf(buf, len,
                     "--steps %d --seed %llu --lr %.17g --wd %.17g --dropout %.17g --batch %d --seq %d --dim %d "
                     "--heads %d --layers %d --vocab %d --precision %s --recompute %s --device %s",
                     a->steps, (unsigned long long)a->seed, a->lr, a->wd, a->dropout, a->batch, a->seq, a->dim,
                     a->heads, a->layers, a->vocab, a->precision, a->recompute ? a->recompute : "none", a->device);
    if (a->grad_reduce && n >= 0 && (size_t)n < len)
        n += snprintf(buf + n, len - (size_t)n, " --grad-reduce %s", a->grad_reduce);
    if (a->data && n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, " --data %s", a->data);
    if (a->tf32 && n >= 0 && (size_t)n < len) n += snprintf(buf + n, len - (size_t)n, " --tf32");
    CHECK(n >= 0 && (size_t)n < len, "args_reference_flags: %zu bytes are too few", len);
    return buf;
}

void args_apply_flags(Args *a, const char *flags) {
    ArgExtra common[NCOMMON];
    bind_common(a, common);
    // The values stay pointed at (a->data, a->precision, ...): the copy
    // lives as long as the program.
    size_t n = strlen(flags);
    char *copy = malloc(n + 1);
    CHECK(copy, "out of memory");
    memcpy(copy, flags, n + 1);
    bool vocab = false;
    char *save = NULL;
    for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
        const char *name = tok + 2;
        const ArgExtra *e = NULL;
        for (int k = 0; k < NCOMMON && strncmp(tok, "--", 2) == 0 && !e; k++)
            if (strcmp(common[k].name, name) == 0) e = &common[k];
        if (!e) core_usage_error("%s is not a shared flag (args_apply_flags)", tok);
        vocab |= strcmp(name, "vocab") == 0;
        const char *v = e->type == ARG_FLAG ? "" : strtok_r(NULL, " ", &save);
        if (!v) core_usage_error("--%s needs a value", name);
        set_value(e, v);
    }
    if (a->data && !vocab) a->vocab = 256;
}
