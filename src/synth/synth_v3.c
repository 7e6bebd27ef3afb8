/* synth_v3.c — DeepSeek-V3 (MLA, dense first layers then MoE with groups) parameter sets and
 * tensor plan (research/model-arch.md §6). full = DeepSeek-V3 dims. */
#include <math.h>
#include <stdio.h>
#include "synth/synth_json.h"
#include "synth/synth_plan.h"

typedef struct v3_dims {
    int64_t vocab, hidden, layers, dense_layers, heads, q_lora, kv_lora, nope, rope, v_head;
    int64_t inter, moe_inter, experts, top_k, shared, n_group, topk_group;
} v3_dims;

/*                          vocab   hidden L  dense H    Lq    Lkv  nope rope v    inter  I     E    k  sh grp tgrp */
static const v3_dims V3[] = {
    [ND_SYNTH_TINY]  = {256,     64,   2, 1,    4,   32,   32,  16,  16,  16,  128,   32,   8,   2, 1, 2,  1},
    [ND_SYNTH_SMALL] = {1024,    256,  4, 1,    8,   128,  64,  32,  16,  32,  512,   128,  16,  4, 1, 4,  2},
    [ND_SYNTH_FULL]  = {129280,  7168, 2, 3,    128, 1536, 512, 128, 64,  128, 18432, 2048, 256, 8, 1, 8,  4},
};

static const char *const V3_CT_IGNORE[] = {"lm_head", "re:.*mlp.gate$", NULL};
static const char *const V3_MO_EXCLUDE[] = {"lm_head", "*mlp.gate", NULL};

static json_t *v3_config(const v3_dims *d, int64_t layers, int64_t dense) {
    json_t *c = json_object(), *rs = json_object();
    sy_config_head(c, "DeepseekV3ForCausalLM", "deepseek_v3", d->vocab, d->hidden);
    sy_ji(c, "intermediate_size", d->inter);
    sy_ji(c, "moe_intermediate_size", d->moe_inter);
    sy_ji(c, "num_hidden_layers", layers);
    sy_ji(c, "first_k_dense_replace", dense);
    sy_ji(c, "num_attention_heads", d->heads);
    sy_ji(c, "num_key_value_heads", d->heads);
    sy_ji(c, "q_lora_rank", d->q_lora);
    sy_ji(c, "kv_lora_rank", d->kv_lora);
    sy_ji(c, "qk_nope_head_dim", d->nope);
    sy_ji(c, "qk_rope_head_dim", d->rope);
    sy_ji(c, "v_head_dim", d->v_head);
    sy_ji(c, "n_routed_experts", d->experts);
    sy_ji(c, "n_shared_experts", d->shared);
    sy_ji(c, "num_experts_per_tok", d->top_k);
    sy_ji(c, "n_group", d->n_group);
    sy_ji(c, "topk_group", d->topk_group);
    sy_js(c, "scoring_func", "sigmoid");
    sy_js(c, "topk_method", "noaux_tc");
    sy_jb(c, "norm_topk_prob", 1);
    sy_jf(c, "routed_scaling_factor", 2.5);
    sy_js(c, "hidden_act", "silu");
    sy_jf(c, "rms_norm_eps", 1e-6);
    sy_jf(c, "rope_theta", 10000.0);
    sy_js(rs, "type", "yarn");
    sy_jf(rs, "factor", 40.0);
    sy_ji(rs, "original_max_position_embeddings", 4096);
    sy_jf(rs, "beta_fast", 32.0);
    sy_jf(rs, "beta_slow", 1.0);
    sy_jf(rs, "mscale", 1.0);
    sy_jf(rs, "mscale_all_dim", 1.0);
    json_object_set_new(c, "rope_scaling", rs);
    sy_ji(c, "max_position_embeddings", 163840);
    sy_jb(c, "tie_word_embeddings", 0);
    sy_js(c, "torch_dtype", "bfloat16");
    return c;
}

int sy_build_v3(sy_plan *pl, nd_synth_size size, int layers, nd_err *e) {
    const v3_dims *d = &V3[size];
    const int64_t L = layers > 0 ? layers : d->layers, D = d->hidden, H = d->heads;
    /* keep at least one MoE layer when --layers cuts the model short */
    const int64_t dense = d->dense_layers < L ? d->dense_layers : (L > 1 ? L - 1 : 0);
    char nm[SY_NAME], pre[48];
    sy_plan_begin(pl, "deepseek_v3", L, d->vocab, D, V3_CT_IGNORE, V3_MO_EXCLUDE);
    for (int l = 0; l < (int)L; l++) {
        snprintf(pre, sizeof pre, "model.layers.%d", l);
        snprintf(nm, sizeof nm, "%s.input_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        int qkv_a = sy_new_fuse(pl); /* vLLM's fused_qkv_a_proj = q_a_proj + kv_a_proj_with_mqa */
        snprintf(nm, sizeof nm, "%s.self_attn.q_a_proj", pre);
        sy_add_linear(pl, nm, d->q_lora, D, 1.0, SY_Q_NVFP4, qkv_a, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.q_a_layernorm.weight", pre);
        sy_add_norm(pl, nm, d->q_lora);
        snprintf(nm, sizeof nm, "%s.self_attn.q_b_proj", pre);
        sy_add_linear(pl, nm, H * (d->nope + d->rope), d->q_lora, 1.0, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.kv_a_proj_with_mqa", pre);
        sy_add_linear(pl, nm, d->kv_lora + d->rope, D, 1.0, SY_Q_NVFP4, qkv_a, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.kv_a_layernorm.weight", pre);
        sy_add_norm(pl, nm, d->kv_lora);
        snprintf(nm, sizeof nm, "%s.self_attn.kv_b_proj", pre);
        sy_add_linear(pl, nm, H * (d->nope + d->v_head), d->kv_lora, 1.0, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.self_attn.o_proj", pre);
        sy_add_linear(pl, nm, D, H * d->v_head, 0.5, SY_Q_NVFP4, -1, l, -1);
        snprintf(nm, sizeof nm, "%s.post_attention_layernorm.weight", pre);
        sy_add_norm(pl, nm, D);
        if (l < dense) {
            snprintf(nm, sizeof nm, "%s.mlp", pre);
            sy_add_mlp(pl, nm, d->inter, D, l, -1);
            continue;
        }
        snprintf(nm, sizeof nm, "%s.mlp.gate.weight", pre);
        sy_add(pl, nm, ND_DT_BF16, 2, d->experts, D, SY_INIT_NORMAL, 0.0, 1.0 / sqrt((double)D));
        snprintf(nm, sizeof nm, "%s.mlp.gate.e_score_correction_bias", pre);
        sy_add(pl, nm, ND_DT_F32, 1, d->experts, 1, SY_INIT_NORMAL, 0.0, 0.01);
        for (int x = 0; x < (int)d->experts; x++) {
            snprintf(nm, sizeof nm, "%s.mlp.experts.%d", pre, x);
            sy_add_mlp(pl, nm, d->moe_inter, D, l, x);
        }
        snprintf(nm, sizeof nm, "%s.mlp.shared_experts", pre);
        sy_add_mlp(pl, nm, d->shared * d->moe_inter, D, l, -1);
    }
    return sy_plan_end(pl, D, v3_config(d, L, dense), e);
}
