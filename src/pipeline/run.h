/* run.h — internal state of one trace run (pipeline-private). */
#ifndef ND_RUN_H
#define ND_RUN_H

#include <stdint.h>
#include <stdio.h>
#include "backend.h"
#include "ckpt/ckpt.h"
#include "recipe/recipe.h"
#include "trace/trace.h"
#include "stack.h"
#include "prefetch.h"

/* A buffer on the backend: float32 activations, or a routing decision (host int32/float). */
typedef struct nd_buf {
    int refs;
    float *p;              /* backend memory, n floats */
    int64_t n, rows, cols; /* rows x cols == n (a 2-D view; cols = last logical dim) */
    int32_t *idx;          /* routing: [rows, k] expert ids (host), NULL otherwise */
    float *w;              /* routing: [rows, k] weights (host) */
    int k;
    float *logits_host;    /* router logits [rows, n_experts] kept for probes (host) */
    float route_scaling;   /* routing: the routed_scaling_factor already in w (0: unknown) */
} nd_buf;

#define ND_ENV_MAX 48
typedef struct nd_env {
    char names[ND_ENV_MAX][32];
    nd_buf *bufs[ND_ENV_MAX];
    int n;
} nd_env;

enum { ND_MODE_ISOLATED = 1, ND_MODE_CHAINED = 2, ND_MODE_CAPTURED = 4 };


/* One stage instance: the definition with {L} resolved. */
typedef struct nd_stage {
    const nd_stage_def *def;
    int layer;
    char name[ND_NAME_LEN];
    char module[192];
} nd_stage;

typedef struct nd_run nd_run;
typedef struct nd_rowq nd_rowq;
typedef struct nd_loop nd_loop;
typedef struct nd_sink nd_sink;

/* What an op receives. in_ref/in_chain are the stage inputs on the reference path and on the
 * chained production path; the op fills out_ref, out_iso (production given reference inputs)
 * and out_chain for the modes requested. A simple op whose production math equals the
 * reference may return out_iso = out_ref (with a reference taken). */
typedef struct nd_opctx {
    nd_run *r;
    const nd_stage *st;
    nd_buf *in_ref[ND_RECIPE_MAX_IO], *in_chain[ND_RECIPE_MAX_IO];
    int n_in;
    nd_buf *out_ref[ND_RECIPE_MAX_IO], *out_iso[ND_RECIPE_MAX_IO], *out_chain[ND_RECIPE_MAX_IO];
    int n_out;
    int want_iso, want_chain;
    /* figures the op knows and the probe cannot compute (NaN when not applicable), per mode */
    nd_row extra_iso, extra_chain;
    int quantized;
    int on_ref;            /* nd_run_pure: 1 while the function runs on the reference path */
} nd_opctx;

typedef int (*nd_op_fn)(nd_opctx *c, nd_err *e);

/* What an op may read and use: the backend, the checkpoints, the config, the recipe, the stack, the
 * reference numerics, the tokens and positions, the weight helpers' accounting, and its sink. What
 * the stage loop keeps (the trace writer, the rows, calibration, progress, capture, --prod-dump,
 * the environments) is behind `loop` (loop.h), which the ops never open. */
struct nd_run {
    struct nd_loop *loop;      /* the stage loop's own state (loop.h); NULL when an op runs alone */
    nd_backend *be;
    nd_ckpt *ck;
    nd_ckpt *ref_ck;           /* --reference-checkpoint, or NULL */
    const nd_model_cfg *cfg;
    nd_recipe *rc;
    const nd_naming *naming;   /* alternate naming in use, or NULL */
    const nd_naming *ref_naming;
    nd_stack stack;
    int64_t t;                 /* tokens */
    int64_t *tokens;
    int32_t *pos;              /* positions 0..t-1 */
    int silent;                /* >0: nothing is recorded (the loop's stages before --layers, an op's
                                * internal recomputation): the sink hands nothing on */
    const nd_sink *sink;       /* where the ops hand rows, routing, amax (sink.h); set by the loop */
    /* the options the ops read (the loop copies them from nd_trace_opts) */
    int no_probes;             /* benchmark baseline: the floor is not measured */
    int ep;                    /* --ep: expert parallelism over ep ranks (0 or 1: none) */
    const char *const *ref_only; /* bisect: stages whose production path runs the reference math */
    int n_ref_only;
    int ref_only_floor;        /* those stages run NVFP4 the healthy way (the floor) instead */
    int64_t weight_bytes;      /* checkpoint bytes uploaded to the backend (the touched weights) */
    int ref_tf;                /* --ref-numerics transformers: the stage functions take transformers'
                                * BF16 steps (kernels/numerics/nd_bf16_steps.h; both paths of a pure
                                * stage, the reference weights of a linear) */
    int ref_exact;             /* --ref-numerics fp32-exact: the reference path rounds nothing to BF16
                                * (transformers' FP32 forward); production paths unchanged */
    double upload_s;           /* wall time spent in those uploads */
    double gemm_flops_fp32, gemm_flops_bf16; /* linear-stage GEMM work by kind (ops_linear.c) */
    nd_prefetch prefetch;      /* the next routed expert's bytes (prefetch.c) */
    uint64_t act_bytes, act_peak; /* activation bytes held now and at most (env.c) */
    uint64_t act_limit;        /* --max-memory (0: none, calibration) */
    /* the modules the run bound in the checkpoint under test, as patterns (layer and expert numbers
     * replaced): a quantized module whose pattern is not here ran in no stage (nd_run_unreplayed) */
    char (*bound)[192];
    int n_bound, cap_bound;
};

