/* test_compare.c — the CI gate: clean on itself, and every rule of docs/ci-gate.md bites. */
#include <jansson.h>
#include "compare_fixture.h"
#include "nd_test.h"

enum { N = 12 };
static nd_row base[N];
static char golden[640];

/* Write a run made from base with one change applied by `edit`, finished with summary s. */
static const char *run_with(const char *name, void (*edit)(nd_row *rows, int *n), const nd_trace_summary *s) {
    static char path[640];
    nd_row rows[N + 1];
    int n = N;
    memcpy(rows, base, sizeof base);
    if (edit) edit(rows, &n);
    snprintf(path, sizeof path, "%s", fx_path(name));
    nd_err e = {0};
    int rc = fx_write(path, rows, n, s, &e);
    CHECK(rc == 0, "writing %s: %s", name, e.msg);
    return path;
}

static nd_trace_summary ok_summary(void) { return fx_summary("ok", "", "", ""); }

static void e_nan(nd_row *r, int *n) { (void)n; r[5].prod_nan = 3; }
static void e_inf(nd_row *r, int *n) { (void)n; r[2].ref_inf = 1; }
static void e_count(nd_row *r, int *n) { (void)n; r[4].prod_nan = 7; }  /* golden 5, see main */
static void e_missing(nd_row *r, int *n) { memmove(&r[3], &r[4], (size_t)(N - 4) * sizeof *r); (*n)--; }
/* extra stages within the golden's layers (a run over more layers is refused as another model) */
static void e_extra(nd_row *r, int *n) { r[N] = fx_row(99); r[N].layer = r[N - 1].layer; (*n)++; }
static void e_dup(nd_row *r, int *n) { r[N] = r[3]; (*n)++; }
static void e_extra_nan(nd_row *r, int *n) { r[N] = fx_row(98); r[N].layer = r[N - 1].layer; r[N].prod_nan = 4; r[N].cosine = NAN; (*n)++; }
static void e_verdict(nd_row *r, int *n) { (void)n; snprintf(r[6].verdict, sizeof r[6].verdict, "scale_saturation"); }
static void e_cos_in(nd_row *r, int *n) { (void)n; r[7].cosine -= 0.9e-4; }
static void e_cos_out(nd_row *r, int *n) { (void)n; r[7].cosine -= 1.1e-4; }
/* rel_l2 of row 8 is 0.058: allowed = 1e-4 + 0.02 * 0.058 = 1.26e-3 */
static void e_rel_in(nd_row *r, int *n) { (void)n; r[8].rel_l2 += 1.2e-3; }
static void e_rel_out(nd_row *r, int *n) { (void)n; r[8].rel_l2 += 1.35e-3; }
static void e_nanfig(nd_row *r, int *n) { (void)n; r[1].sqnr_db = NAN; }
static void e_numel(nd_row *r, int *n) { (void)n; r[9].numel += 16; }
static void e_two(nd_row *r, int *n) { (void)n; r[2].cosine -= 1.1e-4; r[9].rel_l2 += 10 * (1e-4 + 0.02 * r[9].rel_l2); }
static void e_reorder(nd_row *r, int *n) { (void)n; nd_row t = r[0]; r[0] = r[1]; r[1] = t; }

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (f) { fputs(text, f); fclose(f); }
}

