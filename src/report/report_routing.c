/* report_routing.c — for MoE layers, which experts each path picked: per router stage a strip
 * with one bar per expert (picks over all tokens; reference up, production down), the share of
 * (token, slot) picks both paths agree on, and the first tokens whose expert sets differ.
 * Bars are drawn as one <path> per colour so 60 layers x 256 experts stay small. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report_internal.h"

enum { RW = 1320, RH = 76, RML = 64, RMR = 16, MAX_EXPERTS = 1 << 20, NEXAMPLES = 3 };

static void bars(FILE *f, const int64_t *cnt, int64_t E, int64_t mx, double mid, int up, const char *cls) {
    double w = (double)(RW - RML - RMR) / (double)E, bw = w > 3 ? w - 1 : w;
    fprintf(f, "<path class=\"%s\" d=\"", cls);
    for (int64_t x = 0; x < E; x++) {
        if (!cnt[x]) continue;
        double h = 26.0 * (double)cnt[x] / (double)mx;
        if (h < 1) h = 1;
        fprintf(f, "M%.1f %.1fh%.1fv%.1fh%.1fz", RML + x * w, mid, bw, up ? -h : h, -bw);
    }
    fprintf(f, "\"/>\n");
}

static void print_set(FILE *f, const int32_t *ids, int64_t k) {
    fprintf(f, "{");
    for (int64_t j = 0; j < k; j++) fprintf(f, "%s%d", j ? ", " : "", (int)ids[j]);
    fprintf(f, "}");
}

static int in_row(const int32_t *row, int64_t k, int32_t id) {
    for (int64_t j = 0; j < k; j++) if (row[j] == id) return 1;
    return 0;
}

static void one_pick(FILE *f, const nd_rmodel *m, const nd_report_pick *p) {
    int64_t E = 0;
    const int32_t *paths[2] = {p->ref, p->prod};
    for (int a = 0; a < 2; a++)
        if (paths[a])
            for (int64_t i = 0; i < p->t * p->k; i++)
                if (paths[a][i] >= E) E = (int64_t)paths[a][i] + 1;
    fprintf(f, "<div class=\"route\"><div class=\"rhead\"><b>");
    nd_html_escape(f, p->stage);
    fprintf(f, "</b>");
    if (strcmp(p->op, "router")) {
        fprintf(f, " (");
        nd_html_escape(f, p->op);
        fprintf(f, ": top-k positions, not experts)");
    }
    fprintf(f, " &middot; %lld tokens &times; top-%lld", (long long)p->t, (long long)p->k);
    if (E == 0 || E > MAX_EXPERTS) {
        fprintf(f, " &middot; <span class=\"warn\">no usable expert ids (largest %lld)</span></div></div>\n", (long long)E - 1);
        return;
    }
    int64_t *cnt = calloc((size_t)(2 * E), sizeof *cnt);
    if (!cnt) { fprintf(f, " &middot; out of memory</div></div>\n"); return; }
    int64_t mx = 1;
    for (int a = 0; a < 2; a++)
        if (paths[a])
            for (int64_t i = 0; i < p->t * p->k; i++)
                if (paths[a][i] >= 0 && ++cnt[a * E + paths[a][i]] > mx) mx = cnt[a * E + paths[a][i]];
    int64_t agree = 0, differ = 0;
    if (p->ref && p->prod) {
        for (int64_t tk = 0; tk < p->t; tk++) {
            int64_t same = 0;
            for (int64_t j = 0; j < p->k; j++) same += in_row(p->prod + tk * p->k, p->k, p->ref[tk * p->k + j]);
            agree += same;
            differ += same < p->k;
        }
        double share = p->t > 0 && p->k > 0 ? (double)agree / (double)(p->t * p->k) : NAN;
        fprintf(f, " &middot; %s%.1f%% of picks agree</span> &middot; %lld token%s with different %s",
                share < 1 ? "<span class=\"bad\">" : "<span>", 100 * share, (long long)differ, differ == 1 ? "" : "s",
                strcmp(p->op, "router") ? "picks" : "experts");
    } else {
        fprintf(f, " &middot; only the %s path was recorded", p->ref ? "reference" : "production");
    }
    /* the trace's own figure, per mode, for the same router stage */
    for (int64_t s = 0; s < m->n; s++) {
        if (strcmp(m->st[s].name, p->stage)) continue;
        for (int md = 0; md < ND_RM_NMODES; md++) {
            if (m->st[s].row[md] < 0) continue;
            const nd_row *r = &m->t->rows[m->st[s].row[md]];
            char v[32];
            nd_fmt_num(v, sizeof v, r->topk_agree, 4);
            fprintf(f, " &middot; topk_agree (%s) %s", nd_rmode_name[md], v);
        }
        break;
    }
    fprintf(f, "</div>\n<svg class=\"rstrip\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"expert picks per path\">\n",
            RW, RH, RW, RH);
    double mid = 30;
    fprintf(f, "<text class=\"rlab\" x=\"%d\" y=\"%.1f\">reference</text><text class=\"rlab\" x=\"%d\" y=\"%.1f\">production</text>\n",
            RML - 6, mid - 8, RML - 6, mid + 16);
    bars(f, cnt, E, mx, mid, 1, "ref");
    bars(f, cnt + E, E, mx, mid, 0, "prod");
    if (p->ref && p->prod) {
        fprintf(f, "<path class=\"diff\" d=\"");
        double w = (double)(RW - RML - RMR) / (double)E;
        for (int64_t x = 0; x < E; x++)
            if (cnt[x] != cnt[E + x]) fprintf(f, "M%.1f %.1fh%.1f", RML + x * w, mid + 31, w > 2 ? w : 2);
        fprintf(f, "\"/>\n");
    }
    fprintf(f, "<line class=\"rmid\" x1=\"%d\" x2=\"%d\" y1=\"%.1f\" y2=\"%.1f\"/>", RML, RW - RMR, mid, mid);
    const char *unit = strcmp(p->op, "router") ? "index" : "expert";
    fprintf(f, "<text class=\"rax\" x=\"%d\" y=\"%d\">%s 0</text><text class=\"rax end\" x=\"%d\" y=\"%d\">%s %lld</text>\n",
            RML, RH - 1, unit, RW - RMR, RH - 1, unit, (long long)E - 1);
    fprintf(f, "</svg>\n");
    if (differ) {
        fprintf(f, "<div class=\"rdiff\">");
        int shown = 0;
        for (int64_t tk = 0; tk < p->t && shown < NEXAMPLES; tk++) {
            int same = 1;
            for (int64_t j = 0; j < p->k; j++) same &= in_row(p->prod + tk * p->k, p->k, p->ref[tk * p->k + j]);
            if (same) continue;
            fprintf(f, "%stoken %lld: reference ", shown ? "; " : "", (long long)tk);
            print_set(f, p->ref + tk * p->k, p->k);
            fprintf(f, ", production ");
            print_set(f, p->prod + tk * p->k, p->k);
            shown++;
        }
        if (differ > shown) fprintf(f, "; &hellip; %lld more", (long long)(differ - shown));
        fprintf(f, "</div>\n");
    }
    fprintf(f, "</div>\n");
    free(cnt);
}

