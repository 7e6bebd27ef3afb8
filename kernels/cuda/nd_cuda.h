/* nd_cuda.h — extras of the CUDA backend beyond backend.h, for tools that time it (bench/). */
#ifndef ND_CUDA_H
#define ND_CUDA_H

#include "backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The cudaStream_t (as void *) every op of a CUDA backend runs on, so a caller can record
 * events around ops; NULL for a backend that is not CUDA. */
void *nd_backend_cuda_stream(const nd_backend *b);

#ifdef __cplusplus
}
#endif
#endif
