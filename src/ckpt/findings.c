/* findings.c — static scale checks (see findings.h for the codes and their meaning). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/findings.h"
#include "ckpt/audit.h"
#include "ckpt/kv_scales.h"
#include "numerics/nd_numerics.h"

void nd_findings_init(nd_findings *f) { memset(f, 0, sizeof *f); }
void nd_findings_free(nd_findings *f) { free(f->v); memset(f, 0, sizeof *f); }

int nd_findings_add(nd_findings *f, nd_break_kind kind, const char *code, const char *module,
                    const char *tensor, const char *fmt, ...) {
    if (f->n == f->cap) {
        size_t nc = f->cap ? 2 * f->cap : 16;
        nd_finding *nv = realloc(f->v, nc * sizeof *nv);
        if (!nv) return ND_EXIT_INTERNAL;
        f->v = nv;
        f->cap = nc;
    }
    nd_finding *x = &f->v[f->n++];
    memset(x, 0, sizeof *x);
    x->kind = kind;
    x->row = x->col = -1;
    x->sev = kind == ND_BREAKS_NONE ? ND_SEV_WARNING : ND_SEV_ERROR;
    snprintf(x->code, sizeof x->code, "%s", code);
    snprintf(x->module, sizeof x->module, "%s", module ? module : "");
    snprintf(x->tensor, sizeof x->tensor, "%s", tensor ? tensor : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(x->msg, sizeof x->msg, fmt, ap);
    va_end(ap);
    return 0;
}

void nd_findings_set_coord(nd_findings *f, int64_t row, int64_t col) {
    if (!f->n) return;
    f->v[f->n - 1].row = row;
    f->v[f->n - 1].col = col;
}

size_t nd_findings_count(const nd_findings *f, nd_severity sev) {
    size_t n = 0;
    for (size_t i = 0; i < f->n; i++) n += f->v[i].sev == sev;
    return n;
}

const char *nd_severity_str(nd_severity s) { return s == ND_SEV_ERROR ? "error" : "warning"; }

const char *nd_break_kind_str(nd_break_kind k) {
    static const char *const s[ND_BREAKS_NKINDS] = {"none", "all", "fused_weight", "fused_input", "input_convention", "kv_fp8"};
    return k >= 0 && k < ND_BREAKS_NKINDS ? s[k] : "?";
}

void nd_scale_stats_of(const nd_module *m, nd_scale_stats *st) {
    memset(st, 0, sizeof *st);
    st->min = st->max = NAN;
    const nd_tview *s = m->weight_scale;
    if (!s || m->wfmt == ND_WF_DENSE) return;
    float table[256];
    /* MXFP4 scales are E8M0 exponents whatever their dtype tag (compressed-tensors stores them as U8) */
    const int e8m0 = s->dtype == ND_DT_F8_E8M0 || (m->wfmt == ND_WF_MXFP4 && s->dtype == ND_DT_U8);
    int bytes = s->dtype == ND_DT_F8_E4M3 || e8m0;
    if (bytes)
        for (int i = 0; i < 256; i++) table[i] = e8m0 ? nd_e8m0_to_f32((uint8_t)i) : nd_e4m3_to_f32((uint8_t)i);
    const unsigned char *p = s->data;
    double mn = INFINITY, mx = -INFINITY;
    for (int64_t i = 0; i < s->numel; i++) {
        float v = bytes ? table[p[i]] : nd_tview_get_f32(s, i);
        st->count++;
        if (isnan(v)) { st->nan++; continue; }
        if (isinf(v)) { st->inf++; continue; }
        if (v == 0.0f) st->zeros++;
        if (s->dtype == ND_DT_F8_E4M3 && fabsf(v) == ND_E4M3_MAX) st->at_max++;
        if (v < mn) mn = v;
        if (v > mx) mx = v;
    }
    if (mx >= mn) { st->min = mn; st->max = mx; }
}

/* Names of the global and input scale tensors as the checkpoint spells them. */
static const char *wg_name(const nd_module *m) { return m->conv == ND_CONV_MODELOPT ? "weight_scale_2" : "weight_global_scale"; }
static const char *ig_name(const nd_module *m) { return m->conv == ND_CONV_MODELOPT ? "input_scale" : "input_global_scale"; }

