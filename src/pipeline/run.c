/* run.c — the stage loop: prologue, layers, epilogue; each stage on the reference path, the
 * isolated production path (reference inputs) and the chained production path (production
 * inputs), one probe row per stage and mode, flushed to the trace as it is produced. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "run.h"
#include "ref_config.h"
#include "loop.h"
#include "pipeline.h"
#include "probes.h"
#include "verdict.h"
#include "recipe/recipe.h"
#include "trace/trace.h"
_Static_assert(ND_STAGE_NAME_MAX == ND_NAME_LEN - 1, "recipe stage names must fit the trace's name field");
#include "util/suggest.h"
#include "util/term.h"
#include "sink.h"
#include "rowq.h"
#include "nd_config.h"
#include "op_desc.h"
#include "util/progress.h"


/* The NaN + Inf count of a stage's input, a figure of the row `owner` (rowq.h): 0 here, the count
 * when the row is flushed. */
static int64_t nonfinite_of(nd_run *r, const nd_buf *b, nd_row *owner, nd_err *e) {
    if (b) (void)nd_rows_figure(r, owner, ND_FIG_IN_NONFINITE, b, NULL, e);
    return 0;
}

int nd_emit_row(nd_run *r, const nd_stage *st, const char *name, const char *op, int mode, const nd_buf *ref,
                const nd_buf *prod, const nd_row *extra, int quantized, nd_err *e) {
    if (!nd_rows_recorded(r)) { nd_rows_drop(r, extra); return 0; }
    nd_row row;
    if (extra) row = *extra; else nd_row_init(&row);
    if (ref->n != prod->n)
        return nd_fail(e, ND_EXIT_INTERNAL, "stage %s: reference and production outputs differ in size (%lld vs %lld)", name,
                       (long long)ref->n, (long long)prod->n);
    row.index = r->loop->next_index++;
    row.layer = st->layer;
    snprintf(row.name, sizeof row.name, "%s", name);
    snprintf(row.op, sizeof row.op, "%s", op);
    snprintf(row.mode, sizeof row.mode, "%s", mode == ND_MODE_ISOLATED ? "isolated" : mode == ND_MODE_CHAINED ? "chained" : "captured");
    row.quantized = (uint8_t)(quantized > 0);
    /* probes, verdict and the append come when the row is flushed (rowq.h; at once with
     * --dump-tensors, so that the tensors below follow their row) */
    ND_TRY(nd_rows_queue(r, &row, extra, ref, prod, e));
    if (r->loop->tw && r->loop->dump_tensors) {
        float *h = malloc(sizeof(float) * (size_t)ref->n);
        if (!h) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        int64_t shape[2] = {ref->rows, ref->cols};
        char stage[ND_NAME_LEN + 16];
        snprintf(stage, sizeof stage, "%s@%s", name, row.mode);
        int rc = r->be->download(r->be, h, ref->p, sizeof(float) * (size_t)ref->n, e);
        if (!rc && mode == ND_MODE_ISOLATED) rc = nd_trace_put_tensor(r->loop->tw, name, "ref", h, 2, shape, e);
        if (!rc) rc = r->be->download(r->be, h, prod->p, sizeof(float) * (size_t)prod->n, e);
        if (!rc) rc = nd_trace_put_tensor(r->loop->tw, stage, "prod", h, 2, shape, e);
        free(h);
        ND_TRY(rc);
    }
    return 0;
}

/* KL and top-1 per position on the backend (logits_kl): rows x 16 bytes come back, not the logits */
int nd_head_logits(nd_run *r, const nd_buf *ref, const nd_buf *prod, nd_row *f, nd_err *e) {
    if (ref->n != prod->n)
        return nd_fail(e, ND_EXIT_INTERNAL, "head logits: reference and production differ in size (%lld vs %lld)",
                       (long long)ref->n, (long long)prod->n);
    nd_logits_row *rows = malloc(sizeof *rows * (size_t)(ref->rows > 0 ? ref->rows : 1));
    int rc = !rows ? nd_fail(e, ND_EXIT_INTERNAL, "out of memory") : 0;
    if (!rc) rc = r->be->logits_kl(r->be, ref->p, prod->p, ref->rows, ref->cols, rows, e);
    if (!rc) nd_probe_logits(rows, ref->rows, &f->kl_div, &f->top1_agree);
    /* the prompt's next-token negative log-likelihood on each path: lse - logit[next id], the two
     * logits of each position fetched alone (8 bytes a position, not the rows) */
    double nll[2] = {0, 0};
    int64_t counted = 0;
    for (int64_t i = 0; !rc && i + 1 < ref->rows && i + 1 < r->t; i++) {
        const int64_t tgt = r->tokens[i + 1];
        if (rows[i].top_ref < 0 || tgt < 0 || tgt >= ref->cols) continue;
        float xr = NAN, xp = NAN;
        rc = r->be->download(r->be, &xr, ref->p + i * ref->cols + tgt, sizeof xr, e);
        if (!rc) rc = r->be->download(r->be, &xp, prod->p + i * prod->cols + tgt, sizeof xp, e);
        nll[0] += rows[i].lse_ref - xr;
        nll[1] += rows[i].lse_prod - xp;
        counted++;
    }
    if (!rc && counted) {
        f->nll_ref = nll[0] / (double)counted;
        f->nll_prod = nll[1] / (double)counted;
    }
    free(rows);
    return rc;
}

