/* rowq.c — trace rows pending until their probe figures come back (rowq.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "rowq.h"
#include "loop.h"
#include "pipeline.h"
#include "probes.h"
#include "verdict.h"

enum { ROWQ_FLUSH_AT = 4096 }; /* pending rows that force a flush inside a layer */

typedef struct q_row {
    nd_row row;
    nd_cmp c, shadow;
} q_row;

typedef struct q_fig {
    const nd_row *owner; /* the op's row, until the row is queued */
    int64_t row;         /* index into rows once bound, -1 before */
    int kind;
    nd_cmp c, shadow;
} q_fig;

struct nd_rowq {
    int defer, emulate;
    q_row *rows;
    int64_t n, cap;
    q_fig *figs;
    int64_t nf, capf;
};

int nd_rows_recorded(const nd_run *r) { return !(r->silent || r->loop->calib_cb || (r->loop->opts && r->loop->opts->no_probes)); }

static nd_rowq *q_of(nd_run *r, nd_err *e) {
    if (r->loop->rq) return r->loop->rq;
    r->loop->rq = calloc(1, sizeof *r->loop->rq);
    if (!r->loop->rq) { nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); return NULL; }
    const char *off = getenv("NVFP4DBG_NO_DEFER"), *emu = getenv("NVFP4DBG_TEST_DEFER_EMULATE");
    /* tensors dumped beside the rows are written in row order: no deferral then */
    r->loop->rq->defer = !(off && off[0] && strcmp(off, "0")) && !r->loop->dump_tensors;
    r->loop->rq->emulate = emu && emu[0] && strcmp(emu, "0");
    return r->loop->rq;
}

/* The compare of a queued row or figure: into `shadow` with `target` poisoned when emulating. */
static int q_compare(nd_run *r, nd_rowq *q, const nd_buf *ref, const nd_buf *prod, nd_cmp *target, nd_cmp *shadow, nd_err *e) {
    nd_cmp *dst = target;
    if (q->emulate) { memset(target, 0, sizeof *target); dst = shadow; }
    const int was = r->be->defer_results;
    r->be->defer_results = q->defer;
    int rc = r->be->compare(r->be, ref->p, prod ? prod->p : NULL, ref->n, 16, dst, e);
    r->be->defer_results = was;
    return rc;
}

/* Room for one more entry. The arrays hold the targets of results still on the device, so they
 * move (realloc) only after those have come back. */
static int q_grow(nd_run *r, void **arr, int64_t n, int64_t *cap, size_t size, nd_err *e) {
    if (n < *cap) return 0;
    if (r->be->flush_results) ND_TRY(r->be->flush_results(r->be, e));
    int64_t nc = *cap ? *cap * 2 : 256;
    void *p = realloc(*arr, size * (size_t)nc);
    if (!p) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    *arr = p;
    *cap = nc;
    return 0;
}

int nd_rows_figure(nd_run *r, const nd_row *owner, int kind, const nd_buf *ref, const nd_buf *prod, nd_err *e) {
    if (!nd_rows_recorded(r)) return 0;
    nd_rowq *q = q_of(r, e);
    if (!q) return e->code;
    ND_TRY(q_grow(r, (void **)&q->figs, q->nf, &q->capf, sizeof *q->figs, e));
    q_fig *f = &q->figs[q->nf++];
    f->owner = owner;
    f->row = -1;
    f->kind = kind;
    return q_compare(r, q, ref, prod, &f->c, &f->shadow, e);
}

void nd_rows_drop(nd_run *r, const nd_row *owner) {
    if (!r->loop->rq) return;
    for (int64_t i = 0; i < r->loop->rq->nf; i++)
        if (r->loop->rq->figs[i].row < 0 && r->loop->rq->figs[i].owner == owner) r->loop->rq->figs[i].owner = NULL;
}

