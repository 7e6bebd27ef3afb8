/* report.h — the self-contained HTML report of a trace (`nvfp4dbg report`, docs/report.md).
 * Everything here works on an nd_trace already read (no HDF5 below this line) plus the routing
 * picks of MoE layers, loaded separately so a test can build both in memory. Every string that
 * comes from a trace is untrusted and goes through nd_html_escape(). */
#ifndef ND_REPORT_H
#define ND_REPORT_H

#include <stdint.h>
#include <stdio.h>
#include "trace/trace.h"

/* Which experts (or, for a sparse-attention indexer, which positions) each path picked at one
 * top-k stage: /routing/<stage>/{ref,prod}, int32 [t, k]. */
typedef struct nd_report_pick {
    char stage[ND_NAME_LEN];
    char op[ND_OP_LEN];    /* "router" for MoE gates; another op for other top-k stages */
    int32_t layer;
    int64_t t, k;
    int32_t *ref, *prod;   /* t*k ids each (malloc'd); NULL when that path was not recorded */
} nd_report_pick;

typedef struct nd_report_routing {
    int n;
    nd_report_pick *picks;
    int nmissing;          /* router stages of the trace without a /routing entry */
} nd_report_routing;

/* Read /routing/<stage>/{ref,prod} for every top-k stage of t (op "router", or a finite
 * topk_agree). Such a stage without routing data is counted in nmissing, not an error (older
 * traces). */
int nd_report_routing_load(const char *trace_path, const nd_trace *t, nd_report_routing *out, nd_err *e);
void nd_report_routing_free(nd_report_routing *r);

/* A second trace shown beside the first (`report RUN.h5 --against OTHER.h5`): its figures and
 * the differences per stage, matched by stage name and mode (report_against.c). */
typedef struct nd_report_against {
    const nd_trace *t;
    const char *name;      /* shown as the other trace's file name (may be NULL) */
} nd_report_against;

/* The whole page on f. source_name is shown as the trace's file name (may be NULL); rt may be
 * NULL (no routing section content); against may be NULL (one trace). Write errors are left in
 * f's error flag for the caller, who knows the output's name. */
int nd_report_html(FILE *f, const nd_trace *t, const nd_report_routing *rt, const char *source_name,
                   const nd_report_against *against, nd_err *e);

/* Write the page to a temporary beside OUT, then rename it to OUT, so a reader never sees half a
 * page (util/outfile.h). */
int nd_report_write(const char *out_path, const nd_trace *t, const nd_report_routing *rt, const char *source_name,
                    const nd_report_against *against, nd_err *e);

/* The page's <meta name="generator">: an existing file that carries it is an earlier report,
 * which a new one replaces without --force. */
#define ND_REPORT_GENERATOR "nvfp4dbg report"
int nd_report_is_ours(const char *path);

/* HTML text escaping (html_escape.c): & < > " ' become entities, control characters other than
 * tab and newline become U+FFFD, so the result is safe in element content and in quoted
 * attribute values (SVG included). */
void nd_html_escape(FILE *f, const char *s);
/* open, then s escaped, then close (open and close are markup, written as they are). */
void nd_html_wrap(FILE *f, const char *open, const char *s, const char *close);
/* The same into dst (always NUL-terminated when n > 0); returns the length the full escape needs,
 * so a result >= n means it was cut (never inside an entity). */
size_t nd_html_escape_buf(char *dst, size_t n, const char *s);

#endif
