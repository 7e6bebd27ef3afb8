/* rope_freqs.c — rotary frequencies per layer (research/model-arch.md §3.6):
 * f_i = theta^(-2i/r); YaRN (compressed V4 layers, or when the recipe says yarn: 1) blends
 * f_i/factor and f_i over the ramp between the beta_fast and beta_slow corrections (floored and
 * ceiled unless the config says truncate: false); the attention factor (nd_rope_mscale) only where
 * the stage says attention_factor: 1.
 * config rope_type (rope_scaling / rope_parameters, both spellings):
 *   llama3  (Llama 3.1/3.3) wavelengths above original_max_position_embeddings / low_freq_factor
 *           are divided by factor, those below .../high_freq_factor kept, the band between blended
 *           by (orig/wavelen - low) / (high - low), as transformers' _compute_llama3_parameters;
 *   linear  every frequency divided by factor;
 *   default / none: unchanged. Any other type on a stage that does not handle it is exit 2: a
 *   frequency silently left unscaled makes every reference number wrong. */
#include <math.h>
#include <string.h>
#include "run.h"

static double yarn_corr(double n_rot, double r, double orig, double base) {
    return r * log(orig / (n_rot * 2 * M_PI)) / (2 * log(base));
}

/* `params: PATH` (e.g. "rope_parameters.{T}", {T} = the layer's layer_types entry): this stage's
 * rope_type, rope_theta and factor from that config object, as transformers 5 writes a rope per
 * layer type (Gemma 3: sliding_attention / full_attention); only default and linear there. */
static int stage_params(nd_run *r, const nd_stage *st, const char *tmpl, double *theta, char *rt, size_t rtcap,
                        double *factor, nd_err *e) {
    const nd_model_cfg *c = r->cfg;
    char path[160], key[200];
    size_t o = 0;
    for (const char *t = tmpl; *t && o + 1 < sizeof path;) {
        if (!strncmp(t, "{T}", 3)) {
            if (st->layer < 0 || st->layer >= c->n_layer_types)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: stage %s reads the rope of its layer type, and "
                               "layer_types has no entry %d", nd_ckpt_dir(r->ck), st->name, st->layer);
            o += (size_t)snprintf(path + o, sizeof path - o, "%s", c->layer_types[st->layer]);
            t += 3;
        } else path[o++] = *t++;
    }
    path[o < sizeof path ? o : sizeof path - 1] = 0;
    snprintf(key, sizeof key, "%s.rope_theta", path);
    if (nd_cfg_number(c, key, theta) || !(*theta > 0))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: stage %s needs '%s' as a positive number", nd_ckpt_dir(r->ck),
                       st->name, key);
    snprintf(key, sizeof key, "%s.rope_type", path);
    const char *t = nd_cfg_string(c, key);
    snprintf(rt, rtcap, "%s", t ? t : "default");
    snprintf(key, sizeof key, "%s.factor", path);
    if (nd_cfg_number(c, key, factor)) *factor = 1.0;
    if (strcmp(rt, "default") && strcmp(rt, "linear"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s.rope_type '%s' is not supported by stage %s (default, linear)",
                       nd_ckpt_dir(r->ck), path, rt, st->name);
    if (!strcmp(rt, "linear") && !(*factor > 0))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: %s.factor must be positive for rope_type linear", nd_ckpt_dir(r->ck), path);
    return 0;
}

int nd_rope_freqs(nd_run *r, const nd_stage *st, int64_t rot_dim, float *inv_freq, nd_err *e) {
    double theta, yarn, ctheta;
    const char *params = nd_stage_attr(st->def, "params");
    char prt[32] = "";
    double pfactor = 1.0;
    if (params) ND_TRY(stage_params(r, st, params, &theta, prt, sizeof prt, &pfactor, e));
    else ND_TRY(nd_attr_req(r, st, "theta", &theta, e));
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
    const char *rt = params ? prt : c->rope_type;
    const double lin_factor = params ? pfactor : c->rope_factor; /* rope_type linear's divisor */
    const int llama3 = !strcmp(rt, "llama3"), linear = !strcmp(rt, "linear");
    const int handles_yarn = yarn > 0 || nd_stage_attr(st->def, "compressed_theta") != NULL;
    if (rt[0] && strcmp(rt, "default") && !llama3 && !linear && !(!strcmp(rt, "yarn") && handles_yarn))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: rope_type '%s' (config.json rope_scaling / rope_parameters) is not supported by "
                       "stage %s of recipe %s (supported: default, linear, llama3%s)", nd_ckpt_dir(r->ck), rt, st->name,
                       r->rc->name, handles_yarn ? ", yarn" : "");
    if (llama3 && !(c->rope_orig_max_pos > 0 && c->rope_factor > 0 && c->rope_high_freq_factor != c->rope_low_freq_factor))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: rope_type llama3 needs factor > 0, original_max_position_embeddings > 0 and "
                       "low_freq_factor != high_freq_factor", nd_ckpt_dir(r->ck));
    int use_yarn = yarn > 0 && c->rope_factor > 1 && c->rope_orig_max_pos > 0;
    double low = 0, high = 0;
    if (use_yarn) {
        low = yarn_corr(c->rope_beta_fast, (double)rot_dim, c->rope_orig_max_pos, theta);
        high = yarn_corr(c->rope_beta_slow, (double)rot_dim, c->rope_orig_max_pos, theta);
        if (c->rope_truncate) { /* transformers' `truncate` (default true; gpt-oss: false) */
            low = floor(low);
            high = ceil(high);
        }
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
        if (linear) f /= lin_factor;
        if (llama3) {
            /* in FP32 as transformers computes it from its FP32 inv_freq */
            const float ff = (float)f, factor = (float)c->rope_factor, lo = (float)c->rope_low_freq_factor,
                        hi = (float)c->rope_high_freq_factor, old_len = (float)c->rope_orig_max_pos;
            const float wavelen = 2.0f * (float)M_PI / ff;
            const float lo_wavelen = old_len / lo, hi_wavelen = old_len / hi;
            float v = wavelen > lo_wavelen ? ff / factor : ff;
            if (!(wavelen < hi_wavelen) && !(wavelen > lo_wavelen)) {
                const float smooth = (old_len / wavelen - lo) / (hi - lo);
                v = (1 - smooth) * v / factor + smooth * v;
            }
            f = v;
        }
        inv_freq[i] = (float)f;
    }
    return 0;
}

/* YaRN's attention factor as transformers' _compute_yarn_parameters derives it, multiplied into cos
 * and sin where the stage says attention_factor: 1 (gpt-oss); 1 otherwise */
int nd_rope_mscale(nd_run *r, const nd_stage *st, float *mscale, nd_err *e) {
    double on;
    ND_TRY(nd_attr_num(r, st, "attention_factor", 0, &on, e));
    *mscale = 1.0f;
    const nd_model_cfg *c = r->cfg;
    if (!on || strcmp(c->rope_type, "yarn")) return 0;
    if (c->rope_attention_factor > 0) { *mscale = (float)c->rope_attention_factor; return 0; }
    const double f = c->rope_factor;
    if (f <= 1) return 0;
    if (c->rope_mscale_set && c->rope_mscale != 0 && c->rope_mscale_all_dim != 0)
        *mscale = (float)((0.1 * c->rope_mscale * log(f) + 1.0) / (0.1 * c->rope_mscale_all_dim * log(f) + 1.0));
    else
        *mscale = (float)(0.1 * log(f) + 1.0);
    return 0;
}