int nd_loop_stage_body(nd_run *r, const nd_stage_def *def, int layer, int modes, nd_err *e) {
    nd_stage st = {.def = def, .layer = layer};
    nd_expand(def->name, layer, 0, st.name, sizeof st.name);
    /* the module template keeps {E} for experts; only {L} is resolved here */
    {
        char tmp[192];
        size_t o = 0;
        for (const char *t = def->module; *t && o + 12 < sizeof tmp;) {
            if (t[0] == '{' && t[1] == 'L' && t[2] == '}') { o += (size_t)snprintf(tmp + o, sizeof tmp - o, "%d", layer); t += 3; }
            else tmp[o++] = *t++;
        }
        tmp[o] = 0;
        memcpy(st.module, tmp, o + 1);
    }
    char nm[256];
    if (def->when_has[0]) { nd_expand(def->when_has, layer, 0, nm, sizeof nm); if (!nd_run_tensor(r, 0, nm)) return 0; }
    if (def->when_missing[0]) { nd_expand(def->when_missing, layer, 0, nm, sizeof nm); if (nd_run_tensor(r, 0, nm)) return 0; }
    if (def->when_config[0]) {
        double v;
        nd_expand(def->when_config, layer, 0, nm, sizeof nm);
        if (nd_cfg_number(r->cfg, nm, &v))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s/config.json: stage %s runs only where '%s' is set (%s:%d), and it is "
                           "missing or not a number or boolean", nd_ckpt_dir(r->ck), st.name, nm, nd_stage_file(r->rc, def), def->line);
        if (v == 0) return 0;
    }
    nd_op_fn fn = nd_op_lookup(def->op);
    if (!fn) return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: unknown op '%s'", nd_stage_file(r->rc, def), def->line, def->op);
    nd_opctx c;
    memset(&c, 0, sizeof c);
    c.r = r;
    c.st = &st;
    c.n_in = def->n_in;
    c.n_out = def->n_out;
    c.want_iso = (modes & ND_MODE_ISOLATED) != 0;
    c.want_chain = (modes & ND_MODE_CHAINED) != 0;
    nd_row_init(&c.extra_iso);
    nd_row_init(&c.extra_chain);
    for (int i = 0; i < def->n_in; i++) {
        c.in_ref[i] = nd_env_get(&r->loop->env_ref, def->in[i]);
        c.in_chain[i] = nd_env_get(&r->loop->env_chain, def->in[i]);
        if (!c.in_ref[i] || (c.want_chain && !c.in_chain[i]))
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: stage %s reads '%s', which no earlier stage wrote", nd_stage_file(r->rc, def), def->line, def->name, def->in[i]);
    }
    /* test-only: a device fault at a named stage (NVFP4DBG_TEST_FAULT_STAGE), to prove that a
     * failure mid-run ends with exit 3 and a readable partial trace */
    const char *fault = getenv("NVFP4DBG_TEST_FAULT_STAGE");
    if (fault && !strcmp(fault, st.name) && !r->silent) {
        if (!strcmp(r->be->name, "cuda")) {
            /* a real device error: a copy from an address no allocation owns */
            float probe;
            if (r->be->download(r->be, &probe, (const void *)(uintptr_t)0x10, sizeof probe, e))
                return nd_wrap(e, "stage %s (injected device fault, test only)", st.name);
        }
        return nd_fail(e, ND_EXIT_INTERNAL, "%s: injected device fault at stage %s (test only)", r->be->name, st.name);
    }
    /* repro: what the stage reads goes to the capture callback; the stage then runs as usual */
    if (r->loop->opts && r->loop->opts->capture_stage && nd_stage_makes_row(st.name, r->loop->opts->capture_stage) && !r->silent)
        ND_TRY(nd_run_capture(r, &st, c.in_ref, e));
    /* NVFP4DBG_PROFILE=1: each stage's wall time (backend synced) and its share of uploads, on stderr */
    const int prof = !r->silent && getenv("NVFP4DBG_PROFILE") != NULL;
    struct timespec p0, p1;
    const double up0 = r->upload_s;
    if (prof) { (void)r->be->sync(r->be, e); clock_gettime(CLOCK_MONOTONIC, &p0); }
    int rc = fn(&c, e);
    /* a shape an op refuses comes from the sizes the recipe took from config.json: name the file
     * and the keys (the checkpoint's tensors disagree with them) */
    if (rc == ND_EXIT_BADINPUT && !strncmp(e->msg, "stage ", 6)) {
        char keys[600] = "";
        size_t o = 0;
        for (int i = 0; i < def->n_attrs && o < sizeof keys - 80; i++) {
            /* an attribute is a $key, or a comma list of them ("$kv_lora_rank,$qk_rope_head_dim") */
            for (const char *v = def->attrs[i].value; v && *v && o < sizeof keys - 80;) {
                const char *comma = strchr(v, ',');
                char one[96];
                snprintf(one, sizeof one, "%.*s", (int)(comma ? (size_t)(comma - v) : strlen(v)), v);
                v = comma ? comma + 1 : NULL;
                double x;
                if (one[0] != '$' || nd_cfg_number(r->cfg, one + 1, &x)) continue;
                char tag[100];
                snprintf(tag, sizeof tag, "%s ", one + 1); /* a key two attributes read (head_dim, rot_dim) once */
                int seen = 0;
                for (const char *h = strstr(keys, tag); h && !seen; h = strstr(h + 1, tag)) seen = h == keys || h[-1] == ' ';
                if (seen) continue;
                o += (size_t)snprintf(keys + o, sizeof keys - o, "%s%.60s %g", o ? ", " : "", one + 1, x);
            }
        }
        const size_t l = strlen(e->msg);
        if (keys[0] && l < sizeof e->msg - 40)
            snprintf(e->msg + l, sizeof e->msg - l, " (sizes from %s/config.json: %s; recipe %s:%d): the config does not "
                     "describe these weights", nd_ckpt_dir(r->ck), keys, nd_stage_file(r->rc, def), def->line);
    }
    if (!rc && c.quantized != -1 && !r->loop->calib_cb && c.out_ref[0]) {
        char lg[8];
        int logits = nd_attr_str(&st, "logits", lg, sizeof lg) && lg[0] == '1';
        if (c.want_iso && c.out_iso[0]) {
            c.extra_iso.in_nonfinite = c.n_in ? nonfinite_of(r, c.in_ref[0], &c.extra_iso, e) : 0;
            if (logits) rc = nd_head_logits(r, c.out_ref[0], c.out_iso[0], &c.extra_iso, e);
            if (!rc) rc = nd_emit_row(r, &st, st.name, def->op, ND_MODE_ISOLATED, c.out_ref[0], c.out_iso[0], &c.extra_iso, c.quantized, e);
        }
        if (!rc && r->loop->dump && !r->silent) {
            /* a real stack's activation of this stage, judged like a chained row */
            nd_buf *cap = nd_run_captured(r, st.name, st.module, "", c.out_ref[0]->cols, e);
            if (!cap && e->code) rc = e->code;
            if (cap) {
                nd_row fig = c.extra_chain;
                fig.in_nonfinite = 0;
                rc = nd_emit_row(r, &st, st.name, def->op, ND_MODE_CAPTURED, c.out_ref[0], cap, &fig, c.quantized, e);
                nd_buf_put(r, cap);
            }
        }
        if (!rc && c.want_chain && c.out_chain[0]) {
            c.extra_chain.in_nonfinite = c.n_in ? nonfinite_of(r, c.in_chain[0], &c.extra_chain, e) : 0;
            if (logits) rc = nd_head_logits(r, c.out_ref[0], c.out_chain[0], &c.extra_chain, e);
            if (!rc) rc = nd_emit_row(r, &st, st.name, def->op, ND_MODE_CHAINED, c.out_ref[0], c.out_chain[0], &c.extra_chain, c.quantized, e);
        }
    }
    if (prof) {
        (void)r->be->sync(r->be, e);
        clock_gettime(CLOCK_MONOTONIC, &p1);
        fprintf(stderr, "profile: %-44s %-12s %9.4f s  upload %9.4f s\n", st.name, def->op,
                (double)(p1.tv_sec - p0.tv_sec) + 1e-9 * (double)(p1.tv_nsec - p0.tv_nsec), r->upload_s - up0);
    }
    if (!rc) {
        for (int i = 0; i < def->n_out; i++) {
            if (c.out_ref[i]) nd_env_set(r, &r->loop->env_ref, def->out[i], c.out_ref[i]);
            /* a chained path that is not replayed follows the reference (layers before --layers) */
            nd_buf *ch = c.want_chain ? c.out_chain[i] : c.out_ref[i];
            if (ch) nd_env_set(r, &r->loop->env_chain, def->out[i], ch);
        }
    }
    for (int i = 0; i < ND_RECIPE_MAX_IO; i++) {
        nd_buf_put(r, c.out_ref[i]);
        nd_buf_put(r, c.out_iso[i]);
        nd_buf_put(r, c.out_chain[i]);
    }
    if (rc) {
        /* an op that already names its stage is not named twice */
        char own[ND_NAME_LEN + 16];
        snprintf(own, sizeof own, "stage %s:", st.name);
        return strncmp(e->msg, own, strlen(own)) ? nd_wrap(e, "stage %s", st.name) : rc;
    }
    return 0;
}

