/* trace.h — the HDF5 trace (SPEC §6, schema "nvfp4dbg-trace/1"). The only code that speaks HDF5
 * lives in src/trace/. The writer flushes after every stage, so a killed run leaves a readable
 * file holding every stage that finished; /summary status stays "incomplete" until
 * nd_trace_finish() runs (an addition to SPEC §6's ok/diverged/error, so that compare can refuse
 * a partial trace). */
#ifndef ND_TRACE_H
#define ND_TRACE_H

#include <stdint.h>
#include "util/err.h"

#define ND_TRACE_SCHEMA "nvfp4dbg-trace/1"
#define ND_NAME_LEN 96
#define ND_OP_LEN 24
#define ND_MODE_LEN 12
#define ND_VERDICT_LEN 32

/* One row of /stages. The first block of fields is exactly SPEC §6; the rest are additions
 * (readable the same way with pandas). */
typedef struct nd_row {
    int32_t index, layer;
    char name[ND_NAME_LEN], op[ND_OP_LEN], mode[ND_MODE_LEN];
    uint8_t quantized;
    int64_t numel;
    double ref_amax, prod_amax;
    int64_t ref_nan, prod_nan, ref_inf, prod_inf;
    double cosine, rel_l2, sqnr_db, max_abs_err, sat_frac, zero_block_frac, scale_ratio, weight_rel_l2;
    char verdict[ND_VERDICT_LEN];
    /* additions */
    double floor_sqnr_db;     /* SQNR that NVFP4 quantization of this stage's operands explains */
    double scale_mult;        /* quantizer multiplier used on the production path (NaN if none) */
    double alpha;             /* GEMM alpha used on the production path (NaN if none) */
    int64_t worst_block;      /* index of the worst 16-element block (-1 when none) */
    double worst_block_rel;   /* its error energy / its reference energy */
    double topk_agree;        /* router: share of (token, slot) picks both paths agree on; NaN else */
    double kl_div;            /* head: mean KL(ref || prod) of next-token distributions; NaN else */
    double top1_agree;        /* head: share of tokens whose argmax agrees; NaN else */
} nd_row;

typedef struct nd_trace_meta {
    const char *tool_version, *checkpoint, *checkpoint_format, *recipe, *stack, *backend,
        *device, *modes;
} nd_trace_meta;

typedef struct nd_trace_summary {
    char status[16];          /* "ok", "diverged", "error", "incomplete" */
    char first_divergence[ND_NAME_LEN];
    char first_divergence_mode[ND_MODE_LEN];
    char cause[ND_VERDICT_LEN];
    char message[512];
} nd_trace_summary;

/* ---- writer ---- */
typedef struct nd_trace_w nd_trace_w;
int nd_trace_create(const char *path, const nd_trace_meta *meta, const int64_t *tokens, int64_t ntok,
                    nd_trace_w **out, nd_err *e);
/* Append one row and flush the file. */
int nd_trace_append(nd_trace_w *w, const nd_row *row, nd_err *e);
/* /tensors/<stage>/<which> (which = "ref" or "prod"), float32, chunked + deflate. */
int nd_trace_put_tensor(nd_trace_w *w, const char *stage, const char *which, const float *data,
                        int ndim, const int64_t *shape, nd_err *e);
/* /routing/<stage>/<which>: int32 [t, k] expert ids picked by a path. */
int nd_trace_put_routing(nd_trace_w *w, const char *stage, const char *which, const int32_t *idx,
                         int64_t t, int64_t k, nd_err *e);
/* Write /summary and close. Also closes on error paths when summary is NULL (status stays
 * "incomplete" then). */
int nd_trace_finish(nd_trace_w *w, const nd_trace_summary *summary, nd_err *e);

/* ---- reader ---- */
typedef struct nd_trace {
    char schema[64], tool_version[32], checkpoint[512], checkpoint_format[32], recipe[64], stack[64],
        backend[32], device[128], modes[32], created_utc[32];
    int64_t ntokens;
    int64_t *tokens;
    int64_t nrows;
    nd_row *rows;
    nd_trace_summary summary;
    int has_summary;
} nd_trace;

/* Reads and validates (schema string, field set). Corrupt or foreign files: exit 2 naming the file. */
int nd_trace_read(const char *path, nd_trace **out, nd_err *e);
void nd_trace_free(nd_trace *t);

/* ---- tensors and routing (additions: for repro, report and tests) ---- */
#define ND_TRACE_MAXDIM 8
/* Read /tensors/<stage>/<which> into a malloc'd float array the caller frees; shape gets ndim
 * entries. Exit 2 when the trace has no such tensor. */
int nd_trace_read_tensor(const char *path, const char *stage, const char *which, float **data, int *ndim,
                         int64_t shape[ND_TRACE_MAXDIM], nd_err *e);
/* Read /routing/<stage>/<which> (int32 [t, k]) into a malloc'd array the caller frees. */
int nd_trace_read_routing(const char *path, const char *stage, const char *which, int32_t **idx,
                          int64_t *t, int64_t *k, nd_err *e);

#endif
