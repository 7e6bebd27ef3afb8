/* test_ops_cpu.c — single CPU ops against straightforward formulas written here in double
 * precision, on fresh random inputs (seed printed; ND_TEST_SEED=<n> replays a run). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../nd_test.h"
#include "backend.h"
#include "numerics/nd_numerics.h"
#include "numerics/nd_cmp_rule.h"
#include "probes.h"
#include "ops_rand.h"

static double sigm(double x) { return 1.0 / (1.0 + exp(-x)); }
static nd_backend *be;
static nd_err e;

/* max |a-b| / (|b| + floor) over n */
static double max_rel(const float *a, const double *b, int64_t n, double floor_) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / (fabs(b[i]) + floor_);
        if (!(d <= m)) m = d;
    }
    return m;
}

/* max |x[i]| over n elements */
static double amax_of(const float *x, int64_t n) {
    double m = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void test_rmsnorm(void) {
    const int64_t rows = 5, d = 257;
    float *x = fvec(rows * d, -3, 3), *w = fvec(d, 0.5f, 1.5f), *y = fvec(rows * d, 0, 0);
    double *ref = malloc(sizeof(double) * rows * d);
    for (int wi = 0; wi < 2; wi++) {
        CHECK_EQ_INT(be->rmsnorm(be, x, wi ? w : NULL, 1e-6f, rows, d, 0, y, &e), 0);
        for (int64_t r = 0; r < rows; r++) {
            double ss = 0;
            for (int64_t i = 0; i < d; i++) ss += (double)x[r * d + i] * x[r * d + i];
            double inv = 1.0 / sqrt(ss / d + 1e-6);
            for (int64_t i = 0; i < d; i++) ref[r * d + i] = x[r * d + i] * inv * (wi ? w[i] : 1.0);
        }
        double err = max_rel(y, ref, rows * d, 1e-3);
        CHECK(err < 1e-5, "rmsnorm (weight %d) rel err %g", wi, err);
    }
    CHECK(be->rmsnorm(be, x, w, 1e-6f, -1, d, 0, y, &e) == ND_EXIT_INTERNAL, "negative rows rejected");
    free(x); free(w); free(y); free(ref);
}

static void test_rope(void) {
    const int64_t rows = 4, heads = 3, d = 40, off = 8, rd = 32, half = rd / 2;
    int32_t pos[4];
    float inv[16];
    for (int r = 0; r < rows; r++) pos[r] = (int32_t)(rnd64() % 5000);
    for (int i = 0; i < half; i++) inv[i] = (float)pow(10000.0, -2.0 * i / rd);
    float *x0 = fvec(rows * heads * d, -2, 2), *x = malloc(sizeof(float) * rows * heads * d);
    for (int il = 0; il < 2; il++) {
        memcpy(x, x0, sizeof(float) * rows * heads * d);
        CHECK_EQ_INT(be->rope(be, x, rows, heads, d, off, rd, pos, inv, il, 0, 0, 1.0f, &e), 0);
        double worst = 0;
        int untouched = 1;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t h = 0; h < heads; h++) {
                const float *a = x0 + (r * heads + h) * d, *b = x + (r * heads + h) * d;
                for (int64_t c = 0; c < d; c++)
                    if (c < off || c >= off + rd) untouched &= a[c] == b[c];
                for (int64_t i = 0; i < half; i++) {
                    int64_t i0 = off + (il ? 2 * i : i), i1 = off + (il ? 2 * i + 1 : i + half);
                    double ang = (double)((float)pos[r] * inv[i]);   /* the FP32 angle of the contract */
                    double e0 = a[i0] * cos(ang) - a[i1] * sin(ang), e1 = a[i0] * sin(ang) + a[i1] * cos(ang);
                    worst = fmax(worst, fmax(fabs(b[i0] - e0), fabs(b[i1] - e1)));
                }
            }
        CHECK(untouched, "rope (interleaved %d) leaves dims outside the slice alone", il);
        CHECK(worst < 2e-5, "rope (interleaved %d) abs err %g", il, worst);
        CHECK_EQ_INT(be->rope(be, x, rows, heads, d, off, rd, pos, inv, il, 1, 0, 1.0f, &e), 0);
        double back = 0;
        for (int64_t i = 0; i < rows * heads * d; i++) back = fmax(back, fabs(x[i] - x0[i]));
        CHECK(back < 2e-5, "inverse rope undoes rope (interleaved %d): %g", il, back);
    }
    CHECK(be->rope(be, x, rows, heads, d, 30, 16, pos, inv, 0, 0, 0, 1.0f, &e) == ND_EXIT_INTERNAL, "slice past d rejected");
    free(x0); free(x);
}

/* double attention: sink in the denominator only */
static void attn_ref(const float *q, const float *k, const float *v, int64_t t, int64_t s, int64_t hq,
                     int64_t hkv, int64_t d, int64_t dv, const int32_t *qp, const int32_t *kp, int64_t win,
                     double scale, const float *sinks, double *out) {
    for (int64_t i = 0; i < t; i++)
        for (int64_t h = 0; h < hq; h++) {
            int64_t kh = h / (hq / hkv);
            double den = sinks ? exp(sinks[h]) : 0, acc[64] = {0};
            int vis = 0;
            for (int64_t j = 0; j < s; j++) {
                if (kp[j] > qp[i] || (win && qp[i] - kp[j] >= win)) continue;
                double dot = 0;
                for (int64_t c = 0; c < d; c++) dot += (double)q[(i * hq + h) * d + c] * k[(j * hkv + kh) * d + c];
                double p = exp(dot * scale);
                den += p;
                vis++;
                for (int64_t c = 0; c < dv; c++) acc[c] += p * v[(j * hkv + kh) * dv + c];
            }
            for (int64_t c = 0; c < dv; c++) out[(i * hq + h) * dv + c] = vis ? acc[c] / den : 0.0;
        }
}

