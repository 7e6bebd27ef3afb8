/* gen_bad_input.c — writes the broken-checkpoint corpus under OUTDIR/<case>/ (committed as
 * tests/bad-input/). Run once when a case is added: `gen_bad_input tests/bad-input`.
 *
 * Each case is a checkpoint folder plus a file `expect`: one substring per line that the error
 * message of `nvfp4dbg inspect CASE` must contain (the file it names, then the problem). Every
 * case must exit 2. Headers are written by hand, not with nd_st_writer, so that they can be wrong.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static const char *root;
static char cur[1024];
static int failures;

/* Write bytes to cur/name. */
static void put(const char *name, const void *data, size_t n) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", cur, name);
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n || fclose(f)) { fprintf(stderr, "cannot write %s\n", p); failures++; }
}

/* Text with ' standing for " (keeps the JSON below readable). */
static void put_json(const char *name, const char *text) {
    char *t = strdup(text);
    for (char *c = t; *c; c++) if (*c == '\'') *c = '"';
    put(name, t, strlen(t));
    free(t);
}

static void begin(const char *name, const char *expect) {
    snprintf(cur, sizeof cur, "%s/%s", root, name);
    if (mkdir(cur, 0755) && errno != EEXIST) { fprintf(stderr, "cannot create %s\n", cur); failures++; }
    char e[1024];
    snprintf(e, sizeof e, "%s\n", expect);
    for (char *c = e; *c; c++) if (*c == '|') *c = '\n';
    put("expect", e, strlen(e));
}

/* A safetensors file: declared header length, header text (' for "), then data_len zero bytes. */
static void st_len(const char *name, uint64_t declared, const char *header, size_t data_len) {
    char *h = strdup(header);
    for (char *c = h; *c; c++) if (*c == '\'') *c = '"';
    size_t hl = strlen(h), n = 8 + hl + data_len;
    unsigned char *b = calloc(1, n);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)(declared >> (8 * i));
    memcpy(b + 8, h, hl);
    put(name, b, n);
    free(b);
    free(h);
}
static void st(const char *name, const char *header, size_t data_len) {
    char *h = strdup(header);
    st_len(name, strlen(h), header, data_len);
    free(h);
}

#define CFG "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 2"
static void cfg(void) { put_json("config.json", CFG "}"); }
static void cfg_q(const char *q) {
    char b[2048];
    snprintf(b, sizeof b, CFG ", 'quantization_config': %s}", q);
    put_json("config.json", b);
}
#define W8 "'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}"
static void ok_model(void) { st("model.safetensors", "{" W8 "}", 8); }

