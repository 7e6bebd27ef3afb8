/* report_internal.h — what the parts of the page share: the stage axis (one x position per
 * stage, both modes on it) and the SVG plotting helpers. */
#ifndef ND_REPORT_INTERNAL_H
#define ND_REPORT_INTERNAL_H

#include <stdint.h>
#include <stdio.h>
#include "report.h"

/* Modes drawn on the charts: the two replay modes and activations captured from a real serving
 * stack (trace --prod-dump). Rows of any other mode are only in the tables. */
enum { ND_RM_ISO = 0, ND_RM_CHAIN = 1, ND_RM_CAPT = 2, ND_RM_NMODES = 3 };

/* Margin below floor_sqnr_db at which a quantized stage is flagged: every shipped recipe uses
 * floor_margin_db 6.0; the trace does not store it, so the report draws this value. */
#define ND_REPORT_MARGIN_DB 6.0

typedef struct nd_rstage {
    const char *name;            /* points into the trace's rows */
    int32_t layer;
    int64_t row[ND_RM_NMODES];   /* index in t->rows of this stage's row per mode, -1 none */
} nd_rstage;

typedef struct nd_rmodel {
    const nd_trace *t;
    int64_t n;                   /* stages (x positions) */
    nd_rstage *st;
    int has_mode[ND_RM_NMODES];
    int64_t first_pos;           /* x position of /summary first_divergence, -1 none */
    int nlayers;                 /* distinct layers >= 0, in order */
    int32_t *layer_ids;
    int64_t *layer_lo, *layer_hi;/* x span of each layer (inclusive) */
} nd_rmodel;

int nd_rmodel_build(const nd_trace *t, nd_rmodel *m, nd_err *e);
void nd_rmodel_free(nd_rmodel *m);
/* Mode index of a row's mode string, -1 for another mode; its CSS class and its name. */
int nd_rmode(const char *mode);
extern const char *const nd_rmode_cls[ND_RM_NMODES], *const nd_rmode_name[ND_RM_NMODES];

/* One chart: a plot area inside an SVG of width x height pixels. */
typedef struct nd_plot {
    FILE *f;
    double x0, y0, w, h;         /* plot area, px */
    double xmin, xmax, ymin, ymax;
    int ylog;                    /* y is log10 (ymin/ymax are then exponents) */
} nd_plot;

double nd_plot_x(const nd_plot *p, double x);
double nd_plot_y(const nd_plot *p, double y);   /* clamps to the plot area */
/* <svg> with a plot area of the given pixel size; aria is the chart's accessible name. */
void nd_plot_begin(nd_plot *p, FILE *f, int width, int height, const char *cls, const char *aria);
void nd_plot_end(nd_plot *p);
/* Shaded bands for alternate layers and layer labels on the x axis. */
void nd_plot_layers(const nd_plot *p, const nd_rmodel *m);
/* y ticks, grid lines and the axis label (decades when ylog); decimals < 0: as the step needs. */
void nd_plot_yaxis(const nd_plot *p, const char *label, int decimals);
/* A line through (i, y[i]): NaN breaks the line; skip[i] != 0 leaves i out without breaking. */
void nd_plot_series(const nd_plot *p, const double *y, const unsigned char *skip, int64_t n, const char *cls);
/* A vertical marker at x with a text label (escaped). */
void nd_plot_vmark(const nd_plot *p, double x, const char *label);
/* Number formatting for figures in text and tables: "nan", "inf", "-inf" or %.*g. */
void nd_fmt_num(char *buf, size_t n, double v, int sig);

/* Sections of the page (report_*.c); each writes one <section>. */
void nd_report_charts(FILE *f, const nd_rmodel *m);
void nd_report_scales(FILE *f, const nd_rmodel *m);
void nd_report_routing_section(FILE *f, const nd_rmodel *m, const nd_report_routing *rt);
void nd_report_table(FILE *f, const nd_rmodel *m);
void nd_report_flagged(FILE *f, const nd_rmodel *m);
extern const char nd_report_css[];
extern const char nd_report_script[];

#endif
