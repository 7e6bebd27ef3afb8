/* cpu_decode.c — weight decoding: NVFP4, MXFP4, FP8 (all scale kinds) and BF16/F16/F32 -> F32. */
#include <pthread.h>
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_numerics.h"

/* the two E2M1 values of each packed byte, in element order (nd_nibble's), built from the shared
 * definitions: a table lookup instead of two decodes per byte (the CPU trace's hottest loop) */
static float g_e2m1_pair[256][2];
static pthread_once_t g_e2m1_once = PTHREAD_ONCE_INIT;
static void e2m1_pair_init(void) {
    for (int v = 0; v < 256; v++) {
        const uint8_t byte = (uint8_t)v;
        g_e2m1_pair[v][0] = nd_e2m1_to_f32(nd_nibble(&byte, 0));
        g_e2m1_pair[v][1] = nd_e2m1_to_f32(nd_nibble(&byte, 1));
    }
}

int nd_cpu_dequant_nvfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div,
                         int64_t rows, int64_t k, float *out, nd_err *e) {
    (void)b;
    const char *op = "dequant_nvfp4";
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(k % ND_NVFP4_BLOCK == 0, e, op, "k = %lld is not a multiple of 16", (long long)k);
    ND_CPU_REQUIRE(rows * k == 0 || (packed && sf && out), e, op, "NULL buffer");
    pthread_once(&g_e2m1_once, e2m1_pair_init);
    const int64_t nb = k / ND_NVFP4_BLOCK;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *pr = packed + r * (k / 2);
        float *o = out + r * k;
        for (int64_t bi = 0; bi < nb; bi++) {
            /* e4m3(sf) / global_div once per block, then times the element (compressed-tensors) */
            const float s = nd_nvfp4_block_dequant_scale(sf[r * nb + bi], global_div);
            const uint8_t *pb = pr + bi * (ND_NVFP4_BLOCK / 2);
            float *ob = o + bi * ND_NVFP4_BLOCK;
            for (int j = 0; j < ND_NVFP4_BLOCK / 2; j++) {
                ob[2 * j] = g_e2m1_pair[pb[j]][0] * s;
                ob[2 * j + 1] = g_e2m1_pair[pb[j]][1] * s;
            }
        }
    }
    return 0;
}

int nd_cpu_dequant_mxfp4(nd_backend *b, const uint8_t *packed, const uint8_t *sf, int64_t rows,
                         int64_t k, float *out, nd_err *e) {
    (void)b;
    const char *op = "dequant_mxfp4";
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(k % 32 == 0, e, op, "k = %lld is not a multiple of 32", (long long)k);
    ND_CPU_REQUIRE(rows * k == 0 || (packed && sf && out), e, op, "NULL buffer");
    const int64_t nb = k / 32;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *pr = packed + r * (k / 2);
        for (int64_t j = 0; j < k; j++)
            out[r * k + j] = nd_e2m1_to_f32(nd_nibble(pr, j)) * nd_e8m0_to_f32(sf[r * nb + j / 32]);
    }
    return 0;
}

int nd_cpu_dequant_fp8(nd_backend *b, const uint8_t *w, const void *scale, int scale_kind, int bn,
                       int bk, int64_t rows, int64_t k, float *out, nd_err *e) {
    const char *op = "dequant_fp8";
    if (scale_kind < ND_FP8_SCALE_TENSOR || scale_kind > ND_FP8_SCALE_BLOCK_E8M0)
        return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: unknown scale kind %d", op, scale_kind);
    ND_TRY(nd_backend_require(b, ND_OP_dequant_fp8,
                              ND_ODT_E4M3 | (scale_kind == ND_FP8_SCALE_BLOCK_E8M0 ? ND_ODT_E8M0 : ND_ODT_F32), e));
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(rows * k == 0 || (w && scale && out), e, op, "NULL buffer");
    const float *sf32 = (const float *)scale;
    const uint8_t *se8 = (const uint8_t *)scale;
    switch (scale_kind) {
    case ND_FP8_SCALE_TENSOR:
        for (int64_t i = 0; i < rows * k; i++) out[i] = nd_e4m3_to_f32(w[i]) * sf32[0];
        return 0;
    case ND_FP8_SCALE_CHANNEL:
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < k; j++) out[r * k + j] = nd_e4m3_to_f32(w[r * k + j]) * sf32[r];
        return 0;
    case ND_FP8_SCALE_BLOCK_F32:
    case ND_FP8_SCALE_BLOCK_E8M0: {
        ND_CPU_REQUIRE(bn > 0 && bk > 0, e, op, "block sizes %d x %d must be positive", bn, bk);
        const int64_t kb = (k + bk - 1) / bk;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t j = 0; j < k; j++) {
                const int64_t si = (r / bn) * kb + j / bk;
                const float s = scale_kind == ND_FP8_SCALE_BLOCK_F32 ? sf32[si] : nd_e8m0_to_f32(se8[si]);
                out[r * k + j] = nd_e4m3_to_f32(w[r * k + j]) * s;
            }
        return 0;
    }
    default:
        return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: unknown scale kind %d", op, scale_kind);
    }
}

int nd_cpu_to_f32(nd_backend *b, const void *src, nd_dtype dt, int64_t n, float *out, nd_err *e) {
    ND_TRY(nd_backend_require_dt(b, ND_OP_to_f32, dt, e)); /* F32, BF16, F16 (backend.h) */
    const char *op = "to_f32";
    ND_CPU_SIZES(e, op, n);
    ND_CPU_REQUIRE(n == 0 || (src && out), e, op, "NULL buffer");
    const uint8_t *p = (const uint8_t *)src;   /* checkpoint bytes may be unaligned: memcpy */
    uint16_t h;
    switch (dt) {
    case ND_DT_F32: memmove(out, src, (size_t)n * 4); return 0;
    case ND_DT_BF16:
        for (int64_t i = 0; i < n; i++) { memcpy(&h, p + 2 * i, 2); out[i] = nd_bf16_to_f32(h); }
        return 0;
    case ND_DT_F16:
        for (int64_t i = 0; i < n; i++) { memcpy(&h, p + 2 * i, 2); out[i] = nd_f16_to_f32(h); }
        return 0;
    default: return nd_fail(e, ND_EXIT_INTERNAL, "cpu: %s: unsupported dtype %d", op, (int)dt);
    }
}