/* The stage produces the row named `row`: its name is the row's, or a dot-prefix of it (a stage
 * that emits rows of its own modules: "layers.0.mlp.experts" emits "layers.0.mlp.experts.3.up_proj"). */
int nd_stage_makes_row(const char *stage, const char *row) {
    size_t n = strlen(stage);
    return !strncmp(stage, row, n) && (row[n] == 0 || row[n] == '.');
}

/* Single-stage replay (opts->only_row): every other stage runs unreported, on the reference path
 * only (isolated mode) or on both paths (chained mode); the run stops after the stage that makes
 * the row. A stage that could make it but did
 * not (DeepSeek-V3's dense "layers.1.mlp", skipped on a MoE layer, comes before both
 * "layers.1.mlp.experts" and the MoE layer's own "layers.1.mlp") does not stop the run. */
static int run_stage(nd_run *r, const nd_stage_def *def, int layer, int modes, nd_err *e) {
    const char *only = r->loop->opts ? r->loop->opts->only_row : NULL;
    if (!only || r->silent) return nd_loop_stage_body(r, def, layer, modes, e);
    char name[ND_NAME_LEN];
    nd_expand(def->name, layer, 0, name, sizeof name);
    if (!nd_stage_makes_row(name, only)) {
        /* unreported; a chained replay keeps their chained path (its input is theirs) */
        r->silent++;
        int rc = nd_loop_stage_body(r, def, layer, modes & ND_MODE_CHAINED, e);
        r->silent--;
        return rc;
    }
    const int64_t before = r->loop->nrows;
    struct nd_stage_rec *rec = r->loop->opts->stage_rec;
    int rc = rec ? nd_stage_rec_inputs(r, rec, def, e) : 0; /* what it reads, for a replay of it alone */
    if (!rc) rc = nd_loop_stage_body(r, def, layer, modes, e);
    if (!rc) rc = nd_rows_flush(r, e); /* the rows are read below */
    int made = 0;
    for (int64_t i = before; i < r->loop->nrows && !made; i++) made = !strcmp(r->loop->rows[i].name, only);
    if (rec && !rc) nd_stage_rec_made(r, rec, def, layer, made);
    if (made || rc) r->loop->captured = 1; /* done: nothing after it is needed */
    return rc;
}

