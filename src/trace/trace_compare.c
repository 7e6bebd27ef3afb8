/* trace_compare.c — the comparison behind `nvfp4dbg compare`: stages matched by (name, mode),
 * every figure against its tolerance, hard rules for NaN/Inf, missing stages, verdicts and the
 * first divergence. Works on rows already read; knows nothing about files. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"
#include "util/term.h"

typedef struct list { nd_cmp_item *v; int n, cap; } list;

static nd_cmp_item *push(list *l) {
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        nd_cmp_item *nv = realloc(l->v, (size_t)cap * sizeof *nv);
        if (!nv) return NULL;
        l->v = nv;
        l->cap = cap;
    }
    nd_cmp_item *it = &l->v[l->n++];
    memset(it, 0, sizeof *it);
    it->golden = it->run = it->delta = it->tol = NAN;
    return it;
}

static nd_cmp_item *item(list *l, int kind, int regression, const nd_row *r, const char *what, int64_t order) {
    nd_cmp_item *it = push(l);
    if (!it) return NULL;
    it->kind = kind;
    it->regression = regression;
    it->severity = regression ? INFINITY : 0;
    it->order = order;
    if (r) {
        snprintf(it->stage, sizeof it->stage, "%s", r->name);
        snprintf(it->mode, sizeof it->mode, "%s", r->mode);
    }
    snprintf(it->what, sizeof it->what, "%s", what);
    return it;
}

/* Sort key of a row: (name, mode, position), so duplicates pair up in order. */
static const nd_row *sort_rows;
static int by_key(const void *a, const void *b) {
    int64_t i = *(const int64_t *)a, j = *(const int64_t *)b;
    int c = strcmp(sort_rows[i].name, sort_rows[j].name);
    if (!c) c = strcmp(sort_rows[i].mode, sort_rows[j].mode);
    return c ? c : (i > j) - (i < j);
}
static int64_t *sorted_index(const nd_trace *t) {
    int64_t *ix = malloc((size_t)(t->nrows ? t->nrows : 1) * sizeof *ix);
    if (!ix) return NULL;
    for (int64_t i = 0; i < t->nrows; i++) ix[i] = i;
    sort_rows = t->rows;
    qsort(ix, (size_t)t->nrows, sizeof *ix, by_key);
    return ix;
}
static int key_cmp(const nd_row *a, const nd_row *b) {
    int c = strcmp(a->name, b->name);
    return c ? c : strcmp(a->mode, b->mode);
}

/* Within tolerance? NaN equals NaN, an infinity equals the same infinity. */
static int within(double g, double r, nd_tol t, double *allowed) {
    *allowed = t.abs + t.rel * fabs(g);
    if (isnan(g) || isnan(r)) return isnan(g) && isnan(r);
    if (isinf(g) || isinf(r)) return g == r;
    return fabs(r - g) <= *allowed;
}

static int compare_counts(list *l, const nd_row *g, const nd_row *r, int64_t order) {
    const char *names[4] = {"ref_nan", "prod_nan", "ref_inf", "prod_inf"};
    const int64_t gv[4] = {g->ref_nan, g->prod_nan, g->ref_inf, g->prod_inf};
    const int64_t rv[4] = {r->ref_nan, r->prod_nan, r->ref_inf, r->prod_inf};
    for (int i = 0; i < 4; i++) {
        if (gv[i] == rv[i]) continue;
        /* new non-finite values are never tolerated; a changed count is a change of numerics too */
        nd_cmp_item *it = item(l, gv[i] == 0 ? ND_CMP_NONFINITE : ND_CMP_COUNT, 1, g, names[i], order);
        if (!it) return -1;
        it->golden = (double)gv[i];
        it->run = (double)rv[i];
        it->delta = it->run - it->golden;
        it->tol = 0;
    }
    return 0;
}

