/* Module binding for every format, normalised scales, quantization configs, shards, bind errors. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "backend.h"
#include "ckpt/ckpt.h"
#include "ckpt_fixture.h"
#include "numerics/nd_numerics.h"
#include "nd_test.h"

static const char *CT_Q =
    "{\"quant_method\": \"compressed-tensors\", \"format\": \"nvfp4-pack-quantized\", \"config_groups\": {"
    " \"experts\": {\"targets\": [\"re:.*mlp.experts.*\"],"
    "   \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16},"
    "   \"input_activations\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"tensor_group\", \"group_size\": 16, \"dynamic\": \"local\"}},"
    " \"w4a16\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"group_size\": 16}},"
    " \"fp8\": {\"targets\": [\"re:.*o_a_proj$\"], \"weights\": {\"num_bits\": 8, \"type\": \"float\", \"strategy\": \"block\", \"block_structure\": [64, 32]}}},"
    " \"ignore\": [\"lm_head\", \"re:.*mlp.gate$\"]}";

static nd_ckpt *open_ok(const char *dir) {
    nd_ckpt *c = NULL;
    nd_err e = {0};
    CHECK(nd_ckpt_open(dir, &c, &e) == 0, "%s", e.msg);
    return c;
}

/* the fixture x written (fx_end) and opened from dir (open_ok), and the format it names checked; NULL when
 * either failed */
static nd_ckpt *end_open_as(fx *x, const char *dir, const char *format) {
    if (fx_end(x)) return NULL;
    nd_ckpt *c = open_ok(dir);
    if (c) CHECK(strcmp(nd_ckpt_format_str(c), format) == 0, "%s", nd_ckpt_format_str(c));
    return c;
}

/* module name of c bound into m (a failure names it); 0 when bound */
static int bind_ok(nd_ckpt *c, const char *name, nd_module *m) {
    nd_err e = {0};
    const int rc = nd_ckpt_module(c, name, m, &e);
    CHECK(rc == 0, "%s: %s", name, e.msg);
    return rc;
}

/* bind_ok, and the module's weight format checked */
static void bind_as(nd_ckpt *c, const char *name, nd_module *m, nd_wfmt wfmt) {
    bind_ok(c, name, m);
    CHECK_EQ_INT(m->wfmt, wfmt);
}

