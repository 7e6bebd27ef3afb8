/* ops_basic.c — stages whose production math equals the reference math: embedding,
 * hyper-connections, norms, rotary, attention, residual adds. The reference path computes them
 * from reference inputs; the chained production path computes the same function of its own
 * inputs; the isolated production output is the reference output itself (same function, same
 * inputs). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "ops.h"
#include "numerics/nd_numerics.h"

int nd_run_pure(nd_opctx *c, nd_pure_fn f, nd_err *e) {
    c->on_ref = 1;
    int rc = f(c, c->in_ref, c->out_ref, e);
    c->on_ref = 0;
    ND_TRY(rc);
    for (int i = 0; i < c->n_out; i++) c->out_iso[i] = nd_buf_ref(c->out_ref[i]);
    if (c->want_chain) ND_TRY(f(c, c->in_chain, c->out_chain, e));
    return 0;
}

int nd_attr_reqs(nd_run *r, const nd_stage *st, nd_err *e, ...) {
    va_list ap;
    va_start(ap, e);
    int rc = 0;
    for (const char *key; !rc && (key = va_arg(ap, const char *)) != NULL;) rc = nd_attr_req(r, st, key, va_arg(ap, double *), e);
    va_end(ap);
    return rc;
}

int nd_stage_tensor(nd_opctx *c, const char *attr, int required, const nd_tview **t, nd_err *e) {
    char buf[256];
    const char *name = nd_attr_str(c->st, attr, buf, sizeof buf);
    *t = NULL;
    if (!name)
        return required ? nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s needs attribute '%s'", nd_stage_file(c->r->rc, c->st->def),
                                  c->st->def->line, c->st->def->name, attr) : 0;
    *t = nd_run_tensor(c->r, 0, name);
    if (!*t) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing tensor %s (stage %s)", nd_ckpt_dir(c->r->ck), name, c->st->name);
    return 0;
}

int nd_positions_cover(const nd_opctx *c, const char *what, int64_t rows, nd_err *e) {
    if (rows <= c->r->t) return 0;
    return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: its %s has %lld rows, more than the run's %lld tokens (a bundle's inputs "
                   "and /tokens disagree?)", c->st->name, what, (long long)rows, (long long)c->r->t);
}

int nd_stage_host_f32(nd_opctx *c, const char *attr, int64_t n, float **out, nd_err *e) {
    const nd_tview *t;
    *out = NULL;
    ND_TRY(nd_stage_tensor(c, attr, 0, &t, e));
    if (!t) return 0;
    if (!(*out = malloc(sizeof(float) * (size_t)n))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    int rc = nd_tensor_host_f32(t, *out, n, e);
    if (rc) { free(*out); *out = NULL; }
    return rc;
}

/* the stage output's BF16 rounding (none on the reference path under fp32-exact) */
static int round_out(nd_opctx *c, nd_buf *b, nd_err *e) { return nd_round_out(c->r, c->on_ref, b, e); }

/* ---- embedding: the token rows' raw bytes gathered on the host (I/O, not compute), one upload,
 * widened to FP32 by the backend's to_f32 (half the bytes of an FP32 upload for a BF16 table) ---- */
