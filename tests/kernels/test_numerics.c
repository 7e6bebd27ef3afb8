/* test_numerics.c — the scalar numerics of kernels/numerics/nd_numerics.h and the NVFP4 block
 * quantizer of the CPU backend, against independent definitions written here:
 * every code round-trips, every midpoint goes to the even code (and its neighbours either
 * side to the nearer code), the two E4M3 saturation behaviours near 448/464/480 and for
 * Inf/NaN, subnormals, BF16 ties, the swizzle offsets, and hand-computed NVFP4 blocks. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "backend.h"
#include "numerics/nd_numerics.h"

/* ---- independent references ---------------------------------------------------------- */
/* E4M3 by its definition: sign, 4-bit exponent (bias 7), 3-bit mantissa, e=0 subnormal. */
static double e4m3_def(uint8_t b) {
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e == 0 ? ldexp(m / 8.0, -6) : ldexp(1.0 + m / 8.0, e - 7);
    return s ? -v : v;
}
static const double e2m1_mag[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};

/* nearest grid value of |x| among `cnt` ascending magnitudes, ties to the even index */
static int nearest_even(const double *grid, int cnt, double a) {
    int best = 0;
    for (int i = 1; i < cnt; i++) {
        double db = fabs(a - grid[best]), di = fabs(a - grid[i]);
        if (di < db || (di == db && (i & 1) == 0)) best = i;
    }
    return best;
}

static uint32_t rng_state;
static uint32_t rnd(void) { rng_state ^= rng_state << 13; rng_state ^= rng_state >> 17; rng_state ^= rng_state << 5; return rng_state; }

static void test_e2m1(void) {
    for (int c = 0; c < 16; c++) {
        float v = nd_e2m1_to_f32((uint8_t)c);
        double want = (c & 8) ? -e2m1_mag[c & 7] : e2m1_mag[c & 7];
        CHECK(v == want && !!signbit(v) == !!(c & 8), "e2m1 decode %d -> %g", c, v);
        CHECK_EQ_INT(nd_e2m1_from_f32(v), c);
    }
    /* midpoints go to the even magnitude index (mantissa bit 0); one ulp either side goes to
     * the nearer value */
    for (int i = 0; i < 7; i++) {
        float mid = (float)((e2m1_mag[i] + e2m1_mag[i + 1]) / 2);
        int even = (i & 1) ? i + 1 : i;
        for (int sg = 0; sg < 2; sg++) {
            float sgn = sg ? -1.0f : 1.0f;
            uint8_t sb = sg ? 8 : 0;
            CHECK(nd_e2m1_from_f32(sgn * mid) == (sb | even), "e2m1 midpoint %g -> %d", sgn * mid, nd_e2m1_from_f32(sgn * mid));
            CHECK(nd_e2m1_from_f32(sgn * nextafterf(mid, 0.0f)) == (sb | i), "below midpoint %g", mid);
            CHECK(nd_e2m1_from_f32(sgn * nextafterf(mid, 100.0f)) == (sb | (i + 1)), "above midpoint %g", mid);
        }
    }
    CHECK_EQ_INT(nd_e2m1_from_f32(6.5f), 7);
    CHECK_EQ_INT(nd_e2m1_from_f32(1e30f), 7);
    CHECK_EQ_INT(nd_e2m1_from_f32(INFINITY), 7);
    CHECK_EQ_INT(nd_e2m1_from_f32(-INFINITY), 15);
    CHECK_EQ_INT(nd_e2m1_from_f32(NAN), 7);     /* documented choice in nd_numerics.h */
    CHECK_EQ_INT(nd_e2m1_from_f32(-0.1f), 8);   /* sign kept at zero */
    /* random inputs against the nearest-even search */
    int bad = 0;
    for (int t = 0; t < 200000; t++) {
        float x = ((float)(rnd() & 0xffffff) / 16777216.0f) * 8.0f - 4.0f;
        x *= (rnd() & 1) ? 1.0f : 2.0f;
        int idx = nearest_even(e2m1_mag, 8, fabs(x));
        uint8_t want = (uint8_t)((signbit(x) ? 8 : 0) | idx);
        bad += nd_e2m1_from_f32(x) != want;
    }
    CHECK_EQ_INT(bad, 0);
    /* the split a GPU quantizer uses: eight codes' signs gathered at once (nd_e2m1_signs8) OR'ed
     * onto the magnitude codes give the eight nd_e2m1_from_f32 codes, for random bit patterns
     * (NaNs excluded, as the quantizer takes this path only for finite blocks) */
    bad = 0;
    for (int t = 0; t < 100000; t++) {
        uint32_t u[8], want = 0, got = 0;
        for (int j = 0; j < 8; j++) {
            do u[j] = (uint32_t)rnd(); while ((u[j] & 0x7fffffffu) > 0x7f800000u);
            float x;
            memcpy(&x, &u[j], 4);
            want |= (uint32_t)nd_e2m1_from_f32(x) << (4 * j);
            got |= nd_e2m1_mag_code(u[j] & 0x7fffffffu) << (4 * j);
        }
        bad += (got | nd_e2m1_signs8(u)) != want;
    }
    CHECK_EQ_INT(bad, 0);
}