static int run_all_layers(nd_run *r, nd_progress *pg, nd_err *e) {
    int nl = (int)r->cfg->num_hidden_layers;
    int hi = r->loop->layer_hi < 0 || r->loop->layer_hi >= nl ? nl - 1 : r->loop->layer_hi;
    /* a single-stage replay from the stage's recorded inputs: that stage alone */
    if (r->loop->opts && r->loop->opts->stage_rec && nd_stage_rec_fast(r->loop->opts->stage_rec))
        return nd_stage_rec_run(r, r->loop->opts->stage_rec, e);
    for (int i = 0; i < r->rc->n_prologue && !r->loop->captured; i++) ND_TRY(run_stage(r, &r->rc->prologue[i], -1, r->loop->modes, e));
    if (r->loop->captured) return 0;
    for (int L = 0; L <= hi; L++) {
        /* layers before the first replayed one run on the reference path only, unreported, so
         * that the replayed layers get their true inputs */
        int before = L < r->loop->layer_lo;
        if (before) r->silent++;
        for (int i = 0; i < r->rc->n_layer && !r->loop->captured; i++) {
            int rc = run_stage(r, &r->rc->layer[i], L, before ? 0 : r->loop->modes, e);
            if (rc) { if (before) r->silent--; return rc; }
        }
        if (r->loop->captured) { if (before) r->silent--; return 0; }
        if (before) r->silent--;
        ND_TRY(nd_rows_flush(r, e)); /* the layer's rows: one download of their figures */
        /* the layer is done: none of its mapped pages are needed any more (issue: bounded RSS) */
        nd_ckpt_release_all(r->ck);
        if (r->ref_ck) nd_ckpt_release_all(r->ref_ck);
        if (r->loop->progress) nd_progress_update(pg, L + 1, NULL);
    }
    if (hi == nl - 1)
        for (int i = 0; i < r->rc->n_epilogue && !r->loop->captured; i++) ND_TRY(run_stage(r, &r->rc->epilogue[i], -1, r->loop->modes, e));
    return nd_rows_flush(r, e);
}

/* the layers with their progress on stderr (util/progress.h: a bar on a terminal, plain lines
 * elsewhere, nested in a bisect's or synth's own) */
static int run_all(nd_run *r, nd_err *e) {
    nd_progress pg;
    int nl = (int)r->cfg->num_hidden_layers;
    int hi = r->loop->layer_hi < 0 || r->loop->layer_hi >= nl ? nl - 1 : r->loop->layer_hi;
    if (r->loop->progress) nd_progress_start(&pg, "trace", "layers", hi + 1 > 0 ? hi + 1 : 0);
    int rc = run_all_layers(r, &pg, e);
    if (rc) {
        /* the rows before the failure still go into the (partial) trace, when the backend can
         * still bring their figures back */
        nd_err e2 = {0};
        (void)nd_rows_flush(r, &e2);
    }
    if (r->loop->progress) nd_progress_end(&pg);
    return rc;
}

static int open_backend(const char *name, int device, nd_backend **be, nd_err *e) {
    /* a device other than the default names a CUDA device: never dropped for the CPU in silence */
    if (device != 0 && name && !strcmp(name, "cpu"))
        return nd_fail(e, ND_EXIT_BADINPUT, "--device %d names a CUDA device, but --backend cpu runs on the host (leave --device out)", device);
    if (!name || !strcmp(name, "auto")) {
        if (device != 0) {
            if (!nd_backend_cuda_available())
                return nd_fail(e, ND_EXIT_BADINPUT, "--device %d: this machine has no CUDA device (--backend auto would run the CPU "
                               "backend; leave --device out)", device);
            return nd_backend_cuda_create(be, device, e);
        }
        if (nd_backend_cuda_available() && !nd_backend_cuda_create(be, device, e)) return 0;
        return nd_backend_cpu_create(be, e);
    }
    if (!strcmp(name, "cpu")) return nd_backend_cpu_create(be, e);
    if (!strcmp(name, "cuda")) return nd_backend_cuda_create(be, device, e);
    return nd_fail(e, ND_EXIT_BADINPUT, "--backend %s: expected auto, cpu or cuda", name);
}

static void run_close(nd_run *r) {
    if (r->be) nd_prefetch_close(r); /* first: its thread may still read the mapping */
    nd_env_clear(r, &r->loop->env_ref);
    nd_env_clear(r, &r->loop->env_chain);
    if (r->rc) nd_recipe_free(r->rc);
    if (r->ck) nd_ckpt_close(r->ck);
    if (r->ref_ck) nd_ckpt_close(r->ref_ck);
    if (r->loop->dump) nd_st_close(r->loop->dump);
    free(r->loop->dump_used);
    if (r->be) r->be->destroy(r->be);
    free(r->bound);
    r->bound = NULL;
    nd_rows_free(r);
    free(r->pos);
    free(r->loop->rows);
    free(r->loop->own_tokens);
}

/* SPEC §2: a fixed built-in list of 16 ids, each taken modulo the vocabulary size. */
static const int64_t default_tokens[16] = {0, 1, 100, 2000, 30000, 128000, 7, 42, 999, 12345, 64, 5, 77777, 256, 31, 9};