static int embed_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    (void)in;
    nd_run *r = c->r;
    const nd_tview *t;
    ND_TRY(nd_stage_tensor(c, "weight", 1, &t, e));
    if (t->ndim != 2) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must be 2-D", t->file, t->name);
    const int64_t v = t->shape[0], d = t->shape[1];
    /* config.json's vocab_size is the embedding's row count (transformers keeps them equal): a
     * config that says otherwise does not describe these weights */
    if (r->cfg->vocab_size > 0 && r->cfg->vocab_size != v)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: vocab_size %lld, but %s has %lld rows: the config does not describe "
                       "these weights", nd_ckpt_dir(r->ck), (long long)r->cfg->vocab_size, t->name, (long long)v);
    if (!nd_backend_supports(r->be, ND_OP_to_f32, nd_op_dtype_of(t->dtype))) {
        char can[64];
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s has dtype %s; the %s backend reads %s", t->file, t->name,
                       nd_dtype_str(t->dtype), r->be->name,
                       nd_op_dtypes_str(nd_backend_op_dtypes(r->be, ND_OP_to_f32), ", ", can, sizeof can));
    }
    const size_t row_bytes = (size_t)d * nd_dtype_size(t->dtype), bytes = (size_t)r->t * row_bytes;
    for (int64_t i = 0; i < r->t; i++)
        if (r->tokens[i] < 0 || r->tokens[i] >= v)
            return nd_fail(e, ND_EXIT_BADINPUT, "token id %lld is outside the vocabulary (%lld)", (long long)r->tokens[i],
                           (long long)v);
    char *host = malloc(bytes ? bytes : 1);
    void *raw = host ? r->be->alloc(r->be, bytes ? bytes : 1, e) : NULL;
    int rc = !host ? nd_fail(e, ND_EXIT_INTERNAL, "out of memory") : !raw ? e->code : 0;
    for (int64_t i = 0; i < r->t && !rc; i++)
        memcpy(host + (size_t)i * row_bytes, (const char *)t->data + (size_t)r->tokens[i] * row_bytes, row_bytes);
    if (!rc) rc = r->be->upload(r->be, raw, host, bytes, e);
    if (!rc) {
        out[0] = nd_buf_new(r, r->t, d, e);
        rc = !out[0] ? e->code : r->be->to_f32(r->be, raw, t->dtype, r->t * d, out[0]->p, e);
    }
    /* Gemma's scaled embedding: rows times `scale` (sqrt(hidden_size)); transformers' BF16 model
     * multiplies by the scale cast to the weight's dtype (tf: bf16_scale) */
    double sc = 1.0;
    if (!rc) rc = nd_attr_num(r, c->st, "scale", 1.0, &sc, e);
    if (!rc && sc != 1.0) {
        float s = (float)sc;
        if (nd_ref_bf16_steps(r, c->on_ref, nd_stage_tf(r, c->st, "bf16_scale"))) s = nd_bf16_round(s);
        rc = r->be->scale(r->be, out[0]->p, r->t * d, s, e);
    }
    if (raw) r->be->release(r->be, raw);
    free(host);
    return rc;
}
static int op_embedding(nd_opctx *c, nd_err *e) { return nd_run_pure(c, embed_fn, e); }

/* ---- hc_expand: n identical copies of the embedding ---- */
/* stream i of every token is one strided copy (copy2d: row pitch n * cols), n calls in all: a copy
 * per token and stream cost 16384 device copies, 0.13 s, at 4096 tokens on the H200 */
static int hc_expand_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    double n;
    ND_TRY(nd_attr_req(c->r, c->st, "n", &n, e));
    nd_buf *x = in[0];
    const int64_t ns = (int64_t)n;
    out[0] = nd_buf_new(c->r, x->rows, x->cols * ns, e);
    if (!out[0]) return e->code;
    for (int64_t i = 0; i < ns; i++)
        ND_TRY(c->r->be->copy2d(c->r->be, out[0]->p + i * x->cols, ns * x->cols, x->p, x->cols, x->cols, x->rows, e));
    return 0;
}
static int op_hc_expand(nd_opctx *c, nd_err *e) { return nd_run_pure(c, hc_expand_fn, e); }

/* a norm weight plus a constant in FP32 on the backend: the zero-centred norms (Qwen3-Next, Gemma)
 * scale by `1.0 + weight.float()`, one FP32 sum per element, before the FP32 product */
static int weight_plus(nd_run *r, const nd_tview *t, float offset, float **out, nd_err *e) {
    float *h = malloc(sizeof(float) * (size_t)t->numel);
    if (!h) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    int rc = nd_tensor_host_f32(t, h, t->numel, e);
    for (int64_t i = 0; !rc && i < t->numel; i++) h[i] = offset + h[i];
    *out = rc ? NULL : r->be->alloc(r->be, sizeof(float) * (size_t)t->numel, e);
    if (!rc && !*out) rc = e->code ? e->code : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = r->be->upload(r->be, *out, h, sizeof(float) * (size_t)t->numel, e);
    if (rc && *out) { r->be->release(r->be, *out); *out = NULL; }
    free(h);
    return rc;
}

