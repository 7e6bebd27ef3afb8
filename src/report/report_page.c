/* report_page.c — the page: head, run metadata, the status banner with the first divergence in
 * one sentence (/summary message), then the sections in the order a person triages. */
#include <errno.h>
#include <string.h>
#include "nd_config.h"
#include "report_internal.h"

/* The banner's class: only known statuses reach the attribute. */
static const char *status_class(const nd_trace *t) {
    if (!t->has_summary) return "incomplete";
    static const char *known[] = {"ok", "diverged", "error", "incomplete"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(t->summary.status, known[i])) return known[i];
    return "unknown";
}

static void meta_row(FILE *f, const char *k, const char *v) {
    fprintf(f, "<tr><td>%s</td><td>", k);
    nd_html_escape(f, v && v[0] ? v : "-");
    fprintf(f, "</td></tr>");
}

static void banner(FILE *f, const nd_rmodel *m) {
    const nd_trace *t = m->t;
    const nd_trace_summary *s = &t->summary;
    const char *cls = status_class(t);
    fprintf(f, "<div class=\"banner %s\" id=\"verdict\">", cls);
    if (!t->has_summary || !strcmp(cls, "incomplete")) {
        fprintf(f, "<b>The run did not finish</b> (status incomplete): this trace holds the %lld rows that completed "
                   "before it stopped, and no diagnosis.", (long long)t->nrows);
    } else if (s->first_divergence[0]) {
        fprintf(f, "<b>First divergence: <a href=\"#first-row\"><code>");
        nd_html_escape(f, s->first_divergence);
        fprintf(f, "</code></a> (");
        nd_html_escape(f, s->first_divergence_mode);
        fprintf(f, "), cause <code>");
        nd_html_escape(f, s->cause);
        fprintf(f, "</code></b>");
        if (m->first_pos < 0) fprintf(f, " <span class=\"warn\">(that stage has no row in this trace)</span>");
    } else if (!strcmp(cls, "ok")) {
        fprintf(f, "<b>No divergence</b>: every stage is within what NVFP4 quantization of its operands explains.");
    } else {
        fprintf(f, "<b>Status: ");
        nd_html_escape(f, s->status);
        fprintf(f, "</b>");
    }
    if (t->has_summary && s->message[0]) {
        fprintf(f, "<div class=\"msg\">");
        nd_html_escape(f, s->message);
        fprintf(f, "</div>");
    }
    fprintf(f, "</div>\n");
}

int nd_report_html(FILE *f, const nd_trace *t, const nd_report_routing *rt, const char *source_name, nd_err *e) {
    nd_rmodel m;
    ND_TRY(nd_rmodel_build(t, &m, e));
    fprintf(f, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
               "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n<title>nvfp4dbg report: ");
    nd_html_escape(f, t->checkpoint[0] ? t->checkpoint : (source_name ? source_name : "trace"));
    fprintf(f, "</title>\n<style>\n%s</style></head><body>\n<header><h1>nvfp4dbg report</h1>\n<table class=\"meta\">", nd_report_css);
    meta_row(f, "trace", source_name);
    meta_row(f, "checkpoint", t->checkpoint);
    meta_row(f, "format", t->checkpoint_format);
    meta_row(f, "recipe", t->recipe);
    meta_row(f, "serving stack", t->stack);
    meta_row(f, "backend", t->backend);
    meta_row(f, "device", t->device);
    meta_row(f, "modes", t->modes);
    char buf[96];
    snprintf(buf, sizeof buf, "%lld tokens, %lld stages, %lld rows, %d layers", (long long)t->ntokens, (long long)m.n,
             (long long)t->nrows, m.nlayers);
    meta_row(f, "size", buf);
    meta_row(f, "created (UTC)", t->created_utc);
    snprintf(buf, sizeof buf, "%s (schema %s)", t->tool_version, t->schema);
    meta_row(f, "written by", buf);
    fprintf(f, "</table></header>\n");
    banner(f, &m);
    fprintf(f, "<nav><a href=\"#flagged\">flagged stages</a><a href=\"#chart-cosine\">cosine</a><a href=\"#chart-sqnr\">SQNR</a>"
               "<a href=\"#chart-amax\">amax</a><a href=\"#chart-nonfinite\">NaN/Inf</a><a href=\"#scales\">scale ratios</a>"
               "<a href=\"#routing\">MoE routing</a><a href=\"#stages\">all stages</a></nav>\n");
    nd_report_flagged(f, &m);
    nd_report_charts(f, &m);
    nd_report_scales(f, &m);
    nd_report_routing_section(f, &m, rt);
    nd_report_table(f, &m);
    fprintf(f, "<footer>Written by nvfp4dbg %s. The divergence threshold drawn is floor_sqnr_db &minus; %.0f dB "
               "(the recipes' floor_margin_db); see docs/report.md.</footer>\n<script>\n%s</script>\n</body></html>\n",
            ND_VERSION, ND_REPORT_MARGIN_DB, nd_report_script);
    nd_rmodel_free(&m);
    if (ferror(f)) return nd_fail(e, ND_EXIT_INTERNAL, "%s: write error: %s", source_name ? source_name : "report", strerror(errno));
    return 0;
}
