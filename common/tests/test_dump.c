// test_dump.c: result files: round trips, damaged files, comparisons,
// build/dumptool's exit codes, and the Python reader (scripts/pldump.py).
//
// Run from the repository root. dumptool is found through $DUMPTOOL, else
// build/dumptool.
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core.h"
#include "dump.h"
#include "testutil.h"

// ---- helpers ---------------------------------------------------------------

// A file name of this test process's own, under /tmp.
static const char *tmp_path(char *buf, size_t len, const char *tag) {
    snprintf(buf, len, "/tmp/test_dump_%d_%s", (int)getpid(), tag);
    return buf;
}

static uint8_t *read_bytes(const char *path, size_t *size) {
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)n + 1);
    ck_assert(buf != NULL);
    ck_assert_uint_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *size = (size_t)n;
    return buf;
}

static void write_bytes(const char *path, const uint8_t *buf, size_t n) {
    FILE *f = fopen(path, "wb");
    ck_assert_msg(f != NULL, "cannot create %s", path);
    ck_assert_uint_eq(fwrite(buf, 1, n, f), n);
    ck_assert_int_eq(fclose(f), 0);
}

static void put_u32(uint8_t *buf, size_t at, uint32_t v) {
    for (int i = 0; i < 4; i++) buf[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *buf, size_t at, uint64_t v) {
    for (int i = 0; i < 8; i++) buf[at + (size_t)i] = (uint8_t)(v >> (8 * i));
}

static uint32_t f32_bits(float x) {
    uint32_t u;
    memcpy(&u, &x, 4);
    return u;
}

static uint64_t f64_bits(double x) {
    uint64_t u;
    memcpy(&u, &x, 8);
    return u;
}

static const char *dumptool_path(void) {
    const char *p = getenv("DUMPTOOL");
    return p && *p ? p : "build/dumptool";
}

// ---- the sample file: every dtype, every kind of shape ----------------------

// Values chosen to catch a lost bit: a negative zero, a NaN with a payload,
// infinities, the smallest subnormals, the int64 extremes, non-ASCII text.
static float sample_f32[6];
static const double sample_f64[2 * 3 * 4] = {
    1.0 / 3, -1e300, 5e-324, INFINITY, -INFINITY, 0.1, 0.2, 0.3, 1, 2, 3, 4,
    5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, -0.0};
static const int64_t sample_i64[4] = {INT64_MIN, INT64_MAX, 0, -7};
static const char sample_text[] = "h\xc3\xa9llo\nw\xc3\xb6rld";   // "héllo\nwörld"

static void sample_init(void) {
    uint32_t nan_bits = 0x7fc01234u;   // a quiet NaN with a payload
    float nan;
    memcpy(&nan, &nan_bits, 4);
    float v[6] = {0.1f, -2.5f, 1e-45f, 3.4e38f, -0.0f, nan};
    memcpy(sample_f32, v, sizeof v);
}

static void write_sample(const char *path) {
    sample_init();
    DumpWriter *w = dump_create(path);
    dump_text(w, "meta/program", "test_dump");
    dump_f32(w, "f32", sample_f32, 2, (uint64_t[]){2, 3});
    dump_f64(w, "cube", sample_f64, 3, (uint64_t[]){2, 3, 4});
    dump_i64(w, "i64", sample_i64, 2, (uint64_t[]){2, 2});
    dump_scalar_f64(w, "scalar/f64", 2.718281828459045);
    dump_scalar_i64(w, "scalar/i64", -123456789012345);
    dump_text(w, "text", sample_text);
    dump_text(w, "empty_text", "");
    dump_f32(w, "empty", NULL, 2, (uint64_t[]){0, 4});
    dump_close(w);
}

static void assert_shape(const DumpArray *a, DumpType type, int ndim, const uint64_t *shape,
                         uint64_t count) {
    ck_assert_int_eq(a->type, type);
    ck_assert_int_eq(a->ndim, ndim);
    for (int d = 0; d < ndim; d++) ck_assert_uint_eq(a->shape[d], shape[d]);
    ck_assert_uint_eq(a->count, count);
    ck_assert_ptr_nonnull(a->data);
}

// ---- writing and reading back -----------------------------------------------

START_TEST(test_roundtrip_every_dtype) {
    char path[256];
    tmp_path(path, sizeof path, "sample.dump");
    write_sample(path);
    const char *err = NULL;
    DumpFile *f = dump_read(path, &err);
    ck_assert_msg(f != NULL, "dump_read: %s", err);
    ck_assert_int_eq(f->count, 9);
    const char *order[] = {"meta/program", "f32", "cube", "i64", "scalar/f64", "scalar/i64",
                           "text", "empty_text", "empty"};
    for (int i = 0; i < 9; i++) ck_assert_str_eq(f->arrays[i].name, order[i]);

    const DumpArray *a = dump_find(f, "f32");
    assert_shape(a, DUMP_F32, 2, (uint64_t[]){2, 3}, 6);
    for (int i = 0; i < 6; i++)   // bit for bit: the NaN payload and -0 too
        ck_assert_uint_eq(f32_bits(((float *)a->data)[i]), f32_bits(sample_f32[i]));

    a = dump_find(f, "cube");
    assert_shape(a, DUMP_F64, 3, (uint64_t[]){2, 3, 4}, 24);
    for (int i = 0; i < 24; i++)
        ck_assert_uint_eq(f64_bits(((double *)a->data)[i]), f64_bits(sample_f64[i]));

    a = dump_find(f, "i64");
    assert_shape(a, DUMP_I64, 2, (uint64_t[]){2, 2}, 4);
    for (int i = 0; i < 4; i++) ck_assert(((int64_t *)a->data)[i] == sample_i64[i]);

    a = dump_find(f, "scalar/f64");
    assert_shape(a, DUMP_F64, 0, NULL, 1);
    ck_assert(dump_get(a, 0) == 2.718281828459045);
    a = dump_find(f, "scalar/i64");
    assert_shape(a, DUMP_I64, 0, NULL, 1);
    ck_assert(((int64_t *)a->data)[0] == -123456789012345);
    ck_assert(dump_get(a, 0) == -123456789012345.0);

    a = dump_find(f, "text");
    assert_shape(a, DUMP_TEXT, 1, (uint64_t[]){strlen(sample_text)}, strlen(sample_text));
    ck_assert_str_eq(a->data, sample_text);   // NUL-terminated in memory
    a = dump_find(f, "empty_text");
    assert_shape(a, DUMP_TEXT, 1, (uint64_t[]){0}, 0);
    ck_assert_str_eq(a->data, "");
    a = dump_find(f, "meta/program");
    ck_assert_str_eq(a->data, "test_dump");

    a = dump_find(f, "empty");
    assert_shape(a, DUMP_F32, 2, (uint64_t[]){0, 4}, 0);

    // dump_get converts each type to double.
    ck_assert(dump_get(dump_find(f, "f32"), 1) == -2.5);
    ck_assert(dump_get(dump_find(f, "cube"), 0) == 1.0 / 3);
    ck_assert(dump_get(dump_find(f, "i64"), 3) == -7.0);
    ck_assert_ptr_null(dump_find(f, "no/such/name"));
    dump_free(f);
    unlink(path);
}
END_TEST

// The file's exact bytes for one small record, as docs/dump-format.md shows them.
START_TEST(test_bytes_of_one_record) {
    char path[256];
    tmp_path(path, sizeof path, "bytes.dump");
    DumpWriter *w = dump_create(path);
    dump_f32(w, "loss", (float[]){2.5f, 1.0f}, 1, (uint64_t[]){2});
    dump_close(w);
    const uint8_t expect[] = {'P', 'L', 'D', 'U', 'M', 'P', '1', '\n',
                              4, 0, 0, 0, 'l', 'o', 's', 's',   // name length, name
                              0, 0, 0, 0,                       // dtype f32
                              1, 0, 0, 0,                       // ndim
                              2, 0, 0, 0, 0, 0, 0, 0,           // shape (2)
                              0x00, 0x00, 0x20, 0x40,           // 2.5f
                              0x00, 0x00, 0x80, 0x3f};          // 1.0f
    size_t n;
    uint8_t *got = read_bytes(path, &n);
    ck_assert_uint_eq(n, sizeof expect);
    ck_assert_mem_eq(got, expect, sizeof expect);
    free(got);
    unlink(path);
}
END_TEST

START_TEST(test_null_writer_writes_nothing) {
    DumpWriter *w = dump_create(NULL);
    float x[2] = {1, 2};
    dump_f32(w, "a", x, 1, (uint64_t[]){2});
    dump_f32(w, "a", x, 1, (uint64_t[]){2});   // even a duplicate is ignored
    dump_text(w, "t", "text");
    dump_scalar_f64(w, "s", 1);
    dump_close(w);
    dump_f32(NULL, "a", x, 1, (uint64_t[]){2});   // and a NULL writer too
    dump_scalar_i64(NULL, "b", 1);
    dump_close(NULL);
}
END_TEST

// The file appears under its name only when dump_close has written it whole;
// an old file of the same name is gone as soon as the new one is started.
START_TEST(test_file_appears_whole) {
    char path[256];
    tmp_path(path, sizeof path, "whole.dump");
    write_bytes(path, (const uint8_t *)"old", 3);
    DumpWriter *w = dump_create(path);
    dump_scalar_f64(w, "x", 1);
    ck_assert_int_ne(access(path, F_OK), 0);
    dump_close(w);
    DumpFile *f = dump_read(path, NULL);
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(f->count, 1);
    dump_free(f);
    unlink(path);
}
END_TEST

// Not a regular file: written in place, never renamed over or removed.
START_TEST(test_dev_null_stays) {
    DumpWriter *w = dump_create("/dev/null");
    dump_scalar_f64(w, "x", 1);
    dump_close(w);
    struct stat st;
    ck_assert_int_eq(stat("/dev/null", &st), 0);
    ck_assert(S_ISCHR(st.st_mode));
    ck_assert_int_ne(access("/dev/null.partial", F_OK), 0);
}
END_TEST

// ---- damaged files ------------------------------------------------------------

static void assert_rejected(const char *path, const char *words) {
    const char *err = NULL;
    DumpFile *f = dump_read(path, &err);
    ck_assert_msg(f == NULL, "a damaged file was accepted (expected: %s)", words);
    ck_assert_ptr_nonnull(err);
    ck_assert_msg(strstr(err, words) != NULL, "error '%s' does not say '%s'", err, words);
}

// Where each record of f ends in its file (the first entry: where the magic
// ends), computed from the format; returns how many entries.
static size_t record_ends(const DumpFile *f, size_t *ends) {
    size_t n = 0, at = 8;
    ends[n++] = at;
    for (int i = 0; i < f->count; i++) {
        const DumpArray *a = &f->arrays[i];
        size_t elem = a->type == DUMP_TEXT ? 1 : a->type == DUMP_F32 ? 4 : 8;
        at += 4 + strlen(a->name) + 4 + 4 + 8 * (size_t)a->ndim + a->count * elem;
        ends[n++] = at;
    }
    return n;
}

// Cut the sample at every length. The format has no end marker, so a cut
// exactly between two records leaves a valid dump of the records before it
// (the writer's rename at close is what keeps such files from appearing);
// every other cut must be an error, never a crash.
START_TEST(test_truncated_at_every_length) {
    char path[256], cut[256];
    tmp_path(path, sizeof path, "full.dump");
    tmp_path(cut, sizeof cut, "cut.dump");
    write_sample(path);
    DumpFile *full = dump_read(path, NULL);
    ck_assert_ptr_nonnull(full);
    size_t size;
    uint8_t *bytes = read_bytes(path, &size);

    size_t ends[16];
    size_t n_ends = record_ends(full, ends);
    ck_assert_uint_eq(ends[n_ends - 1], size);

    int rejected = 0;
    for (size_t len = 0; len < size; len++) {
        write_bytes(cut, bytes, len);
        const char *err = NULL;
        DumpFile *f = dump_read(cut, &err);
        int whole_records = -1;
        for (size_t k = 0; k < n_ends; k++)
            if (ends[k] == len) whole_records = (int)k;
        if (whole_records < 0) {
            ck_assert_msg(f == NULL, "a file cut to %zu bytes was accepted", len);
            ck_assert_msg(err && *err, "no error for a file cut to %zu bytes", len);
            rejected++;
        } else {
            ck_assert_msg(f != NULL, "cut at a record boundary (%zu): %s", len, err);
            ck_assert_int_eq(f->count, whole_records);
            for (int i = 0; i < f->count; i++)
                ck_assert_str_eq(f->arrays[i].name, full->arrays[i].name);
            dump_free(f);
        }
    }
    ck_assert_int_eq(rejected, (int)size - (int)(n_ends - 1));   // all but the boundaries below size
    free(bytes);
    dump_free(full);
    unlink(path);
    unlink(cut);
}
END_TEST

// Random damage: flipped bytes anywhere, garbage after the magic. Whatever
// the reader decides, it must decide it without crashing or reading past the
// file (run under -fsanitize=address to see the second).
START_TEST(test_random_damage_never_crashes) {
    char path[256], bad[256];
    tmp_path(path, sizeof path, "fuzz_src.dump");
    tmp_path(bad, sizeof bad, "fuzz.dump");
    write_sample(path);
    size_t size;
    uint8_t *bytes = read_bytes(path, &size);
    uint8_t *copy = malloc(size);
    uint64_t state = 12345;   // a fixed xorshift stream: the same cases every run
    int accepted = 0, rejected = 0;
    for (int trial = 0; trial < 600; trial++) {
        memcpy(copy, bytes, size);
        int flips = 1 + trial % 4;
        for (int k = 0; k < flips; k++) {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            size_t at = trial < 400 ? (size_t)(state % size) : 8 + (size_t)(state % (size - 8));
            copy[at] = (uint8_t)(state >> 32);
        }
        write_bytes(bad, copy, size);
        const char *err = NULL;
        DumpFile *f = dump_read(bad, &err);
        if (f) {
            accepted++;   // e.g. a flip inside the data: still a well-formed file
            dump_free(f);
        } else {
            ck_assert(err && *err);
            rejected++;
        }
    }
    ck_assert_int_gt(rejected, 0);
    ck_assert_int_gt(accepted, 0);
    free(copy);
    free(bytes);
    unlink(path);
    unlink(bad);
}
END_TEST

// One record, "x" f32 (3): name length at byte 8, name at 12, dtype at 13,
// ndim at 17, the dimension at 21, data from 29 to 41.
static uint8_t *one_record(const char *path, size_t *size) {
    DumpWriter *w = dump_create(path);
    dump_f32(w, "x", (float[]){1, 2, 3}, 1, (uint64_t[]){3});
    dump_close(w);
    uint8_t *b = read_bytes(path, size);
    ck_assert_uint_eq(*size, 41);
    return b;
}

START_TEST(test_error_sentences) {
    char path[256];
    tmp_path(path, sizeof path, "bad.dump");
    size_t n;
    uint8_t *b = one_record(path, &n);
    write_bytes(path, b, 33);
    const char *err;
    ck_assert_ptr_null(dump_read(path, &err));
    ck_assert_str_eq(err, "truncated: array 'x' needs 12 bytes, 4 remain");

    uint8_t bad[41];
    memcpy(bad, b, 41);
    bad[0] = 'X';
    write_bytes(path, bad, 41);
    assert_rejected(path, "not a dump file (bad magic)");
    write_bytes(path, (const uint8_t *)"hello", 5);
    assert_rejected(path, "bad magic");
    write_bytes(path, (const uint8_t *)"", 0);
    assert_rejected(path, "bad magic");

    memcpy(bad, b, 41);
    put_u32(bad, 8, 0xffffffffu);   // absurd name length
    write_bytes(path, bad, 41);
    assert_rejected(path, "name length");
    put_u32(bad, 8, 5000);
    write_bytes(path, bad, 41);
    assert_rejected(path, "name length");
    put_u32(bad, 8, 0);
    write_bytes(path, bad, 41);
    assert_rejected(path, "name length");

    memcpy(bad, b, 41);
    put_u32(bad, 13, 7);   // unknown dtype
    write_bytes(path, bad, 41);
    assert_rejected(path, "unknown dtype 7");

    memcpy(bad, b, 41);
    put_u32(bad, 17, 1000);   // absurd ndim
    write_bytes(path, bad, 41);
    assert_rejected(path, "ndim 1000");
    put_u32(bad, 17, 9);
    write_bytes(path, bad, 41);
    assert_rejected(path, "ndim 9");

    memcpy(bad, b, 41);
    put_u64(bad, 21, UINT64_MAX / 2);   // a dimension far beyond the file
    write_bytes(path, bad, 41);
    assert_rejected(path, "truncated: array 'x' needs more than 2^64 bytes");
    put_u64(bad, 21, 1000000);
    write_bytes(path, bad, 41);
    assert_rejected(path, "truncated: array 'x' needs 4000000 bytes, 12 remain");

    memcpy(bad, b, 41);
    bad[12] = 0;   // a NUL inside the name
    write_bytes(path, bad, 41);
    assert_rejected(path, "NUL");

    // Three dimensions of 2^32: their product overflows 64 bits.
    uint8_t big[8 + 4 + 1 + 4 + 4 + 24];
    memcpy(big, "PLDUMP1\n", 8);
    put_u32(big, 8, 1);
    big[12] = 'y';
    put_u32(big, 13, 0);
    put_u32(big, 17, 3);
    for (int d = 0; d < 3; d++) put_u64(big, 21 + 8 * (size_t)d, 1ull << 32);
    write_bytes(path, big, sizeof big);
    assert_rejected(path, "overflows");
    put_u64(big, 37, 0);   // ... unless one of them is zero: then it is empty
    write_bytes(path, big, sizeof big);
    DumpFile *f = dump_read(path, &err);
    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_uint_eq(f->arrays[0].count, 0);
    dump_free(f);

    // The same name twice (written by hand: the writer refuses to).
    uint8_t twice[82];
    memcpy(twice, b, 41);
    memcpy(twice + 41, b + 8, 33);
    write_bytes(path, twice, 74);
    assert_rejected(path, "the name 'x' appears twice");

    unlink(path);
    assert_rejected("/tmp/no/such/dir/file.dump", "cannot open it");
    free(b);
}
END_TEST

// ---- what the writer refuses (each ends the process with EXIT_CHECK) -------

// A real writer (into /dev/null, so that the process's exit leaves no file).
static DumpWriter *writer_for_exit_test(void) {
    // The refusal prints a line on stderr; the expected one need not show.
    if (!freopen("/dev/null", "w", stderr)) { /* keep the real stderr */ }
    return dump_create("/dev/null");
}

START_TEST(test_refuses_duplicate_name) {
    DumpWriter *w = writer_for_exit_test();
    dump_scalar_f64(w, "loss", 1);
    dump_scalar_f64(w, "loss", 2);
}
END_TEST

START_TEST(test_refuses_empty_name) {
    DumpWriter *w = writer_for_exit_test();
    dump_scalar_f64(w, "", 1);
}
END_TEST

START_TEST(test_refuses_nine_dimensions) {
    DumpWriter *w = writer_for_exit_test();
    uint64_t shape[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    float x = 0;
    dump_f32(w, "x", &x, 9, shape);
}
END_TEST

START_TEST(test_refuses_missing_directory) {
    if (!freopen("/dev/null", "w", stderr)) { /* keep the real stderr */ }
    dump_create("/tmp/no/such/dir/run.dump");
}
END_TEST

// /dev/full accepts the open and fails every write with "No space left".
START_TEST(test_full_disk) {
    if (!freopen("/dev/null", "w", stderr)) { /* keep the real stderr */ }
    DumpWriter *w = dump_create("/dev/full");
    dump_scalar_f64(w, "x", 1);
    dump_close(w);   // the buffered bytes fail here
}
END_TEST

// ---- comparing ----------------------------------------------------------------

static DumpArray array_f64(double *v, int ndim, const uint64_t *shape) {
    DumpArray a = {.name = "t", .type = DUMP_F64, .ndim = ndim, .count = 1, .data = v};
    for (int d = 0; d < ndim; d++) {
        a.shape[d] = shape[d];
        a.count *= shape[d];
    }
    return a;
}

START_TEST(test_diff_known_values) {
    // a - b = (0, -0.5, 0, 2): max 2 at 3; ||a-b|| = sqrt(4.25); ||b|| = sqrt(20.25) = 4.5.
    double va[4] = {1, 2, 3, 4}, vb[4] = {1, 2.5, 3, 2};
    DumpArray a = array_f64(va, 1, (uint64_t[]){4}), b = array_f64(vb, 1, (uint64_t[]){4});
    DumpDiff d = dump_diff(&a, &b);
    ck_assert(d.shape_ok);
    ck_assert_double_eq(d.max_abs, 2.0);
    ck_assert_uint_eq(d.argmax, 3);
    ck_assert_double_eq_tol(d.rel_frob, sqrt(4.25) / 4.5, 1e-15);

    // f32 against f64 of the same shape compares values.
    float fa[4] = {1, 2, 3, 4};
    DumpArray af = {.name = "t", .type = DUMP_F32, .ndim = 1, .shape = {4}, .count = 4,
                    .data = fa};
    d = dump_diff(&af, &b);
    ck_assert(d.shape_ok);
    ck_assert_double_eq(d.max_abs, 2.0);

    // A zero reference: the relative error is the absolute norm, ||a|| = sqrt(30).
    double vz[4] = {0, 0, 0, 0};
    DumpArray z = array_f64(vz, 1, (uint64_t[]){4});
    d = dump_diff(&a, &z);
    ck_assert_double_eq(d.max_abs, 4.0);
    ck_assert_uint_eq(d.argmax, 3);
    ck_assert_double_eq_tol(d.rel_frob, sqrt(30.0), 1e-14);

    // Identical arrays: exactly zero, reached "at" the first element.
    d = dump_diff(&a, &a);
    ck_assert(d.shape_ok);
    ck_assert_double_eq(d.max_abs, 0);
    ck_assert_double_eq(d.rel_frob, 0);
    ck_assert_uint_eq(d.argmax, 0);

    // A tie: the first place where the maximum is reached.
    double vt[4] = {2, 2, 3, 5};   // a - vt = (-1, 0, 0, -1)
    DumpArray t = array_f64(vt, 1, (uint64_t[]){4});
    d = dump_diff(&a, &t);
    ck_assert_double_eq(d.max_abs, 1.0);
    ck_assert_uint_eq(d.argmax, 0);

    // Shapes: (2, 2) is not (4), and text is not numbers.
    DumpArray sq = array_f64(va, 2, (uint64_t[]){2, 2});
    ck_assert(!dump_diff(&sq, &b).shape_ok);
    DumpArray text = {.name = "t", .type = DUMP_TEXT, .ndim = 1, .shape = {4}, .count = 4,
                      .data = "abcd"};
    d = dump_diff(&text, &b);
    ck_assert(!d.shape_ok);
    ck_assert(isinf(d.max_abs));

    // Negative control: a NaN where the reference has a number is never close.
    double vn[4] = {1, NAN, 3, 2};
    DumpArray n = array_f64(vn, 1, (uint64_t[]){4});
    d = dump_diff(&n, &b);
    ck_assert(d.shape_ok);
    ck_assert(isinf(d.max_abs));
    ck_assert_uint_eq(d.argmax, 1);
    ck_assert(!(d.rel_frob <= 1e30));
}
END_TEST

// ---- dumptool ----------------------------------------------------------------------

typedef struct {
    double w_delta;      // added to param/final/w[1][1]
    float loss_delta;    // added to loss[3]
    bool drop_b;         // leave param/final/b out
    bool b_as_column;    // write param/final/b as (3, 1)
    bool extra;          // add param/final/extra
} RunOptions;

static const char *write_run(const char *tag, RunOptions o) {
    static char path[4][256];
    static int next = 0;
    char *p = path[next++ % 4];
    tmp_path(p, 256, tag);
    double w[6] = {0.5, -1, 2, 3, 4, 5};
    w[4] += o.w_delta;
    float b[3] = {0.25f, 0.5f, 0.75f};
    float loss[5] = {5.5f, 4.25f, 3.5f, 3.0f, 2.75f};
    loss[3] += o.loss_delta;
    DumpWriter *dw = dump_create(p);
    dump_text(dw, "meta/program", "test");
    dump_f32(dw, "loss", loss, 1, (uint64_t[]){5});
    dump_f64(dw, "param/final/w", w, 2, (uint64_t[]){2, 3});
    if (!o.drop_b) dump_f32(dw, "param/final/b", b, o.b_as_column ? 2 : 1, (uint64_t[]){3, 1});
    if (o.extra) dump_scalar_f64(dw, "param/final/extra", 1);
    dump_close(dw);
    return p;
}

// Run dumptool with arguments; return its exit status, output in out.
static int dumptool(char *out, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int dumptool(char *out, size_t cap, const char *fmt, ...) {
    const char *tool = dumptool_path();
    ck_assert_msg(access(tool, X_OK) == 0,
                  "dumptool not found at %s; run make, or set DUMPTOOL to its path", tool);
    char args[2048], cmd[3072];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "%s %s", tool, args);
    return test_run_command(cmd, out, cap);
}

START_TEST(test_dumptool_identical) {
    char out[16384];
    const char *a = write_run("a.dump", (RunOptions){0});
    const char *b = write_run("b.dump", (RunOptions){0});
    int rc = dumptool(out, sizeof out, "diff %s %s --tol 0", a, b);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "MATCH: 3 arrays compared"), "%s", out);
    ck_assert_msg(strstr(out, "loss per step: largest |loss_a - loss_b| = 0"), "%s", out);
    unlink(a);
    unlink(b);
}
END_TEST

