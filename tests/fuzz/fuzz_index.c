/* fuzz_index.c — model.safetensors.index.json: the input is the index of a scratch checkpoint folder
 * that also holds a config.json (a one-layer compressed-tensors NVFP4 llama) and two small shards,
 * written once with the project's safetensors writer. One module has its tensors split over both
 * shards. Then nd_ckpt_open and nd_ckpt_check (what `inspect` runs) and every module is bound.
 * Oracle: fz_check_err with the folder as the prefix (every message starts with the folder or a
 * file in it); an accepted checkpoint finds every tensor it lists by name. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"
#include "fuzz_common.h"

static const char config_json[] =
    "{\"model_type\": \"llama\", \"architectures\": [\"LlamaForCausalLM\"], \"hidden_size\": 32,\n"
    " \"intermediate_size\": 64, \"num_hidden_layers\": 1, \"num_attention_heads\": 2, \"num_key_value_heads\": 2,\n"
    " \"head_dim\": 16, \"vocab_size\": 8, \"rms_norm_eps\": 1e-6, \"max_position_embeddings\": 64,\n"
    " \"tie_word_embeddings\": false,\n"
    " \"quantization_config\": {\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\",\n"
    "  \"ignore\": [\"lm_head\"], \"config_groups\": {\"group_0\": {\"targets\": [\"Linear\"],\n"
    "   \"format\": \"nvfp4-pack-quantized\",\n"
    "   \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"group_size\": 16, \"strategy\": \"tensor_group\", \"symmetric\": true},\n"
    "   \"input_activations\": {\"num_bits\": 4, \"type\": \"float\", \"group_size\": 16, \"strategy\": \"tensor_group\",\n"
    "                          \"symmetric\": true, \"dynamic\": \"local\"}}}}}\n";

static nd_st_writer *g_w;

static void add(const char *name, nd_dtype dt, int ndim, int64_t a, int64_t b, const void *data) {
    int64_t shape[2] = {a, b};
    nd_err e = {0};
    if (nd_st_writer_add(g_w, name, dt, ndim, shape, data, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
}

static void shard(const char *name) {
    nd_err e = {0};
    if (g_w && nd_st_writer_close(g_w, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
    g_w = NULL;
    if (name && nd_st_writer_open(fz_path(name), &g_w, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
}

/* The folder: config.json and two shards (the index is the fuzz input). */
static void make_folder(void) {
    static unsigned char codes[32 * 32], e4m3[32 * 4], bf16[32 * 32 * 2];
    static const float glob = 448.0f * 6.0f / 3.0f, inglob = 100.0f;
    for (size_t i = 0; i < sizeof codes; i++) codes[i] = (unsigned char)(i * 37u + 11u);
    for (size_t i = 0; i < sizeof e4m3; i++) e4m3[i] = (unsigned char)(0x30 + i % 16);
    for (size_t i = 0; i < sizeof bf16; i += 2) { bf16[i] = 0; bf16[i + 1] = (unsigned char)(0x3c + i % 3); }
    mkdir(fz_path("ckpt"), 0700);
    fz_write("ckpt/config.json", config_json, sizeof config_json - 1);
    static const char *const attn[] = {"q_proj", "k_proj", "v_proj", "o_proj"};
    char n[160];
    shard("ckpt/model-00001-of-00002.safetensors");
    add("model.embed_tokens.weight", ND_DT_BF16, 2, 8, 32, bf16);
    add("model.layers.0.input_layernorm.weight", ND_DT_BF16, 1, 32, 0, bf16);
    for (int i = 0; i < 4; i++) {
        snprintf(n, sizeof n, "model.layers.0.self_attn.%s.weight_packed", attn[i]); add(n, ND_DT_U8, 2, 32, 16, codes);
        snprintf(n, sizeof n, "model.layers.0.self_attn.%s.weight_scale", attn[i]); add(n, ND_DT_F8_E4M3, 2, 32, 2, e4m3);
        snprintf(n, sizeof n, "model.layers.0.self_attn.%s.weight_global_scale", attn[i]); add(n, ND_DT_F32, 1, 1, 0, &glob);
        snprintf(n, sizeof n, "model.layers.0.self_attn.%s.input_global_scale", attn[i]); add(n, ND_DT_F32, 1, 1, 0, &inglob);
    }
    /* gate_proj's packed weight and block scales here, its global scales in the second shard */
    add("model.layers.0.mlp.gate_proj.weight_packed", ND_DT_U8, 2, 64, 16, codes);
    add("model.layers.0.mlp.gate_proj.weight_scale", ND_DT_F8_E4M3, 2, 64, 2, e4m3);
    shard("ckpt/model-00002-of-00002.safetensors");
    add("model.layers.0.mlp.gate_proj.weight_global_scale", ND_DT_F32, 1, 1, 0, &glob);
    add("model.layers.0.mlp.gate_proj.input_global_scale", ND_DT_F32, 1, 1, 0, &inglob);
    static const char *const mlp[] = {"up_proj", "down_proj"};
    for (int i = 0; i < 2; i++) {
        int64_t out = i ? 32 : 64, in = i ? 64 : 32;
        snprintf(n, sizeof n, "model.layers.0.mlp.%s.weight_packed", mlp[i]); add(n, ND_DT_U8, 2, out, in / 2, codes);
        snprintf(n, sizeof n, "model.layers.0.mlp.%s.weight_scale", mlp[i]); add(n, ND_DT_F8_E4M3, 2, out, in / 16, e4m3);
        snprintf(n, sizeof n, "model.layers.0.mlp.%s.weight_global_scale", mlp[i]); add(n, ND_DT_F32, 1, 1, 0, &glob);
        snprintf(n, sizeof n, "model.layers.0.mlp.%s.input_global_scale", mlp[i]); add(n, ND_DT_F32, 1, 1, 0, &inglob);
    }
    add("model.layers.0.post_attention_layernorm.weight", ND_DT_BF16, 1, 32, 0, bf16);
    add("model.norm.weight", ND_DT_BF16, 1, 32, 0, bf16);
    add("lm_head.weight", ND_DT_BF16, 2, 8, 32, bf16);
    shard(NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready;
    if (!ready) { make_folder(); ready = 1; }
    fz_write("ckpt/model.safetensors.index.json", data, size);
    const char *dir = fz_path("ckpt");
    nd_ckpt *c = fz_open_ckpt(dir);
    if (!c) return 0;
    for (size_t i = 0; i < nd_ckpt_count(c); i++) {
        const nd_tview *t = nd_ckpt_at(c, i);
        FZ_ASSERT(t && nd_ckpt_find(c, t->name) == t, "tensor %zu not found by its name", i);
    }
    fz_check_ckpt(c, dir);
    nd_ckpt_close(c);
    return 0;
}
