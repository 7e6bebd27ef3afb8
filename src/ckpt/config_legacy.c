/* config_legacy.c — config.json spellings that transformers 5 converts when it loads a config,
 * converted here the same way before config.c reads the keys, so that a Hub original and the
 * folder transformers 5 saves from it replay alike.
 *
 * Gemma 3 (model_type gemma3_text; under text_config for gemma3), as Gemma3TextConfig does:
 *   layer_types absent:  sliding_attention except every sliding_window_pattern-th layer (default 6),
 *                        which is full_attention;
 *   rope_parameters without per-type entries: full_attention = {rope_type default} updated with
 *                        rope_scaling (its `type` read as rope_type), rope_theta from rope_theta
 *                        (default 1e6); sliding_attention = {rope_type default, rope_theta:
 *                        rope_local_base_freq (default 1e4)};
 *   tie_word_embeddings absent: true (the class default).
 * OLMo 3 (olmo3), as Olmo3Config does: layer_types absent: sliding_attention except every 4th layer;
 *   rope_parameters without per-type entries: full_attention = {rope_type default} updated with
 *   rope_scaling, rope_theta from rope_theta (default 5e5); sliding_attention = {rope_type default,
 *   rope_theta 5e5} — the class default even where rope_theta says otherwise (transformers 5 pops
 *   rope_theta for the full layers first; the released OLMo 3 models use 5e5 for both). */
#include <string.h>
#include <jansson.h>
#include "ckpt/ckpt_internal.h"

static json_t *get(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

/* a number key or its default; -1 when present but not a number */
static int num_or(json_t *o, const char *k, double dflt, double *out) {
    json_t *v = get(o, k);
    if (!v) { *out = dflt; return 0; }
    if (!json_is_number(v)) return -1;
    *out = json_number_value(v);
    return 0;
}

/* one family's conversion: the layer pattern key (NULL: fixed) and its default, the default thetas
 * of the full and sliding layers, and whether the sliding theta comes from a key of its own */
typedef struct legacy {
    const char *pattern_key;
    json_int_t pattern;
    double full_theta, sliding_theta;
    const char *sliding_theta_key; /* NULL: always sliding_theta */
    int tie_default;
} legacy;

static int convert(json_t *t, const legacy *L, const char *path, nd_err *e) {
    if (!get(t, "layer_types")) {
        json_t *n = get(t, "num_hidden_layers"), *p = L->pattern_key ? get(t, L->pattern_key) : NULL;
        if (!json_is_integer(n) || json_integer_value(n) < 0 || json_integer_value(n) > (1 << 20)) return 0; /* config.c says why */
        if (p && (!json_is_integer(p) || json_integer_value(p) < 1))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key '%s' must be a positive integer", path, L->pattern_key);
        const json_int_t pat = p ? json_integer_value(p) : L->pattern;
        json_t *lt = json_array();
        for (json_int_t i = 0; i < json_integer_value(n); i++)
            json_array_append_new(lt, json_string((i + 1) % pat ? "sliding_attention" : "full_attention"));
        json_object_set_new(t, "layer_types", lt);
    }
    json_t *rp = get(t, "rope_parameters");
    if (rp && !json_is_object(rp)) return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'rope_parameters' must be an object", path);
    json_t *full = rp ? get(rp, "full_attention") : NULL, *slid = rp ? get(rp, "sliding_attention") : NULL;
    if (!full || !slid) {
        json_t *nrp = rp && (full || slid) ? json_deep_copy(rp) : json_object();
        if (!full) {
            json_t *f = json_object();
            json_object_set_new(f, "rope_type", json_string("default"));
            json_t *rs = get(t, "rope_scaling");
            if (rs && !json_is_object(rs)) { json_decref(f); json_decref(nrp);
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'rope_scaling' must be an object", path); }
            if (rs) json_object_update(f, rs);
            if (!get(f, "rope_type") || (get(rs, "type") && !get(rs, "rope_type"))) json_object_set(f, "rope_type", get(f, "type"));
            double th;
            if (num_or(t, "rope_theta", L->full_theta, &th)) { json_decref(f); json_decref(nrp);
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'rope_theta' must be a number", path); }
            if (!get(f, "rope_theta")) json_object_set_new(f, "rope_theta", json_real(th));
            json_object_set_new(nrp, "full_attention", f);
        }
        if (!slid) {
            double th = L->sliding_theta;
            if (L->sliding_theta_key && num_or(t, L->sliding_theta_key, L->sliding_theta, &th)) { json_decref(nrp);
                return nd_fail(e, ND_EXIT_BADINPUT, "%s: key '%s' must be a number", path, L->sliding_theta_key); }
            json_object_set_new(nrp, "sliding_attention", json_pack("{s:s,s:f}", "rope_type", "default", "rope_theta", th));
        }
        json_object_set_new(t, "rope_parameters", nrp);
    }
    if (L->tie_default && !json_object_get(t, "tie_word_embeddings")) json_object_set_new(t, "tie_word_embeddings", json_true());
    return 0;
}

int nd_cfg_legacy(struct json_t *root, const char *path, nd_err *e) {
    json_t *tc = json_object_get(root, "text_config");
    json_t *t = json_is_object(tc) ? tc : root;
    json_t *mt = json_object_get(t, "model_type");
    static const legacy gemma3 = {"sliding_window_pattern", 6, 1e6, 1e4, "rope_local_base_freq", 1};
    static const legacy olmo3 = {NULL, 4, 5e5, 5e5, NULL, 0};
    if (!json_is_string(mt)) return 0;
    if (!strcmp(json_string_value(mt), "gemma3_text")) return convert(t, &gemma3, path, e);
    if (!strcmp(json_string_value(mt), "olmo3")) return convert(t, &olmo3, path, e);
    return 0;
}