/* ---- RMSNorm, optional weight, optionally per group of `group` columns (per-head q norm) ---- */
static int rmsnorm_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double eps, group;
    ND_TRY(nd_attr_req(r, c->st, "eps", &eps, e));
    ND_TRY(nd_attr_num(r, c->st, "group", 0, &group, e));
    nd_buf *x = in[0];
    int64_t d = group > 0 ? (int64_t)group : x->cols;
    if (x->n % d) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: %lld values do not split into groups of %lld", c->st->name, (long long)x->n, (long long)d);
    float *w = NULL;
    const nd_tview *t;
    ND_TRY(nd_stage_tensor(c, "weight", 0, &t, e));
    if (t) {
        if (t->numel != d) return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s has %lld elements, the stage normalises %lld", t->file, t->name, (long long)t->numel, (long long)d);
        double offset;
        ND_TRY(nd_attr_num(r, c->st, "offset", 0, &offset, e));
        ND_TRY(offset ? weight_plus(r, t, (float)offset, &w, e) : nd_tensor_f32(r, t, &w, e));
    }
    out[0] = nd_buf_new(r, x->rows, x->cols, e);
    int rc = out[0] ? r->be->rmsnorm(r->be, x->p, w, (float)eps, x->n / d, d, nd_stage_norm_steps(r, c->st), out[0]->p, e)
                    : e->code;
    if (w) r->be->release(r->be, w);
    if (!rc) rc = round_out(c, out[0], e);
    return rc;
}
static int op_rmsnorm(nd_opctx *c, nd_err *e) { return nd_run_pure(c, rmsnorm_fn, e); }

/* ---- rotary embedding on rot_dim dims of each head: the last ones (DeepSeek's rope part), or the
 * first ones with rot_first: 1 (partial rotary of GLM-4.x, Qwen3-Next, MiniMax, Phi-3: the rest of
 * the head passes through) ---- */
int nd_rope_freqs(nd_run *r, const nd_stage *st, int64_t rot_dim, float *inv_freq, nd_err *e);
int nd_rope_mscale(nd_run *r, const nd_stage *st, float *mscale, nd_err *e);
static int rope_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double heads, head_dim, rot_dim, inverse, interleaved, rot_first;
    ND_TRY(nd_attr_req(r, c->st, "heads", &heads, e));
    ND_TRY(nd_attr_req(r, c->st, "head_dim", &head_dim, e));
    ND_TRY(nd_attr_req(r, c->st, "rot_dim", &rot_dim, e));
    ND_TRY(nd_attr_num(r, c->st, "inverse", 0, &inverse, e));
    ND_TRY(nd_attr_num(r, c->st, "interleaved", 1, &interleaved, e));
    ND_TRY(nd_attr_num(r, c->st, "rot_first", 0, &rot_first, e));
    if (!(rot_dim >= 2 && rot_dim <= head_dim && fmod(rot_dim, 2) == 0))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s: rotary dims %g must be even and in [2, head_dim %g] (config.json "
                       "head_dim, partial_rotary_factor / rotary_dim)", nd_ckpt_dir(r->ck), c->st->name, rot_dim, head_dim);
    nd_buf *x = in[0];
    if (x->cols != (int64_t)(heads * head_dim)) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: input has %lld columns, expected heads*head_dim = %lld", c->st->name, (long long)x->cols, (long long)(heads * head_dim));
    ND_TRY(nd_positions_cover(c, "input", x->rows, e));
    float *freq = malloc(sizeof(float) * (size_t)(rot_dim / 2 + 1));
    if (!freq) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    float mscale = 1.0f;
    int rc = nd_rope_freqs(r, c->st, (int64_t)rot_dim, freq, e);
    if (!rc) rc = nd_rope_mscale(r, c->st, &mscale, e);
    out[0] = rc ? NULL : nd_buf_new(r, x->rows, x->cols, e);
    if (!rc && !out[0]) rc = e->code;
    if (!rc) rc = r->be->copy(r->be, out[0]->p, x->p, (size_t)x->n * sizeof(float), e);
    if (!rc) rc = r->be->rope(r->be, out[0]->p, x->rows, (int64_t)heads, (int64_t)head_dim,
                              rot_first ? 0 : (int64_t)(head_dim - rot_dim),
                              (int64_t)rot_dim, r->pos, freq, (int)interleaved, (int)inverse, nd_stage_rope_steps(r, c->st), mscale, e);
    free(freq);
    if (!rc) rc = round_out(c, out[0], e);
    return rc;
}
static int op_rope(nd_opctx *c, nd_err *e) { return nd_run_pure(c, rope_fn, e); }

