/* compare.c — `nvfp4dbg compare RUN.h5 GOLDEN.h5 [--tolerances FILE.yaml] [--json]`, the CI gate
 * (SPEC §3, docs/ci-gate.md). Exit 0: no regression; 1: regression; 2: bad usage or input,
 * including a trace whose run did not finish (status "incomplete"): a partial trace is never
 * passed, and it is not a comparison result either. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <limits.h>
#include <string.h>

#include "cli/cli.h"
#include "trace/trace.h"
#include "util/term.h"
#include "json_fields.h"

static const char usage[] =
    "usage: nvfp4dbg compare RUN.h5 GOLDEN.h5 [--tolerances FILE.yaml] [--max N] [--json]\n"
    "\n"
    "Compares a trace with a golden trace: stages are matched by (name, mode); every figure must\n"
    "stay within |run - golden| <= abs + rel * |golden| (defaults: recipes/tolerances.yaml).\n"
    "Always regressions: a missing stage, NaN/Inf where the golden has none, a changed verdict,\n"
    "a changed first divergence or status. A golden without a stage the run has is no golden for\n"
    "it: refused (exit 2).\n"
    "\n"
    "  --tolerances FILE  override the default tolerances (per figure, per op kind, per stage glob)\n"
    "  --max N            table rows shown, worst first (default 20; 0: all); the rest are\n"
    "                     counted per figure\n"
    "  --json             print one JSON document instead of the table (every row)\n"
    "\n"
    "Exit: 0 no regression, 1 regression (also a run whose status is error: its status and the stages it\n"
    "never reached are regressions), 2 bad usage or input (also an unfinished trace, or a golden whose\n"
    "status is error).\n"
    "\n"
    "example: nvfp4dbg trace golden/seed-bug-v4 -o run.h5; nvfp4dbg compare run.h5 golden/traces/seed-bug-v4.h5\n";

static void fmt_num(char *buf, size_t n, double v) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else snprintf(buf, n, "%.8g", v);
}

static int is_numeric(const nd_cmp_item *it) {
    return it->kind == ND_CMP_FIGURE || it->kind == ND_CMP_NONFINITE || it->kind == ND_CMP_COUNT;
}

static void cells(const nd_cmp_item *it, char g[160], char r[160], char d[32], char t[32]) {
    if (is_numeric(it)) {
        fmt_num(g, 160, it->golden); fmt_num(r, 160, it->run); fmt_num(d, 32, it->delta); fmt_num(t, 32, it->tol);
    } else if (it->kind == ND_CMP_MISSING || it->kind == ND_CMP_EXTRA) {
        snprintf(g, 160, "%s", it->kind == ND_CMP_MISSING ? "present" : "-");
        snprintf(r, 160, "%s", it->kind == ND_CMP_MISSING ? "-" : "present");
        snprintf(d, 32, "-"); snprintf(t, 32, "-");
    } else {
        snprintf(g, 160, "%s", it->golden_s[0] ? it->golden_s : "\"\"");
        snprintf(r, 160, "%s", it->run_s[0] ? it->run_s : "\"\"");
        snprintf(d, 32, "changed"); snprintf(t, 32, "exact");
    }
}

/* What the gate compared, in numbers (issue 37): a pass over nothing must be visible as such. */
static void print_compared(const nd_cmp_result *res, const char *tolpath) {
    printf("compared: %lld golden rows of %lld stages, %lld rows in both traces figure by figure (%lld figures); "
           "tolerances: ", (long long)res->nstages, (long long)res->nnames, (long long)res->nmatched, (long long)res->nfigures);
    if (tolpath) {
        /* the file's default: section applies wherever no rule does */
        if (res->nrules) printf("%d of the %d rules of %s applied, its defaults elsewhere\n", res->nrules_used, res->nrules, tolpath);
        else printf("the defaults of %s on every stage (it has no stage or op rules)\n", tolpath);
    }
    else printf("the defaults (recipes/tolerances.yaml)\n");
}

