/* trace_tolerances.c — the tolerances of `nvfp4dbg compare`: built-in defaults and the YAML file
 * that overrides them (layout in recipes/tolerances.yaml, which documents the same defaults). */
#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "recipe/yaml_doc.h"

#include "trace/trace.h"
#include "util/infile.h"

static const struct { const char *name; size_t off; nd_tol def; } figs[ND_NFIG] = {
    {"cosine", offsetof(nd_row, cosine), {1e-4, 0}},
    {"rel_l2", offsetof(nd_row, rel_l2), {1e-4, 2e-2}},
    {"sqnr_db", offsetof(nd_row, sqnr_db), {0.2, 0}},
    {"max_abs_err", offsetof(nd_row, max_abs_err), {1e-6, 0.1}},
    {"ref_amax", offsetof(nd_row, ref_amax), {1e-6, 1e-2}},
    {"prod_amax", offsetof(nd_row, prod_amax), {1e-6, 1e-2}},
    {"sat_frac", offsetof(nd_row, sat_frac), {1e-3, 0}},
    {"zero_block_frac", offsetof(nd_row, zero_block_frac), {1e-3, 0}},
    {"scale_ratio", offsetof(nd_row, scale_ratio), {0, 1e-2}},
    {"weight_rel_l2", offsetof(nd_row, weight_rel_l2), {1e-6, 1e-3}},
    {"topk_agree", offsetof(nd_row, topk_agree), {0.02, 0}},
    {"top1_agree", offsetof(nd_row, top1_agree), {0.02, 0}},
    {"kl_div", offsetof(nd_row, kl_div), {1e-4, 0.05}},
};

const char *nd_figure_name(int fig) { return fig >= 0 && fig < ND_NFIG ? figs[fig].name : "?"; }

int nd_figure_index(const char *name) {
    for (int i = 0; i < ND_NFIG; i++)
        if (!strcmp(figs[i].name, name)) return i;
    return -1;
}

double nd_figure_value(const nd_row *r, int fig) { return *(const double *)((const char *)r + figs[fig].off); }

void nd_tolerances_default(nd_tolerances *t) {
    memset(t, 0, sizeof *t);
    for (int i = 0; i < ND_NFIG; i++) t->def[i] = figs[i].def;
}

void nd_tolerances_free(nd_tolerances *t) {
    free(t->rules);
    t->rules = NULL;
    t->nrules = 0;
}

static void apply(nd_tol *out, const nd_tol_rule *r, int fig) {
    if (r->has_abs[fig]) out->abs = r->tol[fig].abs;
    if (r->has_rel[fig]) out->rel = r->tol[fig].rel;
}

nd_tol nd_tolerance_for_ex(const nd_tolerances *t, const char *stage, const char *op, int fig, unsigned char *used) {
    nd_tol out = t->def[fig];
    for (int pass = 1; pass >= 0; pass--) /* op rules first, then stage patterns */
        for (int i = 0; i < t->nrules; i++) {
            const nd_tol_rule *r = &t->rules[i];
            if (r->is_op != pass) continue;
            if (pass ? !strcmp(r->key, op) : fnmatch(r->key, stage, 0) == 0) {
                apply(&out, r, fig);
                if (used) used[i] = 1;
            }
        }
    return out;
}

nd_tol nd_tolerance_for(const nd_tolerances *t, const char *stage, const char *op, int fig) {
    return nd_tolerance_for_ex(t, stage, op, fig, NULL);
}

/* ---- YAML (src/recipe/yaml_doc.h: the typed reader of every YAML file) ---- */
typedef struct ctx { nd_ydoc *d; } ctx;

static int bad(ctx *c, const yaml_node_t *n, const char *what, const char *detail) {
    return nd_ydoc_fail(c->d, n, "%s%s%s", what, detail ? " " : "", detail ? detail : "");
}

static const char *scalar(const yaml_node_t *n) { return nd_ydoc_scalar(n); }
static yaml_node_t *node(ctx *c, int id) { return nd_ydoc_node(c->d, id); }

/* figure: {abs: X, rel: Y} (either key may be left out); each a finite number >= 0 */
static int figure_entry(ctx *c, const yaml_node_t *key, const yaml_node_t *val, nd_tol_rule *r) {
    const char *name = scalar(key);
    int fig = name ? nd_figure_index(name) : -1;
    if (fig < 0) return bad(c, key, "unknown figure", name ? name : "(not a name)");
    if (val->type != YAML_MAPPING_NODE) return bad(c, val, "expected {abs: X, rel: Y} for", name);
    for (yaml_node_pair_t *p = val->data.mapping.pairs.start; p < val->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        const char *ks = scalar(k);
        char key_name[96];
        snprintf(key_name, sizeof key_name, "%s.%s", name, ks ? ks : "?");
        if (ks && !strcmp(ks, "abs")) { ND_TRY(nd_ydoc_number(c->d, key_name, v, 0, HUGE_VAL, &r->tol[fig].abs)); r->has_abs[fig] = 1; }
        else if (ks && !strcmp(ks, "rel")) { ND_TRY(nd_ydoc_number(c->d, key_name, v, 0, HUGE_VAL, &r->tol[fig].rel)); r->has_rel[fig] = 1; }
        else return bad(c, k, "expected abs or rel, got", ks ? ks : "(not a name)");
    }
    return 0;
}