/* ---- attention: q [t, H*d]; k = v = in[1] (one shared latent head) or k = in[1], v = in[2] ---- */
/* window_layer_type: the window applies only where config.json layer_types names the layer so
 * (gpt-oss, Gemma: sliding and full attention alternate); elsewhere attention is full */
static int window_layer(nd_run *r, const nd_stage *st, double *window, nd_err *e) {
    const char *want = nd_stage_attr(st->def, "window_layer_type");
    if (!want) return 0;
    const nd_model_cfg *cfg = r->cfg;
    if (st->layer < 0 || st->layer >= cfg->n_layer_types)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s: config.json layer_types has %d entries, none for layer %d "
                       "(recipe attribute window_layer_type)", nd_ckpt_dir(r->ck), st->name, cfg->n_layer_types, st->layer);
    if (strcmp(cfg->layer_types[st->layer], want)) *window = 0;
    return 0;
}
static int attention_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double heads, kv_heads, head_dim, window, scale;
    ND_TRY(nd_attr_req(r, c->st, "heads", &heads, e));
    ND_TRY(nd_attr_num(r, c->st, "kv_heads", 1, &kv_heads, e));
    ND_TRY(nd_attr_req(r, c->st, "head_dim", &head_dim, e));
    ND_TRY(nd_attr_num(r, c->st, "window", 0, &window, e));
    ND_TRY(nd_attr_num(r, c->st, "scale", 1.0 / sqrt(head_dim), &scale, e));
    ND_TRY(window_layer(r, c->st, &window, e));
    double yarn_mscale;
    ND_TRY(nd_attr_num(r, c->st, "yarn_mscale", 0, &yarn_mscale, e));
    if (yarn_mscale > 0 && r->cfg->rope_factor > 1) {
        /* DeepSeek-V3 (research/model-arch.md §6): softmax scale *= mscale², mscale = 0.1·mscale_all_dim·ln(factor) + 1 */
        double m = 0.1 * r->cfg->rope_mscale_all_dim * log(r->cfg->rope_factor) + 1.0;
        scale *= m * m;
    }
    nd_buf *q = in[0], *k = in[1], *v = c->n_in > 2 ? in[2] : in[1];
    int64_t t = q->rows, hq = (int64_t)heads, hkv = (int64_t)kv_heads, d = (int64_t)head_dim;
    if (q->cols != hq * d || k->cols != hkv * d || v->cols % hkv)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: q/k/v widths %lld/%lld/%lld do not fit %lld heads (%lld kv) of %lld", c->st->name,
                       (long long)q->cols, (long long)k->cols, (long long)v->cols, (long long)hq, (long long)hkv, (long long)d);
    int64_t dv = v->cols / hkv;
    ND_TRY(nd_positions_cover(c, "query", t, e));
    ND_TRY(nd_positions_cover(c, "key", k->rows, e));
    if (v->rows != k->rows)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: key has %lld rows, value %lld", c->st->name, (long long)k->rows, (long long)v->rows);
    float *sinks;
    ND_TRY(nd_stage_host_f32(c, "sinks", hq, &sinks, e));
    out[0] = nd_buf_new(r, t, hq * dv, e);
    int rc = out[0] ? r->be->attention(r->be, q->p, k->p, v->p, t, k->rows, hq, hkv, d, dv, r->pos, r->pos,
                                       (int64_t)window, (float)scale, sinks,
                                       r->ref_tf ? 1 + nd_stage_tf(r, c->st, "bf16_sink_max") : 0, out[0]->p, e) : e->code;
    free(sinks);
    if (!rc) rc = round_out(c, out[0], e);
    return rc;
}
static int op_attention(nd_opctx *c, nd_err *e) { return nd_run_pure(c, attention_fn, e); }

