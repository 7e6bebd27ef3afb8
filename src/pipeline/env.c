/* env.c — named, reference-counted activation buffers of one path. */
#include <stdlib.h>
#include <string.h>
#include "run.h"

nd_buf *nd_buf_new(nd_run *r, int64_t rows, int64_t cols, nd_err *e) {
    nd_buf *b = calloc(1, sizeof *b);
    if (!b) { nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); return NULL; }
    b->refs = 1;
    b->rows = rows;
    b->cols = cols;
    b->n = rows * cols;
    b->p = r->be->alloc(r->be, (size_t)(b->n > 0 ? b->n : 1) * sizeof(float), e);
    if (!b->p) { free(b); return NULL; }
    return b;
}

nd_buf *nd_buf_ref(nd_buf *b) { if (b) b->refs++; return b; }

void nd_buf_put(nd_run *r, nd_buf *b) {
    if (!b || --b->refs > 0) return;
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
