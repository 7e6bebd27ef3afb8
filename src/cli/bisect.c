/* bisect.c — `nvfp4dbg bisect CKPT [trace options]`: which stages' NVFP4 execution the divergence
 * needs (docs/repro.md), as Polygraphy's `debug precision` does for TensorRT layers.
 *
 * A first full trace (both modes) must show a divergence or a NaN; then each probe is a chained
 * trace in which the stages outside a set S run NVFP4 the healthy way (their floor: the
 * multiplier within 2x of 2688/amax, each shard's own weight scale; nd_trace_opts.ref_only with
 * ref_only_floor), so every probe carries the drift of a clean NVFP4 chain and only S is executed
 * as the checkpoint says. (With the reference math outside S instead, a deep model's own NVFP4
 * drift over 60 layers crosses any threshold, and a healthy layer-0 stage was named.) The symptom
 * is judged at the stage the full trace names as its first divergence, on the chained path (in a
 * deep random model the final output's cosine hardly moves for a fault 40 layers earlier, while
 * the diverged stage's own chained row does): a NaN/Inf in any chained row when the full run has
 * one, else that row's cosine below a threshold (default: halfway between the full run's and the
 * clean chain's, where every stage runs at its floor). The search covers the quantized stages
 * executed up to that row, in execution order Q:
 *   forward  — the shortest prefix Q[0:k] that shows the symptom (bisection on k),
 *   reverse  — the shortest suffix Q[j:k] of that prefix that still shows it (bisection on j),
 *   prune    — drop each inner stage of Q[j:k] whose removal keeps the symptom.
 * Bisection assumes that adding NVFP4 stages does not remove the symptom; every set reported
 * was itself traced and showed the symptom. A probe judged by a row's cosine is the single-stage
 * replay of that row on the chained path (nd_stage_replay): the run stops at the judged stage; a
 * probe for a NaN (anywhere on the chained path) or for the last row is a whole chained trace. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "cli.h"
#include "util/term.h"
#include "tokens.h"
#include "prompt.h"
#include "pipeline/pipeline.h"
#include "ckpt/findings.h"
#include "verdict.h"
#include "util/progress.h"

static const char *usage_text =
    "usage: nvfp4dbg bisect CHECKPOINT [options]\n"
    "\n"
    "Finds the smallest set of quantized stages whose NVFP4 execution is needed for the\n"
    "divergence at the end of the chained production path (a NaN, or the final output's cosine\n"
    "below a threshold) to appear; the other stages run the reference math.\n"
    "Exit 0: no symptom to bisect, 1: a set was found, 2: bad input, 3: internal.\n"
    "\n"
    "  --recipe NAME|FILE, --tokens 1,2,3, --tokens-file FILE, --layers A-B|N|all,\n"
    "  --backend auto|cpu|cuda, --device N, --stack NAME, --override NAME=VALUE (repeatable),\n"
    "  --reference-checkpoint DIR, --max-memory SIZE, --prompt TEXT, --prompt-file FILE,\n"
    "  --chat, --tokenizer DIR|FILE                     as for trace\n"
    "  --min-cosine X    the symptom: final chained cosine below X (default: halfway between the\n"
    "                    full NVFP4 run's and the clean chain's, every stage at its NVFP4 floor)\n"
    "  --off floor|reference  how the stages outside a probed set run: NVFP4 the healthy way\n"
    "                    (default; keeps a deep model's clean drift) or the reference math\n"
    "  --json            one JSON document on stdout\n"
    "\n"
    "example: nvfp4dbg bisect golden/seed-bug-v4 --stack vllm\n";

typedef struct bis {
    nd_trace_opts o;
    char (*names)[ND_NAME_LEN];     /* quantized stages in execution order */
    int n;
    char (*bad)[ND_NAME_LEN];       /* stages whose isolated row diverged in the full run */
    int n_bad;
    const char **off;               /* scratch: the ref_only list of one probe */
    int use_nan;
    double min_cos;
    int traces;
    nd_progress pg;                 /* on stderr: the traces run (util/progress.h) */
    char judged[ND_NAME_LEN];       /* the chained row the symptom is read from ("": the last one) */
    nd_err *e;
} bis;

typedef struct outcome { double cos; int64_t nonfinite; } outcome;

/* a diverged stage that is a fused shard of a stage in the set found (and not in it) */
static int fused_with_set(const bis *b, const unsigned char *keep, int j, int k, const char *stage) {
    int partner = 0;
    for (int i = j; i < k; i++) {
        if (!keep[i]) continue;
        if (!strcmp(b->names[i], stage)) return 0;
        partner |= nd_fused_shards(b->names[i], stage);
    }
    return partner;
}

