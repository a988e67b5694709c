// mem_cuda.cu: device memory for mem.c on the CUDA runtime.
#include <cuda_runtime.h>

extern "C" {
#include "core.h"
#include "mem_cuda.h"
}
#include "cuda_check.h"

extern "C" int mem_cuda_device_count(void) {
    int n = 0;
    // No driver or no device both mean: no GPU for this process.
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return n;
}

extern "C" void mem_cuda_set_device(int dev) { CUDA_CHECK(cudaSetDevice(dev)); }

extern "C" void *mem_cuda_malloc(size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes) != cudaSuccess) {
        (void)cudaGetLastError();
        return NULL;
    }
    return p;
}

extern "C" void mem_cuda_free(void *ptr) { CUDA_CHECK(cudaFree(ptr)); }

extern "C" void mem_cuda_copy(void *dst, const void *src, size_t bytes, int kind) {
    cudaMemcpyKind k = kind == MEM_CUDA_H2D   ? cudaMemcpyHostToDevice
                       : kind == MEM_CUDA_D2H ? cudaMemcpyDeviceToHost
                                              : cudaMemcpyDeviceToDevice;
    CUDA_CHECK(cudaMemcpy(dst, src, bytes, k));
}

extern "C" void mem_cuda_zero(void *ptr, size_t bytes) { CUDA_CHECK(cudaMemset(ptr, 0, bytes)); }

extern "C" size_t mem_cuda_used(void) {
    size_t free_b = 0, total_b = 0;
    CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}
