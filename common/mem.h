// mem.h: tracked allocation by category, on the rank's device.
//
// Every tensor a lab allocates goes through mem_alloc with a category, so each
// rank can report its live and peak bytes per category: the numbers the ZeRO
// paper's formulas predict. Beside them stand two independent measures. The
// heap's: on the host, every malloc/calloc/realloc/free made by the
// program's own code is counted (the link wraps the allocator), including
// allocations that never went through mem_alloc; on the GPU, the device's
// used memory. Code can step around the wrap (__real_malloc, mmap, a static
// array), so beside it stands the kernel's count of resident memory
// (MemReport), which no code in the process changes without a system call
// or a file the grader does not let a lab's code reach.
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MEM_PARAMS,   // model parameters
    MEM_GRADS,    // their gradients
    MEM_OPTIM,    // optimizer state (AdamW moments)
    MEM_ACTS,     // activations kept for the backward pass, and scratch
    MEM_COMM,     // communication buffers
    MEM_OTHER,    // anything else
    MEM_NCAT
} MemCategory;

typedef enum { DEVICE_CPU, DEVICE_CUDA } Device;

// The rank's device, chosen once at start ("cpu", "cuda" or "auto": the GPU
// when one is visible and the CUDA backend is built in). With several GPUs,
// rank r uses GPU r mod count. Before mem_init the device is the CPU.
void mem_init(const char *device, int local_rank);

// Refuse, as a usage error (exit 2), a run that cannot fit in this
// machine's memory before any of it is allocated: `per_rank` bytes on each
// of the `ranks_here` ranks of this node, and `rank0_first` bytes that
// rank 0 needs alone before (the reference run). `what` names the run
// ("GPT 4096L 128C ..."); the message gives both figures and what to change.
void mem_check_fits(double per_rank, int ranks_here, double rank0_first, const char *what);
// Bytes of memory this machine can still give (MemAvailable; the physical
// memory when that is not known).
double mem_available(void);
Device mem_device(void);
const char *mem_device_name(void);   // "cpu" or "cuda:0"

// Allocate `bytes` on the rank's device, zero-filled, counted under `cat`.
// `name` says what it is (shown in errors). Aborts with a clear message when
// memory runs out. mem_alloc(0, ...) returns NULL.
void *mem_alloc(size_t bytes, MemCategory cat, const char *name);
float *mem_alloc_floats(size_t count, MemCategory cat, const char *name);
// count bf16 elements (bf16.h), 2 bytes each, tracked at 2 bytes each.
uint16_t *mem_alloc_bf16(size_t count, MemCategory cat, const char *name);
void mem_free(void *ptr);   // NULL is ignored; a pointer mem_alloc did not return is an error
// The bytes from p to the end of the mem_alloc block that holds it, and the
// block's category (in *cat when not NULL); SIZE_MAX when no live block
// holds p (host memory, or a buffer of the libraries'). mem_block_of's lookup.
size_t mem_bytes_after(const void *p, MemCategory *cat);
// The mem_alloc block that holds p: its first byte, size, category and
// name; false when no live block holds p (host memory, a library's
// buffer). A binary search of the live blocks, cheap enough for every call.
typedef struct {
    const void *start;
    size_t bytes;
    MemCategory cat;
    char name[40];
} MemBlock;
bool mem_block_of(const void *p, MemBlock *b);
// The argument checks of ops.h and the copies below: stop the run, naming
// the call `op`, the argument `what`, its extent and the block, when count
// elements of elem bytes from p (or rows of cols elements, ld apart) run
// past the end of the mem_alloc block that holds p. Nothing is checked
// where p lies in no block.
void mem_check_extent(const char *op, const char *what, const void *p, size_t count, size_t elem);
void mem_check_extent_2d(const char *op, const char *what, const void *p, size_t rows, size_t ld, size_t cols,
                         size_t elem);
// Asked by mem_free before a block goes: what still uses it (a sentence), or
// NULL. comm sets it, so that freeing a buffer an asynchronous operation
// still reads or writes fails at once with its name instead of corrupting
// memory later.
void mem_set_free_check(const char *(*busy)(const void *ptr, size_t bytes));
// Run at the end of mem_init, once the device is known. comm sets it: which
// library moves the buffers (MPI or NCCL) depends on where they live.
void mem_set_device_hook(void (*chosen)(void));

// Copies and fills that work whichever device the buffers live on.
void mem_to_host(void *host_dst, const void *dev_src, size_t bytes);
void mem_from_host(void *dev_dst, const void *host_src, size_t bytes);
void mem_copy(void *dev_dst, const void *dev_src, size_t bytes);
void mem_zero(void *dev_ptr, size_t bytes);

// Accounting, in bytes, for this rank.
size_t mem_live(MemCategory cat);
size_t mem_peak(MemCategory cat);
size_t mem_live_total(void);
size_t mem_peak_total(void);      // the peak of the sum (not the sum of peaks)
// The live total at the end of each step (the harness notes it as it prints
// the step, from the seal on): a leak grows from step to step, a copy kept
// for good does not. The first MEM_STEPS_NOTED steps, the last in the last
// place after that; returns how many places hold a step.
enum { MEM_STEPS_NOTED = 64 };
void mem_note_step(void);
int mem_steps_live(double out[MEM_STEPS_NOTED]);
// The independent measure: heap bytes live now and at peak (host), or device
// memory in use (GPU), counted from program start or the last reset.
size_t mem_measured_live(void);
size_t mem_measured_peak(void);
// Bytes a library itself holds on the device (NCCL's buffers), left out of
// the GPU's measure from now on; negative when it gives them back.
void mem_measured_exclude(ptrdiff_t bytes);
// Start peaks again from what is live now (to measure one phase).
void mem_reset_peaks(void);
// After this, mem_reset_peaks ends the run: the training labs' harness seals
// the peaks before the lab's own code trains (harness_seal_measures). The
// seal also starts the kernel's count (below) from the present.
void mem_seal_peaks(void);
// The kernel's count starts again from now (a program that measures several
// phases unsealed; the seal calls it once, and after the seal it ends the run).
void mem_start_resident(void);

const char *mem_category_name(MemCategory cat);   // "PARAMS", ...

// Print this rank's peaks (per category, total, measured) on one line.
void mem_print_report(const char *title);
// Print ranks' peaks as a table, a row per rank (`all`: n reports, rank by
// rank). harness_print_memory gathers them and prints on rank 0.
typedef struct MemReport MemReport;
void mem_print_reports(const MemReport *all, int n);

// Per-rank snapshot, for gathering to rank 0 and writing into a dump.
//
// The kernel's count stands beside both, one the process cannot step around
// from inside: how far its resident memory (VmHWM, whatever allocated it,
// mmap and static arrays included) rose above what it held when the
// measures were sealed, beside how far the wrapped heap rose (tracked
// blocks included). The difference is memory no allocator call made.
struct MemReport {
    double peak[MEM_NCAT];
    double peak_total;
    double measured_peak;
    double resident_seal;     // resident bytes at the seal (the library's baseline); -1: not sealed
    double resident_growth;   // the resident peak since the seal, above resident_seal; -1: not measured
    double heap_growth;       // the wrapped heap's peak since the seal, above its live bytes then
    double heap_seal;         // the wrapped heap's live bytes at the seal (part of resident_seal)
};
MemReport mem_report(void);
