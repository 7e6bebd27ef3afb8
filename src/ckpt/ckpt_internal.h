/* ckpt_internal.h — structures shared by the files of src/ckpt (not for use outside it). */
#ifndef ND_CKPT_INTERNAL_H
#define ND_CKPT_INTERNAL_H

#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <pcre2.h>
#include "ckpt/ckpt.h"

struct nd_st_file {
    char *path;
    const unsigned char *map;   /* whole file, PROT_READ */
    size_t size;
    size_t data_start;          /* 8 + header length */
    nd_tview *t;                /* in header order */
    size_t n;
    char **meta_k, **meta_v;    /* __metadata__ */
    size_t n_meta;
    const nd_tview **by_name;   /* t sorted by name, for nd_st_find */
    int guard;                  /* util/mapguard.h slot of the mapping */
};

/* One name pattern of a quantization config: exact text, Python regex ("re:...", through PCRE2
 * with match limits), or glob. */
typedef enum { ND_PAT_EXACT, ND_PAT_REGEX, ND_PAT_GLOB, ND_PAT_CLASS } nd_pat_kind;
typedef struct nd_pat {
    nd_pat_kind kind;
    char *text;
    pcre2_code *re;
    pcre2_match_context *mc;
    int *limit_hit;  /* heap: set when a match ran past PCRE2's limits (read by nd_qcfg_pattern_error) */
} nd_pat;

typedef struct nd_ct_group {
    char *name;
    nd_pat *targets;
    size_t n_targets;
    int w_bits, a_bits;          /* 0 when absent */
    char w_type[16], a_type[16];
    char w_strategy[24], a_strategy[24];
    char format[48];             /* the group's own "format" (compressed-tensors >= 0.10), "" when absent */
    int w_group_size, a_group_size;
    int block_n, block_k;        /* weights.block_structure, 0 when absent */
} nd_ct_group;

typedef struct nd_mo_layer {     /* ModelOpt MIXED_PRECISION quantized_layers entry */
    char *pattern;
    char algo[32];
    int group_size;
} nd_mo_layer;

typedef struct nd_qcfg {
    nd_ckpt_fmt fmt;
    char source[64];             /* file the config came from ("config.json", "hf_quant_config.json") */
    /* compressed-tensors */
    char ct_format[48];
    nd_ct_group *groups;
    size_t n_groups;
    nd_pat *ignore;
    size_t n_ignore;
    /* ModelOpt */
    char mo_algo[32];
    int mo_group_size;
    nd_pat *exclude;
    size_t n_exclude;
    nd_mo_layer *layers;
    size_t n_layers;
    char producer[64];
    char producer_version[32]; /* ModelOpt's producer.version ("0.42.0"), "" when absent */
    /* DeepSeek native FP8 */
    int fp8_block_n, fp8_block_k;
    char fp8_scale_fmt[16];
    char moe_quant_algo[32];     /* config.json moe_quant_algo (NVIDIA V4 NVFP4 release) */
    /* quant_method "mxfp4" (gpt-oss): modules_to_not_convert (a module matches an entry that is
     * its path, a dotted prefix of it, or a glob of it) */
    nd_pat *no_convert;
    size_t n_no_convert;
} nd_qcfg;

struct nd_ckpt {
    char *dir;
    nd_model_cfg cfg;
    nd_qcfg q;
    nd_st_file **files;
    size_t n_files;
    const nd_tview **tensors;    /* all tensors, sorted by name */
    size_t n_tensors;
    char **modules;              /* module paths, natural order */
    size_t n_modules;
    void **owned;                /* buffers the per-expert views of fused dense experts hold (dense_experts.c) */
    size_t n_owned;
    /* per-expert views of fused MXFP4 expert tensors (mx_experts.c): found, not enumerated */
    nd_tview *virt;
    const nd_tview **virt_sorted;
    char *virt_names;
    size_t n_virt;
};

/* ckpt.c: the first of the n views v (sorted by name) whose name is >= key; n when none is */
size_t nd_views_lower_bound(const nd_tview **v, size_t n, const char *key);