static int check_global(const nd_module *m, const nd_tview *t, const char *what, nd_findings *f) {
    const char *P = m->path;
    if (t->dtype != ND_DT_F32)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "scale_dtype", P, t->name,
                               "%s is stored as %s, not F32: kernels that read it as float32 get garbage", what,
                               nd_dtype_str(t->dtype)));
    int ct = m->conv == ND_CONV_CT;
    /* an inverted input scale is undone by a stack that inverts the input (reciprocal_input); an
     * inverted weight global by none */
    const nd_break_kind conv_kind = t == m->input_global ? ND_BREAKS_INPUT_CONVENTION : ND_BREAKS_ALL;
    for (int64_t i = 0; i < t->numel; i++) {
        float v = nd_tview_get_f32(t, i);
        char shard[32] = "";
        if (t->numel > 1) snprintf(shard, sizeof shard, " (shard %lld)", (long long)i);
        if (!isfinite(v) || v == 0.0f) {
            ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, t->name, "%s%s is %s", what, shard,
                                   isnan(v) ? "NaN" : isinf(v) ? "Inf" : "zero"));
        } else if (ct && fabsf(v) < 1.0f) {
            ND_TRY(nd_findings_add(f, conv_kind, "scale_convention", P, t->name,
                                   "%s%s = %.6g is below 1: compressed-tensors stores 2688/amax (a divisor, normally "
                                   "well above 1); this looks like a ModelOpt multiplier (amax/2688) under a "
                                   "compressed-tensors name; check the exporter, and trace with --stack to see what a "
                                   "serving stack makes of it", what, shard, v));
        } else if (!ct && fabsf(v) > 1.0f) {
            ND_TRY(nd_findings_add(f, conv_kind, "scale_convention", P, t->name,
                                   "%s%s = %.6g is above 1: ModelOpt stores amax/2688 (a multiplier, normally well "
                                   "below 1); this looks like a compressed-tensors divisor (2688/amax) under a ModelOpt "
                                   "name; check the exporter, and trace with --stack to see what a serving stack makes of it",
                                   what, shard, v));
        }
    }
    return 0;
}

static double rel_diff(float a, float b);

/* Shards of one fused global tensor [s] that differ: every profile reads such a module with one value
 * (module.c: the largest divisor), whatever its fused rules, so it breaks every stack. */
static int check_shards(const nd_module *m, const nd_tview *t, const char *code, nd_findings *f) {
    if (!t || t->numel < 2) return 0;
    float a = nd_tview_get_f32(t, 0);
    for (int64_t i = 1; i < t->numel; i++) {
        float b = nd_tview_get_f32(t, i);
        if (rel_diff(a, b) <= 1e-6) continue;
        return nd_findings_add(f, ND_BREAKS_ALL, code, m->path, t->name,
                               "fused shards have different values (shard 0 %.6g, shard %lld %.6g): one shared value "
                               "mis-scales the other shard unless its block scales are rescaled",
                               a, (long long)i, b);
    }
    return 0;
}

int nd_check_module(const nd_ckpt *c, const nd_module *m, const nd_scale_stats *st, nd_findings *f) {
    const char *P = m->path;
    char tn[320];
    if (m->wfmt == ND_WF_DENSE) return 0;
    if (st->nan || st->inf)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nan_weight_scale", P, m->weight_scale->name,
                               "%lld of %lld block scales are NaN or Inf", (long long)(st->nan + st->inf), (long long)st->count));
    if (m->wfmt != ND_WF_NVFP4) return 0;
    if (!m->weight_global) {
        snprintf(tn, sizeof tn, "%s.%s", P, wg_name(m));
        if (!nd_module_scale_unloaded(c, m, 1)) /* else scale_not_loaded (audit.c) */
            ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "missing_scale", P, tn,
                                   "NVFP4 weight without its global scale %s: the weight cannot be dequantized", tn));
    } else {
        ND_TRY(check_global(m, m->weight_global, wg_name(m), f));
        ND_TRY(check_shards(m, m->weight_global, "fused_scale_mismatch", f));
    }
    if (m->input_global) {
        ND_TRY(check_global(m, m->input_global, ig_name(m), f));
        ND_TRY(check_shards(m, m->input_global, "fused_input_mismatch", f));
    } else if (m->act_quant && !nd_module_scale_unloaded(c, m, 0)) {
        snprintf(tn, sizeof tn, "%s.%s", P, ig_name(m));
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "missing_scale", P, tn,
                               "W4A4 module without its input scale %s: the activation quantizer multiplier is "
                               "undefined (a serving stack may use uninitialised memory or 1.0)", tn));
    }
    if (st->count > st->nan + st->inf) {
        if (st->max == 0.0)
            ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "global_misfit", P, m->weight_scale->name,
                                   "every block scale is zero: the weight dequantizes to zeros"));
        else if (st->max < ND_E4M3_MAX / 4)
            ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "global_misfit", P, m->weight_scale->name,
                                   "largest block scale is %.6g, far below 448: the global scale does not fit the "
                                   "weight (it should map amax(W) to 448*6), so precision is lost", st->max));
        if (st->at_max > 1 && st->at_max * 4 > st->count)
            ND_TRY(nd_findings_add(f, ND_BREAKS_NONE, "block_saturation", P, m->weight_scale->name,
                                   "%lld of %lld block scales sit at 448: the global scale is too large for the "
                                   "weight and values are clipped", (long long)st->at_max, (long long)st->count));
    }
    /* a module the config ignores that holds quantized tensors: quant_config_mismatch (audit.c) */
    return 0;
}

