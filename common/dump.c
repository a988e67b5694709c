// dump.c: result files (the format is described in dump.h).
//
// Integers and floats are written byte by byte in little-endian order, so a
// file means the same on every host. The writer builds the file unnamed (an
// O_TMPFILE in its directory) and gives it its name at dump_close: a file
// found under its real name is always whole, and a run killed while it
// writes, even by SIGKILL, leaves nothing behind. (Where the file system
// cannot make an unnamed file, a temporary name, path.partial, removed at
// any exit the process sees: dump_remove_partial.) (The format has
// no end marker, so a file cut exactly between two records would otherwise
// read as a valid dump with arrays missing; the reader catches every other cut.)
//
// Nothing here calls strdup or other functions that allocate inside libc:
// programs link malloc/free through a counting wrapper (see mem.h), and a
// block libc allocated must not be freed through it.
#include "dump.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "args.h"
#include "comm.h"
#include "core.h"
#include "mem.h"
#include "ops.h"

static const uint8_t DUMP_MAGIC[8] = {'P', 'L', 'D', 'U', 'M', 'P', '1', '\n'};
enum { DUMP_MAX_NAME = 4095 };   // bytes; longer lengths mean a damaged file

static size_t dump_type_size(DumpType t) {
    switch (t) {
    case DUMP_F32: return 4;
    case DUMP_F64: return 8;
    case DUMP_I64: return 8;
    case DUMP_TEXT: return 1;
    }
    return 0;
}

static char *dump_copy_string(const char *s, size_t len) {
    char *copy = malloc(len + 1);
    CHECK(copy, "out of memory copying a %zu-byte name", len);
    memcpy(copy, s, len);
    copy[len] = 0;
    return copy;
}

// The number of elements of a shape; false when the product does not fit in
// 64 bits. A zero dimension makes the product zero whatever the others are.
static bool dump_shape_count(int ndim, const uint64_t *shape, uint64_t *count) {
    for (int d = 0; d < ndim; d++)
        if (shape[d] == 0) {
            *count = 0;
            return true;
        }
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++) {
        if (n > UINT64_MAX / shape[d]) return false;
        n *= shape[d];
    }
    *count = n;
    return true;
}

// ---- writing ---------------------------------------------------------------

struct DumpWriter {
    FILE *f;            // NULL: the writer that writes nothing
    char *path;         // the file's real name
    char *open_path;    // where the bytes go until dump_close (path.partial, or path)
    bool rename_at_close;
    bool unnamed;       // the bytes are in an O_TMPFILE, linked as open_path at dump_close
    char **names;       // every name written so far, to refuse duplicates
    int n_names, cap_names;
};

// The named .partial of the writer that has one open (the fallback), for
// dump_remove_partial.
static char g_partial[4096 + 16];

void dump_remove_partial(void) {
    if (g_partial[0]) unlink(g_partial);
}

// An unnamed file in the directory of `path` (which must be where it is
// named at the end: a link cannot cross file systems), open for writing; NULL
// where the file system cannot make one, or /proc (how it is named at the
// end) is not there.
static FILE *open_unnamed(const char *path, size_t len) {
    char *dir = dump_copy_string(path, len), *slash = strrchr(dir, '/');
    if (slash == dir) slash[1] = 0;   // "/run.bin": the root
    else if (slash) *slash = 0;
    int fd = open(slash ? dir : ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
    free(dir);
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    if (fd >= 0 && access(self, F_OK) != 0) close(fd), fd = -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f && fd >= 0) close(fd);
    return f;
}

// The unnamed file named path.partial (replacing a stale one), then renamed
// to path by dump_close. Through /proc: linkat of the descriptor itself needs
// a privilege.
static void name_unnamed(DumpWriter *w) {
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fileno(w->f));
    CHECK(unlink(w->open_path) == 0 || errno == ENOENT, "cannot replace %s: %s; choose another path", w->open_path,
          strerror(errno));
    CHECK(linkat(AT_FDCWD, self, AT_FDCWD, w->open_path, AT_SYMLINK_FOLLOW) == 0, "cannot write the dump file %s: %s",
          w->open_path, strerror(errno));
}

// The writer dump_preopen made, for the dump_create of its path.
static DumpWriter *g_preopened;

static DumpWriter *create_writer(const char *path, bool unnamed_ok);

