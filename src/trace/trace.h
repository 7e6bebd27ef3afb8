/* trace.h — the HDF5 trace (SPEC §6, schema "nvfp4dbg-trace/1"). The only code that speaks HDF5
 * lives in src/trace/. The writer flushes after every stage, so a killed run leaves a readable
 * file holding every stage that finished; /summary status stays "incomplete" until
 * nd_trace_finish() runs (an addition to SPEC §6's ok/diverged/error, so that compare can refuse
 * a partial trace). */
#ifndef ND_TRACE_H
#define ND_TRACE_H

#include <stdint.h>
#include <string.h>
#include "util/err.h"

#define ND_TRACE_SCHEMA "nvfp4dbg-trace/1"
#define ND_NAME_LEN 96
/* a stored command (the next command, the applied one): a checkpoint path and an --out of PATH_MAX
 * each, shell-quoted, with the overrides */
#define ND_CMD_LEN 12288
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
    double nll_ref, nll_prod; /* head: mean negative log-likelihood (nats) of each next prompt token on
                               * the reference and production paths (exp: the prompt's perplexity); NaN else */
    double weight_rel_l2_swap;/* --reference-checkpoint: weight error with every byte's nibbles swapped */
    int64_t in_nonfinite;     /* NaN/Inf count of the stage's input on this row's path */
    char finding[ND_VERDICT_LEN]; /* static finding on the stage's module ("" when none): a cause code */
} nd_row;

/* A row with nothing measured: counts 0, every figure that may not apply NaN, worst_block -1. */
void nd_row_init(nd_row *f);

/* A row's verdict: "ok"; "drift", a chained row whose figures moved with the error carried from
 * earlier stages (router picks flipped by that error), expected on deep models and naming nothing;
 * or a cause code: the row diverged. */
#define ND_VERDICT_DRIFT "drift"
static inline int nd_verdict_bad(const char *v) { return strcmp(v, "ok") != 0 && strcmp(v, ND_VERDICT_DRIFT) != 0; }

typedef struct nd_trace_meta {
    const char *tool_version, *checkpoint, *checkpoint_format, *recipe, *stack, *backend,
        *device, *modes;
    const char *overrides;   /* the run's --override arguments, ';'-separated ("" when none) */
    const char *ref_numerics;/* reference-path numerics ("fp32", "fp32-exact", "transformers"); NULL: "fp32" */
    const char *prompt;      /* --prompt text the tokens came from (NULL: ids given as ids): /prompt */
    const char *prompt_chat; /* the chat format applied to it (NULL: none): attribute prompt_chat */
    const char *reference_checkpoint; /* --reference-checkpoint (NULL: none): attribute of that name,
                                       * "" when none; the reference path ran that checkpoint's weights */
    const char *recipe_file;  /* the recipe file the run loaded (attribute recipe_file; NULL: "") */
    const char *recipe_fnv;   /* FNV-1a 64 of that file's bytes, 16 hex digits (attribute recipe_fnv1a;
                               * repro checks it names the same recipe) */
    const char *stack_file;   /* the stack profile file the run loaded (attribute stack_file; NULL: "") */
    const char *stack_fnv;    /* FNV-1a 64 of its bytes (attribute stack_fnv1a): repro bundles that profile */
} nd_trace_meta;

typedef struct nd_trace_summary {
    char status[16];          /* "ok", "diverged", "error", "incomplete" */
    char first_divergence[ND_NAME_LEN];
    char first_divergence_mode[ND_MODE_LEN];
    char cause[ND_VERDICT_LEN];
    char message[512];
    /* the diagnosis's evidence (SPEC §7, issue 13; optional on read: older traces lack them) */
    char repair[64];          /* the repair that restored the stage ("" when none did) */
    char evidence[512];       /* how the cause was proven, in words */
    char next_command[ND_CMD_LEN]; /* the options that apply the repair to the whole run */
    double sqnr_before_db, sqnr_after_db, floor_db; /* the stage's SQNR without and with the repair */
    /* trace --apply-repair (issue 36 item 2; optional on read, "" / NaN when not run): the whole
     * model re-run with every repair proven in turn */
    char applied_command[ND_CMD_LEN]; /* the command with all of them */
    char applied_status[16];     /* the status of that run: "ok" = no divergence left */
    char applied_first[ND_NAME_LEN]; /* its first divergence when one is left */
    double kl_before, kl_after, top1_before, top1_after; /* final logits against the reference */
} nd_trace_summary;

