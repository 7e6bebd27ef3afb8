/* fuzz_ckpt.c — config.json and the quantization config (config.json quantization_config and
 * hf_quant_config.json) through nd_ckpt_open, then inspect-level binding and checks of every
 * module (nd_ckpt_check, as `nvfp4dbg inspect` runs them).
 *
 * Input: CONFIG NUL HF_QUANT NUL SAFETENSORS. An empty HF_QUANT means no hf_quant_config.json;
 * an absent or empty SAFETENSORS means the built-in tiny checkpoint below, whose modules cover
 * every binding: compressed-tensors NVFP4 (a fused q_a_proj/kv_proj pair), ModelOpt NVFP4
 * (gate/up), ModelOpt NVFP4_AWQ (a pre_quant_scale) and W4A8_NVFP4_FP8 (block scales per 32),
 * DeepSeek FP8, MXFP4 and dense BF16. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"
#include "fuzz_common.h"

static unsigned char *g_st;
static size_t g_st_size;

static void add(nd_st_writer *w, const char *name, nd_dtype dt, int ndim, int64_t a, int64_t b, const void *data) {
    int64_t shape[2] = {a, b};
    nd_err e = {0};
    if (nd_st_writer_add(w, name, dt, ndim, shape, data, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
}

/* The built-in model.safetensors, written once with the project's writer and kept in memory. */
static void make_builtin(void) {
    static unsigned char codes[32 * 16], e4m3[32 * 2], e8m0[32], fp8[32 * 32], bf16[8 * 32 * 2];
    static float glob = 448.0f * 6.0f / 3.0f, inglob = 100.0f, mo2 = 1.0f / 896.0f, moin = 0.01f, inv = 0.5f;
    for (size_t i = 0; i < sizeof codes; i++) codes[i] = (unsigned char)(i * 37u + 11u);
    for (size_t i = 0; i < sizeof e4m3; i++) e4m3[i] = (unsigned char)(0x30 + i % 16); /* 0.25 .. 0.9 */
    for (size_t i = 0; i < sizeof e8m0; i++) e8m0[i] = (unsigned char)(120 + i % 8);
    for (size_t i = 0; i < sizeof fp8; i++) fp8[i] = (unsigned char)(i % 0x7e);
    for (size_t i = 0; i < sizeof bf16; i += 2) { bf16[i] = 0; bf16[i + 1] = (unsigned char)(0x3c + i % 3); }
    const char *p = fz_path("builtin.safetensors");
    nd_st_writer *w;
    nd_err e = {0};
    if (nd_st_writer_open(p, &w, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
    static const char *const ct[] = {"model.layers.0.self_attn.q_a_proj", "model.layers.0.self_attn.kv_proj"};
    static const char *const mo[] = {"model.layers.0.mlp.gate_proj", "model.layers.0.mlp.up_proj"};
    char n[160];
    for (int i = 0; i < 2; i++) {
        snprintf(n, sizeof n, "%s.weight_packed", ct[i]); add(w, n, ND_DT_U8, 2, 32, 16, codes);
        snprintf(n, sizeof n, "%s.weight_scale", ct[i]); add(w, n, ND_DT_F8_E4M3, 2, 32, 2, e4m3);
        snprintf(n, sizeof n, "%s.weight_global_scale", ct[i]); add(w, n, ND_DT_F32, 1, 1, 0, &glob);
        snprintf(n, sizeof n, "%s.input_global_scale", ct[i]); add(w, n, ND_DT_F32, 1, 1, 0, &inglob);
        snprintf(n, sizeof n, "%s.weight", mo[i]); add(w, n, ND_DT_U8, 2, 32, 16, codes);
        snprintf(n, sizeof n, "%s.weight_scale", mo[i]); add(w, n, ND_DT_F8_E4M3, 2, 32, 2, e4m3);
        snprintf(n, sizeof n, "%s.weight_scale_2", mo[i]); add(w, n, ND_DT_F32, 0, 0, 0, &mo2);
        snprintf(n, sizeof n, "%s.input_scale", mo[i]); add(w, n, ND_DT_F32, 0, 0, 0, &moin);
    }
    /* ModelOpt variants (issue 33): an NVFP4_AWQ linear with its pre_quant_scale [K], and a
     * W4A8_NVFP4_FP8 one with block scales per 32 ([32, 1] for K = 32) */
    add(w, "model.layers.2.mlp.down_proj.weight", ND_DT_U8, 2, 32, 16, codes);
    add(w, "model.layers.2.mlp.down_proj.weight_scale", ND_DT_F8_E4M3, 2, 32, 2, e4m3);
    add(w, "model.layers.2.mlp.down_proj.weight_scale_2", ND_DT_F32, 0, 0, 0, &mo2);
    add(w, "model.layers.2.mlp.down_proj.input_scale", ND_DT_F32, 0, 0, 0, &moin);
    add(w, "model.layers.2.mlp.down_proj.pre_quant_scale", ND_DT_BF16, 1, 32, 0, bf16);
    add(w, "model.layers.3.mlp.down_proj.weight", ND_DT_U8, 2, 32, 16, codes);
    add(w, "model.layers.3.mlp.down_proj.weight_scale", ND_DT_F8_E4M3, 2, 32, 1, e4m3);
    add(w, "model.layers.3.mlp.down_proj.weight_scale_2", ND_DT_F32, 0, 0, 0, &mo2);
    add(w, "model.layers.3.mlp.down_proj.input_scale", ND_DT_F32, 0, 0, 0, &moin);
    add(w, "model.layers.0.mlp.down_proj.weight", ND_DT_F8_E4M3, 2, 32, 32, fp8);
    add(w, "model.layers.0.mlp.down_proj.weight_scale_inv", ND_DT_F32, 2, 1, 1, &inv);
    add(w, "model.layers.1.ffn.experts.0.w1.weight", ND_DT_U8, 2, 32, 16, codes);
    add(w, "model.layers.1.ffn.experts.0.w1.scale", ND_DT_F8_E8M0, 2, 32, 1, e8m0);
    add(w, "model.embed_tokens.weight", ND_DT_BF16, 2, 8, 32, bf16);
    add(w, "lm_head.weight", ND_DT_BF16, 2, 8, 32, bf16);
    add(w, "model.norm.weight", ND_DT_BF16, 1, 32, 0, bf16);
    if (nd_st_writer_close(w, &e)) FZ_ASSERT(0, "fixture: %s", e.msg);
    FILE *f = fopen(p, "rb");
    FZ_ASSERT(f != NULL, "fixture: reopen %s", p);
    fseek(f, 0, SEEK_END);
    g_st_size = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    g_st = malloc(g_st_size);
    FZ_ASSERT(g_st && fread(g_st, 1, g_st_size, f) == g_st_size, "fixture: read back");
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (!g_st) {
        mkdir(fz_path("ckpt"), 0700);
        make_builtin();
    }
    const uint8_t *end = data + size, *z1 = memchr(data, 0, size);
    const uint8_t *hq = z1 ? z1 + 1 : end, *z2 = hq < end ? memchr(hq, 0, (size_t)(end - hq)) : NULL;
    const uint8_t *st = z2 ? z2 + 1 : end;
    fz_write("ckpt/config.json", data, (size_t)((z1 ? z1 : end) - data));
    size_t hq_len = (size_t)((z2 ? z2 : end) - hq);
    if (hq_len) fz_write("ckpt/hf_quant_config.json", hq, hq_len);
    else fz_remove("ckpt/hf_quant_config.json");
    if (st < end) fz_write("ckpt/model.safetensors", st, (size_t)(end - st));
    else fz_write("ckpt/model.safetensors", g_st, g_st_size);

    const char *dir = fz_path("ckpt");
    nd_ckpt *c = fz_open_ckpt(dir);
    if (!c) return 0;
    const nd_model_cfg *cfg = nd_ckpt_config(c);
    FZ_ASSERT(cfg->model_type[0] && cfg->hidden_size > 0 && cfg->num_attention_heads > 0 &&
              cfg->num_key_value_heads > 0 && cfg->num_attention_heads % cfg->num_key_value_heads == 0,
              "config invariants");
    double x;
    (void)nd_cfg_number(cfg, "rope_scaling.factor", &x);
    (void)nd_cfg_number(cfg, "compress_ratios.1", &x);
    (void)nd_cfg_string(cfg, "quantization_config.quant_method");
    (void)nd_ckpt_format_str(c);
    fz_check_ckpt(c, dir);
    nd_ckpt_close(c);
    return 0;
}
