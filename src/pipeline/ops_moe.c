/* ops_moe.c — router, routed experts and SwiGLU MLPs (shared experts, dense MLPs).
 *
 * Every projection of an expert is a stage of its own (layers.L.mlp.experts.E.gate_proj, ...),
 * compared on the tokens the reference router sent to that expert; the combined output
 * (layers.L.mlp.experts) uses each path's own routing. Experts no token picked on either path
 * are never loaded. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"
#include "numerics/nd_numerics.h"
#include "numerics/nd_router_rule.h"
#include "pipeline.h"

static int score_func_of(const char *s) {
    if (!s || !strcmp(s, "softmax")) return ND_SCORE_SOFTMAX;
    if (!strcmp(s, "sigmoid")) return ND_SCORE_SIGMOID;
    if (!strcmp(s, "sqrtsoftplus")) return ND_SCORE_SQRTSOFTPLUS;
    return -1;
}

typedef struct router_ctx {
    nd_router_cfg cfg;
    float *w_gate;          /* [E, D] FP32 on the backend */
    float *bias;            /* [E] on the backend or NULL */
    const nd_tview *hash;   /* tid2eid [V, k] I32 or NULL */
    int bf16_logits;        /* tf: bf16_logits[_weights]: a BF16 gate's logits, FP32 softmax and weights */
    int bf16_weights;       /* tf: bf16_logits_weights: the final weights cast to BF16 (Qwen3-MoE) */
    float *logit_bias;      /* [E] on the backend or NULL: the gate linear's own bias (gpt-oss) */
    int topk_softmax;       /* the weights are the softmax of the k picked logits (gpt-oss) */
} router_ctx;

/* gpt-oss (GptOssTopKRouter): top-k of the logits, then a softmax over those k logits in FP32 */
static void topk_softmax_weights(const float *logits, const int32_t *idx, int64_t t, int64_t E, int64_t k, float scaling,
                                 float *w) {
    for (int64_t i = 0; i < t; i++) {
        float mx = -INFINITY, den = 0;
        for (int64_t s = 0; s < k; s++) mx = fmaxf(mx, logits[i * E + idx[i * k + s]]);
        for (int64_t s = 0; s < k; s++) den += w[i * k + s] = expf(logits[i * E + idx[i * k + s]] - mx);
        for (int64_t s = 0; s < k; s++) w[i * k + s] = w[i * k + s] / den * scaling;
    }
}

