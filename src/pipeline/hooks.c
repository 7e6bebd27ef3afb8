/* hooks.c — what repro, bisect and captured activations need from a run:
 *  - the capture of one stage (definition, reference inputs, the tensors it reads),
 *  - stages forced onto the reference math on the production path (bisect),
 *  - activations captured from a real serving stack, looked up by stage or module name. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "loop.h"
#include "pipeline.h"

int nd_run_ref_only(const nd_run *r, const char *stage) {
    for (int i = 0; i < r->n_ref_only; i++)
        if (!strcmp(r->ref_only[i], stage)) return 1;
    return 0;
}

nd_buf *nd_run_captured(nd_run *r, const char *stage, const char *module, const char *suffix, int64_t cols, nd_err *e) {
    if (!r->loop->dump) return NULL;
    char name[320];
    const nd_tview *t = NULL;
    snprintf(name, sizeof name, "%s%s", stage, suffix);
    t = nd_st_find(r->loop->dump, name);
    if (module && *module && strcmp(module, stage)) {
        /* the stage may be captured under its module's name too, but not under both */
        char mname[320];
        snprintf(mname, sizeof mname, "%s%s", module, suffix);
        const nd_tview *tm = nd_st_find(r->loop->dump, mname);
        if (t && tm && tm != t) {
            nd_fail(e, ND_EXIT_BADINPUT, "%s: two tensors capture stage %s: %s and %s (keep one)", t->file, stage, t->name, tm->name);
            return NULL;
        }
        if (!t) t = tm;
    }
    if (!t) return NULL;
    if (r->loop->dump_used) r->loop->dump_used[t - nd_st_at(r->loop->dump, 0)] = 1;
    /* [tokens, features], or [1, tokens, features] as a batch of one: a capture of another shape
     * holds the same count of values in another order */
    const int batched = t->ndim == 3 && t->shape[0] == 1;
    const int64_t rows = t->ndim == 2 ? t->shape[0] : batched ? t->shape[1] : -1, c = t->ndim == 2 ? t->shape[1] : batched ? t->shape[2] : -1;
    if (cols <= 0 || rows != r->t || c != cols) {
        char shape[96] = "";
        for (int i = 0; i < t->ndim && i < 6; i++)
            snprintf(shape + strlen(shape), sizeof shape - strlen(shape), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        nd_fail(e, ND_EXIT_BADINPUT, "%s: captured %s is [%s], expected [%lld, %lld] (tokens x features; [1, %lld, %lld] as a batch of one)",
                t->file, t->name, shape, (long long)r->t, (long long)cols, (long long)r->t, (long long)cols);
        return NULL;
    }
    nd_buf *b = calloc(1, sizeof *b);
    if (!b) { nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); return NULL; }
    b->refs = 1;
    b->rows = r->t;
    b->cols = cols;
    b->n = t->numel;
    if (nd_tensor_f32(r, t, &b->p, e)) { free(b); return NULL; }
    nd_buf_count(r, b);
    return b;
}

/* ---- capture ---- */
static const char *const suffixes[] = {"", ".weight", ".weight_packed", ".weight_scale", ".weight_global_scale",
                                       ".input_global_scale", ".weight_scale_2", ".input_scale", ".weight_scale_inv",
                                       ".scale", ".bias", ".fn", ".base", ".hc_fn", ".hc_base", ".hc_scale",
                                       ".pre_quant_scale"};

/* the projections of an MLP module (gpt-oss fuses gate and up into gate_up_proj) */
static const char *const mlp_proj[] = {"gate_proj", "up_proj", "down_proj", "gate_up_proj"};

static void add_tensors(nd_run *r, nd_capture_info *ci, char (*names)[200], const char *prefix) {
    for (size_t s = 0; s < sizeof suffixes / sizeof suffixes[0] && ci->n_tensors < ND_CAPTURE_MAX_TENSORS; s++) {
        char nm[200];
        snprintf(nm, sizeof nm, "%s%s", prefix, suffixes[s]);
        const nd_tview *t = nd_run_tensor(r, 0, nm);
        if (!t) continue;
        int dup = 0;
        for (int i = 0; i < ci->n_tensors; i++) if (ci->tensors[i] == t) dup = 1;
        if (dup) continue;
        snprintf(names[ci->n_tensors], 200, "%s", nm);
        ci->tensor_names[ci->n_tensors] = names[ci->n_tensors];
        ci->tensors[ci->n_tensors++] = t;
    }
}

/* `, k: "v"` with v as a YAML double-quoted scalar (\\, \" and control bytes escaped), so that no
 * value can end the scalar or add keys; replay parses the text as YAML (bundle_recipe.c). */
static void yaml_str(char *out, size_t cap, size_t *o, const char *k, const char *v) {
    char q[1200];
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)v; *c && n + 5 < sizeof q; c++) {
        if (*c == '"' || *c == '\\') { q[n++] = '\\'; q[n++] = (char)*c; }
        else if (*c < 0x20 || *c == 0x7f) n += (size_t)snprintf(q + n, sizeof q - n, "\\x%02x", *c);
        else q[n++] = (char)*c;
    }
    q[n] = 0;
    *o += (size_t)snprintf(out + *o, *o < cap ? cap - *o : 0, "%s%s: \"%s\"", *o > 1 ? ", " : "", k, q);
}

