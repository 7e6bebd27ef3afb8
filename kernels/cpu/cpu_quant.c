/* cpu_quant.c — NVFP4 activation quantization (kernel and CT semantics), MXFP4 quantization (the
 * block-scale rules of nd_mxsem), FP8 fake quantization,
 * and the linear <-> 128x4 swizzled scale layouts. */
#include <string.h>
#include "cpu_internal.h"
#include "numerics/nd_numerics.h"

/* max |x| over n elements; NaN if any element is NaN (a NaN block must get a NaN scale, not
 * the max of its other elements as fmaxf would give). */
static float block_amax(const float *x, int64_t n) {
    float a = 0.0f;
    for (int64_t i = 0; i < n; i++) {
        const float v = fabsf(x[i]);
        if (v != v) return v;
        if (v > a) a = v;
    }
    return a;
}

/* One block of a format: its codes (two per byte, element 2j in the low nibble) and scale byte;
 * saturated elements and the scale's own counters added to st. */
typedef void (*quant_block_fn)(const float *xb, float amax, float g, int sem, uint8_t *cb, uint8_t *sf, nd_qstats *st);

static void nvfp4_block(const float *xb, float amax, float g, int sem, uint8_t *cb, uint8_t *sf, nd_qstats *st) {
    const nd_block_q p = nd_nvfp4_block_params(amax, g, sem);
    *sf = p.sf;
    for (int j = 0; j < ND_NVFP4_BLOCK; j += 2) {
        const uint8_t lo = nd_nvfp4_quant_elem(xb[j], p, g, sem);
        const uint8_t hi = nd_nvfp4_quant_elem(xb[j + 1], p, g, sem);
        cb[j / 2] = (uint8_t)(lo | (hi << 4));
        st->n_saturated += nd_nvfp4_elem_saturates(xb[j], p, g, sem);
        st->n_saturated += nd_nvfp4_elem_saturates(xb[j + 1], p, g, sem);
    }
    st->n_zero_scale += p.zero_scale;
    st->n_scale_448 += (p.sf == 0x7eu);
    st->n_nan_scale += ((p.sf & 0x7fu) == 0x7fu);
}

static void mxfp4_block(const float *xb, float amax, float g, int sem, uint8_t *cb, uint8_t *sf, nd_qstats *st) {
    (void)g;
    const uint8_t s = nd_mxfp4_scale_byte(amax, sem);
    *sf = s;
    for (int j = 0; j < ND_MXFP4_BLOCK; j += 2) {
        cb[j / 2] = (uint8_t)(nd_mxfp4_quant_elem(xb[j], s, sem) | (nd_mxfp4_quant_elem(xb[j + 1], s, sem) << 4));
        st->n_saturated += nd_mxfp4_elem_saturates(xb[j], s) + nd_mxfp4_elem_saturates(xb[j + 1], s);
    }
    st->n_nan_scale += s == ND_E8M0_NAN;
}

/* The rows cut into blocks of `block` elements, each quantized by fn; sem_ok: sem is one the format knows. */
static int quant_blocks(const char *op, int block, quant_block_fn fn, int sem_ok, const float *x, float g, int sem,
                        int64_t rows, int64_t k, uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(k % block == 0, e, op, "k = %lld is not a multiple of %d", (long long)k, block);
    ND_CPU_REQUIRE(sem_ok, e, op, "unknown semantics %d", sem);
    ND_CPU_REQUIRE(rows * k == 0 || (x && codes && sf), e, op, "NULL buffer");
    nd_qstats st;
    memset(&st, 0, sizeof st);
    const int64_t nb = rows * (k / block);
    for (int64_t bi = 0; bi < nb; bi++) {
        const float *xb = x + bi * block;
        const float amax = block_amax(xb, block);
        fn(xb, amax, g, sem, codes + bi * (block / 2), &sf[bi], &st);
        st.n_nonzero_blocks += amax > 0.0f;
    }
    st.n_elems = rows * k;
    st.n_blocks = nb;
    if (stats_host) *stats_host = st;
    return 0;
}