static void test_e4m3(void) {
    /* decode every byte against the definition; encode round-trips in both behaviours */
    for (int b = 0; b < 256; b++) {
        float v = nd_e4m3_to_f32((uint8_t)b);
        if ((b & 0x7f) == 0x7f) { CHECK(isnan(v), "byte %02x must be NaN", b); continue; }
        CHECK(v == e4m3_def((uint8_t)b) && !!signbit(v) == (b >> 7), "decode %02x -> %g want %g", b, v, e4m3_def((uint8_t)b));
        CHECK(nd_e4m3_from_f32_satfinite(v) == b, "satfinite round trip %02x", b);
        CHECK(nd_e4m3_from_f32_torch(v) == b, "torch round trip %02x", b);
    }
    /* subnormals: m * 2^-9 */
    for (int m = 1; m < 8; m++) CHECK(nd_e4m3_to_f32((uint8_t)m) == ldexpf((float)m, -9), "subnormal %d", m);
    CHECK(nd_e4m3_to_f32(8) == ldexpf(1.0f, -6), "min normal");
    /* midpoints between consecutive positive finite values: to the even byte */
    double grid[127];
    for (int b = 0; b < 127; b++) grid[b] = e4m3_def((uint8_t)b);
    for (int b = 0; b + 1 < 127; b++) {
        float mid = (float)((grid[b] + grid[b + 1]) / 2);   /* exact in float */
        CHECK((double)mid == (grid[b] + grid[b + 1]) / 2, "midpoint exact");
        int even = (b & 1) ? b + 1 : b;
        for (int sg = 0; sg < 2; sg++) {
            float x = sg ? -mid : mid;
            uint8_t sb = sg ? 0x80 : 0;
            CHECK(nd_e4m3_from_f32_satfinite(x) == (sb | even), "satfinite midpoint %g -> %02x", x, nd_e4m3_from_f32_satfinite(x));
            CHECK(nd_e4m3_from_f32_torch(x) == (sb | even), "torch midpoint %g", x);
            float lo = nextafterf(fabsf(x), 0.0f), hi = nextafterf(fabsf(x), 1e9f);
            if (sg) { lo = -lo; hi = -hi; }
            CHECK(nd_e4m3_from_f32_satfinite(lo) == (sb | b), "below midpoint %g", mid);
            CHECK(nd_e4m3_from_f32_satfinite(hi) == (sb | (b + 1)), "above midpoint %g", mid);
            CHECK(nd_e4m3_from_f32_torch(lo) == (sb | b), "torch below midpoint %g", mid);
            CHECK(nd_e4m3_from_f32_torch(hi) == (sb | (b + 1)), "torch above midpoint %g", mid);
        }
    }
    /* below half the smallest subnormal: zero; at it: tie to 0 (even) */
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(ldexpf(1.0f, -10)), 0);
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(nextafterf(ldexpf(1.0f, -10), 1.0f)), 1);
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(1e-30f), 0);
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(-1e-30f), 0x80);
    /* the top of the range: 448 is 0x7E. satfinite clamps everything beyond to 448; torch
     * rounds (448, 464] to 448 (464 is the tie between 448 and the would-be 480, even = 448)
     * and turns anything above 464 (rounds to 480) and >= 480 into NaN 0x7F. */
    const float up464 = nextafterf(464.0f, 1e9f);
    const float tops[] = {448.0f, 449.0f, 463.9f, 464.0f, up464, 470.0f, 479.9f, 480.0f, 500.0f, 1e10f};
    const uint8_t want_torch[] = {0x7e, 0x7e, 0x7e, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f};
    for (size_t i = 0; i < sizeof tops / sizeof tops[0]; i++) {
        CHECK(nd_e4m3_from_f32_satfinite(tops[i]) == 0x7e, "satfinite %g", tops[i]);
        CHECK(nd_e4m3_from_f32_satfinite(-tops[i]) == 0xfe, "satfinite %g", -tops[i]);
        CHECK(nd_e4m3_from_f32_torch(tops[i]) == want_torch[i], "torch %g -> %02x", tops[i], nd_e4m3_from_f32_torch(tops[i]));
        CHECK(nd_e4m3_from_f32_torch(-tops[i]) == (0x80 | want_torch[i]), "torch %g", -tops[i]);
    }
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(INFINITY), 0x7e);
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(-INFINITY), 0xfe);
    CHECK_EQ_INT(nd_e4m3_from_f32_satfinite(NAN) & 0x7f, 0x7f);
    CHECK_EQ_INT(nd_e4m3_from_f32_torch(INFINITY), 0x7f);
    CHECK_EQ_INT(nd_e4m3_from_f32_torch(-INFINITY), 0xff);
    CHECK_EQ_INT(nd_e4m3_from_f32_torch(NAN) & 0x7f, 0x7f);
    /* random inputs across the whole range against the nearest-even search */
    int bad = 0;
    for (int t = 0; t < 200000; t++) {
        float x = ldexpf((float)(rnd() & 0xffffff) / 16777216.0f, (int)(rnd() % 22) - 12);
        if (rnd() & 1) x = -x;
        int idx = nearest_even(grid, 127, fabs(x));
        uint8_t want = (uint8_t)((signbit(x) ? 0x80 : 0) | idx);
        bad += nd_e4m3_from_f32_satfinite(x) != want;
        bad += fabsf(x) <= 448.0f && nd_e4m3_from_f32_torch(x) != want;
    }
    CHECK_EQ_INT(bad, 0);
    /* E8M0 */
    CHECK(nd_e8m0_to_f32(127) == 1.0f && nd_e8m0_to_f32(130) == 8.0f && nd_e8m0_to_f32(120) == 1.0f / 128, "e8m0");
    CHECK(isnan(nd_e8m0_to_f32(255)), "e8m0 NaN");
}

