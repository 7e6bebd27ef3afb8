/* repair.c — candidate repairs (repair.h). Which candidates exist is decided from the module alone
 * (its format, scales and fused shards) and from the runtime behaviours the stage ran with (gate/up
 * order, routed scaling, FP16 epilogue: stack.h); none of them is preferred here: the diagnosis
 * replays every one and keeps the first that restores the stage (diagnose.c). */
#include "repair.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "pipeline/stack.h"
#include "pipeline/scale_repr.h"
#include "numerics/nd_numerics.h"

double nd_repair_file_value(const nd_stage_info *in, double mult) { return in->modelopt ? 1.0 / mult : mult; }

static const char *input_name(const nd_stage_info *in) { return in->modelopt ? "input_scale" : "input_global_scale"; }
static const char *weight_name(const nd_stage_info *in) { return in->modelopt ? "weight_scale_2" : "weight_global_scale"; }

static nd_repair *add(nd_repair *out, int *n, int cap, const char *name, const char *cause) {
    if (*n >= cap) return NULL;
    nd_repair *r = &out[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->cause, sizeof r->cause, "%s", cause);
    return r;
}

/* Module `path`'s input scale set so that its multiplier goes from old_mult to mult. */
static void set_input(nd_repair *r, const nd_stage_info *in, const char *path, double old_mult, double mult) {
    snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.%s=%.9g", path, input_name(in), nd_repair_file_value(in, mult));
    snprintf(r->what, sizeof r->what, "%s.%s %.6g -> %.6g", path, input_name(in), nd_repair_file_value(in, old_mult),
             nd_repair_file_value(in, mult));
}

static void set_weight(nd_repair *r, const nd_stage_info *in, double old_div, double div) {
    snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.%s=%.9g", in->module, weight_name(in), nd_repair_file_value(in, div));
    snprintf(r->what, sizeof r->what, "%s.%s %.6g -> %.6g", in->module, weight_name(in), nd_repair_file_value(in, old_div),
             nd_repair_file_value(in, div));
}

static int usable(double v) { return isfinite(v) && v > 0; }

/* the stored weight divisor is C / amax of the original weight (within 0.5%), the module's own or
 * its fused group's (a writer that gives the shards one global calibrates it to their largest):
 * C = 6 x 448 = 2688, or 6 x 256 = 1536 for Four Over Six (ModelOpt's NVFP4_FOUR_OVER_SIX_CFG,
 * TransformerEngine's 4over6: 256 leaves room for the block scale of a block mapped to 4, 1.5 x) */
#define FOS_CEIL 1536.0
static int maps_c(double div, double amax, double c) { return usable(amax) && usable(div) && fabs(div * amax / c - 1) < 5e-3; }
static int maps(double div, double amax) { return maps_c(div, amax, 2688.0) || maps_c(div, amax, FOS_CEIL); }
static int global_maps_amax(const nd_stage_info *in) {
    return maps(in->weight_div, in->orig_amax) || maps(in->weight_div, in->group_orig_amax);
}
static int global_is_fos(const nd_stage_info *in) {
    return maps_c(in->weight_div, in->orig_amax, FOS_CEIL) || maps_c(in->weight_div, in->group_orig_amax, FOS_CEIL);
}

/* k in 1..8 when the fit wants the divisor 2^k smaller (within 2%) and the largest stored block
 * scale is 2^k below what calibration gives the module's largest block under the stored global:
 * E4M3(amax / 6 x global), 448 when the global is the module's own (within half an E4M3 step, the
 * writer's own rounding of the product) */
static int exponent_shift(const nd_stage_info *in) {
    if (!in->has_original || !usable(in->weight_div_fit) || !usable(in->weight_div) || !usable(in->sf_max)) return 0;
    const double k = log2(in->weight_div / in->weight_div_fit);
    const int kr = (int)lround(k);
    if (kr < 1 || kr > 8 || fabs(k - kr) > 0.03) return 0;
    if (in->sf_max == ldexp(448.0, -kr)) return kr;
    /* Four Over Six: the block of the largest amax is scaled to 256 (mapped to 6) or 384 (to 4), and
     * no block goes past 384, so a healthy weight's largest scale lies in [256, 384] (half an E4M3
     * step either side); k too low puts it at or below 192 */
    const double up = ldexp(in->sf_max, kr);
    if (global_is_fos(in) && up >= 256.0 * (1 - 1.0 / 32) && up <= 384.0 * (1 + 1.0 / 32)) return kr;
    if (!usable(in->orig_amax)) return 0;
    const double want = nd_e4m3_round_mag((float)fmin(in->orig_amax / 6.0 * in->weight_div, 448.0));
    return usable(want) && fabs(log2(ldexp(in->sf_max, kr) / want)) < 0.06 ? kr : 0;
}

