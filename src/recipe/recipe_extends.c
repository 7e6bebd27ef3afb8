/* recipe_extends.c — `extends:`, the stage-list edits and the `fuse:` table (recipe_extends.h). */
#include "recipe/recipe_extends.h"
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "nd_config.h"
#include "util/suggest.h"

static const char *const EDITS[] = {"insert_after", "insert_before", "replace", "remove", "set"};
enum { N_EDITS = sizeof EDITS / sizeof EDITS[0] };
static const char *const SECTIONS[] = {"prologue", "layer", "epilogue"};

#define PAIRS(n, p) for (yaml_node_pair_t *p = (n)->data.mapping.pairs.start; p < (n)->data.mapping.pairs.top; p++)
#define ITEMS(n, it) for (yaml_node_item_t *it = (n)->data.sequence.items.start; it < (n)->data.sequence.items.top; it++)

static int is_edit(const char *k) {
    for (int i = 0; i < N_EDITS; i++)
        if (!strcmp(k, EDITS[i])) return 1;
    return 0;
}

/* the value of top-level key k in file i of the chain, or NULL */
static yaml_node_t *top(const nd_rchain *c, int i, const char *k, yaml_node_t **key) {
    nd_ydoc *d = (nd_ydoc *)&c->docs[i];
    yaml_node_t *root = nd_ydoc_root(d);
    if (!root || root->type != YAML_MAPPING_NODE) return NULL;
    PAIRS(root, p) {
        const char *s = nd_ydoc_scalar(nd_ydoc_node(d, p->key));
        if (s && !strcmp(s, k)) {
            if (key) *key = nd_ydoc_node(d, p->key);
            return nd_ydoc_node(d, p->value);
        }
    }
    return NULL;
}

static int is_file(const char *p) { struct stat st; return stat(p, &st) == 0 && S_ISREG(st.st_mode); }

/* the folder of path ("." when none) */
static void dir_of(const char *path, char *out, size_t cap) {
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(out, cap, ".");
    else if (slash == path) snprintf(out, cap, "/");
    else snprintf(out, cap, "%.*s", (int)(slash - path), path);
}

/* extends: NAME -> the parent's path (see recipe_extends.h for the search) */
static int resolve_parent(const nd_ydoc *d, yaml_node_t *v, char *out, size_t cap) {
    const char *name = nd_ydoc_scalar(v);
    if (!name || !*name) return nd_ydoc_fail(d, v, "extends: must name a recipe (a name or a path)");
    char dir[1024];
    dir_of(d->path, dir, sizeof dir);
    if (strchr(name, '/') || strstr(name, ".yaml")) {
        if (name[0] == '/') snprintf(out, cap, "%s", name);
        else snprintf(out, cap, "%s/%s", dir, name);
        if (!is_file(out)) return nd_ydoc_fail(d, v, "extends: %s: no such recipe file", out);
        return 0;
    }
    const char *env = getenv("NVFP4DBG_RECIPES");
    const char *where[] = {dir, env && *env ? env : NULL, ND_INSTALL_RECIPES, ND_SOURCE_RECIPES};
    char looked[1200] = "";
    for (size_t i = 0; i < sizeof where / sizeof where[0]; i++) {
        if (!where[i]) continue;
        snprintf(out, cap, "%s/%s.yaml", where[i], name);
        if (is_file(out)) return 0;
        size_t o = strlen(looked);
        snprintf(looked + o, sizeof looked - o, "%s%s", o ? ", " : "", where[i]);
    }
    return nd_ydoc_fail(d, v, "extends: no recipe named '%s' (looked in %s)", name, looked);
}

