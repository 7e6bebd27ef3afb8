/* synth_recipe.c — the one generic family builder: a recipe's `synth:` section (recipe_synth.h)
 * turned into the plan's tensors (sy_add_norm, sy_add_linear, sy_add_mlp, sy_add) and config.json. */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <jansson.h>
#include "recipe/recipe.h"
#include "recipe/recipe_synth.h"
#include "synth/synth.h"
#include "synth/synth_plan.h"

static const char *const SIZE_NAMES[] = {"tiny", "small", "full"};

typedef struct bctx {
    const nd_synth_spec *s;
    const nd_syn_val *size;     /* the size's mapping */
    long long layers, dense;    /* num_hidden_layers (after --layers), the dense_layers key's value */
    long long every;            /* layer_types: layer L is lt_type when (L + 1) % every == 0 (0: none) */
    long long hash;             /* hash_layers: min(its key's value, layers) (-1: none) */
    long long experts;          /* --experts (0: the size's) */
    nd_err *e;
} bctx;

static const nd_syn_val *kid(const nd_syn_val *m, const char *key) {
    for (int i = 0; m && i < m->n_kids; i++)
        if (!strcmp(m->kids[i].key, key)) return &m->kids[i];
    return NULL;
}

/* An integer key: num_hidden_layers, the dense_layers key, the size's value, then config's. */
static int lookup(void *user, const char *key, long long *out) {
    const bctx *b = user;
    if (!strcmp(key, "num_hidden_layers") && b->layers >= 0) { *out = b->layers; return 0; }
    if (b->s->dense_layers[0] && !strcmp(key, b->s->dense_layers) && b->dense >= 0) { *out = b->dense; return 0; }
    if (b->s->hash_layers[0] && !strcmp(key, b->s->hash_layers) && b->hash >= 0) { *out = b->hash; return 0; }
    if (b->experts > 0 && !strcmp(key, b->s->experts_key)) { *out = b->experts; return 0; }
    const nd_syn_val *v = kid(b->size, key);
    if (!v) v = kid(&b->s->config, key);
    if (!v || v->kind != ND_SYV_INT) return 1;
    *out = v->i;
    return 0;
}

static int ev(bctx *b, const nd_syn_expr *x, const char *what, int64_t *out) {
    long long v;
    ND_TRY(nd_synth_expr(b->s, x, what, lookup, b, &v, b->e));
    if (v < 0) return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: %s '%s' is negative (%lld)", b->s->path, x->line, what, x->text, v);
    *out = v;
    return 0;
}

/* a dimension: at least 1 (a zero-size tensor has no values to draw or quantize) and at most 2^31 */
static int ev_dim(bctx *b, const nd_syn_expr *x, const char *what, int64_t *out) {
    ND_TRY(ev(b, x, what, out));
    if (*out < 1 || *out > ((int64_t)1 << 31))
        return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: %s '%s' is %lld: a dimension is 1 to 2^31", b->s->path, x->line,
                       what, x->text, (long long)*out);
    return 0;
}

static int key_int(bctx *b, const char *key, int64_t *out) {
    long long v;
    if (lookup(b, key, &v))
        return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: no integer '%s' in config or sizes", b->s->path, b->s->line, key);
    *out = v;
    return 0;
}

/* ---- config.json ---------------------------------------------------------------------- */

static json_t *fill(bctx *b, const nd_syn_val *v);

/* layer l's type ("" without layer_types) */
static const char *lt_of(const bctx *b, long long l) {
    const nd_synth_spec *s = b->s;
    if (b->every) return (l + 1) % b->every ? s->lt_else : s->lt_type;
    if (!s->n_cycle) return "";
    if (s->lt_first[0] && l == 0) return s->lt_first;
    return s->lt_cycle[(l - (s->lt_first[0] ? 1 : 0)) % s->n_cycle];
}

