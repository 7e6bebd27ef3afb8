/* host_copy.h — memcpy split over threads, for large host copies out of mapped checkpoint files
 * (page faults and one core's copy bandwidth, not memory, bound a single-threaded copy there). */
#ifndef ND_HOST_COPY_H
#define ND_HOST_COPY_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Copy n bytes with up to `threads` threads (4 KiB-aligned parts; threads <= 0: one per online
 * CPU, at most 16). A thread that cannot be started copies its part inline. */
void nd_memcpy_parallel(void *dst, const void *src, size_t n, int threads);

#ifdef __cplusplus
}
#endif
#endif
