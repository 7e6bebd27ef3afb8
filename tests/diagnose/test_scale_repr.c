/* test_scale_repr.c — the block-scale representation transforms (src/pipeline/scale_repr.h, issue
 * 18): layouts stored and read back (round trips, the inverse of the inverse, known offsets, reads
 * past an unpadded buffer), encodings on known bytes, the UE8M0 ceiling, the E8M0 conversion with
 * re-quantized codes, the least-squares refit that undoes the rounding, the host decode against the
 * backends' formula, and the columns a tensor-parallel shard's padding reads again. Fresh random
 * inputs each run (seed printed). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "nd_test.h"
#include "numerics/nd_numerics.h"
#include "pipeline/scale_repr.h"

static uint64_t rng_state;
static uint64_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 7; rng_state ^= rng_state << 17; return rng_state; }
static float urand(void) { return (float)((rnd() >> 11) * (1.0 / 9007199254740992.0)); }

static void test_layout_round_trips(void) {
    static const int64_t shapes[][2] = {{128, 4}, {256, 8}, {64, 4}, {37, 3}, {130, 5}, {1, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const int64_t rows = shapes[s][0], cols = shapes[s][1], n = rows * cols;
        uint8_t *lin = malloc((size_t)n), *back = malloc((size_t)n);
        for (int64_t i = 0; i < n; i++) lin[i] = (uint8_t)(rnd() | 1); /* nonzero: padding stays visible */
        for (int l = 0; l < ND_SF_NLAYOUTS; l++) {
            int64_t nb = nd_sf_layout_bytes(l, rows, cols);
            uint8_t *buf = malloc((size_t)nb);
            nd_sf_store_as(l, lin, rows, cols, buf);
            CHECK_EQ_INT(nd_sf_read_as(l, buf, nb, rows, cols, back), 0);
            CHECK(!memcmp(lin, back, (size_t)n), "read_as(%s, store_as(%s, x)) == x for [%lld, %lld]", nd_sf_layout_name(l),
                  nd_sf_layout_name(l), (long long)rows, (long long)cols);
            int64_t zeros = 0;
            for (int64_t i = 0; i < nb; i++) zeros += buf[i] == 0;
            CHECK_EQ_INT(zeros, nb - n); /* every padding byte zero, every element stored once */
            free(buf);
        }
        /* transposing twice (the [cols, rows] matrix stored transposed again) is the identity */
        uint8_t *t = malloc((size_t)n), *tt = malloc((size_t)n);
        nd_sf_store_as(ND_SF_TRANSPOSED, lin, rows, cols, t);
        nd_sf_store_as(ND_SF_TRANSPOSED, t, cols, rows, tt);
        CHECK(!memcmp(lin, tt, (size_t)n), "transposed twice is the identity");
        free(t); free(tt); free(lin); free(back);
    }
    /* known offsets: the 128x4 tile is [32][4][4] (nd_numerics.h's vectors), transposed is c*rows+r */
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_SWIZZLED, 128, 8, 5, 2), 82);
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_SWIZZLED, 128, 8, 5, 5), 593);
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_SWIZZLED, 256, 4, 200, 1), 512 + 8 * 16 + 2 * 4 + 1);
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_TRANSPOSED, 3, 5, 1, 2), 7);
    CHECK_EQ_INT(nd_sf_layout_bytes(ND_SF_SWIZZLED, 64, 3), 512);
    CHECK_EQ_INT(nd_sf_layout_bytes(ND_SF_SWIZZLED, 129, 5), 256 * 8);
    /* padded_128x4: linear order, rows of round_up(cols, 4) bytes, rows padded to 128 */
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_PADDED, 64, 6, 3, 5), 3 * 8 + 5);
    CHECK_EQ_INT(nd_sf_layout_offset(ND_SF_PADDED, 64, 8, 3, 5), 3 * 8 + 5);
    CHECK_EQ_INT(nd_sf_layout_bytes(ND_SF_PADDED, 129, 5), 256 * 8);
    CHECK_EQ_INT(nd_sf_padded_stride(6, 4), 8);
    CHECK_EQ_INT(nd_sf_padded_stride(6, 8), 8);
    CHECK_EQ_INT(nd_sf_padded_stride(8, 8), 8);
    CHECK_EQ_INT(nd_sf_padded_stride(9, 16), 16);
    {
        /* rows of stride 8 holding [3, 6]: stored and read back; read dense (stride 6) the rows
         * shift by 2 bytes per row: element (2, 0) is stored byte 16, dense reading takes byte 12 */
        uint8_t m[18], s[24], back[18], dense[18];
        for (int i = 0; i < 18; i++) m[i] = (uint8_t)(i + 1);
        nd_sf_store_strided(m, 3, 6, 8, s);
        CHECK_EQ_INT(s[6], 0);
        CHECK_EQ_INT(s[7], 0);
        CHECK_EQ_INT(s[8], 7);
        CHECK_EQ_INT(nd_sf_read_strided(s, 24, 3, 6, 8, back), 0);
        CHECK(!memcmp(m, back, 18), "read_strided(store_strided(x)) == x");
        nd_sf_read_as(ND_SF_LINEAR, s, 24, 3, 6, dense);
        CHECK_EQ_INT(dense[2 * 6 + 0], s[12]);
        CHECK_EQ_INT(dense[1 * 6 + 0], 0); /* row 1 read dense starts in row 0's padding */
        /* a strided read of a dense [3, 6] buffer (stride 8 over 18 bytes): row 2 is past its end */
        CHECK_EQ_INT(nd_sf_read_strided(m, 18, 3, 6, 8, back), 4);
        CHECK_EQ_INT(back[1 * 6 + 0], m[8]);
        CHECK_EQ_INT(back[2 * 6 + 1], m[17]);
        CHECK_EQ_INT(back[2 * 6 + 2], 0);
    }
    /* a swizzled read of an unpadded [64, 4] linear buffer: rows with r % 32 >= 16 land past its
     * 256 bytes (offset >= 16 * 16) and read 0 */
    uint8_t buf[256], lin[256];
    for (int i = 0; i < 256; i++) buf[i] = (uint8_t)(i | 1);
    CHECK_EQ_INT(nd_sf_read_as(ND_SF_SWIZZLED, buf, 256, 64, 4, lin), 128);
    CHECK_EQ_INT(lin[16 * 4 + 0], 0);
    CHECK_EQ_INT(lin[1 * 4 + 3], buf[16 + 3]);
    CHECK_EQ_INT(lin[33 * 4 + 2], buf[16 + 4 + 2]);
}

