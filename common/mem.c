// mem.c: tracked allocation by category, and the independent measure.
#include "mem.h"

#include <fcntl.h>
#include <malloc.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "mem_cuda.h"

// ---- a pointer -> size map -------------------------------------------------
// Open addressing with linear probing; deletion shifts entries back so no
// tombstones are needed. Its storage comes from the real allocator, so the
// bookkeeping never counts itself.
void *__real_malloc(size_t size);
void __real_free(void *ptr);

typedef struct {
    uintptr_t *keys;   // 0 = empty slot
    uint64_t *vals;
    size_t cap;        // a power of two
    size_t n;
} PtrMap;

static size_t ptrmap_slot(const PtrMap *m, uintptr_t k) {
    uint64_t h = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 16) & (m->cap - 1);
}

static void ptrmap_put(PtrMap *m, uintptr_t k, uint64_t v);

static void ptrmap_grow(PtrMap *m) {
    PtrMap old = *m;
    m->cap = old.cap ? old.cap * 2 : 1024;
    m->n = 0;
    m->keys = __real_malloc(m->cap * sizeof *m->keys);
    m->vals = __real_malloc(m->cap * sizeof *m->vals);
    if (!m->keys || !m->vals) {
        fputs("mem: out of memory for allocation bookkeeping\n", stderr);
        abort();
    }
    memset(m->keys, 0, m->cap * sizeof *m->keys);
    for (size_t i = 0; i < old.cap; i++)
        if (old.keys[i]) ptrmap_put(m, old.keys[i], old.vals[i]);
    __real_free(old.keys);
    __real_free(old.vals);
}

static void ptrmap_put(PtrMap *m, uintptr_t k, uint64_t v) {
    if (2 * (m->n + 1) > m->cap) ptrmap_grow(m);
    size_t i = ptrmap_slot(m, k);
    while (m->keys[i] && m->keys[i] != k) i = (i + 1) & (m->cap - 1);
    if (!m->keys[i]) m->n++;
    m->keys[i] = k;
    m->vals[i] = v;
}

// Look k up; returns true and its value when it is there.
static bool ptrmap_get(const PtrMap *m, uintptr_t k, uint64_t *v) {
    if (!m->cap) return false;
    size_t i = ptrmap_slot(m, k);
    while (m->keys[i] != k) {
        if (!m->keys[i]) return false;
        i = (i + 1) & (m->cap - 1);
    }
    *v = m->vals[i];
    return true;
}

// Remove k; returns true and its value when it was there.
static bool ptrmap_take(PtrMap *m, uintptr_t k, uint64_t *v) {
    if (!m->cap) return false;
    size_t i = ptrmap_slot(m, k);
    while (m->keys[i] != k) {
        if (!m->keys[i]) return false;
        i = (i + 1) & (m->cap - 1);
    }
    *v = m->vals[i];
    m->keys[i] = 0;
    m->n--;
    // Shift back the entries of the same probe run that could sit earlier.
    size_t j = i;
    for (;;) {
        j = (j + 1) & (m->cap - 1);
        if (!m->keys[j]) break;
        size_t home = ptrmap_slot(m, m->keys[j]);
        // Move j to i when its home is not in the cyclic range (i, j].
        bool in_range = (i <= j) ? (i < home && home <= j) : (i < home || home <= j);
        if (!in_range) {
            m->keys[i] = m->keys[j];
            m->vals[i] = m->vals[j];
            m->keys[j] = 0;
            i = j;
        }
    }
    return true;
}

// ---- the independent measure: the wrapped allocator ------------------------
// The link (-Wl,--wrap=malloc ...) sends every allocator call in the
// program's objects here. Blocks are counted at the size asked for; a free of
// a block allocated elsewhere (inside a library) is passed on uncounted.
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_reallocarray(void *ptr, size_t n, size_t size);
int __real_posix_memalign(void **out, size_t align, size_t size);
void *__real_aligned_alloc(size_t align, size_t size);
void *__real_memalign(size_t align, size_t size);

