/* sensitivity_out.c — see sensitivity_out.h. */
#include "sensitivity_out.h"
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml.h>
#include "pipeline/pipeline.h"
#include "recipe/recipe.h"
#include "util/membuf.h"
#include "ckpt/ckpt.h"
#include "util/outfile.h"
#include "util/term.h"


/* the unit a stage belongs to: the stage itself, "layer N", or the stage with its layer index
 * taken out and other numbers (expert indices) made "*" */
void nd_sens_unit_key(const char *stage, int g, char *out, size_t cap) {
    if (g == ND_SENS_MODULE) { snprintf(out, cap, "%s", stage); return; }
    const char *rest = stage;
    long layer = -1;
    if (!strncmp(stage, "layers.", 7)) {
        char *end;
        layer = strtol(stage + 7, &end, 10);
        if (end > stage + 7 && *end == '.') rest = end + 1;
        else layer = -1;
    }
    if (g == ND_SENS_LAYER) {
        if (layer >= 0) snprintf(out, cap, "layer %ld", layer);
        else snprintf(out, cap, "%s", stage);
        return;
    }
    size_t n = 0;
    for (const char *p = rest; *p && n + 2 < cap;) {
        const char *dot = strchr(p, '.');
        const size_t len = dot ? (size_t)(dot - p) : strlen(p);
        size_t k = 0;
        while (k < len && p[k] >= '0' && p[k] <= '9') k++;
        if (k == len && len) out[n++] = '*';
        else for (size_t j = 0; j < len && n + 2 < cap; j++) out[n++] = p[j];
        if (dot && n + 2 < cap) out[n++] = '.';
        p = dot ? dot + 1 : p + len;
    }
    out[n] = 0;
}

const char *const ND_SENS_RECIPE_FILES[3] = {"llmcompressor-recipe.yaml", "modelopt-quant-cfg.json",
                                             "compressed-tensors-ignore.json"};

int nd_sens_out_check(const char *dir, const char *const *inputs, int n_inputs, nd_err *e) {
    struct stat st;
    if (!dir[0]) return nd_fail(e, ND_EXIT_BADINPUT, "--recipe-out: empty folder name");
    const int exists = lstat(dir, &st) == 0;
    if (exists) {
        if (S_ISLNK(st.st_mode) || !S_ISDIR(st.st_mode))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: --recipe-out must be a new or empty folder (this is a %s)", dir,
                           S_ISLNK(st.st_mode) ? "link" : "file");
        DIR *d = opendir(dir);
        if (!d) return nd_fail(e, nd_io_exit(errno), "%s: cannot read the folder: %s", dir, strerror(errno));
        int n = 0;
        for (struct dirent *de; (de = readdir(d));) n += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
        closedir(d);
        if (n) return nd_fail(e, ND_EXIT_BADINPUT, "%s: --recipe-out must be a new or empty folder (it holds %d entries)", dir, n);
    } else if (errno != ENOENT) {
        return nd_fail(e, nd_io_exit(errno), "%s: %s", dir, strerror(errno));
    }
    /* never inside an input folder of the run (the checkpoint, the tokenizer's, the recipes'): the
     * rule every writer keeps (util/outfile.h), applied to the folder's first file when the folder
     * is there, to the folder itself when it is new */
    char probe[PATH_MAX];
    if (exists) snprintf(probe, sizeof probe, "%s/%s", dir, ND_SENS_RECIPE_FILES[0]);
    const nd_out_rules rules = {.what = "recipes", .inputs = inputs, .n_inputs = n_inputs};
    return nd_out_check(exists ? probe : dir, &rules, e);
}

/* the checkpoint's name of a stage's module: model.<stage> or <stage>, as the checkpoint has it */
/* the checkpoint's name of a stage's module: through the recipe's naming (DeepSeek-V4's ffn.*.w1 for
 * mlp.*.gate_proj), with or without the model. prefix as the checkpoint has it */
static void module_name(const nd_ckpt *c, const struct nd_naming *nm, const char *stage, char *out, size_t cap) {
    char canon[600];
    snprintf(canon, sizeof canon, "model.%s", stage);
    nd_naming_map(nm, canon, 1, out, cap);
    if (c && !nd_ckpt_has_module(c, out) && nd_ckpt_has_module(c, out + (strncmp(out, "model.", 6) ? 0 : 6)))
        memmove(out, out + 6, strlen(out + 6) + 1);
}

