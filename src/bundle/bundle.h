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

#define ND_BUNDLE_SCHEMA "nvfp4dbg-bundle/1"
#define ND_BUNDLE_MAX_IN 8
#define ND_BUNDLE_MAX_TENSORS 4096 /* = ND_CAPTURE_MAX_TENSORS: every tensor a routed-expert stage reads */
#define ND_BUNDLE_MAX_ROWS 4

/* A checkpoint tensor in its on-disk form, under its canonical name. */
typedef struct nd_bundle_tensor {
    char name[200];
    char dtype[16];              /* safetensors dtype string ("U8", "F8_E4M3", "F32", ...) */
    int ndim;
    int64_t shape[ND_MAX_DIMS];
    void *data;                  /* nbytes raw bytes (malloc'd) */
    size_t nbytes;
} nd_bundle_tensor;

/* A reference input of the stage, by its environment name in the recipe. */
typedef struct nd_bundle_input {
    char name[32];
    int64_t rows, cols;
    float *data;                 /* rows * cols (malloc'd) */
} nd_bundle_input;

typedef struct nd_bundle {
    char stage[ND_NAME_LEN], op[32];
    int layer;                                   /* -1: a prologue/epilogue stage */
    char tool_version[32], checkpoint[512], checkpoint_format[32], recipe[64], stack[64], backend[32];
    char overrides[2048];                        /* ';'-separated NAME=VALUE, as in the trace */
    double th_min_cosine, th_min_sqnr_db, th_floor_margin_db, th_chained_min_cosine; /* the recipe's */
    /* texts (malloc'd, NULL when absent) */
    char *stage_yaml;            /* the stage as one YAML flow mapping ({L} resolved) */
    char *stack_yaml;            /* the serving-stack profile file */
    char *recipe_yaml;           /* the whole recipe file, for the reader (replay uses stage_yaml) */
    char *config_json;           /* the checkpoint's config.json */
    char *hf_quant_config_json;  /* ModelOpt hf_quant_config.json, when the checkpoint has one */
    int64_t ntok;
    int64_t *tokens;
    int n_in;
    nd_bundle_input in[ND_BUNDLE_MAX_IN];
    int n_tensors;
    nd_bundle_tensor tensors[ND_BUNDLE_MAX_TENSORS];
    int n_rows;
    nd_row rows[ND_BUNDLE_MAX_ROWS];             /* the stage's rows in the original trace */
} nd_bundle;

/* Write (PATH.tmp, then rename) / read and validate. Foreign, truncated or inconsistent files:
 * exit 2 naming the file. */
int nd_bundle_write(const char *path, const nd_bundle *b, nd_err *e);
int nd_bundle_read(const char *path, nd_bundle **out, nd_err *e);
void nd_bundle_free(nd_bundle *b);

/* Read a whole small text file (config.json, a YAML profile) into a malloc'd string.
 * Returns 0, 1 when the file does not exist, or an nd_exit code. */
int nd_bundle_slurp(const char *path, char **out, nd_err *e);

/* repro: the nd_trace_opts.capture callback; user is the nd_bundle to fill (stage, its
 * definition, reference inputs and tensors; copies, the capture's memory is not kept). */
struct nd_capture_info;
int nd_bundle_capture_cb(void *user, const struct nd_capture_info *ci, nd_err *e);

/* replay: a temporary checkpoint folder (config.json, hf_quant_config.json, model.safetensors
 * with the bundled tensors and the inputs as F32 `nvfp4dbg.input.<name>`), a one-stage recipe
 * (recipe.yaml) and the stack profile (stack.yaml). dir receives the folder's path. */
int nd_bundle_materialise(const nd_bundle *b, char *dir, size_t cap, nd_err *e);
/* Remove what nd_bundle_materialise wrote. */
void nd_bundle_cleanup(const char *dir);

#endif