static void ct(const char *dir) {
    fx_config(dir, CT_Q);
    fx x;
    float ig = 1000.0f, wg2[2] = {100.0f, 200.0f};
    int64_t one = 64;
    uint16_t *nw;
    float *b;
    /* the shared expert has one global per fused shard */
    if (fx_begin(&x, dir, "model.safetensors")) return;
    fx_nvfp4_ct(&x, "model.layers.0.mlp.experts.0.gate_proj", 32, 64, 3584.0f, &ig, 0x7e);
    fx_nvfp4_ct(&x, "model.layers.0.self_attn.q_a_proj", 32, 64, 2000.0f, &ig, 0x7e);
    fx_nvfp4_ct(&x, "model.layers.0.self_attn.kv_proj", 32, 64, 2000.0f, NULL, 0x7e);
    fx_fp8_block(&x, "model.layers.0.self_attn.o_a_proj", 128, 64, 64, 32, "weight_scale");
    {
        int64_t sh[2] = {16, 16}, ss[2] = {16, 2};
        uint8_t *p = fx_alloc(&x, 256), *s = fx_alloc(&x, 32);
        memset(s, 0x38, 32);
        fx_add(&x, "model.layers.0.mlp.shared_experts.down_proj.weight_packed", ND_DT_U8, 2, sh, p);
        fx_add(&x, "model.layers.0.mlp.shared_experts.down_proj.weight_scale", ND_DT_F8_E4M3, 2, ss, s);
        fx_f32(&x, "model.layers.0.mlp.shared_experts.down_proj.weight_global_scale", 2, wg2);
    }
    fx_dense(&x, "model.layers.0.mlp.gate", 2, 64);
    fx_dense(&x, "lm_head", 64, 64);
    fx_dense(&x, "model.layers.10.mlp.gate", 2, 64);
    nw = fx_alloc(&x, 128);
    fx_add(&x, "model.layers.0.input_layernorm.weight", ND_DT_BF16, 1, &one, nw);
    b = fx_alloc(&x, 64 * sizeof(float));
    b[3] = 0.5f;
    fx_add(&x, "lm_head.bias", ND_DT_F32, 1, &one, b);
    nd_ckpt *c = end_open_as(&x, dir, "compressed-tensors");
    if (!c) return;
    CHECK_EQ_INT(nd_ckpt_format(c), ND_CKPT_COMPRESSED_TENSORS);
    nd_module m;
    nd_err e = {0};
    bind_as(c, "model.layers.0.mlp.experts.0.gate_proj", &m, ND_WF_NVFP4);
    CHECK_EQ_INT(m.conv, ND_CONV_CT);
    CHECK_EQ_INT(m.out_features, 32);
    CHECK_EQ_INT(m.in_features, 64);
    CHECK(m.weight_global_div == 3584.0f, "div %g", m.weight_global_div);
    CHECK(m.input_global_mult == 1000.0f, "mult %g", m.input_global_mult);
    CHECK_EQ_INT(m.act_quant, 1);
    CHECK_EQ_INT(m.n_shards, 1);
    CHECK(m.weight && strcmp(m.weight->name, "model.layers.0.mlp.experts.0.gate_proj.weight_packed") == 0, "weight");
    CHECK(m.weight_scale && m.weight_scale->dtype == ND_DT_F8_E4M3, "weight_scale");

    bind_ok(c, "model.layers.0.self_attn.q_a_proj", &m);
    CHECK_EQ_INT(m.act_quant, 0);   /* matched by the W4A16 "Linear" group */
    bind_ok(c, "model.layers.0.self_attn.kv_proj", &m);
    CHECK(m.input_global == NULL && isnan(m.input_global_mult), "absent input scale: %g", m.input_global_mult);

    bind_as(c, "model.layers.0.self_attn.o_a_proj", &m, ND_WF_FP8);
    CHECK_EQ_INT(m.fp8_scale_kind, ND_FP8_SCALE_BLOCK_F32);
    CHECK_EQ_INT(m.bn, 64);
    CHECK_EQ_INT(m.bk, 32);
    CHECK_EQ_INT(m.conv, ND_CONV_CT);

    bind_ok(c, "model.layers.0.mlp.shared_experts.down_proj", &m);
    CHECK_EQ_INT(m.n_shards, 2);
    CHECK(m.weight_global_div == 200.0f, "max over shards %g", m.weight_global_div);

    bind_as(c, "lm_head", &m, ND_WF_DENSE);
    CHECK(m.bias && nd_tview_get_f32(m.bias, 3) == 0.5f, "bias");
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "lm_head"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "model.layers.0.mlp.gate"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "model.layers.0.mlp.gate_proj"), 0); /* regex ends at gate$ */
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "model.layers.0.self_attn.q_a_proj"), 0);

    /* modules: 2-D weights and quantized linears, natural order; the norm is not a module */
    const char *want[] = {"lm_head", "model.layers.0.mlp.experts.0.gate_proj", "model.layers.0.mlp.gate",
                          "model.layers.0.mlp.shared_experts.down_proj", "model.layers.0.self_attn.kv_proj",
                          "model.layers.0.self_attn.o_a_proj", "model.layers.0.self_attn.q_a_proj",
                          "model.layers.10.mlp.gate"};
    CHECK_EQ_INT(nd_ckpt_module_count(c), 8);
    for (size_t i = 0; i < 8 && i < nd_ckpt_module_count(c); i++)
        CHECK(strcmp(nd_ckpt_module_path(c, i), want[i]) == 0, "module %zu: %s, want %s", i, nd_ckpt_module_path(c, i), want[i]);

    CHECK_EQ_INT(nd_ckpt_has_module(c, "model.layers.0.self_attn"), 1);
    CHECK_EQ_INT(nd_ckpt_has_module(c, "model.layers.0.self_att"), 0);
    CHECK(nd_ckpt_module(c, "model.nothing", &m, &e) == ND_EXIT_BADINPUT, "missing module bound");
    CHECK(strstr(e.msg, "model.nothing.weight") != NULL, "message: %s", e.msg);

    /* release drops pages but the mapping stays readable with the same content */
    const nd_tview *t = nd_ckpt_find(c, "lm_head.bias");
    nd_ckpt_release(c, t);
    CHECK(t && nd_tview_get_f32(t, 3) == 0.5f, "content after release");
    nd_ckpt_close(c);
}