/* logits, picks and weights for one path's input */
static int route(nd_opctx *c, router_ctx *rx, const nd_buf *b, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    int64_t t = b->rows, E = rx->cfg.n_experts, k = rx->cfg.top_k;
    nd_buf *o = nd_buf_new(r, t, E, e);
    if (!o) return e->code;
    *out = o;
    o->k = (int)k;
    o->route_scaling = rx->cfg.scaling;
    o->idx = malloc(sizeof(int32_t) * (size_t)(t * k));
    o->w = malloc(sizeof(float) * (size_t)(t * k));
    o->logits_host = malloc(sizeof(float) * (size_t)(t * E));
    if (!o->idx || !o->w || !o->logits_host) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    ND_TRY(r->be->gemm(r->be, b->p, rx->w_gate, o->p, t, E, b->cols, 1.0f, nd_gemm_mode(r, 0), e));
    if (rx->logit_bias) ND_TRY(r->be->add_bias(r->be, o->p, rx->logit_bias, t, E, e)); /* F.linear: before its rounding */
    if (rx->cfg.bf16_steps || rx->bf16_logits) ND_TRY(r->be->round_bf16(r->be, o->p, o->n, e)); /* a BF16 linear's logits */
    ND_TRY(r->be->download(r->be, o->logits_host, o->p, sizeof(float) * (size_t)(t * E), e));
    if (!rx->hash) {
        /* the op writes backend memory; the routing decision lives on the host */
        int32_t *di = r->be->alloc(r->be, sizeof(int32_t) * (size_t)(t * k), e);
        float *dw = di ? r->be->alloc(r->be, sizeof(float) * (size_t)(t * k), e) : NULL;
        int rc = dw ? r->be->router_topk(r->be, o->p, rx->bias, t, &rx->cfg, di, dw, e) : e->code;
        if (!rc) rc = r->be->download(r->be, o->idx, di, sizeof(int32_t) * (size_t)(t * k), e);
        if (!rc) rc = r->be->download(r->be, o->w, dw, sizeof(float) * (size_t)(t * k), e);
        if (di) r->be->release(r->be, di);
        if (dw) r->be->release(r->be, dw);
        if (!rc && rx->topk_softmax) topk_softmax_weights(o->logits_host, o->idx, t, E, k, rx->cfg.scaling, o->w);
        if (!rc && rx->bf16_weights)
            for (int64_t i = 0; i < t * k; i++) o->w[i] = nd_bf16_round(o->w[i]);
        return rc;
    }
    /* hash routing: experts from the token id, weights from the scores of those experts */
    for (int64_t i = 0; i < t; i++) {
        int64_t id = r->tokens[i];
        if (id < 0 || id >= rx->hash->shape[0]) return nd_fail(e, ND_EXIT_BADINPUT, "token %lld outside tid2eid", (long long)id);
        /* tid2eid is I32 in DeepSeek's checkpoints and I64 in transformers'; read unaligned-safe */
        const char *row = (const char *)rx->hash->data + (size_t)(id * rx->hash->shape[1]) * nd_dtype_size(rx->hash->dtype);
        const float *lg = o->logits_host + i * E;
        float mx = -INFINITY;
        const int bf = rx->cfg.bf16_steps;
        for (int64_t j = 0; j < E; j++) mx = fmaxf(mx, lg[j]);
        float denom = 0;
        if (rx->cfg.score_func == ND_SCORE_SOFTMAX)
            for (int64_t j = 0; j < E; j++) denom += nd_router_score(lg[j], 0, mx);
        for (int64_t s = 0; s < k; s++) {
            int64_t ex;
            if (rx->hash->dtype == ND_DT_I64) memcpy(&ex, row + 8 * s, 8);
            else { int32_t v; memcpy(&v, row + 4 * s, 4); ex = v; }
            if (ex < 0 || ex >= E) return nd_fail(e, ND_EXIT_BADINPUT, "%s: tid2eid names expert %lld of %lld", rx->hash->file, (long long)ex, (long long)E);
            /* a token routes to k distinct experts: a row naming one twice is a broken table */
            for (int64_t u = 0; u < s; u++)
                if (o->idx[i * k + u] == ex)
                    return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: the row of token %lld names expert %lld twice (a token routes to %d "
                                   "distinct experts)", rx->hash->file, rx->hash->name, (long long)id, (long long)ex, (int)k);
            float sc = nd_router_score_steps(lg[ex], rx->cfg.score_func, mx, bf);
            if (rx->cfg.score_func == ND_SCORE_SOFTMAX) sc = bf ? nd_bf16_round(sc / denom) : sc / denom;
            o->idx[i * k + s] = (int32_t)ex;
            o->w[i * k + s] = sc;
        }
        /* the same weight rule as the top-k router (numerics/nd_router_rule.h) */
        nd_router_weights(o->w + i * k, (int)k, rx->cfg.norm_topk, rx->cfg.scaling, bf);
    }
    return 0;
}

static double topk_agreement(const nd_buf *a, const nd_buf *b) {
    int64_t hit = 0, k = a->k;
    for (int64_t i = 0; i < a->rows; i++)
        for (int64_t s = 0; s < k; s++)
            for (int64_t u = 0; u < k; u++)
                if (a->idx[i * k + s] == b->idx[i * k + u]) { hit++; break; }
    return a->rows ? (double)hit / (double)(a->rows * k) : NAN;
}

