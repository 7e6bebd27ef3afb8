/* quality_text.c — see quality_text.h. */
#include "quality_text.h"
#include <math.h>
#include <stdio.h>
#include <string.h>
#include "util/term.h"

void nd_trace_print_quality(const nd_quality *q, int vs_original, int width) {
    if (!q->have) return;
    char line[768];
    int n = snprintf(line, sizeof line, "quality against the %s: final logits KL %.4g nats, top-1 %.1f%% of %lld positions",
                     vs_original ? "BF16 original" : "reference path (dequantized weights; --reference-checkpoint: the original)",
                     q->kl, 100.0 * q->top1, (long long)q->positions);
    if (isfinite(q->ppl_ref) && isfinite(q->ppl_prod) && n > 0 && n < (int)sizeof line)
        n += snprintf(line + n, sizeof line - (size_t)n, "; prompt perplexity %.4g -> %.4g (%+.2f%%)", q->ppl_ref, q->ppl_prod,
                      100.0 * (q->ppl_prod / q->ppl_ref - 1.0));
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
    json_object_set_new(o, "perplexity_ref", isfinite(q->ppl_ref) ? json_real(q->ppl_ref) : json_null());
    json_object_set_new(o, "perplexity_prod", isfinite(q->ppl_prod) ? json_real(q->ppl_prod) : json_null());
    for (int k = 0; k < q->npoints; k++) {
        json_t *p = json_object();
        json_object_set_new(p, "layer", json_integer(q->layer[k]));
        json_object_set_new(p, "rel_l2", json_real(q->rel_l2[k]));
        json_array_append_new(g, p);
    }
    json_object_set_new(o, "layer_rel_l2", g);
    return o;
}
