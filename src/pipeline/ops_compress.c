/* ops_compress.c — DeepSeek-V4's compressed attention layers (docs/reference-notes.md (d)):
 * the KV compressor (HCA, and CSA with overlapping windows), the Lightning indexer's top-k and the
 * attention over window rows plus compressed entries. Their production math equals the reference
 * (the projections feeding them are `linear` stages of their own), so they run through
 * nd_run_pure; only the indexer reports a figure of its own (top-k agreement between paths).
 *
 * The compress rate of a layer is the stage's `rate` attribute (`$compress_rates.<layer type>`),
 * or, when the config lacks that key, its per-layer `compress_ratios` entry (DeepSeek's configs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"
#include "numerics/nd_numerics.h"

int nd_rope_freqs(nd_run *r, const nd_stage *st, int64_t rot_dim, float *inv_freq, nd_err *e);

static int need_op(nd_run *r, int present, const char *name, nd_err *e) {
    if (present) return 0;
    return nd_fail(e, ND_EXIT_INTERNAL, "%s: op %s unsupported", r->be->name, name);
}

static int layer_rate(nd_opctx *c, int64_t *rate, nd_err *e) {
    nd_run *r = c->r;
    const char *v = nd_stage_attr(c->st->def, "rate");
    double x = 0, tmp;
    int L = c->st->layer;
    if (v && (v[0] != '$' || !nd_cfg_number(r->cfg, v + 1, &tmp))) ND_TRY(nd_attr_req(r, c->st, "rate", &x, e));
    else if (L >= 0 && L < r->cfg->n_compress_ratios && r->cfg->compress_ratios[L] > 0) x = (double)r->cfg->compress_ratios[L];
    else return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s needs the layer's compress rate (config.json compress_rates or compress_ratios)",
                        nd_ckpt_dir(r->ck), c->st->name);
    if (!(x >= 1 && x <= 1 << 20 && x == floor(x)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s: compress rate %g is not a positive integer", nd_ckpt_dir(r->ck), c->st->name, x);
    *rate = (int64_t)x;
    return 0;
}

/* The start of a compressed-attention stage: the backend has its kernel, and the layer's rate. */
static int stage_start(nd_opctx *c, int have, const char *kernel, int64_t *rate, nd_err *e) {
    ND_TRY(need_op(c->r, have, kernel, e));
    return layer_rate(c, rate, e);
}

static const nd_tview *stage_tensor(nd_opctx *c, const char *attr, int64_t numel, nd_err *e) {
    const nd_tview *t;
    if (nd_stage_tensor(c, attr, 1, &t, e)) return NULL;
    if (t->numel != numel) {
        nd_fail(e, ND_EXIT_BADINPUT, "%s: %s has %lld elements, stage %s needs %lld", t->file, t->name, (long long)t->numel, c->st->name, (long long)numel);
        return NULL;
    }
    return t;
}

