/* trace.c — `nvfp4dbg trace CKPT ...`: replay, table, closing line, --json. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>
#include "nd_config.h"
#include "cli.h"
#include "tokens.h"
#include "prompt.h"
#include "pipeline/pipeline.h"
#include "diagnose/diagnose.h"
#include "diagnose/catalogue.h"
#include "trace_stacks.h"
#include "trace_findings.h"
#include "trace_text.h"
#include "quality_text.h"
#include "util/shquote.h"
#include "diagnose/next_command.h"
#include "cli_args.h"
#include "json_fields.h"
#include "util/term.h"
#include "util/outfile.h"
#include "recipe/recipe.h"

static const char *usage_text =
    "usage: nvfp4dbg trace CHECKPOINT [options]\n"
    "\n"
    "Replays the checkpoint stage by stage on the reference path (weights dequantized, FP32/BF16)\n"
    "and the NVFP4 production path (activations quantized with the checkpoint's scales as the\n"
    "serving kernels do), writes per-stage figures to an HDF5 trace, and names the first\n"
    "divergence and its likely cause. Exit 0: no divergence, 1: divergence (or a static error the\n"
    "replay cannot clear, or quantized modules no stage of the recipe ran), 2: bad input, 3: internal.\n"
    "\n"
    "  --recipe NAME|FILE        model recipe (default: from config.json model_type)\n"
    "  --tokens 1,2,3            token ids (default: 16 built-in ids modulo the vocabulary)\n"
    "  --tokens-file FILE        token ids, one per line or comma separated\n"
    "  --prompt TEXT             the prompt as text, tokenized with the checkpoint's tokenizer.json\n"
    "  --prompt-file FILE        the prompt from a UTF-8 text file, likewise\n"
    "  --chat                    apply the checkpoint's chat template (one user turn and the\n"
    "                            generation prompt) before tokenizing --prompt/--prompt-file\n"
    "  --tokenizer DIR|FILE      tokenize --prompt with this tokenizer.json (a folder holding it\n"
    "                            and its tokenizer_config.json, or the file) instead of the\n"
    "                            checkpoint's\n"
    "  --max-memory SIZE         activations the run may hold (8G, 512M; default half the machine's\n"
    "                            memory); a prompt whose widest activation (compressed attention's\n"
    "                            index scores grow with its square) passes it is refused up front,\n"
    "                            a run that reaches it at a stage is stopped there (both exit 2)\n"
    "  --layers 0-3|N|all        layers to replay (earlier layers run on the reference path only)\n"
    "  --backend auto|cpu|cuda   compute backend (auto: CUDA when a GPU is present)\n"
    "  --device N                CUDA device\n"
    "  --stack NAME              serving-stack profile: exact (default), vllm, vllm-old, ...\n"
    "  --override NAME=VALUE     replace one checkpoint scale (model.<module>.input_global_scale=...)\n"
    "                            or one derived parameter (<stage>.quant_mult=..., <stage>.alpha=...)\n"
    "  --reference-checkpoint DIR  original unquantized model for the reference path\n"
    "  --allow-unquantized       replay a checkpoint with no quantized module (else exit 2); the\n"
    "                            summary says nothing quantized was compared\n"
    "  --ref-numerics fp32|fp32-exact|transformers  reference-path numerics: fp32 (default) = exact\n"
    "                            dequantized weights, FP32 math, BF16 per stage output; fp32-exact = no\n"
    "                            BF16 rounding at all (transformers' FP32 forward); transformers = also the\n"
    "                            BF16 roundings transformers' eager BF16 forward takes inside stages (BF16\n"
    "                            weights, norms, RoPE, attention scores/probabilities, SwiGLU, V4 router)\n"
    "  --mode isolated|chained|both  (default both)\n"
    "  --out FILE.h5             trace file (default nvfp4dbg-trace.h5); an existing file (an earlier\n"
    "                            trace too) is kept and the run refused (exit 2) without --force; never\n"
    "                            an input of the run, a link, a folder or a device\n"
    "  --force                   let --out replace an existing file (an earlier trace or another file)\n"
    "  --dump stats|tensors      also store every stage's tensors\n"
    "  --prod-dump FILE.safetensors  activations captured from a real serving stack (tensors named\n"
    "                            after stages or modules, `<name>.input` optional; tools/capture_hook.py)\n"
    "                            judged against the reference path as rows of mode \"captured\"\n"
    "  --table                   every row (stage, op, mode, amax, NaN, cosine, SQNR, verdict) instead of\n"
    "                            the summary (the header, one line per layer, the diagnosis in brief)\n"
    "  --stage PATTERN           only the rows whose name holds PATTERN (a glob with * ? [...]); implies --table\n"
    "  --json                    one JSON document on stdout instead of the text\n"
    "  --color=auto|always|never colours: auto (the default) on a terminal only; NO_COLOR=1 or\n"
    "                            --no-color: never\n"
    "  --no-probes               benchmark baseline: run both paths and modes, measure nothing\n"
    "  --explain-all             also diagnose (by repair) up to 4 more diverged stages after the first\n"
    "  --stacks all|A,B          replay the model under every (or the named) serving-stack profile and\n"
    "                            print which would serve this checkpoint correctly\n"
    "  --apply-repair            re-run the whole model with the repair that proved the cause and print the\n"
    "                            final logits' KL divergence and top-1 agreement before and after\n"
    "  --ep N                    expert parallelism over N ranks, simulated in one process\n"
    "                            (contiguous E/N split, per-rank combine); names a diverging expert's rank\n"
    "\n"
    "example: nvfp4dbg trace golden/seed-bug-v4\n";


static int color_on(int no_color) { return !no_color && nd_cli_color(stdout); }


static json_t *diagnosis_json(const nd_diagnosis *d, int n) {
    json_t *list = json_array();
    for (int i = 0; i < n; i++) {
        json_t *o = json_object(), *tries = json_array();
        json_object_set_new(o, "stage", json_string(d[i].row));
        json_object_set_new(o, "cause", json_string(d[i].cause));
        json_object_set_new(o, "proof", json_string(d[i].proof == ND_PROOF_REPAIR ? "repair" : d[i].proof == ND_PROOF_STATIC ? "static" : "none"));
        json_object_set_new(o, "evidence", json_string(d[i].evidence));
        json_object_set_new(o, "sqnr_before_db", nd_json_finite(d[i].base.sqnr_db));
        json_object_set_new(o, "repair", d[i].chosen >= 0 ? json_string(d[i].tries[d[i].chosen].rep.name) : json_null());
        json_object_set_new(o, "sqnr_after_db", d[i].chosen >= 0 ? nd_json_finite(d[i].tries[d[i].chosen].row.sqnr_db) : json_null());
        json_object_set_new(o, "next_command", d[i].next_command[0] ? json_string(d[i].next_command) : json_null());
        for (int j = 0; j < d[i].n_tries; j++) {
            const nd_diag_try *t = &d[i].tries[j];
            json_t *x = json_object();
            json_object_set_new(x, "repair", json_string(t->rep.name));
            json_object_set_new(x, "change", json_string(t->rep.what));
            json_object_set_new(x, "cause", json_string(t->rep.cause));
            json_object_set_new(x, "sqnr_db", t->failed ? json_null() : nd_json_finite(t->row.sqnr_db));
            json_object_set_new(x, "floor_sqnr_db", t->failed ? json_null() : nd_json_finite(t->row.floor_sqnr_db));
            json_object_set_new(x, "restored", json_boolean(t->restored));
            json_array_append_new(tries, x);
        }
        json_object_set_new(o, "tries", tries);
        json_array_append_new(list, o);
    }
    return list;
}

/* What --json writes of the summary, the run and each row, in this order (keys: the field names). */
#define S(m, k) ND_JF(nd_trace_summary, m, ND_J_##k)
static const nd_jfield SUMMARY_FIELDS[] = {S(status, STR), S(first_divergence, STR), S(first_divergence_mode, STR),
                                           S(cause, STR), S(message, STR), S(evidence, STR)};
