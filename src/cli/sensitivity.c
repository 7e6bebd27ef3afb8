/* sensitivity.c — `nvfp4dbg sensitivity CKPT`: what NVFP4 costs the model, unit by unit, measured
 * by counterfactual runs (issue 35; docs/sensitivity.md).
 *
 * A unit is a quantized linear (module granularity), all of a layer's (layer), or every linear of
 * one kind across the layers (class: self_attn.q_proj, mlp.experts.*.down_proj). For each unit two
 * whole-model chained runs give the final logits' KL divergence against the reference path and
 * their top-1 agreement:
 *   - the unit alone on the reference path, every other stage NVFP4 (nd_trace_opts.ref_only, as
 *     bisect's probes): what keeping it in high precision wins back (gain = KL_all - KL_unit);
 *   - the unit alone NVFP4 in an otherwise reference model: what it costs on its own.
 * The ranking is by gain. With --budget-kl X the smallest prefix of the ranking whose predicted KL
 * (KL_all minus the gains, which assumes no interaction) meets X is run together, and units are
 * added until the measured KL does; with --keep N the top N are run together. Either way the set
 * is measured, not assumed, and both figures are printed. The set is written as an llmcompressor
 * recipe, a ModelOpt quant_cfg patch and a compressed-tensors ignore patch (--recipe-out DIR). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include "cli.h"
#include "prompt.h"
#include "tokens.h"
#include "sensitivity_out.h"
#include "ckpt/ckpt.h"
#include "pipeline/pipeline.h"
#include "recipe/recipe.h"
#include "util/progress.h"
#include "util/term.h"

static const char *usage_text =
    "usage: nvfp4dbg sensitivity CHECKPOINT [options]\n"
    "\n"
    "What NVFP4 costs the model, unit by unit: for each quantized linear (or layer, or class of\n"
    "linears), the final logits' KL divergence and top-1 agreement against the reference path\n"
    "when that unit alone runs on the reference path (what keeping it in BF16 wins back) and when\n"
    "it alone runs NVFP4 in an otherwise reference model; a ranking; the set that meets a KL\n"
    "budget, run together to verify it; that set as llmcompressor / ModelOpt / compressed-tensors\n"
    "configs. Two whole-model runs per unit (layer granularity on a deep model: 2 x layers).\n"
    "Exit 0: the ranking (and the budget met), 1: the budget is not met even with every unit\n"
    "kept, 2: bad input, 3: internal.\n"
    "\n"
    "  --granularity module|layer|class  the units (default layer)\n"
    "  --budget-kl X     the set of units to keep in high precision whose measured KL is at most X\n"
    "  --keep N          the N units of largest gain, run together\n"
    "  --screen K        exact runs for the K units whose own NVFP4 error (their isolated rows'\n"
    "                    rel L2 squared, from one full run) is largest; the others are listed by\n"
    "                    that figure only (layer granularity on a deep model: 2K + 2 runs)\n"
    "  --recipe-out DIR  write the set as DIR/llmcompressor-recipe.yaml, DIR/modelopt-quant-cfg.json\n"
    "                    and DIR/compressed-tensors-ignore.json (DIR must be new or empty)\n"
    "  --verify DIR|FILE run the set a --recipe-out wrote (its compressed-tensors-ignore.json) on this\n"
    "                    checkpoint: those modules dequantized, the rest NVFP4; exit 1 when the KL\n"
    "                    budget it records is not met (two runs; nothing is ranked)\n"
    "  --recipe NAME|FILE, --tokens 1,2,3, --tokens-file FILE, --backend auto|cpu|cuda,\n"
    "  --device N, --stack NAME, --override NAME=VALUE (repeatable), --max-memory SIZE,\n"
    "  --prompt TEXT, --prompt-file FILE, --chat, --tokenizer DIR|FILE      as for trace\n"
    "  --json            one JSON document on stdout\n"
    "\n"
    "example: nvfp4dbg sensitivity golden/clean-v4 --granularity layer --budget-kl 0.01\n";

typedef struct unit {
    char key[ND_NAME_LEN];
    int *stages;                    /* indices into sens.names */
    int n;
    double kl_ref, top1_ref;        /* the unit alone on the reference path */
    double kl_alone, top1_alone;    /* the unit alone NVFP4 */
    double proxy;                   /* --screen: Σ rel_l2² of its linears' isolated rows in the full run */
    int screened_out;               /* --screen: not among the top candidates, no exact runs */
} unit;