/* ---- compressor: pool (softmax-gated, per channel), kv_norm, rope at the window start ---- */
static int compress_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    nd_backend *be = r->be;
    int64_t rate;
    ND_TRY(stage_start(c, be->compress_pool != NULL, "compress_pool", &rate, e));
    double hd, overlap, eps, rot;
    ND_TRY(nd_attr_reqs(r, c->st, e, "head_dim", &hd, "eps", &eps, "rot_dim", &rot, NULL));
    ND_TRY(nd_attr_num(r, c->st, "overlap", 0, &overlap, e));
    const int64_t d = (int64_t)hd, w = overlap > 0 ? 2 : 1, rd = (int64_t)rot;
    nd_buf *kv = in[0], *gate = in[1];
    if (d <= 0 || rd < 0 || rd > d || rd % 2 || kv->cols != w * d || gate->cols != kv->cols || gate->rows != kv->rows)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: kv [%lld,%lld] / gate [%lld,%lld] do not fit %lld series of head_dim %lld (rot_dim %lld)",
                       c->st->name, (long long)kv->rows, (long long)kv->cols, (long long)gate->rows, (long long)gate->cols,
                       (long long)w, (long long)d, (long long)rd);
    const nd_tview *tb = stage_tensor(c, "position_bias", rate * w * d, e);
    const nd_tview *tn = tb ? stage_tensor(c, "norm", d, e) : NULL;
    if (!tn) return e->code;
    const int64_t n_win = kv->rows / rate;
    out[0] = nd_buf_new(r, n_win, d, e);
    if (!out[0]) return e->code;
    if (n_win == 0) { c->quantized = -1; return 0; } /* fewer tokens than one window: no entry, no row */
    float *pb = malloc(sizeof(float) * (size_t)(rate * w * d)), *freq = malloc(sizeof(float) * (size_t)(rd / 2 + 1));
    int32_t *pos = malloc(sizeof(int32_t) * (size_t)n_win);
    float *nw = NULL;
    nd_buf *pooled = NULL;
    int rc = pb && freq && pos ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) rc = nd_tensor_host_f32(tb, pb, rate * w * d, e);
    if (!rc) rc = nd_tensor_f32(r, tn, &nw, e);
    if (!rc && !(pooled = nd_buf_new(r, n_win, d, e))) rc = e->code;
    /* transformers: bf16(Σ bf16(kv · bf16(softmax))), then kv_norm (F32 weight, -> BF16), then rope;
     * the reference path under fp32-exact rounds none of it (transformers' FP32 forward) */
    if (!rc) rc = be->compress_pool(be, kv->p, gate->p, pb, kv->rows, d, rate, w == 2, nd_ref_bf16_steps(r, c->on_ref, 1),
                                    pooled->p, e);
    if (!rc) rc = nd_round_out(r, c->on_ref, pooled, e);
    if (!rc) rc = be->rmsnorm(be, pooled->p, nw, (float)eps, n_win, d, nd_stage_norm_steps(r, c->st), out[0]->p, e);
    if (!rc) rc = nd_round_out(r, c->on_ref, out[0], e);
    for (int64_t i = 0; !rc && i < n_win; i++) pos[i] = (int32_t)(i * rate);
    if (!rc && rd > 0) rc = nd_rope_freqs(r, c->st, rd, freq, e);
    if (!rc && rd > 0) rc = be->rope(be, out[0]->p, n_win, 1, d, d - rd, rd, pos, freq, 1, 0, nd_stage_rope_steps(r, c->st), 1.0f, e);
    if (!rc) rc = nd_round_out(r, c->on_ref, out[0], e);
    if (nw) be->release(be, nw);
    nd_buf_put(r, pooled);
    free(pb);
    free(freq);
    free(pos);
    return rc;
}
int nd_op_compress(nd_opctx *c, nd_err *e) { return nd_run_pure(c, compress_fn, e); }

/* ---- Lightning indexer: index scores and the top-k entries per query ---- */
static int indexer_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    nd_backend *be = r->be;
    double heads, hd, topk, scale, wscale;
    int64_t rate;
    ND_TRY(need_op(r, be->indexer_topk != NULL, "indexer_topk", e));
    ND_TRY(nd_attr_req(r, c->st, "heads", &heads, e));
    ND_TRY(nd_attr_req(r, c->st, "head_dim", &hd, e));
    ND_TRY(nd_attr_req(r, c->st, "topk", &topk, e));
    ND_TRY(nd_attr_num(r, c->st, "scale", 1.0 / sqrt(hd), &scale, e));
    ND_TRY(nd_attr_num(r, c->st, "weights_scale", 1.0 / sqrt(heads), &wscale, e));
    ND_TRY(layer_rate(c, &rate, e));
    nd_buf *q = in[0], *k = in[1], *wt = in[2];
    const int64_t h = (int64_t)heads, cd = (int64_t)hd, t = q->rows, nc = k->rows;
    if (h <= 0 || cd <= 0 || topk < 1 || q->cols != h * cd || k->cols != cd || wt->rows != t || wt->cols != h)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: q [%lld,%lld], k [%lld,%lld], weights [%lld,%lld] do not fit %lld heads of %lld (topk %g)",
                       c->st->name, (long long)t, (long long)q->cols, (long long)nc, (long long)k->cols, (long long)wt->rows,
                       (long long)wt->cols, (long long)h, (long long)cd, topk);
    const int64_t kk = (int64_t)topk < nc ? (int64_t)topk : nc;
    ND_TRY(nd_positions_cover(c, "query", t, e));
    out[0] = nd_buf_new(r, t, nc, e);
    if (!out[0]) return e->code;
    out[0]->k = (int)kk;
    out[0]->idx = malloc(sizeof(int32_t) * (size_t)(t * kk + 1));
    if (!out[0]->idx) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (nc == 0) { c->quantized = -1; return 0; }
    int32_t *di = be->alloc(be, sizeof(int32_t) * (size_t)(t * kk), e);
    if (!di) return e->code;
    int rc = be->indexer_topk(be, q->p, k->p, wt->p, t, nc, h, cd, (float)scale, (float)wscale, r->pos, rate, kk, out[0]->p, di, e);
    if (!rc) rc = be->download(be, out[0]->idx, di, sizeof(int32_t) * (size_t)(t * kk), e);
    be->release(be, di);
    return rc;
}

