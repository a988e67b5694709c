// cuda_poll.h: whether the work an event marks is done, without leaving the
// runtime's "not ready" behind as its last error.
//
// cudaEventQuery answers cudaErrorNotReady while the work is under way, and
// the runtime also records that answer as its last error, which the next
// cudaGetLastError returns: every kernel launch is checked that way
// (LAUNCHED() in ops_cuda.cu), so the first kernel after a wait on NCCL
// would end the run with "device not ready". Cleared here, where it is made,
// as PyTorch's CUDA events do after their query. An error of an earlier
// launch cannot be cleared by this by mistake: each launch is checked at
// once.
#pragma once

#include <cuda_runtime_api.h>

static inline cudaError_t pl_event_query(cudaEvent_t ev) {
    cudaError_t e = cudaEventQuery(ev);
    if (e == cudaErrorNotReady) (void)cudaGetLastError();
    return e;
}