static void print_closing(const nd_cmp_result *res) {
    if (res->nregressions == 0) {
        printf("compare: 0 regressions in %lld stages", (long long)res->nstages);
    } else {
        const nd_cmp_item *f = &res->items[res->first];
        char nm[4 * ND_NAME_LEN];
        char md[4 * ND_MODE_LEN];
        printf("compare: %d regression%s (first: %s%s%s %s)", res->nregressions, res->nregressions == 1 ? "" : "s",
               nd_term_safe(f->stage, nm, sizeof nm), f->mode[0] ? " " : "", nd_term_safe(f->mode, md, sizeof md), f->what);
    }
    if (res->nextra) printf(" (%d extra stage%s in the run)", res->nextra, res->nextra == 1 ? "" : "s");
    printf("\n");
}

/* The rows past --max, counted per figure ("cosine 300, sqnr_db 200, ..."), most first. */
static void print_rest(const nd_cmp_result *res, int shown) {
    enum { MAXK = 48 };
    const char *what[MAXK];
    int count[MAXK], nk = 0, other = 0;
    for (int i = shown; i < res->nitems; i++) {
        int k = 0;
        while (k < nk && strcmp(what[k], res->items[i].what)) k++;
        if (k == nk) {
            if (nk == MAXK) { other++; continue; }
            what[nk] = res->items[i].what;
            count[nk++] = 0;
        }
        count[k]++;
    }
    printf("... %d more row%s not shown (--max 0 shows all; --json lists all): ", res->nitems - shown,
           res->nitems - shown == 1 ? "" : "s");
    for (int j = 0; j < nk; j++) {
        int best = j;
        for (int k = j + 1; k < nk; k++)
            if (count[k] > count[best]) best = k;
        const char *tw = what[j]; what[j] = what[best]; what[best] = tw;
        const int tc = count[j]; count[j] = count[best]; count[best] = tc;
        printf("%s%s %d", j ? ", " : "", what[j], count[j]);
    }
    if (other) printf(", other %d", other);
    printf("\n");
}

static void print_table(const nd_cmp_result *res, const char *tolpath, int max) {
    const int shown = max > 0 && max < res->nitems ? max : res->nitems;
    if (res->nitems) {
        int w = 5;
        for (int i = 0; i < res->nitems; i++) {
            int n = (int)strlen(res->items[i].stage);
            if (n > w) w = n;
        }
        if (w > 64) w = 64;
        printf("%-*s  %-9s %-16s %14s %14s %12s %12s\n", w, "stage", "mode", "figure", "golden", "run", "delta",
               "tolerance");
        for (int i = 0; i < shown; i++) {
            const nd_cmp_item *it = &res->items[i];
            char g[160], r[160], d[32], t[32];
            cells(it, g, r, d, t);
            /* every string that came from a trace file is made safe for the terminal (issue 37) */
            char nm[4 * ND_NAME_LEN], md[4 * ND_MODE_LEN], gs[4 * sizeof g], rs[4 * sizeof r];
            printf("%-*s  %-9s %-16s %14s %14s %12s %12s\n", w, nd_term_safe(it->stage, nm, sizeof nm),
                   it->mode[0] ? nd_term_safe(it->mode, md, sizeof md) : "-", it->what, nd_term_safe(g, gs, sizeof gs),
                   nd_term_safe(r, rs, sizeof rs), d, t);
        }
        if (shown < res->nitems) print_rest(res, shown);
    }
    print_compared(res, tolpath);
    print_closing(res);
}

static const char *kind_name(int k) {
    switch (k) {
    case ND_CMP_FIGURE: return "figure";
    case ND_CMP_NONFINITE: return "new_nonfinite";
    case ND_CMP_COUNT: return "nonfinite_count";
    case ND_CMP_FIELD: return "field";
    case ND_CMP_VERDICT: return "verdict";
    case ND_CMP_MISSING: return "missing_stage";
    case ND_CMP_EXTRA: return "extra_stage";
    case ND_CMP_SUMMARY: return "summary";
    }
    return "?";
}

/* What --json writes of the result and of each item, in this order. */
#define C(key, m, k) ND_JF_KEY(nd_cmp_result, key, m, ND_J_##k)
static const nd_jfield RESULT_FIELDS[] = {C("stages", nstages, I64), C("regressions", nregressions, I32),
                                          C("missing", nmissing, I32), C("extra", nextra, I32)};