/* BF16 RNE by definition: the nearer of the two truncation neighbours, ties to even. */
static uint16_t bf16_def(float f) {
    uint32_t u = nd_f32_bits(f);
    uint32_t lo = u & 0xffff0000u, hi = lo + 0x10000u;
    double dl = fabs((double)f - (double)nd_bits_f32(lo));
    /* past the largest finite value the upper neighbour is 2^128 (which rounds to Inf) */
    double dh = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(1.0, 128) - fabs((double)f)
                                                  : fabs((double)f - (double)nd_bits_f32(hi));
    if (dl < dh) return (uint16_t)(lo >> 16);
    if (dh < dl) return (uint16_t)(hi >> 16);
    return (uint16_t)(((lo >> 16) & 1) ? hi >> 16 : lo >> 16);
}

static void test_bf16(void) {
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0x3f808000u)), 0x3f80); /* tie, even below */
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0x3f818000u)), 0x3f82); /* tie, even above */
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0x3f808001u)), 0x3f81);
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0x3f807fffu)), 0x3f80);
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0xbf818000u)), 0xbf82);
    CHECK_EQ_INT(nd_bf16_from_f32(nd_bits_f32(0x7f7fffffu)), 0x7f80); /* FLT_MAX rounds to Inf */
    CHECK_EQ_INT(nd_bf16_from_f32(INFINITY), 0x7f80);
    CHECK(isnan(nd_bf16_round(NAN)), "NaN stays NaN");
    CHECK(isnan(nd_bf16_to_f32(nd_bf16_from_f32(nd_bits_f32(0x7f800001u)))), "signalling NaN stays NaN");
    int bad = 0;
    for (int t = 0; t < 300000; t++) {
        uint32_t u = rnd();
        if ((u & 0x7f800000u) == 0x7f800000u) continue;       /* finite inputs here */
        if (t & 1) u = (u & 0xffff0000u) | 0x8000u;           /* every other one an exact tie */
        float f = nd_bits_f32(u);
        uint16_t want = bf16_def(f);
        bad += nd_bf16_from_f32(f) != want;
    }
    CHECK_EQ_INT(bad, 0);
}