static void test_attention(void) {
    const int64_t t = 6, s = 9, hq = 4, hkv = 2, d = 16, dv = 12;
    int32_t qp[6], kp[9];
    for (int j = 0; j < s; j++) kp[j] = j;
    for (int i = 0; i < t; i++) qp[i] = i + 3;
    qp[0] = -1;                                     /* sees no key at all */
    float *q = fvec(t * hq * d, -1, 1), *k = fvec(s * hkv * d, -1, 1), *v = fvec(s * hkv * dv, -2, 2);
    float sinks[4], out[6 * 4 * 12];
    double ref[6 * 4 * 12];
    for (int h = 0; h < hq; h++) sinks[h] = frand(-2, 2);
    const float scale = 1.0f / sqrtf((float)d);
    for (int win = 0; win <= 4; win += 4)
        for (int sk = 0; sk < 2; sk++) {
            CHECK_EQ_INT(be->attention(be, q, k, v, t, s, hq, hkv, d, dv, qp, kp, win, scale, sk ? sinks : NULL, 0, out, &e), 0);
            attn_ref(q, k, v, t, s, hq, hkv, d, dv, qp, kp, win, scale, sk ? sinks : NULL, ref);
            /* outputs are convex combinations of v (|v| <= 2): absolute error */
            double err = 0;
            for (int64_t i = 0; i < t * hq * dv; i++) err = fmax(err, fabs(out[i] - ref[i]));
            CHECK(err < 1e-5, "attention window %d sinks %d abs err %g", win, sk, err);
            int zeros = 1;
            for (int64_t c = 0; c < hq * dv; c++) zeros &= out[c] == 0.0f;
            CHECK(zeros, "a query with no visible key gets zeros");
        }
    /* a sink far above every score takes all the probability mass */
    float big[4] = {1e4f, 1e4f, 1e4f, 1e4f};
    CHECK_EQ_INT(be->attention(be, q, k, v, t, s, hq, hkv, d, dv, qp, kp, 0, scale, big, 0, out, &e), 0);
    const double amax = amax_of(out, t * hq * dv);
    CHECK(amax < 1e-30, "huge sink drives outputs to 0 (%g)", amax);
    /* window 1: only the key at the query's own position, so the output is that v */
    CHECK_EQ_INT(be->attention(be, q, k, v, t, s, hq, hkv, d, dv, qp, kp, 1, scale, NULL, 0, out, &e), 0);
    int same = 1;
    for (int64_t i = 1; i < t; i++)
        for (int64_t h = 0; h < hq; h++)
            for (int64_t c = 0; c < dv; c++) same &= out[(i * hq + h) * dv + c] == v[((int64_t)qp[i] * hkv + h / 2) * dv + c];
    CHECK(same, "window 1 returns v of the same position");
    CHECK(be->attention(be, q, k, v, t, s, 3, 2, d, dv, qp, kp, 0, scale, NULL, 0, out, &e) == ND_EXIT_INTERNAL, "hq %% hkv rejected");
    free(q); free(k); free(v);
}

/* double hc_pre / hc_head mixer: m = rho * fn @ x */
static void hc_mix_ref(const float *X, const float *fn, int64_t n, int64_t dm, int64_t mix, double *m) {
    double ss = 0;
    for (int64_t i = 0; i < n * dm; i++) ss += (double)X[i] * X[i];
    double rho = 1.0 / sqrt(ss / (n * dm) + 1e-6);
    for (int64_t c = 0; c < mix; c++) {
        double a = 0;
        for (int64_t i = 0; i < n * dm; i++) a += (double)fn[c * n * dm + i] * X[i];
        m[c] = rho * a;
    }
}

static void test_hc(void) {
    enum { T = 3, N = 4, DM = 24, MIX = (2 + N) * N };
    const double eps = 1e-6;
    float *X = fvec(T * N * DM, -2, 2), *fn = fvec(MIX * N * DM, -0.1f, 0.1f), *base = fvec(MIX, -1, 1);
    float scale[3] = {frand(0.5f, 2), frand(0.5f, 2), frand(0.5f, 2)};
    float u[T * DM], post[T * N], comb[T * N * N];
    CHECK_EQ_INT(be->hc_pre(be, X, fn, base, scale, T, N, DM, 20, 1e-6f, 1e-6f, u, post, comb, &e), 0);
    double eu = 0, ep = 0, ec = 0, colerr = 0;
    for (int t = 0; t < T; t++) {
        const float *Xt = X + t * N * DM;
        double m[MIX], pre[N], C[N][N];
        hc_mix_ref(Xt, fn, N, DM, MIX, m);
        for (int i = 0; i < N; i++) {
            pre[i] = sigm(scale[0] * m[i] + base[i]) + eps;
            ep = fmax(ep, fabs(post[t * N + i] - 2 * sigm(scale[1] * m[N + i] + base[N + i])));
        }
        for (int i = 0; i < N; i++) {
            double z = 0;
            for (int j = 0; j < N; j++) z += exp(scale[2] * m[2 * N + i * N + j] + base[2 * N + i * N + j]);
            for (int j = 0; j < N; j++) C[i][j] = exp(scale[2] * m[2 * N + i * N + j] + base[2 * N + i * N + j]) / z + eps;
        }
        for (int it = 0; it < 20; it++) {
            if (it) for (int i = 0; i < N; i++) { double s = 0; for (int j = 0; j < N; j++) s += C[i][j]; for (int j = 0; j < N; j++) C[i][j] /= s + eps; }
            for (int j = 0; j < N; j++) { double s = 0; for (int i = 0; i < N; i++) s += C[i][j]; for (int i = 0; i < N; i++) C[i][j] /= s + eps; }
        }
        for (int i = 0; i < N; i++)
            for (int j = 0; j < N; j++) ec = fmax(ec, fabs(comb[t * N * N + i * N + j] - C[i][j]));
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int i = 0; i < N; i++) s += comb[t * N * N + i * N + j];
            colerr = fmax(colerr, fabs(s - 1));
        }
        for (int c = 0; c < DM; c++) {   /* error relative to Σ|terms|: the sum may cancel */
            double a = 0, mag = 0;
            for (int i = 0; i < N; i++) { a += pre[i] * Xt[i * DM + c]; mag += fabs(pre[i] * Xt[i * DM + c]); }
            eu = fmax(eu, fabs(u[t * DM + c] - a) / mag);
        }
    }
    CHECK(eu < 1e-5, "hc_pre u rel err %g", eu);
    CHECK(ep < 1e-6, "hc_pre post err %g", ep);
    CHECK(ec < 1e-6, "hc_pre comb err %g", ec);
    CHECK(colerr < 1e-5, "comb columns sum to 1 (%g)", colerr);
    /* hc_post, out of place and in place */
    float *y = fvec(T * DM, -3, 3), *Xo = malloc(sizeof(float) * T * N * DM), *Xc = malloc(sizeof(float) * T * N * DM);
    CHECK_EQ_INT(be->hc_post(be, X, y, post, comb, T, N, DM, 0, Xo, &e), 0);
    double eo = 0;
    for (int t = 0; t < T; t++)
        for (int j = 0; j < N; j++)
            for (int c = 0; c < DM; c++) {
                double a = (double)post[t * N + j] * y[t * DM + c], mag = fabs(a);
                for (int i = 0; i < N; i++) { double q = (double)comb[t * N * N + i * N + j] * X[(t * N + i) * DM + c]; a += q; mag += fabs(q); }
                eo = fmax(eo, fabs(Xo[(t * N + j) * DM + c] - a) / mag);
            }
    CHECK(eo < 1e-5, "hc_post rel err %g", eo);
    memcpy(Xc, X, sizeof(float) * T * N * DM);
    CHECK_EQ_INT(be->hc_post(be, Xc, y, post, comb, T, N, DM, 0, Xc, &e), 0);
    CHECK(memcmp(Xc, Xo, sizeof(float) * T * N * DM) == 0, "hc_post in place equals out of place");
    /* hc_head */
    CHECK_EQ_INT(be->hc_head(be, X, fn, base, scale, T, N, DM, 1e-6f, 1e-6f, u, &e), 0);
    double eh = 0;
    for (int t = 0; t < T; t++) {
        double m[N], pre[N];
        hc_mix_ref(X + t * N * DM, fn, N, DM, N, m);
        for (int i = 0; i < N; i++) pre[i] = sigm(scale[0] * m[i] + base[i]) + eps;
        for (int c = 0; c < DM; c++) {
            double a = 0, mag = 0;
            for (int i = 0; i < N; i++) { a += pre[i] * X[(t * N + i) * DM + c]; mag += fabs(pre[i] * X[(t * N + i) * DM + c]); }
            eh = fmax(eh, fabs(u[t * DM + c] - a) / mag);
        }
    }
    CHECK(eh < 1e-5, "hc_head rel err %g", eh);
    CHECK(be->hc_pre(be, X, fn, base, scale, T, N, DM, 0, 1e-6f, 1e-6f, u, post, comb, &e) == ND_EXIT_INTERNAL, "iters 0 rejected");
    free(X); free(fn); free(base); free(y); free(Xo); free(Xc);
}

