/* test_backend_ops.c — every op of kernels/backend.h on the CPU backend (the reference) and on
 * CUDA, with fresh random inputs (seed printed; ND_TEST_SEED=N replays one; ND_TEST_ONLY=name runs
 * the cases whose name contains it), at several shapes
 * including odd sizes and K not a multiple of 64. Outputs are poisoned before each run, with a
 * different byte pattern per backend, so an element either backend leaves unwritten mismatches.
 *
 * Tolerances, and why:
 *  - bit-exact (NaN compared as "both NaN", since CUDA arithmetic returns the canonical NaN while
 *    x86 propagates the operand's payload and sign): dequant_nvfp4/mxfp4/fp8, to_f32, quant_nvfp4
 *    and quant_mxfp4 codes + scales + statistics, fake_quant_fp8, kv_fp8, swizzle/unswizzle, round_bf16, cast_f16_scale, scale,
 *    add, gather, scatter_add (same order of FP32 additions), hc_post (same order, no FMA).
 *  - TOL_GEMM rel-L2 1e-5: FP32 sums of K products in another order (cuBLAS blocks/splits K, the
 *    CPU sums in increasing k); the typical error of either is ~eps*sqrt(K), 2e-6 at K = 1040.
 *    The same bound holds for the BF16 path: products of BF16-exact operands are exact in FP32.
 *  - TOL_NORM per-element rel 1e-5: Σx² in FP32 in another order (~eps*sqrt(d)/2 in the factor).
 *  - TOL_TRANSC per-element rel 4e-6: CUDA expf/sinf/cosf are within 2 ulp, glibc within 1.
 *  - TOL_ROPE abs 4e-6 x max|x|: the same cos/sin ulps, times pairs of inputs.
 *  - TOL_MIX rel-L2 1e-5: attention and hyper-connections, an FP32 dot/GEMM in another order
 *    followed by expf (Sinkhorn is contractive; it does not amplify these).
 *  - TOL_CMP_SUM rel 1e-12: double sums of up to 2e5 terms in another order; above 2e5 terms
 *    (n - 1) * 2^-53, the bound of the CPU's in-order sum of non-negative terms (Higham, Accuracy
 *    and Stability of Numerical Algorithms, 4.2), which in-order sums approach: 6.4e5 squares sum
 *    in order 2.5e-12 away from their exact sum (math.fsum), while CUDA's tree of sums is near exact.
 *  - TOL_KL 1e-12 x Σ p·(|la| + |la - lb|): logits_kl's double sums in another order and the
 *    double exp/log of CUDA (<= 2 ulp) against glibc's, each relative to those magnitudes.
 *  - compress_pool: per-element bounds from Σ|value|·p, see case_compress_pool (exp is the only
 *    step that differs). indexer_topk: scores bit-exact, picks the same set exactly.
 *    attention_compressed: TOL_MIX, as attention.
 *  - router: indices exact unless the two experts (or groups) involved are a near tie in exact
 *    (double) arithmetic, |Δ| <= 1e-5 relative; weights per-element rel 1e-5 where indices match.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "backend.h"
#include "numerics/nd_numerics.h"
#include "numerics/nd_bf16_steps.h"
#include "numerics/nd_gdn.h"
#include "nd_test.h"

#define TOL_GEMM 1e-5
#define TOL_NORM 1e-5
#define TOL_TRANSC 4e-6
#define TOL_ROPE 4e-6
#define TOL_MIX 1e-5
#define TOL_CMP_SUM 1e-12
#define TOL_KL 1e-12
#define TOL_ROUTER_TIE 1e-5
/* ops with transformers' BF16 steps (numerics/nd_bf16_steps.h): a last-bit FP32 difference before an
 * intermediate BF16 rounding can move that rounding by one BF16 ulp, and the next multiply-and-round
 * (RMSNorm's weight, SwiGLU's up) can carry that to two ulps of the output: compared in BF16 ulps of
 * the value (an ulp is 2^-7 .. 2^-8 of it, by where it sits in its binade), not as one relative figure */
#define TOL_BF16_STEP_ULPS 2.0
/* the same one-ulp moves as an aggregate (rel-L2 over a whole output) or against the input's scale */
#define TOL_BF16_STEP 8e-3
#define POISON_CPU 0xA5
#define POISON_CUDA 0x5A

static nd_backend *g_be[2]; /* [0] cpu, [1] cuda */
static const uint8_t g_poison[2] = {POISON_CPU, POISON_CUDA};

/* ---- random ---- */
static uint64_t g_rng;
static uint64_t rnd_u64(void) {
    g_rng ^= g_rng >> 12; g_rng ^= g_rng << 25; g_rng ^= g_rng >> 27;
    return g_rng * 2685821657736338717ULL;
}
static double rnd_uni(void) { return (double)(rnd_u64() >> 11) * (1.0 / 9007199254740992.0); }
static float rnd_normal(void) {
    double u = rnd_uni(), v = rnd_uni();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static int rnd_int(int n) { return (int)(rnd_u64() % (uint64_t)n); }
static float *rnd_floats(int64_t n, float scale) {
    float *p = malloc((size_t)(n > 0 ? n : 1) * 4);
    for (int64_t i = 0; i < n; i++) p[i] = rnd_normal() * scale;
    return p;
}
static uint8_t *rnd_bytes(int64_t n) {
    uint8_t *p = malloc((size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++) p[i] = (uint8_t)rnd_u64();
    return p;
}
/* A value exact in BF16: e2m1 code times an e4m3 scale (what dequantized NVFP4 operands hold). */
static float rnd_fp4_value(void) {
    uint8_t sf = (uint8_t)(0x20 + rnd_int(0x30)); /* scales 2^-3 .. 2^3 */
    return nd_e2m1_to_f32((uint8_t)rnd_int(16)) * nd_e4m3_to_f32(sf);
}

/* ---- backend plumbing: every failure is a CHECK failure, never a crash ---- */
static int g_op_fail;
static void *dev_put(int be, const void *host, size_t bytes) {
    nd_err e = {0};
    void *p = g_be[be]->alloc(g_be[be], bytes ? bytes : 1, &e);
    if (!p) { CHECK(0, "%s alloc: %s", g_be[be]->name, e.msg); g_op_fail = 1; return NULL; }
    if (host && g_be[be]->upload(g_be[be], p, host, bytes, &e)) {
        CHECK(0, "%s upload: %s", g_be[be]->name, e.msg);
        g_op_fail = 1;
    }
    return p;
}
static void *dev_poisoned(int be, size_t bytes) {
    uint8_t *h = malloc(bytes ? bytes : 1);
    memset(h, g_poison[be], bytes);
    void *p = dev_put(be, h, bytes);
    free(h);
    return p;
}
static void *dev_get(int be, const void *dev, size_t bytes) {
    nd_err e = {0};
    void *h = malloc(bytes ? bytes : 1);
    memset(h, g_poison[be], bytes);
    if (dev && g_be[be]->download(g_be[be], h, dev, bytes, &e)) {
        CHECK(0, "%s download: %s", g_be[be]->name, e.msg);
        g_op_fail = 1;
    }
    return h;
}
static void dev_free(int be, void *p) { if (p) g_be[be]->release(g_be[be], p); }
static void op_rc(int be, const char *op, int rc, const nd_err *e) {
    if (rc) { CHECK(rc == 0, "%s %s failed: %s", g_be[be]->name, op, e->msg); g_op_fail = 1; }
}

/* ---- comparisons: NaN/Inf first, then the metric, then where ---- */
static void same_bytes(const char *what, const void *a, const void *b, size_t n) {
    const uint8_t *x = a, *y = b;
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < n; i++) if (x[i] != y[i]) { if (!bad) first = i; bad++; }
    CHECK(bad == 0, "%s: %zu of %zu bytes differ, first at %zu: cpu 0x%02x cuda 0x%02x", what, bad, n, first,
          bad ? x[first] : 0, bad ? y[first] : 0);
}
/* a quantizer's codes (ncodes bytes), scales (nsf bytes) and statistics the same on both backends
 * (what: the op and its case); the copies freed */
static void same_quant(const char *what, uint8_t *codes[2], uint8_t *sf[2], const nd_qstats st[2], int64_t ncodes,
                       int64_t nsf) {
    char w[160];
    snprintf(w, sizeof w, "%s codes", what);
    same_bytes(w, codes[0], codes[1], (size_t)ncodes);
    snprintf(w, sizeof w, "%s scales", what);
    same_bytes(w, sf[0], sf[1], (size_t)nsf);
    CHECK(memcmp(&st[0], &st[1], sizeof st[0]) == 0,
          "%s stats: cpu {n %lld blocks %lld sat %lld nz %lld zs %lld 448 %lld nan %lld} "
          "cuda {n %lld blocks %lld sat %lld nz %lld zs %lld 448 %lld nan %lld}",
          what, (long long)st[0].n_elems, (long long)st[0].n_blocks, (long long)st[0].n_saturated,
          (long long)st[0].n_nonzero_blocks, (long long)st[0].n_zero_scale, (long long)st[0].n_scale_448,
          (long long)st[0].n_nan_scale, (long long)st[1].n_elems, (long long)st[1].n_blocks, (long long)st[1].n_saturated,
          (long long)st[1].n_nonzero_blocks, (long long)st[1].n_zero_scale, (long long)st[1].n_scale_448,
          (long long)st[1].n_nan_scale);
    for (int be = 0; be < 2; be++) { free(codes[be]); free(sf[be]); }
}
static void same_floats(const char *what, const float *a, const float *b, int64_t n) {
    int64_t bad = 0, first = 0;
    for (int64_t i = 0; i < n; i++) {
        const int eq = (a[i] != a[i] && b[i] != b[i]) || nd_f32_bits(a[i]) == nd_f32_bits(b[i]);
        if (!eq) { if (!bad) first = i; bad++; }
    }
    CHECK(bad == 0, "%s: %lld of %lld values differ, first at %lld: cpu %.9g cuda %.9g", what, (long long)bad,
          (long long)n, (long long)first, bad ? a[first] : 0.0, bad ? b[first] : 0.0);
}
/* Non-finite positions must agree; then rel-L2 over finite elements. */
static void close_l2(const char *what, const float *ref, const float *got, int64_t n, double tol) {
    double ee = 0, rr = 0, worst = 0;
    int64_t nf = 0, wi = 0;
    for (int64_t i = 0; i < n; i++) {
        const int fr = isfinite(ref[i]), fg = isfinite(got[i]);
        if (fr != fg || (!fr && (isnan(ref[i]) != isnan(got[i]) || (!isnan(ref[i]) && ref[i] != got[i])))) {
            if (!nf) wi = i;
            nf++;
            continue;
        }
        if (!fr) continue;
        const double d = (double)ref[i] - got[i];
        ee += d * d; rr += (double)ref[i] * ref[i];
        if (fabs(d) > worst) { worst = fabs(d); if (!nf) wi = i; }
    }
    CHECK(nf == 0, "%s: %lld non-finite mismatches, first at %lld: cpu %g cuda %g", what, (long long)nf,
          (long long)wi, ref[wi], got[wi]);
    const double rel = rr > 0 ? sqrt(ee / rr) : sqrt(ee);
    CHECK(rel <= tol, "%s: rel-L2 %.3g > %.3g (max abs err %.3g at %lld: cpu %.9g cuda %.9g)", what, rel, tol, worst,
          (long long)wi, ref[wi], got[wi]);
}
/* |ref - got| <= rtol*|ref| + atol element by element (non-finite must agree). */
static void close_elem(const char *what, const float *ref, const float *got, int64_t n, double rtol, double atol) {
    int64_t bad = 0, first = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (!isfinite(ref[i]) || !isfinite(got[i]))
            ok = (isnan(ref[i]) && isnan(got[i])) || ref[i] == got[i];
        else
            ok = fabs((double)ref[i] - got[i]) <= rtol * fabs((double)ref[i]) + atol;
        if (!ok) { if (!bad) first = i; bad++; }
    }
    CHECK(bad == 0, "%s: %lld of %lld elements beyond rel %.2g, first at %lld: cpu %.9g cuda %.9g", what,
          (long long)bad, (long long)n, rtol, (long long)first, bad ? ref[first] : 0.0, bad ? got[first] : 0.0);
}
/* |ref - got| <= ulps BF16 ulps of max(|ref|, |got|) element by element (non-finite must agree). */
static void close_bf16_ulps(const char *what, const float *ref, const float *got, int64_t n, double ulps) {
    int64_t bad = 0, first = 0;
    for (int64_t i = 0; i < n; i++) {
        int ok;
        if (!isfinite(ref[i]) || !isfinite(got[i])) {
            ok = (isnan(ref[i]) && isnan(got[i])) || ref[i] == got[i];
        } else {
            const double m = fmax(fabs((double)ref[i]), fabs((double)got[i]));
            const double ulp = m > 0 ? ldexp(1.0, ilogb(m) - 7) : 0.0;
            ok = fabs((double)ref[i] - got[i]) <= ulps * ulp;
        }
        if (!ok) { if (!bad) first = i; bad++; }
    }
    CHECK(bad == 0, "%s: %lld of %lld elements beyond %.0f BF16 ulps, first at %lld: cpu %.9g cuda %.9g", what,
          (long long)bad, (long long)n, ulps, (long long)first, bad ? ref[first] : 0.0, bad ? got[first] : 0.0);
}
static float max_abs(const float *x, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) if (fabsf(x[i]) > m) m = fabsf(x[i]);
    return m;
}

/* ---- one op, both backends: upload inputs, poison outputs, run, download ---- */
#define BOTH(be) for (int be = 0; be < 2; be++)

/* dequant_nvfp4 (blocks of 16, E4M3 scales, a global divisor) and dequant_mxfp4 (blocks of 32, E8M0 scales):
 * random codes and every scale byte (NaN scales too), bit-exact */
/* codes at byte offset 0 and 2 of their buffer: CUDA's NVFP4 decode loads 8-byte-aligned codes
 * 8 bytes at a time and others 2 at a time (cuda_dequant.cu), both must decode the same */