static void modelopt(const char *dir) {
    fx_config(dir, "{\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", \"scale_fmt\": \"ue8m0\", \"weight_block_size\": [128, 128]}");
    fx_write_text(dir, "hf_quant_config.json",
                  "{\"producer\": {\"name\": \"modelopt\", \"version\": \"0.37\"}, \"quantization\": {"
                  "\"quant_algo\": \"MIXED_PRECISION\", \"group_size\": 16, \"exclude_modules\": [\"*.attn.*\", \"head\", \"mtp.*\"],"
                  "\"quantized_layers\": {\"layers.0.ffn.experts\": {\"quant_algo\": \"NVFP4\", \"group_size\": 16}}}}");
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return;
    float is = 0.5f;
    fx_nvfp4_mo(&x, "layers.0.ffn.experts.0.w1", 32, 64, 0.25f, &is, 0x7e);
    fx_nvfp4_mo(&x, "layers.0.ffn.experts.0.w3", 32, 64, 0.25f, NULL, 0x7e);
    fx_fp8_e8m0(&x, "layers.0.attn.wq_a", 256, 128);
    fx_mxfp4(&x, "mtp.0.ffn.experts.0.w1", 32, 64);
    fx_dense(&x, "head", 64, 64);
    nd_ckpt *c = end_open_as(&x, dir, "modelopt");
    if (!c) return;
    nd_module m;
    bind_as(c, "layers.0.ffn.experts.0.w1", &m, ND_WF_NVFP4);
    CHECK_EQ_INT(m.conv, ND_CONV_MODELOPT);
    CHECK(m.weight_global_div == 4.0f, "div %g (1/weight_scale_2)", m.weight_global_div);
    CHECK(m.input_global_mult == 2.0f, "mult %g (1/input_scale)", m.input_global_mult);
    CHECK_EQ_INT(m.act_quant, 1);
    bind_ok(c, "layers.0.ffn.experts.0.w3", &m); /* W4A4 without an input scale */
    CHECK_EQ_INT(m.act_quant, 1);
    CHECK(isnan(m.input_global_mult), "mult %g", m.input_global_mult);
    bind_as(c, "layers.0.attn.wq_a", &m, ND_WF_FP8);
    CHECK_EQ_INT(m.fp8_scale_kind, ND_FP8_SCALE_BLOCK_E8M0);
    CHECK_EQ_INT(m.bn, 128);
    CHECK_EQ_INT(m.conv, ND_CONV_DEEPSEEK);
    bind_as(c, "mtp.0.ffn.experts.0.w1", &m, ND_WF_MXFP4);
    CHECK_EQ_INT(m.in_features, 64);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "layers.0.ffn.experts.0.w1"), 0);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "layers.0.attn.wq_a"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "head"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "layers.1.ffn.experts.0.w1"), 1); /* not in quantized_layers */
    nd_ckpt_close(c);
}

