/* dense_experts.c — a checkpoint's fused dense expert tensors as per-expert linear modules.
 *
 * transformers saves gpt-oss's experts (BF16) fused, one tensor per projection for all experts of a
 * layer, transposed (GptOssExperts computes `x @ gate_up_proj[e]`):
 *   P.gate_up_proj       [E, H, 2I]   P.gate_up_proj_bias  [E, 2I]
 *   P.down_proj          [E, I, H]    P.down_proj_bias     [E, H]
 * Each expert becomes a plain linear, weight [out, in], named as the other layouts name it:
 *   P.<e>.gate_up_proj.weight [2I, H]  (.bias [2I])    P.<e>.down_proj.weight [H, I]  (.bias [H])
 * The order of gate_up's outputs is kept (gpt-oss interleaves gate and up; the recipe says so).
 * The weights are transposed copies made when the checkpoint is opened (held until it is closed);
 * the biases are views into the file. Only a pair gate_up_proj + down_proj of matching shapes is
 * read so; a lone one, or shapes that disagree, is bad input naming both.
 *
 * transformers 5 keeps the experts of Qwen2/3-MoE, Mixtral, GLM-4.x MoE, ... fused the other way
 * round, and writes them so with save_pretrained(save_original_format=False):
 *   P.gate_up_proj [E, 2I, H] (gate = the first I rows)   P.down_proj [E, H, I]
 * (out-major: `linear(x, gate_up_proj[e]).chunk(2)`). Those become views into the file, no copy:
 *   P.<e>.gate_proj.weight [I, H]   P.<e>.up_proj.weight [I, H]   P.<e>.down_proj.weight [H, I]
 * The layout is told by hidden_size: down_proj [E, H, I] is out-major, [E, I, H] gpt-oss's; where
 * I = H, gate_up_proj's last dimension (H out-major, 2I = 2H gpt-oss's) tells.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt_internal.h"

static int tv_cmp(const void *a, const void *b) {
    return strcmp((*(const nd_tview *const *)a)->name, (*(const nd_tview *const *)b)->name);
}

static int dense(const nd_tview *t) { return t->dtype == ND_DT_BF16 || t->dtype == ND_DT_F16 || t->dtype == ND_DT_F32; }

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static const char *shape(const nd_tview *t, char *buf, size_t cap) {
    size_t o = (size_t)snprintf(buf, cap, "%s [", nd_dtype_str(t->dtype));
    for (int i = 0; i < t->ndim && o < cap; i++) o += (size_t)snprintf(buf + o, cap - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (o < cap) snprintf(buf + o, cap - o, "]");
    return buf;
}

/* one projection of all experts: the transposed weights and the views */
typedef struct proj { const nd_tview *w, *b; char prefix[400]; const char *name; int out_major; } proj;

static void *owned(nd_ckpt *c, size_t bytes, nd_err *e) {
    void **no = realloc(c->owned, (c->n_owned + 1) * sizeof *no);
    void *p = no ? malloc(bytes ? bytes : 1) : NULL;
    if (no) c->owned = no;
    if (!p) { nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir); return NULL; }
    c->owned[c->n_owned++] = p;
    return p;
}

/* one view [rows, cols] at byte offset off of w, named P.<x>.<name>.weight */
static int view_of(nd_ckpt *c, const proj *p, int64_t x, const char *name, int64_t rows, int64_t cols, size_t off,
                   nd_tview *views, size_t *nv, nd_err *e) {
    char *nm = owned(c, strlen(p->prefix) + strlen(name) + 40, e);
    if (!nm) return e->code;
    sprintf(nm, "%s.%lld.%s.weight", p->prefix, (long long)x, name);
    nd_tview *v = &views[(*nv)++];
    memset(v, 0, sizeof *v);
    v->name = nm;
    v->dtype = p->w->dtype;
    v->ndim = 2;
    v->shape[0] = rows;
    v->shape[1] = cols;
    v->numel = rows * cols;
    v->nbytes = (size_t)v->numel * nd_dtype_size(v->dtype);
    v->data = (const unsigned char *)p->w->data + off;
    v->file = p->w->file;
    return 0;
}