static void dequant_fp4(int64_t blk, const int64_t (*shapes)[2], size_t nshapes) {
    const char *op = blk == 16 ? "dequant_nvfp4" : "dequant_mxfp4";
    for (size_t s = 0; s < nshapes; s++)
        for (int64_t off = 0; off <= 2; off += 2) {
            const int64_t R = shapes[s][0], K = shapes[s][1];
            uint8_t *codes = rnd_bytes(R * K / 2 + off), *sf = rnd_bytes(R * K / blk);
            const float gdiv = blk == 16 ? (float)(500.0 + 5000.0 * rnd_uni()) : 0.0f;
            float *out[2];
            BOTH(be) {
                nd_err e = {0};
                void *cb = dev_put(be, codes, R * K / 2 + off), *f = dev_put(be, sf, R * K / blk);
                void *o = dev_poisoned(be, R * K * 4);
                const uint8_t *c = (const uint8_t *)cb + off;
                op_rc(be, op, blk == 16 ? g_be[be]->dequant_nvfp4(g_be[be], c, f, gdiv, R, K, o, &e)
                                        : g_be[be]->dequant_mxfp4(g_be[be], c, f, R, K, o, &e), &e);
                out[be] = dev_get(be, o, R * K * 4);
                dev_free(be, cb); dev_free(be, f); dev_free(be, o);
            }
            char w[96];
            snprintf(w, sizeof w, "%s R=%lld K=%lld codes at offset %lld", op, (long long)R, (long long)K, (long long)off);
            same_floats(w, out[0], out[1], R * K);
            free(out[0]); free(out[1]); free(codes); free(sf);
        }
}
static void case_dequant_nvfp4(void) {
    static const int64_t shapes[][2] = {{1, 16}, {7, 48}, {129, 208}, {64, 1040}, {3, 7168}, {300, 7168}};
    dequant_fp4(16, shapes, sizeof shapes / sizeof *shapes);
}
static void case_dequant_mxfp4(void) {
    static const int64_t shapes[][2] = {{1, 32}, {5, 96}, {67, 544}};
    dequant_fp4(32, shapes, sizeof shapes / sizeof *shapes);
}

static void case_dequant_fp8(void) {
    static const int shapes[][4] = {{130, 200, 128, 128}, {7, 33, 3, 5}, {64, 64, 1, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int kind = ND_FP8_SCALE_TENSOR; kind <= ND_FP8_SCALE_BLOCK_E8M0; kind++) {
            const int64_t R = shapes[s][0], K = shapes[s][1];
            const int bn = shapes[s][2], bk = shapes[s][3];
            const int64_t nsc = kind == ND_FP8_SCALE_TENSOR ? 1 : kind == ND_FP8_SCALE_CHANNEL ? R
                                : ((R + bn - 1) / bn) * ((K + bk - 1) / bk);
            uint8_t *w = rnd_bytes(R * K);
            size_t sbytes = kind == ND_FP8_SCALE_BLOCK_E8M0 ? (size_t)nsc : (size_t)nsc * 4;
            void *sc = malloc(sbytes);
            for (int64_t i = 0; i < nsc; i++) {
                if (kind == ND_FP8_SCALE_BLOCK_E8M0) ((uint8_t *)sc)[i] = (uint8_t)(110 + rnd_int(30));
                else ((float *)sc)[i] = (float)(1e-4 + rnd_uni() * 1e-2);
            }
            float *out[2];
            BOTH(be) {
                nd_err e = {0};
                void *dw = dev_put(be, w, R * K), *ds = dev_put(be, sc, sbytes), *o = dev_poisoned(be, R * K * 4);
                op_rc(be, "dequant_fp8", g_be[be]->dequant_fp8(g_be[be], dw, ds, kind, bn, bk, R, K, o, &e), &e);
                out[be] = dev_get(be, o, R * K * 4);
                dev_free(be, dw); dev_free(be, ds); dev_free(be, o);
            }
            char wh[96];
            snprintf(wh, sizeof wh, "dequant_fp8 kind=%d R=%lld K=%lld bn=%d bk=%d", kind, (long long)R, (long long)K,
                     bn, bk);
            same_floats(wh, out[0], out[1], R * K);
            free(out[0]); free(out[1]); free(w); free(sc);
        }
}

static void case_to_f32(void) {
    const nd_dtype dts[] = {ND_DT_BF16, ND_DT_F16, ND_DT_F32};
    const int64_t n = 4099;
    for (int d = 0; d < 3; d++) {
        const size_t es = nd_dtype_size(dts[d]);
        uint8_t *src = rnd_bytes(n * (int64_t)es);
        float *out[2];
        BOTH(be) {
            nd_err e = {0};
            void *s = dev_put(be, src, n * es), *o = dev_poisoned(be, n * 4);
            op_rc(be, "to_f32", g_be[be]->to_f32(g_be[be], s, dts[d], n, o, &e), &e);
            out[be] = dev_get(be, o, n * 4);
            dev_free(be, s); dev_free(be, o);
        }
        char w[64];
        snprintf(w, sizeof w, "to_f32 dtype=%d n=%lld", (int)dts[d], (long long)n);
        same_floats(w, out[0], out[1], n);
        free(out[0]); free(out[1]); free(src);
    }
}

/* Activations with zero blocks, outlier blocks, and (when asked) NaN and Inf elements. */
static float *activations(int64_t R, int64_t K, int specials) {
    float *x = rnd_floats(R * K, 1.0f);
    for (int64_t b = 0; b < R * K / 16; b++) {
        const int u = rnd_int(40);
        if (u == 0) for (int j = 0; j < 16; j++) x[b * 16 + j] = 0.0f;
        else if (u == 1) for (int j = 0; j < 16; j++) x[b * 16 + j] *= 300.0f;
        else if (u == 2) for (int j = 0; j < 16; j++) x[b * 16 + j] *= 1e-4f;
        else if (specials && u == 3) x[b * 16 + rnd_int(16)] = NAN;
        else if (specials && u == 4) x[b * 16 + rnd_int(16)] = (rnd_int(2) ? 1 : -1) * INFINITY;
    }
    return x;
}

/* quant_nvfp4 (blk 16, global multiplier g) or quant_mxfp4 (blk 32, g unused) of x [R, K] under rule sem
 * on both backends: codes, scales and statistics the same (what: the op and its case) */
static void quant_fp4_both(const char *what, int64_t blk, const float *x, float g, int sem, int64_t R, int64_t K) {
    uint8_t *codes[2], *sf[2];
    nd_qstats st[2];
    BOTH(be) {
        nd_err e = {0};
        void *dx = dev_put(be, x, R * K * 4), *dc = dev_poisoned(be, R * K / 2), *ds = dev_poisoned(be, R * K / blk);
        memset(&st[be], 0x11 * (be + 1), sizeof st[be]);
        op_rc(be, blk == 16 ? "quant_nvfp4" : "quant_mxfp4",
              blk == 16 ? g_be[be]->quant_nvfp4(g_be[be], dx, g, sem, R, K, dc, ds, &st[be], &e)
                        : g_be[be]->quant_mxfp4(g_be[be], dx, sem, R, K, dc, ds, &st[be], &e), &e);
        codes[be] = dev_get(be, dc, R * K / 2);
        sf[be] = dev_get(be, ds, R * K / blk);
        dev_free(be, dx); dev_free(be, dc); dev_free(be, ds);
    }
    same_quant(what, codes, sf, st, R * K / 2, R * K / blk);
}

static void case_quant_nvfp4(void) {
    static const int64_t shapes[][2] = {{1, 16}, {5, 48}, {33, 208}, {128, 1040}, {4, 7168}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int sem = ND_QSEM_KERNEL; sem <= ND_QSEM_CT; sem++)
            for (int gk = 0; gk < 4; gk++) {
                const int64_t R = shapes[s][0], K = shapes[s][1];
                float *x = activations(R, K, gk == 3);
                const float amax = max_abs(x, R * K);
                /* healthy multiplier; 64x too large (saturation); 1e-4x (scale underflow); NaN */
                const float g = gk == 0 ? 2688.0f / amax : gk == 1 ? 64.0f * 2688.0f / amax
                               : gk == 2 ? 1e-4f * 2688.0f / amax : (s % 2 ? NAN : 2688.0f / 300.0f);
                char w[128];
                snprintf(w, sizeof w, "quant_nvfp4 sem=%d g=%g R=%lld K=%lld", sem, g, (long long)R, (long long)K);
                quant_fp4_both(w, 16, x, g, sem, R, K);
                free(x);
            }
}

/* MXFP4 blocks of 32 under every block-scale rule: normal activations (with all-zero, x300 and
 * x1e-4 blocks), tiny (subnormal amax), huge (amax past 2^127 * 6: the ceiling's infinite scale),
 * values on the E2M1 midpoints (where RNE and ties-away differ), and NaN/Inf elements. */
static float *mx_inputs(int64_t R, int64_t K, int kind) {
    if (kind <= 1) return activations(R, K, kind == 1);
    float *x = rnd_floats(R * K, 1.0f);
    for (int64_t i = 0; i < R * K; i++) {
        if (kind == 2) x[i] *= 1e-39f;
        else if (kind == 3) x[i] *= 3e38f;
        else x[i] = (rnd_int(2) ? 1.0f : -1.0f) * 0.25f * (float)rnd_int(33) * ldexpf(1.0f, rnd_int(9) - 4);
    }
    return x;
}

static void case_quant_mxfp4(void) {
    static const int64_t shapes[][2] = {{1, 32}, {5, 96}, {33, 224}, {128, 1056}, {4, 7168}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int sem = 0; sem < ND_MXSEM_N; sem++)
            for (int kind = 0; kind < 5; kind++) {
                const int64_t R = shapes[s][0], K = shapes[s][1];
                float *x = mx_inputs(R, K, kind);
                char w[128];
                snprintf(w, sizeof w, "quant_mxfp4 sem=%d inputs=%d R=%lld K=%lld", sem, kind, (long long)R, (long long)K);
                quant_fp4_both(w, 32, x, 0.0f, sem, R, K);
                free(x);
            }
}

static void case_fake_quant_fp8(void) {
    static const int64_t shapes[][3] = {{3, 512, 128}, {5, 200, 64}, {9, 37, 7}, {2, 100, 128}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int pow2 = 0; pow2 < 2; pow2++) {
            const int64_t R = shapes[s][0], K = shapes[s][1];
            const int G = (int)shapes[s][2];
            float *x = rnd_floats(R * K, 3.0f);
            for (int64_t c = 0; c < K && c < G; c++) x[c] = 0.0f; /* an all-zero group */
            x[R * K - 1] = NAN;
            float *out[2];
            BOTH(be) {
                nd_err e = {0};
                void *dx = dev_put(be, x, R * K * 4), *o = dev_poisoned(be, R * K * 4);
                op_rc(be, "fake_quant_fp8", g_be[be]->fake_quant_fp8(g_be[be], dx, R, K, G, pow2, o, &e), &e);
                out[be] = dev_get(be, o, R * K * 4);
                /* in place too */
                op_rc(be, "fake_quant_fp8 (in place)", g_be[be]->fake_quant_fp8(g_be[be], dx, R, K, G, pow2, dx, &e), &e);
                float *inpl = dev_get(be, dx, R * K * 4);
                char w[96];
                snprintf(w, sizeof w, "fake_quant_fp8 in place %s R=%lld K=%lld", g_be[be]->name, (long long)R,
                         (long long)K);
                same_floats(w, out[be], inpl, R * K);
                free(inpl);
                dev_free(be, dx); dev_free(be, o);
            }
            char w[96];
            snprintf(w, sizeof w, "fake_quant_fp8 R=%lld K=%lld group=%d pow2=%d", (long long)R, (long long)K, G, pow2);
            same_floats(w, out[0], out[1], R * K);
            free(out[0]); free(out[1]); free(x);
        }
}

/* kv_fp8: the FP8 KV cache round trip with per-tensor scales; values spread past 448*s and into
 * the e4m3 subnormals, NaN and Inf included; consistent (s, s), ignored (1, 1), write-only (s, 1)
 * and twice (s, s^2) scale pairs. Bit-exact across backends, and against the e4m3 grid itself. */
static void case_kv_fp8(void) {
    const int64_t n = 4096 + rnd_int(4096);
    const float s = 0.01f + (float)rnd_int(1000) / 250.0f;
    const float pairs[][2] = {{s, s}, {1.0f, 1.0f}, {s, 1.0f}, {s, s * s}, {1.0f / s, 1.0f / s}};
    float *x = rnd_floats(n, 300.0f * s);
    for (int64_t i = 0; i < 64; i++) x[i] *= 1e-4f; /* near zero: subnormal codes */
    x[64] = NAN; x[65] = INFINITY; x[66] = -INFINITY; x[67] = 0.0f; x[68] = -0.0f;
    for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++) {
        const float ws = pairs[p][0], rs = pairs[p][1];
        float *out[2];
        BOTH(be) {
            nd_err e = {0};
            void *dx = dev_put(be, x, n * 4), *o = dev_poisoned(be, n * 4);
            op_rc(be, "kv_fp8", g_be[be]->kv_fp8(g_be[be], dx, n, ws, rs, o, &e), &e);
            out[be] = dev_get(be, o, n * 4);
            op_rc(be, "kv_fp8 (in place)", g_be[be]->kv_fp8(g_be[be], dx, n, ws, rs, dx, &e), &e);
            float *inpl = dev_get(be, dx, n * 4);
            same_floats("kv_fp8 in place", out[be], inpl, n);
            free(inpl);
            dev_free(be, dx); dev_free(be, o);
        }
        char w[96];
        snprintf(w, sizeof w, "kv_fp8 write %.6g read %.6g", ws, rs);
        same_floats(w, out[0], out[1], n);
        /* the definition, independently: a finite |x/ws| <= 448 lands on the nearest e4m3 value
         * (within half a step: 2^-4 relative in the normals, 2^-10 absolute in the subnormals), a
         * larger one (Inf too) on ±448, NaN stays NaN; then times rs */
        int bad = 0, sat = 0;
        for (int64_t i = 0; i < n; i++) {
            const float y = x[i] / ws, got = out[0][i] / rs;
            if (y != y) { bad += got == got; continue; }
            if (fabsf(y) >= ND_E4M3_MAX) {
                sat++;
                bad += fabsf(out[0][i]) != ND_E4M3_MAX * rs || (out[0][i] < 0) != (y < 0);
                continue;
            }
            const float tol = fabsf(y) < 0.015625f ? 1.0f / 1024.0f : fabsf(y) / 16.0f;
            bad += !(fabsf(got - y) <= tol * 1.0001f);
        }
        CHECK(bad == 0, "%s: %d values off the e4m3 grid definition", w, bad);
        if (p == 0) CHECK(sat > 2, "%s: only %d values past 448 (the case must exercise saturation)", w, sat);
        free(out[0]); free(out[1]);
    }
    free(x);
}

