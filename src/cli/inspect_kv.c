/* inspect_kv.c — see inspect_kv.h. */
#include "cli/inspect_kv.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "ckpt/kv_scales.h"

static json_t *scale_json(const nd_tview *t) {
    if (!t) return json_null();
    float v = nd_tview_get_f32(t, 0);
    for (int64_t i = 1; i < t->numel; i++) v = fmaxf(v, nd_tview_get_f32(t, i));
    return json_pack("{s:s, s:o, s:I}", "tensor", t->name, "value", isfinite(v) ? json_real(v) : json_string(v != v ? "nan" : "inf"),
                     "elements", (json_int_t)t->numel);
}

json_t *nd_inspect_kv_json(const nd_ckpt *c) {
    nd_kv_config kc;
    nd_err e = {0};
    if (nd_ckpt_kv_config(c, &kc, &e)) memset(&kc, 0, sizeof kc); /* nd_ckpt_check reported it */
    json_t *layers = json_array();
    for (int64_t l = 0; l < nd_ckpt_config(c)->num_hidden_layers; l++) {
        char attn[256];
        snprintf(attn, sizeof attn, "model.layers.%lld.self_attn", (long long)l);
        nd_kv_scales s;
        nd_ckpt_kv_scales(c, attn, &s);
        if (!s.k && !s.v && !s.q && !s.prob) continue;
        json_array_append_new(layers, json_pack("{s:s, s:o, s:o, s:o, s:o}", "module", attn, "k_scale", scale_json(s.k),
                                                "v_scale", scale_json(s.v), "q_scale", scale_json(s.q),
                                                "prob_scale", scale_json(s.prob)));
    }
    return json_pack("{s:b, s:b, s:s, s:s, s:b, s:s, s:f, s:o}", "announced", kc.announced, "fp8", kc.fp8, "source", kc.source,
                     "scheme", kc.what, "latent", nd_ckpt_kv_latent(c), "producer", kc.producer, "min_scale", kc.min_scale,
                     "layers", layers);
}

void nd_inspect_kv_print(const nd_ckpt *c) {
    nd_kv_config kc;
    nd_err e = {0};
    if (nd_ckpt_kv_config(c, &kc, &e)) memset(&kc, 0, sizeof kc);
    int64_t with = 0, L = nd_ckpt_config(c)->num_hidden_layers;
    for (int64_t l = 0; l < L; l++) {
        char attn[256];
        snprintf(attn, sizeof attn, "model.layers.%lld.self_attn", (long long)l);
        nd_kv_scales s;
        nd_ckpt_kv_scales(c, attn, &s);
        if (!s.k && !s.v) continue;
        if (!with++) printf("\n%-48s %-44s %-11s %-11s\n", "kv cache scales", "k_scale tensor", "k_scale", "v_scale");
        char kv[24] = "-", vv[24] = "-";
        if (s.k) snprintf(kv, sizeof kv, "%.6g", s.k_scale);
        if (s.v && s.v != s.k) snprintf(vv, sizeof vv, "%.6g", s.v_scale);
        else if (s.v) snprintf(vv, sizeof vv, "(kv_scale)");
        printf("%-48s %-44s %-11s %-11s\n", attn, s.k ? s.k->name + (strlen(attn) + 1) : "-", kv, vv);
    }
    if (!kc.announced && !with) return;
    printf("%skv cache    %s%s%s%s; %lld of %lld attention layers hold KV scales%s\n", with ? "" : "\n",
           kc.announced ? (kc.fp8 ? "FP8 per-tensor" : "quantized (not FP8 per-tensor)") : "no quantized KV cache announced",
           kc.announced ? " (" : "", kc.announced ? kc.source : "", kc.announced ? ")" : "", (long long)with, (long long)L,
           nd_ckpt_kv_latent(c) ? " (MLA: the latent row cached with k_scale alone)" : "");
    if (kc.min_scale > 0)
        printf("kv cache    written by %s: before 0.43 ModelOpt stored max(amax/448, 1), so a scale of 1 means amax <= 448 "
               "(calibrated scales are judged the same way)\n", kc.producer);
}