static void deepseek_fp8(const char *dir) {
    fx_config(dir, "{\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}");
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return;
    fx_fp8_block(&x, "model.layers.0.self_attn.q_b_proj", 300, 200, 128, 128, "weight_scale_inv");
    int64_t n = 48;
    float ch[48], one = 0.02f;
    for (int i = 0; i < 48; i++) ch[i] = 0.01f + 0.001f * (float)i;
    {
        int64_t sh[2] = {48, 32};
        uint8_t *w = fx_alloc(&x, 48 * 32);
        fx_add(&x, "chan.weight", ND_DT_F8_E4M3, 2, sh, w);
        fx_add(&x, "chan.weight_scale", ND_DT_F32, 1, &n, ch);
        uint8_t *w2 = fx_alloc(&x, 48 * 32);
        fx_add(&x, "tens.weight", ND_DT_F8_E4M3, 2, sh, w2);
        fx_f32(&x, "tens.weight_scale", 0, &one);
    }
    nd_ckpt *c = end_open_as(&x, dir, "fp8");
    if (!c) return;
    nd_module m;
    bind_ok(c, "model.layers.0.self_attn.q_b_proj", &m);
    CHECK_EQ_INT(m.fp8_scale_kind, ND_FP8_SCALE_BLOCK_F32);
    CHECK_EQ_INT(m.conv, ND_CONV_DEEPSEEK);
    CHECK(m.weight_scale && m.weight_scale->shape[0] == 3 && m.weight_scale->shape[1] == 2, "block shape");
    bind_ok(c, "chan", &m);
    CHECK_EQ_INT(m.fp8_scale_kind, ND_FP8_SCALE_CHANNEL);
    bind_ok(c, "tens", &m);
    CHECK_EQ_INT(m.fp8_scale_kind, ND_FP8_SCALE_TENSOR);
    nd_ckpt_close(c);
}

static void sharded(const char *dir) {
    fx_config(dir, NULL);
    fx x;
    float ig = 500.0f;
    if (fx_begin(&x, dir, "model-00001-of-00002.safetensors")) return;
    {
        int64_t sh[2] = {16, 16};
        uint8_t *p = fx_alloc(&x, 256);
        fx_add(&x, "m.weight_packed", ND_DT_U8, 2, sh, p);
    }
    fx_dense(&x, "lm_head", 8, 16);
    if (fx_end(&x)) return;
    if (fx_begin(&x, dir, "model-00002-of-00002.safetensors")) return;
    {
        int64_t ss[2] = {16, 2};
        uint8_t *s = fx_alloc(&x, 32);
        memset(s, 0x7e, 32);
        float wg = 64.0f;
        fx_add(&x, "m.weight_scale", ND_DT_F8_E4M3, 2, ss, s);
        fx_f32(&x, "m.weight_global_scale", 1, &wg);
        fx_f32(&x, "m.input_global_scale", 1, &ig);
    }
    if (fx_end(&x)) return;
    fx_write_text(dir, "model.safetensors.index.json",
                  "{\"metadata\": {\"total_size\": 0}, \"weight_map\": {"
                  "\"m.weight_packed\": \"model-00001-of-00002.safetensors\", \"lm_head.weight\": \"model-00001-of-00002.safetensors\","
                  "\"m.weight_scale\": \"model-00002-of-00002.safetensors\", \"m.weight_global_scale\": \"model-00002-of-00002.safetensors\","
                  "\"m.input_global_scale\": \"model-00002-of-00002.safetensors\"}}");
    nd_ckpt *c = open_ok(dir);
    if (!c) return;
    CHECK_EQ_INT(nd_ckpt_count(c), 5);
    nd_module m;
    nd_err e = {0};
    bind_ok(c, "m", &m);
    CHECK(m.weight && strstr(m.weight->file, "00001") && m.weight_scale && strstr(m.weight_scale->file, "00002"), "files");
    CHECK(m.weight_global_div == 64.0f && m.input_global_mult == 500.0f, "scales %g %g", m.weight_global_div, m.input_global_mult);
    CHECK_EQ_INT(m.act_quant, 1); /* no config: an input scale means W4A4 */
    nd_ckpt_close(c);
    /* the index maps a tensor the shard does not hold */
    fx_write_text(dir, "model.safetensors.index.json",
                  "{\"weight_map\": {\"m.weight_packed\": \"model-00001-of-00002.safetensors\","
                  " \"m.weight_scale\": \"model-00001-of-00002.safetensors\"}}");
    c = NULL;
    CHECK(nd_ckpt_open(dir, &c, &e) == ND_EXIT_BADINPUT, "missing mapped tensor accepted");
    CHECK(strstr(e.msg, "m.weight_scale") && strstr(e.msg, "00001"), "message: %s", e.msg);
    nd_ckpt_close(c);
}

