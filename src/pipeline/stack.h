/* stack.h — how a serving stack turns checkpoint scales into kernel parameters, and the user's
 * --override hypotheses. The profiles are data (recipes/stack-<name>.yaml); this is their C form.
 *
 * Every stack ends in the same three numbers per NVFP4 W4A4 linear (research/nvfp4-spec.md §4):
 *   mult  — the activation quantizer multiplier (the kernel's SFScale; 2688/amax when healthy)
 *   w_div — the divisor of the weight's e4m3 block scales the kernel's alpha assumes
 *   alpha — the GEMM epilogue factor, 1 / (mult * w_div) when consistent
 */
#ifndef ND_STACK_H
#define ND_STACK_H

#include "util/err.h"
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"

#define ND_MAX_OVERRIDES 32

typedef struct nd_override {
    char name[192];
    double value;
    int used;
} nd_override;

typedef enum nd_fused_rule {
    ND_FUSED_OWN = 0,   /* each shard keeps its own scales (only possible with unfused kernels) */
    ND_FUSED_MAX,       /* one value for the fused GEMM: the max of the shards' CT values (vLLM) */
    ND_FUSED_MIN,       /* the min (llm-compressor's rule when it writes shared scales) */
    ND_FUSED_FIRST,     /* the first shard's value (a loader that reads one shard's scale) */
    ND_FUSED_NRULES
} nd_fused_rule;

/* How the stack uses the checkpoint's KV-cache scales s (k_scale / v_scale) when its KV cache is
 * FP8 (kv_cache: fp8): the cache write divides by w, the read multiplies by r. */
typedef enum nd_kv_use {
    ND_KV_IGNORE = 0,     /* w = r = 1: the scales are dropped, the cache runs unscaled */
    ND_KV_APPLY = 1,      /* w = r = s: the right use */
    ND_KV_TWICE = 2,      /* w = s, r = s^2: the read applies it twice */
    ND_KV_WRITE_ONLY = 3, /* w = s, r = 1: written with the scale, read back as if it were 1.0 */
    ND_KV_NUSES
} nd_kv_use;

typedef struct nd_stack {
    char name[32];
    char path[1024];                /* the profile file loaded (its FNV-1a goes into the trace) */
    char description[160];
    int input_fused, weight_fused;  /* nd_fused_rule for input multipliers and weight globals */
    int reciprocal_input;           /* 1: the stack passes 1/(file value) as the multiplier */
    int quant_sem;                  /* ND_QSEM_* used by the activation quantizer */
    /* runtime behaviours of the stack's kernels (docs/stacks.md, issue 18) */
    int gate_up_w31;                /* 1: the fused gate/up halves are read in W31 order: SwiGLU
                                     * computes act(up) * gate (gate_up_order: w31) */
    int routed_scaling;             /* times the routed experts' combine applies the router's
                                     * routed_scaling_factor: 1 once (right), 2 twice, 0 never */
    int epilogue_fp16;              /* 1: the NVFP4 GEMM casts its FP32 accumulator to FP16 before
                                     * alpha (epilogue: fp16), Inf past 65504; 2: alpha first, the
                                     * output written as FP16 (epilogue: fp16_output, dtype=float16
                                     * serving): Inf where the output itself passes 65504 */
    int kv_cache_fp8;               /* 1: K and V (or MLA's latent) go through an FP8 E4M3 cache with
                                     * per-tensor scales (kv_cache: fp8); 0: BF16 cache (default) */
    int kv_scales;                  /* nd_kv_use: what the FP8 cache does with the checkpoint's scales */
    /* how the NVFP4 GEMMs read the weight's block scales (scale_repr.h; issue 18) */
    int block_scale_pow2;           /* 1: rounded up to powers of two, codes kept (block_scale_rounding:
                                     * ue8m0_ceil) */
    int block_scale_layout;         /* nd_sf_layout the kernel reads the linear bytes it is handed as */
    int block_scale_encoding;       /* nd_sf_encoding the kernel decodes the E4M3 bytes with */
    int tp, tp_tile;                /* tensor-parallel ranks and the K tile each rank's shard of a
                                     * row-parallel linear is padded to (tp: 1, tp_tile: 16) */
    int pad_garbage;                /* 1: that padding is left uninitialised (pad_policy: garbage) */
    int router_bias_bf16;           /* 1: the router's score-correction bias is held in BF16 (router_bias:
                                     * bf16), as SGLang's MoEGate under a quant_config (C33) */
    int global_scale_baked;         /* 1: the weight global scale is folded into the E4M3 block scales
                                     * (global_scale: baked), as vLLM's SM12x b12x MoE path did */
    nd_override ov[ND_MAX_OVERRIDES];
    int n_ov;
    /* set by the run when a stage consulted gate_up_order (an mlp or moe_experts op): a profile
     * reading W31 that no stage consulted is not modelled by the recipe (pipeline/run.c says so) */
    int gate_up_consulted;
    /* every override lookup by name (found or not) is reported here when set: a single-stage
     * replay learns which names the stages before it consulted (stage_rec.c) */
    void (*on_lookup)(void *user, const char *name);
    void *lookup_user;
} nd_stack;

