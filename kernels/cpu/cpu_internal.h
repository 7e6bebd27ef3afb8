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
int nd_cpu_copy2d(nd_backend *b, float *dst, int64_t dpitch, const float *src, int64_t spitch, int64_t width,
                  int64_t rows, nd_err *e);
int nd_cpu_sync(nd_backend *b, nd_err *e);

/* weight decoding: cpu_decode.c */
int nd_cpu_dequant_nvfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div,
                         int64_t rows, int64_t k, float *out, nd_err *e);
int nd_cpu_dequant_mxfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, int64_t rows,
                         int64_t k, float *out, nd_err *e);
int nd_cpu_dequant_fp8(nd_backend *b, const uint8_t *w, const void *scale, int scale_kind, int bn,
                       int bk, int64_t rows, int64_t k, float *out, nd_err *e);
int nd_cpu_to_f32(nd_backend *b, const void *src, nd_dtype dt, int64_t n, float *out, nd_err *e);

/* activation quantization and scale layouts: cpu_quant.c */
int nd_cpu_quant_nvfp4(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k,
                       uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e);
int nd_cpu_fake_quant_fp8(nd_backend *b, const float *x, int64_t rows, int64_t k, int group,
                          int pow2, float *out, nd_err *e);
int nd_cpu_swizzle_sf(nd_backend *b, const uint8_t *linear, int64_t rows, int64_t k, uint8_t *swz,
                      nd_err *e);
int nd_cpu_unswizzle_sf(nd_backend *b, const uint8_t *swz, int64_t rows, int64_t k,
                        uint8_t *linear, nd_err *e);

/* GEMM: cpu_gemm.c */
int nd_cpu_gemm(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t n,
                int64_t k, float alpha, int bf16_exact, nd_err *e);
int nd_cpu_gemm_grouped(nd_backend *b, const float *x, const float *w, float *y, int64_t m,
                        int64_t groups, int64_t n, int64_t k, float alpha, int bf16_exact, nd_err *e);

/* elementwise and normalisation: cpu_elementwise.c */
int nd_cpu_round_bf16(nd_backend *b, float *x, int64_t n, nd_err *e);
int nd_cpu_kv_fp8(nd_backend *b, const float *x, int64_t n, float write_scale, float read_scale, float *out,
                  nd_err *e);
int nd_cpu_cast_f16_scale(nd_backend *b, float *x, int64_t n, float scale, nd_err *e);
int nd_cpu_rmsnorm(nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d,
                   int steps, float *y, nd_err *e);
int nd_cpu_add(nd_backend *b, float *y, const float *x, int64_t n, nd_err *e);
int nd_cpu_add_bias(nd_backend *b, float *y, const float *bias, int64_t rows, int64_t cols, nd_err *e);
int nd_cpu_swiglu(nd_backend *b, const float *g, const float *v, int64_t n, float limit, int bf16_steps,
                  float *h, nd_err *e);

/* rotary: cpu_rope.c */
int nd_cpu_rope(nd_backend *b, float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off,
                int64_t rot_dim, const int32_t *pos_host, const float *inv_freq_host, int interleaved,
                int inverse, int steps, nd_err *e);

/* attention: cpu_attention.c */
int nd_cpu_attention(nd_backend *b, const float *q, const float *k, const float *v, int64_t t,
                     int64_t s, int64_t hq, int64_t hkv, int64_t d, int64_t dv,
                     const int32_t *qpos_host, const int32_t *kpos_host, int64_t window, float scale,
                     const float *sinks_host, int bf16_steps, float *out, nd_err *e);

/* hyper-connections: cpu_hc.c */
int nd_cpu_hc_pre(nd_backend *b, const float *X, const float *fn, const float *base,
                  const float *scale_host, int64_t t, int64_t n, int64_t dm, int iters, float rms_eps,
                  float hc_eps, float *u, float *post, float *comb, nd_err *e);
int nd_cpu_hc_post(nd_backend *b, const float *X, const float *y, const float *post, const float *comb,
                   int64_t t, int64_t n, int64_t dm, int bf16_steps, float *Xout, nd_err *e);
int nd_cpu_hc_head(nd_backend *b, const float *X, const float *fn, const float *base,
                   const float *scale_host, int64_t t, int64_t n, int64_t dm, float rms_eps,
                   float hc_eps, float *u, nd_err *e);

/* router: cpu_router.c */
int nd_cpu_router_topk(nd_backend *b, const float *logits, const float *bias, int64_t t,
                       const nd_router_cfg *cfg, int32_t *idx, float *w, nd_err *e);

/* MoE dispatch/combine: cpu_moe.c */
int nd_cpu_gather_rows(nd_backend *b, const float *x, const int32_t *rows_host, int64_t nr, int64_t d,
                       float *out, nd_err *e);
int nd_cpu_scatter_add_rows(nd_backend *b, float *y, const float *x, const int32_t *rows_host,
                            const float *w_host, int64_t nr, int64_t d, int bf16_products, nd_err *e);

/* comparison probe: cpu_compare.c */
int nd_cpu_compare(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block,
                   nd_cmp *out_host, nd_err *e);

#endif
