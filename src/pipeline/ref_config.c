/* ref_config.c — the config.json of --reference-checkpoint against the checkpoint's.
 *
 * The reference path runs the original's weights through the model the checkpoint's config.json
 * describes. An original whose config describes another model (RoPE scaling the export lost,
 * another rms_norm_eps or activation, another head layout of the same widths) is a quantizer that
 * rewrote config.json, one of the export bugs a user passes the original to catch; replaying it
 * under one of the two configs would hide it. Every value the model is built from is compared: the
 * parsed config (both spellings of each key read the same, config.c) and every key the recipe reads
 * ($key terms, when_config and rope params paths, requires and unsupported keys). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ref_config.h"

/* equal JSON values, numbers by value (8 and 8.0 are one number) */
static int same_json(json_t *a, json_t *b) {
    if (!a || !b) return a == b;
    if (json_is_number(a) && json_is_number(b)) return json_number_value(a) == json_number_value(b);
    if (json_is_object(a) && json_is_object(b)) {
        if (json_object_size(a) != json_object_size(b)) return 0;
        const char *k;
        json_t *v;
        json_object_foreach(a, k, v) if (!same_json(v, json_object_get(b, k))) return 0;
        return 1;
    }
    if (json_is_array(a) && json_is_array(b)) {
        if (json_array_size(a) != json_array_size(b)) return 0;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!same_json(json_array_get(a, i), json_array_get(b, i))) return 0;
        return 1;
    }
    return json_equal(a, b);
}

static void shown(json_t *v, char *buf, size_t cap) {
    if (!v) { snprintf(buf, cap, "nothing (the key is absent)"); return; }
    char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(buf, cap, "%s", s ? s : "?");
    if (s && strlen(s) >= cap && cap > 4) memcpy(buf + cap - 4, "...", 4);
    free(s);
}

typedef struct refcmp {
    const nd_ckpt *ck, *ref;
    nd_err *e;
    int typed;   /* both give a rope per layer type: rope_parameters is compared whole, not rope_theta */
} refcmp;

static int differ(const refcmp *x, const char *key, const char *a, const char *b) {
    return nd_fail(x->e, ND_EXIT_BADINPUT,
                   "--reference-checkpoint %s: its config.json gives %s = %s where %s/config.json gives %s: the two describe "
                   "different models, so the original is not what the checkpoint was made from or the export rewrote "
                   "config.json (compare the two files; fix the one that is wrong, or drop --reference-checkpoint)",
                   nd_ckpt_dir(x->ref), key, b, nd_ckpt_dir(x->ck), a);
}

/* one config key, as a number where either config gives one (derived keys too), else as JSON */
static int cmp_key(const refcmp *x, const char *key) {
    if (x->typed && (!strcmp(key, "rope_theta") || !strcmp(key, "compress_rope_theta"))) return 0;
    const nd_model_cfg *ca = nd_ckpt_config(x->ck), *cb = nd_ckpt_config(x->ref);
    double va, vb;
    const int ha = !nd_cfg_number(ca, key, &va), hb = !nd_cfg_number(cb, key, &vb);
    if (ha && hb) {
        if (va == vb || (isnan(va) && isnan(vb))) return 0;
        char sa[64], sb[64];
        snprintf(sa, sizeof sa, "%.17g", va);
        snprintf(sb, sizeof sb, "%.17g", vb);
        return differ(x, key, sa, sb);
    }
    json_t *ja = (json_t *)nd_cfg_value(ca, key), *jb = (json_t *)nd_cfg_value(cb, key);
    if (same_json(ja, jb)) return 0;
    char sa[200], sb[200];
    shown(ja, sa, sizeof sa);
    shown(jb, sb, sizeof sb);
    return differ(x, key, sa, sb);
}

/* the config key of a template path: "rope_parameters.{T}" and "no_rope_layers.{L}" compare their
 * whole value (every layer, every layer type) */
static int cmp_path(const refcmp *x, const char *path) {
    char key[192];
    snprintf(key, sizeof key, "%s", path);
    char *brace = strstr(key, ".{");
    if (brace) *brace = 0;
    return key[0] ? cmp_key(x, key) : 0;
}

/* every $key term of an attribute value ("$a+-$b", "$compress_rates.x", "rope_parameters.{T}") */
static int cmp_attr(const refcmp *x, const nd_attr *a) {
    if (!strcmp(a->key, "params")) return cmp_path(x, a->value);
    for (const char *p = a->value; (p = strchr(p, '$'));) {
        p++;
        char key[192];
        size_t n = strcspn(p, "+ ,");
        if (!n || n >= sizeof key) continue;
        memcpy(key, p, n);
        key[n] = 0;
        ND_TRY(cmp_key(x, key));
        p += n;
    }
    return 0;
}

static int cmp_stages(const refcmp *x, const nd_stage_def *s, int n) {
    for (int i = 0; i < n; i++) {
        if (s[i].when_config[0]) ND_TRY(cmp_path(x, s[i].when_config));
        for (int k = 0; k < s[i].n_attrs; k++) ND_TRY(cmp_attr(x, &s[i].attrs[k]));
    }
    return 0;
}

