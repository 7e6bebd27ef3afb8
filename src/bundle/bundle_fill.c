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
    const char *kind;
    FILE *f = nd_fopen_regular(path, &kind);
    if (!f && kind) return nd_fail(e, ND_EXIT_BADINPUT, "%s: not a regular file (%s)", path, kind);
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

/* a malloc'd copy of n bytes */
static void *dup_bytes(const void *src, size_t n) {
    void *p = malloc(n ? n : 1);
    if (p && n) memcpy(p, src, n);
    return p;
}

/* The capture callback of `repro` (nd_trace_opts.capture): copies what the stage reads. */
int nd_bundle_capture_cb(void *user, const nd_capture_info *ci, nd_err *e) {
    nd_bundle *b = user;
    /* a stage whose name is a prefix of the row ran before the one that makes it: the last
     * capture is the stage's (the run stops after the stage that makes the row) */
    free(b->stage_yaml);
    b->stage_yaml = NULL;
    nd_bundle_free_data(b);
    if (!b->stage[0]) snprintf(b->stage, sizeof b->stage, "%s", ci->stage_name); /* else the row repro asked for */
    snprintf(b->op, sizeof b->op, "%s", ci->op);
    b->layer = ci->layer;
    if (!(b->stage_yaml = strdup(ci->stage_yaml))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < ci->n_in && i < ND_BUNDLE_MAX_IN; i++) {
        const nd_stage_input *s = &ci->in[i];
        nd_bundle_input *in = &b->in[b->n_in++];
        const size_t n = (size_t)(s->rows * s->cols), kb = (size_t)(s->rows * s->k);
        snprintf(in->name, sizeof in->name, "%s", s->name);
        in->rows = s->rows;
        in->cols = s->cols;
        /* the routing decision the input carries (routed experts, sparse attention's key picks) */
        in->k = s->idx ? s->k : 0;
        in->route_scaling = s->route_scaling;
        if (!(in->data = dup_bytes(s->data, sizeof(float) * n)) || (s->idx && !(in->idx = dup_bytes(s->idx, sizeof(int32_t) * kb))) ||
            (s->idx && s->w && !(in->w = dup_bytes(s->w, sizeof(float) * kb))) ||
            (s->logits && !(in->logits = dup_bytes(s->logits, sizeof(float) * n))))
            return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
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