void dump_preopen(const char *path) {
    CHECK(!g_preopened && path, "dump_preopen: one dump, with a path");
    // Named (path.partial, renamed at close): the sandbox that follows
    // refuses the link that names an unnamed file, and allows the rename.
    g_preopened = create_writer(path, false);
}

DumpWriter *dump_create(const char *path) {
    if (g_preopened && path && strcmp(path, g_preopened->path) == 0) {
        DumpWriter *w = g_preopened;
        g_preopened = NULL;
        return w;
    }
    return create_writer(path, true);
}

// A writer of `path`; a regular file written unnamed where `unnamed_ok` and
// the file system can, else under path.partial.
static DumpWriter *create_writer(const char *path, bool unnamed_ok) {
    DumpWriter *w = calloc(1, sizeof *w);
    CHECK(w, "out of memory creating a dump writer");
    if (!path) return w;
    CHECK(path[0], "the dump file name is empty; pass a path such as --dump run.dump");
    size_t len = strlen(path);
    w->path = dump_copy_string(path, len);

    // A regular file is written under a temporary name and renamed at close,
    // so neither an old file nor half of a new one is mistaken for this run's
    // result. Anything else (/dev/null, a pipe) is written in place.
    struct stat st;
    w->rename_at_close = !(stat(path, &st) == 0 && !S_ISREG(st.st_mode));
    if (w->rename_at_close) {
        w->open_path = malloc(len + sizeof ".partial");
        CHECK(w->open_path, "out of memory creating a dump writer");
        memcpy(w->open_path, path, len);
        memcpy(w->open_path + len, ".partial", sizeof ".partial");
        CHECK(unlink(path) == 0 || errno == ENOENT,
              "cannot replace the dump file %s: %s; choose another path", path, strerror(errno));
        w->f = unnamed_ok ? open_unnamed(path, len) : NULL;
        w->unnamed = w->f != NULL;
        if (!w->unnamed) snprintf(g_partial, sizeof g_partial, "%s", w->open_path);
    } else {
        w->open_path = dump_copy_string(path, len);
    }
    if (!w->f) w->f = fopen(w->open_path, "wb");
    CHECK(w->f, "cannot create the dump file %s: %s; check that its directory exists and is "
          "writable", w->open_path, strerror(errno));
    CHECK(fwrite(DUMP_MAGIC, 1, 8, w->f) == 8, "cannot write the dump file %s: %s", w->open_path,
          strerror(errno));
    return w;
}

static void writer_put(DumpWriter *w, const void *bytes, size_t n) {
    if (n == 0) return;
    CHECK(fwrite(bytes, 1, n, w->f) == n, "cannot write the dump file %s: %s (is the disk full?)",
          w->open_path, strerror(errno));
}

static void writer_put_u32(DumpWriter *w, uint32_t v) {
    uint8_t b[4];
    for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (8 * i));
    writer_put(w, b, 4);
}

static void writer_put_u64(DumpWriter *w, uint64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (8 * i));
    writer_put(w, b, 8);
}

// count elements of `size` bytes (4 or 8), as little-endian bytes, a chunk at
// a time; the host's own byte order does not matter.
static void writer_put_elements(DumpWriter *w, const void *data, uint64_t count, size_t size) {
    const uint8_t *src = data;
    uint8_t chunk[8192];
    size_t used = 0;
    for (uint64_t i = 0; i < count; i++) {
        uint64_t bits;
        if (size == 4) {
            uint32_t u;
            memcpy(&u, src + i * 4, 4);
            bits = u;
        } else {
            memcpy(&bits, src + i * 8, 8);
        }
        for (size_t k = 0; k < size; k++) chunk[used++] = (uint8_t)(bits >> (8 * k));
        if (used == sizeof chunk) {
            writer_put(w, chunk, used);
            used = 0;
        }
    }
    writer_put(w, chunk, used);
}

static void writer_remember_name(DumpWriter *w, const char *name, size_t len) {
    for (int i = 0; i < w->n_names; i++)
        CHECK(strcmp(w->names[i], name) != 0,
              "the array name '%s' is written twice to %s; every name in a dump must be unique",
              name, w->path);
    if (w->n_names == w->cap_names) {
        int cap = w->cap_names ? 2 * w->cap_names : 64;
        char **names = realloc(w->names, (size_t)cap * sizeof *names);
        CHECK(names, "out of memory listing the names of %s", w->path);
        w->names = names;
        w->cap_names = cap;
    }
    w->names[w->n_names++] = dump_copy_string(name, len);
}

