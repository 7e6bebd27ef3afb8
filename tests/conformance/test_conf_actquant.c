/* test_conf_actquant.c — production path: our NVFP4 activation quantization of each recorded
 * module input equals compressed-tensors' (golden/conformance/MODEL/actquant.safetensors):
 * block scales, packed E2M1 codes and the fake-quantized BF16 values, byte for byte, on every
 * backend present. ND_QSEM_CT_BF16 is compressed-tensors' arithmetic on BF16 tensors (amax/6
 * in BF16); ND_QSEM_CT (amax/6 in F32) must differ only in blocks where that one rounding
 * moves the e4m3 scale (docs/conformance.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "conf_backend.h"
#include "conf_fixture.h"
#include "conf_main.h"
#include "numerics/nd_numerics.h"

/* checkpoint (disk) name of an in-memory module name: V4's saved naming (reference-notes §a) */
static void disk_name(const char *model, const char *mem, char *out, size_t cap) {
    static const char *const v4[][2] = {
        {".self_attn.q_a_proj", ".attn.wq_a"}, {".self_attn.o_b_proj", ".attn.wo_b"},
        {".mlp.shared_experts.down_proj", ".ffn.shared_experts.w2"}, {".mlp.experts.", ".ffn.experts."},
        {".gate_proj", ".w1"},
    };
    snprintf(out, cap, "%s", mem);
    if (strcmp(model, "deepseek_v4") != 0) return;
    for (size_t i = 0; i < sizeof v4 / sizeof v4[0]; i++) {
        char *p = strstr(out, v4[i][0]);
        if (!p) continue;
        char tail[256];
        snprintf(tail, sizeof tail, "%s", p + strlen(v4[i][0]));
        snprintf(p, cap - (size_t)(p - out), "%s%s", v4[i][1], tail);
    }
}

static int64_t total_blocks, ct_f32_scale_diffs, ct_f32_unexplained;

