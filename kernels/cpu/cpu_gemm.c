/* cpu_gemm.c — FP32 GEMM y = alpha * x @ w^T on the CPU, in two orders:
 *
 *  - ND_GEMM_F32 and ND_GEMM_BF16_EXACT (any summation order is allowed, as cuBLAS's on the GPU):
 *    OpenBLAS's SGEMM, tens of GFLOP/s where the loop below does ~1.5;
 *  - ND_GEMM_ORDERED (--ref-numerics transformers; the CUDA backend's gemm_ordered_kernel matches
 *    it bit for bit): the loop below. Every y element is the plain FP32 sum Σ_k x[m,k] w[n,k]
 *    taken in increasing k, then times alpha: blocking only changes which elements are computed
 *    together, never the order of one sum, so the result is identical to a naive triple loop and
 *    independent of the thread count.
 */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include "cpu_internal.h"

enum { KB = 256, NB = 64, MAX_THREADS = 8 };

typedef struct gemm_job {
    const float *x, *w;
    float *y;
    int64_t ldx, ldw, ldy, m, n0, n1, k;
    float alpha;
} gemm_job;

/* rows [n0, n1) of w against all of x. Partial sums are kept in y between K blocks. */
static void gemm_range(const gemm_job *j) {
    const float *x = j->x, *w = j->w;
    float *y = j->y;
    const int64_t ldx = j->ldx, ldw = j->ldw, ldy = j->ldy, m = j->m, k = j->k;
    for (int64_t i = 0; i < m; i++)
        for (int64_t c = j->n0; c < j->n1; c++) y[i * ldy + c] = 0.0f;
    for (int64_t k0 = 0; k0 < k; k0 += KB) {
        const int64_t k1 = k0 + KB < k ? k0 + KB : k;
        for (int64_t nb0 = j->n0; nb0 < j->n1; nb0 += NB) {
            const int64_t nb1 = nb0 + NB < j->n1 ? nb0 + NB : j->n1;
            int64_t i = 0;
            for (; i + 4 <= m; i += 4) {
                const float *x0 = x + i * ldx, *x1 = x0 + ldx, *x2 = x1 + ldx, *x3 = x2 + ldx;
                for (int64_t c = nb0; c < nb1; c++) {
                    const float *wc = w + c * ldw;
                    float a0 = y[i * ldy + c], a1 = y[(i + 1) * ldy + c];
                    float a2 = y[(i + 2) * ldy + c], a3 = y[(i + 3) * ldy + c];
                    for (int64_t kk = k0; kk < k1; kk++) {
                        const float wv = wc[kk];
                        a0 += x0[kk] * wv; a1 += x1[kk] * wv; a2 += x2[kk] * wv; a3 += x3[kk] * wv;
                    }
                    y[i * ldy + c] = a0; y[(i + 1) * ldy + c] = a1;
                    y[(i + 2) * ldy + c] = a2; y[(i + 3) * ldy + c] = a3;
                }
            }
            for (; i < m; i++) {
                const float *xi = x + i * ldx;
                for (int64_t c = nb0; c < nb1; c++) {
                    const float *wc = w + c * ldw;
                    float a = y[i * ldy + c];
                    for (int64_t kk = k0; kk < k1; kk++) a += xi[kk] * wc[kk];
                    y[i * ldy + c] = a;
                }
            }
        }
    }
    if (j->alpha != 1.0f)
        for (int64_t i = 0; i < m; i++)
            for (int64_t c = j->n0; c < j->n1; c++) y[i * ldy + c] *= j->alpha;
}

static void *gemm_thread(void *arg) { gemm_range(arg); return NULL; }

static int gemm_threads(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1) n = 1;
    return n > MAX_THREADS ? MAX_THREADS : (int)n;
}

void nd_cpu_gemm_strided(const float *x, int64_t ldx, const float *w, int64_t ldw, float *y,
                         int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha) {
    gemm_job jobs[MAX_THREADS];
    pthread_t tid[MAX_THREADS];
    int nt = gemm_threads();
    /* threads only pay off on real work; keep small products on the calling thread */
    if ((double)m * (double)n * (double)k < 4e6 || n < 2 * NB) nt = 1;
    const int64_t per = (n + nt - 1) / nt;
    int started = 0;
    for (int t = 0; t < nt; t++) {
        gemm_job *j = &jobs[t];
        *j = (gemm_job){x, w, y, ldx, ldw, ldy, m, t * per, (t + 1) * per < n ? (t + 1) * per : n, k, alpha};
        if (j->n0 >= j->n1) continue;
        if (t == nt - 1 || pthread_create(&tid[t], NULL, gemm_thread, j) != 0) {
            gemm_range(j);                     /* the last slice, or a thread that did not start */
            jobs[t].n1 = jobs[t].n0;           /* mark: nothing to join */
        } else {
            started |= 1 << t;
        }
    }
    for (int t = 0; t < nt; t++)
        if (started & (1 << t)) pthread_join(tid[t], NULL);
}