/* ---- writer ---- */
typedef struct nd_trace_w nd_trace_w;
/* "<out>.incomplete": where a trace is written until it ends (a name past NAME_MAX is cut). */
int nd_trace_incomplete_path(const char *out, char *buf, size_t cap);
int nd_trace_create(const char *path, const nd_trace_meta *meta, const int64_t *tokens, int64_t ntok,
                    nd_trace_w **out, nd_err *e);
/* Append one row and flush the file. */
int nd_trace_append(nd_trace_w *w, const nd_row *row, nd_err *e);
/* Rewrite row `index` (appended before) with *row: the diagnosis puts the proven cause in the
 * diverged row's verdict (flushed when the trace is finished). */
int nd_trace_set_verdict(nd_trace_w *w, int64_t index, const nd_row *row, nd_err *e);
/* /tensors/<stage>/<which> (which = "ref" or "prod"), float32, chunked + deflate. */
int nd_trace_put_tensor(nd_trace_w *w, const char *stage, const char *which, const float *data,
                        int ndim, const int64_t *shape, nd_err *e);
/* /routing/<stage>/<which>: int32 [t, k] expert ids picked by a path. */
int nd_trace_put_routing(nd_trace_w *w, const char *stage, const char *which, const int32_t *idx,
                         int64_t t, int64_t k, nd_err *e);
/* Write /summary, close, and move the file onto the target. Also closes on error paths when
 * summary is NULL (status stays "incomplete" then). Until then the file is at the target's
 * .incomplete name (nd_trace_incomplete_path): a killed run leaves it there, the target untouched;
 * a write or close that fails leaves it there too, and so does a run that ended in an error
 * (status "error" or no summary) where a file is already at the target: an earlier good trace is
 * never replaced by a failed run's (with nothing there, the failed run's trace takes the name). */
int nd_trace_finish(nd_trace_w *w, const nd_trace_summary *summary, nd_err *e);
/* A trace run to `path` that failed before it began its trace (bad input, exit 2/3) while an
 * earlier trace is at `path`: an OUT.incomplete with no rows, status "error" and `message`, so that
 * compare refuses the earlier trace as this run's (a CI job that ignores trace's exit code). The
 * earlier trace is kept. */
int nd_trace_mark_failed(const char *path, const nd_trace_meta *meta, const char *message, nd_err *e);

/* ---- reader ---- */
typedef struct nd_trace {
    char schema[64], tool_version[32], checkpoint[4096], checkpoint_format[32], recipe[64], stack[64],
        backend[32], device[128], modes[32], created_utc[32];
    char overrides[2048];    /* optional attribute (older traces: empty) */
    char *prompt;            /* /prompt, the text the tokens came from (NULL: none) */
    char prompt_chat[32];    /* the chat format applied to it ("" none) */
    char reference_checkpoint[4096]; /* optional attribute: --reference-checkpoint ("" none or older traces) */
    char ref_numerics[32];   /* optional attribute: the reference path's numerics ("" older traces: fp32) */
    char recipe_file[4096];  /* optional attributes: the recipe file the run loaded and the FNV-1a 64 of */
    char recipe_fnv1a[32];   /* its bytes ("" older traces) */
    char stack_file[4096];   /* optional: the stack profile file the run loaded and the FNV-1a 64 of */
    char stack_fnv1a[32];    /* its bytes ("" older traces) */
    int64_t ntokens;
    int64_t *tokens;
    int64_t nrows;
    nd_row *rows;
    nd_trace_summary summary;
    int has_summary;
} nd_trace;

/* Reads and validates (schema string, field set). Corrupt or foreign files: exit 2 naming the file. */
int nd_trace_read(const char *path, nd_trace **out, nd_err *e);
/* 1 when path is an earlier trace (or bundle) of this tool: a new output may replace it without
 * --force (util/outfile.h). */
int nd_trace_is_ours(const char *path);
int nd_bundle_is_ours(const char *path);
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
/* The same for a caller that has read (and so validated) the trace at path as `read`: the file is
 * not read whole again for each stage (report reads every router's). */
/* Does the trace hold /routing/<stage>/<which>? (traces written before /routing existed have none) */
int nd_trace_has_routing(const char *path, const char *stage, const char *which);
int nd_trace_read_routing_of(const char *path, const nd_trace *read, const char *stage, const char *which, int32_t **idx,
                             int64_t *t, int64_t *k, nd_err *e);

/* ---- compare: the CI gate (additions; no HDF5 below this line, it works on nd_trace) ---- */
/* The figures compare checks against a tolerance, in the order of nd_figure_name(). */
enum { ND_NFIG = 13 };
const char *nd_figure_name(int fig);
int nd_figure_index(const char *name);          /* -1 when unknown */
double nd_figure_value(const nd_row *r, int fig);

