/* report_table.c — every row of /stages, grouped per layer in collapsible <details> (the group
 * holding the first divergence open), each group a table sortable by any column with the page's
 * small script; and the list of every flagged row. End tags of cells and rows are left out, as
 * HTML allows, to keep 6000 rows near 1.5 MB. */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "report_internal.h"

static const char *const columns[] = {"index",  "stage",  "layer", "op",    "mode",        "quant",    "numel",
                                      "ref_amax", "prod_amax", "ref_nan", "prod_nan", "cosine", "rel_l2", "sqnr",
                                      "floor",  "scale_ratio", "sat_frac", "zero_block_frac", "verdict"};

void nd_report_stage_head(FILE *f) {
    fprintf(f, "<thead><tr>");
    for (size_t i = 0; i < sizeof columns / sizeof columns[0]; i++) nd_report_th(f, columns[i]);
    fprintf(f, "</thead>\n");
}

void nd_report_fig(char *b, size_t n, const nd_row *r, double v, int sig, const char *zero) {
    if (nd_rall_zero(r)) snprintf(b, n, "%s", zero);
    else nd_fmt_num(b, n, v, sig);
}

const char *nd_rshort(const nd_row *r) {
    char pre[32];
    int n = snprintf(pre, sizeof pre, "layers.%d.", (int)r->layer);
    return r->layer >= 0 && !strncmp(r->name, pre, (size_t)n) && r->name[n] ? r->name + n : r->name;
}

static void num(FILE *f, double v, int sig) {
    char b[40];
    nd_fmt_num(b, sizeof b, v, sig);
    fprintf(f, "<td>%s", b);
}

void nd_report_row_cells(FILE *f, const nd_row *r) {
    char b[40];
    fprintf(f, "<td>%d<td>", (int)r->index);
    nd_html_escape(f, r->name);
    if (r->layer >= 0) fprintf(f, "<td>%d<td>", (int)r->layer);
    else fprintf(f, "<td>-<td>");
    nd_html_escape(f, r->op);
    fprintf(f, "<td>");
    nd_html_escape(f, r->mode);
    fprintf(f, "<td>%s<td>%lld", r->quantized ? "yes" : "no", (long long)r->numel);
    num(f, r->ref_amax, 4);
    num(f, r->prod_amax, 4);
    fprintf(f, "<td>%lld<td>%lld", (long long)(r->ref_nan + r->ref_inf), (long long)(r->prod_nan + r->prod_inf));
    nd_report_fig(b, sizeof b, r, r->cosine, 6, "all-zero");
    fprintf(f, "<td>%s", b);
    nd_report_fig(b, sizeof b, r, r->rel_l2, 4, "-");
    fprintf(f, "<td>%s", b);
    nd_report_fig(b, sizeof b, r, r->sqnr_db, 4, "-");
    fprintf(f, "<td>%s", b);
    num(f, r->floor_sqnr_db, 4);
    num(f, r->scale_ratio, 4);
    num(f, r->sat_frac, 3);
    num(f, r->zero_block_frac, 3);
    fprintf(f, "<td>");
    nd_html_escape(f, r->verdict);
    fputc('\n', f);
}

static void row_open(FILE *f, const nd_trace *t, const nd_row *r, int with_id) {
    int bad = nd_verdict_bad(r->verdict);
    if (nd_ris_first(t, r)) fprintf(f, "<tr%s class=\"first%s\">", with_id ? " id=\"first-row\"" : "", bad ? " bad" : "");
    else fprintf(f, bad ? "<tr class=\"bad\">" : "<tr>");
}

/* The one-line summary of a group: its size, flagged rows, worst row and its figures. */
static void group_summary(FILE *f, const nd_trace *t, const nd_rgroup *g) {
    char cs[40], sq[40], rl[40];
    fprintf(f, "<summary><b>%s%s</b> <span class=\"gs\">%lld rows", g->layer >= 0 ? "layer " : "", g->label,
            (long long)g->nrows);
    if (g->nbad) fprintf(f, ", <span class=\"bad\">%lld flagged</span>", (long long)g->nbad);
    if (g->max_nonfinite) fprintf(f, ", <span class=\"bad\">NaN/Inf up to %lld</span>", (long long)g->max_nonfinite);
    if (g->worst >= 0) {
        const nd_row *r = &t->rows[g->worst];
        nd_report_fig(cs, sizeof cs, r, r->cosine, 4, "all-zero");
        nd_report_fig(rl, sizeof rl, r, r->rel_l2, 3, "-");
        nd_report_fig(sq, sizeof sq, r, r->sqnr_db, 3, "-");
        fprintf(f, "; worst <code>");
        nd_html_escape(f, nd_rshort(r));
        fprintf(f, "</code> (");
        nd_html_escape(f, r->mode);
        fprintf(f, ") cosine %s, rel L2 %s, SQNR %s dB, ", cs, rl, sq);
        fprintf(f, nd_verdict_bad(r->verdict) ? "<span class=\"bad\">" : "<span>");
        nd_html_escape(f, r->verdict);
        fprintf(f, "</span>");
    }
    fprintf(f, "</span>%s</summary>\n", g->has_first ? " <span class=\"fd\">first divergence</span>" : "");
}

void nd_report_table(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    nd_report_section_open(f, "stages", "All stages, by layer (%lld rows in %d groups)", (long long)t->nrows, m->ngroups);
    for (int g = 0; g < m->ngroups; g++) {
        const nd_rgroup *G = &m->groups[g];
        fprintf(f, "<details class=\"grp%s\" id=\"%s\"%s>", G->nbad ? " bad" : "", G->id, G->has_first ? " open" : "");
        group_summary(f, t, G);
        fprintf(f, "<div class=\"scroll\"><table class=\"sortable stages\">");
        nd_report_stage_head(f);
        fprintf(f, "<tbody>\n");
        for (int64_t k = m->group_off[g]; k < m->group_off[g + 1]; k++) {
            const int64_t i = m->group_rows[k];
            row_open(f, t, &t->rows[i], 1);
            nd_report_row_cells(f, &t->rows[i]);
        }
        fprintf(f, "</tbody></table></div></details>\n");
    }
    fprintf(f, "</section>\n");
}

void nd_report_flagged(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    int64_t n = 0;
    for (int64_t i = 0; i < t->nrows; i++) n += nd_verdict_bad(t->rows[i].verdict);
    nd_report_section_open(f, "flagged", "Flagged stages (%lld)", (long long)n);
    if (!n) {
        fprintf(f, "<p class=\"ok\">Every stage's verdict is ok.</p></section>\n");
        return;
    }
    fprintf(f, "<div class=\"scroll\"><table class=\"sortable stages\" id=\"flagged-table\">");
    nd_report_stage_head(f);
    fprintf(f, "<tbody>\n");
    /* the first divergence on top, then the others in execution order; every one of them */
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < t->nrows; i++) {
            const nd_row *r = &t->rows[i];
            if (!nd_verdict_bad(r->verdict) || nd_ris_first(t, r) != !pass) continue;
            row_open(f, t, r, 0);
            nd_report_row_cells(f, r);
        }
    fprintf(f, "</tbody></table></div></section>\n");
}
