/* replay.c — `nvfp4dbg replay BUNDLE.h5`: rerun a bundled stage without the checkpoint and print
 * its row beside the row of the original trace (docs/repro.md). */
#include <jansson.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "util/term.h"
#include "bundle/bundle.h"
#include "pipeline/pipeline.h"

static const char *usage_text =
    "usage: nvfp4dbg replay BUNDLE.h5 [options]\n"
    "\n"
    "Reruns the stage of a bundle written by `nvfp4dbg repro` (its reference inputs, its\n"
    "checkpoint tensors, the stack profile and overrides of the original run) and prints the\n"
    "replayed row and the original rows. The original checkpoint is not needed.\n"
    "Exit 0: the replayed stage is ok, 1: it diverges, 2: bad input, 3: internal or device failure.\n"
    "\n"
    "  --backend auto|cpu|cuda   compute backend (default auto: CUDA when a GPU is present)\n"
    "  --device N                CUDA device\n"
    "  --override NAME=VALUE     test a hypothesis (repeatable; replaces a bundled override of the\n"
    "                            same name): model.<module>.input_global_scale=..., <stage>.quant_mult=...\n"
    "  --json                    one JSON document on stdout\n"
    "\n"
    "example: nvfp4dbg replay q_a.h5 --override layers.0.self_attn.q_a_proj.quant_mult=958.4\n"
    "         (q_a.h5 from: nvfp4dbg trace golden/seed-bug-v4 -o t.h5; nvfp4dbg repro t.h5 -o q_a.h5)\n";

/* a bundle is a file from elsewhere: its row strings are escaped before they reach the terminal */
static void print_row(const char *what, const nd_row *r) {
    char name[4 * sizeof r->name], mode[4 * sizeof r->mode], verdict[4 * sizeof r->verdict];
    printf("%-9s %-40.40s %-9.9s %10.4g %10.4g %6lld %9.5f %7.1f %10.4g  %s\n", what, nd_term_safe(r->name, name, sizeof name),
           nd_term_safe(r->mode, mode, sizeof mode), r->ref_amax, r->prod_amax, (long long)(r->prod_nan + r->prod_inf), r->cosine,
           r->sqnr_db, r->scale_mult, nd_term_safe(r->verdict, verdict, sizeof verdict));
}

static json_t *row_json(const nd_row *r) {
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(r->name));
    json_object_set_new(o, "op", json_string(r->op));
    json_object_set_new(o, "mode", json_string(r->mode));
    const struct { const char *k; double v; } f[] = {{"ref_amax", r->ref_amax}, {"prod_amax", r->prod_amax},
        {"cosine", r->cosine}, {"sqnr_db", r->sqnr_db}, {"floor_sqnr_db", r->floor_sqnr_db}, {"scale_mult", r->scale_mult},
        {"alpha", r->alpha}, {"scale_ratio", r->scale_ratio}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        json_object_set_new(o, f[i].k, isfinite(f[i].v) ? json_real(f[i].v) : json_null());
    json_object_set_new(o, "prod_nan", json_integer(r->prod_nan + r->prod_inf));
    json_object_set_new(o, "verdict", json_string(r->verdict));
    return o;
}

/* NAME of "NAME=VALUE" equals the name of `other`'s assignment. */
static int same_name(const char *a, const char *b) {
    const char *ea = strrchr(a, '='), *eb = strrchr(b, '=');
    size_t na = ea ? (size_t)(ea - a) : strlen(a), nb = eb ? (size_t)(eb - b) : strlen(b);
    return na == nb && !strncmp(a, b, na);
}

/* An error about the files replay unpacked into its temporary folder names the bundle and the part
 * of it they came from instead (that folder is gone when the message is read). */