/* router reference: rank by (sel desc, index asc) with a plain insertion sort in double */
static void router_ref(const float *lg, const float *bias, const nd_router_cfg *c, int32_t *idx, double *w) {
    int E = c->n_experts;
    double sc[64], sel[64];
    double mx = -INFINITY, z = 0;
    for (int x = 0; x < E; x++) mx = fmax(mx, lg[x]);
    for (int x = 0; x < E; x++) z += exp(lg[x] - mx);
    for (int x = 0; x < E; x++) {
        double l = lg[x];
        sc[x] = c->score_func == ND_SCORE_SOFTMAX ? exp(l - mx) / z
              : c->score_func == ND_SCORE_SIGMOID ? sigm(l) : sqrt(l > 20 ? l : log1p(exp(l)));
        sel[x] = sc[x] + (bias ? bias[x] : 0);
    }
    int allowed[64];
    for (int x = 0; x < E; x++) allowed[x] = 1;
    if (c->n_group) {
        int gsz = E / c->n_group, gorder[64];
        double gs[64];
        for (int g = 0; g < c->n_group; g++) {
            double a = -INFINITY, b = -INFINITY;
            for (int x = g * gsz; x < (g + 1) * gsz; x++) { if (sel[x] > a) { b = a; a = sel[x]; } else if (sel[x] > b) b = sel[x]; }
            gs[g] = a + b;
            gorder[g] = g;
        }
        for (int i = 1; i < c->n_group; i++)
            for (int j = i; j > 0 && gs[gorder[j]] > gs[gorder[j - 1]]; j--) { int tmp = gorder[j]; gorder[j] = gorder[j - 1]; gorder[j - 1] = tmp; }
        for (int x = 0; x < E; x++) allowed[x] = 0;
        for (int p = 0; p < c->topk_group; p++)
            for (int x = gorder[p] * gsz; x < (gorder[p] + 1) * gsz; x++) allowed[x] = 1;
    }
    int order[64], no = 0;
    for (int x = 0; x < E; x++) if (allowed[x]) order[no++] = x;
    for (int i = 1; i < no; i++)
        for (int j = i; j > 0 && sel[order[j]] > sel[order[j - 1]]; j--) { int tmp = order[j]; order[j] = order[j - 1]; order[j - 1] = tmp; }
    double sum = 0;
    for (int p = 0; p < c->top_k; p++) { idx[p] = order[p]; w[p] = sc[order[p]]; sum += w[p]; }
    for (int p = 0; p < c->top_k; p++) w[p] = (c->norm_topk ? w[p] / (sum + 1e-20) : w[p]) * c->scaling;
}