int nd_run_capture(nd_run *r, const nd_stage *st, nd_buf **in_ref, nd_err *e) {
    nd_capture_info *ci = calloc(1, sizeof *ci);
    char (*names)[200] = calloc(ND_CAPTURE_MAX_TENSORS, 200);
    float *host[8] = {0};
    int rc = (!ci || !names) ? nd_fail(e, ND_EXIT_INTERNAL, "out of memory") : 0;
    if (rc) goto out;
    const nd_stage_def *d = st->def;
    ci->stage_name = st->name;
    ci->op = d->op;
    ci->layer = st->layer;
    /* the stage with {L} resolved ({E} kept for expert templates) */
    size_t o = 0;
    char tmp[400];
    ci->stage_yaml[o++] = '{';
    yaml_str(ci->stage_yaml, sizeof ci->stage_yaml, &o, "stage", st->name);
    yaml_str(ci->stage_yaml, sizeof ci->stage_yaml, &o, "op", d->op);
    if (st->module[0]) yaml_str(ci->stage_yaml, sizeof ci->stage_yaml, &o, "module", st->module);
    for (int k = 0; k < 2; k++) {
        int n = k ? d->n_out : d->n_in;
        if (!n) continue;
        o += (size_t)snprintf(ci->stage_yaml + o, sizeof ci->stage_yaml - o, ", %s: [", k ? "out" : "in");
        for (int i = 0; i < n; i++) o += (size_t)snprintf(ci->stage_yaml + o, sizeof ci->stage_yaml - o, "%s%s", i ? ", " : "", k ? d->out[i] : d->in[i]);
        o += (size_t)snprintf(ci->stage_yaml + o, sizeof ci->stage_yaml - o, "]");
    }
    for (int i = 0; i < d->n_attrs; i++) {
        nd_expand(d->attrs[i].value, st->layer, 0, tmp, sizeof tmp);
        if (strstr(d->attrs[i].value, "{E}")) snprintf(tmp, sizeof tmp, "%s", d->attrs[i].value);
        yaml_str(ci->stage_yaml, sizeof ci->stage_yaml, &o, d->attrs[i].key, tmp);
    }
    if (o + 2 < sizeof ci->stage_yaml) { ci->stage_yaml[o++] = '}'; ci->stage_yaml[o] = 0; }
    /* inputs */
    ci->n_in = d->n_in < 8 ? d->n_in : 8;
    for (int i = 0; i < ci->n_in && !rc; i++) rc = nd_stage_input_of(r, in_ref[i], d->in[i], &ci->in[i], &host[i], e);
    /* tensors: the module (and its projections), every attribute naming a tensor or a prefix */
    if (!rc && st->module[0]) {
        if (strstr(st->module, "{E}")) {
            /* routed experts: only those the reference routing picked */
            nd_buf *rt = d->n_in > 1 ? in_ref[1] : NULL;
            for (int64_t i = 0; rt && rt->idx && i < rt->rows * rt->k; i++) {
                char pre[200], full[260];
                nd_expand(st->module, st->layer, rt->idx[i], pre, sizeof pre);
                for (size_t p = 0; p < sizeof mlp_proj / sizeof mlp_proj[0]; p++) {
                    snprintf(full, sizeof full, "%s.%s", pre, mlp_proj[p]);
                    add_tensors(r, ci, names, full);
                }
            }
        } else {
            add_tensors(r, ci, names, st->module);
            /* a KV cache reads its scales beside the attention module (compressed-tensors' k_scale /
             * v_scale / kv_scale, ModelOpt's k_proj.k_scale / v_proj.v_scale): without them a replay
             * would run the cache at scale 1 */
            if (!strcmp(d->op, "kv_cache")) {
                static const char *const kv[] = {".k_scale", ".v_scale", ".kv_scale", ".k_proj.k_scale", ".v_proj.v_scale"};
                for (size_t q = 0; q < sizeof kv / sizeof kv[0] && ci->n_tensors < ND_CAPTURE_MAX_TENSORS; q++) {
                    char nm[200];
                    snprintf(nm, sizeof nm, "%s%s", st->module, kv[q]);
                    const nd_tview *t = nd_run_tensor(r, 0, nm);
                    if (!t) continue;
                    snprintf(names[ci->n_tensors], 200, "%s", nm);
                    ci->tensor_names[ci->n_tensors] = names[ci->n_tensors];
                    ci->tensors[ci->n_tensors++] = t;
                }
            }
            char full[260];
            for (size_t p = 0; p < sizeof mlp_proj / sizeof mlp_proj[0]; p++) {
                snprintf(full, sizeof full, "%s.%s", st->module, mlp_proj[p]);
                add_tensors(r, ci, names, full);
            }
        }
    }
    for (int i = 0; !rc && i < d->n_attrs; i++) {
        char list[400];
        nd_expand(d->attrs[i].value, st->layer, 0, list, sizeof list);
        for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) add_tensors(r, ci, names, tok);
    }
    if (!rc) rc = r->loop->opts->capture(r->loop->opts->capture_user, ci, e);
out:
    for (int i = 0; i < 8; i++) free(host[i]);
    free(names);
    free(ci);
    return rc;
}
