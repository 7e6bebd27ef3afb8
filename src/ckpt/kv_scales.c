/* kv_scales.c — FP8 KV-cache scales: the config keys that announce them, where they are, and
 * their static checks (kv_scales.h). */
#include "ckpt/kv_scales.h"
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/json_load.h"
#include "ckpt/ckpt_internal.h"

static json_t *get(json_t *o, const char *k) { return json_is_object(o) ? json_object_get(o, k) : NULL; }

/* A compressed-tensors kv_cache_scheme (also in ModelOpt's newer embedded configs). */
static int read_scheme(json_t *s, const char *file, const char *key, nd_kv_config *out, nd_err *e) {
    if (!s || json_is_null(s)) return 0;
    if (!json_is_object(s)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be an object or null", file, key);
    json_t *bits = get(s, "num_bits"), *type = get(s, "type"), *strat = get(s, "strategy"), *dyn = get(s, "dynamic");
    if ((bits && !json_is_integer(bits)) || (type && !json_is_string(type)) || (strat && !json_is_string(strat)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s': num_bits must be an integer, type and strategy strings", file, key);
    out->announced = 1;
    const int nb = bits ? (int)json_integer_value(bits) : 0;
    const char *ty = type ? json_string_value(type) : "?", *st = strat ? json_string_value(strat) : "tensor";
    const int dynamic = json_is_true(dyn);
    out->fp8 = nb == 8 && !strcmp(ty, "float") && !strcmp(st, "tensor") && !dynamic;
    snprintf(out->source, sizeof out->source, "%s %s", strrchr(file, '/') ? strrchr(file, '/') + 1 : file, key);
    snprintf(out->what, sizeof out->what, "%s %d-bit %s %s", ty, nb, st, dynamic ? "dynamic" : "static");
    /* a KV cache the replay does not model (FP4, INT8, per-head or dynamic scales) would be replayed
     * as another cache than the engine keeps: refused, never skipped */
    if (!out->fp8)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' announces a %s KV cache, which this version does not replay (only FP8 "
                       "E4M3 with static per-tensor scales): both paths would run another cache than the engine keeps",
                       file, key, out->what);
    return 0;
}

/* A ModelOpt kv_cache_quant_algo. */
static int read_algo(json_t *a, const char *file, const char *key, nd_kv_config *out, nd_err *e) {
    if (!a || json_is_null(a)) return 0;
    if (!json_is_string(a)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' must be a string or null", file, key);
    out->announced = 1;
    out->fp8 = !strcmp(json_string_value(a), "FP8");
    if (!out->fp8) {
        static const char *const known[] = {"NVFP4", "FP8_AFFINE", "NVFP4_AFFINE", "INT8"};
        int k = 0;
        for (size_t i = 0; i < sizeof known / sizeof known[0] && !k; i++) k = !strcmp(json_string_value(a), known[i]);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: '%s' is \"%.40s\"%s: this version replays only an FP8 KV cache (FP8)", file, key,
                       json_string_value(a), k ? ", a KV-cache scheme the replay does not model" : ", not a ModelOpt KV-cache algorithm");
    }
    snprintf(out->source, sizeof out->source, "%s %s", strrchr(file, '/') ? strrchr(file, '/') + 1 : file, key);
    snprintf(out->what, sizeof out->what, "%s", json_string_value(a));
    return 0;
}

/* ModelOpt's version from producer.version: 1 for a release before 0.43 ("0.42.0", "0.41.1"); a
 * 0.43 pre-release or anything unparsable counts as 0.43 or later (the scales read as raw) */
static int modelopt_before_043(const char *v) {
    unsigned major, minor;
    return sscanf(v, "%u.%u", &major, &minor) == 2 && (major == 0 && minor < 43);
}

static void producer_semantics(const nd_ckpt *c, nd_kv_config *out) {
    if (strcmp(c->q.producer, "modelopt") || !c->q.producer_version[0]) return;
    snprintf(out->producer, sizeof out->producer, "modelopt %s", c->q.producer_version);
    if (out->fp8 && modelopt_before_043(c->q.producer_version)) out->min_scale = 1.0;
}

int nd_ckpt_kv_config(const nd_ckpt *c, nd_kv_config *out, nd_err *e) {
    memset(out, 0, sizeof *out);
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", c->dir);
    json_t *q = get(c->cfg.json, "quantization_config");
    ND_TRY(read_scheme(get(q, "kv_cache_scheme"), path, "quantization_config.kv_cache_scheme", out, e));
    ND_TRY(read_algo(get(q, "kv_cache_quant_algo"), path, "quantization_config.kv_cache_quant_algo", out, e));
    if (strcmp(c->q.source, "hf_quant_config.json")) {
        producer_semantics(c, out);
        return 0;
    }
    /* hf_quant_config.json wins, as its other ModelOpt fields do (quant_config.c validated it) */
    snprintf(path, sizeof path, "%s/hf_quant_config.json", c->dir);
    json_error_t jerr;
    json_t *root = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
    json_t *qq = get(root, "quantization");
    int rc = 0;
    if (get(qq, "kv_cache_quant_algo")) {
        memset(out, 0, sizeof *out);
        rc = read_algo(get(qq, "kv_cache_quant_algo"), path, "quantization.kv_cache_quant_algo", out, e);
    }
    json_decref(root);
    if (!rc) producer_semantics(c, out);
    return rc;
}

static const char *const SUFFIXES[] = {".k_scale", ".v_scale", ".kv_scale", ".q_scale", ".prob_scale"};

int nd_is_kv_scale_name(const char *name) {
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof SUFFIXES / sizeof SUFFIXES[0]; i++) {
        size_t l = strlen(SUFFIXES[i]);
        if (n > l && !strcmp(name + n - l, SUFFIXES[i])) return 1;
    }
    return 0;
}

int nd_ckpt_kv_latent(const nd_ckpt *c) { return c->cfg.kv_lora_rank > 0; }

static const nd_tview *find2(const nd_ckpt *c, const char *a, const char *b) {
    char n[600];
    snprintf(n, sizeof n, "%s%s", a, b);
    return nd_ckpt_find(c, n);
}

/* The largest element (per-head scales are reduced to one per-tensor value); NaN propagates. */
static float value_of(const nd_tview *t) {
    if (!t || t->numel < 1) return NAN;
    float v = nd_tview_get_f32(t, 0);
    for (int64_t i = 1; i < t->numel; i++) {
        float x = nd_tview_get_f32(t, i);
        v = (x != x || v != v) ? NAN : (x > v ? x : v);
    }
    return v;
}

void nd_ckpt_kv_scales(const nd_ckpt *c, const char *attn, nd_kv_scales *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->attn, sizeof out->attn, "%s", attn);
    const int mo = nd_ckpt_format(c) == ND_CKPT_MODELOPT;
    const nd_tview *ct_k = find2(c, attn, ".k_scale"), *ct_v = find2(c, attn, ".v_scale");
    const nd_tview *mo_k = find2(c, attn, ".k_proj.k_scale"), *mo_v = find2(c, attn, ".v_proj.v_scale");
    const nd_tview *kv = find2(c, attn, ".kv_scale");
    out->k = mo ? (mo_k ? mo_k : ct_k) : (ct_k ? ct_k : mo_k);
    out->v = mo ? (mo_v ? mo_v : ct_v) : (ct_v ? ct_v : mo_v);
    if (!out->k) out->k = kv;
    if (!out->v) out->v = kv;
    out->q = find2(c, attn, ".q_scale");
    out->prob = find2(c, attn, ".prob_scale");
    out->k_scale = value_of(out->k);
    out->v_scale = value_of(out->v);
}

