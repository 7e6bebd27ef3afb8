/* ckpt.h — a checkpoint folder as the rest of nvfp4dbg sees it.
 *
 * src/ckpt is the only code that knows file formats and scale conventions. It maps every
 * safetensors file (mmap, header validated as untrusted input), parses config.json and the
 * quantization config (compressed-tensors, ModelOpt hf_quant_config.json / quant_method
 * modelopt, DeepSeek FP8), and binds a module path to its tensors and its scales with their
 * meaning normalised: nothing above this layer knows whether a scale was stored as a divisor
 * or as a multiplier.
 */
#ifndef ND_CKPT_H
#define ND_CKPT_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "numerics/nd_dtype.h"

#define ND_MAX_DIMS 8

/* One tensor in a mapped safetensors file. data points into the read-only mapping; safetensors
 * packs tensors back to back, so data need not be aligned for its dtype: read it with memcpy. */
typedef struct nd_tview {
    const char *name;
    nd_dtype dtype;
    int ndim;
    int64_t shape[ND_MAX_DIMS];
    int64_t numel;
    const void *data;
    size_t nbytes;
    const char *file;      /* path of the safetensors file holding it */
} nd_tview;

typedef struct nd_ckpt nd_ckpt;

/* ---- safetensors (also usable alone, e.g. for bundles or captured activations) ---- */
typedef struct nd_st_file nd_st_file;
/* Map and validate one file. Errors (exit 2) name the file and the problem. */
int nd_st_open(const char *path, nd_st_file **out, nd_err *e);
void nd_st_close(nd_st_file *f);
size_t nd_st_count(const nd_st_file *f);
const nd_tview *nd_st_at(const nd_st_file *f, size_t i);
const nd_tview *nd_st_find(const nd_st_file *f, const char *name);
/* The optional "__metadata__" string map; NULL when absent. */
const char *nd_st_metadata(const nd_st_file *f, const char *key);
/* Element i of a float-valued tensor (F32 F64 BF16 F16 F8_E4M3 F8_E8M0) as float; NaN for other
 * dtypes or an index out of range. Safe on unaligned data. */
float nd_tview_get_f32(const nd_tview *t, int64_t i);
/* safetensors dtype string <-> nd_dtype. */
nd_dtype nd_dtype_from_str(const char *s);
const char *nd_dtype_str(nd_dtype t);

/* ---- model configuration (config.json) ---- */
typedef struct nd_model_cfg {
    char model_type[64];
    char architecture[96];
    int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads;
    int64_t head_dim, q_lora_rank, o_lora_rank, o_groups, qk_rope_head_dim, kv_lora_rank;
    int64_t qk_nope_head_dim, v_head_dim, intermediate_size, moe_intermediate_size;
    int64_t hc_mult, hc_sinkhorn_iters, n_routed_experts, n_shared_experts, num_experts_per_tok;
    int64_t n_group, topk_group, first_k_dense_replace, num_hash_layers, sliding_window;
    double hc_eps, rms_norm_eps, routed_scaling_factor, swiglu_limit, rope_theta, compress_rope_theta;
    char scoring_func[32];
    int norm_topk_prob;
    /* rope_scaling (YaRN) */
    char rope_type[32];
    double rope_factor, rope_orig_max_pos, rope_beta_fast, rope_beta_slow, rope_mscale, rope_mscale_all_dim;
    double rope_low_freq_factor, rope_high_freq_factor; /* rope_type llama3 (defaults 1 and 4) */
    /* rope_type yarn as transformers reads it: truncate (default 1: the correction range floored and
     * ceiled), attention_factor (0 when absent), whether mscale was given (its default is no value) */
    int rope_truncate, rope_mscale_set;
    double rope_attention_factor;
    int tie_word_embeddings;    /* lm_head is the embedding matrix (top-level key, else text_config's) */
    /* per-layer layer types ("sliding_attention", "compressed_sparse_attention",
     * "heavily_compressed_attention", ...) and compress ratios when the config has them */
    int n_layer_types;
    char (*layer_types)[48];
    int64_t *compress_ratios;
    int n_compress_ratios;
    void *json;   /* the parsed document (json_t *), for keys the struct does not hold */
} nd_model_cfg;

