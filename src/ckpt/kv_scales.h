/* kv_scales.h — FP8 KV-cache scales of a checkpoint (issue 18, kv_scale_ignored).
 *
 * What announces them:
 *   compressed-tensors  config.json quantization_config.kv_cache_scheme
 *                       ({num_bits: 8, type: float, strategy: tensor, ...}; null or absent: none)
 *   ModelOpt            hf_quant_config.json quantization.kv_cache_quant_algo ("FP8"; null: none),
 *                       or the same key in an embedded quantization_config (quant_method modelopt)
 * Where they are, per attention module A = model.layers.L.self_attn (the names vLLM's
 * maybe_remap_kv_scale_name maps onto the attention layer's k_scale / v_scale):
 *   compressed-tensors  A.k_scale, A.v_scale (also A.q_scale, A.prob_scale)
 *   ModelOpt            A.k_proj.k_scale, A.v_proj.v_scale
 *   both                A.kv_scale (deprecated: one scale for K and V)
 * Either spelling is read whatever the format (as vLLM does); the format's own one wins. Each is a
 * per-tensor multiplier: the cache stores e4m3(x / scale) and reads it back times scale.
 * Multi-head latent attention (DeepSeek-V3, kv_lora_rank > 0) caches one latent row per token
 * (kv_c_normed and the roped k_pe) with k_scale alone (vLLM concat_and_cache_mla); v_scale is
 * not read there.
 */
#ifndef ND_KV_SCALES_H
#define ND_KV_SCALES_H

#include "ckpt/ckpt.h"
#include "ckpt/findings.h"

typedef struct nd_kv_config {
    int announced;          /* the quantization config declares a quantized KV cache */
    int fp8;                /* ... and it is FP8 (E4M3) with per-tensor scales */
    char source[96];        /* the key that says so ("config.json quantization_config.kv_cache_scheme") */
    char what[96];          /* what it says ("float 8-bit tensor static", "FP8") */
    /* the smallest scale the producer writes: 1.0 for ModelOpt before 0.43, which exported FP8 KV
     * scales as max(amax / 448, 1) (its CHANGELOG 0.43; PR #1012 removed the clamp), else 0. A
     * calibrated scale is then max(amax / 448, min_scale). */
    double min_scale;
    char producer[48];      /* "modelopt 0.42.0" where the checkpoint says, else "" */
} nd_kv_config;

typedef struct nd_kv_scales {
    char attn[256];         /* the attention module ("model.layers.0.self_attn") */
    const nd_tview *k, *v;  /* the tensors read as k_scale / v_scale (NULL: absent); kv_scale serves both */
    const nd_tview *q, *prob;
    float k_scale, v_scale; /* their values (the largest element of a per-head tensor); NaN when absent */
} nd_kv_scales;

/* The checkpoint's KV-cache announcement. Exit 2 when the key exists but cannot be read (a
 * kv_cache_scheme that is neither an object nor null, a kv_cache_quant_algo that is not a string). */
int nd_ckpt_kv_config(const nd_ckpt *c, nd_kv_config *out, nd_err *e);
/* The scales of attention module `attn` (never fails; absent ones are NULL / NaN). */
void nd_ckpt_kv_scales(const nd_ckpt *c, const char *attn, nd_kv_scales *out);
/* 1 when `name` is a KV-cache scale tensor by its suffix (k_scale, v_scale, kv_scale, q_scale,
 * prob_scale): read by the attention layer, not by a linear's loader. */
int nd_is_kv_scale_name(const char *name);
/* 1 when the model caches a latent (MLA): k_scale alone scales the cache. */
int nd_ckpt_kv_latent(const nd_ckpt *c);
/* The static checks (codes in findings.h): kv_scale_missing (announced, absent for a layer),
 * kv_scale_orphan (present, but no config announces them or no attention layer reads them),
 * nonfinite_scale (a KV scale that is NaN, Inf, zero or negative). */
int nd_ckpt_check_kv(const nd_ckpt *c, nd_findings *f, nd_err *e);

#endif
