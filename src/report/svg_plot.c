/* svg_plot.c — the few SVG primitives the charts need: a plot area, axes, layer bands, lines
 * with gaps, and vertical markers. Coordinates are written with one decimal to keep pages small. */
#include <math.h>
#include <string.h>
#include "report_internal.h"

enum { ML = 64, MR = 16, MT = 14, MB = 36 };   /* margins: left (y labels), right, top, bottom */

void nd_fmt_num(char *buf, size_t n, double v, int sig) {
    if (isnan(v)) snprintf(buf, n, "nan");
    else if (isinf(v)) snprintf(buf, n, v > 0 ? "inf" : "-inf");
    else snprintf(buf, n, "%.*g", sig, v);
}

double nd_plot_x(const nd_plot *p, double x) {
    double span = p->xmax - p->xmin;
    return p->x0 + (span > 0 ? (x - p->xmin) / span : 0.5) * p->w;
}

double nd_plot_y(const nd_plot *p, double y) {
    double v = y;
    if (p->ylog) v = y > 0 ? log10(y) : -INFINITY;
    double span = p->ymax - p->ymin;
    double fr = span > 0 ? (v - p->ymin) / span : 0.5;
    if (!(fr >= 0)) fr = 0;     /* also -inf and NaN */
    if (fr > 1) fr = 1;
    return p->y0 + (1 - fr) * p->h;
}

void nd_plot_begin(nd_plot *p, FILE *f, int width, int height, const char *cls, const char *aria) {
    p->f = f;
    p->x0 = ML;
    p->y0 = MT;
    p->w = width - ML - MR;
    p->h = height - MT - MB;
    fprintf(f, "<svg class=\"%s\" viewBox=\"0 0 %d %d\" width=\"%d\" height=\"%d\" role=\"img\" aria-label=\"", cls,
            width, height, width, height);
    nd_html_escape(f, aria);
    fprintf(f, "\">\n<rect class=\"area\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>\n", p->x0, p->y0, p->w, p->h);
}

void nd_plot_end(nd_plot *p) { fprintf(p->f, "</svg>\n"); }

void nd_plot_layers(const nd_plot *p, const nd_rmodel *m) {
    FILE *f = p->f;
    if (m->nlayers == 0) return;
    double px_per_layer = p->w / m->nlayers;   /* about; layers have similar stage counts */
    int stride = 1;
    while (stride * px_per_layer < 34) stride++;
    fprintf(f, "<g class=\"bands\">");
    for (int i = 0; i < m->nlayers; i++) {
        double a = nd_plot_x(p, (double)m->layer_lo[i]), b = nd_plot_x(p, (double)m->layer_hi[i] + 1);
        if (i % 2) fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"/>", a, p->y0, b - a, p->h);
    }
    fprintf(f, "</g>\n<g class=\"xlab\">");
    for (int i = 0; i < m->nlayers; i += stride) {
        double a = nd_plot_x(p, (double)m->layer_lo[i]), b = nd_plot_x(p, (double)m->layer_hi[i] + 1);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\">L%d</text>", (a + b) / 2, p->y0 + p->h + 14, (int)m->layer_ids[i]);
    }
    fprintf(f, "</g>\n<text class=\"xcap\" x=\"%.1f\" y=\"%.1f\">%s (%lld)%s</text>\n", p->x0 + p->w / 2, p->y0 + p->h + 30,
            p->narrow ? "stages in order" : "stages in execution order", (long long)m->n, p->narrow ? "" : "; alternate layers shaded");
}

static double nice_step(double range) {
    double raw = range / 5, mag = pow(10, floor(log10(raw))), r = raw / mag;
    return (r < 1.5 ? 1 : r < 3.5 ? 2 : r < 7.5 ? 5 : 10) * mag;
}

void nd_plot_yaxis(const nd_plot *p, const char *label, int decimals) {
    FILE *f = p->f;
    fprintf(f, "<g class=\"yax\">");
    if (p->ylog) {
        int lo = (int)ceil(p->ymin - 1e-9), hi = (int)floor(p->ymax + 1e-9);
        int stride = 1;
        while ((hi - lo) / stride > 8) stride++;
        for (int k = lo; k <= hi; k += stride) {
            double y = p->y0 + (1 - (k - p->ymin) / (p->ymax - p->ymin)) * p->h;
            fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">1e%d</text>", p->x0,
                    p->x0 + p->w, y, y, p->x0 - 6, y + 4, k);
        }
    } else {
        double step = nice_step(p->ymax - p->ymin);
        if (decimals < 0) {   /* enough decimals to tell the ticks apart (steps are 1, 2 or 5 x 10^k) */
            decimals = (int)-floor(log10(step) + 1e-9);
            if (decimals < 0) decimals = 0;
        }
        for (double v = ceil(p->ymin / step - 1e-9) * step; v <= p->ymax + step * 1e-6; v += step) {
            double y = nd_plot_y(p, v);
            fprintf(f, "<line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\">%.*f</text>", p->x0,
                    p->x0 + p->w, y, y, p->x0 - 6, y + 4, decimals, fabs(v) < step * 1e-6 ? 0.0 : v);
        }
    }
    fprintf(f, "</g>\n<text class=\"ycap\" transform=\"translate(14 %.1f) rotate(-90)\">", p->y0 + p->h / 2);
    nd_html_escape(f, label);
    fprintf(f, "</text>\n");
}

void nd_plot_series(const nd_plot *p, const double *y, const unsigned char *skip, int64_t n, const char *cls) {
    FILE *f = p->f;
    fprintf(f, "<path class=\"%s\" d=\"", cls);
    int open = 0;
    for (int64_t i = 0; i < n; i++) {
        if (skip && skip[i]) continue;
        double v = y[i];
        if (isnan(v) || (p->ylog && isinf(v) && v > 0)) { open = 0; continue; }
        double x = nd_plot_x(p, (double)i + 0.5), py = nd_plot_y(p, v);
        /* "h0" after a lone point: a zero-length segment that round caps draw as a dot */
        int64_t j = i + 1;
        while (j < n && skip && skip[j]) j++;
        int lone = !open && (j >= n || isnan(y[j]) || (p->ylog && isinf(y[j]) && y[j] > 0));
        fprintf(f, open ? "L%.1f %.1f" : (lone ? "M%.1f %.1fh0" : "M%.1f %.1f"), x, py);
        open = 1;
    }
    fprintf(f, "\"/>\n");
}

void nd_plot_vmark(const nd_plot *p, double x, const char *label) {
    FILE *f = p->f;
    double px = nd_plot_x(p, x);
    int right = px > p->x0 + p->w * 0.6;
    fprintf(f, "<g class=\"mark\"><title>");
    nd_html_escape(f, label);
    fprintf(f, "</title><line x1=\"%.1f\" x2=\"%.1f\" y1=\"%.1f\" y2=\"%.1f\"/><text x=\"%.1f\" y=\"%.1f\" text-anchor=\"%s\">",
            px, px, p->y0, p->y0 + p->h, px + (right ? -4 : 4), p->y0 + 12, right ? "end" : "start");
    /* a phone's chart has room for the words before the colon only (the stage is in the tooltip
     * and in the verdict at the top of the page) */
    const char *colon = p->narrow ? strchr(label, ':') : NULL;
    if (colon) {
        char head[64];
        snprintf(head, sizeof head, "%.*s", (int)(colon - label < 63 ? colon - label : 63), label);
        nd_html_escape(f, head);
    } else {
        nd_html_escape(f, label);
    }
    fprintf(f, "</text></g>\n");
}
