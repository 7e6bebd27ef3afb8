/* bundle_file.h — a repro bundle as data and as a file (schema "nvfp4dbg-bundle/1"): the struct
 * `repro` fills and `replay` reads, and its HDF5 reader and writer (bundle_h5.c; src/trace holds
 * all HDF5 code). What fills a bundle from a run and materialises it as a checkpoint is above the
 * pipeline, in src/bundle (bundle.h). */
#ifndef ND_BUNDLE_FILE_H
#define ND_BUNDLE_FILE_H

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

/* A reference input of the stage, by its environment name in the recipe, with the routing decision
 * it carries (a router's or an indexer's output: ids and weights per row, the router logits). */
typedef struct nd_bundle_input {
    char name[32];
    int64_t rows, cols;
    float *data;                 /* rows * cols (malloc'd) */
    int k;                       /* ids per row; 0: no routing decision (then the three below are NULL) */
    int32_t *idx;                /* [rows, k] (malloc'd) */
    float *w;                    /* [rows, k] or NULL */
    float *logits;               /* rows * cols or NULL */
    float route_scaling;
} nd_bundle_input;

typedef struct nd_bundle {
    char stage[ND_NAME_LEN], op[32];
    int layer;                                   /* -1: a prologue/epilogue stage */
    char tool_version[32], checkpoint[4096], checkpoint_format[32], recipe[64], stack[64], backend[32];
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
/* Free the inputs (with their routing) and the tensors, leaving none. */
void nd_bundle_free_data(nd_bundle *b);

#endif