/* layer_values KEY: each layer's value by its type */
static json_t *layer_values(bctx *b, const nd_syn_ltval *t) {
    json_t *a = json_array();
    for (long long l = 0; a && l < b->layers; l++) {
        const char *ty = lt_of(b, l);
        int64_t v = 0;
        for (int j = 0; j < t->n; j++)
            if (!strcmp(t->type[j], ty) && ev(b, &t->x[j], t->key, &v)) { json_decref(a); return NULL; }
        json_array_append_new(a, json_integer(v));
    }
    return a;
}

static json_t *to_json(bctx *b, const nd_syn_val *v) {
    switch (v->kind) {
    case ND_SYV_INT: return json_integer(v->i);
    case ND_SYV_REAL: return json_real(v->r);
    case ND_SYV_BOOL: return json_boolean(v->i);
    case ND_SYV_STR: return json_string(v->s);
    case ND_SYV_NULL: return fill(b, v);
    case ND_SYV_MAP: {
        json_t *o = json_object();
        for (int i = 0; o && i < v->n_kids; i++) {
            json_t *j = to_json(b, &v->kids[i]);
            if (!j) { json_decref(o); return NULL; }
            json_object_set_new(o, v->kids[i].key, j);
        }
        return o;
    }
    case ND_SYV_LIST: {
        json_t *a = json_array();
        for (int i = 0; a && i < v->n_kids; i++) {
            json_t *j = to_json(b, &v->kids[i]);
            if (!j) { json_decref(a); return NULL; }
            json_array_append_new(a, j);
        }
        return a;
    }
    }
    return NULL;
}

/* A null value (at any depth) filled in; NULL with e set when nothing gives it. */
static json_t *fill(bctx *b, const nd_syn_val *v) {
    const nd_synth_spec *s = b->s;
    if (!strcmp(v->key, "architectures")) {
        json_t *a = json_array();
        json_array_append_new(a, json_string(s->architecture));
        return a;
    }
    if (!strcmp(v->key, "model_type")) return json_string(s->model_type);
    if (!strcmp(v->key, "num_hidden_layers")) return json_integer(b->layers);
    if (b->experts > 0 && !strcmp(v->key, s->experts_key)) return json_integer(b->experts);
    if (s->hash_layers[0] && !strcmp(v->key, s->hash_layers)) return json_integer(b->hash);
    for (int i = 0; i < s->n_ltv; i++)
        if (!strcmp(v->key, s->ltv[i].key)) return layer_values(b, &s->ltv[i]);
    if (!strcmp(v->key, "layer_types") && (b->every > 0 || s->n_cycle)) {
        json_t *a = json_array();
        for (long long l = 0; a && l < b->layers; l++) json_array_append_new(a, json_string(lt_of(b, l)));
        return a;
    }
    if (s->dense_layers[0] && !strcmp(v->key, s->dense_layers)) return json_integer(b->dense);
    const nd_syn_val *z = kid(b->size, v->key);
    if (z) return to_json(b, z);
    nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: config key '%s' is ~ and sizes.%s does not give it", s->path, v->line,
            v->key, b->size->key);
    return NULL;
}

/* a ~ for key anywhere in v */
static int has_null(const nd_syn_val *v, const char *key) {
    if (v->kind == ND_SYV_NULL) return !strcmp(v->key, key);
    for (int i = 0; i < v->n_kids; i++)
        if (has_null(&v->kids[i], key)) return 1;
    return 0;
}

static int check_size_keys(bctx *b) {
    const nd_synth_spec *s = b->s;
    for (int i = 0; i < b->size->n_kids; i++) {
        const nd_syn_val *z = &b->size->kids[i];
        if (!has_null(&s->config, z->key))
            return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: sizes.%s.%s must be a config key whose value is ~",
                           s->path, z->line, b->size->key, z->key);
    }
    return 0;
}

