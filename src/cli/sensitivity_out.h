/* sensitivity_out.h — what `nvfp4dbg sensitivity` prints and writes (sensitivity_out.c): the
 * ranking as text or JSON, and the chosen set as an llmcompressor recipe, a ModelOpt quant_cfg
 * patch and a compressed-tensors ignore patch. */
#ifndef ND_SENSITIVITY_OUT_H
#define ND_SENSITIVITY_OUT_H
#include <jansson.h>
#include <stdint.h>
#include "util/err.h"

enum { ND_SENS_MODULE, ND_SENS_LAYER, ND_SENS_CLASS };
/* The unit a stage (or a module path without its "model." prefix) belongs to at granularity g: the
 * stage itself, "layer N", or the name with its layer index taken out and other numbers (expert
 * indices) made "*" (mlp.experts.*.down_proj). */
void nd_sens_unit_key(const char *stage, int g, char *out, size_t cap);

typedef struct nd_sens_unit {
    const char *key;            /* "layer 3", "self_attn.q_proj", a stage name */
    int n;                      /* its quantized linears (stage names in stages[]) */
    double kl_ref, top1_ref;    /* the final logits with the unit alone on the reference path */
    double kl_alone, top1_alone;/* ... with the unit alone NVFP4 in an otherwise reference model */
    const char **stages;
    double proxy;               /* --screen's figure: Σ rel_l2² of its isolated rows */
    int screened_out;           /* no exact runs (kl_* NaN) */
} nd_sens_unit;

typedef struct nd_sens_set {
    int n;                      /* the first n units of the ranking */
    double kl, top1;            /* measured with them together on the reference path */
    double predicted;           /* KL_all minus their gains (no interaction assumed) */
    double budget;              /* --budget-kl, NaN with --keep */
} nd_sens_set;

typedef struct nd_sens_report {
    const char *ckpt, *granularity;
    const char *recipe;         /* --recipe, or NULL (the one matching the model_type) */
    int gran;                   /* ND_SENS_* */
    int ckpt_linears;           /* quantized linears in the checkpoint (run or not by these tokens) */
    int set_linears;            /* ... of them in the set's units (after nd_sens_set_modules) */
    int64_t ntok;
    double kl_all, top1_all;    /* every linear NVFP4 */
    int n_linears, traces;
    double elapsed_s, max_rss_mb;
    const nd_sens_unit *units;  /* ranked: largest gain first */
    int nu;
    const nd_sens_set *set;     /* NULL without --budget-kl / --keep */
    int screen;                 /* --screen K when it left units out, else 0 */
} nd_sens_report;

/* --recipe-out DIR: refused (exit 2) unless it is new or an empty folder outside every input folder. */
int nd_sens_out_check(const char *dir, const char *const *inputs, int n_inputs, nd_err *e);
/* the files --recipe-out writes, in this order */
extern const char *const ND_SENS_RECIPE_FILES[3];
/* --verify DIR|FILE (sensitivity_verify.c): the kept set a --recipe-out wrote, run on this
 * checkpoint against every linear NVFP4; 1 when the budget it records is not met. */
struct nd_trace_opts;
int nd_sens_verify(struct nd_trace_opts *o, const char *arg, int json, nd_err *e);
/* The checkpoint's quantized linears of the set's units, every one whether these tokens ran it or not
 * (an expert the prompt never routed to is in its layer's and its class's units): a JSON array of
 * module names (caller decrefs); fills r->ckpt_linears and r->set_linears. */
json_t *nd_sens_set_modules(nd_sens_report *r);
/* The set's modules (checkpoint names) written to DIR/llmcompressor-recipe.yaml (libyaml's emitter),
 * DIR/modelopt-quant-cfg.json and DIR/compressed-tensors-ignore.json. */
int nd_sens_write_recipes(const char *dir, nd_sens_report *r, nd_err *e);
void nd_sens_print_text(const nd_sens_report *r, const char *recipe_out);
void nd_sens_print_json(const nd_sens_report *r, const char *recipe_out);
#endif
