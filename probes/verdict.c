/* verdict.c — how a row is judged from its figures (SPEC §7; verdict.h).
 *
 * A row diverges when
 *   (a) its reference output has NaN/Inf its input did not have (the checkpoint itself is
 *       broken here), or
 *   (b) its production output has NaN/Inf the reference does not have, or
 *   (c) its error is larger than NVFP4 quantization of its own operands explains: SQNR below the
 *       measured floor (floor_sqnr_db, the same stage quantized the healthy way) minus
 *       floor_margin_db; without a floor, the recipe's documented fixed thresholds (min_cosine,
 *       min_sqnr_db for quantized stages; chained_min_cosine for composite stages whose
 *       projections have rows of their own), or
 *   (d) its magnitude is wrong although its direction is right: cosine is blind to a uniform
 *       scale error (a 4x output has cosine 1), so a non-chained row whose output amax is more than
 *       2x away from the reference's, or whose rel L2 is above 1, diverges; an empty production
 *       output beside a non-empty reference always does. A composite row (no floor) also diverges
 *       when the part of its relative error that its angle does not explain,
 *       sqrt(rel_l2^2 - (1 - cosine^2)), is above 0.25: that is |k - 1| for an output k times the
 *       reference (a routed scaling factor of 1.5 applied twice: 0.5) but only about rel_l2^2 for
 *       quantization noise (at most 0.21 for a row that passes chained_min_cosine 0.9; clean
 *       synth and conformance checkpoints stay below 0.1).
 *   (e) its quantizer multiplier is more than FAR_MULT times away from the healthy 2688/amax
 *       (448/amax for a W4A8 module's FP8 input; scale_ratio; calibration spread is within about 2x) and that costs it more than
 *       FAR_MULT_LOSS_DB below its floor: an inverted input scale of about 270 (a multiplier of
 *       1/270 for an input of amax 10) puts the block scales into E4M3's subnormals and costs 2 to
 *       4 dB, within floor_margin_db, yet it is a wrong scale, not noise (the diagnosis proves it
 *       by the reciprocal bringing the stage back to its floor).
 *   Chained rows diverge only by (a)/(b) and by routing: their drift grows with depth by design
 *   and is reported in the figures; a chained row of a stage whose isolated row diverged carries
 *   that verdict too (src/pipeline/run.c).
 *
 * The code a diverged row carries is what its figures suggest (the diagnosis proves or replaces
 * it by repair, src/diagnose/):
 *   nan_input            the row's input already had NaN/Inf on that path
 *   nonfinite_scale      the quantizer multiplier or alpha is NaN/Inf/0, or the module's global
 *                        scale is (a static fact: proof on its own)
 *   nan_weight_scale     the module has NaN/Inf block scales (a static fact)
 *   weight_packing       with --reference-checkpoint, the weight decodes at least 2x closer to the
 *                        original with the nibbles of every byte swapped
 *   scale_inverted       multiplier ratio r = used / (2688/amax) within 0.5 decade of 1/g²
 *   scale_saturation     r > 2, or NaN-free clipping of more than 20% of the elements
 *   scale_underflow      r < 1/2
 *   routing_divergence   an isolated router row whose paths pick different experts from the same input
 *   drift                (not a cause) a chained router row that picks other experts than the reference
 *                        for more than half its picks, from an input the earlier stages' error moved:
 *                        expected with depth, it names nothing; the first divergence is found from the
 *                        isolated rows (nd_first_divergence) and the layer table shows it neutrally
 *   accumulated_error    none of the above
 * Static findings that depend on the stack (fused shards with different scales) are not used
 * here: whether they matter is proven by repair, under the stack that ran.
 */
#include "verdict.h"
#include <math.h>
#include <stdio.h>
#include <string.h>

/* (d) for composite rows: the largest uniform scale error |k - 1| a healthy block shows */
#define COMPOSITE_MAX_SCALE_ERR 0.25
/* (e): a multiplier this far from 2688/amax (either way), and the SQNR it costs below the floor */
#define FAR_MULT 100.0
#define FAR_MULT_LOSS_DB 1.0

static void set(nd_row *r, const char *v) { snprintf(r->verdict, sizeof r->verdict, "%s", v); }
static int nonfinite(double v) { return !isfinite(v); }

static const char *scale_cause(const nd_row *r) {
    if (r->finding[0] && (!strcmp(r->finding, "nonfinite_scale") || !strcmp(r->finding, "nan_weight_scale"))) return r->finding;
    /* scale_mult/alpha are NaN by convention on rows without a quantizer; on a quantized row with a
     * ratio slot (scale_ratio computed or NaN from a NaN multiplier) a NaN multiplier is a fault */
    int has_q = r->quantized && (!isnan(r->sat_frac));
    if (has_q && (nonfinite(r->scale_mult) || r->scale_mult == 0)) return "nonfinite_scale";
    if (has_q && (nonfinite(r->alpha) || r->alpha == 0)) return "nonfinite_scale";
    return NULL;
}

