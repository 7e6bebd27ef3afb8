/* report_scales.c — per layer, the scale ratio (quantizer multiplier used / 2688/amax of the
 * reference input) of every quantized linear, as a layer x module heat map. Modules are keyed by
 * their name inside the layer with numeric parts replaced by "*", so the routed experts of one
 * projection share a column (their worst ratio is shown, all of them in the tooltip summary):
 * this keeps 60 layers x 256 experts to a table of a dozen columns. Isolated rows are used when
 * present (the chained rows carry the same ratio of the same multiplier). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "report_internal.h"

enum { KEY_LEN = ND_NAME_LEN };

typedef struct cell {
    int n, nfinite, bad;     /* linears in the cell, with a finite ratio, with a verdict other than ok */
    double worst, lo, hi;    /* worst = the ratio furthest from 1 on a log scale */
    char worst_name[ND_NAME_LEN];
} cell;

/* "layers.3.mlp.experts.17.up_proj" -> "mlp.experts.*.up_proj" (the part after "layers.N."). */
static void module_key(const char *name, char *key, size_t n) {
    const char *s = name;
    if (!strncmp(s, "layers.", 7)) {
        const char *d = strchr(s + 7, '.');
        s = d ? d + 1 : s;
    }
    size_t at = 0;
    while (*s && at + 2 < n) {
        const char *e = strchr(s, '.');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int digits = len > 0;
        for (size_t i = 0; i < len; i++) if (s[i] < '0' || s[i] > '9') digits = 0;
        if (digits) key[at++] = '*';
        else for (size_t i = 0; i < len && at + 2 < n; i++) key[at++] = s[i];
        if (!e) break;
        key[at++] = '.';
        s = e + 1;
    }
    key[at] = 0;
}

/* Background colour: white at ratio 1, towards red above (saturation), blue below (underflow),
 * full colour at 16x either way. */
static void ratio_colour(double r, char out[16]) {
    if (!isfinite(r) || r <= 0) { snprintf(out, 16, "#c9c9c9"); return; }
    double t = log2(r) / 4;
    if (t > 1) t = 1;
    if (t < -1) t = -1;
    double a = fabs(t);
    int R, G, B;
    if (t >= 0) { R = 255 - (int)(a * (255 - 215)); G = 255 - (int)(a * (255 - 48)); B = 255 - (int)(a * (255 - 31)); }
    else { R = 255 - (int)(a * (255 - 43)); G = 255 - (int)(a * (255 - 108)); B = 255 - (int)(a * (255 - 176)); }
    snprintf(out, 16, "#%02x%02x%02x", R, G, B);
}