static int compare_fields(list *l, const nd_row *g, const nd_row *r, int64_t order) {
    struct { const char *what; int differ; char gs[64], rs[64]; } f[4] = {
        {"op", strcmp(g->op, r->op) != 0, "", ""},
        {"layer", g->layer != r->layer, "", ""},
        {"quantized", g->quantized != r->quantized, "", ""},
        {"numel", g->numel != r->numel, "", ""},
    };
    snprintf(f[0].gs, 64, "%s", g->op); snprintf(f[0].rs, 64, "%s", r->op);
    snprintf(f[1].gs, 64, "%d", g->layer); snprintf(f[1].rs, 64, "%d", r->layer);
    snprintf(f[2].gs, 64, "%u", g->quantized); snprintf(f[2].rs, 64, "%u", r->quantized);
    snprintf(f[3].gs, 64, "%lld", (long long)g->numel); snprintf(f[3].rs, 64, "%lld", (long long)r->numel);
    for (int i = 0; i < 4; i++) {
        if (!f[i].differ) continue;
        nd_cmp_item *it = item(l, ND_CMP_FIELD, 1, g, f[i].what, order);
        if (!it) return -1;
        snprintf(it->golden_s, sizeof it->golden_s, "%s", f[i].gs);
        snprintf(it->run_s, sizeof it->run_s, "%s", f[i].rs);
    }
    if (strcmp(g->verdict, r->verdict)) {
        nd_cmp_item *it = item(l, ND_CMP_VERDICT, 1, g, "verdict", order);
        if (!it) return -1;
        snprintf(it->golden_s, sizeof it->golden_s, "%s", g->verdict);
        snprintf(it->run_s, sizeof it->run_s, "%s", r->verdict);
    }
    return 0;
}

static int compare_figures(list *l, const nd_row *g, const nd_row *r, const nd_tolerances *tol, int64_t order, unsigned char *used) {
    for (int f = 0; f < ND_NFIG; f++) {
        double gv = nd_figure_value(g, f), rv = nd_figure_value(r, f), allowed;
        nd_tol t = nd_tolerance_for_ex(tol, g->name, g->op, f, used);
        if (within(gv, rv, t, &allowed)) continue;
        nd_cmp_item *it = item(l, ND_CMP_FIGURE, 1, g, nd_figure_name(f), order);
        if (!it) return -1;
        it->golden = gv;
        it->run = rv;
        it->delta = rv - gv;
        it->tol = allowed;
        /* how many tolerances out; a NaN on one side or a tolerance of 0 is maximally bad */
        double d = fabs(rv - gv);
        it->severity = (isfinite(d) && allowed > 0) ? d / allowed : INFINITY;
    }
    return 0;
}

static int compare_summary(list *l, const nd_trace *run, const nd_trace *golden) {
    const nd_trace_summary *g = &golden->summary, *r = &run->summary;
    char gs[160], rs[160];
    struct { const char *what; const char *gv, *rv; } f[3] = {
        {"status", g->status, r->status}, {"first_divergence", gs, rs}, {"cause", g->cause, r->cause}};
    snprintf(gs, sizeof gs, "%s%s%s", g->first_divergence[0] ? g->first_divergence : "(none)",
             g->first_divergence[0] ? " " : "", g->first_divergence_mode);
    snprintf(rs, sizeof rs, "%s%s%s", r->first_divergence[0] ? r->first_divergence : "(none)",
             r->first_divergence[0] ? " " : "", r->first_divergence_mode);
    for (int i = 0; i < 3; i++) {
        if (!strcmp(f[i].gv, f[i].rv)) continue;
        nd_cmp_item *it = item(l, ND_CMP_SUMMARY, 1, NULL, f[i].what, INT64_MAX);
        if (!it) return -1;
        snprintf(it->stage, sizeof it->stage, "(summary)");
        snprintf(it->golden_s, sizeof it->golden_s, "%s", f[i].gv);
        snprintf(it->run_s, sizeof it->run_s, "%s", f[i].rv);
    }
    return 0;
}

/* Regressions first, worst first, then in execution order; extra stages last. */
static int by_badness(const void *a, const void *b) {
    const nd_cmp_item *x = a, *y = b;
    if (x->regression != y->regression) return y->regression - x->regression;
    if (x->severity != y->severity) return x->severity < y->severity ? 1 : -1;
    return (x->order > y->order) - (x->order < y->order);
}

