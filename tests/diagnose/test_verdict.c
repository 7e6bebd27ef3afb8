/* test_verdict.c — the verdict rule of an isolated quantized linear row (probes/verdict.c): below
 * the floor by more than floor_margin_db it diverges; by less it does not, unless its quantizer
 * multiplier is more than 100x away from 2688/amax (rule (e)) and that costs it more than 1 dB.
 * The row's figures are those of an inverted input scale seen on the Qwen3-Next fixture's
 * layers.3.self_attn.k_proj (multiplier 1/270 where 2688/amax is about 400: SQNR 17.1 dB, floor
 * 20.4 dB) and variations of them. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "nd_test.h"
#include "probes/verdict.h"

static const nd_thresholds TH = {.min_cosine = 0.99, .min_sqnr_db = 10, .floor_margin_db = 6, .chained_min_cosine = 0.9};

/* an isolated NVFP4 linear row: multiplier `mult` used where 2688/amax is `healthy`, SQNR `loss`
 * dB below a floor of 20.4 dB */
static nd_row row(double mult, double healthy, double loss) {
    nd_row r;
    memset(&r, 0, sizeof r);
    snprintf(r.name, sizeof r.name, "layers.3.self_attn.k_proj");
    snprintf(r.op, sizeof r.op, "linear");
    snprintf(r.mode, sizeof r.mode, "isolated");
    r.quantized = 1;
    r.ref_amax = 5.84;
    r.prod_amax = 5.63;
    r.floor_sqnr_db = 20.4;
    r.sqnr_db = 20.4 - loss;
    r.cosine = sqrt(1 / (1 + pow(10, -r.sqnr_db / 10)));
    r.rel_l2 = pow(10, -r.sqnr_db / 20);
    r.scale_mult = mult;
    r.scale_ratio = mult / healthy;
    r.alpha = 1e-3;
    r.sat_frac = 0.08;
    r.weight_rel_l2 = r.weight_rel_l2_swap = r.topk_agree = NAN;
    return r;
}

static void expect(nd_row r, const char *want, const char *what) {
    nd_verdict_row(&r, &TH);
    CHECK(!strcmp(r.verdict, want), "%s: verdict '%s', want '%s' (ratio %.3g, %.1f dB below the floor)", what,
          r.verdict, want, r.scale_ratio, r.floor_sqnr_db - r.sqnr_db);
}

int main(void) {
    expect(row(1 / 270.0, 400, 3.3), "scale_inverted", "inverted scale, 3.3 dB lost");
    expect(row(1 / 270.0, 400, 1.5), "scale_inverted", "inverted scale, 1.5 dB lost");
    expect(row(1 / 270.0, 400, 0.5), "ok", "inverted scale that costs 0.5 dB");
    expect(row(1 / 270.0, 400, 7.0), "scale_inverted", "inverted scale past the margin");
    expect(row(270, 400, 3.3), "ok", "healthy multiplier (calibration spread 0.67), 3.3 dB lost");
    expect(row(4, 400, 3.3), "ok", "multiplier 100x small exactly is not past the bound");
    expect(row(3.9, 400, 3.3), "scale_underflow", "multiplier 103x small, not an inverse");
    expect(row(400 * 150, 400, 2.0), "scale_saturation", "multiplier 150x large, 2 dB lost");
    expect(row(400 * 150, 400, 0.8), "ok", "multiplier 150x large that costs 0.8 dB");
    return nd_test_report("test_verdict");
}
