/* report_charts.c — the four per-stage charts: cosine, SQNR (with the divergence threshold),
 * reference vs production amax on a log axis, and NaN/Inf counts. Both modes share the x axis.
 *
 * Bit-exact stages (SQNR at the probes' 200 dB cap: norms, ropes, adds on identical inputs) are
 * left out of the cosine and SQNR lines, which otherwise zigzag between 1.0/200 dB and the
 * quantized stages' values; the SQNR chart marks them as ticks along its top edge. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "probes.h"
#include "report_internal.h"

enum { CW = 1320, CH = 280 };

#define mode_cls nd_rmode_cls
#define mode_name nd_rmode_name

static const nd_row *row_of(const nd_rmodel *m, int64_t p, int md) {
    int64_t i = m->st[p].row[md];
    return i >= 0 ? &m->t->rows[i] : NULL;
}
/* The row that carries mode-independent figures (reference amax, floor): isolated first. */
static const nd_row *any_row(const nd_rmodel *m, int64_t p) {
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (row_of(m, p, md)) return row_of(m, p, md);
    return NULL;
}
/* More than one stage per two pixels: thinner lines. */
static int dense(const nd_rmodel *m) { return m->n > CW / 2; }
static int exact(const nd_row *r) { return r->sqnr_db >= ND_SQNR_CAP_DB; }

/* Divergence threshold per stage (NaN where the stage has no measured floor). */
static double threshold_db(const nd_rmodel *m, int64_t p) {
    const nd_row *r = row_of(m, p, ND_RM_ISO);
    return r && isfinite(r->floor_sqnr_db) ? r->floor_sqnr_db - ND_REPORT_MARGIN_DB : NAN;
}
/* The cosine that an error orthogonal to the reference at that SQNR gives. */
static double cos_of_db(double db) { return 1 / sqrt(1 + pow(10, -db / 10)); }

static void threshold_path(const nd_plot *p, const double *thr, int64_t n) {
    fprintf(p->f, "<path class=\"thr\" d=\"");
    double w = p->w / (double)(n ? n : 1);
    for (int64_t i = 0; i < n; i++)
        if (isfinite(thr[i])) fprintf(p->f, "M%.1f %.1fh%.1f", nd_plot_x(p, (double)i), nd_plot_y(p, thr[i]), w < 2 ? 2 : w);
    fprintf(p->f, "\"/>\n");
}

static void first_mark(const nd_plot *p, const nd_rmodel *m) {
    if (m->first_pos < 0) return;
    char label[2 * ND_NAME_LEN + 40];
    snprintf(label, sizeof label, "first divergence: %s (%s)", m->t->summary.first_divergence,
             m->t->summary.first_divergence_mode);
    nd_plot_vmark(p, (double)m->first_pos + 0.5, label);
}

static void legend(FILE *f, const nd_rmodel *m, const char *extra_cls, const char *extra) {
    fprintf(f, "<div class=\"legend\">");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>%s</span>", mode_cls[md], mode_name[md]);
    if (extra) fprintf(f, "<span><i class=\"sw %s\"></i>%s</span>", extra_cls, extra);
    if (m->first_pos >= 0) fprintf(f, "<span><i class=\"sw mark\"></i>first divergence</span>");
    fprintf(f, "</div>\n");
}

/* Per mode: y values and skip flags for one figure. */
typedef struct series { double *y[ND_RM_NMODES]; unsigned char *skip[ND_RM_NMODES]; } series;

static int series_alloc(series *s, int64_t n) {
    memset(s, 0, sizeof *s);
    for (int md = 0; md < ND_RM_NMODES; md++) {
        s->y[md] = malloc((size_t)(n ? n : 1) * sizeof(double));
        s->skip[md] = calloc((size_t)(n ? n : 1), 1);
        if (!s->y[md] || !s->skip[md]) return -1;
    }
    return 0;
}
static void series_free(series *s) {
    for (int md = 0; md < ND_RM_NMODES; md++) { free(s->y[md]); free(s->skip[md]); }
}

/* Fill s with figure `get` of each mode's row; exact rows are skipped when skip_exact. */
static void fill(series *s, const nd_rmodel *m, double (*get)(const nd_row *), int skip_exact, double *lo, double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int md = 0; md < ND_RM_NMODES; md++)
        for (int64_t p = 0; p < m->n; p++) {
            const nd_row *r = row_of(m, p, md);
            s->y[md][p] = r ? get(r) : NAN;
            s->skip[md][p] = r && skip_exact && exact(r);
            double v = s->y[md][p];
            if (!s->skip[md][p] && isfinite(v)) {
                if (v < *lo) *lo = v;
                if (v > *hi) *hi = v;
            }
        }
}

static double get_cos(const nd_row *r) { return r->cosine; }
static double get_sqnr(const nd_row *r) { return r->sqnr_db; }
static double get_prod_amax(const nd_row *r) { return r->prod_amax; }
static double get_prod_bad(const nd_row *r) { return (double)(r->prod_nan + r->prod_inf); }

