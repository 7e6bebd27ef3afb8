/* test_ops_compress.c — DeepSeek-V4 compressed-attention ops of the CPU backend (compress_pool,
 * indexer_topk, attention_compressed) against straightforward double-precision formulas written
 * here from docs/reference-notes.md (d), on fresh random inputs (seed printed; ND_TEST_SEED=<n>
 * replays a run); and the indexer's tie order against picks torch.topk made (vectors below). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "../nd_test.h"
#include "backend.h"
#include "numerics/nd_numerics.h"
#include "ops_rand.h"

static nd_backend *be;
static nd_err e;

/* ---- compressor pooling: softmax over the window's slots (plus the previous window's Ca slots) ---- */
static void test_compress_pool(void) {
    const int64_t d = 24;
    for (int overlap = 0; overlap < 2; overlap++)
        for (int steps = 0; steps < 2; steps++) {
            const int64_t rate = overlap ? 4 : 8, s = 3 * rate + 3 /* a tail that is not pooled */, w = overlap ? 2 : 1;
            const int64_t n_win = s / rate;
            float *kv = fvec(s * w * d, -2, 2), *gate = fvec(s * w * d, -3, 3), *pb = fvec(rate * w * d, -1, 1);
            float *out = fvec(n_win * d, 0, 0);
            CHECK_EQ_INT(be->compress_pool(be, kv, gate, pb, s, d, rate, overlap, steps, out, &e), 0);
            double worst = 0;
            for (int64_t en = 0; en < n_win; en++)
                for (int64_t c = 0; c < d; c++) {
                    /* slots: (row, column, bias row) */
                    double lg[16], v[16], mx = -INFINITY, den = 0, ref = 0, mag = 0;
                    int ns = 0;
                    for (int64_t j = 0; overlap && en > 0 && j < rate; j++, ns++) {
                        int64_t row = (en - 1) * rate + j;
                        v[ns] = kv[row * w * d + c];
                        lg[ns] = (double)gate[row * w * d + c] + pb[j * w * d + c];
                    }
                    for (int64_t j = 0; j < rate; j++, ns++) {
                        int64_t row = en * rate + j, col = (w - 1) * d + c;
                        v[ns] = kv[row * w * d + col];
                        lg[ns] = (double)gate[row * w * d + col] + pb[j * w * d + col];
                    }
                    for (int i = 0; i < ns; i++) mx = fmax(mx, lg[i]);
                    for (int i = 0; i < ns; i++) den += exp(lg[i] - mx);
                    for (int i = 0; i < ns; i++) {
                        double p = exp(lg[i] - mx) / den;
                        if (steps) p = nd_bf16_round((float)p);
                        double prod = v[i] * p;
                        if (steps) prod = nd_bf16_round((float)prod);
                        ref += prod;
                        mag += fabs(v[i] * p);
                    }
                    /* FP32 softmax vs double: 1e-5 of the magnitude; BF16 steps: a product whose
                     * rounding lands on the other side of a tie costs one BF16 ulp (2^-8 relative) */
                    double err = fabs(out[en * d + c] - ref) / ((steps ? 4e-3 : 1e-5) * (mag + 1e-6));
                    if (err > worst) worst = err;
                }
            CHECK(worst <= 1.0, "compress_pool overlap %d bf16 %d: error %.3g of tolerance", overlap, steps, worst);
            free(kv); free(gate); free(pb); free(out);
        }
    /* overlap, entry 0: only the window's own Cb slots count (the Ca slots of "window -1" have
     * weight 0), so entry 0 cannot depend on the Ca half of window 0 — but entry 1 must */
    const int64_t rate = 4, s = 8;
    float *kv = fvec(s * 2 * d, -2, 2), *gate = fvec(s * 2 * d, -3, 3), *pb = fvec(rate * 2 * d, -1, 1);
    float *o1 = fvec(2 * d, 0, 0), *o2 = fvec(2 * d, 0, 0);
    CHECK_EQ_INT(be->compress_pool(be, kv, gate, pb, s, d, rate, 1, 0, o1, &e), 0);
    for (int64_t j = 0; j < rate; j++) kv[j * 2 * d + 3] += 1.0f; /* Ca, channel 3, window 0 */
    CHECK_EQ_INT(be->compress_pool(be, kv, gate, pb, s, d, rate, 1, 0, o2, &e), 0);
    CHECK(o1[3] == o2[3], "entry 0 read the Ca half of its own window");
    CHECK(o1[d + 3] != o2[d + 3], "entry 1 ignored the Ca half of window 0");
    CHECK(be->compress_pool(be, kv, gate, pb, s, d, 0, 1, 0, o1, &e) != 0, "rate 0 accepted");
    free(kv); free(gate); free(pb); free(o1); free(o2);
}

