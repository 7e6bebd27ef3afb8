/* mx_experts.c — gpt-oss's fused MXFP4 expert tensors as per-expert linear modules.
 *
 * gpt-oss (and transformers' Mxfp4HfQuantizer when it saves) keeps all experts of a layer in one
 * tensor per projection:
 *   P.<proj>_blocks  U8 [E, N, K/32, 16]  two E2M1 codes a byte, element 2j in the low nibble
 *   P.<proj>_scales  U8 [E, N, K/32]      E8M0 exponents, 2^(b - 127)
 *   P.<proj>_bias    BF16/F32 [E, N]      (optional)
 * (transformers' convert_moe_packed_tensors reads them so). Expert e's slices are contiguous, so
 * each becomes a view without a copy, named as a plain MXFP4 linear:
 *   P.<e>.<proj>.weight        U8 [N, K/2]
 *   P.<e>.<proj>.weight_scale  F8_E8M0 [N, K/32]
 *   P.<e>.<proj>.bias          [N]
 * These views are found by nd_ckpt_find and listed as modules, but not enumerated by nd_ckpt_at
 * (the files hold the fused tensors only). gpt-oss's gate_up_proj keeps gate and up interleaved
 * by row (gate rows 0, 2, 4, ..., up rows 1, 3, 5, ...: GptOssExperts reads gate_up[..., ::2] and
 * gate_up[..., 1::2]); the view keeps that order.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ckpt/ckpt_internal.h"

static int tv_cmp(const void *a, const void *b) {
    return strcmp((*(const nd_tview *const *)a)->name, (*(const nd_tview *const *)b)->name);
}

static int ends_with(const char *s, const char *suf) {
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && strcmp(s + n - m, suf) == 0;
}

static int bad(const nd_tview *t, const char *what, const char *expect, nd_err *e) {
    char sh[96];
    size_t o = 0;
    sh[0] = 0;
    for (int i = 0; i < t->ndim && o < sizeof sh; i++)
        o += (size_t)snprintf(sh + o, sizeof sh - o, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s': %s [%s], %s (expected %s)", t->file, t->name,
                   nd_dtype_str(t->dtype), sh, what, expect);
}

/* One fused projection: its blocks, scales, optional bias; appends 2 or 3 views per expert. */
typedef struct fused { const nd_tview *blocks, *scales, *bias; char prefix[400], proj[64]; } fused;

static int check(const nd_ckpt *c, fused *f, nd_err *e) {
    const nd_tview *b = f->blocks, *s = f->scales;
    if (b->dtype != ND_DT_U8 || b->ndim != 4 || b->shape[3] != 16)
        return bad(b, "not gpt-oss MXFP4 blocks", "U8 [experts, N, K/32, 16]", e);
    if (!s) {
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s' has no E8M0 scales: missing tensor '%s.%s_scales'", nd_ckpt_dir(c),
                       b->name, f->prefix, f->proj);
    }
    char exp[128];
    snprintf(exp, sizeof exp, "U8 [%lld, %lld, %lld] for blocks [%lld, %lld, %lld, 16]", (long long)b->shape[0],
             (long long)b->shape[1], (long long)b->shape[2], (long long)b->shape[0], (long long)b->shape[1],
             (long long)b->shape[2]);
    if ((s->dtype != ND_DT_U8 && s->dtype != ND_DT_F8_E8M0) || s->ndim != 3 || s->shape[0] != b->shape[0] ||
        s->shape[1] != b->shape[1] || s->shape[2] != b->shape[2])
        return bad(s, "MXFP4 scales do not match the blocks", exp, e);
    if (f->bias) {
        snprintf(exp, sizeof exp, "BF16/F16/F32 [%lld, %lld]", (long long)b->shape[0], (long long)b->shape[1]);
        if ((f->bias->dtype != ND_DT_BF16 && f->bias->dtype != ND_DT_F16 && f->bias->dtype != ND_DT_F32) ||
            f->bias->ndim != 2 || f->bias->shape[0] != b->shape[0] || f->bias->shape[1] != b->shape[1])
            return bad(f->bias, "expert biases do not match the blocks", exp, e);
    }
    return 0;
}

static nd_tview view(const nd_tview *t, int64_t e, nd_dtype dt, int ndim, const int64_t *shape, char *name) {
    nd_tview v;
    memset(&v, 0, sizeof v);
    v.name = name;
    v.dtype = dt;
    v.ndim = ndim;
    v.numel = 1;
    for (int i = 0; i < ndim; i++) { v.shape[i] = shape[i]; v.numel *= shape[i]; }
    v.nbytes = (size_t)v.numel * nd_dtype_size(dt);
    v.data = (const char *)t->data + (size_t)e * v.nbytes;
    v.file = t->file;
    return v;
}

