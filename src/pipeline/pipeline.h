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

#include "trace/trace.h"
#include "ckpt/ckpt.h"

enum { ND_MODES_ISOLATED = 1, ND_MODES_CHAINED = 2, ND_MODES_BOTH = 3 };

/* What `repro` needs of one stage: its definition, its reference inputs and the checkpoint
 * tensors it reads (canonical names; fused shards included). Host memory, valid during the call. */
/* a routed-expert stage of a 384-expert layer can read 3 projections x 4 tensors of every picked expert */
#define ND_CAPTURE_MAX_TENSORS 4096
typedef struct nd_capture_info {
    const char *stage_name, *op;
    int layer;
    char stage_yaml[2048];         /* the stage definition, {L} resolved, as one YAML flow mapping */
    int n_in;
    const char *in_names[8];
    const float *in_host[8];
    int64_t in_rows[8], in_cols[8];
    int n_tensors;
    const char *tensor_names[ND_CAPTURE_MAX_TENSORS];  /* canonical names */
    const nd_tview *tensors[ND_CAPTURE_MAX_TENSORS];
} nd_capture_info;
typedef int (*nd_capture_fn)(void *user, const nd_capture_info *ci, nd_err *e);

typedef struct nd_trace_opts {
    const char *ckpt_dir;
    const char *recipe;         /* name or file; NULL: from config.json model_type */
    const char *stack;          /* stack profile name (default "exact") */
    const char *ref_ckpt;       /* --reference-checkpoint or NULL */
    const char *out_path;       /* trace file, NULL: no file */
    const char *backend;        /* "auto", "cpu", "cuda" */
    int device;
    const int64_t *tokens;
    int64_t ntok;
    int layer_lo, layer_hi;     /* inclusive; layer_hi < 0: all */
    int modes;                  /* ND_MODES_* */
    int dump_tensors;
    const char *const *overrides;
    int n_overrides;
    int progress;               /* progress bar on stderr */
    /* repro: stop after capturing this stage (its reference inputs and tensors) */
    const char *capture_stage;
    nd_capture_fn capture;
    void *capture_user;
    /* bisect: stages whose production path runs the reference math instead */
    const char *const *ref_only;
    int n_ref_only;
    /* captured activations from a real serving stack (safetensors, tensors named after stages or
     * modules; `<name>.input` optional): compared with the reference path as rows of mode
     * "captured" */
    const char *prod_dump;
    int no_probes;              /* benchmark baseline: run both paths and modes, measure nothing */
    int ep;                     /* expert parallelism simulated in one process (contiguous E/N split) */
    /* numerics of the reference path (--ref-numerics): NULL or "fp32" = SPEC §4 (exact dequantized
     * weights, FP32 math, BF16 per stage output); "transformers" = also the BF16 roundings
     * transformers' eager forward of a BF16 model takes inside stages (docs/conformance.md) */
    const char *ref_numerics;
} nd_trace_opts;

typedef struct nd_trace_result {
    nd_row *rows;
    int64_t nrows;
    nd_trace_summary summary;
    char recipe[64], stack[32], backend[16], device[128], format[32];
    char warning[256];          /* e.g. an override that matched nothing */
    int64_t weight_bytes;       /* checkpoint bytes the run uploaded (each touched tensor, per use) */
    double upload_s;            /* wall time of those uploads (reading the mapping + copy to the backend) */
    int n_layers;               /* the model's layer count (config) */
    double gemm_flops_fp32;     /* GEMM work of the linear stages: FP32 (reference) */
    double gemm_flops_bf16;     /* and exact-product (BF16 tensor-core) GEMMs */
    double elapsed_s;           /* wall time of the replay (after opening the checkpoint) */
} nd_trace_result;

/* Replay the recipe over the checkpoint and diagnose. Returns 0 when the run completed (a
 * divergence is reported in res->summary, not as an error), else an exit code. */
int nd_pipeline_trace(const nd_trace_opts *o, nd_trace_result *res, nd_err *e);
void nd_trace_result_free(nd_trace_result *res);

#endif