/* ---- indexer scores and top-k on continuous random inputs ---- */
static void test_indexer_random(void) {
    const int64_t t = 23, nc = 9, h = 3, c = 16, rate = 2, topk = 4;
    float *q = fvec(t * h * c, -1, 1), *k = fvec(nc * c, -1, 1), *wts = fvec(t * h, -1.5f, 1.5f), *sc = fvec(t * nc, 0, 0);
    int32_t qpos[23], idx[23 * 4];
    for (int64_t i = 0; i < t; i++) qpos[i] = (int32_t)i;
    const float scale = 0.25f, wscale = 0.57735f;
    CHECK_EQ_INT(be->indexer_topk(be, q, k, wts, t, nc, h, c, scale, wscale, qpos, rate, topk, sc, idx, &e), 0);
    double worst = 0;
    int bad_sel = 0, checked = 0;
    for (int64_t i = 0; i < t; i++) {
        int64_t ready = (qpos[i] + 1) / rate;
        if (ready > nc) ready = nc;
        double ref[9];
        for (int64_t w = 0; w < nc; w++) {
            double s = 0, mag = 0;
            for (int64_t hh = 0; hh < h && w < ready; hh++) {
                double dot = 0;
                for (int64_t x = 0; x < c; x++) dot += (double)q[(i * h + hh) * c + x] * k[w * c + x];
                double term = fmax(dot, 0) * scale * wts[i * h + hh] * wscale;
                s += term;
                mag += fabs(term) + 1e-3;
            }
            ref[w] = s;
            double err = w < ready ? fabs(sc[i * nc + w] - s) / (1e-5 * mag) : (sc[i * nc + w] != 0.0f) * 1e9;
            if (err > worst) worst = err;
        }
        /* selection: the top-k of the closed entries by the double score, -1 for the missing ones;
         * skipped when two scores at the boundary are within rounding of each other */
        int64_t order[9], n = 0;
        for (int64_t w = 0; w < ready; w++) order[n++] = w;
        for (int64_t a = 0; a < n; a++)
            for (int64_t b2 = a + 1; b2 < n; b2++)
                if (ref[order[b2]] > ref[order[a]]) { int64_t tmp = order[a]; order[a] = order[b2]; order[b2] = tmp; }
        int64_t want = topk < n ? topk : n;
        if (want < n && fabs(ref[order[want - 1]] - ref[order[want]]) < 1e-4) continue;
        /* exact zero ties (every head <= 0) are the tie test's business */
        if (want < n && ref[order[want - 1]] == 0.0) continue;
        checked++;
        int ok = 1, invalid = 0;
        for (int64_t s2 = 0; s2 < topk; s2++) {
            int32_t p = idx[i * topk + s2];
            if (p < 0) { invalid++; continue; }
            int found = 0;
            for (int64_t a = 0; a < want; a++) found |= order[a] == p;
            ok &= found;
        }
        ok &= invalid == topk - want;
        bad_sel += !ok;
    }
    CHECK(worst <= 1.0, "indexer scores: error %.3g of tolerance", worst);
    CHECK(checked >= t / 2, "only %d queries had a clear top-k boundary", checked);
    CHECK_EQ_INT(bad_sel, 0);
    CHECK(be->indexer_topk(be, q, k, wts, t, nc, h, c, scale, wscale, qpos, rate, nc + 1, sc, idx, &e) != 0, "topk > entries accepted");
    free(q); free(k); free(wts); free(sc);
}