static void writer_record(DumpWriter *w, const char *name, DumpType type, int ndim,
                          const uint64_t *shape, const void *data) {
    if (!w || !w->f) return;
    CHECK(name && name[0], "an array written to %s has an empty name; every array needs one",
          w->path);
    size_t len = strlen(name);
    CHECK(len <= DUMP_MAX_NAME, "the array name '%.40s...' (%zu bytes) is too long for %s; at most %d",
          name, len, w->path, DUMP_MAX_NAME);
    CHECK(ndim >= 0 && ndim <= DUMP_MAX_DIMS, "array '%s' has %d dimensions; a dump holds 0 to %d",
          name, ndim, DUMP_MAX_DIMS);
    CHECK(ndim == 0 || shape, "array '%s' has %d dimensions but no shape", name, ndim);
    uint64_t count;
    CHECK(dump_shape_count(ndim, shape, &count),
          "the shape of array '%s' has more elements than 64 bits can count", name);
    CHECK(count == 0 || data, "array '%s' has %" PRIu64 " elements but its data is NULL", name,
          count);
    writer_remember_name(w, name, len);

    writer_put_u32(w, (uint32_t)len);
    writer_put(w, name, len);
    writer_put_u32(w, (uint32_t)type);
    writer_put_u32(w, (uint32_t)ndim);
    for (int d = 0; d < ndim; d++) writer_put_u64(w, shape[d]);
    if (type == DUMP_TEXT)
        writer_put(w, data, (size_t)count);
    else
        writer_put_elements(w, data, count, dump_type_size(type));
}

void dump_f32(DumpWriter *w, const char *name, const float *data, int ndim, const uint64_t *shape) {
    writer_record(w, name, DUMP_F32, ndim, shape, data);
}

void dump_f64(DumpWriter *w, const char *name, const double *data, int ndim, const uint64_t *shape) {
    writer_record(w, name, DUMP_F64, ndim, shape, data);
}

void dump_i64(DumpWriter *w, const char *name, const int64_t *data, int ndim,
              const uint64_t *shape) {
    writer_record(w, name, DUMP_I64, ndim, shape, data);
}

void dump_text(DumpWriter *w, const char *name, const char *text) {
    if (!w || !w->f) return;
    CHECK(text, "text '%s' written to %s is NULL", name ? name : "", w->path);
    uint64_t shape[1] = {strlen(text)};
    writer_record(w, name, DUMP_TEXT, 1, shape, text);
}

void dump_scalar_f64(DumpWriter *w, const char *name, double v) {
    writer_record(w, name, DUMP_F64, 0, NULL, &v);
}

void dump_scalar_i64(DumpWriter *w, const char *name, int64_t v) {
    writer_record(w, name, DUMP_I64, 0, NULL, &v);
}

void dump_close(DumpWriter *w) {
    if (!w) return;
    if (w->f) {
        // A full disk often shows only here, when the last buffer is flushed.
        CHECK(fflush(w->f) == 0, "cannot finish writing the dump file %s: %s (is the disk full?)", w->path,
              strerror(errno));
        if (w->unnamed) name_unnamed(w);
        CHECK(fclose(w->f) == 0, "cannot finish writing the dump file %s: %s (is the disk full?)",
              w->open_path, strerror(errno));
        CHECK(!w->rename_at_close || rename(w->open_path, w->path) == 0,
              "cannot rename %s to %s: %s", w->open_path, w->path, strerror(errno));
        if (w->rename_at_close && !w->unnamed) g_partial[0] = 0;
    }
    for (int i = 0; i < w->n_names; i++) free(w->names[i]);
    free(w->names);
    free(w->path);
    free(w->open_path);
    free(w);
}

// ---- reading ---------------------------------------------------------------

// The sentence dump_read returns; one buffer, so it holds the latest error.
static char read_error[512];

static const char *read_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *read_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(read_error, sizeof read_error, fmt, ap);
    va_end(ap);
    return read_error;
}

// ---- sealing ---------------------------------------------------------------

// The seal record: u32 9, "seal/hash", u32 DUMP_I64, u32 0 (a scalar), u64.
enum { SEAL_NAME_LEN = 9, SEAL_BYTES = 4 + SEAL_NAME_LEN + 4 + 4 + 8 };
static const char SEAL_NAME[SEAL_NAME_LEN + 1] = "seal/hash";