/* One broken module "m" (its tensors zero-filled): binding must be bad input naming the tensor (and its
 * file when it exists) and what is wrong. */
typedef struct bad_tensor { const char *name; nd_dtype dt; int ndim; int64_t shape[2]; } bad_tensor;
typedef struct bad_module { const char *tensor, *what; bad_tensor t[3]; } bad_module;
static const bad_module g_bad[] = {
    {"m.weight_scale", "do not match", {{"m.weight_packed", ND_DT_U8, 2, {16, 16}}, {"m.weight_scale", ND_DT_F8_E4M3, 2, {16, 3}}}},
    {"m.weight_scale", "wrong dtype", {{"m.weight_packed", ND_DT_U8, 2, {16, 16}}, {"m.weight_scale", ND_DT_F32, 2, {16, 2}}}},
    {"m.weight_scale", "missing tensor", {{"m.weight_packed", ND_DT_U8, 2, {16, 16}}}},
    {"m.weight_global_scale", "wrong shape", {{"m.weight_packed", ND_DT_U8, 2, {16, 16}},
        {"m.weight_scale", ND_DT_F8_E4M3, 2, {16, 2}}, {"m.weight_global_scale", ND_DT_F32, 2, {2, 2}}}},
    {"m.weight_global_scale", "not a float type", {{"m.weight_packed", ND_DT_U8, 2, {16, 16}},
        {"m.weight_scale", ND_DT_F8_E4M3, 2, {16, 2}}, {"m.weight_global_scale", ND_DT_I32, 1, {1}}}},
    {"m.bias", "bias does not match", {{"m.weight", ND_DT_BF16, 2, {4, 8}}, {"m.bias", ND_DT_F32, 1, {5}}}},
    {"m.weight_scale_inv", "do not match", {{"m.weight", ND_DT_F8_E4M3, 2, {200, 64}}, {"m.weight_scale_inv", ND_DT_F32, 2, {1, 1}}}},
    {"m.scale", "do not match", {{"m.weight", ND_DT_U8, 2, {16, 32}}, {"m.scale", ND_DT_F8_E8M0, 2, {16, 4}}}},
    {"m.weight_packed", "multiple of 16", {{"m.weight_packed", ND_DT_U8, 2, {4, 12}}, {"m.weight_scale", ND_DT_F8_E4M3, 2, {4, 1}}}},
};
static void bind_error(const char *dir, const bad_module *b) {
    fx_config(dir, NULL);
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return;
    for (const bad_tensor *t = b->t; t < b->t + 3 && t->name; t++) {
        size_t bytes = nd_dtype_size(t->dt);
        for (int d = 0; d < t->ndim; d++) bytes *= (size_t)t->shape[d];
        fx_add(&x, t->name, t->dt, t->ndim, t->shape, fx_alloc(&x, bytes));
    }
    if (fx_end(&x)) return;
    nd_ckpt *c = open_ok(dir);
    if (!c) return;
    nd_module m;
    nd_err e = {0};
    CHECK(nd_ckpt_module(c, "m", &m, &e) == ND_EXIT_BADINPUT, "%s: bound", b->what);
    CHECK(strstr(e.msg, b->tensor) && strstr(e.msg, b->what), "%s: message: %s", b->what, e.msg);
    nd_ckpt_close(c);
}

/* gpt-oss's fused MXFP4 experts (quant_method mxfp4) as per-expert views, and compressed-tensors'
 * mxfp4-pack-quantized (weight_packed + U8 exponents). */
