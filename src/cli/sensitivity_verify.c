/* sensitivity_verify.c — `nvfp4dbg sensitivity CKPT --verify DIR|FILE` (issue 35 item 2): the set a
 * --recipe-out wrote (compressed-tensors-ignore.json: modules_kept_in_high_precision and, as
 * written, the predicted and measured KL and the budget), run once more on this checkpoint with
 * those modules on the reference path (dequantized: nothing is re-quantized), against every linear
 * NVFP4. Exit 0 when the budget the file records is met (or none is recorded), 1 when it is not. */
#include "sensitivity_out.h"
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "cli.h"
#include "pipeline/pipeline.h"
#include "recipe/recipe.h"
#include "ckpt/ckpt.h"
#include "util/infile.h"
#include "util/json_load.h"
#include "util/term.h"

static double num_or_nan(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* the final logits' KL and top-1 of a chained run with `off` on the reference path */
static int head_kl(nd_trace_opts *o, const char *const *off, int n_off, double *kl, double *top1, nd_err *e) {
    o->ref_only = off;
    o->n_ref_only = n_off;
    o->modes = ND_MODES_CHAINED;
    nd_trace_result res;
    ND_TRY(nd_pipeline_trace(o, &res, e));
    *kl = INFINITY;
    *top1 = NAN;
    for (int64_t i = 0; i < res.nrows; i++)
        if (!strcmp(res.rows[i].mode, "chained") && isfinite(res.rows[i].kl_div)) { *kl = res.rows[i].kl_div; *top1 = res.rows[i].top1_agree; }
    /* every module kept is a stage the run made a row of: one that ran nowhere (a name the recipe
     * does not read so) would be kept by nothing, and the verdict would be about another set */
    int rc = 0;
    for (int k = 0; k < n_off && !rc; k++) {
        int ran = 0;
        for (int64_t i = 0; i < res.nrows && !ran; i++) {
            const nd_row *w = &res.rows[i];
            const size_t l = strlen(w->name);
            /* an expert no token was routed to has no row of its own: its experts stage ran */
            ran = !strcmp(w->name, off[k]) ||
                  ((!strcmp(w->op, "moe_experts") || !strcmp(w->op, "mlp")) && !strncmp(off[k], w->name, l) && off[k][l] == '.');
        }
        if (!ran)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "--verify: module of stage %s: no stage of the run is it, so keeping it in high "
                         "precision would keep nothing (another recipe or naming than the run's?)", off[k]);
    }
    nd_trace_result_free(&res);
    return rc;
}

static int quantized_linear(const nd_ckpt *ck, const char *path) {
    nd_module m;
    nd_err e2 = {0};
    return nd_ckpt_module(ck, path, &m, &e2) == 0 && m.wfmt != ND_WF_DENSE;
}