static void seal_record(uint8_t rec[SEAL_BYTES], uint64_t hash) {
    uint32_t head[3] = {SEAL_NAME_LEN, DUMP_I64, 0};
    size_t at = 0;
    for (int i = 0; i < 4; i++) rec[at++] = (uint8_t)(head[0] >> (8 * i));
    memcpy(rec + at, SEAL_NAME, SEAL_NAME_LEN);
    at += SEAL_NAME_LEN;
    for (int f = 1; f < 3; f++)
        for (int i = 0; i < 4; i++) rec[at++] = (uint8_t)(head[f] >> (8 * i));
    for (int i = 0; i < 8; i++) rec[at++] = (uint8_t)(hash >> (8 * i));
}

bool dump_seal(const char *path, const char **why) {
    const char *ignored;
    if (!why) why = &ignored;
    *why = NULL;
    int fd = open(path, O_RDWR | O_CLOEXEC);
    struct stat st;
    uint64_t h;
    uint8_t rec[SEAL_BYTES];
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && core_hash_fd(fd, (uint64_t)st.st_size, &h);
    if (ok) {
        seal_record(rec, h);
        ok = lseek(fd, 0, SEEK_END) == st.st_size && write(fd, rec, SEAL_BYTES) == SEAL_BYTES && fsync(fd) == 0;
    }
    if (!ok) *why = read_fail("cannot seal it (%s)", strerror(errno));
    if (fd >= 0) close(fd);
    return ok;
}

bool dump_sealed(const char *path, const char **why) {
    const char *ignored;
    if (!why) why = &ignored;
    *why = NULL;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 8 + SEAL_BYTES) {
        *why = fd < 0 ? read_fail("cannot open it (%s)", strerror(errno))
                      : read_fail("not a sealed dump (too short, or not a regular file)");
        if (fd >= 0) close(fd);
        return false;
    }
    uint64_t body = (uint64_t)st.st_size - SEAL_BYTES, h;
    uint8_t rec[SEAL_BYTES], want[SEAL_BYTES];
    bool ok = pread(fd, rec, SEAL_BYTES, (off_t)body) == SEAL_BYTES && core_hash_fd(fd, body, &h);
    close(fd);
    if (!ok) {
        *why = read_fail("cannot read it");
        return false;
    }
    seal_record(want, h);
    if (memcmp(rec, want, SEAL_BYTES - 8) != 0) {
        *why = read_fail("it does not end with its seal (cut short, or never sealed)");
        return false;
    }
    if (memcmp(rec, want, SEAL_BYTES) != 0) {
        *why = read_fail("its bytes do not match its seal (changed or damaged)");
        return false;
    }
    return true;
}


// Reading goes record by record from the file itself: the magic first,
// then each record's header, whose declared size is checked against what is
// left of the file before anything is allocated or read. So a file that is
// not a dump costs 8 bytes, and a huge one (an 8 GB sparse file) no more
// than the records it really holds.
typedef struct {
    FILE *f;
    uint64_t left;   // bytes of the file not read yet (its size from fstat)
} Cursor;

static bool cursor_take(Cursor *c, void *buf, size_t n) {
    if (c->left < n || fread(buf, 1, n, c->f) != n) return false;
    c->left -= n;
    return true;
}

static bool cursor_take_u32(Cursor *c, uint32_t *v) {
    uint8_t b[4];
    if (!cursor_take(c, b, 4)) return false;
    *v = 0;
    for (int i = 0; i < 4; i++) *v |= (uint32_t)b[i] << (8 * i);
    return true;
}

static bool cursor_take_u64(Cursor *c, uint64_t *v) {
    uint8_t b[8];
    if (!cursor_take(c, b, 8)) return false;
    *v = 0;
    for (int i = 0; i < 8; i++) *v |= (uint64_t)b[i] << (8 * i);
    return true;
}

// Read count little-endian elements of a's type into a->data and turn them
// into the host's order in place.
static bool cursor_take_elements(Cursor *c, DumpArray *a) {
    size_t size = dump_type_size(a->type);
    uint8_t *p = a->data;
    if (!cursor_take(c, p, (size_t)a->count * size)) return false;
    for (uint64_t i = 0; i < a->count; i++, p += size) {
        uint64_t bits = 0;
        for (size_t k = 0; k < size; k++) bits |= (uint64_t)p[k] << (8 * k);
        if (size == 4) {
            uint32_t u = (uint32_t)bits;
            memcpy(p, &u, 4);
        } else {
            memcpy(p, &bits, 8);
        }
    }
    return true;
}

