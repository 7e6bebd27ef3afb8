/* recipe.c — recipes/<name>.yaml -> nd_recipe (libyaml document API). */
#include "recipe.h"
#include <yaml.h>
#include "recipe/yaml_doc.h"
#include "recipe/recipe_synth.h"
#include "recipe/recipe_extends.h"
#include "util/infile.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include "nd_config.h"
#include "util/infile.h"
#include "util/suggest.h"

/* the document is read through src/recipe/yaml_doc.h, the typed reader of every YAML file; one
 * file of the chain of recipes it extends at a time (recipe_extends.h) */
typedef nd_rctx yctx;

static yaml_node_t *node(yctx *y, int id) { return yaml_document_get_node(y->doc, id); }
static const char *scalar(yaml_node_t *n) {
    return (n && n->type == YAML_SCALAR_NODE) ? (const char *)n->data.scalar.value : NULL;
}
static int line_of(yaml_node_t *n) { return n ? (int)n->start_mark.line + 1 : 0; }

static int bad(yctx *y, yaml_node_t *n, const char *what) {
    return nd_fail(y->e, ND_EXIT_BADINPUT, "%s:%d: %s", y->path, line_of(n), what);
}

static int copy_str(yctx *y, yaml_node_t *n, char *dst, size_t cap, const char *key) {
    const char *s = scalar(n);
    char msg[160];
    if (!s) { snprintf(msg, sizeof msg, "'%s' must be a string", key); return bad(y, n, msg); }
    if (strlen(s) >= cap) { snprintf(msg, sizeof msg, "'%s' is too long (max %zu)", key, cap - 1); return bad(y, n, msg); }
    /* names reach the trace's header line and the terminal: no control characters */
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p < 0x20 || *p == 0x7f || (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f)) {
            snprintf(msg, sizeof msg, "'%s' holds a control character", key);
            return bad(y, n, msg);
        }
    memcpy(dst, s, strlen(s) + 1);
    return 0;
}

/* A string or a list of strings into a fixed array. */
static int copy_list(yctx *y, yaml_node_t *n, char (*dst)[32], int cap, int *count, const char *key) {
    *count = 0;
    if (n->type == YAML_SCALAR_NODE) { *count = 1; return copy_str(y, n, dst[0], 32, key); }
    if (n->type != YAML_SEQUENCE_NODE) return bad(y, n, "expected a string or a list of strings");
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++) {
        if (*count >= cap) return bad(y, n, "too many entries");
        ND_TRY(copy_str(y, node(y, *it), dst[*count], 32, key));
        (*count)++;
    }
    return 0;
}

int nd_recipe_stage_key(yctx *y, nd_stage_def *s, yaml_node_t *kn, yaml_node_t *vn) {
    const char *k = scalar(kn);
    if (!k) return bad(y, kn, "stage keys must be strings");
    if (!strcmp(k, "stage")) {
        ND_TRY(copy_str(y, vn, s->name, sizeof s->name, k));
        /* a stage name is printed and pasted: no control bytes in it */
        for (const unsigned char *p = (const unsigned char *)s->name; *p; p++)
            if (*p < 0x20 || *p == 0x7f) return bad(y, vn, "a stage name holds a control character");
        /* expanded ({L}, {E}: up to 7 digits each) it must fit the trace's name field, which would
         * cut it (a name then not found, or two stages run into one) */
        size_t len = strlen(s->name);
        for (const char *p = s->name; (p = strstr(p, "{")); p++)
            if (!strncmp(p, "{L}", 3) || !strncmp(p, "{E}", 3)) len += 4;
        if (len > ND_STAGE_NAME_MAX) {
            char what[160];
            snprintf(what, sizeof what, "a stage name of %zu characters (with {L}/{E} expanded to 7 digits): at most %d", len,
                     ND_STAGE_NAME_MAX);
            return bad(y, vn, what);
        }
        return 0;
    }
    if (!strcmp(k, "op")) return copy_str(y, vn, s->op, sizeof s->op, k);
    if (!strcmp(k, "module")) return copy_str(y, vn, s->module, sizeof s->module, k);
    if (!strcmp(k, "when_has")) return copy_str(y, vn, s->when_has, sizeof s->when_has, k);
    if (!strcmp(k, "when_missing")) return copy_str(y, vn, s->when_missing, sizeof s->when_missing, k);
    if (!strcmp(k, "when_config")) return copy_str(y, vn, s->when_config, sizeof s->when_config, k);
    if (!strcmp(k, "in")) return copy_list(y, vn, s->in, ND_RECIPE_MAX_IO, &s->n_in, k);
    if (!strcmp(k, "out")) return copy_list(y, vn, s->out, ND_RECIPE_MAX_IO, &s->n_out, k);
    /* everything else is an op attribute; one given again (an inherited stage's `set:`) replaces it */
    nd_attr *a = NULL;
    for (int i = 0; i < s->n_attrs && !a; i++)
        if (!strcmp(s->attrs[i].key, k)) a = &s->attrs[i];
    if (!a) {
        if (s->n_attrs >= ND_RECIPE_MAX_ATTRS) return bad(y, kn, "too many attributes");
        if (strlen(k) >= sizeof a->key) return bad(y, kn, "attribute name too long");
        a = &s->attrs[s->n_attrs++];
        strcpy(a->key, k);
    }
    a->file = y->path;
    a->line = line_of(kn);
    return copy_str(y, vn, a->value, sizeof a->value, k);
}

