/* synth_static.h — the static faults of `synth OUTDIR --from CKPT` (issue 18): the quantization
 * config, the tensor names and the precision of a module changed as real exporters get them wrong.
 * MODULE is a stage name ("layers.0.self_attn.o_proj"), looked up as model.MODULE, then as given.
 *   config-ignore         the module (quantized) is added to the config's ignore list
 *                         (quantization_config.ignore; ModelOpt: also hf_quant_config.json
 *                         exclude_modules): quant_config_mismatch
 *   dequantize            the NVFP4 module stored as its dequantized BF16 weight (MODULE.weight), its
 *                         scales left out, while the config still quantizes it: quant_config_mismatch
 *   scale-renamed         the input scale stored under the other format's name (compressed-tensors
 *                         input_global_scale -> input_scale, ModelOpt input_scale ->
 *                         input_global_scale), same value: scale_not_loaded
 *   weight-scale-renamed  the same for the weight global (weight_global_scale <-> weight_scale_2)
 *   scale-missing-expert  a routed expert's input scale left out while its siblings keep theirs:
 *                         scale_not_loaded
 *   quantize              an unquantized 2-D weight (router gate, lm_head, a linear) quantized to NVFP4
 *                         with its own scales (global 2688/amax, compressed-tensors' rules) under the
 *                         format's names, no input scale, config unchanged: precision_policy_violation
 *                         for the roles that must stay high precision
 *   gate-up-swap          an MLP's or expert's gate_proj and up_proj (w1 and w3) stored under each
 *                         other's names, every tensor of both (MODULE: either one): gate_up_order,
 *                         proven by reading them exchanged (<parent>.gate_up_tensors_swapped=1)
 * (weight-global-scale-mul=F is a value fault of synth_faults.c and works without --from too.) */
#ifndef ND_SYNTH_STATIC_H
#define ND_SYNTH_STATIC_H
#include "ckpt/ckpt.h"
#include "synth/synth_faults.h"

typedef struct sy_static_edit {
    const nd_tview *src;         /* the checkpoint's tensor replaced or dropped; NULL: a new tensor */
    int drop;                    /* leave src out */
    char name[400];
    nd_dtype dtype;
    int ndim;
    int64_t shape[ND_MAX_DIMS];
    const void *data;            /* src->data for a rename, else owned */
    void *owned;
} sy_static_edit;

typedef struct sy_static {
    sy_static_edit *v;
    int n, cap;
    char (*ignore)[300];         /* module paths to add to the ignore lists */
    int n_ignore;
    char (*unignore)[300];       /* module paths whose entries leave the ignore lists */
    int n_unignore;
} sy_static;

/* 1 for the faults above. */
int sy_static_fault(sy_fault_kind k);
/* MODULE (a stage name) -> its path in ck: model.MODULE, also under a multimodal checkpoint's
 * decoder prefix (nd_module_located), else MODULE as given. 1 when ck has it. */
int sy_module_path(const nd_ckpt *ck, const char *mod, char *path, size_t cap);
/* " (did you mean 'M'?)" for the checkpoint module nearest a misspelt one (as the user would type
 * it: without the model. prefix when the user left it out), or "" */
const char *sy_module_hint(const nd_ckpt *ck, const char *mod, char *buf, size_t cap);
/* Plan every static fault among fs on ck (module checks: exit 2 naming the module and why). */
int sy_static_plan(const nd_ckpt *ck, sy_fault *fs, int n, sy_static *st, nd_err *e);
/* The edit of tensor t (renamed, replaced or dropped), or NULL. */
const sy_static_edit *sy_static_for(const sy_static *st, const nd_tview *t);
/* Write the new tensors. */
int sy_static_add_new(const sy_static *st, nd_st_writer *w, nd_err *e);
/* Edit outdir's config.json / hf_quant_config.json (after the files were copied there). */
int sy_static_config(const sy_static *st, const char *outdir, nd_err *e);
void sy_static_free(sy_static *st);

/* weight-global-scale-mul=F on an NVFP4 module's on-disk bytes: the weight global divisor times F
 * (compressed-tensors weight_global_scale * F, ModelOpt weight_scale_2 / F) and the codes and block
 * scales re-quantized from the dequantized weight with it (F < 1 pushes block scales into E4M3
 * subnormals). packed [n, k/2], sf [n, k/16]; *wglobal is the stored value. */
void sy_requant_global(uint8_t *packed, uint8_t *sf, int64_t n, int64_t k, float *wglobal, double F, int modelopt);

#endif