#undef S
#define R(m, k) ND_JF(nd_trace_result, m, ND_J_##k)
static const nd_jfield RUN_FIELDS[] = {R(recipe, STR), R(stack, STR), R(backend, STR), R(device, STR), R(elapsed_s, REAL),
                                       R(weight_bytes, I64), R(upload_s, REAL), R(gemm_flops_fp32, REAL),
                                       R(gemm_flops_bf16, REAL)};
#undef R
#define W(m, k) ND_JF(nd_row, m, ND_J_##k)
static const nd_jfield ROW_HEAD[] = {W(index, I32), W(layer, I32), W(name, STR), W(op, STR), W(mode, STR),
                                     W(quantized, BOOL8), W(ref_amax, REAL), W(prod_amax, REAL)};
static const nd_jfield ROW_FIGURES[] = {W(cosine, FINITE), W(rel_l2, FINITE), W(sqnr_db, FINITE), W(floor_sqnr_db, FINITE),
                                        W(sat_frac, FINITE), W(zero_block_frac, FINITE), W(scale_ratio, FINITE),
                                        W(weight_rel_l2, FINITE), W(topk_agree, FINITE), W(verdict, STR)};
#undef W

static void print_json(const nd_trace_result *res, const char *out, const nd_diagnosis *diag, int ndiag, json_t *check,
                       json_t *sweep, json_t *findings, int static_errors, json_t *quality) {
    json_t *root = json_object(), *rows = json_array();
    json_object_set_new(root, "static_errors", json_integer(static_errors));
    /* quantized modules of the replayed layers no stage of the recipe ran (exit 1) */
    json_object_set_new(root, "unreplayed_modules", json_integer(res->unreplayed));
    json_object_set_new(root, "unreplayed_first", json_string(res->unreplayed_first));
    json_object_set_new(root, "quality", quality);
    json_object_set_new(root, "stack_findings", findings ? findings : json_array());
    if (sweep) json_object_set_new(root, "stacks", sweep);
    json_object_set_new(root, "diagnosis", diagnosis_json(diag, ndiag));
    if (check) json_object_set_new(root, "repair_check", check);
    nd_json_put_fields(root, &res->summary, SUMMARY_FIELDS, ND_JF_COUNT(SUMMARY_FIELDS));
    json_object_set_new(root, "next_command", res->summary.next_command[0] ? json_string(res->summary.next_command) : json_null());
    json_object_set_new(root, "trace", out ? json_string(out) : json_null());
    nd_json_put_fields(root, res, RUN_FIELDS, ND_JF_COUNT(RUN_FIELDS));
    for (int64_t i = 0; i < res->nrows; i++) {
        const nd_row *r = &res->rows[i];
        json_t *o = json_object();
        nd_json_put_fields(o, r, ROW_HEAD, ND_JF_COUNT(ROW_HEAD));
        json_object_set_new(o, "ref_nan", json_integer(r->ref_nan + r->ref_inf));
        json_object_set_new(o, "prod_nan", json_integer(r->prod_nan + r->prod_inf));
        nd_json_put_fields(o, r, ROW_FIGURES, ND_JF_COUNT(ROW_FIGURES));
        json_array_append_new(rows, o);
    }
    json_object_set_new(root, "stages", rows);
    char *s = json_dumps(root, JSON_INDENT(1));
    if (s) { puts(s); free(s); }
    json_decref(root);
}

