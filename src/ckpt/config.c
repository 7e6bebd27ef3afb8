/* config.c — config.json into nd_model_cfg.
 *
 * DeepSeek-V4 keys first, then the DeepSeek-V3 and Llama spellings. Required: model_type,
 * vocab_size, hidden_size, num_hidden_layers, num_attention_heads. A key that is present with the
 * wrong type is an error naming the key; JSON null counts as absent (some exporters write null for
 * keys the architecture does not use). Defaults of absent optional keys:
 *   num_key_value_heads = num_attention_heads; head_dim = hidden_size / num_attention_heads;
 *   moe_intermediate_size = intermediate_size; n_routed_experts = num_local_experts, num_experts or 0;
 *   n_group = topk_group = 1; hc_sinkhorn_iters = 20; hc_eps = rms_norm_eps = 1e-6;
 *   routed_scaling_factor = 1 (DeepSeek-V3: 2.5, DeepSeek-V4: 1.5, as transformers' config classes); rope_theta = 10000 (a non-empty rope_scaling's rope_theta, else
 *   rope_parameters.rope_theta, if there: parse_rope says why);
 *   compress_rope_theta = rope_theta (DeepSeek-V4: 160000); scoring_func "softmax" (DeepSeek-V4: "sqrtsoftplus"); norm_topk_prob 0;
 *   rope_type "default", factor 1, beta_fast 32, beta_slow 1, mscale 1, mscale_all_dim 0;
 *   YaRN truncate 1 (true), attention_factor 0 (absent: derived from factor and mscale);
 *   every other integer 0 (= the feature is absent: no LoRA, no hyper-connections, ...).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/json_load.h"
#include "ckpt/ckpt_internal.h"
#include "util/infile.h"

typedef struct cfgctx { const char *path; json_t *root; nd_err *e; } cfgctx;

static json_t *get(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_null(v) ? NULL : v;
}

/* Integer key: 1 found, 0 absent, <0 error (already recorded). Integral reals are accepted. */
static int get_int(cfgctx *x, json_t *o, const char *k, const char *shown, int64_t *out) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (json_is_integer(v)) { *out = (int64_t)json_integer_value(v); }
    else if (json_is_real(v) && json_real_value(v) == floor(json_real_value(v)) &&
             fabs(json_real_value(v)) < 9e15) { *out = (int64_t)json_real_value(v); }
    else { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' must be an integer", x->path, shown); return -1; }
    if (*out < 0) { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' is negative (%lld)", x->path, shown, (long long)*out); return -1; }
    return 1;
}

static int get_num(cfgctx *x, json_t *o, const char *k, const char *shown, double *out) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (!json_is_number(v)) { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' must be a number", x->path, shown); return -1; }
    *out = json_number_value(v);
    return 1;
}

static int get_str(cfgctx *x, json_t *o, const char *k, const char *shown, char *out, size_t cap) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (!json_is_string(v)) { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' must be a string", x->path, shown); return -1; }
    if (strlen(json_string_value(v)) >= cap) { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' is too long", x->path, shown); return -1; }
    snprintf(out, cap, "%s", json_string_value(v));
    return 1;
}

static int get_bool(cfgctx *x, json_t *o, const char *k, int *out) {
    json_t *v = get(o, k);
    if (!v) return 0;
    if (json_is_boolean(v)) *out = json_is_true(v);
    else if (json_is_integer(v) && (json_integer_value(v) == 0 || json_integer_value(v) == 1)) *out = (int)json_integer_value(v);
    else { nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' must be a boolean", x->path, k); return -1; }
    return 1;
}

#define TRY_GET(expr) do { if ((expr) < 0) return x->e->code; } while (0)

static int req_int(cfgctx *x, const char *k, int64_t *out) {
    int r = get_int(x, x->root, k, k, out);
    if (r < 0) return x->e->code;
    if (r == 0) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: required key '%s' is missing", x->path, k);
    if (*out == 0) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' must be positive", x->path, k);
    return 0;
}

/* transformers 5 (RotaryEmbeddingConfigMixin.convert_rope_params_to_dict) takes `rope_scaling or
 * rope_parameters`: a non-empty rope_scaling replaces rope_parameters whole, and its rope_theta (else
 * the top-level one) is the theta; transformers 4 reads rope_scaling and the top-level rope_theta. So
 * a non-empty rope_scaling wins in both, and rope_parameters is read only without one. */
static int parse_rope(cfgctx *x, nd_model_cfg *c) {
    json_t *rs = get(x->root, "rope_scaling");
    if (rs && !json_is_object(rs)) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'rope_scaling' must be an object", x->path);
    if (rs && json_object_size(rs) == 0) rs = NULL;
    json_t *rp = rs ? NULL : get(x->root, "rope_parameters");
    const char *rname = rs ? "rope_scaling" : "rope_parameters";
    if (rp && !json_is_object(rp)) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'rope_parameters' must be an object", x->path);
    /* DeepseekV4Config builds {"main": theta rope_theta, "compress": the scaling keys with theta
     * compress_rope_theta} from a flat dict, so a flat dict's rope_theta is no layer's theta there */
    const int v4 = !strcmp(c->model_type, "deepseek_v4");
    if (rs && !v4) TRY_GET(get_num(x, rs, "rope_theta", "rope_scaling.rope_theta", &c->rope_theta));
    if (rp && !v4) TRY_GET(get_num(x, rp, "rope_theta", "rope_parameters.rope_theta", &c->rope_theta));
    /* transformers' DeepseekV4 nests it: {"main": {rope_theta}, "compress": {rope_theta, yarn keys}} */
    json_t *rmain = rp ? get(rp, "main") : NULL, *rcomp = rp ? get(rp, "compress") : NULL;
    if (rmain && json_is_object(rmain)) TRY_GET(get_num(x, rmain, "rope_theta", "rope_parameters.main.rope_theta", &c->rope_theta));
    if (rcomp && json_is_object(rcomp)) {
        TRY_GET(get_num(x, rcomp, "rope_theta", "rope_parameters.compress.rope_theta", &c->compress_rope_theta));
        rp = rcomp;
        rname = "rope_parameters.compress";
    }
    if (!rs) rs = rp;
    /* a key both at the top level (transformers 4's place) and in the rope dict (transformers 5's,
     * which ignores the top-level copy) with different values: the two versions build different
     * models from one file, so neither reading can be the model served */
    static const char *const both[] = {"rope_theta", "partial_rotary_factor"};
    for (size_t i = 0; rs && !v4 && i < sizeof both / sizeof both[0]; i++) {
        json_t *top = get(x->root, both[i]), *in = get(rs, both[i]);
        if (json_is_number(top) && json_is_number(in) && json_number_value(top) != json_number_value(in))
            return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key '%s' is %g at the top level but %g in '%s': transformers 4 reads "
                           "the first, transformers 5 the second, and they build different models", x->path, both[i],
                           json_number_value(top), json_number_value(in), rname);
    }
    if (!rs) return 0;
    char kk[96];
#define RK(k) (snprintf(kk, sizeof kk, "%s.%s", rname, k), kk)
    int r = get_str(x, rs, "rope_type", RK("rope_type"), c->rope_type, sizeof c->rope_type);
    if (r < 0) return x->e->code;
    if (r == 0) TRY_GET(get_str(x, rs, "type", RK("type"), c->rope_type, sizeof c->rope_type));
    TRY_GET(get_num(x, rs, "factor", RK("factor"), &c->rope_factor));
    TRY_GET(get_num(x, rs, "original_max_position_embeddings", RK("original_max_position_embeddings"), &c->rope_orig_max_pos));
    TRY_GET(get_num(x, rs, "beta_fast", RK("beta_fast"), &c->rope_beta_fast));
    TRY_GET(get_num(x, rs, "beta_slow", RK("beta_slow"), &c->rope_beta_slow));
    TRY_GET(get_num(x, rs, "mscale", RK("mscale"), &c->rope_mscale));
    TRY_GET(get_num(x, rs, "mscale_all_dim", RK("mscale_all_dim"), &c->rope_mscale_all_dim));
    TRY_GET(get_num(x, rs, "low_freq_factor", RK("low_freq_factor"), &c->rope_low_freq_factor));
    TRY_GET(get_num(x, rs, "high_freq_factor", RK("high_freq_factor"), &c->rope_high_freq_factor));
    TRY_GET(get_num(x, rs, "attention_factor", RK("attention_factor"), &c->rope_attention_factor));
    TRY_GET(get_bool(x, rs, "truncate", &c->rope_truncate));
    c->rope_mscale_set = get(rs, "mscale") != NULL;
#undef RK
    return 0;
}

static int parse_lists(cfgctx *x, nd_model_cfg *c) {
    json_t *lt = get(x->root, "layer_types");
    if (lt) {
        size_t n = 0;
        c->layer_types = nd_json_entries(lt, 0, sizeof *c->layer_types, x->path, "key 'layer_types'", "a list of strings", &n, x->e);
        if (!c->layer_types) return x->e->code;
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_array_get(lt, i);
            if (!json_is_string(s) || strlen(json_string_value(s)) >= sizeof c->layer_types[0])
                return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'layer_types[%zu]' must be a short string", x->path, i);
            snprintf(c->layer_types[i], sizeof c->layer_types[i], "%s", json_string_value(s));
        }
        c->n_layer_types = (int)n;
    }
    json_t *cr = get(x->root, "compress_ratios");
    if (cr) {
        size_t n = 0;
        c->compress_ratios = nd_json_entries(cr, 0, sizeof *c->compress_ratios, x->path, "key 'compress_ratios'",
                                             "a list of integers", &n, x->e);
        if (!c->compress_ratios) return x->e->code;
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(cr, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0)
                return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'compress_ratios[%zu]' must be a non-negative integer", x->path, i);
            c->compress_ratios[i] = (int64_t)json_integer_value(v);
        }
        c->n_compress_ratios = (int)n;
    }
    return 0;
}

