/* test_conf_gpt_oss_mxfp4.c — gpt-oss with its experts in MXFP4 as the release stores them
 * (golden/conformance/gpt_oss_mxfp4, tools/conformance/make_gpt_oss_mxfp4_fixture.py): mxfp4/ holds
 * the fused `*_blocks` / `*_scales` / `*_bias` under quant_method mxfp4, dequantized/ is
 * transformers' own dequantization of it (GptOssForCausalLM.from_pretrained with
 * Mxfp4Config(dequantize=True)) saved as BF16. Every expert of every layer binds as an MXFP4 module,
 * and its weight decoded by dequant_mxfp4 on every backend present equals transformers' expert
 * weight bit for bit (dequantized/'s fused tensors, read per expert by src/ckpt/dense_experts.c);
 * its bias equals transformers' bias; attention, router, embedding and head stay BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "conf_backend.h"
#include "conf_fixture.h"

enum { LAYERS = 3, EXPERTS = 8, HIDDEN = 64, INTER = 96 };

static nd_ckpt *open_dir(const char *rel) {
    nd_ckpt *c = conf_ckpt("gpt_oss_mxfp4", rel);
    CHECK(c != NULL, "gpt_oss_mxfp4/%s did not open", rel);
    return c;
}

/* dequant_mxfp4 of mx's weight on b against tf's weight (same [n, k]); returns the differing elements,
 * -1 when the op failed */
static int64_t differing(nd_backend *b, const nd_module *mx, const nd_module *tf) {
    const int64_t n = mx->out_features, k = mx->in_features;
    nd_err e = {0};
    float *out = malloc((size_t)(n * k) * sizeof(float));
    const int rc = out ? conf_dequant_mxfp4(b, mx, out, &e) : 1;
    CHECK(rc == 0, "%s %s: %s", b->name, mx->path, e.msg);
    int64_t bad = rc ? -1 : 0;
    for (int64_t i = 0; !rc && i < n * k; i++) {
        const float want = nd_tview_get_f32(tf->weight, i);
        bad += memcmp(&out[i], &want, 4) != 0;
    }
    free(out);
    return bad;
}

int main(void) {
    nd_backend *be[2];
    const int nbe = conf_backends(be);
    CHECK(nbe >= 1, "no CPU backend");
    nd_ckpt *mx = open_dir("mxfp4"), *tf = open_dir("dequantized");
    if (!mx || !tf || nbe < 1) return nd_test_report("conf_gpt_oss_mxfp4");
    CHECK(!strcmp(nd_ckpt_format_str(mx), "mxfp4"), "mxfp4/ reads as %s", nd_ckpt_format_str(mx));
    size_t nmx = 0;
    nd_err e = {0};
    for (size_t i = 0; i < nd_ckpt_module_count(mx); i++) {
        nd_module m;
        if (nd_ckpt_module(mx, nd_ckpt_module_path(mx, i), &m, &e) == 0 && m.wfmt == ND_WF_MXFP4) nmx++;
    }
    CHECK(nmx == LAYERS * EXPERTS * 2, "%zu MXFP4 modules in mxfp4/ (3 layers x 8 experts x 2 projections)", nmx);
    for (int bi = 0; bi < nbe; bi++) {
        int equal = 0, bias_equal = 0;
        for (int l = 0; l < LAYERS; l++)
            for (int x = 0; x < EXPERTS; x++)
                for (int j = 0; j < 2; j++) {
                    static const char *const proj[2] = {"gate_up_proj", "down_proj"};
                    const int64_t n = j ? HIDDEN : 2 * INTER, k = j ? INTER : HIDDEN;
                    char p[160];
                    snprintf(p, sizeof p, "model.layers.%d.mlp.experts.%d.%s", l, x, proj[j]);
                    nd_module a, b;
                    CHECK(nd_ckpt_module(mx, p, &a, &e) == 0, "mxfp4/ %s: %s", p, e.msg);
                    CHECK(nd_ckpt_module(tf, p, &b, &e) == 0, "dequantized/ %s: %s", p, e.msg);
                    if (a.wfmt != ND_WF_MXFP4 || b.wfmt != ND_WF_DENSE) {
                        CHECK(0, "%s: formats %d / %d (want MXFP4 / dense)", p, a.wfmt, b.wfmt);
                        continue;
                    }
                    if (a.out_features != n || a.in_features != k || b.out_features != n || b.in_features != k) {
                        CHECK(0, "%s: [%lld, %lld] / [%lld, %lld], want [%lld, %lld]", p, (long long)a.out_features,
                              (long long)a.in_features, (long long)b.out_features, (long long)b.in_features,
                              (long long)n, (long long)k);
                        continue;
                    }
                    const int64_t bad = differing(be[bi], &a, &b);
                    CHECK(bad == 0, "%s %s: %lld of %lld elements differ from transformers' dequantization", be[bi]->name,
                          p, (long long)bad, (long long)(n * k));
                    equal += bad == 0;
                    int bok = a.bias && b.bias && a.bias->numel == n && b.bias->numel == n;
                    for (int64_t r = 0; bok && r < n; r++) bok = nd_tview_get_f32(a.bias, r) == nd_tview_get_f32(b.bias, r);
                    CHECK(bok, "%s: bias differs from transformers'", p);
                    bias_equal += bok;
                }
        printf("%s: %d of %d expert weights bit-equal to transformers' dequantization, %d biases equal\n", be[bi]->name,
               equal, LAYERS * EXPERTS * 2, bias_equal);
        CHECK_EQ_INT(equal, LAYERS * EXPERTS * 2);
        CHECK_EQ_INT(bias_equal, LAYERS * EXPERTS * 2);
    }
    CHECK_EQ_INT(nd_ckpt_module_ignored(mx, "model.layers.1.self_attn.q_proj"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(mx, "model.layers.2.mlp.experts.7.down_proj"), 0);
    nd_ckpt_close(mx);
    nd_ckpt_close(tf);
    conf_backends_free(be, nbe);
    return nd_test_report("conf_gpt_oss_mxfp4");
}