/* ---- environment ---- */
nd_buf *nd_buf_new(nd_run *r, int64_t rows, int64_t cols, nd_err *e);
/* Count a buffer made without nd_buf_new (a tensor read as a buffer) in r->act_bytes; nd_buf_put
 * takes it off again. */
void nd_buf_count(nd_run *r, const nd_buf *b);
nd_buf *nd_buf_ref(nd_buf *b);
void nd_buf_put(nd_run *r, nd_buf *b);
nd_buf *nd_env_get(nd_env *env, const char *name);
void nd_env_set(nd_run *r, nd_env *env, const char *name, nd_buf *b); /* takes a reference */
void nd_env_clear(nd_run *r, nd_env *env);

/* ---- attributes and names ---- */
/* Attribute as a number: literal, "$config_key", or "$key*expr" is not supported: plain only. */
int nd_attr_num(nd_run *r, const nd_stage *st, const char *key, double dflt, double *out, nd_err *e);
int nd_attr_req(nd_run *r, const nd_stage *st, const char *key, double *out, nd_err *e);
/* Attribute as a string with {L} substituted; NULL when absent. */
const char *nd_attr_str(const nd_stage *st, const char *key, char *buf, size_t cap);
/* Expand {L} and {E} in a template. */
void nd_expand(const char *tmpl, int layer, int expert, char *out, size_t cap);
/* Canonical tensor name -> on-disk name of a checkpoint (through the recipe's naming). */
const nd_tview *nd_run_tensor(nd_run *r, int reference, const char *canonical);
int nd_run_module(nd_run *r, int reference, const char *canonical_path, nd_module *m, nd_err *e);
/* a module path with its layer / expert numbers as '#' (names.c) */
void nd_path_pattern(const char *path, char *out, size_t cap);
/* record that the run bound module `name` of the checkpoint under test (nd_run_unreplayed) */
void nd_run_note_bound(nd_run *r, const char *name);
/* A module's name in ck: NAME when ck has it, else NAME under the multimodal decoder prefixes
 * (model.X -> model.language_model.X or language_model.model.X, lm_head -> language_model.lm_head)
 * written into alt, else NAME. */
const char *nd_module_located(const nd_ckpt *ck, const char *name, char *alt, size_t cap);

/* ---- weights on the backend ---- */
/* Dense/dequantized weight as FP32 [N,K] on the backend (reference meaning). */
int nd_weight_f32(nd_run *r, const nd_module *m, float **out, nd_err *e);
/* A small F32/BF16 tensor uploaded as FP32. */
int nd_tensor_f32(nd_run *r, const nd_tview *t, float **out, nd_err *e);
/* Host FP32 copy of a small tensor. */
int nd_tensor_host_f32(const nd_tview *t, float *out, int64_t n, nd_err *e);

/* ---- rows ---- */
/* Compare ref and prod of one stage/mode and append the row (probes + verdict + trace). */
int nd_emit_row(nd_run *r, const nd_stage *st, const char *name, const char *op, int mode,
                const nd_buf *ref, const nd_buf *prod, const nd_row *extra, int quantized, nd_err *e);

/* (record.c) Point r->sink at the loop's recording of what the ops hand over (sink.h); after the
 * loop's calib_cb and dump are set. */
void nd_loop_sink(nd_run *r);

/* KL and top-1 agreement of two logits buffers into f (head stages). */
int nd_head_logits(nd_run *r, const nd_buf *ref, const nd_buf *prod, nd_row *f, nd_err *e);

