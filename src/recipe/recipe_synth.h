/* recipe_synth.h — a recipe's `synth:` section: what `nvfp4dbg synth` writes for the family.
 *
 * The section (docs/synth.md, "Adding a family") holds:
 *   config:   config.json of the original, in key order. A null value (~) is filled in: the
 *             architecture (architectures), model_type, num_hidden_layers (the layer count), or
 *             the size's value (sizes:). Nested mappings and lists are written as they are.
 *   sizes:    tiny / small / full: the dimension keys (scalars) of each size.
 *   dense_layers: a config key K: layers below K are `dense`, the rest `moe` (K is cut so that at
 *             least one MoE layer remains when --layers makes the model shorter).
 *   ignore / exclude: compressed-tensors `ignore` and ModelOpt `exclude_modules`.
 *   layer:    the module table of one layer (names relative to model.layers.{L}.), each entry one
 *             of norm, linear, mlp, experts, tensor, with `when: dense|moe` (or a layer type) to
 *             keep it to one kind; `bias: STD` gives a linear (each of an mlp's) a BF16 bias.
 *   layer_types: {every: K, type: T, else: U}: layer L is T when (L + 1) % K == 0, else U (K an
 *             expression); or {first: T0, cycle: [T1, T2, ...]}: layer 0 is T0 (optional), the
 *             others take the cycle in turn. config's layer_types ~ is that list and `when:` may
 *             name any of the types.
 *   layer_values: {KEY: {TYPE: EXPR, ...}}: config's KEY ~ is the list of each layer's value by
 *             its type (every type named).
 *   hash_layers: a config key K: layers below min(K, layers) are `hash`, the rest `scored`; the
 *             key's ~ is written as min(K, layers).
 *   experts:  {count: KEY, top_k: KEY}: the config key --experts overrides, and the one it may not
 *             go below.
 *   tail:     tensors after the last layer, before model.norm (full names).
 * Dimensions are small integer expressions (+ - * / parentheses, integers, config keys), kept as
 * text with their line and evaluated when a size is built (nd_synth_expr). */
#ifndef ND_RECIPE_SYNTH_H
#define ND_RECIPE_SYNTH_H

#include <stddef.h>
#include "util/err.h"

struct nd_ydoc;
struct yaml_node_s;

typedef enum nd_syn_vkind { ND_SYV_NULL = 0, ND_SYV_INT, ND_SYV_REAL, ND_SYV_BOOL, ND_SYV_STR, ND_SYV_MAP, ND_SYV_LIST } nd_syn_vkind;

/* A config value: a scalar, or a mapping/list of values (keys in `key`). */
typedef struct nd_syn_val {
    char key[64];
    nd_syn_vkind kind;
    long long i;
    double r;
    char s[96];
    struct nd_syn_val *kids;
    int n_kids;
    int line;
} nd_syn_val;

typedef struct nd_syn_expr {
    char text[96];
    int line;
} nd_syn_expr;

typedef enum nd_syn_ekind { ND_SYE_NORM = 0, ND_SYE_LINEAR, ND_SYE_MLP, ND_SYE_EXPERTS, ND_SYE_TENSOR } nd_syn_ekind;
typedef enum nd_syn_quant { ND_SYQ_NVFP4 = 0, ND_SYQ_NONE, ND_SYQ_FP8_BLOCK } nd_syn_quant;
/* tid2eid: I32 [V, k], k distinct experts of aux per row; hc_base: mHC base [(2+n)n] (n = aux) */
typedef enum nd_syn_init { ND_SYI_NORMAL = 0, ND_SYI_CONST, ND_SYI_TID2EID, ND_SYI_HC_BASE } nd_syn_init;

/* One module-table entry. */
typedef struct nd_syn_entry {
    nd_syn_ekind kind;
    char name[128];        /* relative to model.layers.{L}. in `layer:`, full in `tail:` */
    char when[32];         /* "" (every layer), "dense", "moe" or a layer type */
    nd_syn_expr out, in;   /* linear: weight [out, in]; norm: out = its size */
    nd_syn_expr inter;     /* mlp / experts: intermediate size */
    nd_syn_expr count;     /* experts: how many ({E} = 0..count-1 in name) */
    nd_syn_expr shape[3];  /* tensor: its shape (1 to 3 dimensions) */
    int ndim;
    char fuse[32];         /* linear: fused group within the layer ("" none) */
    double gain;           /* linear: std = gain / sqrt(in) */
    double bias;           /* linear, mlp, experts: std of a BF16 bias per linear (0: none) */
    nd_syn_quant quant;    /* linear */
    char dtype[8];         /* tensor: BF16, F32 */
    nd_syn_init init;      /* tensor */
    double mean, std;      /* tensor: mean + std / sqrt(std_sqrt) * N(0,1); const: mean */
    nd_syn_expr std_sqrt;  /* "" for none */
    nd_syn_expr aux;       /* tensor, init tid2eid / hc_base: experts / streams */
    int line;
} nd_syn_entry;

#define ND_SYN_TYPES 8
/* layer_values: one config key's value per layer type */
typedef struct nd_syn_ltval {
    char key[64];
    char type[ND_SYN_TYPES][32];
    nd_syn_expr x[ND_SYN_TYPES];
    int n, line;
} nd_syn_ltval;

typedef struct nd_synth_spec {
    char path[512];        /* the recipe file, for messages */
    char architecture[64], model_type[64];
    nd_syn_val config;                  /* a mapping */
    nd_syn_val sizes[3];                /* tiny, small, full: mappings of scalars (kind NULL: absent) */
    char dense_layers[64];
    int dense_line;
    nd_syn_expr lt_every;               /* layer_types (lt_every.text "" for none) */
    char lt_type[32], lt_else[32];
    char lt_first[32];                  /* layer_types {first, cycle} ("" / 0 for none) */
    char lt_cycle[ND_SYN_TYPES][32];
    int n_cycle;
    nd_syn_ltval ltv[4];                /* layer_values */
    int n_ltv;
    char hash_layers[64];               /* "" for none */
    char experts_key[64], top_k_key[64];
    char ignore[8][64], exclude[8][64];
    int n_ignore, n_exclude;
    nd_syn_entry *layer, *tail;
    int n_layer, n_tail;
    int line;
} nd_synth_spec;

/* Parse the value of `synth:` (a mapping) of the recipe d into a new spec. 0, or 2 naming the file,
 * line and key. */
int nd_recipe_synth_parse(struct nd_ydoc *d, struct yaml_node_s *v, nd_synth_spec **out);
void nd_recipe_synth_free(nd_synth_spec *s);

/* An integer config key's value; 0 when found. */
typedef int (*nd_syn_lookup)(void *user, const char *key, long long *out);
/* Evaluate x over keys (lookup): 0, or 2 "FILE:LINE: <what>: unknown key 'K'" / bad syntax / division by zero. */
int nd_synth_expr(const nd_synth_spec *s, const nd_syn_expr *x, const char *what, nd_syn_lookup look, void *user,
                  long long *out, nd_err *e);

#endif