// Parse one record into a (whose name and data the caller frees, even on error).
static const char *parse_record(Cursor *c, int index, DumpArray *a) {
    uint32_t len;
    if (!cursor_take_u32(c, &len))
        return read_fail("truncated: record %d ends inside its name length", index);
    if (len == 0 || len > DUMP_MAX_NAME)
        return read_fail("record %d has a name length of %" PRIu32 " bytes; it must be 1 to %d "
                         "(damaged file?)", index, len, DUMP_MAX_NAME);
    if (c->left < len)
        return read_fail("truncated: record %d needs %" PRIu32 " bytes of name, %" PRIu64 " remain",
                         index, len, c->left);
    a->name = malloc((size_t)len + 1);
    if (!a->name) return read_fail("out of memory reading the name of record %d", index);
    if (!cursor_take(c, a->name, len)) return read_fail("read error in the name of record %d", index);
    a->name[len] = 0;
    if (memchr(a->name, 0, len))
        return read_fail("the name of record %d contains a NUL byte (damaged file?)", index);

    uint32_t type, ndim;
    if (!cursor_take_u32(c, &type))
        return read_fail("truncated: array '%s' ends before its dtype", a->name);
    if (type > DUMP_TEXT)
        return read_fail("array '%s' has unknown dtype %" PRIu32 " (known: 0 f32, 1 f64, 2 i64, "
                         "3 text)", a->name, type);
    a->type = (DumpType)type;
    if (!cursor_take_u32(c, &ndim))
        return read_fail("truncated: array '%s' ends before its ndim", a->name);
    if (ndim > DUMP_MAX_DIMS)
        return read_fail("array '%s' has ndim %" PRIu32 "; at most %d", a->name, ndim,
                         DUMP_MAX_DIMS);
    a->ndim = (int)ndim;
    for (int d = 0; d < a->ndim; d++)
        if (!cursor_take_u64(c, &a->shape[d]))
            return read_fail("truncated: array '%s' ends inside its shape", a->name);
    if (!dump_shape_count(a->ndim, a->shape, &a->count))
        return read_fail("array '%s' has a shape whose product overflows 64 bits", a->name);

    size_t size = dump_type_size(a->type);
    if (a->count > c->left / size) {
        if (a->count > UINT64_MAX / size)
            return read_fail("truncated: array '%s' needs more than 2^64 bytes, %" PRIu64 " remain",
                             a->name, c->left);
        return read_fail("truncated: array '%s' needs %" PRIu64 " bytes, %" PRIu64 " remain", a->name,
                         a->count * size, c->left);
    }
    // Now count * size <= what is left of a real file, so it fits in size_t;
    // +1 for text's NUL (and so that an empty array still gets a pointer).
    size_t bytes = (size_t)a->count * size;
    a->data = malloc(bytes + 1);
    if (!a->data) return read_fail("out of memory: array '%s' needs %zu bytes", a->name, bytes);
    if (a->type == DUMP_TEXT) {
        if (!cursor_take(c, a->data, bytes)) return read_fail("read error in array '%s'", a->name);
        ((char *)a->data)[bytes] = 0;
    } else if (!cursor_take_elements(c, a)) {
        return read_fail("read error in array '%s'", a->name);
    }
    return NULL;
}

static int compare_names(const void *x, const void *y) {
    return strcmp((*(DumpArray *const *)x)->name, (*(DumpArray *const *)y)->name);
}

// The index by name (f->by_name), sorted: dump_find searches it in log n, so
// that reading a dump with many records and looking each one up stays
// n log n. Names must be unique, or dump_find would silently pick one.
static const char *index_names(DumpFile *f) {
    f->by_name = malloc((size_t)(f->count ? f->count : 1) * sizeof *f->by_name);
    if (!f->by_name) return read_fail("out of memory indexing %d names", f->count);
    for (int i = 0; i < f->count; i++) f->by_name[i] = &f->arrays[i];
    qsort(f->by_name, (size_t)f->count, sizeof *f->by_name, compare_names);
    for (int i = 1; i < f->count; i++)
        if (strcmp(f->by_name[i - 1]->name, f->by_name[i]->name) == 0)
            return read_fail("the name '%s' appears twice; a dump's names must be unique", f->by_name[i]->name);
    return NULL;
}

