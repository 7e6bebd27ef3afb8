/* report.c — `nvfp4dbg report TRACE.h5 --html OUT.html`: one self-contained HTML page of a trace
 * (src/report/, docs/report.md). Exit 0: page written (whatever the trace's verdict); 2: bad
 * usage or an unreadable trace; 3: the page could not be written. */
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cli/cli.h"
#include "report/report.h"
#include "trace/trace.h"

static const char usage[] =
    "usage: nvfp4dbg report TRACE.h5 --html OUT.html\n"
    "\n"
    "Writes one self-contained HTML page (inline SVG and CSS, no network access) showing a trace:\n"
    "the first divergence and its cause in one sentence, cosine and SQNR per stage for both modes\n"
    "with the divergence threshold (floor_sqnr_db - 6 dB), reference vs production amax on a log\n"
    "axis, NaN/Inf per stage, the scale ratio of every quantized linear per layer, the experts each\n"
    "path picked in MoE layers, and a sortable table of all stages. The page is written to\n"
    "OUT.html.tmp and renamed to OUT.html when complete.\n"
    "\n"
    "  --html OUT.html   the page to write (required)\n"
    "  -h, --help        this text\n"
    "\n"
    "Exit: 0 page written (also for a trace that diverged), 2 bad usage or unreadable trace,\n"
    "3 the page could not be written.\n"
    "\n"
    "example: nvfp4dbg report t.h5 --html t.html\n"
    "         (t.h5 from: nvfp4dbg trace golden/seed-bug-v4 --out t.h5)\n";

int nd_cmd_report(int argc, char **argv) {
    const char *in = NULL, *out = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage, stdout); return 0; }
        if (!strcmp(a, "--html")) {
            if (i + 1 >= argc) return nd_cli_usage_error("report", "--html needs a file name");
            out = argv[++i];
        } else if (!strncmp(a, "--html=", 7)) {
            out = a + 7;
        } else if (a[0] == '-' && a[1]) {
            return nd_cli_usage_error("report", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return nd_cli_usage_error("report", "one trace only (got '%s' and '%s')", in, a);
        }
    }
    if (!in || !out || !out[0]) {
        fputs(usage, stderr);
        return nd_cli_usage_error("report", !in ? "a trace file is required" : "--html OUT.html is required");
    }
    nd_err e = {0};
    nd_trace *t = NULL;
    if (nd_trace_read(in, &t, &e)) return nd_cli_error(&e);
    nd_report_routing rt;
    if (nd_report_routing_load(in, t, &rt, &e)) {
        nd_trace_free(t);
        return nd_cli_error(&e);
    }
    int rc = nd_report_write(out, t, &rt, in, &e);
    if (!rc) {
        struct stat st;
        long long size = stat(out, &st) ? -1 : (long long)st.st_size;
        printf("report written to %s (%lld rows, %.1f kB)\n", out, (long long)t->nrows, size / 1024.0);
    }
    nd_report_routing_free(&rt);
    nd_trace_free(t);
    return rc ? nd_cli_error(&e) : 0;
}
