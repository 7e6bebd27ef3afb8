/* synth_static.c — the static faults of synth --from (synth_static.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/outfile.h"
#include "util/json_load.h"
#include "util/suggest.h"
#include "synth/synth_static.h"
#include "synth/synth_quant.h"
#include "numerics/nd_numerics.h"
#include "backend.h"
#include "pipeline/run.h"

int sy_static_fault(sy_fault_kind k) {
    return k == SY_F_CONFIG_IGNORE || k == SY_F_DEQUANTIZE || k == SY_F_SCALE_RENAMED || k == SY_F_WSCALE_RENAMED ||
           k == SY_F_SCALE_MISSING_EXPERT || k == SY_F_QUANTIZE || k == SY_F_ROUTER_BIAS_OFFSET ||
           k == SY_F_QUANTIZE_UNIGNORED || k == SY_F_GATE_UP_SWAP;
}

static sy_static_edit *edit(sy_static *st, nd_err *e) {
    if (st->n == st->cap) {
        int nc = st->cap ? 2 * st->cap : 16;
        sy_static_edit *nv = realloc(st->v, (size_t)nc * sizeof *nv);
        if (!nv) { nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory"); return NULL; }
        st->v = nv;
        st->cap = nc;
    }
    sy_static_edit *x = &st->v[st->n++];
    memset(x, 0, sizeof *x);
    return x;
}

static const nd_tview *tens(const nd_ckpt *ck, const char *path, const char *suffix) {
    char n[600];
    snprintf(n, sizeof n, "%s.%s", path, suffix);
    return nd_ckpt_find(ck, n);
}

/* edit of an existing tensor: keep its dtype/shape/data unless changed afterwards */
static sy_static_edit *edit_of(sy_static *st, const nd_tview *t, nd_err *e) {
    for (int i = 0; i < st->n; i++)
        if (st->v[i].src == t) return &st->v[i];
    sy_static_edit *x = edit(st, e);
    if (!x) return NULL;
    x->src = t;
    snprintf(x->name, sizeof x->name, "%s", t->name);
    x->dtype = t->dtype;
    x->ndim = t->ndim;
    memcpy(x->shape, t->shape, sizeof x->shape);
    x->data = t->data;
    return x;
}

static int drop(sy_static *st, const nd_tview *t, nd_err *e) {
    if (!t) return 0;
    sy_static_edit *x = edit_of(st, t, e);
    if (!x) return ND_EXIT_INTERNAL;
    x->drop = 1;
    return 0;
}

/* a new or replacing tensor with owned data */
static int put(sy_static *st, const nd_tview *replaces, const char *name, nd_dtype dt, int ndim, const int64_t *shape,
               void *data, nd_err *e) {
    sy_static_edit *x = replaces ? edit_of(st, replaces, e) : edit(st, e);
    if (!x) { free(data); return ND_EXIT_INTERNAL; }
    x->drop = 0;
    snprintf(x->name, sizeof x->name, "%s", name);
    x->dtype = dt;
    x->ndim = ndim;
    memset(x->shape, 0, sizeof x->shape);
    for (int i = 0; i < ndim; i++) x->shape[i] = shape[i];
    free(x->owned);
    x->owned = data;
    x->data = data;
    return 0;
}

void sy_requant_global(uint8_t *packed, uint8_t *sf, int64_t n, int64_t k, float *wglobal, double F, int modelopt) {
    const float g = modelopt ? 1.0f / *wglobal : *wglobal;
    const float g2 = (float)(g * F);
    uint16_t *w = malloc((size_t)(n * k) * sizeof *w);
    if (!w) return;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            uint8_t b = packed[r * (k / 2) + c / 2], code = c % 2 ? b >> 4 : b & 15;
            w[r * k + c] = nd_bf16_from_f32(nd_e2m1_to_f32(code) * nd_e4m3_to_f32(sf[r * (k / 16) + c / 16]) / g);
        }
    sy_nvfp4_quantize(w, n, k, g2, packed, sf);
    free(w);
    *wglobal = modelopt ? 1.0f / g2 : g2;
}