int nd_recipe_parse_stage(yctx *y, yaml_node_t *n, nd_stage_def *s) {
    memset(s, 0, sizeof *s);
    s->line = line_of(n);
    s->file = y->path;
    if (n->type != YAML_MAPPING_NODE) return bad(y, n, "a stage must be a mapping");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++)
        ND_TRY(nd_recipe_stage_key(y, s, node(y, p->key), node(y, p->value)));
    /* written with the stage: messages name the stage's line (only a later `set:` gives its own) */
    for (int i = 0; i < s->n_attrs; i++) s->attrs[i].file = NULL, s->attrs[i].line = 0;
    if (!s->name[0]) return bad(y, n, "stage without 'stage' name");
    if (!s->op[0]) return bad(y, n, "stage without 'op'");
    if (!s->n_out) return bad(y, n, "stage without 'out'");
    return 0;
}

static int parse_stages(yctx *y, yaml_node_t *n, nd_stage_def **out, int *count) {
    if (n->type != YAML_SEQUENCE_NODE) return bad(y, n, "a stage section must be a list");
    /* YAML allows a repeated key; a second section would leak the first and hide its stages */
    if (*out) return bad(y, n, "stage section given twice");
    const long len = (long)(n->data.sequence.items.top - n->data.sequence.items.start);
    /* a real section holds tens of stages; each definition is a few KB, so a list grown by
     * aliases or by hand must not decide how much memory the tool takes */
    if (len > ND_RECIPE_MAX_STAGES) {
        char msg[96];
        snprintf(msg, sizeof msg, "a stage section of %ld stages (at most %d)", len, ND_RECIPE_MAX_STAGES);
        return bad(y, n, msg);
    }
    int cap = (int)len;
    *out = calloc(cap ? (size_t)cap : 1, sizeof **out);
    if (!*out) return nd_fail(y->e, ND_EXIT_INTERNAL, "%s: out of memory", y->path);
    *count = 0;
    for (yaml_node_item_t *it = n->data.sequence.items.start; it < n->data.sequence.items.top; it++)
        ND_TRY(nd_recipe_parse_stage(y, node(y, *it), &(*out)[(*count)++]));
    return 0;
}

static int parse_thresholds(yctx *y, yaml_node_t *n, nd_thresholds *t) {
    if (n->type != YAML_MAPPING_NODE) return bad(y, n, "'thresholds' must be a mapping");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(y, p->key));
        yaml_node_t *vn = node(y, p->value);
        if (!k) return bad(y, node(y, p->key), "threshold keys must be strings");
        /* cosines in [-1, 1], decibels within +-400 (a double's SQNR range) */
        if (!strcmp(k, "min_cosine")) ND_TRY(nd_ydoc_number(y->d, "thresholds.min_cosine", vn, -1, 1, &t->min_cosine));
        else if (!strcmp(k, "min_sqnr_db")) ND_TRY(nd_ydoc_number(y->d, "thresholds.min_sqnr_db", vn, -400, 400, &t->min_sqnr_db));
        else if (!strcmp(k, "floor_margin_db")) ND_TRY(nd_ydoc_number(y->d, "thresholds.floor_margin_db", vn, 0, 400, &t->floor_margin_db));
        else if (!strcmp(k, "chained_min_cosine")) ND_TRY(nd_ydoc_number(y->d, "thresholds.chained_min_cosine", vn, -1, 1, &t->chained_min_cosine));
        else return bad(y, vn, "unknown threshold (known: min_cosine, min_sqnr_db, floor_margin_db, chained_min_cosine)");
    }
    return 0;
}