/* config.c */
int nd_cfg_parse(const char *path, nd_model_cfg *c, nd_err *e);
/* config_legacy.c: older spellings transformers 5 converts on load (Gemma 3's rope_local_base_freq,
 * sliding_window_pattern), converted in the parsed JSON the same way; exit 2 on a wrong type */
struct json_t;
int nd_cfg_legacy(struct json_t *root, const char *path, nd_err *e);
/* Ranges of every key and the relations between them (config_check.c); exit 2 naming key and range. */
int nd_cfg_check(const char *path, const nd_model_cfg *c, nd_err *e);
void nd_cfg_free(nd_model_cfg *c);
/* quant_config.c: reads cfg->json quantization_config and DIR/hf_quant_config.json */
int nd_qcfg_load(const char *dir, const nd_model_cfg *cfg, nd_qcfg *q, nd_err *e);
void nd_qcfg_free(nd_qcfg *q);
/* Group of a compressed-tensors config that quantizes this module (NULL: none or ignored). */
const nd_ct_group *nd_qcfg_ct_group(const nd_qcfg *q, const char *module);
int nd_qcfg_ignored(const nd_qcfg *q, const char *module);
/* 1 when the config says the module's input activations are quantized to 4 bits. */
int nd_qcfg_act_quant(const nd_qcfg *q, const char *module, int *known);
/* 1 when a ModelOpt config gives the module a quant_algo (*algo) that is not an NVFP4 scheme. */
int nd_qcfg_nvfp4_algo_conflict(const nd_qcfg *q, const char *module, const char **algo);
/* 1 when the module's ModelOpt algorithm is NVFP4_AWQ (its pre_quant_scale is applied). */
int nd_qcfg_awq(const nd_qcfg *q, const char *module);
/* NVFP4 elements per block scale of the module: 16, or 32 (ModelOpt W4A8_NVFP4_FP8). */
int nd_qcfg_nvfp4_block(const nd_qcfg *q, const char *module);
/* 1 when the module's activations are FP8 E4M3 per tensor with its static input_scale (W4A8). */
int nd_qcfg_act_fp8_static(const nd_qcfg *q, const char *module);
int nd_pat_match(const nd_pat *p, const char *name);
/* exit 2 naming DIR's config file and the first "re:" pattern whose match ran past PCRE2's limits; 0 when none did */
int nd_qcfg_pattern_error(const nd_qcfg *q, const char *dir, nd_err *e);

/* mx_experts.c: gpt-oss's P.<proj>_blocks / _scales / _bias [experts, ...] as per-expert views
 * P.<e>.<proj>.weight / .weight_scale / .bias (exit 2 for blocks without matching scales). */
int nd_ckpt_expand_mx_experts(nd_ckpt *c, nd_err *e);
/* dense_experts.c: fused BF16/F16/F32 experts (gpt-oss) as per-expert modules added to the tensors */
int nd_ckpt_expand_dense_experts(nd_ckpt *c, nd_err *e);
void nd_ckpt_virt_free(nd_ckpt *c);
const nd_tview *nd_ckpt_virt_find(const nd_ckpt *c, const char *name);
int nd_ckpt_virt_has_prefix(const nd_ckpt *c, const char *prefix);
/* 1 when stored tensor t is sliced into views (a loader reads it through them). */
int nd_ckpt_virt_source(const nd_ckpt *c, const nd_tview *t);

/* module.c: 1 when NVFP4 block scales s are not [n, nb] but padded like a kernel's buffer: rows n
 * or round_up(n, 128), columns round_up(nb, 2^j) for j <= 7 (scale_layout_mismatch). */
int nd_sf_padded_shape(const nd_tview *s, int64_t n, int64_t nb);

/* json_entries.c: a zeroed array of one elem-sized entry per member of the JSON object (object 1)
 * or list (0) json (a json_t *; at least one entry, so an empty one still gives a pointer), its
 * member count in *n (n may be NULL). NULL with exit 2 "FILE: SHOWN must be MUST_BE" when json is
 * not of that kind, exit 3 when out of memory. */
void *nd_json_entries(void *json, int object, size_t elem, const char *file, const char *shown, const char *must_be,
                      size_t *n, nd_err *e);

/* Compare strings with digit runs compared as numbers ("layers.2" < "layers.10"). */
int nd_natural_cmp(const char *a, const char *b);

#endif
