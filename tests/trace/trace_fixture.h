/* trace_fixture.h — helpers for the trace and compare tests: a scratch directory, rows with
 * distinct values in every field, and a one-call trace writer. */
#ifndef ND_TRACE_FIXTURE_H
#define ND_TRACE_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "trace/trace.h"

/* A fresh directory under $TMPDIR (or the system's temporary directory). */
static inline const char *fx_dir(void) {
    static char dir[512];
    if (!dir[0]) {
        const char *base = getenv("TMPDIR");
        snprintf(dir, sizeof dir, "%s/nd_trace_test.XXXXXX", base && base[0] ? base : P_tmpdir);
        if (!mkdtemp(dir)) { perror("mkdtemp"); exit(3); }
    }
    return dir;
}

static inline const char *fx_path(const char *name) {
    static char buf[8][640];
    static int k;
    char *p = buf[k++ & 7];
    snprintf(p, 640, "%s/%s", fx_dir(), name);
    return p;
}

/* Row i of a synthetic run: every field a value that depends on i, so a swapped or dropped field
 * shows in a round trip. */
static inline nd_row fx_row(int i) {
    nd_row r;
    memset(&r, 0, sizeof r);
    r.index = i;
    r.layer = i / 4 - 1;
    snprintf(r.name, sizeof r.name, "layers.%d.self_attn.q_a_proj.s%d", i / 4, i);
    snprintf(r.op, sizeof r.op, "%s", i % 3 ? "linear" : "rmsnorm");
    snprintf(r.mode, sizeof r.mode, "%s", i % 2 ? "chained" : "isolated");
    r.quantized = (uint8_t)(i % 3 != 0);
    r.numel = 1000 + 7 * i;
    r.ref_amax = 1.5 + i;
    r.prod_amax = 1.25 + i;
    r.ref_nan = 0; r.prod_nan = 0; r.ref_inf = 0; r.prod_inf = 0;
    r.cosine = 0.999 - 1e-4 * i;
    r.rel_l2 = 0.05 + 1e-3 * i;
    r.sqnr_db = 26.0 - 0.1 * i;
    r.max_abs_err = 0.01 * (i + 1);
    r.sat_frac = 1e-4 * i;
    r.zero_block_frac = 2e-4 * i;
    r.scale_ratio = i % 3 ? 1.0 + 1e-3 * i : NAN;
    r.weight_rel_l2 = NAN;
    snprintf(r.verdict, sizeof r.verdict, "ok");
    r.floor_sqnr_db = 25.5 - 0.1 * i;
    r.scale_mult = 100.0 + i;
    r.alpha = 1.0 / (100.0 + i);
    r.worst_block = 3 * i;
    r.worst_block_rel = 0.2 + 1e-2 * i;
    r.topk_agree = NAN;
    r.kl_div = NAN;
    r.top1_agree = NAN;
    return r;
}

static inline nd_trace_meta fx_meta(void) {
    nd_trace_meta m = {"0.1.0-test", "ckpt/tiny", "compressed-tensors", "deepseek_v4", "exact", "cpu",
                       "cpu: test", "isolated,chained", "model.x.input_global_scale=2", NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
    return m;
}

static inline nd_trace_summary fx_summary(const char *status, const char *stage, const char *mode,
                                          const char *cause) {
    nd_trace_summary s;
    memset(&s, 0, sizeof s);
    snprintf(s.status, sizeof s.status, "%s", status);
    snprintf(s.first_divergence, sizeof s.first_divergence, "%s", stage);
    snprintf(s.first_divergence_mode, sizeof s.first_divergence_mode, "%s", mode);
    snprintf(s.cause, sizeof s.cause, "%s", cause);
    snprintf(s.message, sizeof s.message, "%s", stage[0] ? "a stage diverged" : "no divergence");
    return s;
}

/* Write rows[0..n) with summary s (NULL: leave "incomplete"). Returns the writer's status. */
static inline int fx_write_tokens(const char *path, const nd_row *rows, int n, const nd_trace_summary *s,
                                  const int64_t *tok, int64_t ntok, nd_err *e) {
    nd_trace_meta m = fx_meta();
    nd_trace_w *w = NULL;
    int rc = nd_trace_create(path, &m, tok, ntok, &w, e);
    for (int i = 0; !rc && i < n; i++) rc = nd_trace_append(w, &rows[i], e);
    if (w) {
        nd_err e2 = {0};
        int rc2 = nd_trace_finish(w, rc ? NULL : s, rc ? &e2 : e);
        if (!rc) rc = rc2;
    }
    return rc;
}

static inline int fx_write(const char *path, const nd_row *rows, int n, const nd_trace_summary *s, nd_err *e) {
    const int64_t tok[4] = {11, 22, 33, 44};
    return fx_write_tokens(path, rows, n, s, tok, 4, e);
}

#endif