/* ---- hyper-connections ---- */
static int hc_params(nd_opctx *c, const char *prefix_attr, const char *fn_s, const char *base_s, const char *scale_s,
                     int64_t mix, int64_t width, float **fn, float **base, float *scale_host, int64_t nscale, nd_err *e) {
    nd_run *r = c->r;
    char pre[200], name[256];
    if (!nd_attr_str(c->st, prefix_attr, pre, sizeof pre))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s needs attribute '%s'", nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name, prefix_attr);
    const nd_tview *tf, *tb, *ts;
    snprintf(name, sizeof name, "%s.%s", pre, fn_s);
    if (!(tf = nd_run_tensor(r, 0, name))) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing tensor %s", nd_ckpt_dir(r->ck), name);
    snprintf(name, sizeof name, "%s.%s", pre, base_s);
    if (!(tb = nd_run_tensor(r, 0, name))) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing tensor %s", nd_ckpt_dir(r->ck), name);
    snprintf(name, sizeof name, "%s.%s", pre, scale_s);
    if (!(ts = nd_run_tensor(r, 0, name))) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing tensor %s", nd_ckpt_dir(r->ck), name);
    if (tf->numel != mix * width || tb->numel != mix)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s / %s have %lld / %lld elements, expected %lld x %lld / %lld", tf->file, tf->name, tb->name,
                       (long long)tf->numel, (long long)tb->numel, (long long)mix, (long long)width, (long long)mix);
    ND_TRY(nd_tensor_host_f32(ts, scale_host, nscale, e));
    ND_TRY(nd_tensor_f32(r, tf, fn, e));
    int rc = nd_tensor_f32(r, tb, base, e);
    if (rc) { r->be->release(r->be, *fn); *fn = NULL; }
    return rc;
}

/* The end of hc_pre and hc_head: the mixing parameters released, the stage output rounded. */
static int hc_done(nd_opctx *c, float *fn, float *base, int rc, nd_buf *out, nd_err *e) {
    c->r->be->release(c->r->be, fn);
    c->r->be->release(c->r->be, base);
    return rc ? rc : round_out(c, out, e);
}

static int hc_pre_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double n, iters, eps, hc_eps;
    ND_TRY(nd_attr_reqs(r, c->st, e, "n", &n, "iters", &iters, "eps", &eps, "hc_eps", &hc_eps, NULL));
    nd_buf *X = in[0];
    int64_t nn = (int64_t)n, dm = X->cols / nn, mix = (2 + nn) * nn;
    float *fn = NULL, *base = NULL, scale[3];
    ND_TRY(hc_params(c, "params", "fn", "base", "scale", mix, nn * dm, &fn, &base, scale, 3, e));
    out[0] = nd_buf_new(r, X->rows, dm, e);
    out[1] = out[0] ? nd_buf_new(r, X->rows, nn, e) : NULL;
    out[2] = out[1] ? nd_buf_new(r, X->rows, nn * nn, e) : NULL;
    int rc = out[2] ? r->be->hc_pre(r->be, X->p, fn, base, scale, X->rows, nn, dm, (int)iters, (float)eps, (float)hc_eps,
                                    out[0]->p, out[1]->p, out[2]->p, e) : e->code;
    return hc_done(c, fn, base, rc, out[0], e);
}
static int op_hc_pre(nd_opctx *c, nd_err *e) { return nd_run_pure(c, hc_pre_fn, e); }

