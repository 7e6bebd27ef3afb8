/* synth_kv.c — KV-cache scale faults of synth --from (synth_kv.h). */
#include "util/outfile.h"
#include "util/infile.h"
#include "synth/synth_kv.h"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>
#include "util/json_load.h"
#include "ckpt/kv_scales.h"
#include "pipeline/pipeline.h"

int sy_kv_fault(sy_fault_kind k) { return k == SY_F_KV_SCALES || k == SY_F_KV_MUL || k == SY_F_KV_INVERTED; }

int sy_kv_module(const nd_ckpt *ck, const char *spec, const char *mod, char *attn, size_t cap, nd_err *e) {
    long long l = -1;
    int end = 0;
    const char *m = strncmp(mod, "model.", 6) ? mod : mod + 6;
    if (sscanf(m, "layers.%lld.self_attn%n", &l, &end) != 1 || m[end] || l < 0 ||
        l >= nd_ckpt_config(ck)->num_hidden_layers)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: --inject '%s': '%s' is not an attention module of this "
                       "%lld-layer model (layers.L.self_attn)", nd_ckpt_dir(ck), spec, mod,
                       (long long)nd_ckpt_config(ck)->num_hidden_layers);
    snprintf(attn, cap, "model.layers.%lld.self_attn", l);
    return 0;
}

/* Calibration: amax per KV-scale tensor name, as the kv_cache stage reports it. */
typedef struct calib { char name[SY_KV_MAX][320]; double amax[SY_KV_MAX]; int n; } calib;

static void on_amax(void *user, const char *name, double amax) {
    calib *c = user;
    for (int i = 0; i < c->n; i++)
        if (!strcmp(c->name[i], name)) { c->amax[i] = fmax(c->amax[i], amax); return; }
    if (c->n == SY_KV_MAX) return;
    snprintf(c->name[c->n], sizeof c->name[0], "%s", name);
    c->amax[c->n++] = amax;
}

static sy_kv_tensor *entry(sy_kv_edits *k, const char *name) {
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->t[i].name, name)) return &k->t[i];
    return NULL;
}

static int one_f32(const nd_tview *t) { return t->dtype == ND_DT_F32 && t->numel == 1 && t->nbytes == 4; }

/* The module's KV scales as they stand (edited ones first), at most two. */
static int current(const nd_ckpt *ck, sy_kv_edits *k, const char *attn, const char *spec, sy_kv_tensor **out, int *np,
                   nd_err *e) {
    nd_kv_scales s;
    nd_ckpt_kv_scales(ck, attn, &s);
    int n = 0;
    const nd_tview *tv[2] = {s.k, s.v == s.k ? NULL : s.v};
    for (int i = 0; i < 2; i++) {
        if (!tv[i]) continue;
        sy_kv_tensor *t = entry(k, tv[i]->name);
        if (!t) {
            if (!one_f32(tv[i]))
                return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: --inject '%s': %s is not one F32 value", nd_ckpt_dir(ck), spec, tv[i]->name);
            if (k->n == SY_KV_MAX) return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: too many KV-scale faults");
            t = &k->t[k->n++];
            memset(t, 0, sizeof *t);
            snprintf(t->name, sizeof t->name, "%s", tv[i]->name);
            t->old = tv[i];
            memcpy(&t->value, tv[i]->data, 4);
        }
        out[n++] = t;
    }
    /* none in the checkpoint: the ones an earlier kv-scales added to this module */
    const size_t al = strlen(attn);
    for (int i = 0; i < k->n && n < 2 && !(s.k || s.v); i++)
        if (!k->t[i].old && !strncmp(k->t[i].name, attn, al) && k->t[i].name[al] == '.') out[n++] = &k->t[i];
    if (!n)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: --inject '%s': %s has no KV-cache scales (add them first "
                       "with kv-scales@%s)", nd_ckpt_dir(ck), spec, attn, attn + 6);
    *np = n;
    return 0;
}