#undef C
#define IT(key, m, k) ND_JF_KEY(nd_cmp_item, key, m, ND_J_##k)
static const nd_jfield ITEM_HEAD[] = {IT("stage", stage, STR), IT("mode", mode, STR), IT("figure", what, STR)};
static const nd_jfield ITEM_TEXT[] = {IT("golden", golden_s, STR), IT("run", run_s, STR)};
static const nd_jfield ITEM_NUMBERS[] = {IT("golden", golden, SPELLED), IT("run", run, SPELLED), IT("delta", delta, SPELLED),
                                         IT("tolerance", tol, SPELLED)};
#undef IT

static int print_json(const nd_cmp_result *res, const char *run, const char *golden, const char *tolpath) {
    json_t *doc = json_object(), *items = json_array();
    json_object_set_new(doc, "run", json_string(run));
    json_object_set_new(doc, "golden", json_string(golden));
    json_object_set_new(doc, "result", json_string(res->nregressions ? "regression" : "clean"));
    nd_json_put_fields(doc, res, RESULT_FIELDS, ND_JF_COUNT(RESULT_FIELDS));
    json_object_set_new(doc, "compared", json_pack("{s:I, s:I, s:I, s:I, s:o, s:i, s:i}", "golden_rows", (json_int_t)res->nstages,
                                                   "stage_names", (json_int_t)res->nnames, "rows_in_both", (json_int_t)res->nmatched,
                                                   "figures", (json_int_t)res->nfigures, "tolerances",
                                                   tolpath ? json_string(tolpath) : json_null(), "rules", res->nrules,
                                                   "rules_applied", res->nrules_used));
    for (int i = 0; i < res->nitems; i++) {
        const nd_cmp_item *it = &res->items[i];
        json_t *o = json_object();
        nd_json_put_fields(o, it, ITEM_HEAD, ND_JF_COUNT(ITEM_HEAD));
        json_object_set_new(o, "kind", json_string(kind_name(it->kind)));
        json_object_set_new(o, "regression", json_boolean(it->regression));
        if (is_numeric(it)) {
            nd_json_put_fields(o, it, ITEM_NUMBERS, ND_JF_COUNT(ITEM_NUMBERS));
        } else if (it->kind != ND_CMP_MISSING && it->kind != ND_CMP_EXTRA) {
            nd_json_put_fields(o, it, ITEM_TEXT, ND_JF_COUNT(ITEM_TEXT));
        }
        json_array_append_new(items, o);
    }
    json_object_set_new(doc, "items", items);
    if (res->first >= 0) {
        const nd_cmp_item *f = &res->items[res->first];
        json_t *o = json_object();
        json_object_set_new(o, "stage", json_string(f->stage));
        json_object_set_new(o, "mode", json_string(f->mode));
        json_object_set_new(o, "figure", json_string(f->what));
        json_object_set_new(doc, "first", o);
    } else {
        json_object_set_new(doc, "first", json_null());
    }
    int rc = json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    printf("\n");
    json_decref(doc);
    return rc ? ND_EXIT_INTERNAL : 0;
}

/* rows by (stage, mode), to find one written twice */
static int row_key_cmp(const void *a, const void *b) {
    const nd_row *x = *(const nd_row *const *)a, *y = *(const nd_row *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->mode, y->mode);
}

/* A trace compare can use: read, and finished. A run whose status is error is compared (its status
 * and missing stages are regressions); a golden must come from a run that finished. */
