/* config.json parsing: DeepSeek-V4 keys, aliases, defaults, dotted look-ups, wrong types. */
#include <stdio.h>
#include <string.h>
#include "ckpt/ckpt.h"
#include "ckpt_fixture.h"
#include "nd_test.h"

static const char *V4 =
    "{\"model_type\": \"deepseek_v4\", \"architectures\": [\"DeepseekV4ForCausalLM\"],"
    " \"vocab_size\": 129280, \"hidden_size\": 7168, \"num_hidden_layers\": 3, \"num_attention_heads\": 128,"
    " \"num_key_value_heads\": 1, \"head_dim\": 512, \"qk_rope_head_dim\": 64, \"q_lora_rank\": 1536,"
    " \"o_groups\": 16, \"o_lora_rank\": 1024, \"hc_mult\": 4, \"hc_sinkhorn_iters\": 20, \"hc_eps\": 1e-6,"
    " \"rms_norm_eps\": 1e-6, \"num_local_experts\": 384, \"n_shared_experts\": 1, \"num_experts_per_tok\": 6,"
    " \"moe_intermediate_size\": 3072, \"scoring_func\": \"sqrtsoftplus\", \"norm_topk_prob\": true,"
    " \"routed_scaling_factor\": 2.5, \"swiglu_limit\": 10.0, \"num_hash_layers\": 3, \"sliding_window\": 128,"
    " \"rope_theta\": 10000, \"compress_rope_theta\": 160000, \"kv_lora_rank\": null,"
    " \"rope_scaling\": {\"type\": \"yarn\", \"factor\": 16, \"original_max_position_embeddings\": 65536,"
    "   \"beta_fast\": 32, \"beta_slow\": 1},"
    " \"layer_types\": [\"heavily_compressed_attention\", \"compressed_sparse_attention\", \"sliding_attention\"],"
    " \"compress_ratios\": [128, 4, 0], \"torch_dtype\": \"bfloat16\"}";

/* A folder with this config.json and one dense tensor. */
static int open_with(const char *dir, const char *cfg, nd_ckpt **c, nd_err *e) {
    fx_write_text(dir, "config.json", cfg);
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return -1;
    fx_dense(&x, "lm_head", 4, 16);
    if (fx_end(&x)) return -1;
    return nd_ckpt_open(dir, c, e);
}

static void v4(const char *dir) {
    nd_ckpt *c;
    nd_err e = {0};
    CHECK(open_with(dir, V4, &c, &e) == 0, "%s", e.msg);
    if (!c) return;
    const nd_model_cfg *g = nd_ckpt_config(c);
    CHECK(strcmp(g->model_type, "deepseek_v4") == 0, "%s", g->model_type);
    CHECK(strcmp(g->architecture, "DeepseekV4ForCausalLM") == 0, "%s", g->architecture);
    CHECK_EQ_INT(g->vocab_size, 129280);
    CHECK_EQ_INT(g->hidden_size, 7168);
    CHECK_EQ_INT(g->num_attention_heads, 128);
    CHECK_EQ_INT(g->num_key_value_heads, 1);
    CHECK_EQ_INT(g->head_dim, 512);
    CHECK_EQ_INT(g->q_lora_rank, 1536);
    CHECK_EQ_INT(g->o_groups, 16);
    CHECK_EQ_INT(g->o_lora_rank, 1024);
    CHECK_EQ_INT(g->hc_mult, 4);
    CHECK_EQ_INT(g->n_routed_experts, 384);   /* from the num_local_experts alias */
    CHECK_EQ_INT(g->num_experts_per_tok, 6);
    CHECK_EQ_INT(g->moe_intermediate_size, 3072);
    CHECK_EQ_INT(g->num_hash_layers, 3);
    CHECK_EQ_INT(g->kv_lora_rank, 0);         /* null counts as absent */
    CHECK(strcmp(g->scoring_func, "sqrtsoftplus") == 0, "%s", g->scoring_func);
    CHECK_EQ_INT(g->norm_topk_prob, 1);
    CHECK_NEAR(g->routed_scaling_factor, 2.5, 0);
    CHECK_NEAR(g->swiglu_limit, 10.0, 0);
    CHECK_NEAR(g->compress_rope_theta, 160000, 0);
    CHECK(strcmp(g->rope_type, "yarn") == 0, "%s", g->rope_type);
    CHECK_NEAR(g->rope_factor, 16, 0);
    CHECK_NEAR(g->rope_orig_max_pos, 65536, 0);
    CHECK_NEAR(g->rope_mscale, 1.0, 0);       /* default */
    CHECK_EQ_INT(g->n_layer_types, 3);
    if (g->n_layer_types == 3) CHECK(strcmp(g->layer_types[1], "compressed_sparse_attention") == 0, "%s", g->layer_types[1]);
    CHECK_EQ_INT(g->n_compress_ratios, 3);
    if (g->n_compress_ratios == 3) CHECK_EQ_INT(g->compress_ratios[0], 128);
    double v = 0;
    CHECK(nd_cfg_number(g, "rope_scaling.factor", &v) == 0 && v == 16, "rope_scaling.factor %g", v);
    CHECK(nd_cfg_number(g, "compress_ratios.1", &v) == 0 && v == 4, "compress_ratios.1 %g", v);
    CHECK(nd_cfg_number(g, "torch_dtype", &v) == ND_EXIT_BADINPUT, "string read as number");
    CHECK(nd_cfg_number(g, "no_such_key", &v) == ND_EXIT_BADINPUT, "absent key found");
    CHECK(nd_cfg_number(g, "rope_scaling.", &v) == ND_EXIT_BADINPUT, "trailing dot accepted");
    const char *s = nd_cfg_string(g, "layer_types.2");
    CHECK(s && strcmp(s, "sliding_attention") == 0, "layer_types.2 %s", s ? s : "(null)");
    CHECK(nd_cfg_string(g, "hidden_size") == NULL, "number read as string");
    CHECK(strcmp(nd_ckpt_format_str(c), "unquantized") == 0, "%s", nd_ckpt_format_str(c));
    nd_ckpt_close(c);
}

