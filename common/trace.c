// trace.c: spans in memory, one Chrome trace JSON at the end.
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core.h"

typedef struct {
    char name[64];
    char cat[16];
    int track;
    double t0, t1;      // seconds since the common time zero
    char *args;         // JSON object body, or NULL
} Span;

enum { MAX_DEPTH = 32 };

static bool g_on;
static char *g_path;
static double g_zero;
static Span *g_spans;
static size_t g_n, g_cap;
static Span g_open[MAX_DEPTH];
static int g_depth;

void trace_start(const char *path) {
    if (!path) return;
    g_path = strdup(path);
    CHECK(g_path, "out of memory");
    g_zero = core_now();
    g_on = true;
}

const char *trace_path(void) { return g_on ? g_path : NULL; }

bool trace_on(void) { return g_on; }

static void push(const Span *s) {
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 1024;
        g_spans = realloc(g_spans, g_cap * sizeof *g_spans);
        CHECK(g_spans, "out of memory recording the trace");
    }
    g_spans[g_n++] = *s;
}

void trace_begin(const char *name, const char *cat) {
    if (!g_on) return;
    CHECK(g_depth < MAX_DEPTH, "trace_begin('%s'): more than %d nested spans (a trace_end missing?)",
          name, MAX_DEPTH);
    Span *s = &g_open[g_depth++];
    memset(s, 0, sizeof *s);
    snprintf(s->name, sizeof s->name, "%s", name);
    snprintf(s->cat, sizeof s->cat, "%s", cat ? cat : "compute");
    s->track = TRACE_TRACK_MAIN;
    s->t0 = core_now() - g_zero;
}

void trace_end(void) {
    if (!g_on) return;
    CHECK(g_depth > 0, "trace_end() without a trace_begin()");
    Span s = g_open[--g_depth];
    s.t1 = core_now() - g_zero;
    push(&s);
}

void trace_span(const char *name, const char *cat, int track, double t0, double t1,
                const char *args_json) {
    if (!g_on) return;
    Span s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    snprintf(s.cat, sizeof s.cat, "%s", cat ? cat : "compute");
    s.track = track;
    s.t0 = t0 - g_zero;
    s.t1 = t1 - g_zero;
    if (args_json) {
        s.args = strdup(args_json);
        CHECK(s.args, "out of memory recording the trace");
    }
    push(&s);
}

// Append to a growing string.
typedef struct {
    char *p;
    size_t n, cap;
} Buf;

static void buf_printf(Buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(Buf *b, const char *fmt, ...) {
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int k = vsnprintf(b->p ? b->p + b->n : NULL, b->p ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        CHECK(k >= 0, "trace: formatting failed");
        if (b->p && b->n + (size_t)k < b->cap) {
            b->n += (size_t)k;
            return;
        }
        b->cap = 2 * (b->cap + (size_t)k + 256);
        b->p = realloc(b->p, b->cap);
        CHECK(b->p, "out of memory writing the trace");
    }
}

// Names come from code, but quote them properly all the same.
static void buf_json_string(Buf *b, const char *s) {
    buf_printf(b, "\"");
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            buf_printf(b, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            buf_printf(b, "\\u%04x", (unsigned char)*s);
        else
            buf_printf(b, "%c", *s);
    }
    buf_printf(b, "\"");
}

char *trace_take_json(int rank, size_t *len) {
    if (!g_on) {
        *len = 0;
        return NULL;
    }
    Buf b = {0};
    // Process and thread names, so Perfetto labels the tracks.
    buf_printf(&b, "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rank %d\"}},\n",
               rank, rank);
    buf_printf(&b, "{\"name\":\"process_sort_index\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"sort_index\":%d}},\n",
               rank, rank);
    buf_printf(&b, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"main\"}},\n",
               rank, TRACE_TRACK_MAIN);
    buf_printf(&b, "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"async communication\"}}",
               rank, TRACE_TRACK_COMM_ASYNC);
    for (size_t i = 0; i < g_n; i++) {
        const Span *s = &g_spans[i];
        buf_printf(&b, ",\n{\"name\":");
        buf_json_string(&b, s->name);
        buf_printf(&b, ",\"cat\":");
        buf_json_string(&b, s->cat);
        buf_printf(&b, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f", rank,
                   s->track, s->t0 * 1e6, (s->t1 - s->t0) * 1e6);
        if (s->args) buf_printf(&b, ",\"args\":{%s}", s->args);
        buf_printf(&b, "}");
    }
    for (size_t i = 0; i < g_n; i++) free(g_spans[i].args);
    free(g_spans);
    g_spans = NULL;
    g_n = g_cap = 0;
    g_on = false;
    *len = b.n;
    return b.p;
}

void trace_write_file(const char *path, const char *all, const size_t *lens, int n) {
    FILE *f = fopen(path, "w");
    CHECK(f, "cannot write the trace to '%s'; check the directory exists and is writable", path);
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n", f);
    size_t off = 0;
    for (int r = 0; r < n; r++) {
        if (r > 0) fputs(",\n", f);
        fwrite(all + off, 1, lens[r], f);
        off += lens[r];
    }
    fputs("\n]}\n", f);
    CHECK(fclose(f) == 0, "writing the trace to '%s' failed (disk full?)", path);
}
