/* report_charts.c — the four per-stage charts: cosine, SQNR (with the divergence threshold),
 * reference vs production amax on a log axis, and NaN/Inf counts. Both modes share the x axis.
 *
 * Bit-exact stages (SQNR at the probes' 200 dB cap: norms, ropes, adds on identical inputs) are
 * left out of the cosine and SQNR lines, which otherwise zigzag between 1.0/200 dB and the
 * quantized stages' values; the SQNR chart marks them as ticks along its top edge.
 *
 * Each chart is drawn three times, for a wide screen, a tablet and a phone (views[]); the style sheet
 * shows the one that fits the viewport (report_assets.c), so axis text stays at about its 11 px
 * on either instead of a wide drawing scaled down to a third. With --against the other trace's
 * figures are drawn over the run's (dashed), matched by stage name at the run's x positions. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "probes.h"
#include "report_internal.h"

enum { CW = 1320, CH = 280 };
static const struct view { int w, h; const char *cls; } views[] = {{CW, CH, "wide"}, {760, 260, "medium"}, {380, 240, "narrow"}};
enum { NVIEWS = sizeof views / sizeof views[0] };

/* --against: the other trace's stages at the run's x positions */
typedef struct overlay {
    const nd_rmodel *o;
    int64_t *pos;                /* pos[p]: the other's x position of the run's stage p, -1 none */
} overlay;

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
static const nd_row *other_row(const overlay *ov, int64_t p, int md) {
    return ov && ov->pos[p] >= 0 ? row_of(ov->o, ov->pos[p], md) : NULL;
}
/* More than one stage per two pixels: thinner lines. */
static int dense(const nd_rmodel *m, int v) { return m->n > views[v].w / 2; }
/* "chart KIND VIEW[ dense]" */
static const char *chart_cls(char *buf, size_t n, const char *kind, const nd_rmodel *m, int v) {
    snprintf(buf, n, "chart %s %s%s", kind, views[v].cls, dense(m, v) ? " dense" : "");
    return buf;
}
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

/* the other trace's swatches: its modes, dashed */
static void legend_other(FILE *f, const overlay *ov) {
    if (!ov) return;
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (ov->o->has_mode[md]) fprintf(f, "<span><i class=\"sw o%s\"></i>other trace, %s</span>", mode_cls[md], mode_name[md]);
}

static void legend(FILE *f, const nd_rmodel *m, const overlay *ov, const char *extra_cls, const char *extra) {
    fprintf(f, "<div class=\"legend\">");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>%s%s</span>", mode_cls[md], ov ? "run, " : "", mode_name[md]);
    legend_other(f, ov);
    if (extra) fprintf(f, "<span><i class=\"sw %s\"></i>%s</span>", extra_cls, extra);
    if (m->first_pos >= 0) fprintf(f, "<span><i class=\"sw mark\"></i>first divergence</span>");
    fprintf(f, "</div>\n");
}

/* Per mode: y values and skip flags for one figure; o* the other trace's at the run's positions. */
typedef struct series {
    double *y[ND_RM_NMODES], *oy[ND_RM_NMODES];
    unsigned char *skip[ND_RM_NMODES], *oskip[ND_RM_NMODES];
} series;

static int series_alloc(series *s, int64_t n) {
    memset(s, 0, sizeof *s);
    for (int md = 0; md < ND_RM_NMODES; md++) {
        s->y[md] = malloc((size_t)(n ? n : 1) * sizeof(double));
        s->oy[md] = malloc((size_t)(n ? n : 1) * sizeof(double));
        s->skip[md] = calloc((size_t)(n ? n : 1), 1);
        s->oskip[md] = calloc((size_t)(n ? n : 1), 1);
        if (!s->y[md] || !s->skip[md] || !s->oy[md] || !s->oskip[md]) return -1;
    }
    return 0;
}
static void series_free(series *s) {
    for (int md = 0; md < ND_RM_NMODES; md++) { free(s->y[md]); free(s->skip[md]); free(s->oy[md]); free(s->oskip[md]); }
}

static void fold(double v, int skip, double *lo, double *hi) {
    if (!skip && isfinite(v)) {
        if (v < *lo) *lo = v;
        if (v > *hi) *hi = v;
    }
}

/* Fill s with figure `get` of each mode's row (and the other trace's); exact rows are skipped
 * when skip_exact. lo/hi: the range of what is drawn. */