/* Numeric config key by name ("rms_norm_eps", "rope_scaling.factor"); 0 ok, 2 absent/not number. */
int nd_cfg_number(const nd_model_cfg *c, const char *key, double *out);
/* Any config key as a json_t * (dotted path, text_config too); NULL when absent or null. */
const void *nd_cfg_value(const nd_model_cfg *c, const char *key);
/* String config key; NULL when absent. */
const char *nd_cfg_string(const nd_model_cfg *c, const char *key);

/* ---- weight formats and conventions ---- */
typedef enum nd_wfmt {
    ND_WF_DENSE = 0,  /* BF16/F16/F32 weight */
    ND_WF_NVFP4,      /* e2m1 codes U8 [N,K/2] + e4m3 [N,K/16] + per-tensor global */
    ND_WF_MXFP4,      /* e2m1 codes U8 [N,K/2] + e8m0 [N,K/32] (2^(b-127)), no global scale */
    ND_WF_FP8,        /* e4m3 weight + scale (tensor, channel, or 128x128 block F32 / E8M0) */
} nd_wfmt;

typedef enum nd_conv {
    ND_CONV_NONE = 0,
    ND_CONV_CT,       /* compressed-tensors: weight_global_scale / input_global_scale are divisors (2688/amax) */
    ND_CONV_MODELOPT, /* ModelOpt: weight_scale_2 / input_scale are multipliers (amax/2688) */
    ND_CONV_DEEPSEEK, /* DeepSeek FP8: weight_scale_inv / .scale multipliers */
} nd_conv;

typedef enum nd_ckpt_fmt {
    ND_CKPT_UNQUANTIZED = 0, ND_CKPT_COMPRESSED_TENSORS, ND_CKPT_MODELOPT, ND_CKPT_FP8,
    ND_CKPT_MXFP4,    /* quant_method "mxfp4" (gpt-oss: fused *_blocks / *_scales experts, mx_experts.c) */
} nd_ckpt_fmt;

/* A linear module bound to its tensors. Scalars are normalised:
 *   weight value   = e2m1 * block_scale / weight_global_div           (NVFP4)
 *   quantizer mult = input_global_mult  (2688/amax of the calibration input when healthy)
 * whatever the on-disk convention. The raw tensors stay available for inspect and bundles. */
typedef struct nd_module {
    char path[256];             /* e.g. "model.layers.0.self_attn.q_a_proj" */
    nd_wfmt wfmt;
    nd_conv conv;
    int64_t out_features, in_features;
    const nd_tview *weight;       /* dense weight, packed codes, or FP8 weight */
    const nd_tview *weight_scale; /* block scales (e4m3 / e8m0 / f32), NULL for dense */
    const nd_tview *weight_global;/* CT weight_global_scale or ModelOpt weight_scale_2 (NVFP4) */
    const nd_tview *input_global; /* CT input_global_scale or ModelOpt input_scale; NULL if absent */
    const nd_tview *bias;
    int fp8_scale_kind, bn, bk;   /* nd_fp8_scale_kind and block sizes (FP8) */
    int act_quant;                /* 1 when activations are quantized to NVFP4 (W4A4) */
    float weight_global_div;      /* NVFP4: divisor of e4m3 scales (CT value, or 1/weight_scale_2) */
    float input_global_mult;      /* NVFP4 W4A4: quantizer multiplier as the checkpoint means it */
    int n_shards;                 /* >1 when the global scales are per fused shard */
    int block;                    /* NVFP4 elements per stored block scale: 16, or 32 (ModelOpt
                                   * W4A8_NVFP4_FP8: weight_scale [N, K/32]; readers of the bytes
                                   * that pair them with codes go through nd_module_sf16) */
    int act_fp8;                  /* activations FP8 E4M3 per tensor with the static input_scale (W4A8) */
    const nd_tview *pre_quant_scale; /* ModelOpt AWQ (NVFP4_AWQ): [K], the input times it before the
                                   * linear (its weight holds the inverse); NULL when absent or folded
                                   * into the layer before at export */
    float global_num;             /* the healthy weight divisor is global_num / amax(W): 2688 (6 x 448),
                                   * 448 for W4A8_NVFP4_FP8 (block scales up to 448/6) */
} nd_module;