static void test_router(void) {
    enum { T = 7, E = 32, K = 6 };
    float lg[T * E], bias[E];
    int32_t idx[T * K], ridx[K];
    float w[T * K];
    double rw[K];
    /* distinct logits 0.07 apart, shuffled, so the ranking is unambiguous in float and double */
    for (int t = 0; t < T; t++) {
        for (int x = 0; x < E; x++) lg[t * E + x] = -1.5f + 0.07f * (float)x;
        for (int x = E - 1; x > 0; x--) { int j = (int)(rnd64() % (uint64_t)(x + 1)); float tmp = lg[t * E + x]; lg[t * E + x] = lg[t * E + j]; lg[t * E + j] = tmp; }
    }
    for (int x = 0; x < E; x++) bias[x] = 0.0f;
    for (int f = 0; f < 3; f++)
        for (int grp = 0; grp < 2; grp++)
            for (int nb = 0; nb < 2; nb++) {
                nd_router_cfg c = {E, K, f, grp ? 8 : 0, grp ? 3 : 0, f != ND_SCORE_SOFTMAX, f == 2 ? 2.5f : 1.0f, 0};
                if (nb) for (int x = 0; x < E; x++) bias[x] = (x % 5 == 0) ? 0.6f : 0.0f;
                else for (int x = 0; x < E; x++) bias[x] = 0.0f;
                CHECK_EQ_INT(be->router_topk(be, lg, nb ? bias : NULL, T, &c, idx, w, &e), 0);
                int bad_idx = 0;
                double werr = 0;
                for (int t = 0; t < T; t++) {
                    router_ref(lg + t * E, nb ? bias : NULL, &c, ridx, rw);
                    for (int p = 0; p < K; p++) {
                        bad_idx += idx[t * K + p] != ridx[p];
                        werr = fmax(werr, fabs(w[t * K + p] - rw[p]) / fabs(rw[p]));
                    }
                }
                CHECK(bad_idx == 0, "router func %d groups %d bias %d: %d indices differ", f, grp, nb, bad_idx);
                CHECK(werr < 2e-6, "router func %d groups %d bias %d: weight rel err %g", f, grp, nb, werr);
            }
    /* bias changes selection only: a huge bias on expert 3 picks it first, weight = its score */
    for (int x = 0; x < E; x++) bias[x] = x == 3 ? 100.0f : 0.0f;
    nd_router_cfg c = {E, K, ND_SCORE_SIGMOID, 0, 0, 0, 1.0f, 0};
    CHECK_EQ_INT(be->router_topk(be, lg, bias, 1, &c, idx, w, &e), 0);
    CHECK(idx[0] == 3 && fabs(w[0] - sigm(lg[3])) < 1e-6, "biased pick: idx %d w %g score %g", idx[0], w[0], sigm(lg[3]));
    /* ties go to the lower index */
    float flat[E];
    for (int x = 0; x < E; x++) flat[x] = 0.25f;
    CHECK_EQ_INT(be->router_topk(be, flat, NULL, 1, &c, idx, w, &e), 0);
    int inorder = 1;
    for (int p = 0; p < K; p++) inorder &= idx[p] == p;
    CHECK(inorder, "ties by the lower expert index");
    nd_router_cfg badc = {E, K, 0, 5, 1, 0, 1.0f, 0};
    CHECK(be->router_topk(be, lg, NULL, 1, &badc, idx, w, &e) == ND_EXIT_INTERNAL, "groups must divide experts");
}

static void test_swiglu(void) {
    const int64_t n = 1000;
    float *g = fvec(n, -30, 30), *v = fvec(n, -30, 30), *h = fvec(n, 0, 0);
    double *ref = malloc(sizeof(double) * n);
    for (int lim = 0; lim < 2; lim++) {
        double L = lim ? 10.0 : 0.0;
        CHECK_EQ_INT(be->swiglu(be, g, v, n, (float)L, 0, h, &e), 0);
        for (int64_t i = 0; i < n; i++) {
            double gg = g[i], vv = v[i];
            if (L > 0) { gg = fmin(gg, L); vv = fmax(-L, fmin(vv, L)); }
            ref[i] = gg / (1 + exp(-gg)) * vv;
        }
        double err = max_rel(h, ref, n, 1e-3);
        CHECK(err < 1e-5, "swiglu limit %g rel err %g", L, err);
    }
    free(g); free(v); free(h); free(ref);
}

static void test_gemm(void) {
    const int64_t m = 70, n = 300, k = 260;   /* above the threading threshold */
    float *x = fvec(m * k, -1, 1), *w = fvec(n * k, -1, 1), *y = fvec(m * n, 0, 0);
    float *yo = fvec(m * n, 0, 0);
    /* ND_GEMM_F32: the BLAS's order, within FP32 rounding of the exact sum; ND_GEMM_ORDERED: the
     * sequential FP32 sum bit for bit (blocking and threads do not reorder it) */
    CHECK_EQ_INT(be->gemm(be, x, w, y, m, n, k, 0.5f, ND_GEMM_F32, &e), 0);
    CHECK_EQ_INT(be->gemm(be, x, w, yo, m, n, k, 0.5f, ND_GEMM_ORDERED, &e), 0);
    double err = 0, err_o = 0;
    int seq_exact = 1;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double a = 0, mag = 0;
            float fs = 0.0f;
            for (int64_t c = 0; c < k; c++) { a += (double)x[i * k + c] * w[j * k + c]; mag += fabs((double)x[i * k + c] * w[j * k + c]); fs += x[i * k + c] * w[j * k + c]; }
            err = fmax(err, fabs(y[i * n + j] - 0.5 * a) / (0.5 * mag));
            err_o = fmax(err_o, fabs(yo[i * n + j] - 0.5 * a) / (0.5 * mag));
            seq_exact &= yo[i * n + j] == fs * 0.5f;
        }
    CHECK(err < 1e-6 * k, "gemm (f32) error %g of sum |x w|", err);
    CHECK(err_o < 1e-6 * k, "gemm (ordered) error %g of sum |x w|", err_o);
    CHECK(seq_exact, "ordered gemm equals the sequential FP32 sum (blocking and threads do not reorder)");
    free(yo);
    /* grouped */
    const int64_t gm = 5, G = 3, gn = 7, gk = 33;
    float *gx = fvec(gm * G * gk, -1, 1), *gw = fvec(G * gn * gk, -1, 1), *gy = fvec(gm * G * gn, 0, 0);
    CHECK_EQ_INT(be->gemm_grouped(be, gx, gw, gy, gm, G, gn, gk, 2.0f, 1, &e), 0);
    double gerr = 0;
    for (int64_t i = 0; i < gm; i++)
        for (int64_t g = 0; g < G; g++)
            for (int64_t j = 0; j < gn; j++) {
                double a = 0;
                for (int64_t c = 0; c < gk; c++) a += (double)gx[(i * G + g) * gk + c] * gw[(g * gn + j) * gk + c];
                gerr = fmax(gerr, fabs(gy[(i * G + g) * gn + j] - 2 * a));
            }
    CHECK(gerr < 1e-4, "gemm_grouped abs err %g", gerr);
    CHECK(be->gemm(be, x, w, y, m, -n, k, 1.0f, 0, &e) == ND_EXIT_INTERNAL, "negative n rejected");
    CHECK(be->gemm(be, x, w, y, m, n, k, 1.0f, ND_GEMM_ORDERED + 1, &e) == ND_EXIT_INTERNAL && strstr(e.msg, "unknown mode"),
          "an unknown gemm mode rejected: %s", e.msg);
    free(x); free(w); free(y); free(gx); free(gw); free(gy);
}

