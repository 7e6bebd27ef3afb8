/* Stand-in constructor used when the build has no CUDA toolkit: it reports the absence, so
 * `--backend cuda` fails with a clear message and `auto` falls back to the CPU. */
#include "backend.h"
#include "cuda/nd_cuda.h"

int nd_backend_cuda_create(nd_backend **out, int device, nd_err *e) {
    (void)device;
    *out = NULL;
    return nd_fail(e, ND_EXIT_BADINPUT, "cuda: this build of nvfp4dbg has no CUDA backend (nvcc was not found at build time); use --backend cpu or auto");
}

int nd_backend_cuda_available(void) { return 0; }

/* nd_cuda.h: no CUDA backend exists in this build, so no stream either. */
void *nd_backend_cuda_stream(const nd_backend *b) { (void)b; return NULL; }
