/* repro.c — `nvfp4dbg repro TRACE.h5 [--stage NAME] --out BUNDLE.h5`: rerun the trace's
 * checkpoint up to one stage and write that stage, self-contained, as a bundle (docs/repro.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "util/term.h"
#include "util/shquote.h"
#include "bundle/bundle.h"
#include "pipeline/pipeline.h"
#include "recipe/recipe.h"
#include "nd_config.h"
#include "util/outfile.h"

static const char *usage_text =
    "usage: nvfp4dbg repro TRACE.h5 --out BUNDLE.h5 [options]\n"
    "\n"
    "Writes one stage of a trace as a self-contained HDF5 bundle: its reference inputs, the\n"
    "checkpoint tensors it reads (in their checkpoint form), config.json, the stage definition,\n"
    "the serving-stack profile, the overrides of the run and the stage's rows of the trace.\n"
    "`nvfp4dbg replay BUNDLE.h5` reruns it without the checkpoint.\n"
    "\n"
    "  --stage NAME          the stage (default: the trace's first divergence)\n"
    "  --out FILE.h5         the bundle (required)\n"
    "  --checkpoint DIR      the checkpoint, when it moved since the trace was written\n"
    "  --recipe NAME|FILE    the recipe, when it is not the installed one the trace names\n"
    "  --override NAME=VALUE an override the trace does not record (repeatable; traces written\n"
    "                        by this version record theirs)\n"
    "  --force               replace FILE.h5 even when it is not an earlier bundle (never an\n"
    "                        input, a link, a folder or a device)\n"
    "\n"
    "Exit 0: bundle written, 2: bad input (no such stage, unreadable trace) or an output that\n"
    "cannot be written, 3: internal.\n"
    "example: nvfp4dbg trace golden/seed-bug-v4 --out t.h5; nvfp4dbg repro t.h5 --out q_a.h5\n";

/* "a;b;c" -> pointers into buf (modified). */
static int split_overrides(char *buf, const char **out, int max) {
    int n = 0;
    for (char *tok = strtok(buf, ";"); tok && n < max; tok = strtok(NULL, ";"))
        if (*tok) out[n++] = tok;
    return n;
}

static void stack_path(const char *stack, char *out, size_t cap) {
    if (strchr(stack, '/')) snprintf(out, cap, "%s", stack);
    else snprintf(out, cap, "%s/stack-%s.yaml", nd_recipe_dir(), stack);
}

