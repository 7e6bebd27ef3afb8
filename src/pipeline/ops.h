/* ops.h — ops whose production math differs from the reference (quantized linears, MoE). */
#ifndef ND_OPS_H
#define ND_OPS_H
#include "run.h"
#include "sink.h"

/* The ops defined outside ops_basic.c, X(name) for nd_op_<name>, in the order of the op table
 * (ops_basic.c): ops_linear.c, ops_moe.c, ops_layout.c, ops_fp8sim.c, ops_kvcache.c, ops_gdn.c
 * (Qwen3-Next), ops_tensor.c, ops_compress.c (DeepSeek-V4 compressed attention). What each reads and
 * writes: their descriptors (op_desc.c, docs/ops.md). */
#define ND_OPS_EXTERN(X) X(linear) X(grouped_linear) X(router) X(moe_experts) X(mlp) X(split) X(concat) X(fp8_sim) \
    X(kv_cache) X(gate_mul) X(causal_conv1d) X(gated_delta_rule) X(tensor) X(compress) X(indexer) X(attention_compressed)
#define ND_OP_DECLARE(name) int nd_op_##name(nd_opctx *c, nd_err *e);
ND_OPS_EXTERN(ND_OP_DECLARE)
#undef ND_OP_DECLARE

/* Run a function of the stage inputs whose production math equals the reference: reference from
 * reference inputs, chained from chained inputs, isolated = the reference output. */
typedef int (*nd_pure_fn)(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e);
int nd_run_pure(nd_opctx *c, nd_pure_fn f, nd_err *e);

/* Several required numeric attributes: pairs of key and double * after e, ended by NULL. */
int nd_attr_reqs(nd_run *r, const nd_stage *st, nd_err *e, ...);

/* The checkpoint tensor the stage's attribute `attr` names. A stage without the attribute: *t NULL,
 * and a bad-input error when it is required. */
int nd_stage_tensor(nd_opctx *c, const char *attr, int required, const nd_tview **t, nd_err *e);
/* The optional tensor `attr` names as n FP32 values on the host, *out NULL without the attribute
 * (free()). */
int nd_stage_host_f32(nd_opctx *c, const char *attr, int64_t n, float **out, nd_err *e);
/* rows indexed by token position (the run's positions hold one per token): more rows than the run
 * has tokens is bad input (a hand-edited bundle), not a read past the positions */
int nd_positions_cover(const nd_opctx *c, const char *what, int64_t rows, nd_err *e);

/* A linear module applied on both paths, the building block of the ops above.
 * groups > 1: grouped projection (x [t, groups*k], w [groups*n, k]). */
typedef struct nd_lin {
    char canonical[192];   /* module path, canonical naming */
    char stage[ND_NAME_LEN];
    nd_module m;           /* checkpoint module */
    nd_module fused[4];    /* fused shards (m included) for the stack's shared-scale rule */
    char fused_canonical[4][192]; /* their canonical paths ([0] = canonical) */
    int n_fused;
    int groups;
    int act_fp8_group;     /* production FP8 activation groups (0: none) */
    float *w_ref;          /* reference weight FP32 [N,K] (original with --reference-checkpoint) */
    float *w_prod;         /* production operand (codes x block scales for NVFP4 W4A4) */
    float *w_floor;        /* the checkpoint's own codes x block scales when the stage's kernel reads the
                            * scales another way (stack.h nd_sf_read): the floor quantizes with these */
    nd_sf_read sf_read;    /* how the production GEMM reads the block scales */
    float *pqs;            /* ModelOpt AWQ's pre_quant_scale [K] as FP32 on the backend, or NULL: the
                            * input times it (rounded to BF16, as the engine multiplies) before the
                            * quantizer and the GEMM; on the reference path only where the reference
                            * weight is the checkpoint's (which holds its inverse), not an original's */
    float *bias;           /* the module's bias [N] as FP32 on the backend, or NULL (both paths add it
                            * before the output's BF16 rounding, as F.linear and the serving epilogue do) */
    int prod_kind;         /* LIN_* below */
    nd_prod_params pp;
    double weight_rel_l2, weight_rel_l2_swap;
    int logits;            /* head: also compute KL / top-1 agreement */
    char finding[32];      /* static finding on the module (a cause code) or "" */
    int epilogue_fp16;     /* NVFP4 W4A4 under an FP16 epilogue: accumulator cast to FP16 before alpha */
    int bias_after_round;  /* reference under tf: bf16_bias: the product rounded before the bias is added */
} nd_lin;

enum { LIN_SAME = 0, LIN_NVFP4_W4A4, LIN_WEIGHT_ONLY };

/* Bind and load; fused_tmpl is a comma-separated list of sibling module templates (may be NULL). */
int nd_lin_open(nd_run *r, const nd_stage *st, const char *canonical, const char *stage_name, const char *fused_csv,
                int groups, int act_fp8_group, nd_lin *l, nd_err *e);
void nd_lin_close(nd_run *r, nd_lin *l);
/* y_ref = x_ref W_ref^T (rounded to BF16, except under --ref-numerics fp32-exact). */
int nd_lin_ref(nd_run *r, nd_lin *l, const nd_buf *x, nd_buf **y, nd_err *e);
/* Production output for input x (a reference input in isolated mode). x_ref_amax is the amax of
 * the reference input (for scale_ratio). Fills the row figures the probe cannot know. */
int nd_lin_prod(nd_run *r, nd_lin *l, const nd_buf *x, double x_ref_amax, nd_buf **y, nd_row *fig, nd_err *e);
/* The floor: the same stage quantized the healthy way (multiplier within 2x of 2688/amax of the input,
 * and, with --reference-checkpoint, the original weights quantized as compressed-tensors does). */
int nd_lin_floor(nd_run *r, nd_lin *l, const nd_buf *x_ref, double x_ref_amax, nd_buf **y, nd_err *e);
/* Row emission for a linear applied to (x_ref -> y_ref) and, per mode, production inputs. */
int nd_lin_stage(nd_run *r, const nd_stage *st, nd_lin *l, const nd_buf *x_ref, const nd_buf *y_ref,
                 const nd_buf *x_chain, int want_iso, int want_chain, nd_buf **y_iso, nd_buf **y_chain, nd_err *e);

double nd_buf_amax(nd_run *r, const nd_buf *b, nd_err *e);
#endif
