// mem_cuda.h: device memory for mem.c (internal). Built from mem_cuda.cu into
// the CUDA backend's library when it is compiled in (PL_CUDA), which the
// program loads when a rank asks for a GPU (cuda_backend.c); otherwise the
// device count says "no backend" and mem.c never selects the GPU.
#pragma once

#include <stddef.h>

enum { MEM_CUDA_H2D, MEM_CUDA_D2H, MEM_CUDA_D2D };

#ifdef PL_CUDA
#ifdef __cplusplus
extern "C" {
#endif
int mem_cuda_device_count(void);   // visible GPUs (0 when the driver sees none; -1: no backend)
const char *mem_cuda_missing(void);   // why there is no backend, when the count is -1 (cuda_backend.c)
// The backend loaded (without a GPU too) and every one of its functions
// found: 0, or how many are missing (-1: it cannot be loaded), said in why.
int mem_cuda_verify_backend(char *why, size_t len);
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
static inline const char *mem_cuda_missing(void) { return "nvcc was not found when it was built"; }
// Never called without a GPU selected, which this build cannot do.
static inline void mem_cuda_set_device(int dev) { (void)dev; abort(); }
static inline void *mem_cuda_malloc(size_t bytes) { (void)bytes; abort(); }
static inline void mem_cuda_free(void *ptr) { (void)ptr; abort(); }
static inline void mem_cuda_copy(void *d, const void *s, size_t n, int k) { (void)d; (void)s; (void)n; (void)k; abort(); }
static inline void mem_cuda_zero(void *ptr, size_t bytes) { (void)ptr; (void)bytes; abort(); }
static inline size_t mem_cuda_used(void) { return 0; }
#endif
