/* synth_run.c — nd_synth_run: plan, original, calibration, quantized checkpoint, side file. */
#include "recipe/recipe.h"
#include "util/outfile.h"
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include "synth/synth_outdir.h"
#include "numerics/nd_numerics.h"
#include "synth/synth.h"
#include "synth/synth_faults.h"
#include "synth/synth_plan.h"
#include "synth/synth_rng.h"
#include "synth/synth_write.h"
#include "util/suggest.h"
#include "util/progress.h"

static const char *const SIZE_NAMES[] = {"tiny", "small", "full"};
static const char *const FORMAT_NAMES[] = {"compressed-tensors", "modelopt"};

static int pick(const char *what, const char *name, const char *const *names, int n, int *out, nd_err *e) {
    for (int i = 0; name && i < n; i++)
        if (!strcmp(name, names[i])) { *out = i; return 0; }
    char list[256] = "";
    for (int i = 0; i < n; i++) {
        strncat(list, names[i], sizeof list - strlen(list) - 1);
        strncat(list, i + 1 < n ? ", " : "", sizeof list - strlen(list) - 1);
    }
    const char *best = name ? nd_suggest(name, names, (size_t)n) : NULL;
    if (best) return nd_fail(e, ND_EXIT_BADINPUT, "synth: unknown %s '%s'; did you mean '%s'? (known: %s)", what, name, best, list);
    return nd_fail(e, ND_EXIT_BADINPUT, "synth: unknown %s '%s' (known: %s)", what, name ? name : "", list);
}

int nd_synth_size_from_name(const char *name, nd_synth_size *out, nd_err *e) {
    int v;
    ND_TRY(pick("size", name, SIZE_NAMES, 3, &v, e));
    *out = (nd_synth_size)v;
    return 0;
}
int nd_synth_format_from_name(const char *name, nd_synth_format *out, nd_err *e) {
    int v;
    ND_TRY(pick("format", name, FORMAT_NAMES, 2, &v, e));
    *out = (nd_synth_format)v;
    return 0;
}

void nd_synth_calib_tokens(uint64_t seed, int64_t vocab, int64_t *out, int n) {
    sy_rng r;
    sy_rng_init(&r, seed, "calibration-tokens");
    for (int i = 0; i < n; i++) out[i] = (int64_t)sy_below(&r, (uint64_t)(vocab > 0 ? vocab : 1));
}

int nd_synth_calib_count(nd_synth_size size) { return size == ND_SYNTH_FULL ? 64 : ND_SYNTH_CALIB_MAX; }

/* ---- calibration ---------------------------------------------------------------------- */

static void on_amax(void *user, const char *module, double amax) {
    sy_plan *pl = user;
    long i = sy_find_module(pl, module);
    if (i < 0) return;
    sy_param *p = &pl->p[i];
    if (isnan(p->in_amax) || amax > p->in_amax) p->in_amax = amax;
}

static double amax_of(const sy_plan *pl, const char *module) {
    long i = sy_find_module(pl, module);
    return i < 0 ? NAN : pl->p[i].in_amax;
}

/* Fill the input amax of modules calibration did not report:
 *  - a fused shard takes its partner's (fused shards read the same input by construction);
 *  - a routed expert no calibration token picked (compressed-tensors #595 turns that into
 *    2688/0 = Inf): gate/up take the amax of their layer's MoE input (the shared expert's
 *    gate_proj input, else the largest of the layer's calibrated experts' gate/up), down_proj
 *    the largest calibrated routed down_proj input of the layer (else the shared expert's). */
static int resolve_amax(sy_plan *pl, nd_err *e) {
    for (size_t i = 0; i < pl->n; i++) {
        sy_param *p = &pl->p[i];
        if (p->quant != SY_Q_NVFP4 || !isnan(p->in_amax) || p->fuse < 0) continue;
        for (size_t j = 0; j < pl->n; j++)
            if (pl->p[j].fuse == p->fuse && !isnan(pl->p[j].in_amax)) p->in_amax = pl->p[j].in_amax;
    }
    for (size_t i = 0; i < pl->n; i++) {
        sy_param *p = &pl->p[i];
        if (p->quant != SY_Q_NVFP4 || !isnan(p->in_amax) || p->expert < 0) continue;
        char nm[SY_NAME];
        int down = !strcmp(p->role, "down_proj");
        double best = NAN;
        for (size_t j = 0; j < pl->n; j++) {
            const sy_param *q = &pl->p[j];
            if (q->layer != p->layer || q->expert < 0 || isnan(q->in_amax)) continue;
            if (down != !strcmp(q->role, "down_proj")) continue;
            if (isnan(best) || q->in_amax > best) best = q->in_amax;
        }
        snprintf(nm, sizeof nm, "layers.%d.mlp.shared_experts.%s", p->layer, down ? "down_proj" : "gate_proj");
        double shared = amax_of(pl, nm);
        if (down) p->in_amax = !isnan(best) ? best : shared;
        else p->in_amax = !isnan(shared) ? shared : best;
    }
    for (size_t i = 0; i < pl->n; i++) {
        const sy_param *p = &pl->p[i];
        if (p->quant != SY_Q_NVFP4) continue;
        if (isnan(p->in_amax) && p->line > 0)
            return nd_fail(e, ND_EXIT_BADINPUT, "%s:%d: synth: %s is quantized, and no stage of the recipe reads it "
                           "(calibration saw no input to scale it by): add a stage that reads it, or give it quant: none",
                           pl->recipe_name, p->line, p->module);
        if (isnan(p->in_amax))
            return nd_fail(e, ND_EXIT_INTERNAL, "synth: calibration reported no input amax for %s", p->module);
        if (!(p->in_amax > 0.0) || !isfinite(p->in_amax))
            return nd_fail(e, ND_EXIT_INTERNAL, "synth: calibration gave input amax %g for %s", p->in_amax, p->module);
    }
    return 0;
}