static void check_module(nd_backend *b, const nd_st_file *f, const nd_ckpt *ck, const char *model, const char *p) {
    char name[320], disk[320];
    snprintf(name, sizeof name, "%s.input", p);
    const nd_tview *tin = nd_st_find(f, name);
    snprintf(name, sizeof name, "%s.block_scale", p);
    const nd_tview *tsf = nd_st_find(f, name);
    snprintf(name, sizeof name, "%s.codes_packed", p);
    const nd_tview *tcodes = nd_st_find(f, name);
    snprintf(name, sizeof name, "%s.fake_quant", p);
    const nd_tview *tfq = nd_st_find(f, name);
    snprintf(name, sizeof name, "%s.input_global_scale", p);
    const nd_tview *tg = nd_st_find(f, name);
    CHECK(tin && tsf && tcodes && tfq && tg && tin->ndim == 2, "%s/%s: incomplete actquant entry", model, p);
    if (!(tin && tsf && tcodes && tfq && tg && tin->ndim == 2)) return;
    const int64_t rows = tin->shape[0], k = tin->shape[1], nb = rows * k / 16;
    CHECK(tsf->nbytes == (size_t)nb && tcodes->nbytes == (size_t)(rows * k / 2) && tfq->numel == rows * k,
          "%s/%s: shapes", model, p);
    const float g = nd_tview_get_f32(tg, 0);

    /* the checkpoint's normalised quantizer multiplier is the global scale compressed-tensors used */
    disk_name(model, p, disk, sizeof disk);
    nd_module m;
    nd_err e = {0};
    CHECK(nd_ckpt_module(ck, disk, &m, &e) == 0, "%s", e.msg);
    CHECK(m.act_quant && m.input_global_mult == g, "%s/%s: checkpoint multiplier %.9g, compressed-tensors used %.9g",
          model, disk, m.input_global_mult, g);

    float *x = malloc((size_t)(rows * k) * sizeof *x), *deq = malloc((size_t)(rows * k) * sizeof *deq);
    uint8_t *codes = malloc((size_t)(rows * k / 2)), *sf = malloc((size_t)nb);
    if (!x || !deq || !codes || !sf) { CHECK(0, "out of memory"); goto done; }
    for (int64_t i = 0; i < rows * k; i++) x[i] = nd_tview_get_f32(tin, i);

    /* compressed-tensors on BF16: everything byte-equal */
    CHECK(conf_quant(b, x, g, ND_QSEM_CT_BF16, rows, k, codes, sf, &e) == 0, "%s", e.msg);
    const uint8_t *want_sf = tsf->data, *want_codes = tcodes->data;
    int64_t sf_diff = 0, code_diff = 0, fq_diff = 0, zero_sf = 0;
    for (int64_t i = 0; i < nb; i++) sf_diff += sf[i] != want_sf[i], zero_sf += sf[i] == 0;
    for (int64_t i = 0; i < rows * k / 2; i++) code_diff += codes[i] != want_codes[i];
    /* fake quant: bf16(e2m1 * (s / g)), our dequant with the quantizer's global as divisor. A zero
     * scale would make compressed-tensors use eps 0.125 there: none occurs in these inputs. */
    CHECK_EQ_INT(zero_sf, 0);
    CHECK(conf_dequant(b, codes, sf, g, rows, k, deq, &e) == 0, "%s", e.msg);
    for (int64_t i = 0; i < rows * k; i++) {
        uint16_t want;
        memcpy(&want, (const char *)tfq->data + 2 * i, 2);
        fq_diff += nd_bf16_from_f32(deq[i]) != want;
    }
    CHECK(sf_diff == 0 && code_diff == 0 && fq_diff == 0,
          "%s %s/%s [%lldx%lld]: CT_BF16 differs from compressed-tensors in %lld scales, %lld code bytes, %lld fake-quant values",
          b->name, model, p, (long long)rows, (long long)k, (long long)sf_diff, (long long)code_diff, (long long)fq_diff);

    /* compressed-tensors' F32 reading (ND_QSEM_CT): a scale differs only where bf16(amax/6) and
     * amax/6 land on different e4m3 values */
    CHECK(conf_quant(b, x, g, ND_QSEM_CT, rows, k, codes, sf, &e) == 0, "%s", e.msg);
    for (int64_t i = 0; i < nb; i++) {
        if (sf[i] == want_sf[i]) continue;
        float amax = 0;
        for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[i * 16 + j]));
        const float local = amax / 6.0f;
        const int explained = nd_bf16_round(local) != local &&
                              nd_e4m3_from_f32_satfinite(g * local) == sf[i] &&
                              nd_e4m3_from_f32_satfinite(g * nd_bf16_round(local)) == want_sf[i];
        ct_f32_scale_diffs++;
        ct_f32_unexplained += !explained;
    }
    total_blocks += nb;
    printf("%-5s %-12s %-48s %3lldx%-4lld CT_BF16: 0 differences\n", b->name, model, p, (long long)rows, (long long)k);
done:
    free(x);
    free(deq);
    free(codes);
    free(sf);
}

static void reset_counts(nd_backend *b) {
    (void)b;
    total_blocks = ct_f32_scale_diffs = ct_f32_unexplained = 0;
}

/* golden/conformance/README.md: 4 + 4 + 2 recorded modules, 1144 blocks in all */
static void check_counts(nd_backend *b) {
    CHECK_EQ_INT(total_blocks, 1144);
    /* the F32 division of ND_QSEM_CT: reference-notes (e) counted 29 blocks; every one must be
     * the amax/6 rounding and nothing else */
    CHECK(ct_f32_scale_diffs == 29 && ct_f32_unexplained == 0,
          "%s: ND_QSEM_CT differs in %lld of %lld block scales (%lld not explained by bf16(amax/6))", b->name,
          (long long)ct_f32_scale_diffs, (long long)total_blocks, (long long)ct_f32_unexplained);
    printf("%s: ND_QSEM_CT (amax/6 in F32) differs from compressed-tensors in %lld of %lld block scales, "
           "all from the BF16 division\n", b->name, (long long)ct_f32_scale_diffs, (long long)total_blocks);
}

int main(void) {
    return conf_main("conf_actquant", "actquant.safetensors", ".input", check_module, 10, reset_counts, check_counts);
}