/* ---- ops ---- */
nd_op_fn nd_op_lookup(const char *name);
/* The ops the pipeline runs, by index (their descriptors: op_desc.h). */
int nd_op_count(void);
const char *nd_op_name(int i);


/* (weights.c) production operand: codes x e4m3 block scales, global factors left to alpha */
int nd_weight_codes_f32(nd_run *r, const nd_module *m, float **out, nd_err *e);
/* Both decodes of one NVFP4 weight from a single upload of its bytes. */
int nd_weight_ref_codes_f32(nd_run *r, const nd_module *m, float **ref, float **codes, nd_err *e);
/* reference meaning of the same bytes read with the nibbles of every byte swapped */
int nd_weight_swapped_f32(nd_run *r, const nd_module *m, float **out, nd_err *e);
/* repro: hand the stage's definition, reference inputs and tensors to the capture callback. */
int nd_run_capture(nd_run *r, const nd_stage *st, nd_buf **in_ref, nd_err *e);
/* --ref-numerics NAME -> r->ref_tf (exit 2 on an unknown name); the name as the trace records it. */
int nd_run_ref_numerics(nd_run *r, const char *name, nd_err *e);
const char *nd_run_ref_numerics_name(const nd_run *r);
/* transformers mode: 1 if the stage's `tf` attribute is `variant` (0 in fp32 mode); the RMSNorm and
 * rotary steps of the stage (nd_norm_steps, nd_rope_steps; FP32 in fp32 mode) */
int nd_stage_tf(const nd_run *r, const nd_stage *st, const char *variant);
int nd_stage_norm_steps(const nd_run *r, const nd_stage *st);
int nd_stage_rope_steps(const nd_run *r, const nd_stage *st);
/* A stage output's BF16 rounding on path `ref_path` (1: reference, 0: a production path): skipped
 * on the reference path in fp32-exact mode. nd_ref_bf16_steps: a kernel's own BF16-steps flag
 * (transformers' pooling) on the reference path, 0 in fp32-exact mode. */
int nd_round_out(nd_run *r, int ref_path, nd_buf *b, nd_err *e);
int nd_ref_bf16_steps(const nd_run *r, int ref_path, int steps);
/* The gemm mode (enum nd_gemm_mode) of a GEMM whose operands are BF16-exact (`bf16_exact`) or not:
 * under --ref-numerics transformers every FP32 GEMM sums in the CPU's order on every backend
 * (ND_GEMM_ORDERED), so a CUDA trace of a conformance fixture is the CPU's bit for bit. */
int nd_gemm_mode(const nd_run *r, int bf16_exact);
/* 1 if bisect put this stage on the reference path for production too. */
int nd_run_ref_only(const nd_run *r, const char *stage);
/* The captured activation of a stage (output, or `suffix` ".input"), as an nd_buf; NULL if absent. */
nd_buf *nd_run_captured(nd_run *r, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e);

/* override_targets.c: every --override names a checkpoint tensor, or a module or stage of the run
 * followed by a knob; else exit 2 with the nearest name (before the replay) */
int nd_override_targets_check(const nd_run *r, const nd_stack *st, nd_err *e);

/* run_checks.c: the config against the recipe (unsupported: and requires: keys), the prompt against
 * a config sliding window the recipe does not model, and whether any module holds quantized
 * tensors (1) or none does (0). */
int nd_run_check_config(const nd_run *r, nd_err *e);
/* config_structure.c: the model's structure the config states (widths, layer count, tied
 * embeddings, sparse layers, DeepSeek-V4's layer kinds) against the checkpoint's tensors; exit 2
 * naming the key and the tensor. */
int nd_run_check_structure(const nd_run *r, nd_err *e);
int nd_run_check_window(const nd_run *r, nd_err *e);
int nd_run_any_quantized(const nd_ckpt *c, nd_err *e); /* 1, 0, or -1 with the first binding error in e */
/* Quantized modules of the checkpoint under test, in decoder layers [lo, hi] (hi < 0: all) below the
 * model's layer count and under a layer prefix the run bound, whose pattern no stage of the run bound:
 * modules the recipe never replays (a recipe file that skips the MLP). Returns how many; *first the
 * first (copied). */
int nd_run_unreplayed(const nd_run *r, int lo, int hi, char *first, size_t cap);
/* 1 when a module of a decoder layer in [lo, hi] binds as quantized, else 0 */
int nd_run_any_quantized_in(const nd_ckpt *c, int lo, int hi);
#endif
