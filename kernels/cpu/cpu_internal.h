/* cpu_internal.h — the CPU backend's op functions, shared between its source files.
 *
 * Each kernels/cpu/cpu_<family>.c implements one family of backend.h ops; cpu_backend.c puts
 * them in the nd_backend table. All ops follow backend.h's contract; argument errors return
 * ND_EXIT_INTERNAL with "cpu: <op>: what is wrong".
 */
#ifndef ND_CPU_INTERNAL_H
#define ND_CPU_INTERNAL_H

#include <stdint.h>
#include <stddef.h>
#include <stdio.h>
#include "backend.h"

/* Fail with "cpu: <op>: ..." unless cond holds. */
#define ND_CPU_REQUIRE(cond, e, op, ...) do { if (!(cond)) { \
    char nd_m_[512]; snprintf(nd_m_, sizeof nd_m_, __VA_ARGS__); \
    return nd_fail((e), ND_EXIT_INTERNAL, "cpu: %s: %s", (op), nd_m_); } } while (0)

/* 0 when every size is >= 0 and their product fits in int64 (element counts are then safe to
 * form); otherwise fails naming the op. */
int nd_cpu_check_sizes(nd_err *e, const char *op, int nsizes, const int64_t *sizes);
#define ND_CPU_SIZES(e, op, ...) do { const int64_t nd_s_[] = {__VA_ARGS__}; \
    ND_TRY(nd_cpu_check_sizes((e), (op), (int)(sizeof nd_s_ / sizeof nd_s_[0]), nd_s_)); } while (0)

/* strided FP32 GEMM core: y[i*ldy + j] = alpha * Σ_k x[i*ldx + k] * w[j*ldw + k], summed in FP32
 * in increasing k (the same sum a naive loop gives, whatever the blocking or thread count). */
void nd_cpu_gemm_strided(const float *x, int64_t ldx, const float *w, int64_t ldw, float *y,
                         int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha);

/* memory: cpu_memory.c */
void *nd_cpu_alloc(nd_backend *b, size_t bytes, nd_err *e);
void nd_cpu_release(nd_backend *b, void *p);
int nd_cpu_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e);
int nd_cpu_download(nd_backend *b, void *dst_host, const void *src, size_t bytes, nd_err *e);
int nd_cpu_copy(nd_backend *b, void *dst, const void *src, size_t bytes, nd_err *e);
int nd_cpu_sync(nd_backend *b, nd_err *e);

/* weight decoding: cpu_decode.c */

/* activation quantization and scale layouts: cpu_quant.c */

/* GEMM: cpu_gemm.c */

/* elementwise and normalisation: cpu_elementwise.c */

/* rotary: cpu_rope.c */

/* attention: cpu_attention.c */

/* hyper-connections: cpu_hc.c */

/* router: cpu_router.c */

/* MoE dispatch/combine: cpu_moe.c */

/* comparison probe: cpu_compare.c */

/* every compute op of kernels/backend.h's ND_BACKEND_ALL_OPS, as nd_cpu_<name> */
#define ND_CPU_DECL(name, dtypes, params) int nd_cpu_##name params;
ND_BACKEND_ALL_OPS(ND_CPU_DECL)
#undef ND_CPU_DECL

#endif
