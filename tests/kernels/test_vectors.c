/* test_vectors.c — our numerics against vectors written once by external implementations
 * (tools/numerics_vectors.py: PyTorch's float8_e4m3fn cast and compressed-tensors' NVFP4
 * quantize/dequantize; versions in golden/vectors/README.md). Everything must match bit for
 * bit; the one by-design difference (CT stores its 0.125 eps where the e4m3 scale is 0) is
 * checked exactly as such, not skipped. PyTorch 2.15 casts to float8_e4m3fn with saturation,
 * so its bytes are checked against nd_e4m3_from_f32_satfinite everywhere and against the
 * non-saturating nd_e4m3_from_f32_torch where no input overflows. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "backend.h"
#include "numerics/nd_numerics.h"

typedef struct { uint8_t *p; size_t n, off; int bad; } rd;

static int rd_open(rd *r, const char *name) {
    const char *root = getenv("ND_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/golden/vectors/%s", root ? root : ".", name);
    FILE *f = fopen(path, "rb");
    memset(r, 0, sizeof *r);
    if (!f) { fprintf(stderr, "cannot open %s\n", path); return -1; }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    r->p = malloc(len > 0 ? (size_t)len : 1);
    r->n = len > 0 ? (size_t)len : 0;
    if (!r->p || fread(r->p, 1, r->n, f) != r->n) { fclose(f); free(r->p); r->p = NULL; return -1; }
    fclose(f);
    return 0;
}
/* copy n bytes out, flagging a short file instead of reading past it */
static void rd_take(rd *r, void *dst, size_t n) {
    if (r->bad || n > r->n - r->off) { r->bad = 1; memset(dst, 0, n); return; }
    memcpy(dst, r->p + r->off, n);
    r->off += n;
}
static uint32_t rd_u32(rd *r) { uint32_t v; rd_take(r, &v, 4); return v; }
/* golden/vectors/NAME read and its 4-byte magic checked; 0 when it was readable */
static int rd_start(rd *r, const char *name, const char *magic) {
    CHECK(rd_open(r, name) == 0, "%s readable", name);
    if (!r->p) return -1;
    char m[4];
    rd_take(r, m, 4);
    CHECK(memcmp(m, magic, 4) == 0, "%s: magic", name);
    return 0;
}

static void test_e4m3_torch(void) {
    rd r;
    if (rd_start(&r, "e4m3_torch.bin", "NDE4")) return;
    uint32_t n = rd_u32(&r);
    CHECK(n > 3000 && n < 100000, "count %u", n);
    if (r.bad || n > 100000) { free(r.p); return; }
    float *x = malloc(n * sizeof *x);
    uint8_t *b = malloc(n);
    rd_take(&r, x, n * sizeof *x);
    rd_take(&r, b, n);
    CHECK(!r.bad && r.off == r.n, "file size matches its count");
    /* PyTorch 2.15 (the vectors' version) saturates like CUDA's satfinite on every input; the
     * non-saturating nd_e4m3_from_f32_torch (older PyTorch) must agree wherever nothing
     * overflows, i.e. |x| <= 464 or NaN. */
    int bad_s = 0, bad_t = 0, n_t = 0, nan_in = 0, overflow = 0;
    for (uint32_t i = 0; i < n && !r.bad; i++) {
        uint8_t s = nd_e4m3_from_f32_satfinite(x[i]);
        if (s != b[i] && bad_s++ < 10) fprintf(stderr, "e4m3(%.9g): satfinite %02x torch %02x\n", x[i], s, b[i]);
        nan_in += isnan(x[i]);
        if (!isnan(x[i]) && !(fabsf(x[i]) <= 464.0f)) { overflow++; continue; }
        n_t++;
        uint8_t t = nd_e4m3_from_f32_torch(x[i]);
        if (t != b[i] && bad_t++ < 10) fprintf(stderr, "e4m3(%.9g): non-saturating %02x torch %02x\n", x[i], t, b[i]);
    }
    printf("e4m3: %u torch vectors (%d without overflow, %d NaN inputs, %d overflowing)\n", n, n_t, nan_in, overflow);
    CHECK_EQ_INT(bad_s, 0);
    CHECK_EQ_INT(bad_t, 0);
    CHECK(overflow >= 10, "the vectors cover overflow (%d)", overflow);
    free(x); free(b); free(r.p);
}

