/* test_synth_quant.c — the seeded generator and the compressed-tensors weight quantizer, alone. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "numerics/nd_numerics.h"
#include "synth/synth_quant.h"
#include "synth/synth_rng.h"

static void test_rng(void) {
    /* splitmix64 from state 0: published first outputs of the reference implementation */
    uint64_t s = 0;
    CHECK(sy_splitmix64(&s) == 0xe220a8397b1dcdafull, "splitmix64 #1");
    CHECK(sy_splitmix64(&s) == 0x6e789e6aa1b965f4ull, "splitmix64 #2");
    /* FNV-1a 64 of "a" */
    CHECK(sy_fnv1a64("a") == 0xaf63dc4c8601ec8cull, "fnv1a64(a)");
    sy_rng a, b, c;
    sy_rng_init(&a, 7, "model.x.weight");
    sy_rng_init(&b, 7, "model.x.weight");
    sy_rng_init(&c, 8, "model.x.weight");
    int same = 1, differ = 0;
    for (int i = 0; i < 100; i++) {
        double x = sy_normal(&a), y = sy_normal(&b), z = sy_normal(&c);
        same &= x == y;
        differ += x != z;
    }
    CHECK(same, "same seed and name give the same stream");
    CHECK(differ == 100, "another seed gives another stream (%d/100 differ)", differ);
    double m = 0, v = 0;
    const int n = 200000;
    sy_rng_init(&a, 1, "stats");
    for (int i = 0; i < n; i++) {
        double x = sy_normal(&a);
        m += x;
        v += x * x;
    }
    m /= n;
    v = v / n - m * m;
    CHECK_NEAR(m, 0.0, 0.01);
    CHECK_NEAR(v, 1.0, 0.02);
}

static uint16_t bf(float x) { return nd_bf16_from_f32(x); }

static void test_nvfp4_block(void) {
    /* one row, two blocks. Block 0 holds the tensor amax 6.0 -> gw = 448, block scale
     * e4m3(448*6/6) = 448 and W/(448/448) = W: codes are the values themselves. */
    const float vals[16] = {0.5f, -1.0f, 1.5f, -2.0f, 3.0f, -4.0f, 6.0f, 0.0f,
                            0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f, -0.5f};
    uint16_t w[32];
    for (int i = 0; i < 16; i++) w[i] = bf(vals[i]);
    for (int i = 16; i < 32; i++) w[i] = bf(0.0f); /* an all-zero block */
    float amax = sy_amax_bf16(w, 32);
    CHECK_NEAR(amax, 6.0, 0.0);
    float gw = sy_nvfp4_global_div(amax);
    CHECK_NEAR(gw, 448.0, 0.0);
    uint8_t packed[16], sf[2];
    sy_nvfp4_quantize(w, 1, 32, gw, packed, sf);
    CHECK(sf[0] == 0x7e, "block scale of the amax block is 448 (0x7e), got 0x%02x", sf[0]);
    CHECK(sf[1] == 0x20, "a zero block stores compressed-tensors' eps 0.125 (0x20), got 0x%02x", sf[1]);
    /* element 0 in the low nibble: byte 0 = code(0.5)=1 | code(-1.0)=0xA << 4 */
    CHECK(packed[0] == 0xA1, "byte 0 = 0x%02x, expected 0xA1", packed[0]);
    /* ties: 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2.0, 3.5 -> 4.0, 5.0 -> 4.0 */
    const uint8_t expect[16] = {1, 0xA, 3, 0xC, 5, 0xE, 7, 0, 0, 2, 2, 4, 4, 6, 6, 9};
    int ok = 1;
    for (int i = 0; i < 16; i++) ok &= nd_nibble(packed, i) == expect[i];
    CHECK(ok, "codes of the hand-computed block");
    for (int i = 16; i < 32; i++) ok &= nd_nibble(packed, i) == 0;
    CHECK(ok, "zero block codes are 0");
}

static void test_nvfp4_error(void) {
    const int64_t n = 64, k = 256;
    uint16_t *w = malloc(n * k * 2);
    uint8_t *packed = malloc(n * k / 2), *sf = malloc(n * k / 16);
    sy_rng r;
    sy_rng_init(&r, 3, "err");
    for (int64_t i = 0; i < n * k; i++) w[i] = bf((float)(sy_normal(&r) * 0.05));
    float amax = sy_amax_bf16(w, n * k), gw = sy_nvfp4_global_div(amax);
    CHECK_NEAR(gw, 2688.0f / amax, 0.0);
    sy_nvfp4_quantize(w, n, k, gw, packed, sf);
    double ee = 0, rr = 0, smax = 0;
    for (int64_t row = 0; row < n; row++)
        for (int64_t c = 0; c < k; c++) {
            float s = nd_e4m3_to_f32(sf[row * (k / 16) + c / 16]);
            if (s > smax) smax = s;
            float d = nd_e2m1_to_f32(nd_nibble(packed + row * (k / 2), c)) * s / gw;
            float o = nd_bf16_to_f32(w[row * k + c]);
            ee += (d - o) * (d - o);
            rr += o * o;
        }
    double rel = sqrt(ee / rr);
    CHECK(rel < 0.15 && rel > 0.02, "NVFP4 rel-L2 %.4f is in the expected range", rel);
    CHECK_NEAR(smax, 448.0, 0.0); /* the block holding amax scales to exactly 448 */
    free(w); free(packed); free(sf);
}

static void test_fp8_block(void) {
    const int64_t n = 130, k = 200; /* partial blocks on both edges */
    uint16_t *w = malloc(n * k * 2);
    uint8_t *q = malloc(n * k);
    float scale[4];
    sy_rng r;
    sy_rng_init(&r, 4, "fp8");
    for (int64_t i = 0; i < n * k; i++) w[i] = bf((float)sy_normal(&r));
    sy_fp8_block_quantize(w, n, k, 128, 128, q, scale);
    double ee = 0, rr = 0;
    int maxed = 0;
    for (int64_t row = 0; row < n; row++)
        for (int64_t c = 0; c < k; c++) {
            float s = scale[(row / 128) * 2 + c / 128];
            float d = nd_e4m3_to_f32(q[row * k + c]) * s, o = nd_bf16_to_f32(w[row * k + c]);
            ee += (d - o) * (d - o);
            rr += o * o;
            maxed += (q[row * k + c] & 0x7f) == 0x7e;
        }
    double rel = sqrt(ee / rr);
    CHECK(rel < 0.05, "FP8 block rel-L2 %.4f", rel);
    CHECK(maxed >= 4, "each block's amax maps to 448 (%d elements at 0x7e)", maxed);
    free(w); free(q);
}

int main(void) {
    test_rng();
    test_nvfp4_block();
    test_nvfp4_error();
    test_fp8_block();
    return nd_test_report("test_synth_quant");
}
