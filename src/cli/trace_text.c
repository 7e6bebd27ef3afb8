/* trace_text.c — what `trace` prints on a terminal (issue 22): the summary (header, one line per
 * layer, the diagnosis in brief) by default, every row with --table. Names are never cut: columns
 * are as wide as the longest name, and a line wider than the terminal puts the name on a line of
 * its own. */
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace_text.h"
#include "diagnose/catalogue.h"
#include "util/term.h"

#define RED "\033[1;31m"
#define YELLOW "\033[33m"
#define OFF "\033[0m"

static int all_zero(const nd_row *r) {
    return r->ref_amax == 0 && r->prod_amax == 0 && r->prod_nan + r->prod_inf + r->ref_nan + r->ref_inf == 0;
}

/* cosine and SQNR as printed: two all-zero outputs agree trivially and are never shown as
 * cosine 1 / SQNR 200 */
static void figures(const nd_row *r, char *cs, size_t ncs, char *sq, size_t nsq, char *rl, size_t nrl) {
    if (all_zero(r)) {
        snprintf(cs, ncs, "all-zero");
        snprintf(sq, nsq, "-");
        snprintf(rl, nrl, "-");
    } else {
        snprintf(cs, ncs, "%.5f", r->cosine);
        snprintf(sq, nsq, "%.1f", r->sqnr_db);
        snprintf(rl, nrl, "%.4f", r->rel_l2);
    }
}

int nd_trace_stage_match(const char *pattern, const char *name) {
    if (!pattern || !*pattern) return 1;
    if (strpbrk(pattern, "*?[")) return fnmatch(pattern, name, 0) == 0;
    return strstr(name, pattern) != NULL;
}

void nd_trace_print_header(const nd_trace_opts *o, const nd_trace_result *res, int width) {
    char line[4096], device[128];
    /* the device's name without its details ("NVIDIA H200", "host CPU"): the trace file and
     * --table keep the whole description; the summary stays within its line budget */
    snprintf(device, sizeof device, "%s", res->device);
    device[strcspn(device, "(")] = 0;
    for (size_t n = strlen(device); n > 0 && device[n - 1] == ' '; n--) device[n - 1] = 0;
    char dir[1024], rcp[4 * sizeof res->recipe], stk[4 * sizeof res->stack]; /* made safe for the terminal */
    size_t len = (size_t)snprintf(line, sizeof line, "nvfp4dbg trace: %s  recipe %s  format %s  stack %s  backend %s (%s)  ",
                                  nd_term_safe(o->ckpt_dir, dir, sizeof dir), nd_term_safe(res->recipe, rcp, sizeof rcp),
                                  res->format, nd_term_safe(res->stack, stk, sizeof stk), res->backend, device[0] ? device : res->device);
    if (o->tokens && o->ntok && len < sizeof line) {
        len += (size_t)snprintf(line + len, sizeof line - len, "tokens %lld (", (long long)o->ntok);
        for (int64_t i = 0; i < o->ntok && i < 12 && len < sizeof line; i++)
            len += (size_t)snprintf(line + len, sizeof line - len, "%s%lld", i ? "," : "", (long long)o->tokens[i]);
        if (len < sizeof line) len += (size_t)snprintf(line + len, sizeof line - len, "%s)", o->ntok > 12 ? ",..." : "");
    } else if (len < sizeof line) {
        len += (size_t)snprintf(line + len, sizeof line - len, "tokens 16 (built-in)");
    }
    const int lo = o->layer_lo > 0 ? o->layer_lo : 0;
    const int hi = o->layer_hi < 0 || o->layer_hi >= res->n_layers ? res->n_layers - 1 : o->layer_hi;
    if (res->n_layers > 0 && len < sizeof line) {
        if (lo == 0 && hi == res->n_layers - 1) snprintf(line + len, sizeof line - len, "  %d layers", res->n_layers);
        else snprintf(line + len, sizeof line - len, "  layers %d-%d of %d", lo, hi, res->n_layers);
    }
    nd_term_wrap(stdout, line, 2, 0, width);
}

/* ---- --table: every row ---- */