static const char *parse_file(Cursor *c, DumpFile *f) {
    uint8_t magic[8];
    if (!cursor_take(c, magic, 8) || memcmp(magic, DUMP_MAGIC, 8) != 0)
        return read_fail("not a dump file (bad magic)");
    int cap = 0;
    while (c->left > 0) {
        if (f->count == cap) {
            if (cap > INT32_MAX / 2) return read_fail("more records than a dump may hold");
            cap = cap ? 2 * cap : 16;
            DumpArray *more = realloc(f->arrays, (size_t)cap * sizeof *more);
            if (!more) return read_fail("out of memory after %d records", f->count);
            f->arrays = more;
        }
        DumpArray *a = &f->arrays[f->count++];
        memset(a, 0, sizeof *a);
        const char *err = parse_record(c, f->count - 1, a);
        if (err) return err;
    }
    return index_names(f);
}

DumpFile *dump_read(const char *path, const char **err) {
    const char *ignored;
    if (!err) err = &ignored;
    *err = NULL;
    // O_NONBLOCK: opening a FIFO must not wait for a writer; what is not a
    // regular file (a FIFO, a device, a directory) is refused before any read.
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *err = read_fail("cannot open it (%s)", strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        *err = read_fail("not a regular file (a dump is a file, not a FIFO, a device or a directory)");
        return NULL;
    }
    FILE *file = fdopen(fd, "rb");
    DumpFile *f = file ? calloc(1, sizeof *f) : NULL;
    if (!f) {
        if (file) fclose(file);
        else close(fd);
        *err = read_fail("out of memory");
        return NULL;
    }
    Cursor c = {file, (uint64_t)st.st_size};
    *err = parse_file(&c, f);
    fclose(file);
    if (*err) {
        dump_free(f);
        return NULL;
    }
    return f;
}

void dump_free(DumpFile *f) {
    if (!f) return;
    for (int i = 0; i < f->count; i++) {
        free(f->arrays[i].name);
        free(f->arrays[i].data);
    }
    free(f->arrays);
    free(f->by_name);
    free(f);
}

const DumpArray *dump_find(const DumpFile *f, const char *name) {
    if (!f || !name) return NULL;
    if (!f->by_name) {   // a DumpFile not made by dump_read
        for (int i = 0; i < f->count; i++)
            if (strcmp(f->arrays[i].name, name) == 0) return &f->arrays[i];
        return NULL;
    }
    int lo = 0, hi = f->count - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2, c = strcmp(f->by_name[mid]->name, name);
        if (c == 0) return f->by_name[mid];
        if (c < 0) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

// Element i as a double; text gives its byte values, so two texts can be compared.
static double dump_element(const DumpArray *a, uint64_t i) {
    switch (a->type) {
    case DUMP_F32: return ((const float *)a->data)[i];
    case DUMP_F64: return ((const double *)a->data)[i];
    case DUMP_I64: return (double)((const int64_t *)a->data)[i];
    case DUMP_TEXT: return ((const unsigned char *)a->data)[i];
    }
    return NAN;
}

double dump_get(const DumpArray *a, uint64_t i) {
    CHECK(a->type != DUMP_TEXT, "dump_get on '%s', which is text, not numbers", a->name);
    CHECK(i < a->count, "dump_get: index %" PRIu64 " is outside array '%s' of %" PRIu64
          " elements", i, a->name, a->count);
    return dump_element(a, i);
}

// ---- comparing -------------------------------------------------------------

// Arrays whose shapes differ, or a text against numbers, get shape_ok false
// and infinite errors, so that no tolerance can pass them. A NaN against a
// number is an infinite error too (NaN in both places, or the same infinity,
// counts as equal): a diverged run must never look close.
DumpDiff dump_diff(const DumpArray *a, const DumpArray *b) {
    DumpDiff r = {INFINITY, INFINITY, 0, false};
    if ((a->type == DUMP_TEXT) != (b->type == DUMP_TEXT) || a->ndim != b->ndim) return r;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d]) return r;

    r.shape_ok = true;
    r.max_abs = 0;
    double diff2 = 0, ref2 = 0;   // ||a - b||^2, ||b||^2
    for (uint64_t i = 0; i < a->count; i++) {
        double x = dump_element(a, i), y = dump_element(b, i);
        double d;
        if (x == y || (isnan(x) && isnan(y)))
            d = 0;
        else
            d = fabs(x - y);
        if (isnan(d)) d = INFINITY;
        if (d > r.max_abs) {
            r.max_abs = d;
            r.argmax = i;
        }
        diff2 += d * d;
        if (!isnan(y)) ref2 += y * y;
    }
    double ref = sqrt(ref2), diff = sqrt(diff2);
    r.rel_frob = ref > 0 ? diff / ref : diff;
    if (isnan(r.rel_frob)) r.rel_frob = INFINITY;   // inf / inf: an infinity in both
    return r;
}