static int load(const char *path, int golden, nd_trace **t, nd_err *e) {
    /* a trace run to this path that did not end leaves PATH.incomplete and the earlier trace at
     * PATH: gating that earlier trace would pass a run that never finished */
    char inc[4096];
    struct stat si, sp;
    char *real = realpath(path, NULL); /* a link to the trace: its .incomplete is beside the file it names */
    const int have_inc = !nd_trace_incomplete_path(real ? real : path, inc, sizeof inc);
    free(real);
    if (!golden && have_inc && stat(inc, &si) == 0 && stat(path, &sp) == 0 &&
        (si.st_mtim.tv_sec > sp.st_mtim.tv_sec || (si.st_mtim.tv_sec == sp.st_mtim.tv_sec && si.st_mtim.tv_nsec >= sp.st_mtim.tv_nsec)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is newer: the last trace run to this path did not finish (killed, a "
                       "write failed, or it ended in an error), so %s is an earlier run's; not gating it", path, inc, path);
    ND_TRY(nd_trace_read(path, t, e));
    const char *why = !(*t)->has_summary ? "it has no /summary"
                      : !strcmp((*t)->summary.status, "incomplete") ? "status 'incomplete': the run that wrote it did not finish"
                      : !strcmp((*t)->summary.status, "unjudged") ? "status 'unjudged': made with --no-probes, it measured nothing"
                      : strcmp((*t)->summary.status, "ok") && strcmp((*t)->summary.status, "diverged") && strcmp((*t)->summary.status, "error")
                          ? "an unknown status (ok, diverged, error, incomplete or unjudged are written)"
                      : golden && !strcmp((*t)->summary.status, "error")
                          ? "status 'error': the run that wrote it failed, and a golden must come from a finished run"
                          : NULL;
    if (why) {
        nd_trace_free(*t);
        *t = NULL;
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a trace the gate can use (%s); compare needs a finished, judged trace", path, why);
    }
    /* a golden holds one row per (stage, mode): one that holds a row twice was not written by a run
     * (a run refuses it), and the gate would judge against whichever it met first (in the run, a
     * duplicate is a regression: compare_traces says so) */
    if (!golden) return 0;
    const nd_row **idx = malloc(sizeof *idx * (size_t)((*t)->nrows ? (*t)->nrows : 1));
    if (!idx) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int64_t i = 0; i < (*t)->nrows; i++) idx[i] = &(*t)->rows[i];
    qsort(idx, (size_t)(*t)->nrows, sizeof *idx, row_key_cmp);
    int rc = 0;
    for (int64_t i = 1; i < (*t)->nrows && !rc; i++)
        if (!row_key_cmp(&idx[i - 1], &idx[i])) {
            char ns[4 * ND_NAME_LEN];
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: holds the row of stage %s (%s) twice; a run writes each once, so it is no golden", path,
                         nd_term_safe(idx[i]->name, ns, sizeof ns), idx[i]->mode);
        }
    free(idx);
    if (rc) {
        nd_trace_free(*t);
        *t = NULL;
    }
    return rc;
}

/* The gate compares like with like: a run made under another serving-stack profile or other
 * reference numerics than its golden differs by design, and a pass or a regression would say
 * nothing about the checkpoint (report --against, for looking, allows it). */
static int same_setup(const char *rp, const nd_trace *run, const char *gp, const nd_trace *golden, nd_err *e) {
    if (strcmp(run->stack, golden->stack))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: made under stacks %s and %s (trace --stack)", rp, gp,
                       run->stack, golden->stack);
    const char *a = run->ref_numerics[0] ? run->ref_numerics : "fp32", *b = golden->ref_numerics[0] ? golden->ref_numerics : "fp32";
    if (strcmp(a, b))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: reference numerics %s and %s (trace --ref-numerics)", rp,
                       gp, a, b);
    return 0;
}

/* The gate could not compare (exit 2): under --json a document still reaches stdout, so a CI step
 * that parses it reads why instead of nothing (round 24). The message goes to stderr as always. */
static int refused(int json, const char *run, const char *golden, const nd_err *e) {
    if (json) {
        json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:s}", "run", run ? run : "", "golden", golden ? golden : "", "result",
                                "error", "exit", e->code ? e->code : ND_EXIT_BADINPUT, "message", e->msg);
        if (doc) {
            json_dumpf(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII);
            printf("\n");
            json_decref(doc);
        }
    }
    return nd_cli_error(e);
}