static void case_swizzle(void) {
    static const int64_t shapes[][2] = {{1, 16}, {130, 64}, {257, 80}, {128, 7168}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t R = shapes[s][0], K = shapes[s][1], nl = R * K / 16, nz = nd_sf_swizzled_bytes(R, K);
        uint8_t *lin = rnd_bytes(nl), *swz[2], *back[2];
        BOTH(be) {
            nd_err e = {0};
            void *dl = dev_put(be, lin, nl), *dz = dev_poisoned(be, nz), *db = dev_poisoned(be, nl);
            op_rc(be, "swizzle_sf", g_be[be]->swizzle_sf(g_be[be], dl, R, K, dz, &e), &e);
            op_rc(be, "unswizzle_sf", g_be[be]->unswizzle_sf(g_be[be], dz, R, K, db, &e), &e);
            swz[be] = dev_get(be, dz, nz);
            back[be] = dev_get(be, db, nl);
            dev_free(be, dl); dev_free(be, dz); dev_free(be, db);
        }
        char w[96];
        snprintf(w, sizeof w, "swizzle_sf R=%lld K=%lld", (long long)R, (long long)K);
        same_bytes(w, swz[0], swz[1], nz);
        snprintf(w, sizeof w, "unswizzle_sf(swizzle_sf) cuda R=%lld K=%lld", (long long)R, (long long)K);
        same_bytes(w, lin, back[1], nl);
        snprintf(w, sizeof w, "unswizzle_sf R=%lld K=%lld", (long long)R, (long long)K);
        same_bytes(w, back[0], back[1], nl);
        BOTH(be) { free(swz[be]); free(back[be]); }
        free(lin);
    }
}

static void case_gemm(void) {
    static const int64_t shapes[][4] = {{1, 7, 16, 1}, {5, 33, 48, 1}, {64, 130, 208, 1}, {129, 257, 1040, 1},
                                        {3, 17, 64, 4}, {33, 64, 112, 8}, {70, 65, 37, 1}, {9, 5, 21, 3}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int mode = ND_GEMM_F32; mode <= ND_GEMM_ORDERED; mode++) {
            const int exact = mode == ND_GEMM_BF16_EXACT;
            const int64_t M = shapes[s][0], N = shapes[s][1], K = shapes[s][2], G = shapes[s][3];
            float *x = malloc((size_t)(M * G * K) * 4), *w = malloc((size_t)(G * N * K) * 4);
            for (int64_t i = 0; i < M * G * K; i++) x[i] = exact ? rnd_fp4_value() : rnd_normal();
            for (int64_t i = 0; i < G * N * K; i++) w[i] = exact ? rnd_fp4_value() : rnd_normal();
            const float alpha = (float)(0.25 + rnd_uni());
            float *y[2];
            BOTH(be) {
                nd_err e = {0};
                void *dx = dev_put(be, x, M * G * K * 4), *dw = dev_put(be, w, G * N * K * 4);
                void *dy = dev_poisoned(be, M * G * N * 4);
                if (G == 1)
                    op_rc(be, "gemm", g_be[be]->gemm(g_be[be], dx, dw, dy, M, N, K, alpha, mode, &e), &e);
                else
                    op_rc(be, "gemm_grouped",
                          g_be[be]->gemm_grouped(g_be[be], dx, dw, dy, M, G, N, K, alpha, mode, &e), &e);
                y[be] = dev_get(be, dy, M * G * N * 4);
                dev_free(be, dx); dev_free(be, dw); dev_free(be, dy);
            }
            char wh[128];
            snprintf(wh, sizeof wh, "%s M=%lld G=%lld N=%lld K=%lld mode=%d", G == 1 ? "gemm" : "gemm_grouped",
                     (long long)M, (long long)G, (long long)N, (long long)K, mode);
            /* ordered: the CPU's order of every sum, so the same bits; else cuBLAS's order */
            if (mode == ND_GEMM_ORDERED) same_bytes(wh, y[0], y[1], M * G * N * 4);
            else close_l2(wh, y[0], y[1], M * G * N, TOL_GEMM);
            free(y[0]); free(y[1]); free(x); free(w);
        }
}

static void case_elementwise(void) {
    const int64_t n = 10007;
    /* round_bf16 on arbitrary bit patterns (NaN, Inf, subnormals, ties) */
    uint32_t *bits = (uint32_t *)rnd_bytes(n * 4);
    float *r[2];
    BOTH(be) {
        nd_err e = {0};
        void *d = dev_put(be, bits, n * 4);
        op_rc(be, "round_bf16", g_be[be]->round_bf16(g_be[be], d, n, &e), &e);
        r[be] = dev_get(be, d, n * 4);
        dev_free(be, d);
    }
    same_bytes("round_bf16 (bits)", r[0], r[1], n * 4);
    free(r[0]); free(r[1]);
    /* cast_f16_scale on the same bit patterns (beyond 65504: Inf before the scale), and on values
     * around the F16 range */
    {
        float *v = rnd_floats(n, 5e4f);
        const float scale = 1e-3f * (1.0f + (float)rnd_int(1000) / 1000.0f);
        for (int src = 0; src < 2; src++) {
            BOTH(be) {
                nd_err e = {0};
                void *d = dev_put(be, src ? (const void *)v : (const void *)bits, n * 4);
                op_rc(be, "cast_f16_scale", g_be[be]->cast_f16_scale(g_be[be], d, n, scale, &e), &e);
                r[be] = dev_get(be, d, n * 4);
                dev_free(be, d);
            }
            same_floats(src ? "cast_f16_scale (sigma 5e4)" : "cast_f16_scale (bits)", r[0], r[1], n);
            if (src) {
                int bad = 0, inf = 0;
                for (int64_t i = 0; i < n; i++) {
                    bad += nd_f32_bits(r[0][i]) != nd_f32_bits(nd_f16_round(v[i]) * scale);
                    inf += isinf(r[0][i]) != 0; /* glibc's isinf is -1 for -Inf */
                }
                CHECK(bad == 0, "cast_f16_scale: %d values differ from f16(x) * scale", bad);
                CHECK(inf > 0 && inf < n, "cast_f16_scale: %d of %lld values past the F16 range became Inf", inf, (long long)n);
            }
            free(r[0]); free(r[1]);
        }
        free(v);
    }
    free(bits);
    /* add */
    float *a = rnd_floats(n, 2.0f), *c = rnd_floats(n, 1e-3f);
    /* scale: one FP32 product, bit-exact, and the product itself */
    {
        const float s = 1.0f + 100.0f * (float)rnd_int(1000) / 1000.0f;
        BOTH(be) {
            nd_err e = {0};
            void *d = dev_put(be, a, n * 4);
            op_rc(be, "scale", g_be[be]->scale(g_be[be], d, n, s, &e), &e);
            r[be] = dev_get(be, d, n * 4);
            dev_free(be, d);
        }
        same_floats("scale", r[0], r[1], n);
        int bad = 0;
        for (int64_t i = 0; i < n; i++) bad += nd_f32_bits(r[0][i]) != nd_f32_bits(a[i] * s);
        CHECK(bad == 0, "scale: %d values differ from x * %g", bad, (double)s);
        free(r[0]); free(r[1]);
    }
    BOTH(be) {
        nd_err e = {0};
        void *dy = dev_put(be, a, n * 4), *dx = dev_put(be, c, n * 4);
        op_rc(be, "add", g_be[be]->add(g_be[be], dy, dx, n, &e), &e);
        r[be] = dev_get(be, dy, n * 4);
        dev_free(be, dy); dev_free(be, dx);
    }
    same_floats("add", r[0], r[1], n);
    free(r[0]); free(r[1]);
    /* add_bias: a row vector added to every row */
    {
        const int64_t cols = 1 + rnd_int(97), rows = n / cols;
        float *bias = rnd_floats(cols, 3.0f);
        BOTH(be) {
            nd_err e = {0};
            void *dy = dev_put(be, a, (size_t)(rows * cols) * 4), *db = dev_put(be, bias, (size_t)cols * 4);
            op_rc(be, "add_bias", g_be[be]->add_bias(g_be[be], dy, db, rows, cols, &e), &e);
            r[be] = dev_get(be, dy, (size_t)(rows * cols) * 4);
            dev_free(be, dy); dev_free(be, db);
        }
        same_floats("add_bias", r[0], r[1], rows * cols);
        /* and the value itself, against the definition */
        int bad = 0;
        for (int64_t i = 0; i < rows * cols; i++) bad += r[0][i] != a[i] + bias[i % cols];
        CHECK(bad == 0, "add_bias: %d elements differ from y + bias[col]", bad);
        free(r[0]); free(r[1]); free(bias);
    }
    /* mul_cols: every row times a column vector (AWQ's pre_quant_scale) */
    {
        const int64_t cols = 1 + rnd_int(97), rows = n / cols;
        float *sc = rnd_floats(cols, 3.0f);
        BOTH(be) {
            nd_err e = {0};
            void *dx = dev_put(be, a, (size_t)(rows * cols) * 4), *ds = dev_put(be, sc, (size_t)cols * 4);
            op_rc(be, "mul_cols", g_be[be]->mul_cols(g_be[be], dx, ds, rows, cols, dx, &e), &e);
            r[be] = dev_get(be, dx, (size_t)(rows * cols) * 4);
            dev_free(be, dx); dev_free(be, ds);
        }
        same_floats("mul_cols", r[0], r[1], rows * cols);
        int bad = 0;
        for (int64_t i = 0; i < rows * cols; i++) bad += r[0][i] != a[i] * sc[i % cols];
        CHECK(bad == 0, "mul_cols: %d elements differ from x * s[col]", bad);
        free(r[0]); free(r[1]); free(sc);
    }
    /* swiglu, with and without the clamp; gates spread over [-30, 30] */
    for (int lim = 0; lim < 2; lim++)
        for (int bs = 0; bs < 2; bs++) { /* bs: silu rounded to BF16 first (transformers) */
            float *g = rnd_floats(n, 8.0f);
            BOTH(be) {
                nd_err e = {0};
                void *dg = dev_put(be, g, n * 4), *dv = dev_put(be, a, n * 4), *dh = dev_poisoned(be, n * 4);
                op_rc(be, "swiglu", g_be[be]->swiglu(g_be[be], dg, dv, n, lim ? 10.0f : 0.0f, bs, dh, &e), &e);
                r[be] = dev_get(be, dh, n * 4);
                dev_free(be, dg); dev_free(be, dv); dev_free(be, dh);
            }
            char wh[64];
            snprintf(wh, sizeof wh, "swiglu limit=%d bf16_steps=%d", lim ? 10 : 0, bs);
            if (bs) close_bf16_ulps(wh, r[0], r[1], n, TOL_BF16_STEP_ULPS);
            else close_elem(wh, r[0], r[1], n, TOL_TRANSC, 1e-30);
            free(r[0]); free(r[1]); free(g);
        }
    free(a); free(c);
    /* rmsnorm */
    static const int64_t shapes[][2] = {{1, 7}, {5, 512}, {33, 7168}, {3, 1536}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int hw = 0; hw < 2; hw++)
          for (int st = ND_NORM_FP32; st <= ND_NORM_RSQRT_BF16; st++) { /* nd_norm_steps */
            const int64_t R = shapes[s][0], D = shapes[s][1];
            float *x = rnd_floats(R * D, 3.0f), *w = rnd_floats(D, 1.0f);
            BOTH(be) {
                nd_err e = {0};
                void *dx = dev_put(be, x, R * D * 4), *dw = dev_put(be, w, D * 4), *dy = dev_poisoned(be, R * D * 4);
                op_rc(be, "rmsnorm", g_be[be]->rmsnorm(g_be[be], dx, hw ? dw : NULL, 1e-6f, R, D, st, dy, &e), &e);
                r[be] = dev_get(be, dy, R * D * 4);
                dev_free(be, dx); dev_free(be, dw); dev_free(be, dy);
            }
            char wh[96];
            snprintf(wh, sizeof wh, "rmsnorm R=%lld D=%lld weight=%d steps=%d", (long long)R, (long long)D, hw, st);
            if (st) close_bf16_ulps(wh, r[0], r[1], R * D, TOL_BF16_STEP_ULPS);
            else close_elem(wh, r[0], r[1], R * D, TOL_NORM, 1e-30);
            free(r[0]); free(r[1]); free(x); free(w);
        }
}