int nd_op_router(nd_opctx *c, nd_err *e) {
    nd_run *r = c->r;
    router_ctx rx;
    memset(&rx, 0, sizeof rx);
    double E, k, ng, tg, norm, scal;
    char buf[256];
    ND_TRY(nd_attr_req(r, c->st, "experts", &E, e));
    ND_TRY(nd_attr_req(r, c->st, "top_k", &k, e));
    ND_TRY(nd_attr_num(r, c->st, "n_group", 0, &ng, e));
    ND_TRY(nd_attr_num(r, c->st, "topk_group", 0, &tg, e));
    ND_TRY(nd_attr_num(r, c->st, "norm", 1, &norm, e));
    ND_TRY(nd_attr_num(r, c->st, "scaling", 1, &scal, e));
    const char *sf = nd_stage_attr(c->st->def, "score");
    if (sf && sf[0] == '$') sf = nd_cfg_string(r->cfg, sf + 1);
    /* a config without the key: the family's default (transformers' DeepseekV3 always uses sigmoid) */
    if (!sf) sf = nd_stage_attr(c->st->def, "score_default");
    rx.cfg = (nd_router_cfg){(int)E, (int)k, score_func_of(sf), (int)ng, (int)tg, (int)norm, (float)scal,
                             nd_stage_tf(r, c->st, "bf16")};
    /* Qwen3-MoE / Mixtral routers: a BF16 linear's logits, softmax and top-k weights in FP32, the
     * weights cast to BF16 (Qwen3-MoE) or left FP32 (Mixtral) */
    rx.bf16_weights = nd_stage_tf(r, c->st, "bf16_logits_weights");
    rx.bf16_logits = rx.bf16_weights || nd_stage_tf(r, c->st, "bf16_logits");
    double tks;
    ND_TRY(nd_attr_num(r, c->st, "topk_softmax", 0, &tks, e));
    rx.topk_softmax = tks != 0;
    if (rx.cfg.score_func < 0) return nd_fail(e, ND_EXIT_BADINPUT, "%s: unknown scoring function '%s' (softmax, sigmoid, sqrtsoftplus)", nd_ckpt_dir(r->ck), sf);
    const char *wn = nd_attr_str(c->st, "weight", buf, sizeof buf);
    const nd_tview *wt = wn ? nd_run_tensor(r, 0, wn) : NULL;
    if (!wt) return nd_fail(e, ND_EXIT_BADINPUT, "%s: missing router weight %s", nd_ckpt_dir(r->ck), wn ? wn : "(attribute weight)");
    if (wt->ndim != 2 || wt->shape[0] != (int64_t)E || wt->shape[1] != c->in_ref[0]->cols)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: router weight %s must be [%lld, %lld]", wt->file, wt->name, (long long)E, (long long)c->in_ref[0]->cols);
    const char *hn = nd_attr_str(c->st, "hash", buf, sizeof buf);
    rx.hash = hn ? nd_run_tensor(r, 0, hn) : NULL;
    if (rx.hash && ((rx.hash->dtype != ND_DT_I32 && rx.hash->dtype != ND_DT_I64) || rx.hash->ndim != 2 || rx.hash->shape[1] != (int64_t)k))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must be I32 or I64 [vocab, %d]", rx.hash->file, rx.hash->name, (int)k);
    ND_TRY(nd_tensor_f32(r, wt, &rx.w_gate, e));
    /* transformers keeps V3's gate in FP32 (_keep_in_fp32_modules_strict) but V4's is a BF16 parameter */
    if (rx.cfg.bf16_steps) ND_TRY(r->be->round_bf16(r->be, rx.w_gate, wt->numel, e));
    int rc = 0;
    const char *lbn = nd_attr_str(c->st, "logit_bias", buf, sizeof buf);
    const nd_tview *lbt = lbn ? nd_run_tensor(r, 0, lbn) : NULL;
    if (lbn && !lbt) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: missing router bias %s", nd_ckpt_dir(r->ck), lbn);
    else if (lbt) rc = lbt->numel == (int64_t)E ? nd_tensor_f32(r, lbt, &rx.logit_bias, e)
                                                : nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must have %d elements", lbt->file, lbt->name, (int)E);
    /* a BF16 linear's bias is a BF16 parameter */
    if (!rc && rx.logit_bias && rx.bf16_logits) rc = r->be->round_bf16(r->be, rx.logit_bias, (int64_t)E, e);
    const char *bn = nd_attr_str(c->st, "bias", buf, sizeof buf);
    const nd_tview *bt = bn && !rx.hash ? nd_run_tensor(r, 0, bn) : NULL;
    if (bt) rc = bt->numel == (int64_t)E ? nd_tensor_f32(r, bt, &rx.bias, e)
                                         : nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must have %d elements", bt->file, bt->name, (int)E);
    /* the production router under a stack that holds the correction bias in BF16 (router_bias:
     * bf16; field report C33): the same scores, the bias rounded to BF16 for the selection */
    router_ctx px = rx;
    const int bias_bf16 = rx.bias && nd_stack_router_bias_bf16(&r->stack, c->st->name);
    if (!rc && bias_bf16) {
        px.bias = r->be->alloc(r->be, (size_t)E * sizeof(float), e);
        if (!px.bias) rc = e->code;
        if (!rc) rc = r->be->copy(r->be, px.bias, rx.bias, (size_t)E * sizeof(float), e);
        if (!rc) rc = r->be->round_bf16(r->be, px.bias, (int64_t)E, e);
    }
    nd_stage_info *info = nd_sink_stage_info(r, c->st->name);
    if (info) {
        info->found = 1;
        info->router = 1;
        info->router_bias_bf16 = bias_bf16;
        snprintf(info->module, sizeof info->module, "%s", c->st->name);
    }
    if (!rc) rc = route(c, &rx, c->in_ref[0], &c->out_ref[0], e);
    /* isolated: the production router on the reference input (the same routing unless the stack
     * changes the router's arithmetic) */
    if (!rc && bias_bf16) rc = route(c, &px, c->in_ref[0], &c->out_iso[0], e);
    else if (!rc) c->out_iso[0] = nd_buf_ref(c->out_ref[0]);
    if (!rc && c->want_chain) rc = route(c, &px, c->in_chain[0], &c->out_chain[0], e);
    if (!rc && c->want_chain) rc = nd_put_routing(r, c->st, c->out_ref[0], c->out_chain[0], e);
    if (!rc && c->want_chain) c->extra_chain.topk_agree = topk_agreement(c->out_ref[0], c->out_chain[0]);
    c->extra_iso.topk_agree = !rc && bias_bf16 ? topk_agreement(c->out_ref[0], c->out_iso[0]) : 1.0;
    r->be->release(r->be, rx.w_gate);
    if (rx.logit_bias) r->be->release(r->be, rx.logit_bias);
    if (rx.bias) r->be->release(r->be, rx.bias);
    if (px.bias && px.bias != rx.bias) r->be->release(r->be, px.bias);
    return rc;
}