START_TEST(test_dumptool_tolerance) {
    char out[16384];
    const char *a = write_run("a.dump", (RunOptions){.w_delta = 1e-3});
    const char *b = write_run("b.dump", (RunOptions){0});
    int rc = dumptool(out, sizeof out, "diff %s %s --tol 1e-4", a, b);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "param/final/w"), "%s", out);
    ck_assert_msg(strstr(out, "[1, 1]"), "the place of the error is not shown:\n%s", out);
    ck_assert_msg(strstr(out, "over tolerance"), "%s", out);
    rc = dumptool(out, sizeof out, "diff %s %s --tol 1e-2", a, b);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "diff %s %s", a, b);   // no tolerance: exact, so they differ
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "tolerance 0 (exact"), "the default tolerance is not stated:\n%s", out);
    // --prefix leaves the changed array out.
    rc = dumptool(out, sizeof out, "diff --prefix param/final/b %s %s --tol 1e-4", a, b);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(!strstr(out, "param/final/w"), "%s", out);
    unlink(a);
    unlink(b);
}
END_TEST

START_TEST(test_dumptool_loss_line) {
    char out[16384];
    const char *a = write_run("a.dump", (RunOptions){.loss_delta = 0.5f});
    const char *b = write_run("b.dump", (RunOptions){0});
    int rc = dumptool(out, sizeof out, "diff %s %s --tol 0.1", a, b);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "largest |loss_a - loss_b| = 0.5 at loss[3]"), "%s", out);
    unlink(a);
    unlink(b);
}
END_TEST