// ---- what every program of the course writes ----

void dump_run_meta(DumpWriter *w, Comm *c, const char *program, const Args *a, const char *extra) {
    if (c && comm_rank(c) != 0) return;
    int world = c ? comm_size(c) : 1;   // no communicator: a run on one device
    char config[2048];
    snprintf(config, sizeof config,
             "steps %d\nseed %llu\nlr %.9g\nbatch %d\nseq %d\ndim %d\nheads %d\nlayers %d\n"
             "vocab %d\ndropout %.9g\ndata %s\ndevice %s\nbackend %s\ntf32 %d\nprecision %s\ngrad_reduce %s\n"
             "recompute %s\nworld_size %d\n%s",
             a->steps, (unsigned long long)a->seed, a->lr, a->batch, a->seq, a->dim, a->heads,
             a->layers, a->vocab, a->dropout, a->data ? a->data : "synthetic", mem_device_name(),
             comm_backend_name(), a->tf32 ? 1 : 0, a->precision ? a->precision : "fp32",
             a->grad_reduce ? a->grad_reduce : a->precision ? a->precision : "fp32",
             a->recompute ? a->recompute : "none", world,
             extra ? extra : "");
    dump_text(w, "meta/program", program);
    dump_scalar_i64(w, "meta/world_size", world);
    dump_scalar_i64(w, "meta/seed", (int64_t)a->seed);
    dump_text(w, "meta/config", config);
}

