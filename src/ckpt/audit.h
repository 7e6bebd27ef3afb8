/* audit.h — the static audit of `nvfp4dbg inspect` (issue 18): the quantization config against the
 * tensors, module by module, every tensor accounted for by the loader of the checkpoint's format,
 * the precision policy of sensitive roles, and the health of the block scales with coordinates.
 *
 * Codes it adds (what each breaks: the nd_break_kind of ckpt/findings.h):
 *   quant_config_mismatch      all   an ordinary linear the config ignores holds quantized tensors, or a
 *                                    linear the config quantizes (explicitly, or by class with its sibling
 *                                    modules in other layers quantized) is stored unquantized; a group
 *                                    whose num_bits / type / group_size / strategy contradicts the NVFP4
 *                                    tensors it covers (its own format or the top-level one naming another
 *                                    packing, 4-bit activations in a strategy other than tensor_group);
 *                                    an unknown compressed-tensors format string. Every
 *                                    shipped profile models a loader (vLLM, SGLang) that picks a linear's
 *                                    method from the config, and exact is the format's documented
 *                                    meaning, which such a checkpoint does not have.
 *                             none  the config's class target covers lm_head, an embedding or a router
 *                                    stored unquantized: serving stacks build those roles without the
 *                                    quantization method, nothing is read wrongly. A weight-only group
 *                                    (no input_activations) over modules that hold input scales: the
 *                                    model serves W4A16, the scales unread.
 *   precision_policy_violation all   a role that must stay high precision (router gate, lm_head,
 *                                    embeddings, norms, hyper-connection parameters) stored quantized:
 *                                    vLLM/SGLang build these without a quantization method
 *                                    (ReplicatedLinear(quant_config=None), ParallelLMHead,
 *                                    VocabParallelEmbedding), so the packed tensors do not load.
 *   scale_not_loaded           all   a module's scale under a name its format's loader does not read
 *                                    (ModelOpt input_scale / weight_scale_2 in a compressed-tensors
 *                                    module, or the reverse), or a routed expert without the scale its
 *                                    siblings have: the parameter keeps its initial value (vLLM allocates
 *                                    it with torch.empty; the replay models that as NaN).
 *   scale_underflow            none  non-zero E4M3 block scales below 2^-6 (subnormals: 3 bits or fewer)
 *                                    in more than 1/8 of the blocks: precision lost although the global
 *                                    scale is finite. Coordinates: the first subnormal block.
 *   scale_encoding_mismatch    all   negative E4M3 block scales (the sign bit set: no writer stores one)
 *   scale_pow2_rounding        none  every non-zero block scale of the weight is a power of two (UE8M0-
 *                                    rounded scales, > 64 blocks): precision of the scales is lost
 *   hash_table_invalid         all   a DeepSeek-V4 hash router's tid2eid row naming an expert outside the model
 *                                    or one expert twice
 *   expert_scale_outlier       none  a routed expert whose weight global divisor is more than 16x away
 *                                    from the median of its siblings (same projection, same layer)
 * Coordinates (nd_finding.row/col) are block row and block column of the block-scale tensor. */
#ifndef ND_AUDIT_H
#define ND_AUDIT_H

#include <jansson.h>
#include "ckpt/ckpt.h"
#include "ckpt/findings.h"

/* The scale of module m stored under the other format's name (weight: the weight global, else the
 * input scale), when m's own name is absent: the orphan a loader of m's format does not read. */
const nd_tview *nd_module_orphan_scale(const nd_ckpt *c, const nd_module *m, int weight);

/* 1 when module m's weight global (weight) or input scale is not loaded for the reason above (an
 * orphan under the other name, or a routed expert without what its siblings have): findings.c then
 * leaves missing_scale to this audit's scale_not_loaded. */
int nd_module_scale_unloaded(const nd_ckpt *c, const nd_module *m, int weight);

/* Every audit check above on the whole checkpoint; also puts the coordinates of the first NaN block
 * on nan_weight_scale findings already in f. Exit 2 only when a module cannot be bound. */
int nd_ckpt_audit(const nd_ckpt *c, nd_findings *f, nd_err *e);

/* The inventory: the quantization config's scheme per module (format, group, bits, group size,
 * strategy, ignore, dynamic/static activations) next to what the tensors hold, and the tensors no
 * loader of the format reads. A new JSON object (caller owns it). */
json_t *nd_ckpt_inventory_json(const nd_ckpt *c);
/* Count of tensors that no module binding and no known parameter role accounts for. */
size_t nd_ckpt_unaccounted(const nd_ckpt *c);

#endif
