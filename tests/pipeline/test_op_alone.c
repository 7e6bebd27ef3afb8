/* test_op_alone.c — an op runs alone (issue 23: ops compute, the stage loop records). The stage
 * context is built by hand: the CPU backend, the golden Llama NVFP4 checkpoint, the llama recipe,
 * the exact stack, fp32-exact reference numerics, no trace writer, no stage loop; the sink only
 * keeps what it is handed. rmsnorm and the NVFP4 W4A4 q_proj are run on made-up inputs and their
 * outputs checked against the math done here from the checkpoint's bytes:
 *   rmsnorm reference   x / sqrt(mean(x²) + eps) * w (FP32-exact: no rounding), chained: the same
 *                       rounded to BF16 (98% bit-equal, the rest one BF16 step at most); the op
 *                       hands no row (the loop records a pure stage)
 *   linear reference    x Wᵀ with W = e2m1(code) * e4m3(block scale) / weight_global_scale
 *   linear isolated     x quantized in blocks of 16 with input_global_scale (vLLM's quantizer),
 *                       times the codes x block scales of W, times 1 / (g_in g_w), BF16
 *   rows                one isolated and one chained row, handed with the op's own output
 *                       buffers and the figures the op knows (the multiplier, the weight error). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "nd_test.h"
#include "pipeline/run.h"
#include "pipeline/sink.h"
#include "numerics/nd_numerics.h"

#define T 5 /* tokens */

typedef struct kept {
    char name[ND_NAME_LEN], op[16];
    int mode, quantized;
    const nd_buf *ref, *prod;
    nd_row extra;
} kept;

typedef struct collector {
    kept rows[8];
    int n, routing, other;
} collector;

static int keep_row(void *user, const nd_stage *st, const nd_result *res, nd_err *e) {
    (void)st; (void)e;
    collector *c = user;
    if (c->n == 8) return 0;
    kept *k = &c->rows[c->n++];
    snprintf(k->name, sizeof k->name, "%s", res->name);
    snprintf(k->op, sizeof k->op, "%s", res->op);
    k->mode = res->mode;
    k->quantized = res->quantized;
    k->ref = res->ref;
    k->prod = res->prod;
    k->extra = *res->extra;
    return 0;
}
static int keep_routing(void *user, const nd_stage *st, const nd_buf *ref, const nd_buf *chain, nd_err *e) {
    (void)st; (void)ref; (void)chain; (void)e;
    ((collector *)user)->routing++;
    return 0;
}
static nd_stage_info *no_info(void *user, const char *stage) { (void)stage; ((collector *)user)->other++; return NULL; }

static float *host_of(nd_run *r, const nd_buf *b) {
    float *h = malloc(sizeof(float) * (size_t)b->n);
    nd_err e = {0};
    if (h && r->be->download(r->be, h, b->p, sizeof(float) * (size_t)b->n, &e)) { free(h); return NULL; }
    return h;
}

static nd_buf *buf_of(nd_run *r, const float *h, int64_t rows, int64_t cols, nd_err *e) {
    nd_buf *b = nd_buf_new(r, rows, cols, e);
    if (b && r->be->upload(r->be, b->p, h, sizeof(float) * (size_t)(rows * cols), e)) { nd_buf_put(r, b); return NULL; }
    return b;
}

static const nd_stage_def *stage_def(const nd_recipe *rc, const char *tmpl) {
    for (int i = 0; i < rc->n_layer; i++)
        if (!strcmp(rc->layer[i].name, tmpl)) return &rc->layer[i];
    return NULL;
}

static void make_stage(const nd_stage_def *def, nd_stage *st) {
    memset(st, 0, sizeof *st);
    st->def = def;
    st->layer = 0;
    nd_expand(def->name, 0, 0, st->name, sizeof st->name);
    nd_expand(def->module, 0, 0, st->module, sizeof st->module);
}

