/* scale_read.c — an NVFP4 weight decoded on the host when its block scales are read another way
 * than the checkpoint's own (scale_repr.h): the module repairs of the diagnosis (layout, encoding,
 * refit to the original) on every path, and the production GEMM's stack behaviours (UE8M0
 * rounding, another layout or encoding, uninitialised tensor-parallel padding) on the production
 * operand only. The result is uploaded as FP32, so both backends run the same weight. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "numerics/nd_numerics.h"
#include "scale_read.h"
#include "scale_repr.h"
#include "repair_bytes.h"
#include "ckpt/tp_split.h"

int64_t nd_sf_stored_stride(const nd_tview *sf, int64_t nb) {
    if (sf && sf->ndim == 2 && sf->shape[1] > nb) return sf->shape[1];
    return nd_sf_padded_stride(nb, 4);
}

int nd_scale_read_needed(const nd_module_repair *fix, const nd_sf_read *rd) {
    return fix->scale_layout != ND_SF_LINEAR || fix->scale_encoding != ND_SF_E4M3 || fix->block_scale_refit ||
           (rd && !nd_sf_read_plain(rd));
}

/* w (nk FP32 values on the host) uploaded to a new buffer *out; NULL when the allocation fails */
static int upload_f32(nd_run *r, const float *w, int64_t nk, float **out, nd_err *e) {
    *out = r->be->alloc(r->be, (size_t)nk * sizeof(float), e);
    if (!*out) return e->code;
    return r->be->upload(r->be, *out, w, (size_t)nk * sizeof(float), e);
}

/* the end of a decode: its copies released when it failed (rc), the module's tensors in every case */
static void release_module(nd_run *r, const nd_module *m, int rc, int nout, float **out) {
    if (rc)
        for (int i = 0; i < nout; i++) {
            if (out[i]) r->be->release(r->be, out[i]);
            out[i] = NULL;
        }
    nd_ckpt_release(r->ck, m->weight);
    nd_ckpt_release(r->ck, m->weight_scale);
}

/* The original weight of m as FP32 on the host (the module of the same name in
 * --reference-checkpoint, unquantized). */
static int original_f32(nd_run *r, const nd_module *m, float **out, nd_err *e) {
    *out = NULL;
    if (!r->ref_ck)
        return nd_fail(e, ND_EXIT_BADINPUT, "--override %s.block_scale_refit: refitting block scales needs the original "
                       "weights (--reference-checkpoint)", m->path);
    nd_module o;
    ND_TRY(nd_ckpt_module(r->ref_ck, m->path, &o, e));
    if (o.wfmt != ND_WF_DENSE || o.out_features != m->out_features || o.in_features != m->in_features)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s is not an unquantized [%lld, %lld] weight: block_scale_refit needs the "
                       "original", nd_ckpt_dir(r->ref_ck), m->path, (long long)m->out_features, (long long)m->in_features);
    const int64_t nk = m->out_features * m->in_features;
    *out = malloc((size_t)(nk ? nk : 1) * sizeof(float));
    if (!*out) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    int rc = nd_tensor_host_f32(o.weight, *out, nk, e);
    nd_ckpt_release(r->ref_ck, o.weight);
    if (rc) { free(*out); *out = NULL; }
    return rc;
}

/* An MXFP4 weight [N, K] with its E8M0 bytes [N, K/32] decoded in the encoding the module repair says
 * they are stored in, else the one the production kernel reads them with (rd), else the format's own
 * (E8M0, bias 127); e4m3 (0) in either stands for the own reading. code x scale, as dequant_mxfp4. */
static int mx_decode(nd_run *r, const nd_module *m, const nd_module_repair *fix, const nd_sf_read *rd, int swap_nibbles,
                     int nout, float **out, nd_err *e) {
    const int64_t n = m->out_features, k = m->in_features, nb = k / ND_MXFP4_BLOCK;
    if (!m->weight_scale || (int64_t)m->weight_scale->nbytes < n * nb || m->weight->nbytes != (size_t)(n * (k / 2)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: MXFP4 scales can be read another way only as [%lld, %lld] bytes",
                       nd_ckpt_dir(r->ck), m->path, (long long)n, (long long)nb);
    int enc = fix->scale_encoding != ND_SF_E4M3 ? fix->scale_encoding
              : rd && rd->encoding != ND_SF_E4M3 ? rd->encoding : ND_SF_E8M0;
    uint8_t *packed = malloc(m->weight->nbytes + 1);
    float *w = malloc((size_t)(n * k + 1) * sizeof(float));
    int rc = packed && w ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) {
        if (swap_nibbles) nd_swap_nibbles(m->weight->data, packed, m->weight->nbytes);
        else memcpy(packed, m->weight->data, m->weight->nbytes);
        const uint8_t *sf = m->weight_scale->data;
        for (int64_t row = 0; row < n; row++)
            for (int64_t j = 0; j < k; j++)
                w[row * k + j] = nd_e2m1_to_f32(nd_nibble(packed + row * (k / 2), j)) * nd_sf_decode(sf[row * nb + j / 32], enc);
    }
    for (int i = 0; i < nout; i++) out[i] = NULL;
    for (int i = 0; i < nout && !rc; i++) {
        rc = upload_f32(r, w, n * k, &out[i], e);
    }
    release_module(r, m, rc, nout, out);
    free(packed);
    free(w);
    return rc;
}