/* decoders written from the format definitions */
static double def_e4m3(uint8_t b) {
    int s = b >> 7, ex = (b >> 3) & 15, m = b & 7;
    if (ex == 15 && m == 7) return NAN;
    double v = ex == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, ex - 7);
    return s ? -v : v;
}
static double def_e2m1(int c) {
    static const double mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}
static int same_f(float a, double b) { float bf = (float)b; return (isnan(a) && isnan(bf)) || a == bf; }

static void test_dequant(void) {
    const int64_t rows = 6, k = 64;
    uint8_t pk[6 * 32], sf[6 * 4], sfm[6 * 2], w8[7 * 11];
    for (int i = 0; i < rows * k / 2; i++) pk[i] = (uint8_t)rnd64();
    for (int i = 0; i < rows * k / 16; i++) sf[i] = (uint8_t)(rnd64() % 0x7f);   /* no NaN */
    float out[7 * 64];
    const float g = 2688.0f / 3.3f;
    CHECK_EQ_INT(be->dequant_nvfp4(be, pk, sf, g, rows, k, out, &e), 0);
    int bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) {
            int code = (j & 1) ? pk[r * 32 + j / 2] >> 4 : pk[r * 32 + j / 2] & 15;
            float s = (float)(def_e4m3(sf[r * 4 + j / 16]) / g);     /* one rounding, then an exact product */
            bad += !same_f(out[r * k + j], def_e2m1(code) * s);
        }
    CHECK_EQ_INT(bad, 0);
    /* MXFP4: e8m0 = 2^(b-127) */
    for (int i = 0; i < rows * 2; i++) sfm[i] = (uint8_t)(100 + rnd64() % 50);
    sfm[3] = 0xff;
    CHECK_EQ_INT(be->dequant_mxfp4(be, pk, sfm, rows, k, out, &e), 0);
    bad = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < k; j++) {
            int code = (j & 1) ? pk[r * 32 + j / 2] >> 4 : pk[r * 32 + j / 2] & 15;
            uint8_t b = sfm[r * 2 + j / 32];
            bad += !same_f(out[r * k + j], b == 0xff ? NAN : def_e2m1(code) * ldexp(1.0, b - 127));
        }
    CHECK_EQ_INT(bad, 0);
    /* FP8, every scale kind, with partial blocks (7 x 11, blocks 3 x 5) */
    const int64_t fr = 7, fk = 11;
    for (int i = 0; i < fr * fk; i++) w8[i] = (uint8_t)rnd64();
    float st = frand(0.001f, 2), sch[7], sbl[3 * 3];
    uint8_t se8[9];
    for (int i = 0; i < 7; i++) sch[i] = frand(0.001f, 2);
    for (int i = 0; i < 9; i++) { sbl[i] = frand(0.001f, 2); se8[i] = (uint8_t)(110 + rnd64() % 30); }
    for (int kind = 0; kind < 4; kind++) {
        const void *sp = kind == 0 ? (const void *)&st : kind == 1 ? (const void *)sch : kind == 2 ? (const void *)sbl : (const void *)se8;
        CHECK_EQ_INT(be->dequant_fp8(be, w8, sp, kind, 3, 5, fr, fk, out, &e), 0);
        bad = 0;
        for (int64_t r = 0; r < fr; r++)
            for (int64_t j = 0; j < fk; j++) {
                double s = kind == 0 ? st : kind == 1 ? sch[r] : kind == 2 ? sbl[(r / 3) * 3 + j / 5] : ldexp(1.0, se8[(r / 3) * 3 + j / 5] - 127);
                bad += !same_f(out[r * fk + j], def_e4m3(w8[r * fk + j]) * s);
            }
        CHECK(bad == 0, "dequant_fp8 kind %d: %d mismatches", kind, bad);
    }
    CHECK(be->dequant_fp8(be, w8, sbl, 2, 0, 5, fr, fk, out, &e) == ND_EXIT_INTERNAL, "block size 0 rejected");
    CHECK(be->dequant_nvfp4(be, pk, sf, g, rows, 40, out, &e) == ND_EXIT_INTERNAL, "k %% 16 rejected");
    /* to_f32 from BF16 and F16 bit patterns */
    uint16_t h[64];
    for (int i = 0; i < 64; i++) h[i] = (uint16_t)rnd64();
    CHECK_EQ_INT(be->to_f32(be, h, ND_DT_BF16, 64, out, &e), 0);
    bad = 0;
    for (int i = 0; i < 64; i++) { uint32_t u = (uint32_t)h[i] << 16; float f; memcpy(&f, &u, 4); bad += memcmp(&f, &out[i], 4) != 0; }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(be->to_f32(be, h, ND_DT_F16, 64, out, &e), 0);
    bad = 0;
    for (int i = 0; i < 64; i++) {
        int s = h[i] >> 15, ex = (h[i] >> 10) & 31, m = h[i] & 1023;
        double v = ex == 31 ? (m ? NAN : INFINITY) : ex == 0 ? ldexp(m, -24) : ldexp(1024 + m, ex - 25);
        bad += !same_f(out[i], s ? -v : v);
    }
    CHECK_EQ_INT(bad, 0);
    CHECK(be->to_f32(be, h, ND_DT_I8, 4, out, &e) == ND_EXIT_INTERNAL, "unsupported dtype rejected");
    CHECK(!strncmp(e.msg, "cpu: op to_f32 does not support dtype #", 39), "%s", e.msg);
    /* the CPU supports what backend.h declares and no more; a backend that does not declare a dtype
     * refuses it by name (nd_backend_require), whatever its code could do */
    CHECK(nd_backend_supports(be, ND_OP_to_f32, ND_ODT_BF16 | ND_ODT_F16 | ND_ODT_F32), "to_f32 declares bf16, f16, f32");
    CHECK(!nd_backend_supports(be, ND_OP_to_f32, ND_ODT_E4M3) && !nd_backend_supports(be, ND_OP_gemm, ND_ODT_NVFP4),
          "undeclared dtypes are not supported");
    CHECK(nd_backend_supports(be, ND_OP_dequant_fp8, ND_ODT_E4M3 | ND_ODT_E8M0), "dequant_fp8 declares e4m3, ue8m0");
    const unsigned keep_cvt = be->op_dtypes[ND_OP_to_f32], keep_fp8 = be->op_dtypes[ND_OP_dequant_fp8],
                   keep_gemm = be->op_dtypes[ND_OP_gemm];
    be->op_dtypes[ND_OP_to_f32] &= ~(unsigned)ND_ODT_BF16;
    CHECK(be->to_f32(be, h, ND_DT_BF16, 64, out, &e) == ND_EXIT_INTERNAL, "bf16 refused once undeclared");
    CHECK(!strcmp(e.msg, "cpu: op to_f32 does not support bf16"), "%s", e.msg);
    CHECK_EQ_INT(be->to_f32(be, h, ND_DT_F16, 64, out, &e), 0);
    be->op_dtypes[ND_OP_dequant_fp8] &= ~(unsigned)ND_ODT_E8M0;
    CHECK(be->dequant_fp8(be, w8, se8, ND_FP8_SCALE_BLOCK_E8M0, 3, 5, fr, fk, out, &e) == ND_EXIT_INTERNAL,
          "e8m0 scales refused once undeclared");
    CHECK(!strcmp(e.msg, "cpu: op dequant_fp8 does not support ue8m0"), "%s", e.msg);
    CHECK_EQ_INT(be->dequant_fp8(be, w8, sbl, ND_FP8_SCALE_BLOCK_F32, 3, 5, fr, fk, out, &e), 0);
    be->op_dtypes[ND_OP_gemm] &= ~(unsigned)ND_ODT_BF16;
    CHECK(be->gemm(be, out, out + 16, out + 32, 2, 2, 4, 1.0f, 1, &e) == ND_EXIT_INTERNAL, "bf16_exact refused once undeclared");
    CHECK(!strcmp(e.msg, "cpu: op gemm does not support bf16"), "%s", e.msg);
    CHECK_EQ_INT(be->gemm(be, out, out + 16, out + 32, 2, 2, 4, 1.0f, 0, &e), 0);
    be->op_dtypes[ND_OP_to_f32] = keep_cvt;
    be->op_dtypes[ND_OP_dequant_fp8] = keep_fp8;
    be->op_dtypes[ND_OP_gemm] = keep_gemm;
}