/* ---- one SwiGLU MLP (expert or shared/dense) on a set of token rows ---- */
typedef struct mlp_io {
    nd_buf *x_ref, *x_chain;   /* gathered inputs (chain may be NULL) */
    nd_buf *o_ref, *o_iso, *o_chain;
} mlp_io;

/* ref_path: the reference path's SwiGLU (its output not rounded under fp32-exact) */
/* act: silu (default: silu(gate) * up) or swiglu_oai (gpt-oss: (up + 1) * gate * sigmoid(alpha * gate)) */
static int swiglu(nd_opctx *c, int ref_path, const nd_buf *g, const nd_buf *v, float limit, nd_buf **h, nd_err *e) {
    nd_run *r = c->r;
    const char *act = nd_stage_attr(c->st->def, "act");
    const int oai = act && !strcmp(act, "swiglu_oai");
    if (act && !oai && strcmp(act, "silu"))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: unknown act '%s' (silu, swiglu_oai)", nd_stage_file(r->rc, c->st->def), c->st->def->line,
                       c->st->def->name, act);
    double alpha = 0;
    if (oai) ND_TRY(nd_attr_req(r, c->st, "alpha", &alpha, e));
    *h = nd_buf_new(r, g->rows, g->cols, e);
    if (!*h) return e->code;
    if (oai) ND_TRY(r->be->swiglu_oai(r->be, g->p, v->p, g->n, (float)alpha, limit, r->ref_tf, (*h)->p, e));
    else ND_TRY(r->be->swiglu(r->be, g->p, v->p, g->n, limit, r->ref_tf, (*h)->p, e));
    return nd_round_out(r, ref_path, *h, e);
}

static void put_all(nd_run *r, nd_buf **b, int n) { for (int i = 0; i < n; i++) { nd_buf_put(r, b[i]); b[i] = NULL; } }

/* ---- gpt-oss's fused experts: one gate_up_proj module whose output rows alternate gate (even) and
 * up (odd), as GptOssExperts reads gate_up[..., ::2] and gate_up[..., 1::2] (the BF16 checkpoint's
 * [E, H, 2I] and the MXFP4 release's blocks, both seen per expert by src/ckpt) ---- */
static int fused_gate_up(nd_opctx *c, const char *prefix) {
    const char *gu = nd_stage_attr(c->st->def, "gate_up");
    if (!gu || strcmp(gu, "interleaved")) return 0;
    char n[240];
    snprintf(n, sizeof n, "%s.gate_up_proj.weight", prefix);
    if (nd_run_tensor(c->r, 0, n)) return 1;
    snprintf(n, sizeof n, "%s.gate_up_proj.weight_packed", prefix);
    return nd_run_tensor(c->r, 0, n) != NULL;
}

/* the even (odd = 0) or odd columns of gu [t, 2I] as [t, I] */
static int deinterleave(nd_run *r, const nd_buf *gu, int odd, nd_buf **out, nd_err *e) {
    if (gu->cols % 2) return nd_fail(e, ND_EXIT_BADINPUT, "a fused gate_up projection has an odd width %lld", (long long)gu->cols);
    *out = nd_buf_new(r, gu->rows, gu->cols / 2, e);
    if (!*out) return e->code;
    return r->be->copy2d(r->be, (*out)->p, 1, gu->p + odd, 2, 1, gu->n / 2, e);
}

/* The MLP block in isolated mode: the production projections chained inside it, the down
 * projection's input the SwiGLU of the production gate and up outputs (g, u; swapped as the stack
 * reads them); its amax figures come from h_ref, the reference input of the down projection. */
static int block_iso(nd_opctx *c, nd_lin *down, const nd_buf *h_ref, const nd_buf *g, const nd_buf *u, int swap, float limit,
                     nd_buf **h, nd_buf **o, nd_err *e) {
    nd_row fig;
    double amax = nd_buf_amax(c->r, h_ref, e);
    ND_TRY(swiglu(c, 0, swap ? u : g, swap ? g : u, limit, h, e));
    return nd_lin_prod(c->r, down, *h, amax, o, &fig, e);
}

