/* report_model.c — the stage axis: rows come in execution order with one row per (stage, mode);
 * every distinct stage name gets one x position so both modes share the charts' x axis. */
#include <math.h>
#include <stdio.h>
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

int nd_ris_first(const nd_trace *t, const nd_row *r) {
    return t->has_summary && t->summary.first_divergence[0] && !strcmp(r->name, t->summary.first_divergence) &&
           !strcmp(r->mode, t->summary.first_divergence_mode);
}

int nd_rall_zero(const nd_row *r) {
    return r->ref_amax == 0 && r->prod_amax == 0 && r->ref_nan + r->ref_inf + r->prod_nan + r->prod_inf == 0;
}

static double shortfall(const nd_row *r) {
    if (isfinite(r->sqnr_db) && isfinite(r->floor_sqnr_db)) return r->floor_sqnr_db - r->sqnr_db;
    return isfinite(r->cosine) ? 1 - r->cosine : INFINITY;
}

int nd_rworse(const nd_row *a, const nd_row *b) {
    int abad = nd_verdict_bad(a->verdict), bbad = nd_verdict_bad(b->verdict);
    if (abad != bbad) return abad;
    int az = nd_rall_zero(a), bz = nd_rall_zero(b);
    if (az != bz) return bz;
    int aiso = !strcmp(a->mode, "isolated"), biso = !strcmp(b->mode, "isolated");
    if (aiso != biso) return aiso;
    return shortfall(a) > shortfall(b);
}

/* Groups: "in" (layer -1 stages before the first layer's stages), one per distinct layer in order
 * of first appearance, "head" (layer -1 stages after). A row's group follows its stage's position,
 * so traces whose modes come in separate passes group the same way. */
static int build_groups(const nd_trace *t, nd_rmodel *m, const int64_t *row_pos, nd_err *e) {
    int cap = m->nlayers + 2;
    m->groups = calloc((size_t)cap, sizeof *m->groups);
    m->row_group = malloc((size_t)(t->nrows > 0 ? t->nrows : 1) * sizeof *m->row_group);
    int *pos_group = malloc((size_t)(m->n > 0 ? m->n : 1) * sizeof *pos_group);
    if (!m->groups || !m->row_group || !pos_group) {
        free(pos_group);
        return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %d layers", m->nlayers);
    }
    int64_t first_layer_pos = m->nlayers ? m->layer_lo[0] : m->n;
    int g_in = -1, g_head = -1;
    /* layer -> group by open addressing: a lookup per stage stays O(1) however many layers a trace
     * (or a hostile file) holds */
    size_t hcap = 16;
    while (hcap < 2 * (size_t)cap) hcap <<= 1;
    int *hslot = malloc(hcap * sizeof *hslot);
    if (!hslot) {
        free(pos_group);
        return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %d layers", m->nlayers);
    }
    for (size_t i = 0; i < hcap; i++) hslot[i] = -1;
    for (int64_t p = 0; p < m->n; p++) {
        int32_t L = m->st[p].layer;
        int g = -1;
        size_t h = 0;
        if (L >= 0) {
            h = ((size_t)(uint32_t)L * 2654435761u) & (hcap - 1);
            while (hslot[h] >= 0 && m->groups[hslot[h]].layer != L) h = (h + 1) & (hcap - 1);
            g = hslot[h];
        } else {
            g = p < first_layer_pos ? g_in : g_head;
        }
        if (g < 0) {
            g = m->ngroups++;
            nd_rgroup *G = &m->groups[g];
            G->layer = L;
            G->worst = -1;
            if (L >= 0) hslot[h] = g;
            if (L >= 0) {
                snprintf(G->label, sizeof G->label, "%d", (int)L);
                snprintf(G->id, sizeof G->id, "layer-%d", (int)L);
            } else if (p < first_layer_pos) {
                snprintf(G->label, sizeof G->label, "in");
                snprintf(G->id, sizeof G->id, "layer-in");
                g_in = g;
            } else {
                snprintf(G->label, sizeof G->label, "head");
                snprintf(G->id, sizeof G->id, "layer-head");
                g_head = g;
            }
        }
        pos_group[p] = g;
    }
    for (int64_t i = 0; i < t->nrows; i++) {
        const nd_row *r = &t->rows[i];
        int g = pos_group[row_pos[i]];
        nd_rgroup *G = &m->groups[g];
        m->row_group[i] = g;
        G->nrows++;
        G->nbad += nd_verdict_bad(r->verdict);
        if (r->prod_nan + r->prod_inf > G->max_nonfinite) G->max_nonfinite = r->prod_nan + r->prod_inf;
        if (nd_ris_first(t, r)) {
            G->has_first = 1;
            G->worst = i;
        } else if (!G->has_first && (G->worst < 0 || nd_rworse(r, &t->rows[G->worst]))) {
            G->worst = i;
        }
    }
    free(pos_group);
    free(hslot);
    /* the rows of each group in trace order (a counting sort), so that writing a group's rows
     * never scans the whole trace once per group */
    m->group_off = calloc((size_t)m->ngroups + 1, sizeof *m->group_off);
    m->group_rows = malloc((size_t)(t->nrows > 0 ? t->nrows : 1) * sizeof *m->group_rows);
    if (!m->group_off || !m->group_rows) return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %lld rows", (long long)t->nrows);
    for (int64_t i = 0; i < t->nrows; i++) m->group_off[m->row_group[i] + 1]++;
    for (int g = 0; g < m->ngroups; g++) m->group_off[g + 1] += m->group_off[g];
    int64_t *fill = malloc((size_t)(m->ngroups > 0 ? m->ngroups : 1) * sizeof *fill);
    if (!fill) return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %d groups", m->ngroups);
    for (int g = 0; g < m->ngroups; g++) fill[g] = m->group_off[g];
    for (int64_t i = 0; i < t->nrows; i++) m->group_rows[fill[m->row_group[i]]++] = i;
    free(fill);
    return 0;
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
    int64_t *row_pos = malloc((size_t)cap * sizeof *row_pos);   /* stage position of each row */
    if (!row_pos) {
        free(slot);
        nd_rmodel_free(m);
        return nd_fail(e, ND_EXIT_INTERNAL, "report: out of memory for %lld stages", (long long)t->nrows);
    }
    for (int64_t i = 0; i < t->nrows; i++) {
        const char *nm = t->rows[i].name;
        size_t h = (size_t)(hash_name(nm) & (nslots - 1));
        while (strcmp(m->st[slot[h]].name, nm)) h = (h + 1) & (nslots - 1);
        row_pos[i] = slot[h];
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
    int rc = build_groups(t, m, row_pos, e);
    free(row_pos);
    if (rc) nd_rmodel_free(m);
    return rc;
}

void nd_rmodel_free(nd_rmodel *m) {
    free(m->groups);
    free(m->row_group);
    free(m->group_rows);
    free(m->group_off);
    free(m->st);
    free(m->layer_ids);
    free(m->layer_lo);
    free(m->layer_hi);
    memset(m, 0, sizeof *m);
}
