/* report_against.c — `report RUN.h5 --against OTHER.h5`: both traces' figures and their
 * differences per stage, rows matched by stage name and mode (before/after a fix, golden vs run),
 * grouped per layer of the run like the table of all stages. Differences are run - other.
 * Two traces are shown together only when made from the same tokens and recipe, as compare
 * requires: otherwise every figure differs and the differences say nothing. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "report_internal.h"

static uint64_t hash_row(const nd_row *r) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a over name, a separator, mode */
    for (const char *s = r->name; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    h = (h ^ 0x1f) * 1099511628211ull;
    for (const char *s = r->mode; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

static int same_key(const nd_row *a, const nd_row *b) { return !strcmp(a->name, b->name) && !strcmp(a->mode, b->mode); }

/* match[i] = index in other of run row i's (name, mode), -1 when the other has none. */
static int64_t *match_rows(const nd_trace *run, const nd_trace *other) {
    size_t nslots = 16;
    while (nslots < (size_t)(other->nrows > 0 ? other->nrows : 1) * 2) nslots *= 2;
    int64_t *slot = malloc(nslots * sizeof *slot);
    int64_t *match = malloc((size_t)(run->nrows > 0 ? run->nrows : 1) * sizeof *match);
    if (!slot || !match) {
        free(slot);
        free(match);
        return NULL;
    }
    for (size_t i = 0; i < nslots; i++) slot[i] = -1;
    for (int64_t j = 0; j < other->nrows; j++) {
        size_t h = (size_t)(hash_row(&other->rows[j]) & (nslots - 1));
        while (slot[h] >= 0 && !same_key(&other->rows[slot[h]], &other->rows[j])) h = (h + 1) & (nslots - 1);
        if (slot[h] < 0) slot[h] = j;   /* a repeated (name, mode) keeps its first row */
    }
    for (int64_t i = 0; i < run->nrows; i++) {
        size_t h = (size_t)(hash_row(&run->rows[i]) & (nslots - 1));
        while (slot[h] >= 0 && !same_key(&other->rows[slot[h]], &run->rows[i])) h = (h + 1) & (nslots - 1);
        match[i] = slot[h];
    }
    free(slot);
    return match;
}

/* A difference: "+0.0123", "-20", "0", "nan" (either side NaN or not comparable). */
static void delta(char *b, size_t n, double run, double other) {
    double d = run - other;
    if (isnan(d)) snprintf(b, n, "nan");
    else if (d == 0) snprintf(b, n, "0");
    else if (isinf(d)) snprintf(b, n, d > 0 ? "+inf" : "-inf");
    else snprintf(b, n, "%+.4g", d);
}

static int changed(const nd_row *a, const nd_row *b) { return b && strcmp(a->verdict, b->verdict) != 0; }

/* One figure on both sides and its difference; all-zero rows show `zero` and no difference. */
static void triple(FILE *f, const nd_row *r, double rv, const nd_row *o, double ov, int sig, const char *zero) {
    char a[40], b[40], d[40];
    nd_report_fig(a, sizeof a, r, rv, sig, zero);
    if (o) nd_report_fig(b, sizeof b, o, ov, sig, zero);
    else snprintf(b, sizeof b, "-");
    if (!o) snprintf(d, sizeof d, "-");
    else if (nd_rall_zero(r) || nd_rall_zero(o)) snprintf(d, sizeof d, nd_rall_zero(r) && nd_rall_zero(o) ? "0" : "-");
    else delta(d, sizeof d, rv, ov);
    fprintf(f, "<td>%s<td>%s<td class=\"d\">%s", a, b, d);
}

static void head(FILE *f) {
    fprintf(f, "<thead><tr>");
    nd_report_th(f, "stage");
    nd_report_th(f, "mode");
    static const char *const figs[][2] = {{"cosine", "cosine"}, {"rel_l2", "rel L2"}, {"sqnr", "SQNR dB"}};
    char lab[48];
    for (int k = 0; k < 3; k++) {
        snprintf(lab, sizeof lab, "%s run", figs[k][1]);
        nd_report_th_label(f, figs[k][0], lab);
        snprintf(lab, sizeof lab, "%s other", figs[k][1]);
        nd_report_th_label(f, figs[k][0], lab);
        nd_report_th(f, "delta");
    }
    nd_report_th_label(f, "prod_amax", "prod amax run");
    nd_report_th_label(f, "prod_amax", "prod amax other");
    nd_report_th_label(f, "prod_nan", "prod NaN/Inf run");
    nd_report_th_label(f, "prod_nan", "prod NaN/Inf other");
    nd_report_th_label(f, "verdict", "verdict run");
    nd_report_th_label(f, "verdict", "verdict other");
    fprintf(f, "</thead>\n");
}

static void row(FILE *f, const nd_trace *t, const nd_trace *ot, const nd_row *r, const nd_row *o) {
    const char *cls[4];
    int nc = 0;
    if (nd_ris_first(t, r)) cls[nc++] = "first";
    if (o && nd_ris_first(ot, o)) cls[nc++] = "ofirst";
    if (!o) cls[nc++] = "only";
    else if (changed(r, o)) cls[nc++] = "changed";
    fprintf(f, "<tr");
    for (int k = 0; k < nc; k++) fprintf(f, "%s%s", k ? " " : " class=\"", cls[k]);
    fprintf(f, "%s><td>", nc ? "\"" : "");
    nd_html_escape(f, r->name);
    fprintf(f, "<td>");
    nd_html_escape(f, r->mode);
    triple(f, r, r->cosine, o, o ? o->cosine : NAN, 6, "all-zero");
    triple(f, r, r->rel_l2, o, o ? o->rel_l2 : NAN, 4, "-");
    triple(f, r, r->sqnr_db, o, o ? o->sqnr_db : NAN, 4, "-");
    char a[40], b[40];
    nd_fmt_num(a, sizeof a, r->prod_amax, 4);
    if (o) nd_fmt_num(b, sizeof b, o->prod_amax, 4);
    else snprintf(b, sizeof b, "-");
    fprintf(f, "<td>%s<td>%s<td>%lld<td>", a, b, (long long)(r->prod_nan + r->prod_inf));
    if (o) fprintf(f, "%lld", (long long)(o->prod_nan + o->prod_inf));
    else fprintf(f, "-");
    fprintf(f, "<td>");
    nd_html_escape(f, r->verdict);
    fprintf(f, "<td>");
    if (o) nd_html_escape(f, o->verdict);
    else fprintf(f, "(no such row)");
    fputc('\n', f);
}

static void side_by_side(FILE *f, const char *label, const char *run, const char *other) {
    fprintf(f, "<tr%s><td>%s<td>", strcmp(run, other) ? " class=\"changed\"" : "", label);
    nd_html_escape(f, run[0] ? run : "-");
    fprintf(f, "<td>");
    nd_html_escape(f, other[0] ? other : "-");
    fputc('\n', f);
}

static int64_t count_bad(const nd_trace *t) {
    int64_t n = 0;
    for (int64_t i = 0; i < t->nrows; i++) n += nd_verdict_bad(t->rows[i].verdict);
    return n;
}

void nd_report_against_section(FILE *f, const nd_rmodel *m, const nd_report_against *ag, const char *run_name) {
    const nd_trace *t = m->t, *ot = ag->t;
    const char *oname = ag->name ? ag->name : "other";
    fprintf(f, "<section id=\"against\"><h2>Against <code>");
    nd_html_escape(f, oname);
    fprintf(f, "</code>: both traces per stage</h2>\n");
    int64_t *match = match_rows(t, ot);
    unsigned char *used = calloc((size_t)(ot->nrows > 0 ? ot->nrows : 1), 1);
    int64_t *gchanged = calloc((size_t)(m->ngroups > 0 ? m->ngroups : 1), sizeof *gchanged);
    int64_t *gonly = calloc((size_t)(m->ngroups > 0 ? m->ngroups : 1), sizeof *gonly);
    double *gworst = malloc((size_t)(m->ngroups > 0 ? m->ngroups : 1) * sizeof *gworst);
    int64_t *gworst_row = malloc((size_t)(m->ngroups > 0 ? m->ngroups : 1) * sizeof *gworst_row);
    int *gofirst = calloc((size_t)(m->ngroups > 0 ? m->ngroups : 1), sizeof *gofirst);
    if (!match || !used || !gchanged || !gonly || !gworst || !gworst_row || !gofirst) {
        fprintf(f, "<p class=\"warn\">out of memory: comparison left out</p></section>\n");
        goto out;
    }
    int64_t nmatched = 0, nchanged = 0, nonly_run = 0, nonly_other = 0;
    for (int g = 0; g < m->ngroups; g++) { gworst[g] = -1; gworst_row[g] = -1; }
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        int g = m->row_group[i];
        if (match[i] < 0) { nonly_run++; gonly[g]++; continue; }
        const nd_row *o = &ot->rows[match[i]];
        used[match[i]] = 1;
        nmatched++;
        if (changed(r, o)) { nchanged++; gchanged[g]++; }
        if (nd_ris_first(ot, o)) gofirst[g] = 1;
        double d = fabs(r->sqnr_db - o->sqnr_db);
        if (isfinite(d) && !nd_rall_zero(r) && !nd_rall_zero(o) && d > gworst[g]) { gworst[g] = d; gworst_row[g] = i; }
    }
    for (int64_t j = 0; j < ot->nrows; j++) nonly_other += !used[j];

    fprintf(f, "<p class=\"note\"><b>run</b> = <code>");
    nd_html_escape(f, run_name ? run_name : "this trace");
    fprintf(f, "</code> (this report), <b>other</b> = <code>");
    nd_html_escape(f, oname);
    fprintf(f, "</code>. Rows are matched by stage name and mode; &Delta; = run &minus; other. Rows whose verdict "
               "differs are yellow; rows only in the run are grey; the run's first divergence is outlined red, the "
               "other's blue. Groups open where something differs (<a href=\"#against\" class=\"openall\">open all</a>, "
               "<a href=\"#against\" class=\"closeall\">close all</a>).</p>\n");
    fprintf(f, "<div class=\"scroll\"><table class=\"cmpsum\" id=\"against-summary\"><thead><tr><th title=\"what is compared\">"
               "<th title=\"run: the trace this report is of (the first argument)\">run"
               "<th title=\"other: the trace given with --against\">other</thead><tbody>\n");
    side_by_side(f, "trace", run_name ? run_name : "", oname);
    side_by_side(f, "status", t->has_summary ? t->summary.status : "incomplete", ot->has_summary ? ot->summary.status : "incomplete");
    side_by_side(f, "first divergence", t->summary.first_divergence, ot->summary.first_divergence);
    side_by_side(f, "cause", t->summary.cause, ot->summary.cause);
    side_by_side(f, "stack", t->stack, ot->stack);
    side_by_side(f, "backend", t->backend, ot->backend);
    side_by_side(f, "overrides", t->overrides, ot->overrides);
    char a[32], b[32];
    snprintf(a, sizeof a, "%lld", (long long)t->nrows);
    snprintf(b, sizeof b, "%lld", (long long)ot->nrows);
    side_by_side(f, "rows", a, b);
    snprintf(a, sizeof a, "%lld", (long long)count_bad(t));
    snprintf(b, sizeof b, "%lld", (long long)count_bad(ot));
    side_by_side(f, "flagged rows", a, b);
    fprintf(f, "</tbody></table></div>\n<p id=\"against-counts\">%lld rows matched, <b>%lld with a different verdict</b>, "
               "%lld only in the run, %lld only in the other.</p>\n",
            (long long)nmatched, (long long)nchanged, (long long)nonly_run, (long long)nonly_other);

    for (int g = 0; g < m->ngroups; g++) {
        const nd_rgroup *G = &m->groups[g];
        int open = G->has_first || gofirst[g] || gchanged[g];
        fprintf(f, "<details class=\"grp%s\" id=\"against-%s\"%s><summary><b>%s%s</b> <span class=\"gs\">%lld rows",
                gchanged[g] ? " chg" : "", G->id, open ? " open" : "", G->layer >= 0 ? "layer " : "", G->label,
                (long long)G->nrows);
        if (gchanged[g]) fprintf(f, ", <span class=\"bad\">%lld with another verdict</span>", (long long)gchanged[g]);
        if (gonly[g]) fprintf(f, ", %lld only in the run", (long long)gonly[g]);
        if (gworst_row[g] >= 0 && gworst[g] > 0) {
            char d[40];
            const nd_row *r = &t->rows[gworst_row[g]];
            delta(d, sizeof d, r->sqnr_db, ot->rows[match[gworst_row[g]]].sqnr_db);
            fprintf(f, "; largest SQNR change %s dB at <code>", d);
            nd_html_escape(f, nd_rshort(r));
            fprintf(f, "</code> (");
            nd_html_escape(f, r->mode);
            fprintf(f, ")");
        } else if (gworst_row[g] >= 0) {
            fprintf(f, "; SQNR equal in every matched row");
        }
        fprintf(f, "</span>%s%s</summary>\n", G->has_first ? " <span class=\"fd\">first divergence (run)</span>" : "",
                gofirst[g] ? " <span class=\"fdo\">first divergence (other)</span>" : "");
        fprintf(f, "<div class=\"scroll\"><table class=\"sortable against\">");
        head(f);
        fprintf(f, "<tbody>\n");
        for (int64_t k = m->group_off[g]; k < m->group_off[g + 1]; k++) {
            const int64_t i = m->group_rows[k];
            row(f, t, ot, &t->rows[i], match[i] >= 0 ? &ot->rows[match[i]] : NULL);
        }
        fprintf(f, "</tbody></table></div></details>\n");
    }
    if (nonly_other) {
        fprintf(f, "<details class=\"grp\" id=\"against-only-other\" open><summary><b>only in the other</b> "
                   "<span class=\"gs\">%lld rows the run does not have</span></summary>\n"
                   "<div class=\"scroll\"><table class=\"sortable stages\">", (long long)nonly_other);
        nd_report_stage_head(f);
        fprintf(f, "<tbody>\n");
        for (int64_t j = 0; j < ot->nrows; j++)
            if (!used[j]) {
                fprintf(f, "<tr>");
                nd_report_row_cells(f, &ot->rows[j]);
            }
        fprintf(f, "</tbody></table></div></details>\n");
    }
    fprintf(f, "</section>\n");
out:
    free(match);
    free(used);
    free(gchanged);
    free(gonly);
    free(gworst);
    free(gworst_row);
    free(gofirst);
}