int nd_rchain_load(nd_rchain *c, const char *path, nd_recipe *r, nd_err *e) {
    char real[ND_RECIPE_MAX_CHAIN][PATH_MAX];
    snprintf(r->files[0], sizeof r->files[0], "%s", path);
    for (int i = 0;; i++) {
        ND_TRY(nd_ydoc_load(&c->docs[i], r->files[i], "recipe", e));
        c->n = r->n_files = i + 1;
        if (!realpath(r->files[i], real[i])) snprintf(real[i], sizeof real[i], "%s", r->files[i]);
        yaml_node_t *kn = NULL, *v = top(c, i, "extends", &kn);
        if (!v) return 0;
        if (i + 1 >= ND_RECIPE_MAX_CHAIN)
            return nd_ydoc_fail(&c->docs[i], kn, "extends: more than %d recipes deep", ND_RECIPE_MAX_CHAIN - 1);
        char parent[1024];
        ND_TRY(resolve_parent(&c->docs[i], v, parent, sizeof parent));
        char rp[PATH_MAX];
        if (!realpath(parent, rp)) snprintf(rp, sizeof rp, "%s", parent);
        for (int j = 0; j <= i; j++) {
            if (strcmp(rp, real[j])) continue;
            char loop[2048] = "";
            for (int k = j; k <= i; k++) {
                size_t o = strlen(loop);
                snprintf(loop + o, sizeof loop - o, "%s -> ", r->files[k]);
            }
            size_t o = strlen(loop);
            snprintf(loop + o, sizeof loop - o, "%s", r->files[j]);
            return nd_ydoc_fail(&c->docs[i], v, "extends: a cycle (%s)", loop);
        }
        if (strlen(parent) >= sizeof r->files[0]) return nd_ydoc_fail(&c->docs[i], v, "extends: path too long");
        snprintf(r->files[i + 1], sizeof r->files[0], "%s", parent);
    }
}

void nd_rchain_free(nd_rchain *c) {
    for (int i = 0; i < c->n; i++) nd_ydoc_free(&c->docs[i]);
    c->n = 0;
}

int nd_rchain_skip(const nd_rchain *c, int index, const char *k) {
    if (is_edit(k) || !strcmp(k, "fuse") || !strcmp(k, "extends")) return 1;
    if (!strcmp(k, "recipe") || !strcmp(k, "match") || !strcmp(k, "description")) return index > 0;
    for (int j = 0; j < index; j++)
        if (top(c, j, k, NULL)) return 1;
    return 0;
}

/* ---- the stage lists ---- */

typedef struct sel {
    char name[128], when_has[160], when_missing[160];
} sel;

static nd_stage_def **sec_arr(nd_recipe *r, int s) { return s == 0 ? &r->prologue : s == 1 ? &r->layer : &r->epilogue; }
static int *sec_n(nd_recipe *r, int s) { return s == 0 ? &r->n_prologue : s == 1 ? &r->n_layer : &r->n_epilogue; }

/* Replace n_del stages at `at` of section s with ins[0..n_ins). */
static int splice(nd_recipe *r, int s, int at, int n_del, const nd_stage_def *ins, int n_ins, nd_err *e) {
    nd_stage_def **a = sec_arr(r, s);
    int *n = sec_n(r, s);
    const int m = *n - n_del + n_ins;
    nd_stage_def *b = calloc(m > 0 ? (size_t)m : 1, sizeof *b);
    if (!b) return nd_fail(e, ND_EXIT_INTERNAL, "recipe: out of memory");
    if (at) memcpy(b, *a, (size_t)at * sizeof *b);
    if (n_ins) memcpy(b + at, ins, (size_t)n_ins * sizeof *b);
    if (*n - at - n_del > 0) memcpy(b + at + n_ins, *a + at + n_del, (size_t)(*n - at - n_del) * sizeof *b);
    free(*a);
    *a = b;
    *n = m;
    return 0;
}