/* ---- the command ---------------------------------------------------------------------- */

/* dir has been prepared (sy_outdir_prepare): it is new or empty */
static int write_one(sy_wctx *w, const char *dir, nd_err *e) {
    if (mkdir(dir, 0777) && errno != EEXIST) return nd_fail(e, ND_EXIT_BADINPUT, "%s: cannot create directory: %s", dir, strerror(errno));
    ND_TRY(sy_write_tensors(w, dir, e));
    ND_TRY(sy_write_configs(w, dir, e));
    return sy_outdir_record(dir, e);
}

int nd_synth_run(const nd_synth_opts *o, nd_err *e) {
    if (!o->outdir || !o->outdir[0]) return nd_fail(e, ND_EXIT_BADINPUT, "synth: no output directory");
    if ((unsigned)o->size > ND_SYNTH_FULL) return nd_fail(e, ND_EXIT_BADINPUT, "synth: bad size");
    if ((unsigned)o->format > ND_SYNTH_MODELOPT) return nd_fail(e, ND_EXIT_BADINPUT, "synth: bad format");
    if (o->layers < 0 || o->layers > 64)
        return nd_fail(e, ND_EXIT_BADINPUT, "synth: --layers %d is out of range (1..64)", o->layers);
    if (!o->calibrate) return nd_fail(e, ND_EXIT_INTERNAL, "synth: no calibrator");

    char outdir[4096], orig[4300], side[4200];
    size_t n = strlen(o->outdir);
    while (n > 1 && o->outdir[n - 1] == '/') n--;
    if (n >= sizeof outdir) return nd_fail(e, ND_EXIT_BADINPUT, "synth: output path too long");
    memcpy(outdir, o->outdir, n);
    outdir[n] = 0;
    snprintf(orig, sizeof orig, "%s/original", outdir);
    snprintf(side, sizeof side, "%s.faults.json", outdir);

    sy_plan pl;
    sy_faults faults = {0};
    char stage[4200];
    int slot = -1, staged = 0;
    /* inputs no output may replace: the recipe folder, a recipe given as a file and those it extends */
    const char *inputs[16];
    int n_in = 0;
    char rbuf[8192];
    nd_recipe_inputs(&o->recipe, 1, inputs, &n_in, 16, rbuf, sizeof rbuf);
    const nd_out_rules side_rules = {.what = "fault list", .inputs = inputs, .n_inputs = n_in, .force = o->force,
                                     .ours = sy_faults_is_ours};
    int rc = sy_build_ex(&pl, o->recipe, o->size, o->layers, o->experts, e);
    if (!rc) rc = sy_faults_parse(&pl, o->injects, o->n_injects, &faults, e);
    if (!rc) rc = sy_outdir_check(outdir, o->force, inputs, n_in, e);
    /* everything is written into a staging folder beside OUTDIR, renamed onto it when complete */
    if (!rc) { rc = sy_stage_begin(outdir, stage, sizeof stage, &slot, e); staged = !rc; }
    if (!rc) rc = nd_out_check(side, &side_rules, e);
    if (staged) snprintf(orig, sizeof orig, "%s/original", stage);
    nd_progress pg; /* three steps: the original, its calibration, the NVFP4 checkpoint */
    if (!rc) {
        sy_wctx w = {.plan = &pl, .seed = o->seed, .quantized = 0, .fmt = o->format, .faults = &faults,
                     .shard_bytes = o->shard_bytes, .unequal_fused = o->unequal_fused};
        nd_progress_start(&pg, "synth", "steps", 3);
        nd_progress_update(&pg, 0, "writing the unquantized original");
        rc = write_one(&w, orig, e);
        if (!rc) nd_progress_update(&pg, 1, "calibrating the input scales on it");
        if (!rc) {
            int64_t tok[ND_SYNTH_CALIB_MAX];
            const int ntok = nd_synth_calib_count(o->size);
            nd_synth_calib_tokens(o->seed, pl.vocab, tok, ntok);
            rc = o->calibrate(o->calib_user, orig, pl.recipe, tok, ntok, on_amax, &pl, e);
            if (rc) nd_wrap(e, "synth: calibrating the original of %s", outdir);
        }
        if (!rc) rc = resolve_amax(&pl, e);
        if (!rc) {
            nd_progress_update(&pg, 2, "writing the NVFP4 checkpoint");
            w.quantized = 1;
            rc = write_one(&w, stage, e);
        }
        if (!rc) { rc = sy_stage_commit(stage, slot, outdir, o->force, e); staged = 0; }
        if (!rc) rc = sy_faults_write(&faults, side, e);
        nd_progress_end(&pg);
    }
    if (staged) { nd_err_swap(e, stage, outdir); sy_stage_abort(stage, slot); }
    sy_faults_free(&faults);
    sy_plan_free(&pl);
    return rc;
}