int nd_cpu_quant_nvfp4(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k,
                       uint8_t *codes, uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    (void)b;
    return quant_blocks("quant_nvfp4", ND_NVFP4_BLOCK, nvfp4_block, sem == ND_QSEM_KERNEL || nd_qsem_is_ct(sem), x, g,
                        sem, rows, k, codes, sf, stats_host, e);
}

int nd_cpu_quant_mxfp4(nd_backend *b, const float *x, int sem, int64_t rows, int64_t k, uint8_t *codes,
                       uint8_t *sf, nd_qstats *stats_host, nd_err *e) {
    (void)b;
    return quant_blocks("quant_mxfp4", ND_MXFP4_BLOCK, mxfp4_block, sem >= 0 && sem < ND_MXSEM_N, x, 0.0f, sem, rows, k,
                        codes, sf, stats_host, e);
}

int nd_cpu_fake_quant_fp8(nd_backend *b, const float *x, int64_t rows, int64_t k, int group, int pow2,
                          float *out, nd_err *e) {
    (void)b;
    const char *op = "fake_quant_fp8";
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(group > 0, e, op, "group %d must be positive", group);
    ND_CPU_REQUIRE(rows * k == 0 || (x && out), e, op, "NULL buffer");
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c0 = 0; c0 < k; c0 += group) {
            const int64_t c1 = c0 + group < k ? c0 + group : k;   /* the last group may be short */
            const float *xg = x + r * k + c0;
            float *og = out + r * k + c0;
            const float amax = block_amax(xg, c1 - c0);
            if (amax == 0.0f) {              /* all zeros: nothing to scale (avoids 0/0) */
                for (int64_t i = 0; i < c1 - c0; i++) og[i] = xg[i];
                continue;
            }
            const float s = pow2 ? nd_pow2_scale_ceil(amax, 1e-4f) : amax / ND_E4M3_MAX;
            for (int64_t i = 0; i < c1 - c0; i++)
                og[i] = nd_e4m3_to_f32(nd_e4m3_from_f32_satfinite(xg[i] / s)) * s;
        }
    }
    return 0;
}

int nd_cpu_kv_fp8(nd_backend *b, const float *x, int64_t n, float write_scale, float read_scale, float *out,
                  nd_err *e) {
    (void)b;
    ND_CPU_SIZES(e, "kv_fp8", n);
    ND_CPU_REQUIRE(n == 0 || (x && out), e, "kv_fp8", "NULL buffer");
    for (int64_t i = 0; i < n; i++) out[i] = nd_kv_fp8(x[i], write_scale, read_scale);
    return 0;
}

/* Block scales between the linear [rows, k/16] layout and the swizzled 128x4 one, either way:
 * to_swizzled copies linear src into swizzled dst (its padding zeroed), else swizzled src into linear dst. */
static int sf_layout(const char *op, int to_swizzled, int64_t rows, int64_t k, const uint8_t *src, uint8_t *dst,
                     nd_err *e) {
    ND_CPU_SIZES(e, op, rows, k);
    ND_CPU_REQUIRE(k % ND_NVFP4_BLOCK == 0, e, op, "k = %lld is not a multiple of 16", (long long)k);
    ND_CPU_REQUIRE(rows * k == 0 || (src && dst), e, op, "NULL buffer");
    const int64_t kg = k / ND_NVFP4_BLOCK, kt = (kg + 3) / 4;
    if (rows * k == 0) return 0;
    if (to_swizzled) memset(dst, 0, (size_t)nd_sf_swizzled_bytes(rows, k));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < kg; c++) {
            const int64_t lin = r * kg + c, swz = nd_sf_swizzle_offset(r, c, kt);
            dst[to_swizzled ? swz : lin] = src[to_swizzled ? lin : swz];
        }
    return 0;
}

int nd_cpu_swizzle_sf(nd_backend *b, const uint8_t *linear, int64_t rows, int64_t k, uint8_t *swz,
                      nd_err *e) {
    (void)b;
    return sf_layout("swizzle_sf", 1, rows, k, linear, swz, e);
}

int nd_cpu_unswizzle_sf(nd_backend *b, const uint8_t *swz, int64_t rows, int64_t k, uint8_t *linear,
                        nd_err *e) {
    (void)b;
    return sf_layout("unswizzle_sf", 0, rows, k, swz, linear, e);
}
