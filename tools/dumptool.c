// dumptool.c: look into a result file, or compare two of them.
//
//   dumptool show FILE
//   dumptool diff A B [--tol X] [--prefix P]      (B is the reference)
//
// diff exits 0 when everything compared agrees, 1 when an array is missing
// from A, shapes differ, or an error exceeds the tolerance (--tol, 0 when
// not given: two different trainings must never read as a match), and 2 when it was called
// wrongly or a file cannot be read: the grader relies on these codes.
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"
#include "dump.h"

static const char USAGE[] =
    "usage: dumptool show FILE\n"
    "       dumptool diff A B [--tol X] [--prefix P]\n"
    "\n"
    "show   print every array of a result file: texts and scalars in full, other\n"
    "       arrays as one line (dtype, shape, min, max, mean, first values;\n"
    "       arrays of up to 100 values in full)\n"
    "diff   compare A against the reference B, array by array: max abs error\n"
    "       (and where), relative Frobenius error ||A-B||/||B||, arrays found in\n"
    "       only one file, shape mismatches, and the per-step loss error\n"
    "  --tol X     fail (exit 1) when any max abs error exceeds X (default 0:\n"
    "              exact; every difference counts)\n"
    "  --prefix P  compare only arrays whose names start with P\n"
    "\n"
    "exit codes: 0 agree; 1 an array missing from A, shapes differ, or an error\n"
    "above --tol; 2 bad command line or unreadable file\n";

enum { SHOW_WHOLE = 100, SHOW_FIRST = 8 };   // print arrays of up to 100 values whole

static const char *type_name(DumpType t) {
    switch (t) {
    case DUMP_F32: return "f32";
    case DUMP_F64: return "f64";
    case DUMP_I64: return "i64";
    case DUMP_TEXT: return "text";
    }
    return "?";
}

static DumpFile *load(const char *path) {
    const char *err;
    DumpFile *f = dump_read(path, &err);
    if (!f) core_usage_error("cannot read %s: %s", path, err);
    return f;
}

// "(4, 128)", "(50)", "()" for a scalar.
static const char *format_shape(const DumpArray *a, char *buf, size_t len) {
    size_t n = (size_t)snprintf(buf, len, "(");
    for (int d = 0; d < a->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64, d ? ", " : "", a->shape[d]);
    if (n < len) snprintf(buf + n, len - n, ")");
    return buf;
}

// The flat index i as a row-major index: "[3, 17]", or "" for a scalar.
static const char *format_index(const DumpArray *a, uint64_t i, char *buf, size_t len) {
    uint64_t idx[DUMP_MAX_DIMS];
    for (int d = a->ndim - 1; d >= 0; d--) {
        idx[d] = a->shape[d] ? i % a->shape[d] : 0;
        i = a->shape[d] ? i / a->shape[d] : 0;
    }
    buf[0] = 0;
    size_t n = 0;
    for (int d = 0; d < a->ndim && n < len; d++)
        n += (size_t)snprintf(buf + n, len - n, "%s%" PRIu64, d ? ", " : "[", idx[d]);
    if (a->ndim > 0 && n < len) snprintf(buf + n, len - n, "]");
    return buf;
}

static void print_value(const DumpArray *a, uint64_t i) {
    if (a->type == DUMP_I64)
        printf("%" PRId64, ((const int64_t *)a->data)[i]);
    else
        printf("%.6g", dump_get(a, i));
}

static int name_width(const DumpFile *f) {
    int w = 4;
    for (int i = 0; i < f->count; i++) {
        int n = (int)strlen(f->arrays[i].name);
        if (n > w) w = n;
    }
    return w > 40 ? 40 : w;
}

// ---- show ------------------------------------------------------------------

static void show_text(const DumpArray *a, int width) {
    const char *s = a->data;
    if (!memchr(s, '\n', a->count)) {
        printf("%-*s  text  \"", width, a->name);
        fwrite(s, 1, a->count, stdout);
        printf("\"\n");
        return;
    }
    // Several lines (a config, say): each on its own line, indented.
    int lines = 0;
    for (uint64_t i = 0; i < a->count; i++) lines += s[i] == '\n';
    if (a->count > 0 && s[a->count - 1] != '\n') lines++;
    printf("%-*s  text  (%d lines)\n", width, a->name, lines);
    uint64_t start = 0;
    for (uint64_t i = 0; i <= a->count; i++)
        if (i == a->count || s[i] == '\n') {
            if (i > start || i < a->count) {
                printf("    ");
                fwrite(s + start, 1, i - start, stdout);
                printf("\n");
            }
            start = i + 1;
        }
}