/* F16 RNE by definition: the nearer of the two finite F16 neighbours of |f| (codes increase with
 * the value), ties to the even code; past 65504 the upper neighbour is 2^16, which is Inf. */
static uint16_t f16_def(float f) {
    const uint16_t sign = (nd_f32_bits(f) >> 31) ? 0x8000u : 0;
    const double a = fabs((double)f);
    uint32_t lo = 0, hi = 0x7bffu; /* the largest finite code whose value is <= a */
    if (a >= 65504.0) lo = 0x7bffu;
    else
        while (lo < hi) {
            uint32_t mid = (lo + hi + 1) / 2;
            if ((double)nd_f16_to_f32((uint16_t)mid) <= a) lo = mid; else hi = mid - 1;
        }
    const double vl = nd_f16_to_f32((uint16_t)lo), vh = lo == 0x7bffu ? 65536.0 : nd_f16_to_f32((uint16_t)(lo + 1));
    const double dl = a - vl, dh = vh - a;
    uint32_t pick = dl < dh ? lo : dh < dl ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
    if (pick > 0x7bffu) pick = 0x7c00u;
    return (uint16_t)(sign | pick);
}

static void test_f16(nd_backend *be) {
    CHECK_EQ_INT(nd_f16_from_f32(1.0f), 0x3c00);
    CHECK_EQ_INT(nd_f16_from_f32(65504.0f), 0x7bff);
    CHECK_EQ_INT(nd_f16_from_f32(65519.996f), 0x7bff);              /* below the midpoint: the max */
    CHECK_EQ_INT(nd_f16_from_f32(65520.0f), 0x7c00);                /* the midpoint ties to Inf */
    CHECK_EQ_INT(nd_f16_from_f32(-1e6f), 0xfc00);
    CHECK_EQ_INT(nd_f16_from_f32(INFINITY), 0x7c00);
    CHECK_EQ_INT(nd_f16_from_f32(1.0f + 0x1p-11f), 0x3c00);         /* tie, even below */
    CHECK_EQ_INT(nd_f16_from_f32(1.0f + 3 * 0x1p-11f), 0x3c02);     /* tie, even above */
    CHECK_EQ_INT(nd_f16_from_f32(0x1p-24f), 0x0001);                /* smallest subnormal */
    CHECK_EQ_INT(nd_f16_from_f32(0x1p-25f), 0x0000);                /* its half ties to zero */
    CHECK_EQ_INT(nd_f16_from_f32(3 * 0x1p-25f), 0x0002);            /* 1.5 steps ties to 2 */
    CHECK_EQ_INT(nd_f16_from_f32(0x1p-14f - 0x1p-26f), 0x0400);     /* rounds up into the normals */
    CHECK_EQ_INT(nd_f16_from_f32(-0.0f), 0x8000);
    CHECK(isnan(nd_f16_round(NAN)), "NaN stays NaN");
    /* every F16 value converts back to its own code */
    int bad = 0;
    for (uint32_t h = 0; h < 0x10000u; h++) {
        if ((h & 0x7c00u) == 0x7c00u && (h & 0x3ffu)) continue; /* NaN codes */
        bad += nd_f16_from_f32(nd_f16_to_f32((uint16_t)h)) != h;
    }
    CHECK_EQ_INT(bad, 0);
    /* random finite floats (every other one an exact tie between two F16 neighbours) */
    bad = 0;
    for (int t = 0; t < 200000; t++) {
        uint32_t u = rnd();
        if ((u & 0x7f800000u) == 0x7f800000u) continue;
        if (t % 3 == 0) u = (u & 0x807fffffu) | ((uint32_t)(100 + rnd() % 45) << 23); /* the F16 range */
        if (t & 1) u = (u & 0xffffe000u) | 0x1000u;
        float f = nd_bits_f32(u);
        bad += nd_f16_from_f32(f) != f16_def(f);
#ifdef __FLT16_MAX__
        /* and the compiler's own conversion, where it has one */
        _Float16 h = (_Float16)f;
        uint16_t hb;
        memcpy(&hb, &h, 2);
        bad += nd_f16_from_f32(f) != hb;
#endif
    }
    CHECK_EQ_INT(bad, 0);
    /* the backend op: cast to F16, then the scale (an accumulator past 65504 is Inf before the scale) */
    float x[5] = {70000.0f, 65504.0f, -1e5f, 1234.567f, NAN};
    nd_err e = {0};
    CHECK(be->cast_f16_scale(be, x, 5, 1e-3f, &e) == 0, "cast_f16_scale: %s", e.msg);
    CHECK(isinf(x[0]) && x[0] > 0, "70000 cast to F16 is +Inf (got %g)", x[0]);
    CHECK(x[1] == 65504.0f * 1e-3f, "65504 survives: %.9g", x[1]);
    CHECK(isinf(x[2]) && x[2] < 0, "-1e5 is -Inf (got %g)", x[2]);
    CHECK(x[3] == nd_f16_to_f32(nd_f16_from_f32(1234.567f)) * 1e-3f, "rounded to F16 before the scale");
    CHECK(isnan(x[4]), "NaN stays NaN");
}

