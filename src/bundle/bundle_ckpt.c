/* bundle_ckpt.c — what `replay` runs on: a temporary checkpoint folder and a one-stage recipe
 * made from a bundle.
 *
 *   config.json, hf_quant_config.json  the original texts (the stage's $config keys, the format)
 *   model.safetensors                  the bundled tensors under their canonical names, and for a
 *                                      layer stage a marker `nvfp4dbg.layer<L>`
 *   recipe.yaml                        the original thresholds and the captured stage (bundle_recipe.c)
 *   stack.yaml                         the serving-stack profile of the original run
 *
 * The inputs are not in the folder: replay hands them to the single-stage replay
 * (pipeline.h nd_stage_rec_from_inputs), which runs the stage alone from them. A layer stage stays
 * a layer stage (ops may depend on the layer index: layer types, compress ratios), so the
 * recipe's `layer` section holds it, gated with `when_has: nvfp4dbg.layer{L}` so that only layer L
 * runs it. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "util/tmpclean.h"
#include "bundle.h"
#include "bundle_recipe.h"
#include "util/outfile.h"
#include "pipeline/pipeline.h"

static int write_text(const char *dir, const char *name, const char *text, nd_err *e) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wbx");   /* the folder is our own, new (mkdtemp): nothing is there to follow */
    if (!f) return nd_fail(e, nd_io_exit(errno), "%s: cannot create: %s%s", path, strerror(errno), nd_io_hint(errno));
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fclose(f) != 0;
    return bad ? nd_fail(e, nd_io_exit(errno), "%s: cannot write: %s%s", path, strerror(errno), nd_io_hint(errno)) : 0;
}

static int write_weights(const nd_bundle *b, const char *dir, nd_err *e) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    nd_st_writer *w;
    ND_TRY(nd_st_writer_open(path, &w, e));
    int rc = 0;
    static const float one = 1.0f;
    for (int i = 0; i < b->n_tensors && !rc; i++) {
        const nd_bundle_tensor *t = &b->tensors[i];
        rc = nd_st_writer_add(w, t->name, nd_dtype_from_str(t->dtype), t->ndim, t->shape, t->data, e);
    }
    char marker[48];
    snprintf(marker, sizeof marker, "nvfp4dbg.layer%d", b->layer);
    int64_t one_shape[1] = {1};
    if (!rc && b->layer >= 0) rc = nd_st_writer_add(w, marker, ND_DT_F32, 1, one_shape, &one, e);
    if (rc) { nd_st_writer_abort(w); return rc; }
    return nd_st_writer_close(w, e);
}

static int write_recipe(const nd_bundle *b, const char *dir, nd_err *e) {
    char *r = NULL;
    ND_TRY(nd_bundle_recipe_text(b, &r, e));
    int rc = write_text(dir, "recipe.yaml", r, e);
    free(r);
    return rc;
}

int nd_bundle_materialise(const nd_bundle *b, char *dir, size_t cap, nd_err *e) {
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = P_tmpdir;
    /* the folder and the longest file name in it must fit a path: say so rather than cut the name */
    const size_t need = strlen(base) + sizeof "/nvfp4dbg-replay-XXXXXX/hf_quant_config.json";
    if (need > cap || need > PATH_MAX)
        return nd_fail(e, ND_EXIT_BADINPUT, "TMPDIR is %zu bytes long; replay's temporary files need at most %zu: set TMPDIR to a "
                       "shorter folder", strlen(base), (cap < PATH_MAX ? cap : (size_t)PATH_MAX) - (need - strlen(base)));
    snprintf(dir, cap, "%s/nvfp4dbg-replay-XXXXXX", base);
    int slot;
    nd_tmpclean_install(); /* removed on a signal too (SIGTERM, SIGHUP ...), not only by nd_bundle_cleanup */
    if (!nd_tmpclean_mkdtemp(dir, &slot))
        return nd_fail(e, nd_io_exit(errno), "%s: cannot create a temporary folder: %s%s (set TMPDIR to a writable folder)", dir,
                       strerror(errno), nd_io_hint(errno));
    int rc = write_text(dir, "config.json", b->config_json, e);
    if (!rc && b->hf_quant_config_json) rc = write_text(dir, "hf_quant_config.json", b->hf_quant_config_json, e);
    if (!rc) rc = write_text(dir, "stack.yaml", b->stack_yaml, e);
    if (!rc) rc = write_recipe(b, dir, e);
    if (!rc) rc = write_weights(b, dir, e);
    if (rc) nd_bundle_cleanup(dir);
    return rc;
}

void nd_bundle_cleanup(const char *dir) {
    static const char *const files[] = {"config.json", "hf_quant_config.json", "stack.yaml", "recipe.yaml",
                                        "model.safetensors", "model.safetensors.tmp"};
    char path[PATH_MAX + 64];
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    rmdir(dir);
    nd_tmpclean_drop_path(dir);
}

int nd_bundle_stage_rec(const nd_bundle *b, struct nd_stage_rec **rec, nd_err *e) {
    nd_stage_input in[ND_BUNDLE_MAX_IN];
    memset(in, 0, sizeof in);
    for (int i = 0; i < b->n_in; i++) {
        const nd_bundle_input *x = &b->in[i];
        snprintf(in[i].name, sizeof in[i].name, "%s", x->name);
        in[i].rows = x->rows;
        in[i].cols = x->cols;
        in[i].data = x->data;
        in[i].k = x->k;
        in[i].idx = x->idx;
        in[i].w = x->w;
        in[i].logits = x->logits;
        in[i].route_scaling = x->route_scaling;
    }
    return nd_stage_rec_from_inputs(b->stage, b->layer, in, b->n_in, rec, e);
}
