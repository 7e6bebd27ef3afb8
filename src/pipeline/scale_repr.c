/* scale_repr.c — see scale_repr.h. */
#include "scale_repr.h"
#include <math.h>
#include <string.h>
#include "numerics/nd_numerics.h"

static const char *const LAYOUTS[ND_SF_NLAYOUTS] = {"linear", "swizzled_128x4", "transposed", "padded_128x4"};
static const char *const ENCODINGS[ND_SF_NENCODINGS] = {"e4m3", "e8m0", "u8", "e8m0_bias125", "e8m0_bias128"};

const char *nd_sf_layout_name(int l) { return l >= 0 && l < ND_SF_NLAYOUTS ? LAYOUTS[l] : "?"; }
const char *nd_sf_encoding_name(int x) { return x >= 0 && x < ND_SF_NENCODINGS ? ENCODINGS[x] : "?"; }

int nd_sf_layout_parse(const char *name) {
    for (int i = 0; i < ND_SF_NLAYOUTS; i++)
        if (!strcmp(name, LAYOUTS[i])) return i;
    return -1;
}

int nd_sf_encoding_parse(const char *name) {
    for (int i = 0; i < ND_SF_NENCODINGS; i++)
        if (!strcmp(name, ENCODINGS[i])) return i;
    return -1;
}

int64_t nd_sf_padded_stride(int64_t cols, int64_t multiple) {
    return multiple > 1 ? (cols + multiple - 1) / multiple * multiple : cols;
}

int64_t nd_sf_layout_bytes(int layout, int64_t rows, int64_t cols) {
    if (layout == ND_SF_SWIZZLED || layout == ND_SF_PADDED) return ((rows + 127) / 128) * 128 * nd_sf_padded_stride(cols, 4);
    return rows * cols;
}

int64_t nd_sf_layout_offset(int layout, int64_t rows, int64_t cols, int64_t r, int64_t c) {
    switch (layout) {
    case ND_SF_SWIZZLED: return nd_sf_swizzle_offset(r, c, (cols + 3) / 4);
    case ND_SF_TRANSPOSED: return c * rows + r;
    case ND_SF_PADDED: return r * nd_sf_padded_stride(cols, 4) + c;
    default: return r * cols + c;
    }
}

int64_t nd_sf_read_as(int layout, const uint8_t *buf, int64_t buf_n, int64_t rows, int64_t cols, uint8_t *lin) {
    int64_t past = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t o = nd_sf_layout_offset(layout, rows, cols, r, c);
            if (o < buf_n) lin[r * cols + c] = buf[o];
            else { lin[r * cols + c] = 0; past++; }
        }
    return past;
}

void nd_sf_store_as(int layout, const uint8_t *lin, int64_t rows, int64_t cols, uint8_t *buf) {
    memset(buf, 0, (size_t)nd_sf_layout_bytes(layout, rows, cols));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) buf[nd_sf_layout_offset(layout, rows, cols, r, c)] = lin[r * cols + c];
}

int64_t nd_sf_read_strided(const uint8_t *buf, int64_t buf_n, int64_t rows, int64_t cols, int64_t stride, uint8_t *lin) {
    int64_t past = 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < cols; c++) {
            int64_t o = r * stride + c;
            if (o < buf_n) lin[r * cols + c] = buf[o];
            else { lin[r * cols + c] = 0; past++; }
        }
    return past;
}

void nd_sf_store_strided(const uint8_t *lin, int64_t rows, int64_t cols, int64_t stride, uint8_t *buf) {
    memset(buf, 0, (size_t)(rows * stride));
    for (int64_t r = 0; r < rows; r++) memcpy(buf + r * stride, lin + r * cols, (size_t)cols);
}

float nd_e8m0_biased(uint8_t b, int bias) {
    if (b == 0xffu) return NAN;
    return ldexpf(1.0f, (int)b - bias);
}

float nd_sf_decode(uint8_t b, int encoding) {
    switch (encoding) {
    case ND_SF_E8M0: return nd_e8m0_biased(b, ND_E8M0_BIAS);
    case ND_SF_E8M0_B125: return nd_e8m0_biased(b, 125);
    case ND_SF_E8M0_B128: return nd_e8m0_biased(b, 128);
    case ND_SF_U8: return (float)b;
    default: return nd_e4m3_to_f32(b);
    }
}

float nd_sf_pow2_ceil(float v) {
    if (v == 0 || !isfinite(v)) return v;
    int e;
    float f = frexpf(fabsf(v), &e); /* |v| = f 2^e, f in [0.5, 1) */
    float p = ldexpf(1.0f, f == 0.5f ? e - 1 : e);
    return v < 0 ? -p : p;
}

int nd_sf_is_pow2(float v) {
    if (v == 0 || !isfinite(v)) return 0;
    int e;
    return frexpf(fabsf(v), &e) == 0.5f;
}