/* the closing progress line counts every trace run, as the summary on stdout does */
static void progress_done(bis *b) {
    nd_progress_update(&b->pg, b->traces, NULL);
    nd_progress_end(&b->pg);
}

static int run(bis *b, const unsigned char *on, outcome *out) {
    int n_off = 0;
    for (int i = 0; on && i < b->n; i++)
        if (!on[i]) b->off[n_off++] = b->names[i];
    b->o.ref_only = b->off;
    b->o.n_ref_only = n_off;
    nd_trace_result res;
    b->traces++;
    char detail[96];
    snprintf(detail, sizeof detail, "trace %d: %d of %d stages as the checkpoint says", b->traces, b->n - n_off, b->n);
    nd_progress_update(&b->pg, b->traces - 1, detail);
    /* NVFP4DBG_BISECT_WHOLE_TRACES=1 (tests): every probe a whole trace, to show the replayed
     * probes give the same figures */
    static int whole = -1;
    if (whole < 0) whole = getenv("NVFP4DBG_BISECT_WHOLE_TRACES") != NULL;
    if (!b->use_nan && b->judged[0] && !whole) {
        /* the symptom is the judged row's chained cosine: the single-stage replay of that row on
         * the chained path (pipeline.h nd_stage_replay), which stops there; the stages after it
         * cannot change it */
        nd_row row;
        int rc = nd_stage_replay(&b->o, b->judged, NULL, 0, NULL, &row, NULL, b->e);
        if (!rc) {
            out->cos = row.cosine;
            out->nonfinite = row.prod_nan + row.prod_inf;
        }
        return rc;
    }
    int rc = nd_pipeline_trace(&b->o, &res, b->e);
    if (!rc) {
        out->nonfinite = 0;
        out->cos = NAN;
        for (int64_t i = 0; i < res.nrows; i++) {
            const nd_row *r = &res.rows[i];
            if (strcmp(r->mode, "chained")) continue;
            out->nonfinite += r->prod_nan + r->prod_inf;
            if (!b->judged[0] || !strcmp(r->name, b->judged)) out->cos = r->cosine;
        }
        if (!res.nrows) rc = nd_fail(b->e, ND_EXIT_BADINPUT, "%s: the trace produced no rows", b->o.ckpt_dir);
    }
    nd_trace_result_free(&res);
    return rc;
}

static int symptom(const bis *b, const outcome *o) {
    if (b->use_nan) return o->nonfinite > 0;
    return !(o->cos >= b->min_cos); /* NaN cosine counts */
}

/* fails(S) for S = the stages i with lo <= i < hi and keep[i] */
static int probe(bis *b, int lo, int hi, const unsigned char *keep, int *fails) {
    unsigned char *on = calloc((size_t)b->n + 1, 1);
    if (!on) return nd_fail(b->e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = lo; i < hi; i++) on[i] = keep ? keep[i] : 1;
    outcome oc;
    int rc = run(b, on, &oc);
    free(on);
    if (!rc) *fails = symptom(b, &oc);
    return rc;
}


