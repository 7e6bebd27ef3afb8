/* synth_kv.h — the FP8 KV-cache scale faults of `synth OUTDIR --from CKPT` (issue 18,
 * kv_scale_ignored), on an attention module MODULE = layers.L.self_attn:
 *   kv-scales          add FP8 KV-cache scales to a checkpoint that has none: k_scale = amax(K after
 *                      RoPE) / 448 and v_scale = amax(V) / 448 over the built-in prompt, what
 *                      `trace` feeds (MLA: one k_scale for the latent row [kv_c_normed, k_pe]),
 *                      under the format's names (compressed-tensors MODULE.k_scale / .v_scale [1];
 *                      ModelOpt MODULE.k_proj.k_scale / .v_proj.v_scale, scalars), and announce the
 *                      FP8 KV cache in the config (kv_cache_scheme / kv_cache_quant_algo: FP8)
 *   kv-scale-mul=F     the module's KV scales times F
 *   kv-scale-inverted  the module's KV scales replaced by their reciprocals
 * Faults apply in command-line order; the last two need scales (the checkpoint's or kv-scales'). */
#ifndef ND_SYNTH_KV_H
#define ND_SYNTH_KV_H
#include "ckpt/ckpt.h"
#include "synth/synth_faults.h"

#define SY_KV_MAX 64

typedef struct sy_kv_tensor {
    char name[320];
    float value;          /* the value to write */
    const nd_tview *old;  /* the checkpoint's tensor it replaces, NULL: a new tensor */
    int scalar;           /* new tensor: 0-dim (ModelOpt) rather than [1] (compressed-tensors) */
} sy_kv_tensor;

typedef struct sy_kv_edits {
    sy_kv_tensor t[SY_KV_MAX];
    int n;
    int announce;         /* kv-scales ran: say so in the config */
} sy_kv_edits;

/* 1 for kv-scales, kv-scale-mul, kv-scale-inverted. */
int sy_kv_fault(sy_fault_kind k);
/* MODULE (a stage name, "layers.0.self_attn") of a KV fault: the attention module of a layer of
 * ck, written to attn ("model.layers.0.self_attn"). Exit 2 otherwise. */
int sy_kv_module(const nd_ckpt *ck, const char *spec, const char *mod, char *attn, size_t cap, nd_err *e);
/* Apply the KV faults among fs (their module field holds the attention module) in order; the
 * checkpoint folder src is calibrated once when kv-scales is among them. */
int sy_kv_plan(const nd_ckpt *ck, const char *src, sy_fault *fs, int n, sy_kv_edits *out, nd_err *e);
/* The replacement bytes of tensor v (its F32 value), or NULL when v is not edited. */
const void *sy_kv_bytes_for(const sy_kv_edits *k, const nd_tview *v);
/* Write the new tensors. */
int sy_kv_add_new(const sy_kv_edits *k, nd_st_writer *w, nd_err *e);
/* Announce the FP8 KV cache in outdir's config (after the files were copied there). */
int sy_kv_announce(const sy_kv_edits *k, const nd_ckpt *ck, const char *outdir, nd_err *e);
#endif