static void test_swizzle(nd_backend *be) {
    /* published examples: K/16 = 8 columns, i.e. 2 K-tiles */
    CHECK_EQ_INT(nd_sf_swizzle_offset(5, 2, 2), 82);
    CHECK_EQ_INT(nd_sf_swizzle_offset(5, 5, 2), 593);
    CHECK_EQ_INT(nd_sf_swizzled_bytes(5, 128), 128 * 8);
    CHECK_EQ_INT(nd_sf_swizzled_bytes(130, 16), 256 * 4);
    /* the layout is a bijection of the padded matrix; the op fills padding with zero and
     * unswizzle undoes swizzle */
    const int64_t rows = 200, k = 16 * 10, kg = 10, kt = 3;
    const int64_t nbytes = nd_sf_swizzled_bytes(rows, k);
    CHECK_EQ_INT(nbytes, 256 * 12);
    unsigned char *seen = calloc((size_t)nbytes, 1);
    int dup = 0, oob = 0;
    for (int64_t r = 0; r < 256; r++)
        for (int64_t c = 0; c < 12; c++) {
            int64_t o = nd_sf_swizzle_offset(r, c, kt);
            if (o < 0 || o >= nbytes) { oob++; continue; }
            dup += seen[o]++ != 0;
        }
    CHECK_EQ_INT(dup, 0);
    CHECK_EQ_INT(oob, 0);
    uint8_t *lin = malloc((size_t)(rows * kg)), *swz = malloc((size_t)nbytes), *back = malloc((size_t)(rows * kg));
    for (int64_t i = 0; i < rows * kg; i++) lin[i] = (uint8_t)(1 + rnd() % 254);
    memset(swz, 0xaa, (size_t)nbytes);
    nd_err e = {0};
    CHECK_EQ_INT(be->swizzle_sf(be, lin, rows, k, swz, &e), 0);
    int64_t nz = 0, mism = 0;
    for (int64_t i = 0; i < nbytes; i++) nz += swz[i] != 0;
    CHECK_EQ_INT(nz, rows * kg);                 /* exactly the data bytes are non-zero */
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < kg; c++) mism += swz[nd_sf_swizzle_offset(r, c, kt)] != lin[r * kg + c];
    CHECK_EQ_INT(mism, 0);
    CHECK_EQ_INT(be->unswizzle_sf(be, swz, rows, k, back, &e), 0);
    CHECK(memcmp(lin, back, (size_t)(rows * kg)) == 0, "unswizzle(swizzle(x)) == x");
    CHECK(be->swizzle_sf(be, lin, rows, 24, swz, &e) == ND_EXIT_INTERNAL, "k %% 16 rejected");
    free(seen); free(lin); free(swz); free(back);
}