static void show_numbers(const DumpArray *a, int width) {
    char shape[160];
    printf("%-*s  %-4s  %-12s", width, a->name, type_name(a->type),
           format_shape(a, shape, sizeof shape));
    if (a->ndim == 0) {
        if (a->type == DUMP_I64)
            printf("  %" PRId64 "\n", ((const int64_t *)a->data)[0]);
        else
            printf("  %.10g\n", dump_get(a, 0));
        return;
    }
    if (a->count == 0) {
        printf("  empty\n");
        return;
    }
    // Statistics over finite values; NaN and infinities are counted apart,
    // since one of them usually means the run diverged.
    double lo = INFINITY, hi = -INFINITY, sum = 0;
    uint64_t finite = 0;
    for (uint64_t i = 0; i < a->count; i++) {
        double v = dump_get(a, i);
        if (!isfinite(v)) continue;
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
        sum += v;
        finite++;
    }
    if (finite > 0) printf("  min %.6g  max %.6g  mean %.6g", lo, hi, sum / (double)finite);
    if (finite < a->count) printf("  non-finite %" PRIu64, a->count - finite);

    uint64_t n = a->count <= SHOW_WHOLE ? a->count : SHOW_FIRST;
    printf("  [");
    for (uint64_t i = 0; i < n; i++) {
        if (i) printf(", ");
        print_value(a, i);
    }
    printf(n < a->count ? ", ...]\n" : "]\n");
}

static int cmd_show(int argc, char **argv) {
    if (argc != 3) core_usage_error("show takes one file: dumptool show FILE");
    DumpFile *f = load(argv[2]);
    printf("%s: %d arrays\n", argv[2], f->count);
    int width = name_width(f);
    for (int i = 0; i < f->count; i++) {
        const DumpArray *a = &f->arrays[i];
        if (a->type == DUMP_TEXT)
            show_text(a, width);
        else
            show_numbers(a, width);
    }
    dump_free(f);
    return 0;
}

// ---- diff ------------------------------------------------------------------

static bool selected(const char *name, const char *prefix) {
    return !prefix || strncmp(name, prefix, strlen(prefix)) == 0;
}

// The loss curve, step by step: the number a student compares first.
static void diff_loss(const DumpArray *a, const DumpArray *b) {
    if (a->type == DUMP_TEXT || b->type == DUMP_TEXT || a->ndim != 1 || b->ndim != 1 ||
        a->count != b->count) {
        printf("loss per step: not compared (shapes differ, see above)\n");
        return;
    }
    DumpDiff d = dump_diff(a, b);
    if (a->count == 0) {
        printf("loss per step: no steps\n");
        return;
    }
    printf("loss per step: largest |loss_a - loss_b| = %.3g at loss[%" PRIu64 "] (a %.9g, "
           "b %.9g), over %" PRIu64 " steps\n", d.max_abs, d.argmax, dump_get(a, d.argmax),
           dump_get(b, d.argmax), a->count);
}

