/* conf_backend.c — see conf_backend.h. */
#include <stdio.h>
#include "conf_backend.h"
#include <string.h>
#include "conf_fixture.h"

int conf_backends(nd_backend *be[2]) {
    nd_err e = {0};
    if (nd_backend_cpu_create(&be[0], &e)) {
        fprintf(stderr, "%s\n", e.msg);
        return 0;
    }
    if (nd_backend_cuda_available() && nd_backend_cuda_create(&be[1], 0, &e) == 0) return 2;
    return 1;
}

void conf_backends_free(nd_backend *be[2], int n) {
    for (int i = 0; i < n; i++) be[i]->destroy(be[i]);
}

/* backend copies of host buffers; released by put_back */
static void *up(nd_backend *b, const void *src, size_t n, nd_err *e) {
    void *p = b->alloc(b, n ? n : 1, e);
    if (p && n && b->upload(b, p, src, n, e)) {
        b->release(b, p);
        return NULL;
    }
    return p;
}

int conf_quant(nd_backend *b, const float *x, float g, int sem, int64_t rows, int64_t k, uint8_t *codes,
               uint8_t *sf, nd_err *e) {
    const size_t nx = (size_t)(rows * k) * sizeof(float), nc = (size_t)(rows * k / 2), ns = (size_t)(rows * k / 16);
    void *dx = up(b, x, nx, e), *dc = b->alloc(b, nc ? nc : 1, e), *ds = b->alloc(b, ns ? ns : 1, e);
    int rc = (!dx || !dc || !ds) ? ND_EXIT_INTERNAL : 0;
    if (!rc) rc = b->quant_nvfp4(b, dx, g, sem, rows, k, dc, ds, NULL, e);
    if (!rc) rc = b->download(b, codes, dc, nc, e);
    if (!rc) rc = b->download(b, sf, ds, ns, e);
    if (dx) b->release(b, dx);
    if (dc) b->release(b, dc);
    if (ds) b->release(b, ds);
    return rc;
}

/* dequant_nvfp4 (mx 0) or dequant_mxfp4 (mx 1) of host codes [npacked bytes] and scales [nsf bytes]
 * (may be unaligned checkpoint bytes): out [rows,k] on the host */
static int dequant_fp4(nd_backend *b, int mx, const void *packed, size_t npacked, const void *sf, size_t nsf,
                       float global_div, int64_t rows, int64_t k, float *out, nd_err *e) {
    const size_t no = (size_t)(rows * k) * sizeof(float);
    void *dc = up(b, packed, npacked, e), *ds = up(b, sf, nsf, e), *dout = b->alloc(b, no ? no : 1, e);
    int rc = (!dc || !ds || !dout) ? ND_EXIT_INTERNAL : 0;
    if (!rc) rc = mx ? b->dequant_mxfp4(b, dc, ds, rows, k, dout, e) : b->dequant_nvfp4(b, dc, ds, global_div, rows, k, dout, e);
    if (!rc) rc = b->download(b, out, dout, no, e);
    if (dc) b->release(b, dc);
    if (ds) b->release(b, ds);
    if (dout) b->release(b, dout);
    return rc;
}

int conf_dequant(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div, int64_t rows,
                 int64_t k, float *out, nd_err *e) {
    return dequant_fp4(b, 0, packed, (size_t)(rows * k / 2), sf, (size_t)(rows * k / 16), global_div, rows, k, out, e);
}

int conf_dequant_mxfp4(nd_backend *b, const nd_module *m, float *out, nd_err *e) {
    return dequant_fp4(b, 1, m->weight->data, m->weight->nbytes, m->weight_scale->data, m->weight_scale->nbytes, 0.0f,
                       m->out_features, m->in_features, out, e);
}

int conf_each_module(nd_backend *b, const char *rec, const char *suffix, conf_module_fn fn, int *missing) {
    int modules = 0;
    *missing = 0;
    for (int mi = 0; mi < 3; mi++) {
        const char *model = conf_models[mi];
        nd_st_file *f = conf_open(model, rec);   /* each prints why it failed */
        nd_ckpt *ck = f ? conf_ckpt(model, "nvfp4") : NULL;
        if (!ck) {
            if (f) nd_st_close(f);
            ++*missing;
            continue;
        }
        const size_t sl = strlen(suffix);
        for (size_t i = 0; i < nd_st_count(f); i++) {
            const char *n = nd_st_at(f, i)->name;
            const size_t l = strlen(n);
            if (l <= sl || strcmp(n + l - sl, suffix) != 0) continue;
            char p[300];
            snprintf(p, sizeof p, "%.*s", (int)(l - sl), n);
            fn(b, f, ck, model, p);
            modules++;
        }
        nd_ckpt_close(ck);
        nd_st_close(f);
    }
    return modules;
}