/* MXFP4 block-scale rules on blocks worked out by hand (docs/formats.md):
 *  A = {7, 1.25, 0.25, 2.5, -5, 0.75, 0...}: OCP floor(log2 7) - 2 = 0 -> byte 127, 7 clips to 6,
 *      RNE ties 1.25 -> 1, 0.25 -> 0, 2.5 -> 2, -5 -> -4, 0.75 -> 1; CEIL 7/6 -> 2 (byte 128):
 *      3.5 -> 4, 0.625 -> 0.5, 0.125 -> 0, 1.25 -> 1, -2.5 -> -2, 0.375 -> 0.5; TRITON the same
 *      scale with ties away (1.25 -> 1.5, -2.5 -> -3); CT rounds 7 (mantissa 1.75) up to 8: byte 128.
 *  B = {6.5, 0.25, 0...}: mantissa 1.625 stays at 4 for OCP and CT (byte 127, 6.5 clips, 0.25 -> 0);
 *      CEIL/TRITON 6.5/6 -> 2: 3.25 -> 3, 0.125 -> 0.
 *  C = zeros: byte 0 (2^-127) and zero codes on every rule.  D = {NaN, 1, 0...}: byte 0xFF, NaN
 *  -> code 7, the others 0 (x times the infinite scale's zero multiplier). */
static void test_quant_mxfp4(void) {
    float x[128];
    memset(x, 0, sizeof x);
    const float a[6] = {7.0f, 1.25f, 0.25f, 2.5f, -5.0f, 0.75f};
    memcpy(x, a, sizeof a);
    x[32] = 6.5f; x[33] = 0.25f;
    x[96] = NAN; x[97] = 1.0f;
    static const uint8_t want_sf[4][4] = {{127, 127, 0, 0xff}, {128, 128, 0, 0xff}, {128, 128, 0, 0xff}, {128, 127, 0, 0xff}};
    static const uint8_t want_a[4][6] = {{7, 2, 0, 4, 14, 2}, {6, 1, 0, 2, 12, 1}, {6, 1, 0, 3, 13, 1}, {6, 1, 0, 2, 12, 1}};
    static const uint8_t want_b[4][2] = {{7, 0}, {5, 0}, {5, 0}, {7, 0}};
    static const int want_sat[4] = {2, 0, 0, 1}; /* CT's block A has scale 2: only B clips */
    for (int sem = 0; sem < ND_MXSEM_N; sem++) {
        uint8_t codes[64], sf[4];
        nd_qstats st;
        CHECK_EQ_INT(be->quant_mxfp4(be, x, sem, 1, 128, codes, sf, &st, &e), 0);
        for (int b = 0; b < 4; b++) CHECK(sf[b] == want_sf[sem][b], "sem %d block %d: scale byte %d, want %d", sem, b, sf[b], want_sf[sem][b]);
        for (int j = 0; j < 6; j++) CHECK(nd_nibble(codes, j) == want_a[sem][j], "sem %d A[%d] (%g): code %d, want %d", sem, j, a[j], nd_nibble(codes, j), want_a[sem][j]);
        for (int j = 0; j < 2; j++) CHECK(nd_nibble(codes, 32 + j) == want_b[sem][j], "sem %d B[%d]: code %d, want %d", sem, j, nd_nibble(codes, 32 + j), want_b[sem][j]);
        int bad = 0;
        for (int j = 6; j < 128; j++) bad += j != 32 && j != 33 && j != 96 && nd_nibble(codes, j) != 0;
        CHECK(bad == 0, "sem %d: %d codes of zeros / of the NaN block's finite element are not 0", sem, bad);
        CHECK(nd_nibble(codes, 96) == 7, "sem %d: the NaN element's code is %d, want 7", sem, nd_nibble(codes, 96));
        CHECK_EQ_INT((int)st.n_saturated, want_sat[sem]);
        CHECK_EQ_INT((int)st.n_blocks, 4);
        CHECK_EQ_INT((int)st.n_nonzero_blocks, 2);
        CHECK_EQ_INT((int)st.n_nan_scale, 1);
    }
    /* the ends of the E8M0 range: FLT_MAX/6 is below 2^126 (3e38/6 rounds up to 2^126, byte 253),
     * only an Inf amax gives 0xFF; a subnormal amax/6 goes up to 2^-126 (byte 1) */
    CHECK_EQ_INT(nd_mxfp4_scale_byte(3.0e38f, ND_MXSEM_CEIL), 253);
    CHECK_EQ_INT(nd_mxfp4_scale_byte(INFINITY, ND_MXSEM_CEIL), 0xff);
    CHECK_EQ_INT(nd_mxfp4_scale_byte(INFINITY, ND_MXSEM_OCP), 0xff);
    CHECK_EQ_INT(nd_mxfp4_scale_byte(1e-40f, ND_MXSEM_CEIL), 1);
    CHECK_EQ_INT(nd_mxfp4_scale_byte(1e-40f, ND_MXSEM_OCP), 0);
    CHECK_EQ_INT(nd_mxfp4_scale_byte(3.0e38f, ND_MXSEM_OCP), 252);
    CHECK_EQ_INT(nd_e8m0_from_f32_ceil(1.0f), 127);
    CHECK_EQ_INT(nd_e8m0_from_f32_ceil(1.0000001f), 128);
    CHECK(nd_e8m0_inv(0) == ldexpf(1.0f, 127) && nd_e8m0_inv(254) == ldexpf(1.0f, -127) && nd_e8m0_inv(127) == 1.0f,
          "nd_e8m0_inv: %g %g %g", nd_e8m0_inv(0), nd_e8m0_inv(254), nd_e8m0_inv(127));
    uint8_t c[16], f[1];
    CHECK(be->quant_mxfp4(be, x, 0, 1, 48, c, f, NULL, &e) == ND_EXIT_INTERNAL, "k = 48 accepted");
    CHECK(be->quant_mxfp4(be, x, 9, 1, 32, c, f, NULL, &e) == ND_EXIT_INTERNAL, "semantics 9 accepted");
}

