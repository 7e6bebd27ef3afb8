/* recipe_synth.c — parse a recipe's `synth:` section (recipe_synth.h) and evaluate its dimension
 * expressions. */
#include "recipe/recipe_synth.h"
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>
#include "recipe/yaml_doc.h"

typedef nd_ydoc D;
#define KIDS(n, it) for (yaml_node_item_t *it = (n)->data.sequence.items.start; it < (n)->data.sequence.items.top; it++)
#define PAIRS(n, p) for (yaml_node_pair_t *p = (n)->data.mapping.pairs.start; p < (n)->data.mapping.pairs.top; p++)

static int is_plain(const yaml_node_t *n) { return n->data.scalar.style == YAML_PLAIN_SCALAR_STYLE; }

/* A scalar as a config value: plain integers and reals as numbers, plain true/false as booleans,
 * ~ / null as null, anything else (and every quoted scalar) as a string. */
static int scalar_val(D *d, const char *key, yaml_node_t *n, nd_syn_val *v) {
    const char *s = nd_ydoc_scalar(n);
    v->line = nd_ydoc_line(n);
    if (strlen(s) >= sizeof v->s) return nd_ydoc_fail(d, n, "synth: '%s': value too long (max %zu)", key, sizeof v->s - 1);
    snprintf(v->s, sizeof v->s, "%s", s);
    v->kind = ND_SYV_STR;
    if (!is_plain(n)) return 0;
    if (!*s || !strcmp(s, "~") || !strcmp(s, "null")) { v->kind = ND_SYV_NULL; return 0; }
    if (!strcmp(s, "true") || !strcmp(s, "false")) { v->kind = ND_SYV_BOOL; v->i = !strcmp(s, "true"); return 0; }
    char *end;
    long long i = strtoll(s, &end, 10);
    if (end != s && !*end) { v->kind = ND_SYV_INT; v->i = i; return 0; }
    double r = strtod(s, &end);
    if (end != s && !*end) {
        if (!isfinite(r)) return nd_ydoc_fail(d, n, "synth: '%s': %s is not a finite number", key, s);
        v->kind = ND_SYV_REAL; v->r = r;
    }
    return 0;
}

