/* pipeline.h — runs a recipe's stages on the reference and production paths. */
#ifndef ND_PIPELINE_H
#define ND_PIPELINE_H

#include <stdint.h>
#include "util/err.h"

/* Calibration (used by synth, as a real quantizer calibrates): run the reference path of the
 * recipe over the checkpoint in ckpt_dir (unquantized checkpoints allowed) on `tokens`, and call
 * cb once per linear module the recipe applies with the amax of that module's input over all
 * tokens that reached it. Routed experts that no token picked get no call. recipe may be NULL
 * (chosen from config.json). */
typedef void (*nd_amax_cb)(void *user, const char *module_path, double amax);
int nd_pipeline_calibrate(const char *ckpt_dir, const char *recipe, const int64_t *tokens, int64_t ntok,
                          nd_amax_cb cb, void *user, nd_err *e);

#include "trace/trace.h"
#include "ckpt/ckpt.h"

enum { ND_MODES_ISOLATED = 1, ND_MODES_CHAINED = 2, ND_MODES_BOTH = 3 };

/* One input of a stage as recorded, in host memory: the reference-path buffer under its recipe
 * name, and the routing decision the buffer carries (expert or key ids with their weights, router
 * logits; NULL / 0 when it carries none). */
typedef struct nd_stage_input {
    char name[32];
    int64_t rows, cols;
    const float *data;             /* rows * cols */
    int k;                         /* ids per row */
    const int32_t *idx;            /* [rows, k] or NULL */
    const float *w;                /* [rows, k] or NULL */
    const float *logits;           /* rows * cols or NULL */
    float route_scaling;           /* the routed_scaling_factor already in w (0: unknown) */
} nd_stage_input;

/* What `repro` needs of one stage: its definition, its reference inputs and the checkpoint
 * tensors it reads (canonical names; fused shards included). Host memory, valid during the call. */
/* a routed-expert stage of a 384-expert layer can read 3 projections x 4 tensors of every picked expert */
#define ND_CAPTURE_MAX_TENSORS 4096
typedef struct nd_capture_info {
    const char *stage_name, *op;
    int layer;
    char stage_yaml[2048];         /* the stage definition, {L} resolved, as one YAML flow mapping */
    int n_in;
    nd_stage_input in[8];
    int n_tensors;
    const char *tensor_names[ND_CAPTURE_MAX_TENSORS];  /* canonical names */
    const nd_tview *tensors[ND_CAPTURE_MAX_TENSORS];
} nd_capture_info;
typedef int (*nd_capture_fn)(void *user, const nd_capture_info *ci, nd_err *e);

/* What a single-stage replay (nd_trace_opts.only_row) learns about the linear module behind the
 * row: its checkpoint scales in the format's own meaning and the parameters the stack derived; or,
 * for a composite row (an MLP block, the routed experts' combine), the runtime behaviours the
 * production path applied there. The diagnosis builds its candidate repairs from it
 * (src/diagnose/repair.c). */
