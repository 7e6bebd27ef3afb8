/* cuda_common.cuh — what every CUDA backend file shares: the backend's private state, the
 * checked-call macros (errors as values, "cuda: file.cu:LINE: call: reason"), scratch memory and
 * the launch helper. Op launchers are `int nd_cuda_<op>(nd_backend *b, ..., nd_err *e)` declared
 * here and installed into the nd_backend table by cuda_backend.cu. */
#ifndef ND_CUDA_COMMON_CUH
#define ND_CUDA_COMMON_CUH

#include <cuda_runtime.h>
#include <cublas_v2.h>
#include <stdint.h>
#include <stddef.h>

extern "C" {
#include "backend.h"
}
#include "numerics/nd_numerics.h"

/* Backend-private state, b->impl. All work runs on one stream, in order, so one scratch area is
 * reused by consecutive ops without races. */
typedef struct nd_cuda {
    int device;
    cudaStream_t stream;
    cublasHandle_t blas;
    void *scratch;           /* device scratch, grown on demand */
    size_t scratch_bytes;
    void *host_scratch;      /* pinned host staging for small results */
    size_t host_scratch_bytes;
    void *stage[2];          /* pinned double buffer of checkpoint uploads (cuda_upload.cu) */
    cudaEvent_t stage_done[2];
    int n_sm;
} nd_cuda;

static inline nd_cuda *nd_cu(nd_backend *b) { return (nd_cuda *)b->impl; }

/* Basename of __FILE__ so messages read "cuda: quant.cu:88: ..." whatever the build directory. */
static inline const char *nd_cuda_base(const char *f) {
    const char *s = f;
    for (const char *p = f; *p; p++) if (*p == '/') s = p + 1;
    return s;
}

int nd_cuda_fail_rt(nd_err *e, const char *file, int line, const char *call, cudaError_t rc);
int nd_cuda_fail_blas(nd_err *e, const char *file, int line, const char *call, cublasStatus_t rc);

#define ND_CU(call) do { cudaError_t nd_cu_rc_ = (call); \
    if (nd_cu_rc_ != cudaSuccess) return nd_cuda_fail_rt(e, __FILE__, __LINE__, #call, nd_cu_rc_); } while (0)
#define ND_BLAS(call) do { cublasStatus_t nd_bl_rc_ = (call); \
    if (nd_bl_rc_ != CUBLAS_STATUS_SUCCESS) return nd_cuda_fail_blas(e, __FILE__, __LINE__, #call, nd_bl_rc_); } while (0)
/* After every kernel launch: launch-configuration errors and earlier asynchronous faults. */
#define ND_LAUNCHED(what) do { cudaError_t nd_cu_rc_ = cudaGetLastError(); \
    if (nd_cu_rc_ != cudaSuccess) return nd_cuda_fail_rt(e, __FILE__, __LINE__, what, nd_cu_rc_); } while (0)

/* Scratch of at least `bytes` on the device (contents undefined; valid until the next call). */
int nd_cuda_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e);
/* Pinned host staging of at least `bytes`. */
int nd_cuda_host_scratch(nd_backend *b, size_t bytes, void **out, nd_err *e);
/* Copy small host arrays (positions, row lists) into device memory; complete on return. */
int nd_cuda_stage(nd_backend *b, void *dev_dst, const void *host, size_t bytes, nd_err *e);
/* The backend's upload: checkpoint bytes through the pinned double buffer (cuda_upload.cu). */
int nd_cuda_upload(nd_backend *b, void *dst, const void *src_host, size_t bytes, nd_err *e);
void nd_cuda_stage_free(nd_cuda *c);
void *nd_cuda_host_alloc(nd_backend *b, size_t bytes, nd_err *e);
void nd_cuda_host_free(nd_backend *b, void *p);

static inline unsigned nd_cuda_blocks(int64_t work, int per_block) {
    int64_t nb = (work + per_block - 1) / per_block;
    if (nb < 1) nb = 1;
    if (nb > 2147483647LL) nb = 2147483647LL;
    return (unsigned)nb;
}
/* Grid size for grid-stride loops: enough blocks to fill the chip, no more than the work needs. */
static inline unsigned nd_cuda_grid(nd_backend *b, int64_t work, int per_block) {
    int64_t nb = (work + per_block - 1) / per_block;
    int64_t cap = (int64_t)nd_cu(b)->n_sm * 16;
    if (nb > cap) nb = cap;
    if (nb < 1) nb = 1;
    return (unsigned)nb;
}

/* ---- op launchers (one file each group) ---- */
/* cuda_dequant.cu */
int nd_cuda_dequant_nvfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div,
                          int64_t rows, int64_t k, float *out, nd_err *e);