/* NVFP4 module m: packed [16,16] U8 (256 bytes) + the given scale entries after it. */
#define PACKED "'m.weight_packed': {'dtype': 'U8', 'shape': [16, 16], 'data_offsets': [0, 256]}"

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: gen_bad_input OUTDIR\n"); return 2; }
    root = argv[1];
    mkdir(root, 0755);

    /* ---- safetensors container ---- */
    begin("truncated_file", "model.safetensors|truncated");
    cfg();
    put("model.safetensors", "\x05\x00\x00", 3);

    begin("truncated_data", "model.safetensors|past the end of the data");
    cfg();
    st("model.safetensors", "{" W8 "}", 4);

    begin("header_length_past_end", "model.safetensors|runs past the end of the file");
    cfg();
    st_len("model.safetensors", 1000, "{" W8 "}", 8);

    begin("header_length_huge", "model.safetensors|larger than the");
    cfg();
    st_len("model.safetensors", 0xffffffffffffull, "{" W8 "}", 8);

    begin("header_not_json", "model.safetensors|not valid JSON");
    cfg();
    st("model.safetensors", "this is not JSON at all", 0);

    begin("header_nul_byte", "model.safetensors|not valid JSON");
    cfg();
    put("model.safetensors", "\x06\0\0\0\0\0\0\0{\"a\0\"}", 14);

    begin("header_not_object", "model.safetensors|not a JSON object");
    cfg();
    st("model.safetensors", "[1, 2, 3]", 0);

    begin("entry_not_object", "model.safetensors|'w'|not an object");
    cfg();
    st("model.safetensors", "{'w': 5}", 0);

    begin("unknown_dtype", "model.safetensors|'w'|unknown dtype \"Q4_K\"");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'Q4_K', 'shape': [2], 'data_offsets': [0, 1]}}", 1);

    begin("dtype_not_string", "model.safetensors|'w'|non-string \"dtype\"");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 7, 'shape': [2], 'data_offsets': [0, 8]}}", 8);

    begin("shape_size_mismatch", "model.safetensors|'w'|need 64 bytes but data_offsets span 32");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [4, 4], 'data_offsets': [0, 32]}}", 32);

    begin("overlapping_spans", "model.safetensors|overlap");
    cfg();
    st("model.safetensors", "{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},"
                            " 'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}", 12);

    begin("offsets_past_end", "model.safetensors|'w'|past the end of the data");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'U8', 'shape': [800], 'data_offsets': [0, 800]}}", 8);

    begin("offsets_reversed", "model.safetensors|'w'|begin 8 > end 0");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [8, 0]}}", 8);

    begin("offsets_negative", "model.safetensors|'w'|negative data_offsets");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [-8, 0]}}", 8);

    begin("offsets_not_pair", "model.safetensors|'w'|data_offsets");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0]}}", 8);

    begin("missing_offsets", "model.safetensors|'w'|data_offsets");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [2]}}", 8);

    begin("shape_product_overflow", "model.safetensors|'w'|overflows");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [4294967296, 4294967296, 16], 'data_offsets': [0, 0]}}", 0);

    begin("shape_bytes_overflow", "model.safetensors|'w'|overflows");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F64', 'shape': [4611686018427387904], 'data_offsets': [0, 0]}}", 0);

    begin("negative_dim", "model.safetensors|'w'|negative");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [-2], 'data_offsets': [0, 8]}}", 8);

    begin("non_integer_shape", "model.safetensors|'w'|shape[0] is not an integer");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [2.5], 'data_offsets': [0, 8]}}", 8);

    begin("string_shape", "model.safetensors|'w'|shape[1] is not an integer");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [1, '2'], 'data_offsets': [0, 8]}}", 8);

    begin("too_many_dims", "model.safetensors|'w'|9 dimensions");
    cfg();
    st("model.safetensors", "{'w': {'dtype': 'F32', 'shape': [1,1,1,1,1,1,1,1,2], 'data_offsets': [0, 8]}}", 8);

    begin("duplicate_tensor", "model.safetensors|duplicate tensor name");
    cfg();
    st("model.safetensors", "{" W8 ", " W8 "}", 8);

    begin("empty_tensor_name", "model.safetensors|empty name");
    cfg();
    st("model.safetensors", "{'': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}", 8);

    begin("metadata_not_string", "model.safetensors|__metadata__|'format' is not a string");
    cfg();
    st("model.safetensors", "{'__metadata__': {'format': 1}, " W8 "}", 8);

    /* ---- folder and shards ---- */
    begin("no_model_file", "no model.safetensors or model.safetensors.index.json");
    cfg();

    begin("missing_shard", "model-00002-of-00002.safetensors|is missing");
    cfg();
    st("model-00001-of-00002.safetensors", "{" W8 "}", 8);
    put_json("model.safetensors.index.json",
             "{'weight_map': {'w': 'model-00001-of-00002.safetensors', 'v': 'model-00002-of-00002.safetensors'}}");

    begin("shard_escapes_folder", "model.safetensors.index.json|'w'|\"../evil.safetensors\" is not a plain file name");
    cfg();
    put_json("model.safetensors.index.json", "{'weight_map': {'w': '../evil.safetensors'}}");

    begin("shard_in_subfolder", "model.safetensors.index.json|\"sub/model.safetensors\" is not a plain file name");
    cfg();
    put_json("model.safetensors.index.json", "{'weight_map': {'w': 'sub/model.safetensors'}}");

    begin("index_not_json", "model.safetensors.index.json|not valid JSON");
    cfg();
    ok_model();
    put_json("model.safetensors.index.json", "{'weight_map': ");

    begin("index_without_weight_map", "model.safetensors.index.json|weight_map");
    cfg();
    put_json("model.safetensors.index.json", "{'metadata': {}}");

    begin("tensor_not_in_shard", "model-00001-of-00001.safetensors|'v' is mapped to this shard|is not in it");
    cfg();
    st("model-00001-of-00001.safetensors", "{" W8 "}", 8);
    put_json("model.safetensors.index.json",
             "{'weight_map': {'w': 'model-00001-of-00001.safetensors', 'v': 'model-00001-of-00001.safetensors'}}");

    begin("duplicate_across_shards", "model-0000|tensor 'w' is also in");
    cfg();
    st("model-00001-of-00002.safetensors", "{" W8 "}", 8);
    st("model-00002-of-00002.safetensors", "{" W8 ", 'v': {'dtype': 'F32', 'shape': [1], 'data_offsets': [8, 12]}}", 12);
    put_json("model.safetensors.index.json",
             "{'weight_map': {'w': 'model-00001-of-00002.safetensors', 'v': 'model-00002-of-00002.safetensors'}}");

    /* ---- config.json ---- */
    begin("config_missing", "config.json|cannot open");
    ok_model();

    begin("config_not_json", "config.json|not valid JSON");
    put_json("config.json", "{'model_type': 'llama', 'hidden_size': 16,,}");
    ok_model();

    begin("config_not_object", "config.json|not a JSON object");
    put_json("config.json", "['llama']");
    ok_model();

    begin("config_wrong_type", "config.json|'hidden_size' must be an integer");
    put_json("config.json", "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': '16', 'num_hidden_layers': 1, 'num_attention_heads': 2}");
    ok_model();

    begin("config_missing_key", "config.json|required key 'num_hidden_layers' is missing");
    put_json("config.json", "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': 16, 'num_attention_heads': 2}");
    ok_model();

    begin("config_zero_heads", "config.json|'num_attention_heads' must be positive");
    put_json("config.json", "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 0}");
    ok_model();

    begin("config_kv_heads", "config.json|num_key_value_heads 3 does not divide num_attention_heads 2");
    put_json("config.json", CFG ", 'num_key_value_heads': 3}");
    ok_model();

    begin("config_layer_types", "config.json|'layer_types' must be a list of strings");
    put_json("config.json", CFG ", 'layer_types': 'sliding_attention'}");
    ok_model();

    begin("config_rope_scaling", "config.json|'rope_scaling.factor' must be a number");
    put_json("config.json", CFG ", 'rope_scaling': {'type': 'yarn', 'factor': 'sixteen'}}");
    ok_model();

    begin("config_model_type", "config.json|'model_type' must be a string");
    put_json("config.json", "{'model_type': 4, 'vocab_size': 32, 'hidden_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 2}");
    ok_model();

    /* ---- quantization config ---- */
    begin("modelopt_no_group_size", "hf_quant_config.json|quant_algo NVFP4 without group_size");
    cfg();
    ok_model();
    put_json("hf_quant_config.json", "{'producer': {'name': 'modelopt'}, 'quantization': {'quant_algo': 'NVFP4', 'exclude_modules': ['lm_head']}}");

    begin("modelopt_layer_no_group_size", "hf_quant_config.json|quantized_layers.layers.0.ffn.experts|without group_size");
    cfg();
    ok_model();
    put_json("hf_quant_config.json", "{'quantization': {'quant_algo': 'MIXED_PRECISION',"
                                     " 'quantized_layers': {'layers.0.ffn.experts': {'quant_algo': 'NVFP4'}}}}");

    begin("modelopt_embedded_no_group_size", "config.json|quant_algo NVFP4 without group_size");
    cfg_q("{'quant_method': 'modelopt', 'quant_algo': 'NVFP4'}");
    ok_model();

    begin("modelopt_group_size_32", "hf_quant_config.json|group_size 32");
    cfg();
    ok_model();
    put_json("hf_quant_config.json", "{'quantization': {'quant_algo': 'NVFP4', 'group_size': 32}}");

    begin("hf_quant_config_not_json", "hf_quant_config.json|not valid JSON");
    cfg();
    ok_model();
    put_json("hf_quant_config.json", "{'quantization': ");

    begin("ct_bad_regex", "config.json|bad regular expression \"re:([a-z\"");
    cfg_q("{'quant_method': 'compressed-tensors', 'config_groups': {}, 'ignore': ['re:([a-z']}");
    ok_model();

    begin("ct_targets_not_list", "config.json|config_groups.group_0.targets' must be a list");
    cfg_q("{'quant_method': 'compressed-tensors', 'config_groups': {'group_0': {'targets': 'Linear'}}}");
    ok_model();

    begin("quant_method_unknown", "config.json|quant_method \"gptq\" is not supported");
    cfg_q("{'quant_method': 'gptq', 'bits': 4}");
    ok_model();

    begin("fp8_block_size", "config.json|weight_block_size");
    cfg_q("{'quant_method': 'fp8', 'weight_block_size': [128, 0]}");
    ok_model();

    /* ---- modules whose tensors cannot be bound ---- */
    begin("wrong_scale_dtype", "model.safetensors|'m.weight_scale'|wrong dtype for NVFP4 block scales");
    cfg();
    st("model.safetensors", "{" PACKED ", 'm.weight_scale': {'dtype': 'I32', 'shape': [16, 2], 'data_offsets': [256, 384]}}", 384);

    /* [16, 4] would be K/16 = 2 padded to 4 (a kernel's padded buffer: bound, and named
     * scale_layout_mismatch by the audit); 3 columns are no padding of 2 */
    begin("packed_scale_mismatch", "model.safetensors|'m.weight_scale'|block scales do not match the weight");
    cfg();
    st("model.safetensors", "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 3], 'data_offsets': [256, 304]}}", 304);

    begin("missing_weight_scale", "missing tensor 'm.weight_scale'");
    cfg();
    st("model.safetensors", "{" PACKED ", 'm.weight_global_scale': {'dtype': 'F32', 'shape': [1], 'data_offsets': [256, 260]}}", 260);

    begin("missing_weight", "missing tensor 'm.weight'");
    cfg();
    st("model.safetensors", "{'m.weight_scale_2': {'dtype': 'F32', 'shape': [], 'data_offsets': [0, 4]},"
                            " 'm.input_scale': {'dtype': 'F32', 'shape': [], 'data_offsets': [4, 8]}}", 8);

    begin("global_scale_shape", "model.safetensors|'m.weight_global_scale'|wrong shape");
    cfg();
    st("model.safetensors", "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 2], 'data_offsets': [256, 288]},"
                            " 'm.weight_global_scale': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [288, 304]}}", 304);

    begin("global_scale_int", "model.safetensors|'m.input_global_scale'|not a float type");
    cfg();
    st("model.safetensors", "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 2], 'data_offsets': [256, 288]},"
                            " 'm.input_global_scale': {'dtype': 'I32', 'shape': [1], 'data_offsets': [288, 292]}}", 292);

    begin("fp8_block_scale_shape", "model.safetensors|'m.weight_scale_inv'|FP8 block scales do not match the weight");
    cfg_q("{'quant_method': 'fp8', 'weight_block_size': [128, 128]}");
    st("model.safetensors", "{'m.weight': {'dtype': 'F8_E4M3', 'shape': [256, 128], 'data_offsets': [0, 32768]},"
                            " 'm.weight_scale_inv': {'dtype': 'F32', 'shape': [1, 1], 'data_offsets': [32768, 32772]}}", 32772);

    begin("fp8_scale_dtype", "model.safetensors|'m.weight_scale'|FP8 weight scales must be F32");
    cfg();
    st("model.safetensors", "{'m.weight': {'dtype': 'F8_E4M3', 'shape': [4, 4], 'data_offsets': [0, 16]},"
                            " 'm.weight_scale': {'dtype': 'BF16', 'shape': [4], 'data_offsets': [16, 24]}}", 24);

    begin("mxfp4_scale_shape", "model.safetensors|'m.scale'|block scales do not match the weight");
    cfg();
    st("model.safetensors", "{'m.weight': {'dtype': 'U8', 'shape': [16, 32], 'data_offsets': [0, 512]},"
                            " 'm.scale': {'dtype': 'F8_E8M0', 'shape': [16, 1], 'data_offsets': [512, 528]}}", 528);

    begin("weight_dtype_unsupported", "model.safetensors|'m.weight'|unsupported weight dtype");
    cfg();
    st("model.safetensors", "{'m.weight': {'dtype': 'I64', 'shape': [2, 2], 'data_offsets': [0, 32]}}", 32);

    begin("bias_shape", "model.safetensors|'m.bias'|bias does not match the weight");
    cfg();
    st("model.safetensors", "{'m.weight': {'dtype': 'BF16', 'shape': [4, 4], 'data_offsets': [0, 32]},"
                            " 'm.bias': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [32, 38]}}", 38);

    return failures ? 1 : 0;
}
