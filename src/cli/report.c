/* report.c — `nvfp4dbg report TRACE.h5 --html OUT.html [--against OTHER.h5]`: one self-contained
 * HTML page of a trace, optionally beside another trace of the same tokens (src/report/,
 * docs/report.md). Exit 0: page written (whatever the traces' verdicts); 2: bad usage, an
 * unreadable trace, or two traces that are not comparable; 3: the page could not be written. */
#include <stdio.h>
#include <string.h>
#include "util/term.h"
#include <sys/stat.h>

#include "cli/cli.h"
#include "report/report.h"
#include "util/outfile.h"
#include "trace/trace.h"
#include "util/progress.h"

static const char usage[] =
    "usage: nvfp4dbg report TRACE.h5 --html OUT.html [--against OTHER.h5] [--force]\n"
    "\n"
    "Writes one self-contained HTML page (inline SVG and CSS, no network access) showing a trace:\n"
    "at the top the status, first divergence, cause, evidence and next command; one line per\n"
    "layer; cosine and SQNR per stage for both modes with the divergence threshold\n"
    "(floor_sqnr_db - 6 dB), reference vs production amax on a log axis, NaN/Inf per stage, the\n"
    "scale ratio of every quantized linear per layer, the experts each path picked in MoE layers,\n"
    "and every stage in sortable tables grouped per layer. The page is written to a temporary\n"
    "beside OUT.html and renamed to OUT.html when complete. OUT.html may replace an earlier\n"
    "report; never an input, a link, a folder or a device, and another file only with --force.\n"
    "\n"
    "  --html OUT.html     the page to write (required; -o/--out OUT.html is the same)\n"
    "  --against OTHER.h5  also show OTHER.h5 (before/after a fix, golden vs run): both\n"
    "                      traces' figures per stage and their differences (TRACE - OTHER),\n"
    "                      rows matched by stage name and mode; the traces must come from the\n"
    "                      same tokens and recipe (exit 2 otherwise)\n"
    "  --force             replace OUT.html even when it is not an earlier report\n"
    "  -h, --help          this text\n"
    "\n"
    "Exit: 0 page written (also for a trace that diverged), 2 bad usage, an unreadable trace,\n"
    "traces that are not comparable, or an output that cannot be written (disk full, no\n"
    "permission), 3 an internal fault.\n"
    "\n"
    "example: nvfp4dbg report t.h5 --html t.html\n"
    "         (t.h5 from: nvfp4dbg trace golden/seed-bug-v4 --out t.h5)\n"
    "example: nvfp4dbg report fixed.h5 --against t.h5 --html fix.html\n"
    "         (fixed.h5 from: nvfp4dbg trace golden/seed-bug-v4 --override model.layers.0.self_attn.q_a_proj.input_global_scale=719.799134 --out fixed.h5)\n";

int nd_cmd_report(int argc, char **argv) {
    const char *in = NULL, *out = NULL, *other_path = NULL;
    int force = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage, stdout); return 0; }
        if (!strcmp(a, "--force")) { force = 1; continue; }
        /* -o/--out as every other writer takes it */
        if (!strcmp(a, "--html") || !strcmp(a, "--out") || !strcmp(a, "-o")) {
            if (i + 1 >= argc) return nd_cli_usage_error("report", "%s needs a file name", a);
            out = argv[++i];
        } else if (!strncmp(a, "--html=", 7) || !strncmp(a, "--out=", 6)) {
            out = strchr(a, '=') + 1;
        } else if (!strncmp(a, "-o", 2) && a[2]) {
            out = a[2] == '=' ? a + 3 : a + 2;
        } else if (!strcmp(a, "--against")) {
            if (i + 1 >= argc) return nd_cli_usage_error("report", "--against needs a trace file");
            other_path = argv[++i];
        } else if (!strncmp(a, "--against=", 10)) {
            other_path = a + 10;
        } else if (a[0] == '-' && a[1]) {
            return nd_cli_usage_error("report", "unknown option '%s'", a);
        } else if (!in) {
            in = a;
        } else {
            return nd_cli_usage_error("report", "one trace only (got '%s' and '%s')", in, a);
        }
    }
    if (other_path && !other_path[0]) return nd_cli_usage_error("report", "--against needs a trace file");
    if (!in || !out || !out[0]) {
        fputs(usage, stderr);
        return nd_cli_usage_error("report", !in ? "a trace file is required" : "--html OUT.html is required");
    }
    nd_err e = {0};
    const char *inputs[] = {in, other_path};
    const nd_out_rules rules = {.what = "report", .inputs = inputs, .n_inputs = 2, .force = force, .ours = nd_report_is_ours};
    if (nd_out_check(out, &rules, &e)) return nd_cli_error(&e);
    nd_trace *t = NULL, *other = NULL;
    /* progress on stderr (issue 22): a big trace takes a while to read and to draw; the page's
     * sections move the bar within the last step (util/progress.h) */
    nd_progress pg;
    nd_progress_start(&pg, "report", "steps", other_path ? 4 : 3);
    int step = 0;
    nd_progress_update(&pg, step, "reading the trace");
    if (nd_trace_read(in, &t, &e)) { nd_progress_end(&pg); return nd_cli_error(&e); }
    if (other_path) nd_progress_update(&pg, ++step, "reading the other trace");
    if (other_path && (nd_trace_read(other_path, &other, &e) || nd_trace_comparable(in, t, other_path, other, &e))) {
        nd_progress_end(&pg);
        nd_trace_free(t);
        nd_trace_free(other);
        return nd_cli_error(&e);
    }
    nd_progress_update(&pg, ++step, "reading the expert picks");
    nd_report_routing rt;
    if (nd_report_routing_load(in, t, &rt, &e)) {
        nd_progress_end(&pg);
        nd_trace_free(t);
        nd_trace_free(other);
        return nd_cli_error(&e);
    }
    nd_progress_update(&pg, ++step, "writing the page");
    nd_report_against ag = {other, other_path};
    int rc = nd_report_write(out, t, &rt, in, other ? &ag : NULL, &e);
    nd_progress_end(&pg);
    if (!rc) {
        struct stat st;
        long long size = stat(out, &st) ? -1 : (long long)st.st_size;
        char os[16384], ps[16384];
        nd_term_safe(out, os, sizeof os);
        if (other) printf("report written to %s (%lld rows against %lld rows of %s, %.1f kB)\n", os, (long long)t->nrows,
                          (long long)other->nrows, nd_term_safe(other_path, ps, sizeof ps), size / 1024.0);
        else printf("report written to %s (%lld rows, %.1f kB)\n", os, (long long)t->nrows, size / 1024.0);
    }
    nd_report_routing_free(&rt);
    nd_trace_free(t);
    nd_trace_free(other);
    return rc ? nd_cli_error(&e) : 0;
}