/* max |x| over the group of g columns (the row's last one may be short) that holds element i of x [., k] */
static double group_amax(const float *x, int64_t k, int64_t g, int64_t i) {
    const int64_t c0 = i % k / g * g, c1 = c0 + g < k ? c0 + g : k;
    return amax_of(x + i / k * k + c0, c1 - c0);
}

static void test_fake_quant_fp8(void) {
    const int64_t rows = 3, k = 100;   /* groups of 32: the last one is short */
    float *x = fvec(rows * k, -5, 5), *o = fvec(rows * k, 0, 0);
    double grid[127];
    for (int b = 0; b < 127; b++) grid[b] = def_e4m3((uint8_t)b);
    CHECK_EQ_INT(be->fake_quant_fp8(be, x, rows, k, 32, 1, o, &e), 0);
    int bad = 0;
    for (int64_t i = 0; i < rows * k; i++) {
        const double s = ldexp(1.0, (int)ceil(log2(group_amax(x, k, 32, i) / 448.0)));   /* 2^ceil(log2(amax/448)) */
        const double a = fabs(x[i]) / s;                                                 /* exact: s is a power of two */
        int best = 0;
        for (int b = 1; b < 127; b++) { double db = fabs(a - grid[best]), d = fabs(a - grid[b]); if (d < db || (d == db && !(b & 1))) best = b; }
        bad += !same_f(o[i], copysign(grid[best] * s, x[i]));
    }
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(be->fake_quant_fp8(be, x, rows, k, 32, 0, o, &e), 0);
    double worst = 0;
    for (int64_t i = 0; i < rows * k; i++)   /* within half an e4m3 step (2^-4 relative) */
        worst = fmax(worst, fabs(o[i] - x[i]) / fmax(fabs(x[i]), group_amax(x, k, 32, i) / 448 * 0.015625));
    CHECK(worst <= 0.0625 * 1.0001, "fake_quant_fp8 relative error %g", worst);
    free(x);
    free(o);
}

static void test_gather_scatter(void) {
    const int64_t rows = 5, d = 9;
    float *x = fvec(rows * d, -1, 1), out[4 * 9], y[5 * 9] = {0}, wts[4] = {0.5f, -1, 2, 0.25f};
    int32_t idx[4] = {4, 0, 4, 2};
    CHECK_EQ_INT(be->gather_rows(be, x, idx, 4, d, out, &e), 0);
    int ok = 1;
    for (int r = 0; r < 4; r++) ok &= memcmp(out + r * d, x + idx[r] * d, sizeof(float) * d) == 0;
    CHECK(ok, "gather_rows copies the rows");
    CHECK_EQ_INT(be->scatter_add_rows(be, y, out, idx, wts, 4, d, 0, &e), 0);
    double err = 0;
    for (int r = 0; r < rows; r++)
        for (int c = 0; c < d; c++) {
            double a = 0;
            for (int q = 0; q < 4; q++) if (idx[q] == r) a += (double)wts[q] * x[idx[q] * d + c];
            err = fmax(err, fabs(y[r * d + c] - a));
        }
    CHECK(err < 1e-6, "scatter_add_rows err %g", err);
    int32_t neg[1] = {-1};
    CHECK(be->gather_rows(be, x, neg, 1, d, out, &e) == ND_EXIT_INTERNAL, "negative row rejected");
    free(x);
}