void nd_trace_print_table(const nd_row *rows, int64_t nrows, int64_t first, int color, const char *stage, int width) {
    size_t namew = 5, opw = 2;
    char nm[4 * ND_NAME_LEN];
    for (int64_t i = 0; i < nrows; i++) {
        if (!nd_trace_stage_match(stage, rows[i].name)) continue;
        size_t l = strlen(nd_term_safe(rows[i].name, nm, sizeof nm));
        if (l > namew) namew = l;
        l = strlen(rows[i].op);
        if (l > opw) opw = l;
    }
    /* the figures after the name: op, mode, amax x2, NaN, cosine, SQNR, verdict (~20) */
    const int rest = (int)opw + 1 + 8 + 1 + 10 + 1 + 10 + 1 + 6 + 1 + 9 + 1 + 7 + 2 + 20;
    const int own_line = width > 0 && (int)namew + 1 + rest > width;
    const int nw = own_line ? 0 : (int)namew;
    if (own_line) printf("stage\n  ");
    else printf("%-*s ", nw, "stage");
    printf("%-*s %-8s %10s %10s %6s %9s %7s  %s\n", (int)opw, "op", "mode", "ref_amax", "prod_amax", "NaN", "cosine", "SQNR", "verdict");
    int shown = 0;
    for (int64_t i = 0; i < nrows; i++) {
        const nd_row *r = &rows[i];
        if (!nd_trace_stage_match(stage, r->name)) continue;
        shown++;
        int bad = nd_verdict_bad(r->verdict);
        const char *on = "", *off = "";
        if (color && i == first) { on = RED; off = OFF; }
        else if (color && bad) { on = YELLOW; off = OFF; }
        char cs[16], sq[16], rl[16];
        figures(r, cs, sizeof cs, sq, sizeof sq, rl, sizeof rl);
        nd_term_safe(r->name, nm, sizeof nm);
        if (own_line) printf("%s%s%s\n  %s", on, nm, off, on);
        else printf("%s%-*s ", on, nw, nm);
        /* op, mode and verdict come from a trace file under `show`: made safe for the terminal (issue 37) */
        char op[4 * ND_OP_LEN], md[4 * ND_MODE_LEN], vd[4 * ND_VERDICT_LEN];
        printf("%-*s %-8s %10.4g %10.4g %6lld %9s %7s  %s%s%s\n", (int)opw, nd_term_safe(r->op, op, sizeof op),
               nd_term_safe(r->mode, md, sizeof md), r->ref_amax, r->prod_amax, (long long)(r->prod_nan + r->prod_inf), cs, sq,
               nd_term_safe(r->verdict, vd, sizeof vd), i == first ? "   <== first divergence" : "", off);
    }
    if (!shown && stage) {
        char st[1024];
        printf("(no stage matches --stage %s)\n", nd_term_safe(stage, st, sizeof st));
    }
}

/* ---- the summary: one line per layer ---- */

typedef struct layer_line {
    char label[24];          /* "in", the layer number, "head"; "A-B" for a run of quiet layers */
    int64_t worst;           /* row index */
    int n_bad;               /* diverged rows in the group */
    int64_t nan;             /* the largest NaN/Inf count of a production output in the group */
    int has_first;
    int n_layers;            /* layers the line stands for (a run of quiet layers: more than one) */
    int n_drift;             /* of those, layers whose line shows drift */
} layer_line;

/* How far a healthy-looking row is below its floor (larger: worse); isolated rows only, as chained
 * rows drift with depth by design. */
static double badness(const nd_row *r) {
    if (all_zero(r)) return -INFINITY;
    if (isfinite(r->sqnr_db) && isfinite(r->floor_sqnr_db)) return r->floor_sqnr_db - r->sqnr_db;
    return isfinite(r->cosine) ? 1 - r->cosine : INFINITY;
}