static int hc_post_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_buf *X = in[0], *y = in[1], *post = in[2], *comb = in[3];
    int64_t n = post->cols, dm = y->cols;
    if (X->cols != n * dm) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: streams width %lld != %lld x %lld", c->st->name, (long long)X->cols, (long long)n, (long long)dm);
    out[0] = nd_buf_new(c->r, X->rows, X->cols, e);
    if (!out[0]) return e->code;
    ND_TRY(c->r->be->hc_post(c->r->be, X->p, y->p, post->p, comb->p, X->rows, n, dm, c->r->ref_tf, out[0]->p, e));
    return round_out(c, out[0], e);
}
static int op_hc_post(nd_opctx *c, nd_err *e) { return nd_run_pure(c, hc_post_fn, e); }

static int hc_head_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double n, eps, hc_eps;
    ND_TRY(nd_attr_reqs(r, c->st, e, "n", &n, "eps", &eps, "hc_eps", &hc_eps, NULL));
    nd_buf *X = in[0];
    int64_t nn = (int64_t)n, dm = X->cols / nn;
    float *fn = NULL, *base = NULL, scale[1];
    ND_TRY(hc_params(c, "params", "hc_fn", "hc_base", "hc_scale", nn, nn * dm, &fn, &base, scale, 1, e));
    out[0] = nd_buf_new(r, X->rows, dm, e);
    int rc = out[0] ? r->be->hc_head(r->be, X->p, fn, base, scale, X->rows, nn, dm, (float)eps, (float)hc_eps, out[0]->p, e) : e->code;
    return hc_done(c, fn, base, rc, out[0], e);
}
static int op_hc_head(nd_opctx *c, nd_err *e) { return nd_run_pure(c, hc_head_fn, e); }

/* ---- residual add and identity (a probe point such as `layers.L`) ---- */
static int add_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    if (in[0]->n != in[1]->n) return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: cannot add %lld and %lld values", c->st->name, (long long)in[0]->n, (long long)in[1]->n);
    out[0] = nd_buf_new(c->r, in[0]->rows, in[0]->cols, e);
    if (!out[0]) return e->code;
    ND_TRY(c->r->be->copy(c->r->be, out[0]->p, in[0]->p, (size_t)in[0]->n * sizeof(float), e));
    ND_TRY(c->r->be->add(c->r->be, out[0]->p, in[1]->p, in[0]->n, e));
    return round_out(c, out[0], e);
}
static int op_add(nd_opctx *c, nd_err *e) { return nd_run_pure(c, add_fn, e); }

static int identity_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    (void)c; (void)e;
    out[0] = nd_buf_ref(in[0]);
    return 0;
}
static int op_identity(nd_opctx *c, nd_err *e) { return nd_run_pure(c, identity_fn, e); }

static const struct { const char *name; nd_op_fn fn; } ops[] = {
    {"embedding", op_embedding}, {"hc_expand", op_hc_expand}, {"rmsnorm", op_rmsnorm}, {"rope", op_rope},
    {"attention", op_attention}, {"hc_pre", op_hc_pre}, {"hc_post", op_hc_post}, {"hc_head", op_hc_head},
    {"add", op_add}, {"identity", op_identity},
#define ND_OP_ENTRY(name) {#name, nd_op_##name},
    ND_OPS_EXTERN(ND_OP_ENTRY)
#undef ND_OP_ENTRY
};

int nd_op_count(void) { return (int)(sizeof ops / sizeof ops[0]); }
const char *nd_op_name(int i) { return i >= 0 && i < nd_op_count() ? ops[i].name : NULL; }

nd_op_fn nd_op_lookup(const char *name) {
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (!strcmp(ops[i].name, name)) return ops[i].fn;
    return NULL;
}