typedef struct nd_prod_params {
    float mult, w_div, alpha;
    float ideal_w_div;              /* the module's own divisor (reference meaning) */
} nd_prod_params;

/* Load recipes/stack-<name>.yaml (or a file path). */
int nd_stack_load(const char *name, nd_stack *out, nd_err *e);
/* Which overrides a lookup marked used (saved[ND_MAX_OVERRIDES]), and back: a stage that looked a
 * parameter up and then did not apply it (an unquantized linear, a KV cache kept in BF16) restores
 * the marks, so an override nothing applied is reported as unused (trace: exit 2). */
void nd_stack_used_save(const nd_stack *s, unsigned char *saved);
void nd_stack_used_restore(nd_stack *s, const unsigned char *saved);
/* Parse "NAME=VALUE" into the stack's overrides (exit 2 on malformed text). */
int nd_stack_add_override(nd_stack *s, const char *arg, nd_err *e);
/* Apply overrides of checkpoint scalars ("model.<module>.<tensor>=v") to a bound module. */
void nd_stack_override_module(nd_stack *s, nd_module *m);
/* Production parameters of module m (a shard of `fused` modules, m included, n_fused >= 1) for
 * the stage named `stage`; derived-parameter overrides apply last: the fused rules of this stage
 * ("<stage>.fused_input", ".fused_weight" = 0 own, 1 max, 2 min, 3 first), then the values
 * ("<stage>.quant_mult", ".alpha", vLLM names ".input_global_scale_inv", ".weight_global_scale"). */
void nd_stack_params(nd_stack *s, const nd_module *m, const nd_module *fused, int n_fused,
                     const char *stage, nd_prod_params *out);
/* The runtime behaviours of the stage named `stage` (a composite MLP / routed-experts stage, or a
 * linear's stage): the profile's value unless the stage's override says otherwise:
 *   <stage>.gate_up_swap=0|1     SwiGLU with gate and up swapped (1) or in order (0)
 *   <stage>.routed_scaling=0|1|2 times the combine applies routed_scaling_factor
 *   <stage>.epilogue_fp16=0|1|2  the NVFP4 GEMM accumulator cast to FP16 before alpha (1), or
 *                                its output cast to FP16 after alpha (2)
 * nd_stack_add_override refuses other values of these names (exit 2). */
int nd_stack_gate_up_swap(nd_stack *s, const char *stage);
/* <prefix>.gate_up_tensors_swapped=0|1 on the stage-style name of an MLP or an expert
 * ("layers.0.mlp", "layers.0.mlp.experts.3"): the checkpoint's gate_proj and up_proj (w1 and w3)
 * read in each other's place (a checkpoint that stores them exchanged; a diagnosis repair) */
int nd_stack_gate_up_tensors_swapped(nd_stack *s, const char *prefix);
int nd_stack_routed_scaling(nd_stack *s, const char *stage);
int nd_stack_epilogue_fp16(nd_stack *s, const char *stage);
/* <stage>.router_bias_bf16=0|1 on a router stage, else the profile's router_bias */
int nd_stack_router_bias_bf16(nd_stack *s, const char *stage);
/* The KV cache of the stage named `stage` (a recipe `kv_cache` stage): 1 when it is FP8
 * (<stage>.kv_cache_fp8=0|1 overrides the profile), and the use of the scales
 * (<stage>.kv_scales=0 ignore, 1 apply, 2 twice, 3 write_only). */
