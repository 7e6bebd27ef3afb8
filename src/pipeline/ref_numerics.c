/* ref_numerics.c — which numerics the reference path runs (trace --ref-numerics), and the
 * variant of transformers' BF16 steps a stage takes in `transformers` mode.
 *
 * fp32 (default, SPEC §4): exact dequantized weights, FP32 math, one BF16 rounding per stage output.
 * transformers: what transformers' eager forward of a BF16 model rounds inside a stage as well
 * (kernels/numerics/nd_bf16_steps.h). Where models differ the recipe says which class the stage
 * follows (attribute `tf`, read only in this mode):
 *   rmsnorm: tf: bf16_then_weight  (LlamaRMSNorm, DeepseekV3RMSNorm: `weight * h.to(bf16)`)
 *            tf: rsqrt_bf16        (DeepseekV4UnweightedRMSNorm: `x * rsqrt(...).to(bf16)`)
 *            absent                (DeepseekV4RMSNorm, Olmo2RMSNorm `(weight * h).to(bf16)`: one rounding, as fp32)
 *   rope:    tf: bf16_products     (Llama / DeepseekV3: each product and the sum rounded)
 *            tf: fp32              (Olmo2: FP32 cos/sin, the rotation in FP32, one rounding)
 *            absent                (DeepseekV4: BF16 cos/sin, FP32 rotation)
 *   router:  tf: bf16              (DeepseekV4 routers: BF16 gate weight, logits, scores, weights)
 *            tf: bf16_logits       (MixtralTopKRouter: BF16 logits, FP32 softmax, top-k, weights)
 *            tf: bf16_logits_weights (Qwen3MoeTopKRouter: the same, the weights then cast to BF16)
 *            absent                (DeepseekV3TopkRouter: FP32 gate, as fp32)
 *   moe_experts: tf: bf16_products (BF16 routing weights: each weight·output product rounded)
 *            tf: bf16_bias     (GptOssExperts: `x @ W + b` on BF16 tensors: the product rounded, then
 *                              the bias added and rounded again; a list: "bf16_products,bf16_bias")
 *   attention: tf: bf16_sink_max (GptOssAttention: the logits and the sink minus their max in BF16)
 * Attention (scores, probabilities), SwiGLU and V4's hc_post take their steps in every model.
 * fp32-exact: the reference path rounds nothing: no BF16 per stage output, none inside a stage (V4's
 * compressor pooling included), weights as dequantized (a BF16 weight widened), FP32 router, norms,
 * rope, attention, experts — transformers' FP32 forward (`model.float()`) of the dequantized model,
 * the sharp check of the math (docs/conformance.md). The production paths (isolated and chained,
 * pure stages' chained path too) round as in fp32 mode: they are what a serving stack computes. */
#include <string.h>
#include "run.h"
#include "numerics/nd_bf16_steps.h"

int nd_run_ref_numerics(nd_run *r, const char *name, nd_err *e) {
    r->ref_tf = r->ref_exact = 0;
    if (!name || !strcmp(name, "fp32")) return 0;
    if (!strcmp(name, "transformers")) { r->ref_tf = 1; return 0; }
    if (!strcmp(name, "fp32-exact")) { r->ref_exact = 1; return 0; }
    return nd_fail(e, ND_EXIT_BADINPUT, "unknown reference numerics '%s' (fp32, fp32-exact, transformers)", name);
}

const char *nd_run_ref_numerics_name(const nd_run *r) {
    return r->ref_tf ? "transformers" : r->ref_exact ? "fp32-exact" : "fp32";
}

int nd_round_out(nd_run *r, int ref_path, nd_buf *b, nd_err *e) {
    if (ref_path && r->ref_exact) return 0;
    return r->be->round_bf16(r->be, b->p, b->n, e);
}

int nd_ref_bf16_steps(const nd_run *r, int ref_path, int steps) { return ref_path && r->ref_exact ? 0 : steps; }

int nd_gemm_mode(const nd_run *r, int bf16_exact) {
    if (bf16_exact) return ND_GEMM_BF16_EXACT;
    return r->ref_tf ? ND_GEMM_ORDERED : ND_GEMM_F32;
}

/* 1 if the run is in transformers mode and the stage's `tf` attribute is `variant` */
/* every variant nd_stage_tf is asked for somewhere (a recipe naming another is refused at load) */
const char *const ND_TF_VARIANTS[] = {"bf16", "bf16_bias", "bf16_logits", "bf16_logits_weights", "bf16_products",
                                      "bf16_scale", "bf16_sink_max", "bf16_then_weight", "fp32", "rsqrt_bf16", NULL};

int nd_stage_tf(const nd_run *r, const nd_stage *st, const char *variant) {
    if (!r->ref_tf) return 0;
    const char *v = nd_stage_attr(st->def, "tf");
    const size_t n = strlen(variant);
    /* a comma-separated list of variants ("bf16_products,bf16_bias") */
    for (const char *p = v; p && *p; p += strcspn(p, ",")) {
        if (*p == ',') p++;
        while (*p == ' ') p++;
        if (!strncmp(p, variant, n) && (p[n] == 0 || p[n] == ',' || p[n] == ' ')) return 1;
    }
    return 0;
}

int nd_stage_norm_steps(const nd_run *r, const nd_stage *st) {
    if (nd_stage_tf(r, st, "bf16_then_weight")) return ND_NORM_BF16_THEN_W;
    if (nd_stage_tf(r, st, "rsqrt_bf16")) return ND_NORM_RSQRT_BF16;
    return ND_NORM_FP32;
}

int nd_stage_rope_steps(const nd_run *r, const nd_stage *st) {
    if (!r->ref_tf) return ND_ROPE_FP32;
    if (nd_stage_tf(r, st, "fp32")) return ND_ROPE_FP32;
    return nd_stage_tf(r, st, "bf16_products") ? ND_ROPE_BF16_PRODUCTS : ND_ROPE_BF16_TRIG;
}