void nd_report_scales(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    nd_report_section_open(f, "scales", "Scale ratio of every quantized linear, per layer");
    /* columns: distinct keys in order of first appearance; rows: layers of the stage model */
    int nkeys = 0, capk = 16;
    char (*keys)[KEY_LEN] = malloc((size_t)capk * KEY_LEN);
    int nl = m->nlayers + 1;   /* last row: quantized linears outside layers */
    int32_t *pos_layer = NULL;
    cell *cells = NULL;
    if (!keys) goto oom;
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = NULL;
        for (int md = 0; md < ND_RM_NMODES && !r; md++) if (m->st[p].row[md] >= 0) r = &t->rows[m->st[p].row[md]];
        if (!r || strcmp(r->op, "linear") || !r->quantized) continue;
        char key[KEY_LEN];
        module_key(r->name, key, sizeof key);
        int k = 0;
        while (k < nkeys && strcmp(keys[k], key)) k++;
        if (k == nkeys) {
            if (nkeys == capk) {
                void *nk = realloc(keys, (size_t)(capk *= 2) * KEY_LEN);
                if (!nk) goto oom;
                keys = nk;
            }
            snprintf(keys[nkeys++], KEY_LEN, "%s", key);
        }
    }
    if (nkeys == 0) {
        fprintf(f, "<p>No quantized linear in this trace.</p></section>\n");
        free(keys);
        return;
    }
    cells = calloc((size_t)nl * (size_t)nkeys, sizeof *cells);
    pos_layer = malloc((size_t)(m->n ? m->n : 1) * sizeof *pos_layer);
    if (!cells || !pos_layer) goto oom;
    for (int64_t p = 0; p < m->n; p++) pos_layer[p] = m->nlayers;   /* outside layers */
    for (int i = 0; i < m->nlayers; i++)
        for (int64_t p = m->layer_lo[i]; p <= m->layer_hi[i]; p++) pos_layer[p] = i;
    int any_outside = 0;
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = NULL;
        int bad = 0;
        for (int md = 0; md < ND_RM_NMODES; md++) {
            if (m->st[p].row[md] < 0) continue;
            const nd_row *q = &t->rows[m->st[p].row[md]];
            if (!r) r = q;
            if (nd_verdict_bad(q->verdict)) bad = 1;
        }
        if (!r || strcmp(r->op, "linear") || !r->quantized) continue;
        char key[KEY_LEN];
        module_key(r->name, key, sizeof key);
        int k = 0;
        while (strcmp(keys[k], key)) k++;
        cell *c = &cells[(size_t)pos_layer[p] * (size_t)nkeys + (size_t)k];
        if (pos_layer[p] == m->nlayers) any_outside = 1;
        double v = r->scale_ratio;
        c->n++;
        c->bad |= bad;
        if (isfinite(v) && v > 0) {
            if (!c->nfinite || fabs(log(v)) > fabs(log(c->worst))) {
                c->worst = v;
                snprintf(c->worst_name, sizeof c->worst_name, "%s", r->name);
            }
            if (!c->nfinite || v < c->lo) c->lo = v;
            if (!c->nfinite || v > c->hi) c->hi = v;
            c->nfinite++;
        } else if (!isnan(v) && !c->nfinite) {
            c->worst = v;   /* 0 or Inf: shown as is */
            snprintf(c->worst_name, sizeof c->worst_name, "%s", r->name);
        }
    }
    fprintf(f, "<div class=\"legend\"><span><i class=\"sw\" style=\"background:#2b6cb0\"></i>&le; 1/16</span>"
               "<span><i class=\"sw\" style=\"background:#ffffff\"></i>1</span>"
               "<span><i class=\"sw\" style=\"background:#d7301f\"></i>&ge; 16</span>"
               "<span><i class=\"sw\" style=\"background:#c9c9c9\"></i>no ratio (not quantized by a calibrated multiplier)</span></div>\n");
    fprintf(f, "<div class=\"scroll\"><table class=\"heat\"><thead><tr><th title=\"decoder layer of the linears in the row\">layer</th>");
    for (int k = 0; k < nkeys; k++) {
        /* break long module names only after a dot; the title says what the cells are */
        fprintf(f, "<th title=\"scale ratio of ");
        nd_html_escape(f, keys[k]);
        fprintf(f, " in each layer: ");
        nd_html_escape(f, nd_rmetric_tip("scale_ratio"));
        fprintf(f, "\">");
        for (const char *a = keys[k]; *a;) {
            const char *d = strchr(a, '.');
            size_t len = d ? (size_t)(d - a) + 1 : strlen(a);
            char piece[KEY_LEN];
            snprintf(piece, sizeof piece, "%.*s", (int)len, a);
            nd_html_escape(f, piece);
            if (d && d[1]) fprintf(f, "<wbr>");
            a += len;
        }
        fprintf(f, "</th>");
    }
    fprintf(f, "</tr></thead><tbody>\n");
    for (int i = 0; i < nl; i++) {
        if (i == m->nlayers && !any_outside) break;
        if (i < m->nlayers) fprintf(f, "<tr><th>%d</th>", (int)m->layer_ids[i]);
        else fprintf(f, "<tr><th>outside</th>");
        for (int k = 0; k < nkeys; k++) {
            const cell *c = &cells[(size_t)i * (size_t)nkeys + (size_t)k];
            if (!c->n) { fprintf(f, "<td class=\"none\"></td>"); continue; }
            char col[16], w[32], lo[32], hi[32];
            double shown = c->nfinite ? c->worst : (c->worst_name[0] ? c->worst : NAN);
            ratio_colour(shown, col);
            nd_fmt_num(w, sizeof w, shown, 3);
            nd_fmt_num(lo, sizeof lo, c->lo, 3);
            nd_fmt_num(hi, sizeof hi, c->hi, 3);
            /* white text on the darker end of the scale */
            int dark = isfinite(shown) && shown > 0 && fabs(log2(shown)) > 2.5;
            fprintf(f, "<td%s style=\"background:%s%s\" title=\"", c->bad ? " class=\"bad\"" : "", col, dark ? ";color:#fff" : "");
            if (c->worst_name[0]) {
                nd_html_escape(f, c->worst_name);
                fprintf(f, ": %s", w);
            } else {
                fprintf(f, "no finite ratio");
            }
            if (c->n > 1 && c->nfinite) fprintf(f, " (worst of %d; range %s to %s)", c->n, lo, hi);
            fprintf(f, "\">%s</td>", isnan(shown) ? "&ndash;" : w);
        }
        fprintf(f, "</tr>\n");
    }
    fprintf(f, "</tbody></table></div></section>\n");
    free(keys);
    free(cells);
    free(pos_layer);
    return;
oom:
    free(keys);
    free(cells);
    free(pos_layer);
    fprintf(f, "<p class=\"warn\">out of memory: scale table left out</p></section>\n");
}