/* a mapping of figures; `skip` names one extra key that belongs to the caller (match) */
static int figure_map(ctx *c, const yaml_node_t *m, nd_tol_rule *r, const char *skip) {
    if (m->type != YAML_MAPPING_NODE) return bad(c, m, "expected a mapping of figures", NULL);
    for (yaml_node_pair_t *p = m->data.mapping.pairs.start; p < m->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        if (skip && scalar(k) && !strcmp(scalar(k), skip)) continue;
        ND_TRY(figure_entry(c, k, v, r));
    }
    return 0;
}

static nd_tol_rule *new_rule(ctx *c, nd_tolerances *t, const yaml_node_t *at) {
    nd_tol_rule *nr = realloc(t->rules, (size_t)(t->nrules + 1) * sizeof *nr);
    if (!nr) {
        bad(c, at, "out of memory", NULL);
        return NULL;
    }
    t->rules = nr;
    memset(&nr[t->nrules], 0, sizeof *nr);
    nr[t->nrules].line = (int)at->start_mark.line + 1;
    return &nr[t->nrules++];
}

static int set_key(ctx *c, nd_tol_rule *r, const yaml_node_t *n) {
    const char *s = scalar(n);
    if (!s || !s[0]) return bad(c, n, "expected a non-empty name", NULL);
    /* a plain ~ or null is YAML's null, not a pattern: it would match no stage and gate nothing */
    if (n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
        (!strcmp(s, "~") || !strcmp(s, "null") || !strcmp(s, "Null") || !strcmp(s, "NULL")))
        return bad(c, n, "expected a name or a pattern, not null", NULL);
    return nd_ydoc_text(c->d, "the name", n, r->key, sizeof r->key);
}

static int load_root(ctx *c, const yaml_node_t *root, nd_tolerances *t) {
    if (!root) return 0; /* an empty file: the defaults */
    if (root->type != YAML_MAPPING_NODE) return bad(c, root, "expected a mapping with default, op, stages", NULL);
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *k = node(c, p->key), *v = node(c, p->value);
        const char *ks = scalar(k);
        if (ks && !strcmp(ks, "default")) {
            nd_tol_rule r = {0};
            ND_TRY(figure_map(c, v, &r, NULL));
            for (int f = 0; f < ND_NFIG; f++) apply(&t->def[f], &r, f);
        } else if (ks && !strcmp(ks, "op")) {
            if (v->type != YAML_MAPPING_NODE) return bad(c, v, "expected a mapping of op kinds", NULL);
            for (yaml_node_pair_t *q = v->data.mapping.pairs.start; q < v->data.mapping.pairs.top; q++) {
                yaml_node_t *ok = node(c, q->key), *ov = node(c, q->value);
                nd_tol_rule *r = new_rule(c, t, ok);
                if (!r) return ND_EXIT_INTERNAL;
                r->is_op = 1;
                ND_TRY(set_key(c, r, ok));
                ND_TRY(figure_map(c, ov, r, NULL));
            }
        } else if (ks && !strcmp(ks, "stages")) {
            if (v->type != YAML_SEQUENCE_NODE) return bad(c, v, "expected a list of {match: PATTERN, ...}", NULL);
            for (yaml_node_item_t *it = v->data.sequence.items.start; it < v->data.sequence.items.top; it++) {
                yaml_node_t *m = node(c, *it);
                if (m->type != YAML_MAPPING_NODE) return bad(c, m, "expected {match: PATTERN, ...}", NULL);
                const yaml_node_t *pat = NULL;
                for (yaml_node_pair_t *q = m->data.mapping.pairs.start; q < m->data.mapping.pairs.top; q++)
                    if (scalar(node(c, q->key)) && !strcmp(scalar(node(c, q->key)), "match")) pat = node(c, q->value);
                if (!pat) return bad(c, m, "stage rule without match: PATTERN", NULL);
                nd_tol_rule *r = new_rule(c, t, m);
                if (!r) return ND_EXIT_INTERNAL;
                ND_TRY(set_key(c, r, pat));
                ND_TRY(figure_map(c, m, r, "match"));
            }
        } else {
            return bad(c, k, "unknown key (expected default, op or stages):", ks ? ks : "(not a name)");
        }
    }
    return 0;
}

int nd_tolerances_load(const char *path, nd_tolerances *t, nd_err *e) {
    nd_tolerances_default(t);
    nd_ydoc d;
    ND_TRY(nd_ydoc_load(&d, path, "tolerance file", e));
    ctx c = {&d};
    int rc = load_root(&c, nd_ydoc_root(&d), t);
    nd_ydoc_free(&d);
    if (rc) nd_tolerances_free(t);
    return rc;
}
