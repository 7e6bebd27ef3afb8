/* weights.c — checkpoint tensors onto the backend, decoded to FP32.
 * Raw bytes are uploaded unchanged and decoded by backend ops, so the CPU and CUDA backends
 * decode with the same numerics; the mapping's pages are released after upload. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "run.h"
#include "numerics/nd_numerics.h"
#include "repair_bytes.h"
#include "scale_read.h"

/* Upload slices: each slice's mapped pages are dropped once it is on the backend, so a tensor as
 * large as the 1.9 GB lm_head does not sit in RSS whole. */
#define UPLOAD_SLICE ((size_t)256 << 20)

static int upload_raw(nd_run *r, const nd_tview *t, void **out, nd_err *e) {
    *out = r->be->alloc(r->be, t->nbytes ? t->nbytes : 1, e);
    if (!*out) return e->code;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    const void *staged = nd_prefetch_take(r, t); /* already copied out of the mapping, or NULL */
    int rc = 0;
    if (staged) {
        rc = r->be->upload(r->be, *out, staged, t->nbytes, e);
    } else {
        for (size_t off = 0; off < t->nbytes && !rc; off += UPLOAD_SLICE) {
            nd_tview slice = *t;
            slice.data = (const char *)t->data + off;
            slice.nbytes = t->nbytes - off < UPLOAD_SLICE ? t->nbytes - off : UPLOAD_SLICE;
            rc = r->be->upload(r->be, (char *)*out + off, slice.data, slice.nbytes, e);
            /* on the backend now: drop the mapping's pages so RSS does not grow with the checkpoint
             * (they are read again from the page cache or the file if touched later) */
            nd_ckpt_release(r->ck, &slice);
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    r->upload_s += (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (rc) { r->be->release(r->be, *out); *out = NULL; }
    else r->weight_bytes += (int64_t)t->nbytes;
    return rc;
}

int nd_tensor_host_f32(const nd_tview *t, float *out, int64_t n, nd_err *e) {
    if (t->numel != n)
        return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s has %lld elements, expected %lld", t->file, t->name,
                       (long long)t->numel, (long long)n);
    for (int64_t i = 0; i < n; i++) {
        /* safetensors packs tensors back to back: data may be unaligned, so read through memcpy */
        const char *src = (const char *)t->data + (size_t)i * nd_dtype_size(t->dtype);
        float f; uint16_t h; double d;
        switch (t->dtype) {
        case ND_DT_F32: memcpy(&f, src, 4); out[i] = f; break;
        case ND_DT_BF16: memcpy(&h, src, 2); out[i] = nd_bf16_to_f32(h); break;
        case ND_DT_F16: memcpy(&h, src, 2); out[i] = nd_f16_to_f32(h); break;
        case ND_DT_F64: memcpy(&d, src, 8); out[i] = (float)d; break;
        default:
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s has dtype %s, expected a float type", t->file, t->name,
                           nd_dtype_str(t->dtype));
        }
    }
    return 0;
}

int nd_tensor_f32(nd_run *r, const nd_tview *t, float **out, nd_err *e) {
    *out = r->be->alloc(r->be, (size_t)(t->numel ? t->numel : 1) * sizeof(float), e);
    if (!*out) return e->code;
    int rc;
    /* the dtype comes from the checkpoint: one the backend's to_f32 does not read is bad input */
    if (nd_backend_supports(r->be, ND_OP_to_f32, nd_op_dtype_of(t->dtype))) {
        void *raw;
        rc = upload_raw(r, t, &raw, e);
        if (!rc) {
            rc = r->be->to_f32(r->be, raw, t->dtype, t->numel, *out, e);
            r->be->release(r->be, raw);
        }
    } else {
        char can[64];
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: tensor %s has dtype %s; the %s backend reads %s", t->file, t->name,
                     nd_dtype_str(t->dtype), r->be->name,
                     nd_op_dtypes_str(nd_backend_op_dtypes(r->be, ND_OP_to_f32), ", ", can, sizeof can));
    }
    if (rc) { r->be->release(r->be, *out); *out = NULL; }
    return rc;
}