static void case_rope(void) {
    static const int64_t shapes[][5] = {{5, 3, 64, 0, 64}, {7, 4, 512, 448, 64}, {2, 1, 18, 4, 10},
                                           {3, 2, 16, 0, 8}}; /* partial rotary on the first dims (GLM-4.x) */
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (int mode = 0; mode < 12; mode++) { /* interleaved x inverse x nd_rope_steps */
            const int64_t R = shapes[s][0], H = shapes[s][1], D = shapes[s][2], off = shapes[s][3], rd = shapes[s][4];
            const int inter = mode & 1, inv = (mode >> 1) & 1, st = mode >> 2;
            /* odd shapes: cos/sin times YaRN's attention factor (gpt-oss: 0.1 ln 32 + 1) */
            const float msc = s % 2 ? 1.3465736f : 1.0f;
            float *x = rnd_floats(R * H * D, 1.0f), *f = malloc((size_t)rd / 2 * 4);
            int32_t *pos = malloc((size_t)R * 4);
            for (int64_t i = 0; i < R; i++) pos[i] = rnd_int(65536);
            for (int64_t i = 0; i < rd / 2; i++) f[i] = (float)pow(160000.0, -2.0 * (double)i / (double)rd);
            float *r[2];
            BOTH(be) {
                nd_err e = {0};
                void *dx = dev_put(be, x, R * H * D * 4);
                op_rc(be, "rope", g_be[be]->rope(g_be[be], dx, R, H, D, off, rd, pos, f, inter, inv, st, msc, &e), &e);
                r[be] = dev_get(be, dx, R * H * D * 4);
                dev_free(be, dx);
            }
            char wh[128];
            snprintf(wh, sizeof wh, "rope R=%lld H=%lld D=%lld slice=[%lld,+%lld) interleaved=%d inverse=%d steps=%d mscale=%g",
                     (long long)R, (long long)H, (long long)D, (long long)off, (long long)rd, inter, inv, st, (double)msc);
            /* BF16 cos/sin: a cosf/sinf last-bit difference can move their rounding by one BF16 ulp */
            close_elem(wh, r[0], r[1], R * H * D, 0.0, (st ? TOL_BF16_STEP : TOL_ROPE) * msc * max_abs(x, R * H * D));
            /* outside the rotary slice nothing may change */
            int64_t moved = 0;
            for (int64_t q = 0; q < R * H * D; q++) {
                const int64_t c = q % D;
                if ((c < off || c >= off + rd) && nd_f32_bits(r[1][q]) != nd_f32_bits(x[q])) moved++;
            }
            CHECK(moved == 0, "%s: %lld values outside the slice changed on cuda", wh, (long long)moved);
            free(r[0]); free(r[1]); free(x); free(f); free(pos);
        }
}

static void case_attention(void) {
    /* t, s, hq, hkv, d, dv, window, sinks, first qpos */
    static const int64_t cases[][9] = {{5, 9, 4, 2, 24, 16, 0, 0, 4}, {5, 9, 4, 2, 24, 16, 3, 1, 4},
                                       {33, 70, 8, 1, 64, 64, 16, 1, 37}, {4, 6, 2, 2, 16, 8, 0, 1, -2},
                                       {17, 129, 16, 1, 512, 512, 128, 1, 112}};
    for (size_t c = 0; c < 3 * sizeof cases / sizeof *cases; c++) {
        /* transformers' BF16 scores and probabilities; 2: also gpt-oss's max subtracted in BF16 */
        const int bs = (int)(c % 3);
        const int64_t *cs = cases[c / 3];
        const int64_t T = cs[0], S = cs[1], HQ = cs[2], HKV = cs[3], D = cs[4], DV = cs[5], W = cs[6], q0 = cs[8];
        const int sinks_on = (int)cs[7];
        float *q = rnd_floats(T * HQ * D, 1.0f), *k = rnd_floats(S * HKV * D, 1.0f), *v = rnd_floats(S * HKV * DV, 1.0f);
        float *sinks = rnd_floats(HQ, 1.0f);
        int32_t *qp = malloc((size_t)T * 4), *kp = malloc((size_t)S * 4);
        for (int64_t i = 0; i < T; i++) qp[i] = (int32_t)(q0 + i); /* q0 < 0: early queries see no key */
        for (int64_t j = 0; j < S; j++) kp[j] = (int32_t)j;
        const float scale = 1.0f / sqrtf((float)D);
        float *o[2];
        BOTH(be) {
            nd_err e = {0};
            void *dq = dev_put(be, q, T * HQ * D * 4), *dk = dev_put(be, k, S * HKV * D * 4);
            void *dv = dev_put(be, v, S * HKV * DV * 4), *dout = dev_poisoned(be, T * HQ * DV * 4);
            op_rc(be, "attention", g_be[be]->attention(g_be[be], dq, dk, dv, T, S, HQ, HKV, D, DV, qp, kp, W, scale,
                                                       sinks_on ? sinks : NULL, bs, dout, &e), &e);
            o[be] = dev_get(be, dout, T * HQ * DV * 4);
            dev_free(be, dq); dev_free(be, dk); dev_free(be, dv); dev_free(be, dout);
        }
        char wh[128];
        snprintf(wh, sizeof wh, "attention t=%lld s=%lld hq=%lld hkv=%lld d=%lld dv=%lld window=%lld sinks=%d bf16_steps=%d",
                 (long long)T, (long long)S, (long long)HQ, (long long)HKV, (long long)D, (long long)DV, (long long)W,
                 sinks_on, bs);
        close_l2(wh, o[0], o[1], T * HQ * DV, bs ? TOL_BF16_STEP : TOL_MIX);
        if (q0 < 0) { /* rows with no visible key are exact zeros on both */
            int64_t nz = 0;
            for (int64_t i = 0; i < T && qp[i] < 0; i++)
                for (int64_t z = 0; z < HQ * DV; z++) nz += o[1][i * HQ * DV + z] != 0.0f;
            CHECK(nz == 0, "%s: %lld non-zero outputs for queries that see no key", wh, (long long)nz);
        }
        free(o[0]); free(o[1]); free(q); free(k); free(v); free(sinks); free(qp); free(kp);
    }
}

static void case_hc(void) {
    static const int64_t shapes[][3] = {{1, 4, 64}, {3, 4, 512}, {17, 4, 7168}, {5, 2, 48}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        const int64_t T = shapes[s][0], n = shapes[s][1], dm = shapes[s][2], mix = (2 + n) * n, nd = n * dm;
        float *X = rnd_floats(T * nd, 1.0f), *fn = rnd_floats(mix * nd, (float)(1.0 / sqrt((double)nd)));
        float *base = rnd_floats(mix, 0.5f), *y = rnd_floats(T * dm, 1.0f);
        const float scale[3] = {(float)(0.5 + rnd_uni()), (float)(0.5 + rnd_uni()), (float)(0.5 + rnd_uni())};
        float *u[2], *post[2], *comb[2], *xo[2], *xi[2], *uh[2], *xb[2];
        BOTH(be) {
            nd_err e = {0};
            void *dX = dev_put(be, X, T * nd * 4), *dfn = dev_put(be, fn, mix * nd * 4), *db = dev_put(be, base, mix * 4);
            void *du = dev_poisoned(be, T * dm * 4), *dp = dev_poisoned(be, T * n * 4), *dc = dev_poisoned(be, T * n * n * 4);
            void *dy = dev_put(be, y, T * dm * 4), *dxo = dev_poisoned(be, T * nd * 4), *duh = dev_poisoned(be, T * dm * 4);
            op_rc(be, "hc_pre", g_be[be]->hc_pre(g_be[be], dX, dfn, db, scale, T, n, dm, 20, 1e-6f, 1e-6f, du, dp, dc, &e), &e);
            u[be] = dev_get(be, du, T * dm * 4);
            post[be] = dev_get(be, dp, T * n * 4);
            comb[be] = dev_get(be, dc, T * n * n * 4);
            /* hc_post on the CPU's gates for both, so the check isolates hc_post itself */
            void *dp0 = dev_put(be, post[0], T * n * 4), *dc0 = dev_put(be, comb[0], T * n * n * 4);
            op_rc(be, "hc_post bf16_steps", g_be[be]->hc_post(g_be[be], dX, dy, dp0, dc0, T, n, dm, 1, dxo, &e), &e);
            xb[be] = dev_get(be, dxo, T * nd * 4);
            op_rc(be, "hc_post", g_be[be]->hc_post(g_be[be], dX, dy, dp0, dc0, T, n, dm, 0, dxo, &e), &e);
            xo[be] = dev_get(be, dxo, T * nd * 4);
            op_rc(be, "hc_post (in place)", g_be[be]->hc_post(g_be[be], dX, dy, dp0, dc0, T, n, dm, 0, dX, &e), &e);
            xi[be] = dev_get(be, dX, T * nd * 4);
            void *dX2 = dev_put(be, X, T * nd * 4);
            op_rc(be, "hc_head", g_be[be]->hc_head(g_be[be], dX2, dfn, db, scale, T, n, dm, 1e-6f, 1e-6f, duh, &e), &e);
            uh[be] = dev_get(be, duh, T * dm * 4);
            dev_free(be, dX); dev_free(be, dX2); dev_free(be, dfn); dev_free(be, db); dev_free(be, du);
            dev_free(be, dp); dev_free(be, dc); dev_free(be, dy); dev_free(be, dxo); dev_free(be, duh);
            dev_free(be, dp0); dev_free(be, dc0);
        }
        char wh[128];
        snprintf(wh, sizeof wh, "hc_pre t=%lld n=%lld dm=%lld u", (long long)T, (long long)n, (long long)dm);
        close_l2(wh, u[0], u[1], T * dm, TOL_MIX);
        snprintf(wh, sizeof wh, "hc_pre t=%lld n=%lld dm=%lld post", (long long)T, (long long)n, (long long)dm);
        close_l2(wh, post[0], post[1], T * n, TOL_MIX);
        snprintf(wh, sizeof wh, "hc_pre t=%lld n=%lld dm=%lld comb", (long long)T, (long long)n, (long long)dm);
        close_l2(wh, comb[0], comb[1], T * n * n, TOL_MIX);
        snprintf(wh, sizeof wh, "hc_post t=%lld n=%lld dm=%lld", (long long)T, (long long)n, (long long)dm);
        same_floats(wh, xo[0], xo[1], T * nd);
        snprintf(wh, sizeof wh, "hc_post in place t=%lld n=%lld dm=%lld", (long long)T, (long long)n, (long long)dm);
        same_floats(wh, xo[0], xi[1], T * nd);
        snprintf(wh, sizeof wh, "hc_post bf16_steps t=%lld n=%lld dm=%lld", (long long)T, (long long)n, (long long)dm);
        same_floats(wh, xb[0], xb[1], T * nd); /* the same single-rounded operations in the same order */
        snprintf(wh, sizeof wh, "hc_head t=%lld n=%lld dm=%lld", (long long)T, (long long)n, (long long)dm);
        close_l2(wh, uh[0], uh[1], T * dm, TOL_MIX);
        BOTH(be) { free(u[be]); free(post[be]); free(comb[be]); free(xo[be]); free(xi[be]); free(uh[be]); free(xb[be]); }
        free(X); free(fn); free(base); free(y);
    }
}

/* Exact (double) selection score, to tell a near tie from a wrong pick. */
static double sel_exact(const float *lg, const float *bias, int E, int x, int func) {
    double s;
    if (func == ND_SCORE_SOFTMAX) {
        double mx = -INFINITY, sum = 0;
        for (int i = 0; i < E; i++) if (lg[i] > mx) mx = lg[i];
        for (int i = 0; i < E; i++) sum += exp(lg[i] - mx);
        s = exp(lg[x] - mx) / sum;
    } else if (func == ND_SCORE_SIGMOID) s = 1.0 / (1.0 + exp(-(double)lg[x]));
    else s = sqrt(lg[x] > 20.0f ? (double)lg[x] : log1p(exp((double)lg[x])));
    return s + (bias ? bias[x] : 0.0);
}

static void case_router(void) {
    /* E, K, func, groups, topk_group, bias, norm */
    static const int cases[][7] = {{16, 1, ND_SCORE_SOFTMAX, 0, 0, 0, 0}, {64, 6, ND_SCORE_SOFTMAX, 0, 0, 0, 1},
                                   {256, 8, ND_SCORE_SIGMOID, 8, 4, 1, 1}, {256, 8, ND_SCORE_SQRTSOFTPLUS, 0, 0, 1, 1},
                                   {384, 6, ND_SCORE_SQRTSOFTPLUS, 0, 0, 0, 1}, {37, 3, ND_SCORE_SIGMOID, 0, 0, 1, 0}};
    const int64_t T = 67;
    for (size_t c2 = 0; c2 < 2 * sizeof cases / sizeof *cases; c2++) {
        const size_t c = c2 / 2;
        /* odd c2: transformers' BF16 score and weight steps (the logits as BF16 values, as they come) */
        nd_router_cfg cfg = {cases[c][0], cases[c][1], cases[c][2], cases[c][3], cases[c][4], cases[c][6], 2.5f, (int)(c2 & 1)};
        const int E = cfg.n_experts, K = cfg.top_k;
        float *lg = rnd_floats(T * E, 2.0f), *bias = rnd_floats(E, 0.1f);
        for (int x = 0; x < E; x++) lg[x] = 25.0f + 0.5f * (float)(x % 5); /* softplus's x > 20 branch */
        if (cfg.bf16_steps) for (int64_t q = 0; q < T * E; q++) lg[q] = nd_bf16_round(lg[q]);
        int32_t *idx[2];
        float *w[2];
        BOTH(be) {
            nd_err e = {0};
            void *dl = dev_put(be, lg, T * E * 4), *db = dev_put(be, bias, E * 4);
            void *di = dev_poisoned(be, T * K * 4), *dw = dev_poisoned(be, T * K * 4);
            op_rc(be, "router_topk", g_be[be]->router_topk(g_be[be], dl, cases[c][5] ? db : NULL, T, &cfg, di, dw, &e), &e);
            idx[be] = dev_get(be, di, T * K * 4);
            w[be] = dev_get(be, dw, T * K * 4);
            dev_free(be, dl); dev_free(be, db); dev_free(be, di); dev_free(be, dw);
        }
        int64_t wrong = 0, ties = 0;
        for (int64_t r = 0; r < T; r++) {
            const float *l = lg + r * E;
            const float *bi = cases[c][5] ? bias : NULL;
            int differs = 0, explained = 1;
            for (int p = 0; p < K; p++) {
                const int a = idx[0][r * K + p], b = idx[1][r * K + p];
                if (a == b) continue;
                differs = 1;
                if (b < 0 || b >= E) { explained = 0; break; }
                const double sa = sel_exact(l, bi, E, a, cfg.score_func), sb = sel_exact(l, bi, E, b, cfg.score_func);
                /* with groups a near tie between group scores can swap whole groups: accept when the
                 * CUDA pick is within the tie band of the CPU pick or of the CPU's K-th score */
                const double sk = sel_exact(l, bi, E, idx[0][r * K + K - 1], cfg.score_func);
                const double band = TOL_ROUTER_TIE * fmax(1.0, fabs(sa));
                if (!(fabs(sa - sb) <= band || (cfg.n_group > 0 && fabs(sb - sk) <= band))) explained = 0;
            }
            if (!differs) {
                char wh[96];
                snprintf(wh, sizeof wh, "router_topk E=%d K=%d func=%d groups=%d token %lld weights", E, K,
                         cfg.score_func, cfg.n_group, (long long)r);
                if (cfg.bf16_steps) close_bf16_ulps(wh, w[0] + r * K, w[1] + r * K, K, TOL_BF16_STEP_ULPS);
                else close_elem(wh, w[0] + r * K, w[1] + r * K, K, TOL_NORM, 1e-30);
            } else if (explained) ties++;
            else wrong++;
        }
        CHECK(wrong == 0, "router_topk E=%d K=%d func=%d groups=%d bf16=%d: %lld of %lld tokens pick other experts (not a near tie)",
              E, K, cfg.score_func, cfg.n_group, cfg.bf16_steps, (long long)wrong, (long long)T);
        if (ties) printf("  router_topk E=%d K=%d: %lld near-tie tokens (indices allowed to differ)\n", E, K, (long long)ties);
        BOTH(be) { free(idx[be]); free(w[be]); }
        free(lg); free(bias);
    }
}