START_TEST(test_dumptool_missing_and_shapes) {
    char out[16384];
    const char *a = write_run("a.dump", (RunOptions){.drop_b = true});
    const char *b = write_run("b.dump", (RunOptions){0});
    int rc = dumptool(out, sizeof out, "diff %s %s", a, b);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "missing from A: param/final/b"), "%s", out);

    // An array only in A is listed but is no failure.
    a = write_run("a.dump", (RunOptions){.extra = true});
    rc = dumptool(out, sizeof out, "diff %s %s --tol 0", a, b);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "only in A (not counted): param/final/extra"), "%s", out);

    a = write_run("a.dump", (RunOptions){.b_as_column = true});
    rc = dumptool(out, sizeof out, "diff %s %s", a, b);
    ck_assert_msg(rc == 1, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "shape mismatch: param/final/b  A f32 (3, 1)  B f32 (3)"), "%s",
                  out);
    unlink(a);
    unlink(b);
}
END_TEST

START_TEST(test_dumptool_usage_and_bad_files) {
    char out[16384], junk[256];
    const char *b = write_run("b.dump", (RunOptions){0});
    tmp_path(junk, sizeof junk, "junk.txt");
    write_bytes(junk, (const uint8_t *)"not a dump at all\n", 18);
    int rc = dumptool(out, sizeof out, "diff %s %s", junk, b);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "bad magic"), "%s", out);
    rc = dumptool(out, sizeof out, "diff %s /tmp/no/such/file.dump", b);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "diff %s", b);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "diff %s %s --tol abc", b, b);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "diff %s %s --frobnicate", b, b);
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "%s", "");
    ck_assert_msg(rc == 2, "exit %d:\n%s", rc, out);
    rc = dumptool(out, sizeof out, "--help");
    ck_assert_msg(rc == 0 && strstr(out, "usage: dumptool"), "exit %d:\n%s", rc, out);
    unlink(b);
    unlink(junk);
}
END_TEST

