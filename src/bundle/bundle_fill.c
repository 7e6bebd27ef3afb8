/* bundle_fill.c — filling a bundle from a pipeline capture, and small text files. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "bundle.h"
#include "pipeline/pipeline.h"
#include "util/infile.h"

int nd_bundle_slurp(const char *path, char **out, nd_err *e) {
    *out = NULL;
    ND_TRY(nd_input_regular(path, e));
    FILE *f = fopen(path, "rb");
    if (!f) return errno == ENOENT ? 1 : nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot open: %s", path, strerror(errno));
    int rc = 0;
    long n = -1;
    if (fseek(f, 0, SEEK_END) || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot size the file", path);
    else if (n > (16l << 20)) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: larger than 16 MiB", path);
    else if (!(*out = malloc((size_t)n + 1))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    else if (fread(*out, 1, (size_t)n, f) != (size_t)n) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: read error", path);
    else (*out)[n] = 0;
    if (rc) { free(*out); *out = NULL; }
    fclose(f);
    return rc;
}

/* The capture callback of `repro` (nd_trace_opts.capture): copies what the stage reads. */
int nd_bundle_capture_cb(void *user, const nd_capture_info *ci, nd_err *e) {
    nd_bundle *b = user;
    snprintf(b->stage, sizeof b->stage, "%s", ci->stage_name);
    snprintf(b->op, sizeof b->op, "%s", ci->op);
    b->layer = ci->layer;
    if (!(b->stage_yaml = strdup(ci->stage_yaml))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < ci->n_in && i < ND_BUNDLE_MAX_IN; i++) {
        nd_bundle_input *in = &b->in[b->n_in];
        size_t n = (size_t)(ci->in_rows[i] * ci->in_cols[i]);
        if (!(in->data = malloc(sizeof(float) * (n ? n : 1)))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        memcpy(in->data, ci->in_host[i], sizeof(float) * n);
        snprintf(in->name, sizeof in->name, "%s", ci->in_names[i]);
        in->rows = ci->in_rows[i];
        in->cols = ci->in_cols[i];
        b->n_in++;
    }
    for (int i = 0; i < ci->n_tensors && i < ND_BUNDLE_MAX_TENSORS; i++) {
        const nd_tview *t = ci->tensors[i];
        nd_bundle_tensor *bt = &b->tensors[b->n_tensors];
        if (!(bt->data = malloc(t->nbytes ? t->nbytes : 1))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        memcpy(bt->data, t->data, t->nbytes);
        bt->nbytes = t->nbytes;
        snprintf(bt->name, sizeof bt->name, "%s", ci->tensor_names[i]);
        snprintf(bt->dtype, sizeof bt->dtype, "%s", nd_dtype_str(t->dtype));
        bt->ndim = t->ndim;
        for (int d = 0; d < t->ndim; d++) bt->shape[d] = t->shape[d];
        b->n_tensors++;
    }
    return 0;
}