static void group_add(layer_line *g, const nd_trace_result *res, int64_t i, int64_t first) {
    const nd_row *r = &res->rows[i];
    int bad = nd_verdict_bad(r->verdict);
    int64_t nan = r->prod_nan + r->prod_inf;
    if (nan > g->nan) g->nan = nan;
    if (bad) g->n_bad++;
    if (i == first) g->has_first = 1;
    if (g->worst < 0) { g->worst = i; return; }
    const nd_row *w = &res->rows[g->worst];
    int wbad = nd_verdict_bad(w->verdict);
    if (g->has_first) { g->worst = first; return; }
    if (bad && !wbad) { g->worst = i; return; }
    if (wbad) return; /* the first diverged row of the group stays */
    /* then the first drift row (chained routing moved by earlier error: shown, neutrally, since it
     * explains the layer's chained figures) */
    const int drift = !strcmp(r->verdict, ND_VERDICT_DRIFT), wdrift = !strcmp(w->verdict, ND_VERDICT_DRIFT);
    if (drift != wdrift) { if (drift) g->worst = i; return; }
    if (wdrift) return;
    int iso = !strcmp(r->mode, "isolated"), wiso = !strcmp(w->mode, "isolated");
    if (iso != wiso) { if (iso) g->worst = i; return; }
    if (badness(r) > badness(w)) g->worst = i;
}

/* A deep model's summary keeps to a screen: past this many layer lines, runs of consecutive quiet
 * layers (no diverged row, no NaN: verdict ok, or drift) are one line "A-B" showing the worst row
 * of the run and how many of its layers drift; every layer with a finding keeps its own line. */
#define LAYER_LINES_MAX 16

static int quiet(const layer_line *l, const nd_row *rows) {
    return l->worst >= 0 && !l->n_bad && !l->nan && !l->has_first && !nd_verdict_bad(rows[l->worst].verdict);
}

/* Merge runs of quiet layer lines g[1..ng-2] in place; returns the new ng. */
static int collapse_quiet(layer_line *g, int ng, const nd_row *rows) {
    int layers = 0;
    for (int k = 1; k < ng - 1; k++) layers += g[k].worst >= 0;
    if (layers <= LAYER_LINES_MAX) return ng;
    int out = 1;
    for (int k = 1; k < ng - 1;) {
        int j = k + 1;
        if (quiet(&g[k], rows))
            while (j < ng - 1 && quiet(&g[j], rows)) j++;
        layer_line m = g[k];
        for (int x = k + 1; x < j; x++) {
            m.n_layers += g[x].n_layers;
            m.n_drift += g[x].n_drift;
            if (badness(&rows[g[x].worst]) > badness(&rows[m.worst])) m.worst = g[x].worst;
        }
        if (j - k > 1) snprintf(m.label, sizeof m.label, "%s-%s", g[k].label, g[j - 1].label);
        g[out++] = m;
        k = j;
    }
    g[out++] = g[ng - 1];
    return out;
}

/* the stage's name without its "layers.N." prefix: the layer column says N */
static const char *in_layer(const char *name, int layer) {
    char pre[32];
    int n = snprintf(pre, sizeof pre, "layers.%d.", layer);
    return layer >= 0 && !strncmp(name, pre, (size_t)n) && name[n] ? name + n : name;
}