#define ND_STAGE_MAX_FUSED 4
typedef struct nd_stage_info {
    int found;                      /* 1 when the row was produced by a linear module or a composite stage */
    int router;                     /* 1: a router row (module = the stage name) */
    int router_bias_bf16;           /* router: the production selection used a BF16 correction bias */
    int composite;                  /* 1: an MLP block / routed-experts row (module = its prefix; only the
                                     * runtime fields below and gate_up_swap/routed_scaling apply) */
    int gate_up_swap;               /* composite: SwiGLU ran with gate and up swapped (stack.h) */
    int routed_scaling;             /* routed experts: times the combine applied routed_scaling_factor; -1 n/a */
    double routed_scaling_factor;   /* the router's factor (0: unknown) */
    int epilogue_fp16;              /* linear: the accumulator was cast to FP16 before alpha (1), or the
                                     * output written as FP16 after it (2) */
    int kv_cache;                   /* 1: a KV-cache row (op kv_cache under an FP8 cache); module = the
                                     * attention module, only the kv_ fields below apply */
    int kv_scales;                  /* nd_kv_use (stack.h) the production path applied */
    int kv_n;                       /* scales read: 1 (MLA latent: k_scale) or 2 (k_scale, v_scale) */
    char kv_scale_name[2][320];     /* their checkpoint tensor names (the format's own when absent) */
    double kv_scale[2];             /* the values used (1.0 for an absent one, as the stacks default it) */
    int kv_scale_present[2];        /* the checkpoint holds the tensor */
    double kv_amax[2];              /* amax of the reference K and V (latent: of the row): the calibrated
                                     * scale is max(amax / 448, kv_min_scale) */
    double kv_min_scale;            /* nd_kv_config.min_scale: 1 for ModelOpt < 0.43's clamped scales */
    char module[256];               /* checkpoint module path ("model.layers.0.self_attn.q_a_proj") */
    int modelopt;                   /* 1: ModelOpt names and meaning (input_scale, weight_scale_2) */
    int nvfp4_w4a4;                 /* the production path quantizes activations to NVFP4 */
    int act_fp8;                    /* ... or to FP8 per tensor with the static input scale (W4A8) */
    int has_input_scale;            /* the checkpoint holds an input scale tensor */
    double input_mult;              /* quantizer multiplier as the checkpoint means it (2688/amax) */
    double weight_div;              /* divisor of the e4m3 block scales as the checkpoint means it */
    int nan_block_scales;           /* e4m3 block scales that are NaN */
    int fp4_weight;                 /* the weight is packed FP4 (NVFP4 or MXFP4) */
    int mxfp4;                      /* ... MXFP4: E8M0 scales per 32 (its own reading is encoding 0) */
    int n_fused;                    /* shards sharing one GEMM under a fusing stack (self included) */
    char fused[ND_STAGE_MAX_FUSED][256];
    double fused_input_mult[ND_STAGE_MAX_FUSED], fused_weight_div[ND_STAGE_MAX_FUSED];
    int stack_fused_input, stack_fused_weight, stack_reciprocal; /* the stack's rules (stack.h) */
    double mult, w_div, alpha;      /* what the production path used */
    double in_amax;                 /* amax of the stage's reference input (NaN when not finite) */
    double floor_margin_db;         /* the recipe's allowed gap below the floor (verdict rule) */
    /* block-scale representation (issue 18, scale_repr.h) */
    int sf_pow2, sf_layout, sf_encoding; /* how the production GEMM read the block scales (stack.h) */
    int sf_baked;                   /* the GEMM folded the weight global into the E4M3 block scales */
    int tp, tp_pad;                 /* ranks, and the padded columns per rank it read as garbage (0: none) */
    int sf_all_pow2;                /* every finite nonzero stored block scale is a power of two (>= 16) */
    int sf_swizzle_fits;            /* the scale matrix is whole 128x4 tiles (a swizzled copy is as large) */
    int sf_padded;                  /* the stored scale tensor's row length when it is longer than K/16
                                     * (padded rows), else 0 */
    int has_original;               /* an NVFP4 weight and --reference-checkpoint given (checkpoint-side
                                     * block-scale repairs apply) */
    double weight_div_fit;          /* --reference-checkpoint: the weight divisor g that makes the stored
                                     * codes x block scales / g closest to the original weight (least
                                     * squares); NaN without an original */
    double orig_amax;               /* --reference-checkpoint: amax of the original weight (NaN without) */
    double group_orig_amax;         /* ... and the largest over its fused shards (= orig_amax unfused) */
    double sf_max;                  /* the largest finite stored E4M3 block scale (NVFP4; NaN else) */
    /* the run that replayed it (nd_stage_replay fills these for every row) */
    char backend[16], device[128], stack[32];
    char warning[256];              /* e.g. an override that matched nothing */
} nd_stage_info;

