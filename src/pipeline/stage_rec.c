/* stage_rec.c — a single stage replayed from its recorded inputs (issue 23; pipeline.h:
 * nd_stage_replay).
 *
 * The first replay of a row runs the stages before it on the reference path, as a full run does,
 * and keeps a host copy of what the row's stage reads: its input buffers on the reference path
 * (with the routing decision a buffer carries: expert ids, weights, router logits). Tokens and
 * positions come from the options, as in every run. A later replay with other overrides runs only
 * that stage from the copy.
 *
 * Why the inputs cannot change: an override reaches the computation only through a lookup by its
 * exact name (stack.c find_named). The record keeps every name the earlier stages looked up; a
 * replay whose extra overrides name none of them sees, stage by stage, the same lookups answered
 * the same way, so the earlier stages compute what they computed before and the inputs are those
 * recorded. A replay with an override of such a name runs in full. The stages' other state is
 * the environment of named buffers (run.h), which the record restores. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "run.h"
#include "loop.h"
#include "rowq.h"
#include "pipeline.h"

typedef struct name_set {
    uint64_t *h;               /* open-addressed FNV-1a hashes of names (0: empty slot) */
    size_t cap, n;
    int oom;                   /* could not grow: no fast replay */
} name_set;

typedef struct rec_in {
    char name[32];
    float *p;                  /* n floats */
    int64_t n, rows, cols;
    int32_t *idx;              /* [rows, k] or NULL */
    float *w;                  /* [rows, k] or NULL */
    int k;
    float *logits;             /* n floats or NULL */
    float route_scaling;
} rec_in;

struct nd_stage_rec {
    int filled;                /* the stage made the row; its inputs are below */
    int in_stage;              /* a stage that could make the row is running: its lookups go to pending */
    int fast;                  /* the last replay ran the stage alone */
    int section, index, layer; /* the stage: prologue (0), layer (1) or epilogue (2), its index */
    char row[ND_NAME_LEN];     /* from inputs recorded elsewhere: the row whose stage is looked up
                                * by name when the replay runs (index -1 until then) */
    int n_in;
    rec_in in[ND_RECIPE_MAX_IO];
    int watched;               /* the lookups were collected (a first replay ran with it) */
    name_set seen;             /* the names the stages before it looked up */
    name_set pending;          /* those of a stage that could make the row, until it is known whether it did */
};

static uint64_t name_hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) { h ^= (unsigned char)s[i]; h *= 1099511628211ull; }
    return h ? h : 1;
}

static int set_has(const name_set *st, uint64_t h) {
    if (!st->cap) return 0;
    for (size_t i = h & (st->cap - 1);; i = (i + 1) & (st->cap - 1)) {
        if (st->h[i] == h) return 1;
        if (!st->h[i]) return 0;
    }
}

static void set_put(name_set *st, uint64_t h) {
    if (st->oom || set_has(st, h)) return;
    if (2 * (st->n + 1) > st->cap) {
        size_t cap = st->cap ? 2 * st->cap : 1024;
        uint64_t *t = calloc(cap, sizeof *t);
        if (!t) { st->oom = 1; return; }
        for (size_t i = 0; i < st->cap; i++) {
            if (!st->h[i]) continue;
            size_t j = st->h[i] & (cap - 1);
            while (t[j]) j = (j + 1) & (cap - 1);
            t[j] = st->h[i];
        }
        free(st->h);
        st->h = t;
        st->cap = cap;
    }
    size_t j = h & (st->cap - 1);
    while (st->h[j]) j = (j + 1) & (st->cap - 1);
    st->h[j] = h;
    st->n++;
}

static void set_free(name_set *st) {
    free(st->h);
    memset(st, 0, sizeof *st);
}

static void on_lookup(void *user, const char *name) {
    nd_stage_rec *rec = user;
    set_put(rec->in_stage ? &rec->pending : &rec->seen, name_hash(name, strlen(name)));
}

void nd_stage_rec_watch(nd_stage_rec *rec, nd_stack *s) {
    s->on_lookup = on_lookup;
    s->lookup_user = rec;
    rec->watched = 1;
}