int sy_kv_plan(const nd_ckpt *ck, const char *src, sy_fault *fs, int n, sy_kv_edits *out, nd_err *e) {
    memset(out, 0, sizeof *out);
    calib cal = {.n = 0};
    int calibrated = 0;
    const int mo = nd_ckpt_format(ck) == ND_CKPT_MODELOPT, latent = nd_ckpt_kv_latent(ck);
    for (int i = 0; i < n; i++) {
        sy_fault *f = &fs[i];
        if (!sy_kv_fault(f->kind)) continue;
        char attn[300], spec[400];
        snprintf(spec, sizeof spec, "%s@%s", sy_fault_name(f->kind), f->module);
        ND_TRY(sy_kv_module(ck, spec, f->module, attn, sizeof attn, e));
        if (f->kind == SY_F_KV_SCALES) {
            nd_kv_scales s;
            nd_ckpt_kv_scales(ck, attn, &s);
            if (s.k || s.v)
                return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: --inject '%s': %s already has KV-cache scales (%s)",
                               nd_ckpt_dir(ck), spec, attn, (s.k ? s.k : s.v)->name);
            if (!calibrated) {
                ND_TRY(nd_pipeline_calibrate(src, NULL, NULL, 0, on_amax, &cal, e));
                calibrated = 1;
            }
            const char *suf[2] = {mo ? "k_proj.k_scale" : "k_scale", mo ? "v_proj.v_scale" : "v_scale"};
            for (int j = 0; j < (latent ? 1 : 2); j++) {
                char name[320];
                snprintf(name, sizeof name, "%s.%s", attn, suf[j]);
                double amax = NAN;
                for (int q = 0; q < cal.n; q++)
                    if (!strcmp(cal.name[q], name)) amax = cal.amax[q];
                if (!(amax > 0) || !isfinite(amax))
                    return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: %s: --inject '%s': the recipe's KV-cache stage of %s "
                                   "saw no finite non-zero values to calibrate %s", nd_ckpt_dir(ck), spec, attn, name);
                sy_kv_tensor *t = entry(out, name);
                if (!t) {
                    if (out->n == SY_KV_MAX) return nd_fail(e, ND_EXIT_BADINPUT, "synth --from: too many KV-scale faults");
                    t = &out->t[out->n++];
                    memset(t, 0, sizeof *t);
                    snprintf(t->name, sizeof t->name, "%s", name);
                    t->scalar = mo;
                }
                t->value = (float)(amax / 448.0);
                if (j == 0) { f->stored = t->value; snprintf(f->tensor, sizeof f->tensor, "%s", name); }
            }
            out->announce = 1;
        } else {
            sy_kv_tensor *cur[2];
            int m = 0;
            ND_TRY(current(ck, out, attn, spec, cur, &m, e));
            for (int j = 0; j < m; j++)
                cur[j]->value = f->kind == SY_F_KV_MUL ? (float)(cur[j]->value * f->value) : 1.0f / cur[j]->value;
            f->stored = cur[0]->value;
            snprintf(f->tensor, sizeof f->tensor, "%s", cur[0]->name);
        }
        f->applied = 1;
    }
    return 0;
}

const void *sy_kv_bytes_for(const sy_kv_edits *k, const nd_tview *v) {
    for (int i = 0; i < k->n; i++)
        if (k->t[i].old == v) return &k->t[i].value;
    return NULL;
}

int sy_kv_add_new(const sy_kv_edits *k, nd_st_writer *w, nd_err *e) {
    static const int64_t one[1] = {1};
    for (int i = 0; i < k->n; i++)
        if (!k->t[i].old) ND_TRY(nd_st_writer_add(w, k->t[i].name, ND_DT_F32, k->t[i].scalar ? 0 : 1, one, &k->t[i].value, e));
    return 0;
}

/* Set obj[key] = val unless it is already a non-null value. */
static void set_if_absent(json_t *obj, const char *key, json_t *val) {
    json_t *cur = json_object_get(obj, key);
    if (cur && !json_is_null(cur)) { json_decref(val); return; }
    json_object_set_new(obj, key, val);
}

int sy_kv_announce(const sy_kv_edits *k, const nd_ckpt *ck, const char *outdir, nd_err *e) {
    if (!k->announce) return 0;
    const int mo = nd_ckpt_format(ck) == ND_CKPT_MODELOPT;
    char path[1200];
    snprintf(path, sizeof path, "%s/hf_quant_config.json", outdir);
    const char *kind;
    FILE *probe = mo ? nd_fopen_regular(path, &kind) : NULL;
    const int hf = probe != NULL;
    if (probe) fclose(probe);
    if (!hf) snprintf(path, sizeof path, "%s/config.json", outdir);
    json_error_t jerr;
    json_t *root = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", path, jerr.line, jerr.text);
    json_t *q = json_object_get(root, hf ? "quantization" : "quantization_config");
    int rc = 0;
    if (!json_is_object(q)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: no '%s' object to announce the FP8 KV cache in", path,
                                         hf ? "quantization" : "quantization_config");
    else if (mo) set_if_absent(q, "kv_cache_quant_algo", json_string("FP8"));
    else
        set_if_absent(q, "kv_cache_scheme", json_pack("{s:i, s:s, s:s, s:b, s:b}", "num_bits", 8, "type", "float",
                                                      "strategy", "tensor", "dynamic", 0, "symmetric", 1));
    if (!rc && json_dump_file(root, path, JSON_INDENT(2) | JSON_PRESERVE_ORDER))
        rc = nd_fail(e, nd_io_exit(errno ? errno : EIO), "%s: cannot write: %s", path, strerror(errno ? errno : EIO));
    json_decref(root);
    return rc;
}
