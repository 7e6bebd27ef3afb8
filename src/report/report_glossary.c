/* report_glossary.c — what every column of the page's tables means: one list, used for the
 * tooltip (title attribute) of each header and for the "What the columns mean" list that phones,
 * which cannot hover, open instead; and the notes under the sections' headings. */
#include <stddef.h>
#include <string.h>
#include "report_internal.h"
#include "util/table.h"

typedef struct section_note { const char *id, *note; } section_note;

/* markup, written as is */
static const section_note notes[] = {
    {"scales",
     "Scale ratio = quantizer multiplier used on the production path &divide; 2688/amax of the reference input (1 is "
     "the healthy calibration of this prompt; the diagnosis calls &gt; 2 saturation, &lt; 1/2 underflow). Routed "
     "experts of one projection share a column: the cell shows the ratio furthest from 1; hover for the range. "
     "Outlined cells hold a stage whose verdict is not ok."},
    {"stages",
     "Each layer is one group: click its line to open or close it (<a href=\"#stages\" class=\"openall\">open "
     "all</a>, <a href=\"#stages\" class=\"closeall\">close all</a>). Click a column header to sort the group "
     "(again to reverse); NaN sorts last. Rows whose verdict is not ok are red; the first divergence is outlined. "
     "Hover a header for what it means."},
};

const char *nd_report_section_note(const char *id) {
    const section_note *n = nd_table_find(notes, ND_COUNT(notes), sizeof notes[0], offsetof(section_note, id), id);
    return n ? n->note : NULL;
}

typedef struct metric {
    const char *key, *label, *tip;
    int num;                 /* sorted as numbers (th.num) */
} metric;

static const metric metrics[] = {
    {"index", "#", "Row index in /stages: execution order, one row per stage and mode.", 1},
    {"stage", "stage", "The module or operation the row measures, by its checkpoint name.", 0},
    {"layer", "layer", "Decoder layer of the stage; - for stages outside the layers (embedding, final norm, head).", 1},
    {"op", "op", "Kind of operation: linear, rmsnorm, router, attention, kv_cache, ...", 0},
    {"mode", "mode",
     "isolated: both paths get the reference input, so the row measures this stage alone. chained: each path feeds "
     "itself, so the errors of earlier stages add up with depth. captured: activations dumped from a real serving stack.",
     0},
    {"quant", "quant.", "yes when the production path quantizes this stage (NVFP4 or FP8).", 0},
    {"numel", "numel", "Number of elements of the stage's output.", 1},
    {"ref_amax", "ref amax", "amax: the largest |value| of the reference output (FP32 path).", 1},
    {"prod_amax", "prod amax",
     "amax: the largest |value| of the production output. 0 where the reference is not 0: the output vanished.", 1},
    {"ref_nan", "ref NaN/Inf", "NaN plus Inf elements in the reference output.", 1},
    {"prod_nan", "prod NaN/Inf", "NaN plus Inf elements in the production output.", 1},
    {"cosine", "cosine",
     "Cosine similarity of the production output with the reference: 1 is the same direction. all-zero: both outputs "
     "are exactly 0, which agrees trivially and is not a sign of health.", 1},
    {"rel_l2", "rel L2", "Relative L2 error: ||prod - ref|| / ||ref||; 0 is exact.", 1},
    {"sqnr", "SQNR dB",
     "Signal to quantization noise ratio: 10 log10(||ref||^2 / ||prod - ref||^2) in dB; higher is better; 200 is the "
     "cap (bit-exact).", 1},
    {"floor", "floor dB",
     "The SQNR that NVFP4 quantization of this stage's operands explains (the same stage quantized the healthy way). "
     "An isolated stage more than 6 dB below its floor diverged.", 1},
    {"scale_ratio", "scale ratio",
     "Quantizer multiplier used on the production path / (2688 / amax of the reference input). 1: the healthy "
     "calibration for this prompt; above 2: saturation; below 1/2: underflow; about 1e-6: an inverted scale.", 1},
    {"sat_frac", "sat frac",
     "Share of activation elements the quantizer clipped: scaled magnitude above 6 before rounding, including every "
     "block whose e4m3 scale clipped at 448.", 1},
    {"zero_block_frac", "zero-block frac",
     "Share of non-zero activation blocks (16 elements) whose e4m3 block scale is 0: the whole block is lost.", 1},
    {"verdict", "verdict", "ok, or the cause code the diagnosis gave this row (nvfp4dbg explain CODE says what it means).", 0},
    {"worst", "worst stage",
     "The group's worst row: the first divergence when the group holds it; else a row whose verdict is not ok before "
     "one that is, isolated before chained, and the one furthest below its floor (all-zero rows last).", 0},
    {"rows", "rows", "Rows in the group (stages x modes).", 1},
    {"flagged", "flagged", "Rows of the group whose verdict is not ok.", 1},
    {"delta", "\xce\x94", "Difference run - other of the figure on its left (run: this report's trace; other: --against).", 1},
};
enum { NMETRICS = sizeof metrics / sizeof metrics[0] };

static const metric *find(const char *key) {
    return nd_table_find(metrics, NMETRICS, sizeof metrics[0], offsetof(metric, key), key);
}

const char *nd_rmetric_tip(const char *key) {
    const metric *m = find(key);
    return m ? m->tip : NULL;
}

void nd_report_th_label(FILE *f, const char *key, const char *label) {
    const metric *m = find(key);
    fprintf(f, "<th%s title=\"", m && m->num ? " class=\"num\"" : "");
    nd_html_escape(f, m ? m->tip : "");
    fprintf(f, "\">");
    nd_html_escape(f, label ? label : m ? m->label : key);
}

void nd_report_th(FILE *f, const char *key) { nd_report_th_label(f, key, NULL); }

void nd_report_glossary(FILE *f) {
    fprintf(f, "<details id=\"glossary\"><summary>What the columns mean</summary><dl class=\"gloss\">\n");
    for (int i = 0; i < NMETRICS; i++) {
        fprintf(f, "<dt>");
        nd_html_escape(f, metrics[i].label);
        fprintf(f, "<dd>");
        nd_html_escape(f, metrics[i].tip);
        fputc('\n', f);
    }
    fprintf(f, "</dl></details>\n");
}