static void opctx(nd_run *r, const nd_stage *st, nd_buf *x_ref, nd_buf *x_chain, nd_opctx *c) {
    memset(c, 0, sizeof *c);
    c->r = r;
    c->st = st;
    c->n_in = st->def->n_in;
    c->n_out = st->def->n_out;
    c->in_ref[0] = x_ref;
    c->in_chain[0] = x_chain;
    c->want_iso = c->want_chain = 1;
}

static float f32_of(const nd_tview *t, int64_t i) {
    float v;
    memcpy(&v, (const char *)t->data + 4 * i, 4);
    return v;
}

/* the code of element k of row n of a packed [N, K/2] NVFP4 weight: low nibble first */
static uint8_t wcode(const nd_tview *w, int64_t k_half, int64_t n, int64_t k) {
    uint8_t b = ((const uint8_t *)w->data)[n * k_half + k / 2];
    return (uint8_t)(k % 2 ? b >> 4 : b & 15);
}

int main(void) {
    const char *root = getenv("ND_SOURCE_ROOT");
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/golden/conformance/llama/nvfp4", root ? root : ".");
    nd_err e = {0};
    nd_run r;
    memset(&r, 0, sizeof r);
    collector col;
    memset(&col, 0, sizeof col);
    nd_sink sink = {.user = &col, .row = keep_row, .routing = keep_routing, .stage_info = no_info};
    int rc = nd_backend_cpu_create(&r.be, &e);
    if (!rc) rc = nd_ckpt_open(dir, &r.ck, &e);
    if (!rc) rc = nd_recipe_load("llama", &r.rc, &e);
    if (!rc) rc = nd_stack_load("exact", &r.stack, &e);
    if (rc) { fprintf(stderr, "setup: %s\n", e.msg); return 1; }
    r.cfg = nd_ckpt_config(r.ck);
    r.sink = &sink;
    r.loop = NULL; /* no stage loop: the sink is all that records */
    r.ref_exact = 1;
    int64_t tokens[T] = {1, 2, 3, 4, 5};
    int32_t pos[T] = {0, 1, 2, 3, 4};
    r.t = T;
    r.tokens = tokens;
    r.pos = pos;
    const int64_t d = r.cfg->hidden_size;
    CHECK_EQ_INT(d, 64);

    /* inputs: a reference activation and a chained one that drifted from it */
    float *x = malloc(sizeof(float) * (size_t)(T * d)), *xc = malloc(sizeof(float) * (size_t)(T * d));
    for (int64_t i = 0; i < T * d; i++) {
        x[i] = (float)(2.5 * sin(0.37 * (double)i + 0.1) * (1.0 + 0.5 * (double)(i % 7) / 7.0));
        xc[i] = x[i] * 1.1f + 0.01f * (float)((i % 5) - 2);
    }

    /* ---- rmsnorm ---- */
    const nd_stage_def *dn = stage_def(r.rc, "layers.{L}.input_layernorm");
    CHECK(dn != NULL, "llama recipe has layers.{L}.input_layernorm");
    nd_stage sn;
    make_stage(dn, &sn);
    nd_buf *bx = buf_of(&r, x, T, d, &e), *bxc = buf_of(&r, xc, T, d, &e);
    CHECK(bx && bxc, "inputs uploaded: %s", e.msg);
    nd_opctx c;
    opctx(&r, &sn, bx, bxc, &c);
    nd_op_fn fn = nd_op_lookup(dn->op);
    rc = fn ? fn(&c, &e) : 1;
    CHECK(rc == 0, "rmsnorm ran alone: %s", e.msg);
    const nd_tview *nw = nd_ckpt_find(r.ck, "model.layers.0.input_layernorm.weight");
    CHECK(nw != NULL, "norm weight present");
    double eps = 0;
    CHECK(nd_cfg_number(r.cfg, "rms_norm_eps", &eps) == 0 && eps > 0, "rms_norm_eps");
    if (!rc && nw) {
        float w[64];
        nd_tensor_host_f32(nw, w, d, &e);
        float *yr = host_of(&r, c.out_ref[0]), *yc = host_of(&r, c.out_chain[0]);
        double worst_r = 0, worst_c = 0;
        int exact = 0;
        for (int t = 0; t < T; t++) {
            double ss = 0, ssc = 0;
            for (int64_t k = 0; k < d; k++) { ss += (double)x[t * d + k] * x[t * d + k]; ssc += (double)xc[t * d + k] * xc[t * d + k]; }
            double inv = 1.0 / sqrt(ss / (double)d + eps), invc = 1.0 / sqrt(ssc / (double)d + eps);
            for (int64_t k = 0; k < d; k++) {
                double want = x[t * d + k] * inv * w[k];
                worst_r = fmax(worst_r, fabs(yr[t * d + k] - want) / (1e-6 + fabs(want)));
                double wc = (double)nd_bf16_round((float)(xc[t * d + k] * invc * w[k]));
                /* the chained path rounds to BF16; a value at a rounding boundary may take the
                 * neighbour: one BF16 step */
                worst_c = fmax(worst_c, fabs(yc[t * d + k] - wc) / (1e-6 + fabs(wc)));
                exact += yc[t * d + k] == (float)wc;
            }
        }
        CHECK(worst_r < 1e-6, "rmsnorm reference: worst relative error %.3g", worst_r);
        CHECK(worst_c <= 1.0 / 128, "rmsnorm chained (BF16): worst relative error %.3g", worst_c);
        CHECK(exact >= T * d * 98 / 100, "rmsnorm chained: %d of %lld values the same BF16", exact, (long long)(T * d));
        CHECK(c.out_iso[0] == c.out_ref[0], "a pure op's isolated output is its reference output");
        CHECK_EQ_INT(col.n, 0); /* the loop records a pure stage's rows, not the op */
        free(yr);
        free(yc);
    }
    for (int i = 0; i < ND_RECIPE_MAX_IO; i++) { nd_buf_put(&r, c.out_ref[i]); nd_buf_put(&r, c.out_iso[i]); nd_buf_put(&r, c.out_chain[i]); }

    /* ---- q_proj: NVFP4 W4A4 ---- */
    const nd_stage_def *dq = stage_def(r.rc, "layers.{L}.self_attn.q_proj");
    CHECK(dq != NULL, "llama recipe has layers.{L}.self_attn.q_proj");
    nd_stage sq;
    make_stage(dq, &sq);
    opctx(&r, &sq, bx, bxc, &c);
    fn = nd_op_lookup(dq->op);
    rc = fn ? fn(&c, &e) : 1;
    CHECK(rc == 0, "linear ran alone: %s", e.msg);
    const nd_tview *wp = nd_ckpt_find(r.ck, "model.layers.0.self_attn.q_proj.weight_packed");
    const nd_tview *ws = nd_ckpt_find(r.ck, "model.layers.0.self_attn.q_proj.weight_scale");
    const nd_tview *wg = nd_ckpt_find(r.ck, "model.layers.0.self_attn.q_proj.weight_global_scale");
    const nd_tview *ig = nd_ckpt_find(r.ck, "model.layers.0.self_attn.q_proj.input_global_scale");
    CHECK(wp && ws && wg && ig, "q_proj tensors present");
    if (!rc && wp && ws && wg && ig) {
        const int64_t n = wp->shape[0], kh = wp->shape[1];
        CHECK_EQ_INT(kh * 2, d);
        const float gw = f32_of(wg, 0), gi = f32_of(ig, 0);
        float *yr = host_of(&r, c.out_ref[0]), *yi = host_of(&r, c.out_iso[0]);
        double worst_r = 0, worst_i = 0, err2 = 0, ref2 = 0;
        int exact = 0;
        for (int t = 0; t < T; t++) {
            /* the activation's codes x block scales (vLLM scaled_fp4_quant) */
            float xq[64];
            for (int64_t b = 0; b < d; b += 16) {
                float amax = 0;
                for (int j = 0; j < 16; j++) amax = fmaxf(amax, fabsf(x[t * d + b + j]));
                nd_block_q p = nd_nvfp4_block_params(amax, gi, ND_QSEM_KERNEL);
                for (int j = 0; j < 16; j++)
                    xq[b + j] = nd_e2m1_to_f32(nd_nvfp4_quant_elem(x[t * d + b + j], p, gi, ND_QSEM_KERNEL)) * nd_e4m3_to_f32(p.sf);
            }
            for (int64_t o = 0; o < n; o++) {
                double acc_r = 0, acc_q = 0, mag = 0;
                for (int64_t k = 0; k < d; k++) {
                    const double s = nd_e4m3_to_f32(((const uint8_t *)ws->data)[o * (d / 16) + k / 16]);
                    const double wq = nd_e2m1_to_f32(wcode(wp, kh, o, k)) * s;
                    acc_r += (double)x[t * d + k] * (wq / gw);
                    acc_q += (double)xq[k] * wq;
                    mag += fabs((double)x[t * d + k] * (wq / gw));
                }
                worst_r = fmax(worst_r, fabs(yr[t * n + o] - acc_r) / (1e-6 + mag));
                const double want = nd_bf16_round((float)(acc_q / ((double)gi * gw)));
                worst_i = fmax(worst_i, fabs(yi[t * n + o] - want) / (1e-6 + fabs(want)));
                exact += yi[t * n + o] == (float)want;
                err2 += (yi[t * n + o] - acc_r) * (yi[t * n + o] - acc_r);
                ref2 += acc_r * acc_r;
            }
        }
        CHECK(worst_r < 5e-7, "linear reference: worst error %.3g of the row's magnitude", worst_r);
        CHECK(worst_i <= 1.0 / 128, "linear isolated (W4A4, BF16): worst relative error %.3g", worst_i);
        CHECK(exact >= T * n * 98 / 100, "linear isolated: %d of %lld values the same BF16", exact, (long long)(T * n));
        /* NVFP4 moves the output, by the quantization error and no more */
        const double sqnr = 10 * log10(ref2 / err2);
        CHECK(sqnr > 12 && sqnr < 60, "isolated output SQNR %.2f dB", sqnr);

        /* the rows: handed to the sink, with the op's own buffers */
        CHECK_EQ_INT(col.n, 2);
        for (int i = 0; i < col.n && i < 2; i++) {
            kept *k = &col.rows[i];
            CHECK(!strcmp(k->name, "layers.0.self_attn.q_proj"), "row %d name %s", i, k->name);
            CHECK(!strcmp(k->op, "linear"), "row %d op %s", i, k->op);
            CHECK_EQ_INT(k->mode, i == 0 ? ND_MODE_ISOLATED : ND_MODE_CHAINED);
            CHECK_EQ_INT(k->quantized, 1);
            CHECK(k->ref == c.out_ref[0], "row %d: the reference output is the op's", i);
            CHECK(k->prod == (i == 0 ? c.out_iso[0] : c.out_chain[0]), "row %d: the production output is the op's", i);
            CHECK_NEAR(k->extra.scale_mult, gi, 0);
            CHECK(isnan(k->extra.weight_rel_l2), "row %d weight_rel_l2 %g: not measured without original weights", i,
                  k->extra.weight_rel_l2);
        }
        if (col.n >= 1) CHECK_EQ_INT(col.rows[0].extra.in_nonfinite, 0);
        CHECK_EQ_INT(col.routing, 0);
        CHECK(col.other >= 1, "the op asked the sink whether the stage is being described (%d)", col.other);
        free(yr);
        free(yi);
    }
    for (int i = 0; i < ND_RECIPE_MAX_IO; i++) { nd_buf_put(&r, c.out_ref[i]); nd_buf_put(&r, c.out_iso[i]); nd_buf_put(&r, c.out_chain[i]); }
    nd_buf_put(&r, bx);
    nd_buf_put(&r, bxc);
    CHECK_EQ_INT(r.act_bytes, 0); /* every buffer given back */
    free(x);
    free(xc);
    nd_ckpt_close(r.ck);
    nd_recipe_free(r.rc);
    r.be->destroy(r.be);
    return nd_test_report("op_alone");
}
