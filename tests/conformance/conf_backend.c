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

int conf_dequant(nd_backend *b, const uint8_t *packed, const uint8_t *sf, float global_div, int64_t rows,
                 int64_t k, float *out, nd_err *e) {
    const size_t no = (size_t)(rows * k) * sizeof(float), nc = (size_t)(rows * k / 2), ns = (size_t)(rows * k / 16);
    void *dc = up(b, packed, nc, e), *ds = up(b, sf, ns, e), *dout = b->alloc(b, no ? no : 1, e);
    int rc = (!dc || !ds || !dout) ? ND_EXIT_INTERNAL : 0;
    if (!rc) rc = b->dequant_nvfp4(b, dc, ds, global_div, rows, k, dout, e);
    if (!rc) rc = b->download(b, out, dout, no, e);
    if (dc) b->release(b, dc);
    if (ds) b->release(b, ds);
    if (dout) b->release(b, dout);
    return rc;
}

int conf_each_module(nd_backend *b, const char *rec, const char *suffix, conf_module_fn fn, int *missing) {
    int modules = 0;
    *missing = 0;
    for (int mi = 0; mi < 3; mi++) {
        const char *model = conf_models[mi];
        nd_st_file *f = conf_open(model, rec);
        char dir[1024];
        conf_path(dir, sizeof dir, model, "nvfp4");
        nd_ckpt *ck = NULL;
        nd_err e = {0};
        if (!f || nd_ckpt_open(dir, &ck, &e)) {
            fprintf(stderr, "%s: %s\n", model, f ? e.msg : "no recording");
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