static void chart_cosine(FILE *f, const nd_rmodel *m, series *s, double *thr) {
    double lo, hi;
    fill(s, m, get_cos, 1, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        double t = threshold_db(m, p);
        thr[p] = isfinite(t) ? cos_of_db(t) : NAN;
        if (isfinite(thr[p]) && thr[p] < lo) lo = thr[p];
    }
    if (!isfinite(lo)) lo = 0.99;
    lo = lo > 0.99 ? 0.99 : lo > 0.9 ? floor(lo * 100) / 100 : floor(lo * 10) / 10;
    if (lo < -1) lo = -1;
    nd_plot pl = {0};
    pl.xmin = 0; pl.xmax = (double)m->n; pl.ymin = lo; pl.ymax = 1;
    fprintf(f, "<h3 id=\"chart-cosine\">Cosine similarity per stage</h3>\n");
    legend(f, m, "thr", "threshold (orthogonal-error equivalent of floor &minus; 6 dB)");
    nd_plot_begin(&pl, f, CW, CH, dense(m) ? "chart cosine dense" : "chart cosine", "cosine similarity of production vs reference per stage");
    nd_plot_layers(&pl, m);
    nd_plot_yaxis(&pl, "cosine", -1);
    threshold_path(&pl, thr, m->n);
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) nd_plot_series(&pl, s->y[md], s->skip[md], m->n, mode_cls[md]);
    first_mark(&pl, m);
    nd_plot_end(&pl);
}

static void chart_sqnr(FILE *f, const nd_rmodel *m, series *s, double *thr) {
    double lo, hi;
    fill(s, m, get_sqnr, 1, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        thr[p] = threshold_db(m, p);
        if (isfinite(thr[p]) && thr[p] + 5 > hi) hi = thr[p] + 5;
    }
    if (!isfinite(lo) || lo > 0) lo = 0;
    if (lo < -60) lo = -60;
    lo = floor(lo / 10) * 10;
    hi = hi < 40 ? 40 : ceil(hi / 10) * 10;
    if (hi > ND_SQNR_CAP_DB) hi = ND_SQNR_CAP_DB;
    nd_plot pl = {0};
    pl.xmin = 0; pl.xmax = (double)m->n; pl.ymin = lo; pl.ymax = hi;
    fprintf(f, "<h3 id=\"chart-sqnr\">SQNR per stage (dB)</h3>\n");
    legend(f, m, "thr", "threshold: floor_sqnr_db &minus; 6 dB");
    nd_plot_begin(&pl, f, CW, CH, dense(m) ? "chart sqnr dense" : "chart sqnr", "SQNR per stage in dB with the divergence threshold");
    nd_plot_layers(&pl, m);
    nd_plot_yaxis(&pl, "SQNR (dB)", 0);
    /* bit-exact stages: short ticks along the top edge */
    fprintf(f, "<path class=\"exact\" d=\"");
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = any_row(m, p);
        if (r && exact(r)) fprintf(f, "M%.1f %.1fv4", nd_plot_x(&pl, (double)p + 0.5), pl.y0);
    }
    fprintf(f, "\"/>\n");
    threshold_path(&pl, thr, m->n);
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) nd_plot_series(&pl, s->y[md], s->skip[md], m->n, mode_cls[md]);
    first_mark(&pl, m);
    nd_plot_end(&pl);
    fprintf(f, "<p class=\"note\">Grey ticks on the top edge: bit-exact stages (SQNR at the %.0f dB cap), left out of "
               "the lines. Values outside the axis are drawn on its edge.</p>\n", ND_SQNR_CAP_DB);
}

/* Log-axis exponent range for positive finite values of the given arrays. */
static void log_range(const double *const *ys, int ny, int64_t n, double *elo, double *ehi) {
    double lo = INFINITY, hi = -INFINITY;
    for (int k = 0; k < ny; k++)
        if (ys[k])
            for (int64_t p = 0; p < n; p++)
                if (isfinite(ys[k][p]) && ys[k][p] > 0) {
                    if (ys[k][p] < lo) lo = ys[k][p];
                    if (ys[k][p] > hi) hi = ys[k][p];
                }
    if (!isfinite(lo)) { lo = 1; hi = 1; }
    *elo = floor(log10(lo));
    *ehi = ceil(log10(hi));
    if (*ehi <= *elo) *ehi = *elo + 1;
}

static void zero_ticks(const nd_plot *pl, const double *y, int64_t n, const char *cls) {
    fprintf(pl->f, "<path class=\"%s\" d=\"", cls);
    for (int64_t p = 0; p < n; p++)
        if (y[p] == 0) fprintf(pl->f, "M%.1f %.1fv-6", nd_plot_x(pl, (double)p + 0.5), pl->y0 + pl->h);
    fprintf(pl->f, "\"/>\n");
}

