/* synth_plan.c — building plans and drawing the values of one planned tensor. */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <jansson.h>
#include "numerics/nd_numerics.h"
#include "synth/synth_plan.h"
#include "synth/synth_rng.h"
#include "recipe/recipe.h"

void sy_plan_free(sy_plan *pl) {
    free(pl->p);
    if (pl->config) json_decref((json_t *)pl->config);
    memset(pl, 0, sizeof *pl);
}

sy_param *sy_add(sy_plan *pl, const char *name, nd_dtype dt, int ndim, int64_t d0, int64_t d1,
                 sy_init init, double a, double b) {
    if (pl->n == (size_t)-1) return NULL;
    if (pl->n == pl->cap) {
        size_t nc = pl->cap ? pl->cap * 2 : 256;
        sy_param *np = realloc(pl->p, nc * sizeof *np);
        if (!np) { pl->n = (size_t)-1; return NULL; }
        pl->p = np;
        pl->cap = nc;
    }
    sy_param *p = &pl->p[pl->n++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->dtype = dt;
    p->ndim = ndim;
    p->shape[0] = d0;
    p->shape[1] = ndim > 1 ? d1 : 1;
    p->shape[2] = 1;
    p->init = init;
    p->a = a;
    p->b = b;
    p->fuse = -1;
    p->layer = -1;
    p->expert = -1;
    p->in_amax = NAN;
    p->w_amax = -1.0f; /* not computed yet */
    return p;
}

sy_param *sy_add3(sy_plan *pl, const char *name, nd_dtype dt, int64_t d0, int64_t d1, int64_t d2,
                  sy_init init, double a, double b) {
    sy_param *p = sy_add(pl, name, dt, 2, d0, d1, init, a, b);
    if (p) { p->ndim = 3; p->shape[2] = d2; }
    return p;
}

sy_param *sy_add_linear(sy_plan *pl, const char *path, int64_t n, int64_t k, double gain, sy_qkind q,
                        int fuse, int layer, int expert) {
    char name[SY_NAME + 8];
    snprintf(name, sizeof name, "%s.weight", path);
    sy_param *p = sy_add(pl, name, ND_DT_BF16, 2, n, k, SY_INIT_NORMAL, 0.0, gain / sqrt((double)k));
    if (!p) return NULL;
    snprintf(p->module, sizeof p->module, "%s", path);
    p->quant = q;
    p->fuse = fuse;
    p->layer = layer;
    p->expert = expert;
    const char *dot = strrchr(path, '.');
    const char *leaf = dot ? dot + 1 : path;
    if (!strcmp(leaf, "gate_proj") || !strcmp(leaf, "up_proj") || !strcmp(leaf, "down_proj"))
        snprintf(p->role, sizeof p->role, "%s", leaf);
    return p;
}

sy_param *sy_add_norm(sy_plan *pl, const char *name, int64_t n) {
    return sy_add(pl, name, ND_DT_BF16, 1, n, 1, SY_INIT_NORMAL, 1.0, 0.02);
}

int sy_new_fuse(sy_plan *pl) { return pl->next_fuse++; }

void sy_add_mlp(sy_plan *pl, const char *prefix, int64_t I, int64_t D, int layer, int expert) {
    char nm[SY_NAME];
    int fuse = sy_new_fuse(pl);
    snprintf(nm, sizeof nm, "%s.gate_proj", prefix);
    sy_add_linear(pl, nm, I, D, 1.0, SY_Q_NVFP4, fuse, layer, expert);
    snprintf(nm, sizeof nm, "%s.up_proj", prefix);
    sy_add_linear(pl, nm, I, D, 1.0, SY_Q_NVFP4, fuse, layer, expert);
    snprintf(nm, sizeof nm, "%s.down_proj", prefix);
    sy_add_linear(pl, nm, D, I, 0.5, SY_Q_NVFP4, -1, layer, expert);
}

void sy_plan_begin(sy_plan *pl, const char *recipe, int64_t layers, int64_t vocab, int64_t hidden,
                   const char *const *ct_ignore, const char *const *mo_exclude) {
    pl->n_layers = (int)layers;
    pl->vocab = vocab;
    pl->recipe = recipe;
    pl->ct_ignore = ct_ignore;
    pl->mo_exclude = mo_exclude;
    sy_add(pl, "model.embed_tokens.weight", ND_DT_BF16, 2, vocab, hidden, SY_INIT_NORMAL, 0.0, 0.3);
}

int sy_plan_end(sy_plan *pl, int64_t hidden, void *config, nd_err *e) {
    sy_add_norm(pl, "model.norm.weight", hidden);
    sy_add_linear(pl, "lm_head", pl->vocab, hidden, 1.0, SY_Q_NONE, -1, -1, -1);
    pl->config = config;
    if (!config) return nd_fail(e, ND_EXIT_INTERNAL, "synth: cannot build the %s config", pl->recipe);
    return 0;
}

int sy_plan_ok(const sy_plan *pl, nd_err *e) {
    if (pl->n == (size_t)-1) return nd_fail(e, ND_EXIT_INTERNAL, "synth: out of memory while planning the model");
    for (size_t i = 0; i < pl->n; i++) {
        const sy_param *p = &pl->p[i];
        if (p->quant == SY_Q_NVFP4 && p->shape[1] % ND_NVFP4_BLOCK) {
            if (p->line > 0)
                return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: %s is NVFP4 with K = %lld, not a multiple of 16 (its "
                               "block size): give 'in' a multiple of 16 or quant: none", pl->recipe_name, p->line, p->name,
                               (long long)p->shape[1]);
            return nd_fail(e, ND_EXIT_INTERNAL, "synth: %s: K = %lld is not a multiple of 16", p->name,
                           (long long)p->shape[1]);
        }
    }
    return 0;
}

size_t sy_param_numel(const sy_param *p) {
    return (size_t)p->shape[0] * (size_t)(p->ndim > 1 ? p->shape[1] : 1) * (size_t)(p->ndim > 2 ? p->shape[2] : 1);
}
size_t sy_param_bytes(const sy_param *p) { return sy_param_numel(p) * nd_dtype_size(p->dtype); }

/* The value of element i of a float-valued parameter (draws from r in element order). */
static double draw(const sy_param *p, sy_rng *r, size_t i) {
    switch (p->init) {
    case SY_INIT_CONST: return p->a;
    case SY_INIT_HC_BASE: {
        size_t n = (size_t)p->aux;
        double base;
        if (i < n) base = -log((double)(n - 1));        /* pre = sigmoid(.) ~ 1/n: the streams average */
        else if (i < 2 * n) base = 0.0;                 /* post = 2 sigmoid(.) ~ 1 */
        else base = ((i - 2 * n) / n == (i - 2 * n) % n) ? 2.0 : 0.0; /* comb: mostly keep own stream */
        return base + p->b * sy_normal(r);
    }
    default: return p->a + p->b * sy_normal(r);
    }
}

int sy_thread_count(void) {
    int threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    const char *cap = getenv("ND_SYNTH_THREADS");
    if (cap && atoi(cap) > 0 && atoi(cap) < threads) threads = atoi(cap);
    return threads > 0 ? threads : 1;
}

typedef struct gen_chunk {
    const sy_param *p;
    sy_rng r;
    void *out;
    size_t lo, hi;
} gen_chunk;

static void *gen_run(void *arg) {
    gen_chunk *c = arg;
    if (c->p->dtype == ND_DT_BF16) {
        uint16_t *o = c->out;
        for (size_t i = c->lo; i < c->hi; i++) o[i] = nd_bf16_from_f32((float)draw(c->p, &c->r, i));
    } else {
        float *o = c->out;
        for (size_t i = c->lo; i < c->hi; i++) o[i] = (float)draw(c->p, &c->r, i);
    }
    return NULL;
}

void sy_generate(const sy_param *p, uint64_t seed, void *out) {
    sy_rng r;
    sy_rng_init(&r, seed, p->name);
    const size_t n = sy_param_numel(p);
    if (p->init == SY_INIT_TID2EID) {
        /* each row: the first k of a Fisher-Yates shuffle of 0..E-1 */
        int32_t *o = out;
        const int64_t k = p->shape[1], ne = p->aux;
        int32_t *perm = malloc((size_t)ne * sizeof *perm);
        if (!perm) { memset(out, 0, n * 4); return; }
        for (int64_t row = 0; row < p->shape[0]; row++) {
            for (int64_t j = 0; j < ne; j++) perm[j] = (int32_t)j;
            for (int64_t j = 0; j < k; j++) {
                int64_t s = j + (int64_t)sy_below(&r, (uint64_t)(ne - j));
                int32_t t = perm[j]; perm[j] = perm[s]; perm[s] = t;
                o[row * k + j] = perm[j];
            }
        }
        free(perm);
        return;
    }
    /* Large tensors in parallel chunks that start on even elements (a Box-Muller pair never
     * straddles two chunks), each with the stream jumped to its first element: the values are the
     * ones a single pass draws, byte for byte. ND_SYNTH_THREADS caps the threads (1: one pass). */
    int threads = n >= (1u << 22) ? sy_thread_count() : 1;
    if (threads > 64) threads = 64;
    if (threads < 1) threads = 1;
    gen_chunk ch[64];
    pthread_t tid[64];
    int started[64] = {0}, nt = 0;
    /* ceil(n / threads), rounded up to even: the chunks cover every element */
    const size_t per = (((n + (size_t)threads - 1) / (size_t)threads) + 1) & ~(size_t)1;
    for (int t = 0; t < threads; t++) {
        const size_t lo = (size_t)t * per;
        if (lo >= n) break;
        ch[t] = (gen_chunk){p, r, out, lo, lo + per < n ? lo + per : n};
        sy_rng_skip(&ch[t].r, lo);
        started[t] = t > 0 && pthread_create(&tid[t], NULL, gen_run, &ch[t]) == 0;
        nt = t + 1;
    }
    if (nt > 0) gen_run(&ch[0]); /* n = 0: no chunk (the recipe loader refuses a zero dimension) */
    for (int t = 1; t < nt; t++) {
        if (started[t]) pthread_join(tid[t], NULL);
        else gen_run(&ch[t]); /* no thread: the same chunk inline */
    }
}

const char *sy_stage_name(const char *m) { return strncmp(m, "model.", 6) ? m : m + 6; }

long sy_find_module(const sy_plan *pl, const char *module) {
    const char *want = sy_stage_name(module);
    for (size_t i = 0; i < pl->n; i++)
        if (pl->p[i].module[0] && !strcmp(sy_stage_name(pl->p[i].module), want)) return (long)i;
    return -1;
}

int sy_build(sy_plan *pl, const char *recipe, nd_synth_size size, int layers, nd_err *e) {
    return sy_build_ex(pl, recipe, size, layers, 0, e);
}

int sy_build_ex(sy_plan *pl, const char *recipe, nd_synth_size size, int layers, int experts, nd_err *e) {
    memset(pl, 0, sizeof *pl);
    nd_recipe *r = NULL;
    ND_TRY(nd_synth_recipe_load(recipe, &r, e));
    int rc = sy_build_recipe(pl, r, size, layers, experts, e);
    if (!rc && (strchr(recipe, '/') || strstr(recipe, ".yaml"))) /* calibration reads the same file */
        snprintf(pl->recipe_name, sizeof pl->recipe_name, "%s", r->path);
    nd_recipe_free(r);
    return rc ? rc : sy_plan_ok(pl, e);
}
