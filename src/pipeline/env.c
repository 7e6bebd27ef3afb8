/* env.c — named, reference-counted activation buffers of one path. */
#include <stdlib.h>
#include <string.h>
#include "run.h"

nd_buf *nd_buf_new(nd_run *r, int64_t rows, int64_t cols, nd_err *e) {
    /* rows * cols * 4 in checked arithmetic: a config past the estimate cannot wrap it */
    uint64_t bytes;
    if (rows < 0 || cols < 0 || __builtin_mul_overflow((uint64_t)rows, (uint64_t)cols, &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)sizeof(float), &bytes)) {
        nd_fail(e, ND_EXIT_BADINPUT, "an activation of %lld x %lld values does not fit in 64 bits", (long long)rows, (long long)cols);
        return NULL;
    }
    if (r->act_limit && r->act_bytes + bytes > r->act_limit) {
        nd_fail(e, ND_EXIT_BADINPUT, "the activations of %lld tokens need more than --max-memory %.3g GiB (%.3g GiB held, "
                "%.3g GiB more asked for); use fewer tokens or raise --max-memory", (long long)r->t,
                (double)r->act_limit / 1073741824.0, (double)r->act_bytes / 1073741824.0, (double)bytes / 1073741824.0);
        return NULL;
    }
    nd_buf *b = calloc(1, sizeof *b);
    if (!b) { nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); return NULL; }
    b->refs = 1;
    b->rows = rows;
    b->cols = cols;
    b->n = rows * cols;
    b->p = r->be->alloc(r->be, (size_t)(b->n > 0 ? b->n : 1) * sizeof(float), e);
    if (!b->p) { free(b); return NULL; }
    nd_buf_count(r, b);
    return b;
}

void nd_buf_count(nd_run *r, const nd_buf *b) {
    r->act_bytes += (uint64_t)(b->n > 0 ? b->n : 0) * sizeof(float);
    if (r->act_bytes > r->act_peak) r->act_peak = r->act_bytes;
}

nd_buf *nd_buf_ref(nd_buf *b) { if (b) b->refs++; return b; }

void nd_buf_put(nd_run *r, nd_buf *b) {
    if (!b || --b->refs > 0) return;
    r->act_bytes -= (uint64_t)(b->n > 0 ? b->n : 0) * sizeof(float);
    r->be->release(r->be, b->p);
    free(b->idx);
    free(b->w);
    free(b->logits_host);
    free(b);
}

nd_buf *nd_env_get(nd_env *env, const char *name) {
    for (int i = 0; i < env->n; i++)
        if (!strcmp(env->names[i], name)) return env->bufs[i];
    return NULL;
}

void nd_env_set(nd_run *r, nd_env *env, const char *name, nd_buf *b) {
    nd_buf_ref(b);
    for (int i = 0; i < env->n; i++)
        if (!strcmp(env->names[i], name)) { nd_buf_put(r, env->bufs[i]); env->bufs[i] = b; return; }
    if (env->n < ND_ENV_MAX) {
        snprintf(env->names[env->n], sizeof env->names[0], "%s", name);
        env->bufs[env->n++] = b;
    } else {
        nd_buf_put(r, b); /* recipes are checked to stay far below ND_ENV_MAX names */
    }
}

void nd_env_clear(nd_run *r, nd_env *env) {
    for (int i = 0; i < env->n; i++) nd_buf_put(r, env->bufs[i]);
    env->n = 0;
}
