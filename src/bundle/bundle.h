/* bundle.h — a repro bundle: one stage of a trace, self-contained (docs/repro.md).
 *
 * `repro` fills an nd_bundle from a pipeline capture and writes it as one small HDF5 file
 * (schema "nvfp4dbg-bundle/1", written by src/trace/bundle_h5.c); `replay` reads it back,
 * materialises a temporary checkpoint and recipe from it (bundle_ckpt.c) and reruns the stage. */
#ifndef ND_BUNDLE_H
#define ND_BUNDLE_H

#include <stddef.h>
#include <stdint.h>
#include "util/err.h"
#include "ckpt/ckpt.h"
#include "trace/trace.h"

#include "trace/bundle_file.h" /* nd_bundle, its reader and writer */


/* Read a whole small text file (config.json, a YAML profile) into a malloc'd string.
 * Returns 0, 1 when the file does not exist, or an nd_exit code. */
int nd_bundle_slurp(const char *path, char **out, nd_err *e);

/* repro: the nd_trace_opts.capture callback; user is the nd_bundle to fill (stage, its
 * definition, reference inputs and tensors; copies, the capture's memory is not kept). */
struct nd_capture_info;
int nd_bundle_capture_cb(void *user, const struct nd_capture_info *ci, nd_err *e);

/* replay: a temporary checkpoint folder (config.json, hf_quant_config.json, model.safetensors
 * with the bundled tensors), a one-stage recipe (recipe.yaml) and the stack profile (stack.yaml).
 * dir receives the folder's path. */
int nd_bundle_materialise(const nd_bundle *b, char *dir, size_t cap, nd_err *e);
/* replay: the single-stage record of the bundle's stage (pipeline.h nd_stage_rec_from_inputs):
 * its inputs with the routing decisions they carry. */
struct nd_stage_rec;
int nd_bundle_stage_rec(const nd_bundle *b, struct nd_stage_rec **rec, nd_err *e);
/* Remove what nd_bundle_materialise wrote. */
void nd_bundle_cleanup(const char *dir);

#endif