/* A quantized weight's format comes from the checkpoint: one the backend's dequant op does not
 * declare is bad input (exit 2) naming the file and the module, before anything is uploaded. */
static int need_format(const nd_run *r, const nd_module *m, nd_err *e) {
    int op;
    unsigned dt;
    switch (m->wfmt) {
    case ND_WF_NVFP4: op = ND_OP_dequant_nvfp4; dt = ND_ODT_NVFP4; break;
    case ND_WF_MXFP4: op = ND_OP_dequant_mxfp4; dt = ND_ODT_MXFP4; break;
    case ND_WF_FP8:
        op = ND_OP_dequant_fp8;
        dt = ND_ODT_E4M3 | (m->fp8_scale_kind == ND_FP8_SCALE_BLOCK_E8M0 ? ND_ODT_E8M0 : ND_ODT_F32);
        break;
    default: return 0;
    }
    if (nd_backend_supports(r->be, op, dt)) return 0;
    char lacks[64];
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: module %s: the %s backend's %s does not support %s", m->weight->file, m->path,
                   r->be->name, nd_backend_op_name(op),
                   nd_op_dtypes_str(dt & ~nd_backend_op_dtypes(r->be, op), ", ", lacks, sizeof lacks));
}

/* Decode a module's weight to FP32 [N,K], once per divisor in div[0..nout): NVFP4 block scales
 * are divided by div[i] (the module's own global divisor for the reference meaning; 1 for the
 * production GEMM operand, whose global factors live in alpha). The raw bytes are uploaded once
 * for all the decodes. */