/* The decoder layers a trace's rows cover, as a sorted list of distinct indices (at most cap;
 * returns how many). Two traces gate each other only over the same layers: the same highest
 * index is not enough (--layers 3 against --layers 0-3). */
static int layers_of(const nd_trace *t, int *out, int cap) {
    int n = 0;
    for (int64_t i = 0; i < t->nrows; i++) {
        const int l = t->rows[i].layer;
        if (l < 0) continue;
        int k = n;
        while (k > 0 && out[k - 1] > l) k--;
        if (k > 0 && out[k - 1] == l) continue;
        if (n == cap) return -1;
        memmove(out + k + 1, out + k, (size_t)(n - k) * sizeof *out);
        out[k] = l;
        n++;
    }
    return n;
}

/* "0-3, 7" */
static void layers_str(const int *l, int n, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    if (n <= 0) { snprintf(buf, cap, "none"); return; }
    for (int i = 0; i < n && o < cap;) {
        int j = i;
        while (j + 1 < n && l[j + 1] == l[j] + 1) j++;
        o += (size_t)snprintf(buf + o, cap - o, j > i ? "%s%d-%d" : "%s%d", i ? ", " : "", l[i], l[j]);
        i = j + 1;
    }
}

int nd_trace_comparable(const char *rp, const nd_trace *run, const char *op, const nd_trace *other, nd_err *e) {
    /* a trace without rows gates nothing: every stage of the run would be an "extra" one */
    if (other->nrows == 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: holds no stage rows: not a trace to compare against (a golden must hold the "
                       "stages it gates)", op);
    if (run->nrows == 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: holds no stage rows: nothing to compare", rp);
    enum { CAP = 4096 };
    int *la = malloc(2 * CAP * sizeof *la);
    if (!la) return nd_fail(e, ND_EXIT_INTERNAL, "compare: out of memory");
    int *lb = la + CAP;
    const int nr = layers_of(run, la, CAP), no = layers_of(other, lb, CAP);
    if (nr != no || (nr > 0 && memcmp(la, lb, (size_t)nr * sizeof *la))) {
        char a[256], b[256];
        layers_str(la, nr, a, sizeof a);
        layers_str(lb, no, b, sizeof b);
        free(la);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: their rows cover layers %s and %s (another model, "
                       "or another --layers)", rp, op, a, b);
    }
    free(la);
    if (run->ntokens != other->ntokens)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: made from %lld and %lld tokens", rp, op,
                       (long long)run->ntokens, (long long)other->ntokens);
    for (int64_t i = 0; i < run->ntokens; i++)
        if (run->tokens[i] != other->tokens[i])
            return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: token %lld differs (%lld vs %lld)", rp, op,
                           (long long)i, (long long)run->tokens[i], (long long)other->tokens[i]);
    if (strcmp(run->recipe, other->recipe))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s and %s are not comparable: recipes %s and %s", rp, op, run->recipe,
                       other->recipe);
    return 0;
}

int nd_trace_golden_covers(const char *rp, const nd_trace *run, const char *gp, const nd_trace *golden, nd_err *e) {
    int64_t *gi = sorted_index(golden), *ri = sorted_index(run);
    if (!gi || !ri) {
        free(gi); free(ri);
        return nd_fail(e, ND_EXIT_INTERNAL, "compare: out of memory");
    }
    int64_t lacking = 0, stages = 0, first = -1;
    for (int64_t a = 0, b = 0; b < run->nrows; b++) {
        const nd_row *r = &run->rows[ri[b]];
        if (b > 0 && !key_cmp(&run->rows[ri[b - 1]], r)) continue; /* a repeated row: the comparison flags it */
        stages++;
        while (a < golden->nrows && key_cmp(&golden->rows[gi[a]], r) < 0) a++;
        if (a < golden->nrows && !key_cmp(&golden->rows[gi[a]], r)) continue;
        if (first < 0 || ri[b] < first) first = ri[b];
        lacking++;
    }
    int rc = 0;
    if (lacking) {
        char ns[4 * ND_NAME_LEN];
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: lacks %lld of the %lld stages of %s (first: %s, %s): a golden cut down, or made "
                     "by another version or recipe, gates only part of the run; make it again from a trusted run", gp,
                     (long long)lacking, (long long)stages, rp, nd_term_safe(run->rows[first].name, ns, sizeof ns),
                     run->rows[first].mode);
    }
    free(gi); free(ri);
    return rc;
}