static void free_inputs(nd_stage_rec *rec) {
    for (int i = 0; i < rec->n_in; i++) {
        free(rec->in[i].p);
        free(rec->in[i].idx);
        free(rec->in[i].w);
        free(rec->in[i].logits);
    }
    memset(rec->in, 0, sizeof rec->in);
    rec->n_in = 0;
}

void nd_stage_rec_free(nd_stage_rec *rec) {
    if (!rec) return;
    free_inputs(rec);
    set_free(&rec->seen);
    set_free(&rec->pending);
    free(rec);
}

int nd_stage_rec_fast(const nd_stage_rec *rec) { return rec && rec->fast; }

static void *dup_host(const void *src, size_t bytes) {
    void *p = malloc(bytes ? bytes : 1);
    if (p && bytes) memcpy(p, src, bytes);
    return p;
}

int nd_stage_input_of(nd_run *r, const nd_buf *b, const char *name, nd_stage_input *in, float **host, nd_err *e) {
    const size_t nb = sizeof(float) * (size_t)(b->n > 0 ? b->n : 0);
    memset(in, 0, sizeof *in);
    if (!(*host = malloc(nb ? nb : 1))) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    if (nb) ND_TRY(r->be->download(r->be, *host, b->p, nb, e));
    snprintf(in->name, sizeof in->name, "%s", name);
    in->rows = b->rows;
    in->cols = b->cols;
    in->data = *host;
    in->k = b->idx ? b->k : 0;
    in->idx = b->idx;
    in->w = b->w;
    in->logits = b->logits_host;
    in->route_scaling = b->route_scaling;
    return 0;
}

/* x takes a copy of s (its data: `owned` when given, else copied) */
static int rec_take(rec_in *x, const nd_stage_input *s, float *owned, nd_err *e) {
    const int64_t n = s->rows * s->cols;
    const size_t nb = sizeof(float) * (size_t)(n > 0 ? n : 0), kb = (size_t)(s->rows * s->k);
    memset(x, 0, sizeof *x);
    snprintf(x->name, sizeof x->name, "%s", s->name);
    x->n = n;
    x->rows = s->rows;
    x->cols = s->cols;
    x->k = s->k;
    x->route_scaling = s->route_scaling;
    x->p = owned ? owned : dup_host(s->data, nb);
    if (!x->p || (s->idx && !(x->idx = dup_host(s->idx, sizeof(int32_t) * kb))) || (s->w && !(x->w = dup_host(s->w, sizeof(float) * kb))) ||
        (s->logits && !(x->logits = dup_host(s->logits, nb))))
        return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    return 0;
}

int nd_stage_rec_inputs(nd_run *r, nd_stage_rec *rec, const nd_stage_def *def, nd_err *e) {
    rec->in_stage = 1; /* its own lookups concern its own module and parameters */
    set_free(&rec->pending);
    free_inputs(rec);
    for (int i = 0; i < def->n_in; i++) {
        const nd_buf *b = nd_env_get(&r->loop->env_ref, def->in[i]);
        if (!b) continue; /* the stage itself says which input is missing */
        nd_stage_input v;
        float *host = NULL;
        if (nd_stage_input_of(r, b, def->in[i], &v, &host, e)) { free(host); return e->code; }
        ND_TRY(rec_take(&rec->in[rec->n_in++], &v, host, e));
    }
    return 0;
}

int nd_stage_rec_from_inputs(const char *row, int layer, const nd_stage_input *in, int n_in, nd_stage_rec **rec, nd_err *e) {
    if (n_in < 0 || n_in > ND_RECIPE_MAX_IO) return nd_fail(e, ND_EXIT_BADINPUT, "single-stage replay of %s: %d inputs (at most %d)", row, n_in, ND_RECIPE_MAX_IO);
    nd_stage_rec *x = calloc(1, sizeof *x);
    if (!x) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    snprintf(x->row, sizeof x->row, "%s", row);
    x->index = -1;
    x->layer = layer;
    x->filled = x->watched = 1; /* no stage ran before it here: no name was looked up */
    for (int i = 0; i < n_in; i++)
        if (rec_take(&x->in[x->n_in++], &in[i], NULL, e)) { nd_stage_rec_free(x); return e->code; }
    *rec = x;
    return 0;
}

