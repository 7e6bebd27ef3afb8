/* report_page.c — the page: the summary header first (the verdict and its cause on the first
 * screen at any width; with --against both traces' side by side), the run's metadata, then the
 * sections in the order a person triages: layers at a glance, the comparison, flagged stages,
 * charts, scale ratios, routing, every stage by layer. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include "nd_config.h"
#include "util/progress.h"
#include "report_internal.h"

void nd_report_section_open(FILE *f, const char *id, const char *title_fmt, ...) {
    va_list ap;
    va_start(ap, title_fmt);
    fprintf(f, "<section id=\"%s\"><h2>", id);
    vfprintf(f, title_fmt, ap);
    fprintf(f, "</h2>\n");
    va_end(ap);
    const char *note = nd_report_section_note(id);
    if (note) fprintf(f, "<p class=\"note\">%s</p>\n", note);
}

static void meta_row(FILE *f, const char *k, const char *v) {
    fprintf(f, "<tr><td>%s</td><td>", k);
    nd_html_escape(f, v && v[0] ? v : "-");
    fprintf(f, "</td></tr>");
}

static void meta(FILE *f, const nd_rmodel *m, const char *source_name) {
    const nd_trace *t = m->t;
    const struct { const char *k, *v; } rows[] = {
        {"trace", source_name}, {"checkpoint", t->checkpoint}, {"format", t->checkpoint_format},
        {"recipe", t->recipe}, {"serving stack", t->stack}, {"backend", t->backend},
        {"device", t->device}, {"modes", t->modes},
    };
    fprintf(f, "<div class=\"hscroll\"><table class=\"meta\">");
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++) meta_row(f, rows[i].k, rows[i].v);
    char buf[96];
    snprintf(buf, sizeof buf, "%lld tokens, %lld stages, %lld rows, %d layers", (long long)t->ntokens, (long long)m->n,
             (long long)t->nrows, m->nlayers);
    meta_row(f, "size", buf);
    meta_row(f, "created (UTC)", t->created_utc);
    snprintf(buf, sizeof buf, "%s (schema %s)", t->tool_version, t->schema);
    meta_row(f, "written by", buf);
    fprintf(f, "</table></div>\n");
}

int nd_report_html(FILE *f, const nd_trace *t, const nd_report_routing *rt, const char *source_name,
                   const nd_report_against *against, nd_err *e) {
    nd_rmodel m, om;
    ND_TRY(nd_rmodel_build(t, &m, e));
    if (against) {
        int rc = nd_rmodel_build(against->t, &om, e);
        if (rc) {
            nd_rmodel_free(&m);
            return rc;
        }
    }
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<meta name=\"generator\" content=\"" ND_REPORT_GENERATOR "\">"
               "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>nvfp4dbg report: ");
    nd_html_escape(f, t->checkpoint[0] ? t->checkpoint : (source_name ? source_name : "trace"));
    fprintf(f, "</title>\n<style>\n%s</style></head><body>\n<header><h1>nvfp4dbg report", nd_report_css);
    if (source_name) {
        fprintf(f, " <span class=\"src\">");
        nd_html_escape(f, source_name);
        fprintf(f, "</span>");
    }
    fprintf(f, "</h1></header>\n<div class=\"pair\">\n");
    /* the verdict first: on the first screen at any width */
    if (against) {
        char title[600];
        snprintf(title, sizeof title, "run: %s", source_name ? source_name : "this trace");
        nd_report_summary(f, &m, "verdict", title, "#first-row");
        snprintf(title, sizeof title, "other: %s", against->name ? against->name : "the other trace");
        nd_report_summary(f, &om, "verdict-other", title, NULL);
    } else {
        nd_report_summary(f, &m, "verdict", NULL, "#first-row");
    }
    fprintf(f, "</div>\n<nav><a href=\"#layers\">layers</a>%s<a href=\"#flagged\">flagged stages</a>"
               "<a href=\"#chart-cosine\">cosine</a><a href=\"#chart-sqnr\">SQNR</a><a href=\"#chart-amax\">amax</a>"
               "<a href=\"#chart-nonfinite\">NaN/Inf</a><a href=\"#scales\">scale ratios</a><a href=\"#routing\">MoE routing</a>"
               "<a href=\"#stages\">all stages</a><a href=\"#glossary\">what the columns mean</a></nav>\n",
            against ? "<a href=\"#against\">against the other trace</a>" : "");
    /* the sections, each a step of a nested progress when a command shows one (report) */
    nd_progress pg;
    const int pgon = nd_progress_active();
    if (pgon) nd_progress_start(&pg, "page", "sections", 8);
#define SECTION(i, call) do { call; if (pgon) nd_progress_update(&pg, i, NULL); } while (0)
    SECTION(1, meta(f, &m, source_name));
    SECTION(2, nd_report_glossary(f));
    SECTION(3, nd_report_layers(f, &m));
    if (against) nd_report_against_section(f, &m, against, source_name);
    SECTION(4, nd_report_flagged(f, &m));
    SECTION(5, nd_report_charts(f, &m, against ? &om : NULL));
    SECTION(6, nd_report_scales(f, &m));
    SECTION(7, nd_report_routing_section(f, &m, rt));
    SECTION(8, nd_report_table(f, &m));
#undef SECTION
    if (pgon) nd_progress_end(&pg);
    fprintf(f, "<footer>Written by nvfp4dbg %s. The divergence threshold drawn is floor_sqnr_db &minus; %.0f dB "
               "(the recipes' floor_margin_db); see docs/report.md.</footer>\n<script>\n%s</script>\n</body></html>\n",
            ND_VERSION, ND_REPORT_MARGIN_DB, nd_report_script);
    nd_rmodel_free(&m);
    if (against) nd_rmodel_free(&om);
    return 0; /* write errors are the caller's to report, naming the output (report_write.c) */
}