int nd_trace_compare(const nd_trace *run, const nd_trace *golden, const nd_tolerances *tol, nd_cmp_result *out,
                     nd_err *e) {
    memset(out, 0, sizeof *out);
    out->first = -1;
    list l = {0};
    int64_t *gi = sorted_index(golden), *ri = sorted_index(run);
    unsigned char *used = calloc((size_t)(tol->nrules > 0 ? tol->nrules : 1), 1);
    int rc = 0;
    if (!gi || !ri || !used) { rc = nd_fail(e, ND_EXIT_INTERNAL, "compare: out of memory"); goto done; }
    int64_t a = 0, b = 0;
    while (a < golden->nrows || b < run->nrows) {
        const nd_row *g = a < golden->nrows ? &golden->rows[gi[a]] : NULL;
        const nd_row *r = b < run->nrows ? &run->rows[ri[b]] : NULL;
        int c = !g ? 1 : !r ? -1 : key_cmp(g, r);
        int bad = 0;
        if (c < 0) {
            bad = !item(&l, ND_CMP_MISSING, 1, g, "missing stage", gi[a]);
            a++;
        } else if (c > 0) {
            /* an extra stage sorts after every golden stage in "first" order. A new stage is
             * reported only; but a second row of a stage the run already has, or an extra row with
             * NaN/Inf in its outputs or figures, is a regression: it is how a broken run hides */
            int dup = b > 0 && !key_cmp(&run->rows[ri[b - 1]], r);
            int nonfinite = r->prod_nan + r->prod_inf + r->ref_nan + r->ref_inf > 0 || !isfinite(r->cosine) ||
                            !isfinite(r->sqnr_db) || !isfinite(r->rel_l2);
            bad = !item(&l, ND_CMP_EXTRA, dup || nonfinite, r,
                        dup ? "duplicate stage row" : nonfinite ? "extra stage with NaN/Inf" : "extra stage", golden->nrows + ri[b]);
            b++;
        } else {
            bad = compare_counts(&l, g, r, gi[a]) || compare_fields(&l, g, r, gi[a]) ||
                  compare_figures(&l, g, r, tol, gi[a], used);
            out->nmatched++;
            out->nfigures += ND_NFIG;
            a++;
            b++;
        }
        if (bad) { rc = nd_fail(e, ND_EXIT_INTERNAL, "compare: out of memory"); goto done; }
    }
    if (compare_summary(&l, run, golden)) { rc = nd_fail(e, ND_EXIT_INTERNAL, "compare: out of memory"); goto done; }
    if (l.n > 1) qsort(l.v, (size_t)l.n, sizeof *l.v, by_badness); /* qsort(NULL, 0) is undefined */
    out->items = l.v;
    out->nitems = l.n;
    out->nstages = golden->nrows;
    for (int64_t i = 0; i < golden->nrows; i++) /* gi sorts by (name, mode): a new name starts a stage */
        out->nnames += i == 0 || strcmp(golden->rows[gi[i]].name, golden->rows[gi[i - 1]].name) != 0;
    out->nrules = tol->nrules;
    out->first_unused = -1;
    for (int i = 0; i < tol->nrules; i++) {
        out->nrules_used += used[i];
        if (!used[i] && out->first_unused < 0) out->first_unused = i;
    }
    for (int i = 0; i < l.n; i++) {
        out->nregressions += l.v[i].regression;
        out->nmissing += l.v[i].kind == ND_CMP_MISSING;
        out->nextra += l.v[i].kind == ND_CMP_EXTRA;
        if (l.v[i].regression && (out->first < 0 || l.v[i].order < l.v[out->first].order)) out->first = i;
    }
    l.v = NULL;
done:
    free(used);
    free(l.v);
    free(gi);
    free(ri);
    return rc;
}

void nd_cmp_result_free(nd_cmp_result *r) {
    free(r->items);
    *r = (nd_cmp_result){.first = -1}; /* left as an empty result */
}