static json_t *config(bctx *b) {
    const nd_synth_spec *s = b->s;
    json_t *c = json_object();
    for (int i = 0; c && i < s->config.n_kids; i++) {
        const nd_syn_val *v = &s->config.kids[i];
        json_t *j = to_json(b, v);
        if (!j) { json_decref(c); return NULL; }
        json_object_set_new(c, v->key, j);
    }
    return c;
}

/* ---- tensors -------------------------------------------------------------------------- */

/* tmpl with {E} replaced by x (x < 0: left as it is), after prefix */
static int name_of(bctx *b, const nd_syn_entry *x, const char *prefix, int ex, char *out, size_t cap) {
    const char *at = ex >= 0 ? strstr(x->name, "{E}") : NULL;
    int n = at ? snprintf(out, cap, "%s%.*s%d%s", prefix, (int)(at - x->name), x->name, ex, at + 3)
               : snprintf(out, cap, "%s%s", prefix, x->name);
    if (n < 0 || (size_t)n >= cap)
        return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: name '%s' is too long", b->s->path, x->line, x->name);
    return 0;
}

typedef struct fuse_map {
    char name[8][32];
    int id[8], n;
} fuse_map;

static int fuse_id(bctx *b, sy_plan *pl, fuse_map *f, const nd_syn_entry *x) {
    if (!x->fuse[0]) return -1;
    for (int i = 0; i < f->n; i++)
        if (!strcmp(f->name[i], x->fuse)) return f->id[i];
    if (f->n == 8) return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: more than 8 fused groups in a layer", b->s->path, x->line), -2;
    snprintf(f->name[f->n], sizeof f->name[0], "%s", x->fuse);
    f->id[f->n] = sy_new_fuse(pl);
    return f->id[f->n++];
}

/* PATH[.SUB].bias [n], BF16, 0 + std N(0,1) */
static void add_bias(sy_plan *pl, const char *path, const char *sub, int64_t n, double std) {
    char nm[SY_NAME + 32];
    snprintf(nm, sizeof nm, "%s%s%s.bias", path, sub[0] ? "." : "", sub);
    sy_add(pl, nm, ND_DT_BF16, 1, n, 1, SY_INIT_NORMAL, 0.0, std);
}

static void mlp_biases(sy_plan *pl, const char *path, int64_t I, int64_t D, double std) {
    add_bias(pl, path, "gate_proj", I, std);
    add_bias(pl, path, "up_proj", I, std);
    add_bias(pl, path, "down_proj", D, std);
}

/* the entry of the recipe's synth: section each tensor came from (errors after planning name it) */
static void tag_lines(sy_plan *pl, size_t from, int line) {
    for (size_t i = from; pl->n != (size_t)-1 && i < pl->n; i++) pl->p[i].line = line;
}

static int by_name(const void *a, const void *b) {
    return strcmp((*(const sy_param *const *)a)->name, (*(const sy_param *const *)b)->name);
}

/* one tensor name once: an entry that repeats another's (or a built-in tensor's) is the recipe's mistake */
static int no_twice(const sy_plan *pl, const char *path, nd_err *e) {
    if (pl->n == (size_t)-1 || pl->n < 2) return 0;
    const sy_param **v = malloc(pl->n * sizeof *v);
    if (!v) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory");
    for (size_t i = 0; i < pl->n; i++) v[i] = &pl->p[i];
    qsort(v, pl->n, sizeof *v, by_name);
    int rc = 0;
    for (size_t i = 1; !rc && i < pl->n; i++) {
        if (strcmp(v[i - 1]->name, v[i]->name)) continue;
        const sy_param *late = v[i - 1]->line > v[i]->line ? v[i - 1] : v[i], *early = late == v[i] ? v[i - 1] : v[i];
        char also[48];
        if (early->line) snprintf(also, sizeof also, "also by line %d", early->line);
        else snprintf(also, sizeof also, "a tensor synth makes itself");
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: tensor %s is made twice (%s)", path, late->line, late->name, also);
    }
    free(v);
    return rc;
}

