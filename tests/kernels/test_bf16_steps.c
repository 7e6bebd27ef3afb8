/* test_bf16_steps.c — the CPU backend's ops with transformers' BF16 steps (--ref-numerics
 * transformers, kernels/numerics/nd_bf16_steps.h) against formulas written here from the
 * transformers lines they mirror, with a BF16 rounding of their own (significand to 8 bits by
 * nearbyint, i.e. round-half-even). Each formula repeats the op's FP32 operations in the op's
 * order, so the outputs must be bit-equal; each case also checks that the steps change the result
 * (the FP32 variant gives other values) where they should. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "backend.h"
#include "numerics/nd_bf16_steps.h"

/* BF16 round-to-nearest-even of a finite float, written independently of nd_bf16_round */
static float bf(float f) {
    if (f == 0.0f || !isfinite(f)) return f;
    int e;
    const double m = frexp((double)f, &e);   /* |m| in [0.5, 1): 8 significant bits = m * 2^8 */
    return (float)ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

static uint32_t rs = 12345u;
static float rnd(float scale) {
    rs ^= rs << 13; rs ^= rs >> 17; rs ^= rs << 5;
    return scale * ((float)(rs & 0xffffff) / 8388608.0f - 1.0f);
}
static void fill_bf16(float *x, int64_t n, float scale) { for (int64_t i = 0; i < n; i++) x[i] = bf(rnd(scale)); }

static int64_t count_diff(const float *a, const float *b, int64_t n) {
    int64_t d = 0;
    for (int64_t i = 0; i < n; i++) d += memcmp(&a[i], &b[i], 4) != 0;
    return d;
}

static void test_bf16_rounding(void) {
    /* ties go to even: 1 + 2^-8 sits between 1 and 1 + 2^-7 */
    CHECK(bf(1.0f + 0.00390625f) == 1.0f, "tie to even (down)");
    CHECK(bf(1.0f + 3 * 0.00390625f) == 1.0f + 4 * 0.00390625f, "tie to even (up)");
    for (int i = 0; i < 100000; i++) {
        const float x = rnd(1000.0f);
        CHECK(bf(x) == nd_bf16_round(x), "bf16 rounding of %.9g: %.9g vs %.9g", x, bf(x), nd_bf16_round(x));
    }
}

static void test_rmsnorm(nd_backend *be) {
    enum { R = 6, D = 48 };
    float x[R * D], w[D], y[R * D], yf[R * D], want[R * D];
    fill_bf16(x, R * D, 3.0f);
    for (int i = 0; i < D; i++) w[i] = bf(1.0f + rnd(0.3f));
    nd_err e = {0};
    for (int st = ND_NORM_BF16_THEN_W; st <= ND_NORM_RSQRT_BF16; st++)
        for (int hw = 0; hw < 2; hw++) {
            CHECK_EQ_INT(be->rmsnorm(be, x, hw ? w : NULL, 1e-6f, R, D, st, y, &e), 0);
            CHECK_EQ_INT(be->rmsnorm(be, x, hw ? w : NULL, 1e-6f, R, D, ND_NORM_FP32, yf, &e), 0);
            for (int r = 0; r < R; r++) {
                float ss = 0.0f;
                for (int i = 0; i < D; i++) ss += x[r * D + i] * x[r * D + i];
                float rr = 1.0f / sqrtf(ss / (float)D + 1e-6f);
                if (st == ND_NORM_RSQRT_BF16) rr = bf(rr);       /* rsqrt(...).to(bf16) */
                for (int i = 0; i < D; i++) {
                    const float h = bf(x[r * D + i] * rr);      /* h.to(bf16) / x * r in BF16 */
                    want[r * D + i] = !hw ? h : st == ND_NORM_BF16_THEN_W ? bf(h * w[i]) : h * w[i];
                }
            }
            CHECK(count_diff(y, want, R * D) == 0, "rmsnorm steps=%d weight=%d: %lld of %d values differ", st, hw,
                  (long long)count_diff(y, want, R * D), R * D);
            /* the FP32 variant rounds once (after the stage): it must give other BF16 values somewhere */
            for (int i = 0; i < R * D; i++) yf[i] = bf(yf[i]);
            CHECK(count_diff(yf, want, R * D) > 0 || (st == ND_NORM_BF16_THEN_W && !hw),
                  "rmsnorm steps=%d weight=%d: no value differs from the single rounding", st, hw);
        }
}

static void test_rope(nd_backend *be) {
    enum { R = 5, H = 3, D = 16, RD = 8 };
    float x[R * H * D], y[R * H * D], want[R * H * D], inv[RD / 2];
    int32_t pos[R];
    for (int i = 0; i < R; i++) pos[i] = 3 + 7 * i;
    for (int i = 0; i < RD / 2; i++) inv[i] = (float)pow(10000.0, -2.0 * i / RD);
    fill_bf16(x, R * H * D, 2.0f);
    nd_err e = {0};
    for (int st = ND_ROPE_BF16_TRIG; st <= ND_ROPE_BF16_PRODUCTS; st++)
        for (int il = 0; il < 2; il++)
            for (int invd = 0; invd < 2; invd++) {
                memcpy(y, x, sizeof x);
                memcpy(want, x, sizeof x);
                CHECK_EQ_INT(be->rope(be, y, R, H, D, D - RD, RD, pos, inv, il, invd, st, 1.0f, &e), 0);
                for (int r = 0; r < R; r++)
                    for (int i = 0; i < RD / 2; i++) {
                        const float ang = (float)pos[r] * inv[i];
                        const float c = bf(cosf(ang)), s0 = bf(sinf(ang)), s = invd ? -s0 : s0; /* cos/sin .to(bf16) */
                        for (int h = 0; h < H; h++) {
                            float *o = want + (r * H + h) * D + (D - RD);
                            const int i0 = il ? 2 * i : i, i1 = il ? 2 * i + 1 : i + RD / 2;
                            const float a = o[i0], b = o[i1];
                            if (st == ND_ROPE_BF16_PRODUCTS) { /* q*cos + rotate_half(q)*sin, each rounded */
                                o[i0] = bf(bf(a * c) - bf(b * s));
                                o[i1] = bf(bf(b * c) + bf(a * s));
                            } else {                          /* rope.float() * cos + ... in FP32 */
                                o[i0] = a * c - b * s;
                                o[i1] = a * s + b * c;
                            }
                        }
                    }
                CHECK(count_diff(y, want, R * H * D) == 0, "rope steps=%d interleaved=%d inverse=%d: %lld values differ",
                      st, il, invd, (long long)count_diff(y, want, R * H * D));
            }
}

static void test_attention(nd_backend *be) {
    enum { T = 6, HQ = 2, HKV = 1, DH = 16 };
    float q[T * HQ * DH], k[T * HKV * DH], v[T * HKV * DH], out[T * HQ * DH], want[T * HQ * DH], sinks[HQ] = {0.3f, -1.0f};
    int32_t pos[T];
    for (int i = 0; i < T; i++) pos[i] = i;
    fill_bf16(q, T * HQ * DH, 1.5f);
    fill_bf16(k, T * HKV * DH, 1.5f);
    fill_bf16(v, T * HKV * DH, 1.0f);
    const float scale = 0.25f;
    nd_err e = {0};
    for (int sk = 0; sk < 2; sk++) {
        CHECK_EQ_INT(be->attention(be, q, k, v, T, T, HQ, HKV, DH, DH, pos, pos, 0, scale, sk ? sinks : NULL, 1, out, &e), 0);
        for (int i = 0; i < T; i++)
            for (int h = 0; h < HQ; h++) {
                float sc[T], mu = -INFINITY;
                for (int j = 0; j <= i; j++) {
                    float dot = 0.0f;
                    for (int c = 0; c < DH; c++) dot += q[(i * HQ + h) * DH + c] * k[j * DH + c];
                    sc[j] = bf(bf(dot) * scale);              /* bf16(bf16(q k^T) * scaling) */
                    if (sc[j] > mu) mu = sc[j];
                }
                if (sk && sinks[h] > mu) mu = sinks[h];
                float den = sk ? expf(sinks[h] - mu) : 0.0f;
                for (int j = 0; j <= i; j++) den += expf(sc[j] - mu);
                for (int c = 0; c < DH; c++) want[(i * HQ + h) * DH + c] = 0.0f;
                for (int j = 0; j <= i; j++) {
                    const float p = bf(expf(sc[j] - mu) / den); /* softmax(fp32).to(bf16) */
                    for (int c = 0; c < DH; c++) want[(i * HQ + h) * DH + c] += p * v[j * DH + c];
                }
            }
        CHECK(count_diff(out, want, T * HQ * DH) == 0, "attention bf16_steps sinks=%d: %lld values differ", sk,
              (long long)count_diff(out, want, T * HQ * DH));
    }
}

static void test_swiglu_hc_combine(nd_backend *be) {
    enum { N = 512 };
    float g[N], u[N], h[N], want[N];
    fill_bf16(g, N, 12.0f);
    fill_bf16(u, N, 12.0f);
    nd_err e = {0};
    for (int lim = 0; lim < 2; lim++) {
        const float L = lim ? 10.0f : 0.0f;
        CHECK_EQ_INT(be->swiglu(be, g, u, N, L, 1, h, &e), 0);
        for (int i = 0; i < N; i++) {
            const float gi = L > 0 ? fminf(g[i], L) : g[i], ui = L > 0 ? fminf(fmaxf(u[i], -L), L) : u[i];
            want[i] = bf(gi / (1.0f + expf(-gi))) * ui;      /* act_fn(gate) in BF16, then * up */
        }
        CHECK(count_diff(h, want, N) == 0, "swiglu bf16_steps limit=%g: %lld values differ", L, (long long)count_diff(h, want, N));
    }
    /* hc_post: post.to(bf16) * y + matmul(comb.to(bf16)^T, X) */
    enum { T = 3, NS = 4, DM = 8 };
    float X[T * NS * DM], y[T * DM], post[T * NS], comb[T * NS * NS], xo[T * NS * DM], xw[T * NS * DM];
    fill_bf16(X, T * NS * DM, 2.0f);
    fill_bf16(y, T * DM, 2.0f);
    for (int i = 0; i < T * NS; i++) post[i] = 1.0f + rnd(0.9f);       /* FP32 gates, not BF16 values */
    for (int i = 0; i < T * NS * NS; i++) comb[i] = 0.25f + rnd(0.2f);
    CHECK_EQ_INT(be->hc_post(be, X, y, post, comb, T, NS, DM, 1, xo, &e), 0);
    for (int r = 0; r < T; r++)
        for (int j = 0; j < NS; j++)
            for (int c = 0; c < DM; c++) {
                float mix = 0.0f;
                for (int i = 0; i < NS; i++) mix += bf(comb[r * NS * NS + i * NS + j]) * X[(r * NS + i) * DM + c];
                xw[(r * NS + j) * DM + c] = bf(bf(post[r * NS + j]) * y[r * DM + c]) + bf(mix);
            }
    CHECK(count_diff(xo, xw, T * NS * DM) == 0, "hc_post bf16_steps: %lld values differ", (long long)count_diff(xo, xw, T * NS * DM));
    /* combine: y[row] += bf16(w * x) */
    float acc[2 * DM] = {0}, accw[2 * DM] = {0}, xr[3 * DM], wr[3] = {bf(0.7f), bf(0.3f), bf(1.1f)};
    int32_t rows[3] = {1, 0, 1};
    fill_bf16(xr, 3 * DM, 3.0f);
    CHECK_EQ_INT(be->scatter_add_rows(be, acc, xr, rows, wr, 3, DM, 1, &e), 0);
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < DM; c++) accw[rows[r] * DM + c] += bf(wr[r] * xr[r * DM + c]);
    CHECK(count_diff(acc, accw, 2 * DM) == 0, "scatter_add_rows bf16_products: %lld values differ", (long long)count_diff(acc, accw, 2 * DM));
}