void nd_report_routing_section(FILE *f, const nd_rmodel *m, const nd_report_routing *rt) {
    nd_report_section_open(f, "routing", "MoE routing: experts picked by each path");
    if (!rt || rt->n == 0) {
        fprintf(f, "<p>No routing recorded in this trace%s.</p></section>\n",
                rt && rt->nmissing ? " (router stages exist but /routing has no entry for them)" : " (no MoE layer)");
        return;
    }
    fprintf(f, "<p class=\"note\">Bars: how many (token, slot) picks went to each expert, reference above the line, "
               "production below; red marks under the strip: experts picked a different number of times. "
               "Picks come from /routing/&lt;stage&gt;/{ref,prod}.</p>\n<div class=\"legend\">"
               "<span><i class=\"sw ref\"></i>reference</span><span><i class=\"sw prodbar\"></i>production</span>"
               "<span><i class=\"sw diff\"></i>count differs</span></div>\n<div class=\"scroll\">\n");
    for (int i = 0; i < rt->n; i++) one_pick(f, m, &rt->picks[i]);
    fprintf(f, "</div>\n");
    if (rt->nmissing) fprintf(f, "<p class=\"note\">%d router stage%s without a /routing entry.</p>\n", rt->nmissing, rt->nmissing == 1 ? "" : "s");
    fprintf(f, "</section>\n");
}