static void fill(series *s, const nd_rmodel *m, const overlay *ov, double (*get)(const nd_row *), int skip_exact, double *lo,
                 double *hi) {
    *lo = INFINITY;
    *hi = -INFINITY;
    for (int md = 0; md < ND_RM_NMODES; md++)
        for (int64_t p = 0; p < m->n; p++) {
            const nd_row *r = row_of(m, p, md), *o = other_row(ov, p, md);
            s->y[md][p] = r ? get(r) : NAN;
            s->skip[md][p] = r && skip_exact && exact(r);
            s->oy[md][p] = o ? get(o) : NAN;
            s->oskip[md][p] = o && skip_exact && exact(o);
            fold(s->y[md][p], s->skip[md][p], lo, hi);
            fold(s->oy[md][p], s->oskip[md][p], lo, hi);
        }
}

/* the run's lines, then the other trace's over them (dashed) */
static void draw_series(const nd_plot *pl, const nd_rmodel *m, const overlay *ov, const series *s, int skips) {
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) nd_plot_series(pl, s->y[md], skips ? s->skip[md] : NULL, m->n, mode_cls[md]);
    for (int md = 0; ov && md < ND_RM_NMODES; md++) {
        char cls[32];
        snprintf(cls, sizeof cls, "o%s", mode_cls[md]);
        if (ov->o->has_mode[md]) nd_plot_series(pl, s->oy[md], skips ? s->oskip[md] : NULL, m->n, cls);
    }
}

static double get_cos(const nd_row *r) { return r->cosine; }
static double get_sqnr(const nd_row *r) { return r->sqnr_db; }
static double get_prod_amax(const nd_row *r) { return r->prod_amax; }
static double get_prod_bad(const nd_row *r) { return (double)(r->prod_nan + r->prod_inf); }

static void chart_cosine(FILE *f, const nd_rmodel *m, const overlay *ov, series *s, double *thr) {
    double lo, hi;
    fill(s, m, ov, get_cos, 1, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        double t = threshold_db(m, p);
        thr[p] = isfinite(t) ? cos_of_db(t) : NAN;
        if (isfinite(thr[p]) && thr[p] < lo) lo = thr[p];
    }
    if (!isfinite(lo)) lo = 0.99;
    lo = lo > 0.99 ? 0.99 : lo > 0.9 ? floor(lo * 100) / 100 : floor(lo * 10) / 10;
    if (lo < -1) lo = -1;
    fprintf(f, "<h3 id=\"chart-cosine\">Cosine similarity per stage</h3>\n");
    legend(f, m, ov, "thr", "threshold (orthogonal-error equivalent of floor &minus; 6 dB)");
    for (int v = 0; v < NVIEWS; v++) {
        nd_plot pl = {0};
        char cls[64];
        pl.xmin = 0; pl.xmax = (double)m->n; pl.ymin = lo; pl.ymax = 1; pl.narrow = views[v].w < 500;
        nd_plot_begin(&pl, f, views[v].w, views[v].h, chart_cls(cls, sizeof cls, "cosine", m, v),
                      "cosine similarity of production vs reference per stage");
        nd_plot_layers(&pl, m);
        nd_plot_yaxis(&pl, "cosine", -1);
        threshold_path(&pl, thr, m->n);
        draw_series(&pl, m, ov, s, 1);
        first_mark(&pl, m);
        nd_plot_end(&pl);
    }
}