void dump_rank_stats(DumpWriter *w, Comm *c, const MemReport *mem) {
    int N = comm_size(c);
    typedef struct {
        MemReport mem;
        CommStats comm;
        double live[MEM_NCAT];   // bytes still allocated now, by category (a leak shows here)
        OpsWork work;
        double step_live[MEM_STEPS_NOTED];   // the live total after each step
        int steps;
        uint64_t ledger_full;
        CommLedgerLine ledger[COMM_LEDGER_LINES];
    } RankStats;
    RankStats mine = {mem ? *mem : mem_report(), comm_stats(), {0}, ops_work(), {0}, 0, 0, {{0}}};
    for (int k = 0; k < MEM_NCAT; k++) mine.live[k] = (double)mem_live((MemCategory)k);
    mine.steps = mem_steps_live(mine.step_live);
    mine.ledger_full = comm_ledger(mine.ledger);
    RankStats *all = malloc((size_t)N * sizeof *all);
    CHECK(all, "out of memory gathering statistics");
    comm_all_gather_host(c, &mine, sizeof mine, all);
    if (comm_rank(c) == 0) {
        size_t cells = (size_t)N * MEM_STEPS_NOTED;   // more than MEM_NCAT and COMM_NOPS
        _Static_assert((int)MEM_STEPS_NOTED >= (int)MEM_NCAT && (int)MEM_STEPS_NOTED >= (int)COMM_NOPS, "a row of cells holds them");
        double *f = malloc(cells * sizeof *f);
        int64_t *calls = malloc(3 * cells * sizeof *calls);
        CHECK(f && calls, "out of memory gathering statistics");
        int64_t *bytes = calls + cells, *bus = calls + 2 * cells;
        uint64_t shape[2] = {(uint64_t)N, MEM_NCAT};
        for (int r = 0; r < N; r++)
            for (int k = 0; k < MEM_NCAT; k++) f[r * MEM_NCAT + k] = all[r].mem.peak[k];
        dump_f64(w, "mem/peak", f, 2, shape);
        // One figure per rank each: the peaks, the kernel's count (mem.h: resident memory at the
        // seal, and how far it and the heap rose after), the work the ops were asked for (ops.h).
        static const struct {
            const char *name;
            size_t at;   // of a double in RankStats
        } per_rank[] = {
            {"mem/peak_total", offsetof(RankStats, mem.peak_total)},
            {"mem/measured_peak", offsetof(RankStats, mem.measured_peak)},
            {"mem/resident_seal", offsetof(RankStats, mem.resident_seal)},
            {"mem/resident_growth", offsetof(RankStats, mem.resident_growth)},
            {"mem/heap_growth", offsetof(RankStats, mem.heap_growth)},
            {"mem/heap_seal", offsetof(RankStats, mem.heap_seal)},
            {"ops/matmul", offsetof(RankStats, work.matmul)},
            {"ops/layernorm", offsetof(RankStats, work.layernorm)},
        };
        for (size_t i = 0; i < sizeof per_rank / sizeof per_rank[0]; i++) {
            for (int r = 0; r < N; r++) memcpy(&f[r], (const char *)&all[r] + per_rank[i].at, sizeof f[r]);
            dump_f64(w, per_rank[i].name, f, 1, shape);
        }
        shape[1] = MEM_NCAT;
        for (int r = 0; r < N; r++)
            for (int k = 0; k < MEM_NCAT; k++) f[r * MEM_NCAT + k] = all[r].live[k];
        dump_f64(w, "mem/live", f, 2, shape);
        shape[1] = COMM_NOPS;
        for (int r = 0; r < N; r++)
            for (int k = 0; k < COMM_NOPS; k++) {
                calls[r * COMM_NOPS + k] = (int64_t)all[r].comm.calls[k];
                bytes[r * COMM_NOPS + k] = (int64_t)all[r].comm.bytes[k];
                bus[r * COMM_NOPS + k] = (int64_t)all[r].comm.bus_bytes[k];
            }
        dump_i64(w, "comm/calls", calls, 2, shape);
        dump_i64(w, "comm/bytes", bytes, 2, shape);
        dump_i64(w, "comm/bus_bytes", bus, 2, shape);
        // Communication outside the counters above: bookkeeping helpers, MPI called directly.
        for (int r = 0; r < N; r++) {
            calls[r] = (int64_t)all[r].comm.helper_calls;
            bytes[r] = (int64_t)all[r].comm.direct_mpi_calls;
        }
        dump_i64(w, "comm/helper_calls", calls, 1, shape);
        dump_i64(w, "comm/direct_mpi_calls", bytes, 1, shape);
        for (int r = 0; r < N; r++) {
            calls[r] = (int64_t)all[r].comm.helper_bytes;
            bytes[r] = (int64_t)all[r].comm.step_helper_calls;
            bus[r] = (int64_t)all[r].comm.step_helper_bytes;
        }
        dump_i64(w, "comm/helper_bytes", calls, 1, shape);
        dump_i64(w, "comm/step_helper_calls", bytes, 1, shape);
        dump_i64(w, "comm/step_helper_bytes", bus, 1, shape);
        // The live total after each step, per rank (as many steps as every rank noted).
        int steps = MEM_STEPS_NOTED;
        for (int r = 0; r < N; r++) steps = all[r].steps < steps ? all[r].steps : steps;
        if (steps > 0) {
            shape[1] = (uint64_t)steps;
            for (int r = 0; r < N; r++)
                for (int k = 0; k < steps; k++) f[r * steps + k] = all[r].step_live[k];
            dump_f64(w, "mem/live_per_step", f, 2, shape);
        }
        // The ledger: per rank and line, the operation, the group's size and
        // world ranks, the bytes of one call and the calls (op -1: no line).
        int64_t *led = malloc((size_t)N * COMM_LEDGER_LINES * 5 * sizeof *led);
        CHECK(led, "out of memory gathering statistics");
        for (int r = 0; r < N; r++)
            for (int i = 0; i < COMM_LEDGER_LINES; i++) {
                const CommLedgerLine *l = &all[r].ledger[i];
                int64_t v[5] = {l->op, l->group_size, (int64_t)l->group, (int64_t)l->bytes, (int64_t)l->calls};
                memcpy(led + ((size_t)r * COMM_LEDGER_LINES + i) * 5, v, sizeof v);
            }
        uint64_t lshape[3] = {(uint64_t)N, COMM_LEDGER_LINES, 5};
        dump_i64(w, "comm/ledger", led, 3, lshape);
        for (int r = 0; r < N; r++) calls[r] = (int64_t)all[r].ledger_full;
        dump_i64(w, "comm/ledger_full", calls, 1, shape);
        free(led);
        free(f);
        free(calls);
    }
    free(all);
}
