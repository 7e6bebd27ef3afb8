/* inspect_kv.h — the FP8 KV-cache part of `nvfp4dbg inspect` (ckpt/kv_scales.h): what the config
 * announces and every attention layer's k_scale / v_scale (q_scale, prob_scale) as found. */
#ifndef ND_INSPECT_KV_H
#define ND_INSPECT_KV_H
#include <jansson.h>
#include "ckpt/ckpt.h"

/* {"announced", "fp8", "source", "scheme", "latent", "layers": [{"module", "k_scale": {"tensor",
 * "value"} | null, "v_scale": ..., "q_scale": ..., "prob_scale": ...}] (layers with any scale)} */
json_t *nd_inspect_kv_json(const nd_ckpt *c);
/* The same as text lines ("kv cache   ..."), nothing when the checkpoint has neither. */
void nd_inspect_kv_print(const nd_ckpt *c);
#endif