typedef struct sens {
    nd_trace_opts o;
    char (*names)[ND_NAME_LEN];     /* the quantized linears, in execution order */
    int n;
    unit *u;
    int nu;
    const char **off;               /* scratch: one run's ref_only list */
    int traces;
    nd_progress pg;
    nd_err *e;
} sens;

static const nd_row *head_row(const nd_trace_result *res) {
    const nd_row *h = NULL;
    for (int64_t i = 0; i < res->nrows; i++)
        if (!strcmp(res->rows[i].mode, "chained") && isfinite(res->rows[i].kl_div)) h = &res->rows[i];
    return h;
}

/* one chained run with the stages off[0..n) on the reference path: the final logits' figures */
static int run_logits(sens *s, int n_off, const char *what, double *kl, double *top1) {
    s->o.ref_only = s->off;
    s->o.n_ref_only = n_off;
    s->traces++;
    nd_progress_update(&s->pg, s->traces - 1, what);
    nd_trace_result res;
    int rc = nd_pipeline_trace(&s->o, &res, s->e);
    if (rc) return rc;
    /* no finite head figures: the logits are NaN/Inf with this set (a fault the unit does not fix):
     * the worst outcome, ranked last */
    const nd_row *h = head_row(&res);
    if (h) { *kl = h->kl_div; *top1 = h->top1_agree; }
    else { *kl = INFINITY; *top1 = NAN; }
    nd_trace_result_free(&res);
    return rc;
}

/* the stages of the units marked in keep[] (or, with invert, of every other unit) */
static int stages_of(const sens *s, const unsigned char *keep, int invert) {
    int m = 0;
    for (int k = 0; k < s->nu; k++)
        if (!keep[k] != !invert)
            for (int j = 0; j < s->u[k].n; j++) s->off[m++] = s->names[s->u[k].stages[j]];
    return m;
}

static int by_gain(const void *a, const void *b) {
    const unit *x = a, *y = b;
    /* larger gain (smaller KL with the unit on the reference path) first; units screened out (no
     * exact figure) after them, by their screen figure */
    if (x->screened_out || y->screened_out) {
        if (x->screened_out != y->screened_out) return x->screened_out - y->screened_out;
        return (x->proxy < y->proxy) - (x->proxy > y->proxy);
    }
    if (isnan(x->kl_ref) || isnan(y->kl_ref)) return isnan(x->kl_ref) - isnan(y->kl_ref);
    return (x->kl_ref > y->kl_ref) - (x->kl_ref < y->kl_ref);
}

static int by_proxy(const void *a, const void *b) {
    const unit *x = a, *y = b;
    return (x->proxy < y->proxy) - (x->proxy > y->proxy);
}