static pthread_mutex_t g_heap_lock = PTHREAD_MUTEX_INITIALIZER;
static PtrMap g_heap;
static size_t g_heap_live, g_heap_peak;

static void heap_add(void *p, size_t size) {
    if (!p) return;
    pthread_mutex_lock(&g_heap_lock);
    ptrmap_put(&g_heap, (uintptr_t)p, size);
    g_heap_live += size;
    if (g_heap_live > g_heap_peak) g_heap_peak = g_heap_live;
    pthread_mutex_unlock(&g_heap_lock);
}

static void heap_remove(void *p) {
    if (!p) return;
    uint64_t size;
    pthread_mutex_lock(&g_heap_lock);
    if (ptrmap_take(&g_heap, (uintptr_t)p, &size)) g_heap_live -= size;
    pthread_mutex_unlock(&g_heap_lock);
}

void *__wrap_malloc(size_t size) {
    void *p = __real_malloc(size);
    heap_add(p, size);
    return p;
}

void *__wrap_calloc(size_t n, size_t size) {
    void *p = __real_calloc(n, size);
    heap_add(p, n * size);
    return p;
}

void *__wrap_realloc(void *ptr, size_t size) {
    void *p = __real_realloc(ptr, size);
    if (p || size == 0) heap_remove(ptr);   // on failure the old block stays
    heap_add(p, size);
    return p;
}

void *__wrap_reallocarray(void *ptr, size_t n, size_t size) {
    void *p = __real_reallocarray(ptr, n, size);
    if (p) heap_remove(ptr);
    heap_add(p, n * size);
    return p;
}

void __wrap_free(void *ptr) {
    heap_remove(ptr);
    __real_free(ptr);
}

int __wrap_posix_memalign(void **out, size_t align, size_t size) {
    int rc = __real_posix_memalign(out, align, size);
    if (rc == 0) heap_add(*out, size);
    return rc;
}

void *__wrap_aligned_alloc(size_t align, size_t size) {
    void *p = __real_aligned_alloc(align, size);
    heap_add(p, size);
    return p;
}

void *__wrap_memalign(size_t align, size_t size) {
    void *p = __real_memalign(align, size);
    heap_add(p, size);
    return p;
}

// ---- devices ---------------------------------------------------------------
static Device g_device = DEVICE_CPU;
static int g_gpu = -1;
static char g_device_name[32] = "cpu";
static size_t g_gpu_base;   // device bytes in use before this rank allocated any
static size_t g_gpu_peak;

// The "Key:  N kB" line of a /proc file (meminfo, self/status), in bytes;
// -1 when the file or the line cannot be read.
static double proc_bytes(const char *path, const char *key) {
    FILE *f = fopen(path, "r");
    char line[256];
    double kb = -1;
    size_t n = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, key, n) == 0 && line[n] == ':') {
            kb = atof(line + n + 1);
            break;
        }
    if (f) fclose(f);
    return kb < 0 ? -1 : kb * 1024;
}

