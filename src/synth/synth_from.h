/* synth_from.h — `synth OUTDIR --from CKPT --inject FAULT@MODULE`: the fault catalogue planted into
 * a checkpoint nvfp4dbg did not write (compressed-tensors or ModelOpt NVFP4), so the diagnosis can
 * be tested on other writers' shapes and scale patterns. */
#ifndef ND_SYNTH_FROM_H
#define ND_SYNTH_FROM_H
#include "util/err.h"

/* Copy every file of src but its safetensors (config.json, hf_quant_config.json, tokenizer, ...)
 * into outdir (created; must not exist or be empty), write all of src's tensors into
 * outdir/model.safetensors with the faults applied exactly as synth applies them
 * (synth_faults.c), and list the faults in OUTDIR.faults.json. MODULE is a stage name
 * ("layers.0.self_attn.q_proj"), looked up as model.MODULE, then as given. Exit 2 on an unknown
 * fault or module, a module that is not NVFP4, or an unsuitable outdir. */
int nd_synth_from(const char *src, const char *outdir, const char *const *injects, int n, int force, nd_err *e);
#endif
