/* trace_quality.c — see trace_quality.h. */
#include "trace_quality.h"
#include <math.h>
#include <string.h>

void nd_quality_of(const nd_row *rows, int64_t nrows, int64_t ntok, nd_quality *q) {
    memset(q, 0, sizeof *q);
    const nd_row *head = NULL;
    int nl = 0;
    for (int64_t i = 0; i < nrows; i++) {
        if (!strcmp(rows[i].mode, "chained") && isfinite(rows[i].kl_div)) head = &rows[i];
        if (rows[i].layer + 1 > nl) nl = rows[i].layer + 1;
    }
    if (!head) return;
    q->have = 1;
    q->kl = head->kl_div;
    q->top1 = head->top1_agree;
    q->ppl_ref = exp(head->nll_ref);
    q->ppl_prod = exp(head->nll_prod);
    q->positions = ntok > 0 ? ntok : 16; /* SPEC §2: 16 built-in ids when none are given */
    if (nl <= 0) return;
    /* a layer's output is its last chained row */
    const int want[ND_QUALITY_POINTS] = {0, nl / 4, nl / 2, (3 * nl) / 4, nl - 1};
    for (int k = 0; k < ND_QUALITY_POINTS; k++) {
        if (q->npoints && want[k] <= q->layer[q->npoints - 1]) continue;
        const nd_row *last = NULL;
        for (int64_t i = 0; i < nrows; i++)
            if (rows[i].layer == want[k] && !strcmp(rows[i].mode, "chained")) last = &rows[i];
        if (!last || !isfinite(last->rel_l2)) continue;
        q->layer[q->npoints] = want[k];
        q->rel_l2[q->npoints++] = last->rel_l2;
    }
}
