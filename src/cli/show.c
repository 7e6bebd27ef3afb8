/* show.c — `nvfp4dbg show TRACE.h5 [--csv|--json] [--stage PATTERN]` (issue 22): a trace's stages
 * table without Python: as text (the trace command's --table), as CSV with every field of a row
 * (a header line, RFC 4180 quoting, nan/inf as written by printf), or as JSON (non-finite figures
 * null). */
#include <jansson.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "cli_args.h"
#include "trace/trace.h"
#include "trace_text.h"
#include "util/term.h"
#include "util/shquote.h"

static const char *usage_text =
    "usage: nvfp4dbg show TRACE.h5 [--csv|--json] [--stage PATTERN]\n"
    "\n"
    "Prints the stages table of a trace: every row (stage, op, mode, amax, NaN, cosine, SQNR,\n"
    "verdict) after the run's header and before its closing line, as `trace --table` printed it.\n"
    "\n"
    "  --csv             every column of /stages as CSV (a header line; strings quoted when they\n"
    "                    hold a comma, a quote or a line break; non-finite figures nan, inf, -inf)\n"
    "  --json            one JSON document: the run's attributes, its summary and every row\n"
    "                    (non-finite figures null)\n"
    "  --stage PATTERN   only the rows whose name holds PATTERN (a glob with * ? [...])\n"
    "\n"
    "Exit 0; 2 bad usage or a file that is not a trace.\n"
    "\n"
    "example: nvfp4dbg show golden/traces/seed-bug-v4.h5 --stage q_a_proj\n";

/* The columns of the HDF5 /stages table (docs/trace-format.md), in its order; the in-memory
 * additions of nd_row that the file does not keep are left out. */
enum { F_INT, F_DBL, F_STR };
#define FIELD(name, kind) {#name, kind, offsetof(nd_row, name)}
static const struct { const char *name; int kind; size_t off; } fields[] = {
    FIELD(index, F_INT), FIELD(layer, F_INT), FIELD(name, F_STR), FIELD(op, F_STR), FIELD(mode, F_STR),
    FIELD(quantized, F_INT), FIELD(numel, F_INT), FIELD(ref_amax, F_DBL), FIELD(prod_amax, F_DBL),
    FIELD(ref_nan, F_INT), FIELD(prod_nan, F_INT), FIELD(ref_inf, F_INT), FIELD(prod_inf, F_INT),
    FIELD(cosine, F_DBL), FIELD(rel_l2, F_DBL), FIELD(sqnr_db, F_DBL), FIELD(max_abs_err, F_DBL),
    FIELD(sat_frac, F_DBL), FIELD(zero_block_frac, F_DBL), FIELD(scale_ratio, F_DBL), FIELD(weight_rel_l2, F_DBL),
    FIELD(verdict, F_STR), FIELD(floor_sqnr_db, F_DBL), FIELD(scale_mult, F_DBL), FIELD(alpha, F_DBL),
    FIELD(worst_block, F_INT), FIELD(worst_block_rel, F_DBL), FIELD(topk_agree, F_DBL), FIELD(kl_div, F_DBL),
    FIELD(top1_agree, F_DBL),
    FIELD(nll_ref, F_DBL),
    FIELD(nll_prod, F_DBL),
};
#define NFIELDS (sizeof fields / sizeof fields[0])

static long long int_of(const nd_row *r, size_t k) {
    const char *p = (const char *)r + fields[k].off;
    if (!strcmp(fields[k].name, "quantized")) return *(const uint8_t *)p;
    if (!strcmp(fields[k].name, "index") || !strcmp(fields[k].name, "layer")) return *(const int32_t *)p;
    return *(const int64_t *)p;
}
static double dbl_of(const nd_row *r, size_t k) { return *(const double *)((const char *)r + fields[k].off); }
static const char *str_of(const nd_row *r, size_t k) { return (const char *)r + fields[k].off; }