static int add_entry(bctx *b, sy_plan *pl, const nd_syn_entry *x, const char *prefix, int layer, int64_t D, fuse_map *f) {
    char nm[SY_NAME + 16], path[SY_NAME];
    int64_t n, k, I, cnt;
    const double bs = x->bias;
    switch (x->kind) {
    case ND_SYE_NORM:
        ND_TRY(ev_dim(b, &x->out, "dim", &n));
        ND_TRY(name_of(b, x, prefix, -1, path, sizeof path));
        snprintf(nm, sizeof nm, "%s.weight", path);
        sy_add_norm(pl, nm, n);
        return 0;
    case ND_SYE_LINEAR: {
        ND_TRY(ev_dim(b, &x->out, "out", &n));
        ND_TRY(ev_dim(b, &x->in, "in", &k));
        ND_TRY(name_of(b, x, prefix, -1, path, sizeof path));
        int fuse = fuse_id(b, pl, f, x);
        if (fuse < -1) return ND_EXIT_BADINPUT;
        const sy_qkind q = x->quant == ND_SYQ_NVFP4 ? SY_Q_NVFP4 : x->quant == ND_SYQ_FP8_BLOCK ? SY_Q_FP8_BLOCK : SY_Q_NONE;
        sy_add_linear(pl, path, n, k, x->gain, q, fuse, layer, -1);
        if (bs > 0) add_bias(pl, path, "", n, bs);
        return 0;
    }
    case ND_SYE_MLP:
        ND_TRY(ev_dim(b, &x->inter, "inter", &I));
        ND_TRY(name_of(b, x, prefix, -1, path, sizeof path));
        sy_add_mlp(pl, path, I, D, layer, -1);
        if (bs > 0) mlp_biases(pl, path, I, D, bs);
        return 0;
    case ND_SYE_EXPERTS:
        ND_TRY(ev_dim(b, &x->inter, "inter", &I));
        ND_TRY(ev(b, &x->count, "count", &cnt));
        for (int64_t ex = 0; ex < cnt; ex++) {
            ND_TRY(name_of(b, x, prefix, (int)ex, path, sizeof path));
            sy_add_mlp(pl, path, I, D, layer, (int)ex);
            if (bs > 0) mlp_biases(pl, path, I, D, bs);
        }
        return 0;
    case ND_SYE_TENSOR: {
        int64_t d[3] = {1, 1, 1}, sq = 0;
        for (int i = 0; i < x->ndim; i++) ND_TRY(ev_dim(b, &x->shape[i], "shape", &d[i]));
        /* 2^34 values at most (the largest tensor of a full-size DeepSeek-V4, its embedding, is ~2^30) */
        if ((double)d[0] * (double)d[1] * (double)d[2] > (double)((int64_t)1 << 34))
            return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: tensor '%s' of %lld x %lld x %lld values: more than 2^34 in one "
                           "tensor", b->s->path, x->line, x->name, (long long)d[0], (long long)d[1], (long long)d[2]);
        if (x->std_sqrt.text[0]) ND_TRY(ev(b, &x->std_sqrt, "std_sqrt", &sq));
        ND_TRY(name_of(b, x, prefix, -1, nm, sizeof nm));
        const double std = x->std_sqrt.text[0] ? x->std / sqrt((double)sq) : x->std;
        const nd_dtype dt = !strcmp(x->dtype, "F32") ? ND_DT_F32 : !strcmp(x->dtype, "I32") ? ND_DT_I32 : ND_DT_BF16;
        const sy_init init = x->init == ND_SYI_CONST ? SY_INIT_CONST : x->init == ND_SYI_TID2EID ? SY_INIT_TID2EID
                           : x->init == ND_SYI_HC_BASE ? SY_INIT_HC_BASE : SY_INIT_NORMAL;
        const double sd = x->init == ND_SYI_CONST || x->init == ND_SYI_TID2EID ? 0.0 : std;
        int64_t aux = 0;
        if (x->aux.text[0]) ND_TRY(ev(b, &x->aux, "aux", &aux));
        if (x->init == ND_SYI_TID2EID && aux < d[1])
            return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: tensor '%s': aux '%s' (%lld experts) is fewer than its %lld "
                           "columns", b->s->path, x->line, x->name, x->aux.text, (long long)aux, (long long)d[1]);
        if (x->init == ND_SYI_HC_BASE && aux < 2)
            return nd_fail(b->e, ND_EXIT_BADINPUT, "%s:%d: synth: tensor '%s': aux '%s' must be at least 2 streams", b->s->path,
                           x->line, x->name, x->aux.text);
        sy_param *p = x->ndim == 3 ? sy_add3(pl, nm, dt, d[0], d[1], d[2], init, x->mean, sd)
                                   : sy_add(pl, nm, dt, x->ndim, d[0], d[1], init, x->mean, sd);
        if (p && x->aux.text[0]) p->aux = (int)aux;
        return 0;
    }
    }
    return nd_fail(b->e, ND_EXIT_INTERNAL, "synth: unknown entry kind %d", (int)x->kind);
}