static void test_encodings(void) {
    CHECK_NEAR(nd_sf_decode(0x38, ND_SF_E4M3), 1.0, 0);
    CHECK_NEAR(nd_sf_decode(0x7e, ND_SF_E4M3), 448.0, 0);
    CHECK_NEAR(nd_sf_decode(127, ND_SF_E8M0), 1.0, 0);
    CHECK_NEAR(nd_sf_decode(130, ND_SF_E8M0), 8.0, 0);
    CHECK_NEAR(nd_sf_decode(120, ND_SF_E8M0), 1.0 / 128, 0);
    CHECK(isnan(nd_sf_decode(0xff, ND_SF_E8M0)), "E8M0 0xFF is NaN");
    CHECK_NEAR(nd_sf_decode(200, ND_SF_U8), 200.0, 0);
    CHECK_NEAR(nd_sf_decode(0x7f, ND_SF_U8), 127.0, 0);
    /* compressed-tensors 0.13's bias 125 (C26): a byte read with bias 127 is 4x too small */
    CHECK_NEAR(nd_e8m0_biased(127, 125), 4.0, 0);
    CHECK_NEAR(nd_e8m0_biased(127, 125) / nd_sf_decode(127, ND_SF_E8M0), 4.0, 0);
    CHECK_EQ_INT(nd_sf_layout_parse("swizzled_128x4"), ND_SF_SWIZZLED);
    CHECK_EQ_INT(nd_sf_encoding_parse("u8"), ND_SF_U8);
    CHECK_EQ_INT(nd_sf_encoding_parse("E4M3"), -1);
}

