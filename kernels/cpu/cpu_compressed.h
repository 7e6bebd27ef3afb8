/* cpu_compressed.h — the CPU backend's DeepSeek-V4 compressed-attention ops (cpu_compress.c,
 * cpu_indexer.c); declared with the family ops by ND_BACKEND_FAMILY_OPS (backend.h), where their contracts are. */
#ifndef ND_CPU_COMPRESSED_H
#define ND_CPU_COMPRESSED_H

#include "cpu_internal.h"


#endif