START_TEST(test_dumptool_show) {
    char out[16384], path[256];
    tmp_path(path, sizeof path, "show.dump");
    write_sample(path);
    int rc = dumptool(out, sizeof out, "show %s", path);
    ck_assert_msg(rc == 0, "exit %d:\n%s", rc, out);
    ck_assert_msg(strstr(out, "9 arrays"), "%s", out);
    ck_assert_msg(strstr(out, "meta/program  text  \"test_dump\""), "%s", out);
    ck_assert_msg(strstr(out, "    w\xc3\xb6rld"), "multi-line text not shown whole:\n%s", out);
    ck_assert_msg(strstr(out, "2.718281828"), "%s", out);
    ck_assert_msg(strstr(out, "-123456789012345"), "%s", out);
    ck_assert_msg(strstr(out, "non-finite 1"), "%s", out);
    ck_assert_msg(strstr(out, "[-9223372036854775808, 9223372036854775807, 0, -7]"), "%s", out);
    unlink(path);
}
END_TEST

// ---- Python (scripts/pldump.py) ------------------------------------------------------

// Prints each array of a dump as "name dtype ndim dims... values...", floats
// by repr (the shortest text that reads back to the same double).
static const char PY_LIST[] =
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "import pldump\n"
    "for name, v in pldump.read(sys.argv[1]).items():\n"
    "    if isinstance(v, str):\n"
    "        print(name, 'text', v.encode('utf-8').hex() or '-')\n"
    "    else:\n"
    "        print(name, v.dtype, v.ndim, *v.shape, *[repr(x) for x in v.ravel().tolist()])\n";