int sy_module_path(const nd_ckpt *ck, const char *mod, char *path, size_t cap) {
    char name[320], alt[352];
    snprintf(name, sizeof name, "model.%s", mod);
    snprintf(path, cap, "%s", nd_module_located(ck, name, alt, sizeof alt));
    if (!nd_ckpt_has_module(ck, path)) snprintf(path, cap, "%s", mod);
    return nd_ckpt_has_module(ck, path);
}

const char *sy_module_hint(const nd_ckpt *ck, const char *mod, char *buf, size_t cap) {
    const size_t n = nd_ckpt_module_count(ck);
    const char **cands = malloc((n ? n : 1) * sizeof *cands);
    buf[0] = 0;
    if (!cands) return buf;
    const int bare = strncmp(mod, "model.", 6) != 0;
    for (size_t i = 0; i < n; i++) {
        const char *p = nd_ckpt_module_path(ck, i);
        cands[i] = bare && !strncmp(p, "model.", 6) ? p + 6 : p;
    }
    const char *best = nd_suggest(mod, cands, n);
    if (best) snprintf(buf, cap, " (did you mean '%s'?)", best);
    free(cands);
    return buf;
}

/* the module's checkpoint path (sy_module_path) */
static int resolve(const nd_ckpt *ck, const sy_fault *f, char *path, size_t cap, nd_err *e) {
    char hint[360];
    if (!sy_module_path(ck, f->module, path, cap))
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s: no module '%s' (nor model.%s)%s", nd_ckpt_dir(ck),
                       sy_fault_name(f->kind), f->module, f->module, sy_module_hint(ck, f->module, hint, sizeof hint));
    return 0;
}

static int not_for(const nd_ckpt *ck, const sy_fault *f, const char *path, const char *why, nd_err *e) {
    return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: %s@%s: module '%s' %s", nd_ckpt_dir(ck), sy_fault_name(f->kind),
                   f->module, path, why);
}

static int dequantize(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, nd_err *e) {
    if (m->wfmt != ND_WF_NVFP4 || !isfinite(m->weight_global_div) || m->weight_global_div <= 0)
        return not_for(ck, f, m->path, "is not an NVFP4 linear with a usable weight global scale", e);
    const int64_t n = m->out_features, k = m->in_features;
    uint16_t *w = malloc((size_t)(n * k) * sizeof *w);
    if (!w) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    const uint8_t *p = m->weight->data, *s = m->weight_scale->data;
    for (int64_t r = 0; r < n; r++)
        for (int64_t c = 0; c < k; c++) {
            uint8_t b = p[r * (k / 2) + c / 2], code = c % 2 ? b >> 4 : b & 15;
            w[r * k + c] = nd_bf16_from_f32(nd_e2m1_to_f32(code) * nd_e4m3_to_f32(s[r * (k / 16) + c / 16]) / m->weight_global_div);
        }
    char name[400];
    snprintf(name, sizeof name, "%s.weight", m->path);
    const int64_t shape[2] = {n, k};
    ND_TRY(put(st, m->weight, name, ND_DT_BF16, 2, shape, w, e));
    ND_TRY(drop(st, m->weight_scale, e));
    ND_TRY(drop(st, m->weight_global, e));
    ND_TRY(drop(st, m->input_global, e));
    snprintf(f->tensor, sizeof f->tensor, "%s", name);
    return 0;
}