/* The end of an MLP run: its 16 temporaries given back and its `opened` modules closed. */
static int mlp_done(nd_run *r, nd_buf **t, nd_lin *l, int opened, int rc) {
    for (int i = 0; i < 16; i++) nd_buf_put(r, t[i]);
    for (int i = 0; i < opened; i++) nd_lin_close(r, &l[i]);
    return rc;
}

/* mlp_run (below) for a fused interleaved gate_up_proj: rows layers.L.mlp.experts.E.gate_up_proj and
 * .down_proj; the SwiGLU reads the de-interleaved halves of each path's gate_up output */
static int mlp_run_gu(nd_opctx *c, const char *prefix, const char *stage_prefix, float limit, int swap, mlp_io *io,
                      nd_err *e) {
    nd_run *r = c->r;
    const char *proj[2] = {"gate_up_proj", "down_proj"};
    nd_lin l[2];
    char mod[2][192], stg[2][ND_NAME_LEN];
    int opened = 0, rc = 0;
    nd_buf *t[16] = {0}; /* before the first goto done */
    for (int i = 0; i < 2; i++) {
        snprintf(mod[i], sizeof mod[i], "%s.%s", prefix, proj[i]);
        snprintf(stg[i], sizeof stg[i], "%s.%s", stage_prefix, proj[i]);
    }
    for (; opened < 2 && !rc; opened++) rc = nd_lin_open(r, c->st, mod[opened], stg[opened], NULL, 1, 0, &l[opened], e);
    if (rc) { opened--; goto done; }
    /* reference: gu, g, v, h, o */
    if ((rc = nd_lin_ref(r, &l[0], io->x_ref, &t[0], e))) goto done;
    if ((rc = deinterleave(r, t[0], 0, &t[1], e)) || (rc = deinterleave(r, t[0], 1, &t[2], e))) goto done;
    if ((rc = swiglu(c, 1, t[1], t[2], limit, &t[3], e))) goto done;
    if ((rc = nd_lin_ref(r, &l[1], t[3], &io->o_ref, e))) goto done;
    if (nd_sink_calibrating(r)) goto done;
    int wi = c->want_iso, wc = c->want_chain && io->x_chain;
    if ((rc = nd_lin_stage(r, c->st, &l[0], io->x_ref, t[0], io->x_chain, wi, wc, &t[4], &t[5], e))) goto done;
    if (wc) {
        if ((rc = deinterleave(r, t[5], 0, &t[6], e)) || (rc = deinterleave(r, t[5], 1, &t[7], e))) goto done;
        if ((rc = swiglu(c, 0, swap ? t[7] : t[6], swap ? t[6] : t[7], limit, &t[8], e))) goto done;
    }
    if ((rc = nd_lin_stage(r, c->st, &l[1], t[3], io->o_ref, wc ? t[8] : NULL, wi, wc, &t[9], &io->o_chain, e))) goto done;
    if (wi) {
        if ((rc = deinterleave(r, t[4], 0, &t[10], e)) || (rc = deinterleave(r, t[4], 1, &t[11], e))) goto done;
        rc = block_iso(c, &l[1], t[3], t[10], t[11], swap, limit, &t[12], &io->o_iso, e);
    }
done:
    return mlp_done(r, t, l, opened, rc);
}

/* prefix: canonical module prefix (".gate_proj" etc. appended); stage_prefix likewise.
 * swap: the production path reads the fused gate/up halves in the other order (W31 where the
 * checkpoint is W13, stack knob gate_up_order): its SwiGLU computes act(up) * gate. The reference
 * path and every projection's own row are unaffected; the block output and the down projection's
 * chained input carry it. */