static void case_moe_rows(void) {
    const int64_t nx = 37, d = 7168 / 7 + 3, nr = 101;
    float *x = rnd_floats(nx * d, 1.0f), *y0 = rnd_floats(nx * d, 1.0f), *xr = rnd_floats(nr * d, 1.0f);
    int32_t *rows = malloc((size_t)nr * 4);
    float *wr = malloc((size_t)nr * 4);
    for (int64_t r = 0; r < nr; r++) { rows[r] = rnd_int((int)nx); wr[r] = (float)rnd_uni(); }
    float *g[2], *s[2], *sb[2];
    BOTH(be) {
        nd_err e = {0};
        void *dx = dev_put(be, x, nx * d * 4), *dout = dev_poisoned(be, nr * d * 4);
        op_rc(be, "gather_rows", g_be[be]->gather_rows(g_be[be], dx, rows, nr, d, dout, &e), &e);
        g[be] = dev_get(be, dout, nr * d * 4);
        void *dy = dev_put(be, y0, nx * d * 4), *dxr = dev_put(be, xr, nr * d * 4);
        op_rc(be, "scatter_add_rows", g_be[be]->scatter_add_rows(g_be[be], dy, dxr, rows, wr, nr, d, 0, &e), &e);
        s[be] = dev_get(be, dy, nx * d * 4);
        op_rc(be, "scatter_add_rows bf16", g_be[be]->scatter_add_rows(g_be[be], dy, dxr, rows, wr, nr, d, 1, &e), &e);
        sb[be] = dev_get(be, dy, nx * d * 4);
        dev_free(be, dx); dev_free(be, dout); dev_free(be, dy); dev_free(be, dxr);
    }
    same_floats("gather_rows", g[0], g[1], nr * d);
    same_floats("scatter_add_rows (repeated rows, order of r)", s[0], s[1], nx * d);
    same_floats("scatter_add_rows bf16_products", sb[0], sb[1], nx * d);
    BOTH(be) { free(g[be]); free(s[be]); free(sb[be]); }
    free(x); free(y0); free(xr); free(rows); free(wr);
}

static void cmp_fields(const char *wh, const nd_cmp *a, const nd_cmp *b) {
    CHECK(a->n == b->n && a->ref_nan == b->ref_nan && a->prod_nan == b->prod_nan && a->ref_inf == b->ref_inf &&
              a->prod_inf == b->prod_inf,
          "%s: counts differ (nan %lld/%lld vs %lld/%lld, inf %lld/%lld vs %lld/%lld)", wh, (long long)a->ref_nan,
          (long long)a->prod_nan, (long long)b->ref_nan, (long long)b->prod_nan, (long long)a->ref_inf,
          (long long)a->prod_inf, (long long)b->ref_inf, (long long)b->prod_inf);
    CHECK(a->ref_amax == b->ref_amax && a->prod_amax == b->prod_amax && a->max_abs_err == b->max_abs_err,
          "%s: maxima differ (amax %.17g/%.17g vs %.17g/%.17g, max err %.17g vs %.17g)", wh, a->ref_amax, a->prod_amax,
          b->ref_amax, b->prod_amax, a->max_abs_err, b->max_abs_err);
    const double sa[6] = {a->sum_rr, a->sum_pp, a->sum_rp, a->sum_ee, a->worst_block_ee, a->worst_block_rr};
    const double sb[6] = {b->sum_rr, b->sum_pp, b->sum_rp, b->sum_ee, b->worst_block_ee, b->worst_block_rr};
    static const char *nm[6] = {"sum_rr", "sum_pp", "sum_rp", "sum_ee", "worst_block_ee", "worst_block_rr"};
    const double tol = a->n > 200000 ? (double)(a->n - 1) * 0x1p-53 : TOL_CMP_SUM;
    for (int i = 0; i < 6; i++)
        CHECK(fabs(sa[i] - sb[i]) <= tol * fabs(sa[i]) || (sa[i] == 0 && sb[i] == 0),
              "%s: %s cpu %.17g cuda %.17g", wh, nm[i], sa[i], sb[i]);
    CHECK(a->worst_block == b->worst_block, "%s: worst block cpu %lld cuda %lld", wh, (long long)a->worst_block,
          (long long)b->worst_block);
}

static void case_compare(void) {
    static const int64_t cases[][2] = {{1, 1}, {1000, 16}, {100003, 16}, {100003, 7}, {65536, 4096}, {7168 * 5, 7168},
                                       {4099, 2}, {33, 64}, {640000, 160}, {50000, 1001}};
    /* CUDA's paths: a grid of one CUDA block (small n), lanes per block (B <= 128), a warp per block
     * (640000 / 160: more blocks than resident warps), a CUDA block per block (few long blocks) */
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int with_prod = 0; with_prod < 2; with_prod++) {
            const int64_t n = cases[c][0], B = cases[c][1];
            float *r = rnd_floats(n, 2.0f), *p = malloc((size_t)n * 4);
            for (int64_t i = 0; i < n; i++) p[i] = r[i] + rnd_normal() * 0.01f * (float)(1 + (i / 977) % 5);
            if (n > 100) {
                r[17] = NAN; p[18] = NAN; r[40] = INFINITY; p[41] = -INFINITY; p[42] = NAN; r[42] = -INFINITY;
            }
            nd_cmp out[2];
            BOTH(be) {
                nd_err e = {0};
                void *dr = dev_put(be, r, n * 4), *dp = dev_put(be, p, n * 4);
                memset(&out[be], g_poison[be], sizeof out[be]);
                op_rc(be, "compare", g_be[be]->compare(g_be[be], dr, with_prod ? dp : NULL, n, B, &out[be], &e), &e);
                dev_free(be, dr); dev_free(be, dp);
            }
            char wh[96];
            snprintf(wh, sizeof wh, "compare n=%lld block=%lld prod=%d", (long long)n, (long long)B, with_prod);
            cmp_fields(wh, &out[0], &out[1]);
            free(r); free(p);
        }
}

/* logits_kl (the head probe): top-1 indices and which positions count exactly; KL within TOL_KL of
 * the position's Σ p·(|la| + |la - lb|) (the magnitudes its double sums and exp/log ulps scale with).
 * Special rows: a NaN logit (counted, KL NaN), an all -inf side and a +inf maximum (not counted), a
 * tied maximum (the first index), identical sides (KL 0). */
static void case_logits_kl(void) {
    static const int64_t cases[][2] = {{1, 1}, {3, 5}, {17, 1000}, {9, 32003}, {5, 129280}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t R = cases[c][0], V = cases[c][1];
        float *a = rnd_floats(R * V, 3.0f), *p = malloc((size_t)(R * V) * 4);
        for (int64_t i = 0; i < R * V; i++) p[i] = a[i] + rnd_normal() * 0.2f;
        if (R >= 9) {
            a[1 * V + V / 2] = NAN;                                    /* row 1: a NaN logit */
            for (int64_t j = 0; j < V; j++) p[2 * V + j] = -INFINITY;  /* row 2: prod all -inf */
            a[3 * V + V / 3] = INFINITY;                               /* row 3: +inf maximum */
            const float m = max_abs(a + 4 * V, V) + 1.0f;              /* row 4: a tie for the maximum */
            a[4 * V + V / 4] = a[4 * V + V - 1] = m;
            memcpy(p + 5 * V, a + 5 * V, (size_t)V * 4);               /* row 5: identical sides */
        }
        nd_logits_row *o[2];
        BOTH(be) {
            nd_err e = {0};
            o[be] = malloc(sizeof(nd_logits_row) * (size_t)R);
            memset(o[be], g_poison[be], sizeof(nd_logits_row) * (size_t)R);
            void *da = dev_put(be, a, R * V * 4), *dp = dev_put(be, p, R * V * 4);
            op_rc(be, "logits_kl", g_be[be]->logits_kl(g_be[be], da, dp, R, V, o[be], &e), &e);
            dev_free(be, da); dev_free(be, dp);
        }
        for (int64_t r = 0; r < R; r++) {
            const nd_logits_row *x = &o[0][r], *y = &o[1][r];
            CHECK(x->top_ref == y->top_ref && x->top_prod == y->top_prod,
                  "logits_kl %lldx%lld row %lld: top-1 cpu %d/%d cuda %d/%d", (long long)R, (long long)V, (long long)r,
                  x->top_ref, x->top_prod, y->top_ref, y->top_prod);
            if (x->top_ref < 0 || isnan(x->kl)) {
                CHECK(isnan(y->kl), "logits_kl %lldx%lld row %lld: cpu KL NaN, cuda %.17g", (long long)R, (long long)V,
                      (long long)r, y->kl);
                CHECK(isnan(x->lse_ref) == isnan(y->lse_ref) && isnan(x->lse_prod) == isnan(y->lse_prod) &&
                          (x->top_ref >= 0 || (isnan(x->lse_ref) && isnan(x->lse_prod))),
                      "logits_kl %lldx%lld row %lld: lse of a row not counted: cpu %g/%g cuda %g/%g", (long long)R, (long long)V,
                      (long long)r, x->lse_ref, x->lse_prod, y->lse_ref, y->lse_prod);
                continue;
            }
            const float *ar = a + r * V, *pr = p + r * V;
            double ma = -INFINITY, mb = -INFINITY, za = 0, zb = 0, mag = 0;
            for (int64_t j = 0; j < V; j++) { ma = fmax(ma, ar[j]); mb = fmax(mb, pr[j]); }
            for (int64_t j = 0; j < V; j++) { za += exp(ar[j] - ma); zb += exp(pr[j] - mb); }
            for (int64_t j = 0; j < V; j++) {
                const double la = ar[j] - ma - log(za), lb = pr[j] - mb - log(zb);
                mag += exp(la) * (fabs(la) + fabs(la - lb));
            }
            CHECK(fabs(x->kl - y->kl) <= TOL_KL * mag, "logits_kl %lldx%lld row %lld: KL cpu %.17g cuda %.17g (tol %.3g)",
                  (long long)R, (long long)V, (long long)r, x->kl, y->kl, TOL_KL * mag);
            /* each side's log-normaliser: max + log Σ exp(x - max), both backends against the sum
             * taken here (double sums of positive terms in another order: relative 1e-12) */
            const double lra = ma + log(za), lrb = mb + log(zb);
            CHECK(fabs(x->lse_ref - lra) <= 1e-12 * (1 + fabs(lra)) && fabs(y->lse_ref - lra) <= 1e-12 * (1 + fabs(lra)) &&
                      fabs(x->lse_prod - lrb) <= 1e-12 * (1 + fabs(lrb)) && fabs(y->lse_prod - lrb) <= 1e-12 * (1 + fabs(lrb)),
                  "logits_kl %lldx%lld row %lld: lse ref %.17g (cpu %.17g cuda %.17g), prod %.17g (cpu %.17g cuda %.17g)",
                  (long long)R, (long long)V, (long long)r, lra, x->lse_ref, y->lse_ref, lrb, x->lse_prod, y->lse_prod);
        }
        if (R >= 9) {
            CHECK(o[0][4].top_ref == (int32_t)(V / 4), "logits_kl: a tied maximum picks index %d, not the first (%lld)",
                  o[0][4].top_ref, (long long)(V / 4));
            CHECK(o[0][5].kl == 0.0 && o[0][2].top_ref == -1 && o[0][3].top_ref == -1 && isnan(o[0][1].kl),
                  "logits_kl cpu special rows: identical KL %.3g, -inf row top %d, +inf row top %d, NaN row KL %.3g",
                  o[0][5].kl, o[0][2].top_ref, o[0][3].top_ref, o[0][1].kl);
        }
        BOTH(be) free(o[be]);
        free(a); free(p);
    }
}

/* Probe results kept on the device (backend.h defer_results / flush_results): 1100 compares and
 * quant_nvfp4 statistics queued with defer_results set (more than the CUDA result buffer's 1024
 * slots, so it also flushes on its own in between), then one flush_results; every result equals
 * the CPU's, and the CUDA ones are still written after their buffers were released. */