static int quantize(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, nd_err *e) {
    if (m->wfmt != ND_WF_DENSE || m->in_features % 16)
        return not_for(ck, f, m->path, "is not an unquantized 2-D weight with K a multiple of 16", e);
    const int64_t n = m->out_features, k = m->in_features;
    const int mo = nd_ckpt_format(ck) == ND_CKPT_MODELOPT;
    uint16_t *w = malloc((size_t)(n * k) * sizeof *w);
    uint8_t *packed = malloc((size_t)(n * k / 2)), *sf = malloc((size_t)(n * k / 16));
    float *g = malloc(sizeof *g);
    if (!w || !packed || !sf || !g) {
        free(w); free(packed); free(sf); free(g);
        return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    }
    for (int64_t i = 0; i < n * k; i++) w[i] = nd_bf16_from_f32(nd_tview_get_f32(m->weight, i));
    const float gw = sy_nvfp4_global_div(sy_amax_bf16(w, n * k));
    sy_nvfp4_quantize(w, n, k, gw, packed, sf);
    free(w);
    *g = mo ? 1.0f / gw : gw;
    char name[400];
    const int64_t sp[2] = {n, k / 2}, ss[2] = {n, k / 16}, one[1] = {1};
    int rc;
    snprintf(name, sizeof name, "%s.%s", m->path, mo ? "weight" : "weight_packed");
    if ((rc = put(st, m->weight, name, ND_DT_U8, 2, sp, packed, e))) { free(sf); free(g); return rc; }
    snprintf(f->tensor, sizeof f->tensor, "%s", name);
    snprintf(name, sizeof name, "%s.weight_scale", m->path);
    if ((rc = put(st, NULL, name, ND_DT_F8_E4M3, 2, ss, sf, e))) { free(g); return rc; }
    snprintf(name, sizeof name, "%s.%s", m->path, mo ? "weight_scale_2" : "weight_global_scale");
    ND_TRY(put(st, NULL, name, ND_DT_F32, mo ? 0 : 1, one, g, e));
    f->stored = *g;
    return 0;
}

static int rename_scale(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, int weight, nd_err *e) {
    const nd_tview *t = weight ? m->weight_global : m->input_global;
    if (m->wfmt != ND_WF_NVFP4 || !t)
        return not_for(ck, f, m->path, weight ? "has no NVFP4 weight global scale" : "has no NVFP4 input scale", e);
    const int mo = m->conv == ND_CONV_MODELOPT;
    const char *to = weight ? (mo ? "weight_global_scale" : "weight_scale_2") : (mo ? "input_global_scale" : "input_scale");
    if (tens(ck, m->path, to)) return not_for(ck, f, m->path, "already has a tensor under the other format's name", e);
    sy_static_edit *x = edit_of(st, t, e);
    if (!x) return ND_EXIT_INTERNAL;
    snprintf(x->name, sizeof x->name, "%s.%s", m->path, to);
    snprintf(f->tensor, sizeof f->tensor, "%s", x->name);
    f->stored = nd_tview_get_f32(t, 0);
    return 0;
}

/* every tensor of P.gate_proj and P.up_proj (P.w1, P.w3) renamed to the other's name */
static int gate_up_swap(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, nd_err *e) {
    const char *dot = strrchr(m->path, '.'), *self = NULL;
    const char *other = dot ? nd_gate_up_sibling(m->path, &self) : NULL;
    if (!other) return not_for(ck, f, m->path, "is not a gate_proj, up_proj, w1 or w3", e);
    const int pl = (int)(dot - m->path);
    char sib[400];
    snprintf(sib, sizeof sib, "%.*s.%s", pl, m->path, other);
    if (!nd_ckpt_has_module(ck, sib)) return not_for(ck, f, m->path, "has no sibling to exchange with", e);
    char pre[2][420];
    snprintf(pre[0], sizeof pre[0], "%.*s.%s.", pl, m->path, self);
    snprintf(pre[1], sizeof pre[1], "%.*s.%s.", pl, m->path, other);
    int moved = 0;
    for (size_t i = 0; i < nd_ckpt_count(ck); i++) {
        const nd_tview *t = nd_ckpt_at(ck, i);
        for (int s = 0; s < 2; s++) {
            const size_t l = strlen(pre[s]);
            if (strncmp(t->name, pre[s], l)) continue;
            sy_static_edit *x = edit_of(st, t, e);
            if (!x) return ND_EXIT_INTERNAL;
            snprintf(x->name, sizeof x->name, "%s%s", pre[!s], t->name + l);
            moved++;
        }
    }
    snprintf(f->tensor, sizeof f->tensor, "%s*", pre[0]);
    f->count = moved;
    return 0;
}

static const char *last_name(const char *n) {
    const char *d = strrchr(n, '.');
    return d ? d + 1 : n;
}