static int mlp_run(nd_opctx *c, const char *prefix, const char *stage_prefix, float limit, int swap, mlp_io *io,
                   nd_err *e) {
    if (fused_gate_up(c, prefix)) return mlp_run_gu(c, prefix, stage_prefix, limit, swap, io, e);
    nd_run *r = c->r;
    const char *proj[3] = {"gate_proj", "up_proj", "down_proj"};
    nd_lin l[3];
    char mod[3][192], stg[3][ND_NAME_LEN], fused[400];
    int opened = 0, rc = 0;
    nd_buf *t[16] = {0}; /* before the first goto done (a module that fails to open) */
    for (int i = 0; i < 3; i++) {
        snprintf(mod[i], sizeof mod[i], "%s.%s", prefix, proj[i]);
        snprintf(stg[i], sizeof stg[i], "%s.%s", stage_prefix, proj[i]);
    }
    snprintf(fused, sizeof fused, "%s,%s", mod[0], mod[1]);
    for (; opened < 3 && !rc; opened++)
        rc = nd_lin_open(r, c->st, mod[opened], stg[opened], opened < 2 ? fused : NULL, 1, 0, &l[opened], e);
    if (rc) { opened--; goto done; }
    /* reference: g, v, h, o */
    if ((rc = nd_lin_ref(r, &l[0], io->x_ref, &t[0], e))) goto done;
    if ((rc = nd_lin_ref(r, &l[1], io->x_ref, &t[1], e))) goto done;
    if ((rc = swiglu(c, 1, t[0], t[1], limit, &t[2], e))) goto done;
    if ((rc = nd_lin_ref(r, &l[2], t[2], &io->o_ref, e))) goto done;
    if (nd_sink_calibrating(r)) goto done;
    /* per-projection rows (isolated: each projection on its reference input) */
    int wi = c->want_iso, wc = c->want_chain && io->x_chain;
    if ((rc = nd_lin_stage(r, c->st, &l[0], io->x_ref, t[0], io->x_chain, wi, wc, &t[3], &t[4], e))) goto done;
    if ((rc = nd_lin_stage(r, c->st, &l[1], io->x_ref, t[1], io->x_chain, wi, wc, &t[5], &t[6], e))) goto done;
    if (wc && (rc = swiglu(c, 0, swap ? t[6] : t[4], swap ? t[4] : t[6], limit, &t[7], e))) goto done;
    if ((rc = nd_lin_stage(r, c->st, &l[2], t[2], io->o_ref, wc ? t[7] : NULL, wi, wc, &t[8], &io->o_chain, e))) goto done;
    if (wi) rc = block_iso(c, &l[2], t[2], t[3], t[5], swap, limit, &t[9], &io->o_iso, e);
done:
    return mlp_done(r, t, l, opened, rc);
}

static int gather(nd_run *r, const nd_buf *x, const int32_t *rows, int64_t nr, nd_buf **out, nd_err *e) {
    *out = nd_buf_new(r, nr, x->cols, e);
    if (!*out) return e->code;
    return r->be->gather_rows(r->be, x->p, rows, nr, x->cols, (*out)->p, e);
}

/* The gate/up order the production path uses for this composite stage (the stack's, or the stage's
 * override; bisect's reference-only stages keep the checkpoint's order). */
static int gate_up_swap(nd_opctx *c) {
    return !nd_sink_calibrating(c->r) && !nd_run_ref_only(c->r, c->st->name) && nd_stack_gate_up_swap(&c->r->stack, c->st->name);
}

/* Single-stage replay of this composite row (diagnosis): what the candidate repairs need. */
static nd_stage_info *composite_info(nd_opctx *c) {
    nd_stage_info *in = nd_sink_describe(c->r, c->st);
    if (in) in->composite = 1;
    return in;
}

int nd_op_mlp(nd_opctx *c, nd_err *e) {
    nd_run *r = c->r;
    double limit;
    ND_TRY(nd_attr_num(r, c->st, "limit", 0, &limit, e));
    const int swap = gate_up_swap(c);
    nd_stage_info *in = composite_info(c);
    if (in) in->gate_up_swap = swap;
    mlp_io io = {.x_ref = c->in_ref[0], .x_chain = c->want_chain ? c->in_chain[0] : NULL};
    int rc = mlp_run(c, c->st->module, c->st->name, (float)limit, swap, &io, e);
    c->out_ref[0] = io.o_ref;
    c->out_iso[0] = io.o_iso;
    c->out_chain[0] = io.o_chain;
    c->quantized = 1;
    return rc;
}

/* tokens (and weights) a routing sends to expert ex: at most one entry per token (routings are
 * checked for distinct experts where they are made or read; rows holds one slot per token) */
static int64_t tokens_of(const nd_buf *rt, int ex, int32_t *rows, float *w) {
    int64_t n = 0;
    for (int64_t i = 0; i < rt->rows; i++)
        for (int s = 0; s < rt->k; s++)
            if (rt->idx[i * rt->k + s] == ex) { rows[n] = (int32_t)i; w[n] = rt->w[i * rt->k + s]; n++; break; }
    return n;
}

static int picked(const nd_buf *rt, int ex) {
    for (int64_t i = 0; rt && i < rt->rows * rt->k; i++)
        if (rt->idx[i] == ex) return 1;
    return 0;
}

/* Start copying the bytes of the first expert after `after` that a token picks on either path
 * (prefetch.c), so its upload overlaps the current expert's work. */
static void prefetch_after(nd_opctx *c, int after, int E, const nd_buf *rt_ref, const nd_buf *rt_ch) {
    static const char *const proj[3] = {"gate_proj", "up_proj", "down_proj"};
    for (int nx = after + 1; nx < E; nx++) {
        if (!picked(rt_ref, nx) && !picked(rt_ch, nx)) continue;
        char prefix[192], mod[3][208];
        const char *mods[3];
        nd_expand(c->st->module, c->st->layer, nx, prefix, sizeof prefix);
        for (int i = 0; i < 3; i++) {
            snprintf(mod[i], sizeof mod[i], "%s.%s", prefix, proj[i]);
            mods[i] = mod[i];
        }
        nd_prefetch_modules(c->r, mods, 3);
        return;
    }
}