static int run_open(nd_run *r, const char *ckpt_dir, const char *recipe, const char *backend, int device,
                    const int64_t *tokens, int64_t ntok, nd_err *e) {
    ND_TRY(nd_ckpt_open(ckpt_dir, &r->ck, e));
    r->cfg = nd_ckpt_config(r->ck);
    if (recipe) ND_TRY(nd_recipe_load(recipe, &r->rc, e));
    else ND_TRY(nd_recipe_for_model_type(r->cfg->model_type, &r->rc, e));
    ND_TRY(nd_op_validate_recipe(r->rc, e));
    ND_TRY(nd_run_check_config(r, e)); /* run_checks.c */
    r->naming = nd_naming_pick(r->rc, r->ck);
    ND_TRY(open_backend(backend, device, &r->be, e));
    if (!tokens || !ntok) {
        r->loop->own_tokens = malloc(sizeof default_tokens);
        if (!r->loop->own_tokens) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
        for (int i = 0; i < 16; i++) r->loop->own_tokens[i] = r->cfg->vocab_size > 0 ? default_tokens[i] % r->cfg->vocab_size : default_tokens[i];
        tokens = r->loop->own_tokens;
        ntok = 16;
    }
    r->t = ntok;
    r->tokens = (int64_t *)tokens;
    ND_TRY(nd_run_check_window(r, e));
    r->pos = malloc(sizeof(int32_t) * (size_t)(ntok ? ntok : 1));
    if (!r->pos) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int64_t i = 0; i < ntok; i++) r->pos[i] = (int32_t)i;
    r->loop->layer_hi = -1;
    return 0;
}

int nd_pipeline_calibrate(const char *ckpt_dir, const char *recipe, const int64_t *tokens, int64_t ntok,
                          nd_amax_cb cb, void *user, nd_err *e) {
    nd_run r;
    memset(&r, 0, sizeof r);
    nd_loop lp;
    memset(&lp, 0, sizeof lp);
    r.loop = &lp;
    int rc = run_open(&r, ckpt_dir, recipe, "cpu", 0, tokens, ntok, e);
    if (!rc) rc = nd_stack_load("exact", &r.stack, e);
    lp.calib_cb = cb;
    lp.calib_user = user;
    nd_loop_sink(&r);
    lp.modes = 0;
    lp.progress = nd_progress_active(); /* inside synth's progress: the layers calibrated */
    if (!rc) rc = run_all(&r, e);
    run_close(&r);
    return rc;
}

static uint64_t widest(uint64_t a, int64_t b) { return b > 0 && (uint64_t)b > a ? (uint64_t)b : a; }

uint64_t nd_pipeline_memory_estimate(const nd_model_cfg *cfg, int64_t ntok, int layer_lo, int layer_hi, int with_head) {
    uint64_t w = 0, x;
    /* compressed attention's index scores: [tokens, tokens / rate] on a layer that compresses
     * (DeepSeek-V4 CSA/HCA; the widest activation of a long prompt: quadratic in it). Layers
     * before --layers run on the reference path alone: half of the two paths' bytes */
    const int hi = layer_hi >= 0 ? layer_hi : cfg->n_compress_ratios - 1;
    for (int L = 0; L <= hi && L < cfg->n_compress_ratios; L++)
        if (cfg->compress_ratios[L] > 0 && ntok > 0) {
            const int64_t nc = (ntok + cfg->compress_ratios[L] - 1) / cfg->compress_ratios[L];
            w = widest(w, L < layer_lo ? nc / 2 : nc);
        }
    if (!__builtin_mul_overflow((uint64_t)(cfg->hidden_size > 0 ? cfg->hidden_size : 0),
                                (uint64_t)(cfg->hc_mult > 1 ? cfg->hc_mult : 1), &x))
        w = widest(w, (int64_t)(x > INT64_MAX ? INT64_MAX : x));
    else
        return UINT64_MAX;
    const int64_t hd = cfg->head_dim > 0 ? cfg->head_dim : cfg->qk_nope_head_dim + cfg->qk_rope_head_dim;
    if (hd > 0 && cfg->num_attention_heads > 0) {
        if (__builtin_mul_overflow((uint64_t)hd, (uint64_t)cfg->num_attention_heads, &x)) return UINT64_MAX;
        w = widest(w, (int64_t)(x > INT64_MAX ? INT64_MAX : x));
    }
    w = widest(w, cfg->intermediate_size);
    if (cfg->moe_intermediate_size > 0 && cfg->num_experts_per_tok > 0) {
        if (__builtin_mul_overflow((uint64_t)cfg->moe_intermediate_size, (uint64_t)cfg->num_experts_per_tok, &x)) return UINT64_MAX;
        w = widest(w, (int64_t)(x > INT64_MAX ? INT64_MAX : x));
    }
    if (with_head) w = widest(w, cfg->vocab_size);
    uint64_t bytes;
    if (__builtin_mul_overflow(w, (uint64_t)(ntok > 0 ? ntok : 0), &bytes) ||
        __builtin_mul_overflow(bytes, (uint64_t)(2 * sizeof(float)), &bytes))
        return UINT64_MAX;
    return bytes;
}

uint64_t nd_pipeline_default_max_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0) return (uint64_t)8 << 30;
    return (uint64_t)pages * (uint64_t)size / 2;
}

static const char *modes_str(int m) { return m == 3 ? "isolated,chained" : m == 1 ? "isolated" : "chained"; }

static int check_dump_used(const nd_loop *lp, const char *path, nd_err *e);

static int row_key_cmp(const void *a, const void *b) {
    const nd_row *x = *(const nd_row *const *)a, *y = *(const nd_row *const *)b;
    const int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->mode, y->mode);
}

/* Every (stage, mode) row once: a recipe whose layer stage lacks {L} writes the same rows in every
 * layer, which a golden then holds twice (and a gate reads either). Exit 2 naming it. */