/* NVFP4 blocks worked by hand (g, the block scale byte and every code written out). */
static void test_quant_blocks(nd_backend *be) {
    nd_err e = {0};
    uint8_t codes[8 * 4], sf[4];
    nd_qstats st;
    for (int sem = 0; sem < 2; sem++) {
        /* block 0: g = 1, amax 12 -> scale 2 (0x40), multiplier 0.5: x/2 rounded to e2m1 */
        /* block 1: g = 1, amax 6000 -> g*amax/6 = 1000 clips at 448 (0x7E); x/448 */
        /* block 2: g = 1, amax 6*2^-11 -> scale 2^-11 underflows to 0 */
        /* block 3: all zeros */
        float x[64] = {0};
        const float b0[16] = {12, 1, 0.5f, 1.5f, -7, 2.6f, -0.4f, 5, 3.5f, -12, 0, 2.5f, 0.2f, 9, -1, 4.4f};
        const uint8_t c0[16] = {7, 1, 0, 2, 14, 3, 8, 4, 4, 15, 0, 2, 0, 6, 9, 4};
        /* x/2 (exact): 6 (7), .5 (1), .25 tie->0, .75 tie->1 (2), -3.5 tie->-4 (14), 1.3->1.5 (3),
         * -.2->-0 (8), 2.5 tie->2 (4), 1.75 tie->2 (4), -6 (15), 0, 1.25 tie->1 (2), .1->0,
         * 4.5->4 (6), -.5 (9), 2.2->2 (4) */
        memcpy(x, b0, sizeof b0);
        const float b1[16] = {6000, 1344, 100, 350, -6000, 2000, 448, -896, 0, 0, 0, 0, 0, 0, 0, 1};
        /* /448: 13.4->6 (7, saturated), 3 (5), .22->0, .78->1 (2), -13.4 -> 15 (sat), 4.46->4 (6),
         * 1 (2), -2 (12), zeros, 1/448 -> 0 */
        const uint8_t c1[16] = {7, 5, 0, 2, 15, 6, 2, 12, 0, 0, 0, 0, 0, 0, 0, 0};
        memcpy(x + 16, b1, sizeof b1);
        for (int i = 0; i < 16; i++) x[32 + i] = (i & 1 ? -1.0f : 1.0f) * ldexpf(6.0f, -11) * (float)(i + 1) / 16.0f;
        CHECK_EQ_INT(be->quant_nvfp4(be, x, 1.0f, sem, 1, 64, codes, sf, &st, &e), 0);
        CHECK(sf[0] == 0x40 && nd_e4m3_to_f32(sf[0]) == 2.0f, "sem %d block 0 scale %02x", sem, sf[0]);
        CHECK(sf[1] == 0x7e, "sem %d block 1 scale %02x (clipped at 448)", sem, sf[1]);
        CHECK(sf[2] == 0x00, "sem %d block 2 scale %02x (underflow)", sem, sf[2]);
        CHECK(sf[3] == 0x00, "sem %d block 3 scale %02x (zero block)", sem, sf[3]);
        for (int i = 0; i < 16; i++) {
            CHECK(nd_nibble(codes, i) == c0[i], "sem %d block 0 elem %d: code %d want %d", sem, i, nd_nibble(codes, i), c0[i]);
            CHECK(nd_nibble(codes, 16 + i) == c1[i], "sem %d block 1 elem %d: code %d want %d", sem, i, nd_nibble(codes, 16 + i), c1[i]);
            /* underflowed block: kernel multiplies by 0, CT divides by the 0.125 eps scale; both
             * give +-0 for these tiny values, the sign kept in bit 3 */
            CHECK(nd_nibble(codes, 32 + i) == ((i & 1) ? 8 : 0), "sem %d block 2 elem %d: code %d", sem, i, nd_nibble(codes, 32 + i));
            CHECK(nd_nibble(codes, 48 + i) == 0, "sem %d block 3 elem %d", sem, i);
        }
        CHECK(codes[0] == (7 | (1 << 4)), "packing: element 0 low nibble, element 1 high");
        CHECK_EQ_INT(st.n_elems, 64);
        CHECK_EQ_INT(st.n_blocks, 4);
        CHECK_EQ_INT(st.n_nonzero_blocks, 3);
        CHECK_EQ_INT(st.n_zero_scale, 1);
        CHECK_EQ_INT(st.n_scale_448, 1);
        CHECK_EQ_INT(st.n_nan_scale, 0);
        /* saturated (> 6 before rounding): block 0's +-12/2 = +-6 are not; block 1's
         * +-6000/448 are */
        CHECK_EQ_INT(st.n_saturated, 2);
    }
    /* a scale that does not fit exactly: amax 7, g = 1 -> 7/6 = 1.1667 -> e4m3 1.125 (0x39);
     * kernel multiplier 1/1.125, so 7 -> 6.22 saturates to 6 */
    float y[16] = {7, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, -0.5f};
    CHECK_EQ_INT(be->quant_nvfp4(be, y, 1.0f, ND_QSEM_KERNEL, 1, 16, codes, sf, &st, &e), 0);
    CHECK_EQ_INT(sf[0], 0x39);
    /* 1/1.125 = .889: 7->6.22 (7), 1->.889 (2), 2->1.78 (4), 3->2.67 (5), -.5->-.444 (9) */
    const uint8_t cy[4] = {7, 2, 4, 5};
    for (int i = 0; i < 4; i++) CHECK(nd_nibble(codes, i) == cy[i], "inexact scale elem %d: %d", i, nd_nibble(codes, i));
    CHECK_EQ_INT(nd_nibble(codes, 15), 9);
    CHECK_EQ_INT(st.n_saturated, 1);
    /* NaN input: the block scale is NaN and counted */
    y[3] = NAN;
    CHECK_EQ_INT(be->quant_nvfp4(be, y, 1.0f, ND_QSEM_KERNEL, 1, 16, codes, sf, &st, &e), 0);
    CHECK_EQ_INT(sf[0] & 0x7f, 0x7f);
    CHECK_EQ_INT(st.n_nan_scale, 1);
    /* argument checks */
    CHECK(be->quant_nvfp4(be, y, 1.0f, ND_QSEM_KERNEL, 1, 8, codes, sf, &st, &e) == ND_EXIT_INTERNAL, "k %% 16");
    CHECK(be->quant_nvfp4(be, y, 1.0f, 7, 1, 16, codes, sf, &st, &e) == ND_EXIT_INTERNAL, "bad sem");
    CHECK(be->quant_nvfp4(be, y, 1.0f, 0, -1, 16, codes, sf, &st, &e) == ND_EXIT_INTERNAL, "negative rows");
    CHECK(strstr(e.msg, "cpu: quant_nvfp4") != NULL, "message names the op: %s", e.msg);
}

int main(void) {
    const char *seed_env = getenv("ND_TEST_SEED");
    rng_state = seed_env ? (uint32_t)strtoul(seed_env, NULL, 10) : 12345u;
    if (!rng_state) rng_state = 1;
    printf("seed %u\n", rng_state);
    nd_backend *be = NULL;
    nd_err e = {0};
    if (nd_backend_cpu_create(&be, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    test_e2m1();
    test_e4m3();
    test_bf16();
    test_f16(be);
    test_swizzle(be);
    test_quant_blocks(be);
    be->destroy(be);
    return nd_test_report("test_numerics");
}