static int check_value(const nd_tview *t, const char *attn, nd_findings *f) {
    if (!t) return 0;
    /* one value per tensor (per-head and per-token schemes are refused with the config): a loader
     * cannot put more into the cache's one scale, and the replay would read the largest */
    if (t->numel > 1) {
        float lo = INFINITY, hi = -INFINITY;
        for (int64_t i = 0; i < t->numel; i++) {
            const float v = nd_tview_get_f32(t, i);
            lo = v < lo ? v : lo;
            hi = v > hi ? v : hi;
        }
        return nd_findings_add(f, ND_BREAKS_KV_FP8, "quant_config_mismatch", attn, t->name,
                               "KV-cache scale %s holds %lld values (%g to %g) where the per-tensor FP8 KV cache reads one: "
                               "no loader puts it into the cache's one scale (the replay would read the largest)", t->name,
                               (long long)t->numel, lo, hi);
    }
    for (int64_t i = 0; i < t->numel; i++) {
        float v = nd_tview_get_f32(t, i);
        /* usable: positive and normal (1/v finite), and not so large that every FP16-range value
         * divided by it falls below E4M3's smallest subnormal (2^-9): an empty cache */
        if (isfinite(v) && v > 0 && (v < FLT_MIN || v > 65504.0f * 512.0f))
            return nd_findings_add(f, ND_BREAKS_KV_FP8, "nonfinite_scale", attn, t->name,
                                   "KV-cache scale %s is %g: an FP8 KV cache divides K/V by it, which gives %s", t->numel > 1 ? "element" : "",
                                   v, v < FLT_MIN ? "Inf (its reciprocal overflows)" : "zero for every FP16-range value");
        if (isfinite(v) && v > 0) continue;
        return nd_findings_add(f, ND_BREAKS_KV_FP8, "nonfinite_scale", attn, t->name,
                               "KV-cache scale %s is %s: an FP8 KV cache divides K/V by it (vLLM treats a value <= 0 as "
                               "'not loaded' and uses 1.0; NaN or Inf make the cache NaN)",
                               t->numel > 1 ? "element" : "", v != v ? "NaN" : isinf(v) ? "Inf" : v == 0 ? "zero" : "negative");
    }
    return 0;
}