static int parse_naming(yctx *y, yaml_node_t *kn, yaml_node_t *n, nd_naming *nm) {
    memset(nm, 0, sizeof *nm);
    ND_TRY(copy_str(y, kn, nm->name, sizeof nm->name, "naming"));
    if (n->type != YAML_MAPPING_NODE) return bad(y, n, "a naming must be a mapping with 'detect' and 'rename'");
    for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
        const char *k = scalar(node(y, p->key));
        yaml_node_t *vn = node(y, p->value);
        if (k && !strcmp(k, "detect")) ND_TRY(copy_str(y, vn, nm->detect, sizeof nm->detect, k));
        else if (k && !strcmp(k, "rename")) {
            if (vn->type != YAML_SEQUENCE_NODE) return bad(y, vn, "'rename' must be a list of [canonical, on-disk] pairs");
            for (yaml_node_item_t *it = vn->data.sequence.items.start; it < vn->data.sequence.items.top; it++) {
                yaml_node_t *pair = node(y, *it);
                if (pair->type != YAML_SEQUENCE_NODE || pair->data.sequence.items.top - pair->data.sequence.items.start != 2)
                    return bad(y, pair, "each rename entry must be [canonical, on-disk]");
                if (nm->n_rename >= ND_RECIPE_MAX_RENAME) return bad(y, pair, "too many rename entries");
                ND_TRY(copy_str(y, node(y, pair->data.sequence.items.start[0]), nm->from[nm->n_rename], 128, "rename"));
                ND_TRY(copy_str(y, node(y, pair->data.sequence.items.start[1]), nm->to[nm->n_rename], 128, "rename"));
                nm->n_rename++;
            }
        } else return bad(y, vn, "unknown naming key (known: detect, rename)");
    }
    return 0;
}

static int parse_root(yctx *y, nd_recipe *r) {
    yaml_node_t *root = yaml_document_get_root_node(y->doc);
    if (!root || root->type != YAML_MAPPING_NODE) return bad(y, root, "a recipe must be a YAML mapping");
    for (yaml_node_pair_t *p = root->data.mapping.pairs.start; p < root->data.mapping.pairs.top; p++) {
        yaml_node_t *kn = node(y, p->key), *vn = node(y, p->value);
        const char *k = scalar(kn);
        if (!k) return bad(y, kn, "top-level keys must be strings");
        /* extends, the edits and fuse (recipe_extends.c); a section a nearer file writes */
        if (nd_rchain_skip(y->chain, y->index, k)) continue;
        if (!strcmp(k, "recipe")) ND_TRY(copy_str(y, vn, r->name, sizeof r->name, k));
        else if (!strcmp(k, "description")) continue;
        else if (!strcmp(k, "match")) {
            char tmp[ND_RECIPE_MAX_MATCH][32];
            ND_TRY(copy_list(y, vn, tmp, ND_RECIPE_MAX_MATCH, &r->n_match, k));
            for (int i = 0; i < r->n_match; i++) strcpy(r->match[i], tmp[i]);
        } else if (!strcmp(k, "unsupported")) {
            char tmp[ND_RECIPE_MAX_MATCH][32];
            ND_TRY(copy_list(y, vn, tmp, ND_RECIPE_MAX_MATCH, &r->n_unsupported, k));
            for (int i = 0; i < r->n_unsupported; i++) strcpy(r->unsupported[i], tmp[i]);
        } else if (!strcmp(k, "requires")) {
            if (vn->type != YAML_MAPPING_NODE) return bad(y, vn, "'requires' must be a mapping of config keys to lists of values");
            r->n_req = 0;
            for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top; q++) {
                if (r->n_req >= ND_RECIPE_MAX_REQUIRES) return bad(y, vn, "too many 'requires' keys");
                ND_TRY(copy_str(y, node(y, q->key), r->req_key[r->n_req], sizeof r->req_key[0], k));
                ND_TRY(copy_list(y, node(y, q->value), r->req_val[r->n_req], 8, &r->n_req_val[r->n_req], k));
                r->n_req++;
            }
        } else if (!strcmp(k, "thresholds")) ND_TRY(parse_thresholds(y, vn, &r->th));
        else if (!strcmp(k, "naming")) {
            if (vn->type != YAML_MAPPING_NODE) return bad(y, vn, "'naming' must be a mapping");
            for (yaml_node_pair_t *q = vn->data.mapping.pairs.start; q < vn->data.mapping.pairs.top; q++) {
                if (r->n_namings >= 4) return bad(y, vn, "too many namings");
                ND_TRY(parse_naming(y, node(y, q->key), node(y, q->value), &r->namings[r->n_namings++]));
            }
        } else if (!strcmp(k, "prologue")) ND_TRY(parse_stages(y, vn, &r->prologue, &r->n_prologue));
        else if (!strcmp(k, "layer")) ND_TRY(parse_stages(y, vn, &r->layer, &r->n_layer));
        else if (!strcmp(k, "epilogue")) ND_TRY(parse_stages(y, vn, &r->epilogue, &r->n_epilogue));
        else if (!strcmp(k, "synth")) ND_TRY(nd_recipe_synth_parse(y->d, vn, &r->synth));
        else {
            char msg[128];
            snprintf(msg, sizeof msg, "unknown key '%.60s'", k);
            return bad(y, kn, msg);
        }
    }
    if (y->index) return 0;   /* an ancestor: the recipe itself says its name */
    if (!r->name[0]) return bad(y, root, "missing 'recipe' (the recipe's name)");
    if (!r->n_layer) return bad(y, root, "missing 'layer' stages");
    return 0;
}