/* Relative difference of two usable scales; 0 when either is NaN, Inf or zero (those are
 * reported as nonfinite_scale on the module itself). */
static double rel_diff(float a, float b) {
    if (!isfinite(a) || !isfinite(b) || a == 0.0f || b == 0.0f) return 0.0;
    return fabs((double)a - (double)b) / fmax(fabs((double)a), fabs((double)b));
}

int nd_check_fused(const nd_module *a, const nd_module *b, nd_findings *f) {
    if (a->wfmt != ND_WF_NVFP4 || b->wfmt != ND_WF_NVFP4) return 0;
    double dw = a->weight_global && b->weight_global ? rel_diff(a->weight_global_div, b->weight_global_div) : 0.0;
    if (dw > 1e-6)
        ND_TRY(nd_findings_add(f, ND_BREAKS_FUSED_WEIGHT, "fused_scale_mismatch", a->path, b->path,
                               "fused with %s but their weight global scales differ (divisors %.6g vs %.6g, ratio "
                               "%.4g): a stack that fuses them with one global mis-scales one shard; one that keeps each "
                               "shard's own scale is unaffected",
                               b->path, a->weight_global_div, b->weight_global_div,
                               a->weight_global_div / b->weight_global_div));
    /* both shards see the same input, so calibration gives them the same value */
    double di = a->input_global && b->input_global ? rel_diff(a->input_global_mult, b->input_global_mult) : 0.0;
    if (di > 1e-6)
        ND_TRY(nd_findings_add(f, di > 1e-3 ? ND_BREAKS_FUSED_INPUT : ND_BREAKS_NONE, "fused_input_mismatch", a->path, b->path,
                               "fused with %s (one input) but their input scales differ (quantizer multipliers %.6g vs "
                               "%.6g, ratio %.4g): one was not calibrated on this input, and the fused quantizer uses "
                               "only one of them", b->path, a->input_global_mult, b->input_global_mult,
                               a->input_global_mult / b->input_global_mult));
    return 0;
}

int nd_fused_partner(const nd_ckpt *c, const char *path, char *out, size_t cap) {
    static const char *const pairs[][2] = {
        {"q_a_proj", "kv_proj"}, {"q_a_proj", "kv_a_proj_with_mqa"}, {"wq_a", "wkv"},
        {"q_proj", "k_proj"}, {"k_proj", "v_proj"}, {"gate_proj", "up_proj"}, {"w1", "w3"},
    };
    const char *dot = strrchr(path, '.');
    const char *last = dot ? dot + 1 : path;
    size_t pl = (size_t)(last - path);
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        if (strcmp(last, pairs[i][0]) != 0) continue;
        if (pl + strlen(pairs[i][1]) + 1 > cap) return 0;
        memcpy(out, path, pl);
        strcpy(out + pl, pairs[i][1]);
        if (nd_ckpt_has_module(c, out)) return 1;
    }
    return 0;
}

static void release_module(const nd_ckpt *c, const nd_module *m) {
    nd_ckpt_release(c, m->weight_scale);
}

int nd_ckpt_check(const nd_ckpt *c, nd_findings *f, nd_scale_stats **stats_out, nd_err *e) {
    size_t n = nd_ckpt_module_count(c);
    nd_scale_stats *stats = calloc(n ? n : 1, sizeof *stats);
    if (!stats) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", nd_ckpt_dir(c));
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        nd_module m, p;
        if ((rc = nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, e))) break;
        nd_scale_stats_of(&m, &stats[i]);
        release_module(c, &m);
        if (nd_check_module(c, &m, &stats[i], f)) { rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); break; }
        char partner[256];
        if (nd_fused_partner(c, m.path, partner, sizeof partner)) {
            if ((rc = nd_ckpt_module(c, partner, &p, e))) break;
            if (nd_check_fused(&m, &p, f)) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        }
    }
    if (!rc) rc = nd_ckpt_check_kv(c, f, e); /* FP8 KV-cache scales (kv_scales.h) */
    if (!rc) rc = nd_ckpt_audit(c, f, e);    /* config vs tensors, roles, orphans, scale health (audit.h) */
    if (rc || !stats_out) free(stats);
    else *stats_out = stats;
    return rc;
}
