/* synth_v4.c — DeepSeek-V4 (mHC + grouped output LoRA) parameter sets and tensor plan.
 * Names and shapes: the project's V4 layout (transformers naming); full = DeepSeek-V4-Pro dims. */
#include <math.h>
#include <stdio.h>
#include <jansson.h>
#include "synth/synth_json.h"
#include "synth/synth_plan.h"

typedef struct v4_dims {
    int64_t vocab, hidden, layers, heads, head_dim, rope_dim, q_lora, o_groups, o_lora, hc_mult;
    int64_t experts, top_k, moe_inter, shared, hash_layers, window;
    double routed_scale;
    int64_t csa_rate, hca_rate, index_heads, index_dim, index_topk;
} v4_dims;

/*                          vocab  hidden L  H   d    r   Lq    G   Lo    n  E    k  I     sh hash win  scale
 *                          CSA m  HCA m  nI  c    topk */
static const v4_dims V4[] = {
    [ND_SYNTH_TINY]  = {256,     64,   2, 4,  32,  16, 32,   2,  16,   4, 8,   2, 32,   1, 1,   8,  2.5,
                        4, 8, 2, 32, 2},
    [ND_SYNTH_SMALL] = {1024,   256,   4, 8,  64,  32, 128,  4,  64,   4, 16,  4, 128,  1, 1,   16, 2.5,
                        4, 16, 4, 64, 4},
    [ND_SYNTH_FULL]  = {129280, 7168,  1, 128, 512, 64, 1536, 16, 1024, 4, 384, 6, 3072, 1, 3,   128, 2.5,
                        4, 128, 64, 128, 512},
};

/* Layer types: 0 sliding, odd CSA, other even HCA (tiny: sliding, CSA; small: sliding, CSA, HCA, CSA;
 * full: one sliding layer). */
enum { V4_SLIDING = 0, V4_CSA = 1, V4_HCA = 2 };
static int v4_layer_type(int64_t l) { return l == 0 ? V4_SLIDING : l % 2 ? V4_CSA : V4_HCA; }
static const char *const V4_TYPE_NAME[] = {"sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"};

/* A KV compressor (transformers' DeepseekV4{CSA,HCA}Compressor / the indexer's own): kv and gate
 * projections [w*dim, D], position bias F32 [m, w*dim] and kv_norm [dim]; w = 2 for CSA's
 * overlapping windows. Compressor and indexer projections stay BF16, as in the real NVFP4 releases
 * (research/model-arch.md §5.1: "BF16: compressor/indexer wkv/wgate/weights_proj"). */
static void compressor(sy_plan *pl, const char *prefix, int64_t w, int64_t dim, int64_t m, int64_t D, int layer) {
    char nm[SY_NAME];
    snprintf(nm, sizeof nm, "%s.kv_proj", prefix);
    sy_add_linear(pl, nm, w * dim, D, 1.0, SY_Q_NONE, -1, layer, -1);
    snprintf(nm, sizeof nm, "%s.gate_proj", prefix);
    sy_add_linear(pl, nm, w * dim, D, 1.0, SY_Q_NONE, -1, layer, -1);
    snprintf(nm, sizeof nm, "%s.position_bias", prefix);
    sy_add(pl, nm, ND_DT_F32, 2, m, w * dim, SY_INIT_NORMAL, 0.0, 0.5);
    snprintf(nm, sizeof nm, "%s.kv_norm.weight", prefix);
    sy_add_norm(pl, nm, dim);
}

static void hc_block(sy_plan *pl, const char *prefix, int64_t n, int64_t D) {
    char nm[SY_NAME];
    const int64_t mix = (2 + n) * n;
    snprintf(nm, sizeof nm, "%s.fn", prefix);
    sy_add(pl, nm, ND_DT_F32, 2, mix, n * D, SY_INIT_NORMAL, 0.0, 0.1 / sqrt((double)(n * D)));
    snprintf(nm, sizeof nm, "%s.base", prefix);
    sy_param *b = sy_add(pl, nm, ND_DT_F32, 1, mix, 1, SY_INIT_HC_BASE, 0.0, 0.1);
    if (b) b->aux = (int)n;
    snprintf(nm, sizeof nm, "%s.scale", prefix);
    sy_add(pl, nm, ND_DT_F32, 1, 3, 1, SY_INIT_CONST, 1.0, 0.0);
}

