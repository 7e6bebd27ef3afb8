/* report_model.c — the stage axis: rows come in execution order with one row per (stage, mode);
 * every distinct stage name gets one x position so both modes share the charts' x axis. */
#include <stdlib.h>
#include <string.h>
#include "report_internal.h"

const char *const nd_rmode_cls[ND_RM_NMODES] = {"iso", "chain", "capt"};
const char *const nd_rmode_name[ND_RM_NMODES] = {"isolated", "chained", "captured"};

int nd_rmode(const char *mode) {
    for (int md = 0; md < ND_RM_NMODES; md++)
        if (!strcmp(mode, nd_rmode_name[md])) return md;
    return -1;
}

static uint64_t hash_name(const char *s) {
    uint64_t h = 1469598103934665603ull;   /* FNV-1a */
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int nd_rmodel_build(const nd_trace *t, nd_rmodel *m, nd_err *e) {
    memset(m, 0, sizeof *m);
    m->t = t;
    m->first_pos = -1;
    int64_t cap = t->nrows > 0 ? t->nrows : 1;
    size_t nslots = 16;
    while (nslots < (size_t)cap * 2) nslots *= 2;
    int64_t *slot = malloc(nslots * sizeof *slot);         /* open addressing: stage position or -1 */
    m->st = calloc((size_t)cap, sizeof *m->st);
    m->layer_ids = calloc((size_t)cap, sizeof *m->layer_ids);
    m->layer_lo = calloc((size_t)cap, sizeof *m->layer_lo);
    m->layer_hi = calloc((size_t)cap, sizeof *m->layer_hi);
    if (!slot || !m->st || !m->layer_ids || !m->layer_lo || !m->layer_hi) {
        free(slot);
        nd_rmodel_free(m);
        return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %lld stages", (long long)t->nrows);
    }
    for (size_t i = 0; i < nslots; i++) slot[i] = -1;
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        size_t h = (size_t)(hash_name(r->name) & (nslots - 1));
        while (slot[h] >= 0 && strcmp(m->st[slot[h]].name, r->name)) h = (h + 1) & (nslots - 1);
        if (slot[h] < 0) {
            slot[h] = m->n;
            nd_rstage *s = &m->st[m->n++];
            s->name = r->name;
            s->layer = r->layer;
            for (int md = 0; md < ND_RM_NMODES; md++) s->row[md] = -1;
        }
        nd_rstage *s = &m->st[slot[h]];
        int md = nd_rmode(r->mode);
        if (md >= 0 && s->row[md] < 0) {
            s->row[md] = i;
            m->has_mode[md] = 1;
        }
    }
    free(slot);
    for (int64_t p = 0; p < m->n; p++) {
        if (t->has_summary && t->summary.first_divergence[0] && !strcmp(m->st[p].name, t->summary.first_divergence))
            m->first_pos = p;
        int32_t L = m->st[p].layer;
        if (L < 0) continue;
        if (m->nlayers && m->layer_ids[m->nlayers - 1] == L) {
            m->layer_hi[m->nlayers - 1] = p;
        } else {
            m->layer_ids[m->nlayers] = L;
            m->layer_lo[m->nlayers] = m->layer_hi[m->nlayers] = p;
            m->nlayers++;
        }
    }
    return 0;
}

void nd_rmodel_free(nd_rmodel *m) {
    free(m->st);
    free(m->layer_ids);
    free(m->layer_lo);
    free(m->layer_hi);
    memset(m, 0, sizeof *m);
}