static void chart_sqnr(FILE *f, const nd_rmodel *m, const overlay *ov, series *s, double *thr) {
    double lo, hi;
    fill(s, m, ov, get_sqnr, 1, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        thr[p] = threshold_db(m, p);
        if (isfinite(thr[p]) && thr[p] + 5 > hi) hi = thr[p] + 5;
    }
    if (!isfinite(lo) || lo > 0) lo = 0;
    if (lo < -60) lo = -60;
    lo = floor(lo / 10) * 10;
    hi = hi < 40 ? 40 : ceil(hi / 10) * 10;
    if (hi > ND_SQNR_CAP_DB) hi = ND_SQNR_CAP_DB;
    fprintf(f, "<h3 id=\"chart-sqnr\">SQNR per stage (dB)</h3>\n");
    legend(f, m, ov, "thr", "threshold: floor_sqnr_db &minus; 6 dB");
    for (int v = 0; v < NVIEWS; v++) {
        nd_plot pl = {0};
        char cls[64];
        pl.xmin = 0; pl.xmax = (double)m->n; pl.ymin = lo; pl.ymax = hi; pl.narrow = views[v].w < 500;
        nd_plot_begin(&pl, f, views[v].w, views[v].h, chart_cls(cls, sizeof cls, "sqnr", m, v),
                      "SQNR per stage in dB with the divergence threshold");
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
        draw_series(&pl, m, ov, s, 1);
        first_mark(&pl, m);
        nd_plot_end(&pl);
    }
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

static void chart_amax(FILE *f, const nd_rmodel *m, const overlay *ov, series *s, double *ref) {
    double lo, hi;
    fill(s, m, ov, get_prod_amax, 0, &lo, &hi);
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = any_row(m, p);
        ref[p] = r ? r->ref_amax : NAN;
    }
    const double *ys[1 + 2 * ND_RM_NMODES] = {ref};
    const char *cls_of[1 + 2 * ND_RM_NMODES] = {"ref"};
    char ocls[ND_RM_NMODES][16];
    for (int md = 0; md < ND_RM_NMODES; md++) {
        ys[1 + md] = m->has_mode[md] ? s->y[md] : NULL;
        cls_of[1 + md] = mode_cls[md];
        snprintf(ocls[md], sizeof ocls[md], "o%s", mode_cls[md]);
        ys[1 + ND_RM_NMODES + md] = ov && ov->o->has_mode[md] ? s->oy[md] : NULL;
        cls_of[1 + ND_RM_NMODES + md] = ocls[md];
    }
    double elo, ehi;
    log_range(ys, 1 + 2 * ND_RM_NMODES, m->n, &elo, &ehi);
    fprintf(f, "<h3 id=\"chart-amax\">Reference vs production amax per stage (log axis)</h3>\n");
    fprintf(f, "<div class=\"legend\"><span><i class=\"sw ref\"></i>reference%s</span>", ov ? " (run)" : "");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>production, %s%s</span>", mode_cls[md], ov ? "run, " : "", mode_name[md]);
    legend_other(f, ov);
    fprintf(f, "<span><i class=\"sw zero\"></i>amax 0 (bottom edge)</span>%s</div>\n",
            m->first_pos >= 0 ? "<span><i class=\"sw mark\"></i>first divergence</span>" : "");
    double *nz = malloc((size_t)(m->n ? m->n : 1) * sizeof *nz);
    for (int v = 0; v < NVIEWS && nz; v++) {
        nd_plot pl = {0};
        char cls[64];
        pl.xmin = 0; pl.xmax = (double)m->n; pl.ylog = 1; pl.ymin = elo; pl.ymax = ehi; pl.narrow = views[v].w < 500;
        nd_plot_begin(&pl, f, views[v].w, views[v].h, chart_cls(cls, sizeof cls, "amax", m, v),
                      "reference and production amax per stage, log axis");
        nd_plot_layers(&pl, m);
        nd_plot_yaxis(&pl, "amax", 0);
        for (int k = 0; k < 1 + 2 * ND_RM_NMODES; k++) {
            if (!ys[k]) continue;
            /* zeros cannot sit on a log axis: they break the line and are marked as red ticks */
            for (int64_t p = 0; p < m->n; p++) nz[p] = ys[k][p] == 0 ? NAN : ys[k][p];
            nd_plot_series(&pl, nz, NULL, m->n, cls_of[k]);
            zero_ticks(&pl, ys[k], m->n, "zero");
        }
        first_mark(&pl, m);
        nd_plot_end(&pl);
    }
    free(nz);
}

