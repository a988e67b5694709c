// cuda_check.h: CUDA_CHECK(call), a CUDA runtime call that must succeed: the
// CUDA files' twin of core.h's MPI_CHECK (compiled only with PL_CUDA).
#pragma once

#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif
#include "core.h"
#ifdef __cplusplus
}
#endif

#define CUDA_CHECK(call)                                                                     \
    do {                                                                                     \
        cudaError_t err_ = (call);                                                           \
        if (err_ != cudaSuccess)                                                             \
            core_fail(__FILE__, __LINE__, "%s failed: %s", #call, cudaGetErrorString(err_)); \
    } while (0)