/* rope_parameters holding a dict per layer type (Gemma 3, OLMo 3; the Hub originals' spelling is
 * converted to it on load): the parsed top-level rope fields are not the model's then */
static int per_type_rope(const nd_model_cfg *c) {
    json_t *rp = (json_t *)nd_cfg_value(c, "rope_parameters");
    if (!json_is_object(rp)) return 0;
    const char *k;
    json_t *v;
    json_object_foreach(rp, k, v) if (json_is_object(v)) return 1;
    return 0;
}

int nd_ref_config_check(const nd_recipe *rc, const nd_ckpt *ck, const nd_ckpt *ref, nd_err *e) {
    const nd_model_cfg *a = nd_ckpt_config(ck), *b = nd_ckpt_config(ref);
    const int typed = per_type_rope(a) && per_type_rope(b);
    const refcmp x = {ck, ref, e, typed};
    char sa[200], sb[200];
    /* the parsed config: both spellings of a key (rope_scaling / rope_parameters, num_experts /
     * num_local_experts) and the family defaults read the same */
    if (strcmp(a->model_type, b->model_type)) return differ(&x, "model_type", a->model_type, b->model_type);
    const struct { const char *k; int64_t va, vb; } ints[] = {
#define I(f) {#f, a->f, b->f}
        I(vocab_size), I(hidden_size), I(num_hidden_layers), I(num_attention_heads), I(num_key_value_heads), I(head_dim),
        I(q_lora_rank), I(o_lora_rank), I(o_groups), I(qk_rope_head_dim), I(kv_lora_rank), I(qk_nope_head_dim), I(v_head_dim),
        I(intermediate_size), I(moe_intermediate_size), I(hc_mult), I(hc_sinkhorn_iters), I(n_routed_experts),
        I(n_shared_experts), I(num_experts_per_tok), I(n_group), I(topk_group), I(first_k_dense_replace), I(num_hash_layers),
        I(sliding_window), I(norm_topk_prob), I(tie_word_embeddings), I(rope_truncate),
#undef I
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        if (ints[i].va != ints[i].vb) {
            snprintf(sa, sizeof sa, "%lld", (long long)ints[i].va);
            snprintf(sb, sizeof sb, "%lld", (long long)ints[i].vb);
            return differ(&x, ints[i].k, sa, sb);
        }
    const struct { const char *k; double va, vb; } nums[] = {
#define D(f, name) {name, a->f, b->f}
        D(hc_eps, "hc_eps"), D(rms_norm_eps, "rms_norm_eps"), D(routed_scaling_factor, "routed_scaling_factor"),
        D(swiglu_limit, "swiglu_limit"), D(rope_theta, "rope_theta"), D(compress_rope_theta, "compress_rope_theta"),
        D(rope_factor, "the rope scaling factor"), D(rope_orig_max_pos, "the rope's original_max_position_embeddings"),
        D(rope_beta_fast, "the rope's beta_fast"), D(rope_beta_slow, "the rope's beta_slow"), D(rope_mscale, "the rope's mscale"),
        D(rope_mscale_all_dim, "the rope's mscale_all_dim"), D(rope_low_freq_factor, "the rope's low_freq_factor"),
        D(rope_high_freq_factor, "the rope's high_freq_factor"), D(rope_attention_factor, "the rope's attention_factor"),
#undef D
    };
    if (typed) ND_TRY(cmp_key(&x, "rope_parameters"));
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        if (!(typed && strstr(nums[i].k, "rope")) && nums[i].va != nums[i].vb && !(isnan(nums[i].va) && isnan(nums[i].vb))) {
            snprintf(sa, sizeof sa, "%.17g", nums[i].va);
            snprintf(sb, sizeof sb, "%.17g", nums[i].vb);
            return differ(&x, nums[i].k, sa, sb);
        }
    if (!typed && strcmp(a->rope_type, b->rope_type)) return differ(&x, "the rope type", a->rope_type[0] ? a->rope_type : "default", b->rope_type[0] ? b->rope_type : "default");
    if (strcmp(a->scoring_func, b->scoring_func)) return differ(&x, "scoring_func", a->scoring_func, b->scoring_func);
    if (a->n_layer_types != b->n_layer_types) return cmp_key(&x, "layer_types");
    for (int i = 0; i < a->n_layer_types; i++)
        if (strcmp(a->layer_types[i], b->layer_types[i])) return differ(&x, "layer_types", a->layer_types[i], b->layer_types[i]);
    /* what the recipe reads */
    for (int i = 0; i < rc->n_req; i++) ND_TRY(cmp_key(&x, rc->req_key[i]));
    for (int i = 0; i < rc->n_unsupported; i++) ND_TRY(cmp_key(&x, rc->unsupported[i]));
    ND_TRY(cmp_stages(&x, rc->prologue, rc->n_prologue));
    ND_TRY(cmp_stages(&x, rc->layer, rc->n_layer));
    return cmp_stages(&x, rc->epilogue, rc->n_epilogue);
}
