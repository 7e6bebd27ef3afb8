/* test_synth_plan.c — the full-size plans carry the real dimensions and names (no weights are
 * generated): DeepSeek-V4-Pro shapes from the project's V4 layout, Llama-3.1-8B, DeepSeek-V3, gpt-oss-120b,
 * Qwen3-Next-80B-A3B, Qwen3.5-35B-A3B, Qwen3-8B, Qwen3-30B-A3B, Mixtral-8x7B, GLM-4.5-Air. */
#include <string.h>
#include <jansson.h>
#include "nd_test.h"
#include "synth/synth_plan.h"

static const sy_param *find(const sy_plan *pl, const char *name) {
    for (size_t i = 0; i < pl->n; i++) if (!strcmp(pl->p[i].name, name)) return &pl->p[i];
    return NULL;
}

static void shape(const sy_plan *pl, const char *name, int64_t d0, int64_t d1, sy_qkind q) {
    const sy_param *p = find(pl, name);
    CHECK(p != NULL, "%s present", name);
    if (!p) return;
    CHECK(p->shape[0] == d0 && (p->ndim < 2 || p->shape[1] == d1), "%s: [%lld, %lld], expected [%lld, %lld]", name,
          (long long)p->shape[0], (long long)p->shape[1], (long long)d0, (long long)d1);
    CHECK(p->quant == q, "%s: quant kind %d", name, p->quant);
}