static void set_list(char (*text)[64], const char **ptrs, char (*src)[64], int n) {
    for (int i = 0; i < n; i++) { memcpy(text[i], src[i], 64); ptrs[i] = text[i]; }
    ptrs[n] = NULL;
}

int sy_build_recipe(sy_plan *pl, const nd_recipe *r, nd_synth_size size, int layers, int experts, nd_err *e) {
    const nd_synth_spec *s = r->synth;
    if (!s) return nd_fail(e, ND_EXIT_BADINPUT, "%s: recipe '%s' has no synth: section", r->path, r->name);
    if (s->sizes[size].kind != ND_SYV_MAP)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: recipe '%s' has no size '%s' (sizes:)", s->path, s->line, r->name,
                       SIZE_NAMES[size]);
    bctx b = {s, &s->sizes[size], -1, -1, 0, -1, 0, e};
    ND_TRY(check_size_keys(&b));
    if (experts > 0) {
        int64_t k = 0;
        if (!s->experts_key[0])
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: synth: --experts needs the recipe's synth: experts: {count, top_k} "
                           "(recipe '%s' has none)", s->path, r->name);
        ND_TRY(key_int(&b, s->top_k_key, &k));
        if (experts < k) return nd_fail(e, ND_EXIT_BADINPUT, "synth: --experts %d is fewer than top-k %d", experts, (int)k);
        b.experts = experts;
    }
    int64_t L = 0, vocab = 0, D = 0;
    ND_TRY(key_int(&b, "num_hidden_layers", &L));
    if (layers > 0) L = layers;
    b.layers = L;
    if (s->dense_layers[0]) {
        int64_t k = 0;
        ND_TRY(key_int(&b, s->dense_layers, &k));
        /* keep at least one MoE layer when --layers cuts the model short */
        b.dense = k < L ? k : (L > 1 ? L - 1 : 0);
    }
    if (s->hash_layers[0]) {
        int64_t k = 0;
        ND_TRY(key_int(&b, s->hash_layers, &k));
        b.hash = k < L ? k : L; /* a model cut to fewer layers than its hash layers is all hash layers */
    }
    if (s->lt_every.text[0]) {
        int64_t k;
        ND_TRY(ev(&b, &s->lt_every, "layer_types every", &k));
        if (k < 1) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: layer_types every '%s' must be at least 1", s->path,
                                  s->lt_every.line, s->lt_every.text);
        b.every = k;
    }
    ND_TRY(key_int(&b, "vocab_size", &vocab));
    ND_TRY(key_int(&b, "hidden_size", &D));

    snprintf(pl->recipe_name, sizeof pl->recipe_name, "%s", r->name);
    set_list(pl->list_text[0], pl->list_ptr[0], (char (*)[64])s->ignore, s->n_ignore);
    set_list(pl->list_text[1], pl->list_ptr[1], (char (*)[64])s->exclude, s->n_exclude);
    sy_plan_begin(pl, pl->recipe_name, L, vocab, D, pl->list_ptr[0], pl->list_ptr[1]);
    char prefix[48];
    for (int l = 0; l < (int)L; l++) {
        snprintf(prefix, sizeof prefix, "model.layers.%d.", l);
        const char *kind = !s->dense_layers[0] ? "" : l < b.dense ? "dense" : "moe";
        const char *type = lt_of(&b, l), *route = !s->hash_layers[0] ? "" : l < b.hash ? "hash" : "scored";
        fuse_map f = {0};
        for (int i = 0; i < s->n_layer; i++) {
            const nd_syn_entry *x = &s->layer[i];
            if (x->when[0] && strcmp(x->when, kind) && strcmp(x->when, type) && strcmp(x->when, route)) continue;
            const size_t n0 = pl->n;
            ND_TRY(add_entry(&b, pl, x, prefix, l, D, &f));
            tag_lines(pl, n0, x->line);
        }
    }
    fuse_map f = {0};
    for (int i = 0; i < s->n_tail; i++) {
        const size_t n0 = pl->n;
        ND_TRY(add_entry(&b, pl, &s->tail[i], "", -1, D, &f));
        tag_lines(pl, n0, s->tail[i].line);
    }
    json_t *c = config(&b);
    if (!c) {
        sy_add_norm(pl, "model.norm.weight", D); /* the plan stays whole for sy_plan_free */
        return e->code ? e->code : ND_EXIT_INTERNAL;
    }
    ND_TRY(sy_plan_end(pl, D, c, e));
    return no_twice(pl, s->path, e);
}