typedef struct nd_trace_opts {
    const char *ckpt_dir;
    const char *recipe;         /* name or file; NULL: from config.json model_type */
    const char *stack;          /* stack profile name (default "exact") */
    const char *ref_ckpt;       /* --reference-checkpoint or NULL */
    const char *out_path;       /* trace file, NULL: no file */
    const char *backend;        /* "auto", "cpu", "cuda" */
    int device;
    const int64_t *tokens;
    int64_t ntok;
    int layer_lo, layer_hi;     /* inclusive; layer_hi < 0: all */
    int modes;                  /* ND_MODES_* */
    int dump_tensors;
    const char *const *overrides;
    int n_overrides;
    int progress;               /* progress bar on stderr */
    /* repro: hand what this stage reads (its reference inputs and tensors) to capture() before it
     * runs; nothing after it runs (repro replays it through nd_stage_replay) */
    const char *capture_stage;
    nd_capture_fn capture;
    void *capture_user;
    /* bisect: stages whose production path runs the reference math instead */
    const char *const *ref_only;
    int n_ref_only;
    int ref_only_floor;         /* those stages run NVFP4 the healthy way (the floor) instead */
    /* captured activations from a real serving stack (safetensors, tensors named after stages or
     * modules; `<name>.input` optional): compared with the reference path as rows of mode
     * "captured" */
    const char *prod_dump;
    int no_probes;              /* benchmark baseline: run both paths and modes, measure nothing */
    int ep;                     /* expert parallelism simulated in one process (contiguous E/N split) */
    /* numerics of the reference path (--ref-numerics): NULL or "fp32" = SPEC §4 (exact dequantized
     * weights, FP32 math, BF16 per stage output); "transformers" = also the BF16 roundings
     * transformers' eager forward of a BF16 model takes inside stages; "fp32-exact" = no BF16
     * rounding at all on the reference path (transformers' FP32 forward; docs/conformance.md) */
    const char *ref_numerics;
    /* --allow-unquantized: replay a checkpoint with no quantized module (else exit 2: both paths
     * would run the same weights and the verdict would mean nothing) */
    int allow_unquantized;
    /* --prompt/--prompt-file (issue 22): the text the tokens came from and the chat format applied
     * (NULL: ids given as ids; no chat), recorded in the trace */
    const char *prompt_text, *prompt_chat;
    /* where the tokens came from, as given ("--tokens" and its list, "--tokens-file", "--prompt",
     * "--prompt-file" and the value; NULL: the default ids), for the printed next command */
    const char *tokens_opt, *tokens_val;
    const char *tokenizer;      /* --tokenizer as given (NULL: the checkpoint's), for the next command */
    /* single-stage replay (diagnosis, issue 13): run only the stage that produces the row named
     * only_row, in isolated mode, on the same reference inputs as a full run (everything before
     * it runs on the reference path, unreported); stop after it. info (may be NULL) is filled for
     * a linear row. */
    const char *only_row;
    nd_stage_info *stage_info;
    /* leave the trace file open in nd_trace_result.tw: the caller writes /summary with
     * nd_trace_finish() after diagnosing (the pipeline does not diagnose) */
    int defer_finish;
    /* --max-memory: the activations the run may hold at once, in bytes (0: half the machine's
     * memory). Refused up front when the estimate (nd_pipeline_memory_estimate) is past it, and
     * at the allocation that would pass it: exit 2 naming the token count and the limit. */
    uint64_t max_memory;
    /* single-stage replay (nd_stage_replay): an empty record is filled with the stage's inputs as
     * the run reaches it; a filled one runs that stage alone from them */
    struct nd_stage_rec *stage_rec;
} nd_trace_opts;

typedef struct nd_trace_result {
    nd_row *rows;
    int64_t nrows;
    nd_trace_summary summary;
    char recipe[64], stack[32], backend[16], device[128], format[32];
    char warning[256];          /* e.g. an override that matched nothing */
    char unmodelled[512];       /* a behaviour of the stack no stage of the recipe models (empty: none) */
    int64_t weight_bytes;       /* checkpoint bytes the run uploaded (each touched tensor, per use) */
    double upload_s;            /* wall time of those uploads (reading the mapping + copy to the backend) */
    int n_layers;               /* the model's layer count (config) */
    double gemm_flops_fp32;     /* GEMM work of the linear stages: FP32 (reference) */
    double gemm_flops_bf16;     /* and exact-product (BF16 tensor-core) GEMMs */
    double elapsed_s;           /* wall time of the replay (after opening the checkpoint) */
    nd_trace_w *tw;             /* defer_finish: the open trace, for nd_trace_finish() */
    double floor_margin_db;     /* the recipe's floor_margin_db (the verdict's allowed gap below the floor) */
    char note[160];             /* added to the summary message (--ep: the diverging expert's rank) */
    int trace_created;          /* the run began its trace file (OUT.incomplete) */
    int unreplayed;             /* quantized modules of the replayed layers no stage ran (nd_run_unreplayed) */
    char unreplayed_first[256]; /* the first of them */
} nd_trace_result;

