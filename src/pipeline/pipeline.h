/* pipeline.h — runs a recipe's stages on the reference and production paths. */
#ifndef ND_PIPELINE_H
#define ND_PIPELINE_H

#include <stdint.h>
#include "util/err.h"

/* Calibration (used by synth, as a real quantizer calibrates): run the reference path of the
 * recipe over the checkpoint in ckpt_dir (unquantized checkpoints allowed) on `tokens`, and call
 * cb once per linear module the recipe applies with the amax of that module's input over all
 * tokens that reached it. Routed experts that no token picked get no call. recipe may be NULL
 * (chosen from config.json). */
typedef void (*nd_amax_cb)(void *user, const char *module_path, double amax);
int nd_pipeline_calibrate(const char *ckpt_dir, const char *recipe, const int64_t *tokens, int64_t ntok,
                          nd_amax_cb cb, void *user, nd_err *e);

#endif
