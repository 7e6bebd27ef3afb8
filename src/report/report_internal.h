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
    /* Row groups of the tables: the rows before the first layer ("in"), one group per distinct
     * layer in order, the rows after ("head"). Every row is in exactly one group. */
    int ngroups;
    struct nd_rgroup *groups;
    int *row_group;              /* group of each row of t */
    int64_t *group_rows;         /* the rows of t by group, in trace order within a group: group g's
                                  * are group_rows[group_off[g] .. group_off[g + 1]) */
    int64_t *group_off;          /* ngroups + 1 offsets */
} nd_rmodel;

typedef struct nd_rgroup {
    int32_t layer;               /* -1 for "in" and "head" */
    char label[16];              /* "in", the layer number, "head" */
    char id[24];                 /* element id of its <details>: "layer-in", "layer-7", "layer-head" */
    int64_t nrows, nbad;         /* rows; rows whose verdict is not ok */
    int64_t worst;               /* row index of the group's worst row (nd_rworse), -1 when empty */
    int64_t max_nonfinite;       /* largest NaN+Inf count of a production output in the group */
    int has_first;               /* holds the first divergence's row */
} nd_rgroup;

int nd_rmodel_build(const nd_trace *t, nd_rmodel *m, nd_err *e);
/* Row i is the first divergence (/summary first_divergence and its mode). */
int nd_ris_first(const nd_trace *t, const nd_row *r);
/* Both paths gave an all-zero, finite output: they agree trivially, and cosine 1 / SQNR 200 would
 * look healthy, so the tables say "all-zero" instead. */
int nd_rall_zero(const nd_row *r);
/* a is a worse row than b for a group's summary line: a verdict other than ok first, then
 * isolated rows before chained ones (chained rows drift with depth by design), then the larger
 * shortfall below the floor (or 1 - cosine without a floor); all-zero rows last. */
int nd_rworse(const nd_row *a, const nd_row *b);
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
    int narrow;                  /* drawn for a phone: short marker labels (the full text as a tooltip) */
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

/* Column headers and their explanations (report_glossary.c). nd_report_th writes an open <th>
 * (class num when the column sorts as numbers) whose title explains the metric `key` (cosine,
 * rel_l2, sqnr, floor, ...); _label with its own text. nd_rmetric_tip: the text, NULL when the
 * key is unknown. */
void nd_report_th(FILE *f, const char *key);
void nd_report_th_label(FILE *f, const char *key, const char *label);
const char *nd_rmetric_tip(const char *key);
/* <details id="glossary">: every column's explanation, for screens that cannot hover. */
void nd_report_glossary(FILE *f);

/* A section's start (report_page.c): <section id="ID"><h2>title</h2> (title_fmt is printf markup),
 * then <p class="note">...</p> with the section's note when it has one (nd_report_section_note,
 * report_glossary.c: the notes by section id, NULL for none). */
void nd_report_section_open(FILE *f, const char *id, const char *title_fmt, ...) __attribute__((format(printf, 3, 4)));
const char *nd_report_section_note(const char *id);

/* The stage tables' header row and one row's cells (report_table.c). */
void nd_report_stage_head(FILE *f);
void nd_report_row_cells(FILE *f, const nd_row *r);
/* Figure v of row r as the tables show it: `zero` ("all-zero", "-") instead of the agreement
 * figures (cosine, rel L2, SQNR) of an all-zero row, else nd_fmt_num. */
void nd_report_fig(char *b, size_t n, const nd_row *r, double v, int sig, const char *zero);
/* The stage name without its "layers.N." prefix (the group says N). */
const char *nd_rshort(const nd_row *r);

/* The summary header (report_summary.c): status, first divergence, cause, evidence, the next
 * command, the message; id is the element id ("verdict" for the run, "verdict-other"). */
void nd_report_summary(FILE *f, const nd_rmodel *m, const char *id, const char *title, const char *first_href);

/* Sections of the page (report_*.c); each writes one <section>. */
void nd_report_layers(FILE *f, const nd_rmodel *m);
void nd_report_against_section(FILE *f, const nd_rmodel *m, const nd_report_against *ag, const char *run_name);
/* The four per-stage charts; other (--against, else NULL): its figures drawn over the run's. */
void nd_report_charts(FILE *f, const nd_rmodel *m, const nd_rmodel *other);
void nd_report_scales(FILE *f, const nd_rmodel *m);
void nd_report_routing_section(FILE *f, const nd_rmodel *m, const nd_report_routing *rt);
void nd_report_table(FILE *f, const nd_rmodel *m);
void nd_report_flagged(FILE *f, const nd_rmodel *m);
extern const char nd_report_css[];
extern const char nd_report_script[];

#endif