void nd_sf_pow2_share(const uint8_t *sf, int64_t n, int64_t *nonzero, int64_t *pow2) {
    *nonzero = *pow2 = 0;
    for (int64_t i = 0; i < n; i++) {
        float v = nd_e4m3_to_f32(sf[i]);
        if (v == 0 || !isfinite(v)) continue;
        (*nonzero)++;
        *pow2 += nd_sf_is_pow2(v);
    }
}

float nd_sf_e4m3_max(const uint8_t *sf, int64_t n) {
    float m = 0;
    for (int64_t i = 0; i < n; i++) {
        const float v = fabsf(nd_e4m3_to_f32(sf[i]));
        if (isfinite(v) && v > m) m = v;
    }
    return m;
}

int nd_sf_e4m3_pow2_ceil(uint8_t *sf, int64_t n) {
    int halve = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabsf(nd_sf_pow2_ceil(nd_e4m3_to_f32(sf[i]))) > ND_E4M3_MAX) halve = 1;
    for (int64_t i = 0; i < n; i++) {
        float v = nd_e4m3_to_f32(sf[i]);
        if (v == 0 || !isfinite(v)) continue;
        float p = nd_sf_pow2_ceil(v) * (halve ? 0.5f : 1.0f);
        /* 2^-10 (a halved 2^-9) is below E4M3's smallest subnormal: kept at 2^-9 */
        if (fabsf(p) < 1.0f / 512.0f) p = p < 0 ? -1.0f / 512.0f : 1.0f / 512.0f;
        sf[i] = nd_e4m3_from_f32_satfinite(p); /* exact: a power of two in range */
    }
    return halve;
}

static uint8_t e8m0_of_pow2(float p) {
    int e;
    frexpf(p, &e); /* p = 0.5 * 2^e */
    int b = (e - 1) + ND_E8M0_BIAS;
    return (uint8_t)(b < 0 ? 0 : b > 254 ? 254 : b);
}

void nd_sf_to_e8m0_requant(uint8_t *packed, uint8_t *sf, int64_t rows, int64_t k) {
    const int64_t nb = k / 16;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t bi = 0; bi < nb; bi++) {
            uint8_t *s = &sf[r * nb + bi];
            float v = fabsf(nd_e4m3_to_f32(*s));
            if (!isfinite(v)) { *s = 0xff; continue; }
            if (v == 0) { *s = 0; continue; } /* 2^-127: the block's codes decode to ~0 either way */
            float p = nd_sf_pow2_ceil(v);
            uint8_t *row = packed + r * (k / 2);
            for (int64_t j = bi * 16; j < (bi + 1) * 16; j++) {
                uint8_t c = nd_e2m1_from_f32(nd_e2m1_to_f32(nd_nibble(row, j)) * (v / p));
                uint8_t *byte = &row[j >> 1];
                *byte = (j & 1) ? (uint8_t)((*byte & 0x0f) | (c << 4)) : (uint8_t)((*byte & 0xf0) | c);
            }
            *s = e8m0_of_pow2(p);
        }
}

void nd_sf_refit(const uint8_t *packed, const float *orig, float div, int64_t rows, int64_t k, uint8_t *sf) {
    const int64_t nb = k / 16;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = packed + r * (k / 2);
        for (int64_t bi = 0; bi < nb; bi++) {
            double wc = 0, cc = 0;
            for (int64_t j = bi * 16; j < (bi + 1) * 16; j++) {
                double c = nd_e2m1_to_f32(nd_nibble(row, j));
                wc += (double)orig[r * k + j] * c;
                cc += c * c;
            }
            float s = cc > 0 ? (float)((double)div * wc / cc) : 0.0f;
            sf[r * nb + bi] = nd_e4m3_from_f32_satfinite(s > 0 ? s : 0.0f);
        }
    }
}

void nd_nvfp4_decode_f(const uint8_t *packed, const float *f, float div, int64_t rows, int64_t k, float *out) {
    const int64_t nb = k / 16;
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *row = packed + r * (k / 2);
        for (int64_t bi = 0; bi < nb; bi++) {
            const float s = f[r * nb + bi] / div;
            for (int64_t j = bi * 16; j < (bi + 1) * 16; j++) out[r * k + j] = nd_e2m1_to_f32(nd_nibble(row, j)) * s;
        }
    }
}

int64_t nd_tp_pad_reads(int64_t k, int tp, int tile, int *extra) {
    if (extra) memset(extra, 0, (size_t)k * sizeof *extra);
    if (tp < 1 || tile < 1 || k % tp) return 0;
    const int64_t kr = k / tp, pad = (kr + tile - 1) / tile * tile - kr;
    if (!pad) return 0;
    for (int i = 0; i < tp && extra; i++)
        for (int64_t j = 0; j < pad; j++) {
            int64_t col = (int64_t)(i + 1) * kr + j;
            if (col < k) extra[col]++;
        }
    return pad;
}