void nd_stage_rec_made(nd_run *r, nd_stage_rec *rec, const nd_stage_def *def, int layer, int made) {
    rec->in_stage = 0;
    if (!made) {
        /* a stage that could make the row and did not (DeepSeek-V3's dense "layers.1.mlp" on a MoE
         * layer) is one of the stages before it: its lookups count */
        for (size_t i = 0; i < rec->pending.cap; i++)
            if (rec->pending.h[i]) set_put(&rec->seen, rec->pending.h[i]);
        if (rec->pending.oom) rec->seen.oom = 1;
        set_free(&rec->pending);
        free_inputs(rec);
        return;
    }
    set_free(&rec->pending);
    const nd_recipe *rc = r->rc;
    if (def >= rc->prologue && def < rc->prologue + rc->n_prologue) { rec->section = 0; rec->index = (int)(def - rc->prologue); }
    else if (def >= rc->layer && def < rc->layer + rc->n_layer) { rec->section = 1; rec->index = (int)(def - rc->layer); }
    else { rec->section = 2; rec->index = (int)(def - rc->epilogue); }
    rec->layer = layer;
    rec->filled = !rec->seen.oom;
    if (!rec->filled) free_inputs(rec);
}

/* the stage that makes rec->row at rec->layer (inputs recorded elsewhere) */
static int find_stage(const nd_run *r, nd_stage_rec *rec, nd_err *e) {
    const nd_recipe *rc = r->rc;
    const nd_stage_def *sec[3] = {rc->prologue, rc->layer, rc->epilogue};
    const int n[3] = {rc->n_prologue, rc->n_layer, rc->n_epilogue};
    for (int s = 0; s < 3; s++) {
        if ((s == 1) != (rec->layer >= 0)) continue;
        for (int i = 0; i < n[s]; i++) {
            char name[ND_NAME_LEN];
            nd_expand(sec[s][i].name, rec->layer, 0, name, sizeof name);
            if (nd_stage_makes_row(name, rec->row)) { rec->section = s; rec->index = i; return 0; }
        }
    }
    return nd_fail(e, ND_EXIT_BADINPUT, "%s: no stage of the recipe makes the row %s", rc->path, rec->row);
}

int nd_stage_rec_run(nd_run *r, nd_stage_rec *rec, nd_err *e) {
    const nd_recipe *rc = r->rc;
    if (rec->index < 0) ND_TRY(find_stage(r, rec, e));
    const int n = rec->section == 0 ? rc->n_prologue : rec->section == 1 ? rc->n_layer : rc->n_epilogue;
    if (rec->index < 0 || rec->index >= n)
        return nd_fail(e, ND_EXIT_INTERNAL, "single-stage replay: the recorded stage %d is not in the recipe", rec->index);
    const nd_stage_def *def = (rec->section == 0 ? rc->prologue : rec->section == 1 ? rc->layer : rc->epilogue) + rec->index;
    for (int i = 0; i < rec->n_in; i++) {
        const rec_in *x = &rec->in[i];
        nd_buf *b = nd_buf_new(r, x->rows, x->cols, e);
        if (!b) return e->code;
        int rc2 = x->n > 0 ? r->be->upload(r->be, b->p, x->p, sizeof(float) * (size_t)x->n, e) : 0;
        const size_t kb = (size_t)(x->rows * x->k);
        b->k = x->k;
        b->route_scaling = x->route_scaling;
        if (!rc2 && ((x->idx && !(b->idx = dup_host(x->idx, sizeof(int32_t) * kb))) || (x->w && !(b->w = dup_host(x->w, sizeof(float) * kb))) ||
                     (x->logits && !(b->logits_host = dup_host(x->logits, sizeof(float) * (size_t)x->n)))))
            rc2 = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        /* the stages before it ran on the reference path only: the chained path reads the same buffers */
        if (!rc2) {
            nd_env_set(r, &r->loop->env_ref, x->name, b);
            nd_env_set(r, &r->loop->env_chain, x->name, b);
        }
        nd_buf_put(r, b);
        ND_TRY(rc2);
    }
    int rc3 = nd_loop_stage_body(r, def, rec->layer, r->loop->modes, e);
    if (!rc3) rc3 = nd_rows_flush(r, e);
    r->loop->captured = 1;
    return rc3;
}