int nd_ckpt_check_kv(const nd_ckpt *c, nd_findings *f, nd_err *e) {
    nd_kv_config kc;
    ND_TRY(nd_ckpt_kv_config(c, &kc, e));
    const int latent = nd_ckpt_kv_latent(c);
    const int64_t L = c->cfg.num_hidden_layers;
    int64_t with = 0, without = 0;
    char first_without[256] = "";
    for (int64_t l = 0; l < L; l++) {
        char attn[256];
        snprintf(attn, sizeof attn, "model.layers.%lld.self_attn", (long long)l);
        nd_kv_scales s;
        nd_ckpt_kv_scales(c, attn, &s);
        const int complete = s.k && (latent || s.v);
        if (s.k || s.v) with++;
        if (!complete) {
            if (!without++) snprintf(first_without, sizeof first_without, "%s", attn);
            if (kc.fp8 && (s.k || s.v))
                ND_TRY(nd_findings_add(f, ND_BREAKS_KV_FP8, "kv_scale_missing", attn, "",
                                       "%s has a %s but no %s: a stack serving the FP8 KV cache uses 1.0 for the missing one",
                                       attn, s.k ? "k_scale" : "v_scale", s.k ? "v_scale" : "k_scale"));
        }
        ND_TRY(check_value(s.k, attn, f));
        if (!latent && s.v != s.k) ND_TRY(check_value(s.v, attn, f));
    }
    /* announced, but whole layers have none (the checkpoint as NeMo-RL PR #3615's converter wrote it) */
    if (kc.fp8 && without > 0 && with == 0)
        ND_TRY(nd_findings_add(f, ND_BREAKS_KV_FP8, "kv_scale_missing", first_without, "",
                               "%s announces an FP8 KV cache (%s) but no attention layer has k_scale/v_scale: a stack "
                               "serving it substitutes 1.0 for every scale", kc.source, kc.what));
    else if (kc.fp8 && without > 0)
        ND_TRY(nd_findings_add(f, ND_BREAKS_KV_FP8, "kv_scale_missing", first_without, "",
                               "%s announces an FP8 KV cache but %lld of %lld attention layers have no KV scales (first: "
                               "%s): a stack serving it uses 1.0 there", kc.source, (long long)without, (long long)L,
                               first_without));
    /* scales no loader reads: not announced (one finding, naming the first), or on no attention
     * layer of the model (one each) */
    int64_t unannounced = 0;
    const char *first_unannounced = NULL;
    for (size_t i = 0; i < c->n_tensors; i++) {
        const nd_tview *t = c->tensors[i];
        if (!nd_is_kv_scale_name(t->name)) continue;
        long long l = -1;
        int at = 0;
        if (sscanf(t->name, "model.layers.%lld.self_attn.%n", &l, &at) != 1 || at == 0 || l < 0 || l >= L) {
            ND_TRY(nd_findings_add(f, ND_BREAKS_KV_FP8, "kv_scale_orphan", "", t->name,
                                   "%s looks like a KV-cache scale but belongs to no attention layer of this %lld-layer "
                                   "model: no loader reads it", t->name, (long long)L));
        } else if (!kc.announced && !unannounced++) {
            first_unannounced = t->name;
        }
    }
    if (unannounced)
        ND_TRY(nd_findings_add(f, ND_BREAKS_KV_FP8, "kv_scale_orphan", "", first_unannounced,
                               "%lld KV-cache scale tensors (first: %s) but no kv_cache_scheme (compressed-tensors) or "
                               "kv_cache_quant_algo (ModelOpt) announces a quantized KV cache: loaders create no KV-scale "
                               "parameter and drop them (sglang PR #35455), so an FP8 cache runs unscaled",
                               (long long)unannounced, first_unannounced));
    return 0;
}