int nd_cmd_bisect(int argc, char **argv) {
    char safe_dir[1024]; /* the folder as given, made safe for the terminal */
    bis b;
    memset(&b, 0, sizeof b);
    nd_err e = {0};
    b.e = &e;
    b.o.backend = "auto";
    b.o.layer_hi = -1;
    b.o.modes = ND_MODES_CHAINED;
    b.o.ref_only_floor = 1;
    b.min_cos = NAN;
    const char **ovr = calloc((size_t)argc + 1, sizeof *ovr);
    int64_t *tokens = NULL, ntok = 0;
    int json = 0, rc = 0;
    unsigned char *keep = NULL;
    nd_prompt prompt = {0};
    if (!ovr) return ND_EXIT_INTERNAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) { rc = nd_cli_usage_error("bisect", "%s needs a value", a); goto out; } i++; } while (0)
        int pr = nd_prompt_option(&prompt, a, v);
        if (pr < 0) { rc = nd_cli_usage_error("bisect", "%s needs a value", a); goto out; }
        if (pr) { i += pr - 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage_text, stdout); goto out; }
        else if (!strcmp(a, "--recipe")) { NEED(); b.o.recipe = v; }
        else if (!strcmp(a, "--tokens")) { NEED(); free(tokens); tokens = NULL; if (nd_tokens_parse(v, "--tokens", &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--max-memory")) { NEED(); if (nd_parse_size(v, &b.o.max_memory)) { rc = nd_cli_usage_error("bisect", "--max-memory %s: expected a size such as 8G, 512M or 1.5G (at least 1M)", v); goto out; } }
        else if (!strcmp(a, "--tokens-file")) { NEED(); free(tokens); tokens = NULL; if (nd_tokens_file(v, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--layers")) { NEED(); if (nd_parse_layers(v, &b.o.layer_lo, &b.o.layer_hi)) { rc = nd_cli_usage_error("bisect", "--layers %s: expected N, A-B or all", v); goto out; } }
        else if (!strcmp(a, "--backend")) { NEED(); b.o.backend = v; }
        else if (!strcmp(a, "--device")) { NEED(); if (nd_parse_device(v, &b.o.device)) { rc = nd_cli_usage_error("bisect", "--device %s: expected a device index (0, 1, ...)", v); goto out; } }
        else if (!strcmp(a, "--stack")) { NEED(); b.o.stack = v; }
        else if (!strcmp(a, "--override")) { NEED(); ovr[b.o.n_overrides++] = v; }
        else if (!strcmp(a, "--reference-checkpoint")) { NEED(); b.o.ref_ckpt = v; }
        else if (!strcmp(a, "--min-cosine")) {
            NEED();
            if (nd_parse_decimal(v, &b.min_cos) || b.min_cos < -1 || b.min_cos > 1) { rc = nd_cli_usage_error("bisect", "--min-cosine %s: expected a cosine in [-1, 1], in decimal", v); goto out; }
        }
        else if (!strcmp(a, "--off")) {
            NEED();
            if (!strcmp(v, "floor")) b.o.ref_only_floor = 1;
            else if (!strcmp(v, "reference")) b.o.ref_only_floor = 0;
            else { rc = nd_cli_usage_error("bisect", "--off %s: expected floor or reference", v); goto out; }
        }
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] == '-') { rc = nd_cli_usage_error("bisect", "unknown option %s", a); goto out; }
        else if (!b.o.ckpt_dir) b.o.ckpt_dir = a;
        else { rc = nd_cli_usage_error("bisect", "unexpected argument %s", a); goto out; }
#undef NEED
    }
    if (!b.o.ckpt_dir) { fputs(usage_text, stderr); rc = nd_cli_usage_error("bisect", "no checkpoint given"); goto out; }
    if (prompt.chat && !nd_prompt_given(&prompt)) { rc = nd_cli_usage_error("bisect", "--chat needs --prompt or --prompt-file"); goto out; }
    if (nd_prompt_given(&prompt) && nd_prompt_tokens(&prompt, b.o.ckpt_dir, tokens != NULL, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; }
    b.o.tokens = tokens;
    b.o.ntok = ntok;
    b.o.overrides = ovr;

    /* the full NVFP4 run: the quantized stages and the symptom */
    nd_trace_result res;
    b.o.progress = 1; /* each trace's layers move the bar within its step */
    nd_progress_start(&b.pg, "bisect", "traces run", 0);
    nd_progress_update(&b.pg, 0, "trace 1: the full NVFP4 run");
    b.traces++;
    b.o.modes = ND_MODES_BOTH; /* the diagnosis (isolated rows) decides whether there is a divergence */
    rc = nd_pipeline_trace(&b.o, &res, &e);
    if (rc) nd_prompt_explain_vocab(&prompt, &e);
    b.o.modes = ND_MODES_CHAINED;
    if (rc) { nd_cli_error(&e); nd_trace_result_free(&res); goto out; }
    if (res.warning[0]) fprintf(stderr, "nvfp4dbg: warning: %s\n", res.warning);
    outcome full = {NAN, 0};
    b.names = calloc((size_t)(res.nrows + 1), sizeof *b.names);
    b.off = calloc((size_t)(res.nrows + 1), sizeof *b.off);
    b.bad = calloc((size_t)(res.nrows + 1), sizeof *b.bad);
    if (!b.names || !b.off || !b.bad) { nd_trace_result_free(&res); rc = ND_EXIT_INTERNAL; goto out; }
    /* the row the symptom is read from: the first divergence, when its stage has a chained row */
    int64_t judged_at = res.nrows;
    for (int64_t i = 0; i < res.nrows; i++)
        if (!strcmp(res.rows[i].mode, "chained") && !strcmp(res.rows[i].name, res.summary.first_divergence)) {
            snprintf(b.judged, sizeof b.judged, "%s", res.rows[i].name);
            judged_at = i;
            break;
        }
    for (int64_t i = 0; i < res.nrows; i++) {
        const nd_row *r = &res.rows[i];
        if (!strcmp(r->mode, "isolated") && nd_row_diverged(r)) snprintf(b.bad[b.n_bad++], ND_NAME_LEN, "%s", r->name);
        if (!strcmp(r->mode, "chained")) {
            full.nonfinite += r->prod_nan + r->prod_inf;
            if (!b.judged[0] || !strcmp(r->name, b.judged)) full.cos = r->cosine;
        }
        if (!r->quantized || i > judged_at) continue; /* stages after the judged row cannot matter */
        int dup = 0;
        for (int j = 0; j < b.n && !dup; j++) dup = !strcmp(b.names[j], r->name);
        if (!dup) snprintf(b.names[b.n++], ND_NAME_LEN, "%s", r->name);
    }
    int diverged = !strcmp(res.summary.status, "diverged");
    char first[ND_NAME_LEN + 40];
    snprintf(first, sizeof first, "%s: %s", res.summary.first_divergence, res.summary.cause);
    nd_trace_result_free(&res);
    b.use_nan = full.nonfinite > 0;
    /* the clean chain: every quantized stage at its floor (or, with --off reference, none quantized) */
    outcome clean = {1.0, 0};
    if (b.n > 0) {
        unsigned char *none = calloc((size_t)b.n + 1, 1);
        if (!none) { rc = ND_EXIT_INTERNAL; goto out; }
        rc = run(&b, none, &clean);
        free(none);
        if (rc) { nd_cli_error(&e); goto out; }
    }
    if (isnan(b.min_cos)) b.min_cos = isfinite(full.cos) && isfinite(clean.cos) ? (full.cos + clean.cos) / 2.0 : 0.5;
    char crit[ND_NAME_LEN + 64];
    if (b.use_nan) snprintf(crit, sizeof crit, "a NaN/Inf on the chained path");
    else snprintf(crit, sizeof crit, "chained cosine of %s below the threshold", b.judged[0] ? b.judged : "the last stage");
    if ((!diverged && !b.use_nan) || !symptom(&b, &full) || symptom(&b, &clean) || b.n == 0) {
        progress_done(&b);
        if (diverged) {
            /* the trace diverged, yet switching stages cannot show it: not a pass (exit 1) */
            const char *why = b.n == 0                 ? "it has no quantized stage to switch"
                              : !symptom(&b, &full)    ? "its divergence does not reach the chained path"
                                                       : "the symptom stays with every quantized stage at its floor (the "
                                                         "checkpoint's values carry it on both paths)";
            char fs[sizeof first * 4];
            nd_term_safe(first, fs, sizeof fs);
            if (json)
                printf("{\"status\": \"unbisectable\", \"diverged\": true, \"traces\": %d, \"stages\": [], \"reason\": \"%s\"}\n",
                       b.traces, !symptom(&b, &full) ? "not_chained" : b.n == 0 ? "no_quantized_stage" : "symptom_at_floor");
            else
                printf("nvfp4dbg bisect: %s: the trace diverges (first divergence at %s) but no set of stages can be bisected: %s; "
                       "nvfp4dbg trace names the cause (final chained cosine %.5f, %lld NaN/Inf; clean chain %.5f, %lld NaN/Inf)\n",
                       nd_term_safe(b.o.ckpt_dir, safe_dir, sizeof safe_dir), fs, why, full.cos, (long long)full.nonfinite, clean.cos,
                       (long long)clean.nonfinite);
            rc = ND_EXIT_FINDING;
            goto out;
        }
        if (json) printf("{\"status\": \"no_symptom\", \"diverged\": %s, \"traces\": %d, \"stages\": []}\n", diverged ? "true" : "false", b.traces);
        else printf("nvfp4dbg bisect: %s: nothing to bisect (%s; final chained cosine %.5f, %lld NaN/Inf; clean chain %.5f, %lld NaN/Inf; threshold %.5f; %d quantized stages)\n",
                    nd_term_safe(b.o.ckpt_dir, safe_dir, sizeof safe_dir), diverged ? "diverged" : "the trace shows no divergence", full.cos, (long long)full.nonfinite,
                    clean.cos, (long long)clean.nonfinite, b.min_cos, b.n);
        rc = ND_EXIT_OK;
        goto out;
    }
    /* forward: shortest failing prefix [0, k) */
    int lo = 1, hi = b.n, f = 0;
    while (lo < hi) {
        int mid = (lo + hi) / 2;
        if ((rc = probe(&b, 0, mid, NULL, &f))) { nd_cli_error(&e); goto out; }
        if (f) hi = mid; else lo = mid + 1;
    }
    int k = hi;
    /* reverse: shortest failing suffix [j, k) of that prefix */
    lo = 0;
    hi = k - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((rc = probe(&b, mid, k, NULL, &f))) { nd_cli_error(&e); goto out; }
        if (f) lo = mid; else hi = mid - 1;
    }
    int j = lo;
    /* prune the inside of [j, k) one stage at a time */
    if (!(keep = calloc((size_t)b.n + 1, 1))) { rc = ND_EXIT_INTERNAL; goto out; }
    for (int i = j; i < k; i++) keep[i] = 1;
    for (int i = j + 1; i < k - 1; i++) {
        keep[i] = 0;
        if ((rc = probe(&b, j, k, keep, &f))) { nd_cli_error(&e); goto out; }
        if (!f) keep[i] = 1;
    }
    /* the figures of the set found (one more trace, so that they are reported as measured) */
    outcome found;
    unsigned char *on = calloc((size_t)b.n + 1, 1);
    if (!on) { rc = ND_EXIT_INTERNAL; goto out; }
    for (int i = j; i < k; i++) on[i] = keep[i];
    rc = run(&b, on, &found);
    free(on);
    progress_done(&b);
    if (rc) { nd_cli_error(&e); goto out; }
    if (json) {
        json_t *root = json_object(), *st = json_array();
        for (int i = j; i < k; i++)
            if (keep[i]) json_array_append_new(st, json_string(b.names[i]));
        json_object_set_new(root, "status", json_string("found"));
        json_object_set_new(root, "checkpoint", json_string(b.o.ckpt_dir));
        json_object_set_new(root, "criterion", json_string(b.use_nan ? "nonfinite" : "cosine"));
        json_object_set_new(root, "judged_stage", json_string(b.judged));
        json_object_set_new(root, "min_cosine", json_real(b.min_cos));
        json_object_set_new(root, "full_final_cosine", isfinite(full.cos) ? json_real(full.cos) : json_null());
        json_object_set_new(root, "clean_final_cosine", isfinite(clean.cos) ? json_real(clean.cos) : json_null());
        json_object_set_new(root, "set_final_cosine", isfinite(found.cos) ? json_real(found.cos) : json_null());
        json_object_set_new(root, "quantized_stages", json_integer(b.n));
        json_object_set_new(root, "traces", json_integer(b.traces));
        json_object_set_new(root, "stages", st);
        json_t *fs = json_array();
        for (int i = 0; i < b.n_bad; i++)
            if (fused_with_set(&b, keep, j, k, b.bad[i])) json_array_append_new(fs, json_string(b.bad[i]));
        json_object_set_new(root, "fused_shards_diverged", fs);
        char *s = json_dumps(root, JSON_INDENT(1));
        if (s) { puts(s); free(s); }
        json_decref(root);
    } else {
        printf("nvfp4dbg bisect: %s: %d quantized stages; symptom: %s (threshold %.5f; as the checkpoint says: cosine %.5f, %lld NaN/Inf; clean chain: cosine %.5f)\n",
               nd_term_safe(b.o.ckpt_dir, safe_dir, sizeof safe_dir), b.n, crit, b.min_cos, full.cos, (long long)full.nonfinite, clean.cos);
        printf("smallest set of stages whose NVFP4 execution shows the symptom (cosine %.5f, %lld NaN/Inf with only these):\n",
               found.cos, (long long)found.nonfinite);
        for (int i = j; i < k; i++)
            if (keep[i]) printf("  %s\n", b.names[i]);
        /* the symptom is judged at the first divergence, so a fused partner broken the same way
         * (q_a_proj's kv_proj) is not needed for it, yet it is broken too: say so */
        int nf = 0;
        for (int i = 0; i < b.n_bad; i++)
            if (fused_with_set(&b, keep, j, k, b.bad[i]))
                printf("%s%s", nf++ ? ", " : "fused with a stage of the set, diverged on its own in the full run too (not needed for this symptom): ", b.bad[i]);
        if (nf) printf("\n");
        printf("%d traces run\n", b.traces);
    }
    rc = ND_EXIT_FINDING;
out:
    progress_done(&b); /* nothing when it ended above or never started */
    free(keep);
    free(b.names);
    free(b.off);
    free(b.bad);
    free(tokens);
    free(ovr);
    nd_prompt_free(&prompt);
    return rc;
}