static json_t *v4_config(const v4_dims *d, int64_t layers) {
    json_t *c = json_object(), *lt = json_array(), *cr = json_array(), *rs = json_object(), *rates = json_object();
    for (int64_t l = 0; l < layers; l++) {
        const int ty = v4_layer_type(l);
        json_array_append_new(lt, json_string(V4_TYPE_NAME[ty]));
        json_array_append_new(cr, json_integer(ty == V4_CSA ? d->csa_rate : ty == V4_HCA ? d->hca_rate : 0));
    }
    sy_ji(rates, "compressed_sparse_attention", d->csa_rate);
    sy_ji(rates, "heavily_compressed_attention", d->hca_rate);
    json_object_set_new(c, "compress_rates", rates);
    sy_ji(c, "index_n_heads", d->index_heads);
    sy_ji(c, "index_head_dim", d->index_dim);
    sy_ji(c, "index_topk", d->index_topk);
    sy_config_head(c, "DeepseekV4ForCausalLM", "deepseek_v4", d->vocab, d->hidden);
    sy_ji(c, "num_hidden_layers", layers);
    sy_ji(c, "num_attention_heads", d->heads);
    sy_ji(c, "num_key_value_heads", 1);
    sy_ji(c, "head_dim", d->head_dim);
    sy_ji(c, "qk_rope_head_dim", d->rope_dim);
    sy_ji(c, "q_lora_rank", d->q_lora);
    sy_ji(c, "o_groups", d->o_groups);
    sy_ji(c, "o_lora_rank", d->o_lora);
    sy_ji(c, "hc_mult", d->hc_mult);
    sy_ji(c, "hc_sinkhorn_iters", 20);
    sy_jf(c, "hc_eps", 1e-6);
    sy_jf(c, "rms_norm_eps", 1e-6);
    sy_ji(c, "n_routed_experts", d->experts);
    sy_ji(c, "n_shared_experts", d->shared);
    sy_ji(c, "num_experts_per_tok", d->top_k);
    sy_ji(c, "moe_intermediate_size", d->moe_inter);
    sy_js(c, "scoring_func", "sqrtsoftplus");
    sy_js(c, "topk_method", "noaux_tc");
    sy_jb(c, "norm_topk_prob", 1);
    sy_jf(c, "routed_scaling_factor", d->routed_scale);
    sy_jf(c, "swiglu_limit", 10.0);
    /* a model cut to fewer layers than its hash layers is all hash layers (config_check refuses more) */
    sy_ji(c, "num_hash_layers", d->hash_layers < layers ? d->hash_layers : layers);
    sy_ji(c, "sliding_window", d->window);
    sy_jf(c, "rope_theta", 10000.0);
    sy_jf(c, "compress_rope_theta", 160000.0);
    sy_js(rs, "type", "yarn");
    sy_jf(rs, "factor", 16.0);
    sy_ji(rs, "original_max_position_embeddings", 65536);
    sy_jf(rs, "beta_fast", 32.0);
    sy_jf(rs, "beta_slow", 1.0);
    json_object_set_new(c, "rope_scaling", rs);
    json_object_set_new(c, "layer_types", lt);
    json_object_set_new(c, "compress_ratios", cr);
    sy_ji(c, "max_position_embeddings", 1048576);
    sy_jb(c, "tie_word_embeddings", 0);
    sy_js(c, "torch_dtype", "bfloat16");
    return c;
}

static const char *const V4_CT_IGNORE[] = {"lm_head", "re:.*mlp.gate$", "re:.*self_attn.compressor.*", NULL};
static const char *const V4_MO_EXCLUDE[] = {"lm_head", "*mlp.gate", "*o_a_proj", "*self_attn.compressor*", NULL};