static void llama_defaults(const char *dir) {
    nd_ckpt *c;
    nd_err e = {0};
    const char *cfg = "{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                      " \"num_attention_heads\": 4, \"intermediate_size\": 128,"
                      " \"rope_parameters\": {\"rope_type\": \"default\", \"rope_theta\": 500000.0}}";
    CHECK(open_with(dir, cfg, &c, &e) == 0, "%s", e.msg);
    if (!c) return;
    const nd_model_cfg *g = nd_ckpt_config(c);
    CHECK_EQ_INT(g->num_key_value_heads, 4);   /* defaults to num_attention_heads */
    CHECK_EQ_INT(g->head_dim, 16);             /* hidden_size / heads */
    CHECK_EQ_INT(g->moe_intermediate_size, 128);
    CHECK_EQ_INT(g->n_routed_experts, 0);
    CHECK_EQ_INT(g->n_group, 1);
    CHECK_NEAR(g->rms_norm_eps, 1e-6, 0);
    CHECK_NEAR(g->rope_theta, 500000.0, 0);    /* from rope_parameters */
    CHECK_NEAR(g->compress_rope_theta, 500000.0, 0);
    CHECK(strcmp(g->rope_type, "default") == 0, "%s", g->rope_type);
    CHECK(strcmp(g->scoring_func, "softmax") == 0, "%s", g->scoring_func);
    CHECK_EQ_INT(g->n_layer_types, 0);
    CHECK(g->layer_types == NULL, "layer_types allocated");
    nd_ckpt_close(c);
}

/* Which rope dict transformers reads: `rope_scaling or rope_parameters` (5.x), rope_scaling (4.x) */
static double rope_of(const char *dir, const char *type, const char *keys, char *rtype, double *factor) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"%s\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
             " \"num_attention_heads\": 4, \"intermediate_size\": 128, %s}", type, keys);
    nd_ckpt *c;
    nd_err e = {0};
    double th = -1;
    CHECK(open_with(dir, cfg, &c, &e) == 0, "%s: %s", keys, e.msg);
    if (!c) return th;
    const nd_model_cfg *g = nd_ckpt_config(c);
    th = g->rope_theta;
    snprintf(rtype, 32, "%s", g->rope_type);
    *factor = g->rope_factor;
    nd_ckpt_close(c);
    return th;
}

/* DeepSeek-V4's compressed layers: the nested compress dict's theta, else compress_rope_theta, else
 * DeepseekV4Config's 160000 */
static double compress_theta(const char *dir, const char *keys) {
    char cfg[1024];
    snprintf(cfg, sizeof cfg, "{\"model_type\": \"deepseek_v4\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
             " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"rope_theta\": 1e4%s}", keys);
    nd_ckpt *c;
    nd_err e = {0};
    double th = -1;
    CHECK(open_with(dir, cfg, &c, &e) == 0, "%s: %s", keys, e.msg);
    if (!c) return th;
    th = nd_ckpt_config(c)->compress_rope_theta;
    nd_ckpt_close(c);
    return th;
}