int main(void) {
    for (int i = 0; i < N; i++) base[i] = fx_row(i);
    base[4].prod_nan = 5; /* a golden that already has NaN at one stage */
    nd_trace_summary s = ok_summary();
    nd_err e = {0};
    snprintf(golden, sizeof golden, "%s", fx_path("golden.h5"));
    CHECK_EQ_INT(fx_write(golden, base, N, &s, &e), 0);

    /* a trace against itself is refused (a gate whose two paths are one file cannot fail); an
     * identical second run is clean */
    CHECK_EQ_INT(fx_compare(golden, golden, NULL), 2);
    CHECK(strstr(fx_err, "are the same file: a trace compared with itself cannot regress") != NULL, "%s", fx_err);
    const char *same = run_with("same.h5", NULL, &s);
    CHECK_EQ_INT(fx_compare(same, golden, NULL), 0);
    CHECK(strstr(fx_out, "compare: 0 regressions in 12 stages\n") != NULL, "closing line: %s", fx_out);
    /* what the gate compared, in numbers (issue 37): 12 rows of 12 names, 13 figures a row */
    CHECK(strstr(fx_out, "compared: 12 golden rows of 12 stages, 12 rows in both traces figure by figure (") != NULL &&
          strstr(fx_out, "tolerances: the defaults") != NULL, "compared line: %s", fx_out);
    CHECK_EQ_INT(fx_compare(same, golden, NULL), 0);
    /* row order is not identity: matching is by (name, mode) */
    CHECK_EQ_INT(fx_compare(run_with("reorder.h5", e_reorder, &s), golden, NULL), 0);

    /* NaN / Inf where the golden has none: a regression, whatever the tolerances say */
    const char *nan = run_with("nan.h5", e_nan, &s);
    CHECK_EQ_INT(fx_compare(nan, golden, NULL), 1);
    CHECK(strstr(fx_out, "prod_nan") && strstr(fx_out, "compare: 1 regression (first: layers.1.self_attn.q_a_proj.s5 chained prod_nan)"),
          "%s", fx_out);
    const char *loose = fx_path("loose.yaml");
    write_file(loose, "default:\n  cosine: {abs: 1000}\n  rel_l2: {abs: 1000, rel: 1000}\n");
    CHECK_EQ_INT(fx_compare(nan, golden, "--tolerances", loose, NULL), 1);
    CHECK_EQ_INT(fx_compare(run_with("inf.h5", e_inf, &s), golden, NULL), 1);
    CHECK_EQ_INT(fx_compare(run_with("count.h5", e_count, &s), golden, NULL), 1);

    /* a missing stage fails; a golden that lacks a stage of the run is no golden for it (issue 37):
     * refused, naming the stage */
    CHECK_EQ_INT(fx_compare(run_with("missing.h5", e_missing, &s), golden, NULL), 1);
    CHECK(strstr(fx_out, "missing stage") && strstr(fx_out, "layers.0.self_attn.q_a_proj.s3"), "%s", fx_out);
    CHECK_EQ_INT(fx_compare(run_with("extra.h5", e_extra, &s), golden, NULL), 2);
    CHECK(strstr(fx_err, "lacks 1 of the 13 stages of ") && strstr(fx_err, "s99"), "%s", fx_err);

    /* an extra row that repeats a stage, or an extra row of NaN figures, is how a broken run hides:
     * both are regressions (issue 21) */
    CHECK_EQ_INT(fx_compare(run_with("dup.h5", e_dup, &s), golden, NULL), 1);
    CHECK(strstr(fx_out, "duplicate stage row"), "%s", fx_out);
    CHECK_EQ_INT(fx_compare(run_with("extranan.h5", e_extra_nan, &s), golden, NULL), 2);
    CHECK(strstr(fx_err, "lacks 1 of the") && strstr(fx_err, "s98"), "%s", fx_err);
    /* a run whose status is error is a regression (its status differs); a golden whose status is
     * error is refused, so two failed runs never pass; traces of other tokens are refused */
    nd_trace_summary err_s = fx_summary("error", "", "", "");
    CHECK_EQ_INT(fx_compare(run_with("error.h5", NULL, &err_s), golden, NULL), 1);
    CHECK(strstr(fx_out, "status"), "%s", fx_out);
    char errgold[640];
    snprintf(errgold, sizeof errgold, "%s", run_with("error2.h5", NULL, &err_s));
    CHECK_EQ_INT(fx_compare(golden, errgold, NULL), 2);
    CHECK(strstr(fx_err, "status 'error'") && strstr(fx_err, "golden"), "%s", fx_err);
    CHECK_EQ_INT(fx_compare(run_with("error3.h5", NULL, &err_s), errgold, NULL), 2);
    {
        const int64_t other[4] = {11, 22, 34, 44}, fewer[3] = {11, 22, 33};
        nd_err e = {0};
        char p1[640], p2[640];
        snprintf(p1, sizeof p1, "%s", fx_path("tok1.h5"));
        snprintf(p2, sizeof p2, "%s", fx_path("tok2.h5"));
        CHECK(fx_write_tokens(p1, base, N, &s, other, 4, &e) == 0, "%s", e.msg);
        CHECK(fx_write_tokens(p2, base, N, &s, fewer, 3, &e) == 0, "%s", e.msg);
        CHECK_EQ_INT(fx_compare(p1, golden, NULL), 2);
        CHECK(strstr(fx_err, "not comparable: token 2 differs"), "%s", fx_err);
        CHECK_EQ_INT(fx_compare(p2, golden, NULL), 2);
        CHECK(strstr(fx_err, "not comparable: made from 3 and 4 tokens"), "%s", fx_err);
    }

    /* a stage name read from a file reaches the terminal with its control characters escaped */
    {
        nd_row rows[N + 1];
        memcpy(rows, base, sizeof base);
        rows[N] = base[2];
        snprintf(rows[N].name, sizeof rows[N].name, "evil\033]0;title\007\033[31m");
        char gp[640];
        snprintf(gp, sizeof gp, "%s", fx_path("evil_golden.h5"));
        nd_err e = {0};
        CHECK(fx_write(gp, rows, N + 1, &s, &e) == 0, "%s", e.msg);
        CHECK_EQ_INT(fx_compare(golden, gp, NULL), 1); /* the evil row is missing from the run */
        CHECK(!strchr(fx_out, '\033') && !strchr(fx_out, '\007') && strstr(fx_out, "evil\\x1b]0;title\\x07\\x1b[31m"),
              "%s", fx_out);
    }

    /* verdict and summary */
    CHECK_EQ_INT(fx_compare(run_with("verdict.h5", e_verdict, &s), golden, NULL), 1);
    CHECK(strstr(fx_out, "verdict") && strstr(fx_out, "scale_saturation"), "%s", fx_out);
    nd_trace_summary moved_a = fx_summary("diverged", "layers.1.self_attn.q_a_proj.s5", "isolated", "scale_inverted");
    nd_trace_summary moved_b = fx_summary("diverged", "layers.2.self_attn.q_a_proj.s8", "isolated", "scale_inverted");
    char div_golden[640];
    snprintf(div_golden, sizeof div_golden, "%s", run_with("div_golden.h5", NULL, &moved_a));
    CHECK_EQ_INT(fx_compare(run_with("div_same.h5", NULL, &moved_a), div_golden, NULL), 0);
    CHECK_EQ_INT(fx_compare(run_with("div_moved.h5", NULL, &moved_b), div_golden, NULL), 1);
    CHECK(strstr(fx_out, "first_divergence") && strstr(fx_out, "layers.2.self_attn.q_a_proj.s8 isolated"), "%s", fx_out);
    nd_trace_summary mode_moved = fx_summary("diverged", "layers.1.self_attn.q_a_proj.s5", "chained", "scale_inverted");
    CHECK_EQ_INT(fx_compare(run_with("div_mode.h5", NULL, &mode_moved), div_golden, NULL), 1);
    nd_trace_summary cause = fx_summary("diverged", "layers.1.self_attn.q_a_proj.s5", "isolated", "scale_saturation");
    CHECK_EQ_INT(fx_compare(run_with("div_cause.h5", NULL, &cause), div_golden, NULL), 1);
    CHECK_EQ_INT(fx_compare(run_with("div_gone.h5", NULL, &s), div_golden, NULL), 1); /* status and stage */

    /* tolerances: just inside passes, just outside fails, absolute and relative */
    CHECK_EQ_INT(fx_compare(run_with("cos_in.h5", e_cos_in, &s), golden, NULL), 0);
    const char *cos_out = run_with("cos_out.h5", e_cos_out, &s);
    char cos_out_p[640];
    snprintf(cos_out_p, sizeof cos_out_p, "%s", cos_out);
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, NULL), 1);
    CHECK(strstr(fx_out, "compare: 1 regression (first: layers.1.self_attn.q_a_proj.s7 chained cosine)"), "%s", fx_out);
    CHECK_EQ_INT(fx_compare(run_with("rel_in.h5", e_rel_in, &s), golden, NULL), 0);
    CHECK_EQ_INT(fx_compare(run_with("rel_out.h5", e_rel_out, &s), golden, NULL), 1);
    /* NaN equals NaN (base has NaN weight_rel_l2 everywhere), NaN against a number does not */
    CHECK_EQ_INT(fx_compare(run_with("nanfig.h5", e_nanfig, &s), golden, NULL), 1);
    CHECK(strstr(fx_out, "sqnr_db") && strstr(fx_out, "nan"), "%s", fx_out);
    CHECK_EQ_INT(fx_compare(run_with("numel.h5", e_numel, &s), golden, NULL), 1);

    /* overrides: per op kind and per stage glob; a later, more specific rule wins */
    const char *t_op = fx_path("op.yaml");
    write_file(t_op, "op:\n  linear:\n    cosine: {abs: 2.0e-4}\n");          /* row 7 is linear */
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_op, NULL), 0);
    const char *t_rms = fx_path("rms.yaml");
    write_file(t_rms, "op:\n  rmsnorm:\n    cosine: {abs: 2.0e-4}\n");
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_rms, NULL), 1);
    const char *t_none = fx_path("none.yaml");
    write_file(t_none, "op:\n  no_such_op:\n    cosine: {abs: 1.0}\n");
    /* a rule that applies nowhere (a typo, a stage gone) is refused, naming its line (round 17) */
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_none, NULL), 2);
    CHECK(strstr(fx_err, "none.yaml:2: the rule for op kind 'no_such_op' applies to no stage of ") != NULL,
          "a rule for an op no row has: %s", fx_err);
    static const struct { const char *file, *yaml, *want; } refused[] = {
        {"typo.yaml", "stages:\n  - match: \"layers.1.*\"\n    cosine: {abs: 2.0e-4}\n  - match: \"layers.9.self_atn.*\"\n    cosine: {abs: 0.5}\n",
         "typo.yaml:4: the rule for stages matching 'layers.9.self_atn.*' applies to no stage"},
        {"null.yaml", "stages:\n  - match: ~\n    cosine: {abs: 0.5}\n", "null.yaml:2: expected a name or a pattern, not null"}};
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        const char *tp = fx_path(refused[i].file);
        write_file(tp, refused[i].yaml);
        CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", tp, NULL), 2);
        CHECK(strstr(fx_err, refused[i].want) != NULL, "%s: %s", refused[i].file, fx_err);
    }
    t_op = fx_path("op.yaml"); /* fx_path's buffer is shared */
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_op, NULL), 0);
    CHECK(strstr(fx_out, "tolerances: 1 of the 1 rules of ") != NULL, "the linear rule applied: %s", fx_out);
    const char *t_glob = fx_path("glob.yaml");
    write_file(t_glob, "op:\n  linear:\n    cosine: {abs: 2.0e-4}\nstages:\n  - match: \"layers.1.*.s7\"\n    cosine: {abs: 1.0e-5}\n");
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_glob, NULL), 1);
    const char *t_glob2 = fx_path("glob2.yaml");
    write_file(t_glob2, "stages:\n  - match: \"layers.1.*\"\n    cosine: {abs: 2.0e-4}\n");
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--tolerances", t_glob2, NULL), 0);

    /* --json: one document with the same verdict */
    CHECK_EQ_INT(fx_compare(cos_out_p, golden, "--json", NULL), 1);
    json_error_t je;
    json_t *doc = json_loads(fx_out, 0, &je);
    CHECK(doc != NULL, "json: %s", je.text);
    if (doc) {
        CHECK_EQ_INT(json_integer_value(json_object_get(doc, "regressions")), 1);
        CHECK(!strcmp(json_string_value(json_object_get(doc, "result")), "regression"), "result");
        json_t *it = json_array_get(json_object_get(doc, "items"), 0);
        CHECK(it && !strcmp(json_string_value(json_object_get(it, "figure")), "cosine"), "figure");
        CHECK(it && fabs(json_real_value(json_object_get(it, "delta")) + 1.1e-4) < 1e-9, "delta");
        json_decref(doc);
    }
    CHECK_EQ_INT(fx_compare(run_with("same2.h5", NULL, &s), golden, "--json", NULL), 0);
    doc = json_loads(fx_out, 0, &je);
    CHECK(doc && !strcmp(json_string_value(json_object_get(doc, "result")), "clean") &&
          json_is_null(json_object_get(doc, "first")), "clean json: %s", fx_out);
    json_decref(doc);

    /* worst first: two regressions, the bigger excess listed first */
    CHECK_EQ_INT(fx_compare(run_with("two.h5", e_two, &s), golden, NULL), 1);
    const char *l_rel = strstr(fx_out, "rel_l2"), *l_cos = strstr(fx_out, " cosine");
    CHECK(l_rel && l_cos && l_rel < l_cos, "worst (rel_l2, 10x) must come before cosine (1.1x): %s", fx_out);
    CHECK(strstr(fx_out, "compare: 2 regressions (first: layers.0.self_attn.q_a_proj.s2 isolated cosine)"), "%s", fx_out);

    /* malformed tolerance files: exit 2 naming the file and the line */
    const char *bad1 = fx_path("bad1.yaml");
    write_file(bad1, "default:\n  cosine: {abs: 1e-4\n  rel_l2: {abs: 1}\n");
    CHECK_EQ_INT(fx_compare(golden, golden, "--tolerances", bad1, NULL), 2);
    CHECK(strstr(fx_err, bad1) && strstr(fx_err, "malformed YAML"), "%s", fx_err);
    const char *bad2 = fx_path("bad2.yaml");
    write_file(bad2, "default:\n  cosine: {abs: 1e-4}\n  cosin: {abs: 1}\n");
    CHECK_EQ_INT(fx_compare(golden, golden, "--tolerances", bad2, NULL), 2);
    char want[700];
    snprintf(want, sizeof want, "%s:3: unknown figure cosin", bad2);
    CHECK(strstr(fx_err, want) != NULL, "%s", fx_err);
    const char *bad3 = fx_path("bad3.yaml");
    write_file(bad3, "stages:\n  - cosine: {abs: 1}\n");
    CHECK_EQ_INT(fx_compare(golden, golden, "--tolerances", bad3, NULL), 2);
    CHECK(strstr(fx_err, "without match") != NULL, "%s", fx_err);
    const char *bad4 = fx_path("bad4.yaml");
    write_file(bad4, "default:\n  cosine: {abs: -1}\n");
    CHECK_EQ_INT(fx_compare(golden, golden, "--tolerances", bad4, NULL), 2);
    CHECK(strstr(fx_err, ":2:") != NULL, "%s", fx_err);
    CHECK_EQ_INT(fx_compare(golden, golden, "--tolerances", fx_path("absent.yaml"), NULL), 2);

    /* the shipped recipes/tolerances.yaml says exactly what the built-in defaults are */
    const char *root = getenv("ND_SOURCE_ROOT");
    if (root) {
        char p[1024];
        snprintf(p, sizeof p, "%s/recipes/tolerances.yaml", root);
        nd_tolerances file, def;
        nd_tolerances_default(&def);
        int rc = nd_tolerances_load(p, &file, &e);
        CHECK(rc == 0, "%s", e.msg);
        if (!rc) {
            CHECK_EQ_INT(file.nrules, 0);
            for (int f = 0; f < ND_NFIG; f++)
                CHECK(file.def[f].abs == def.def[f].abs && file.def[f].rel == def.def[f].rel, "figure %s differs",
                      nd_figure_name(f));
            nd_tolerances_free(&file);
        }
    }

    /* usage */
    CHECK_EQ_INT(fx_compare(NULL), 2);
    CHECK_EQ_INT(fx_compare(golden, NULL), 2);
    CHECK_EQ_INT(fx_compare(golden, golden, "--bogus", NULL), 2);
    CHECK_EQ_INT(fx_compare("--help", NULL), 0);
    CHECK(strstr(fx_out, "usage: nvfp4dbg compare") != NULL, "%s", fx_out);
    /* a trace whose run did not finish is refused, in either place */
    const char *unfinished = run_with("unfinished.h5", NULL, NULL);
    CHECK_EQ_INT(fx_compare(unfinished, golden, NULL), 2);
    CHECK(strstr(fx_err, "did not finish") != NULL, "%s", fx_err);
    return nd_test_report("test_compare");
}