/* transformers 5's out-major layout: slices of the stored tensor, gate_up split into its halves */
static int expand_out_major(nd_ckpt *c, const proj *p, nd_tview *views, size_t *nv, nd_err *e) {
    const nd_tview *w = p->w;
    const int64_t E = w->shape[0], R = w->shape[1], K = w->shape[2];
    const size_t es = nd_dtype_size(w->dtype), per = (size_t)(R * K) * es;
    const int gu = !strcmp(p->name, "gate_up_proj");
    for (int64_t x = 0; x < E; x++) {
        if (gu) {
            ND_TRY(view_of(c, p, x, "gate_proj", R / 2, K, (size_t)x * per, views, nv, e));
            ND_TRY(view_of(c, p, x, "up_proj", R / 2, K, (size_t)x * per + per / 2, views, nv, e));
        } else ND_TRY(view_of(c, p, x, p->name, R, K, (size_t)x * per, views, nv, e));
    }
    return 0;
}

/* appends the views of one projection to views[*nv]; names in names */
static int expand(nd_ckpt *c, const proj *p, nd_tview *views, size_t *nv, nd_err *e) {
    if (p->out_major) return expand_out_major(c, p, views, nv, e);
    const nd_tview *w = p->w;
    const int64_t E = w->shape[0], K = w->shape[1], N = w->shape[2];
    const size_t es = nd_dtype_size(w->dtype);
    unsigned char *tw = owned(c, (size_t)(E * K * N) * es, e);
    if (!tw) return e->code;
    const unsigned char *src = w->data;
    for (int64_t x = 0; x < E; x++) /* [K, N] -> [N, K] */
        for (int64_t k = 0; k < K; k++)
            for (int64_t n = 0; n < N; n++)
                memcpy(tw + (size_t)((x * N + n) * K + k) * es, src + (size_t)((x * K + k) * N + n) * es, es);
    for (int64_t x = 0; x < E; x++)
        for (int j = 0; j < (p->b ? 2 : 1); j++) {
            char *name = owned(c, strlen(p->prefix) + strlen(p->name) + 40, e);
            if (!name) return e->code;
            sprintf(name, "%s.%lld.%s.%s", p->prefix, (long long)x, p->name, j ? "bias" : "weight");
            nd_tview *v = &views[(*nv)++];
            memset(v, 0, sizeof *v);
            v->name = name;
            v->dtype = j ? p->b->dtype : w->dtype;
            v->ndim = j ? 1 : 2;
            v->shape[0] = N;
            v->shape[1] = j ? 0 : K;
            v->numel = j ? N : N * K;
            v->nbytes = (size_t)v->numel * nd_dtype_size(v->dtype);
            v->data = j ? (const void *)((const unsigned char *)p->b->data + (size_t)x * v->nbytes)
                        : (const void *)(tw + (size_t)x * v->nbytes);
            v->file = j ? p->b->file : w->file;
        }
    return 0;
}

static int find_proj(nd_ckpt *c, const char *prefix, const char *name, proj *p, nd_err *e) {
    char nm[600], s1[96], s2[96];
    memset(p, 0, sizeof *p);
    snprintf(p->prefix, sizeof p->prefix, "%s", prefix);
    p->name = name;
    snprintf(nm, sizeof nm, "%s.%s", prefix, name);
    p->w = nd_ckpt_find(c, nm);
    if (!p->w || p->w->ndim != 3 || !dense(p->w))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: fused experts '%s': missing or malformed tensor '%s'%s%s (expected a "
                       "BF16/F16/F32 [experts, in, out] tensor beside gate_up_proj)", c->dir, prefix, nm,
                       p->w ? ": " : "", p->w ? shape(p->w, s1, sizeof s1) : "");
    snprintf(nm, sizeof nm, "%s.%s_bias", prefix, name);
    p->b = nd_ckpt_find(c, nm);
    if (p->b && (!dense(p->b) || p->b->ndim != 2 || p->b->shape[0] != p->w->shape[0] || p->b->shape[1] != p->w->shape[2]))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': %s, expected [%lld, %lld] for %s %s", p->b->file, p->b->name,
                       shape(p->b, s1, sizeof s1), (long long)p->w->shape[0], (long long)p->w->shape[2], p->w->name,
                       shape(p->w, s2, sizeof s2));
    return 0;
}