static void csv_string(const char *raw) {
    /* control bytes, C1 controls and bidi overrides in a name (a hostile recipe's stage names)
     * never reach the terminal or a spreadsheet raw: written as \xHH / \u{...} (util/term.h) */
    char safe[4 * 4096];
    const char *s = nd_term_safe(raw, safe, sizeof safe);
    if (!strpbrk(s, ",\"\r\n")) { fputs(s, stdout); return; }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

static void print_csv(const nd_trace *t, const char *stage) {
    for (size_t k = 0; k < NFIELDS; k++) printf("%s%s", k ? "," : "", fields[k].name);
    putchar('\n');
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        if (!nd_trace_stage_match(stage, r->name)) continue;
        for (size_t k = 0; k < NFIELDS; k++) {
            if (k) putchar(',');
            if (fields[k].kind == F_INT) printf("%lld", int_of(r, k));
            else if (fields[k].kind == F_DBL) printf("%.9g", dbl_of(r, k));
            else csv_string(str_of(r, k));
        }
        putchar('\n');
    }
}

static int print_json(const nd_trace *t, const char *path, const char *stage) {
    json_t *root = json_object(), *rows = json_array(), *sum = json_object();
    const struct { const char *k, *v; } meta[] = {
        {"trace", path}, {"schema", t->schema}, {"tool_version", t->tool_version}, {"checkpoint", t->checkpoint},
        {"checkpoint_format", t->checkpoint_format}, {"recipe", t->recipe}, {"stack", t->stack}, {"backend", t->backend},
        {"device", t->device}, {"modes", t->modes}, {"created_utc", t->created_utc}, {"overrides", t->overrides}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) json_object_set_new(root, meta[i].k, json_string(meta[i].v));
    json_t *tok = json_array();
    for (int64_t i = 0; i < t->ntokens; i++) json_array_append_new(tok, json_integer(t->tokens[i]));
    json_object_set_new(root, "tokens", tok);
    json_object_set_new(root, "prompt", t->prompt ? json_string(t->prompt) : json_null());
    json_object_set_new(root, "prompt_chat", t->prompt_chat[0] ? json_string(t->prompt_chat) : json_null());
    const nd_trace_summary *s = &t->summary;
    const struct { const char *k, *v; } ss[] = {
        {"status", s->status}, {"first_divergence", s->first_divergence}, {"first_divergence_mode", s->first_divergence_mode},
        {"cause", s->cause}, {"message", s->message}, {"repair", s->repair}, {"evidence", s->evidence},
        {"next_command", s->next_command}};
    for (size_t i = 0; i < sizeof ss / sizeof ss[0]; i++) json_object_set_new(sum, ss[i].k, json_string(ss[i].v));
    if (s->applied_status[0]) {
        json_t *ap = json_object();
        json_object_set_new(ap, "command", json_string(s->applied_command));
        json_object_set_new(ap, "status_after", json_string(s->applied_status));
        json_object_set_new(ap, "first_divergence_after", json_string(s->applied_first));
        const struct { const char *k; double v; } f[] = {{"kl_before", s->kl_before}, {"kl_after", s->kl_after},
                                                           {"top1_before", s->top1_before}, {"top1_after", s->top1_after}};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
            json_object_set_new(ap, f[i].k, isfinite(f[i].v) ? json_real(f[i].v) : json_null());
        json_object_set_new(sum, "apply_repair", ap);
    }
    json_object_set_new(root, "summary", t->has_summary ? sum : json_null());
    if (!t->has_summary) json_decref(sum);
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        if (!nd_trace_stage_match(stage, r->name)) continue;
        json_t *o = json_object();
        for (size_t k = 0; k < NFIELDS; k++) {
            json_t *v;
            if (fields[k].kind == F_INT) v = json_integer(int_of(r, k));
            else if (fields[k].kind == F_DBL) v = isfinite(dbl_of(r, k)) ? json_real(dbl_of(r, k)) : json_null();
            else v = json_string(str_of(r, k));
            json_object_set_new(o, fields[k].name, v ? v : json_null());
        }
        json_array_append_new(rows, o);
    }
    json_object_set_new(root, "stages", rows);
    char *txt = json_dumps(root, JSON_INDENT(1));
    json_decref(root);
    if (!txt) return ND_EXIT_INTERNAL;
    puts(txt);
    free(txt);
    return 0;
}

