// mem_cuda.h: device memory for mem.c (internal). Built from mem_cuda.cu when
// the CUDA backend is compiled in (PL_CUDA); otherwise the device count says
// "no backend" and mem.c never selects the GPU.
#pragma once

#include <stddef.h>

enum { MEM_CUDA_H2D, MEM_CUDA_D2H, MEM_CUDA_D2D };

#ifdef PL_CUDA
#ifdef __cplusplus
extern "C" {
#endif
int mem_cuda_device_count(void);   // visible GPUs (0 when the driver sees none)
void mem_cuda_set_device(int dev);
void *mem_cuda_malloc(size_t bytes);   // NULL when the device is full
void mem_cuda_free(void *ptr);
void mem_cuda_copy(void *dst, const void *src, size_t bytes, int kind);
void mem_cuda_zero(void *ptr, size_t bytes);
size_t mem_cuda_used(void);   // bytes in use on this rank's device (all processes)
#ifdef __cplusplus
}
#endif
#else
#include <stdlib.h>
static inline int mem_cuda_device_count(void) { return -1; }   // no CUDA backend in this build
// Never called without a GPU selected, which this build cannot do.
static inline void mem_cuda_set_device(int dev) { (void)dev; abort(); }
static inline void *mem_cuda_malloc(size_t bytes) { (void)bytes; abort(); }
static inline void mem_cuda_free(void *ptr) { (void)ptr; abort(); }
static inline void mem_cuda_copy(void *d, const void *s, size_t n, int k) { (void)d; (void)s; (void)n; (void)k; abort(); }
static inline void mem_cuda_zero(void *ptr, size_t bytes) { (void)ptr; (void)bytes; abort(); }
static inline size_t mem_cuda_used(void) { return 0; }
#endif