void nd_trace_print_layers(const nd_trace_result *res, int64_t first, int color, int width) {
    const int ng = (res->n_layers > 0 ? res->n_layers : 0) + 2; /* 0: in, 1..n: layers, n+1: head */
    layer_line *g = calloc((size_t)ng, sizeof *g);
    if (!g) return;
    for (int k = 0; k < ng; k++) g[k].worst = -1;
    snprintf(g[0].label, sizeof g[0].label, "in");
    snprintf(g[ng - 1].label, sizeof g[ng - 1].label, "head");
    for (int k = 1; k < ng - 1; k++) { snprintf(g[k].label, sizeof g[k].label, "%d", k - 1); g[k].n_layers = 1; }
    int seen_layer = 0;
    for (int64_t i = 0; i < res->nrows; i++) {
        const nd_row *r = &res->rows[i];
        int k;
        if (r->layer >= 0 && r->layer < ng - 2) { k = r->layer + 1; seen_layer = 1; }
        else k = seen_layer ? ng - 1 : 0;
        group_add(&g[k], res, i, first);
    }
    /* the rows before the first layer (embedding) only when something there diverged */
    if (g[0].worst >= 0 && !g[0].n_bad && !g[0].nan) g[0].worst = -1;
    for (int k = 0; k < ng; k++) g[k].n_drift = g[k].worst >= 0 && !strcmp(res->rows[g[k].worst].verdict, ND_VERDICT_DRIFT);
    const int nlines = collapse_quiet(g, ng, res->rows);
    int labw = 5;
    for (int k = 0; k < nlines; k++)
        if (g[k].worst >= 0 && (int)strlen(g[k].label) > labw) labw = (int)strlen(g[k].label);
    size_t namew = 5;
    char nm[4 * ND_NAME_LEN];
    for (int k = 0; k < nlines; k++)
        if (g[k].worst >= 0) {
            const nd_row *r = &res->rows[g[k].worst];
            size_t l = strlen(nd_term_safe(in_layer(r->name, r->layer), nm, sizeof nm));
            if (l > namew) namew = l;
        }
    /* mode, cosine, rel L2, NaN and the start of the verdict; a longer verdict wraps */
    const int vcol = labw + 1 + (int)namew + 1 + 9 + 8 + 8 + 7;
    const int own_line = width > 0 && vcol + 14 > width;
    const int nw = own_line ? 0 : (int)namew;
    printf("\n%-*s ", labw, "layer");
    if (own_line) printf("stage (worst of the layer)\n%*s", labw + 1, "");
    else printf("%-*s ", nw, "stage");
    printf("%-8s %7s %7s %5s  %s\n", "mode", "cosine", "rel_l2", "NaN", "verdict");
    int n_drift = 0;
    for (int k = 0; k < nlines; k++) {
        if (g[k].worst < 0) continue;
        const nd_row *r = &res->rows[g[k].worst];
        n_drift += g[k].n_drift;
        char cs[16], sq[16], rl[16], verdict[ND_VERDICT_LEN + 64];
        figures(r, cs, sizeof cs, sq, sizeof sq, rl, sizeof rl);
        /* the verdict, then what fits: how many rows of the layer diverged, the first-divergence mark
         * in words (an arrow alone on a narrow terminal: the closing line names the stage) */
        snprintf(verdict, sizeof verdict, "%s", r->verdict);
        const int vc = own_line ? labw + 1 + 9 + 8 + 8 + 7 : vcol;
        const int room = width > 0 ? width - vc : 1 << 20;
        char more[48] = "";
        if (g[k].n_bad > 1) snprintf(more, sizeof more, " (%d rows)", g[k].n_bad);
        else if (g[k].n_layers > 1 && g[k].n_drift)
            snprintf(more, sizeof more, " (%d layers, %d drift)", g[k].n_layers, g[k].n_drift);
        else if (g[k].n_layers > 1) snprintf(more, sizeof more, " (%d layers)", g[k].n_layers);
        const char *mark = g[k].has_first ? "  <== first divergence" : "";
        if ((int)(strlen(verdict) + strlen(more) + strlen(mark)) > room && *mark) {
            mark = " <==";
            if ((int)(strlen(verdict) + strlen(more) + strlen(mark)) > room) more[0] = 0;
        } else if ((int)(strlen(verdict) + strlen(more)) > room && g[k].n_layers <= 1) more[0] = 0; /* a run's count wraps */
        snprintf(verdict + strlen(verdict), sizeof verdict - strlen(verdict), "%s%s", more, mark);
        const char *on = "", *off = "";
        if (color && g[k].has_first) { on = RED; off = OFF; }
        else if (color && g[k].n_bad) { on = YELLOW; off = OFF; }
        nd_term_safe(in_layer(r->name, r->layer), nm, sizeof nm);
        printf("%s%-*s ", on, labw, g[k].label);
        if (own_line) printf("%s%s\n%*s%s", nm, off, labw + 1, "", on);
        else printf("%-*s ", nw, nm);
        printf("%-8s %7s %7s %5lld  ", r->mode, cs, rl, (long long)g[k].nan);
        if (*on) {
            /* colour the verdict too, then reset: wrap prints the newline */
            fputs(verdict, stdout);
            printf("%s\n", off);
        } else {
            nd_term_wrap(stdout, verdict, vc, vc, width);
        }
    }
    /* on a run that found nothing, say why those layers are not failures (after a divergence the
     * closing line names it, and a 60-layer summary keeps to 80 rows) */
    if (n_drift && first < 0) {
        char note[320];
        /* one line at 80 columns: the summary of a 60-layer model stays within a screen of 80 rows */
        snprintf(note, sizeof note, "drift (%d layer%s): chained routing moved by earlier error; not a divergence", n_drift,
                 n_drift == 1 ? "" : "s");
        nd_term_wrap(stdout, note, 2, 0, width);
    }
    free(g);
}