/* ---- indexer tie order: torch.topk (torch 2.15, CPU) on these vectors with the entries at and
 * past `ready` set to -inf picked the sets below (picks past ready then -1, as transformers does).
 * A "lower index wins" rule would give other sets in the cases marked *. Pattern A: value
 * [0,0,1,0,-1,0,2][(3i²+7i+1) mod 7]; pattern B: 1 if i mod 97 == 40, -1 if i mod 5 == 1, else 0. */
static const struct { int pattern, n, k, ready; int sel[9]; } TIES[] = {
    {0, 8, 2, 4, {2, 3}},                 /* * */
    {0, 8, 2, 6, {2, 5}},
    {0, 9, 3, 9, {2, 3, 5}},              /* * */
    {0, 12, 5, 10, {2, 4, 5, 7, 9}},      /* * */
    {0, 16, 4, 16, {2, 5, 9, 12}},
    {0, 7, 6, 5, {-1, 0, 1, 2, 3, 4}},
    {0, 33, 1, 20, {12}},                 /* * */
    {0, 20, 3, 17, {5, 12, 16}},          /* * */
    {1, 130, 2, 130, {2, 40}},            /* * (k·64 <= n: torch's partial_sort path) */
    {1, 200, 3, 150, {0, 40, 137}},
    {1, 640, 9, 600, {3, 7, 8, 40, 137, 234, 331, 428, 525}}, /* * (partial_sort path) */
};

static int cmp_i32(const void *a, const void *b) { return *(const int32_t *)a - *(const int32_t *)b; }

static void test_indexer_ties(void) {
    for (size_t ci = 0; ci < sizeof TIES / sizeof TIES[0]; ci++) {
        const int n = TIES[ci].n, k = TIES[ci].k;
        /* two heads, c = 2: head 0 (weight +1) reads max(v,0), head 1 (weight -1) reads max(-v,0),
         * so the score of entry w is exactly v_w; query position ready-1 with rate 1 closes `ready` */
        float q[4] = {1, 0, 0, 1}, wts[2] = {1, -1}, *kk = malloc(sizeof(float) * 2 * (size_t)n), *sc = malloc(sizeof(float) * (size_t)n);
        for (int i = 0; i < n; i++) {
            static const float A[7] = {0, 0, 1, 0, -1, 0, 2};
            float v = TIES[ci].pattern == 0 ? A[(3 * i * i + 7 * i + 1) % 7] : (i % 97 == 40 ? 1.0f : i % 5 == 1 ? -1.0f : 0.0f);
            kk[2 * i] = v > 0 ? v : 0;
            kk[2 * i + 1] = v < 0 ? -v : 0;
        }
        int32_t pos = TIES[ci].ready - 1, idx[9];
        CHECK_EQ_INT(be->indexer_topk(be, q, kk, wts, 1, n, 2, 2, 1.0f, 1.0f, &pos, 1, k, sc, idx, &e), 0);
        qsort(idx, (size_t)k, sizeof idx[0], cmp_i32);
        int same = 1;
        for (int s = 0; s < k; s++) same &= idx[s] == TIES[ci].sel[s];
        CHECK(same, "tie case %zu (n %d, k %d): picked %d %d %d ..., torch picked %d %d %d ...", ci, n, k,
              idx[0], k > 1 ? idx[1] : 0, k > 2 ? idx[2] : 0, TIES[ci].sel[0], TIES[ci].sel[1], TIES[ci].sel[2]);
        free(kk);
        free(sc);
    }
}

