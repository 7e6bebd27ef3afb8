/* ops_gdn.c — Qwen3-Next's ops beside the common ones (kernels/numerics/nd_gdn.h):
 *   gate_mul         y = x · act(g): gated attention's `o * sigmoid(gate)`, RMSNormGated's
 *                    `h * silu(z)`, the shared expert's `sigmoid(shared_expert_gate(x)) * y`
 *                    (a gate of one column per row broadcast over the row)
 *   causal_conv1d    Gated DeltaNet's depthwise causal conv over the tokens, SiLU after
 *   gated_delta_rule the gated delta rule recurrence (prefill from a zero state)
 * Their production math is the reference math (nd_run_pure). With --ref-numerics transformers and
 * `tf: bf16` they take the BF16 steps transformers' BF16 model takes inside them (nd_gdn.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "ops.h"
#include "numerics/nd_gdn.h"

/* the stage output's BF16 rounding (none on the reference path under fp32-exact) */
static int round_out(nd_opctx *c, nd_buf *b, nd_err *e) { return nd_round_out(c->r, c->on_ref, b, e); }

/* the `act` attribute: sigmoid (default) or silu */
static int gate_act(nd_opctx *c, const char *dflt, int *act, nd_err *e) {
    char buf[32];
    const char *v = nd_attr_str(c->st, "act", buf, sizeof buf);
    if (!v) v = dflt;
    if (!strcmp(v, "sigmoid")) *act = ND_GATE_SIGMOID;
    else if (!strcmp(v, "silu")) *act = ND_GATE_SILU;
    else if (!strcmp(v, "gelu_tanh") && !strcmp(c->st->def->op, "gate_mul")) *act = ND_GATE_GELU_TANH;
    else if (!strcmp(v, "none")) *act = -1;
    else
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: act '%s' (sigmoid, silu%s)", nd_stage_file(c->r->rc, c->st->def),
                       c->st->def->line, c->st->def->name, v, strcmp(c->st->def->op, "gate_mul") ? ", none" : ", gelu_tanh");
    return 0;
}

/* ---- gate_mul: in [x, g] -> x · act(g), g of x's width or of one column per row ---- */
static int gate_mul_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    int act;
    ND_TRY(gate_act(c, "sigmoid", &act, e));
    if (act < 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: gate_mul needs act sigmoid, silu or gelu_tanh", nd_stage_file(c->r->rc, c->st->def),
                       c->st->def->line, c->st->def->name);
    nd_buf *x = in[0], *g = in[1];
    if (g->rows != x->rows || g->cols < 1 || x->cols % g->cols)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: gate of %lld x %lld does not fit the input's %lld x %lld", c->st->name,
                       (long long)g->rows, (long long)g->cols, (long long)x->rows, (long long)x->cols);
    out[0] = nd_buf_new(c->r, x->rows, x->cols, e);
    if (!out[0]) return e->code;
    ND_TRY(c->r->be->gate_mul(c->r->be, x->p, g->p, x->rows, x->cols, g->cols, act, nd_stage_tf(c->r, c->st, "bf16"),
                              out[0]->p, e));
    return round_out(c, out[0], e);
}

/* ---- causal_conv1d: depthwise over the tokens, weight [C, 1, K] or [C, K] ---- */
static int conv_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    int act;
    ND_TRY(gate_act(c, "none", &act, e));
    const nd_tview *t;
    ND_TRY(nd_stage_tensor(c, "weight", 1, &t, e));
    nd_buf *x = in[0];
    const int64_t kern = t->ndim >= 2 ? t->shape[t->ndim - 1] : 0;
    if (t->ndim < 2 || t->ndim > 3 || (t->ndim == 3 && t->shape[1] != 1) || t->shape[0] != x->cols || kern < 1)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s must be [%lld, 1, K] or [%lld, K] (a depthwise conv over the stage's "
                       "%lld channels)", t->file, t->name, (long long)x->cols, (long long)x->cols, (long long)x->cols);
    float *w = NULL;
    ND_TRY(nd_tensor_f32(r, t, &w, e));
    out[0] = nd_buf_new(r, x->rows, x->cols, e);
    int rc = out[0] ? r->be->causal_conv1d(r->be, x->p, w, x->rows, x->cols, kern, act == ND_GATE_SILU,
                                           nd_stage_tf(r, c->st, "bf16"), out[0]->p, e)
                    : e->code;
    r->be->release(r->be, w);
    if (!rc) rc = round_out(c, out[0], e);
    return rc;
}