static const char *error_cause(const nd_row *r) {
    if (isfinite(r->weight_rel_l2) && isfinite(r->weight_rel_l2_swap) && r->weight_rel_l2_swap * 2 < r->weight_rel_l2)
        return "weight_packing";
    double ratio = r->scale_ratio;
    if (isfinite(ratio) && ratio > 0) {
        double g = r->scale_mult / ratio; /* the healthy multiplier 2688/amax */
        if (g > 10 && fabs(log10(ratio) + 2 * log10(g)) < 0.5) return "scale_inverted";
        if (ratio > 2) return "scale_saturation";
        if (ratio < 0.5) return "scale_underflow";
    }
    if (isfinite(r->sat_frac) && r->sat_frac > 0.2) return "scale_saturation";
    if (isfinite(r->zero_block_frac) && r->zero_block_frac > 0.05) return "scale_underflow";
    return "accumulated_error";
}

/* a chained row broken by its own module: a non-finite or zero scale, or an all-zero output whose
 * own quantizer figures name a cause (an all-zero output downstream of one is its propagation) */
static int broken_chained(const nd_row *r) {
    if (!r->quantized) return 0;
    if (scale_cause(r)) return 1;
    return r->prod_amax == 0 && r->ref_amax > 0 && strcmp(error_cause(r), "accumulated_error");
}

void nd_verdict_row(nd_row *r, const nd_thresholds *th) {
    int chained = !strcmp(r->mode, "chained");
    int ref_bad = r->ref_nan + r->ref_inf > 0, prod_bad = r->prod_nan + r->prod_inf > 0;
    if (ref_bad) {
        /* the reference path is broken here only if its input was clean; propagation is not a new
         * divergence but is still marked so the table shows where NaN travels */
        if (r->in_nonfinite > 0 && !chained) { set(r, "nan_input"); return; }
        const char *c = scale_cause(r);
        set(r, c ? c : (r->in_nonfinite > 0 ? "nan_input" : "unknown"));
        return;
    }
    if (prod_bad) {
        if (r->in_nonfinite > 0) { set(r, "nan_input"); return; }
        const char *c = scale_cause(r);
        if (c) { set(r, c); return; }
        set(r, error_cause(r));
        return;
    }
    /* a module that executes with a NaN/Inf/zero global scale or NaN block scales is broken even
     * when both paths happen to agree (e.g. both all-zero after a zero ModelOpt weight_scale_2) */
    if (!chained && (!strcmp(r->finding, "nonfinite_scale") || !strcmp(r->finding, "nan_weight_scale"))) {
        set(r, r->finding);
        return;
    }
    /* a chained row carries earlier error by design and is judged by its isolated twin; but a
     * production output that is all zeros where the reference is not, or one from a module that runs
     * with a non-finite or zero scale, is broken whatever came before (a --mode chained run has no
     * isolated row to say so) */
    if (chained && broken_chained(r)) {
        const char *c = scale_cause(r);
        set(r, c ? c : error_cause(r));
        return;
    }
    if (isfinite(r->topk_agree)) {
        /* chained: routing follows the error of earlier stages, half the picks is the bar;
         * isolated: the same input must give the same experts, so a router whose own arithmetic
         * differs (a stack behaviour) shows as soon as 1 pick in 100 changes */
        if (chained) set(r, r->topk_agree < 0.5 ? ND_VERDICT_DRIFT : "ok");
        else set(r, r->topk_agree < 0.99 ? "routing_divergence" : "ok");
        return;
    }
    if (chained) { set(r, "ok"); return; } /* drift is shown by the figures; see the summary rule */
    /* composite stages (an MLP block, the combined routed experts) compound projections that have
     * rows and verdicts of their own: they are judged like chained rows */
    int composite = !strcmp(r->op, "mlp") || !strcmp(r->op, "moe_experts");
    int diverged;
    if (composite) {
        diverged = r->cosine < th->chained_min_cosine;
        const double mag2 = r->rel_l2 * r->rel_l2 - (1 - r->cosine * r->cosine); /* (d), the scale part */
        if (isfinite(mag2) && mag2 > COMPOSITE_MAX_SCALE_ERR * COMPOSITE_MAX_SCALE_ERR) diverged = 1;
    }
    else if (isfinite(r->floor_sqnr_db)) {
        diverged = r->sqnr_db < r->floor_sqnr_db - th->floor_margin_db;
        const int far = isfinite(r->scale_ratio) && r->scale_ratio > 0 &&
                        (r->scale_ratio < 1 / FAR_MULT || r->scale_ratio > FAR_MULT);
        if (far && r->sqnr_db < r->floor_sqnr_db - FAR_MULT_LOSS_DB) diverged = 1; /* (e) */
    }
    else if (r->quantized) diverged = r->cosine < th->min_cosine || r->sqnr_db < th->min_sqnr_db;
    else diverged = r->cosine < th->min_cosine;
    if (r->ref_amax > 0 && r->prod_amax == 0) diverged = 1; /* an empty output is never healthy */
    /* (d) a magnitude error cosine cannot see */
    if (r->ref_amax > 0 && (r->prod_amax > 2 * r->ref_amax || r->prod_amax < 0.5 * r->ref_amax)) diverged = 1;
    if (isfinite(r->rel_l2) && r->rel_l2 > 1) diverged = 1;
    if (!diverged) { set(r, "ok"); return; }
    const char *c = scale_cause(r);
    set(r, c ? c : error_cause(r));
}

