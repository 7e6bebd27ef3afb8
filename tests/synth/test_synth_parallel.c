/* Parallel generation of large tensors draws exactly the values of one sequential pass
 * (sy_generate splits at even elements and jumps each chunk's splitmix64 counter). The reference
 * here is written independently: a fresh stream drawing element after element. */
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "synth/synth_plan.h"
#include "synth/synth_quant.h"
#include "synth/synth_rng.h"
#include "numerics/nd_numerics.h"

static void check(nd_dtype dt, int64_t rows, int64_t cols, sy_init init, const char *name) {
    sy_param p;
    memset(&p, 0, sizeof p);
    snprintf(p.name, sizeof p.name, "%s", name);
    p.dtype = dt;
    p.ndim = 2;
    p.shape[0] = rows;
    p.shape[1] = cols;
    p.init = init;
    p.a = 0.25;
    p.b = 0.5;
    size_t n = (size_t)(rows * cols), es = nd_dtype_size(dt);
    unsigned char *par = malloc(n * es), *seq = malloc(n * es);
    sy_generate(&p, 7, par);
    sy_rng r;
    sy_rng_init(&r, 7, name);
    for (size_t i = 0; i < n; i++) {
        float v = (float)(p.a + p.b * sy_normal(&r));
        if (dt == ND_DT_BF16) { uint16_t h = nd_bf16_from_f32(v); memcpy(seq + 2 * i, &h, 2); }
        else memcpy(seq + 4 * i, &v, 4);
    }
    size_t diff = 0;
    for (size_t i = 0; i < n * es; i++) diff += par[i] != seq[i];
    CHECK(diff == 0, "%s (%lld x %lld, %s): %zu bytes differ from one sequential pass", name, (long long)rows,
          (long long)cols, dt == ND_DT_BF16 ? "BF16" : "F32", diff);
    free(par);
    free(seq);
}

/* A weight above the threshold quantized at once (rows split over threads) equals the same weight
 * quantized one row per call (each call below the threshold: one thread). */
static void check_quant(int64_t n, int64_t k) {
    uint16_t *w = malloc((size_t)(n * k) * 2);
    uint8_t *pa = malloc((size_t)(n * k / 2)), *sa = malloc((size_t)(n * k / 16));
    uint8_t *pb = malloc((size_t)(n * k / 2)), *sb = malloc((size_t)(n * k / 16));
    sy_rng r;
    sy_rng_init(&r, 11, "quant");
    for (int64_t i = 0; i < n * k; i++) w[i] = nd_bf16_from_f32((float)(sy_normal(&r) * 0.02));
    const float gw = sy_nvfp4_global_div(sy_amax_bf16(w, n * k));
    sy_nvfp4_quantize(w, n, k, gw, pa, sa);
    for (int64_t row = 0; row < n; row++)
        sy_nvfp4_quantize(w + row * k, 1, k, gw, pb + row * (k / 2), sb + row * (k / 16));
    size_t diff = 0;
    for (int64_t i = 0; i < n * k / 2; i++) diff += pa[i] != pb[i];
    for (int64_t i = 0; i < n * k / 16; i++) diff += sa[i] != sb[i];
    CHECK(diff == 0, "NVFP4 quantization of %lld x %lld: %zu bytes differ from row-by-row", (long long)n,
          (long long)k, diff);
    free(w); free(pa); free(sa); free(pb); free(sb);
}

int main(void) {
    check_quant(1027, 4096);
    /* above the 2^22-element threshold, odd and even sizes, both dtypes */
    check(ND_DT_BF16, 2049, 2049, SY_INIT_NORMAL, "model.layers.0.mlp.experts.0.up_proj.weight");
    check(ND_DT_F32, 1024, 4097, SY_INIT_NORMAL, "model.layers.0.attn_hc.fn");
    check(ND_DT_BF16, 3, 5, SY_INIT_NORMAL, "small.weight");
    return nd_test_report("synth_parallel");
}
