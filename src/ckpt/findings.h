/* findings.h — static checks of a checkpoint's scales (what `nvfp4dbg inspect` reports; the trace
 * command reuses them to explain a divergence).
 *
 * Codes (stable strings). A NaN, Inf or zero scale is reported once, as nonfinite_scale, and left
 * out of the comparisons of fused shards. The second column is what the finding breaks (its
 * nd_break_kind, below); its severity follows from that and the stacks judged.
 *   nonfinite_scale       all      a weight or input global scale that is NaN, Inf or zero
 *   nan_weight_scale      all      NaN (or Inf) block scales in the weight
 *   scale_convention      input    a compressed-tensors input scale below 1 (a ModelOpt-style value under
 *                         conv.    a compressed-tensors name) or a ModelOpt input scale above 1 (the reverse)
 *                         all      the same of a weight global scale
 *   fused_scale_mismatch  fused-w  fused shards (q_a_proj/kv_proj, q/k/v, gate/up) with different weight
 *                                  global scales
 *                         all      the shards of one fused tensor ([s] global scales) that differ: every
 *                                  profile reads such a module with one divisor (module.c: the largest)
 *   fused_input_mismatch  fused-in fused shards with different input global scales: one input feeds both,
 *                                  so calibration gives them one value (none when they differ by < 0.1%)
 *                         all      the shards of one fused tensor's input scale that differ
 *   missing_scale         all      a quantized weight without its global scale, or a W4A4 module
 *                                  without its input scale
 *   scale_dtype           all      a global or input scale stored in a dtype other than F32
 *   unreplayable          all      trace cannot replay the checkpoint: a tensor its recipe reads is
 *                                  missing or malformed (inspect's load check, cli/inspect_load.h)
 *   global_misfit         none     the largest block scale is far below 448 (< 112): the global scale
 *                                  does not fit the weight (precision is lost)
 *   block_saturation      none     more than a quarter of the blocks (and more than one) sit at 448:
 *                                  the global scale is too large for the weight, values are clipped
 *   (quant_config_mismatch, precision_policy_violation, scale_not_loaded, scale_underflow,
 *   scale_encoding_mismatch, scale_pow2_rounding, expert_scale_outlier: the static audit, ckpt/audit.h;
 *   it replaces the config_mismatch warning of earlier versions)
 *   kv_scale_missing      kv-fp8   the config announces an FP8 KV cache but an attention layer has no
 *                                  k_scale/v_scale (ckpt/kv_scales.h)
 *   kv_scale_orphan       kv-fp8   KV-cache scales no loader reads: no config announces them, or they
 *                                  belong to no attention layer
 *   nonfinite_scale       kv-fp8   a KV-cache scale that is NaN, Inf, zero or negative
 *
 * Which stacks a finding breaks (SPEC §7: static findings say which stack profiles they break;
 * under a stack they do not break they are warnings). A serving-stack profile
 * (recipes/stack-*.yaml, src/pipeline/stack.h) has three keys that decide it:
 *   ND_BREAKS_NONE        no stack: the numbers are what the checkpoint means, only precision or
 *                         bookkeeping suffers. Always a warning.
 *   ND_BREAKS_ALL         every stack: no profile key turns a NaN/Inf/zero scale, a NaN block scale,
 *                         a missing scale, a non-F32 scale or an inverted WEIGHT global into the
 *                         right number (reciprocal_input applies to the input multiplier only).
 *   ND_BREAKS_FUSED_WEIGHT  profiles whose fused_weight is not `own`: max/min/first give the fused
 *                         GEMM one weight divisor while the block scales stay per shard, so every shard
 *                         but the chosen one is scaled by the ratio of the divisors. Under `own` (exact)
 *                         each shard keeps its divisor and the mismatch is harmless.
 *   ND_BREAKS_FUSED_INPUT   profiles whose fused_input is not `own`: one multiplier for both shards is
 *                         the other shard's calibration (max: values clip, min: coarser steps); alpha
 *                         follows the multiplier, so nothing else changes. Under `own` it is harmless.
 *   ND_BREAKS_KV_FP8      profiles that store the KV cache in FP8 (kv_cache: fp8): only they read
 *                         KV-cache scales; under a BF16 cache they are inert.
 *   ND_BREAKS_INPUT_CONVENTION  profiles with reciprocal_input false. The ckpt layer normalises by the
 *                         tensor's NAME (CT value as is, ModelOpt 1/value), so an input scale written in
 *                         the other convention becomes the reciprocal of the right multiplier
 *                         (amax/2688 instead of 2688/amax: the activations quantize to zero).
 *                         A stack that takes the reciprocal of the normalised value (modular-6600)
 *                         inverts it back and computes the right multiplier, so it is not broken by
 *                         this finding (it is by every healthy input scale, which is the stack's bug,
 *                         not a finding of the checkpoint). The fused rules do not change this.
 * The ckpt layer knows no stack profiles (they belong to src/pipeline, which depends on ckpt and not
 * the reverse), so a finding carries only its kind; nd_stack_breaks (src/pipeline/stack.h) applies
 * the rules above to a loaded profile, and `inspect` judges each finding against the stacks asked for
 * (--stack; default `exact`, what trace uses): an error when it breaks one of them, else a warning.
 */
