/* trace_quality.c — see trace_quality.h. */
#include "trace_quality.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "util/term.h"

void nd_trace_quality(const nd_trace_result *res, int64_t ntok, nd_quality *q) {
    memset(q, 0, sizeof *q);
    const nd_row *head = NULL;
    for (int64_t i = 0; i < res->nrows; i++)
        if (!strcmp(res->rows[i].mode, "chained") && isfinite(res->rows[i].kl_div)) head = &res->rows[i];
    if (!head) return;
    q->have = 1;
    q->kl = head->kl_div;
    q->top1 = head->top1_agree;
    q->positions = ntok > 0 ? ntok : 16; /* SPEC §2: 16 built-in ids when none are given */
    /* a layer's output is its last chained row */
    const int nl = res->n_layers;
    if (nl <= 0) return;
    int want[ND_QUALITY_POINTS] = {0, nl / 4, nl / 2, (3 * nl) / 4, nl - 1};
    for (int k = 0; k < ND_QUALITY_POINTS; k++) {
        if (q->npoints && want[k] <= q->layer[q->npoints - 1]) continue;
        const nd_row *last = NULL;
        for (int64_t i = 0; i < res->nrows; i++)
            if (res->rows[i].layer == want[k] && !strcmp(res->rows[i].mode, "chained")) last = &res->rows[i];
        if (!last || !isfinite(last->rel_l2)) continue;
        q->layer[q->npoints] = want[k];
        q->rel_l2[q->npoints++] = last->rel_l2;
    }
}

void nd_trace_print_quality(const nd_quality *q, int vs_original, int width) {
    if (!q->have) return;
    char line[768];
    int n = snprintf(line, sizeof line, "quality against the %s: final logits KL %.4g nats, top-1 %.1f%% of %lld positions",
                     vs_original ? "BF16 original" : "reference path (dequantized weights; --reference-checkpoint: the original)",
                     q->kl, 100.0 * q->top1, (long long)q->positions);
    if (q->npoints > 1 && n > 0 && n < (int)sizeof line) {
        n += snprintf(line + n, sizeof line - (size_t)n, "; layer outputs rel L2");
        for (int k = 0; k < q->npoints && n > 0 && n < (int)sizeof line; k++)
            n += snprintf(line + n, sizeof line - (size_t)n, "%s %.3g (%d)", k ? "," : "", q->rel_l2[k], q->layer[k]);
    }
    printf("\n");
    nd_term_wrap(stdout, line, 2, 0, width);
}

json_t *nd_trace_quality_json(const nd_quality *q, int vs_original) {
    if (!q->have) return json_null();
    json_t *o = json_object(), *g = json_array();
    json_object_set_new(o, "against", json_string(vs_original ? "original" : "reference_path"));
    json_object_set_new(o, "kl_div", json_real(q->kl));
    json_object_set_new(o, "top1_agree", json_real(q->top1));
    json_object_set_new(o, "positions", json_integer(q->positions));
    for (int k = 0; k < q->npoints; k++) {
        json_t *p = json_object();
        json_object_set_new(p, "layer", json_integer(q->layer[k]));
        json_object_set_new(p, "rel_l2", json_real(q->rel_l2[k]));
        json_array_append_new(g, p);
    }
    json_object_set_new(o, "layer_rel_l2", g);
    return o;
}