int nd_ckpt_expand_mx_experts(nd_ckpt *c, nd_err *e) {
    size_t nf = 0, nviews = 0, name_bytes = 0;
    fused *fs = NULL;
    int rc = 0;
    for (size_t i = 0; i < c->n_tensors && !rc; i++) {
        const nd_tview *t = c->tensors[i];
        if (!ends_with(t->name, "_blocks")) continue;
        const char *dot = strrchr(t->name, '.');
        if (!dot || t->dtype != ND_DT_U8 || t->ndim != 4) continue; /* another model's "*_blocks" */
        fused f;
        memset(&f, 0, sizeof f);
        size_t pl = (size_t)(dot - t->name), jl = strlen(dot + 1) - strlen("_blocks");
        if (pl >= sizeof f.prefix || jl == 0 || jl >= sizeof f.proj) continue;
        memcpy(f.prefix, t->name, pl);
        memcpy(f.proj, dot + 1, jl);
        f.blocks = t;
        char nm[600];
        snprintf(nm, sizeof nm, "%s.%s_scales", f.prefix, f.proj);
        f.scales = nd_ckpt_find(c, nm);
        snprintf(nm, sizeof nm, "%s.%s_bias", f.prefix, f.proj);
        f.bias = nd_ckpt_find(c, nm);
        if ((rc = check(c, &f, e))) break;
        fused *nfs = realloc(fs, (nf + 1) * sizeof *fs);
        if (!nfs) { rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir); break; }
        fs = nfs;
        fs[nf++] = f;
        const size_t per = (f.bias ? 3 : 2);
        nviews += per * (size_t)t->shape[0];
        name_bytes += (size_t)t->shape[0] * per * (pl + jl + 48);
    }
    if (!rc && nviews) {
        c->virt = calloc(nviews, sizeof *c->virt);
        c->virt_sorted = calloc(nviews, sizeof *c->virt_sorted);
        c->virt_names = malloc(name_bytes);
        if (!c->virt || !c->virt_sorted || !c->virt_names) rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: out of memory", c->dir);
    }
    size_t np = 0;
    for (size_t k = 0; k < nf && !rc; k++) {
        const fused *f = &fs[k];
        const int64_t E = f->blocks->shape[0], N = f->blocks->shape[1], G = f->blocks->shape[2];
        for (int64_t x = 0; x < E; x++) {
            static const char *const suf[3] = {"weight", "weight_scale", "bias"};
            const int64_t sw[2] = {N, G * 16}, ss[2] = {N, G}, sb[1] = {N};
            for (int j = 0; j < (f->bias ? 3 : 2); j++) {
                char *name = c->virt_names + np;
                np += (size_t)sprintf(name, "%s.%lld.%s.%s", f->prefix, (long long)x, f->proj, suf[j]) + 1;
                nd_tview *v = &c->virt[c->n_virt++];
                if (j == 0) *v = view(f->blocks, x, ND_DT_U8, 2, sw, name);
                else if (j == 1) *v = view(f->scales, x, ND_DT_F8_E8M0, 2, ss, name);
                else *v = view(f->bias, x, f->bias->dtype, 1, sb, name);
            }
        }
    }
    free(fs);
    if (rc) return rc;
    for (size_t i = 0; i < c->n_virt; i++) c->virt_sorted[i] = &c->virt[i];
    if (c->n_virt) qsort(c->virt_sorted, c->n_virt, sizeof *c->virt_sorted, tv_cmp); /* NULL when there are none */
    const size_t nv = c->n_virt;
    c->n_virt = 0; /* nd_ckpt_find over the stored tensors alone */
    for (size_t i = 0; i < nv && !rc; i++)
        if (nd_ckpt_find(c, c->virt_sorted[i]->name))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor '%s' is stored and also a slice of the fused MXFP4 experts",
                         c->dir, c->virt_sorted[i]->name);
    c->n_virt = nv;
    return rc;
}

void nd_ckpt_virt_free(nd_ckpt *c) {
    free(c->virt);
    free(c->virt_sorted);
    free(c->virt_names);
    c->virt = NULL;
    c->virt_sorted = NULL;
    c->virt_names = NULL;
    c->n_virt = 0;
}

/* First view whose name is >= key. */
static size_t lower(const nd_ckpt *c, const char *key) { return nd_views_lower_bound(c->virt_sorted, c->n_virt, key); }

const nd_tview *nd_ckpt_virt_find(const nd_ckpt *c, const char *name) {
    size_t i = lower(c, name);
    return i < c->n_virt && strcmp(c->virt_sorted[i]->name, name) == 0 ? c->virt_sorted[i] : NULL;
}

int nd_ckpt_virt_has_prefix(const nd_ckpt *c, const char *prefix) {
    size_t i = lower(c, prefix);
    return i < c->n_virt && strncmp(c->virt_sorted[i]->name, prefix, strlen(prefix)) == 0;
}

int nd_ckpt_virt_source(const nd_ckpt *c, const nd_tview *t) {
    const char *lo = t->data, *hi = lo + t->nbytes;
    for (size_t i = 0; i < c->n_virt; i++) {
        const char *d = c->virt[i].data;
        if (c->virt[i].file == t->file && d >= lo && d < hi) return 1;
    }
    return 0;
}