static int cmd_diff(int argc, char **argv) {
    const char *paths[2];
    int n_paths = 0;
    const char *prefix = NULL;
    bool has_tol = false;
    double tol = 0;   // exact unless told otherwise
    for (int i = 2; i < argc; i++) {
        if (strcmp(argv[i], "--tol") == 0 || strcmp(argv[i], "--prefix") == 0) {
            if (i + 1 >= argc) core_usage_error("%s needs a value; see dumptool --help", argv[i]);
            if (strcmp(argv[i], "--prefix") == 0) {
                prefix = argv[++i];
                continue;
            }
            char *end;
            tol = strtod(argv[++i], &end);
            if (end == argv[i] || *end || !(tol >= 0) || isinf(tol))
                core_usage_error("--tol needs a number >= 0, such as 1e-5, not '%s'", argv[i]);
            has_tol = true;
        } else if (argv[i][0] == '-' && argv[i][1]) {
            core_usage_error("unknown option '%s'; see dumptool --help", argv[i]);
        } else if (n_paths < 2) {
            paths[n_paths++] = argv[i];
        } else {
            core_usage_error("diff takes two files, A and the reference B; got a third, '%s'",
                             argv[i]);
        }
    }
    if (n_paths != 2) core_usage_error("diff takes two files: dumptool diff A B [--tol X]");
    DumpFile *fa = load(paths[0]);
    DumpFile *fb = load(paths[1]);

    printf("A %s\nB %s (reference)", paths[0], paths[1]);
    if (has_tol) printf("  tolerance %.3g", tol);
    else printf("  tolerance 0 (exact; --tol X allows X)");
    if (prefix) printf("  names starting with '%s'", prefix);
    printf("\n");

    int width = name_width(fb) > name_width(fa) ? name_width(fb) : name_width(fa);
    int compared = 0, over = 0, shape_bad = 0, missing = 0, texts_differ = 0;
    bool header = false;
    char sa[160], sb[160], where[160];
    // Arrays of the reference, in its order: compared, or missing from A.
    for (int i = 0; i < fb->count; i++) {
        const DumpArray *b = &fb->arrays[i];
        if (!selected(b->name, prefix)) continue;
        const DumpArray *a = dump_find(fa, b->name);
        if (!a) continue;   // listed below
        DumpDiff d = dump_diff(a, b);
        if (!d.shape_ok) continue;   // listed below
        if (b->type == DUMP_TEXT) {
            texts_differ += d.max_abs > 0;
            continue;
        }
        if (!header) {
            printf("%-*s  %-12s  %11s  %-14s  %11s\n", width, "name", "shape", "max abs err",
                   "at", "rel frob");
            header = true;
        }
        bool bad = !(d.max_abs <= tol);
        compared++;
        over += bad;
        printf("%-*s  %-12s  %11.3e  %-14s  %11.3e%s\n", width, b->name,
               format_shape(b, sb, sizeof sb), d.max_abs,
               d.max_abs > 0 ? format_index(b, d.argmax, where, sizeof where) : "", d.rel_frob,
               bad ? "  over tolerance" : "");
    }
    for (int i = 0; i < fb->count; i++) {
        const DumpArray *b = &fb->arrays[i];
        if (!selected(b->name, prefix)) continue;
        const DumpArray *a = dump_find(fa, b->name);
        if (!a) {
            printf("missing from A: %s\n", b->name);
            missing++;
        } else if (!dump_diff(a, b).shape_ok) {
            printf("shape mismatch: %s  A %s %s  B %s %s\n", b->name, type_name(a->type),
                   format_shape(a, sa, sizeof sa), type_name(b->type),
                   format_shape(b, sb, sizeof sb));
            shape_bad++;
        } else if (b->type == DUMP_TEXT && dump_diff(a, b).max_abs > 0) {
            printf("text differs (not counted): %s\n", b->name);
        }
    }
    for (int i = 0; i < fa->count; i++) {
        const DumpArray *a = &fa->arrays[i];
        if (selected(a->name, prefix) && !dump_find(fb, a->name))
            printf("only in A (not counted): %s\n", a->name);
    }
    const DumpArray *la = dump_find(fa, "loss"), *lb = dump_find(fb, "loss");
    if (la && lb && selected("loss", prefix)) diff_loss(la, lb);

    int status = (over || shape_bad || missing) ? 1 : 0;
    printf("%s: %d arrays compared, %d over tolerance, %d shape mismatches, %d missing from A",
           status ? "DIFFER" : "MATCH", compared, over, shape_bad, missing);
    if (texts_differ) printf(", %d texts differ", texts_differ);
    printf("\n");
    dump_free(fa);
    dump_free(fb);
    return status;
}

int main(int argc, char **argv) {
    core_set_program("dumptool");
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        printf("%s", USAGE);
        return 0;
    }
    if (argc < 2) core_usage_error("say what to do: dumptool show FILE, dumptool diff A B; "
                                   "see dumptool --help");
    if (strcmp(argv[1], "show") == 0) return cmd_show(argc, argv);
    if (strcmp(argv[1], "diff") == 0) return cmd_diff(argc, argv);
    core_usage_error("unknown command '%s'; use show or diff (see dumptool --help)", argv[1]);
}