/* a selector: `stage: NAME` with optional when_has / when_missing (a mapping), or NAME alone */
static int read_sel(nd_rctx *y, const char *edit, yaml_node_t *n, sel *q, yaml_node_t **rest_a, yaml_node_t **rest_b,
                    const char *ka, const char *kb) {
    memset(q, 0, sizeof *q);
    if (rest_a) *rest_a = NULL;
    if (rest_b) *rest_b = NULL;
    if (n->type == YAML_SCALAR_NODE && !ka) return nd_ydoc_text(y->d, edit, n, q->name, sizeof q->name);
    if (n->type != YAML_MAPPING_NODE)
        return nd_ydoc_fail(y->d, n, "%s: expected a mapping {stage: NAME%s%s%s}", edit, ka ? ", " : "", ka ? ka : "",
                            ka ? ": ..." : "");
    PAIRS(n, p) {
        yaml_node_t *kn = nd_ydoc_node(y->d, p->key), *vn = nd_ydoc_node(y->d, p->value);
        const char *k = nd_ydoc_scalar(kn);
        if (k && !strcmp(k, "stage")) ND_TRY(nd_ydoc_text(y->d, "stage", vn, q->name, sizeof q->name));
        else if (k && !strcmp(k, "when_has")) ND_TRY(nd_ydoc_text(y->d, "when_has", vn, q->when_has, sizeof q->when_has));
        else if (k && !strcmp(k, "when_missing"))
            ND_TRY(nd_ydoc_text(y->d, "when_missing", vn, q->when_missing, sizeof q->when_missing));
        else if (k && ka && !strcmp(k, ka)) *rest_a = vn;
        else if (k && kb && !strcmp(k, kb)) *rest_b = vn;
        else
            return nd_ydoc_fail(y->d, kn, "%s: unknown key '%s' (known: stage, when_has, when_missing%s%s%s%s)", edit,
                                k ? k : "?", ka ? ", " : "", ka ? ka : "", kb ? ", " : "", kb ? kb : "");
    }
    if (!q->name[0]) return nd_ydoc_fail(y->d, n, "%s: names no stage (stage: NAME)", edit);
    if (ka && !*rest_a && !(kb && *rest_b)) return nd_ydoc_fail(y->d, n, "%s: needs '%s'", edit, ka);
    return 0;
}

/* 1 when a stage section is written by a file nearer than `index` (it replaces what this file edits) */
static int replaced_later(const nd_rchain *c, int index) {
    for (int s = 0; s < 3; s++)
        for (int j = 0; j < index; j++)
            if (top(c, j, SECTIONS[s], NULL)) return 1;
    return 0;
}

/* The one stage q names: 0 and (*sec, *at); 1 when none and a nearer file replaces the lists (the edit
 * has nothing left to do); 2 with the message otherwise. */
static int find(nd_rctx *y, nd_recipe *r, const char *edit, yaml_node_t *at_node, const sel *q, int *sec, int *at) {
    int hits = 0;
    const char *cands[512];
    int nc = 0;
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < *sec_n(r, s); i++) {
            const nd_stage_def *d = &(*sec_arr(r, s))[i];
            if (nc < 512) cands[nc++] = d->name;
            if (strcmp(d->name, q->name) || (q->when_has[0] && strcmp(d->when_has, q->when_has)) ||
                (q->when_missing[0] && strcmp(d->when_missing, q->when_missing)))
                continue;
            if (!hits++) { *sec = s; *at = i; }
        }
    if (hits == 1) return 0;
    if (hits > 1)
        return nd_ydoc_fail(y->d, at_node, "%s: stage '%s' names %d stages; add when_has: or when_missing: to pick one",
                            edit, q->name, hits);
    if (replaced_later(y->chain, y->index)) return 1;
    const char *best = nd_suggest(q->name, cands, (size_t)nc);
    return nd_ydoc_fail(y->d, at_node, "%s: no stage '%s'%s in the recipes this one extends%s%s%s", edit, q->name,
                        q->when_has[0] || q->when_missing[0] ? " with that when_has/when_missing" : "",
                        best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
}