static void case_deferred_results(void) {
    enum { NQ = 1100 };
    nd_cmp *cmp[2];
    nd_qstats *qs[2];
    int64_t *len = malloc(NQ * sizeof *len);
    BOTH(be) {
        cmp[be] = malloc(NQ * sizeof *cmp[be]);
        qs[be] = malloc(NQ * sizeof *qs[be]);
        memset(cmp[be], g_poison[be], NQ * sizeof *cmp[be]);
        memset(qs[be], g_poison[be], NQ * sizeof *qs[be]);
    }
    for (int i = 0; i < NQ; i++) len[i] = 16 * (1 + rnd_int(i % 100 == 0 ? 4000 : 40));
    BOTH(be) g_be[be]->defer_results = 1;
    uint64_t seed = g_rng;
    BOTH(be) {
        g_rng = seed; /* the same inputs on both backends */
        for (int i = 0; i < NQ; i++) {
            nd_err e = {0};
            const int64_t n = len[i];
            float *r = activations(1, n, i % 3 == 0), *p = malloc((size_t)n * 4);
            for (int64_t j = 0; j < n; j++) p[j] = r[j] + rnd_normal() * 0.01f;
            void *dr = dev_put(be, r, n * 4), *dp = dev_put(be, p, n * 4);
            void *dc = dev_poisoned(be, n / 2), *ds = dev_poisoned(be, n / 16);
            op_rc(be, "compare", g_be[be]->compare(g_be[be], dr, i % 4 ? dp : NULL, n, i % 2 ? 16 : n, &cmp[be][i], &e), &e);
            const float g = 2688.0f / (max_abs(r, n) > 0 ? max_abs(r, n) : 1.0f) * (i % 5 == 0 ? 64.0f : 1.0f);
            op_rc(be, "quant_nvfp4", g_be[be]->quant_nvfp4(g_be[be], dr, g, i % 7 ? ND_QSEM_KERNEL : ND_QSEM_CT, 1, n,
                                                           dc, ds, &qs[be][i], &e), &e);
            dev_free(be, dr); dev_free(be, dp); dev_free(be, dc); dev_free(be, ds);
            free(r); free(p);
        }
        nd_err e = {0};
        op_rc(be, "flush_results", g_be[be]->flush_results(g_be[be], &e), &e);
        g_be[be]->defer_results = 0;
    }
    for (int i = 0; i < NQ; i++) {
        char wh[96];
        snprintf(wh, sizeof wh, "deferred compare %d n=%lld", i, (long long)len[i]);
        cmp_fields(wh, &cmp[0][i], &cmp[1][i]);
        CHECK(memcmp(&qs[0][i], &qs[1][i], sizeof qs[0][i]) == 0, "deferred quant_nvfp4 stats %d n=%lld: cpu sat %lld nz %lld, cuda sat %lld nz %lld",
              i, (long long)len[i], (long long)qs[0][i].n_saturated, (long long)qs[0][i].n_nonzero_blocks,
              (long long)qs[1][i].n_saturated, (long long)qs[1][i].n_nonzero_blocks);
    }
    BOTH(be) { free(cmp[be]); free(qs[be]); }
    free(len);
}

/* copy2d: a column slice of a pitched matrix into another pitched matrix (exact). */
static void case_copy2d(void) {
    static const int64_t cases[][4] = {{7, 13, 5, 9}, {33, 7168, 1536, 2048}, {1, 4, 4, 4}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t R = cases[c][0], sp = cases[c][1], W = cases[c][2], dp = cases[c][3];
        float *src = rnd_floats(R * sp, 1.0f), *o[2];
        BOTH(be) {
            nd_err e = {0};
            void *ds = dev_put(be, src, R * sp * 4), *dd = dev_poisoned(be, R * dp * 4);
            op_rc(be, "copy2d", g_be[be]->copy2d(g_be[be], (float *)dd, dp, (const float *)ds + (sp > W ? 1 : 0), sp, W,
                                                 R, &e), &e);
            o[be] = dev_get(be, dd, R * dp * 4);
            dev_free(be, ds); dev_free(be, dd);
        }
        /* the padding columns stay at each backend's poison, so compare the written columns only */
        int64_t bad = 0;
        for (int64_t r = 0; r < R; r++)
            for (int64_t x = 0; x < W; x++) bad += nd_f32_bits(o[0][r * dp + x]) != nd_f32_bits(o[1][r * dp + x]);
        CHECK(bad == 0, "copy2d rows=%lld spitch=%lld width=%lld dpitch=%lld: %lld values differ", (long long)R,
              (long long)sp, (long long)W, (long long)dp, (long long)bad);
        free(o[0]); free(o[1]); free(src);
    }
}

/* ---- DeepSeek-V4 compressed attention ---- */
static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

/* compress_pool. Both backends take the same FP32 steps in the same order except exp (glibc expf
 * vs exp in double rounded once on CUDA), so an output is either bit-identical or off through p.
 * Bounds per element, S = Σ_slots |value|·p (exact p, in double), n = slots, u = 2^-24:
 *  - FP32 steps: |Δ| <= (4n + 8)·u·S — each side's rounding error of the softmax and the sum is
 *    within (2n + 4)·u·S (a rigorous worst case; the typical difference is 0 or a few ulps);
 *  - bf16_steps: identical BF16 probabilities give identical outputs, and a probability moved
 *    across a BF16 rounding boundary moves its product by <= 2^-6·|value|·p, so |Δ| <= 2^-6·S
 *    + the FP32 bound for all elements, and at most 5% of the elements may exceed the FP32 bound
 *    (expected: well under 0.1%; an implementation that skipped a BF16 step would exceed it almost
 *    everywhere). */
