/* ops_kvcache.c — `kv_cache`: what attention reads back from the KV cache (issue 18,
 * kv_scale_ignored; docs/stacks.md).
 *
 * Inputs: what the stack writes into its cache, after RoPE as vLLM caches it: [K, V] for multi-head
 * or grouped attention (k_scale, v_scale), or MLA's latent [kv_c_normed, k_pe] (DeepSeek-V3:
 * vLLM's concat_and_cache_mla stores both with k_scale; v_scale is not read). Outputs: the same
 * tensors as attention reads them.
 *   reference   the inputs unchanged (a BF16 cache)
 *   production  under a stack whose KV cache is FP8 (kv_cache: fp8, or <stage>.kv_cache_fp8=1):
 *               e4m3_satfinite(x / w) * r per value (backend kv_fp8), with the checkpoint's scale
 *               s (1.0 when absent, as vLLM defaults it) used as the profile's kv_scales says:
 *               apply w = r = s; ignore w = r = 1; twice w = s, r = s^2; write_only w = s, r = 1.
 * Under a BF16 cache the stage is a pass-through and writes no row (traces of stacks without an
 * FP8 cache are unchanged). Under an FP8 cache it writes one row over K and V together, whose
 * floor is the same cache with each tensor's own calibrated scale (amax / 448): a healthy FP8 cache
 * sits at the floor; a scale applied on one side only is off by the scale in magnitude. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ops.h"
#include "pipeline.h"
#include "ckpt/kv_scales.h"
#include "numerics/nd_numerics.h"

typedef struct kv_plan {
    int n, use, latent;
    float s[2], w[2], rd[2];          /* scale used (after overrides), write divisor, read factor */
    double min_scale;                 /* the producer's smallest scale (nd_kv_config): 1 for ModelOpt < 0.43 */
    int present[2];
    char name[2][320];                /* checkpoint tensor of each scale (the format's own name when absent) */
} kv_plan;

static int plan(nd_opctx *c, kv_plan *p, nd_err *e) {
    nd_run *r = c->r;
    memset(p, 0, sizeof *p);
    p->n = c->n_in;
    double latent;
    ND_TRY(nd_attr_num(r, c->st, "latent", 0, &latent, e));
    p->latent = latent != 0;
    nd_kv_scales ks;
    nd_ckpt_kv_scales(r->ck, c->st->module, &ks);
    const int mo = nd_ckpt_format(r->ck) == ND_CKPT_MODELOPT;
    nd_kv_config kc;
    ND_TRY(nd_ckpt_kv_config(r->ck, &kc, e));
    p->min_scale = kc.min_scale;
    p->use = nd_stack_kv_scales(&r->stack, c->st->name);
    for (int i = 0; i < p->n; i++) {
        const int is_k = p->latent || i == 0;
        const nd_tview *t = is_k ? ks.k : ks.v;
        /* an absent scale is named as its format stores one (what --override and the
         * kv_scale_calibrated repair write): ModelOpt's k_proj.k_scale / v_proj.v_scale whatever the
         * attention's projections are (MLA, Phi-3's fused qkv_proj), compressed-tensors' k_scale */
        if (t) snprintf(p->name[i], sizeof p->name[i], "%s", t->name);
        else snprintf(p->name[i], sizeof p->name[i], "%s.%s", c->st->module,
                      mo ? (is_k ? "k_proj.k_scale" : "v_proj.v_scale") : (is_k ? "k_scale" : "v_scale"));
        p->present[i] = t != NULL;
        p->s[i] = (float)nd_stack_scalar(&r->stack, p->name[i], t ? (is_k ? ks.k_scale : ks.v_scale) : 1.0);
        const float s = p->s[i];
        p->w[i] = p->use == ND_KV_IGNORE ? 1.0f : s;
        p->rd[i] = p->use == ND_KV_APPLY ? s : p->use == ND_KV_TWICE ? s * s : 1.0f;
    }
    return 0;
}

/* The production outputs for inputs `in` with per-input write/read scales. */
static int through_cache(nd_run *r, nd_buf **in, int n, const float *w, const float *rd, nd_buf **out, nd_err *e) {
    for (int i = 0; i < n; i++) {
        out[i] = nd_buf_new(r, in[i]->rows, in[i]->cols, e);
        if (!out[i]) return e->code;
        ND_TRY(r->be->kv_fp8(r->be, in[i]->p, in[i]->n, w[i], rd[i], out[i]->p, e));
    }
    return 0;
}