static int parse(cfgctx *x, nd_model_cfg *c) {
    json_t *r = x->root;
    int rc;
    rc = get_str(x, r, "model_type", "model_type", c->model_type, sizeof c->model_type);
    if (rc < 0) return x->e->code;
    if (rc == 0) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: required key 'model_type' is missing", x->path);
    json_t *ar = get(r, "architectures");
    if (ar) {
        if (!json_is_array(ar) || (json_array_size(ar) && !json_is_string(json_array_get(ar, 0))))
            return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'architectures' must be a list of strings", x->path);
        if (json_array_size(ar))
            snprintf(c->architecture, sizeof c->architecture, "%s", json_string_value(json_array_get(ar, 0)));
    }
    ND_TRY(req_int(x, "vocab_size", &c->vocab_size));
    ND_TRY(req_int(x, "hidden_size", &c->hidden_size));
    ND_TRY(req_int(x, "num_hidden_layers", &c->num_hidden_layers));
    ND_TRY(req_int(x, "num_attention_heads", &c->num_attention_heads));
    c->num_key_value_heads = c->num_attention_heads;
    c->head_dim = c->hidden_size / c->num_attention_heads;
    c->n_group = c->topk_group = 1;
    c->hc_sinkhorn_iters = 20;
    c->hc_eps = c->rms_norm_eps = 1e-6;
    c->routed_scaling_factor = 1.0;
    c->rope_theta = 10000.0;
    snprintf(c->scoring_func, sizeof c->scoring_func, "softmax");
    snprintf(c->rope_type, sizeof c->rope_type, "default");
    c->rope_factor = 1.0;
    c->rope_low_freq_factor = 1.0;
    c->rope_high_freq_factor = 4.0;
    c->rope_beta_fast = 32.0;
    c->rope_beta_slow = 1.0;
    c->rope_mscale = 1.0;
    c->rope_mscale_all_dim = 0.0;
    c->rope_truncate = 1;
    /* the defaults of the family's transformers config class, where they are not the generic ones: a
     * config saved without the key builds that model (DeepseekV3Config 2.5, DeepseekV4Config 1.5
     * and sqrtsoftplus scores) */
    if (!strcmp(c->model_type, "deepseek_v3")) c->routed_scaling_factor = 2.5;
    if (!strcmp(c->model_type, "deepseek_v4")) {
        c->routed_scaling_factor = 1.5;
        snprintf(c->scoring_func, sizeof c->scoring_func, "sqrtsoftplus");
    }

    static const struct { const char *k; size_t off; } ints[] = {
#define F(name) { #name, offsetof(nd_model_cfg, name) }
        F(num_key_value_heads), F(head_dim), F(q_lora_rank), F(o_lora_rank), F(o_groups),
        F(qk_rope_head_dim), F(kv_lora_rank), F(qk_nope_head_dim), F(v_head_dim),
        F(intermediate_size), F(moe_intermediate_size), F(hc_mult), F(hc_sinkhorn_iters),
        F(n_routed_experts), F(n_shared_experts), F(num_experts_per_tok), F(n_group),
        F(topk_group), F(first_k_dense_replace), F(num_hash_layers), F(sliding_window),
#undef F
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++)
        TRY_GET(get_int(x, r, ints[i].k, ints[i].k, (int64_t *)((char *)c + ints[i].off)));
    if (!get(r, "moe_intermediate_size")) c->moe_intermediate_size = c->intermediate_size;
    if (!get(r, "n_routed_experts")) TRY_GET(get_int(x, r, "num_local_experts", "num_local_experts", &c->n_routed_experts));
    /* Qwen2/3-MoE Hub configs spell it num_experts (transformers 5 saves num_local_experts) */
    if (!get(r, "n_routed_experts") && !get(r, "num_local_experts"))
        TRY_GET(get_int(x, r, "num_experts", "num_experts", &c->n_routed_experts));
    static const struct { const char *k; size_t off; } nums[] = {
#define F(name) { #name, offsetof(nd_model_cfg, name) }
        F(hc_eps), F(rms_norm_eps), F(routed_scaling_factor), F(swiglu_limit), F(rope_theta),
#undef F
    };
    for (size_t i = 0; i < sizeof nums / sizeof nums[0]; i++)
        TRY_GET(get_num(x, r, nums[i].k, nums[i].k, (double *)((char *)c + nums[i].off)));
    /* the compressed layers' theta: rope_parameters.compress.rope_theta where the dict is nested
     * (DeepseekV4Config then drops the rest), else compress_rope_theta, else the class default
     * (DeepseekV4Config: 160000; no other family has compressed layers) */
    c->compress_rope_theta = NAN;
    ND_TRY(parse_rope(x, c));
    if (isnan(c->compress_rope_theta)) {
        c->compress_rope_theta = !strcmp(c->model_type, "deepseek_v4") ? 160000.0 : c->rope_theta;
        TRY_GET(get_num(x, r, "compress_rope_theta", "compress_rope_theta", &c->compress_rope_theta));
    }
    TRY_GET(get_str(x, r, "scoring_func", "scoring_func", c->scoring_func, sizeof c->scoring_func));
    TRY_GET(get_bool(x, r, "norm_topk_prob", &c->norm_topk_prob));
    if (c->num_key_value_heads == 0 || c->num_attention_heads % c->num_key_value_heads)
        return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: num_key_value_heads %lld does not divide num_attention_heads %lld",
                       x->path, (long long)c->num_key_value_heads, (long long)c->num_attention_heads);
    json_t *q = get(r, "quantization_config");
    if (q && !json_is_object(q)) return nd_fail(x->e, ND_EXIT_BADINPUT, "%s: key 'quantization_config' must be an object", x->path);
    return parse_lists(x, c);
}