static void case_compress_pool(void) {
    /* s, d, rate, overlap, bf16_steps */
    static const int64_t cases[][5] = {{9, 5, 4, 1, 1},    {9, 5, 4, 1, 0},      {16, 64, 4, 1, 0},  {259, 48, 128, 0, 1},
                                       {37, 33, 1, 0, 0},  {12, 7, 3, 1, 1},     {3, 8, 4, 1, 1},    {515, 512, 4, 1, 1},
                                       {384, 512, 128, 0, 1}, {130, 19, 16, 1, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        const int64_t S = cases[c][0], D = cases[c][1], R = cases[c][2], ov = cases[c][3], bf = cases[c][4];
        const int64_t w = ov ? 2 : 1, width = w * D, nwin = S / R, nout = nwin * D;
        float *kv = rnd_floats(S * width, 1.0f), *gate = rnd_floats(S * width, 2.0f), *pb = rnd_floats(R * width, 1.0f);
        float *o[2];
        double ms = 0;
        BOTH(be) {
            nd_err e = {0};
            void *dk = dev_put(be, kv, S * width * 4), *dg = dev_put(be, gate, S * width * 4);
            void *dout = dev_poisoned(be, nout * 4);
            const double t0 = now_ms();
            op_rc(be, "compress_pool", g_be[be]->compress_pool(g_be[be], dk, dg, pb, S, D, R, (int)ov, (int)bf, dout, &e), &e);
            if (be == 1) { g_be[1]->sync(g_be[1], &e); ms = now_ms() - t0; }
            o[be] = dev_get(be, dout, nout * 4);
            dev_free(be, dk); dev_free(be, dg); dev_free(be, dout);
        }
        int64_t over_loose = 0, over_tight = 0, same = 0, first = -1;
        double worst = 0;
        for (int64_t en = 0; en < nwin; en++)
            for (int64_t ch = 0; ch < D; ch++) {
                /* the slots in double: logits, softmax, Σ|value|·p */
                double lg[2 * 128], val[2 * 128], mx = -INFINITY, den = 0, sabs = 0;
                int ns = 0;
                if (ov && en > 0)
                    for (int64_t j = 0; j < R; j++) {
                        const int64_t at = ((en - 1) * R + j) * width + ch;
                        val[ns] = kv[at]; lg[ns++] = (double)gate[at] + pb[j * width + ch];
                    }
                for (int64_t j = 0; j < R; j++) {
                    const int64_t col = (w - 1) * D + ch, at = (en * R + j) * width + col;
                    val[ns] = kv[at]; lg[ns++] = (double)gate[at] + pb[j * width + col];
                }
                for (int z = 0; z < ns; z++) mx = fmax(mx, lg[z]);
                for (int z = 0; z < ns; z++) den += exp(lg[z] - mx);
                for (int z = 0; z < ns; z++) sabs += fabs(val[z]) * exp(lg[z] - mx) / den;
                const double tight = (4.0 * ns + 8.0) * 0x1p-24 * sabs, loose = tight + 0x1p-6 * sabs;
                const float a = o[0][en * D + ch], b = o[1][en * D + ch];
                const double dlt = fabs((double)a - b);
                same += nd_f32_bits(a) == nd_f32_bits(b);
                if (!(dlt <= tight)) over_tight++;
                if (!(dlt <= (bf ? loose : tight))) { if (first < 0) first = en * D + ch; over_loose++; }
                if (sabs > 0 && dlt / sabs > worst) worst = dlt / sabs;
            }
        char wh[128];
        snprintf(wh, sizeof wh, "compress_pool s=%lld d=%lld rate=%lld overlap=%lld bf16_steps=%lld", (long long)S,
                 (long long)D, (long long)R, (long long)ov, (long long)bf);
        CHECK(over_loose == 0, "%s: %lld of %lld outputs beyond the bound, first at %lld: cpu %.9g cuda %.9g", wh,
              (long long)over_loose, (long long)nout, (long long)first, first >= 0 ? o[0][first] : 0.0,
              first >= 0 ? o[1][first] : 0.0);
        if (bf)
            CHECK(over_tight * 20 <= nout, "%s: %lld of %lld outputs beyond the FP32 bound (BF16 steps not the CPU's?)",
                  wh, (long long)over_tight, (long long)nout);
        printf("  info: %s: %lld of %lld outputs bit-identical, worst |diff|/sum|v.p| %.2g, cuda %.3f ms\n", wh,
               (long long)same, (long long)nout, worst, ms);
        free(o[0]); free(o[1]); free(kv); free(gate); free(pb);
    }
}

static int cmp_i32(const void *a, const void *b) {
    const int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* indexer_topk: the scores are the CPU's operations in the CPU's order, so bit-exact; the picks
 * must be the CPU's set exactly (ties included: entries every head scores <= 0 are exact zeros,
 * and some key rows are copies of others, so positive scores tie too), compared as sorted sets;
 * independently of the CPU, each row holds topk - min(topk, ready) entries -1 and distinct closed
 * entries otherwise. NaN and Inf weights in one query make NaN rows (NaN first) and ±Inf ties. */
static void case_indexer(void) {
    /* t, nc, h, c, rate, topk, first qpos, specials */
    static const int64_t cases[][8] = {{5, 7, 2, 16, 4, 3, 0, 0},       {9, 130, 3, 33, 4, 2, 500, 0},
                                       {17, 130, 4, 24, 4, 50, 400, 1},  {6, 40, 1, 8, 1, 40, 30, 0},
                                       {33, 257, 8, 128, 4, 64, 900, 1}, {3, 1, 1, 5, 2, 1, 0, 0},
                                       {40, 300, 2, 7, 4, 120, 1100, 0}, {20, 200, 2, 9, 4, 180, 790, 0},
                                       {128, 1024, 64, 128, 4, 512, 3968, 0},
                                       {4, 5000, 2, 16, 4, 70, 19990, 1}};
    for (size_t cs = 0; cs < sizeof cases / sizeof *cases; cs++) {
        const int64_t T = cases[cs][0], NC = cases[cs][1], H = cases[cs][2], C = cases[cs][3], R = cases[cs][4],
                      K = cases[cs][5], q0 = cases[cs][6];
        float *q = rnd_floats(T * H * C, 1.0f), *k = rnd_floats(NC * C, 1.0f), *wt = rnd_floats(T * H, 1.0f);
        for (int64_t x = 1; x < NC; x++) /* a quarter of the key rows repeat an earlier one: exact positive ties */
            if (rnd_int(4) == 0) memcpy(k + x * C, k + rnd_int((int)x) * C, (size_t)C * 4);
        if (cases[cs][7] && T >= 3) { wt[1 * H] = NAN; wt[2 * H + H - 1] = INFINITY; }
        int32_t *qp = malloc((size_t)T * 4);
        for (int64_t i = 0; i < T; i++) qp[i] = (int32_t)(q0 + i);
        const float scale = 1.0f / sqrtf((float)C), wscale = 1.0f / sqrtf((float)H);
        float *sc[2];
        int32_t *ix[2];
        double ms = 0;
        BOTH(be) {
            nd_err e = {0};
            void *dq = dev_put(be, q, T * H * C * 4), *dk = dev_put(be, k, NC * C * 4), *dw = dev_put(be, wt, T * H * 4);
            void *ds = dev_poisoned(be, T * NC * 4), *di = dev_poisoned(be, T * K * 4);
            const double t0 = now_ms();
            op_rc(be, "indexer_topk", g_be[be]->indexer_topk(g_be[be], dq, dk, dw, T, NC, H, C, scale, wscale, qp, R, K,
                                                             ds, di, &e), &e);
            if (be == 1) { g_be[1]->sync(g_be[1], &e); ms = now_ms() - t0; }
            sc[be] = dev_get(be, ds, T * NC * 4);
            ix[be] = dev_get(be, di, T * K * 4);
            dev_free(be, dq); dev_free(be, dk); dev_free(be, dw); dev_free(be, ds); dev_free(be, di);
        }
        char wh[128];
        snprintf(wh, sizeof wh, "indexer_topk t=%lld nc=%lld h=%lld c=%lld rate=%lld topk=%lld", (long long)T,
                 (long long)NC, (long long)H, (long long)C, (long long)R, (long long)K);
        same_floats(wh, sc[0], sc[1], T * NC);
        int64_t other = 0, first = -1, bad_shape = 0, zero_ties = 0; /* zero_ties: any tie at the cut */
        for (int64_t i = 0; i < T; i++) {
            int32_t *a = ix[0] + i * K, *b = ix[1] + i * K;
            qsort(a, (size_t)K, 4, cmp_i32);
            qsort(b, (size_t)K, 4, cmp_i32);
            if (memcmp(a, b, (size_t)K * 4)) { if (first < 0) first = i; other++; }
            int64_t ready = (qp[i] + 1) / R;
            if (ready > NC) ready = NC;
            const int64_t want_neg = K > ready ? K - ready : 0;
            int64_t neg = 0, ok = 1;
            for (int64_t s = 0; s < K; s++) {
                if (b[s] == -1) neg++;
                else if (b[s] < 0 || b[s] >= ready || (s > 0 && b[s] == b[s - 1])) ok = 0;
            }
            bad_shape += !ok || neg != want_neg;
            /* how many picks sit on a tie at the K-th score (to show the tie rule was exercised) */
            float kth = INFINITY;
            for (int64_t s = 0; s < K; s++) if (b[s] >= 0 && sc[0][i * NC + b[s]] < kth) kth = sc[0][i * NC + b[s]];
            int64_t at_kth = 0, picked_at_kth = 0;
            for (int64_t w = 0; w < ready; w++) at_kth += sc[0][i * NC + w] == kth;
            for (int64_t s = 0; s < K; s++) picked_at_kth += b[s] >= 0 && sc[0][i * NC + b[s]] == kth;
            if (at_kth > picked_at_kth) zero_ties++; /* tied entries on both sides of the cut */
        }
        CHECK(other == 0, "%s: %lld of %lld queries pick another set (first query %lld)", wh, (long long)other,
              (long long)T, (long long)first);
        CHECK(bad_shape == 0, "%s: %lld queries with duplicate, unclosed or missing -1 picks", wh, (long long)bad_shape);
        printf("  info: %s: %lld queries cut through a tie, cuda %.3f ms\n", wh, (long long)zero_ties, ms);
        BOTH(be) { free(sc[be]); free(ix[be]); }
        free(q); free(k); free(wt); free(qp);
    }
}

/* attention_compressed: FP32 dots in another order and expf, as `attention` (TOL_MIX); queries
 * that see nothing are exact zeros. sel holds -1, duplicates and entries not yet closed. */
static void case_attention_compressed(void) {
    /* t, s, nc, hq, d, window, rate, sinks, nsel (-1: sel NULL), first qpos */
    static const int64_t cases[][10] = {{5, 9, 3, 4, 24, 0, 2, 0, -1, 4},     {7, 13, 6, 3, 33, 4, 2, 1, 3, 6},
                                        {33, 70, 17, 8, 64, 16, 4, 1, 5, 37}, {17, 129, 32, 16, 512, 128, 4, 1, 8, 112},
                                        {4, 6, 2, 2, 16, 0, 4, 1, 0, -2},     {6, 0, 5, 2, 16, 0, 1, 0, -1, 0},
                                        {5, 8, 0, 1, 8, 3, 4, 1, -1, 2},      {9, 20, 7, 5, 40, 6, 3, 0, 4, -3},
                                        {16, 256, 64, 128, 512, 128, 4, 1, 32, 240}};
    for (size_t c2 = 0; c2 < 2 * sizeof cases / sizeof *cases; c2++) {
        const size_t cs = c2 / 2;
        const int bs = (int)(c2 & 1); /* transformers' BF16 scores and probabilities */
        const int64_t T = cases[cs][0], S = cases[cs][1], NC = cases[cs][2], HQ = cases[cs][3], D = cases[cs][4],
                      W = cases[cs][5], R = cases[cs][6], NS = cases[cs][8], q0 = cases[cs][9];
        const int sinks_on = (int)cases[cs][7];
        const int64_t nsel = NS > 0 ? NS : 0;
        float *q = rnd_floats(T * HQ * D, 1.0f), *kv = rnd_floats(S * D, 1.0f), *ck = rnd_floats(NC * D, 1.0f);
        float *sinks = rnd_floats(HQ, 1.0f);
        int32_t *qp = malloc((size_t)T * 4), *kp = malloc((size_t)(S > 0 ? S : 1) * 4);
        int32_t *sel = malloc((size_t)(T * nsel > 0 ? T * nsel : 1) * 4);
        for (int64_t i = 0; i < T; i++) qp[i] = (int32_t)(q0 + i);
        for (int64_t j = 0; j < S; j++) kp[j] = (int32_t)j;
        for (int64_t z = 0; z < T * nsel; z++) sel[z] = rnd_int((int)NC + 1) - 1; /* -1 .. nc-1 */
        const float scale = 1.0f / sqrtf((float)D);
        float *o[2];
        double ms = 0;
        BOTH(be) {
            nd_err e = {0};
            void *dq = dev_put(be, q, T * HQ * D * 4), *dkv = dev_put(be, kv, S * D * 4), *dck = dev_put(be, ck, NC * D * 4);
            void *dsel = dev_put(be, sel, T * nsel * 4), *dout = dev_poisoned(be, T * HQ * D * 4);
            const double t0 = now_ms();
            op_rc(be, "attention_compressed",
                  g_be[be]->attention_compressed(g_be[be], dq, dkv, dck, T, S, NC, HQ, D, qp, kp, W, scale,
                                                 sinks_on ? sinks : NULL, R, NS >= 0 ? dsel : NULL, nsel, bs, dout, &e), &e);
            if (be == 1) { g_be[1]->sync(g_be[1], &e); ms = now_ms() - t0; }
            o[be] = dev_get(be, dout, T * HQ * D * 4);
            dev_free(be, dq); dev_free(be, dkv); dev_free(be, dck); dev_free(be, dsel); dev_free(be, dout);
        }
        char wh[160];
        snprintf(wh, sizeof wh, "attention_compressed t=%lld s=%lld nc=%lld hq=%lld d=%lld window=%lld rate=%lld sinks=%d nsel=%lld bf16=%d",
                 (long long)T, (long long)S, (long long)NC, (long long)HQ, (long long)D, (long long)W, (long long)R,
                 sinks_on, (long long)NS, bs);
        close_l2(wh, o[0], o[1], T * HQ * D, bs ? TOL_BF16_STEP : TOL_MIX);
        int64_t nz = 0, blind = 0; /* queries that see no window row and no entry */
        for (int64_t i = 0; i < T; i++) {
            int sees = 0;
            for (int64_t j = 0; j < S && !sees; j++) sees = kp[j] <= qp[i] && (W == 0 || qp[i] - kp[j] < W);
            const int64_t ready = (qp[i] + 1) / R;
            for (int64_t x = 0; x < NC && !sees; x++) {
                int in = NS < 0;
                for (int64_t z = 0; z < nsel && !in; z++) in = sel[i * nsel + z] == x;
                sees = x < ready && in;
            }
            if (sees) continue;
            blind++;
            for (int64_t z = 0; z < HQ * D; z++) nz += o[1][i * HQ * D + z] != 0.0f;
        }
        CHECK(nz == 0, "%s: %lld non-zero outputs for the %lld queries that see nothing", wh, (long long)nz,
              (long long)blind);
        printf("  info: %s: cuda %.3f ms\n", wh, ms);
        free(o[0]); free(o[1]); free(q); free(kv); free(ck); free(sinks); free(qp); free(kp); free(sel);
    }
}

/* gpt-oss's clamped SwiGLU: with and without the clamp (limit 7, gates and ups over [-24, 24]), FP32
 * and transformers' BF16 steps; the FP32 CPU values against the definition in double */
static void case_swiglu_oai(void) {
    const int64_t n = 4099;
    for (int lim = 0; lim < 2; lim++)
        for (int bs = 0; bs < 2; bs++) {
            float *g = rnd_floats(n, 24.0f), *v = rnd_floats(n, 24.0f), *r[2];
            const float limit = lim ? 7.0f : 0.0f, alpha = 1.702f;
            BOTH(be) {
                nd_err e = {0};
                void *dg = dev_put(be, g, n * 4), *dv = dev_put(be, v, n * 4), *dh = dev_poisoned(be, n * 4);
                op_rc(be, "swiglu_oai", g_be[be]->swiglu_oai(g_be[be], dg, dv, n, alpha, limit, bs, dh, &e), &e);
                r[be] = dev_get(be, dh, n * 4);
                dev_free(be, dg); dev_free(be, dv); dev_free(be, dh);
            }
            char wh[64];
            snprintf(wh, sizeof wh, "swiglu_oai limit=%g bf16_steps=%d", (double)limit, bs);
            if (bs) close_bf16_ulps(wh, r[0], r[1], n, TOL_BF16_STEP_ULPS);
            else close_elem(wh, r[0], r[1], n, TOL_TRANSC, 1e-30);
            if (!bs) {
                int64_t bad = 0, clamped = 0;
                for (int64_t i = 0; i < n; i++) {
                    double gg = g[i], vv = v[i];
                    if (lim) { clamped += gg > 7 || fabs(vv) > 7; gg = fmin(gg, 7.0); vv = fmin(fmax(vv, -7.0), 7.0); }
                    const double want = (vv + 1) * gg / (1 + exp(-(double)alpha * gg));
                    bad += fabs(r[0][i] - want) > 1e-5 * fabs(want) + 1e-30;
                }
                CHECK(bad == 0, "%s: %lld CPU values differ from (clamp(v)+1) g sigmoid(1.702 g)", wh, (long long)bad);
                CHECK(!lim || clamped > n / 4, "%s: only %lld inputs reach the clamp", wh, (long long)clamped);
            }
            free(r[0]); free(r[1]); free(g); free(v);
        }
}

/* Qwen3-Next (numerics/nd_gdn.h). gate_mul: expf ulps in the activation (close_elem 2 x TOL_TRANSC), or
 * with the activation rounded to BF16 first a one-ulp move of that rounding (close_bf16_ulps). causal_conv1d:
 * the sums in the same order without FMA, bit-exact without the SiLU; the SiLU adds expf ulps.
 * gated_delta_rule: the per-token norms and sums in the same order, decay and beta from expf/log1pf
 * (a few ulps); the state update is contractive (|k| = 1, 0 < beta < 1, decay <= 1), so those ulps do
 * not grow over the tokens: TOL_MIX, or TOL_BF16_STEP where beta is rounded to BF16 (one-ulp moves). */
/* gate_mul and causal_conv1d: at each shape {d0, d1, d2} and both flags (f0 the op's activation flag, bf
 * its BF16 flag), x [d0, d1] (normal times sx) and y [d0 or d1, d2] (times sy) in, an output the size of x
 * out, on both backends; the case named by fmt from d0, d1, d2, f0name[f0], bf; compared by cmp */
typedef int (*op_x2)(nd_backend *, const float *, const float *, int64_t, int64_t, int64_t, int, int, float *, nd_err *);
typedef struct x2_case {
    const char *op, *fmt, *f0name[3];
    int n_f0; /* values of the op's activation flag f0 */
    float sx, sy;
    int y_rows_d1;
    /* the two outputs; xy_max: max|x| x max|y| of the inputs (a bound on what an absolute error can scale with) */
    void (*cmp)(const char *wh, float *const o[2], int64_t n, int f0, int bf, double xy_max);
} x2_case;
static void run_x2(const x2_case *c, op_x2 fn[2], const int64_t (*shapes)[3], size_t nshapes) {
    const size_t per = 2 * (size_t)c->n_f0; /* f0 x bf per shape */
    for (size_t s2 = 0; s2 < per * nshapes; s2++) {
        const int64_t d0 = shapes[s2 / per][0], d1 = shapes[s2 / per][1], d2 = shapes[s2 / per][2];
        const int64_t nx = d0 * d1, ny = (c->y_rows_d1 ? d1 : d0) * d2;
        const int f0 = (int)(s2 % per / 2), bf = (int)(s2 & 1);
        float *x = rnd_floats(nx, c->sx), *y = rnd_floats(ny, c->sy), *o[2];
        BOTH(be) {
            nd_err e = {0};
            void *dx = dev_put(be, x, nx * 4), *dy = dev_put(be, y, ny * 4), *dout = dev_poisoned(be, nx * 4);
            op_rc(be, c->op, fn[be](g_be[be], dx, dy, d0, d1, d2, f0, bf, dout, &e), &e);
            o[be] = dev_get(be, dout, nx * 4);
            dev_free(be, dx); dev_free(be, dy); dev_free(be, dout);
        }
        char wh[128];
        snprintf(wh, sizeof wh, c->fmt, (long long)d0, (long long)d1, (long long)d2, c->f0name[f0], bf);
        c->cmp(wh, o, nx, f0, bf, (double)max_abs(x, nx) * (double)max_abs(y, ny));
        free(x); free(y); free(o[0]); free(o[1]);
    }
}
/* c: an x2_case named as the op it runs */
#define RUN_X2(c, shapes) run_x2(&(c), (op_x2[2]){g_be[0]->c, g_be[1]->c}, shapes, sizeof shapes / sizeof *shapes)
static void cmp_gate_mul(const char *wh, float *const o[2], int64_t n, int act, int bf, double xy_max) {
    /* GELU's tanh form g/2 (1 + tanh(u)) cancels for negative g: tanhf's few ulps of 1 (CUDA 2, glibc 1)
     * come out absolute, times |g|/2 and the other factor, not relative to the small output
     * (seen: 5x64 at -0.0055, cpu and cuda 4.2e-7 apart, rel 7.6e-5) */
    const double atol = act == 2 ? 4.0 * FLT_EPSILON * 0.5 * xy_max : 0;
    if (bf) close_bf16_ulps(wh, o[0], o[1], n, TOL_BF16_STEP_ULPS);
    else close_elem(wh, o[0], o[1], n, 2 * TOL_TRANSC, atol);
}
static void cmp_conv(const char *wh, float *const o[2], int64_t n, int silu, int bf, double xy_max) {
    (void)bf;
    (void)xy_max;
    if (silu) close_elem(wh, o[0], o[1], n, 2 * TOL_TRANSC, 0);
    else same_floats(wh, o[0], o[1], n);
}
static void case_gdn(void) {
    static const x2_case gate_mul = {"gate_mul", "gate_mul %lldx%lld gate cols %lld act %s bf16 %d",
                                     {"sigmoid", "silu", "gelu_tanh"}, ND_GATE_N, 2.0f, 4.0f, 0, cmp_gate_mul};
    static const int64_t gshapes[][3] = {{5, 64, 64}, {7, 33, 1}, {3, 48, 3}, {0, 16, 16}, {130, 1024, 1}};
    RUN_X2(gate_mul, gshapes);
    static const x2_case causal_conv1d = {"causal_conv1d", "causal_conv1d t=%lld c=%lld kernel=%lld silu %s bf16 %d",
                                          {"0", "1"}, 2, 1.0f, 0.5f, 1, cmp_conv};
    static const int64_t cshapes[][3] = {{1, 5, 4}, {17, 33, 4}, {64, 8192, 4}, {9, 16, 1}, {3, 7, 5}, {0, 8, 4}};
    RUN_X2(causal_conv1d, cshapes);
    /* t, nk, nv, dk, dv */
    static const int64_t dshapes[][5] = {{1, 1, 1, 4, 4}, {7, 2, 4, 16, 16}, {5, 1, 3, 17, 33}, {33, 2, 4, 128, 128},
                                         {64, 16, 32, 128, 128}, {0, 1, 1, 8, 8}};
    for (size_t s2 = 0; s2 < 2 * sizeof dshapes / sizeof *dshapes; s2++) {
        const int64_t T = dshapes[s2 / 2][0], NK = dshapes[s2 / 2][1], NV = dshapes[s2 / 2][2], DK = dshapes[s2 / 2][3],
                      DV = dshapes[s2 / 2][4];
        const int bf = (int)(s2 & 1);
        float *q = rnd_floats(T * NK * DK, 1.0f), *k = rnd_floats(T * NK * DK, 1.0f), *v = rnd_floats(T * NV * DV, 1.0f);
        float *a = rnd_floats(T * NV, 1.0f), *bb = rnd_floats(T * NV, 1.5f), *dtb = rnd_floats(NV, 0.5f);
        float *alog = malloc(sizeof(float) * (size_t)NV), *o[2];
        for (int64_t h = 0; h < NV; h++) alog[h] = (float)log(0.01 + 15.99 * rnd_uni()); /* A in [0.01, 16) */
        double ms = 0;
        BOTH(be) {
            nd_err e = {0};
            void *dq = dev_put(be, q, T * NK * DK * 4), *dk = dev_put(be, k, T * NK * DK * 4), *dv = dev_put(be, v, T * NV * DV * 4);
            void *da = dev_put(be, a, T * NV * 4), *db = dev_put(be, bb, T * NV * 4), *dout = dev_poisoned(be, T * NV * DV * 4);
            const double t0 = now_ms();
            op_rc(be, "gated_delta_rule", g_be[be]->gated_delta_rule(g_be[be], dq, dk, dv, da, db, alog, dtb, T, NK, NV, DK,
                                                                      DV, bf, dout, &e), &e);
            if (be == 1) { g_be[1]->sync(g_be[1], &e); ms = now_ms() - t0; }
            o[be] = dev_get(be, dout, T * NV * DV * 4);
            dev_free(be, dq); dev_free(be, dk); dev_free(be, dv); dev_free(be, da); dev_free(be, db); dev_free(be, dout);
        }
        char wh[128];
        snprintf(wh, sizeof wh, "gated_delta_rule t=%lld heads %lld/%lld dims %lld/%lld bf16 %d", (long long)T,
                 (long long)NK, (long long)NV, (long long)DK, (long long)DV, bf);
        close_l2(wh, o[0], o[1], T * NV * DV, bf ? TOL_BF16_STEP : TOL_MIX);
        printf("  info: %s: cuda %.3f ms\n", wh, ms);
        free(q); free(k); free(v); free(a); free(bb); free(dtb); free(alog); free(o[0]); free(o[1]);
    }
}

/* name: the ops a case runs, joined by '+'; dtypes: for each of them, in the same order and joined
 * by '+', the dtypes (backend_dtype.h names, ',' between) the case gives that op. Every (op, dtype)
 * pair backend.h declares needs a case, and a case naming a pair its op does not declare is stale
 * (both checked before the CUDA skip). NULL: the case runs no op of its own (deferred_results). */
typedef struct test_case { const char *name; void (*fn)(void); const char *dtypes; } test_case;
static const test_case g_cases[] = {
    {"copy2d", case_copy2d, "f32"}, {"dequant_nvfp4", case_dequant_nvfp4, "nvfp4,f32"},
    {"dequant_mxfp4", case_dequant_mxfp4, "mxfp4,f32"},
    {"dequant_fp8", case_dequant_fp8, "fp8_e4m3,f32,ue8m0"}, /* scale kinds tensor, channel, block f32, block e8m0 */
    {"to_f32", case_to_f32, "bf16,f16,f32"}, {"quant_nvfp4", case_quant_nvfp4, "f32,nvfp4"},
    {"quant_mxfp4", case_quant_mxfp4, "f32,mxfp4"}, {"fake_quant_fp8", case_fake_quant_fp8, "f32,fp8_e4m3"},
    {"kv_fp8", case_kv_fp8, "f32,fp8_e4m3"},
    {"swizzle_sf+unswizzle_sf", case_swizzle, "fp8_e4m3+fp8_e4m3"},
    {"gemm+gemm_grouped", case_gemm, "f32,bf16+f32,bf16"}, /* bf16: ND_GEMM_BF16_EXACT; f32: ND_GEMM_F32 and ND_GEMM_ORDERED */
    {"round_bf16+cast_f16_scale+scale+add+add_bias+mul_cols+swiglu+rmsnorm", case_elementwise, "f32+f32+f32+f32+f32+f32+f32+f32"},
    {"swiglu_oai", case_swiglu_oai, "f32"}, {"rope", case_rope, "f32"}, {"attention", case_attention, "f32"},
    {"hc_pre+hc_post+hc_head", case_hc, "f32+f32+f32"}, {"router_topk", case_router, "f32,i32"},
    {"gather_rows+scatter_add_rows", case_moe_rows, "f32+f32"},
    {"compare", case_compare, "f32"}, {"logits_kl", case_logits_kl, "f32"}, {"deferred_results", case_deferred_results, NULL},
    {"compress_pool", case_compress_pool, "f32"}, {"indexer_topk", case_indexer, "f32,i32"},
    {"attention_compressed", case_attention_compressed, "f32,i32"},
    {"gate_mul+causal_conv1d+gated_delta_rule", case_gdn, "f32+f32+f32"},
};

static int declared_pairs(void) {
    int n = 0;
    for (int i = 0; i < nd_backend_op_count(); i++)
        for (int bit = 0; bit < ND_ODT_BIT_COUNT; bit++) n += (nd_backend_op_declared(i) >> bit) & 1;
    return n;
}
/* The length of the k-th '+'-separated part of s and where it starts; 0 when there is none. */
static size_t plus_part(const char *s, int k, const char **at) {
    for (int i = 0; s && i < k; i++) {
        s += strcspn(s, "+");
        if (!*s) return 0;
        s++;
    }
    *at = s;
    return s ? strcspn(s, "+") : 0;
}
/* 1 if the list [p, p+len) of ','-separated names holds name */
static int list_has(const char *p, size_t len, const char *name) {
    const size_t nl = strlen(name);
    for (const char *end = p + len; p < end; p += strcspn(p, ",+") + 1) {
        size_t w = strcspn(p, ",+");
        if (p + w > end) w = (size_t)(end - p);
        if (w == nl && !strncmp(p, name, nl)) return 1;
        if (p + w >= end) break;
    }
    return 0;
}
/* The (op, dtype) pairs: every one backend.h declares has a case; every one a case names is declared
 * (the dtype known, the op's part present). Returns the number of faults, each printed. */
static int check_dtype_cases(size_t ncases) {
    int bad = 0;
    for (int i = 0; i < nd_backend_op_count(); i++)
        for (int bit = 0; bit < ND_ODT_BIT_COUNT; bit++) {
            if (!(nd_backend_op_declared(i) & (1u << bit))) continue;
            int found = 0;
            for (size_t c = 0; c < ncases && !found; c++)
                for (int k = 0; !found && g_cases[c].dtypes; k++) {
                    const char *op, *dts;
                    const size_t ol = plus_part(g_cases[c].name, k, &op);
                    if (!ol) break;
                    const size_t dl = plus_part(g_cases[c].dtypes, k, &dts);
                    found = ol == strlen(nd_backend_op_name(i)) && !strncmp(op, nd_backend_op_name(i), ol) &&
                            list_has(dts, dl, nd_op_dtype_name(bit));
                }
            if (!found) {
                fprintf(stderr, "test_backend_ops: op %s declares dtype %s with no cross-backend case\n",
                        nd_backend_op_name(i), nd_op_dtype_name(bit));
                bad++;
            }
        }
    for (size_t c = 0; c < ncases; c++)
        for (int k = 0; g_cases[c].dtypes; k++) {
            const char *op, *dts;
            const size_t ol = plus_part(g_cases[c].name, k, &op), dl = plus_part(g_cases[c].dtypes, k, &dts);
            if (!ol && !dl) break;
            char name[64];
            snprintf(name, sizeof name, "%.*s", (int)ol, ol ? op : "");
            const int idx = nd_backend_op_index(name);
            if (!ol || !dl || idx < 0) {
                fprintf(stderr, "test_backend_ops: case %s: part %d (%s) has %s\n", g_cases[c].name, k, name,
                        !ol ? "dtypes but no op" : !dl ? "no dtypes" : "no such op");
                bad++;
                if (!ol || !dl) break;
                continue;
            }
            for (const char *p = dts; p < dts + dl; p += strcspn(p, ",+") + 1) {
                const size_t w = strcspn(p, ",+");
                int bit = 0;
                while (bit < ND_ODT_BIT_COUNT && !(strlen(nd_op_dtype_name(bit)) == w && !strncmp(p, nd_op_dtype_name(bit), w)))
                    bit++;
                if (bit == ND_ODT_BIT_COUNT || !(nd_backend_op_declared(idx) & (1u << bit))) {
                    fprintf(stderr, "test_backend_ops: case %s names %.*s for %s, which %s\n", g_cases[c].name, (int)w, p,
                            name, bit == ND_ODT_BIT_COUNT ? "is no dtype" : "it does not declare (stale)");
                    bad++;
                }
                if (p + w >= dts + dl) break;
            }
        }
    return bad;
}

int main(void) {
    const char *env = getenv("ND_TEST_SEED");
    const uint64_t seed = env ? strtoull(env, NULL, 10) : ((uint64_t)time(NULL) << 20) ^ (uint64_t)getpid();
    g_rng = seed ? seed : 1;
    printf("test_backend_ops: seed %llu (ND_TEST_SEED=%llu replays it)\n", (unsigned long long)seed,
           (unsigned long long)seed);
    const size_t ncases = sizeof g_cases / sizeof *g_cases;
    /* every op of ND_BACKEND_OPS has a case (a case name lists its ops joined by '+'), and the CPU
     * backend (the reference) implements every one: checked before the CUDA skip, so a build
     * without a GPU fails on an op added without a cross-backend test */
    int uncovered = 0;
    for (int i = 0; i < nd_backend_op_count(); i++) {
        const char *op = nd_backend_op_name(i);
        const size_t len = strlen(op);
        int found = 0;
        for (size_t c = 0; c < ncases && !found; c++)
            for (const char *p = g_cases[c].name; *p && !found; p += strcspn(p, "+"), p += *p == '+')
                found = strcspn(p, "+") == len && !strncmp(p, op, len);
        if (!found) { fprintf(stderr, "test_backend_ops: op %s has no cross-backend case\n", op); uncovered++; }
    }
    uncovered += check_dtype_cases(ncases);
    nd_err e = {0};
    if (nd_backend_cpu_create(&g_be[0], &e)) {
        fprintf(stderr, "cpu backend: %s\n", e.msg);
        return 1;
    }
    for (int i = 0; i < nd_backend_op_count(); i++)
        if (!nd_backend_has_op(g_be[0], i)) { fprintf(stderr, "test_backend_ops: the CPU backend lacks %s\n", nd_backend_op_name(i)); uncovered++; }
        else if (nd_backend_op_dtypes(g_be[0], i) != nd_backend_op_declared(i)) { /* the reference supports all */
            char got[96], want[96];
            fprintf(stderr, "test_backend_ops: the CPU backend supports %s for %s, backend.h declares %s\n",
                    nd_op_dtypes_str(nd_backend_op_dtypes(g_be[0], i), ",", got, sizeof got), nd_backend_op_name(i),
                    nd_op_dtypes_str(nd_backend_op_declared(i), ",", want, sizeof want));
            uncovered++;
        }
    printf("test_backend_ops: %d ops, %d (op, dtype) pairs, %d without a case or a CPU implementation or stale\n",
           nd_backend_op_count(), declared_pairs(), uncovered);
    if (uncovered) { g_be[0]->destroy(g_be[0]); return 1; }
    if (!nd_backend_cuda_available() || nd_backend_cuda_create(&g_be[1], 0, &e)) {
        for (size_t i = 0; i < ncases; i++) printf("  SKIP cuda %-32s (%s)\n", g_cases[i].name,
                                                    e.msg[0] ? e.msg : "no CUDA device");
        g_be[0]->destroy(g_be[0]);
        return 77;
    }
    printf("cuda device: %s\n", g_be[1]->device);
    for (int i = 0; i < nd_backend_op_count(); i++)
        CHECK(nd_backend_has_op(g_be[1], i), "the CUDA backend lacks %s", nd_backend_op_name(i));
    /* CUDA supports the same (op, dtype) pairs as the CPU; a pair it lacks would be listed here with why */
    for (int i = 0; i < nd_backend_op_count(); i++)
        CHECK(nd_backend_op_dtypes(g_be[1], i) == nd_backend_op_dtypes(g_be[0], i),
              "the CUDA backend supports dtypes 0x%x for %s, the CPU 0x%x", nd_backend_op_dtypes(g_be[1], i),
              nd_backend_op_name(i), nd_backend_op_dtypes(g_be[0], i));
    const char *only = getenv("ND_TEST_ONLY"); /* run only the cases whose name contains it */
    for (size_t i = 0; i < ncases; i++) {
        if (only && !strstr(g_cases[i].name, only)) continue;
        const int f0 = nd_t_fail, p0 = nd_t_pass;
        g_op_fail = 0;
        g_cases[i].fn();
        printf("  %s cuda %-32s %d checks\n", nd_t_fail > f0 ? "FAIL" : "ok  ", g_cases[i].name,
               nd_t_pass + nd_t_fail - p0 - f0);
    }
    g_be[1]->destroy(g_be[1]);
    g_be[0]->destroy(g_be[0]);
    return nd_test_report("test_backend_ops");
}