double mem_available(void) {
    double bytes = proc_bytes("/proc/meminfo", "MemAvailable");
    if (bytes > 0) return bytes;
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

void mem_check_fits(double per_rank, int ranks_here, double rank0_first, const char *what) {
    // The reference runs on rank 0 before the others allocate: the node
    // needs the larger of the two phases.
    // On a GPU the tensors live in the device's memory, which its own
    // allocator refuses clearly; the host's memory is what this guards.
    if (mem_device() != DEVICE_CPU) return;
    double need = fmax(per_rank * ranks_here, rank0_first), have = mem_available();
    if (need <= have) return;
    char b1[32], b2[32], b3[32];
    if (rank0_first > per_rank * ranks_here)
        core_usage_error("%s needs about %s for the single-device reference on rank 0, but this machine "
                         "has %s available; use a smaller --layers, --dim, --seq or --batch",
                         what, core_fmt_bytes(rank0_first, b1, sizeof b1), core_fmt_bytes(have, b2, sizeof b2));
    core_usage_error("%s needs about %s per rank x %d rank%s here = %s, but this machine has %s available; "
                     "use a smaller --layers, --dim, --seq or --batch, or fewer ranks per machine",
                     what, core_fmt_bytes(per_rank, b1, sizeof b1), ranks_here, ranks_here == 1 ? "" : "s",
                     core_fmt_bytes(per_rank * ranks_here, b3, sizeof b3), core_fmt_bytes(have, b2, sizeof b2));
}

static void (*g_device_hook)(void);

void mem_set_device_hook(void (*chosen)(void)) { g_device_hook = chosen; }

static int g_clear_refs = -1;   // /proc/self/clear_refs, open for writing from mem_init on

void mem_init(const char *device, int local_rank) {
    g_clear_refs = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    // Large blocks mapped on their own and given back when freed, and the
    // heap's free top given back too: the kernel's count of resident memory
    // then follows what is live, not what glibc keeps for later (its
    // thresholds would otherwise rise with the first large free).
    mallopt(M_MMAP_THRESHOLD, 256 << 10);
    mallopt(M_TRIM_THRESHOLD, 1 << 20);
    bool want_cuda = false;
    if (!device || strcmp(device, "cpu") == 0) {
        want_cuda = false;
    } else if (strcmp(device, "cuda") == 0 || strcmp(device, "auto") == 0) {
        bool must = strcmp(device, "cuda") == 0;
        int count = mem_cuda_device_count();
        if (count < 0 && must)
            core_usage_error("--device cuda: this build has no CUDA backend (%s); use --device cpu, or install "
                             "the CUDA toolkit and run make clean && make", mem_cuda_missing());
        if (count == 0 && must)
            core_usage_error("--device cuda: no GPU is visible to this process; use --device cpu");
        want_cuda = count > 0;
        if (want_cuda) g_gpu = local_rank % count;
    } else {
        core_usage_error("--device must be cpu, cuda or auto, not '%s'", device);
    }
    if (want_cuda) {
        mem_cuda_set_device(g_gpu);
        g_device = DEVICE_CUDA;
        snprintf(g_device_name, sizeof g_device_name, "cuda:%d", g_gpu);
        g_gpu_base = mem_cuda_used();
        g_gpu_peak = 0;
    }
    if (g_device_hook) g_device_hook();
}

Device mem_device(void) { return g_device; }
const char *mem_device_name(void) { return g_device_name; }

// ---- tracked allocation by category ----------------------------------------
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static PtrMap g_blocks;   // pointer -> bytes << 8 | category
static size_t g_live[MEM_NCAT], g_peak[MEM_NCAT], g_live_total, g_peak_total;

// The live blocks again, sorted by address: the block that holds a pointer
// is a binary search away, cheap enough for every op's argument check.
typedef struct {
    uintptr_t start;
    size_t bytes;
    MemCategory cat;
    char name[40];
} Span;
static Span *g_spans;
static size_t g_nspans, g_spans_cap;

// The number of spans that start at or before q (under g_lock).
static size_t spans_upto(uintptr_t q) {
    size_t lo = 0, hi = g_nspans;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (g_spans[mid].start <= q) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

static void span_add(uintptr_t start, size_t bytes, MemCategory cat, const char *name) {
    if (g_nspans == g_spans_cap) {
        size_t cap = g_spans_cap ? 2 * g_spans_cap : 256;
        // The library's own bookkeeping, outside the heap's measure (as the
        // maps above are).
        Span *s = __real_realloc(g_spans, cap * sizeof *s);
        CHECK(s, "out of memory keeping the list of %zu live blocks", g_nspans);
        g_spans = s, g_spans_cap = cap;
    }
    size_t i = spans_upto(start);
    memmove(g_spans + i + 1, g_spans + i, (g_nspans - i) * sizeof *g_spans);
    g_spans[i] = (Span){.start = start, .bytes = bytes, .cat = cat};
    snprintf(g_spans[i].name, sizeof g_spans[i].name, "%s", name ? name : "?");
    g_nspans++;
}

static void span_remove(uintptr_t start) {
    size_t i = spans_upto(start);
    if (i == 0 || g_spans[i - 1].start != start) return;
    memmove(g_spans + i - 1, g_spans + i, (g_nspans - i) * sizeof *g_spans);
    g_nspans--;
}

static const char *g_cat_names[MEM_NCAT] = {"PARAMS", "GRADS", "OPTIM", "ACTS", "COMM", "OTHER"};

const char *mem_category_name(MemCategory cat) {
    return (unsigned)cat < MEM_NCAT ? g_cat_names[cat] : "?";
}

static void gpu_sample(void) {
    if (g_device != DEVICE_CUDA) return;
    size_t used = mem_cuda_used();
    size_t mine = used > g_gpu_base ? used - g_gpu_base : 0;
    if (mine > g_gpu_peak) g_gpu_peak = mine;
}

void *mem_alloc(size_t bytes, MemCategory cat, const char *name) {
    CHECK((unsigned)cat < MEM_NCAT, "mem_alloc('%s'): unknown category %d", name, (int)cat);
    if (bytes == 0) return NULL;
    void *p;
    if (g_device == DEVICE_CUDA) {
        p = mem_cuda_malloc(bytes);
    } else {
        // 64-byte alignment suits vector loads; aligned_alloc wants a multiple.
        size_t rounded = (bytes + 63) & ~(size_t)63;
        p = aligned_alloc(64, rounded);
    }
    if (!p) {
        char want[32], live[32];
        core_fail(__FILE__, __LINE__,
                  "out of memory on %s allocating %s for '%s' (%s), with %s already live; "
                  "try a smaller model or more ranks",
                  g_device_name, core_fmt_bytes((double)bytes, want, sizeof want), name,
                  mem_category_name(cat), core_fmt_bytes((double)g_live_total, live, sizeof live));
    }
    mem_zero(p, bytes);
    pthread_mutex_lock(&g_lock);
    ptrmap_put(&g_blocks, (uintptr_t)p, (uint64_t)bytes << 8 | (uint64_t)cat);
    span_add((uintptr_t)p, bytes, cat, name);
    g_live[cat] += bytes;
    g_live_total += bytes;
    if (g_live[cat] > g_peak[cat]) g_peak[cat] = g_live[cat];
    if (g_live_total > g_peak_total) g_peak_total = g_live_total;
    pthread_mutex_unlock(&g_lock);
    gpu_sample();
    return p;
}

float *mem_alloc_floats(size_t count, MemCategory cat, const char *name) {
    return mem_alloc(count * sizeof(float), cat, name);
}

uint16_t *mem_alloc_bf16(size_t count, MemCategory cat, const char *name) {
    return mem_alloc(count * sizeof(uint16_t), cat, name);
}

static const char *(*g_free_check)(const void *ptr, size_t bytes);

void mem_set_free_check(const char *(*busy)(const void *ptr, size_t bytes)) { g_free_check = busy; }

bool mem_block_of(const void *p, MemBlock *b) {
    uintptr_t q = (uintptr_t)p;
    bool found = false;
    if (!p) return false;
    pthread_mutex_lock(&g_lock);
    size_t i = spans_upto(q);
    if (i > 0 && q < g_spans[i - 1].start + g_spans[i - 1].bytes) {
        const Span *s = &g_spans[i - 1];
        found = true;
        if (b) {
            b->start = (const void *)s->start, b->bytes = s->bytes, b->cat = s->cat;
            memcpy(b->name, s->name, sizeof b->name);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return found;
}

size_t mem_bytes_after(const void *p, MemCategory *cat) {
    MemBlock b;
    if (!mem_block_of(p, &b)) return SIZE_MAX;
    if (cat) *cat = b.cat;
    return b.bytes - (size_t)((const char *)p - (const char *)b.start);
}

// The message of a failed extent check: the call, the argument, its extent
// and the block, and the usual cause.
static void extent_failed(const char *op, const char *what, const void *p, const MemBlock *b, size_t count,
                          size_t elem, const char *shape) {
    size_t at = (size_t)((const char *)p - (const char *)b->start), bytes = count * elem;
    char size[32], extent[160];
    if (shape && shape[0]) snprintf(extent, sizeof extent, "%s (%zu bytes)", shape, bytes);
    else if (elem == 1) snprintf(extent, sizeof extent, "%zu bytes", count);
    else snprintf(extent, sizeof extent, "%zu elements of %zu bytes (%zu bytes)", count, elem, bytes);
    core_fail(__FILE__, __LINE__, "%s: %s spans %s from byte %zu of the block '%s' (%s, %s = %zu bytes), "
              "%zu bytes past its end: a count, an element size or an offset is wrong (a bf16 buffer, 2 bytes an "
              "element, copied with fp32's 4 bytes, or an offset counted in floats, reaches twice as far)", op, what,
              extent, at, b->name, mem_category_name(b->cat), core_fmt_bytes((double)b->bytes, size, sizeof size),
              b->bytes, at + bytes - b->bytes);
}

void mem_check_extent(const char *op, const char *what, const void *p, size_t count, size_t elem) {
    MemBlock b;
    if (!count || !mem_block_of(p, &b)) return;
    size_t left = b.bytes - (size_t)((const char *)p - (const char *)b.start);
    if (count > left / elem) extent_failed(op, what, p, &b, count, elem, NULL);
}

void mem_check_extent_2d(const char *op, const char *what, const void *p, size_t rows, size_t ld, size_t cols,
                         size_t elem) {
    MemBlock b;
    if (!rows || !cols || !mem_block_of(p, &b)) return;
    size_t left = b.bytes - (size_t)((const char *)p - (const char *)b.start), count = (rows - 1) * ld + cols;
    if (count > left / elem) {
        char shape[160];
        snprintf(shape, sizeof shape, "%zu rows of %zu elements, %zu apart, of %zu bytes each", rows, cols, ld, elem);
        extent_failed(op, what, p, &b, count, elem, shape);
    }
}

void mem_free(void *ptr) {
    if (!ptr) return;
    uint64_t v;
    if (g_free_check) {
        pthread_mutex_lock(&g_lock);
        bool live = ptrmap_get(&g_blocks, (uintptr_t)ptr, &v);
        pthread_mutex_unlock(&g_lock);
        const char *user = live ? g_free_check(ptr, (size_t)(v >> 8)) : NULL;
        CHECK(!user, "mem_free: this buffer is still in use by the %s, started and not yet waited "
                     "on; comm_wait(handle) before freeing (or reusing) its buffers", user);
    }
    pthread_mutex_lock(&g_lock);
    bool known = ptrmap_take(&g_blocks, (uintptr_t)ptr, &v);
    if (known) {
        span_remove((uintptr_t)ptr);
        size_t bytes = (size_t)(v >> 8);
        MemCategory cat = (MemCategory)(v & 0xff);
        g_live[cat] -= bytes;
        g_live_total -= bytes;
    }
    pthread_mutex_unlock(&g_lock);
    CHECK(known, "mem_free(%p): not a live block from mem_alloc (freed twice, or allocated "
                 "another way?)", ptr);
    if (g_device == DEVICE_CUDA)
        mem_cuda_free(ptr);
    else
        free(ptr);
}

void mem_to_host(void *host_dst, const void *dev_src, size_t bytes) {
    if (!bytes) return;
    mem_check_extent("mem_to_host", "the source", dev_src, bytes, 1);
    mem_check_extent("mem_to_host", "the destination", host_dst, bytes, 1);
    if (g_device == DEVICE_CUDA)
        mem_cuda_copy(host_dst, dev_src, bytes, MEM_CUDA_D2H);
    else
        memcpy(host_dst, dev_src, bytes);
}

void mem_from_host(void *dev_dst, const void *host_src, size_t bytes) {
    if (!bytes) return;
    mem_check_extent("mem_from_host", "the destination", dev_dst, bytes, 1);
    mem_check_extent("mem_from_host", "the source", host_src, bytes, 1);
    if (g_device == DEVICE_CUDA)
        mem_cuda_copy(dev_dst, host_src, bytes, MEM_CUDA_H2D);
    else
        memcpy(dev_dst, host_src, bytes);
}

void mem_copy(void *dev_dst, const void *dev_src, size_t bytes) {
    if (!bytes) return;
    mem_check_extent("mem_copy", "the destination", dev_dst, bytes, 1);
    mem_check_extent("mem_copy", "the source", dev_src, bytes, 1);
    if (dev_dst == dev_src) return;
    if (g_device == DEVICE_CUDA)
        mem_cuda_copy(dev_dst, dev_src, bytes, MEM_CUDA_D2D);
    else
        memmove(dev_dst, dev_src, bytes);
}

void mem_zero(void *dev_ptr, size_t bytes) {
    if (!bytes) return;
    mem_check_extent("mem_zero", "the buffer", dev_ptr, bytes, 1);
    if (g_device == DEVICE_CUDA)
        mem_cuda_zero(dev_ptr, bytes);
    else
        memset(dev_ptr, 0, bytes);
}

// ---- reports ---------------------------------------------------------------
size_t mem_live(MemCategory cat) { return (unsigned)cat < MEM_NCAT ? g_live[cat] : 0; }
size_t mem_peak(MemCategory cat) { return (unsigned)cat < MEM_NCAT ? g_peak[cat] : 0; }
size_t mem_live_total(void) { return g_live_total; }

static double g_step_live[MEM_STEPS_NOTED];
static int g_steps_noted;

void mem_note_step(void) {
    g_step_live[g_steps_noted < MEM_STEPS_NOTED ? g_steps_noted : MEM_STEPS_NOTED - 1] = (double)g_live_total;
    if (g_steps_noted < MEM_STEPS_NOTED) g_steps_noted++;
}

int mem_steps_live(double out[MEM_STEPS_NOTED]) {
    memcpy(out, g_step_live, sizeof g_step_live);
    return g_steps_noted;
}
size_t mem_peak_total(void) { return g_peak_total; }

size_t mem_measured_live(void) {
    if (g_device == DEVICE_CUDA) {
        size_t used = mem_cuda_used();
        return used > g_gpu_base ? used - g_gpu_base : 0;
    }
    pthread_mutex_lock(&g_heap_lock);
    size_t v = g_heap_live;
    pthread_mutex_unlock(&g_heap_lock);
    return v;
}

size_t mem_measured_peak(void) {
    if (g_device == DEVICE_CUDA) {
        gpu_sample();
        return g_gpu_peak;
    }
    pthread_mutex_lock(&g_heap_lock);
    size_t v = g_heap_peak;
    pthread_mutex_unlock(&g_heap_lock);
    return v;
}

void mem_measured_exclude(ptrdiff_t bytes) {
    if (g_device != DEVICE_CUDA) return;
    if (bytes < 0 && (size_t)-bytes > g_gpu_base) g_gpu_base = 0;
    else g_gpu_base = (size_t)((ptrdiff_t)g_gpu_base + bytes);
}

// ---- the kernel's count: resident memory ------------------------------------
// What the kernel says this process holds in RAM, whatever allocated it:
// malloc around the wrap, mmap, static arrays and the libraries' own memory
// alike. Its high-water mark is set back to the present when the harness
// seals its measures (clear_refs), so that the run's training alone is
// measured; the library's resident baseline at that moment is recorded.

static double g_resident_seal = -1;   // VmRSS when the measures were sealed (-1: not sealed, or unknown)
static size_t g_heap_seal;            // the wrapped heap's live bytes then

static bool g_peaks_sealed;

void mem_seal_peaks(void) {
    mem_start_resident();   // the last time: sealed from here on
    g_peaks_sealed = true;
}

void mem_start_resident(void) {
    CHECK(!g_peaks_sealed, "mem_start_resident after the harness sealed its measures");
    // "5": the peak resident size starts again from now. The file stays
    // open from mem_init on: a graded run's sandbox opens no file to write.
    if (g_clear_refs < 0) g_clear_refs = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
    bool reset = g_clear_refs >= 0 && write(g_clear_refs, "5", 1) == 1;
    g_resident_seal = reset ? proc_bytes("/proc/self/status", "VmRSS") : -1;
    g_steps_noted = 0;
    pthread_mutex_lock(&g_heap_lock);
    g_heap_seal = g_heap_live;
    pthread_mutex_unlock(&g_heap_lock);
}

void mem_reset_peaks(void) {
    CHECK(!g_peaks_sealed, "mem_reset_peaks after the harness sealed its measures: the memory a run takes is the "
          "harness's to measure, not to erase");
    pthread_mutex_lock(&g_lock);
    for (int c = 0; c < MEM_NCAT; c++) g_peak[c] = g_live[c];
    g_peak_total = g_live_total;
    pthread_mutex_unlock(&g_lock);
    pthread_mutex_lock(&g_heap_lock);
    g_heap_peak = g_heap_live;
    pthread_mutex_unlock(&g_heap_lock);
    if (g_device == DEVICE_CUDA) g_gpu_peak = mem_measured_live();
}

MemReport mem_report(void) {
    MemReport r;
    for (int c = 0; c < MEM_NCAT; c++) r.peak[c] = (double)g_peak[c];
    r.peak_total = (double)g_peak_total;
    r.measured_peak = (double)mem_measured_peak();
    r.resident_seal = g_resident_seal;
    double hwm = g_resident_seal >= 0 ? proc_bytes("/proc/self/status", "VmHWM") : -1;
    r.resident_growth = hwm >= 0 ? hwm - g_resident_seal : -1;
    pthread_mutex_lock(&g_heap_lock);
    r.heap_growth = g_heap_peak > g_heap_seal ? (double)(g_heap_peak - g_heap_seal) : 0;
    r.heap_seal = (double)g_heap_seal;
    pthread_mutex_unlock(&g_heap_lock);
    return r;
}

void mem_print_report(const char *title) {
    MemReport r = mem_report();
    char line[1024], b[32];
    int n = snprintf(line, sizeof line, "%s peak:", title ? title : "memory");
    for (int c = 0; c < MEM_NCAT; c++)
        if (r.peak[c] > 0)
            n += snprintf(line + n, sizeof line - (size_t)n, " %s %s", g_cat_names[c],
                          core_fmt_bytes(r.peak[c], b, sizeof b));
    n += snprintf(line + n, sizeof line - (size_t)n, " | total %s",
                  core_fmt_bytes(r.peak_total, b, sizeof b));
    snprintf(line + n, sizeof line - (size_t)n, " | measured (%s) %s\n",
             g_device == DEVICE_CUDA ? "device" : "heap",
             core_fmt_bytes(r.measured_peak, b, sizeof b));
    printr("%s", line);
}

void mem_print_reports(const MemReport *all, int n) {
    char b[32];
    printf("%-8s", "peak");
    for (int k = 0; k < MEM_NCAT; k++) printf(" %10s", g_cat_names[k]);
    printf(" %10s %16s\n", "total", g_device == DEVICE_CUDA ? "measured (GPU, all)" : "measured (heap)");
    for (int r = 0; r < n; r++) {
        printf("rank %-3d", r);
        for (int k = 0; k < MEM_NCAT; k++) printf(" %10s", core_fmt_bytes(all[r].peak[k], b, sizeof b));
        printf(" %10s", core_fmt_bytes(all[r].peak_total, b, sizeof b));
        printf(" %16s\n", core_fmt_bytes(all[r].measured_peak, b, sizeof b));
    }
    fflush(stdout);
}