/* DeepseekV4TopKRouter on BF16 logits: scores = sqrt(softplus(x)) with each op rounded; selection
 * score + FP32 bias; weights = w / (sum + 1e-20) and * scaling, each a BF16 op */
static void test_router(nd_backend *be) {
    enum { T = 40, E = 16, K = 3 };
    float lg[T * E], bias[E], w[T * K];
    int32_t idx[T * K];
    fill_bf16(lg, T * E, 4.0f);
    for (int x = 0; x < E; x++) bias[x] = rnd(0.05f);
    nd_router_cfg cfg = {E, K, ND_SCORE_SQRTSOFTPLUS, 0, 0, 1, 1.5f, 1};
    nd_err e = {0};
    CHECK_EQ_INT(be->router_topk(be, lg, bias, T, &cfg, idx, w, &e), 0);
    int64_t bad = 0;
    for (int r = 0; r < T; r++) {
        float sc[E], sel[E], pick[K];
        int used[E] = {0};
        for (int x = 0; x < E; x++) {
            const float l = lg[r * E + x];
            sc[x] = bf(sqrtf(bf(l > 20.0f ? l : log1pf(expf(l)))));
            sel[x] = sc[x] + bias[x];
        }
        for (int p = 0; p < K; p++) {
            int best = -1;
            for (int x = 0; x < E; x++)
                if (!used[x] && (best < 0 || sel[x] > sel[best])) best = x;
            used[best] = 1;
            bad += idx[r * K + p] != best;
            pick[p] = sc[best];
        }
        float sum = 0.0f;
        for (int p = 0; p < K; p++) sum += pick[p];
        sum = bf(bf(sum) + 1e-20f);
        for (int p = 0; p < K; p++) {
            const float want = bf(bf(pick[p] / sum) * 1.5f);
            bad += memcmp(&want, &w[r * K + p], 4) != 0;
        }
    }
    CHECK(bad == 0, "router bf16_steps: %lld picks or weights differ from the formula", (long long)bad);
}

int main(void) {
    nd_backend *be = NULL;
    nd_err e = {0};
    CHECK_EQ_INT(nd_backend_cpu_create(&be, &e), 0);
    if (!be) return nd_test_report("bf16_steps");
    test_bf16_rounding();
    test_rmsnorm(be);
    test_rope(be);
    test_attention(be);
    test_swiglu_hc_combine(be);
    test_router(be);
    be->destroy(be);
    return nd_test_report("bf16_steps");
}