static void chart_amax(FILE *f, const nd_rmodel *m, series *s, double *ref) {
    double lo, hi;
    fill(s, m, get_prod_amax, 0, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = any_row(m, p);
        ref[p] = r ? r->ref_amax : NAN;
    }
    const double *ys[1 + ND_RM_NMODES] = {ref};
    for (int md = 0; md < ND_RM_NMODES; md++) ys[1 + md] = m->has_mode[md] ? s->y[md] : NULL;
    nd_plot pl = {0};
    pl.xmin = 0; pl.xmax = (double)m->n; pl.ylog = 1;
    log_range(ys, 1 + ND_RM_NMODES, m->n, &pl.ymin, &pl.ymax);
    fprintf(f, "<h3 id=\"chart-amax\">Reference vs production amax per stage (log axis)</h3>\n");
    fprintf(f, "<div class=\"legend\"><span><i class=\"sw ref\"></i>reference</span>");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>production, %s</span>", mode_cls[md], mode_name[md]);
    fprintf(f, "<span><i class=\"sw zero\"></i>amax 0 (bottom edge)</span>%s</div>\n",
            m->first_pos >= 0 ? "<span><i class=\"sw mark\"></i>first divergence</span>" : "");
    nd_plot_begin(&pl, f, CW, CH, dense(m) ? "chart amax dense" : "chart amax", "reference and production amax per stage, log axis");
    nd_plot_layers(&pl, m);
    nd_plot_yaxis(&pl, "amax", 0);
    double *nz = malloc((size_t)(m->n ? m->n : 1) * sizeof *nz);
    for (int k = 0; k < 1 + ND_RM_NMODES && nz; k++) {
        if (!ys[k]) continue;
        /* zeros cannot sit on a log axis: they break the line and are marked as red ticks */
        for (int64_t p = 0; p < m->n; p++) nz[p] = ys[k][p] == 0 ? NAN : ys[k][p];
        nd_plot_series(&pl, nz, NULL, m->n, k == 0 ? "ref" : mode_cls[k - 1]);
        zero_ticks(&pl, ys[k], m->n, "zero");
    }
    free(nz);
    first_mark(&pl, m);
    nd_plot_end(&pl);
}

static void chart_nonfinite(FILE *f, const nd_rmodel *m, series *s, double *ref) {
    double lo, hi;
    fill(s, m, get_prod_bad, 0, &lo, &hi);
    double total = 0, mx = 0;
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = any_row(m, p);
        ref[p] = r ? (double)(r->ref_nan + r->ref_inf) : NAN;
        for (int k = 0; k < 1 + ND_RM_NMODES; k++) {
            double v = k == 0 ? ref[p] : (m->has_mode[k - 1] ? s->y[k - 1][p] : 0);
            if (isfinite(v)) { total += v; if (v > mx) mx = v; }
        }
    }
    nd_plot pl = {0};
    pl.xmin = 0; pl.xmax = (double)m->n; pl.ylog = 1;
    pl.ymin = -0.5;   /* count 0 sits on the bottom edge, 1 just above it */
    pl.ymax = mx > 1 ? ceil(log10(mx)) : 1;
    fprintf(f, "<h3 id=\"chart-nonfinite\">NaN and Inf per stage</h3>\n");
    fprintf(f, "<div class=\"legend\"><span><i class=\"sw ref\"></i>reference</span>");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>production, %s</span>", mode_cls[md], mode_name[md]);
    fprintf(f, "%s</div>\n", m->first_pos >= 0 ? "<span><i class=\"sw mark\"></i>first divergence</span>" : "");
    /* nothing to show: a flat strip instead of a full-height empty chart */
    nd_plot_begin(&pl, f, CW, total == 0 ? 120 : CH, dense(m) ? "chart nonfinite dense" : "chart nonfinite",
                  "NaN plus Inf count per stage, log axis");
    nd_plot_layers(&pl, m);
    nd_plot_yaxis(&pl, "NaN+Inf", 0);
    fprintf(f, "<text class=\"ytick0\" x=\"%.1f\" y=\"%.1f\">0</text>\n", pl.x0 - 6, pl.y0 + pl.h + 4);
    nd_plot_series(&pl, ref, NULL, m->n, "ref");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) nd_plot_series(&pl, s->y[md], NULL, m->n, mode_cls[md]);
    first_mark(&pl, m);
    nd_plot_end(&pl);
    if (total == 0) fprintf(f, "<p class=\"note ok\">No NaN or Inf in any stage, on either path, in any mode.</p>\n");
}

void nd_report_charts(FILE *f, const nd_rmodel *m) {
    nd_report_section_open(f, "charts", "Per-stage figures");
    series s;
    double *aux = malloc((size_t)(m->n ? m->n : 1) * sizeof *aux);
    if (series_alloc(&s, m->n) || !aux) {
        fprintf(f, "<p class=\"warn\">out of memory: charts left out</p></section>\n");
        series_free(&s);
        free(aux);
        return;
    }
    chart_cosine(f, m, &s, aux);
    chart_sqnr(f, m, &s, aux);
    chart_amax(f, m, &s, aux);
    chart_nonfinite(f, m, &s, aux);
    series_free(&s);
    free(aux);
    fprintf(f, "</section>\n");
}