int nd_rows_queue(nd_run *r, const nd_row *row, const nd_row *owner, const nd_buf *ref, const nd_buf *prod, nd_err *e) {
    nd_rowq *q = q_of(r, e);
    if (!q) return e->code;
    ND_TRY(q_grow(r, (void **)&q->rows, q->n, &q->cap, sizeof *q->rows, e));
    const int64_t k = q->n++;
    q->rows[k].row = *row;
    for (int64_t i = 0; owner && i < q->nf; i++)
        if (q->figs[i].row < 0 && q->figs[i].owner == owner) { q->figs[i].row = k; q->figs[i].owner = NULL; }
    ND_TRY(q_compare(r, q, ref, prod, &q->rows[k].c, &q->rows[k].shadow, e));
    if (!q->defer || q->n >= ROWQ_FLUSH_AT) return nd_rows_flush(r, e);
    return 0;
}

static void apply_fig(nd_row *row, const q_fig *f) {
    const nd_cmp *c = &f->c;
    if (f->kind == ND_FIG_IN_NONFINITE) row->in_nonfinite = c->ref_nan + c->ref_inf;
    else if (f->kind == ND_FIG_FLOOR_SQNR) row->floor_sqnr_db = c->sum_ee <= 0 ? INFINITY : 10.0 * log10(c->sum_rr / c->sum_ee);
}

/* The row judged and appended (what nd_emit_row did at once before rows were deferred). */
static int finish_row(nd_run *r, nd_row *row, nd_err *e) {
    nd_verdict_row(row, &r->rc->th);
    /* a stage that is broken by itself (its isolated row diverged) is not "ok" in chained mode
     * either; other chained drift stays in the figures (diagnose.c) */
    if (!strcmp(row->mode, "chained") && !nd_verdict_bad(row->verdict))
        for (int64_t i = r->loop->nrows - 1; i >= 0 && i >= r->loop->nrows - 8; i--)
            if (!strcmp(r->loop->rows[i].name, row->name) && !strcmp(r->loop->rows[i].mode, "isolated")) {
                if (nd_verdict_bad(r->loop->rows[i].verdict)) snprintf(row->verdict, sizeof row->verdict, "%s", r->loop->rows[i].verdict);
                break;
            }
    if (r->loop->nrows == r->loop->cap_rows) {
        int64_t cap = r->loop->cap_rows ? r->loop->cap_rows * 2 : 256;
        nd_row *nr = realloc(r->loop->rows, sizeof *nr * (size_t)cap);
        if (!nr) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        r->loop->rows = nr;
        r->loop->cap_rows = cap;
    }
    r->loop->rows[r->loop->nrows++] = *row;
    if (r->loop->tw) ND_TRY(nd_trace_append(r->loop->tw, row, e));
    return 0;
}

int nd_rows_flush(nd_run *r, nd_err *e) {
    nd_rowq *q = r->loop->rq;
    if (!q || (q->n == 0 && q->nf == 0)) return 0;
    if (r->be->flush_results) ND_TRY(r->be->flush_results(r->be, e));
    if (q->emulate) {
        for (int64_t i = 0; i < q->n; i++) q->rows[i].c = q->rows[i].shadow;
        for (int64_t i = 0; i < q->nf; i++) q->figs[i].c = q->figs[i].shadow;
    }
    for (int64_t i = 0; i < q->nf; i++)
        if (q->figs[i].row >= 0) apply_fig(&q->rows[q->figs[i].row].row, &q->figs[i]);
    int rc = 0;
    for (int64_t i = 0; i < q->n && !rc; i++) {
        nd_row *row = &q->rows[i].row;
        nd_probe_fill(row, &q->rows[i].c);
        rc = finish_row(r, row, e);
    }
    /* figures whose row is still to come stay (their results are back: they may move) */
    int64_t keep = 0;
    for (int64_t i = 0; i < q->nf; i++)
        if (q->figs[i].row < 0 && q->figs[i].owner) q->figs[keep++] = q->figs[i];
    q->nf = keep;
    q->n = 0;
    return rc;
}

void nd_rows_free(nd_run *r) {
    if (!r->loop->rq) return;
    free(r->loop->rq->rows);
    free(r->loop->rq->figs);
    free(r->loop->rq);
    r->loop->rq = NULL;
}
