/* report_summary.c — the summary header at the top of the page, so the verdict and its cause are
 * on the first screen at any width: status, first divergence (stage, mode, layer), cause,
 * evidence, the next command, and the one-sentence message, as /summary holds them
 * (docs/trace-format.md). Older traces without the evidence attributes show what they have. */
#include <math.h>
#include <string.h>
#include "util/shquote.h"
#include "report_internal.h"
#include "trace/trace_quality.h"

/* The banner's class: only known statuses reach the attribute. */
static const char *status_class(const nd_trace *t) {
    if (!t->has_summary) return "incomplete";
    static const char *known[] = {"ok", "diverged", "error", "incomplete", "unjudged"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (!strcmp(t->summary.status, known[i])) return known[i];
    return "unknown";
}

static void item(FILE *f, const char *label, const char *id, const char *id_suffix) {
    fprintf(f, "<dt>%s<dd", label);
    if (id) fprintf(f, " id=\"%s%s\"", id, id_suffix);
    fputc('>', f);
}

void nd_report_summary(FILE *f, const nd_rmodel *m, const char *id, const char *title, const char *first_href) {
    const nd_trace *t = m->t;
    const nd_trace_summary *s = &t->summary;
    const char *cls = status_class(t);
    fprintf(f, "<div class=\"banner %s\" id=\"%s\">", cls, id);
    if (title) nd_html_wrap(f, "<div class=\"btitle\">", title, "</div>");
    fprintf(f, "<dl class=\"sum\">");
    item(f, "status", id, "-status");
    if (!t->has_summary || !strcmp(cls, "incomplete")) {
        fprintf(f, "<b>incomplete</b>: the run did not finish; this trace holds the %lld rows that completed before it "
                   "stopped, and no diagnosis.", (long long)t->nrows);
    } else if (!strcmp(cls, "unjudged")) {
        fprintf(f, "<b>unjudged</b>: the run was made with --no-probes (a timing baseline): nothing was measured or judged, "
                   "so this page says nothing about the checkpoint.");
    } else if (!strcmp(cls, "ok") && !s->first_divergence[0]) {
        fprintf(f, "<b>ok</b>: no divergence; every stage is within what NVFP4 quantization of its operands explains.");
    } else {
        nd_html_wrap(f, "<b>", s->status, "</b>");
    }
    if (t->has_summary && s->first_divergence[0]) {
        item(f, "first divergence", NULL, "");
        if (first_href) fprintf(f, "<a href=\"%s\">", first_href);
        nd_html_wrap(f, "<code>", s->first_divergence, "</code>");
        nd_html_wrap(f, first_href ? "</a> (" : " (", s->first_divergence_mode, ")");
        if (m->first_pos >= 0 && m->st[m->first_pos].layer >= 0) fprintf(f, ", layer %d", (int)m->st[m->first_pos].layer);
        if (m->first_pos < 0) fprintf(f, " <span class=\"warn\">(that stage has no row in this trace)</span>");
    }
    if (t->has_summary && s->cause[0]) {
        item(f, "cause", id, "-cause");
        /* the explain command only for a word a cause code can be (lower-case letters, digits, '_'):
         * a crafted trace's text is shown as text, never as a command */
        if (strspn(s->cause, "abcdefghijklmnopqrstuvwxyz0123456789_") == strlen(s->cause)) {
            nd_html_wrap(f, "<code class=\"cause\">", s->cause, "</code> <span class=\"note\">(<code>nvfp4dbg explain ");
            nd_html_wrap(f, "", s->cause, "</code>)</span>");
        } else {
            nd_html_wrap(f, "<code class=\"cause\">", s->cause, "</code> <span class=\"warn\">(not a cause code)</span>");
        }
    }
    /* the diagnosis in words, each under its label where the trace has it */
    /* after --apply-repair the next command is the one with every repair it proved (all shards) */
    const char *next = s->applied_command[0] ? s->applied_command : s->next_command;
    const struct { const char *label, *text, *open, *close; } words[] = {
        {"evidence", s->evidence, "", ""},
        {"next", next, "<code class=\"cmd\">", "</code>"},
        {"in words", s->message, "", ""},
    };
    for (size_t i = 0; i < sizeof words / sizeof words[0]; i++) {
        if (!t->has_summary || !words[i].text[0]) continue;
        item(f, words[i].label, NULL, "");
        /* a stored command is offered to run only when it is one nvfp4dbg writes (shquote.h): a
         * crafted trace cannot put "x; rm -rf ~" in the report's next slot */
        if (words[i].text == next && !nd_shcmd_is_ours(next)) {
            fprintf(f, "<span class=\"warn\">(not shown: the trace's stored command is not one nvfp4dbg writes)</span>");
            continue;
        }
        nd_html_wrap(f, words[i].open, words[i].text, words[i].close);
    }
    /* what NVFP4 costs the model, on a healthy run (after a divergence the logits show the fault) */
    nd_quality q;
    nd_quality_of(t->rows, t->nrows, t->ntokens, &q);
    if (t->has_summary && !strcmp(cls, "ok") && q.have) {
        item(f, "quality", id, "-quality");
        fprintf(f, "final logits against the %s: KL %.4g nats, top-1 %.1f%% of %lld positions",
                t->reference_checkpoint[0] ? "BF16 original (<code>--reference-checkpoint</code>)" : "reference path (dequantized weights)",
                q.kl, 100.0 * q.top1, (long long)q.positions);
        if (isfinite(q.ppl_ref) && isfinite(q.ppl_prod))
            fprintf(f, "; the prompt's perplexity %.4g &rarr; %.4g (%+.2f%%)", q.ppl_ref, q.ppl_prod, 100.0 * (q.ppl_prod / q.ppl_ref - 1.0));
        if (q.npoints > 1) {
            fprintf(f, "; layer outputs' rel L2 (chained):");
            for (int k = 0; k < q.npoints; k++) fprintf(f, "%s %.3g (layer %d)", k ? "," : "", q.rel_l2[k], q.layer[k]);
        }
    }
    /* trace --apply-repair: the figures before and after every proven repair */
    if (t->has_summary && s->applied_status[0]) {
        item(f, "after the repairs", id, "-applied");
        fprintf(f, "final logits: KL %.4g &rarr; %.4g nats, top-1 %.1f%% &rarr; %.1f%%; ", s->kl_before, s->kl_after,
                100 * s->top1_before, 100 * s->top1_after);
        if (!strcmp(s->applied_status, "ok"))
            fprintf(f, "no divergence left: the figures after are this checkpoint's healthy NVFP4 cost on these tokens");
        else
            nd_html_wrap(f, "still diverges at <code>", s->applied_first, "</code>");
    }
    fprintf(f, "</dl></div>\n");
}