int nd_stack_kv_cache_fp8(nd_stack *s, const char *stage);
int nd_stack_kv_scales(nd_stack *s, const char *stage);
/* "ignore", "apply", "twice", "write_only" */
const char *nd_kv_use_name(int use);
/* The value of an override of a checkpoint scalar by its full tensor name
 * ("model.layers.0.self_attn.k_scale=0.02"), or `dflt` when none is given. */
double nd_stack_scalar(nd_stack *s, const char *tensor, double dflt);
/* Repairs of a module's bytes, asked for by override (diagnosis, issue 13):
 *   model.<module>.nibble_swap=1      read every packed byte with its two nibbles swapped
 *   model.<module>.block_scale_fix=1  NaN/Inf e4m3 block scales replaced by their row neighbour
 * Both apply to every decode of the module (reference and production). */
/*   model.<module>.scale_layout=L     block scales stored in layout L (scale_repr.h), read back linear;
 *                                     3 (padded): rows of the stored tensor's own length
 *   model.<module>.scale_encoding=E   block-scale bytes stored in encoding E, decoded with it
 *   model.<module>.block_scale_refit=1  block scales refitted to the original weight (needs
 *                                       --reference-checkpoint; powers of two read unrounded) */
/*   model.<module>.scale_exponent_shift=k  block scales written with their exponent k too low, read
 *                                          2^k larger (nd_stack_override_module) */
typedef struct nd_module_repair {
    int nibble_swap, block_scale_fix;
    int scale_layout, scale_encoding, block_scale_refit;
} nd_module_repair;
void nd_stack_module_repair(nd_stack *s, const nd_module *m, nd_module_repair *out);
/* How the production GEMM of the stage named `stage` reads its weight's block scales: the
 * profile's keys unless the stage's override says otherwise:
 *   <stage>.block_scale_pow2=0|1        rounded up to powers of two (UE8M0 ceil)
 *   <stage>.block_scale_layout=0|1|2|3  read as linear, swizzled_128x4, transposed or padded_128x4
 *   <stage>.block_scale_encoding=0..4   decoded as e4m3 (an MXFP4 weight: its own E8M0), e8m0, u8,
 *                                       e8m0_bias125 or e8m0_bias128 (scale_repr.h)
 *   <stage>.tp=N, <stage>.pad_garbage=0|1  ranks, and the padding of a row-parallel K shard */
/* baked: the stack folds the weight's global divisor into the E4M3 block scales (each re-rounded
 * to E4M3, subnormals included) and drops it from alpha (`global_scale: baked`); baked_div is that
 * divisor, set by the linear that reads the module (its nd_prod_params w_div). */
typedef struct nd_sf_read { int pow2, layout, encoding, tp, tile, pad_garbage, baked; float baked_div; } nd_sf_read;
void nd_stack_sf_read(nd_stack *s, const char *stage, nd_sf_read *out);
/* 1 when the read is the checkpoint's own (nothing of the above changes it). */
int nd_sf_read_plain(const nd_sf_read *rd);
/* "own", "max", "min", "first" (the fused rules' names) */
const char *nd_fused_rule_name(int rule);
/* Overrides that matched nothing (to warn the user). */
int nd_stack_unused(const nd_stack *s, const char **name);
/* 1 when the profile computes wrong kernel parameters from a checkpoint with a finding of this kind
 * (the rules are in ckpt/findings.h: NONE never, ALL always, FUSED_WEIGHT when fused_weight is not
 * own, FUSED_INPUT when fused_input is not own, INPUT_CONVENTION when reciprocal_input is false). */
int nd_stack_breaks(const nd_stack *s, nd_break_kind kind);
/* The names of the shipped profiles, every <recipe dir>/stack-NAME.yaml, sorted; at most cap. */
int nd_stack_names(char (*out)[64], int cap, int *n, nd_err *e);

#endif