static void chart_nonfinite(FILE *f, const nd_rmodel *m, const overlay *ov, series *s, double *ref) {
    double lo, hi;
    fill(s, m, ov, get_prod_bad, 0, &lo, &hi);
    double total = 0, mx = 0;
    for (int64_t p = 0; p < m->n; p++) {
        const nd_row *r = any_row(m, p);
        ref[p] = r ? (double)(r->ref_nan + r->ref_inf) : NAN;
        for (int k = 0; k < 1 + 2 * ND_RM_NMODES; k++) {
            const int md = (k - 1) % ND_RM_NMODES, oth = k > ND_RM_NMODES;
            double val = k == 0 ? ref[p] : oth ? (ov && ov->o->has_mode[md] ? s->oy[md][p] : 0) : (m->has_mode[md] ? s->y[md][p] : 0);
            if (isfinite(val)) { total += val; if (val > mx) mx = val; }
        }
    }
    fprintf(f, "<h3 id=\"chart-nonfinite\">NaN and Inf per stage</h3>\n");
    fprintf(f, "<div class=\"legend\"><span><i class=\"sw ref\"></i>reference%s</span>", ov ? " (run)" : "");
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (m->has_mode[md]) fprintf(f, "<span><i class=\"sw %s\"></i>production, %s%s</span>", mode_cls[md], ov ? "run, " : "", mode_name[md]);
    legend_other(f, ov);
    fprintf(f, "%s</div>\n", m->first_pos >= 0 ? "<span><i class=\"sw mark\"></i>first divergence</span>" : "");
    for (int v = 0; v < NVIEWS; v++) {
        nd_plot pl = {0};
        char cls[64];
        pl.xmin = 0; pl.xmax = (double)m->n; pl.ylog = 1; pl.narrow = views[v].w < 500;
        pl.ymin = -0.5;   /* count 0 sits on the bottom edge, 1 just above it */
        pl.ymax = mx > 1 ? ceil(log10(mx)) : 1;
        /* nothing to show: a flat strip instead of a full-height empty chart */
        nd_plot_begin(&pl, f, views[v].w, total == 0 ? 120 : views[v].h, chart_cls(cls, sizeof cls, "nonfinite", m, v),
                      "NaN plus Inf count per stage, log axis");
        nd_plot_layers(&pl, m);
        nd_plot_yaxis(&pl, "NaN+Inf", 0);
        fprintf(f, "<text class=\"ytick0\" x=\"%.1f\" y=\"%.1f\">0</text>\n", pl.x0 - 6, pl.y0 + pl.h + 4);
        nd_plot_series(&pl, ref, NULL, m->n, "ref");
        draw_series(&pl, m, ov, s, 0);
        first_mark(&pl, m);
        nd_plot_end(&pl);
    }
    if (total == 0) fprintf(f, "<p class=\"note ok\">No NaN or Inf in any stage, on either path, in any mode%s.</p>\n", ov ? ", in either trace" : "");
}

/* ---- --against: the other trace's stages matched to the run's by name ---- */
typedef struct named { const char *name; int64_t pos; } named;
static int cmp_named(const void *a, const void *b) { return strcmp(((const named *)a)->name, ((const named *)b)->name); }

static int64_t *match_stages(const nd_rmodel *m, const nd_rmodel *o) {
    named *by = malloc((size_t)(o->n ? o->n : 1) * sizeof *by);
    int64_t *pos = malloc((size_t)(m->n ? m->n : 1) * sizeof *pos);
    if (!by || !pos) { free(by); free(pos); return NULL; }
    for (int64_t q = 0; q < o->n; q++) by[q] = (named){o->st[q].name, q};
    qsort(by, (size_t)o->n, sizeof *by, cmp_named);
    for (int64_t p = 0; p < m->n; p++) {
        named key = {m->st[p].name, -1};
        const named *hit = o->n ? bsearch(&key, by, (size_t)o->n, sizeof *by, cmp_named) : NULL;
        pos[p] = hit ? hit->pos : -1;
    }
    free(by);
    return pos;
}

void nd_report_charts(FILE *f, const nd_rmodel *m, const nd_rmodel *other) {
    nd_report_section_open(f, "charts", "Per-stage figures");
    series s;
    overlay ov = {other, other ? match_stages(m, other) : NULL};
    double *aux = malloc((size_t)(m->n ? m->n : 1) * sizeof *aux);
    if (series_alloc(&s, m->n) || !aux || (other && !ov.pos)) {
        fprintf(f, "<p class=\"warn\">out of memory: charts left out</p></section>\n");
        series_free(&s);
        free(aux);
        free(ov.pos);
        return;
    }
    const overlay *o = other ? &ov : NULL;
    if (o) fprintf(f, "<p class=\"note\">The other trace's figures are drawn dashed over this run's, at this run's stage "
                      "positions (stages matched by name).</p>\n");
    chart_cosine(f, m, o, &s, aux);
    chart_sqnr(f, m, o, &s, aux);
    chart_amax(f, m, o, &s, aux);
    chart_nonfinite(f, m, o, &s, aux);
    series_free(&s);
    free(aux);
    free(ov.pos);
    fprintf(f, "</section>\n");
}
