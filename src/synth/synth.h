/* synth.h — `nvfp4dbg synth`: write a synthetic checkpoint in a real on-disk format.
 *
 * nd_synth_run writes, for one model family and size:
 *   OUTDIR/original/   the unquantized model (BF16 weights, config.json without quantization_config)
 *   OUTDIR/            the same model quantized to NVFP4 (compressed-tensors or ModelOpt), with
 *                      input global scales calibrated on the original through the reference path
 *   OUTDIR.faults.json the faults injected into OUTDIR (a list, empty for a clean checkpoint);
 *                      next to OUTDIR, not inside it, so nothing that reads the checkpoint sees it.
 * Weights come from a seeded generator (docs/synth.md) so any run can be regenerated exactly.
 */
#ifndef ND_SYNTH_H
#define ND_SYNTH_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"

typedef enum nd_synth_size { ND_SYNTH_TINY = 0, ND_SYNTH_SMALL, ND_SYNTH_FULL } nd_synth_size;
typedef enum nd_synth_format { ND_SYNTH_CT = 0, ND_SYNTH_MODELOPT } nd_synth_format;

/* Calibration hook: report the input amax of each linear module by calling
 * cb(user, module_path, amax). nd_synth_pipeline_calibrate is the real one (the reference path
 * of the recipe, nd_pipeline_calibrate); tests may hand in their own. */
typedef void (*nd_synth_amax_cb)(void *user, const char *module_path, double amax);
typedef int (*nd_synth_calib_fn)(void *calib_user, const char *ckpt_dir, const char *recipe,
                                 const int64_t *tokens, int64_t ntok, nd_synth_amax_cb cb, void *user,
                                 nd_err *e);

typedef struct nd_synth_opts {
    const char *outdir;
    const char *recipe;         /* a recipe with a `synth:` section (nd_synth_recipe_names), or its file */
    nd_synth_size size;
    nd_synth_format format;
    uint64_t seed;
    int layers;                 /* 0: the size's default */
    int experts;                /* routed experts per MoE layer (DeepSeek families); 0: the size's
                                 * default. A full-size layer with 48 = one EP rank's share of 384
                                 * fits a single GPU machine's disk with its original */
    const char *const *injects; /* "FAULT[=VALUE]@MODULE" */
    int n_injects;
    nd_synth_calib_fn calibrate;/* required: usually nd_synth_pipeline_calibrate */
    void *calib_user;
    unsigned long long shard_bytes; /* 0: 1 GiB (the HF convention); tests use small values */
    int unequal_fused;          /* fused shards keep each their own weight global scale (calibrated on
                                 * their own weight), as writers that calibrate shards separately do;
                                 * 0: one shared value per fused group (the max amax), as vLLM wants */
    int force;                  /* replace an earlier synth output in outdir (synth_outdir.h) */
} nd_synth_opts;

struct nd_recipe;
/* Load the recipe NAME (or file) that synth builds: one with a `synth:` section. 0, or 2 naming the
 * recipes synth knows. */
int nd_synth_recipe_load(const char *name, struct nd_recipe **out, nd_err *e);
/* The names of the recipes synth knows, ", "-separated and sorted, into buf. */
void nd_synth_recipe_names(char *buf, size_t cap);
int nd_synth_size_from_name(const char *name, nd_synth_size *out, nd_err *e);
int nd_synth_format_from_name(const char *name, nd_synth_format *out, nd_err *e);

/* Write the checkpoint, its original and the fault side file. 0, 2 (bad options, unknown fault
 * or module), or 3 (I/O or calibration failure). */
int nd_synth_run(const nd_synth_opts *o, nd_err *e);

/* nd_pipeline_calibrate as an nd_synth_calib_fn (calib_user unused). */
int nd_synth_pipeline_calibrate(void *calib_user, const char *ckpt_dir, const char *recipe,
                                const int64_t *tokens, int64_t ntok, nd_synth_amax_cb cb, void *user,
                                nd_err *e);

/* The calibration token ids synth uses for a seed and vocabulary (n ids). */
void nd_synth_calib_tokens(uint64_t seed, int64_t vocab, int64_t *out, int n);
/* How many calibration tokens a size uses: 256 for tiny and small (the tails of SwiGLU products
 * need that many for a 16-token prompt to stay inside the calibrated range), 64 for full (the
 * reference path runs on the CPU). */
int nd_synth_calib_count(nd_synth_size size);
#define ND_SYNTH_CALIB_MAX 256

#endif