/* the config's own ignore list (compressed-tensors `ignore`, ModelOpt `exclude_modules`) */
static json_t *config_ignore(const char *ckpt) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/config.json", ckpt);
    json_error_t je;
    json_t *cfg = json_load_file(path, JSON_REJECT_DUPLICATES, &je), *out = json_array();
    json_t *qc = cfg ? json_object_get(cfg, "quantization_config") : NULL;
    json_t *ig = qc ? json_object_get(qc, "ignore") : NULL;
    if (!json_is_array(ig) && qc) ig = json_object_get(qc, "exclude_modules");
    size_t i;
    json_t *v;
    if (json_is_array(ig)) json_array_foreach(ig, i, v) if (json_is_string(v)) json_array_append(out, v);
    if (!json_array_size(out)) json_array_append_new(out, json_string("lm_head"));
    json_decref(cfg);
    return out;
}

/* write the bytes to dir/name through a temporary (util/outfile.h) */
static int write_file(const char *dir, const char *name, const char *bytes, size_t n, nd_err *e) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    nd_outtmp ot;
    int fd = -1, rc = nd_out_begin(&ot, path, &fd, e);
    if (rc) return rc;
    for (size_t off = 0; off < n && !rc;) {
        const ssize_t w = write(fd, bytes + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) rc = nd_fail(e, nd_io_exit(errno), "%s: cannot write: %s%s", path, strerror(errno), nd_io_hint(errno));
        else off += (size_t)w;
    }
    if (close(fd) && !rc) rc = nd_fail(e, nd_io_exit(errno), "%s: cannot write: %s%s", path, strerror(errno), nd_io_hint(errno));
    if (rc) nd_out_abort(&ot);
    else rc = nd_out_commit(&ot, e);
    return rc;
}

static int scalar(yaml_emitter_t *em, const char *s) {
    yaml_event_t ev;
    return yaml_scalar_event_initialize(&ev, NULL, NULL, (yaml_char_t *)s, (int)strlen(s), 1, 1, YAML_ANY_SCALAR_STYLE) &&
           yaml_emitter_emit(em, &ev);
}
static int mapping(yaml_emitter_t *em, int start) {
    yaml_event_t ev;
    return (start ? yaml_mapping_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_MAPPING_STYLE)
                  : yaml_mapping_end_event_initialize(&ev)) && yaml_emitter_emit(em, &ev);
}

/* quant_stage: quant_modifiers: QuantizationModifier: {targets: [Linear], scheme: NVFP4, ignore: [...]} */
static int recipe_yaml(json_t *ignore, nd_membuf *m, nd_err *e) {
    yaml_emitter_t em;
    yaml_event_t ev;
    if (!yaml_emitter_initialize(&em)) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    yaml_emitter_set_output(&em, nd_membuf_append, m);
    yaml_emitter_set_unicode(&em, 1);
    yaml_emitter_set_width(&em, -1);
    int ok = yaml_stream_start_event_initialize(&ev, YAML_UTF8_ENCODING) && yaml_emitter_emit(&em, &ev) &&
             yaml_document_start_event_initialize(&ev, NULL, NULL, NULL, 1) && yaml_emitter_emit(&em, &ev) && mapping(&em, 1) &&
             scalar(&em, "quant_stage") && mapping(&em, 1) && scalar(&em, "quant_modifiers") && mapping(&em, 1) &&
             scalar(&em, "QuantizationModifier") && mapping(&em, 1) && scalar(&em, "targets") &&
             yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_FLOW_SEQUENCE_STYLE) && yaml_emitter_emit(&em, &ev) &&
             scalar(&em, "Linear") && yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) &&
             scalar(&em, "scheme") && scalar(&em, "NVFP4") && scalar(&em, "ignore") &&
             yaml_sequence_start_event_initialize(&ev, NULL, NULL, 1, YAML_BLOCK_SEQUENCE_STYLE) && yaml_emitter_emit(&em, &ev);
    size_t i;
    json_t *v;
    json_array_foreach(ignore, i, v) if (ok) ok = scalar(&em, json_string_value(v));
    ok = ok && yaml_sequence_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev) && mapping(&em, 0) && mapping(&em, 0) &&
         mapping(&em, 0) && mapping(&em, 0) && yaml_document_end_event_initialize(&ev, 1) && yaml_emitter_emit(&em, &ev) &&
         yaml_stream_end_event_initialize(&ev) && yaml_emitter_emit(&em, &ev);
    int rc = ok ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "cannot emit the llmcompressor recipe (%s)", em.problem ? em.problem : "?");
    yaml_emitter_delete(&em);
    return rc;
}

