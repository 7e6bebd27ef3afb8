/* ops_layout.c — column layout ops (MLA: split the kv_a output into latent and rope parts, split
 * heads into nope/rope or k/v, assemble per-head q and k). Pure data movement through the backend's
 * copy2d, identical on both paths.
 *
 *  split : x [t, groups*W] -> out_i [t, groups*size_i], W = Σ size_i ("sizes: 512,64"; groups default 1)
 *  concat: in_i [t, groups*w_i] -> out [t, groups*Σ w_i]; inputs listed in `broadcast` have width
 *          w_i and are repeated in every group (the shared rope key of MLA)
 */
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "ops.h"

/* Comma list of positive integers; with r, items may be config keys ("$kv_lora_rank"). */
static int parse_sizes_cfg(nd_run *r, const char *s, int64_t *v, int max) {
    int n = 0;
    while (s && *s && n < max) {
        char item[96];
        size_t len = strcspn(s, ",");
        if (!len || len >= sizeof item) return -1;
        memcpy(item, s, len);
        item[len] = 0;
        double x;
        char *end;
        if (item[0] == '$') { if (!r || nd_cfg_number(r->cfg, item + 1, &x)) return -1; }
        else { x = strtod(item, &end); if (*end) return -1; }
        if (!(x > 0)) return -1;
        v[n++] = (int64_t)x;
        s += len + (s[len] == ',');
    }
    return n;
}
static int parse_sizes(const char *s, int64_t *v, int max) { return parse_sizes_cfg(NULL, s, v, max); }

static int in_list(const char *list, int i) {
    int64_t v[ND_RECIPE_MAX_IO];
    int n = list ? parse_sizes(list, v, ND_RECIPE_MAX_IO) : 0;
    for (int k = 0; k < n; k++) if (v[k] == i + 1) return 1; /* 1-based: "broadcast: 2" = second input */
    return 0;
}

static int split_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double groups;
    ND_TRY(nd_attr_num(r, c->st, "groups", 1, &groups, e));
    int64_t sz[ND_RECIPE_MAX_IO], G = (int64_t)groups, W = 0;
    const char *sizes = nd_stage_attr(c->st->def, "sizes");
    nd_buf *x = in[0];
    int n;
    if (!sizes) { /* the descriptor's default: equal parts */
        n = c->n_out;
        if (G < 1 || n < 1 || x->cols % (G * n))
            return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: input width %lld does not split into %d equal parts of %lld groups",
                           c->st->name, (long long)x->cols, n, (long long)G);
        for (int i = 0; i < n; i++) sz[i] = x->cols / (G * n);
    } else n = parse_sizes_cfg(r, sizes, sz, ND_RECIPE_MAX_IO);
    /* a $key the config lacks (or gives no positive number): name the key and the checkpoint */
    for (const char *p = sizes; n < 0 && p && (p = strchr(p, '$')); p++) {
        char key[96];
        double x;
        size_t len = strcspn(p + 1, ",");
        snprintf(key, sizeof key, "%.*s", (int)(len < sizeof key ? len : sizeof key - 1), p + 1);
        if (nd_cfg_number(r->cfg, key, &x) || !(x > 0))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: stage %s needs '%s' as a positive number%s",
                           nd_ckpt_dir(r->ck), c->st->name, key,
                           strncmp(key, "linear_", 7) ? "" : " (derived: linear_num_value_heads must be a multiple of "
                           "linear_num_key_heads, both and the linear_*_head_dim keys positive integers)");
    }
    if (n != c->n_out) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: 'sizes' must list one positive width (number or $config_key) per output", nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name);
    for (int i = 0; i < n; i++) W += sz[i];
    if (G < 1 || x->cols != G * W) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: input width %lld is not %lld groups of %lld", c->st->name, (long long)x->cols, (long long)G, (long long)W);
    int64_t off = 0;
    for (int i = 0; i < n; i++) {
        out[i] = nd_buf_new(r, x->rows, G * sz[i], e);
        if (!out[i]) return e->code;
        ND_TRY(r->be->copy2d(r->be, out[i]->p, sz[i], x->p + off, W, sz[i], x->rows * G, e));
        off += sz[i];
    }
    return 0;
}

static int concat_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double groups;
    ND_TRY(nd_attr_num(r, c->st, "groups", 1, &groups, e));
    const char *bc = nd_stage_attr(c->st->def, "broadcast");
    int64_t G = (int64_t)groups, W = 0, w[ND_RECIPE_MAX_IO], t = in[0]->rows;
    for (int i = 0; i < c->n_in; i++) {
        if (in[i]->rows != t) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: inputs have different token counts", c->st->name);
        if (in_list(bc, i)) w[i] = in[i]->cols;
        else if (G < 1 || in[i]->cols % G) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: input %d width %lld is not divisible into %lld groups", c->st->name, i + 1, (long long)in[i]->cols, (long long)G);
        else w[i] = in[i]->cols / G;
        W += w[i];
    }
    out[0] = nd_buf_new(r, t, G * W, e);
    if (!out[0]) return e->code;
    int64_t off = 0;
    for (int i = 0; i < c->n_in; i++) {
        if (in_list(bc, i))
            for (int64_t g = 0; g < G; g++) ND_TRY(r->be->copy2d(r->be, out[0]->p + g * W + off, G * W, in[i]->p, w[i], w[i], t, e));
        else ND_TRY(r->be->copy2d(r->be, out[0]->p + off, W, in[i]->p, w[i], w[i], t * G, e));
        off += w[i];
    }
    return 0;
}

int nd_op_split(nd_opctx *c, nd_err *e) { return nd_run_pure(c, split_fn, e); }
int nd_op_concat(nd_opctx *c, nd_err *e) { return nd_run_pure(c, concat_fn, e); }
