/* findings.h — static checks of a checkpoint's scales (what `nvfp4dbg inspect` reports; the trace
 * command reuses them to explain a divergence).
 *
 * Codes (stable strings). A NaN, Inf or zero scale is reported once, as nonfinite_scale, and left
 * out of the comparisons of fused shards.
 *   nonfinite_scale       error    a weight or input global scale that is NaN, Inf or zero
 *   nan_weight_scale      error    NaN (or Inf) block scales in the weight
 *   scale_convention      error    a compressed-tensors global below 1 (a ModelOpt-style value under a
 *                                  compressed-tensors name) or a ModelOpt global above 1 (the reverse)
 *   fused_scale_mismatch  error    fused shards (q_a_proj/kv_proj, gate/up, or the shards of one
 *                                  fused tensor) with different weight global scales
 *   fused_input_mismatch  error    fused shards with different input global scales: one input feeds both,
 *                                  so calibration gives them one value (warning when they differ by < 0.1%)
 *   missing_scale         error    a quantized weight without its global scale, or a W4A4 module
 *                                  without its input scale
 *   scale_dtype           error    a global or input scale stored in a dtype other than F32
 *   global_misfit         warning  the largest block scale is far below 448 (< 112): the global scale
 *                                  does not fit the weight (precision is lost)
 *   block_saturation      warning  more than a quarter of the blocks (and more than one) sit at 448:
 *                                  the global scale is too large for the weight, values are clipped
 *   config_mismatch       warning  quantized tensors on a module the quantization config excludes
 */
#ifndef ND_FINDINGS_H
#define ND_FINDINGS_H

#include <stddef.h>
#include <stdint.h>
#include "ckpt/ckpt.h"

typedef enum nd_severity { ND_SEV_WARNING = 1, ND_SEV_ERROR = 2 } nd_severity;

typedef struct nd_finding {
    nd_severity sev;
    char code[32];
    char module[256];
    char tensor[320];   /* the tensor concerned, "" when none */
    char msg[512];      /* one sentence for a person */
} nd_finding;

typedef struct nd_findings {
    nd_finding *v;
    size_t n, cap;
} nd_findings;

void nd_findings_init(nd_findings *f);
void nd_findings_free(nd_findings *f);
/* Append one finding; returns 0, or ND_EXIT_INTERNAL when out of memory. */
int nd_findings_add(nd_findings *f, nd_severity sev, const char *code, const char *module,
                    const char *tensor, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
size_t nd_findings_count(const nd_findings *f, nd_severity sev);
const char *nd_severity_str(nd_severity s);

/* Statistics of a module's block scales (e4m3 for NVFP4, e8m0 for MXFP4, f32/e8m0 for FP8), as
 * decoded values. at_max counts e4m3 scales equal to 448 (NVFP4 only). */
typedef struct nd_scale_stats {
    int64_t count, zeros, nan, inf, at_max;
    double min, max;     /* over finite values; NaN when there are none */
} nd_scale_stats;
void nd_scale_stats_of(const nd_module *m, nd_scale_stats *st);

/* Checks of one bound module (its stats from nd_scale_stats_of). */
int nd_check_module(const nd_ckpt *c, const nd_module *m, const nd_scale_stats *st, nd_findings *f);
/* Checks of fused partners (q_a_proj/kv_proj, kv_a_proj_with_mqa, wq_a/wkv; gate_proj/up_proj,
 * w1/w3): a and b are both bound NVFP4 modules that a serving stack fuses. */
int nd_check_fused(const nd_module *a, const nd_module *b, nd_findings *f);
/* The path of the module fused with `path` when `path` is the first shard of a fused pair
 * (q_a_proj -> kv_proj or kv_a_proj_with_mqa, wq_a -> wkv, gate_proj -> up_proj, w1 -> w3) and
 * the partner is in the checkpoint: 1 and out filled; 0 otherwise. */
int nd_fused_partner(const nd_ckpt *c, const char *path, char *out, size_t cap);

/* Every check on a whole checkpoint: bind each module (a bind error is returned as bad input),
 * compute its stats, check it and its fused partner. stats_out, when not NULL, receives one
 * nd_scale_stats per module in nd_ckpt_module_path order (caller frees). Block-scale pages are
 * released after each module. */
int nd_ckpt_check(const nd_ckpt *c, nd_findings *f, nd_scale_stats **stats_out, nd_err *e);

#endif
