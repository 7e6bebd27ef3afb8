/* rope_freqs.c — rotary frequencies per layer (research/model-arch.md §3.6):
 * f_i = theta^(-2i/r); YaRN (compressed V4 layers, or when the recipe says yarn: 1) blends
 * f_i/factor and f_i over the ramp between the beta_fast and beta_slow corrections; no mscale. */
#include <math.h>
#include <string.h>
#include "run.h"

static double yarn_corr(double n_rot, double r, double orig, double base) {
    return r * log(orig / (n_rot * 2 * M_PI)) / (2 * log(base));
}

int nd_rope_freqs(nd_run *r, const nd_stage *st, int64_t rot_dim, float *inv_freq, nd_err *e) {
    double theta, yarn, ctheta;
    ND_TRY(nd_attr_req(r, st, "theta", &theta, e));
    ND_TRY(nd_attr_num(r, st, "yarn", 0, &yarn, e));
    ND_TRY(nd_attr_num(r, st, "compressed_theta", 0, &ctheta, e));
    const nd_model_cfg *c = r->cfg;
    /* a compressed layer: by layer_types (transformers) or compress_ratios > 0 (DeepSeek's configs) */
    int compressed = st->layer >= 0 &&
                     ((st->layer < c->n_layer_types && strstr(c->layer_types[st->layer], "compressed")) ||
                      (c->n_layer_types == 0 && st->layer < c->n_compress_ratios && c->compress_ratios[st->layer] > 0));
    if (ctheta > 0 && compressed) {
        theta = ctheta;
        yarn = 1;
    }
    int use_yarn = yarn > 0 && c->rope_factor > 1 && c->rope_orig_max_pos > 0;
    double low = 0, high = 0;
    if (use_yarn) {
        low = floor(yarn_corr(c->rope_beta_fast, (double)rot_dim, c->rope_orig_max_pos, theta));
        high = ceil(yarn_corr(c->rope_beta_slow, (double)rot_dim, c->rope_orig_max_pos, theta));
        if (low < 0) low = 0;
        if (high > rot_dim - 1) high = (double)rot_dim - 1;
        if (high == low) high += 0.001;
    }
    for (int64_t i = 0; i < rot_dim / 2; i++) {
        double f = pow(theta, -2.0 * (double)i / (double)rot_dim);
        if (use_yarn) {
            double ramp = ((double)i - low) / (high - low);
            ramp = ramp < 0 ? 0 : ramp > 1 ? 1 : ramp;
            double smooth = 1 - ramp;
            f = f / c->rope_factor * (1 - smooth) + f * smooth;
        }
        inv_freq[i] = (float)f;
    }
    return 0;
}