// Writes the arrays test_python_writes_c_reads expects.
static const char PY_WRITE[] =
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "import numpy as np, pldump\n"
    "pldump.write(sys.argv[1], {\n"
    "    'meta/program': 'py',\n"
    "    'f32': (np.arange(12).reshape(3, 4) / 8 - 1).astype(np.float32),\n"
    "    'f64': np.array([1 / 3, -1e300, 5e-324]),\n"
    "    'i64': np.array([-2**63, 2**63 - 1, 0, -7], dtype=np.int64).reshape(2, 2),\n"
    "    'i32': np.arange(5, dtype=np.int32),\n"
    "    'cube': np.arange(24, dtype=np.float64).reshape(2, 3, 4) * 0.5,\n"
    "    'scalar': 2.5,\n"
    "    'count': 42,\n"
    "    'text': 'h\\u00e9llo\\nw\\u00f6rld',\n"
    "    'empty': np.zeros((0, 4), np.float32),\n"
    "})\n"
    "print('written')\n";

// Copies a dump through Python: read it, write it again.
static const char PY_COPY[] =
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "import pldump\n"
    "pldump.write(sys.argv[2], pldump.read(sys.argv[1]))\n";

// Rejects damaged files as the C reader does: prints the error.
static const char PY_REJECT[] =
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "import pldump\n"
    "try:\n"
    "    pldump.read(sys.argv[1])\n"
    "    print('accepted')\n"
    "except pldump.DumpError as e:\n"
    "    print('rejected:', e)\n";