/* none of the extra overrides is a name an earlier stage looked up */
static int rec_usable(const nd_stage_rec *rec, const char *const *extra, int n) {
    if (!rec->filled) return 0;
    for (int i = 0; i < n; i++) {
        const char *eq = strrchr(extra[i], '=');
        if (!eq || set_has(&rec->seen, name_hash(extra[i], (size_t)(eq - extra[i])))) return 0;
    }
    return 1;
}

int nd_stage_replay(const nd_trace_opts *base, const char *row, const char *const *extra_ovr, int n_extra,
                    nd_stage_rec **rec, nd_row *out, nd_stage_info *info, nd_err *e) {
    nd_trace_opts o = *base;
    const char **ovr = calloc((size_t)(base->n_overrides + n_extra + 1), sizeof *ovr);
    if (!ovr) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int i = 0; i < base->n_overrides; i++) ovr[i] = base->overrides[i];
    for (int i = 0; i < n_extra; i++) ovr[base->n_overrides + i] = extra_ovr[i];
    o.overrides = ovr;
    o.n_overrides = base->n_overrides + n_extra;
    o.only_row = row;
    o.stage_info = info;
    /* chained: the row of the chained path, every stage before it run on both paths, unreported
     * (the chained path's input depends on all of them: no record can stand for them) */
    const int chained = base->modes == ND_MODES_CHAINED;
    o.modes = chained ? ND_MODES_CHAINED : ND_MODES_ISOLATED;
    o.out_path = NULL;
    o.progress = 0;
    o.dump_tensors = 0;
    o.prod_dump = NULL;
    if (!base->capture) o.capture_stage = NULL; /* repro captures the stage as it replays it */
    o.defer_finish = 0;
    o.stage_rec = NULL;
    if (chained) {
        /* the layers the caller replays, up to the row's: before them the chained path follows
         * the reference, as in a full run */
        if (!strncmp(row, "layers.", 7)) o.layer_hi = atoi(row + 7);
        rec = NULL;
    } else {
        /* the row's layer: earlier layers run on the reference path only (the same inputs as before) */
        o.layer_lo = 0;
        o.layer_hi = -1;
        if (!strncmp(row, "layers.", 7)) o.layer_lo = o.layer_hi = atoi(row + 7);
    }
    if (rec && !*rec && !(*rec = calloc(1, sizeof **rec))) { free(ovr); return nd_fail(e, ND_EXIT_INTERNAL, "out of memory"); }
    if (rec) {
        (*rec)->fast = (*rec)->filled ? rec_usable(*rec, extra_ovr, n_extra) : 0;
        /* filled and usable: run from it; never filled yet: fill it (a first replay that failed
         * is not retried: the candidates then run in full) */
        if ((*rec)->fast || !(*rec)->watched) o.stage_rec = *rec;
    }
    if (info) memset(info, 0, sizeof *info);
    nd_trace_result res;
    int rc = nd_pipeline_trace(&o, &res, e);
    free(ovr);
    const nd_row *hit = NULL;
    for (int64_t i = 0; !rc && i < res.nrows; i++)
        if (!strcmp(res.rows[i].name, row) && !strcmp(res.rows[i].mode, chained ? "chained" : "isolated")) hit = &res.rows[i];
    if (!rc && !hit) rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: no stage of the recipe produces a row named %s", base->ckpt_dir, row);
    if (!rc) *out = *hit;
    if (!rc && info) {
        info->floor_margin_db = res.floor_margin_db;
        snprintf(info->backend, sizeof info->backend, "%s", res.backend);
        snprintf(info->device, sizeof info->device, "%s", res.device);
        snprintf(info->stack, sizeof info->stack, "%s", res.stack);
        snprintf(info->warning, sizeof info->warning, "%s", res.warning);
    }
    nd_trace_result_free(&res);
    return rc;
}
