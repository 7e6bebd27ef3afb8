/* report_layers.c — one line per layer (and for the rows before and after the layers): its worst
 * row with cosine, rel L2, SQNR and floor, the largest NaN/Inf count, how many rows were flagged,
 * and a link to the layer's group in the table of all stages. Every layer of the trace is a line. */
#include <string.h>
#include "report_internal.h"

void nd_report_layers(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    int nbadg = 0;
    for (int g = 0; g < m->ngroups; g++) nbadg += m->groups[g].nbad > 0;
    nd_report_section_open(f, "layers", "Layers at a glance (%d groups, %d with flagged rows)", m->ngroups, nbadg);
    if (!m->ngroups) {
        fprintf(f, "<p>This trace has no rows.</p></section>\n");
        return;
    }
    fprintf(f, "<div class=\"scroll\"><table class=\"sortable layers\" id=\"layer-table\"><thead><tr>");
    static const char *const cols[] = {"layer", "rows", "flagged", "worst", "mode", "cosine", "rel_l2", "sqnr", "floor", "prod_nan", "verdict"};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        nd_report_th_label(f, cols[i], !strcmp(cols[i], "prod_nan") ? "max prod NaN/Inf" : NULL);
    fprintf(f, "</thead><tbody>\n");
    for (int g = 0; g < m->ngroups; g++) {
        const nd_rgroup *G = &m->groups[g];
        fprintf(f, "<tr%s><td><a href=\"#%s\">%s</a><td>%lld<td>%lld", G->has_first ? " class=\"first bad\"" : G->nbad ? " class=\"bad\"" : "",
                G->id, G->label, (long long)G->nrows, (long long)G->nbad);
        if (G->worst < 0) {
            fprintf(f, "<td>-<td>-<td>nan<td>nan<td>nan<td>nan<td>%lld<td>-\n", (long long)G->max_nonfinite);
            continue;
        }
        const nd_row *r = &t->rows[G->worst];
        char cs[40], rl[40], sq[40], fl[40];
        nd_report_fig(cs, sizeof cs, r, r->cosine, 6, "all-zero");
        nd_report_fig(rl, sizeof rl, r, r->rel_l2, 4, "-");
        nd_report_fig(sq, sizeof sq, r, r->sqnr_db, 4, "-");
        nd_fmt_num(fl, sizeof fl, r->floor_sqnr_db, 4);
        fprintf(f, "<td>");
        nd_html_escape(f, nd_rshort(r));
        fprintf(f, "<td>");
        nd_html_escape(f, r->mode);
        fprintf(f, "<td>%s<td>%s<td>%s<td>%s<td>%lld<td>", cs, rl, sq, fl, (long long)G->max_nonfinite);
        nd_html_escape(f, r->verdict);
        fputc('\n', f);
    }
    fprintf(f, "</tbody></table></div></section>\n");
}
