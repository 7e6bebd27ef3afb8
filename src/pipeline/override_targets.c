/* override_targets.c — every --override names something the run has, checked before the replay
 * (issue 36 item 9): a checkpoint tensor (kv scales, ...), or <prefix>.<knob> where the prefix is a
 * checkpoint module, a stage of the recipe in any layer, or a row below such a stage (a composite
 * op's projections). A typo is exit 2 with the nearest name,
 * not a warning after the whole trace ran. Under a recipe naming (canonical names differ from the
 * stored ones) the check is left to the run's own "matched nothing" warning. */
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "util/suggest.h"

typedef struct names { const char **v; char **own; size_t n, n_own, cap; } names;

static int add(names *s, const char *v, int copy) {
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 256;
        const char **nv = realloc(s->v, cap * sizeof *nv);
        char **no = realloc(s->own, cap * sizeof *no);
        if (nv) s->v = nv;
        if (no) s->own = no;
        if (!nv || !no) return -1;
        s->cap = cap;
    }
    if (copy) {
        char *c = strdup(v);
        if (!c) return -1;
        s->own[s->n_own++] = c;
        v = c;
    }
    s->v[s->n++] = v;
    return 0;
}

static void names_free(names *s) {
    for (size_t i = 0; i < s->n_own; i++) free(s->own[i]);
    free(s->own);
    free(s->v);
}

static int add_stages(names *s, const nd_stage_def *d, int nd, int layers) {
    char nm[256];
    for (int i = 0; i < nd; i++)
        for (int l = 0; l < (layers ? layers : 1); l++) {
            nd_expand(d[i].name, layers ? l : -1, 0, nm, sizeof nm);
            if (add(s, nm, 1)) return -1;
        }
    return 0;
}

/* The KV-cache scales each kv_cache stage reads, present or not: an absent scale (the stack then
 * uses 1.0) can be given a value by name, as the kv_scale_calibrated repair does (ops_kvcache.c
 * names it the way its format stores it) */
static int add_kv_scales(names *s, const nd_stage_def *d, int nd, int layers) {
    static const char *const SUFFIX[] = {".k_scale", ".v_scale", ".k_proj.k_scale", ".v_proj.v_scale"};
    char mod[256], nm[320];
    for (int i = 0; i < nd; i++) {
        if (strcmp(d[i].op, "kv_cache") || !d[i].module[0]) continue;
        for (int l = 0; l < (layers ? layers : 1); l++) {
            nd_expand(d[i].module, layers ? l : -1, 0, mod, sizeof mod);
            for (size_t k = 0; k < sizeof SUFFIX / sizeof SUFFIX[0]; k++) {
                snprintf(nm, sizeof nm, "%s%s", mod, SUFFIX[k]);
                if (add(s, nm, 1)) return -1;
            }
        }
    }
    return 0;
}

int nd_override_targets_check(const nd_run *r, const nd_stack *st, nd_err *e) {
    if (!st->n_ov || r->naming) return 0;
    names s = {0};
    int rc = 0;
    for (size_t i = 0; !rc && i < nd_ckpt_module_count(r->ck); i++) rc = add(&s, nd_ckpt_module_path(r->ck, i), 0);
    const size_t n_mod = s.n; /* modules first, then the stage names */
    const int layers = (int)r->cfg->num_hidden_layers;
    if (!rc) rc = add_stages(&s, r->rc->prologue, r->rc->n_prologue, 0);
    if (!rc) rc = add_stages(&s, r->rc->layer, r->rc->n_layer, layers);
    if (!rc) rc = add_stages(&s, r->rc->epilogue, r->rc->n_epilogue, 0);
    names kv = {0};
    if (!rc) rc = add_kv_scales(&kv, r->rc->layer, r->rc->n_layer, layers);
    if (rc) { names_free(&s); names_free(&kv); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
    for (int i = 0; !rc && i < st->n_ov; i++) {
        const char *name = st->ov[i].name, *dot = strrchr(name, '.');
        if (nd_ckpt_find(r->ck, name)) continue;
        int kv_scale = 0;
        for (size_t k = 0; k < kv.n && !kv_scale; k++) kv_scale = !strcmp(kv.v[k], name);
        if (kv_scale) continue;
        char prefix[sizeof st->ov[i].name];
        snprintf(prefix, sizeof prefix, "%.*s", dot ? (int)(dot - name) : (int)strlen(name), name);
        /* a composite op's rows (an mlp stage's down_proj, an expert's projections) are named below
         * their stage: a stage's name followed by '.' is as far as the recipe can tell */
        int found = 0;
        for (size_t k = 0; k < s.n && !found; k++) {
            const size_t l = strlen(s.v[k]);
            found = !strcmp(s.v[k], prefix) || (k >= n_mod && !strncmp(prefix, s.v[k], l) && prefix[l] == '.');
        }
        if (found) continue;
        const char *best = nd_suggest(prefix, s.v, s.n);
        rc = nd_fail(e, ND_EXIT_BADINPUT, "--override %s: %s has no module, stage or tensor named '%s'%s%s%s "
                     "(names: a checkpoint tensor, or <module or stage>.<knob>)", name, nd_ckpt_dir(r->ck), prefix,
                     best ? " (did you mean '" : "", best ? best : "", best ? "'?)" : "");
    }
    names_free(&s);
    names_free(&kv);
    return rc;
}