int nd_row_diverged(const nd_row *r) { return nd_verdict_bad(r->verdict); }

void nd_row_evidence(const nd_row *r, char *out, size_t cap) {
    if (r->prod_nan + r->prod_inf > 0)
        snprintf(out, cap, "production output has %lld NaN and %lld Inf", (long long)r->prod_nan, (long long)r->prod_inf);
    else if (r->ref_nan + r->ref_inf > 0)
        snprintf(out, cap, "the reference output already has %lld NaN and %lld Inf", (long long)r->ref_nan, (long long)r->ref_inf);
    else if (r->prod_amax == 0 && r->ref_amax > 0)
        snprintf(out, cap, "production output is all zeros (reference amax %.3g)", r->ref_amax);
    else if (r->ref_amax == 0 && r->prod_amax == 0)
        snprintf(out, cap, "both outputs are all zeros (cosine and SQNR say nothing here)");
    else if (isfinite(r->topk_agree) && r->topk_agree < 1)
        snprintf(out, cap, "top-k agreement with the reference routing %.3f (router scores: cosine %.4f)", r->topk_agree, r->cosine);
    else
        snprintf(out, cap, "cosine %.4f, SQNR %.1f dB (floor %.1f dB), rel L2 %.3g, amax %.4g vs reference %.4g", r->cosine,
                 r->sqnr_db, r->floor_sqnr_db, r->rel_l2, r->prod_amax, r->ref_amax);
}

int64_t nd_first_divergence(const nd_row *rows, int64_t n, nd_trace_summary *s) {
    memset(s, 0, sizeof *s);
    s->sqnr_before_db = s->sqnr_after_db = s->floor_db = NAN;
    int64_t hit = -1;
    for (int pass = 0; pass < 2 && hit < 0; pass++)
        for (int64_t i = 0; i < n; i++) {
            /* pass 0: isolated rows and rows judging captured activations; pass 1: chained */
            int is_chained = !strcmp(rows[i].mode, "chained");
            if (is_chained != pass || !nd_verdict_bad(rows[i].verdict)) continue;
            /* chained rows only count when NaN/Inf appears there first: their drift is expected to
             * grow with depth, and their verdicts (nan_input; drift is not a failure) are shown in the
             * table for the reader but do not name a first divergence */
            if (pass && (!strcmp(rows[i].verdict, "nan_input") ||
                         (rows[i].prod_nan + rows[i].prod_inf == 0 && !broken_chained(&rows[i]))))
                continue;
            hit = i;
            break;
        }
    if (hit < 0) {
        snprintf(s->status, sizeof s->status, "ok");
        snprintf(s->message, sizeof s->message, "no divergence in %lld rows", (long long)n);
        return -1;
    }
    const nd_row *r = &rows[hit];
    snprintf(s->status, sizeof s->status, "diverged");
    snprintf(s->first_divergence, sizeof s->first_divergence, "%s", r->name);
    snprintf(s->first_divergence_mode, sizeof s->first_divergence_mode, "%s", r->mode);
    snprintf(s->cause, sizeof s->cause, "%s", r->verdict);
    char detail[256] = "";
    nd_row_evidence(r, detail, sizeof detail);
    char scale[160] = "";
    if (isfinite(r->scale_ratio)) snprintf(scale, sizeof scale, "; quantizer multiplier %.6g is %.3g x the healthy one for this input's amax, %.6g",
                                           r->scale_mult, r->scale_ratio, r->scale_mult / r->scale_ratio);
    else if (!isnan(r->scale_mult)) snprintf(scale, sizeof scale, "; quantizer multiplier %.6g", r->scale_mult);
    snprintf(s->message, sizeof s->message, "first divergence at %s (%s): %s%s: figures suggest %s", r->name, r->mode, detail, scale, r->verdict);
    return hit;
}