static int check_rows_unique(const nd_loop *lp, const nd_recipe *recipe, nd_err *e) {
    if (lp->nrows < 2) return 0;
    const nd_row **v = malloc((size_t)lp->nrows * sizeof *v);
    if (!v) return nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    for (int64_t i = 0; i < lp->nrows; i++) v[i] = &lp->rows[i];
    qsort(v, (size_t)lp->nrows, sizeof *v, row_key_cmp);
    int rc = 0;
    for (int64_t i = 1; i < lp->nrows && !rc; i++)
        if (!row_key_cmp(&v[i - 1], &v[i]))
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: stage %s (%s) wrote its row twice: two stages of the recipe expand to one name "
                         "(a layer stage without {L}?)", recipe->path, v[i]->name, v[i]->mode);
    free(v);
    return rc;
}
static void dump_unused_warning(const nd_loop *lp, const char *path, char *out, size_t cap);

int nd_pipeline_trace(const nd_trace_opts *o, nd_trace_result *res, nd_err *e) {
    memset(res, 0, sizeof *res);
    res->summary.kl_before = res->summary.kl_after = res->summary.top1_before = res->summary.top1_after = NAN;
    nd_run r;
    memset(&r, 0, sizeof r);
    nd_loop lp;
    memset(&lp, 0, sizeof lp);
    r.loop = &lp;
    lp.opts = o; /* run_checks.c: a single-stage replay (a bundle's one stage) is not judged as a model */
    int rc = run_open(&r, o->ckpt_dir, o->recipe, o->backend, o->device, o->tokens, o->ntok, e);
    const int any_q = rc || o->allow_unquantized || !strcmp(nd_ckpt_format_str(r.ck), "unquantized") ? 0 : nd_run_any_quantized(r.ck, e);
    if (any_q < 0) rc = e->code;
    else if (!rc && !o->allow_unquantized && (!strcmp(nd_ckpt_format_str(r.ck), "unquantized") || !any_q))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: no quantized module (format %s%s): both paths would run the same "
                     "weights and find nothing. Trace the NVFP4 checkpoint (with this one as --reference-checkpoint), or "
                     "pass --allow-unquantized to replay it anyway", nd_ckpt_dir(r.ck), nd_ckpt_format_str(r.ck),
                     strcmp(nd_ckpt_format_str(r.ck), "unquantized") ? ", but no module holds quantized tensors" : "");
    /* --layers picking only layers kept in high precision compares nothing quantized either */
    else if (!rc && !o->allow_unquantized && o->layer_hi >= 0 && o->layer_lo < nd_ckpt_config(r.ck)->num_hidden_layers &&
             !nd_run_any_quantized_in(r.ck, o->layer_lo, o->layer_hi)) /* (a range past the model is refused below) */
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: layers %d-%d hold no quantized module: both paths would run the same "
                     "weights there and find nothing. Pick layers that hold quantized modules (nvfp4dbg inspect --modules), "
                     "or pass --allow-unquantized to replay them anyway", nd_ckpt_dir(r.ck), o->layer_lo, o->layer_hi);
    if (!rc) rc = nd_stack_load(o->stack ? o->stack : "exact", &r.stack, e);
    for (int i = 0; !rc && i < o->n_overrides; i++) rc = nd_stack_add_override(&r.stack, o->overrides[i], e);
    if (!rc) rc = nd_override_targets_check(&r, &r.stack, e);
    /* recording a single-stage replay: the override names the stages before it look up */
    if (!rc && o->stage_rec && !nd_stage_rec_fast(o->stage_rec)) nd_stage_rec_watch(o->stage_rec, &r.stack);
    if (!rc && o->ref_ckpt) {
        rc = nd_ckpt_open(o->ref_ckpt, &r.ref_ck, e);
        /* the reference path runs the original's weights: a quantized folder (the checkpoint
         * itself, given twice by mistake) would make every weight figure 0 and hide the faults */
        if (!rc && nd_ckpt_format(r.ref_ck) != ND_CKPT_UNQUANTIZED)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "--reference-checkpoint %s: is itself quantized (%s%s); the reference path needs the "
                         "unquantized original the checkpoint was made from", o->ref_ckpt, nd_ckpt_format_str(r.ref_ck),
                         nd_ckpt_format(r.ref_ck) == nd_ckpt_format(r.ck) ? ", like the checkpoint" : "");
        if (!rc) rc = nd_ref_config_check(r.rc, r.ck, r.ref_ck, e);
        if (!rc) r.ref_naming = nd_naming_pick(r.rc, r.ref_ck);
    }
    lp.opts = o;
    r.no_probes = o->no_probes;
    r.ep = o->ep;
    /* expert parallelism on a model without routed experts splits nothing: the run would be the
     * plain one, and the user believes it modelled EP (round 24) */
    if (!rc && o->ep > 1 && r.cfg->n_routed_experts <= 0)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "--ep %d: %s has no routed experts (a dense model): expert parallelism splits nothing "
                     "here; leave --ep out", o->ep, o->ckpt_dir);
    r.ref_only = o->ref_only;
    r.n_ref_only = o->n_ref_only;
    r.ref_only_floor = o->ref_only_floor;
    if (!rc && o->prod_dump) rc = nd_st_open(o->prod_dump, &lp.dump, e);
    if (!rc && lp.dump && !(lp.dump_used = calloc(nd_st_count(lp.dump) + 1, 1))) rc = nd_fail(e, ND_EXIT_INTERNAL, "out of memory");
    lp.modes = o->modes ? o->modes : ND_MODES_BOTH;
    if (!rc) rc = nd_run_ref_numerics(&r, o->ref_numerics, e);
    lp.layer_lo = o->layer_lo;
    lp.layer_hi = o->layer_hi;
    if (!rc && (o->layer_lo >= r.cfg->num_hidden_layers || o->layer_hi >= r.cfg->num_hidden_layers))
        rc = nd_fail(e, ND_EXIT_BADINPUT, "--layers %d-%d: %s has %lld layers (0-%lld)", o->layer_lo,
                     o->layer_hi < 0 ? o->layer_lo : o->layer_hi, o->ckpt_dir, (long long)r.cfg->num_hidden_layers,
                     (long long)r.cfg->num_hidden_layers - 1);
    r.act_limit = o->max_memory ? o->max_memory : nd_pipeline_default_max_memory();
    double max_pos = 0;
    /* as a server refuses a prompt longer than the model's context (vLLM's max_model_len) */
    if (!rc && nd_cfg_number(r.cfg, "max_position_embeddings", &max_pos) == 0 && max_pos >= 1 && (double)r.t > max_pos)
        rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %lld tokens are more than the model's context (max_position_embeddings %.0f "
                     "in config.json)", o->ckpt_dir, (long long)r.t, max_pos);
    if (!rc) {
        const int head = o->layer_hi < 0 || o->layer_hi == r.cfg->num_hidden_layers - 1;
        const uint64_t need = nd_pipeline_memory_estimate(r.cfg, r.t, o->layer_lo, o->layer_hi, head);
        if (need > r.act_limit)
            rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: %lld tokens need at least %.3g GiB of activations (the widest activation of "
                         "this model on both paths), more than --max-memory %.3g GiB; use fewer tokens or raise --max-memory",
                         o->ckpt_dir, (long long)r.t, need == UINT64_MAX ? INFINITY : (double)need / 1073741824.0,
                         (double)r.act_limit / 1073741824.0);
    }
    lp.dump_tensors = o->dump_tensors;
    lp.progress = o->progress;
    if (!rc) {
        snprintf(res->recipe, sizeof res->recipe, "%s", r.rc->name);
        snprintf(res->stack, sizeof res->stack, "%s", r.stack.name);
        snprintf(res->backend, sizeof res->backend, "%s", r.be->name);
        snprintf(res->device, sizeof res->device, "%s", r.be->device);
        snprintf(res->format, sizeof res->format, "%s", nd_ckpt_format_str(r.ck));
    }
    if (!rc && o->out_path) {
        nd_trace_meta meta = {ND_VERSION, o->ckpt_dir, nd_ckpt_format_str(r.ck), r.rc->name, r.stack.name,
                              r.be->name, r.be->device, modes_str(lp.modes), NULL, nd_run_ref_numerics_name(&r), NULL, NULL, NULL, NULL, NULL, NULL, NULL};
        char ovr[2048] = "";
        size_t len = 0;
        for (int i = 0; i < o->n_overrides; i++)
            len += (size_t)snprintf(ovr + len, len < sizeof ovr ? sizeof ovr - len : 0, "%s%s", i ? ";" : "", o->overrides[i]);
        meta.overrides = ovr;
        /* the recipe file and its hash: repro replays the recipe the trace ran, or refuses */
        char rfile[4096] = "", rhash[17] = "";
        char *real = realpath(r.rc->path, NULL);
        snprintf(rfile, sizeof rfile, "%s", real ? real : r.rc->path);
        free(real);
        nd_err eh = {0};
        if (nd_recipe_hash(r.rc, rhash, &eh)) rhash[0] = 0;
        meta.recipe_file = rfile;
        meta.recipe_fnv = rhash;
        /* the stack profile file and its hash: repro bundles the profile the trace ran, or refuses */
        char sfile[4096] = "", shash[17] = "";
        char *sreal = realpath(r.stack.path, NULL);
        snprintf(sfile, sizeof sfile, "%s", sreal ? sreal : r.stack.path);
        free(sreal);
        if (!r.stack.path[0] || nd_recipe_file_hash(r.stack.path, shash, &eh)) shash[0] = 0;
        meta.stack_file = sfile;
        meta.stack_fnv = shash;
        meta.prompt = o->prompt_text;
        meta.prompt_chat = o->prompt_chat;
        meta.reference_checkpoint = o->ref_ckpt;
        rc = nd_trace_create(o->out_path, &meta, r.tokens, r.t, &lp.tw, e);
        res->trace_created = !rc;
    }
    nd_loop_sink(&r); /* what the ops hand over: rows, routing, the replayed stage's description */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!rc) rc = run_all(&r, e);
    if (!rc) rc = r.be->sync(r.be, e);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    res->elapsed_s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    res->weight_bytes = r.weight_bytes;
    res->upload_s = r.upload_s;
    res->n_layers = r.cfg ? (int)r.cfg->num_hidden_layers : 0;
    res->gemm_flops_fp32 = r.gemm_flops_fp32;
    res->gemm_flops_bf16 = r.gemm_flops_bf16;
    res->floor_margin_db = r.rc ? r.rc->th.floor_margin_db : NAN;
    /* --prod-dump whose tensors name no stage judged nothing: not "no divergence" (issue 37) */
    if (!rc && lp.dump && !o->only_row) rc = check_dump_used(&lp, o->prod_dump, e);
    if (!rc) rc = check_rows_unique(&lp, r.rc, e);
    if (!rc) {
        nd_first_divergence(lp.rows, lp.nrows, &res->summary);
        /* --no-probes measured nothing: the trace must not read as a healthy run (show, report,
         * compare all take the status) */
        if (o->no_probes) {
            snprintf(res->summary.status, sizeof res->summary.status, "unjudged");
            snprintf(res->summary.message, sizeof res->summary.message,
                     "not judged: --no-probes ran the replay without its probes (a timing baseline); nothing was measured");
        }
        /* with expert parallelism, say which rank holds a diverging expert */
        const char *ex = strstr(res->summary.first_divergence, ".experts.");
        if (o->ep > 1 && ex && ex[9] >= '0' && ex[9] <= '9' && r.cfg->n_routed_experts % o->ep == 0) {
            long id = strtol(ex + 9, NULL, 10), per = (long)(r.cfg->n_routed_experts / o->ep);
            snprintf(res->note, sizeof res->note, " (expert %ld is local expert %ld of EP rank %ld of %d)", id, id % per, id / per, o->ep);
            size_t len = strlen(res->summary.message);
            snprintf(res->summary.message + len, sizeof res->summary.message - len, "%s", res->note);
        }
        /* quantized modules no stage replayed (a recipe that skips part of the model): the run is
         * not a verdict on them (trace exits 1 for them, as for a static error it could not judge) */
        if (!o->only_row && !o->no_probes && !o->allow_unquantized)
            res->unreplayed = nd_run_unreplayed(&r, o->layer_lo, o->layer_hi, res->unreplayed_first, sizeof res->unreplayed_first);
        const char *unused;
        /* a profile that reads fused gate/up halves in W31 order, on a recipe no stage of which
         * consults it (Phi-3, GLM-4, Gemma 3 compute their MLP as projections and a gate_mul): the
         * run does not model that behaviour, and "no divergence" would say the stack serves it */
        if (r.stack.gate_up_w31 && !r.stack.gate_up_consulted && !o->only_row)
            snprintf(res->unmodelled, sizeof res->unmodelled, "stack %s reads fused gate/up halves in W31 order (gate_up_order: "
                     "w31), and no stage of recipe %s consults it (its MLP is projections and a gate_mul): this run does not "
                     "model that behaviour", r.stack.name, r.rc->name);
        if (nd_stack_unused(&r.stack, &unused))
            snprintf(res->warning, sizeof res->warning, "--override %s matched no checkpoint scale or stage parameter", unused);
        else if (lp.dump && !o->only_row)
            dump_unused_warning(&lp, o->prod_dump, res->warning, sizeof res->warning);
    } else {
        snprintf(res->summary.status, sizeof res->summary.status, "error");
        snprintf(res->summary.message, sizeof res->summary.message, "%s", e->msg);
    }
    if (lp.tw && o->defer_finish && !rc) {
        res->tw = lp.tw; /* the caller diagnoses and writes /summary */
        lp.tw = NULL;
    }
    if (lp.tw) {
        nd_err e2 = {0};
        /* a failed run keeps its rows and says so; a failure to close is reported unless an
         * earlier error is already being returned */
        int rc2 = nd_trace_finish(lp.tw, &res->summary, rc ? &e2 : e);
        if (!rc && rc2) rc = rc2;
    }
    res->rows = lp.rows;
    res->nrows = lp.nrows;
    lp.rows = NULL;
    run_close(&r);
    return rc;
}

