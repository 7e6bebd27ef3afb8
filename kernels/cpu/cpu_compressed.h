/* cpu_compressed.h — the CPU backend's DeepSeek-V4 compressed-attention ops (cpu_compress.c,
 * cpu_indexer.c); contracts in backend.h. */
#ifndef ND_CPU_COMPRESSED_H
#define ND_CPU_COMPRESSED_H

#include "cpu_internal.h"

int nd_cpu_compress_pool(nd_backend *b, const float *kv, const float *gate, const float *pbias_host,
                         int64_t s, int64_t d, int64_t rate, int overlap, int bf16_steps, float *out, nd_err *e);
int nd_cpu_indexer_topk(nd_backend *b, const float *q, const float *k, const float *wts, int64_t t,
                        int64_t nc, int64_t h, int64_t c, float scale, float wscale, const int32_t *qpos_host,
                        int64_t rate, int64_t topk, float *scores, int32_t *idx, nd_err *e);
int nd_cpu_attention_compressed(nd_backend *b, const float *q, const float *kv, const float *ckv, int64_t t,
                                int64_t s, int64_t nc, int64_t hq, int64_t d, const int32_t *qpos_host,
                                const int32_t *kpos_host, int64_t window, float scale, const float *sinks_host,
                                int64_t rate, const int32_t *sel, int64_t nsel, int bf16_steps, float *out, nd_err *e);

#endif