static int missing_expert(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, nd_err *e) {
    const char *x = strstr(m->path, ".experts.");
    char *end = NULL;
    long self = x ? strtol(x + 9, &end, 10) : -1;
    if (!x || end == x + 9 || *end != '.') return not_for(ck, f, m->path, "is not a routed expert (MODULE.experts.N.PROJ)", e);
    if (m->wfmt != ND_WF_NVFP4 || !m->input_global) return not_for(ck, f, m->path, "has no NVFP4 input scale to leave out", e);
    int sib = 0;
    for (long j = 0; j < 64 && !sib; j++) {
        if (j == self) continue;
        char n[700];
        snprintf(n, sizeof n, "%.*s%ld.%s.%s", (int)(x + 9 - m->path), m->path, j, end + 1, last_name(m->input_global->name));
        sib = nd_ckpt_find(ck, n) != NULL;
    }
    if (!sib) return not_for(ck, f, m->path, "has no sibling expert with an input scale (the fault leaves out one expert's only)", e);
    snprintf(f->tensor, sizeof f->tensor, "%s", m->input_global->name);
    return drop(st, m->input_global, e);
}

/* every element of the router's score-correction bias plus F: the FP32 selection is unchanged (one
 * offset for every expert, and for every group's sum of two), but at a magnitude like 7 BF16's step
 * is 1/32, so a stack holding the bias in BF16 collapses its differences (field report C33) */
static int router_bias_offset(const nd_ckpt *ck, const nd_module *m, sy_static *st, sy_fault *f, nd_err *e) {
    char name[400];
    /* DeepSeek-V3's name, else transformers' saved DeepSeek-V4 naming (ffn.gate.bias) */
    snprintf(name, sizeof name, "%s.e_score_correction_bias", m->path);
    const nd_tview *t = nd_ckpt_find(ck, name);
    if (!t) {
        snprintf(name, sizeof name, "%s.bias", m->path);
        t = nd_ckpt_find(ck, name);
    }
    if (!t || t->dtype != ND_DT_F32 || t->ndim != 1)
        return not_for(ck, f, m->path, "has no F32 e_score_correction_bias or bias (a router with a correction bias)", e);
    float *v = malloc(t->nbytes ? t->nbytes : 1);
    if (!v) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
    memcpy(v, t->data, t->nbytes);
    for (int64_t i = 0; i < t->numel; i++) v[i] = (float)(v[i] + f->value);
    ND_TRY(put(st, t, name, ND_DT_F32, 1, t->shape, v, e));
    snprintf(f->tensor, sizeof f->tensor, "%s", name);
    return 0;
}

int sy_static_plan(const nd_ckpt *ck, sy_fault *fs, int n, sy_static *st, nd_err *e) {
    memset(st, 0, sizeof *st);
    for (int i = 0; i < n; i++) {
        sy_fault *f = &fs[i];
        if (!sy_static_fault(f->kind)) continue;
        char path[300];
        ND_TRY(resolve(ck, f, path, sizeof path, e));
        nd_module m;
        ND_TRY(nd_ckpt_module(ck, path, &m, e));
        switch (f->kind) {
        case SY_F_CONFIG_IGNORE: {
            if (m.wfmt == ND_WF_DENSE) return not_for(ck, f, path, "is not quantized (nothing to contradict)", e);
            if (nd_ckpt_module_ignored(ck, path)) return not_for(ck, f, path, "is already ignored by the config", e);
            if (nd_ckpt_format(ck) != ND_CKPT_COMPRESSED_TENSORS && nd_ckpt_format(ck) != ND_CKPT_MODELOPT)
                return not_for(ck, f, path, "is in a checkpoint without a compressed-tensors or ModelOpt config", e);
            char (*ni)[300] = realloc(st->ignore, (size_t)(st->n_ignore + 1) * sizeof *ni);
            if (!ni) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
            st->ignore = ni;
            snprintf(st->ignore[st->n_ignore++], sizeof st->ignore[0], "%s", path);
            snprintf(f->tensor, sizeof f->tensor, "%s", nd_ckpt_format(ck) == ND_CKPT_MODELOPT ?
                     "hf_quant_config.json:quantization.exclude_modules" : "config.json:quantization_config.ignore");
            break;
        }
        case SY_F_DEQUANTIZE: ND_TRY(dequantize(ck, &m, st, f, e)); break;
        case SY_F_QUANTIZE: ND_TRY(quantize(ck, &m, st, f, e)); break;
        case SY_F_QUANTIZE_UNIGNORED: {
            /* quantized on purpose, the config saying so: the role's policy is broken, not the config */
            ND_TRY(quantize(ck, &m, st, f, e));
            char (*nu)[300] = realloc(st->unignore, (size_t)(st->n_unignore + 1) * sizeof *nu);
            if (!nu) return nd_fail(e, ND_EXIT_INTERNAL, "synth --from: out of memory");
            st->unignore = nu;
            snprintf(st->unignore[st->n_unignore++], sizeof st->unignore[0], "%s", path);
            break;
        }
        case SY_F_SCALE_RENAMED: ND_TRY(rename_scale(ck, &m, st, f, 0, e)); break;
        case SY_F_WSCALE_RENAMED: ND_TRY(rename_scale(ck, &m, st, f, 1, e)); break;
        case SY_F_SCALE_MISSING_EXPERT: ND_TRY(missing_expert(ck, &m, st, f, e)); break;
        case SY_F_ROUTER_BIAS_OFFSET: ND_TRY(router_bias_offset(ck, &m, st, f, e)); break;
        case SY_F_GATE_UP_SWAP: ND_TRY(gate_up_swap(ck, &m, st, f, e)); break;
        default: break;
        }
        f->applied = 1;
    }
    return 0;
}