static void test_nvfp4_ct(nd_backend *be) {
    rd r;
    if (rd_start(&r, "nvfp4_ct.bin", "NDF4")) return;
    uint32_t ncase = rd_u32(&r);
    CHECK(ncase >= 4 && ncase < 64, "cases %u", ncase);
    int64_t tot_blocks = 0, eps_blocks = 0, tot_elems = 0;
    for (uint32_t c = 0; c < ncase && c < 64 && !r.bad; c++) {
        uint32_t rows = rd_u32(&r), k = rd_u32(&r);
        float gs;
        rd_take(&r, &gs, 4);
        if (r.bad || rows == 0 || rows > 4096 || k == 0 || k > 4096 || k % 16) {
            CHECK(0, "case %u: bad shape %u x %u", c, rows, k);
            break;
        }
        const size_t n = (size_t)rows * k, nb = n / 16;
        float *w = malloc(n * 4), *d32 = malloc(n * 4), *ours = malloc(n * 4);
        uint16_t *dbf = malloc(n * 2);
        uint8_t *packed = malloc(n / 2), *sf = malloc(nb), *codes = malloc(n / 2), *osf = malloc(nb);
        rd_take(&r, w, n * 4);
        rd_take(&r, packed, n / 2);
        rd_take(&r, sf, nb);
        rd_take(&r, d32, n * 4);
        rd_take(&r, dbf, n * 2);
        CHECK(!r.bad, "case %u complete", c);
        nd_err e = {0};
        /* global scale: generate_gparam's 2688 * (1/amax) */
        float amax = 0.0f;
        for (size_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(w[i]));
        CHECK(nd_nvfp4_global_scale_ct(amax) == gs, "case %u: global scale ours %.9g CT %.9g", c, nd_nvfp4_global_scale_ct(amax), gs);
        /* block scales and codes through the CT semantics of the quantizer */
        CHECK_EQ_INT(be->quant_nvfp4(be, w, gs, ND_QSEM_CT, rows, k, codes, osf, NULL, &e), 0);
        int bad_sf = 0, bad_codes = 0;
        for (size_t bi = 0; bi < nb; bi++) {
            /* by design: CT replaces a zero scale by its FP8 eps 0.125 (0x20) in the stored
             * tensor; we store the e4m3 value (0) and use 0.125 only to divide, which gives
             * the same codes. So a stored 0x20 must correspond exactly to our 0. */
            const uint8_t want = osf[bi] == 0 ? 0x20 : osf[bi];
            eps_blocks += osf[bi] == 0;
            if (sf[bi] != want && bad_sf++ < 10)
                fprintf(stderr, "case %u block %zu: scale ours %02x CT %02x\n", c, bi, osf[bi], sf[bi]);
        }
        for (size_t j = 0; j < n / 2; j++)
            if (codes[j] != packed[j] && bad_codes++ < 10)
                fprintf(stderr, "case %u byte %zu: codes ours %02x CT %02x\n", c, j, codes[j], packed[j]);
        CHECK_EQ_INT(bad_sf, 0);
        CHECK_EQ_INT(bad_codes, 0);
        /* dequantization of CT's own bytes: FP32 bit for bit, and its BF16 output */
        CHECK_EQ_INT(be->dequant_nvfp4(be, packed, sf, gs, rows, k, ours, &e), 0);
        int bad32 = 0, bad16 = 0;
        for (size_t i = 0; i < n; i++) {
            bad32 += memcmp(&ours[i], &d32[i], 4) != 0;
            bad16 += nd_bf16_from_f32(ours[i]) != dbf[i];
        }
        CHECK_EQ_INT(bad32, 0);
        CHECK_EQ_INT(bad16, 0);
        tot_blocks += (int64_t)nb;
        tot_elems += (int64_t)n;
        free(w); free(d32); free(ours); free(dbf); free(packed); free(sf); free(codes); free(osf);
    }
    CHECK(!r.bad && r.off == r.n, "nvfp4_ct.bin fully consumed");
    CHECK(eps_blocks >= 2, "the vectors cover zero-scale blocks (%lld)", (long long)eps_blocks);
    printf("nvfp4: %u CT cases, %lld elements, %lld blocks (%lld with CT's 0.125 eps scale)\n", ncase,
           (long long)tot_elems, (long long)tot_blocks, (long long)eps_blocks);
    free(r.p);
}

int main(void) {
    nd_backend *be = NULL;
    nd_err e = {0};
    if (nd_backend_cpu_create(&be, &e)) { fprintf(stderr, "%s\n", e.msg); return 1; }
    test_e4m3_torch();
    test_nvfp4_ct(be);
    be->destroy(be);
    return nd_test_report("test_vectors");
}