// Cuts a dump at every length; prints, per length, how many records it holds
// or "rejected".
static const char PY_CUTS[] =
    "import sys\n"
    "sys.path.insert(0, 'scripts')\n"
    "import pldump\n"
    "data = open(sys.argv[1], 'rb').read()\n"
    "for n in range(len(data)):\n"
    "    try:\n"
    "        print(n, len(pldump.parse(data[:n])))\n"
    "    except pldump.DumpError:\n"
    "        print(n, 'rejected')\n";

static int run_python(const char *script, const char *tag, const char *args, char *out,
                      size_t cap) {
    char py[256], cmd[1024];
    tmp_path(py, sizeof py, tag);
    write_bytes(py, (const uint8_t *)script, strlen(script));
    snprintf(cmd, sizeof cmd, "/usr/bin/python3 %s %s", py, args);
    int rc = test_run_command(cmd, out, cap);
    unlink(py);
    return rc;
}

static int hex_digit(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

START_TEST(test_c_writes_python_reads) {
    char path[256], out[16384];
    tmp_path(path, sizeof path, "for_python.dump");
    write_sample(path);
    int rc = run_python(PY_LIST, "list.py", path, out, sizeof out);
    ck_assert_msg(rc == 0, "python exit %d:\n%s", rc, out);

    // Every line must match what the C reader (checked above) finds.
    DumpFile *f = dump_read(path, NULL);
    ck_assert_ptr_nonnull(f);
    static const char *dtypes[] = {"float32", "float64", "int64", "text"};
    int lines = 0;
    char *save = NULL;
    for (char *line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        ck_assert_msg(lines < f->count, "python printed an extra line: %s", line);
        const DumpArray *a = &f->arrays[lines++];
        char *tsave = NULL;
        char *tok = strtok_r(line, " ", &tsave);
        ck_assert_str_eq(tok, a->name);
        ck_assert_str_eq(strtok_r(NULL, " ", &tsave), dtypes[a->type]);
        if (a->type == DUMP_TEXT) {
            tok = strtok_r(NULL, " ", &tsave);
            const char *text = a->data;
            if (a->count == 0) {
                ck_assert_str_eq(tok, "-");
                continue;
            }
            ck_assert_uint_eq(strlen(tok), 2 * a->count);
            for (uint64_t i = 0; i < a->count; i++)
                ck_assert_int_eq(hex_digit(tok[2 * i]) * 16 + hex_digit(tok[2 * i + 1]),
                                 (unsigned char)text[i]);
            continue;
        }
        ck_assert_int_eq(atoi(strtok_r(NULL, " ", &tsave)), a->ndim);
        for (int d = 0; d < a->ndim; d++)
            ck_assert_uint_eq(strtoull(strtok_r(NULL, " ", &tsave), NULL, 10), a->shape[d]);
        for (uint64_t i = 0; i < a->count; i++) {
            tok = strtok_r(NULL, " ", &tsave);
            ck_assert_msg(tok != NULL, "python printed too few values for %s", a->name);
            if (a->type == DUMP_I64) {
                ck_assert(strtoll(tok, NULL, 10) == ((int64_t *)a->data)[i]);
            } else {
                double want = dump_get(a, i), got = strtod(tok, NULL);
                ck_assert_msg(f64_bits(got) == f64_bits(want) || (isnan(got) && isnan(want)),
                              "%s[%" PRIu64 "]: python %s, C %.17g", a->name, i, tok, want);
            }
        }
        ck_assert_ptr_null(strtok_r(NULL, " ", &tsave));
    }
    ck_assert_int_eq(lines, f->count);
    dump_free(f);
    unlink(path);
}
END_TEST

START_TEST(test_python_writes_c_reads) {
    char path[256], out[4096];
    tmp_path(path, sizeof path, "from_python.dump");
    int rc = run_python(PY_WRITE, "write.py", path, out, sizeof out);
    ck_assert_msg(rc == 0, "python exit %d:\n%s", rc, out);
    const char *err;
    DumpFile *f = dump_read(path, &err);
    ck_assert_msg(f != NULL, "%s", err);
    ck_assert_int_eq(f->count, 10);

    ck_assert_str_eq(dump_find(f, "meta/program")->data, "py");
    const DumpArray *a = dump_find(f, "f32");
    assert_shape(a, DUMP_F32, 2, (uint64_t[]){3, 4}, 12);
    for (int i = 0; i < 12; i++) ck_assert(((float *)a->data)[i] == (float)(i / 8.0 - 1));
    a = dump_find(f, "f64");
    assert_shape(a, DUMP_F64, 1, (uint64_t[]){3}, 3);
    ck_assert(dump_get(a, 0) == 1.0 / 3);
    ck_assert(dump_get(a, 1) == -1e300);
    ck_assert(dump_get(a, 2) == 5e-324);
    a = dump_find(f, "i64");
    assert_shape(a, DUMP_I64, 2, (uint64_t[]){2, 2}, 4);
    for (int i = 0; i < 4; i++) ck_assert(((int64_t *)a->data)[i] == sample_i64[i]);
    a = dump_find(f, "i32");   // integers of every width are stored as i64
    assert_shape(a, DUMP_I64, 1, (uint64_t[]){5}, 5);
    for (int i = 0; i < 5; i++) ck_assert(((int64_t *)a->data)[i] == i);
    a = dump_find(f, "cube");
    assert_shape(a, DUMP_F64, 3, (uint64_t[]){2, 3, 4}, 24);
    for (int i = 0; i < 24; i++) ck_assert(dump_get(a, (uint64_t)i) == 0.5 * i);
    a = dump_find(f, "scalar");
    assert_shape(a, DUMP_F64, 0, NULL, 1);
    ck_assert(dump_get(a, 0) == 2.5);
    a = dump_find(f, "count");
    assert_shape(a, DUMP_I64, 0, NULL, 1);
    ck_assert(((int64_t *)a->data)[0] == 42);
    ck_assert_str_eq(dump_find(f, "text")->data, sample_text);
    assert_shape(dump_find(f, "empty"), DUMP_F32, 2, (uint64_t[]){0, 4}, 0);
    dump_free(f);
    unlink(path);
}
END_TEST

// Both writers make the same bytes: C's file read and rewritten by Python is identical.
START_TEST(test_python_copy_is_identical) {
    char a[256], b[256], args[600], out[4096];
    tmp_path(a, sizeof a, "c_written.dump");
    tmp_path(b, sizeof b, "py_copied.dump");
    write_sample(a);
    snprintf(args, sizeof args, "%s %s", a, b);
    int rc = run_python(PY_COPY, "copy.py", args, out, sizeof out);
    ck_assert_msg(rc == 0, "python exit %d:\n%s", rc, out);
    size_t na, nb;
    uint8_t *ba = read_bytes(a, &na), *bb = read_bytes(b, &nb);
    ck_assert_uint_eq(na, nb);
    ck_assert_mem_eq(ba, bb, na);
    free(ba);
    free(bb);
    unlink(a);
    unlink(b);
}
END_TEST

START_TEST(test_python_rejects_damage) {
    char path[256], out[4096];
    tmp_path(path, sizeof path, "py_bad.dump");
    size_t n;
    uint8_t *b = one_record(path, &n);
    struct {
        size_t at;
        uint32_t value;
        const char *words;
    } cases[] = {{8, 0xffffffffu, "name length"}, {13, 7, "unknown dtype 7"},
                 {17, 1000, "ndim 1000"}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint8_t bad[41];
        memcpy(bad, b, 41);
        put_u32(bad, cases[c].at, cases[c].value);
        write_bytes(path, bad, 41);
        int rc = run_python(PY_REJECT, "reject.py", path, out, sizeof out);
        ck_assert_msg(rc == 0 && strstr(out, "rejected:") && strstr(out, cases[c].words),
                      "python on a damaged file (%s): exit %d:\n%s", cases[c].words, rc, out);
    }
    write_bytes(path, b, 33);
    int rc = run_python(PY_REJECT, "reject.py", path, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "truncated: array 'x' needs 12 bytes, 4 remain"),
                  "exit %d:\n%s", rc, out);
    write_bytes(path, b, 41);
    rc = run_python(PY_REJECT, "reject.py", path, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "accepted"), "exit %d:\n%s", rc, out);
    free(b);

    // Every cut of the sample, as test_truncated_at_every_length does in C.
    write_sample(path);
    DumpFile *full = dump_read(path, NULL);
    ck_assert_ptr_nonnull(full);
    size_t ends[16];
    size_t n_ends = record_ends(full, ends);
    static char cuts[65536];
    rc = run_python(PY_CUTS, "cuts.py", path, cuts, sizeof cuts);
    ck_assert_msg(rc == 0, "exit %d:\n%.2000s", rc, cuts);
    char *save = NULL;
    size_t len = 0;
    for (char *line = strtok_r(cuts, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char expect[64];
        snprintf(expect, sizeof expect, "%zu rejected", len);
        for (size_t k = 0; k < n_ends; k++)
            if (ends[k] == len) snprintf(expect, sizeof expect, "%zu %zu", len, k);
        ck_assert_str_eq(line, expect);
        len++;
    }
    ck_assert_uint_eq(len, ends[n_ends - 1]);
    dump_free(full);
    unlink(path);
}
END_TEST