const sy_static_edit *sy_static_for(const sy_static *st, const nd_tview *t) {
    for (int i = 0; i < st->n; i++)
        if (st->v[i].src == t) return &st->v[i];
    return NULL;
}

int sy_static_add_new(const sy_static *st, nd_st_writer *w, nd_err *e) {
    for (int i = 0; i < st->n; i++)
        if (!st->v[i].src) ND_TRY(nd_st_writer_add(w, st->v[i].name, st->v[i].dtype, st->v[i].ndim, st->v[i].shape, st->v[i].data, e));
    return 0;
}

/* the entry names the module as exporters write it: its path, or the path without model. */
static int names_module(const char *entry, const char *path) {
    return !strcmp(entry, path) || (!strncmp(path, "model.", 6) && !strcmp(entry, path + 6));
}

/* Append the ignored paths to the list at obj[key] (created when absent); drop the entries that
 * name an unignored one. */
static void add_ignores(json_t *obj, const char *key, const sy_static *st) {
    json_t *a = json_object_get(obj, key);
    if (!json_is_array(a)) {
        a = json_array();
        json_object_set_new(obj, key, a);
    }
    for (int i = 0; i < st->n_ignore; i++) json_array_append_new(a, json_string(st->ignore[i]));
    for (size_t j = json_array_size(a); j-- > 0;) {
        const char *v = json_string_value(json_array_get(a, j));
        for (int i = 0; v && i < st->n_unignore; i++)
            if (names_module(v, st->unignore[i])) { json_array_remove(a, j); break; }
    }
}

static int edit_json(const char *outdir, const char *file, const char *obj_key, const char *list_key, const sy_static *st,
                     nd_err *e) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", outdir, file);
    json_error_t je;
    json_t *root = nd_json_load_file(path, JSON_PRESERVE_ORDER | JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        if (errno == ENOENT && strcmp(file, "config.json")) return 0;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read: %s", path, je.text);
    }
    json_t *o = json_object_get(root, obj_key);
    if (json_is_object(o)) add_ignores(o, list_key, st);
    errno = 0;
    int rc = 0;
    if (json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER)) {
        const int err = errno ? errno : EIO;
        rc = nd_fail(e, nd_io_exit(err), "%s: cannot write: %s%s", path, strerror(err), nd_io_hint(err));
    }
    json_decref(root);
    return rc;
}

int sy_static_config(const sy_static *st, const char *outdir, nd_err *e) {
    if (!st->n_ignore && !st->n_unignore) return 0;
    /* compressed-tensors and an embedded ModelOpt config: quantization_config.ignore */
    ND_TRY(edit_json(outdir, "config.json", "quantization_config", "ignore", st, e));
    return edit_json(outdir, "hf_quant_config.json", "quantization", "exclude_modules", st, e);
}

void sy_static_free(sy_static *st) {
    for (int i = 0; i < st->n; i++) free(st->v[i].owned);
    free(st->v);
    free(st->ignore);
    free(st->unignore);
    memset(st, 0, sizeof *st);
}