int nd_scale_read_decode(nd_run *r, const nd_module *m, const nd_module_repair *fix, const nd_sf_read *rd, int swap_nibbles,
                         const float *div, int nout, float **out, nd_err *e) {
    if (m->wfmt == ND_WF_MXFP4) return mx_decode(r, m, fix, rd, swap_nibbles, nout, out, e);
    const int64_t n = m->out_features, k = m->in_features, nb = k / 16;
    const size_t sf_n = m->weight_scale ? m->weight_scale->nbytes : 0;
    if (m->wfmt != ND_WF_NVFP4 || !m->weight_scale || (int64_t)sf_n < n * nb || m->weight->nbytes != (size_t)(n * (k / 2)))
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: block scales can be read another way only for an NVFP4 weight with "
                       "[%lld, %lld] scales", nd_ckpt_dir(r->ck), m->path, (long long)n, (long long)nb);
    const size_t ns = (size_t)(n * nb) + 1, nw = (size_t)(n * k) + 1;
    uint8_t *packed = malloc(m->weight->nbytes + 1), *sf = malloc(sf_n + 1), *lin = malloc(ns);
    float *f = malloc(ns * sizeof(float)), *w = malloc(nw * sizeof(float));
    float *orig = NULL;
    int *extra = NULL;
    int rc = packed && sf && lin && f && w ? 0 : nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (!rc) {
        if (swap_nibbles) nd_swap_nibbles(m->weight->data, packed, m->weight->nbytes);
        else memcpy(packed, m->weight->data, m->weight->nbytes);
        memcpy(sf, m->weight_scale->data, sf_n);
        /* the checkpoint's bytes, re-read as the module repairs say: their layout (padded: rows of
         * the stored tensor's own length), then NaN fix */
        if (fix->scale_layout == ND_SF_PADDED)
            nd_sf_read_strided(sf, (int64_t)sf_n, n, nb, nd_sf_stored_stride(m->weight_scale, nb), lin);
        else
            nd_sf_read_as(fix->scale_layout, sf, (int64_t)sf_n, n, nb, lin);
        if (fix->block_scale_fix && nd_fix_nan_block_scales(lin, n, nb) < 0) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    }
    int enc = fix->scale_encoding;
    if (!rc && fix->block_scale_refit) {
        rc = original_f32(r, m, &orig, e);
        if (!rc) nd_sf_refit(packed, orig, m->weight_global_div, n, k, lin);
        enc = ND_SF_E4M3;
    }
    /* the production kernel's reading of the bytes it is handed */
    if (!rc && rd && rd->layout != ND_SF_LINEAR) {
        memcpy(sf, lin, (size_t)(n * nb));
        nd_sf_read_as(rd->layout, sf, n * nb, n, nb, lin);
    }
    if (!rc && rd && enc == ND_SF_E4M3) enc = rd->encoding;
    /* UE8M0 with the codes re-quantized (block_scale_rounding: ue8m0_requant): the MX conversion a
     * careful loader does, scales rounded up to powers of two and codes rescaled to match */
    if (!rc && rd && rd->pow2 == 2 && enc == ND_SF_E4M3) {
        nd_sf_to_e8m0_requant(packed, lin, n, k);
        enc = ND_SF_E8M0;
    }
    for (int64_t i = 0; !rc && i < n * nb; i++) {
        f[i] = nd_sf_decode(lin[i], enc);
        if (rd && rd->pow2 == 1) f[i] = nd_sf_pow2_ceil(f[i]);
        /* the global folded into the block scale and re-rounded to E4M3 (a divisor near 2e4 puts
         * most scales in the subnormal range); multiplied back so that alpha stays the same */
        if (rd && rd->baked && rd->baked_div > 0)
            f[i] = nd_e4m3_to_f32(nd_e4m3_from_f32_satfinite(f[i] / rd->baked_div)) * rd->baked_div;
    }
    /* a row-parallel shard's padding: the columns it reads again */
    int64_t pad = 0;
    if (!rc && rd && rd->pad_garbage && rd->tp > 1 && nd_tp_kind_of(m->path) == ND_TP_ROW) {
        extra = malloc((size_t)(k ? k : 1) * sizeof *extra);
        if (!extra) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        else pad = nd_tp_pad_reads(k, rd->tp, rd->tile, extra);
    }
    for (int i = 0; i < nout; i++) out[i] = NULL;
    for (int i = 0; i < nout && !rc; i++) {
        nd_nvfp4_decode_f(packed, f, div[i], n, k, w);
        if (pad)
            for (int64_t row = 0; row < n; row++)
                for (int64_t j = 0; j < k; j++) w[row * k + j] *= (float)(1 + extra[j]);
        rc = upload_f32(r, w, n * k, &out[i], e);
    }
    release_module(r, m, rc, nout, out);
    free(packed); free(sf); free(lin); free(f); free(w); free(orig); free(extra);
    return rc;
}