/* The head row of a run's chained path: the end-to-end effect on the logits. */
static const nd_row *head_row(const nd_row *rows, int64_t n) {
    const nd_row *h = NULL;
    for (int64_t i = 0; i < n; i++)
        if (!strcmp(rows[i].mode, "chained") && isfinite(rows[i].kl_div)) h = &rows[i];
    return h;
}

/* --apply-repair: the whole model again with the proven repair; when another stage then diverges
 * and a repair proves its cause too, that one is added, up to 8 rounds. The result is the set of
 * overrides that makes the whole run clean, each proven on its stage, and its effect on the logits. */
#define APPLY_ROUNDS 8
/* --apply-repair: the whole model re-run with each proven repair in turn. The text goes to txt
 * (printed after the table), the JSON to *out, and the figures into res->summary (the trace keeps
 * them: written before the trace is finished). */
static int check_repair(const nd_trace_opts *o, nd_trace_result *res, const nd_diagnosis *d0, int json, json_t **out, FILE *txt,
                        nd_err *e) {
    const char *rep[ND_DIAG_OVR_MAX];
    if (!nd_diagnosis_overrides(d0, rep, ND_DIAG_OVR_MAX)) {
        if (!json) fprintf(txt, "\n--apply-repair: no repair proved the cause; nothing to apply\n");
        return 0;
    }
    int cap = o->n_overrides + APPLY_ROUNDS * ND_DIAG_OVR_MAX, n = o->n_overrides;
    char (*own)[320] = calloc((size_t)APPLY_ROUNDS * ND_DIAG_OVR_MAX, sizeof *own);
    const char **ovr = calloc((size_t)cap, sizeof *ovr);
    if (!ovr || !own) { free(ovr); free(own); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
    for (int i = 0; i < o->n_overrides; i++) ovr[i] = o->overrides[i];
    int n_own = 0;
    const nd_diagnosis *d = d0;
    nd_diagnosis *next = NULL;
    int n_next = 0, rc = 0, rounds = 0;
    nd_trace_result after;
    memset(&after, 0, sizeof after);
    json_t *steps = json ? json_array() : NULL;
    if (!json) fprintf(txt, "\n--apply-repair: the whole model, repairs added while each proves the next divergence's cause:\n");
    for (;;) {
        const char *add[ND_DIAG_OVR_MAX];
        int na = nd_diagnosis_overrides(d, add, ND_DIAG_OVR_MAX);
        for (int i = 0; i < na; i++) {
            snprintf(own[n_own], sizeof own[0], "%s", add[i]);
            ovr[n++] = own[n_own++];
        }
        if (json) {
            json_t *st = json_object();
            json_object_set_new(st, "stage", json_string(d->row));
            json_object_set_new(st, "cause", json_string(d->cause));
            json_object_set_new(st, "repair", json_string(d->tries[d->chosen].rep.name));
            json_array_append_new(steps, st);
        } else {
            fprintf(txt, "  round %d: %s at %s: %s\n", rounds + 1, d->cause, d->row, d->tries[d->chosen].rep.what);
        }
        rounds++;
        nd_trace_opts r = *o;
        r.overrides = ovr;
        r.n_overrides = n;
        r.out_path = NULL;
        r.defer_finish = 0;
        r.progress = 0;
        nd_trace_result_free(&after);
        free(next);
        next = NULL;
        n_next = 0;
        if ((rc = nd_pipeline_trace(&r, &after, e))) break;
        if (!strcmp(after.summary.status, "ok") || rounds == APPLY_ROUNDS) break;
        if ((rc = nd_diagnose_run(&r, &after, 0, &next, &n_next, e))) break;
        if (!n_next || next[0].chosen < 0) break; /* the next divergence has no proven repair */
        d = &next[0];
    }
    if (!rc) {
        const nd_row *h0 = head_row(res->rows, res->nrows), *h1 = head_row(after.rows, after.nrows);
        char cmd[ND_CMD_LEN];
        /* every word shell-quoted: a path or override from the user's files is pasted as data */
        nd_next_command(o, (const char *const *)ovr + o->n_overrides, n - o->n_overrides, cmd, sizeof cmd);
        nd_trace_summary *s = &res->summary;
        snprintf(s->applied_command, sizeof s->applied_command, "%s", cmd);
        snprintf(s->applied_status, sizeof s->applied_status, "%s", after.summary.status);
        snprintf(s->applied_first, sizeof s->applied_first, "%s", after.summary.first_divergence);
        s->kl_before = h0 ? h0->kl_div : NAN;
        s->kl_after = h1 ? h1->kl_div : NAN;
        s->top1_before = h0 ? h0->top1_agree : NAN;
        s->top1_after = h1 ? h1->top1_agree : NAN;
        if (json) {
            json_t *c = json_object();
            json_object_set_new(c, "rounds", steps);
            steps = NULL;
            json_object_set_new(c, "command", json_string(cmd));
            json_object_set_new(c, "status_after", json_string(after.summary.status));
            json_object_set_new(c, "first_divergence_after", json_string(after.summary.first_divergence));
            json_object_set_new(c, "kl_before", h0 ? nd_json_finite(h0->kl_div) : json_null());
            json_object_set_new(c, "kl_after", h1 ? nd_json_finite(h1->kl_div) : json_null());
            json_object_set_new(c, "top1_before", h0 ? nd_json_finite(h0->top1_agree) : json_null());
            json_object_set_new(c, "top1_after", h1 ? nd_json_finite(h1->top1_agree) : json_null());
            *out = c;
        } else {
            if (h0 && h1)
                fprintf(txt, "  final logits (%s, production chained vs reference): KL %.4g -> %.4g, top-1 agreement %.1f%% -> %.1f%%\n",
                       h1->name, h0->kl_div, h1->kl_div, 100 * h0->top1_agree, 100 * h1->top1_agree);
            else fprintf(txt, "  (no head row: the run did not reach the logits; use all layers)\n");
            fprintf(txt, "  after the repairs: %s\n", strcmp(after.summary.status, "ok") ? after.summary.message : "no divergence left");
            /* a repaired run with nothing left diverging is this checkpoint's healthy NVFP4 path:
             * its figures are what NVFP4 itself costs, not a fault left over */
            if (!strcmp(after.summary.status, "ok") && h1)
                fprintf(txt, "  (top-1 %.1f%% and KL %.4g are the healthy NVFP4 figures of this checkpoint on these tokens: "
                        "nothing diverges after the repairs)\n", 100 * h1->top1_agree, h1->kl_div);
            fprintf(txt, "  command: %s\n", cmd);
        }
    }
    if (steps) json_decref(steps);
    nd_trace_result_free(&after);
    free(next);
    free(ovr);
    free(own);
    return rc;
}

/* With --layers, say what was replayed and what was not. */
static void print_slice(const nd_trace_opts *o, const nd_trace_result *res) {
    const int n = res->n_layers, lo = o->layer_lo > 0 ? o->layer_lo : 0;
    const int hi = o->layer_hi < 0 || o->layer_hi >= n ? n - 1 : o->layer_hi;
    if (n <= 0 || (lo == 0 && hi == n - 1)) return;
    printf("layers %d-%d replayed", lo, hi);
    if (lo > 0) printf("; layers 0-%d ran on the reference path only (their weights read, no rows)", lo - 1);
    if (hi < n - 1) printf("; layers %d-%d and the model's head were not run", hi + 1, n - 1);
    printf("\n");
}

/* set once this run put its own "began" marker at OUT.incomplete (mark_started) */
static int marked_started;

/* A run about to replay into an OUT that holds an earlier trace: an OUT.incomplete with no rows and
 * status "incomplete" is written first, before anything slow (the checkpoint, the recipe, the
 * device), so that a run killed in that window (SIGINT, SIGTERM, SIGKILL) leaves it and compare
 * refuses the earlier trace as this run's (round 24). The run's own trace replaces it. */
static int mark_started(const nd_trace_opts *o, nd_err *e) {
    struct stat st;
    if (lstat(o->out_path, &st) || !S_ISREG(st.st_mode) || !nd_trace_is_ours(o->out_path)) return 0;
    const nd_trace_meta meta = {.tool_version = ND_VERSION, .checkpoint = o->ckpt_dir ? o->ckpt_dir : ""};
    nd_trace_w *w = NULL;
    ND_TRY(nd_trace_create(o->out_path, &meta, NULL, 0, &w, e));
    marked_started = 1;
    return nd_trace_finish(w, NULL, e); /* no summary: the status stays "incomplete", OUT is kept */
}

/* A run that failed before it began its trace (exit 2/3: a bad option, checkpoint, recipe, ...)
 * leaves an earlier trace at OUT as it was; an OUT.incomplete saying so makes compare refuse that
 * earlier trace as this run's (docs/ci-gate.md), as it does after a run that failed later. */
static void mark_failed_run(const nd_trace_opts *o, int rc, const nd_err *e) {
    char inc[4096];
    struct stat st;
    /* this run's own "began" marker gives way to the one that says why it failed */
    if (marked_started && !nd_trace_incomplete_path(o->out_path, inc, sizeof inc)) unlink(inc);
    marked_started = 0;
    if (!o->out_path || lstat(o->out_path, &st) || !S_ISREG(st.st_mode) || !nd_trace_is_ours(o->out_path) ||
        nd_trace_incomplete_path(o->out_path, inc, sizeof inc) || lstat(inc, &st) == 0)
        return;
    char msg[sizeof e->msg + 64];
    snprintf(msg, sizeof msg, "the trace run to this path failed before its replay (exit %d)%s%s", rc, e->msg[0] ? ": " : "",
             e->msg);
    const nd_trace_meta meta = {.tool_version = ND_VERSION, .checkpoint = o->ckpt_dir ? o->ckpt_dir : ""};
    nd_err e2 = {0};
    char safe[4096];
    nd_term_safe(o->out_path, safe, sizeof safe);
    if (nd_trace_mark_failed(o->out_path, &meta, msg, &e2) == 0)
        fprintf(stderr, "nvfp4dbg: the earlier trace %s is kept; %s.incomplete records this failed run, so compare refuses "
                "the earlier one until a trace run to it finishes\n", safe, safe);
}

/* The --out a command line names (the last one), read past an argument refused earlier in it: a run
 * refused while its arguments are read marks the output it asked for, not the default one. Options
 * that take a value skip it, so a value spelled "--out" is not read as the option. */
static const char *named_out(int argc, char **argv, const char *dflt) {
    static const char *const VALUED[] = {"--recipe", "--tokens", "--max-memory", "--tokens-file", "--layers", "--backend",
                                         "--device", "--stack", "--override", "--reference-checkpoint", "--mode", "--dump",
                                         "--prod-dump", "--ref-numerics", "--stage", "--stacks", "--ep"};
    const char *out = dflt;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        nd_prompt scratch = {0};
        const int pr = nd_prompt_option(&scratch, a, v);
        if (pr > 0) { i += pr - 1; continue; }
        if (!strcmp(a, "--out")) { if (v) out = v; i++; continue; }
        for (size_t k = 0; k < sizeof VALUED / sizeof VALUED[0]; k++)
            if (!strcmp(a, VALUED[k])) { i++; break; }
    }
    return out;
}