int main(void) {
    sy_plan pl;
    nd_err e = {0};
    CHECK(sy_build(&pl, "deepseek_v4", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    CHECK(pl.n_layers == 1, "full V4 defaults to one layer");
    shape(&pl, "model.embed_tokens.weight", 129280, 7168, SY_Q_NONE);
    shape(&pl, "model.layers.0.attn_hc.fn", 24, 28672, SY_Q_NONE);
    shape(&pl, "model.layers.0.attn_hc.base", 24, 1, SY_Q_NONE);
    shape(&pl, "model.layers.0.self_attn.q_a_proj.weight", 1536, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.q_b_proj.weight", 65536, 1536, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.kv_proj.weight", 512, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.o_a_proj.weight", 16384, 4096, SY_Q_FP8_BLOCK);
    shape(&pl, "model.layers.0.self_attn.o_b_proj.weight", 7168, 16384, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.sinks", 128, 1, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.gate.weight", 384, 7168, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.gate.tid2eid", 129280, 6, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.experts.383.gate_proj.weight", 3072, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.mlp.experts.383.down_proj.weight", 7168, 3072, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.mlp.shared_experts.up_proj.weight", 3072, 7168, SY_Q_NVFP4);
    shape(&pl, "model.hc_head.hc_fn", 4, 28672, SY_Q_NONE);
    shape(&pl, "lm_head.weight", 129280, 7168, SY_Q_NONE);
    CHECK(find(&pl, "model.layers.0.mlp.experts.384.gate_proj.weight") == NULL, "384 experts, not more");
    const sy_param *qa = find(&pl, "model.layers.0.self_attn.q_a_proj.weight"), *kv = find(&pl, "model.layers.0.self_attn.kv_proj.weight");
    CHECK(qa && kv && qa->fuse >= 0 && qa->fuse == kv->fuse, "q_a_proj and kv_proj are one fused group");
    json_t *c = pl.config;
    CHECK(json_integer_value(json_object_get(c, "head_dim")) == 512 && json_integer_value(json_object_get(c, "o_groups")) == 16 &&
          json_integer_value(json_object_get(c, "n_routed_experts")) == 384 &&
          !strcmp(json_string_value(json_object_get(c, "model_type")), "deepseek_v4"), "V4 config keys");
    sy_plan_free(&pl);

    CHECK(sy_build(&pl, "llama", ND_SYNTH_FULL, 2, &e) == 0, "%s", e.msg);
    shape(&pl, "model.layers.1.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.down_proj.weight", 4096, 14336, SY_Q_NVFP4);
    sy_plan_free(&pl);

    CHECK(sy_build(&pl, "deepseek_v3", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    shape(&pl, "model.layers.0.mlp.gate_proj.weight", 18432, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", 576, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.kv_b_proj.weight", 32768, 512, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.o_proj.weight", 7168, 16384, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.experts.255.up_proj.weight", 2048, 7168, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.gate.e_score_correction_bias", 256, 1, SY_Q_NONE);
    CHECK(json_integer_value(json_object_get(pl.config, "first_k_dense_replace")) == 1, "one dense layer kept of two");
    sy_plan_free(&pl);

    /* gpt-oss-120b: biases on q/k/v/o and every expert linear, sinks, the router BF16 with bias */
    CHECK(sy_build(&pl, "gpt_oss", ND_SYNTH_FULL, 2, &e) == 0, "%s", e.msg);
    shape(&pl, "model.embed_tokens.weight", 201088, 2880, SY_Q_NONE);
    shape(&pl, "model.layers.1.self_attn.q_proj.weight", 4096, 2880, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.q_proj.bias", 4096, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.self_attn.k_proj.weight", 512, 2880, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.o_proj.bias", 2880, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.self_attn.sinks", 64, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.mlp.router.weight", 128, 2880, SY_Q_NONE);
    shape(&pl, "model.layers.1.mlp.router.bias", 128, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.mlp.experts.127.gate_proj.weight", 2880, 2880, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.experts.127.down_proj.bias", 2880, 1, SY_Q_NONE);
    CHECK(find(&pl, "model.layers.1.mlp.experts.128.up_proj.weight") == NULL, "128 experts, not more");
    json_t *lt = json_object_get(pl.config, "layer_types");
    CHECK(json_array_size(lt) == 2 && !strcmp(json_string_value(json_array_get(lt, 0)), "sliding_attention") &&
          !strcmp(json_string_value(json_array_get(lt, 1)), "full_attention"), "gpt-oss layer_types sliding, full");
    CHECK(json_integer_value(json_object_get(pl.config, "sliding_window")) == 128, "gpt-oss sliding_window 128");
    sy_plan_free(&pl);

    /* Qwen3-Next-80B-A3B, 4 layers: DeltaNet on 0..2 (BF16 projections, conv [C, 1, K]), gated attention on 3 */
    CHECK(sy_build(&pl, "qwen3_next", ND_SYNTH_FULL, 4, &e) == 0, "%s", e.msg);
    shape(&pl, "model.layers.0.linear_attn.in_proj_qkvz.weight", 12288, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.2.linear_attn.in_proj_ba.weight", 64, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.out_proj.weight", 2048, 4096, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.A_log", 32, 1, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.norm.weight", 128, 1, SY_Q_NONE);
    const sy_param *conv = find(&pl, "model.layers.0.linear_attn.conv1d.weight");
    CHECK(conv && conv->ndim == 3 && conv->shape[0] == 8192 && conv->shape[1] == 1 && conv->shape[2] == 4 &&
          sy_param_numel(conv) == 8192 * 4, "conv1d [8192, 1, 4]");
    CHECK(find(&pl, "model.layers.3.linear_attn.A_log") == NULL && find(&pl, "model.layers.2.self_attn.q_proj.weight") == NULL,
          "one kind of attention per layer");
    shape(&pl, "model.layers.3.self_attn.q_proj.weight", 8192, 2048, SY_Q_NVFP4);
    shape(&pl, "model.layers.3.self_attn.k_proj.weight", 512, 2048, SY_Q_NVFP4);
    shape(&pl, "model.layers.3.self_attn.o_proj.weight", 2048, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.3.self_attn.q_norm.weight", 256, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.mlp.experts.511.down_proj.weight", 2048, 512, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.shared_expert.up_proj.weight", 512, 2048, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.shared_expert_gate.weight", 1, 2048, SY_Q_NONE);
    lt = json_object_get(pl.config, "layer_types");
    CHECK(json_array_size(lt) == 4 && !strcmp(json_string_value(json_array_get(lt, 2)), "linear_attention") &&
          !strcmp(json_string_value(json_array_get(lt, 3)), "full_attention"), "Qwen3-Next layer_types 3:1");
    sy_plan_free(&pl);

    /* Qwen3.5-35B-A3B text: the DeltaNet projections apart */
    CHECK(sy_build(&pl, "qwen3_5_moe", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    shape(&pl, "model.embed_tokens.weight", 248320, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.in_proj_qkv.weight", 8192, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.in_proj_z.weight", 4096, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.linear_attn.in_proj_a.weight", 32, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.experts.255.gate_proj.weight", 512, 2048, SY_Q_NVFP4);
    CHECK(find(&pl, "model.layers.0.mlp.experts.256.gate_proj.weight") == NULL, "256 experts, not more");
    sy_plan_free(&pl);

    /* the releases' config.json sizes: Qwen3-8B, Qwen3-30B-A3B, Mixtral-8x7B, GLM-4.5-Air */
    CHECK(sy_build(&pl, "qwen3", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    shape(&pl, "model.embed_tokens.weight", 151936, 4096, SY_Q_NONE);
    shape(&pl, "model.layers.0.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.q_norm.weight", 128, 1, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.down_proj.weight", 4096, 12288, SY_Q_NVFP4);
    sy_plan_free(&pl);
    CHECK(sy_build(&pl, "qwen3_moe", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    shape(&pl, "model.layers.0.self_attn.q_proj.weight", 4096, 2048, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.self_attn.v_proj.weight", 512, 2048, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.mlp.gate.weight", 128, 2048, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.experts.127.up_proj.weight", 768, 2048, SY_Q_NVFP4);
    sy_plan_free(&pl);
    CHECK(sy_build(&pl, "mixtral", ND_SYNTH_FULL, 0, &e) == 0, "%s", e.msg);
    shape(&pl, "model.embed_tokens.weight", 32000, 4096, SY_Q_NONE);
    shape(&pl, "model.layers.0.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.0.block_sparse_moe.experts.7.down_proj.weight", 4096, 14336, SY_Q_NVFP4);
    CHECK(find(&pl, "model.layers.0.block_sparse_moe.experts.8.down_proj.weight") == NULL, "8 experts, not more");
    sy_plan_free(&pl);
    CHECK(sy_build(&pl, "glm4_moe", ND_SYNTH_FULL, 2, &e) == 0, "%s", e.msg);
    shape(&pl, "model.embed_tokens.weight", 151552, 4096, SY_Q_NONE);
    shape(&pl, "model.layers.0.mlp.gate_proj.weight", 10944, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.q_proj.weight", 12288, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.self_attn.k_proj.bias", 1024, 1, SY_Q_NONE);
    shape(&pl, "model.layers.1.mlp.experts.127.gate_proj.weight", 1408, 4096, SY_Q_NVFP4);
    shape(&pl, "model.layers.1.mlp.shared_experts.down_proj.weight", 4096, 1408, SY_Q_NVFP4);
    sy_plan_free(&pl);
    return nd_test_report("test_synth_plan");
}
