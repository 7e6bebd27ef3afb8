/* trace_stacks.c — `trace --stacks all|A,B`: which serving stacks would serve this checkpoint
 * correctly. Each stack profile (recipes/stack-*.yaml) replays the model in isolated mode; its
 * first divergence is diagnosed by repair as in a normal trace. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace_stacks.h"
#include "diagnose/diagnose.h"
#include "pipeline/stack.h"

/* The profile names: every recipes/stack-NAME.yaml (nd_stack_names), or the comma-separated list given. */
static int stack_names(const char *spec, char (*out)[64], int cap, int *n, nd_err *e) {
    *n = 0;
    if (!strcmp(spec, "all")) return nd_stack_names(out, cap, n, e);
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", spec);
    for (char *t = strtok(buf, ","); t && *n < cap; t = strtok(NULL, ",")) snprintf(out[(*n)++], 64, "%s", t);
    return 0;
}

int nd_trace_stacks_check(const char *spec, nd_err *e) {
    char names[32][64];
    int n;
    ND_TRY(stack_names(spec, names, 32, &n, e));
    if (n == 0) return nd_fail(e, ND_EXIT_BADINPUT, "--stacks '%s': names no stack (give all, or stack names separated by commas)", spec);
    for (int i = 0; i < n; i++) {
        nd_stack s;
        if (nd_stack_load(names[i], &s, e)) return nd_wrap(e, "--stacks");
    }
    return 0;
}

int nd_trace_stack_sweep(const nd_trace_opts *base, const char *spec, int json, json_t **out, nd_err *e) {
    char names[32][64];
    int n;
    ND_TRY(stack_names(spec, names, 32, &n, e));
    json_t *list = json ? json_array() : NULL;
    if (!json) printf("\nstacks (each replays the model in isolated mode; the first divergence diagnosed by repair):\n"
                      "  %-24s %-7s %-44s %s\n", "stack", "serves", "first divergence", "cause");
    for (int i = 0; i < n; i++) {
        nd_trace_opts o = *base;
        o.stack = names[i];
        o.modes = ND_MODES_ISOLATED;
        o.out_path = NULL;
        o.defer_finish = 0;
        o.progress = 0;
        o.dump_tensors = 0;
        nd_trace_result res;
        nd_diagnosis *d = NULL;
        int nd = 0;
        int rc = nd_pipeline_trace(&o, &res, e);
        if (!rc) rc = nd_diagnose_run(&o, &res, 0, &d, &nd, e);
        if (rc) {
            nd_trace_result_free(&res);
            free(d);
            if (list) json_decref(list);
            return nd_wrap(e, "--stacks: stack %s", names[i]);
        }
        int ok = !strcmp(res.summary.status, "ok");
        /* a behaviour of the profile the recipe does not model: neither yes nor no */
        const int unmodelled = res.unmodelled[0] != 0;
        if (json) {
            json_t *s = json_object();
            json_object_set_new(s, "stack", json_string(names[i]));
            json_object_set_new(s, "serves", unmodelled ? json_null() : json_boolean(ok));
            if (unmodelled) json_object_set_new(s, "not_modelled", json_string(res.unmodelled));
            json_object_set_new(s, "first_divergence", json_string(res.summary.first_divergence));
            json_object_set_new(s, "cause", json_string(res.summary.cause));
            json_object_set_new(s, "evidence", json_string(res.summary.evidence));
            json_array_append_new(list, s);
        } else {
            if (unmodelled) printf("  %-24s %-7s %-44s %s\n", names[i], "n/a", "-", "gate_up_order w31: not modelled by this recipe");
            else printf("  %-24s %-7s %-44s %s\n", names[i], ok ? "yes" : "no", ok ? "-" : res.summary.first_divergence,
                        ok ? "" : res.summary.cause);
        }
        nd_trace_result_free(&res);
        free(d);
    }
    if (json) *out = list;
    return 0;
}