int nd_cfg_parse(const char *path, nd_model_cfg *c, nd_err *e) {
    nd_err local;
    if (!e) e = &local;
    memset(c, 0, sizeof *c);
    ND_TRY(nd_input_regular(path, e));
    const char *kind;
    FILE *fp = nd_fopen_regular(path, &kind); /* never blocks on a FIFO put there after the check */
    if (!fp && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s)", path, kind);
    if (!fp) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(errno));
    json_error_t jerr;
    fclose(fp);
    json_t *root = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
    if (!json_is_object(root)) { json_decref(root); return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a JSON object", path); }
    c->json = root;
    if (nd_cfg_legacy(root, path, e)) { nd_cfg_free(c); return e->code; }
    /* multimodal checkpoints (Mistral3, Gemma3, Llama4, Qwen2.5-VL ...) nest the language model's
     * settings under text_config: the decoder is what is replayed, so its keys are read there
     * (quantization_config stays at the top, read by quant_config.c) */
    json_t *tc = json_object_get(root, "text_config");
    if (tc && !json_is_object(tc)) { nd_cfg_free(c); return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'text_config' must be an object", path); }
    cfgctx x = { path, tc ? tc : root, e };
    int rc = parse(&x, c);
    if (!rc) {
        json_t *tie = json_object_get(root, "tie_word_embeddings");
        if (!tie && tc) tie = json_object_get(tc, "tie_word_embeddings");
        if (tie && !json_is_boolean(tie)) { nd_cfg_free(c); return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'tie_word_embeddings' must be true or false", path); }
        c->tie_word_embeddings = tie && json_is_true(tie);
    }
    if (!rc) rc = nd_cfg_check(path, c, e);
    if (rc) { nd_cfg_free(c); return rc; }
    if (!rc && tc && !c->architecture[0]) {
        json_t *ar = json_object_get(root, "architectures");
        if (json_is_array(ar) && json_is_string(json_array_get(ar, 0)))
            snprintf(c->architecture, sizeof c->architecture, "%s", json_string_value(json_array_get(ar, 0)));
    }
    if (rc) nd_cfg_free(c);
    return rc;
}

void nd_cfg_free(nd_model_cfg *c) {
    free(c->layer_types);
    free(c->compress_ratios);
    json_decref((json_t *)c->json);
    c->layer_types = NULL;
    c->compress_ratios = NULL;
    c->json = NULL;
}

/* Walk a dotted key; digit segments index arrays ("layer_types.0"). A key the top level lacks is
 * looked up in text_config too (multimodal configs). */
static json_t *lookup_in(json_t *cur, const char *key);
static json_t *lookup(const nd_model_cfg *c, const char *key) {
    json_t *v = lookup_in(c->json, key);
    json_t *tc = c->json ? json_object_get(c->json, "text_config") : NULL;
    if (!v && json_is_object(tc)) v = lookup_in(tc, key);
    return v;
}

static json_t *lookup_in(json_t *cur, const char *key) {
    char seg[128];
    while (cur && *key) {
        const char *dot = strchr(key, '.');
        size_t n = dot ? (size_t)(dot - key) : strlen(key);
        if (n >= sizeof seg) return NULL;
        memcpy(seg, key, n);
        seg[n] = 0;
        if (json_is_object(cur)) cur = json_object_get(cur, seg);
        else if (json_is_array(cur) && n && strspn(seg, "0123456789") == n) cur = json_array_get(cur, strtoul(seg, NULL, 10));
        else return NULL;
        key += n + (dot ? 1 : 0);
        if (dot && !*key) return NULL;
    }
    return cur;
}

/* The rotated dims of a partial rotary (no `rotary_dim` key of its own, as MiniMax writes):
 * int(head_dim * partial_rotary_factor) as transformers computes it, the factor at the top level
 * (GLM-4.x, Phi-3, transformers 4) or inside rope_parameters / rope_scaling (transformers 5);
 * without a factor the default of the model's transformers config class (GLM-4 and GLM-4.5 0.5,
 * Qwen3-Next 0.25: a config saved without the key builds that model), else the whole head. */
static int rotary_dim(const nd_model_cfg *c, double *out) {
    static const char *const keys[] = {"partial_rotary_factor", "rope_parameters.partial_rotary_factor",
                                       "rope_scaling.partial_rotary_factor"};
    static const struct { const char *type; double f; } defaults[] = {
        {"glm4", 0.5}, {"glm4_moe", 0.5}, {"qwen3_next", 0.25}};
    double f = 1.0;
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        if (!strcmp(c->model_type, defaults[i].type)) f = defaults[i].f;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        json_t *v = lookup(c, keys[i]);
        if (!v) continue;
        if (!json_is_number(v) || !(json_number_value(v) > 0 && json_number_value(v) <= 1)) return ND_EXIT_BADINPUT;
        f = json_number_value(v);
        break;
    }
    *out = (double)(int64_t)((double)c->head_dim * f);
    return *out > 0 ? 0 : ND_EXIT_BADINPUT;
}

/* Gated DeltaNet (Qwen3-Next): in_proj_qkvz / in_proj_ba are laid out per key head, each group holding
 * linear_num_value_heads / linear_num_key_heads value heads: `linear_value_group_heads` is that ratio,
 * `linear_value_group_dim` the group's value columns (ratio x linear_value_head_dim); the conv's
 * q | k | v channels are `linear_key_dim` (key heads x linear_key_head_dim) twice and
 * `linear_value_dim` (value heads x linear_value_head_dim). */
static int linear_dims(const nd_model_cfg *c, const char *key, double *out) {
    static const char *const names[] = {"linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim",
                                        "linear_value_head_dim"};
    int64_t v[4];
    for (int i = 0; i < 4; i++) {
        json_t *j = lookup(c, names[i]);
        if (!json_is_integer(j) || json_integer_value(j) <= 0 || json_integer_value(j) > (1 << 20)) return ND_EXIT_BADINPUT;
        v[i] = (int64_t)json_integer_value(j);
    }
    if (v[1] % v[0]) return ND_EXIT_BADINPUT;
    if (!strcmp(key, "linear_value_group_heads")) *out = (double)(v[1] / v[0]);
    else if (!strcmp(key, "linear_value_group_dim")) *out = (double)(v[1] / v[0] * v[3]);
    else if (!strcmp(key, "linear_key_dim")) *out = (double)(v[0] * v[2]);
    else *out = (double)(v[1] * v[3]);
    return 0;
}

int nd_cfg_number(const nd_model_cfg *c, const char *key, double *out) {
    json_t *v = lookup(c, key);
    if (json_is_number(v)) { *out = json_number_value(v); return 0; }
    if (json_is_boolean(v)) { *out = json_is_true(v) ? 1.0 : 0.0; return 0; }
    /* keys the parser derives or defaults (rope_theta nested in rope_parameters, head_dim from
     * hidden_size / heads, ...): the parsed value, as documented at the top of this file */
    if (v && !json_is_null(v)) return ND_EXIT_BADINPUT; /* null counts as absent, as everywhere here */
    const struct { const char *k; double v; } derived[] = {
        {"rope_theta", c->rope_theta}, {"compress_rope_theta", c->compress_rope_theta},
        {"head_dim", (double)c->head_dim}, {"rms_norm_eps", c->rms_norm_eps}, {"hc_eps", c->hc_eps},
        {"hc_mult", (double)c->hc_mult}, {"hc_sinkhorn_iters", (double)c->hc_sinkhorn_iters},
        {"num_key_value_heads", (double)c->num_key_value_heads}, {"routed_scaling_factor", c->routed_scaling_factor},
        {"swiglu_limit", c->swiglu_limit}, {"norm_topk_prob", (double)c->norm_topk_prob},
        {"sliding_window", (double)c->sliding_window}, {"qk_rope_head_dim", (double)c->qk_rope_head_dim},
        {"n_routed_experts", (double)c->n_routed_experts}, {"num_experts_per_tok", (double)c->num_experts_per_tok},
    };
    for (size_t i = 0; i < sizeof derived / sizeof derived[0]; i++)
        if (!strcmp(derived[i].k, key) && derived[i].v > 0) { *out = derived[i].v; return 0; }
    if (!strcmp(key, "rotary_dim")) return rotary_dim(c, out);
    /* Gemma: the embedding's normaliser sqrt(hidden_size) and the attention's score scale
     * query_pre_attn_scalar^-0.5 (transformers' Gemma3TextConfig default 256) */
    if (!strcmp(key, "sqrt_hidden_size")) { *out = sqrt((double)c->hidden_size); return 0; }
    if (!strcmp(key, "query_pre_attn_scale")) {
        json_t *q = lookup(c, "query_pre_attn_scalar");
        if (q && !json_is_null(q) && (!json_is_number(q) || !(json_number_value(q) > 0))) return ND_EXIT_BADINPUT;
        *out = 1.0 / sqrt(q && !json_is_null(q) ? json_number_value(q) : 256.0);
        return 0;
    }
    /* the widths of q and of k (= v) in a fused qkv projection (Phi-3's qkv_proj) */
    if (!strcmp(key, "q_dim") || !strcmp(key, "kv_dim")) {
        const int64_t heads = key[0] == 'q' ? c->num_attention_heads : c->num_key_value_heads;
        *out = (double)(heads * c->head_dim);
        return *out > 0 ? 0 : ND_EXIT_BADINPUT;
    }
    if (!strcmp(key, "linear_value_group_heads") || !strcmp(key, "linear_value_group_dim") ||
        !strcmp(key, "linear_key_dim") || !strcmp(key, "linear_value_dim"))
        return linear_dims(c, key, out);
    return ND_EXIT_BADINPUT;
}

const void *nd_cfg_value(const nd_model_cfg *c, const char *key) {
    json_t *v = lookup(c, key);
    return json_is_null(v) ? NULL : v;
}

const char *nd_cfg_string(const nd_model_cfg *c, const char *key) {
    json_t *v = lookup(c, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}