static void mxfp4_layouts(const char *dir) {
    fx_config(dir, "{\"quant_method\": \"mxfp4\", \"modules_to_not_convert\": [\"model.layers.*.self_attn\", "
                   "\"model.layers.*.mlp.router\", \"model.embed_tokens\", \"lm_head\"]}");
    fx x;
    if (fx_begin(&x, dir, "model.safetensors")) return;
    const int64_t E = 3, N = 8, K = 64, G = K / 32;
    int64_t sb[4] = {E, N, G, 16}, ss[3] = {E, N, G}, sbias[2] = {E, N};
    uint8_t *blocks = fx_alloc(&x, (size_t)(E * N * K / 2)), *scales = fx_alloc(&x, (size_t)(E * N * G));
    uint16_t *bias = fx_alloc(&x, sizeof(uint16_t) * (size_t)(E * N));
    for (int64_t i = 0; i < E * N * K / 2; i++) blocks[i] = (uint8_t)(i * 29 + 5);
    for (int64_t i = 0; i < E * N * G; i++) scales[i] = (uint8_t)(120 + i % 11);
    for (int64_t i = 0; i < E * N; i++) bias[i] = nd_bf16_from_f32(0.125f * (float)i);
    fx_add(&x, "model.layers.0.mlp.experts.gate_up_proj_blocks", ND_DT_U8, 4, sb, blocks);
    fx_add(&x, "model.layers.0.mlp.experts.gate_up_proj_scales", ND_DT_U8, 3, ss, scales);
    fx_add(&x, "model.layers.0.mlp.experts.gate_up_proj_bias", ND_DT_BF16, 2, sbias, bias);
    fx_dense(&x, "model.layers.0.self_attn.q_proj", 64, 64);
    nd_ckpt *c = end_open_as(&x, dir, "mxfp4");
    if (!c) return;
    CHECK_EQ_INT((int)nd_ckpt_count(c), 4); /* the stored tensors only, not the views */
    int found = 0;
    for (size_t i = 0; i < nd_ckpt_module_count(c); i++)
        found += !strcmp(nd_ckpt_module_path(c, i), "model.layers.0.mlp.experts.2.gate_up_proj");
    CHECK_EQ_INT(found, 1);
    CHECK_EQ_INT(nd_ckpt_has_module(c, "model.layers.0.mlp.experts.1.gate_up_proj"), 1);
    CHECK_EQ_INT(nd_ckpt_has_module(c, "model.layers.0.mlp.experts.3.gate_up_proj"), 0);
    nd_module m;
    nd_err e = {0};
    bind_as(c, "model.layers.0.mlp.experts.1.gate_up_proj", &m, ND_WF_MXFP4);
    CHECK_EQ_INT(m.out_features, N);
    CHECK_EQ_INT(m.in_features, K);
    CHECK_EQ_INT(m.act_quant, 0);
    const uint8_t *wd = m.weight->data, *sd = m.weight_scale->data;
    const uint8_t *b0 = nd_ckpt_find(c, "model.layers.0.mlp.experts.gate_up_proj_blocks")->data;
    const uint8_t *s0 = nd_ckpt_find(c, "model.layers.0.mlp.experts.gate_up_proj_scales")->data;
    CHECK(wd == b0 + 1 * N * K / 2 && sd == s0 + 1 * N * G, "expert 1's slices: weight at +%td, scales at +%td", wd - b0, sd - s0);
    CHECK_EQ_INT(m.weight_scale->dtype, ND_DT_F8_E8M0);
    CHECK(m.bias && m.bias->shape[0] == N && nd_tview_get_f32(m.bias, 2) == 0.125f * (float)(N + 2), "bias of expert 1: %g",
          m.bias ? nd_tview_get_f32(m.bias, 2) : -1.0f);
    /* decoded on the CPU backend: element j of row r = e2m1(nibble) * 2^(scale - 127) */
    nd_backend *be = NULL;
    if (nd_backend_cpu_create(&be, &e) == 0) {
        float out[8 * 64];
        CHECK(be->dequant_mxfp4(be, wd, sd, N, K, out, &e) == 0, "%s", e.msg);
        int bad = 0;
        for (int64_t r = 0; r < N; r++)
            for (int64_t j = 0; j < K; j++) {
                uint8_t byte = b0[(1 * N + r) * K / 2 + j / 2], code = (j & 1) ? byte >> 4 : byte & 15;
                float want = nd_e2m1_to_f32(code) * ldexpf(1.0f, (int)s0[(1 * N + r) * G + j / 32] - 127);
                bad += out[r * K + j] != want;
            }
        CHECK_EQ_INT(bad, 0);
        be->destroy(be);
    }
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "model.layers.0.self_attn.q_proj"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "lm_head"), 1);
    CHECK_EQ_INT(nd_ckpt_module_ignored(c, "model.layers.0.mlp.experts.1.gate_up_proj"), 0);
    nd_ckpt_close(c);

    /* scales that do not match the blocks, and blocks without scales: exit 2 naming the tensor */
    for (int k = 0; k < 2; k++) {
        if (fx_begin(&x, dir, "model.safetensors")) return;
        uint8_t *bb = fx_alloc(&x, (size_t)(E * N * K / 2)), *sc = fx_alloc(&x, (size_t)(E * N * (G + 1)));
        int64_t bad_ss[3] = {E, N, G + 1};
        fx_add(&x, "model.layers.0.mlp.experts.down_proj_blocks", ND_DT_U8, 4, sb, bb);
        if (k == 0) fx_add(&x, "model.layers.0.mlp.experts.down_proj_scales", ND_DT_U8, 3, bad_ss, sc);
        if (fx_end(&x)) return;
        nd_ckpt *bc = NULL;
        e.msg[0] = 0;
        int rc = nd_ckpt_open(dir, &bc, &e);
        CHECK(rc == ND_EXIT_BADINPUT && strstr(e.msg, k ? "missing tensor 'model.layers.0.mlp.experts.down_proj_scales'"
                                                        : "'model.layers.0.mlp.experts.down_proj_scales'"),
              "rc %d: %s", rc, e.msg);
        nd_ckpt_close(bc);
    }

    /* compressed-tensors MXFP4 (W4A4 scheme MXFP4: 4-bit input activations per 32) */
    fx_config(dir, "{\"quant_method\": \"compressed-tensors\", \"format\": \"mxfp4-pack-quantized\", \"config_groups\": {"
                   "\"g\": {\"targets\": [\"Linear\"], \"weights\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"group\", "
                   "\"group_size\": 32}, \"input_activations\": {\"num_bits\": 4, \"type\": \"float\", \"strategy\": \"group\", "
                   "\"group_size\": 32, \"dynamic\": true}}}, \"ignore\": [\"lm_head\"]}");
    if (fx_begin(&x, dir, "model.safetensors")) return;
    int64_t sp[2] = {N, K / 2}, sc2[2] = {N, G};
    uint8_t *pk = fx_alloc(&x, (size_t)(N * K / 2)), *ex = fx_alloc(&x, (size_t)(N * G));
    memset(ex, 127, (size_t)(N * G));
    fx_add(&x, "model.layers.0.mlp.down_proj.weight_packed", ND_DT_U8, 2, sp, pk);
    fx_add(&x, "model.layers.0.mlp.down_proj.weight_scale", ND_DT_U8, 2, sc2, ex);
    if (fx_end(&x)) return;
    if (!(c = open_ok(dir))) return;
    bind_as(c, "model.layers.0.mlp.down_proj", &m, ND_WF_MXFP4);
    CHECK_EQ_INT(m.conv, ND_CONV_CT);
    CHECK_EQ_INT(m.in_features, K);
    CHECK_EQ_INT(m.act_quant, 1);
    nd_ckpt_close(c);
}

int main(void) {
    char dir[256];
    const char *tags[] = {"ct", "mo", "fp8", "shard", "bind", "mx"};
    char dirs[6][256];
    for (int i = 0; i < 6; i++) if (fx_tmpdir(dirs[i], sizeof dirs[i], tags[i])) return 1;
    ct(dirs[0]);
    modelopt(dirs[1]);
    deepseek_fp8(dirs[2]);
    sharded(dirs[3]);
    mxfp4_layouts(dirs[5]);
    snprintf(dir, sizeof dir, "%s", dirs[4]);
    for (size_t i = 0; i < sizeof g_bad / sizeof *g_bad; i++) bind_error(dir, &g_bad[i]);
    for (int i = 0; i < 6; i++) fx_rmrf(dirs[i]);
    return nd_test_report("test_module");
}
