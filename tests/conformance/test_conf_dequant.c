/* test_conf_dequant.c — dequantization: the tool's dequantized weights (backend dequant_nvfp4 of
 * the checkpoint module as src/ckpt binds it, then BF16 rounding) equal compressed-tensors'
 * NVFP4PackedCompressor.decompress output (golden/conformance/MODEL/dequant.safetensors, BF16)
 * bit for bit, on every backend present. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "conf_backend.h"
#include "conf_fixture.h"
#include "conf_main.h"
#include "numerics/nd_numerics.h"

static int same_bytes(const nd_tview *a, const nd_tview *b) {
    return a && b && a->nbytes == b->nbytes && memcmp(a->data, b->data, a->nbytes) == 0;
}

static void check_module(nd_backend *b, const nd_st_file *f, const nd_ckpt *ck, const char *model, const char *p) {
    char name[320];
    nd_module m;
    nd_err e = {0};
    CHECK(nd_ckpt_module(ck, p, &m, &e) == 0, "%s", e.msg);
    if (e.msg[0]) return;
    CHECK(m.wfmt == ND_WF_NVFP4 && m.conv == ND_CONV_CT, "%s/%s: bound as format %d conv %d", model, p, m.wfmt, m.conv);
    /* the fixture copied the checkpoint tensors: the module bound the same bytes */
    snprintf(name, sizeof name, "%s.weight_packed", p);
    CHECK(same_bytes(nd_st_find(f, name), m.weight), "%s/%s: packed codes differ from the fixture copy", model, p);
    snprintf(name, sizeof name, "%s.weight_scale", p);
    CHECK(same_bytes(nd_st_find(f, name), m.weight_scale), "%s/%s: block scales differ", model, p);
    snprintf(name, sizeof name, "%s.weight_global_scale", p);
    const nd_tview *tg = nd_st_find(f, name);
    CHECK(tg && nd_tview_get_f32(tg, 0) == m.weight_global_div, "%s/%s: divisor %.9g", model, p, m.weight_global_div);
    snprintf(name, sizeof name, "%s.weight", p);
    const nd_tview *tw = nd_st_find(f, name);
    const int64_t rows = m.out_features, k = m.in_features;
    CHECK(tw && tw->dtype == ND_DT_BF16 && tw->numel == rows * k, "%s/%s: decompressed weight missing or shaped wrong",
          model, p);
    if (!tw || tw->numel != rows * k) return;
    float *w = malloc((size_t)(rows * k) * sizeof *w);
    if (!w) { CHECK(0, "out of memory"); return; }
    CHECK(conf_dequant(b, m.weight->data, m.weight_scale->data, m.weight_global_div, rows, k, w, &e) == 0, "%s", e.msg);
    int64_t diff = 0, first = -1;
    for (int64_t i = 0; i < rows * k; i++) {
        uint16_t want;
        memcpy(&want, (const char *)tw->data + 2 * i, 2);
        if (nd_bf16_from_f32(w[i]) != want && diff++ == 0) first = i;
    }
    CHECK(diff == 0, "%s %s/%s: %lld of %lld BF16 weights differ from compressed-tensors (first at %lld: ours %.9g)", b->name,
          model, p, (long long)diff, (long long)(rows * k), (long long)first, first >= 0 ? w[first] : 0.0);
    printf("%-5s %-12s %-44s %3lldx%-4lld bit-equal: %s\n", b->name, model, p, (long long)rows, (long long)k,
           diff ? "no" : "yes");
    free(w);
}

int main(void) {
    /* golden/conformance/README.md: Llama 2, V3 4, V4 4 recorded modules */
    return conf_main("conf_dequant", "dequant.safetensors", ".weight_packed", check_module, 2 + 4 + 4, NULL, NULL);
}