/* share of the reference's valid picks the production path also picked (sets per query) */
static double pick_agreement(const nd_buf *a, const nd_buf *b) {
    int64_t hit = 0, tot = 0, k = a->k;
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t s = 0; s < k; s++) {
            if (a->idx[i * k + s] < 0) continue;
            tot++;
            for (int64_t u = 0; u < b->k; u++)
                if (a->idx[i * k + s] == b->idx[i * b->k + u]) { hit++; break; }
        }
    return tot ? (double)hit / (double)tot : NAN;
}

int nd_op_indexer(nd_opctx *c, nd_err *e) {
    ND_TRY(nd_run_pure(c, indexer_fn, e));
    nd_run *r = c->r;
    c->extra_iso.topk_agree = 1.0;
    if (c->want_chain && c->out_chain[0]) {
        c->extra_chain.topk_agree = pick_agreement(c->out_ref[0], c->out_chain[0]);
        if (c->out_ref[0]->k > 0) ND_TRY(nd_put_routing(r, c->st, c->out_ref[0], c->out_chain[0], e));
    }
    return 0;
}

/* ---- attention over the sliding window plus the visible (and, for CSA, picked) entries ---- */
static int attention_compressed_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    nd_backend *be = r->be;
    int64_t rate;
    ND_TRY(stage_start(c, be->attention_compressed != NULL, "attention_compressed", &rate, e));
    double heads, hd, window, scale;
    ND_TRY(nd_attr_reqs(r, c->st, e, "heads", &heads, "head_dim", &hd, NULL));
    ND_TRY(nd_attr_num(r, c->st, "window", 0, &window, e));
    ND_TRY(nd_attr_num(r, c->st, "scale", 1.0 / sqrt(hd), &scale, e));
    nd_buf *q = in[0], *kv = in[1], *ck = in[2], *sel = c->n_in > 3 ? in[3] : NULL;
    const int64_t hq = (int64_t)heads, d = (int64_t)hd, t = q->rows;
    if (hq <= 0 || d <= 0 || q->cols != hq * d || kv->cols != d || (ck->rows > 0 && ck->cols != d))
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: q/kv/entries widths %lld/%lld/%lld do not fit %lld heads of %lld with one kv head",
                       c->st->name, (long long)q->cols, (long long)kv->cols, (long long)ck->cols, (long long)hq, (long long)d);
    if (sel && (!sel->idx || sel->rows != t))
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: input '%s' is not an indexer selection for %lld queries", c->st->name, c->st->def->in[3], (long long)t);
    ND_TRY(nd_positions_cover(c, "query", t, e));
    ND_TRY(nd_positions_cover(c, "key", kv->rows, e));
    float *sinks;
    ND_TRY(nd_stage_host_f32(c, "sinks", hq, &sinks, e));
    int32_t *dsel = NULL;
    int64_t nsel = sel ? sel->k : 0;
    int rc = 0;
    if (sel) {
        dsel = be->alloc(be, sizeof(int32_t) * (size_t)(t * nsel + 1), e);
        rc = dsel ? be->upload(be, dsel, sel->idx, sizeof(int32_t) * (size_t)(t * nsel), e) : e->code;
    }
    if (!rc && !(out[0] = nd_buf_new(r, t, hq * d, e))) rc = e->code;
    if (!rc) rc = be->attention_compressed(be, q->p, kv->p, ck->p, t, kv->rows, ck->rows, hq, d, r->pos, r->pos, (int64_t)window,
                                           (float)scale, sinks, rate, dsel, nsel, r->ref_tf, out[0]->p, e);
    if (!rc && sel && !dsel) rc = e->code;
    if (!rc) rc = nd_round_out(r, c->on_ref, out[0], e);
    if (dsel) be->release(be, dsel);
    free(sinks);
    return rc;
}
int nd_op_attention_compressed(nd_opctx *c, nd_err *e) { return nd_run_pure(c, attention_compressed_fn, e); }