static void test_pow2(void) {
    CHECK_NEAR(nd_sf_pow2_ceil(3.0f), 4.0, 0);
    CHECK_NEAR(nd_sf_pow2_ceil(4.0f), 4.0, 0);
    CHECK_NEAR(nd_sf_pow2_ceil(0.3f), 0.5, 0);
    CHECK_NEAR(nd_sf_pow2_ceil(-3.0f), -4.0, 0);
    CHECK_NEAR(nd_sf_pow2_ceil(448.0f), 512.0, 0);
    CHECK_NEAR(nd_sf_pow2_ceil(0.0f), 0.0, 0);
    CHECK(nd_sf_is_pow2(0.25f) && !nd_sf_is_pow2(0.375f) && !nd_sf_is_pow2(0.0f), "powers of two");
    /* every positive finite E4M3 value up to 256: ceiling in [v, 2v), a power of two, no halving */
    uint8_t sf[0x79];
    for (int b = 1; b <= 0x78; b++) sf[b - 1] = (uint8_t)b;
    CHECK_EQ_INT(nd_sf_e4m3_pow2_ceil(sf, 0x78), 0);
    int bad = 0;
    for (int b = 1; b <= 0x78; b++) {
        float v = nd_e4m3_to_f32((uint8_t)b), p = nd_e4m3_to_f32(sf[b - 1]);
        bad += !(p >= v && p < 2 * v && nd_sf_is_pow2(p));
    }
    CHECK_EQ_INT(bad, 0);
    int64_t nz, p2;
    nd_sf_pow2_share(sf, 0x78, &nz, &p2);
    CHECK_EQ_INT(nz, 0x78);
    CHECK_EQ_INT(p2, 0x78);
    /* with 448 among them every scale is stored at half its ceiling (the caller halves the global) */
    uint8_t s2[4] = {0x7e /* 448 */, 0x38 /* 1 */, 0x39 /* 1.125 */, 0x01 /* 2^-9 */};
    CHECK_EQ_INT(nd_sf_e4m3_pow2_ceil(s2, 4), 1);
    CHECK_NEAR(nd_e4m3_to_f32(s2[0]), 256.0, 0);
    CHECK_NEAR(nd_e4m3_to_f32(s2[1]), 0.5, 0);
    CHECK_NEAR(nd_e4m3_to_f32(s2[2]), 1.0, 0);
    CHECK_NEAR(nd_e4m3_to_f32(s2[3]), 1.0 / 512, 0); /* 2^-10 does not exist: kept */
    nd_sf_pow2_share(s2, 4, &nz, &p2);
    CHECK_EQ_INT(p2, 4);
}

/* A [rows, k] weight quantized as compressed-tensors does (global g = 2688/amax). */
static void quantize(const float *w, int64_t rows, int64_t k, float g, uint8_t *packed, uint8_t *sf) {
    memset(packed, 0, (size_t)(rows * k / 2));
    for (int64_t r = 0; r < rows; r++)
        for (int64_t b = 0; b < k / 16; b++) {
            float amax = 0;
            for (int64_t j = b * 16; j < b * 16 + 16; j++) amax = fmaxf(amax, fabsf(w[r * k + j]));
            uint8_t s = nd_e4m3_from_f32_satfinite(amax / 6.0f * g);
            sf[r * (k / 16) + b] = s;
            float sv = nd_e4m3_to_f32(s);
            for (int64_t j = b * 16; j < b * 16 + 16; j++) {
                uint8_t c = sv > 0 ? nd_e2m1_from_f32(w[r * k + j] * g / sv) : 0;
                packed[(r * k + j) / 2] |= (uint8_t)((j & 1) ? c << 4 : c);
            }
        }
}