#ifndef ND_FINDINGS_H
#define ND_FINDINGS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/ckpt.h"

typedef enum nd_severity { ND_SEV_WARNING = 1, ND_SEV_ERROR = 2 } nd_severity;

/* What a finding breaks (the rules above). */
typedef enum nd_break_kind {
    ND_BREAKS_NONE = 0,
    ND_BREAKS_ALL,
    ND_BREAKS_FUSED_WEIGHT,
    ND_BREAKS_FUSED_INPUT,
    ND_BREAKS_INPUT_CONVENTION,
    ND_BREAKS_KV_FP8,
    ND_BREAKS_NKINDS
} nd_break_kind;

typedef struct nd_finding {
    nd_severity sev;    /* as added: warning for ND_BREAKS_NONE, else error (it breaks some stack);
                         * inspect re-judges it against the stacks asked for */
    nd_break_kind kind;
    char code[32];
    char module[256];
    char tensor[320];   /* the tensor concerned, "" when none */
    char msg[512];      /* one sentence for a person */
    int64_t row, col;   /* coordinates in the tensor: block row/col of a block-scale finding (-1: none;
                         * set with nd_findings_set_coord) */
} nd_finding;

typedef struct nd_findings {
    nd_finding *v;
    size_t n, cap;
} nd_findings;

void nd_findings_init(nd_findings *f);
void nd_findings_free(nd_findings *f);
/* Append one finding (severity from its kind, see nd_finding.sev); returns 0, or ND_EXIT_INTERNAL
 * when out of memory. */
int nd_findings_add(nd_findings *f, nd_break_kind kind, const char *code, const char *module,
                    const char *tensor, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
/* Coordinates (block row, block column) of the last finding added. */
void nd_findings_set_coord(nd_findings *f, int64_t row, int64_t col);
size_t nd_findings_count(const nd_findings *f, nd_severity sev);
const char *nd_severity_str(nd_severity s);
/* "none", "all", "fused_weight", "fused_input", "input_convention", "kv_fp8" */
const char *nd_break_kind_str(nd_break_kind k);

/* Statistics of a module's block scales (e4m3 for NVFP4, e8m0 for MXFP4, f32/e8m0 for FP8), as
 * decoded values. at_max counts e4m3 scales equal to 448 (NVFP4 only). */
typedef struct nd_scale_stats {
    int64_t count, zeros, nan, inf, at_max;
    double min, max;     /* over finite values; NaN when there are none */
} nd_scale_stats;
void nd_scale_stats_of(const nd_module *m, nd_scale_stats *st);

/* Checks of one bound module (its stats from nd_scale_stats_of). */
int nd_check_module(const nd_ckpt *c, const nd_module *m, const nd_scale_stats *st, nd_findings *f);
/* Checks of fused partners (q_a_proj/kv_proj, kv_a_proj_with_mqa, wq_a/wkv; q/k/v; gate_proj/up_proj,
 * w1/w3): a and b are both bound NVFP4 modules that a serving stack fuses. */
int nd_check_fused(const nd_module *a, const nd_module *b, nd_findings *f);
/* The path of the module fused with `path` when `path` is the first shard of a fused pair
 * (q_a_proj -> kv_proj or kv_a_proj_with_mqa, wq_a -> wkv, q_proj -> k_proj -> v_proj (q/k/v is checked
 * as two pairs), gate_proj -> up_proj, w1 -> w3) and
 * the partner is in the checkpoint: 1 and out filled; 0 otherwise. */
int nd_fused_partner(const nd_ckpt *c, const char *path, char *out, size_t cap);
/* 1 when a and b (module paths or stage names) are two different shards of one fused group of one
 * block (layers.0.self_attn.q_proj and layers.0.self_attn.v_proj; the groups of nd_fused_partner). */
int nd_fused_shards(const char *a, const char *b);

/* Every check on a whole checkpoint: bind each module (a bind error is returned as bad input),
 * compute its stats, check it and its fused partner. stats_out, when not NULL, receives one
 * nd_scale_stats per module in nd_ckpt_module_path order (caller frees). Block-scale pages are
 * released after each module. */
int nd_ckpt_check(const nd_ckpt *c, nd_findings *f, nd_scale_stats **stats_out, nd_err *e);

#endif