/* A --prod-dump none of whose tensors named a replayed stage: exit 2 with what the file holds, what
 * the stages are called, and the stage name closest to its first tensor. */
static int check_dump_used(const nd_loop *lp, const char *path, nd_err *e) {
    for (int64_t i = 0; i < lp->nrows; i++)
        if (!strcmp(lp->rows[i].mode, "captured")) return 0;
    const size_t nt = nd_st_count(lp->dump);
    char held[512] = "", stages[512] = "";
    size_t n = 0;
    for (size_t i = 0; i < nt && i < 4 && n < sizeof held; i++)
        n += (size_t)snprintf(held + n, sizeof held - n, "%s%s", i ? ", " : "", nd_st_at(lp->dump, i)->name);
    n = 0;
    const char **names = calloc(lp->nrows ? (size_t)lp->nrows : 1, sizeof *names);
    size_t nn = 0;
    for (int64_t i = 0; i < lp->nrows && names; i++) {
        if (nn && !strcmp(names[nn - 1], lp->rows[i].name)) continue;
        names[nn++] = lp->rows[i].name;
        if (nn <= 4 && n < sizeof stages) n += (size_t)snprintf(stages + n, sizeof stages - n, "%s%s", nn > 1 ? ", " : "", lp->rows[i].name);
    }
    const char *near = nt && names ? nd_suggest(nd_st_at(lp->dump, 0)->name, names, nn) : NULL;
    int rc = nd_fail(e, ND_EXIT_BADINPUT, "%s: none of its %zu tensors names a stage of this run, so nothing was judged (it holds %s%s; "
                     "the stages are named like %s ...)%s%s%s; tensors are named after stages (docs/repro.md, tools/capture_hook.py)",
                     path, nt, held, nt > 4 ? ", ..." : "", stages, near ? ": did you mean " : "", near ? near : "", near ? "?" : "");
    free(names);
    return rc;
}

/* Some tensors of a --prod-dump judged stages and others none: the others are named (a misspelt
 * name among matched ones would otherwise drop its tensor without a word). */
static void dump_unused_warning(const nd_loop *lp, const char *path, char *out, size_t cap) {
    const size_t nt = nd_st_count(lp->dump);
    size_t n_unused = 0, len = 0;
    char names[160] = "";
    for (size_t i = 0; i < nt; i++) {
        if (lp->dump_used[i]) continue;
        if (n_unused++ < 3 && len < sizeof names)
            len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", n_unused > 1 ? ", " : "", nd_st_at(lp->dump, i)->name);
    }
    if (!n_unused) return;
    char safe[200];
    nd_term_safe(names, safe, sizeof safe);
    snprintf(out, cap, "%s: %zu of its %zu tensors named no stage of this run and were not judged: %s%s", path, n_unused, nt,
             safe, n_unused > 3 ? ", ..." : "");
}

void nd_trace_result_free(nd_trace_result *res) {
    free(res->rows);
    res->rows = NULL;
    if (res->tw) { nd_err e = {0}; (void)nd_trace_finish(res->tw, NULL, &e); res->tw = NULL; }
}