// ---- the suite -------------------------------------------------------------------

static Suite *dump_suite(void) {
    Suite *s = suite_create("dump");

    TCase *tc = tcase_create("files");
    tcase_add_test(tc, test_roundtrip_every_dtype);
    tcase_add_test(tc, test_bytes_of_one_record);
    tcase_add_test(tc, test_null_writer_writes_nothing);
    tcase_add_test(tc, test_file_appears_whole);
    tcase_add_test(tc, test_dev_null_stays);
    tcase_add_test(tc, test_truncated_at_every_length);
    tcase_add_test(tc, test_error_sentences);
    tcase_add_test(tc, test_random_damage_never_crashes);
    tcase_add_exit_test(tc, test_refuses_duplicate_name, EXIT_CHECK);
    tcase_add_exit_test(tc, test_refuses_empty_name, EXIT_CHECK);
    tcase_add_exit_test(tc, test_refuses_nine_dimensions, EXIT_CHECK);
    tcase_add_exit_test(tc, test_refuses_missing_directory, EXIT_CHECK);
    if (access("/dev/full", W_OK) == 0)
        tcase_add_exit_test(tc, test_full_disk, EXIT_CHECK);
    else
        printf("SKIP full-disk test: /dev/full is not writable here\n");
    tcase_add_test(tc, test_diff_known_values);
    suite_add_tcase(s, tc);

    tc = tcase_create("dumptool");
    tcase_add_test(tc, test_dumptool_identical);
    tcase_add_test(tc, test_dumptool_tolerance);
    tcase_add_test(tc, test_dumptool_loss_line);
    tcase_add_test(tc, test_dumptool_missing_and_shapes);
    tcase_add_test(tc, test_dumptool_usage_and_bad_files);
    tcase_add_test(tc, test_dumptool_show);
    suite_add_tcase(s, tc);

    // The Python side needs /usr/bin/python3 with NumPy; without them these
    // tests are not registered (and not counted as passed), and say so.
    char out[1024];
    if (test_run_command("/usr/bin/python3 -c 'import numpy'", out, sizeof out) == 0) {
        tc = tcase_create("python");
        tcase_add_test(tc, test_c_writes_python_reads);
        tcase_add_test(tc, test_python_writes_c_reads);
        tcase_add_test(tc, test_python_copy_is_identical);
        tcase_add_test(tc, test_python_rejects_damage);
        suite_add_tcase(s, tc);
    } else {
        printf("SKIP python cross-check: numpy not found for /usr/bin/python3 "
               "(install python3-numpy); 4 tests not run\n");
    }
    return s;
}

int main(void) { return test_run_suite(dump_suite()); }