int nd_cmd_repro(int argc, char **argv) {
    const char *trace_path = NULL, *stage = NULL, *out = NULL, *ckpt = NULL, *recipe = NULL;
    const char **extra = calloc((size_t)argc + 1, sizeof *extra);
    int n_extra = 0, rc = 0, force = 0;
    nd_err e = {0};
    nd_trace *t = NULL;
    nd_bundle *b = NULL;
    nd_recipe *rcp = NULL;
    if (!extra) return ND_EXIT_INTERNAL;
    const nd_cli_opt opts[] = {{"--stage", &stage, NULL, NULL, NULL}, {"--out", &out, NULL, NULL, NULL},
                               {"--checkpoint", &ckpt, NULL, NULL, NULL}, {"--recipe", &recipe, NULL, NULL, NULL},
                               {"--override", NULL, NULL, extra, &n_extra}, {"--force", NULL, &force, NULL, NULL}, {0}};
    if ((rc = nd_cli_parse("repro", usage_text, argc, argv, opts, &trace_path, 1))) {
        if (rc < 0) rc = 0;
        goto out;
    }
    if (!trace_path || !out) {
        fputs(usage_text, stderr);
        rc = nd_cli_usage_error("repro", "%s", !trace_path ? "no trace given" : "--out BUNDLE.h5 is required");
        goto out;
    }
    if ((rc = nd_trace_read(trace_path, &t, &e))) { nd_cli_error(&e); goto out; }
    if (t->reference_checkpoint[0]) {
        /* a bundle carries the checkpoint's tensors, not the original's: replayed without them the
         * stage would be judged against its own weights (a planted packing fault replays "ok") */
        char safe[4096];
        nd_term_safe(t->reference_checkpoint, safe, sizeof safe);
        rc = nd_cli_usage_error("repro", "%s: the trace was made with --reference-checkpoint %s; a bundle carries the "
                                "checkpoint's own tensors only, and replayed without the original it would judge another "
                                "thing: make the bundle from a trace without --reference-checkpoint", trace_path, safe);
        goto out;
    }
    if (t->ref_numerics[0] && strcmp(t->ref_numerics, "fp32")) {
        /* a bundle replays the stage with the default reference numerics: the rows of a trace made
         * with others would not come back (and repro would blame the checkpoint) */
        char safe[128];
        rc = nd_cli_usage_error("repro", "%s: the trace was made with --ref-numerics %s; a bundle replays the default reference "
                                "numerics (fp32), so its rows would not be this trace's: make the bundle from a trace without "
                                "--ref-numerics", trace_path, nd_term_safe(t->ref_numerics, safe, sizeof safe));
        goto out;
    }
    if (!stage) {
        if (!t->has_summary || !t->summary.first_divergence[0]) {
            /* say what the trace is: a failed or unfinished run names no stage either */
            const char *st = t->has_summary ? t->summary.status : "";
            char msg[160];
            nd_term_safe(t->has_summary ? t->summary.message : "", msg, sizeof msg);
            if (!strcmp(st, "error"))
                rc = nd_cli_usage_error("repro", "%s: the run that wrote the trace failed (%s), so it names no stage; name one with "
                                        "--stage", trace_path, msg);
            else if (!t->has_summary || !strcmp(st, "incomplete"))
                rc = nd_cli_usage_error("repro", "%s: the run that wrote the trace did not finish, so it names no stage; name one "
                                        "with --stage", trace_path);
            else
                rc = nd_cli_usage_error("repro", "%s: the trace has no divergence; name a stage with --stage", trace_path);
            goto out;
        }
        stage = t->summary.first_divergence;
    }
    if (!ckpt) ckpt = t->checkpoint;
    const int user_recipe = recipe != NULL;
    if (!recipe) recipe = t->recipe;
    {
        const char *inputs[16] = {trace_path, ckpt};
        int n_in = 2;
        char rbuf[8192]; /* the recipe files and those they extend */
        const char *recipe_args[] = {recipe, t->stack};
        nd_recipe_inputs(recipe_args, 2, inputs, &n_in, 16, rbuf, sizeof rbuf);
        const nd_out_rules rules = {.what = "bundle", .inputs = inputs, .n_inputs = n_in, .force = force, .ours = nd_bundle_is_ours};
        if ((rc = nd_out_check(out, &rules, &e))) { nd_cli_error(&e); goto out; }
    }
    if (!(b = calloc(1, sizeof *b))) { rc = ND_EXIT_INTERNAL; goto out; }
    for (int64_t i = 0; i < t->nrows && b->n_rows < ND_BUNDLE_MAX_ROWS; i++)
        if (!strcmp(t->rows[i].name, stage)) b->rows[b->n_rows++] = t->rows[i];
    if (!b->n_rows) { rc = nd_cli_usage_error("repro", "%s: no stage named '%s' in the trace", trace_path, stage); goto out; }

    /* what the run used: overrides recorded in the trace, then the ones given here */
    char ovbuf[2048];
    snprintf(ovbuf, sizeof ovbuf, "%s", t->overrides);
    const char *ovr[64];
    int n_ovr = split_overrides(ovbuf, ovr, 32);
    for (int i = 0; i < n_extra && n_ovr < 64; i++) ovr[n_ovr++] = extra[i];
    size_t o = 0;
    for (int i = 0; i < n_ovr; i++) o += (size_t)snprintf(b->overrides + o, o < sizeof b->overrides ? sizeof b->overrides - o : 0, "%s%s", i ? ";" : "", ovr[i]);

    /* texts: recipe (thresholds), stack profile, config */
    if ((rc = nd_recipe_load(recipe, &rcp, &e))) { nd_cli_error(&e); goto out; }
    /* the recipe the trace ran (its file's hash, recorded by trace): a bundle made with another one
     * (an edited copy named like the shipped recipe) would replay other stage definitions */
    if (t->recipe_fnv1a[0]) {
        char h[17] = "";
        nd_err eh = {0};
        if (nd_recipe_hash(rcp, h, &eh) || strcmp(h, t->recipe_fnv1a)) {
            char h2[17] = "";
            nd_recipe *alt = NULL;
            /* the file the trace loaded, still as it was: that one (unless --recipe chose another) */
            if (!user_recipe && t->recipe_file[0] && !nd_recipe_load(t->recipe_file, &alt, &eh) && !nd_recipe_hash(alt, h2, &eh) &&
                !strcmp(h2, t->recipe_fnv1a)) {
                nd_recipe_free(rcp);
                rcp = alt;
                recipe = t->recipe_file;
            } else {
                if (alt) nd_recipe_free(alt);
                char tf[4200];
                rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s: the trace ran recipe file %s, but %s (%s) is another recipe%s: a bundle "
                             "made with it would replay other stage definitions; give --recipe FILE with the recipe the trace ran",
                             trace_path, nd_term_safe(t->recipe_file, tf, sizeof tf), recipe, rcp->path,
                             user_recipe ? "" : " and that file has changed or is gone since");
                nd_cli_error(&e);
                goto out;
            }
        }
    }
    b->th_min_cosine = rcp->th.min_cosine;
    b->th_min_sqnr_db = rcp->th.min_sqnr_db;
    b->th_floor_margin_db = rcp->th.floor_margin_db;
    b->th_chained_min_cosine = rcp->th.chained_min_cosine;
    char path[4096 + 64]; /* a folder of PATH_MAX and a file name */
    if ((rc = nd_bundle_slurp(rcp->path, &b->recipe_yaml, &e)) > 1) { nd_cli_error(&e); goto out; }
    stack_path(t->stack, path, sizeof path);
    /* the profile file the trace ran (its hash, recorded by trace): one resolved by name now may be
     * another file (a --stack FILE declaring a shipped name, a profile edited since) whose bundle
     * would replay other behaviour (round 25: replay said "ok") */
    if (t->stack_fnv1a[0]) {
        char h[17] = "";
        nd_err eh = {0};
        if (nd_recipe_file_hash(path, h, &eh) || strcmp(h, t->stack_fnv1a)) {
            char h2[17] = "";
            if (t->stack_file[0] && !nd_recipe_file_hash(t->stack_file, h2, &eh) && !strcmp(h2, t->stack_fnv1a)) {
                snprintf(path, sizeof path, "%s", t->stack_file);
            } else {
                char sf[4200], sn[128];
                rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s: the trace ran stack profile file %s, which has changed or is gone, and %s "
                             "(profile '%s' by name) is another file: a bundle made with it would replay another serving "
                             "stack", trace_path, nd_term_safe(t->stack_file, sf, sizeof sf), path, nd_term_safe(t->stack, sn, sizeof sn));
                nd_cli_error(&e);
                goto out;
            }
        }
    }
    if ((rc = nd_bundle_slurp(path, &b->stack_yaml, &e))) {
        if (rc == 1) rc = nd_cli_usage_error("repro", "%s: the trace's stack profile '%s' is not installed", path, t->stack);
        else nd_cli_error(&e);
        goto out;
    }
    snprintf(path, sizeof path, "%s/config.json", ckpt);
    if ((rc = nd_bundle_slurp(path, &b->config_json, &e))) {
        if (rc == 1) rc = nd_cli_usage_error("repro", "%s: no config.json (the checkpoint moved? give --checkpoint DIR)", path);
        else nd_cli_error(&e);
        goto out;
    }
    snprintf(path, sizeof path, "%s/hf_quant_config.json", ckpt);
    if ((rc = nd_bundle_slurp(path, &b->hf_quant_config_json, &e)) > 1) { nd_cli_error(&e); goto out; }
    rc = 0;
    snprintf(b->tool_version, sizeof b->tool_version, "%s", ND_VERSION);
    snprintf(b->checkpoint, sizeof b->checkpoint, "%s", ckpt);
    snprintf(b->checkpoint_format, sizeof b->checkpoint_format, "%s", t->checkpoint_format);
    snprintf(b->recipe, sizeof b->recipe, "%s", rcp->name);
    snprintf(b->stack, sizeof b->stack, "%s", t->stack);
    snprintf(b->backend, sizeof b->backend, "%s", t->backend);
    b->ntok = t->ntokens;
    if (!(b->tokens = malloc(sizeof(int64_t) * (size_t)(t->ntokens ? t->ntokens : 1)))) { rc = ND_EXIT_INTERNAL; goto out; }
    if (t->ntokens) memcpy(b->tokens, t->tokens, sizeof(int64_t) * (size_t)t->ntokens);

    /* the single-stage replay of the row on the CPU (reference inputs do not depend on the
     * backend's production kernels; everything before it runs on the reference path), capturing
     * what its stage reads; the row it makes must be the trace's */
    nd_trace_opts opt;
    memset(&opt, 0, sizeof opt);
    opt.ckpt_dir = ckpt;
    opt.recipe = recipe;
    opt.stack = t->stack;
    opt.backend = "cpu";
    opt.tokens = t->tokens;
    opt.ntok = t->ntokens;
    opt.layer_hi = -1;
    opt.overrides = ovr;
    opt.n_overrides = n_ovr;
    opt.capture_stage = stage;   /* a row of the stage's own (an expert's projection) captures the stage */
    opt.capture = nd_bundle_capture_cb;
    opt.capture_user = b;
    snprintf(b->stage, sizeof b->stage, "%s", stage);
    nd_row again;
    nd_stage_info info;
    memset(&info, 0, sizeof info);
    rc = nd_stage_replay(&opt, stage, NULL, 0, NULL, &again, &info, &e);
    /* an override that matched nothing in the replay up to the stage would make a bundle that
     * tests nothing (and, naming another layer, one that no replay can load): refused, as trace does */
    if (!rc && strstr(info.warning, "--override"))
        rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s (replaying %s up to stage %s): the bundle would test nothing", info.warning, ckpt, stage);
    /* the replay's own reason first (a malformed override, a missing tensor): the stage not having
     * run is what follows from it, not why */
    if (rc == ND_EXIT_BADINPUT && !b->stage_yaml) {
        nd_wrap(&e, "%s: stage '%s' did not run when the checkpoint was replayed", ckpt, stage);
        rc = nd_cli_error(&e);
        goto out;
    }
    if (rc) { nd_cli_error(&e); goto out; }
    if (!b->stage_yaml) {
        rc = nd_cli_usage_error("repro", "%s: stage '%s' did not run when the checkpoint was replayed", ckpt, stage);
        goto out;
    }
    /* the checkpoint must give the trace's row (the replay runs on the CPU, the trace maybe not:
     * the quantizer multiplier is the checkpoint's own number, the reference amax agrees across
     * backends far within 0.1%); another checkpoint's bundle would pair these rows with other
     * tensors. Overrides given here change the stage on purpose: not compared then. */
    for (int i = 0; i < b->n_rows && !n_extra; i++) {
        const nd_row *tr = &b->rows[i];
        if (strcmp(tr->mode, again.mode)) continue;
        const int mult_differs = !(isnan(tr->scale_mult) && isnan(again.scale_mult)) &&
                                 !(fabs(tr->scale_mult - again.scale_mult) <= 1e-6 * fabs(tr->scale_mult));
        const int amax_differs = !(isnan(tr->ref_amax) && isnan(again.ref_amax)) &&
                                 !(fabs(tr->ref_amax - again.ref_amax) <= 1e-3 * fabs(tr->ref_amax) + 1e-30);
        if (mult_differs || amax_differs) {
            char cs[4200], ts[4200];
            nd_fail(&e, ND_EXIT_BADINPUT, "%s: does not give the trace's row %s (quantizer multiplier %.6g, reference amax %.6g; the "
                    "trace %s has %.6g and %.6g): the trace was made from another checkpoint", nd_term_safe(ckpt, cs, sizeof cs), stage,
                    again.scale_mult, again.ref_amax, nd_term_safe(trace_path, ts, sizeof ts), tr->scale_mult, tr->ref_amax);
            rc = nd_cli_error(&e);
            goto out;
        }
        break;
    }
    if ((rc = nd_bundle_write(out, b, &e))) { nd_cli_error(&e); goto out; }
    size_t bytes = 0;
    for (int i = 0; i < b->n_tensors; i++) bytes += b->tensors[i].nbytes;
    for (int i = 0; i < b->n_in; i++) bytes += sizeof(float) * (size_t)(b->in[i].rows * b->in[i].cols);
    char t1[4 * sizeof b->stage], t2[4 * sizeof b->op], t3[4 * sizeof b->overrides];
    printf("nvfp4dbg repro: stage %s (op %s, layer %d): %d input(s), %d checkpoint tensor(s), %zu bytes of data\n",
           nd_term_safe(b->stage, t1, sizeof t1), nd_term_safe(b->op, t2, sizeof t2), b->layer, b->n_in, b->n_tensors, bytes);
    if (b->overrides[0]) printf("overrides: %s\n", nd_term_safe(b->overrides, t3, sizeof t3));
    if (b->n_tensors == ND_BUNDLE_MAX_TENSORS)
        fprintf(stderr, "nvfp4dbg: warning: the stage reads %d tensors or more; the capture keeps %d, the bundle may be incomplete\n",
                ND_BUNDLE_MAX_TENSORS, ND_BUNDLE_MAX_TENSORS);
    {   /* the command is pasted: its path shell-quoted (util/shquote.h), then made safe for the terminal */
        char q[8192] = "nvfp4dbg replay ", qs[4 * sizeof q], os[16384];
        nd_shquote_cat(q, sizeof q, out);
        printf("bundle written to %s (replay: %s)\n", nd_term_safe(out, os, sizeof os), nd_term_safe(q, qs, sizeof qs));
    }
out:
    if (rcp) nd_recipe_free(rcp);
    nd_bundle_free(b);
    nd_trace_free(t);
    free(extra);
    return rc;
}