/* a stage or a list of stages (as in a section) */
static int read_stages(nd_rctx *y, const char *edit, yaml_node_t *n, nd_stage_def **out, int *count) {
    *out = NULL;
    *count = 0;
    if (n->type == YAML_MAPPING_NODE) {
        *out = calloc(1, sizeof **out);
        if (!*out) return nd_fail(y->e, ND_EXIT_INTERNAL, "recipe: out of memory");
        *count = 1;
        return nd_recipe_parse_stage(y, n, *out);
    }
    if (n->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(y->d, n, "%s: expected a stage or a list of stages", edit);
    const int cap = (int)(n->data.sequence.items.top - n->data.sequence.items.start);
    *out = calloc(cap ? (size_t)cap : 1, sizeof **out);
    if (!*out) return nd_fail(y->e, ND_EXIT_INTERNAL, "recipe: out of memory");
    ITEMS(n, it) ND_TRY(nd_recipe_parse_stage(y, nd_ydoc_node(y->d, *it), &(*out)[(*count)++]));
    return 0;
}

static int one_edit(nd_rctx *y, nd_recipe *r, const char *edit, yaml_node_t *n) {
    sel q;
    int s = 0, at = 0, rc;
    if (!strcmp(edit, "remove")) {
        ND_TRY(read_sel(y, edit, n, &q, NULL, NULL, NULL, NULL));
        if ((rc = find(y, r, edit, n, &q, &s, &at))) return rc == 1 ? 0 : rc;
        return splice(r, s, at, 1, NULL, 0, y->e);
    }
    if (!strcmp(edit, "set")) {
        yaml_node_t *attrs;
        ND_TRY(read_sel(y, edit, n, &q, &attrs, NULL, "attrs", NULL));
        if ((rc = find(y, r, edit, n, &q, &s, &at))) return rc == 1 ? 0 : rc;
        if (attrs->type != YAML_MAPPING_NODE) return nd_ydoc_fail(y->d, attrs, "set: attrs must be a mapping");
        nd_stage_def *d = &(*sec_arr(r, s))[at];
        PAIRS(attrs, p) {
            yaml_node_t *kn = nd_ydoc_node(y->d, p->key);
            const char *k = nd_ydoc_scalar(kn);
            if (k && !strcmp(k, "stage")) return nd_ydoc_fail(y->d, kn, "set: a stage's name is not an attribute (replace it)");
            ND_TRY(nd_recipe_stage_key(y, d, kn, nd_ydoc_node(y->d, p->value)));
        }
        return 0;
    }
    const int replace = !strcmp(edit, "replace");
    yaml_node_t *list;
    ND_TRY(read_sel(y, edit, n, &q, &list, NULL, replace ? "with" : "stages", NULL));
    if ((rc = find(y, r, edit, n, &q, &s, &at))) return rc == 1 ? 0 : rc;
    nd_stage_def *ins;
    int n_ins;
    rc = read_stages(y, edit, list, &ins, &n_ins);
    if (!rc) rc = splice(r, s, replace || !strcmp(edit, "insert_before") ? at : at + 1, replace, ins, n_ins, y->e);
    free(ins);
    return rc;
}

static int read_fuse(nd_rctx *y, nd_rchain *c, yaml_node_t *v) {
    if (v->type != YAML_MAPPING_NODE)
        return nd_ydoc_fail(y->d, v, "fuse: must be a mapping of names to module lists ({qkv: [q_proj, k_proj, v_proj]})");
    PAIRS(v, p) {
        yaml_node_t *kn = nd_ydoc_node(y->d, p->key), *vn = nd_ydoc_node(y->d, p->value);
        nd_fuse f;
        memset(&f, 0, sizeof f);
        ND_TRY(nd_ydoc_text(y->d, "fuse name", kn, f.name, sizeof f.name));
        if (strchr(f.name, '.') || strchr(f.name, ','))
            return nd_ydoc_fail(y->d, kn, "fuse: name '%s' must not hold '.' or ','", f.name);
        if (vn->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(y->d, vn, "fuse: %s must be a list of modules", f.name);
        ITEMS(vn, it) {
            yaml_node_t *m = nd_ydoc_node(y->d, *it);
            if (f.n_member >= ND_FUSE_MAX_MEMBERS) return nd_ydoc_fail(y->d, m, "fuse: %s: too many modules", f.name);
            ND_TRY(nd_ydoc_text(y->d, "fuse module", m, f.member[f.n_member], sizeof f.member[0]));
            f.n_member++;
        }
        if (f.n_member < 2) return nd_ydoc_fail(y->d, vn, "fuse: %s must list at least two modules", f.name);
        int i = 0;
        while (i < c->n_fuse && strcmp(c->fuse[i].name, f.name)) i++;   /* a child's entry replaces its parent's */
        if (i == ND_FUSE_MAX) return nd_ydoc_fail(y->d, kn, "fuse: too many entries (at most %d)", ND_FUSE_MAX);
        c->fuse[i] = f;
        if (i == c->n_fuse) c->n_fuse++;
    }
    return 0;
}

int nd_rchain_edit(nd_rchain *c, int index, nd_recipe *r, nd_err *e) {
    nd_ydoc *d = &c->docs[index];
    nd_rctx y = {&d->doc, r->files[index], e, d, index, c};
    yaml_node_t *root = nd_ydoc_root(d);
    if (!root || root->type != YAML_MAPPING_NODE) return 0;   /* parse_root said so */
    PAIRS(root, p) {
        const char *k = nd_ydoc_scalar(nd_ydoc_node(d, p->key));
        yaml_node_t *v = nd_ydoc_node(d, p->value);
        if (!k) continue;
        if (!strcmp(k, "fuse")) { ND_TRY(read_fuse(&y, c, v)); continue; }
        if (!is_edit(k)) continue;
        if (index == c->n - 1)
            return nd_ydoc_fail(d, nd_ydoc_node(d, p->key), "%s: edits the stages of the recipe it extends, and this one "
                                "extends none (add extends: NAME)", k);
        if (v->type == YAML_SEQUENCE_NODE) {
            ITEMS(v, it) ND_TRY(one_edit(&y, r, k, nd_ydoc_node(d, *it)));
        } else {
            ND_TRY(one_edit(&y, r, k, v));
        }
    }
    return 0;
}

/* `fused: NAME` -> the member modules under the stage module's parent, comma-separated */
int nd_rchain_fuse(const nd_rchain *c, nd_recipe *r, nd_err *e) {
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < *sec_n(r, s); i++) {
            nd_stage_def *d = &(*sec_arr(r, s))[i];
            nd_attr *a = NULL;
            for (int j = 0; j < d->n_attrs && !a; j++)
                if (!strcmp(d->attrs[j].key, "fused")) a = &d->attrs[j];
            if (!a || strchr(a->value, ',') || strchr(a->value, '.')) continue;   /* a list written out */
            const char *file = a->file ? a->file : nd_stage_file(r, d);
            const int line = a->file ? a->line : d->line;
            const nd_fuse *f = NULL;
            for (int j = 0; j < c->n_fuse && !f; j++)
                if (!strcmp(c->fuse[j].name, a->value)) f = &c->fuse[j];
            if (!f) {
                char known[512] = "";
                for (int j = 0; j < c->n_fuse; j++) {
                    size_t o = strlen(known);
                    snprintf(known + o, sizeof known - o, "%s%s", j ? ", " : "", c->fuse[j].name);
                }
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: fused: '%s' is no entry of the recipe's fuse: table "
                               "(%s%s)", file, line, d->name, a->value, c->n_fuse ? "known: " : "none given",
                               known);
            }
            const char *dot = strrchr(d->module, '.');
            char list[sizeof a->value];
            size_t o = 0;
            int own = 0;
            for (int j = 0; j < f->n_member; j++) {
                char full[256];
                /* a template with a '.' is taken whole; a bare name is a sibling of the stage's module */
                if (strchr(f->member[j], '.') || !dot) snprintf(full, sizeof full, "%s", f->member[j]);
                else snprintf(full, sizeof full, "%.*s.%s", (int)(dot - d->module), d->module, f->member[j]);
                own |= !strcmp(full, d->module);
                int w = snprintf(list + o, sizeof list - o, "%s%s", j ? "," : "", full);
                if (w < 0 || (size_t)w >= sizeof list - o)
                    return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: fused: '%s' expands to more than %zu characters",
                                   file, line, d->name, a->value, sizeof list - 1);
                o += (size_t)w;
            }
            if (!own)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: fused: '%s' (%s) does not hold the stage's own module %s",
                               file, line, d->name, a->value, list, d->module[0] ? d->module : "(none)");
            memcpy(a->value, list, o + 1);
        }
    return 0;
}