int nd_cuda_dequant_mxfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, int64_t rows,
                          int64_t k, float *out, nd_err *e);
int nd_cuda_dequant_fp8(nd_backend *b, const uint8_t *w, const void *scale, int scale_kind, int bn,
                        int bk, int64_t rows, int64_t k, float *out, nd_err *e);
int nd_cuda_to_f32(nd_backend *b, const void *src, nd_dtype dt, int64_t n, float *out, nd_err *e);
/* cuda_quant.cu */
int nd_cuda_quant_nvfp4(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k,
                        uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e);
int nd_cuda_fake_quant_fp8(nd_backend *b, const float *x, int64_t rows, int64_t k, int group, int pow2,
                           float *out, nd_err *e);
int nd_cuda_kv_fp8(nd_backend *b, const float *x, int64_t n, float write_scale, float read_scale, float *out,
                   nd_err *e);
int nd_cuda_swizzle_sf(nd_backend *b, const uint8_t *linear, int64_t rows, int64_t k, uint8_t *swz, nd_err *e);
int nd_cuda_unswizzle_sf(nd_backend *b, const uint8_t *swz, int64_t rows, int64_t k, uint8_t *linear, nd_err *e);
/* cuda_gemm.cu */
int nd_cuda_gemm(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t n, int64_t k,
                 float alpha, int bf16_exact, nd_err *e);
int nd_cuda_gemm_grouped(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t groups,
                         int64_t n, int64_t k, float alpha, int bf16_exact, nd_err *e);
/* cuda_elementwise.cu */
int nd_cuda_round_bf16(nd_backend *b, float *x, int64_t n, nd_err *e);
int nd_cuda_cast_f16_scale(nd_backend *b, float *x, int64_t n, float scale, nd_err *e);
int nd_cuda_rmsnorm(nd_backend *b, const float *x, const float *w, float eps, int64_t rows, int64_t d,
                    int steps, float *y, nd_err *e);
int nd_cuda_add(nd_backend *b, float *y, const float *x, int64_t n, nd_err *e);
int nd_cuda_add_bias(nd_backend *b, float *y, const float *bias, int64_t rows, int64_t cols, nd_err *e);
int nd_cuda_swiglu(nd_backend *b, const float *g, const float *v, int64_t n, float limit, int bf16_steps, float *h,
                   nd_err *e);
int nd_cuda_rope(nd_backend *b, float *x, int64_t rows, int64_t heads, int64_t d, int64_t rot_off,
                 int64_t rot_dim, const int32_t *pos_host, const float *inv_freq_host, int interleaved,
                 int inverse, int steps, nd_err *e);
/* cuda_attention.cu */
int nd_cuda_attention(nd_backend *b, const float *q, const float *k, const float *v, int64_t t, int64_t s,
                      int64_t hq, int64_t hkv, int64_t d, int64_t dv, const int32_t *qpos_host,
                      const int32_t *kpos_host, int64_t window, float scale, const float *sinks_host,
                      int bf16_steps, float *out, nd_err *e);
/* cuda_hc.cu */
int nd_cuda_hc_pre(nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host,
                   int64_t t, int64_t n, int64_t dm, int iters, float rms_eps, float hc_eps, float *u,
                   float *post, float *comb, nd_err *e);
int nd_cuda_hc_post(nd_backend *b, const float *X, const float *y, const float *post, const float *comb,
                    int64_t t, int64_t n, int64_t dm, int bf16_steps, float *Xout, nd_err *e);
int nd_cuda_hc_head(nd_backend *b, const float *X, const float *fn, const float *base, const float *scale_host,
                    int64_t t, int64_t n, int64_t dm, float rms_eps, float hc_eps, float *u, nd_err *e);
/* cuda_moe.cu */
int nd_cuda_router_topk(nd_backend *b, const float *logits, const float *bias, int64_t t,
                        const nd_router_cfg *cfg, int32_t *idx, float *w, nd_err *e);
int nd_cuda_gather_rows(nd_backend *b, const float *x, const int32_t *rows_host, int64_t nr, int64_t d,
                        float *out, nd_err *e);
int nd_cuda_scatter_add_rows(nd_backend *b, float *y, const float *x, const int32_t *rows_host,
                             const float *w_host, int64_t nr, int64_t d, int bf16_products, nd_err *e);
/* cuda_compare.cu */
int nd_cuda_compare(nd_backend *b, const float *ref, const float *prod, int64_t n, int64_t block,
                    nd_cmp *out_host, nd_err *e);

#endif