json_t *nd_sens_set_modules(nd_sens_report *r) {
    json_t *mods = json_array();
    nd_ckpt *c = NULL;
    nd_err e2 = {0};
    r->ckpt_linears = r->set_linears = 0;
    if (nd_ckpt_open(r->ckpt, &c, &e2)) c = NULL; /* the run read it; without it the stages' own names are used */
    nd_recipe *rc = NULL;
    const struct nd_naming *nm = NULL;
    if (c && nd_naming_for(r->recipe, c, &rc, &nm, &e2)) nm = NULL; /* the recipe's names, read once */
    const int nset = r->set ? r->set->n : 0;
    if (c) {
        /* every quantized module of the checkpoint, put in its unit by its name as a stage */
        const size_t n = nd_ckpt_module_count(c);
        for (size_t i = 0; i < n; i++) {
            const char *p = nd_ckpt_module_path(c, i);
            nd_module m;
            nd_err e3 = {0};
            if (nd_ckpt_module(c, p, &m, &e3) || m.wfmt == ND_WF_DENSE) continue;
            r->ckpt_linears++;
            char key[256], canon[600];
            nd_naming_map(nm, p, 0, canon, sizeof canon);
            nd_sens_unit_key(strncmp(canon, "model.", 6) ? canon : canon + 6, r->gran, key, sizeof key);
            for (int k = 0; k < nset; k++)
                if (!strcmp(key, r->units[k].key)) { json_array_append_new(mods, json_string(p)); r->set_linears++; break; }
        }
    }
    /* a stage of a kept unit whose module the names above missed (a naming the recipe renames) */
    for (int k = 0; k < nset; k++)
        for (int j = 0; j < r->units[k].n; j++) {
            char name[600];
            module_name(c, nm, r->units[k].stages[j], name, sizeof name);
            int have = 0;
            size_t q;
            json_t *v;
            json_array_foreach(mods, q, v) have |= !strcmp(json_string_value(v), name);
            if (!have) { json_array_append_new(mods, json_string(name)); r->set_linears++; }
        }
    if (rc) nd_recipe_free(rc);
    if (c) nd_ckpt_close(c);
    return mods;
}