/* a per-head parameter vector ([heads] F32/BF16) on the host */
static int head_params(nd_opctx *c, const char *attr, int64_t heads, float **out, nd_err *e) {
    const nd_tview *t;
    ND_TRY(nd_stage_tensor(c, attr, 1, &t, e));
    if (t->numel != heads)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s has %lld elements, the stage has %lld value heads", t->file, t->name,
                       (long long)t->numel, (long long)heads);
    *out = malloc(sizeof(float) * (size_t)heads);
    if (!*out) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    int rc = nd_tensor_host_f32(t, *out, heads, e);
    if (rc) { free(*out); *out = NULL; }
    return rc;
}

/* ---- gated_delta_rule: in [q, k, v, a, b] -> o [t, v_heads * v_dim] ---- */
static int gdr_fn(nd_opctx *c, nd_buf **in, nd_buf **out, nd_err *e) {
    nd_run *r = c->r;
    double nk, nv, dk, dv;
    ND_TRY(nd_attr_reqs(r, c->st, e, "k_heads", &nk, "v_heads", &nv, "k_dim", &dk, "v_dim", &dv, NULL));
    if (!(nk >= 1 && nv >= 1 && dk >= 1 && dv >= 1) || fmod(nv, nk) != 0)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s: %g value heads are not a multiple of %g key heads (config.json "
                       "linear_num_value_heads, linear_num_key_heads)", nd_ckpt_dir(r->ck), c->st->name, nv, nk);
    nd_buf *q = in[0], *k = in[1], *v = in[2], *a = in[3], *b = in[4];
    const int64_t t = q->rows, kw = (int64_t)(nk * dk), vw = (int64_t)(nv * dv), h = (int64_t)nv;
    if (q->cols != kw || k->cols != kw || v->cols != vw || a->cols != h || b->cols != h || k->rows != t ||
        v->rows != t || a->rows != t || b->rows != t)
        return nd_fail(e, ND_EXIT_BADINPUT, "stage %s: q/k/v/a/b widths %lld/%lld/%lld/%lld/%lld do not fit %g key heads of "
                       "%g and %g value heads of %g", c->st->name, (long long)q->cols, (long long)k->cols,
                       (long long)v->cols, (long long)a->cols, (long long)b->cols, nk, dk, nv, dv);
    float *alog = NULL, *dtb = NULL;
    ND_TRY(head_params(c, "a_log", h, &alog, e));
    int rc = head_params(c, "dt_bias", h, &dtb, e);
    if (!rc) {
        out[0] = nd_buf_new(r, t, vw, e);
        rc = out[0] ? r->be->gated_delta_rule(r->be, q->p, k->p, v->p, a->p, b->p, alog, dtb, t, (int64_t)nk, h,
                                              (int64_t)dk, (int64_t)dv, nd_stage_tf(r, c->st, "bf16"), out[0]->p, e)
                    : e->code;
    }
    free(alog);
    free(dtb);
    if (!rc) rc = round_out(c, out[0], e);
    return rc;
}

int nd_op_gate_mul(nd_opctx *c, nd_err *e) { return nd_run_pure(c, gate_mul_fn, e); }
int nd_op_causal_conv1d(nd_opctx *c, nd_err *e) { return nd_run_pure(c, conv_fn, e); }
int nd_op_gated_delta_rule(nd_opctx *c, nd_err *e) { return nd_run_pure(c, gdr_fn, e); }