int nd_op_moe_experts(nd_opctx *c, nd_err *e) {
    nd_run *r = c->r;
    double limit, E;
    ND_TRY(nd_attr_num(r, c->st, "limit", 0, &limit, e));
    ND_TRY(nd_attr_req(r, c->st, "experts", &E, e));
    nd_buf *x_ref = c->in_ref[0], *rt_ref = c->in_ref[1];
    nd_buf *x_ch = c->want_chain ? c->in_chain[0] : NULL, *rt_ch = c->want_chain ? c->in_chain[1] : NULL;
    if (!rt_ref->idx) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: second input must be a router output", nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name);
    int64_t t = x_ref->rows, d = x_ref->cols;
    /* every pick names an expert of the stage: a routing decision read from a bundle (replay) that
     * names none would run no expert and compare zeros with zeros */
    for (int q = 0; q < 2; q++) {
        const nd_buf *rt = q ? rt_ch : rt_ref;
        for (int64_t i = 0; rt && rt->idx && i < rt->rows * rt->k; i++)
            if (rt->idx[i] < 0 || rt->idx[i] >= (int64_t)E)
                return nd_fail(e, ND_EXIT_BADINPUT, "its routing decision sends token %lld to expert %d, and the stage has experts "
                               "0-%lld: a corrupt routing decision (it would run no expert)", (long long)(i / rt->k), (int)rt->idx[i], (long long)E - 1);
    }
    /* The production combine applies the router's routed_scaling_factor (already in the routing
     * weights once) `times` times, as the stack does (knob routed_scaling, or the stage's
     * override): the production weights carry the factor s^(times-1). */
    const int swap = gate_up_swap(c);
    const int times = nd_sink_calibrating(c->r) || nd_run_ref_only(r, c->st->name) ? 1 : nd_stack_routed_scaling(&r->stack, c->st->name);
    const float s_route = rt_ref->route_scaling;
    const float prod_scale = times == 1 || !(s_route > 0) ? 1.0f : times == 2 ? s_route : 1.0f / s_route;
    nd_stage_info *info = composite_info(c);
    if (info) {
        info->gate_up_swap = swap;
        info->routed_scaling = times;
        info->routed_scaling_factor = s_route;
    }
    nd_buf *y[3] = {nd_buf_new(r, t, d, e), c->want_iso ? nd_buf_new(r, t, d, e) : NULL, x_ch ? nd_buf_new(r, t, d, e) : NULL};
    int32_t *rows = malloc(sizeof(int32_t) * (size_t)t * 2);
    float *w = malloc(sizeof(float) * (size_t)t * 3); /* reference picks, production picks, production weights */
    float *wp = w ? w + 2 * t : NULL;
    int rc = (!y[0] || (c->want_iso && !y[1]) || (x_ch && !y[2]) || !rows || !w) ? nd_fail(e, ND_EXIT_INTERNAL, "out of memory") : 0;
    for (int i = 0; i < 3 && !rc; i++)
        if (y[i]) {
            float *zero = calloc((size_t)(t * d), sizeof(float));
            rc = zero ? r->be->upload(r->be, y[i]->p, zero, sizeof(float) * (size_t)(t * d), e) : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
            free(zero);
        }
    /* Expert parallelism, simulated in one process (--ep N): experts are split contiguously into
     * N ranks of E/N as vLLM does; each rank sums its local experts' outputs, and the combine adds
     * the ranks' partial outputs in rank order, as the all-to-all combine does. */
    int ep = r->ep > 1 ? r->ep : 1;
    if (!rc && ep > 1 && (int64_t)E % ep)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "--ep %d does not divide the %d experts of %s", ep, (int)E, c->st->name);
    nd_buf *part[3] = {0};
    for (int i = 0; i < 3 && !rc && ep > 1; i++)
        if (y[i]) {
            part[i] = nd_buf_new(r, t, d, e);
            rc = part[i] ? r->be->copy(r->be, part[i]->p, y[i]->p, sizeof(float) * (size_t)(t * d), e) : e->code; /* zeros */
        }
    nd_buf *acc[3] = {ep > 1 ? part[0] : y[0], ep > 1 ? part[1] : y[1], ep > 1 ? part[2] : y[2]};
    const int per_rank = (int)E / ep;
    /* BF16 routing weights (transformers' V4): each weight·output product is a BF16 tensor op */
    const int bf16_products = nd_stage_tf(r, c->st, "bf16_products");
    char prefix[192], stage_prefix[ND_NAME_LEN];
    if (!rc) prefetch_after(c, -1, (int)E, rt_ref, rt_ch);
    for (int ex = 0; ex < (int)E && !rc; ex++) {
        if (ep > 1 && ex > 0 && ex % per_rank == 0) {
            /* the previous rank's partial output joins the combine, then the next rank starts */
            for (int i = 0; i < 3 && !rc; i++)
                if (y[i]) {
                    rc = r->be->add(r->be, y[i]->p, part[i]->p, t * d, e);
                }
            for (int i = 0; i < 3 && !rc; i++)
                if (part[i]) {
                    float *zero = calloc((size_t)(t * d), sizeof(float));
                    rc = zero ? r->be->upload(r->be, part[i]->p, zero, sizeof(float) * (size_t)(t * d), e) : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
                    free(zero);
                }
        }
        int64_t nr = tokens_of(rt_ref, ex, rows, w);
        int64_t nc = rt_ch ? tokens_of(rt_ch, ex, rows + t, w + t) : 0;
        if (!nr && !nc) continue; /* never loaded */
        for (int64_t i = 0; i < nr; i++) wp[i] = w[i] * prod_scale;
        for (int64_t i = 0; i < nc; i++) w[t + i] *= prod_scale; /* used by the production combine only */
        prefetch_after(c, ex, (int)E, rt_ref, rt_ch); /* while this one uploads and computes */
        nd_expand(c->st->module, c->st->layer, ex, prefix, sizeof prefix);
        snprintf(stage_prefix, sizeof stage_prefix, "%s", prefix + (strncmp(prefix, "model.", 6) ? 0 : 6));
        mlp_io io = {0};
        nd_buf *xc_same = NULL;
        if (nr) {
            rc = gather(r, x_ref, rows, nr, &io.x_ref, e);
            if (!rc && x_ch) rc = gather(r, x_ch, rows, nr, &xc_same, e);
            io.x_chain = xc_same;
            if (!rc) rc = mlp_run(c, prefix, stage_prefix, (float)limit, swap, &io, e);
            if (!rc) rc = r->be->scatter_add_rows(r->be, acc[0]->p, io.o_ref->p, rows, w, nr, d, bf16_products, e);
            if (!rc && y[1]) rc = r->be->scatter_add_rows(r->be, acc[1]->p, io.o_iso->p, rows, wp, nr, d, bf16_products, e);
        }
        /* the chained block output follows the production routing */
        int same = nr == nc && !memcmp(rows, rows + t, sizeof(int32_t) * (size_t)nr);
        if (!rc && y[2] && nc) {
            if (same && io.o_chain) rc = r->be->scatter_add_rows(r->be, acc[2]->p, io.o_chain->p, rows + t, w + t, nc, d, bf16_products, e);
            else {
                /* production-only token set: run the expert without emitting rows */
                nd_buf *xg = NULL;
                mlp_io pio = {0};
                rc = gather(r, x_ch, rows + t, nc, &xg, e);
                pio.x_ref = xg;
                int saved_iso = c->want_iso, saved_chain = c->want_chain;
                c->want_iso = 1; c->want_chain = 0;
                r->silent++; /* rows of this internal run are not reported */
                if (!rc) rc = mlp_run(c, prefix, stage_prefix, (float)limit, swap, &pio, e);
                r->silent--;
                c->want_iso = saved_iso; c->want_chain = saved_chain;
                if (!rc) rc = r->be->scatter_add_rows(r->be, acc[2]->p, pio.o_iso->p, rows + t, w + t, nc, d, bf16_products, e);
                nd_buf_put(r, xg);
                nd_buf_put(r, pio.o_ref); nd_buf_put(r, pio.o_iso); nd_buf_put(r, pio.o_chain);
            }
        }
        nd_buf_put(r, io.x_ref); nd_buf_put(r, xc_same);
        nd_buf_put(r, io.o_ref); nd_buf_put(r, io.o_iso); nd_buf_put(r, io.o_chain);
    }
    for (int i = 0; i < 3 && !rc && ep > 1; i++) if (y[i]) rc = r->be->add(r->be, y[i]->p, part[i]->p, t * d, e); /* last rank */
    put_all(r, part, 3);
    free(rows);
    free(w);
    for (int i = 0; i < 3 && !rc; i++) if (y[i]) rc = nd_round_out(r, i == 0, y[i], e); /* y[0]: reference */
    if (rc) { put_all(r, y, 3); return rc; }
    c->out_ref[0] = y[0];
    c->out_iso[0] = y[1];
    c->out_chain[0] = y[2];
    c->quantized = 1;
    return 0;
}