void nd_trace_args_refused(int argc, char **argv, int rc) {
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.out_path = "nvfp4dbg-trace.h5";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if ((!strcmp(a, "--out") || !strcmp(a, "-o")) && i + 1 < argc) o.out_path = argv[++i];
        else if (!strncmp(a, "--out=", 6)) o.out_path = a + 6;
        else if (!strncmp(a, "-o", 2) && a[2]) o.out_path = a[2] == '=' ? a + 3 : a + 2;
    }
    nd_err e = {0};
    nd_fail(&e, rc, "the command line was refused");
    mark_failed_run(&o, rc, &e);
}

int nd_cmd_trace(int argc, char **argv) {
    nd_trace_opts o;
    memset(&o, 0, sizeof o);
    o.backend = "auto";
    o.layer_hi = -1;
    o.out_path = "nvfp4dbg-trace.h5";
    o.progress = 1;
    const char **ovr = calloc((size_t)argc, sizeof *ovr);
    int64_t *tokens = NULL, ntok = 0;
    int json = 0, no_color = 0, rc = 0, explain_all = 0, apply_repair = 0, force = 0, began = 0, help = 0;
    char *apply_txt = NULL; /* --apply-repair's text, printed after the table */
    size_t apply_len = 0;
    const char *tokens_file = NULL;
    nd_diagnosis *diag = NULL;
    int ndiag = 0;
    json_t *check = NULL, *sweep = NULL, *findings = NULL;
    int n_static = 0, n_blind = 0; /* static errors on modules of the replayed layers the replay did not judge (exit 1);
                                    * of them, those on modules it ran (a fault both paths share) */
    const char *stacks = NULL, *stage = NULL;
    int table = 0;
    nd_err e = {0};
    nd_prompt prompt = {0};
    if (!ovr) return ND_EXIT_INTERNAL;
    for (int i = 1; i < argc && !rc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED() do { if (!v) { rc = nd_cli_usage_error("trace", "%s needs a value", a); goto out; } i++; } while (0)
        int pr = nd_prompt_option(&prompt, a, v);
        if (pr < 0) { rc = nd_cli_usage_error("trace", "%s needs a value", a); goto out; }
        if (pr) { i += pr - 1; continue; }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage_text, stdout); help = 1; goto out; }
        else if (!strcmp(a, "--recipe")) { NEED(); o.recipe = v; }
        else if (!strcmp(a, "--tokens")) { NEED(); o.tokens_opt = a; o.tokens_val = v; free(tokens); if (nd_tokens_parse(v, "--tokens", &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--max-memory")) { NEED(); if (nd_parse_size(v, &o.max_memory)) { rc = nd_cli_usage_error("trace", "--max-memory %s: expected a size such as 8G, 512M or 1.5G (at least 1M)", v); goto out; } }
        else if (!strcmp(a, "--tokens-file")) { NEED(); tokens_file = v; o.tokens_opt = a; o.tokens_val = v; free(tokens); if (nd_tokens_file(v, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; } }
        else if (!strcmp(a, "--layers")) { NEED(); if (nd_parse_layers(v, &o.layer_lo, &o.layer_hi)) { rc = nd_cli_usage_error("trace", "--layers %s: expected N, A-B or all", v); goto out; } }
        else if (!strcmp(a, "--backend")) { NEED(); o.backend = v; }
        else if (!strcmp(a, "--device")) { NEED(); if (nd_parse_device(v, &o.device)) { rc = nd_cli_usage_error("trace", "--device %s: expected a device index (0, 1, ...)", v); goto out; } }
        else if (!strcmp(a, "--stack")) { NEED(); o.stack = v; }
        else if (!strcmp(a, "--override")) { NEED(); ovr[o.n_overrides++] = v; }
        else if (!strcmp(a, "--reference-checkpoint")) { NEED(); o.ref_ckpt = v; }
        else if (!strcmp(a, "--allow-unquantized")) o.allow_unquantized = 1;
        else if (!strcmp(a, "--mode")) {
            NEED();
            if (!strcmp(v, "isolated")) o.modes = ND_MODES_ISOLATED;
            else if (!strcmp(v, "chained")) o.modes = ND_MODES_CHAINED;
            else if (!strcmp(v, "both")) o.modes = ND_MODES_BOTH;
            else { rc = nd_cli_usage_error("trace", "--mode %s: expected isolated, chained or both", v); goto out; }
        }
        else if (!strcmp(a, "--out")) { NEED(); o.out_path = v; }
        else if (!strcmp(a, "--force")) force = 1;
        else if (!strcmp(a, "--dump")) {
            NEED();
            if (!strcmp(v, "tensors")) o.dump_tensors = 1;
            else if (strcmp(v, "stats")) { rc = nd_cli_usage_error("trace", "--dump %s: expected stats or tensors", v); goto out; }
        }
        else if (!strcmp(a, "--prod-dump")) { NEED(); o.prod_dump = v; }
        else if (!strcmp(a, "--ref-numerics")) {
            NEED();
            if (strcmp(v, "fp32") && strcmp(v, "fp32-exact") && strcmp(v, "transformers")) {
                rc = nd_cli_usage_error("trace", "--ref-numerics %s: expected fp32, fp32-exact or transformers", v);
                goto out;
            }
            o.ref_numerics = v;
        }
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--table")) table = 1;
        else if (!strcmp(a, "--stage")) { NEED(); stage = v; table = 1; }
        else if (!strcmp(a, "--no-probes")) o.no_probes = 1;
        else if (!strcmp(a, "--explain-all")) explain_all = 1;
        else if (!strcmp(a, "--apply-repair")) apply_repair = 1;
        else if (!strcmp(a, "--stacks")) { NEED(); stacks = v; }
        else if (!strcmp(a, "--ep")) {
            NEED();
            char *end;
            long n = strtol(v, &end, 10);
            if (*end || n < 1 || n > 1024) { rc = nd_cli_usage_error("trace", "--ep %s: expected a rank count 1..1024", v); goto out; }
            o.ep = (int)n;
        }
        else if (!strcmp(a, "--no-color")) no_color = 1;
        else if (a[0] == '-') { rc = nd_cli_usage_error("trace", "unknown option %s", a); goto out; }
        else if (!o.ckpt_dir) o.ckpt_dir = a;
        else { rc = nd_cli_usage_error("trace", "unexpected argument %s", a); goto out; }
#undef NEED
    }
    if (!o.ckpt_dir) {
        fputs(usage_text, stderr);
        fputs("\nnvfp4dbg: trace: no checkpoint given; try the shipped seed-bug checkpoint: nvfp4dbg trace golden/seed-bug-v4\n", stderr);
        rc = ND_EXIT_BADINPUT;
        goto out;
    }
    if (prompt.chat && !nd_prompt_given(&prompt)) { rc = nd_cli_usage_error("trace", "--chat needs --prompt or --prompt-file"); goto out; }
    if (o.no_probes && apply_repair) { rc = nd_cli_usage_error("trace", "--apply-repair needs the diagnosis, which --no-probes turns off"); goto out; }
    {   /* the trace never replaces an input of the run, a link or a device (util/outfile.h) */
        /* a --tokenizer file, and the chat template read beside it (a --tokenizer folder is an
         * input folder as a checkpoint is) */
        char tk_cfg[4096] = "";
        struct stat tst;
        if (prompt.tokenizer && stat(prompt.tokenizer, &tst) == 0 && !S_ISDIR(tst.st_mode)) {
            const char *sl = strrchr(prompt.tokenizer, '/');
            snprintf(tk_cfg, sizeof tk_cfg, "%.*stokenizer_config.json", sl ? (int)(sl - prompt.tokenizer + 1) : 0, prompt.tokenizer);
        }
        const char *inputs[48] = {o.ckpt_dir, o.ref_ckpt, o.prod_dump, tokens_file, prompt.file, prompt.tokenizer,
                                  tk_cfg[0] ? tk_cfg : NULL};
        int n_in = 7;
        char rbuf[8192];
        const char *recipe_args[] = {o.recipe, o.stack, stacks};
        nd_recipe_inputs(recipe_args, 3, inputs, &n_in, 48, rbuf, sizeof rbuf);
        const nd_out_rules rules = {.what = "trace", .inputs = inputs, .n_inputs = n_in, .force = force, .ours = nd_trace_is_ours,
                                    .keep_ours = 1, .other_hint = "or give another --out"};
        if (nd_out_check(o.out_path, &rules, &e)) { rc = nd_cli_error(&e); goto out; }
        if (mark_started(&o, &e)) { rc = nd_cli_error(&e); goto out; }
    }
    if (nd_prompt_given(&prompt)) {
        if (nd_prompt_tokens(&prompt, o.ckpt_dir, tokens != NULL, &tokens, &ntok, &e)) { rc = nd_cli_error(&e); goto out; }
        o.prompt_text = nd_prompt_text(&prompt);
        o.prompt_chat = prompt.chat_name;
        o.tokens_opt = prompt.file ? "--prompt-file" : "--prompt";
        o.tokens_val = prompt.file ? prompt.file : prompt.text;
        o.tokenizer = prompt.tokenizer;
    }
    if (stacks && nd_trace_stacks_check(stacks, &e)) { rc = nd_cli_error(&e); goto out; }
    o.tokens = tokens;
    o.ntok = ntok;
    o.overrides = ovr;
    nd_trace_result res;
    o.defer_finish = 1;
    rc = nd_pipeline_trace(&o, &res, &e);
    began = res.trace_created;
    nd_prompt_explain_vocab(&prompt, &e);
    /* an override that matched nothing: the run tested nothing, and its trace never replaces an
     * earlier one (finished without a summary: a failed run's, trace.h) */
    if (!rc && res.warning[0] && strstr(res.warning, "--override"))
        rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s (in the replayed layers): the run tests nothing", res.warning);
    /* a stack behaviour the recipe does not model: "no divergence" would claim the stack serves it */
    if (!rc && res.unmodelled[0])
        rc = nd_fail(&e, ND_EXIT_BADINPUT, "%s: trace it with another --stack, or the one without that key "
                     "(docs/stacks.md)", res.unmodelled);
    /* the diagnosis above the pipeline: replay the diverged stage under candidate repairs */
    if (!rc && !o.no_probes) rc = nd_diagnose_run(&o, &res, explain_all ? 4 : 0, &diag, &ndiag, &e);
    /* --apply-repair before the trace is finished: its figures go into /summary */
    if (!rc && apply_repair && ndiag) {
        FILE *txt = open_memstream(&apply_txt, &apply_len);
        rc = txt ? check_repair(&o, &res, &diag[0], json, &check, txt, &e) : nd_fail(&e, ND_EXIT_INTERNAL, "out of memory");
        if (txt) fclose(txt);
    }
    if (res.tw) {
        int rc2 = nd_trace_finish(res.tw, rc ? NULL : &res.summary, &e);
        res.tw = NULL;
        if (!rc) rc = rc2;
    }
    if (!rc && stacks && json) rc = nd_trace_stack_sweep(&o, stacks, 1, &sweep, &e);
    if (!rc && json && !o.no_probes) rc = nd_trace_stack_findings(o.ckpt_dir, o.stack, o.overrides, o.n_overrides, 1, o.layer_lo, o.layer_hi, res.rows, res.nrows, &n_static, &n_blind, &findings, &e);
    if (rc) {
        nd_cli_error(&e);
        if (res.nrows && !json) {
            /* a run that could not write its trace whole leaves it at OUT.incomplete (trace.h) */
            char inc[4096];
            const int aside = !nd_trace_incomplete_path(o.out_path, inc, sizeof inc) && access(inc, F_OK) == 0;
            const char *kept = aside ? inc : o.out_path;
            /* say what a reader finds there: when the failure was a write the trace file refused (its
             * messages begin with its path: a size limit, a full disk), the cut file may not open;
             * it is not opened here to find out (HDF5 keeps memory of a file it fails to open) */
            char ks[4200];
            nd_term_safe(kept, ks, sizeof ks);
            if (strncmp(e.msg, o.out_path, strlen(o.out_path)))
                fprintf(stderr, "nvfp4dbg: the trace keeps the %lld rows written before the failure: %s\n", (long long)res.nrows, ks);
            else
                fprintf(stderr, "nvfp4dbg: the failed write may have cut the trace file %s so that it does not open (it stays "
                        "so that compare refuses an earlier trace at that path)\n", ks);
        }
        nd_trace_result_free(&res);
        goto out;
    }
    int64_t first = -1;
    for (int64_t i = 0; i < res.nrows; i++)
        if (!strcmp(res.rows[i].name, res.summary.first_divergence) && !strcmp(res.rows[i].mode, res.summary.first_divergence_mode)) { first = i; break; }
    nd_quality quality;
    nd_quality_of(res.rows, res.nrows, o.ntok, &quality);
    if (json) {
        print_json(&res, o.out_path, diag, ndiag, check, sweep, findings, n_static, nd_trace_quality_json(&quality, o.ref_ckpt != NULL));
        check = sweep = findings = NULL;
    }
    else {
        /* summary first (issue 22): header, the static findings that break this stack, one line
         * per layer, the verdict and the diagnosis last, where the screen ends */
        const int width = nd_term_width(1), color = color_on(no_color);
        nd_trace_print_header(&o, &res, width);
        if (!o.no_probes && (rc = nd_trace_stack_findings(o.ckpt_dir, o.stack, o.overrides, o.n_overrides, table ? 0 : 2, o.layer_lo, o.layer_hi,
                                                         res.rows, res.nrows, &n_static, &n_blind, NULL, &e))) {
            nd_cli_error(&e);
            nd_trace_result_free(&res);
            goto out;
        }
        if (table) { printf("\n"); nd_trace_print_table(res.rows, res.nrows, first, color, stage, width); }
        else nd_trace_print_layers(&res, first, color, width);
        /* what NVFP4 costs, on a healthy run only: after a divergence the logits show the fault */
        if (!strcmp(res.summary.status, "ok")) nd_trace_print_quality(&quality, o.ref_ckpt != NULL, width);
        nd_trace_print_verdict(&res, diag, ndiag, table, width);
        if (n_static && strcmp(res.summary.status, "diverged")) {
            char line[768];
            const int unrun = n_static - n_blind;
            if (unrun)
                snprintf(line, sizeof line,
                         "but %d static finding%s above break%s stack %s on a module of the replayed layers that the replay "
                         "did not run (an expert no token was routed to): the prompt cannot show it, yet the checkpoint is not "
                         "healthy under %s (exit 1)",
                         unrun, unrun == 1 ? "" : "s", unrun == 1 ? "s" : "", res.stack, res.stack);
            if (n_blind)
                snprintf(line + (unrun ? strlen(line) : 0), sizeof line - (unrun ? strlen(line) : 0),
                         "%s%d static finding%s above break%s stack %s on what the weights or the config mean, which moves "
                         "the reference and the production path alike (or a loader, not the replay): a clean replay cannot "
                         "clear %s (exit 1; --reference-checkpoint compares against the original)",
                         unrun ? "; and " : "but ", n_blind, n_blind == 1 ? "" : "s", n_blind == 1 ? "s" : "", res.stack,
                         n_blind == 1 ? "it" : "them");
            nd_term_wrap(stdout, line, 2, 0, width);
        }
        if (res.unreplayed) {
            char line[1024], fm[600];
            snprintf(line, sizeof line,
                     "but %d quantized module%s of the checkpoint ran in no stage of recipe %s (first: %s): the replay is no "
                     "verdict on %s; a recipe that skips part of the model tests part of it (exit 1)",
                     res.unreplayed, res.unreplayed == 1 ? "" : "s", res.recipe, nd_term_safe(res.unreplayed_first, fm, sizeof fm),
                     res.unreplayed == 1 ? "it" : "them");
            nd_term_wrap(stdout, line, 2, 0, width);
        }
        if (apply_txt) fputs(apply_txt, stdout);
        if (stacks && (rc = nd_trace_stack_sweep(&o, stacks, 0, NULL, &e))) {
            nd_cli_error(&e);
            nd_trace_result_free(&res);
            goto out;
        }
        print_slice(&o, &res);
        char os[16384];
        printf("trace written to %s\n", nd_term_safe(o.out_path, os, sizeof os));
    }
    int quantized = 0;
    for (int64_t i = 0; i < res.nrows && !quantized; i++) quantized = res.rows[i].quantized && !strcmp(res.rows[i].op, "linear");
    if (o.no_probes && !json) {
        printf("note: --no-probes: nothing was measured or judged (a timing baseline), so \"no divergence\" says nothing\n");
    } else if (!quantized && !json) {
        char dir[1024];
        printf("note: %s holds no quantized stage%s: both paths ran the same weights, nothing quantized was compared\n",
               nd_term_safe(o.ckpt_dir, dir, sizeof dir), o.allow_unquantized ? " (--allow-unquantized)" : "");
    }
    rc = strcmp(res.summary.status, "diverged") && !n_static && !res.unreplayed ? ND_EXIT_OK : ND_EXIT_FINDING;
    if (res.warning[0]) fprintf(stderr, "nvfp4dbg: warning: %s\n", res.warning); /* (an unused override ended the run above) */
    nd_trace_result_free(&res);
out:
    if (rc != ND_EXIT_OK && rc != ND_EXIT_FINDING && !began && !help) {
        o.out_path = named_out(argc, argv, "nvfp4dbg-trace.h5");
        mark_failed_run(&o, rc, &e);
    }
    free(diag);
    free(apply_txt);
    if (check) json_decref(check);
    if (sweep) json_decref(sweep);
    if (findings) json_decref(findings);
    free(tokens);
    free(ovr);
    nd_prompt_free(&prompt);
    return rc;
}