/* The recipe at path and the chain of recipes it extends: the first ancestor's sections first, then
 * each nearer file's own sections and edits, the `fused:` names last. */
static int load_file(const char *path, nd_recipe **out, nd_err *e) {
    nd_recipe *r = calloc(1, sizeof *r);
    nd_rchain *c = calloc(1, sizeof *c);
    int rc = 0;
    if (!r || !c) rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", path);
    else {
        snprintf(r->path, sizeof r->path, "%s", path);
        r->th.min_cosine = 0.99;
        r->th.min_sqnr_db = 15.0;
        r->th.floor_margin_db = 6.0;
        r->th.chained_min_cosine = 0.9;
        rc = nd_rchain_load(c, path, r, e);
        for (int i = c->n - 1; !rc && i >= 0; i--) {
            yctx y = {&c->docs[i].doc, r->files[i], e, &c->docs[i], i, c};
            rc = parse_root(&y, r);
            if (!rc) rc = nd_rchain_edit(c, i, r, e);
        }
        if (!rc) rc = nd_rchain_fuse(c, r, e);
        nd_rchain_free(c);
    }
    free(c);
    if (rc) { nd_recipe_free(r); return rc; }
    *out = r;
    return 0;
}

static int is_dir(const char *p) { struct stat st; return p && stat(p, &st) == 0 && S_ISDIR(st.st_mode); }

const char *nd_recipe_dir(void) {
    const char *env = getenv("NVFP4DBG_RECIPES");
    if (is_dir(env)) return env;
    if (is_dir(ND_INSTALL_RECIPES)) return ND_INSTALL_RECIPES;
    return ND_SOURCE_RECIPES;
}

void nd_recipe_inputs(const char *const *names, int n_names, const char **in, int *n, int cap, char *buf, size_t bufcap) {
    if (*n < cap) in[(*n)++] = nd_recipe_dir();
    size_t used = 0;
    for (int i = 0; i < n_names; i++) {
        for (const char *p = names[i]; p && *p && *n < cap;) {
            const char *comma = strchr(p, ',');
            const size_t len = comma ? (size_t)(comma - p) : strlen(p);
            const int is_path = memchr(p, '/', len) || (len > 5 && !memcmp(p + len - 5, ".yaml", 5));
            if (is_path && used + len + 1 <= bufcap) {
                memcpy(buf + used, p, len);
                buf[used + len] = 0;
                in[(*n)++] = buf + used;
                const char *self = buf + used;
                used += len + 1;
                /* the recipes it extends are inputs too (round 19: --out PARENT.yaml replaced the parent) */
                nd_recipe *rc = NULL;
                nd_err e2 = {0};
                if (!nd_recipe_load(self, &rc, &e2)) {
                    for (int k = 1; k < rc->n_files && *n < cap; k++) {
                        const size_t fl = strlen(rc->files[k]);
                        if (used + fl + 1 > bufcap) break;
                        memcpy(buf + used, rc->files[k], fl + 1);
                        in[(*n)++] = buf + used;
                        used += fl + 1;
                    }
                    nd_recipe_free(rc);
                }
            }
            p = comma ? comma + 1 : p + len;
        }
    }
}

/* "; did you mean 'llama'?" when a shipped recipe's name is close to the one asked for */
static void suggest_recipe(const char *name, char *out, size_t cap) {
    char names[64][64];
    const char *cands[64];
    int n = 0;
    DIR *d = opendir(nd_recipe_dir());
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 64) {
        size_t len = strlen(de->d_name);
        if (len < 6 || len - 5 >= 64 || strcmp(de->d_name + len - 5, ".yaml") || !strncmp(de->d_name, "stack-", 6) ||
            !strncmp(de->d_name, "tolerances", 10)) continue;
        snprintf(names[n], 64, "%.*s", (int)(len - 5), de->d_name);
        cands[n] = names[n];
        n++;
    }
    if (d) closedir(d);
    const char *best = nd_suggest(name, cands, (size_t)n);
    if (best) snprintf(out, cap, "; did you mean '%s'?", best);
}