/* the quantized linears of a full run, and the units they form */
static int collect(sens *s, const nd_trace_result *res, int g) {
    s->names = calloc((size_t)res->nrows + 1, sizeof *s->names);
    s->u = calloc((size_t)res->nrows + 1, sizeof *s->u);
    s->off = calloc((size_t)res->nrows + 1, sizeof *s->off);
    if (!s->names || !s->u || !s->off) return nd_fail(s->e, ND_EXIT_INTERNAL, "out of memory");
    for (int64_t i = 0; i < res->nrows; i++) {
        const nd_row *r = &res->rows[i];
        if (!r->quantized || strcmp(r->op, "linear")) continue;
        if (!strcmp(r->mode, "isolated")) continue; /* their figures feed the screen, below */
        if (strcmp(r->mode, "chained")) continue;
        int dup = 0;
        for (int j = 0; j < s->n && !dup; j++) dup = !strcmp(s->names[j], r->name);
        if (dup) continue;
        snprintf(s->names[s->n], ND_NAME_LEN, "%s", r->name);
        char key[ND_NAME_LEN];
        nd_sens_unit_key(r->name, g, key, sizeof key);
        int k = 0;
        while (k < s->nu && strcmp(s->u[k].key, key)) k++;
        if (k == s->nu) {
            snprintf(s->u[k].key, sizeof s->u[k].key, "%s", key);
            if (!(s->u[k].stages = calloc((size_t)res->nrows, sizeof(int)))) return nd_fail(s->e, ND_EXIT_INTERNAL, "out of memory");
            s->nu++;
        }
        s->u[k].stages[s->u[k].n++] = s->n++;
    }
    if (!s->n) return nd_fail(s->e, ND_EXIT_BADINPUT, "%s: no quantized linear to rank (an unquantized checkpoint?)", s->o.ckpt_dir);
    /* the screen's figure: each linear's own NVFP4 error energy, its isolated row's rel L2 squared */
    for (int64_t i = 0; i < res->nrows; i++) {
        const nd_row *r = &res->rows[i];
        if (!r->quantized || strcmp(r->op, "linear") || strcmp(r->mode, "isolated")) continue;
        char key[ND_NAME_LEN];
        nd_sens_unit_key(r->name, g, key, sizeof key);
        for (int k = 0; k < s->nu; k++)
            if (!strcmp(s->u[k].key, key)) { s->u[k].proxy += isfinite(r->rel_l2) ? r->rel_l2 * r->rel_l2 : INFINITY; break; }
    }
    return 0;
}

/* Every quantized linear weight-only (W4A16 NVFP4, MXFP4 with BF16 activations): both paths run the
 * same dequantized weights, so every unit's KL is 0 by construction. FP8 weights (whose recipes
 * quantize activations too) and any activation-quantized linear make the question real. */
