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
/* config.json with q as its quantization_config */
#define CFG_Q(q) CFG ", 'quantization_config': " q "}"
#define W8 "'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}"
static void ok_model(void) { st("model.safetensors", "{" W8 "}", 8); }

/* NVFP4 module m: packed [16,16] U8 (256 bytes) + the given scale entries after it. */
#define PACKED "'m.weight_packed': {'dtype': 'U8', 'shape': [16, 16], 'data_offsets': [0, 256]}"

/* The cases made of config.json, model.safetensors and, when given, hf_quant_config.json (' for "):
 * config NULL is CFG's config; header NULL is ok_model's file, else the header and nbytes of zero data. */
typedef struct bad_case { const char *name, *expect, *config, *header; size_t nbytes; const char *hf_quant; } bad_case;
static const bad_case g_cases[] = {
    /* ---- safetensors container ---- */
    {"truncated_data", "model.safetensors|past the end of the data",
     .header = "{" W8 "}", .nbytes = 4},
    {"header_not_json", "model.safetensors|not valid JSON",
     .header = "this is not JSON at all", .nbytes = 0},
    {"header_not_object", "model.safetensors|not a JSON object",
     .header = "[1, 2, 3]", .nbytes = 0},
    {"entry_not_object", "model.safetensors|'w'|not an object",
     .header = "{'w': 5}", .nbytes = 0},
    {"unknown_dtype", "model.safetensors|'w'|unknown dtype \"Q4_K\"",
     .header = "{'w': {'dtype': 'Q4_K', 'shape': [2], 'data_offsets': [0, 1]}}", .nbytes = 1},
    {"dtype_not_string", "model.safetensors|'w'|non-string \"dtype\"",
     .header = "{'w': {'dtype': 7, 'shape': [2], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"shape_size_mismatch", "model.safetensors|'w'|need 64 bytes but data_offsets span 32",
     .header = "{'w': {'dtype': 'F32', 'shape': [4, 4], 'data_offsets': [0, 32]}}", .nbytes = 32},
    {"overlapping_spans", "model.safetensors|overlap",
     .header = "{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},"
              " 'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [4, 12]}}", .nbytes = 12},
    /* the safetensors library refuses a data area its tensors do not cover whole (round 24) */
    {"uncovered_gap", "model.safetensors|bytes [8, 16) of the data area belong to no tensor (before 'b')",
     .header = "{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]},"
              " 'b': {'dtype': 'F32', 'shape': [2], 'data_offsets': [16, 24]}}", .nbytes = 24},
    {"trailing_bytes", "model.safetensors|bytes [8, 24) at the end of the data area belong to no tensor",
     .header = "{'a': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}", .nbytes = 24},
    {"offsets_past_end", "model.safetensors|'w'|past the end of the data",
     .header = "{'w': {'dtype': 'U8', 'shape': [800], 'data_offsets': [0, 800]}}", .nbytes = 8},
    {"offsets_reversed", "model.safetensors|'w'|begin 8 > end 0",
     .header = "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [8, 0]}}", .nbytes = 8},
    {"offsets_negative", "model.safetensors|'w'|negative data_offsets",
     .header = "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [-8, 0]}}", .nbytes = 8},
    {"offsets_not_pair", "model.safetensors|'w'|data_offsets",
     .header = "{'w': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0]}}", .nbytes = 8},
    {"missing_offsets", "model.safetensors|'w'|data_offsets",
     .header = "{'w': {'dtype': 'F32', 'shape': [2]}}", .nbytes = 8},
    {"shape_product_overflow", "model.safetensors|'w'|overflows",
     .header = "{'w': {'dtype': 'F32', 'shape': [4294967296, 4294967296, 16], 'data_offsets': [0, 0]}}", .nbytes = 0},
    {"shape_bytes_overflow", "model.safetensors|'w'|overflows",
     .header = "{'w': {'dtype': 'F64', 'shape': [4611686018427387904], 'data_offsets': [0, 0]}}", .nbytes = 0},
    {"negative_dim", "model.safetensors|'w'|negative",
     .header = "{'w': {'dtype': 'F32', 'shape': [-2], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"non_integer_shape", "model.safetensors|'w'|shape[0] is not an integer",
     .header = "{'w': {'dtype': 'F32', 'shape': [2.5], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"string_shape", "model.safetensors|'w'|shape[1] is not an integer",
     .header = "{'w': {'dtype': 'F32', 'shape': [1, '2'], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"too_many_dims", "model.safetensors|'w'|9 dimensions",
     .header = "{'w': {'dtype': 'F32', 'shape': [1,1,1,1,1,1,1,1,2], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"duplicate_tensor", "model.safetensors|duplicate tensor name",
     .header = "{" W8 ", " W8 "}", .nbytes = 8},
    {"empty_tensor_name", "model.safetensors|empty name",
     .header = "{'': {'dtype': 'F32', 'shape': [2], 'data_offsets': [0, 8]}}", .nbytes = 8},
    {"metadata_not_string", "model.safetensors|__metadata__|'format' is not a string",
     .header = "{'__metadata__': {'format': 1}, " W8 "}", .nbytes = 8},
    /* ---- config.json ---- */
    {"config_not_json", "config.json|not valid JSON",
     .config = "{'model_type': 'llama', 'hidden_size': 16,,}"},
    {"config_not_object", "config.json|not a JSON object",
     .config = "['llama']"},
    {"config_wrong_type", "config.json|'hidden_size' must be an integer",
     .config = "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': '16', 'num_hidden_layers': 1, 'num_attention_heads': 2}"},
    {"config_missing_key", "config.json|required key 'num_hidden_layers' is missing",
     .config = "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': 16, 'num_attention_heads': 2}"},
    {"config_zero_heads", "config.json|'num_attention_heads' must be positive",
     .config = "{'model_type': 'llama', 'vocab_size': 32, 'hidden_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 0}"},
    {"config_kv_heads", "config.json|num_key_value_heads 3 does not divide num_attention_heads 2",
     .config = CFG ", 'num_key_value_heads': 3}"},
    {"config_layer_types", "config.json|'layer_types' must be a list of strings",
     .config = CFG ", 'layer_types': 'sliding_attention'}"},
    {"config_rope_scaling", "config.json|'rope_scaling.factor' must be a number",
     .config = CFG ", 'rope_scaling': {'type': 'yarn', 'factor': 'sixteen'}}"},
    {"config_model_type", "config.json|'model_type' must be a string",
     .config = "{'model_type': 4, 'vocab_size': 32, 'hidden_size': 16, 'num_hidden_layers': 1, 'num_attention_heads': 2}"},
    /* ---- quantization config ---- */
    {"modelopt_no_group_size", "hf_quant_config.json|quant_algo NVFP4 without group_size",
     .hf_quant = "{'producer': {'name': 'modelopt'}, 'quantization': {'quant_algo': 'NVFP4', 'exclude_modules': ['lm_head']}}"},
    {"modelopt_layer_no_group_size", "hf_quant_config.json|quantized_layers.layers.0.ffn.experts|without group_size",
     .hf_quant = "{'quantization': {'quant_algo': 'MIXED_PRECISION',"
              " 'quantized_layers': {'layers.0.ffn.experts': {'quant_algo': 'NVFP4'}}}}"},
    {"modelopt_embedded_no_group_size", "config.json|quant_algo NVFP4 without group_size",
     .config = CFG_Q("{'quant_method': 'modelopt', 'quant_algo': 'NVFP4'}")},
    {"modelopt_group_size_32", "hf_quant_config.json|group_size 32",
     .hf_quant = "{'quantization': {'quant_algo': 'NVFP4', 'group_size': 32}}"},
    {"hf_quant_config_not_json", "hf_quant_config.json|not valid JSON",
     .hf_quant = "{'quantization': "},
    {"ct_bad_regex", "config.json|bad regular expression \"re:([a-z\"",
     .config = CFG_Q("{'quant_method': 'compressed-tensors', 'config_groups': {}, 'ignore': ['re:([a-z']}")},
    {"ct_targets_not_list", "config.json|config_groups.group_0.targets' must be a list",
     .config = CFG_Q("{'quant_method': 'compressed-tensors', 'config_groups': {'group_0': {'targets': 'Linear'}}}")},
    {"quant_method_unknown", "config.json|quant_method \"gptq\" is not supported",
     .config = CFG_Q("{'quant_method': 'gptq', 'bits': 4}")},
    {"fp8_block_size", "config.json|weight_block_size",
     .config = CFG_Q("{'quant_method': 'fp8', 'weight_block_size': [128, 0]}")},
    /* ---- modules whose tensors cannot be bound ---- */
    {"wrong_scale_dtype", "model.safetensors|'m.weight_scale'|wrong dtype for NVFP4 block scales",
     .header = "{" PACKED ", 'm.weight_scale': {'dtype': 'I32', 'shape': [16, 2], 'data_offsets': [256, 384]}}", .nbytes = 384},
    /* [16, 4] would be K/16 = 2 padded to 4 (a kernel's padded buffer: bound, and named
     * scale_layout_mismatch by the audit); 3 columns are no padding of 2 */
    {"packed_scale_mismatch", "model.safetensors|'m.weight_scale'|block scales do not match the weight",
     .header = "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 3], 'data_offsets': [256, 304]}}", .nbytes = 304},
    {"missing_weight_scale", "missing tensor 'm.weight_scale'",
     .header = "{" PACKED ", 'm.weight_global_scale': {'dtype': 'F32', 'shape': [1], 'data_offsets': [256, 260]}}", .nbytes = 260},
    {"missing_weight", "missing tensor 'm.weight'",
     .header = "{'m.weight_scale_2': {'dtype': 'F32', 'shape': [], 'data_offsets': [0, 4]},"
              " 'm.input_scale': {'dtype': 'F32', 'shape': [], 'data_offsets': [4, 8]}}", .nbytes = 8},
    {"global_scale_shape", "model.safetensors|'m.weight_global_scale'|wrong shape",
     .header = "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 2], 'data_offsets': [256, 288]},"
              " 'm.weight_global_scale': {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [288, 304]}}", .nbytes = 304},
    {"global_scale_int", "model.safetensors|'m.input_global_scale'|not a float type",
     .header = "{" PACKED ", 'm.weight_scale': {'dtype': 'F8_E4M3', 'shape': [16, 2], 'data_offsets': [256, 288]},"
              " 'm.input_global_scale': {'dtype': 'I32', 'shape': [1], 'data_offsets': [288, 292]}}", .nbytes = 292},
    {"fp8_block_scale_shape", "model.safetensors|'m.weight_scale_inv'|FP8 block scales do not match the weight",
     .config = CFG_Q("{'quant_method': 'fp8', 'weight_block_size': [128, 128]}"),
     .header = "{'m.weight': {'dtype': 'F8_E4M3', 'shape': [256, 128], 'data_offsets': [0, 32768]},"
              " 'm.weight_scale_inv': {'dtype': 'F32', 'shape': [1, 1], 'data_offsets': [32768, 32772]}}", .nbytes = 32772},
    {"fp8_scale_dtype", "model.safetensors|'m.weight_scale'|FP8 weight scales must be F32",
     .header = "{'m.weight': {'dtype': 'F8_E4M3', 'shape': [4, 4], 'data_offsets': [0, 16]},"
              " 'm.weight_scale': {'dtype': 'BF16', 'shape': [4], 'data_offsets': [16, 24]}}", .nbytes = 24},
    {"mxfp4_scale_shape", "model.safetensors|'m.scale'|block scales do not match the weight",
     .header = "{'m.weight': {'dtype': 'U8', 'shape': [16, 32], 'data_offsets': [0, 512]},"
              " 'm.scale': {'dtype': 'F8_E8M0', 'shape': [16, 1], 'data_offsets': [512, 528]}}", .nbytes = 528},
    {"weight_dtype_unsupported", "model.safetensors|'m.weight'|unsupported weight dtype",
     .header = "{'m.weight': {'dtype': 'I64', 'shape': [2, 2], 'data_offsets': [0, 32]}}", .nbytes = 32},
    {"bias_shape", "model.safetensors|'m.bias'|bias does not match the weight",
     .header = "{'m.weight': {'dtype': 'BF16', 'shape': [4, 4], 'data_offsets': [0, 32]},"
              " 'm.bias': {'dtype': 'BF16', 'shape': [3], 'data_offsets': [32, 38]}}", .nbytes = 38},
};