int nd_ckpt_expand_dense_experts(nd_ckpt *c, nd_err *e) {
    proj *ps = NULL;
    size_t np = 0, nviews = 0;
    int rc = 0;
    for (size_t i = 0; i < c->n_tensors && !rc; i++) {
        const nd_tview *t = c->tensors[i];
        if (!ends_with(t->name, ".experts.gate_up_proj") || t->ndim != 3 || !dense(t)) continue;
        char prefix[400];
        size_t pl = strlen(t->name) - strlen(".gate_up_proj");
        if (pl >= sizeof prefix) continue;
        memcpy(prefix, t->name, pl);
        prefix[pl] = 0;
        proj *nps = realloc(ps, (np + 2) * sizeof *ps);
        if (!nps) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir); break; }
        ps = nps;
        if ((rc = find_proj(c, prefix, "gate_up_proj", &ps[np], e)) || (rc = find_proj(c, prefix, "down_proj", &ps[np + 1], e))) break;
        const nd_tview *gu = ps[np].w, *dn = ps[np + 1].w;
        char s1[96], s2[96];
        const int64_t H = c->cfg.hidden_size;
        /* out-major (transformers 5): gate_up [E, 2I, H], down [E, H, I]; else gate_up [E, H, 2I], down [E, I, H] */
        const int om = dn->shape[1] == H && dn->shape[2] != H ? 1 : dn->shape[2] == H && dn->shape[1] != H ? 0 : gu->shape[2] == H;
        const int ok = om ? dn->shape[0] == gu->shape[0] && gu->shape[2] == H && dn->shape[1] == H && gu->shape[1] == 2 * dn->shape[2]
                          : dn->shape[0] == gu->shape[0] && dn->shape[2] == gu->shape[1] && 2 * dn->shape[1] == gu->shape[2];
        if (!ok || (om && (ps[np].b || ps[np + 1].b))) {
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: fused experts '%s': %s is %s and %s is %s; expected [E, H, 2I] and "
                         "[E, I, H] (gpt-oss), or [E, 2I, H] and [E, H, I] without biases (transformers 5), H = hidden_size %lld",
                         c->dir, prefix, gu->name, shape(gu, s1, sizeof s1), dn->name, shape(dn, s2, sizeof s2), (long long)H);
            break;
        }
        ps[np].out_major = ps[np + 1].out_major = om;
        /* out-major gate_up gives two views per expert (gate and up) */
        for (int j = 0; j < 2; j++) nviews += (size_t)ps[np + j].w->shape[0] * (om ? (j ? 1 : 2) : ps[np + j].b ? 2 : 1);
        np += 2;
    }
    nd_tview *views = !rc && nviews ? owned(c, nviews * sizeof *views, e) : NULL;
    if (!rc && nviews && !views) rc = e->code;
    size_t nv = 0;
    for (size_t k = 0; k < np && !rc; k++) rc = expand(c, &ps[k], views, &nv, e);
    free(ps);
    if (rc || !nv) return rc;
    const nd_tview **nt = realloc(c->tensors, (c->n_tensors + nv) * sizeof *nt);
    if (!nt) return nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir);
    c->tensors = nt;
    for (size_t i = 0; i < nv; i++) c->tensors[c->n_tensors + i] = &views[i];
    c->n_tensors += nv;
    qsort(c->tensors, c->n_tensors, sizeof *c->tensors, tv_cmp);
    for (size_t i = 1; i < c->n_tensors; i++)
        if (strcmp(c->tensors[i - 1]->name, c->tensors[i]->name) == 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s' is stored and also a slice of the fused experts", c->dir,
                           c->tensors[i]->name);
    return 0;
}