/* The one entry point of a single-stage replay (issue 23; stage_rec.c): replay the stage that makes
 * `row` (opts.only_row = row, isolated mode, no trace file, no progress) with extra overrides added
 * to the run's, and return that row. Exit 2 when no stage produces it. With base->modes ==
 * ND_MODES_CHAINED it returns the row's chained-path figures instead: the stages before it run on
 * both paths, unreported, within base's --layers (bisect's probes; rec is not used).
 * rec == NULL: every stage before it runs again on the reference path, unreported. *rec == NULL: the
 * same, and *rec is made: a host copy of the inputs the stage read (reference-path buffers, with
 * the routing decisions they carry) and the override names the stages before it looked up. A later
 * call with that *rec runs the stage alone from those inputs, unless one of its extra overrides
 * is a name an earlier stage looked up (it could change the inputs): then in full, as above.
 * nd_stage_rec_free releases it (NULL allowed). */
typedef struct nd_stage_rec nd_stage_rec;
int nd_stage_replay(const nd_trace_opts *base, const char *row, const char *const *extra_ovr, int n_extra,
                    nd_stage_rec **rec, nd_row *out, nd_stage_info *info, nd_err *e);
void nd_stage_rec_free(nd_stage_rec *rec);
/* A record made from inputs recorded elsewhere (a repro bundle): *rec (NULL on entry) holds copies
 * of in[0..n_in) and nd_stage_replay with it runs the stage that makes `row` (at `layer`; -1 for a
 * prologue or epilogue stage) alone from them, the overrides of the call applied. The stage is
 * found by its name when the replay runs; none making the row: exit 2. */
int nd_stage_rec_from_inputs(const char *row, int layer, const nd_stage_input *in, int n_in, nd_stage_rec **rec, nd_err *e);
/* 1 when the last nd_stage_replay with this record ran the stage alone (tests, timing) */
int nd_stage_rec_fast(const nd_stage_rec *rec);

/* Replay the recipe over the checkpoint, judging every row (probes/verdict). Returns 0 when the run
 * completed, else an exit code. res->summary holds the first diverged row by the figure rules
 * (nd_first_divergence); the cause a user sees comes from the diagnosis above (src/diagnose). */
/* The recipe's alternate naming the checkpoint uses (its `detect` tensor, or that module stored in
 * any quantized form, is there); NULL: the recipe's canonical names. */
struct nd_recipe;
struct nd_naming;
const struct nd_naming *nd_naming_pick(const struct nd_recipe *rc, const nd_ckpt *ck);
/* The recipe for a checkpoint as trace picks it (named, or matched by model_type when NULL) and the
 * naming it reads the checkpoint with (NULL: canonical); *rc for nd_recipe_free. */
int nd_naming_for(const char *recipe, const nd_ckpt *ck, struct nd_recipe **rc, const struct nd_naming **nm, nd_err *e);
/* A module's name in the checkpoint (to_disk) from its canonical name ("model.layers.1.mlp.
 * shared_experts.gate_proj" -> "model.layers.1.ffn.shared_experts.w1"), or back, through the naming;
 * a name no rename matches (or a NULL naming) is copied as it is. */
void nd_naming_map(const struct nd_naming *nm, const char *name, int to_disk, char *out, size_t cap);

int nd_pipeline_trace(const nd_trace_opts *o, nd_trace_result *res, nd_err *e);
/* A lower bound of the activation bytes a run of ntok tokens holds at once: the reference and the
 * chained production path each hold the widest per-token activation of the model (the residual
 * stream times hc_mult, the attention heads, the MLP or the routed experts' top-k rows, compressed
 * attention's index scores over tokens / rate, and the logits when the head runs) for every token.
 * Layers run are 0..layer_hi (< 0: all), those below layer_lo on the reference path alone.
 * 64-bit checked: UINT64_MAX on overflow. */
uint64_t nd_pipeline_memory_estimate(const nd_model_cfg *cfg, int64_t ntok, int layer_lo, int layer_hi, int with_head);
/* The default --max-memory: half the machine's physical memory. */
uint64_t nd_pipeline_default_max_memory(void);
void nd_trace_result_free(nd_trace_result *res);

#endif
