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

/* One tensor of a full-size plan (recipe, --layers, --experts; 0: the size's): its shape and quant
 * kind, or (d0 = 0) that the plan has no such tensor. */
typedef struct want {
    const char *recipe;
    int layers, experts;
    const char *name;
    int64_t d0, d1;
    sy_qkind q;
} want;

static const want SHAPES[] = {
    /* DeepSeek-V4-Pro, one layer by default */
    {"deepseek_v4", 0, 0, "model.embed_tokens.weight", 129280, 7168, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.attn_hc.fn", 24, 28672, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.attn_hc.base", 24, 1, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.q_a_proj.weight", 1536, 7168, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.q_b_proj.weight", 65536, 1536, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.kv_proj.weight", 512, 7168, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.o_a_proj.weight", 16384, 4096, SY_Q_FP8_BLOCK},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.o_b_proj.weight", 7168, 16384, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.self_attn.sinks", 128, 1, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.gate.weight", 384, 7168, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.gate.tid2eid", 129280, 6, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.experts.383.gate_proj.weight", 3072, 7168, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.experts.383.down_proj.weight", 7168, 3072, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.shared_experts.up_proj.weight", 3072, 7168, SY_Q_NVFP4},
    {"deepseek_v4", 0, 0, "model.hc_head.hc_fn", 4, 28672, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "lm_head.weight", 129280, 7168, SY_Q_NONE},
    {"deepseek_v4", 0, 0, "model.layers.0.mlp.experts.384.gate_proj.weight", 0, 0, SY_Q_NONE}, /* 384 experts, not more */
    /* --layers 4: layer 0 sliding, 1 CSA (compressor of overlapping windows + indexer), 2 HCA, 3 CSA;
     * 3 hash layers (tid2eid), then e_score_correction_bias */
    {"deepseek_v4", 4, 0, "model.layers.1.self_attn.compressor.kv_proj.weight", 1024, 7168, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.1.self_attn.compressor.position_bias", 4, 1024, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.1.self_attn.compressor.indexer.kv_proj.weight", 256, 7168, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.1.self_attn.compressor.indexer.q_b_proj.weight", 8192, 1536, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.1.self_attn.compressor.indexer.scorer.weights_proj.weight", 64, 7168, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.2.self_attn.compressor.gate_proj.weight", 512, 7168, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.2.self_attn.compressor.position_bias", 128, 512, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.2.self_attn.compressor.indexer.kv_proj.weight", 0, 0, SY_Q_NONE}, /* HCA: no indexer */
    {"deepseek_v4", 4, 0, "model.layers.0.self_attn.compressor.kv_proj.weight", 0, 0, SY_Q_NONE}, /* sliding: no compressor */
    {"deepseek_v4", 4, 0, "model.layers.2.mlp.gate.tid2eid", 129280, 6, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.2.mlp.gate.e_score_correction_bias", 0, 0, SY_Q_NONE}, /* hash layer */
    {"deepseek_v4", 4, 0, "model.layers.3.mlp.gate.e_score_correction_bias", 384, 1, SY_Q_NONE},
    {"deepseek_v4", 4, 0, "model.layers.3.mlp.gate.tid2eid", 0, 0, SY_Q_NONE}, /* past the hash layers */
    /* --layers 1 --experts 48 (what a GPU scale test writes) */
    {"deepseek_v4", 1, 48, "model.layers.0.mlp.gate.weight", 48, 7168, SY_Q_NONE},
    {"deepseek_v4", 1, 48, "model.layers.0.mlp.experts.47.up_proj.weight", 3072, 7168, SY_Q_NVFP4},
    {"deepseek_v4", 1, 48, "model.layers.0.mlp.experts.48.up_proj.weight", 0, 0, SY_Q_NONE}, /* 48 experts, not more */
    {"deepseek_v4", 1, 48, "model.layers.0.mlp.gate.tid2eid", 129280, 6, SY_Q_NONE},
    /* Llama-3.1-8B */
    {"llama", 2, 0, "model.layers.1.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4},
    {"llama", 2, 0, "model.layers.1.mlp.down_proj.weight", 4096, 14336, SY_Q_NVFP4},
    /* DeepSeek-V3 (2 layers, 1 dense) */
    {"deepseek_v3", 0, 0, "model.layers.0.mlp.gate_proj.weight", 18432, 7168, SY_Q_NVFP4},
    {"deepseek_v3", 0, 0, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight", 576, 7168, SY_Q_NVFP4},
    {"deepseek_v3", 0, 0, "model.layers.1.self_attn.kv_b_proj.weight", 32768, 512, SY_Q_NVFP4},
    {"deepseek_v3", 0, 0, "model.layers.1.self_attn.o_proj.weight", 7168, 16384, SY_Q_NVFP4},
    {"deepseek_v3", 0, 0, "model.layers.1.mlp.experts.255.up_proj.weight", 2048, 7168, SY_Q_NVFP4},
    {"deepseek_v3", 0, 0, "model.layers.1.mlp.gate.e_score_correction_bias", 256, 1, SY_Q_NONE},
    /* gpt-oss-120b: biases on q/k/v/o and every expert linear, sinks, the router BF16 with bias */
    {"gpt_oss", 2, 0, "model.embed_tokens.weight", 201088, 2880, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.self_attn.q_proj.weight", 4096, 2880, SY_Q_NVFP4},
    {"gpt_oss", 2, 0, "model.layers.1.self_attn.q_proj.bias", 4096, 1, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.self_attn.k_proj.weight", 512, 2880, SY_Q_NVFP4},
    {"gpt_oss", 2, 0, "model.layers.1.self_attn.o_proj.bias", 2880, 1, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.self_attn.sinks", 64, 1, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.mlp.router.weight", 128, 2880, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.mlp.router.bias", 128, 1, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.mlp.experts.127.gate_proj.weight", 2880, 2880, SY_Q_NVFP4},
    {"gpt_oss", 2, 0, "model.layers.1.mlp.experts.127.down_proj.bias", 2880, 1, SY_Q_NONE},
    {"gpt_oss", 2, 0, "model.layers.1.mlp.experts.128.up_proj.weight", 0, 0, SY_Q_NONE}, /* 128 experts, not more */
    /* Qwen3-Next-80B-A3B, 4 layers: DeltaNet on 0..2 (BF16 projections), gated attention on 3 */
    {"qwen3_next", 4, 0, "model.layers.0.linear_attn.in_proj_qkvz.weight", 12288, 2048, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.2.linear_attn.in_proj_ba.weight", 64, 2048, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.0.linear_attn.out_proj.weight", 2048, 4096, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.0.linear_attn.A_log", 32, 1, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.0.linear_attn.norm.weight", 128, 1, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.3.self_attn.q_proj.weight", 8192, 2048, SY_Q_NVFP4},
    {"qwen3_next", 4, 0, "model.layers.3.self_attn.k_proj.weight", 512, 2048, SY_Q_NVFP4},
    {"qwen3_next", 4, 0, "model.layers.3.self_attn.o_proj.weight", 2048, 4096, SY_Q_NVFP4},
    {"qwen3_next", 4, 0, "model.layers.3.self_attn.q_norm.weight", 256, 1, SY_Q_NONE},
    {"qwen3_next", 4, 0, "model.layers.1.mlp.experts.511.down_proj.weight", 2048, 512, SY_Q_NVFP4},
    {"qwen3_next", 4, 0, "model.layers.1.mlp.shared_expert.up_proj.weight", 512, 2048, SY_Q_NVFP4},
    {"qwen3_next", 4, 0, "model.layers.1.mlp.shared_expert_gate.weight", 1, 2048, SY_Q_NONE},
    /* Qwen3.5-35B-A3B text: the DeltaNet projections apart */
    {"qwen3_5_moe", 0, 0, "model.embed_tokens.weight", 248320, 2048, SY_Q_NONE},
    {"qwen3_5_moe", 0, 0, "model.layers.0.linear_attn.in_proj_qkv.weight", 8192, 2048, SY_Q_NONE},
    {"qwen3_5_moe", 0, 0, "model.layers.0.linear_attn.in_proj_z.weight", 4096, 2048, SY_Q_NONE},
    {"qwen3_5_moe", 0, 0, "model.layers.0.linear_attn.in_proj_a.weight", 32, 2048, SY_Q_NONE},
    {"qwen3_5_moe", 0, 0, "model.layers.0.mlp.experts.255.gate_proj.weight", 512, 2048, SY_Q_NVFP4},
    {"qwen3_5_moe", 0, 0, "model.layers.0.mlp.experts.256.gate_proj.weight", 0, 0, SY_Q_NONE}, /* 256 experts, not more */
    /* the releases' config.json sizes: Qwen3-8B, Qwen3-30B-A3B, Mixtral-8x7B, GLM-4.5-Air */
    {"qwen3", 0, 0, "model.embed_tokens.weight", 151936, 4096, SY_Q_NONE},
    {"qwen3", 0, 0, "model.layers.0.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4},
    {"qwen3", 0, 0, "model.layers.0.self_attn.q_norm.weight", 128, 1, SY_Q_NONE},
    {"qwen3", 0, 0, "model.layers.0.mlp.down_proj.weight", 4096, 12288, SY_Q_NVFP4},
    {"qwen3_moe", 0, 0, "model.layers.0.self_attn.q_proj.weight", 4096, 2048, SY_Q_NVFP4},
    {"qwen3_moe", 0, 0, "model.layers.0.self_attn.v_proj.weight", 512, 2048, SY_Q_NVFP4},
    {"qwen3_moe", 0, 0, "model.layers.0.mlp.gate.weight", 128, 2048, SY_Q_NONE},
    {"qwen3_moe", 0, 0, "model.layers.0.mlp.experts.127.up_proj.weight", 768, 2048, SY_Q_NVFP4},
    {"mixtral", 0, 0, "model.embed_tokens.weight", 32000, 4096, SY_Q_NONE},
    {"mixtral", 0, 0, "model.layers.0.self_attn.k_proj.weight", 1024, 4096, SY_Q_NVFP4},
    {"mixtral", 0, 0, "model.layers.0.block_sparse_moe.experts.7.down_proj.weight", 4096, 14336, SY_Q_NVFP4},
    {"mixtral", 0, 0, "model.layers.0.block_sparse_moe.experts.8.down_proj.weight", 0, 0, SY_Q_NONE}, /* 8 experts, not more */
    {"glm4_moe", 2, 0, "model.embed_tokens.weight", 151552, 4096, SY_Q_NONE},
    {"glm4_moe", 2, 0, "model.layers.0.mlp.gate_proj.weight", 10944, 4096, SY_Q_NVFP4},
    {"glm4_moe", 2, 0, "model.layers.1.self_attn.q_proj.weight", 12288, 4096, SY_Q_NVFP4},
    {"glm4_moe", 2, 0, "model.layers.1.self_attn.k_proj.bias", 1024, 1, SY_Q_NONE},
    {"glm4_moe", 2, 0, "model.layers.1.mlp.experts.127.gate_proj.weight", 1408, 4096, SY_Q_NVFP4},
    {"glm4_moe", 2, 0, "model.layers.1.mlp.shared_experts.down_proj.weight", 4096, 1408, SY_Q_NVFP4},
};

static int build(sy_plan *pl, const char *recipe, int layers, int experts) {
    nd_err e = {0};
    int rc = sy_build_ex(pl, recipe, ND_SYNTH_FULL, layers, experts, &e);
    CHECK(rc == 0, "%s --layers %d --experts %d: %s", recipe, layers, experts, e.msg);
    return rc;
}

static void check_shape(const sy_plan *pl, const want *w) {
    const sy_param *p = find(pl, w->name);
    if (!w->d0) { CHECK(p == NULL, "%s: %s absent", w->recipe, w->name); return; }
    CHECK(p != NULL, "%s: %s present", w->recipe, w->name);
    if (!p) return;
    CHECK(p->shape[0] == w->d0 && (p->ndim < 2 || p->shape[1] == w->d1), "%s: [%lld, %lld], expected [%lld, %lld]", w->name,
          (long long)p->shape[0], (long long)p->shape[1], (long long)w->d0, (long long)w->d1);
    CHECK(p->quant == w->q, "%s: quant kind %d", w->name, p->quant);
}

static long long cfg_int(const sy_plan *pl, const char *key) { return json_integer_value(json_object_get(pl->config, key)); }

/* the list config key as "a,b,c" (integers or strings) */
static void cfg_list(const sy_plan *pl, const char *key, char *out, size_t cap) {
    json_t *a = json_object_get(pl->config, key), *v;
    size_t i, o = 0;
    out[0] = 0;
    json_array_foreach(a, i, v) {
        if (o >= cap) break;
        o += json_is_string(v) ? (size_t)snprintf(out + o, cap - o, "%s%s", i ? "," : "", json_string_value(v))
                               : (size_t)snprintf(out + o, cap - o, "%s%lld", i ? "," : "", (long long)json_integer_value(v));
    }
}

int main(void) {
    sy_plan pl;
    char got[512];
    /* each run of rows of one (recipe, layers, experts) against one plan */
    const size_t n = sizeof SHAPES / sizeof SHAPES[0];
    for (size_t i = 0, j; i < n; i = j) {
        const want *w = &SHAPES[i];
        for (j = i; j < n && !strcmp(SHAPES[j].recipe, w->recipe) && SHAPES[j].layers == w->layers &&
                    SHAPES[j].experts == w->experts; j++) {}
        if (!build(&pl, w->recipe, w->layers, w->experts))
            for (size_t k = i; k < j; k++) check_shape(&pl, &SHAPES[k]);
        sy_plan_free(&pl);
    }

    build(&pl, "deepseek_v4", 0, 0);
    CHECK(pl.n_layers == 1, "full V4 defaults to one layer");
    const sy_param *qa = find(&pl, "model.layers.0.self_attn.q_a_proj.weight"), *kv = find(&pl, "model.layers.0.self_attn.kv_proj.weight");
    CHECK(qa && kv && qa->fuse >= 0 && qa->fuse == kv->fuse, "q_a_proj and kv_proj are one fused group");
    CHECK(cfg_int(&pl, "head_dim") == 512 && cfg_int(&pl, "o_groups") == 16 && cfg_int(&pl, "n_routed_experts") == 384 &&
          !strcmp(json_string_value(json_object_get(pl.config, "model_type")), "deepseek_v4"), "V4 config keys");
    CHECK(cfg_int(&pl, "num_hash_layers") == 1, "one layer of V4-Pro's 3 hash layers: num_hash_layers 1 (got %lld)",
          cfg_int(&pl, "num_hash_layers"));
    const sy_param *hb = find(&pl, "model.layers.0.attn_hc.base"), *t2e = find(&pl, "model.layers.0.mlp.gate.tid2eid");
    CHECK(hb && hb->init == SY_INIT_HC_BASE && hb->aux == 4 && hb->dtype == ND_DT_F32, "attn_hc.base: hc_base init over 4 streams");
    CHECK(t2e && t2e->init == SY_INIT_TID2EID && t2e->aux == 384 && t2e->dtype == ND_DT_I32, "tid2eid: I32 over 384 experts");
    sy_plan_free(&pl);
    build(&pl, "deepseek_v4", 4, 0);
    cfg_list(&pl, "compress_ratios", got, sizeof got);
    CHECK(!strcmp(got, "0,4,128,4"), "V4 4 layers: compress_ratios 0,4,128,4 (got %s)", got);
    cfg_list(&pl, "layer_types", got, sizeof got);
    CHECK(!strcmp(got, "sliding_attention,compressed_sparse_attention,heavily_compressed_attention,compressed_sparse_attention"),
          "V4 4 layers: layer_types (got %s)", got);
    CHECK(cfg_int(&pl, "num_hash_layers") == 3, "V4 4 layers: num_hash_layers 3 (got %lld)", cfg_int(&pl, "num_hash_layers"));
    sy_plan_free(&pl);
    build(&pl, "deepseek_v4", 1, 48);
    t2e = find(&pl, "model.layers.0.mlp.gate.tid2eid");
    CHECK(cfg_int(&pl, "n_routed_experts") == 48 && t2e && t2e->aux == 48, "--experts 48: config and tid2eid draw from 48");
    sy_plan_free(&pl);
    nd_err e = {0};
    CHECK(sy_build_ex(&pl, "deepseek_v4", ND_SYNTH_FULL, 1, 5, &e) == ND_EXIT_BADINPUT && strstr(e.msg, "fewer than top-k 6"),
          "--experts 5 below V4-Pro's top-6: exit 2 (%s)", e.msg);
    sy_plan_free(&pl);

    build(&pl, "deepseek_v3", 0, 0);
    CHECK(cfg_int(&pl, "first_k_dense_replace") == 1, "one dense layer kept of two");
    sy_plan_free(&pl);
    build(&pl, "gpt_oss", 2, 0);
    cfg_list(&pl, "layer_types", got, sizeof got);
    CHECK(!strcmp(got, "sliding_attention,full_attention"), "gpt-oss layer_types sliding, full (got %s)", got);
    CHECK(cfg_int(&pl, "sliding_window") == 128, "gpt-oss sliding_window 128");
    sy_plan_free(&pl);
    build(&pl, "qwen3_next", 4, 0);
    const sy_param *conv = find(&pl, "model.layers.0.linear_attn.conv1d.weight");
    CHECK(conv && conv->ndim == 3 && conv->shape[0] == 8192 && conv->shape[1] == 1 && conv->shape[2] == 4 &&
          sy_param_numel(conv) == 8192 * 4, "conv1d [8192, 1, 4]");
    CHECK(find(&pl, "model.layers.3.linear_attn.A_log") == NULL && find(&pl, "model.layers.2.self_attn.q_proj.weight") == NULL,
          "one kind of attention per layer");
    cfg_list(&pl, "layer_types", got, sizeof got);
    CHECK(!strcmp(got, "linear_attention,linear_attention,linear_attention,full_attention"), "Qwen3-Next layer_types 3:1 (got %s)", got);
    sy_plan_free(&pl);
    return nd_test_report("test_synth_plan");
}
