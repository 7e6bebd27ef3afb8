/* config_check.c — one range check of config.json before anything is sized from it (issue 21).
 * Every key the recipes read has a type (config.c) and here a range; a value outside it is exit 2
 * naming the file, the key, the value and the allowed range. The bounds are generous (ten times
 * the largest released models) but finite, so a size computed from them cannot overflow 64 bits
 * and a loop bound from them cannot hang. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <jansson.h>
#include "ckpt/ckpt_internal.h"

typedef struct int_range { const char *key; size_t off; int64_t lo, hi; int present_only; } int_range;
typedef struct num_range { const char *key; size_t off; double lo, hi; int lo_open; } num_range;

#define I(name, lo, hi, po) { #name, offsetof(nd_model_cfg, name), lo, hi, po }
#define N(name, lo, hi, open) { #name, offsetof(nd_model_cfg, name), lo, hi, open }
static const int_range INTS[] = {
    I(vocab_size, 1, 1 << 24, 0),           I(hidden_size, 1, 1 << 17, 0),
    I(num_hidden_layers, 1, 4096, 0),       I(num_attention_heads, 1, 4096, 0),
    I(num_key_value_heads, 1, 4096, 0),     I(head_dim, 1, 8192, 0),
    I(q_lora_rank, 0, 1 << 17, 0),          I(o_lora_rank, 0, 1 << 17, 0),
    I(kv_lora_rank, 0, 1 << 17, 0),         I(o_groups, 0, 4096, 0),
    I(qk_rope_head_dim, 0, 8192, 0),        I(qk_nope_head_dim, 0, 8192, 0),
    I(v_head_dim, 0, 8192, 0),              I(intermediate_size, 0, 1 << 20, 0),
    I(moe_intermediate_size, 0, 1 << 20, 0), I(hc_mult, 1, 64, 1),
    I(hc_sinkhorn_iters, 1, 1000, 1),       I(n_routed_experts, 0, 1 << 16, 0),
    I(n_shared_experts, 0, 64, 0),          I(num_experts_per_tok, 0, 1 << 16, 0),
    I(n_group, 1, 1 << 16, 0),              I(topk_group, 1, 1 << 16, 0),
    I(first_k_dense_replace, 0, 4096, 0),   I(num_hash_layers, 0, 4096, 0),
    I(sliding_window, 0, 1 << 24, 0),
};
static const num_range NUMS[] = {
    N(rms_norm_eps, 0, 0.1, 1),             N(hc_eps, 0, 0.1, 0),
    N(routed_scaling_factor, 0, 1e3, 1),    N(swiglu_limit, 0, 1e6, 0),
    N(rope_theta, 0, 1e12, 1),              N(compress_rope_theta, 0, 1e12, 1),
    N(rope_factor, 0, 1e6, 1),              N(rope_orig_max_pos, 0, 1 << 24, 0),
    N(rope_beta_fast, 0, 1e6, 0),           N(rope_beta_slow, 0, 1e6, 0),
    N(rope_low_freq_factor, 0, 1e6, 1),     N(rope_high_freq_factor, 0, 1e6, 1),
};
#undef I
#undef N

static int has_key(const nd_model_cfg *c, const char *key) {
    double v;
    return nd_cfg_number(c, key, &v) == 0;
}

int nd_cfg_check(const char *path, const nd_model_cfg *c, nd_err *e) {
    for (size_t i = 0; i < sizeof INTS / sizeof INTS[0]; i++) {
        const int_range *r = &INTS[i];
        const int64_t v = *(const int64_t *)((const char *)c + r->off);
        if (r->present_only && !has_key(c, r->key)) continue;
        if (v < r->lo || v > r->hi)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key '%s' is %lld, outside the allowed range %lld..%lld", path, r->key,
                           (long long)v, (long long)r->lo, (long long)r->hi);
    }
    for (size_t i = 0; i < sizeof NUMS / sizeof NUMS[0]; i++) {
        const num_range *r = &NUMS[i];
        const double v = *(const double *)((const char *)c + r->off);
        if (!isfinite(v) || v > r->hi || (r->lo_open ? v <= r->lo : v < r->lo))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key '%s' is %g, outside the allowed range %s%g..%g", path, r->key, v,
                           r->lo_open ? ">" : "", r->lo, r->hi);
    }
    /* relations between keys */
    if (c->num_attention_heads % c->num_key_value_heads)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: num_key_value_heads %lld does not divide num_attention_heads %lld", path,
                       (long long)c->num_key_value_heads, (long long)c->num_attention_heads);
    if (c->n_routed_experts > 0) {
        if (c->num_experts_per_tok < 1 || c->num_experts_per_tok > c->n_routed_experts)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: num_experts_per_tok %lld is outside 1..n_routed_experts (%lld)", path,
                           (long long)c->num_experts_per_tok, (long long)c->n_routed_experts);
        if (c->n_routed_experts % c->n_group)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: n_group %lld does not divide the %lld routed experts", path,
                           (long long)c->n_group, (long long)c->n_routed_experts);
    }
    if (c->topk_group > c->n_group)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: topk_group %lld is larger than n_group %lld", path, (long long)c->topk_group,
                       (long long)c->n_group);
    if (c->first_k_dense_replace > c->num_hidden_layers || c->num_hash_layers > c->num_hidden_layers)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: first_k_dense_replace / num_hash_layers exceed num_hidden_layers (%lld)", path,
                       (long long)c->num_hidden_layers);
    if (c->qk_rope_head_dim > c->head_dim && c->qk_nope_head_dim == 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: qk_rope_head_dim %lld is larger than head_dim %lld", path,
                       (long long)c->qk_rope_head_dim, (long long)c->head_dim);
    /* one entry per layer (and per MTP layer, where a config lists those too) */
    double mtp = 0;
    if (nd_cfg_number(c, "num_nextn_predict_layers", &mtp) || !(mtp > 0) || mtp > 64) mtp = 0;
    if (c->n_layer_types && (c->n_layer_types < c->num_hidden_layers || c->n_layer_types > c->num_hidden_layers + (int64_t)mtp))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: layer_types has %d entries for %lld layers%s", path, c->n_layer_types,
                       (long long)c->num_hidden_layers, mtp > 0 ? " (and the MTP layers)" : "");
    /* DeepSeek's per-layer compression: one entry per layer, each a rate a layer can have */
    if (c->n_compress_ratios && c->n_compress_ratios < c->num_hidden_layers)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: compress_ratios has %d entries for %lld layers", path, c->n_compress_ratios,
                       (long long)c->num_hidden_layers);
    for (int i = 0; i < c->n_compress_ratios; i++)
        if (c->compress_ratios[i] > 4096)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'compress_ratios[%d]' is %lld, outside the allowed range 0..4096", path, i,
                           (long long)c->compress_ratios[i]);
    /* sizes that, given, must be sizes: 0 builds a linear of no rows (a null key means "none") */
    static const char *const positive[] = {"q_lora_rank", "kv_lora_rank", "o_lora_rank", "moe_intermediate_size",
                                           /* DeepSeek's Lightning indexer (its heads, their width, the blocks it keeps) */
                                           "index_n_heads", "index_head_dim", "index_topk"};
    for (size_t i = 0; i < sizeof positive / sizeof positive[0]; i++) {
        double v;
        if (nd_cfg_number(c, positive[i], &v) == 0 && v < 1)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key '%s' is %g: a size of at least 1, or null when the model has none", path,
                           positive[i], v);
    }
    /* words the replay acts on: a value outside the known set would be replayed as something else */
    const char *sf = json_string_value(json_object_get((json_t *)c->json, "scoring_func"));
    if (sf && strcmp(sf, "softmax") && strcmp(sf, "sigmoid") && strcmp(sf, "sqrtsoftplus"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'scoring_func' is \"%.40s\" (softmax, sigmoid or sqrtsoftplus)", path, sf);
    const char *tm = json_string_value(json_object_get((json_t *)c->json, "topk_method"));
    if (tm && strcmp(tm, "noaux_tc") && strcmp(tm, "greedy") && strcmp(tm, "group_limited_greedy"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'topk_method' is \"%.40s\" (noaux_tc, greedy or group_limited_greedy)", path, tm);
    /* DeepSeek-V2's greedy selections pick other experts than noaux_tc (no correction bias, another
     * group rule); the router replays noaux_tc only, so they are refused rather than replayed as it */
    if (tm && strcmp(tm, "noaux_tc"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'topk_method' is \"%s\", a selection this version does not replay (the "
                       "router replays noaux_tc: group limit and correction bias)", path, tm);
    static const char *const types[] = {"full_attention", "sliding_attention", "linear_attention", "chunked_attention",
                                        "compressed_sparse_attention", "heavily_compressed_attention"};
    for (int i = 0; i < c->n_layer_types; i++) {
        int ok = 0;
        for (size_t k = 0; k < sizeof types / sizeof types[0] && !ok; k++) ok = !strcmp(c->layer_types[i], types[k]);
        if (!ok)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: key 'layer_types[%d]' is \"%.40s\", not a layer type the recipes know "
                           "(full_attention, sliding_attention, linear_attention, chunked_attention, "
                           "compressed_sparse_attention, heavily_compressed_attention)", path, i, c->layer_types[i]);
    }
    return 0;
}
