/* test_conf_mxfp4.c — MXFP4 weights made by other code (golden/conformance/mxfp4, made by
 * tools/conformance/make_mxfp4_fixture.py): llmcompressor's MXFP4A16 checkpoint in
 * compressed-tensors' mxfp4-pack-quantized format (ct/) and the same codes and exponents in
 * gpt-oss's fused-expert layout under quant_method mxfp4 (gptoss/). Every MXFP4 module binds, and
 * its weight decoded by dequant_mxfp4 on every backend present equals transformers' own
 * dequantization (convert_moe_packed_tensors, dequant.safetensors) bit for bit; the gpt-oss
 * experts' biases are their rows of the fused bias. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "../nd_test.h"
#include "conf_backend.h"
#include "conf_fixture.h"
#include "numerics/nd_numerics.h"

static int check_weight(nd_backend *b, const nd_module *m, const nd_st_file *want_f, const char *want_name) {
    const int64_t n = m->out_features, k = m->in_features;
    int64_t wn = 0;
    float *want = conf_floats(want_f, want_name, &wn);
    CHECK(want && wn == n * k, "%s: expected [%lld, %lld] in dequant.safetensors", want_name, (long long)n, (long long)k);
    if (!want || wn != n * k) { free(want); return 0; }
    nd_err e = {0};
    float *out = malloc((size_t)(n * k) * sizeof(float));
    const int rc = out ? conf_dequant_mxfp4(b, m, out, &e) : 1;
    CHECK(rc == 0, "%s %s: %s", b->name, m->path, e.msg);
    int64_t bad = 0;
    for (int64_t i = 0; !rc && i < n * k; i++) bad += memcmp(&out[i], &want[i], 4) != 0;
    CHECK(bad == 0, "%s %s: %lld of %lld elements differ from transformers' dequantization", b->name, m->path,
          (long long)bad, (long long)(n * k));
    free(out);
    free(want);
    return rc == 0 && bad == 0;
}

static nd_ckpt *open_fixture(const char *rel) {
    nd_ckpt *c = conf_ckpt("mxfp4", rel);
    CHECK(c != NULL, "mxfp4/%s did not open", rel);
    return c;
}

int main(void) {
    nd_backend *be[2];
    const int nbe = conf_backends(be);
    CHECK(nbe >= 1, "no CPU backend");
    nd_st_file *want = conf_open("mxfp4", "dequant.safetensors");
    nd_ckpt *ct = open_fixture("ct"), *go = open_fixture("gptoss");
    if (!want || !ct || !go) return nd_test_report("conf_mxfp4");
    nd_err e = {0};
    CHECK(!strcmp(nd_ckpt_format_str(ct), "compressed-tensors") && !strcmp(nd_ckpt_format_str(go), "mxfp4"), "formats %s, %s",
          nd_ckpt_format_str(ct), nd_ckpt_format_str(go));
    for (int bi = 0; bi < nbe; bi++) {
        int ok = 0, mx = 0;
        for (size_t i = 0; i < nd_ckpt_module_count(ct); i++) {
            const char *p = nd_ckpt_module_path(ct, i);
            nd_module m;
            CHECK(nd_ckpt_module(ct, p, &m, &e) == 0, "%s", e.msg);
            if (m.wfmt != ND_WF_MXFP4) continue;
            mx++;
            CHECK(m.conv == ND_CONV_CT && m.act_quant == 0, "%s: conv %d act_quant %d (MXFP4A16)", p, m.conv, m.act_quant);
            char name[320];
            snprintf(name, sizeof name, "%s.weight", p);
            ok += check_weight(be[bi], &m, want, name);
        }
        CHECK(mx == 14 && ok == 14, "%s: %d of %d compressed-tensors MXFP4 modules equal (14 in the fixture)", be[bi]->name,
              ok, mx);
        ok = 0;
        for (int x = 0; x < 2; x++)
            for (int j = 0; j < 2; j++) {
                static const char *const proj[2] = {"gate_up_proj", "down_proj"};
                char p[160], name[200], bn[200];
                snprintf(p, sizeof p, "model.layers.0.mlp.experts.%d.%s", x, proj[j]);
                nd_module m;
                CHECK(nd_ckpt_module(go, p, &m, &e) == 0, "%s", e.msg);
                if (m.wfmt != ND_WF_MXFP4) { CHECK(0, "%s is not MXFP4", p); continue; }
                snprintf(name, sizeof name, "%s.weight", p);
                ok += check_weight(be[bi], &m, want, name);
                /* the expert's bias is row x of the fused [2, N] bias */
                snprintf(bn, sizeof bn, "model.layers.0.mlp.experts.%s_bias", proj[j]);
                const nd_tview *fb = nd_ckpt_find(go, bn);
                int bias_ok = m.bias && fb && m.bias->shape[0] == m.out_features;
                for (int64_t r = 0; bias_ok && r < m.out_features; r++)
                    bias_ok = nd_tview_get_f32(m.bias, r) == nd_tview_get_f32(fb, x * m.out_features + r);
                CHECK(bias_ok, "%s: bias is not row %d of %s", p, x, bn);
            }
        CHECK_EQ_INT(ok, 4);
    }
    CHECK_EQ_INT(nd_ckpt_module_ignored(go, "model.layers.0.self_attn.q_proj"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(go, "model.layers.0.mlp.experts.1.down_proj"), 0);
    nd_ckpt_close(ct);
    nd_ckpt_close(go);
    nd_st_close(want);
    conf_backends_free(be, nbe);
    return nd_test_report("conf_mxfp4");
}