int nd_recipe_load(const char *name, nd_recipe **out, nd_err *e) {
    if (strchr(name, '/') || strstr(name, ".yaml")) return load_file(name, out, e);
    char path[1024];
    snprintf(path, sizeof path, "%s/%s.yaml", nd_recipe_dir(), name);
    struct stat st;
    if (stat(path, &st) != 0) {
        char near[96] = "";
        suggest_recipe(name, near, sizeof near);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: no recipe named '%s'%s (recipes are in %s)", path, name, near, nd_recipe_dir());
    }
    return load_file(path, out, e);
}

static int cmp_str(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

int nd_recipe_for_model_type(const char *model_type, nd_recipe **out, nd_err *e) {
    const char *dir = nd_recipe_dir();
    DIR *d = opendir(dir);
    if (!d) return nd_fail(e, ND_EXIT_INTERNAL, "%s: cannot list recipes", dir);
    struct dirent *de;
    int rc = ND_EXIT_BADINPUT;
    /* what the recipes cover, for the message when none matches: "name (type, type)", sorted */
    enum { MAX_LISTED = 48 };
    char listed[MAX_LISTED][160];
    int n_listed = 0;
    while ((de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n < 6 || strcmp(de->d_name + n - 5, ".yaml") || !strncmp(de->d_name, "tolerances", 10)) continue;
        if (!strncmp(de->d_name, "stack-", 6)) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        nd_recipe *r;
        nd_err ignore = {0};
        if (load_file(path, &r, &ignore)) continue;
        for (int i = 0; i < r->n_match; i++)
            if (!strcmp(r->match[i], model_type)) { *out = r; rc = 0; break; }
        if (!rc) break;
        if (n_listed < MAX_LISTED && r->n_match > 0) {
            char *l = listed[n_listed++];
            size_t o = (size_t)snprintf(l, sizeof listed[0], "%s (", r->name);
            for (int i = 0; i < r->n_match && o < sizeof listed[0]; i++)
                o += (size_t)snprintf(l + o, sizeof listed[0] - o, "%s%s", i ? ", " : "", r->match[i]);
            if (o < sizeof listed[0]) snprintf(l + o, sizeof listed[0] - o, ")");
        }
        nd_recipe_free(r);
    }
    closedir(d);
    if (rc) {
        qsort(listed, (size_t)n_listed, sizeof listed[0], cmp_str);
        char all[2048];
        size_t o = 0;
        all[0] = 0;
        for (int i = 0; i < n_listed && o < sizeof all; i++)
            o += (size_t)snprintf(all + o, sizeof all - o, "%s%s", i ? "; " : "", listed[i]);
        return nd_fail(e, rc, "no recipe in %s matches model_type '%s'. Supported (recipe (model_type, ...)): %s. "
                       "A family whose ops exist is added with a recipe YAML (docs/families.md); or pass --recipe NAME|FILE",
                       dir, model_type, n_listed ? all : "none");
    }
    return 0;
}

void nd_recipe_free(nd_recipe *r) {
    if (!r) return;
    free(r->prologue);
    free(r->layer);
    free(r->epilogue);
    nd_recipe_synth_free(r->synth);
    free(r);
}

const char *nd_stage_attr(const nd_stage_def *s, const char *key) {
    for (int i = 0; i < s->n_attrs; i++)
        if (!strcmp(s->attrs[i].key, key)) return s->attrs[i].value;
    return NULL;
}

static uint64_t fnv_file(const char *path, uint64_t h, nd_err *e, int *rc) {
    char *text = NULL;
    size_t len = 0;
    if ((*rc = nd_read_text(path, "recipe", (size_t)1 << 24, 0, &text, &len, e))) return h;
    for (size_t i = 0; i < len; i++) h = (h ^ (unsigned char)text[i]) * 1099511628211ull;
    free(text);
    return h;
}

int nd_recipe_file_hash(const char *path, char out[17], nd_err *e) {
    int rc = 0;
    const uint64_t h = fnv_file(path, 1469598103934665603ull, e, &rc);
    if (!rc) snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc;
}

int nd_recipe_hash(const nd_recipe *r, char out[17], nd_err *e) {
    int rc = 0;
    uint64_t h = 1469598103934665603ull;
    for (int i = 0; i < r->n_files && !rc; i++) h = fnv_file(r->files[i], h, e, &rc);
    if (!rc) snprintf(out, 17, "%016llx", (unsigned long long)h);
    return rc;
}