static int decode(nd_run *r, const nd_module *m, const float *div, int nout, int swap_nibbles, const nd_sf_read *rd,
                  float **out, nd_err *e) {
    const int64_t n = m->out_features, k = m->in_features;
    for (int i = 0; i < nout; i++) out[i] = NULL;
    if (m->wfmt == ND_WF_DENSE) {
        int rc = 0;
        for (int i = 0; i < nout && !rc; i++) rc = nd_tensor_f32(r, m->weight, &out[i], e);
        return rc;
    }
    ND_TRY(need_format(r, m, e));
    /* repairs the diagnosis asks for by override (stack.h): the bytes are re-read another way */
    nd_module_repair fix;
    memset(&fix, 0, sizeof fix);
    nd_stack_module_repair(&r->stack, m, &fix);
    swap_nibbles ^= fix.nibble_swap;
    /* block scales read another way (a repair, or the production kernel's reading): on the host */
    const int sf32 = m->wfmt == ND_WF_NVFP4 && m->block == 32;
    if ((m->wfmt == ND_WF_NVFP4 || m->wfmt == ND_WF_MXFP4) && nd_scale_read_needed(&fix, rd)) {
        if (sf32)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s: %s: block scales per 32 (W4A8_NVFP4_FP8) are read only as stored; another "
                           "reading of them (a repair, a stack's scale layout) is not replayed", m->weight->file, m->path);
        return nd_scale_read_decode(r, m, &fix, rd, swap_nibbles, div, nout, out, e);
    }
    void *w = NULL, *s = NULL;
    int rc = upload_raw(r, m->weight, &w, e);
    if (!rc && sf32) {
        /* E4M3 scales per 32 elements: each scale serves both 16-blocks of its 32 (exact), so the one
         * NVFP4 dequantization (16-blocks) decodes them */
        const int64_t nb = k / 32, bytes = n * nb * 2;
        uint8_t *tmp = malloc((size_t)bytes);
        const uint8_t *src = m->weight_scale->data;
        if (!tmp) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        for (int64_t i = 0; !rc && i < n * nb; i++) tmp[2 * i] = tmp[2 * i + 1] = src[i];
        if (!rc && fix.block_scale_fix && nd_fix_nan_block_scales(tmp, n, 2 * nb) < 0) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        if (!rc && !(s = r->be->alloc(r->be, (size_t)bytes, e))) rc = e->code;
        if (!rc) rc = r->be->upload(r->be, s, tmp, (size_t)bytes, e);
        free(tmp);
    } else if (!rc && m->weight_scale) rc = upload_raw(r, m->weight_scale, &s, e);
    if (!rc && swap_nibbles && m->wfmt != ND_WF_FP8) {
        /* the "other packing" of the same bytes (weight_packing diagnosis and its repair) */
        uint8_t *tmp = malloc(m->weight->nbytes);
        if (!tmp) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        else {
            nd_swap_nibbles(m->weight->data, tmp, m->weight->nbytes);
            rc = r->be->upload(r->be, w, tmp, m->weight->nbytes, e);
            free(tmp);
        }
    }
    if (!rc && s && fix.block_scale_fix && m->wfmt == ND_WF_NVFP4 && !sf32) {
        uint8_t *tmp = malloc(m->weight_scale->nbytes);
        if (!tmp) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        else {
            memcpy(tmp, m->weight_scale->data, m->weight_scale->nbytes);
            if (nd_fix_nan_block_scales(tmp, n, (int64_t)m->weight_scale->nbytes / (n ? n : 1)) < 0)
                rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
            else rc = r->be->upload(r->be, s, tmp, m->weight_scale->nbytes, e);
            free(tmp);
        }
    }
    for (int i = 0; i < nout && !rc; i++) {
        out[i] = r->be->alloc(r->be, (size_t)(n * k) * sizeof(float), e);
        if (!out[i]) { rc = e->code; break; }
        switch (m->wfmt) {
        case ND_WF_NVFP4: rc = r->be->dequant_nvfp4(r->be, w, s, div[i], n, k, out[i], e); break;
        case ND_WF_MXFP4: rc = r->be->dequant_mxfp4(r->be, w, s, n, k, out[i], e); break;
        case ND_WF_FP8: rc = r->be->dequant_fp8(r->be, w, s, m->fp8_scale_kind, m->bn, m->bk, n, k, out[i], e); break;
        default: rc = nd_fail(e, ND_EXIT_INTERNAL, "%s: unknown weight format", m->path);
        }
    }
    if (w) r->be->release(r->be, w);
    if (s) r->be->release(r->be, s);
    nd_ckpt_release(r->ck, m->weight); /* again: the nibble swap above reads it on the host */
    if (rc)
        for (int i = 0; i < nout; i++) {
            if (out[i]) r->be->release(r->be, out[i]);
            out[i] = NULL;
        }
    return rc;
}

int nd_weight_f32(nd_run *r, const nd_module *m, float **out, nd_err *e) {
    return decode(r, m, &m->weight_global_div, 1, 0, NULL, out, e);
}

int nd_weight_codes_f32(nd_run *r, const nd_module *m, float **out, nd_err *e) {
    const float one = 1.0f;
    return decode(r, m, &one, 1, 0, NULL, out, e);
}

int nd_weight_prod_codes_f32(nd_run *r, const nd_module *m, const nd_sf_read *rd, float **out, nd_err *e) {
    const float one = 1.0f;
    return decode(r, m, &one, 1, 0, rd, out, e);
}

int nd_weight_ref_codes_f32(nd_run *r, const nd_module *m, float **ref, float **codes, nd_err *e) {
    const float div[2] = {m->weight_global_div, 1.0f};
    float *out[2];
    int rc = decode(r, m, div, 2, 0, NULL, out, e);
    *ref = out[0];
    *codes = out[1];
    return rc;
}

int nd_weight_swapped_f32(nd_run *r, const nd_module *m, float **out, nd_err *e) {
    return decode(r, m, &m->weight_global_div, 1, 1, NULL, out, e);
}