/* ---- the checkpoint folder ---- */
int nd_ckpt_open(const char *dir, nd_ckpt **out, nd_err *e);
void nd_ckpt_close(nd_ckpt *c);
const char *nd_ckpt_dir(const nd_ckpt *c);
const nd_model_cfg *nd_ckpt_config(const nd_ckpt *c);
nd_ckpt_fmt nd_ckpt_format(const nd_ckpt *c);
const char *nd_ckpt_format_str(const nd_ckpt *c); /* "compressed-tensors", "modelopt", "fp8", "mxfp4", "unquantized" */
size_t nd_ckpt_count(const nd_ckpt *c);
const nd_tview *nd_ckpt_at(const nd_ckpt *c, size_t i);
/* Exact tensor name; NULL when absent. */
const nd_tview *nd_ckpt_find(const nd_ckpt *c, const char *name);
/* Bind a module by path (without a tensor suffix). Exit 2 with a message naming the checkpoint
 * and the missing or malformed tensor when the module cannot be bound. */
int nd_ckpt_module(const nd_ckpt *c, const char *path, nd_module *out, nd_err *e);
/* 1 if the module path has any tensor in the checkpoint. */
int nd_ckpt_has_module(const nd_ckpt *c, const char *path);
/* The other half of an MLP's gate/up pair for a module path's last name (gate_proj <-> up_proj,
 * w1 <-> w3), or NULL when it names neither; *self gets the path's own last name. */
const char *nd_gate_up_sibling(const char *path, const char **self);
/* Is this module excluded from quantization by the checkpoint's quantization config? */
int nd_ckpt_module_ignored(const nd_ckpt *c, const char *path);
/* Modules found in the tensor names: every prefix P with a 2-D P.weight, or with a tensor that
 * only quantized linears have (P.weight_packed, P.weight_scale, P.weight_global_scale,
 * P.input_global_scale, P.weight_scale_2, P.input_scale, P.weight_scale_inv). Natural order
 * ("layers.2" before "layers.10"). */
size_t nd_ckpt_module_count(const nd_ckpt *c);
const char *nd_ckpt_module_path(const nd_ckpt *c, size_t i);
/* Tell the kernel that a tensor's pages may be dropped (madvise) after its layer is done. */
void nd_ckpt_release(const nd_ckpt *c, const nd_tview *t);
/* The same for a small tensor just read on the host (a global scale) and the 64 KiB-aligned block
 * around it: a page fault maps the cached neighbours of a page too ("fault-around"), so reading a
 * 4-byte scale would otherwise map back the weights next to it that were released. */
void nd_ckpt_release_near(const nd_ckpt *c, const nd_tview *t);
/* Every mapped page of every file (the trace calls it after each layer): whatever small reads
 * and fault-around mapped during the layer goes, so RSS does not grow with the layer count. */
void nd_ckpt_release_all(const nd_ckpt *c);


/* ---- safetensors writer (synth, bundles, test fixtures) ----
 * Tensors are written in the order added; data pointers must stay valid until close. The file is
 * written to PATH.tmp and renamed into place on success. */
typedef struct nd_st_writer nd_st_writer;
int nd_st_writer_open(const char *path, nd_st_writer **out, nd_err *e);
int nd_st_writer_add(nd_st_writer *w, const char *name, nd_dtype dt, int ndim, const int64_t *shape,
                     const void *data, nd_err *e);
int nd_st_writer_meta(nd_st_writer *w, const char *key, const char *value, nd_err *e);
int nd_st_writer_close(nd_st_writer *w, nd_err *e);   /* writes, fsyncs, renames; frees w */
void nd_st_writer_abort(nd_st_writer *w);             /* frees w, removes the temp file */

#endif