/* y[m, n] (row stride ldy) = alpha * x[m, k] @ w[n, k]^T in the BLAS's order */
static void gemm_blas(const float *x, int64_t ldx, const float *w, int64_t ldw, float *y, int64_t ldy,
                      int64_t m, int64_t n, int64_t k, float alpha) {
    if (k == 0) {                          /* an empty sum; BLAS leaves y alone when k is 0 */
        for (int64_t i = 0; i < m; i++)
            for (int64_t c = 0; c < n; c++) y[i * ldy + c] = 0.0f;
        return;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)k, alpha, x,
                (blasint)ldx, w, (blasint)ldw, 0.0f, y, (blasint)ldy);
}

/* BLAS takes 32-bit sizes (blasint): a larger operand goes through the ordered loop */
static int blas_fits(int64_t m, int64_t n, int64_t k, int64_t ldx, int64_t ldw, int64_t ldy) {
    const int64_t lim = (int64_t)1 << 30;
    return sizeof(blasint) >= 8 || (m < lim && n < lim && k < lim && ldx < lim && ldw < lim && ldy < lim);
}

static void gemm_mode(int mode, const float *x, int64_t ldx, const float *w, int64_t ldw, float *y,
                      int64_t ldy, int64_t m, int64_t n, int64_t k, float alpha) {
    if (mode != ND_GEMM_ORDERED && blas_fits(m, n, k, ldx, ldw, ldy))
        gemm_blas(x, ldx, w, ldw, y, ldy, m, n, k, alpha);
    else
        nd_cpu_gemm_strided(x, ldx, w, ldw, y, ldy, m, n, k, alpha);
}

int nd_cpu_gemm(nd_backend *b, const float *x, const float *w, float *y, int64_t m, int64_t n,
                int64_t k, float alpha, int mode, nd_err *e) {
    ND_CPU_REQUIRE(mode >= ND_GEMM_F32 && mode <= ND_GEMM_ORDERED, e, "gemm", "unknown mode");
    if (mode == ND_GEMM_BF16_EXACT) ND_TRY(nd_backend_require(b, ND_OP_gemm, ND_ODT_BF16, e));
    const char *op = "gemm";
    ND_CPU_SIZES(e, op, m, n);
    ND_CPU_SIZES(e, op, m, k);
    ND_CPU_SIZES(e, op, n, k);
    ND_CPU_REQUIRE(m * n == 0 || (y && (k == 0 || (x && w))), e, op, "NULL buffer");
    if (m * n == 0) return 0;
    gemm_mode(mode, x, k, w, k, y, n, m, n, k, alpha);
    return 0;
}

int nd_cpu_gemm_grouped(nd_backend *b, const float *x, const float *w, float *y, int64_t m,
                        int64_t groups, int64_t n, int64_t k, float alpha, int mode, nd_err *e) {
    ND_CPU_REQUIRE(mode >= ND_GEMM_F32 && mode <= ND_GEMM_ORDERED, e, "gemm_grouped", "unknown mode");
    if (mode == ND_GEMM_BF16_EXACT) ND_TRY(nd_backend_require(b, ND_OP_gemm_grouped, ND_ODT_BF16, e));
    const char *op = "gemm_grouped";
    ND_CPU_SIZES(e, op, m, groups, n);
    ND_CPU_SIZES(e, op, m, groups, k);
    ND_CPU_SIZES(e, op, groups, n, k);
    ND_CPU_REQUIRE(m * groups * n == 0 || (y && (k == 0 || (x && w))), e, op, "NULL buffer");
    if (m * groups * n == 0) return 0;
    for (int64_t g = 0; g < groups; g++)
        gemm_mode(mode, x + g * k, groups * k, w + g * n * k, k, y + g * n, groups * n, m, n, k, alpha);
    return 0;
}
