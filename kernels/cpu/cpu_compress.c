/* cpu_compress.c — DeepSeek-V4 KV compressor pooling and the attention over window rows plus
 * compressed entries (docs/reference-notes.md (d)), FP32.
 *
 * Pooling, per entry e and channel c: the slots are the window's own rows (the Cb half with
 * overlap) and, with overlap, the previous window's rows (Ca half); logits = gate + position bias,
 * p = softmax over the slots, out = Σ value·p. transformers multiplies in BF16 (p and each product
 * rounded), which bf16_steps reproduces; the FP32 sum is left to the caller to round.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cpu_compressed.h"
#include "numerics/nd_bf16_steps.h"
#include "numerics/nd_numerics.h"

int nd_cpu_compress_pool(nd_backend *b, const float *kv, const float *gate, const float *pbias_host,
                         int64_t s, int64_t d, int64_t rate, int overlap, int bf16_steps, float *out, nd_err *e) {
    (void)b;
    const char *op = "compress_pool";
    const int64_t w = overlap ? 2 : 1;
    ND_CPU_SIZES(e, op, s, w, d);
    ND_CPU_SIZES(e, op, rate, w, d);
    ND_CPU_REQUIRE(rate > 0, e, op, "compress rate %lld must be positive", (long long)rate);
    const int64_t n_win = s / rate, width = w * d, nslot = w * rate;
    if (n_win * d == 0) return 0;
    ND_CPU_REQUIRE(kv && gate && pbias_host && out, e, op, "NULL buffer");
    float *lg = malloc((size_t)nslot * sizeof *lg), *val = malloc((size_t)nslot * sizeof *val);
    if (!lg || !val) { free(lg); free(val); return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op); }
    for (int64_t en = 0; en < n_win; en++) {
        for (int64_t c = 0; c < d; c++) {
            int64_t ns = 0;
            if (overlap && en > 0)  /* Ca of the previous window: columns [0, d) */
                for (int64_t j = 0; j < rate; j++) {
                    const int64_t row = (en - 1) * rate + j;
                    val[ns] = kv[row * width + c];
                    lg[ns++] = gate[row * width + c] + pbias_host[j * width + c];
                }
            for (int64_t j = 0; j < rate; j++) {  /* the window's own rows: columns [(w-1)d, wd) */
                const int64_t row = en * rate + j, col = (w - 1) * d + c;
                val[ns] = kv[row * width + col];
                lg[ns++] = gate[row * width + col] + pbias_host[j * width + col];
            }
            float mx = -INFINITY, den = 0.0f;
            for (int64_t i = 0; i < ns; i++) mx = fmaxf(mx, lg[i]);
            for (int64_t i = 0; i < ns; i++) { lg[i] = expf(lg[i] - mx); den += lg[i]; }
            float acc = 0.0f;
            for (int64_t i = 0; i < ns; i++) {
                float p = lg[i] / den;
                if (bf16_steps) p = nd_bf16_round(p);
                float prod = val[i] * p;
                if (bf16_steps) prod = nd_bf16_round(prod);
                acc += prod;
            }
            out[en * d + c] = acc;
        }
    }
    free(lg);
    free(val);
    return 0;
}

static int entry_selected(const int32_t *sel_row, int64_t nsel, int64_t w) {
    if (!sel_row) return 1;
    for (int64_t i = 0; i < nsel; i++)
        if (sel_row[i] == w) return 1;
    return 0;
}

int nd_cpu_attention_compressed(nd_backend *b, const float *q, const float *kv, const float *ckv, int64_t t,
                                int64_t s, int64_t nc, int64_t hq, int64_t d, const int32_t *qpos_host,
                                const int32_t *kpos_host, int64_t window, float scale, const float *sinks_host,
                                int64_t rate, const int32_t *sel, int64_t nsel, int bf16_steps, float *out, nd_err *e) {
    (void)b;
    const char *op = "attention_compressed";
    ND_CPU_SIZES(e, op, t, hq, d);
    ND_CPU_SIZES(e, op, s + nc, d);
    ND_CPU_SIZES(e, op, t, nsel);
    ND_CPU_REQUIRE(window >= 0 && rate > 0, e, op, "window %lld / rate %lld out of range", (long long)window, (long long)rate);
    if (t * hq * d == 0) return 0;
    ND_CPU_REQUIRE(q && out && qpos_host && (s == 0 || (kv && kpos_host)) && (nc == 0 || ckv), e, op, "NULL buffer");
    ND_CPU_REQUIRE(!sel || nsel >= 0, e, op, "negative selection width");
    const int64_t nk = s + nc;
    float *sc = malloc((size_t)(nk > 0 ? nk : 1) * sizeof *sc);
    unsigned char *vis = malloc((size_t)(nk > 0 ? nk : 1));
    float *acc = malloc((size_t)d * sizeof *acc);
    if (!sc || !vis || !acc) { free(sc); free(vis); free(acc); return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: out of memory", op); }
    for (int64_t i = 0; i < t; i++) {
        const int64_t qp = qpos_host[i];
        const int64_t ready = (qp + 1) / rate;   /* entries whose window has closed */
        int64_t nvis = 0;
        for (int64_t j = 0; j < nk; j++) {
            if (j < s) {
                const int64_t kp = kpos_host[j];
                vis[j] = !(kp > qp || (window > 0 && qp - kp >= window));
            } else {
                const int64_t w = j - s;
                vis[j] = w < ready && entry_selected(sel ? sel + i * nsel : NULL, nsel, w);
            }
            nvis += vis[j];
        }
        for (int64_t h = 0; h < hq; h++) {
            const float *qh = q + (i * hq + h) * d;
            float *o = out + (i * hq + h) * d;
            if (nvis == 0) { memset(o, 0, (size_t)d * sizeof *o); continue; }
            float mu = -INFINITY;
            for (int64_t j = 0; j < nk; j++) {
                if (!vis[j]) continue;
                const float *kj = j < s ? kv + j * d : ckv + (j - s) * d;
                float dot = 0.0f;
                for (int64_t c = 0; c < d; c++) dot += qh[c] * kj[c];
                sc[j] = nd_attn_score(dot, scale, bf16_steps);
                if (sc[j] > mu) mu = sc[j];
            }
            const float sink = sinks_host ? sinks_host[h] : -INFINITY;
            if (sink > mu) mu = sink;
            const int bsub = bf16_steps == 2 && sinks_host; /* as `attention` (nd_attn_exp) */
            float den = sinks_host ? nd_attn_exp(sink, mu, bsub) : 0.0f;
            for (int64_t c = 0; c < d; c++) acc[c] = 0.0f;
            if (bf16_steps) /* the probabilities are rounded, so the denominator comes first */
                for (int64_t j = 0; j < nk; j++)
                    if (vis[j]) den += nd_attn_exp(sc[j], mu, bsub);
            for (int64_t j = 0; j < nk; j++) {
                if (!vis[j]) continue;
                const float ex = nd_attn_exp(sc[j], mu, bsub);
                const float p = bf16_steps ? nd_attn_prob(ex, den, 1) : ex;
                if (!bf16_steps) den += ex;
                const float *vj = j < s ? kv + j * d : ckv + (j - s) * d;
                for (int64_t c = 0; c < d; c++) acc[c] += p * vj[c];
            }
            for (int64_t c = 0; c < d; c++) o[c] = bf16_steps ? acc[c] : acc[c] / den;
        }
    }
    free(sc);
    free(vis);
    free(acc);
    return 0;
}