static void shift_repair(nd_repair *r, const nd_stage_info *in, int k) {
    snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.scale_exponent_shift=%d", in->module, k);
    const char *g = maps_c(in->weight_div, in->orig_amax, 2688.0)         ? "= 2688/amax of the original"
                    : maps_c(in->weight_div, in->group_orig_amax, 2688.0) ? "= 2688/amax of the fused group's originals"
                    : global_is_fos(in) ? "= 1536/amax of the original (Four Over Six)"
                                        : "!= 2688/amax of the original";
    snprintf(r->what, sizeof r->what, "%s's block scales read x 2^%d (max %.6g x 2^%d = %.6g, what calibration gives its largest "
             "block under the stored global; global %s)", in->module, k, in->sf_max, k, ldexp(in->sf_max, k), g);
}

/* A KV-cache row (FP8 cache, ops_kvcache.c): the checkpoint's scales applied once on write and read
 * (the stack dropped them or used them on one side only: kv_scale_ignored), then each scale set to
 * its calibrated value amax/448 where the one used is unusable or more than 4x off it. */
static int kv_repairs(const nd_row *row, const nd_stage_info *in, nd_repair *out, int cap) {
    int n = 0;
    nd_repair *r;
    if (in->kv_scales != ND_KV_APPLY && (r = add(out, &n, cap, "kv_scales_apply", "kv_scale_ignored"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.kv_scales=%d", row->name, ND_KV_APPLY);
        snprintf(r->what, sizeof r->what, "the KV scales of %s (k_scale %.6g%s) applied once on write and once on read, instead of '%s'",
                 row->name, in->kv_scale[0], in->kv_n > 1 ? ", v_scale too" : "", nd_kv_use_name(in->kv_scales));
    }
    /* every scale that is off, in one repair (an exporter bug hits k_scale and v_scale alike) */
    r = NULL;
    for (int i = 0; i < in->kv_n && i < 2; i++) {
        const double s = in->kv_scale[i], amax = in->kv_amax[i];
        if (!usable(amax)) continue;
        const double cal = fmax(amax / 448.0, in->kv_min_scale); /* as the producer calibrates it */
        if (usable(s) && s / cal < 4 && cal / s < 4) continue;
        const char *cause = !usable(s) ? "nonfinite_scale" : s < cal ? "scale_saturation" : "scale_underflow";
        if (!r && !(r = add(out, &n, cap, "kv_scale_calibrated", cause))) break;
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s=%.9g", in->kv_scale_name[i], cal);
        char v[32];
        snprintf(v, sizeof v, in->kv_scale_present[i] ? "%.6g" : "(absent: 1.0)", s);
        size_t len = strlen(r->what);
        snprintf(r->what + len, sizeof r->what - len, "%s%s %s -> %.6g (amax %.4g / 448%s)", len ? ", " : "",
                 strrchr(in->kv_scale_name[i], '.') + 1, v, cal, amax, in->kv_min_scale > 0 ? ", at least 1 as ModelOpt < 0.43 wrote it" : "");
    }
    return n;
}

int nd_repairs_for(const nd_row *row, const nd_stage_info *in, nd_repair *out, int cap) {
    int n = 0;
    nd_repair *r;
    if (!in->found) return 0;
    if (in->kv_cache) return kv_repairs(row, in, out, cap);
    if (in->router) {
        /* the correction bias in FP32, as the model routes (C33: SGLang's MoEGate allocates it in
         * BF16 under a quant_config; vLLM PR #23640 keeps DeepSeek's in FP32) */
        if (in->router_bias_bf16 && (r = add(out, &n, cap, "router_bias_fp32", "router_precision"))) {
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.router_bias_bf16=0", row->name);
            snprintf(r->what, sizeof r->what, "the score-correction bias of %s held in FP32 instead of BF16", row->name);
        }
        return n;
    }
    if (in->composite) {
        /* an MLP block or the routed experts' combine: the SwiGLU halves in the other order (a
         * W13/W31 mix-up either way), and the routed scaling factor applied exactly once */
        if ((r = add(out, &n, cap, "gate_up_swap", "gate_up_order"))) {
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.gate_up_swap=%d", row->name, !in->gate_up_swap);
            snprintf(r->what, sizeof r->what, "SwiGLU of %s computed as %s instead of %s", row->name,
                     in->gate_up_swap ? "act(gate)*up (W13)" : "act(up)*gate (W31)",
                     in->gate_up_swap ? "act(up)*gate" : "act(gate)*up");
        }
        if (in->routed_scaling >= 0 && in->routed_scaling != 1 && (r = add(out, &n, cap, "routed_scaling_once", "moe_output_scale"))) {
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.routed_scaling=1", row->name);
            snprintf(r->what, sizeof r->what, "routed_scaling_factor %.6g applied once in the combine of %s instead of %s",
                     in->routed_scaling_factor, row->name, in->routed_scaling == 0 ? "never" : in->routed_scaling == 2 ? "twice" : "more often");
        }
        return n;
    }
    /* an FP16 epilogue (the accumulator cast to FP16 before alpha): the BF16/FP32 one. First: it is
     * a known behaviour of the stack that ran, and halving a scale can also hide a marginal overflow */
    if (in->epilogue_fp16 && (r = add(out, &n, cap, "epilogue_fp32", "fp16_overflow"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.epilogue_fp16=0", row->name);
        if (in->epilogue_fp16 == 2)
            snprintf(r->what, sizeof r->what, "the output of %s kept in BF16 instead of written as FP16 (max 65504)", row->name);
        else
            snprintf(r->what, sizeof r->what, "alpha %.6g applied to the FP32 accumulator of %s before its output cast, not after an FP16 cast",
                     in->alpha, row->name);
    }
    /* the stage's kernel read the block scales another way than they are stored (stack behaviours,
     * scale_repr.h): the checkpoint's own reading, one behaviour at a time */
    /* the weight global folded into the E4M3 block scales (C19: vLLM's b12x MoE path): most scales
     * fall into E4M3's subnormal range and lose their precision; kept apart, as stored */
    if (in->sf_baked && (r = add(out, &n, cap, "global_scale_apart", "scale_underflow"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.global_scale_baked=0", row->name);
        snprintf(r->what, sizeof r->what, "the weight global scale of %s kept apart (alpha) instead of folded into its E4M3 block scales",
                 row->name);
    }
    if (in->sf_pow2 == 1 && (r = add(out, &n, cap, "block_scale_unrounded", "scale_pow2_rounding"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.block_scale_pow2=0", row->name);
        snprintf(r->what, sizeof r->what, "block scales of %s read as stored instead of rounded up to powers of two (UE8M0)", row->name);
    }
    if (in->sf_layout != ND_SF_LINEAR && (r = add(out, &n, cap, "block_scale_linear", "scale_layout_mismatch"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.block_scale_layout=0", row->name);
        snprintf(r->what, sizeof r->what, "block scales of %s read linear (as stored) instead of as %s", row->name,
                 nd_sf_layout_name(in->sf_layout));
    }
    if (in->sf_encoding != ND_SF_E4M3 && (r = add(out, &n, cap, "block_scale_e4m3", "scale_encoding_mismatch"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.block_scale_encoding=0", row->name);
        /* an MXFP4 weight's own reading (encoding 0 there) is E8M0 with bias 127 */
        snprintf(r->what, sizeof r->what, "block-scale bytes of %s decoded as %s (as stored) instead of as %s", row->name,
                 in->mxfp4 ? "E8M0 with bias 127" : "E4M3", nd_sf_encoding_name(in->sf_encoding));
    }
    if (in->tp_pad > 0 && (r = add(out, &n, cap, "zero_padding", "padding_scale_contamination"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.pad_garbage=0", row->name);
        snprintf(r->what, sizeof r->what, "the %d padded K columns per rank of %s (tp %d) zeroed instead of left uninitialised",
                 in->tp_pad, row->name, in->tp);
    }
    /* NaN block scales: read each as its row neighbour */
    if (in->nan_block_scales > 0 && (r = add(out, &n, cap, "block_scale_fix", "nan_weight_scale"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.block_scale_fix=1", in->module);
        snprintf(r->what, sizeof r->what, "%d NaN block scales of %s replaced by their row neighbours", in->nan_block_scales, in->module);
    }
    /* with an unusable weight divisor no input repair can restore the stage: those are not tried */
    /* (a W4A8 module's input scale is an FP8 per-tensor scale: the same repairs, calibrated as 448/amax) */
    if ((in->nvfp4_w4a4 || in->act_fp8) && usable(in->weight_div)) {
        const double m = in->input_mult;
        if (!usable(m) || !in->has_input_scale) {
            /* a missing, zero or non-finite input scale: the value calibration would give */
            if (usable(in->in_amax) && (r = add(out, &n, cap, "input_scale_calibrated", "nonfinite_scale")))
                set_input(r, in, in->module, m, (in->act_fp8 ? 448.0 : 2688.0) / in->in_amax);
        } else {
            /* the module's own input scale, and under a stack that fuses input scales, each
             * sibling's: the value the fused rule picked may be a sibling's */
            const int shards = in->stack_fused_input != ND_FUSED_OWN ? in->n_fused : 1;
            for (int j = 0; j < shards; j++) {
                const char *path = shards > 1 ? in->fused[j] : in->module;
                const double mj = shards > 1 ? in->fused_input_mult[j] : m;
                if (!usable(mj)) continue;
                if ((r = add(out, &n, cap, "input_scale_reciprocal", "scale_inverted"))) set_input(r, in, path, mj, 1.0 / mj);
                /* powers of two around the one that brings the multiplier used back to 2688/amax */
                double ratio = row->scale_ratio;
                if (!usable(ratio)) continue;
                int k0 = -(int)lround(log2(ratio));
                const int ks[3] = {k0, k0 - 1, k0 + 1}; /* the nearest first */
                for (int i = 0; i < 3; i++) {
                    int k = ks[i];
                    if (k == 0 || k < -40 || k > 40) continue;
                    if ((r = add(out, &n, cap, "input_scale_pow2", k < 0 ? "scale_saturation" : "scale_underflow"))) {
                        set_input(r, in, path, mj, ldexp(mj, k));
                        size_t len = strlen(r->what);
                        snprintf(r->what + len, sizeof r->what - len, " (x 2^%d)", k);
                    }
                }
            }
            /* the same fault on every shard (one exporter bug hits the whole fused group): the
             * reciprocal of each shard's input scale at once */
            if (shards > 1 && shards <= ND_REPAIR_MAX_OVR && (r = add(out, &n, cap, "input_scale_reciprocal_group", "scale_inverted"))) {
                for (int j = 0; j < shards; j++) {
                    const double mj = in->fused_input_mult[j];
                    if (!usable(mj)) { n--; r = NULL; break; }
                    snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.%s=%.9g", in->fused[j], input_name(in),
                             nd_repair_file_value(in, 1.0 / mj));
                }
                if (r) snprintf(r->what, sizeof r->what, "the input scale of all %d shards of the fused group replaced by its reciprocal", shards);
            }
        }
    }
    /* with the original weights and block scales that are all powers of two: the scales refitted to
     * the original, keeping the codes (read unrounded) */
    if (in->has_original && in->sf_all_pow2 && (r = add(out, &n, cap, "block_scale_refit", "scale_pow2_rounding"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.block_scale_refit=1", in->module);
        snprintf(r->what, sizeof r->what, "the power-of-two block scales of %s refitted to the original weight, codes kept", in->module);
    }
    /* with the original weights: block scales whose E4M3 exponent was written k too low (an
     * exponent bias off by k): the fit wants the divisor 2^k smaller, and the scales top out at
     * exactly 448 / 2^k (a calibrated weight's largest block scale is 448). Listed before the
     * divisor fit when the stored global maps the original's amax exactly (2688 / amax): then the
     * global is right and the block scales are not (diagnose.c keeps the first that restores) */
    const int shift = exponent_shift(in);
    if (shift && global_maps_amax(in) && (r = add(out, &n, cap, "scale_exponent_shift", "scale_encoding_mismatch")))
        shift_repair(r, in, shift);
    /* with the original weights: the weight divisor that fits the stored codes and block scales,
     * when the stored one is more than 5% away from it */
    if (usable(in->weight_div_fit) && usable(in->weight_div) && fabs(in->weight_div_fit / in->weight_div - 1) > 0.05 &&
        (r = add(out, &n, cap, "weight_scale_fit", in->n_fused > 1 ? "fused_scale_mismatch" : "weight_global_mismatch")))
        set_weight(r, in, in->weight_div, in->weight_div_fit);
    if (shift && !global_maps_amax(in) && (r = add(out, &n, cap, "scale_exponent_shift", "scale_encoding_mismatch")))
        shift_repair(r, in, shift);
    /* a zero or non-finite weight global: with the original, its calibrated value is the fit */
    if (usable(in->weight_div_fit) && !usable(in->weight_div) && (r = add(out, &n, cap, "weight_scale_calibrated", "nonfinite_scale")))
        set_weight(r, in, in->weight_div, in->weight_div_fit);
    /* a zero or non-finite weight global: a sibling shard's value (shards are calibrated alike) */
    if (!usable(in->weight_div))
        for (int i = 0; i < in->n_fused; i++)
            if (strcmp(in->fused[i], in->module) && usable(in->fused_weight_div[i]) &&
                (r = add(out, &n, cap, "weight_scale_from_shard", "nonfinite_scale"))) {
                set_weight(r, in, in->weight_div, in->fused_weight_div[i]);
                break;
            }
    /* fused shards: every other rule than the stack's, for the input multiplier and the weight divisor */
    if (in->n_fused > 1 && in->nvfp4_w4a4)
        for (int rule = 0; rule < ND_FUSED_NRULES; rule++) {
            if (rule == in->stack_fused_input && rule == in->stack_fused_weight) continue;
            if (!(r = add(out, &n, cap, "fused_rule", "fused_scale_mismatch"))) break;
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.fused_input=%d", row->name, rule);
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.fused_weight=%d", row->name, rule);
            snprintf(r->what, sizeof r->what, "fused shards' scales combined by rule '%s' instead of the stack's '%s'/'%s'",
                     nd_fused_rule_name(rule), nd_fused_rule_name(in->stack_fused_input), nd_fused_rule_name(in->stack_fused_weight));
        }
    if (in->fp4_weight && (r = add(out, &n, cap, "nibble_swap", "weight_packing"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.nibble_swap=1", in->module);
        snprintf(r->what, sizeof r->what, "every packed byte of %s read with its nibbles swapped", in->module);
    }
    /* with the original weights: the block scales read in another layout or encoding than the
     * format's (stored swizzled or transposed; E8M0 or integer bytes where E4M3 is read) */
    for (int l = ND_SF_SWIZZLED; in->has_original && !in->mxfp4 && l < ND_SF_NLAYOUTS; l++) {
        if (l == ND_SF_SWIZZLED && !in->sf_swizzle_fits) continue;
        if (l == ND_SF_PADDED && !in->sf_padded) continue; /* rows of the stored tensor's length */
        if (!(r = add(out, &n, cap, "scale_layout", "scale_layout_mismatch"))) break;
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.scale_layout=%d", in->module, l);
        if (l == ND_SF_PADDED)
            snprintf(r->what, sizeof r->what, "block scales of %s read in rows of %d bytes, as stored", in->module, in->sf_padded);
        else
            snprintf(r->what, sizeof r->what, "block scales of %s read as stored in the %s layout", in->module, nd_sf_layout_name(l));
    }
    if (in->has_original && !in->mxfp4 && (r = add(out, &n, cap, "scale_encoding", "scale_encoding_mismatch"))) {
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.scale_encoding=%d", in->module, ND_SF_E8M0);
        snprintf(r->what, sizeof r->what, "block-scale bytes of %s decoded as E8M0 instead of E4M3", in->module);
    }
    /* an MXFP4 weight's E8M0 bytes written with another exponent bias (compressed-tensors 0.13: 125, C26) */
    for (int x = ND_SF_E8M0_B125; in->has_original && in->mxfp4 && x <= ND_SF_E8M0_B128; x++) {
        if (!(r = add(out, &n, cap, "scale_encoding", "scale_encoding_mismatch"))) break;
        snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.scale_encoding=%d", in->module, x);
        snprintf(r->what, sizeof r->what, "E8M0 bytes of %s decoded with bias %d, as written, instead of 127", in->module,
                 x == ND_SF_E8M0_B125 ? 125 : 128);
    }
    return n;
}
