/* ckpt_repair.c — repairs and static facts read from the checkpoint (ckpt_repair.h). */
#include "ckpt_repair.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/audit.h"
#include "ckpt/ckpt.h"

static int usable(double v) { return isfinite(v) && v > 0; }

static nd_repair *add(nd_repair *out, int *n, int cap, const char *name) {
    if (*n >= cap) return NULL;
    nd_repair *r = &out[(*n)++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    snprintf(r->cause, sizeof r->cause, "scale_not_loaded");
    return r;
}

/* The smallest multiplier (2688/amax) among the module's sibling experts' input scales, as the
 * file value of m's format; NAN when there is none. */
static double sibling_input(const nd_ckpt *c, const nd_module *m, int *count) {
    *count = 0;
    const char *x = strstr(m->path, ".experts.");
    char *end = NULL;
    long self = x ? strtol(x + 9, &end, 10) : -1;
    if (!x || end == x + 9 || *end != '.') return NAN;
    const int mo = m->conv == ND_CONV_MODELOPT;
    double best = NAN;
    for (long j = 0; j < 256; j++) {
        if (j == self) continue;
        char n[700];
        snprintf(n, sizeof n, "%.*s%ld.%s.%s", (int)(x + 9 - m->path), m->path, j, end + 1, mo ? "input_scale" : "input_global_scale");
        const nd_tview *t = nd_ckpt_find(c, n);
        if (!t) continue;
        double v = nd_tview_get_f32(t, 0), mult = mo ? 1.0 / v : v;
        if (!usable(mult)) continue;
        (*count)++;
        if (!(mult >= best)) best = mult;
    }
    return isfinite(best) ? (mo ? 1.0 / best : best) : NAN;
}

/* A gate_proj/up_proj (w1/w3) row whose sibling the checkpoint has: both read in each other's
 * place (the checkpoint stored them exchanged), by the override on the row's MLP or expert. Only
 * against the original (--reference-checkpoint): without it both paths would read the sibling, and
 * any fault of the row's own tensors (an inverted input scale) would be "restored" by that. */
static int gate_up_repair(const nd_ckpt *c, const nd_row *row, const nd_stage_info *in, nd_repair *out, int cap) {
    if (!in->has_original) return 0;
    const char *mdot = strrchr(in->module, '.'), *rdot = strrchr(row->name, '.'), *self = NULL;
    const char *other = nd_gate_up_sibling(in->module, &self);
    if (!mdot || !rdot || !other) return 0;
    char sib[sizeof in->module + 16];
    snprintf(sib, sizeof sib, "%.*s.%s", (int)(mdot - in->module), in->module, other);
    if (!nd_ckpt_has_module(c, sib)) return 0;
    int n = 0;
    nd_repair *r = add(out, &n, cap, "gate_up_tensors_swapped");
    if (!r) return 0;
    snprintf(r->cause, sizeof r->cause, "gate_up_order");
    snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%.*s.gate_up_tensors_swapped=1", (int)(rdot - row->name), row->name);
    snprintf(r->what, sizeof r->what, "the checkpoint's %s read as %s and %s as %s (stored exchanged)", in->module, other, sib,
             self);
    return n;
}

int nd_ckpt_repairs_for(const char *ckpt_dir, const nd_row *row, const nd_stage_info *in, nd_repair *out, int cap) {
    if (!in->found || in->composite || !in->module[0]) return 0;
    nd_ckpt *c = NULL;
    nd_err e = {0};
    if (nd_ckpt_open(ckpt_dir, &c, &e)) return 0;
    int n = gate_up_repair(c, row, in, out, cap);
    if (in->has_input_scale && usable(in->weight_div)) { nd_ckpt_close(c); return n; }
    nd_module m;
    if (!nd_ckpt_module(c, in->module, &m, &e) && m.wfmt == ND_WF_NVFP4) {
        const int mo = m.conv == ND_CONV_MODELOPT;
        for (int w = 1; w >= 0; w--) {
            const nd_tview *o = nd_module_orphan_scale(c, &m, w);
            const char *own = w ? (mo ? "weight_scale_2" : "weight_global_scale") : (mo ? "input_scale" : "input_global_scale");
            nd_repair *r;
            if (o && o->numel >= 1 && (r = add(out, &n, cap, "load_orphan_scale"))) {
                double v = nd_tview_get_f32(o, 0);
                snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.%s=%.9g", m.path, own, v);
                snprintf(r->what, sizeof r->what, "%s (%.6g, under the other format's name) loaded as %s.%s", o->name, v, m.path, own);
            }
        }
        int cnt;
        double v;
        nd_repair *r;
        if (!m.input_global && m.act_quant && !nd_module_orphan_scale(c, &m, 0) && usable(v = sibling_input(c, &m, &cnt)) &&
            (r = add(out, &n, cap, "input_scale_from_sibling"))) {
            snprintf(r->ovr[r->n_ovr++], sizeof r->ovr[0], "%s.%s=%.9g", m.path, mo ? "input_scale" : "input_global_scale", v);
            snprintf(r->what, sizeof r->what, "%s's missing %s set to its %d sibling experts' (%.6g, the smallest multiplier)",
                     m.path, mo ? "input_scale" : "input_global_scale", cnt, v);
        }
    }
    nd_ckpt_close(c);
    return n;
}

const char *nd_ckpt_static_cause(const char *ckpt_dir, const nd_stage_info *in, double weight_rel_l2, char *evidence, size_t cap) {
    if (!in->found || in->composite || !in->module[0] || !in->fp4_weight) return NULL;
    nd_ckpt *c = NULL;
    nd_err e = {0};
    if (nd_ckpt_open(ckpt_dir, &c, &e)) return NULL;
    nd_module m;
    const char *cause = NULL;
    if (!nd_ckpt_module(c, in->module, &m, &e) && m.wfmt == ND_WF_NVFP4 && m.weight_scale &&
        m.weight_scale->dtype == ND_DT_F8_E4M3) {
        const unsigned char *p = m.weight_scale->data;
        int64_t nz = 0, sub = 0;
        for (int64_t i = 0; i < m.weight_scale->numel; i++) {
            unsigned mag = p[i] & 0x7f;
            if (!mag || mag == 0x7f || (p[i] & 0x80)) continue;
            nz++;
            sub += (mag >> 3) == 0;
        }
        if (nz && sub * 8 > nz) {
            cause = "scale_underflow";
            snprintf(evidence, cap, "static fact (scale_underflow): %lld of %lld non-zero block scales of %s are E4M3 subnormals "
                     "(< 2^-6): the weight lost precision when it was quantized", (long long)sub, (long long)nz, m.path);
        }
        /* blocks whose 16 codes are all +-0: their scale flushed to zero when the weight was quantized
         * (a global far too small), and compressed-tensors stored its eps (0.125) in its place, so the
         * scales look normal. A trained weight has no such blocks (each block's amax maps to code 6),
         * but a pruned or padded one may: only with the original at hand (--reference-checkpoint: the
         * weight differs from it by rel L2 near 1) is it the fact */
        const int64_t blk = m.block > 0 ? m.block : 16, bytes = blk / 2;
        if (!cause && isfinite(weight_rel_l2) && weight_rel_l2 > 0.5 && m.weight && m.weight->numel >= bytes) {
            const unsigned char *w = m.weight->data;
            int64_t blocks = m.weight->numel / bytes, zero = 0;
            for (int64_t b = 0; b < blocks; b++) {
                int all = 1;
                for (int64_t j = 0; j < bytes && all; j++) all = (w[b * bytes + j] & 0x77) == 0;
                zero += all;
            }
            if (zero * 8 > blocks) {
                cause = "scale_underflow";
                snprintf(evidence, cap, "static fact (scale_underflow): %lld of %lld blocks of %s hold only zero codes "
                         "(their block scale flushed to 0 when the weight was quantized: its global scale is far too "
                         "small), and the weight differs from the original by rel L2 %.3g",
                         (long long)zero, (long long)blocks, m.path, weight_rel_l2);
            }
        }
    }
    nd_ckpt_close(c);
    return cause;
}

/* a tensor of the stage: below its module ("<module>.weight"), or named after the stage with any
 * prefix of the checkpoint ("model.layers.0.self_attn.q_a_norm.weight" for "layers.0.self_attn.q_a_norm") */
static int of_stage(const char *name, const char *stage, const char *module) {
    const size_t ml = strlen(module);
    if (ml && !strncmp(name, module, ml) && name[ml] == '.' && !strchr(name + ml + 1, '.')) return 1;
    const size_t sl = strlen(stage), nl = strlen(name);
    for (const char *p = strstr(name, stage); sl && p; p = strstr(p + 1, stage)) {
        if (p != name && p[-1] != '.') continue;
        if (p[sl] == '.' && !strchr(p + sl + 1, '.') && (size_t)(p - name) + sl < nl) return 1;
    }
    return 0;
}

const char *nd_ckpt_nonfinite_tensor(const char *ckpt_dir, const char *stage, const nd_stage_info *in, char *evidence,
                                     size_t cap) {
    nd_ckpt *c = NULL;
    nd_err e = {0};
    if (!stage || !stage[0] || nd_ckpt_open(ckpt_dir, &c, &e)) return NULL;
    const char *cause = NULL;
    const char *module = in && in->found && !in->composite ? in->module : "";
    for (size_t i = 0, n = nd_ckpt_count(c); i < n && !cause; i++) {
        const nd_tview *t = nd_ckpt_at(c, i);
        if (!of_stage(t->name, stage, module)) continue;
        /* real-valued tensors, FP8 E4M3 codes (0x7f/0xff are NaN) and E8M0 scales (0xff is NaN); packed
         * codes and scales stored as plain bytes (U8) are judged elsewhere */
        if (t->dtype != ND_DT_F32 && t->dtype != ND_DT_BF16 && t->dtype != ND_DT_F16 && t->dtype != ND_DT_F8_E4M3 &&
            t->dtype != ND_DT_F8_E8M0)
            continue;
        if (t->dtype == ND_DT_F8_E4M3 && strstr(t->name, "scale")) continue; /* NVFP4 block scales: nan_weight_scale */
        int64_t nan = 0, inf = 0;
        for (int64_t k = 0; k < t->numel; k++) {
            const float v = nd_tview_get_f32(t, k);
            nan += isnan(v);
            inf += isinf(v);
        }
        if (!nan && !inf) continue;
        cause = strstr(t->name, "scale") ? "nan_weight_scale" : "nonfinite_weight";
        snprintf(evidence, cap, "static fact (%s): %s (%s) holds %lld NaN and %lld Inf of its %lld values as stored: "
                 "both paths read it, the checkpoint itself is broken there", cause, t->name, nd_dtype_str(t->dtype),
                 (long long)nan, (long long)inf, (long long)t->numel);
    }
    nd_ckpt_close(c);
    return cause;
}