/* The n buffers side by side, [rows, sum of cols], for one row over all of them. */
static nd_buf *side_by_side(nd_run *r, nd_buf **b, int n, nd_err *e) {
    int64_t cols = 0;
    for (int i = 0; i < n; i++) cols += b[i]->cols;
    nd_buf *o = nd_buf_new(r, b[0]->rows, cols, e);
    if (!o) return NULL;
    int64_t at = 0;
    for (int i = 0; i < n; i++) {
        if (r->be->copy2d(r->be, o->p + at, cols, b[i]->p, b[i]->cols, b[i]->cols, b[i]->rows, e)) { nd_buf_put(r, o); return NULL; }
        at += b[i]->cols;
    }
    return o;
}

/* Host figures of the reference inputs: amax per input, NaN/Inf count, and the share of values
 * that clip at 448 under the plan's write scales. */
static int host_figures(nd_run *r, nd_buf **in, int n, const float *w, double *amax, int64_t *nonfinite,
                        double *sat_frac, nd_err *e) {
    int64_t sat = 0, total = 0;
    *nonfinite = 0;
    for (int i = 0; i < n; i++) {
        float *h = malloc(sizeof(float) * (size_t)(in[i]->n ? in[i]->n : 1));
        if (!h) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        int rc = r->be->download(r->be, h, in[i]->p, sizeof(float) * (size_t)in[i]->n, e);
        double a = 0;
        for (int64_t j = 0; !rc && j < in[i]->n; j++) {
            if (!isfinite(h[j])) { (*nonfinite)++; continue; }
            a = fmax(a, fabs((double)h[j]));
            sat += w && fabsf(h[j] / w[i]) >= ND_E4M3_MAX;
        }
        total += in[i]->n;
        amax[i] = a;
        free(h);
        ND_TRY(rc);
    }
    *sat_frac = total ? (double)sat / (double)total : NAN;
    return 0;
}

static double sqnr_of(nd_run *r, const nd_buf *ref, const nd_buf *x, nd_err *e) {
    nd_cmp c;
    if (r->be->compare(r->be, ref->p, x->p, ref->n, 16, &c, e)) return NAN;
    if (c.sum_ee <= 0) return INFINITY;
    return 10.0 * log10(c.sum_rr / c.sum_ee);
}

static void put_all(nd_run *r, nd_buf **b, int n) {
    for (int i = 0; i < n; i++) { nd_buf_put(r, b[i]); b[i] = NULL; }
}

/* One row (isolated or chained) over all outputs. */
static int emit(nd_opctx *c, int mode, nd_buf *ref_cat, nd_buf **prod, nd_row *fig, nd_err *e) {
    nd_buf *pc = side_by_side(c->r, prod, c->n_in, e);
    if (!pc) return e->code;
    nd_result res = {c->st->name, c->st->def->op, mode, ref_cat, pc, fig, 1, 0};
    int rc = nd_put_row(c->r, c->st, &res, e);
    nd_buf_put(c->r, pc);
    return rc;
}

