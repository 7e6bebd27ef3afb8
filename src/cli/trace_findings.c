/* trace_findings.c — the static findings that matter for the stack a trace ran (issue 13): the
 * checkpoint's findings (src/ckpt/findings.c) that this stack profile is broken by. The others are
 * harmless under it and are left to `inspect`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace_findings.h"
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"
#include "pipeline/stack.h"
#include "util/term.h"
#include "util/shquote.h"

/* an --override NAME=VALUE whose NAME is "<module>.<knob>" replaces a value of that module */
static int overridden(const char *module, const char *const *ovr, int n_ovr) {
    if (!strncmp(module, "model.", 6)) module += 6; /* either may be named without the prefix */
    const size_t ml = strlen(module);
    for (int i = 0; i < n_ovr; i++) {
        const char *o = ovr[i], *eq = strchr(o, '=');
        if (!strncmp(o, "model.", 6)) o += 6;
        if (eq && !strncmp(o, module, ml) && o[ml] == '.' && !memchr(o + ml + 1, '.', (size_t)(eq - (o + ml + 1)))) return 1;
    }
    return 0;
}

/* the layer index of "...layers.N..." in a module name, or -1 (embeddings, head) */
static int module_layer(const char *module) {
    for (const char *p = strstr(module, "layers."); p; p = strstr(p + 1, "layers.")) {
        if ((p == module || p[-1] == '.') && p[7] >= '0' && p[7] <= '9') {
            char *end;
            const long v = strtol(p + 7, &end, 10);
            if ((*end == '.' || !*end) && v < 1 << 20) return (int)v;
        }
    }
    return -1;
}

/* 1 when a row of the run is the module's stage (its name without the checkpoint's "model." prefix) */
static int exercised(const char *module, const nd_row *rows, int64_t nrows) {
    const char *stage = !strncmp(module, "model.", 6) ? module + 6 : module;
    for (int64_t i = 0; i < nrows; i++)
        if (!strcmp(rows[i].name, stage) || !strcmp(rows[i].name, module)) return 1;
    return 0;
}

/* 1 when the replay can judge the finding: it changes what the production path computes and not the
 * reference path (an input scale, the fused rules of a stack, the KV cache), so a module the replay
 * ran and found healthy clears it. A finding about what the weights or the config mean (an inverted
 * weight global, a config that contradicts the tensors) moves both paths alike, or not at all since
 * the replay reads the tensors: no clean replay clears it. */
static int replay_judges(const nd_finding *x) {
    if (x->kind != ND_BREAKS_ALL) return 1;
    /* what a loader does with the file (the config against the tensors, a role it builds without a
     * quantization method, a scale dtype a kernel reads as float32) or a value that breaks both
     * paths alike (a NaN, Inf or zero scale): the replay cannot show them. A value that only looks
     * wrong (a weight global whose convention cannot be told from a large weight without the
     * original) stays the replay's to judge: it is listed, and a clean replay clears it */
    static const char *const blind[] = {"quant_config_mismatch", "precision_policy_violation", "scale_dtype", "nonfinite_scale"};
    for (size_t i = 0; i < sizeof blind / sizeof blind[0]; i++)
        if (!strcmp(x->code, blind[i])) return 0;
    return 1;
}

int nd_trace_stack_findings(const char *ckpt_dir, const char *stack_name, const char *const *ovr, int n_ovr, int json,
                            int layer_lo, int layer_hi, const nd_row *rows, int64_t nrows, int *n_err, int *n_blind,
                            json_t **out, nd_err *e) {
    nd_ckpt *ck = NULL;
    nd_stack st;
    nd_findings f;
    nd_findings_init(&f);
    int rc = nd_stack_load(stack_name ? stack_name : "exact", &st, e);
    if (!rc) rc = nd_ckpt_open(ckpt_dir, &ck, e);
    if (!rc) rc = nd_ckpt_check(ck, &f, NULL, e);
    json_t *list = json == 1 ? json_array() : NULL;
    if (n_err) *n_err = 0;
    if (n_blind) *n_blind = 0;
    int shown = 0, n_over = 0;
    for (size_t i = 0; !rc && i < f.n; i++) {
        const nd_finding *x = &f.v[i];
        if (!nd_stack_breaks(&st, x->kind)) continue;
        /* the run replaced a value of that module: the finding is about the file, not this run */
        const int over = overridden(x->module, ovr, n_ovr);
        const int layer = module_layer(x->module);
        const int in_run = layer < 0 || layer_hi < 0 || (layer >= layer_lo && layer <= layer_hi);
        n_over += over;
        const int ran = exercised(x->module, rows, nrows), judged = ran && replay_judges(x);
        if (n_err && !over && in_run && !judged) ++*n_err;
        if (n_blind && !over && in_run && ran && !judged) ++*n_blind;
        if (json == 1) {
            json_t *o = json_object();
            json_object_set_new(o, "overridden", json_boolean(over));
            json_object_set_new(o, "in_replayed_layers", json_boolean(in_run));
            json_object_set_new(o, "exercised", json_boolean(ran));
            json_object_set_new(o, "judged_by_replay", json_boolean(judged));
            json_object_set_new(o, "code", json_string(x->code));
            json_object_set_new(o, "module", json_string(x->module));
            json_object_set_new(o, "message", json_string(x->msg));
            json_array_append_new(list, o);
        } else if (over) {
            continue;
        } else if (shown < 8) {
            char m[1024], mod[1024];
            char line[2600];
            const int width = nd_term_width(1);
            if (!shown) {
                /* the hint's folder shell-quoted (pasted as a name) and safe for the terminal */
                char q[1100] = "", qs[2200];
                nd_shquote_cat(q, sizeof q, ckpt_dir);
                nd_term_safe(q, qs, sizeof qs);
                if (json == 2) snprintf(line, sizeof line, "static findings that break stack %s (nvfp4dbg inspect %s --stack %s):", st.name, qs, st.name);
                else snprintf(line, sizeof line, "static findings that break stack %s (nvfp4dbg inspect %s --stack %s lists them all):", st.name, qs, st.name);
                if (json != 2) printf("\n");
                nd_term_wrap(stdout, line, 2, 0, width);
            }
            const char *outside = in_run ? "" : " (outside this run's --layers)";
            if (json == 2) snprintf(line, sizeof line, "%-22s %s%s", x->code, nd_term_safe(x->module, mod, sizeof mod), outside);
            else snprintf(line, sizeof line, "%-22s %s%s: %s", x->code, nd_term_safe(x->module, mod, sizeof mod), outside,
                          nd_term_safe(x->msg, m, sizeof m));
            printf("  ");
            nd_term_wrap(stdout, line, 4, 2, width);
        }
        shown++;
    }
    if (!rc && json != 1 && shown > 8) printf("  ... and %d more\n", shown - 8);
    if (!rc && json != 1 && n_over)
        printf("%s%d static finding%s on modules this run's --override replaces (not judged here: %s)\n", json == 2 ? "" : "\n",
               n_over, n_over == 1 ? "" : "s", "nvfp4dbg inspect lists them");
    if (!rc && json == 1) *out = list;
    else if (list) json_decref(list);
    nd_findings_free(&f);
    if (ck) nd_ckpt_close(ck);
    return rc;
}