/* ---- the diagnosis ---- */

static void print_diagnosis(const nd_diagnosis *d, int i, int full, int sentence, int width) {
    char nm[4 * ND_NAME_LEN], ev[1024], nx[4 * ND_CMD_LEN], line[8192];
    const nd_cause *c = nd_cause_find(d->cause);
    const char *proof = d->proof == ND_PROOF_REPAIR ? " (proven by repair)" : d->proof == ND_PROOF_STATIC ? " (static fact)" : " (no repair restores it)";
    if (full || i) {
        snprintf(line, sizeof line, "%s %s: cause %s%s", i ? "also diverged:" : "diagnosis of", nd_term_safe(d->row, nm, sizeof nm), d->cause, proof);
        printf("\n");
        nd_term_wrap(stdout, line, 2, 0, width);
        if (c && sentence) { printf("  "); nd_term_wrap(stdout, c->sentence, 2, 2, width); }
    } else {
        /* the summary: the closing line named the stage; the cause and what it means on one line */
        snprintf(line, sizeof line, "cause %s%s%s%s", d->cause, proof, c && sentence ? ": " : "", c && sentence ? c->sentence : "");
        nd_term_wrap(stdout, line, 2, 0, width);
    }
    printf("  evidence: ");
    nd_term_wrap(stdout, nd_term_safe(d->evidence, ev, sizeof ev), 4, 12, width);
    if (d->n_tries && full) {
        printf("  repairs replayed on the stage (SQNR before %.1f dB):\n", d->base.sqnr_db);
        for (int j = 0; j < d->n_tries; j++) {
            const nd_diag_try *t = &d->tries[j];
            char res[96];
            if (t->failed) snprintf(res, sizeof res, "replay failed");
            else if (t->row.ref_amax == 0 && t->row.prod_amax == 0) snprintf(res, sizeof res, "both outputs all-zero");
            else snprintf(res, sizeof res, "SQNR %.1f dB (floor %.1f)%s", t->row.sqnr_db, t->row.floor_sqnr_db, t->restored ? ", restores" : "");
            snprintf(line, sizeof line, "%-24s %s: %s", t->rep.name, t->rep.what, res);
            printf("    ");
            nd_term_wrap(stdout, nd_term_safe(line, nx, sizeof nx), 6, 4, width);
        }
    }
    /* a command is never wrapped: it is copied and pasted as one line */
    if (d->next_command[0]) printf("  next: %s\n", nd_term_safe(d->next_command, nx, sizeof nx));
    else if (d->next_step[0]) { printf("  next: "); nd_term_wrap(stdout, nd_term_safe(d->next_step, nx, sizeof nx), 4, 8, width); }
    else if (c && c->next_step[0]) { printf("  next: "); nd_term_wrap(stdout, c->next_step, 4, 8, width); }
}

void nd_trace_print_verdict(const nd_trace_result *res, const nd_diagnosis *d, int n, int full, int width) {
    char msg[4 * sizeof res->summary.message];
    nd_term_safe(res->summary.message, msg, sizeof msg);
    /* the summary says what the cause means once: in the diagnosis under the closing line */
    const nd_cause *c = n ? nd_cause_find(d[0].cause) : NULL;
    int sentence = 1;
    if (!full && c) {
        size_t lm = strlen(msg), ls = strlen(c->sentence);
        if (lm > ls + 2 && !strcmp(msg + lm - ls, c->sentence) && !strncmp(msg + lm - ls - 2, ": ", 2)) msg[lm - ls - 2] = 0;
    } else if (c && strstr(msg, c->sentence)) sentence = 0;
    printf("\n");
    nd_term_wrap(stdout, msg, 2, 0, width);
    for (int i = 0; i < n; i++) print_diagnosis(&d[i], i, full, i ? 1 : sentence, width);
}