int nd_sens_verify(nd_trace_opts *o, const char *arg, int json, nd_err *e) {
    char path[4096];
    struct stat st;
    if (stat(arg, &st) == 0 && S_ISDIR(st.st_mode)) snprintf(path, sizeof path, "%s/%s", arg, ND_SENS_RECIPE_FILES[2]);
    else snprintf(path, sizeof path, "%s", arg);
    ND_TRY(nd_input_regular(path, e));
    if (stat(path, &st) != 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot read: %s", path, strerror(errno));
    json_error_t je;
    json_t *doc = nd_json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!doc) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not valid JSON (line %d: %s)", path, je.line, je.text);
    json_t *mods = json_object_get(doc, "modules_kept_in_high_precision"), *rec = json_object_get(doc, "nvfp4dbg");
    int rc = 0;
    const size_t n = json_is_array(mods) ? json_array_size(mods) : 0;
    const char **off = calloc(n + 1, sizeof *off);
    char (*names)[ND_NAME_LEN] = calloc(n + 1, sizeof *names);
    nd_ckpt *ck = NULL;
    /* what the file records is checked as the command line checks it: a budget is a number, 0 or more */
    json_t *bud = rec ? json_object_get(rec, "budget_kl") : NULL;
    if (!json_is_array(mods))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: no list 'modules_kept_in_high_precision' (a --recipe-out folder's %s)", path,
                     ND_SENS_RECIPE_FILES[2]);
    else if (rec && !json_is_object(rec)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: 'nvfp4dbg' must be an object", path);
    else if (bud && !json_is_null(bud) && (!json_is_number(bud) || !(json_number_value(bud) >= 0)))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: 'nvfp4dbg.budget_kl' must be a KL in nats, 0 or more (a number), or null", path);
    else if (!off || !names) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else rc = nd_ckpt_open(o->ckpt_dir, &ck, e);
    nd_recipe *rcp = NULL;
    const struct nd_naming *nm = NULL;
    if (!rc) rc = nd_naming_for(o->recipe, ck, &rcp, &nm, e);
    /* each entry a module of this checkpoint: a name that matches nothing would verify nothing */
    for (size_t i = 0; !rc && i < n; i++) {
        const char *m = json_string_value(json_array_get(mods, i));
        char safe[400];
        if (!m) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: modules_kept_in_high_precision[%zu] is not a string", path, i);
        else if (!nd_ckpt_has_module(ck, m))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: module '%s' is not a module of %s: the set was chosen for another checkpoint", path,
                         nd_term_safe(m, safe, sizeof safe), o->ckpt_dir);
        else if (!quantized_linear(ck, m))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: module '%s' is not a quantized linear of %s: keeping it in high precision keeps "
                         "nothing", path, nd_term_safe(m, safe, sizeof safe), o->ckpt_dir);
        else if (strlen(m) >= ND_NAME_LEN + 6) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: module name '%.60s...' too long", path, m);
        else {
            /* its stage: the canonical name (the recipe's naming read backwards) without model. */
            char canon[600];
            nd_naming_map(nm, m, 0, canon, sizeof canon);
            snprintf(names[i], sizeof names[i], "%s", strncmp(canon, "model.", 6) ? canon : canon + 6);
            off[i] = names[i];
            for (size_t j = 0; j < i && !rc; j++)
                if (!strcmp(names[j], names[i]))
                    rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: module '%s' is listed twice", path, nd_term_safe(m, safe, sizeof safe));
        }
    }
    /* quantization_config.ignore is what a user pastes into the quantizer's config: it must hold
     * the same quantized modules as the list verified (the config's own ignores, such as lm_head
     * or re: patterns, aside), or the verdict would be about another set */
    json_t *qc = json_object_get(doc, "quantization_config"), *ig = json_is_object(qc) ? json_object_get(qc, "ignore") : NULL;
    if (!rc && qc && !json_is_object(qc)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config' must be an object", path);
    if (!rc && ig && !json_is_array(ig)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: 'quantization_config.ignore' must be a list", path);
    for (size_t i = 0; !rc && ig && i < json_array_size(ig); i++) {
        const char *m = json_string_value(json_array_get(ig, i));
        char safe[400];
        if (!m) { rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: quantization_config.ignore[%zu] is not a string", path, i); break; }
        if (!strncmp(m, "re:", 3) || !nd_ckpt_has_module(ck, m) || !quantized_linear(ck, m)) continue;
        int listed = 0;
        for (size_t j = 0; j < n && !listed; j++) listed = !strcmp(json_string_value(json_array_get(mods, j)), m);
        if (!listed)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: quantization_config.ignore keeps '%s', which modules_kept_in_high_precision does not "
                         "list: the two lists must name the same modules (the one verified is modules_kept_in_high_precision)", path,
                         nd_term_safe(m, safe, sizeof safe));
    }
    for (size_t j = 0; !rc && ig && j < n; j++) {
        const char *m = json_string_value(json_array_get(mods, j));
        int listed = 0;
        for (size_t i = 0; i < json_array_size(ig) && !listed; i++) {
            const char *x = json_string_value(json_array_get(ig, i));
            listed = x && !strcmp(x, m);
        }
        char safe[400];
        if (!listed)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: modules_kept_in_high_precision lists '%s', which quantization_config.ignore does "
                         "not keep: a quantizer given that config quantizes it", path, nd_term_safe(m, safe, sizeof safe));
    }
    if (rcp) nd_recipe_free(rcp);
    if (ck) nd_ckpt_close(ck);
    double kl_all = NAN, top1_all = NAN, kl = NAN, top1 = NAN;
    if (!rc) rc = head_kl(o, NULL, 0, &kl_all, &top1_all, e);
    if (!rc) rc = head_kl(o, off, (int)n, &kl, &top1, e);
    const double budget = rec ? num_or_nan(rec, "budget_kl") : NAN, predicted = rec ? num_or_nan(rec, "predicted_kl") : NAN,
                 measured = rec ? num_or_nan(rec, "measured_kl") : NAN;
    if (!rc) {
        char ps[8192];
        nd_term_safe(path, ps, sizeof ps);
        if (json) {
            json_t *out = json_pack("{s:s, s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "verify", path, "modules", (json_int_t)n,
                                    "kl", isfinite(kl) ? json_real(kl) : json_null(), "top1", isfinite(top1) ? json_real(top1) : json_null(),
                                    "kl_all_nvfp4", isfinite(kl_all) ? json_real(kl_all) : json_null(),
                                    "predicted_kl", isfinite(predicted) ? json_real(predicted) : json_null(),
                                    "measured_kl_when_written", isfinite(measured) ? json_real(measured) : json_null(),
                                    "budget_kl", isfinite(budget) ? json_real(budget) : json_null(),
                                    "budget_met", isfinite(budget) ? json_boolean(kl <= budget) : json_null());
            char *s = json_dumps(out, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
            if (s) puts(s);
            free(s);
            json_decref(out);
        } else {
            printf("nvfp4dbg sensitivity --verify: %s  checkpoint %s\n", ps, o->ckpt_dir);
            printf("%zu modules on the reference path (dequantized, nothing re-quantized): final logits KL %.6g nats, top-1 %.1f%%\n", n, kl,
                   100.0 * top1);
            printf("every linear NVFP4: KL %.6g nats, top-1 %.1f%%\n", kl_all, 100.0 * top1_all);
            if (isfinite(predicted) || isfinite(measured))
                printf("as written: predicted KL %.6g, measured %.6g%s\n", predicted, measured,
                       isfinite(measured) && isfinite(kl) && fabs(kl - measured) > 1e-6 * fmax(1.0, measured) ?
                       " (this run differs: other tokens, stack or checkpoint)" : "");
            if (isfinite(budget)) printf("budget KL %.6g: %s\n", budget, kl <= budget ? "met" : "NOT met");
        }
        if (isfinite(budget) && !(kl <= budget)) rc = 1;
    }
    free(off);
    free(names);
    json_decref(doc);
    return rc;
}