static void rope_precedence(const char *dir) {
    CHECK_NEAR(compress_theta(dir, ""), 160000, 0);
    CHECK_NEAR(compress_theta(dir, ", \"compress_rope_theta\": 4e4"), 4e4, 0);
    CHECK_NEAR(compress_theta(dir, ", \"compress_rope_theta\": 4e4, \"rope_parameters\": {\"main\": {\"rope_theta\": 1e4},"
                                   " \"compress\": {\"rope_type\": \"yarn\", \"factor\": 4, \"rope_theta\": 2e5}}"), 2e5, 0);
    char t[32];
    double f;
    /* a non-empty rope_scaling replaces rope_parameters whole: its keys, and the top-level theta */
    CHECK_NEAR(rope_of(dir, "llama", "\"rope_theta\": 1e4, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2},"
                       " \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 8, \"rope_theta\": 5e5}", t, &f), 1e4, 0);
    CHECK(!strcmp(t, "linear") && f == 2, "rope_scaling lost to rope_parameters: %s x%g", t, f);
    /* its own rope_theta wins over the top-level one (5.x's setdefault) where they agree; where they
     * differ, 4.x (the top-level one) and 5.x build different models: refused (round 19) */
    CHECK_NEAR(rope_of(dir, "llama", "\"rope_theta\": 3e5, \"rope_scaling\": {\"rope_type\": \"linear\", \"factor\": 2,"
                       " \"rope_theta\": 3e5}", t, &f), 3e5, 0);
    {
        char cfg[1024];
        snprintf(cfg, sizeof cfg, "{\"model_type\": \"llama\", \"vocab_size\": 100, \"hidden_size\": 64, \"num_hidden_layers\": 2,"
                 " \"num_attention_heads\": 4, \"intermediate_size\": 128, \"rope_theta\": 1e4, \"rope_scaling\": {\"rope_type\": "
                 "\"linear\", \"factor\": 2, \"rope_theta\": 3e5}}");
        nd_ckpt *c = NULL;
        nd_err e = {0};
        CHECK(open_with(dir, cfg, &c, &e) == 2 && strstr(e.msg, "key 'rope_theta' is 10000 at the top level but 300000 in 'rope_scaling'"),
              "disagreeing rope_theta: %s", e.msg);
        if (c) nd_ckpt_close(c);
    }
    /* an empty rope_scaling is falsy: rope_parameters is read */
    CHECK_NEAR(rope_of(dir, "llama", "\"rope_scaling\": {}, \"rope_parameters\": {\"rope_type\": \"linear\", \"factor\": 4,"
                       " \"rope_theta\": 5e5}", t, &f), 5e5, 0);
    CHECK(!strcmp(t, "linear") && f == 4, "empty rope_scaling hid rope_parameters: %s x%g", t, f);
    /* DeepSeek-V4: a flat dict's theta is no layer's (main: rope_theta, compress: compress_rope_theta) */
    CHECK_NEAR(rope_of(dir, "deepseek_v4", "\"rope_theta\": 1e4, \"rope_parameters\": {\"rope_type\": \"yarn\", \"factor\": 16,"
                       " \"rope_theta\": 5e5}", t, &f), 1e4, 0);
}

/* Each bad config is exit 2 with a message naming config.json and the key. */
static void bad(const char *dir, const char *cfg, const char *key) {
    nd_ckpt *c = NULL;
    nd_err e = {0};
    int rc = open_with(dir, cfg, &c, &e);
    CHECK(rc == ND_EXIT_BADINPUT, "accepted (rc %d) config naming %s", rc, key);
    CHECK(strstr(e.msg, "config.json") && strstr(e.msg, key), "message for %s: %s", key, e.msg);
    nd_ckpt_close(c);
}

int main(void) {
    char dir[256];
    if (fx_tmpdir(dir, sizeof dir, "cfg")) return 1;
    v4(dir);
    llama_defaults(dir);
    rope_precedence(dir);
    const char *base = "\"model_type\": \"x\", \"vocab_size\": 8, \"num_hidden_layers\": 1, \"num_attention_heads\": 2";
    /* base plus each of these, and the key the message must name */
    static const struct { const char *extra, *key; } cases[] = {
        {", \"hidden_size\": \"4096\"", "hidden_size"},
        {"", "hidden_size"},
        {", \"hidden_size\": 64, \"rms_norm_eps\": \"small\"", "rms_norm_eps"},
        {", \"hidden_size\": 64, \"layer_types\": [1, 2]", "layer_types"},
        {", \"hidden_size\": 64, \"rope_scaling\": {\"factor\": \"big\"}", "rope_scaling.factor"},
        {", \"hidden_size\": 64, \"n_routed_experts\": -4", "n_routed_experts"},
        {", \"hidden_size\": 64, \"norm_topk_prob\": \"yes\"", "norm_topk_prob"},
        {", \"hidden_size\": 64, \"head_dim\": 1.5", "head_dim"},
    };
    char buf[1024];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        snprintf(buf, sizeof buf, "{%s%s}", base, cases[i].extra);
        bad(dir, buf, cases[i].key);
    }
    bad(dir, "{\"model_type\": \"x\",", "not valid JSON");
    bad(dir, "[1, 2]", "not a JSON object");
    fx_rmrf(dir);
    return nd_test_report("test_config");
}