int nd_cmd_show(int argc, char **argv) {
    const char *path = NULL, *stage = NULL;
    int csv = 0, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(usage_text, stdout); return 0; }
        else if (!strcmp(a, "--csv")) csv = 1;
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--stage")) {
            if (i + 1 >= argc) return nd_cli_usage_error("show", "--stage needs a pattern");
            stage = argv[++i];
        }
        else if (a[0] == '-' && a[1]) return nd_cli_usage_error("show", "unknown option '%s'", a);
        else if (!path) path = a;
        else return nd_cli_usage_error("show", "one trace only (got '%s' and '%s')", path, a);
    }
    if (!path) { fputs(usage_text, stderr); return nd_cli_usage_error("show", "a trace file is required"); }
    if (csv && json) return nd_cli_usage_error("show", "--csv and --json do not go together");
    nd_err e = {0};
    nd_trace *t = NULL;
    if (nd_trace_read(path, &t, &e)) return nd_cli_error(&e);
    int rc = 0;
    if (csv) print_csv(t, stage);
    else if (json) rc = print_json(t, path, stage);
    else {
        const int width = nd_term_width(1);
        char line[2048], nm[4 * ND_NAME_LEN];
        snprintf(line, sizeof line, "trace file %s: checkpoint %s  recipe %s  format %s  stack %s  backend %s (%s)  tokens %lld  %s",
                 path, t->checkpoint, t->recipe, t->checkpoint_format, t->stack, t->backend, t->device, (long long)t->ntokens,
                 t->has_summary ? t->summary.status : "no summary");
        nd_term_wrap(stdout, nd_term_safe(line, nm, sizeof nm), 2, 0, width);
        if (t->prompt) {   /* the text the tokens came from (its first 300 bytes, control characters escaped) */
            char head[320], safe[4 * sizeof head];
            size_t n = strlen(t->prompt);
            size_t cut = n > 300 ? 300 : n;
            while (cut < n && cut && ((unsigned char)t->prompt[cut] & 0xC0) == 0x80) cut--;   /* whole characters */
            snprintf(head, sizeof head, "%.*s", (int)cut, t->prompt);
            char chat[4 * sizeof t->prompt_chat];
            snprintf(line, sizeof line, "prompt%s%s%s: %s%s", t->prompt_chat[0] ? " (chat " : "", nd_term_safe(t->prompt_chat, chat, sizeof chat),
                     t->prompt_chat[0] ? ")" : "", nd_term_safe(head, safe, sizeof safe), n > 300 ? " ..." : "");
            nd_term_wrap(stdout, line, 2, 0, width);
        }
        int64_t first = -1;
        for (int64_t i = 0; t->has_summary && i < t->nrows; i++)
            if (!strcmp(t->rows[i].name, t->summary.first_divergence) && !strcmp(t->rows[i].mode, t->summary.first_divergence_mode)) { first = i; break; }
        printf("\n");
        nd_trace_print_table(t->rows, t->nrows, first, nd_cli_color(stdout), stage, width);
        if (t->has_summary && t->summary.message[0]) {
            char msg[4 * sizeof t->summary.message];
            printf("\n");
            nd_term_wrap(stdout, nd_term_safe(t->summary.message, msg, sizeof msg), 2, 0, width);
        }
        const nd_trace_summary *s = &t->summary;
        if (t->has_summary && s->applied_status[0]) {
            /* trace --apply-repair's outcome, as the run printed it */
            char line[1400], cmd[4 * sizeof s->applied_command];
            snprintf(line, sizeof line, "--apply-repair: final logits KL %.4g -> %.4g, top-1 %.1f%% -> %.1f%%; after the repairs: %s%s",
                     s->kl_before, s->kl_after, 100 * s->top1_before, 100 * s->top1_after,
                     strcmp(s->applied_status, "ok") ? "diverged at " : "no divergence left (the healthy NVFP4 figures)",
                     strcmp(s->applied_status, "ok") ? s->applied_first : "");
            printf("\n");
            nd_term_wrap(stdout, nd_term_safe(line, cmd, sizeof cmd), 2, 0, width);
            /* a stored command is offered only in the form nvfp4dbg writes (util/shquote.h) */
            if (nd_shcmd_is_ours(s->applied_command)) printf("  command: %s\n", nd_term_safe(s->applied_command, cmd, sizeof cmd));
            else printf("  command: (not shown: the trace's stored command is not one nvfp4dbg writes)\n");
        }
    }
    nd_trace_free(t);
    return rc;
}