int nd_cmd_compare(int argc, char **argv) {
    const char *cmd = "compare", *pos[2] = {NULL, NULL}, *tolpath = NULL;
    int npos = 0, json = 0, max = 20;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--tolerances")) {
            if (++i >= argc) return nd_cli_usage_error(cmd, "--tolerances needs a file");
            tolpath = argv[i];
        } else if (!strncmp(a, "--tolerances=", 13)) {
            tolpath = a + 13;
        } else if (!strcmp(a, "--max") || !strncmp(a, "--max=", 6)) {
            const char *v = a[5] == '=' ? a + 6 : ++i < argc ? argv[i] : NULL;
            char *end = NULL;
            long m = v && *v >= '0' && *v <= '9' ? strtol(v, &end, 10) : -1;
            if (m < 0 || !end || *end || m > INT_MAX) /* m < 0: no digits read (end unset) */
                return nd_cli_usage_error(cmd, "--max needs a row count (0: all)");
            max = (int)m;
        } else if (a[0] == '-' && a[1]) {
            return nd_cli_usage_error(cmd, "unknown option %s", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            return nd_cli_usage_error(cmd, "too many arguments (%s)", a);
        }
    }
    if (npos != 2) return nd_cli_usage_error(cmd, "needs RUN.h5 and GOLDEN.h5");

    nd_err e = {0};
    nd_tolerances tol;
    nd_trace *run = NULL, *golden = NULL;
    nd_cmp_result res = {0};
    int rc = 0;
    if (tolpath) rc = nd_tolerances_load(tolpath, &tol, &e);
    else nd_tolerances_default(&tol);
    if (rc) return refused(json, pos[0], pos[1], &e);
    /* the same file twice passes by construction: a gate whose paths collapsed onto one file (a
     * variable left empty, a link, a hard link) tests nothing, so it is refused */
    struct stat s0, s1;
    if (stat(pos[0], &s0) == 0 && stat(pos[1], &s1) == 0 && s0.st_dev == s1.st_dev && s0.st_ino == s1.st_ino) {
        nd_tolerances_free(&tol);
        nd_fail(&e, ND_EXIT_BADINPUT, "%s and %s are the same file: a trace compared with itself cannot regress, so the gate "
                "would pass whatever it holds (a path variable left empty, or a link?)", pos[0], pos[1]);
        return refused(json, pos[0], pos[1], &e);
    }
    if ((rc = load(pos[0], 0, &run, &e)) || (rc = load(pos[1], 1, &golden, &e)) ||
        (rc = nd_trace_comparable(pos[0], run, pos[1], golden, &e)) || (rc = same_setup(pos[0], run, pos[1], golden, &e)) ||
        (rc = nd_trace_golden_covers(pos[0], run, pos[1], golden, &e)) || (rc = nd_trace_compare(run, golden, &tol, &res, &e))) {
        rc = refused(json, pos[0], pos[1], &e);
    } else if (tolpath && res.first_unused >= 0) {
        /* a rule that gates nothing is a typo or a stage that no longer exists: the tolerance it
         * meant to set is not the one applied, whichever way it leaned */
        const nd_tol_rule *r = &tol.rules[res.first_unused];
        char ks[4 * ND_NAME_LEN];
        const int nun = res.nrules - res.nrules_used;
        nd_fail(&e, ND_EXIT_BADINPUT, "%s:%d: the rule for %s '%s' applies to no stage of %s%s: a typo, or a stage that no "
                "longer exists (fix or remove it; a gate carries only rules it applies)", tolpath, r->line,
                r->is_op ? "op kind" : "stages matching", nd_term_safe(r->key, ks, sizeof ks), pos[0],
                nun > 1 ? " (and more rules of the file apply nowhere)" : "");
        rc = refused(json, pos[0], pos[1], &e);
    } else {
        if (json) rc = print_json(&res, pos[0], pos[1], tolpath);
        else print_table(&res, tolpath, max);
        fflush(stdout);
        if (!rc) rc = res.nregressions ? ND_EXIT_FINDING : ND_EXIT_OK;
    }
    nd_cmp_result_free(&res);
    nd_trace_free(run);
    nd_trace_free(golden);
    nd_tolerances_free(&tol);
    return rc;
}