int sy_build_v4(sy_plan *pl, nd_synth_size size, int layers, int experts, nd_err *e) {
    v4_dims dd = V4[size];
    if (experts > 0) {
        if (experts < dd.top_k) return nd_fail(e, ND_EXIT_BADINPUT, "synth: --experts %d is fewer than top-k %d", experts, (int)dd.top_k);
        dd.experts = experts;
    }
    const v4_dims *d = &dd;
    const int64_t L = layers > 0 ? layers : d->layers, D = d->hidden, n = d->hc_mult, H = d->heads;
    char nm[SY_NAME], pre[48];
    sy_plan_begin(pl, "deepseek_v4", L, d->vocab, D, V4_CT_IGNORE, V4_MO_EXCLUDE);
    for (int l = 0; l < (int)L; l++) {
        snprintf(pre, sizeof pre, "model.layers.%d", l);
        snprintf(nm, sizeof nm, "%s.attn_hc", pre);
        hc_block(pl, nm, n, D);
        snprintf(nm, sizeof nm, "%s.input_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        int qkv = sy_new_fuse(pl); /* vLLM fuses q_a_proj and kv_proj: one weight global scale */
        snprintf(nm, sizeof nm, "%s.self_attn.q_a_proj", pre);
        sy_add_linear(pl, nm, d->q_lora, D, 1.0, SY_Q_NVFP4, qkv, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.q_a_norm.weight", pre);
        sy_add_norm(pl, nm, d->q_lora);
        snprintf(nm, sizeof nm, "%s.self_attn.q_b_proj", pre);
        sy_add_linear(pl, nm, H * d->head_dim, d->q_lora, 1.0, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.kv_proj", pre);
        sy_add_linear(pl, nm, d->head_dim, D, 1.0, SY_Q_NVFP4, qkv, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.kv_norm.weight", pre);
        sy_add_norm(pl, nm, d->head_dim);
        snprintf(nm, sizeof nm, "%s.self_attn.sinks", pre);
        sy_add(pl, nm, ND_DT_F32, 1, H, 1, SY_INIT_NORMAL, 0.0, 0.1);
        const int ty = v4_layer_type(l);
        if (ty != V4_SLIDING) {
            snprintf(nm, sizeof nm, "%s.self_attn.compressor", pre);
            compressor(pl, nm, ty == V4_CSA ? 2 : 1, d->head_dim, ty == V4_CSA ? d->csa_rate : d->hca_rate, D, l);
        }
        if (ty == V4_CSA) {
            snprintf(nm, sizeof nm, "%s.self_attn.compressor.indexer", pre);
            compressor(pl, nm, 2, d->index_dim, d->csa_rate, D, l);
            snprintf(nm, sizeof nm, "%s.self_attn.compressor.indexer.q_b_proj", pre);
            sy_add_linear(pl, nm, d->index_heads * d->index_dim, d->q_lora, 1.0, SY_Q_NONE, -1, l, -1);
            snprintf(nm, sizeof nm, "%s.self_attn.compressor.indexer.scorer.weights_proj", pre);
            sy_add_linear(pl, nm, d->index_heads, D, 1.0, SY_Q_NONE, -1, l, -1);
        }
        snprintf(nm, sizeof nm, "%s.self_attn.o_a_proj", pre);
        sy_add_linear(pl, nm, d->o_groups * d->o_lora, (H / d->o_groups) * d->head_dim, 1.0, SY_Q_FP8_BLOCK,
                      -1, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.o_b_proj", pre);
        sy_add_linear(pl, nm, D, d->o_groups * d->o_lora, 0.5, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.ffn_hc", pre);
        hc_block(pl, nm, n, D);
        snprintf(nm, sizeof nm, "%s.post_attention_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        snprintf(nm, sizeof nm, "%s.mlp.gate.weight", pre);
        sy_add(pl, nm, ND_DT_BF16, 2, d->experts, D, SY_INIT_NORMAL, 0.0, 1.0 / sqrt((double)D));
        if (l >= d->hash_layers) {
            snprintf(nm, sizeof nm, "%s.mlp.gate.e_score_correction_bias", pre);
            sy_add(pl, nm, ND_DT_F32, 1, d->experts, 1, SY_INIT_NORMAL, 0.0, 0.01);
        } else {
            snprintf(nm, sizeof nm, "%s.mlp.gate.tid2eid", pre);
            sy_param *t = sy_add(pl, nm, ND_DT_I32, 2, d->vocab, d->top_k, SY_INIT_TID2EID, 0.0, 0.0);
            if (t) t->aux = (int)d->experts;
        }
        for (int x = 0; x < (int)d->experts; x++) {
            snprintf(nm, sizeof nm, "%s.mlp.experts.%d", pre, x);
            sy_add_mlp(pl, nm, d->moe_inter, D, l, x);
        }
        snprintf(nm, sizeof nm, "%s.mlp.shared_experts", pre);
        sy_add_mlp(pl, nm, d->shared * d->moe_inter, D, l, -1);
    }
    sy_add(pl, "model.hc_head.hc_fn", ND_DT_F32, 2, n, n * D, SY_INIT_NORMAL, 0.0, 0.1 / sqrt((double)(n * D)));
    sy_add(pl, "model.hc_head.hc_base", ND_DT_F32, 1, n, 1, SY_INIT_NORMAL, -log((double)(n - 1)), 0.1);
    sy_add(pl, "model.hc_head.hc_scale", ND_DT_F32, 1, 1, 1, SY_INIT_CONST, 1.0, 0.0);
    return sy_plan_end(pl, D, v4_config(d, L), e);
}