/* A figure passes when |run - golden| <= abs + rel * |golden|; NaN equals NaN. */
typedef struct nd_tol { double abs, rel; } nd_tol;
typedef struct nd_tol_rule {
    int is_op;                    /* 1: `op: NAME` rule; 0: stage-name glob (fnmatch) */
    char key[2 * ND_NAME_LEN];    /* the op kind or the pattern */
    unsigned char has_abs[ND_NFIG], has_rel[ND_NFIG];
    nd_tol tol[ND_NFIG];
    int line;                     /* where the rule is in its file (1-based), for messages */
} nd_tol_rule;
typedef struct nd_tolerances {
    nd_tol def[ND_NFIG];
    int nrules;
    nd_tol_rule *rules;
} nd_tolerances;

/* The built-in defaults (recipes/tolerances.yaml documents the same numbers). */
void nd_tolerances_default(nd_tolerances *t);
/* Defaults overridden by a YAML file; malformed files: exit 2 with "FILE:LINE: problem". */
int nd_tolerances_load(const char *path, nd_tolerances *t, nd_err *e);
void nd_tolerances_free(nd_tolerances *t);
/* Effective tolerance: default, then matching op rules, then matching stage patterns, each in
 * file order, a later rule overriding only the keys it names. */
nd_tol nd_tolerance_for(const nd_tolerances *t, const char *stage, const char *op, int fig);
/* The same, setting used[i] for every rule i that applied (used: nrules entries, or NULL). */
nd_tol nd_tolerance_for_ex(const nd_tolerances *t, const char *stage, const char *op, int fig, unsigned char *used);

/* Two traces are comparable (compare, report --against) only when made from the same tokens and
 * recipe, both hold stage rows, and their rows cover the same number of layers: otherwise every
 * figure differs (or nothing is gated) and their differences say nothing. Exit 2 naming both files
 * and the first difference. */
int nd_trace_comparable(const char *run_path, const nd_trace *run, const char *other_path, const nd_trace *other,
                        nd_err *e);

/* The gate's golden holds every stage of the run (compare only; report --against shows extra
 * stages): a golden cut down, or made by another version or recipe, gates part of the run and
 * passes the rest unseen. Exit 2 naming the golden, how many of the run's stages it lacks and the
 * first of them. */
int nd_trace_golden_covers(const char *run_path, const nd_trace *run, const char *golden_path, const nd_trace *golden,
                           nd_err *e);

enum nd_cmp_kind {
    ND_CMP_FIGURE,     /* a figure outside its tolerance (or NaN on one side only) */
    ND_CMP_NONFINITE,  /* NaN/Inf count in the run where the golden has none: always a regression */
    ND_CMP_COUNT,      /* any other change of a NaN/Inf count */
    ND_CMP_FIELD,      /* op, layer, quantized or numel changed */
    ND_CMP_VERDICT,    /* the stage's verdict changed */
    ND_CMP_MISSING,    /* in the golden, not in the run: a regression */
    ND_CMP_EXTRA,      /* in the run, not in the golden: reported, not a regression */
    ND_CMP_SUMMARY,    /* /summary status, first divergence or cause changed */
};
typedef struct nd_cmp_item {
    int kind, regression;
    char stage[ND_NAME_LEN], mode[ND_MODE_LEN], what[32];
    double golden, run, delta, tol;        /* numbers (NaN where the item is not numeric) */
    char golden_s[160], run_s[160];        /* text for non-numeric items */
    double severity;                       /* |delta| / tol, INFINITY for hard regressions */
    int64_t order;                         /* position in execution order (golden, else run) */
} nd_cmp_item;
typedef struct nd_cmp_result {
    int64_t nstages;                       /* golden rows compared */
    int64_t nmatched;                      /* rows present in both traces, compared figure by figure */
    int64_t nfigures;                      /* figure comparisons made (nmatched x figures) */
    int64_t nnames;                        /* distinct stage names among the golden rows */
    int nrules, nrules_used;               /* tolerance rules given, and those that matched a compared figure */
    int nitems, nregressions, nmissing, nextra;
    nd_cmp_item *items;                    /* sorted: regressions worst first, then the rest */
    int first;                             /* index in items of the earliest regression, -1 none */
    int first_unused;                      /* index in the tolerances of the first rule that applied nowhere, -1 none */
} nd_cmp_result;
int nd_trace_compare(const nd_trace *run, const nd_trace *golden, const nd_tolerances *tol,
                     nd_cmp_result *out, nd_err *e);
void nd_cmp_result_free(nd_cmp_result *r);

#endif