static void test_compare(void) {
    const int64_t n = 1000, blk = 16;
    float *r = fvec(n, -1, 1), *p = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++) p[i] = r[i] + frand(-1e-3f, 1e-3f);
    for (int64_t i = 3 * blk; i < 4 * blk; i++) p[i] = r[i] + 0.5f;   /* block 3 is the worst */
    p[10] = NAN; p[500] = NAN; r[700] = INFINITY; p[800] = -INFINITY;
    nd_cmp c;
    CHECK_EQ_INT(be->compare(be, r, p, n, blk, &c, &e), 0);
    double rr = 0, pp = 0, rp = 0, ee = 0, mae = 0, ra = 0, pa = 0, b3 = 0, b3r = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isfinite(r[i])) ra = fmax(ra, fabs(r[i]));
        if (isfinite(p[i])) pa = fmax(pa, fabs(p[i]));
        if (!isfinite(r[i]) || !isfinite(p[i])) continue;
        double d = (double)r[i] - p[i];
        rr += (double)r[i] * r[i]; pp += (double)p[i] * p[i]; rp += (double)r[i] * p[i]; ee += d * d;
        mae = fmax(mae, fabs(d));
        if (i / blk == 3) { b3 += d * d; b3r += (double)r[i] * r[i]; }
    }
    CHECK_EQ_INT(c.n, n);
    CHECK_EQ_INT(c.prod_nan, 2);
    CHECK_EQ_INT(c.ref_nan, 0);
    CHECK_EQ_INT(c.ref_inf, 1);
    CHECK_EQ_INT(c.prod_inf, 1);
    CHECK(c.ref_amax == ra && c.prod_amax == pa, "amax %g %g vs %g %g", c.ref_amax, c.prod_amax, ra, pa);
    CHECK(fabs(c.sum_rr - rr) <= 1e-12 * rr && fabs(c.sum_pp - pp) <= 1e-12 * pp, "energies");
    CHECK(fabs(c.sum_rp - rp) <= 1e-12 * rr && fabs(c.sum_ee - ee) <= 1e-12 * ee, "cross and error sums");
    CHECK(c.max_abs_err == mae, "max abs err %g vs %g", c.max_abs_err, mae);
    CHECK_EQ_INT(c.worst_block, 3);
    CHECK(fabs(c.worst_block_ee - b3) <= 1e-12 * b3 && fabs(c.worst_block_rr - b3r) <= 1e-12 * b3r, "worst block energies");
    /* identical inputs: cosine exactly 1 from the sums, zero error, worst block 0 by the tie rule */
    CHECK_EQ_INT(be->compare(be, r, r, 600, blk, &c, &e), 0);
    CHECK(c.sum_ee == 0 && c.sum_rp == c.sum_rr && c.sum_pp == c.sum_rr && c.worst_block == 0, "identical inputs");
    CHECK(fabs(c.sum_rp / sqrt(c.sum_rr * c.sum_pp) - 1) < 1e-15, "cosine 1");
    /* prod NULL: ref fields only, sum_rr over every finite ref element */
    double rr_all = 0;
    for (int64_t i = 0; i < n; i++) if (isfinite(r[i])) rr_all += (double)r[i] * r[i];
    CHECK_EQ_INT(be->compare(be, r, NULL, n, blk, &c, &e), 0);
    CHECK(c.ref_inf == 1 && c.prod_nan == 0 && c.sum_pp == 0 && c.worst_block == -1, "ref only");
    CHECK(fabs(c.sum_rr - rr_all) <= 1e-12 * rr_all, "ref-only energy %.17g vs %.17g", c.sum_rr, rr_all);
    CHECK_EQ_INT(be->compare(be, r, p, 0, blk, &c, &e), 0);
    CHECK_EQ_INT(c.worst_block, -1);
    CHECK(be->compare(be, r, p, n, 0, &c, &e) == ND_EXIT_INTERNAL, "block 0 rejected");
    free(r); free(p);
}

/* nd_cmp_rule.h: the worst-block rule (larger error energy, equal energies to the lower block) that
 * the CPU and CUDA compare share, and the energy ratio behind rel_l2 and worst_block_rel */
static void test_cmp_rule(void) {
    CHECK(nd_cmp_block_worse(7, 0.0, -1, 0.0), "the first block is the worst so far");
    CHECK(!nd_cmp_block_worse(-1, 5.0, 2, 1.0), "no block (-1) never wins");
    CHECK(nd_cmp_block_worse(4, 2.0, 1, 1.5) && !nd_cmp_block_worse(0, 1.0, 3, 1.5), "larger energy wins");
    CHECK(nd_cmp_block_worse(2, 1.5, 5, 1.5) && !nd_cmp_block_worse(5, 1.5, 2, 1.5), "tie: lower index");
    CHECK(nd_cmp_energy_ratio(0.0, 0.0) == 0.0 && nd_cmp_energy_ratio(3.0, 12.0) == 0.25, "ratios");
    CHECK(isinf(nd_cmp_energy_ratio(1e-30, 0.0)) && nd_cmp_energy_ratio(1e-30, 0.0) > 0, "e / 0 is +inf");
    /* two blocks with the same error energy (blocks 2 and 5, same deltas on zero ref: 5 x 0.25² + 5 x 0.5²): block 2 */
    const int64_t n = 128, blk = 16;
    float *r = calloc(n, sizeof(float)), *p = calloc(n, sizeof(float));
    for (int64_t i = 0; i < blk; i++) p[2 * blk + i] = p[5 * blk + i] = 0.25f * (float)(i % 3);
    nd_cmp c;
    CHECK_EQ_INT(be->compare(be, r, p, n, blk, &c, &e), 0);
    CHECK_EQ_INT(c.worst_block, 2);
    CHECK(c.worst_block_ee == 1.5625 && c.worst_block_rr == 0, "block 2 energies %g %g", c.worst_block_ee, c.worst_block_rr);
    nd_row row;
    memset(&row, 0, sizeof row);
    nd_probe_fill(&row, &c);   /* zero reference: rel_l2 and the block's relative error are +inf */
    CHECK(isinf(row.rel_l2) && isinf(row.worst_block_rel) && row.worst_block == 2, "zero ref: %g %g", row.rel_l2, row.worst_block_rel);
    for (int64_t i = 0; i < n; i++) r[i] = 1.0f;
    CHECK_EQ_INT(be->compare(be, r, r, n, blk, &c, &e), 0);
    nd_probe_fill(&row, &c);
    CHECK(row.rel_l2 == 0 && row.worst_block_rel == 0 && row.worst_block == 0, "identical: %g %g", row.rel_l2, row.worst_block_rel);
    p[0] = 3.0f;               /* r = 1 everywhere, one element off by 2: ee 4, rr 128, block rr 16 */
    for (int64_t i = 1; i < n; i++) p[i] = 1.0f;
    CHECK_EQ_INT(be->compare(be, r, p, n, blk, &c, &e), 0);
    nd_probe_fill(&row, &c);
    CHECK(row.rel_l2 == sqrt(4.0 / 128.0) && row.worst_block_rel == 0.25, "rel %.17g block %.17g", row.rel_l2, row.worst_block_rel);
    free(r); free(p);
}

int main(void) {
    rnd_seed();
    if (nd_backend_cpu_create(&be, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    test_rmsnorm();
    test_rope();
    test_attention();
    test_hc();
    test_router();
    test_swiglu();
    test_gemm();
    test_dequant();
    test_quant_mxfp4();
    test_fake_quant_fp8();
    test_gather_scatter();
    test_compare();
    test_cmp_rule();
    be->destroy(be);
    return nd_test_report("test_ops_cpu");
}