int nd_op_kv_cache(nd_opctx *c, nd_err *e) {
    nd_run *r = c->r;
    if (c->n_in < 1 || c->n_in > 2 || c->n_out != c->n_in)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: kv_cache takes [K, V] (or MLA's [latent, k_pe]) and writes as many outputs",
                       nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name);
    if (!c->st->module[0])
        return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s: kv_cache needs 'module' (the attention module holding k_scale/v_scale)",
                       nd_stage_file(r->rc, c->st->def), c->st->def->line, c->st->def->name);
    c->quantized = -1; /* rows, when any, are written here (one over K and V together) */
    for (int i = 0; i < c->n_in; i++) c->out_ref[i] = nd_buf_ref(c->in_ref[i]);
    kv_plan p;
    unsigned char used[ND_MAX_OVERRIDES];
    nd_stack_used_save(&r->stack, used);
    ND_TRY(plan(c, &p, e));
    if (nd_sink_calibrating(r)) {
        /* what a calibration of the KV cache reads: amax of K and V (MLA: of the whole latent row) */
        double amax[2] = {0, 0}, sat;
        int64_t nf;
        ND_TRY(host_figures(r, c->in_ref, p.n, NULL, amax, &nf, &sat, e));
        if (p.latent && p.n == 2) amax[0] = amax[1] = fmax(amax[0], amax[1]);
        for (int i = 0; i < p.n; i++) nd_put_amax(r, p.name[i], amax[i]);
        return 0;
    }
    const int stack_fp8 = nd_stack_kv_cache_fp8(&r->stack, c->st->name), fp8 = stack_fp8 && !nd_run_ref_only(r, c->st->name);
    if (!fp8) {
        /* a BF16 KV cache reads no scales: an override of how it uses them (kv_scales) applies to
         * nothing; its own kv_cache_fp8 override did apply (looked up again to say so). A stage kept
         * on the reference path of an FP8-cache run keeps its marks (the run applies them elsewhere) */
        if (!stack_fp8) {
            nd_stack_used_restore(&r->stack, used);
            (void)nd_stack_kv_cache_fp8(&r->stack, c->st->name);
        }
        for (int i = 0; i < c->n_in; i++) {
            c->out_iso[i] = nd_buf_ref(c->out_ref[i]);
            if (c->want_chain) c->out_chain[i] = nd_buf_ref(c->in_chain[i]);
        }
        /* kept on the reference path (bisect's and sensitivity's sets) under a stack whose cache is
         * FP8: the row is still made, clean, as any stage run on the reference path makes its own */
        if (stack_fp8) {
            nd_row fig;
            nd_row_init(&fig);
            nd_buf *ref_cat = side_by_side(r, c->out_ref, p.n, e);
            int rc = ref_cat ? 0 : e->code;
            if (!rc && c->want_iso) rc = emit(c, ND_MODE_ISOLATED, ref_cat, c->out_iso, &fig, e);
            if (!rc && c->want_chain) rc = emit(c, ND_MODE_CHAINED, ref_cat, c->out_chain, &fig, e);
            nd_buf_put(r, ref_cat);
            return rc;
        }
        return 0;
    }
    nd_row fig;
    nd_row_init(&fig);
    double amax[2] = {0, 0};
    nd_buf *fl[2] = {0}, *ref_cat = NULL, *flc = NULL;
    int rc = host_figures(r, c->in_ref, p.n, p.w, amax, &fig.in_nonfinite, &fig.sat_frac, e);
    if (!rc && p.latent && p.n == 2) amax[0] = amax[1] = fmax(amax[0], amax[1]);
    /* the floor: the same cache, each tensor with its own calibrated scale (as its producer
     * calibrates: ModelOpt before 0.43 clamped it to 1 and more) */
    float cal[2];
    for (int i = 0; i < p.n; i++) cal[i] = amax[i] > 0 ? (float)fmax(amax[i] / ND_E4M3_MAX, p.min_scale) : 1.0f;
    if (!rc) rc = through_cache(r, c->in_ref, p.n, cal, cal, fl, e);
    if (!rc && !(ref_cat = side_by_side(r, c->out_ref, p.n, e))) rc = e->code;
    if (!rc && !(flc = side_by_side(r, fl, p.n, e))) rc = e->code;
    if (!rc) fig.floor_sqnr_db = sqnr_of(r, ref_cat, flc, e);
    /* the quantizer's figures in the linears' terms, of the first tensor (K, or the latent row): the
     * multiplier 1/w, the factor read back r, and the multiplier over the healthy one 448/amax */
    fig.scale_mult = 1.0 / p.w[0];
    fig.alpha = p.rd[0];
    /* no ratio for a scale the checkpoint does not hold: the stack's default 1.0 is not a value
     * someone calibrated wrong, so the verdict's far-multiplier rule (probes/verdict.c (e), meant for
     * a wrong scale that costs little) does not judge it; the floor margin still does, and the
     * kv_scale_calibrated repair proves scale_underflow when a cache at 1.0 loses more */
    if (amax[0] > 0 && p.present[0]) fig.scale_ratio = amax[0] / (ND_E4M3_MAX * (double)p.w[0]);
    if (!rc && c->want_iso) rc = through_cache(r, c->in_ref, p.n, p.w, p.rd, c->out_iso, e);
    if (!rc && c->want_iso) rc = emit(c, ND_MODE_ISOLATED, ref_cat, c->out_iso, &fig, e);
    if (!rc && c->want_chain) rc = through_cache(r, c->in_chain, p.n, p.w, p.rd, c->out_chain, e);
    if (!rc && c->want_chain) {
        nd_row fc = fig;
        double a2[2];
        rc = host_figures(r, c->in_chain, p.n, p.w, a2, &fc.in_nonfinite, &fc.sat_frac, e);
        fc.floor_sqnr_db = NAN;
        if (!rc) rc = emit(c, ND_MODE_CHAINED, ref_cat, c->out_chain, &fc, e);
    }
    /* single-stage replay of this row (diagnosis): what its repairs need */
    nd_stage_info *in = rc ? NULL : nd_sink_describe(r, c->st);
    if (in) {
        in->kv_cache = 1;
        in->kv_scales = p.use;
        in->kv_n = p.latent ? 1 : p.n;
        in->kv_min_scale = p.min_scale;
        for (int i = 0; i < in->kv_n; i++) {
            snprintf(in->kv_scale_name[i], sizeof in->kv_scale_name[i], "%s", p.name[i]);
            in->kv_scale[i] = p.s[i];
            in->kv_scale_present[i] = p.present[i];
            in->kv_amax[i] = amax[i];
        }
    }
    put_all(r, fl, 2);
    nd_buf_put(r, ref_cat);
    nd_buf_put(r, flc);
    return rc;
}