static void bundle_names(nd_err *e, const char *dir, const char *bundle) {
    static const struct { const char *file, *part; } parts[] = {
        {"/model.safetensors", " (its /tensors)"}, {"/recipe.yaml", " (its /text/stage_yaml)"},
        {"/stack.yaml", " (its stack profile)"}, {"/config.json", " (its config)"}, {"", ""}};
    const size_t dl = strlen(dir);
    if (!dl) return;
    char out[sizeof e->msg];
    size_t n = 0;
    for (const char *p = e->msg; *p && n + 1 < sizeof out;) {
        if (strncmp(p, dir, dl)) { out[n++] = *p++; continue; }
        p += dl;
        size_t k = 0;
        while (parts[k].file[0] && strncmp(p, parts[k].file, strlen(parts[k].file))) k++;
        p += strlen(parts[k].file);
        n += (size_t)snprintf(out + n, sizeof out - n, "%s%s", bundle, parts[k].part);
        if (n >= sizeof out) n = sizeof out - 1;
    }
    out[n] = 0;
    snprintf(e->msg, sizeof e->msg, "%s", out);
}

int nd_cmd_replay(int argc, char **argv) {
    const char *path = NULL, *backend = "auto";
    int device = 0, json = 0, rc = 0, n_user = 0;
    const char **user = calloc((size_t)argc + 1, sizeof *user);
    nd_err e = {0};
    nd_bundle *b = NULL;
    char dir[PATH_MAX] = "";
    if (!user) return ND_EXIT_INTERNAL;
    const char *device_s = "0";
    const nd_cli_opt opts[] = {{"--backend", &backend, NULL, NULL, NULL}, {"--device", &device_s, NULL, NULL, NULL},
                               {"--override", NULL, NULL, user, &n_user}, {"--json", NULL, &json, NULL, NULL}, {0}};
    if ((rc = nd_cli_parse("replay", usage_text, argc, argv, opts, &path, 1))) {
        if (rc < 0) rc = 0;
        goto out;
    }
    device = atoi(device_s);
    if (!path) { fputs(usage_text, stderr); rc = nd_cli_usage_error("replay", "no bundle given"); goto out; }
    if ((rc = nd_bundle_read(path, &b, &e))) { nd_cli_error(&e); goto out; }

    /* overrides: the bundle's, less those the user replaces, then the user's */
    char ovbuf[2048];
    snprintf(ovbuf, sizeof ovbuf, "%s", b->overrides);
    const char *ovr[96];
    int n_ovr = 0;
    for (char *tok = strtok(ovbuf, ";"); tok && n_ovr < 64; tok = strtok(NULL, ";")) {
        int replaced = 0;
        for (int i = 0; i < n_user; i++) replaced |= same_name(tok, user[i]);
        if (*tok && !replaced) ovr[n_ovr++] = tok;
    }
    for (int i = 0; i < n_user && n_ovr < 96; i++) ovr[n_ovr++] = user[i];

    if ((rc = nd_bundle_materialise(b, dir, sizeof dir, &e))) {
        dir[0] = 0;
        /* "bundle: ..." from the unpacking names the bundle given */
        if (!strncmp(e.msg, "bundle: ", 8)) {
            char m[sizeof e.msg];
            snprintf(m, sizeof m, "%s: %s", path, e.msg + 8);
            snprintf(e.msg, sizeof e.msg, "%s", m);
        }
        nd_cli_error(&e);
        goto out;
    }
    char recipe[1100], stack[1100];
    snprintf(recipe, sizeof recipe, "%s/recipe.yaml", dir);
    snprintf(stack, sizeof stack, "%s/stack.yaml", dir);
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.ckpt_dir = dir;
    /* the bundle holds one stage's tensors: a norm's or a BF16 head's hold nothing quantized */
    o.allow_unquantized = 1;
    o.recipe = recipe;
    o.stack = stack;
    o.backend = backend;
    o.device = device;
    o.tokens = b->tokens;
    o.ntok = b->ntok;
    o.overrides = ovr;
    o.n_overrides = n_ovr;
    /* the one single-stage replay (pipeline.h nd_stage_replay), from the bundle's recorded inputs
     * and the routing decisions they carry: the stage alone, no stage before it runs */
    nd_stage_rec *rec = NULL;
    nd_row replayed;
    nd_stage_info info;
    if (!(rc = nd_bundle_stage_rec(b, &rec, &e))) rc = nd_stage_replay(&o, b->stage, NULL, 0, &rec, &replayed, &info, &e);
    if (!rc && !nd_stage_rec_fast(rec))
        rc = nd_fail(&e, ND_EXIT_INTERNAL, "%s: stage %s was not replayed from the bundle's inputs", path, b->stage);
    nd_stage_rec_free(rec);
    /* an override that matched nothing tested nothing: exit 2, as in trace and repro */
    if (!rc && strstr(info.warning, "--override"))
        rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s: %s in the bundle's stage %s: the replay tests nothing", path, info.warning, b->stage);
    if (rc) { bundle_names(&e, dir, path); nd_cli_error(&e); goto out; }
    const nd_row *row = &replayed;
    nd_trace_result res; /* the run's identity (backend, stack) for the report */
    memset(&res, 0, sizeof res);
    snprintf(res.backend, sizeof res.backend, "%s", info.backend);
    snprintf(res.device, sizeof res.device, "%s", info.device);
    snprintf(res.stack, sizeof res.stack, "%s", info.stack);
    snprintf(res.warning, sizeof res.warning, "%s", info.warning);
    const nd_row *orig = NULL;
    for (int i = 0; i < b->n_rows; i++)
        if (!strcmp(b->rows[i].mode, "isolated")) orig = &b->rows[i];
    int same = orig && !strcmp(orig->verdict, row->verdict);
    if (json) {
        json_t *root = json_object(), *orr = json_array();
        json_object_set_new(root, "bundle", json_string(path));
        json_object_set_new(root, "stage", json_string(b->stage));
        json_object_set_new(root, "backend", json_string(res.backend));
        json_object_set_new(root, "stack", json_string(res.stack));
        json_object_set_new(root, "overrides", json_string(b->overrides));
        json_object_set_new(root, "replay", row_json(row));
        for (int i = 0; i < b->n_rows; i++) json_array_append_new(orr, row_json(&b->rows[i]));
        json_object_set_new(root, "original", orr);
        json_object_set_new(root, "same_verdict", json_boolean(same));
        char *s = json_dumps(root, JSON_INDENT(1));
        if (s) { puts(s); free(s); }
        json_decref(root);
    } else {
        char t1[16384], t2[4 * sizeof b->stage], t3[4 * sizeof b->op], t4[4 * sizeof res.stack];
        printf("nvfp4dbg replay: %s  stage %s (op %s)  stack %s  backend %s (%s)\n", nd_term_safe(path, t1, sizeof t1),
               nd_term_safe(b->stage, t2, sizeof t2), nd_term_safe(b->op, t3, sizeof t3), nd_term_safe(res.stack, t4, sizeof t4),
               res.backend, res.device);
        printf("%-9s %-40s %-9s %10s %10s %6s %9s %7s %10s  %s\n", "", "stage", "mode", "ref_amax", "prod_amax", "NaN", "cosine",
               "SQNR", "quant_mult", "verdict");
        print_row("replay", row);
        for (int i = 0; i < b->n_rows; i++) print_row("original", &b->rows[i]);
        if (orig) printf("\n%s\n", same ? "same verdict as the original trace" : "the verdict differs from the original trace");
        if (n_ovr) {
            printf("overrides:");
            for (int i = 0; i < n_ovr; i++) printf(" %s", ovr[i]);
            printf("\n");
        }
    }
    if (res.warning[0]) fprintf(stderr, "nvfp4dbg: warning: %s\n", res.warning);
    rc = nd_verdict_bad(row->verdict) ? ND_EXIT_FINDING : ND_EXIT_OK;
out:
    if (dir[0]) nd_bundle_cleanup(dir);
    nd_bundle_free(b);
    free(user);
    return rc;
}