static int parse_val(D *d, const char *key, yaml_node_t *n, nd_syn_val *v, int depth) {
    memset(v, 0, sizeof *v);
    snprintf(v->key, sizeof v->key, "%s", key);
    if (strlen(key) >= sizeof v->key) return nd_ydoc_fail(d, n, "synth: key '%.60s...' too long", key);
    v->line = nd_ydoc_line(n);
    if (depth > 4) return nd_ydoc_fail(d, n, "synth: '%s' nests too deep", key);
    if (n->type == YAML_SCALAR_NODE) return scalar_val(d, key, n, v);
    size_t cnt = n->type == YAML_MAPPING_NODE ? (size_t)(n->data.mapping.pairs.top - n->data.mapping.pairs.start)
                                              : (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    v->kind = n->type == YAML_MAPPING_NODE ? ND_SYV_MAP : ND_SYV_LIST;
    v->kids = calloc(cnt ? cnt : 1, sizeof *v->kids);
    if (!v->kids) return nd_fail(d->e, ND_EXIT_INTERNAL, "%s: out of memory", d->path);
    if (n->type == YAML_MAPPING_NODE) {
        PAIRS(n, p) {
            yaml_node_t *kn = nd_ydoc_node(d, p->key);
            const char *k = nd_ydoc_scalar(kn);
            if (!k) return nd_ydoc_fail(d, kn, "synth: keys under '%s' must be strings", key);
            ND_TRY(parse_val(d, k, nd_ydoc_node(d, p->value), &v->kids[v->n_kids++], depth + 1));
        }
    } else {
        KIDS(n, it) ND_TRY(parse_val(d, key, nd_ydoc_node(d, *it), &v->kids[v->n_kids++], depth + 1));
    }
    return 0;
}

static void free_val(nd_syn_val *v) {
    for (int i = 0; i < v->n_kids; i++) free_val(&v->kids[i]);
    free(v->kids);
    v->kids = NULL;
    v->n_kids = 0;
}

static int text(D *d, const char *key, yaml_node_t *v, char *dst, size_t cap) { return nd_ydoc_text(d, key, v, dst, cap); }

static int expr(D *d, const char *key, yaml_node_t *v, nd_syn_expr *x) {
    x->line = nd_ydoc_line(v);
    return text(d, key, v, x->text, sizeof x->text);
}

static const char *const KINDS[] = {"norm", "linear", "mlp", "experts", "tensor"};
static const char *const QUANTS[] = {"nvfp4", "none", "fp8_block"};
static const char *const INITS[] = {"normal", "const", "tid2eid", "hc_base"};
static const char *const DTYPES[] = {"BF16", "F32", "I32"};

/* a tensor's init, dtype, shape and aux agree: tid2eid is I32 [V, k], hc_base F32 [m], I32 only tid2eid */
static int check_init(D *d, yaml_node_t *n, const nd_syn_entry *x) {
    const int tid = x->init == ND_SYI_TID2EID, hcb = x->init == ND_SYI_HC_BASE, i32 = !strcmp(x->dtype, "I32");
    const char *bad = tid && !i32 ? "init: tid2eid needs dtype: I32"
                    : !tid && i32 ? "dtype: I32 is for init: tid2eid only"
                    : tid && x->ndim != 2 ? "init: tid2eid needs a shape of 2 dimensions [vocab, top-k]"
                    : hcb && (x->ndim != 1 || strcmp(x->dtype, "F32")) ? "init: hc_base needs dtype: F32 and a shape of 1 dimension"
                    : (tid || hcb) && !x->aux.text[0] ? "init: tid2eid and hc_base need 'aux' (experts / streams)"
                    : !(tid || hcb) && x->aux.text[0] ? "'aux' is for init: tid2eid and hc_base only" : NULL;
    return bad ? nd_ydoc_fail(d, n, "synth: tensor '%s': %s", x->name, bad) : 0;
}

static int parse_entry(D *d, yaml_node_t *n, nd_syn_entry *x) {
    memset(x, 0, sizeof *x);
    x->line = nd_ydoc_line(n);
    x->gain = 1.0;
    x->std = 1.0;
    snprintf(x->dtype, sizeof x->dtype, "BF16");
    if (n->type != YAML_MAPPING_NODE)
        return nd_ydoc_fail(d, n, "synth: a module-table entry must be a mapping with one of norm, linear, mlp, experts, tensor");
    int have_kind = 0;
    PAIRS(n, p) {
        yaml_node_t *kn = nd_ydoc_node(d, p->key), *vn = nd_ydoc_node(d, p->value);
        const char *k = nd_ydoc_scalar(kn);
        if (!k) return nd_ydoc_fail(d, kn, "synth: entry keys must be strings");
        int kind = -1;
        for (int i = 0; i < 5; i++) if (!strcmp(k, KINDS[i])) kind = i;
        if (kind >= 0) {
            if (have_kind) return nd_ydoc_fail(d, kn, "synth: an entry has one of norm, linear, mlp, experts, tensor");
            have_kind = 1;
            x->kind = (nd_syn_ekind)kind;
            ND_TRY(text(d, k, vn, x->name, sizeof x->name));
        } else if (!strcmp(k, "out") || !strcmp(k, "dim")) ND_TRY(expr(d, k, vn, &x->out));
        else if (!strcmp(k, "in")) ND_TRY(expr(d, k, vn, &x->in));
        else if (!strcmp(k, "inter")) ND_TRY(expr(d, k, vn, &x->inter));
        else if (!strcmp(k, "count")) ND_TRY(expr(d, k, vn, &x->count));
        else if (!strcmp(k, "std_sqrt")) ND_TRY(expr(d, k, vn, &x->std_sqrt));
        else if (!strcmp(k, "aux")) ND_TRY(expr(d, k, vn, &x->aux));
        else if (!strcmp(k, "fuse")) ND_TRY(text(d, k, vn, x->fuse, sizeof x->fuse));
        else if (!strcmp(k, "gain")) ND_TRY(nd_ydoc_number(d, k, vn, 0, 1e6, &x->gain));
        else if (!strcmp(k, "mean")) ND_TRY(nd_ydoc_number(d, k, vn, -1e6, 1e6, &x->mean));
        else if (!strcmp(k, "std")) ND_TRY(nd_ydoc_number(d, k, vn, 0, 1e6, &x->std));
        else if (!strcmp(k, "bias")) ND_TRY(nd_ydoc_number(d, k, vn, 0, 1e6, &x->bias));
        else if (!strcmp(k, "when")) ND_TRY(text(d, k, vn, x->when, sizeof x->when)); /* checked in check_whens */
        else if (!strcmp(k, "quant")) {
            int q;
            ND_TRY(nd_ydoc_enum(d, k, vn, QUANTS, 3, &q));
            x->quant = (nd_syn_quant)q;
        } else if (!strcmp(k, "init")) {
            int q;
            ND_TRY(nd_ydoc_enum(d, k, vn, INITS, 4, &q));
            x->init = (nd_syn_init)q;
        } else if (!strcmp(k, "dtype")) {
            int q;
            ND_TRY(nd_ydoc_enum(d, k, vn, DTYPES, 3, &q));
            snprintf(x->dtype, sizeof x->dtype, "%s", DTYPES[q]);
        } else if (!strcmp(k, "shape")) {
            if (vn->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(d, vn, "synth: 'shape' must be a list of 1 to 3 dimensions");
            x->ndim = 0;
            KIDS(vn, it) {
                if (x->ndim >= 3) return nd_ydoc_fail(d, vn, "synth: 'shape' must be a list of 1 to 3 dimensions");
                ND_TRY(expr(d, k, nd_ydoc_node(d, *it), &x->shape[x->ndim++]));
            }
            if (!x->ndim) return nd_ydoc_fail(d, vn, "synth: 'shape' must be a list of 1 to 3 dimensions");
        } else
            return nd_ydoc_fail(d, kn, "synth: unknown entry key '%.60s' (known: norm, linear, mlp, experts, tensor, out, in, "
                                "dim, inter, count, fuse, gain, bias, quant, when, shape, dtype, init, mean, std, std_sqrt, aux)", k);
    }
    if (!have_kind) return nd_ydoc_fail(d, n, "synth: an entry needs one of norm, linear, mlp, experts, tensor");
    const char *need = NULL;
    switch (x->kind) {
    case ND_SYE_NORM: if (!x->out.text[0]) need = "dim"; break;
    case ND_SYE_LINEAR: if (!x->out.text[0]) need = "out"; else if (!x->in.text[0]) need = "in"; break;
    case ND_SYE_MLP: if (!x->inter.text[0]) need = "inter"; break;
    case ND_SYE_EXPERTS: if (!x->inter.text[0]) need = "inter"; else if (!x->count.text[0]) need = "count"; break;
    case ND_SYE_TENSOR: if (!x->ndim) need = "shape"; break;
    }
    if (need) return nd_ydoc_fail(d, n, "synth: %s '%s' needs '%s'", KINDS[x->kind], x->name, need);
    if (x->bias > 0 && (x->kind == ND_SYE_NORM || x->kind == ND_SYE_TENSOR))
        return nd_ydoc_fail(d, n, "synth: %s '%s': 'bias' is for linear, mlp and experts", KINDS[x->kind], x->name);
    if (x->kind == ND_SYE_TENSOR) ND_TRY(check_init(d, n, x));
    if (x->kind == ND_SYE_EXPERTS && !strstr(x->name, "{E}"))
        return nd_ydoc_fail(d, n, "synth: experts '%s' must hold {E} (the expert index)", x->name);
    return 0;
}

static int parse_entries(D *d, const char *key, yaml_node_t *n, nd_syn_entry **out, int *count) {
    if (n->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(d, n, "synth: '%s' must be a list of entries", key);
    if (*out) return nd_ydoc_fail(d, n, "synth: '%s' given twice", key);
    size_t cap = (size_t)(n->data.sequence.items.top - n->data.sequence.items.start);
    *out = calloc(cap ? cap : 1, sizeof **out);
    if (!*out) return nd_fail(d->e, ND_EXIT_INTERNAL, "%s: out of memory", d->path);
    *count = 0;
    KIDS(n, it) ND_TRY(parse_entry(d, nd_ydoc_node(d, *it), &(*out)[(*count)++]));
    return 0;
}

static int parse_names(D *d, const char *key, yaml_node_t *n, char (*dst)[64], int cap, int *count) {
    if (n->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(d, n, "synth: '%s' must be a list of module patterns", key);
    *count = 0;
    KIDS(n, it) {
        if (*count >= cap) return nd_ydoc_fail(d, n, "synth: '%s' has more than %d entries", key, cap);
        ND_TRY(text(d, key, nd_ydoc_node(d, *it), dst[(*count)++], 64));
    }
    return 0;
}

static const char *const SIZES[] = {"tiny", "small", "full"};

/* the layer types named by layer_types (0: none) */
static int lt_names(const nd_synth_spec *s, const char *out[ND_SYN_TYPES + 1]) {
    int n = 0;
    if (s->lt_type[0]) { out[n++] = s->lt_type; out[n++] = s->lt_else; }
    if (s->lt_first[0]) out[n++] = s->lt_first;
    for (int i = 0; i < s->n_cycle; i++) out[n++] = s->lt_cycle[i];
    return n;
}
static int is_lt(const nd_synth_spec *s, const char *t) {
    const char *names[ND_SYN_TYPES + 1];
    const int n = lt_names(s, names);
    for (int i = 0; i < n; i++)
        if (!strcmp(names[i], t)) return 1;
    return 0;
}

/* One key of a small mapping (layer_types, experts): read as text into dst, as an expression into x,
 * or as a list of names into list. */
typedef struct mkey {
    const char *name;
    char *dst;
    size_t cap;
    nd_syn_expr *x;
    char (*list)[32];
    int *n_list, list_cap;
} mkey;

static int parse_keys(D *d, yaml_node_t *v, const char *what, const mkey *keys, int n, const char *known) {
    if (v->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, v, "synth: '%s' must be a mapping of %s", what, known);
    PAIRS(v, p) {
        yaml_node_t *kn = nd_ydoc_node(d, p->key), *vn = nd_ydoc_node(d, p->value);
        const char *k = nd_ydoc_scalar(kn);
        const mkey *m = NULL;
        for (int i = 0; k && i < n; i++)
            if (!strcmp(k, keys[i].name)) m = &keys[i];
        if (!m) return nd_ydoc_fail(d, kn, "synth: %s: unknown key '%.60s' (known: %s)", what, k ? k : "", known);
        if (m->x) ND_TRY(expr(d, k, vn, m->x));
        else if (m->dst) ND_TRY(text(d, k, vn, m->dst, m->cap));
        else {
            if (vn->type != YAML_SEQUENCE_NODE) return nd_ydoc_fail(d, vn, "synth: %s: '%s' must be a list", what, k);
            KIDS(vn, it) {
                if (*m->n_list >= m->list_cap) return nd_ydoc_fail(d, vn, "synth: %s: '%s' has more than %d entries", what, k, m->list_cap);
                ND_TRY(text(d, k, nd_ydoc_node(d, *it), m->list[*m->n_list], sizeof m->list[0]));
                (*m->n_list)++;
            }
        }
    }
    return 0;
}

/* layer_types: {every: K, type: T, else: U} or {first: T0, cycle: [T1, ...]} */
static int parse_layer_types(D *d, yaml_node_t *v, nd_synth_spec *s) {
    const mkey keys[] = {{"every", NULL, 0, &s->lt_every, NULL, NULL, 0},
                         {"type", s->lt_type, sizeof s->lt_type, NULL, NULL, NULL, 0},
                         {"else", s->lt_else, sizeof s->lt_else, NULL, NULL, NULL, 0},
                         {"first", s->lt_first, sizeof s->lt_first, NULL, NULL, NULL, 0},
                         {"cycle", NULL, 0, NULL, s->lt_cycle, &s->n_cycle, ND_SYN_TYPES - 1}};
    ND_TRY(parse_keys(d, v, "layer_types", keys, 5, "every, type, else, first, cycle"));
    const int old = s->lt_every.text[0] || s->lt_type[0] || s->lt_else[0], cyc = s->lt_first[0] || s->n_cycle;
    if (old && cyc) return nd_ydoc_fail(d, v, "synth: layer_types is either every, type, else or first, cycle, not both");
    if (cyc && !s->n_cycle) return nd_ydoc_fail(d, v, "synth: layer_types needs 'cycle' (a list of at least one type)");
    if (!cyc && (!s->lt_every.text[0] || !s->lt_type[0] || !s->lt_else[0] || !strcmp(s->lt_type, s->lt_else)))
        return nd_ydoc_fail(d, v, "synth: layer_types needs every, type and else (two different types)");
    for (int i = 0; i < s->n_cycle; i++)
        for (int j = 0; j < i; j++)
            if (!strcmp(s->lt_cycle[i], s->lt_cycle[j])) return nd_ydoc_fail(d, v, "synth: layer_types: '%s' twice in 'cycle'", s->lt_cycle[i]);
    return 0;
}

/* layer_values: {KEY: {TYPE: EXPR, ...}, ...} */
static int parse_layer_values(D *d, yaml_node_t *v, nd_synth_spec *s) {
    if (v->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, v, "synth: 'layer_values' must be a mapping of config keys");
    PAIRS(v, p) {
        yaml_node_t *kn = nd_ydoc_node(d, p->key), *vn = nd_ydoc_node(d, p->value);
        if (s->n_ltv >= 4) return nd_ydoc_fail(d, kn, "synth: layer_values has more than 4 keys");
        nd_syn_ltval *t = &s->ltv[s->n_ltv++];
        t->line = nd_ydoc_line(kn);
        ND_TRY(text(d, "layer_values", kn, t->key, sizeof t->key));
        if (vn->type != YAML_MAPPING_NODE)
            return nd_ydoc_fail(d, vn, "synth: layer_values.%s must be a mapping of layer type to value", t->key);
        PAIRS(vn, q) {
            yaml_node_t *tn = nd_ydoc_node(d, q->key);
            if (t->n >= ND_SYN_TYPES) return nd_ydoc_fail(d, tn, "synth: layer_values.%s has more than %d types", t->key, ND_SYN_TYPES);
            ND_TRY(text(d, t->key, tn, t->type[t->n], sizeof t->type[0]));
            ND_TRY(expr(d, t->key, nd_ydoc_node(d, q->value), &t->x[t->n]));
            t->n++;
        }
    }
    return 0;
}

/* every layer_values type is a layer type, and every layer type has a value */
static int check_layer_values(const nd_synth_spec *s, nd_err *e) {
    const char *names[ND_SYN_TYPES + 1];
    const int n = lt_names(s, names);
    for (int i = 0; i < s->n_ltv; i++) {
        const nd_syn_ltval *t = &s->ltv[i];
        if (!n) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: layer_values.%s needs layer_types", s->path, t->line, t->key);
        for (int j = 0; j < t->n; j++)
            if (!is_lt(s, t->type[j]))
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: layer_values.%s: '%s' is not a layer type", s->path,
                               t->x[j].line, t->key, t->type[j]);
        for (int k = 0; k < n; k++) {
            int found = 0;
            for (int j = 0; j < t->n; j++) found |= !strcmp(t->type[j], names[k]);
            if (!found)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: layer_values.%s has no value for layer type '%s'", s->path,
                               t->line, t->key, names[k]);
        }
    }
    return 0;
}

/* experts: {count: KEY, top_k: KEY} */
static int parse_experts(D *d, yaml_node_t *v, nd_synth_spec *s) {
    const mkey keys[] = {{"count", s->experts_key, sizeof s->experts_key, NULL, NULL, NULL, 0},
                         {"top_k", s->top_k_key, sizeof s->top_k_key, NULL, NULL, NULL, 0}};
    ND_TRY(parse_keys(d, v, "experts", keys, 2, "count, top_k"));
    if (!s->experts_key[0] || !s->top_k_key[0]) return nd_ydoc_fail(d, v, "synth: experts needs count and top_k (config keys)");
    return 0;
}

/* every `when:` names dense, moe, hash, scored (with hash_layers) or one of the layer types */
static int check_whens(const nd_synth_spec *s, const nd_syn_entry *x, int n, nd_err *e) {
    for (int i = 0; i < n; i++) {
        const char *w = x[i].when;
        if (!w[0] || !strcmp(w, "dense") || !strcmp(w, "moe") || is_lt(s, w) ||
            (s->hash_layers[0] && (!strcmp(w, "hash") || !strcmp(w, "scored"))))
            continue;
        char known[ND_SYN_TYPES * 34 + 64];
        const char *names[ND_SYN_TYPES + 1];
        const int k = lt_names(s, names);
        size_t o = (size_t)snprintf(known, sizeof known, "dense, moe%s", s->hash_layers[0] ? ", hash, scored" : "");
        for (int j = 0; j < k && o < sizeof known; j++)
            o += (size_t)snprintf(known + o, sizeof known - o, "%s%s", j == k - 1 ? " or " : ", ", names[j]);
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: when: '%s' is not %s", s->path, x[i].line, w, known);
    }
    return 0;
}

static int parse_spec(D *d, yaml_node_t *v, nd_synth_spec *s) {
    if (v->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, v, "synth: must be a mapping");
    PAIRS(v, p) {
        yaml_node_t *kn = nd_ydoc_node(d, p->key), *vn = nd_ydoc_node(d, p->value);
        const char *k = nd_ydoc_scalar(kn);
        if (!k) return nd_ydoc_fail(d, kn, "synth: keys must be strings");
        if (!strcmp(k, "architecture")) ND_TRY(text(d, k, vn, s->architecture, sizeof s->architecture));
        else if (!strcmp(k, "model_type")) ND_TRY(text(d, k, vn, s->model_type, sizeof s->model_type));
        else if (!strcmp(k, "dense_layers")) {
            s->dense_line = nd_ydoc_line(vn);
            ND_TRY(text(d, k, vn, s->dense_layers, sizeof s->dense_layers));
        } else if (!strcmp(k, "config")) {
            if (vn->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, vn, "synth: 'config' must be a mapping (config.json in key order)");
            free_val(&s->config);
            ND_TRY(parse_val(d, "config", vn, &s->config, 0));
        } else if (!strcmp(k, "sizes")) {
            if (vn->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, vn, "synth: 'sizes' must be a mapping of tiny, small, full");
            PAIRS(vn, q) {
                yaml_node_t *sk = nd_ydoc_node(d, q->key), *sv = nd_ydoc_node(d, q->value);
                int z;
                ND_TRY(nd_ydoc_enum(d, "sizes", sk, SIZES, 3, &z));
                if (sv->type != YAML_MAPPING_NODE) return nd_ydoc_fail(d, sv, "synth: sizes.%s must be a mapping of config keys", SIZES[z]);
                free_val(&s->sizes[z]);
                ND_TRY(parse_val(d, SIZES[z], sv, &s->sizes[z], 0));
                for (int i = 0; i < s->sizes[z].n_kids; i++)
                    if (s->sizes[z].kids[i].kind == ND_SYV_MAP || s->sizes[z].kids[i].kind == ND_SYV_LIST ||
                        s->sizes[z].kids[i].kind == ND_SYV_NULL)
                        return nd_fail(d->e, ND_EXIT_BADINPUT, "%s:%d: synth: sizes.%s.%s must be a number, boolean or string",
                                       d->path, s->sizes[z].kids[i].line, SIZES[z], s->sizes[z].kids[i].key);
            }
        } else if (!strcmp(k, "ignore")) ND_TRY(parse_names(d, k, vn, s->ignore, 8, &s->n_ignore));
        else if (!strcmp(k, "exclude")) ND_TRY(parse_names(d, k, vn, s->exclude, 8, &s->n_exclude));
        else if (!strcmp(k, "layer")) ND_TRY(parse_entries(d, k, vn, &s->layer, &s->n_layer));
        else if (!strcmp(k, "tail")) ND_TRY(parse_entries(d, k, vn, &s->tail, &s->n_tail));
        else if (!strcmp(k, "layer_types")) ND_TRY(parse_layer_types(d, vn, s));
        else if (!strcmp(k, "layer_values")) ND_TRY(parse_layer_values(d, vn, s));
        else if (!strcmp(k, "hash_layers")) ND_TRY(text(d, k, vn, s->hash_layers, sizeof s->hash_layers));
        else if (!strcmp(k, "experts")) ND_TRY(parse_experts(d, vn, s));
        else return nd_ydoc_fail(d, kn, "synth: unknown key '%.60s' (known: architecture, model_type, config, sizes, "
                                 "dense_layers, layer_types, layer_values, hash_layers, experts, ignore, exclude, layer, tail)", k);
    }
    const char *need = !s->architecture[0] ? "architecture" : !s->model_type[0] ? "model_type"
                     : s->config.kind != ND_SYV_MAP ? "config" : !s->n_layer ? "layer"
                     : s->sizes[0].kind != ND_SYV_MAP ? "sizes.tiny" : s->sizes[1].kind != ND_SYV_MAP ? "sizes.small" : NULL;
    if (need) return nd_ydoc_fail(d, v, "synth: missing '%s'", need);
    ND_TRY(check_layer_values(s, d->e));
    ND_TRY(check_whens(s, s->layer, s->n_layer, d->e));
    return check_whens(s, s->tail, s->n_tail, d->e);
}

int nd_recipe_synth_parse(struct nd_ydoc *d, struct yaml_node_s *v, nd_synth_spec **out) {
    if (*out) return nd_ydoc_fail(d, v, "synth: given twice");
    nd_synth_spec *s = calloc(1, sizeof *s);
    if (!s) return nd_fail(d->e, ND_EXIT_INTERNAL, "%s: out of memory", d->path);
    snprintf(s->path, sizeof s->path, "%s", d->path);
    s->line = nd_ydoc_line(v);
    int rc = parse_spec(d, v, s);
    if (rc) { nd_recipe_synth_free(s); return rc; }
    *out = s;
    return 0;
}

void nd_recipe_synth_free(nd_synth_spec *s) {
    if (!s) return;
    free_val(&s->config);
    for (int i = 0; i < 3; i++) free_val(&s->sizes[i]);
    free(s->layer);
    free(s->tail);
    free(s);
}

/* ---- expressions: sum := prod (('+'|'-') prod)*; prod := atom (('*'|'/') atom)*;
 *      atom := integer | key | '(' sum ')' | '-' atom ------------------------------------- */

typedef struct ectx {
    const nd_synth_spec *s;
    const nd_syn_expr *x;
    const char *what, *p;
    nd_syn_lookup look;
    void *user;
    nd_err *e;
} ectx;

static int efail(ectx *c, const char *msg, const char *arg) {
    return nd_fail(c->e, ND_EXIT_BADINPUT, "%s:%d: synth: %s '%s': %s%s%s", c->s->path, c->x->line, c->what, c->x->text,
                   msg, arg ? arg : "", arg ? "'" : "");
}
static void ws(ectx *c) { while (*c->p == ' ') c->p++; }
static int sum(ectx *c, long long *v);

static int atom(ectx *c, long long *v) {
    ws(c);
    if (*c->p == '(') {
        c->p++;
        ND_TRY(sum(c, v));
        ws(c);
        if (*c->p != ')') return efail(c, "a ')' is missing", NULL);
        c->p++;
        return 0;
    }
    if (*c->p == '-') { c->p++; ND_TRY(atom(c, v)); *v = -*v; return 0; }
    if (isdigit((unsigned char)*c->p)) {
        char *end;
        *v = strtoll(c->p, &end, 10);
        c->p = end;
        return 0;
    }
    if (isalpha((unsigned char)*c->p) || *c->p == '_') {
        char key[64];
        size_t n = 0;
        while ((isalnum((unsigned char)*c->p) || *c->p == '_') && n + 1 < sizeof key) key[n++] = *c->p++;
        key[n] = 0;
        if (c->look(c->user, key, v)) return efail(c, "unknown or non-integer config key '", key);
        return 0;
    }
    return efail(c, *c->p ? "unexpected text at '" : "an operand is missing", *c->p ? c->p : NULL);
}

/* one precedence level: 0 sum of products (+ -), 1 product of atoms (* /) */
static int level(ectx *c, long long *v, int lv) {
    static const char OPS[2][3] = {"+-", "*/"};
    ND_TRY(lv ? atom(c, v) : level(c, v, 1));
    for (;;) {
        ws(c);
        const char op = *c->p;
        if (!op || !strchr(OPS[lv], op)) return 0;
        c->p++;
        long long r;
        ND_TRY(lv ? atom(c, &r) : level(c, &r, 1));
        if (op == '/' && r == 0) return efail(c, "division by zero", NULL);
        *v = op == '+' ? *v + r : op == '-' ? *v - r : op == '*' ? *v * r : *v / r;
    }
}

static int sum(ectx *c, long long *v) { return level(c, v, 0); }

int nd_synth_expr(const nd_synth_spec *s, const nd_syn_expr *x, const char *what, nd_syn_lookup look, void *user,
                  long long *out, nd_err *e) {
    ectx c = {s, x, what, x->text, look, user, e};
    ND_TRY(sum(&c, out));
    ws(&c);
    if (*c.p) return efail(&c, "unexpected text at '", c.p);
    return 0;
}
