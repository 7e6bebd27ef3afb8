/* synth_write.h — writing one checkpoint folder of a plan: the original (BF16) or the quantized
 * model, as one model.safetensors or, past 1 GiB, as shards with model.safetensors.index.json.
 * Weights are generated tensor by tensor while a shard is written; a shard's buffers are freed
 * when it is closed, so memory stays at about one shard (or one tensor larger than a shard). */
#ifndef ND_SYNTH_WRITE_H
#define ND_SYNTH_WRITE_H

#include "synth/synth_faults.h"
#include "synth/synth_plan.h"

#define SY_SHARD_BYTES (1ull << 30)

typedef struct sy_wctx {
    sy_plan *plan;
    uint64_t seed;
    int quantized;            /* 0: the original */
    nd_synth_format fmt;
    sy_faults *faults;
    unsigned long long shard_bytes; /* SY_SHARD_BYTES unless a test asks for smaller shards */
    int unequal_fused;        /* each fused shard's own weight global (nd_synth_opts) */
} sy_wctx;

/* Write the safetensors file(s) (and the index when sharded) of the checkpoint into dir. */
int sy_write_tensors(sy_wctx *w, const char *dir, nd_err *e);
/* config.json (+ hf_quant_config.json for ModelOpt) into dir. */
int sy_write_configs(const sy_wctx *w, const char *dir, nd_err *e);
/* amax of an NVFP4 parameter's BF16 weight, computed once (cached in the plan). */
float sy_weight_amax(sy_plan *pl, long idx, uint64_t seed);
/* The weight amax a parameter's fused group shares: the max over the shards, so the divisor
 * 2688/amax is the min of the shards' own compressed-tensors values (llm-compressor's rule). */
float sy_fused_amax(sy_plan *pl, long idx, uint64_t seed);

#endif