/* ---- attention over window rows plus compressed entries ---- */
static void test_attention_compressed(void) {
    const int64_t t = 19, hq = 3, d = 8, nc = 4, rate = 4, window = 6, nsel = 2;
    float *q = fvec(t * hq * d, -1, 1), *kv = fvec(t * d, -1, 1), *ck = fvec(nc * d, -1, 1), *sinks = fvec(hq, -1, 1);
    float *out = fvec(t * hq * d, 0, 0);
    int32_t pos[19], sel[19 * 2];
    for (int64_t i = 0; i < t; i++) {
        pos[i] = (int32_t)i;
        for (int64_t s = 0; s < nsel; s++) sel[i * nsel + s] = (int32_t)(rnd64() % (nc + 1)) - 1; /* -1 .. nc-1 */
    }
    const float scale = 0.35355f;
    for (int use_sel = 0; use_sel < 2; use_sel++)
        for (int use_sink = 0; use_sink < 2; use_sink++) {
            CHECK_EQ_INT(be->attention_compressed(be, q, kv, ck, t, t, nc, hq, d, pos, pos, window, scale, use_sink ? sinks : NULL,
                                                  rate, use_sel ? sel : NULL, nsel, 0, out, &e), 0);
            double worst = 0;
            for (int64_t i = 0; i < t; i++)
                for (int64_t h = 0; h < hq; h++) {
                    double sc[32], mx = -INFINITY, den = 0, o[8] = {0};
                    int vis[32];
                    for (int64_t j = 0; j < t + nc; j++) {
                        if (j < t) vis[j] = j <= i && i - j < window;
                        else {
                            int64_t w = j - t;
                            vis[j] = (w + 1) * rate <= i + 1;
                            if (use_sel) vis[j] &= sel[i * nsel] == w || sel[i * nsel + 1] == w;
                        }
                        if (!vis[j]) continue;
                        const float *kj = j < t ? kv + j * d : ck + (j - t) * d;
                        double dot = 0;
                        for (int64_t c = 0; c < d; c++) dot += (double)q[(i * hq + h) * d + c] * kj[c];
                        sc[j] = dot * scale;
                        mx = fmax(mx, sc[j]);
                    }
                    if (use_sink) mx = fmax(mx, sinks[h]);
                    if (use_sink) den = exp(sinks[h] - mx);
                    for (int64_t j = 0; j < t + nc; j++) {
                        if (!vis[j]) continue;
                        double p = exp(sc[j] - mx);
                        den += p;
                        const float *vj = j < t ? kv + j * d : ck + (j - t) * d;
                        for (int64_t c = 0; c < d; c++) o[c] += p * vj[c];
                    }
                    for (int64_t c = 0; c < d; c++) {
                        double err = fabs(out[(i * hq + h) * d + c] - o[c] / den) / 1e-5;
                        if (err > worst) worst = err;
                    }
                }
            CHECK(worst <= 1.0, "attention_compressed sel %d sink %d: error %.3g of tolerance", use_sel, use_sink, worst);
        }
    /* no compressed entry: the same as the sliding-window `attention` op */
    float *o2 = fvec(t * hq * d, 0, 0);
    CHECK_EQ_INT(be->attention_compressed(be, q, kv, ck, t, t, 0, hq, d, pos, pos, window, scale, sinks, rate, NULL, 0, 0, out, &e), 0);
    CHECK_EQ_INT(be->attention(be, q, kv, kv, t, t, hq, 1, d, d, pos, pos, window, scale, sinks, 0, o2, &e), 0);
    CHECK(!memcmp(out, o2, sizeof(float) * (size_t)(t * hq * d)), "without entries the op differs from attention");
    free(q); free(kv); free(ck); free(sinks); free(out); free(o2);
}

int main(void) {
    rnd_seed();
    if (nd_backend_cpu_create(&be, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    test_compress_pool();
    test_indexer_random();
    test_indexer_ties();
    test_attention_compressed();
    be->destroy(be);
    return nd_test_report("test_ops_compress");
}