/* ---- which recipes synth knows -------------------------------------------------------- */

static int cmp_name(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

void nd_synth_recipe_names(char *buf, size_t cap) {
    char names[64][64];
    int n = 0;
    const char *dir = nd_recipe_dir();
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d)) && n < 64) {
        size_t len = strlen(de->d_name);
        if (len < 6 || len - 5 >= 64 || strcmp(de->d_name + len - 5, ".yaml") || !strncmp(de->d_name, "stack-", 6) ||
            !strncmp(de->d_name, "tolerances", 10)) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        nd_recipe *r = NULL;
        nd_err ignore = {0};
        if (nd_recipe_load(path, &r, &ignore)) continue;
        if (r->synth) snprintf(names[n++], 64, "%s", r->name);
        nd_recipe_free(r);
    }
    if (d) closedir(d);
    qsort(names, (size_t)n, sizeof names[0], cmp_name);
    size_t o = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < n && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, "%s%s", i ? ", " : "", names[i]);
}

int nd_synth_recipe_load(const char *name, nd_recipe **out, nd_err *e) {
    char known[1024];
    *out = NULL;
    if (!name || !name[0]) {
        nd_synth_recipe_names(known, sizeof known);
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: no recipe given (known: %s)", known);
    }
    nd_recipe *r = NULL;
    int rc = nd_recipe_load(name, &r, e);
    if (rc) {
        /* a recipe that exists but does not load says so itself; a missing name lists the known ones */
        char path[1024];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s.yaml", nd_recipe_dir(), name);
        if (rc != ND_EXIT_BADINPUT || strchr(name, '/') || strstr(name, ".yaml") || !stat(path, &st)) return rc;
        nd_synth_recipe_names(known, sizeof known);
        return nd_wrap(e, "synth: unknown recipe '%s' (known: %s)", name, known);
    }
    if (!r->synth) {
        nd_synth_recipe_names(known, sizeof known);
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: recipe '%s' has no synth: section, so synth cannot build it (known: %s; "
                     "docs/synth.md says how to add one)", r->path, r->name, known);
        nd_recipe_free(r);
        return rc;
    }
    *out = r;
    return 0;
}