int main(int argc, char **argv) {
    if (argc != 2) { fprintf(stderr, "usage: gen_bad_input OUTDIR\n"); return 2; }
    root = argv[1];
    mkdir(root, 0755);

    /* ---- safetensors container ---- */
    begin("truncated_file", "model.safetensors|truncated");
    cfg();
    put("model.safetensors", "\x05\x00\x00", 3);

    begin("header_length_past_end", "model.safetensors|runs past the end of the file");
    cfg();
    st_len("model.safetensors", 1000, "{" W8 "}", 8);

    begin("header_length_huge", "model.safetensors|larger than the");
    cfg();
    st_len("model.safetensors", 0xffffffffffffull, "{" W8 "}", 8);

    begin("header_nul_byte", "model.safetensors|not valid JSON");
    cfg();
    put("model.safetensors", "\x06\0\0\0\0\0\0\0{\"a\0\"}", 14);

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

    for (size_t i = 0; i < sizeof g_cases / sizeof *g_cases; i++) {
        const bad_case *c = &g_cases[i];
        begin(c->name, c->expect);
        if (c->config) put_json("config.json", c->config);
        else cfg();
        if (c->header) st("model.safetensors", c->header, c->nbytes);
        else ok_model();
        if (c->hf_quant) put_json("hf_quant_config.json", c->hf_quant);
    }
    return failures ? 1 : 0;
}
