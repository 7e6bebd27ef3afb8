/* findings.c — static scale checks (see findings.h for the codes and their meaning). */
#include <float.h>
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
        if (!isfinite(v) || !(v > 0.0f)) {
            char neg[48];
            snprintf(neg, sizeof neg, "negative (%.6g): every product it scales changes sign", v);
            ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, t->name, "%s%s is %s", what, shard,
                                   isnan(v) ? "NaN" : isinf(v) ? "Inf" : v == 0.0f ? "zero" : neg));
        } else if (t == m->input_global) {
            continue; /* the input convention is judged against the whole checkpoint (check_input_conventions) */
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

/* 1 when the stored scalar scale t is itself usable (finite, > 0): its own problems are check_global's */
static int stored_usable(const nd_tview *t) {
    for (int64_t i = 0; t && i < t->numel; i++) {
        const float v = nd_tview_get_f32(t, i);
        if (!isfinite(v) || !(v > 0)) return 0;
    }
    return t != NULL;
}

/* What the kernels compute from usable stored scales, in float as they do: the weight divisor, the
 * quantizer multiplier and alpha = 1/(multiplier x divisor). A ModelOpt weight_scale_2 of 1e-40 is
 * a divisor of Inf, a compressed-tensors weight_global_scale of 3e38 an alpha that underflows. */
static int check_derived(const nd_module *m, nd_findings *f) {
    const float g = m->weight_global_div, x = m->input_global_mult;
    const int w_ok = stored_usable(m->weight_global), x_ok = m->act_quant && stored_usable(m->input_global);
    if (w_ok && (!isfinite(g) || !(g >= FLT_MIN)))
        return nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", m->path, m->weight_global->name,
                               "%s gives a weight divisor of %g: the weight dequantizes to %s", wg_name(m), g,
                               isfinite(g) ? "Inf" : "zero");
    if (x_ok && (!isfinite(x) || !(x >= FLT_MIN)))
        return nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", m->path, m->input_global->name,
                               "%s gives a quantizer multiplier of %g: the activations quantize to %s", ig_name(m), x,
                               isfinite(x) ? "zero" : "NaN/Inf");
    if (w_ok && x_ok) {
        const float alpha = 1.0f / (x * g);
        if (!isfinite(alpha) || !(alpha >= FLT_MIN))
            return nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", m->path, m->weight_global->name,
                                   "alpha = 1/(multiplier %g x divisor %g) is %g: the GEMM's output is %s", x, g, alpha,
                                   isfinite(alpha) ? "zero" : "NaN/Inf");
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
    /* real-valued block scales (FP8 weights' scale_inv and block scales): a negative one flips the
     * sign of its block, one past FLT_MAX/448 dequantizes an E4M3 code to Inf, a subnormal one to
     * (almost) zero; the byte encodings (E4M3, E8M0) are judged by their own rules */
    const int real_scales = m->weight_scale && (m->weight_scale->dtype == ND_DT_F32 || m->weight_scale->dtype == ND_DT_BF16 ||
                                                m->weight_scale->dtype == ND_DT_F16);
    if (real_scales && isfinite(st->min) && st->min < 0)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, m->weight_scale->name,
                               "a weight scale is negative (min %.6g): the blocks it scales change sign", st->min));
    else if (real_scales && isfinite(st->max) && st->max > FLT_MAX / ND_E4M3_MAX)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, m->weight_scale->name,
                               "a weight scale is %.6g: its block dequantizes to Inf", st->max));
    else if (real_scales && isfinite(st->min) && st->min > 0 && st->min < FLT_MIN)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, m->weight_scale->name,
                               "a weight scale is subnormal (%.6g): its block dequantizes to (almost) zero", st->min));
    /* every block scale zero: the whole weight decodes to zeros, on both paths alike, so no replay
     * shows it; no quantizer writes that for a trained weight (a zero block is a zero scale only
     * where the block itself is zero) */
    if (st->count > 0 && st->zeros == st->count)
        ND_TRY(nd_findings_add(f, ND_BREAKS_ALL, "nonfinite_scale", P, m->weight_scale->name,
                               "every one of the %lld weight scales is zero: the weight decodes to all zeros and the "
                               "module outputs zeros", (long long)st->count));
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
    ND_TRY(check_derived(m, f));
    if (st->count > st->nan + st->inf) {
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

/* The shards a serving stack fuses into one GEMM, each group in its checking order. */
static const char *const fused_groups[][4] = {
    {"q_a_proj", "kv_proj", "kv_a_proj_with_mqa", NULL}, {"wq_a", "wkv", NULL, NULL},
    {"q_proj", "k_proj", "v_proj", NULL}, {"gate_proj", "up_proj", NULL, NULL}, {"w1", "w3", NULL, NULL},
};

/* the group of a module's last path component and its place in it; -1 when it is in none */
static int fused_group_of(const char *last, int *pos) {
    for (int g = 0; g < (int)(sizeof fused_groups / sizeof fused_groups[0]); g++)
        for (int k = 0; k < 4 && fused_groups[g][k]; k++)
            if (!strcmp(last, fused_groups[g][k])) { *pos = k; return g; }
    return -1;
}

int nd_fused_partner(const nd_ckpt *c, const char *path, char *out, size_t cap) {
    const char *dot = strrchr(path, '.');
    const char *last = dot ? dot + 1 : path;
    size_t pl = (size_t)(last - path);
    int pos, g = fused_group_of(last, &pos);
    if (g < 0) return 0;
    for (int k = pos + 1; k < 4 && fused_groups[g][k]; k++) {
        if (pl + strlen(fused_groups[g][k]) + 1 > cap) return 0;
        memcpy(out, path, pl);
        strcpy(out + pl, fused_groups[g][k]);
        if (nd_ckpt_has_module(c, out)) return 1;
    }
    return 0;
}

int nd_fused_shards(const char *a, const char *b) {
    const char *da = strrchr(a, '.'), *db = strrchr(b, '.');
    const char *la = da ? da + 1 : a, *lb = db ? db + 1 : b;
    if (la - a != lb - b || strncmp(a, b, (size_t)(la - a)) || !strcmp(la, lb)) return 0;
    int pa, pb, ga = fused_group_of(la, &pa), gb = fused_group_of(lb, &pb);
    return ga >= 0 && ga == gb;
}

static void release_module(const nd_ckpt *c, const nd_module *m) {
    nd_ckpt_release(c, m->weight_scale);
}

/* ---- the convention of input scales, judged against the whole checkpoint ----
 * A compressed-tensors input_global_scale is 2688/amax (amax: the calibration input's largest
 * magnitude); a ModelOpt input_scale is amax/2688. A value below 1 under a CT name is NOT evidence
 * of the other convention by itself: trained models carry massive activations (amax in the
 * thousands at a down_proj in a few layers, docs/real-models.md), whose healthy CT value is below 1.
 * Each input scale is read both ways, as an input amax: A (its own convention) and B (the other);
 * against the median A of the checkpoint's other input scales, M, the other convention is named only when
 *   - A is an outlier no real model shows (A > CONV_OUTLIER x M) and B is closer to M than A by
 *     at least CONV_MARGIN (log distance): one module's scale written the other way, or
 *   - M itself is beyond 2688 (the median module would need amax > 2688, i.e. most values are below
 *     1 under a CT name / above 1 under a ModelOpt name): the whole checkpoint is in the other
 *     convention, and every module whose A is beyond 2688 is named.
 * Anything else is the healthy reading (the trace proves or refutes it by replaying the stage with the
 * reciprocal). Thresholds: docs/real-models.md has the real models' A/M (largest 10^x). */
#define CONV_OUTLIER 1e4
#define CONV_MARGIN 10.0

typedef struct conv_obs { size_t mod; int64_t shard; float v; double a; } conv_obs;

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* global_misfit: the largest block scale far below 448 means the global scale does not fit the
 * weight. Fused shards that share ONE global scale by design (llmcompressor gives q/k/v and gate/up
 * the same global, the smallest of theirs, so one fused GEMM needs one divisor) are judged as the
 * group: a v_proj whose amax is below q_proj's necessarily has smaller block scales. */
static int misfit_one(const nd_module *m, double max, int shared, nd_findings *f) {
    if (max == 0.0) return 0; /* every block scale zero: nonfinite_scale, an error (nd_check_module) */
    /* the block-scale ceiling of the scheme: 448, or 448/6 under W4A8_NVFP4_FP8 (whose global maps
     * amax(W) to 448, so that the kernel dequantizes the weight to FP8) */
    const double ceil = m->global_num / 6.0;
    if (max < ceil / 4)
        return nd_findings_add(f, ND_BREAKS_NONE, "global_misfit", m->path, m->weight_scale->name,
                               "largest block scale is %.6g%s, far below %.4g: the global scale does not fit the "
                               "weight (it should map amax(W) to %.4g), so precision is lost", max,
                               shared ? " in every shard sharing its global scale" : "", ceil, (double)m->global_num);
    return 0;
}

static int cmp_path(const void *x, const void *y) { return strcmp(**(const char *const *const *)x, **(const char *const *const *)y); }

static size_t uf_root(size_t *up, size_t i) {
    while (up[i] != i) i = up[i] = up[up[i]];
    return i;
}

/* Fused partners that share one weight global scale form a group (union-find over module indices);
 * each module is judged by the largest block scale of its group. */
static int misfit_pass(const nd_ckpt *c, const nd_scale_stats *stats, nd_findings *f, nd_err *e) {
    const size_t n = nd_ckpt_module_count(c);
    size_t *up = malloc((n ? n : 1) * sizeof *up), *cnt = calloc(n ? n : 1, sizeof *cnt);
    const char **by = malloc((n ? n : 1) * sizeof *by);
    const char ***ptr = malloc((n ? n : 1) * sizeof *ptr);
    double *gmax = malloc((n ? n : 1) * sizeof *gmax);
    int rc = 0;
    if (!up || !cnt || !by || !ptr || !gmax) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (size_t i = 0; i < n && !rc; i++) { up[i] = i; by[i] = nd_ckpt_module_path(c, i); ptr[i] = &by[i]; }
    if (!rc) qsort(ptr, n, sizeof *ptr, cmp_path);
    for (size_t i = 0; i < n && !rc; i++) {
        nd_module m, p;
        char partner[256];
        if (!nd_fused_partner(c, by[i], partner, sizeof partner)) continue;
        const char *key = partner, **kp = &key;
        const char ***hit = bsearch(&kp, ptr, n, sizeof *ptr, cmp_path);
        if (!hit) continue;
        const size_t j = (size_t)(*hit - by);
        if ((rc = nd_ckpt_module(c, by[i], &m, e)) || (rc = nd_ckpt_module(c, partner, &p, e))) break;
        if (m.wfmt != ND_WF_NVFP4 || p.wfmt != ND_WF_NVFP4 || !m.weight_global || !p.weight_global) continue;
        if (rel_diff(m.weight_global_div, p.weight_global_div) > 1e-6) continue;
        up[uf_root(up, i)] = uf_root(up, j);
    }
    for (size_t i = 0; i < n && !rc; i++) gmax[i] = -INFINITY;
    for (size_t i = 0; i < n && !rc; i++) {
        const size_t r = uf_root(up, i);
        cnt[r]++;
        if (stats[i].count > stats[i].nan + stats[i].inf && stats[i].max > gmax[r]) gmax[r] = stats[i].max;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const nd_scale_stats *st = &stats[i];
        if (st->count <= st->nan + st->inf) continue;
        nd_module m;
        if ((rc = nd_ckpt_module(c, by[i], &m, e))) break;
        if (m.wfmt != ND_WF_NVFP4 || !m.weight_scale) continue;
        const size_t r = uf_root(up, i);
        /* a shard whose own scales are all zero is a dead weight whatever its partners hold */
        const double max = st->max == 0.0 ? 0.0 : gmax[r];
        if (misfit_one(&m, max, cnt[r] > 1, f)) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    free(up); free(cnt); free(by); free(ptr); free(gmax);
    return rc;
}

/* exp of the median of sorted l[0..n) (n >= 2) with one element equal to x left out: the module's
 * neighbours, so that a small checkpoint's median is not pulled by the module judged */
static double median_without(const double *l, size_t n, double x) {
    size_t r = 0;
    while (r + 1 < n && l[r] < x) r++;
    const size_t k = n - 1; /* elements left */
#define AT(i) l[(i) < r ? (i) : (i) + 1]
    const double m = k % 2 ? AT(k / 2) : 0.5 * (AT(k / 2 - 1) + AT(k / 2));
#undef AT
    return exp(m);
}

static int check_input_conventions(const nd_ckpt *c, nd_findings *f, nd_err *e) {
    size_t n = nd_ckpt_module_count(c), no = 0, cap = 0;
    conv_obs *o = NULL;
    char (*names)[320] = NULL;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        nd_module m;
        if ((rc = nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, e))) break;
        /* (a W4A8 module's input_scale is an FP8 per-tensor scale, amax/448: not this convention) */
        if (m.wfmt != ND_WF_NVFP4 || m.act_fp8 || !m.input_global || m.input_global->dtype != ND_DT_F32) continue;
        for (int64_t k = 0; k < m.input_global->numel; k++) {
            const float v = nd_tview_get_f32(m.input_global, k);
            if (!isfinite(v) || v <= 0) continue; /* nonfinite_scale */
            if (no == cap) {
                cap = cap ? cap * 2 : 256;
                conv_obs *no_ = realloc(o, cap * sizeof *o);
                char (*nn)[320] = realloc(names, cap * sizeof *names);
                if (no_) o = no_;
                if (nn) names = nn;
                if (!no_ || !nn) { rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); break; }
            }
            /* A: the amax the value means in its own convention */
            const double a = m.conv == ND_CONV_MODELOPT ? (double)v * ND_E4M3_MAX * 6 : ND_E4M3_MAX * 6 / (double)v;
            o[no] = (conv_obs){i, m.input_global->numel > 1 ? k : -1, v, a};
            snprintf(names[no], sizeof names[no], "%s", m.input_global->name);
            no++;
        }
    }
    double *la = rc || !no ? NULL : malloc(no * sizeof *la);
    if (!rc && no && !la) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc && no) {
        for (size_t j = 0; j < no; j++) la[j] = log(o[j].a);
        qsort(la, no, sizeof *la, cmp_double);
        const double full = ND_E4M3_MAX * 6;
        for (size_t j = 0; j < no && !rc && no > 1; j++) {
            const double A = o[j].a, B = full * full / A; /* the other convention's amax */
            const double M = median_without(la, no, log(A));
            const int whole = M > full && A > full;
            const int single = !whole && A > CONV_OUTLIER * M && fabs(log(A / M)) - fabs(log(B / M)) > log(CONV_MARGIN);
            if (!whole && !single) continue;
            nd_module m;
            if ((rc = nd_ckpt_module(c, nd_ckpt_module_path(c, o[j].mod), &m, e))) break;
            const int ct = m.conv == ND_CONV_CT;
            char shard[32] = "";
            if (o[j].shard >= 0) snprintf(shard, sizeof shard, " (shard %lld)", (long long)o[j].shard);
            char why[256];
            if (whole) snprintf(why, sizeof why, "the median input scale of the checkpoint reads as an amax of %.4g too: the whole "
                                "checkpoint looks written in the other convention", M);
            else snprintf(why, sizeof why, "%.3gx the checkpoint's median input amax %.4g, while the other reading is in line with "
                          "the other modules", A / M, M);
            if (nd_findings_add(f, ND_BREAKS_INPUT_CONVENTION, "scale_convention", m.path, names[j],
                                "%s%s = %.6g read as %s (%s) means an input amax of %.4g, %s; read as %s (%s) it means %.4g. "
                                "Check the exporter, and trace the checkpoint: the stage replayed with the reciprocal proves it",
                                ig_name(&m), shard, o[j].v, ct ? "compressed-tensors" : "ModelOpt", ct ? "2688/amax" : "amax/2688",
                                A, why, ct ? "a ModelOpt multiplier" : "a compressed-tensors divisor", ct ? "amax/2688" : "2688/amax", B))
                rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        }
    }
    free(la);
    free(o);
    free(names);
    return rc;
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
    if (!rc) rc = misfit_pass(c, stats, f, e);
    if (!rc) rc = check_input_conventions(c, f, e);
    if (!rc) rc = nd_ckpt_check_kv(c, f, e); /* FP8 KV-cache scales (kv_scales.h) */
    if (!rc) rc = nd_ckpt_audit(c, f, e);    /* config vs tensors, roles, orphans, scale health (audit.h) */
    if (rc || !stats_out) free(stats);
    else *stats_out = stats;
    return rc;
}
