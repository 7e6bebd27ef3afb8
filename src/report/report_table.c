/* report_table.c — the table of all stages (every row of /stages, sortable by any column with
 * the page's small script; it scrolls inside its box) and the short list of flagged rows. End
 * tags of cells and rows are left out, as HTML allows, to keep 7200 rows near 1 MB. */
#include <math.h>
#include <string.h>
#include "report_internal.h"

enum { MAX_FLAGGED = 200 };

static void num(FILE *f, double v, int sig) {
    char b[40];
    nd_fmt_num(b, sizeof b, v, sig);
    fprintf(f, "<td>%s", b);
}

static void row_cells(FILE *f, const nd_row *r) {
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
    num(f, r->cosine, 6);
    num(f, r->sqnr_db, 4);
    num(f, r->floor_sqnr_db, 4);
    num(f, r->scale_ratio, 4);
    num(f, r->sat_frac, 3);
    fprintf(f, "<td>");
    nd_html_escape(f, r->verdict);
    fputc('\n', f);
}

static const char head[] =
    "<thead><tr><th class=\"num\">#<th>stage<th class=\"num\">layer<th>op<th>mode<th>quant.<th class=\"num\">numel"
    "<th class=\"num\">ref amax<th class=\"num\">prod amax<th class=\"num\">ref NaN/Inf<th class=\"num\">prod NaN/Inf"
    "<th class=\"num\">cosine<th class=\"num\">SQNR dB<th class=\"num\">floor dB<th class=\"num\">scale ratio"
    "<th class=\"num\">sat frac<th>verdict</thead>\n";

static int is_first(const nd_trace *t, const nd_row *r) {
    return t->has_summary && t->summary.first_divergence[0] && !strcmp(r->name, t->summary.first_divergence) &&
           !strcmp(r->mode, t->summary.first_divergence_mode);
}

void nd_report_table(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    fprintf(f, "<section id=\"stages\"><h2>All stages (%lld rows)</h2>\n"
               "<p class=\"note\">Click a column header to sort (again to reverse); NaN sorts last. Rows whose verdict is "
               "not ok are red; the first divergence is outlined.</p>\n"
               "<div class=\"scroll tall\"><table class=\"sortable stages\" id=\"stage-table\">%s<tbody>\n",
            (long long)t->nrows, head);
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        int bad = strcmp(r->verdict, "ok") != 0, first = is_first(t, r);
        if (first) fprintf(f, "<tr id=\"first-row\" class=\"first%s\">", bad ? " bad" : "");
        else fprintf(f, bad ? "<tr class=\"bad\">" : "<tr>");
        row_cells(f, r);
    }
    fprintf(f, "</tbody></table></div></section>\n");
}

void nd_report_flagged(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    int64_t n = 0;
    for (int64_t i = 0; i < t->nrows; i++) n += strcmp(t->rows[i].verdict, "ok") != 0;
    fprintf(f, "<section id=\"flagged\"><h2>Flagged stages (%lld)</h2>\n", (long long)n);
    if (!n) {
        fprintf(f, "<p class=\"ok\">Every stage's verdict is ok.</p></section>\n");
        return;
    }
    fprintf(f, "<div class=\"scroll\"><table class=\"sortable stages\" id=\"flagged-table\">%s<tbody>\n", head);
    /* the first divergence on top, then the others in execution order */
    int64_t shown = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int64_t i = 0; i < t->nrows && shown < MAX_FLAGGED; i++) {
            const nd_row *r = &t->rows[i];
            if (!strcmp(r->verdict, "ok") || is_first(t, r) != !pass) continue;
            fprintf(f, pass ? "<tr class=\"bad\">" : "<tr class=\"first bad\">");
            row_cells(f, r);
            shown++;
        }
    fprintf(f, "</tbody></table></div>\n");
    if (n > shown) fprintf(f, "<p class=\"note\">First %lld of %lld shown; all are in the table of all stages.</p>\n", (long long)shown, (long long)n);
    fprintf(f, "</section>\n");
}