static void test_requant_and_refit(void) {
    enum { R = 48, K = 128, NB = K / 16 };
    float *w = malloc(sizeof(float) * R * K), *orig_dec = malloc(sizeof(float) * R * K), *dec = malloc(sizeof(float) * R * K);
    float f[R * NB];
    uint8_t packed[R * K / 2], sf[R * NB], p2[R * K / 2], s2[R * NB];
    float amax = 0;
    for (int i = 0; i < R * K; i++) { w[i] = (urand() - 0.5f) * (i % 7 == 0 ? 4.0f : 1.0f); amax = fmaxf(amax, fabsf(w[i])); }
    const float g = 2688.0f / amax;
    quantize(w, R, K, g, packed, sf);
    for (int i = 0; i < R * NB; i++) f[i] = nd_e4m3_to_f32(sf[i]);
    nd_nvfp4_decode_f(packed, f, g, R, K, orig_dec);
    /* the host decode is the backends' formula bit for bit */
    int diff = 0;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < K; j++)
            diff += orig_dec[r * K + j] != nd_e2m1_to_f32(nd_nibble(packed + r * K / 2, j)) * nd_nvfp4_block_dequant_scale(sf[r * NB + j / 16], g);
    CHECK_EQ_INT(diff, 0);

    /* E8M0 conversion: each scale the E8M0 byte of its ceiling, the codes re-quantized to it */
    memcpy(p2, packed, sizeof p2);
    memcpy(s2, sf, sizeof s2);
    nd_sf_to_e8m0_requant(p2, s2, R, K);
    int scale_bad = 0, elem_bad = 0;
    for (int i = 0; i < R * NB; i++) {
        float s = nd_e4m3_to_f32(sf[i]), p = nd_sf_decode(s2[i], ND_SF_E8M0);
        scale_bad += s > 0 && !(p >= s && p < 2 * s && nd_sf_is_pow2(p));
        f[i] = p;
    }
    CHECK_EQ_INT(scale_bad, 0);
    nd_nvfp4_decode_f(p2, f, g, R, K, dec);
    for (int r = 0; r < R; r++)
        for (int j = 0; j < K; j++) /* re-quantized to the grid of p: within its largest half-step (1 x p) */
            elem_bad += fabsf(dec[r * K + j] - orig_dec[r * K + j]) > f[r * NB + j / 16] / g * 1.0001f;
    CHECK_EQ_INT(elem_bad, 0);
    /* read as E4M3 the same bytes are far off (what the diagnosis sees) */
    int as_e4m3_bad = 0;
    for (int i = 0; i < R * NB; i++) as_e4m3_bad += isnan(nd_e4m3_to_f32(s2[i])) || nd_e4m3_to_f32(s2[i]) < 0;
    CHECK(as_e4m3_bad > 0, "E8M0 bytes of scales near 1..448 hit E4M3's NaN or negative bytes");

    /* UE8M0 ceiling of the stored scales, then the refit against the original: the scales come back */
    memcpy(s2, sf, sizeof s2);
    int halved = nd_sf_e4m3_pow2_ceil(s2, R * NB);
    CHECK_EQ_INT(halved, 1); /* the block holding amax has scale 448 */
    uint8_t fit[R * NB];
    nd_sf_refit(packed, w, g, R, K, fit);
    int off_by_more = 0;
    for (int i = 0; i < R * NB; i++) off_by_more += abs((int)fit[i] - (int)sf[i]) > 1; /* one E4M3 step at most */
    CHECK_EQ_INT(off_by_more, 0);
    /* squared error against the original: the rounded scales are far worse than the stored ones; the
     * refitted ones (least squares per block, then E4M3 rounding) are no worse than the stored ones */
    double e_orig = 0, e_pow2 = 0, e_fit = 0;
    for (int i = 0; i < R * NB; i++) f[i] = nd_e4m3_to_f32(s2[i]);
    nd_nvfp4_decode_f(packed, f, g * 0.5f, R, K, dec);
    for (int i = 0; i < R * K; i++) e_pow2 += (dec[i] - w[i]) * (dec[i] - w[i]), e_orig += (orig_dec[i] - w[i]) * (orig_dec[i] - w[i]);
    for (int i = 0; i < R * NB; i++) f[i] = nd_e4m3_to_f32(fit[i]);
    nd_nvfp4_decode_f(packed, f, g, R, K, dec);
    for (int i = 0; i < R * K; i++) e_fit += (dec[i] - w[i]) * (dec[i] - w[i]);
    CHECK(e_pow2 > 4 * e_orig, "UE8M0 ceiling: error %.4g vs stored %.4g", e_pow2, e_orig);
    CHECK(e_fit <= e_orig, "refit: error %.4g vs stored %.4g", e_fit, e_orig);
    free(w); free(orig_dec); free(dec);
}

static void test_tp_padding(void) {
    int extra[128];
    /* K 64 over 8 ranks of 8 columns, padded to 16: rank i reads the next 8 columns, the last none */
    CHECK_EQ_INT(nd_tp_pad_reads(64, 8, 16, extra), 8);
    int sum = 0;
    for (int j = 0; j < 64; j++) sum += extra[j];
    CHECK_EQ_INT(sum, 56);
    CHECK_EQ_INT(extra[7], 0);
    CHECK_EQ_INT(extra[8], 1);
    CHECK_EQ_INT(extra[63], 1);
    /* padded to 32: 24 columns past each shard, overlapping: counts 1, 2, 3 */
    CHECK_EQ_INT(nd_tp_pad_reads(64, 8, 32, extra), 24);
    CHECK_EQ_INT(extra[0], 0);
    CHECK_EQ_INT(extra[8], 1);
    CHECK_EQ_INT(extra[16], 2);
    CHECK_EQ_INT(extra[24], 3);
    CHECK_EQ_INT(extra[63], 3);
    /* aligned shards, an impossible split, one rank: nothing read */
    CHECK_EQ_INT(nd_tp_pad_reads(128, 8, 16, extra), 0);
    CHECK_EQ_INT(nd_tp_pad_reads(60, 8, 16, extra), 0);
    CHECK_EQ_INT(nd_tp_pad_reads(48, 1, 32, extra), 16); /* one rank's padding: past K, reads nothing */
    sum = 0;
    for (int j = 0; j < 48; j++) sum += extra[j];
    CHECK_EQ_INT(sum, 0);
}

int main(void) {
    rng_state = (uint64_t)time(NULL) | 1;
    printf("seed %llu\n", (unsigned long long)rng_state);
    test_layout_round_trips();
    test_encodings();
    test_pow2();
    test_requant_and_refit();
    test_tp_padding();
    return nd_test_report("test_scale_repr");
}