static int weight_only(const char *dir) {
    nd_ckpt *c = NULL;
    nd_err e2 = {0};
    if (nd_ckpt_open(dir, &c, &e2)) return 0; /* the run says what is wrong with it */
    int any = 0, acts = 0;
    for (size_t i = 0; i < nd_ckpt_module_count(c) && !acts; i++) {
        nd_module m;
        if (nd_ckpt_module(c, nd_ckpt_module_path(c, i), &m, &e2)) continue;
        any |= m.wfmt != ND_WF_DENSE;
        acts |= m.wfmt == ND_WF_FP8 || m.act_quant || m.act_fp8;
    }
    nd_ckpt_close(c);
    return any && !acts;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

int nd_cmd_sensitivity(int argc, char **argv) {
    sens s;
    memset(&s, 0, sizeof s);
    nd_err e = {0};
    s.e = &e;
    s.o.backend = "auto";
    s.o.layer_hi = -1;
    s.o.modes = ND_MODES_CHAINED;
    const char **ovr = calloc((size_t)argc + 1, sizeof *ovr);
    int64_t *tokens = NULL, ntok = 0;
    int json = 0, rc = 0, gran = ND_SENS_LAYER, keep_n = -1, screen = 0, gran_given = 0;
    double budget = NAN;
    const char *recipe_out = NULL, *tokens_file = NULL, *verify = NULL;
    char recipe_out_buf[4096];
    unsigned char *set = NULL;
    nd_prompt prompt = {0};
    if (!ovr) return ND_EXIT_INTERNAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) { rc = nd_cli_usage_error("sensitivity", "%s needs a value", a); goto out; } i++; } while (0)
        int pr = nd_prompt_option(&prompt, a, v);
        if (pr < 0) { rc = nd_cli_usage_error("sensitivity", "%s needs a value", a); goto out; }
        if (pr) { i += pr - 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage_text, stdout); goto out; }
        else if (!strcmp(a, "--recipe")) { NEED(); s.o.recipe = v; }
        else if (!strcmp(a, "--tokens")) { NEED(); free(tokens); tokens = NULL; if (nd_tokens_parse(v, "--tokens", &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--tokens-file")) { NEED(); tokens_file = v; free(tokens); tokens = NULL; if (nd_tokens_file(v, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--max-memory")) { NEED(); if (nd_parse_size(v, &s.o.max_memory)) { rc = nd_cli_usage_error("sensitivity", "--max-memory %s: expected a size such as 8G, 512M or 1.5G (at least 1M)", v); goto out; } }
        else if (!strcmp(a, "--backend")) { NEED(); s.o.backend = v; }
        else if (!strcmp(a, "--device")) { NEED(); if (nd_parse_device(v, &s.o.device)) { rc = nd_cli_usage_error("sensitivity", "--device %s: expected a device index (0, 1, ...)", v); goto out; } }
        else if (!strcmp(a, "--stack")) { NEED(); s.o.stack = v; }
        else if (!strcmp(a, "--override")) { NEED(); ovr[s.o.n_overrides++] = v; }
        else if (!strcmp(a, "--recipe-out")) {
            NEED();
            /* "keep/" (the docs' spelling, a shell's completion) names the folder "keep": the staging
             * folder is made beside it and renamed onto it (round 25: inside it, then refused) */
            size_t l = strlen(v);
            while (l > 1 && v[l - 1] == '/') l--;
            if (l >= sizeof recipe_out_buf) { rc = nd_cli_usage_error("sensitivity", "--recipe-out: the folder name is too long"); goto out; }
            memcpy(recipe_out_buf, v, l);
            recipe_out_buf[l] = 0;
            recipe_out = recipe_out_buf;
        }
        else if (!strcmp(a, "--verify")) { NEED(); verify = v; }
        else if (!strcmp(a, "--granularity")) {
            NEED();
            gran_given = 1;
            if (!strcmp(v, "module")) gran = ND_SENS_MODULE;
            else if (!strcmp(v, "layer")) gran = ND_SENS_LAYER;
            else if (!strcmp(v, "class")) gran = ND_SENS_CLASS;
            else { rc = nd_cli_usage_error("sensitivity", "--granularity %s: expected module, layer or class", v); goto out; }
        } else if (!strcmp(a, "--budget-kl")) {
            NEED();
            if (nd_parse_decimal(v, &budget) || budget < 0) { rc = nd_cli_usage_error("sensitivity", "--budget-kl %s: expected a KL in nats, 0 or more, in decimal", v); goto out; }
        } else if (!strcmp(a, "--keep")) {
            NEED();
            char *end;
            long k = strtol(v, &end, 10);
            if (end == v || *end || k < 1 || k > 1000000) { rc = nd_cli_usage_error("sensitivity", "--keep %s: expected a count of units, 1 or more", v); goto out; }
            keep_n = (int)k;
        }
        else if (!strcmp(a, "--screen")) {
            NEED();
            char *end;
            long k = strtol(v, &end, 10);
            if (end == v || *end || k < 1 || k > 100000) { rc = nd_cli_usage_error("sensitivity", "--screen %s: expected a count of units, 1 or more", v); goto out; }
            screen = (int)k;
        }
        else if (!strcmp(a, "--json")) json = 1;
        else if (a[0] == '-') { rc = nd_cli_usage_error("sensitivity", "unknown option %s", a); goto out; }
        else if (!s.o.ckpt_dir) s.o.ckpt_dir = a;
        else { rc = nd_cli_usage_error("sensitivity", "unexpected argument %s", a); goto out; }
#undef NEED
    }
    if (!s.o.ckpt_dir) { fputs(usage_text, stderr); rc = nd_cli_usage_error("sensitivity", "no checkpoint given"); goto out; }
    if (!isnan(budget) && keep_n > 0) { rc = nd_cli_usage_error("sensitivity", "--budget-kl and --keep choose the set two ways: give one"); goto out; }
    if (recipe_out && isnan(budget) && keep_n < 0) { rc = nd_cli_usage_error("sensitivity", "--recipe-out writes the set chosen by --budget-kl or --keep: give one"); goto out; }
    if (prompt.chat && !nd_prompt_given(&prompt)) { rc = nd_cli_usage_error("sensitivity", "--chat needs --prompt or --prompt-file"); goto out; }
    if (nd_prompt_given(&prompt) && nd_prompt_tokens(&prompt, s.o.ckpt_dir, tokens != NULL, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; }
    if (recipe_out) {
        /* never into an input folder of the run: the checkpoint, a tokenizer's, the recipes' */
        const char *inputs[48] = {s.o.ckpt_dir, tokens_file, prompt.file, prompt.tokenizer};
        int n_in = 4;
        char rbuf[8192];
        const char *recipe_args[] = {s.o.recipe, s.o.stack};
        nd_recipe_inputs(recipe_args, 2, inputs, &n_in, 48, rbuf, sizeof rbuf);
        if (nd_sens_out_check(recipe_out, inputs, n_in, &e)) { rc = nd_cli_error(&e); goto out; }
    }
    s.o.tokens = tokens;
    s.o.ntok = ntok;
    s.o.overrides = ovr;
    if (verify) {
        if (recipe_out || !isnan(budget) || keep_n > 0 || screen || gran_given) {
            rc = nd_cli_usage_error("sensitivity", "--verify runs a set already chosen: without --recipe-out, --budget-kl, --keep, "
                                    "--screen or --granularity");
            goto out;
        }
        rc = nd_sens_verify(&s.o, verify, json, &e);
        if (rc > 1) nd_cli_error(&e);
        goto out;
    }

    if (weight_only(s.o.ckpt_dir)) {
        rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s: every quantized linear is weight-only (W4A16 or MXFP4 weights, BF16 activations): "
                     "the production and the reference path run the same dequantized weights, so every unit's KL is 0 and "
                     "nothing can be ranked; sensitivity measures what quantizing activations costs (W4A4, W4A8 checkpoints)",
                     s.o.ckpt_dir);
        nd_cli_error(&e);
        goto out;
    }
    const double t0 = now_s();
    nd_progress_start(&s.pg, "sensitivity", "runs", 0);
    /* every unit NVFP4: the figures to win back, and the quantized linears */
    double kl_all = NAN, top1_all = NAN;
    {
        nd_trace_result res;
        s.o.n_ref_only = 0;
        s.o.modes = screen ? ND_MODES_BOTH : ND_MODES_CHAINED; /* the screen reads the isolated rows */
        s.traces++;
        nd_progress_update(&s.pg, 0, "run 1: every linear NVFP4");
        if ((rc = nd_pipeline_trace(&s.o, &res, &e))) { nd_prompt_explain_vocab(&prompt, &e); nd_cli_error(&e); goto out; }
        const nd_row *h = head_row(&res);
        if (h) { kl_all = h->kl_div; top1_all = h->top1_agree; }
        s.o.modes = ND_MODES_CHAINED;
        rc = h ? collect(&s, &res, gran)
               : nd_fail(&e, ND_EXIT_BADINPUT, "%s: with every linear NVFP4 the final logits are NaN/Inf (or the recipe has no head): a "
                         "fault, not a precision cost; nvfp4dbg trace names where it starts", s.o.ckpt_dir);
        nd_trace_result_free(&res);
        if (rc) { nd_cli_error(&e); goto out; }
    }
    /* nothing on the reference path but the units' own stages, and the reverse */
    if (!(set = calloc((size_t)s.nu + 1, 1))) { rc = ND_EXIT_INTERNAL; goto out; }
    /* --screen K: only the K units of largest own error get the exact runs */
    if (screen && screen < s.nu) {
        qsort(s.u, (size_t)s.nu, sizeof *s.u, by_proxy);
        for (int k = screen; k < s.nu; k++) {
            s.u[k].screened_out = 1;
            s.u[k].kl_ref = s.u[k].top1_ref = s.u[k].kl_alone = s.u[k].top1_alone = NAN;
        }
    }
    for (int k = 0; k < s.nu && !rc; k++) {
        if (s.u[k].screened_out) continue;
        char what[ND_NAME_LEN + 48];
        memset(set, 0, (size_t)s.nu);
        set[k] = 1;
        snprintf(what, sizeof what, "%s on the reference path", s.u[k].key);
        rc = run_logits(&s, stages_of(&s, set, 0), what, &s.u[k].kl_ref, &s.u[k].top1_ref);
        snprintf(what, sizeof what, "%s alone NVFP4", s.u[k].key);
        if (!rc) rc = run_logits(&s, stages_of(&s, set, 1), what, &s.u[k].kl_alone, &s.u[k].top1_alone);
    }
    if (rc) { nd_cli_error(&e); goto out; }
    qsort(s.u, (size_t)s.nu, sizeof *s.u, by_gain);

    /* the set: a prefix of the ranking, measured together */
    nd_sens_set chosen = {.n = 0, .kl = NAN, .top1 = NAN, .predicted = NAN, .budget = budget};
    if (!isnan(budget) || keep_n > 0) {
        if (keep_n > s.nu)
            fprintf(stderr, "nvfp4dbg: sensitivity: --keep %d, but the model has %d units at this granularity: keeping all %d\n", keep_n,
                    s.nu, s.nu);
        int k = keep_n > 0 ? (keep_n < s.nu ? keep_n : s.nu) : 0;
        if (!isnan(budget)) {
            /* the smallest prefix whose predicted KL meets the budget (0: none is needed); a unit
             * screened out has no prediction: it joins only when the measured KL asks for more */
            double pred = kl_all;
            while (k < s.nu && !s.u[k].screened_out && !(pred <= budget)) { pred -= kl_all - s.u[k].kl_ref; k++; }
        }
        for (;;) {
            memset(set, 0, (size_t)s.nu);
            double pred = kl_all;
            for (int j = 0; j < k; j++) { set[j] = 1; if (!s.u[j].screened_out) pred -= kl_all - s.u[j].kl_ref; }
            chosen.n = k;
            chosen.predicted = pred > 0 ? pred : 0;
            if (k == 0) { chosen.kl = kl_all; chosen.top1 = top1_all; }
            else if ((rc = run_logits(&s, stages_of(&s, set, 0), "the set on the reference path", &chosen.kl, &chosen.top1))) break;
            if (isnan(budget) || chosen.kl <= budget || k == s.nu) break;
            k++; /* interactions: the measured KL is above the prediction; one more unit */
        }
        if (rc) { nd_cli_error(&e); goto out; }
    }
    nd_progress_update(&s.pg, s.traces, NULL);
    nd_progress_end(&s.pg);
    const double elapsed = now_s() - t0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    nd_sens_report rep = {.ckpt = s.o.ckpt_dir, .recipe = s.o.recipe, .gran = gran, .granularity = gran == ND_SENS_MODULE ? "module" : gran == ND_SENS_LAYER ? "layer" : "class",
                          .ntok = ntok, .kl_all = kl_all, .top1_all = top1_all, .n_linears = s.n, .traces = s.traces,
                          .elapsed_s = elapsed, .max_rss_mb = (double)ru.ru_maxrss / 1024.0};
    nd_sens_unit *out_units = calloc((size_t)s.nu + 1, sizeof *out_units);
    if (!out_units) { rc = ND_EXIT_INTERNAL; goto out; }
    for (int k = 0; k < s.nu; k++) {
        out_units[k] = (nd_sens_unit){s.u[k].key, s.u[k].n, s.u[k].kl_ref, s.u[k].top1_ref, s.u[k].kl_alone, s.u[k].top1_alone,
                                      (const char **)calloc((size_t)s.u[k].n + 1, sizeof(char *)), s.u[k].proxy, s.u[k].screened_out};
        for (int j = 0; out_units[k].stages && j < s.u[k].n; j++) out_units[k].stages[j] = s.names[s.u[k].stages[j]];
    }
    rep.units = out_units;
    rep.nu = s.nu;
    rep.screen = screen && screen < s.nu ? screen : 0;
    rep.set = (!isnan(budget) || keep_n > 0) ? &chosen : NULL;
    if (recipe_out && chosen.n > 0) rc = nd_sens_write_recipes(recipe_out, &rep, &e);
    else json_decref(nd_sens_set_modules(&rep)); /* the counts alone */
    if (!rc) {
        if (json) nd_sens_print_json(&rep, recipe_out);
        else nd_sens_print_text(&rep, recipe_out);
    } else {
        nd_cli_error(&e);
    }
    for (int k = 0; k < s.nu; k++) free((void *)out_units[k].stages);
    free(out_units);
    if (!rc) rc = rep.set && !isnan(budget) && !(chosen.kl <= budget) ? ND_EXIT_FINDING : ND_EXIT_OK;
out:
    nd_progress_end(&s.pg);
    for (int k = 0; s.u && k < s.nu; k++) free(s.u[k].stages);
    free(s.u);
    free(s.names);
    free(s.off);
    free(set);
    free(tokens);
    free(ovr);
    nd_prompt_free(&prompt);
    return rc;
}