int nd_sens_write_recipes(const char *dir, nd_sens_report *r, nd_err *e) {
    /* the three files are written into a staged folder renamed into place at the end: a failed
     * run (full disk, signal) leaves --recipe-out as it was (util/outfile.h) */
    char stage[PATH_MAX];
    int slot;
    ND_TRY(nd_outdir_begin(dir, "recipes", stage, sizeof stage, &slot, e));
    json_t *mods = nd_sens_set_modules(r), *ignore = config_ignore(r->ckpt), *cfg = json_array(), *cfg_dict = json_object();
    size_t q;
    json_t *v;
    json_array_foreach(mods, q, v) {
        const char *name = json_string_value(v);
        char pat[620];
        json_array_append(ignore, v);
        /* ModelOpt's patterns match quantizer names: <module>.weight_quantizer, .input_quantizer;
         * entries appended to quant_cfg (a list since ModelOpt 0.4x; later entries win), or the
         * older dict form */
        snprintf(pat, sizeof pat, "*%s.*", name);
        json_array_append_new(cfg, json_pack("{s:s, s:b}", "quantizer_name", pat, "enable", 0));
        json_object_set_new(cfg_dict, pat, json_pack("{s:b}", "enable", 0));
    }
    nd_membuf m = {0};
    int rc = recipe_yaml(ignore, &m, e);
    if (!rc) rc = write_file(stage, ND_SENS_RECIPE_FILES[0], m.p, m.n, e);
    free(m.p);
    json_t *mo = json_pack("{s:o, s:o, s:s}", "quant_cfg", cfg, "quant_cfg_dict", cfg_dict, "note",
                           "append quant_cfg's entries to the quant_cfg list of the config you quantize with (a copy of "
                           "mtq.NVFP4_DEFAULT_CFG; ModelOpt before the list form: update its dict with quant_cfg_dict)");
    /* what the set was chosen for, read back by --verify */
    const nd_sens_set *st = r->set;
    json_t *rec = json_pack("{s:o, s:o, s:o}", "budget_kl", st && isfinite(st->budget) ? json_real(st->budget) : json_null(),
                            "predicted_kl", st && isfinite(st->predicted) ? json_real(st->predicted) : json_null(),
                            "measured_kl", st && isfinite(st->kl) ? json_real(st->kl) : json_null());
    json_t *ct = json_pack("{s:{s:O}, s:O, s:o}", "quantization_config", "ignore", ignore, "modules_kept_in_high_precision", mods,
                           "nvfp4dbg", rec);
    char *s1 = json_dumps(mo, JSON_INDENT(2) | JSON_PRESERVE_ORDER), *s2 = json_dumps(ct, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (!rc && s1) rc = write_file(stage, ND_SENS_RECIPE_FILES[1], s1, strlen(s1), e);
    if (!rc && s2) rc = write_file(stage, ND_SENS_RECIPE_FILES[2], s2, strlen(s2), e);
    if (!rc && (!s1 || !s2)) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    free(s1);
    free(s2);
    json_decref(mo);
    json_decref(ct);
    json_decref(mods);
    json_decref(ignore);
    if (rc) { nd_err_swap(e, stage, dir); nd_outdir_abort(stage, slot); }
    else rc = nd_outdir_commit(stage, slot, dir, e);
    return rc;
}

static json_t *num(double v) { return isfinite(v) ? json_real(v) : json_null(); }

void nd_sens_print_json(const nd_sens_report *r, const char *recipe_out) {
    json_t *root = json_object(), *units = json_array();
    json_object_set_new(root, "checkpoint", json_string(r->ckpt));
    json_object_set_new(root, "granularity", json_string(r->granularity));
    json_object_set_new(root, "quantized_linears", json_integer(r->ckpt_linears ? r->ckpt_linears : r->n_linears));
    json_object_set_new(root, "linears_run", json_integer(r->n_linears));
    json_object_set_new(root, "all_nvfp4", json_pack("{s:o, s:o}", "kl", num(r->kl_all), "top1", num(r->top1_all)));
    for (int k = 0; k < r->nu; k++) {
        const nd_sens_unit *u = &r->units[k];
        json_t *st = json_array();
        for (int j = 0; j < u->n; j++) json_array_append_new(st, json_string(u->stages[j]));
        json_array_append_new(units, json_pack("{s:i, s:s, s:o, s:b, s:o, s:o, s:o, s:o, s:o, s:o}", "rank", k + 1, "unit", u->key, "stages", st,
                                               "screened_out", u->screened_out, "own_error_energy", num(u->proxy),
                                               "kl_kept", num(u->kl_ref), "top1_kept", num(u->top1_ref), "gain",
                                               num(r->kl_all - u->kl_ref), "kl_alone_nvfp4", num(u->kl_alone), "top1_alone_nvfp4",
                                               num(u->top1_alone)));
    }
    json_object_set_new(root, "units", units);
    if (r->set) {
        json_t *keep = json_array();
        for (int k = 0; k < r->set->n; k++) json_array_append_new(keep, json_string(r->units[k].key));
        json_object_set_new(root, "set", json_pack("{s:o, s:i, s:o, s:o, s:o, s:o, s:b}", "units", keep, "linears", r->set_linears, "kl", num(r->set->kl), "top1",
                                                   num(r->set->top1), "predicted_kl", num(r->set->predicted), "budget_kl",
                                                   num(r->set->budget), "budget_met", isnan(r->set->budget) || r->set->kl <= r->set->budget));
        if (recipe_out && r->set->n) json_object_set_new(root, "recipe_out", json_string(recipe_out));
    }
    json_object_set_new(root, "screen", r->screen ? json_integer(r->screen) : json_null());
    json_object_set_new(root, "runs", json_integer(r->traces));
    json_object_set_new(root, "elapsed_s", json_real(r->elapsed_s));
    json_object_set_new(root, "max_rss_mb", json_real(r->max_rss_mb));
    char *s = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    if (s) { puts(s); free(s); }
    json_decref(root);
}

static void pct(char *b, size_t n, double v) {
    if (isfinite(v)) snprintf(b, n, "%.1f%%", 100 * v);
    else snprintf(b, n, "-");
}

void nd_sens_print_text(const nd_sens_report *r, const char *recipe_out) {
    char safe[2048], t0[16], t1[16], t2[16];
    int w = 4;
    for (int k = 0; k < r->nu; k++) {
        const int l = (int)strlen(r->units[k].key);
        if (l > w) w = l;
    }
    if (w > 60) w = 60;
    pct(t0, sizeof t0, r->top1_all);
    printf("nvfp4dbg sensitivity: %s  granularity %s  %d units of %d quantized linears", nd_term_safe(r->ckpt, safe, sizeof safe),
           r->granularity, r->nu, r->ckpt_linears ? r->ckpt_linears : r->n_linears);
    /* experts the prompt did not route to are in their units (and the recipes) but ran in no run */
    if (r->ckpt_linears > r->n_linears) printf(" (%d run by these tokens)", r->n_linears);
    printf("\n");
    printf("every linear NVFP4: final logits KL %.5g nats, top-1 agreement %s\n\n", r->kl_all, t0);
    printf("%-4s  %-*s  %7s  %-23s  %-20s\n", "rank", w, "unit", "linears", "kept in BF16: KL  top-1", "alone NVFP4: KL  top-1");
    for (int k = 0; k < r->nu; k++) {
        const nd_sens_unit *u = &r->units[k];
        pct(t1, sizeof t1, u->top1_ref);
        pct(t2, sizeof t2, u->top1_alone);
        if (u->screened_out)
            printf("%-4d  %-*s  %7d  screened out (own error energy %.3g)\n", k + 1, w, nd_term_safe(u->key, safe, sizeof safe), u->n,
                   u->proxy);
        else
            printf("%-4d  %-*s  %7d  %-10.4g %6s (%+.2g)  %-10.4g %6s\n", k + 1, w, nd_term_safe(u->key, safe, sizeof safe), u->n,
                   u->kl_ref, t1, u->kl_ref - r->kl_all, u->kl_alone, t2);
    }
    if (r->set) {
        const nd_sens_set *s = r->set;
        int lin = 0;
        for (int k = 0; k < s->n; k++) lin += r->units[k].n;
        /* the checkpoint's count (experts these tokens did not route to included) when it was taken */
        const int all = r->ckpt_linears ? r->ckpt_linears : r->n_linears;
        if (r->ckpt_linears) lin = r->set_linears;
        printf("\n");
        if (s->n == 0) {
            printf("budget KL %.5g: met with every linear NVFP4 (KL %.5g); nothing to keep in high precision\n", s->budget, r->kl_all);
        } else {
            pct(t1, sizeof t1, s->top1);
            printf("kept in high precision (%d of %d units, %d of the checkpoint's %d quantized linears):", s->n, r->nu, lin, all);
            for (int k = 0; k < s->n; k++) printf("%s %s", k ? "," : "", nd_term_safe(r->units[k].key, safe, sizeof safe));
            printf("\n  measured together: final logits KL %.5g nats, top-1 %s (predicted from the single runs: KL %.5g)", s->kl, t1,
                   s->predicted);
            if (!isnan(s->budget)) printf("; budget %.5g %s", s->budget, s->kl <= s->budget ? "met" : "NOT met even with every unit kept");
            printf("\n");
            if (recipe_out)
                printf("  written: %s/llmcompressor-recipe.yaml, %s/modelopt-quant-cfg.json, %s/compressed-tensors-ignore.json\n",
                       nd_term_safe(recipe_out, safe, sizeof safe), safe, safe);
        }
    }
    if (r->screen)
        printf("--screen %d: exact runs for the %d units of largest own NVFP4 error, the other %d ranked by it alone\n", r->screen,
               r->screen, r->nu - r->screen);
    printf("%d runs in %.1f s, peak memory %.0f MB\n", r->traces, r->elapsed_s, r->max_rss_mb);
}
