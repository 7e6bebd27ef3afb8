/* catalogue.c — the cause table (catalogue.h). Keep one entry per SPEC §7 code. */
#include "catalogue.h"
#include "util/table.h"

static const nd_cause CAUSES[] = {
    {"scale_inverted",
     "the activation quantizer multiplier is the reciprocal of the right one: an input scale stored or applied in the "
     "other convention (ModelOpt's amax/2688 where compressed-tensors' 2688/amax is meant, or the reverse) (field "
     "report C25: modular/modular #6600; and the seed report)",
     "replaying the stage with the reciprocal of the input scale brings its SQNR back to the NVFP4 floor",
     "input_scale_reciprocal: the module's input scale replaced by its reciprocal",
     "fix the exporter or the loader that wrote/read this input scale; the --override shown applies the fix to the "
     "whole run"},
    {"scale_saturation",
     "the activation quantizer multiplier is too large: block scales clip at 448 and codes clip at +-6 (field report "
     "C28)",
     "replaying the stage with the input scale divided by a power of two brings its SQNR back to the floor",
     "input_scale_pow2: the input scale multiplied by 2^k, k < 0",
     "recalibrate the input scale (or check for a factor applied twice); the --override shown tests it on the whole run"},
    {"scale_underflow",
     "the activation quantizer multiplier is too small: block scales flush to zero or lose precision as subnormals; "
     "or the weight's own block scales are E4M3 subnormals (< 2^-6) although its global scale is finite (field "
     "reports C09, C17, C19, C21)",
     "replaying the stage with the input scale multiplied by a power of two brings its SQNR back to the floor; for "
     "the weight, a static fact: more than 1/8 of its non-zero block scales are subnormal (inspect reports the share "
     "and the first block's coordinates), or more than 1/8 of its blocks hold only zero codes (their scales flushed to "
     "0; compressed-tensors stores its eps 0.125 in their place) while the weight differs from the original by rel L2 "
     "above 0.5, and with --reference-checkpoint the stage diverges from the original; for an FP8 KV cache, its "
     "calibrated scales (amax/448, kv_scale_calibrated) bring it back to the floor",
     "input_scale_pow2: the input scale multiplied by 2^k, k > 0 (the weight's subnormal scales have no repair by "
     "override: the codes were quantized with them)",
     "recalibrate the input scale (or check for a missing factor); the --override shown tests it on the whole run. "
     "Subnormal weight block scales: re-export the weight with a global that maps amax(W) to 448 x 6"},
    {"quant_config_mismatch",
     "the quantization config and the tensors disagree: a linear the config ignores holds quantized tensors, a "
     "linear it quantizes is stored unquantized, or a group's bits / type / group size / strategy or the format "
     "string contradict the NVFP4 tensors (field reports C11, C12, C13, C14, A17, A28; research/field-bug-reports.md "
     "section 3)",
     "a static fact (inspect): the module and the disagreeing fields; a loader that follows the config builds "
     "another scheme for the module (vLLM: unexpected key, shape mismatch or 'weights were not initialized')",
     "",
     "fix the config (ignore list, config_groups) or re-export the module in the scheme the config says"},
    {"scale_not_loaded",
     "a scale tensor is stored under a name the format's loader does not read (the other format's input_scale / "
     "input_global_scale, weight_scale_2 / weight_global_scale), or a routed expert lacks the scale its siblings "
     "have: the parameter keeps its initial value (vLLM: torch.empty; the replay: NaN) (field reports C05, C18 (a), A4, A5)",
     "replaying the stage with the orphan tensor's value loaded under the name the loader reads (or, for an "
     "expert, its siblings' value) brings it back to the floor; inspect names the orphan statically",
     "load_orphan_scale: model.<module>.<name the loader reads>=<orphan value>; input_scale_from_sibling: the "
     "sibling experts' smallest multiplier",
     "rename the tensor to the format's name (or export the expert's scale); the --override shown loads it for the "
     "whole run"},
    {"precision_policy_violation",
     "a role that must stay high precision (router gate, lm_head, embeddings, norms, hyper-connection parameters) "
     "is stored quantized, with or without the config saying so (field report C15; ModelOpt PR #1858: routers are "
     "tiny and sensitive)",
     "a static fact (inspect): vLLM and SGLang build these roles without a quantization method "
     "(ReplicatedLinear(quant_config=None), ParallelLMHead, VocabParallelEmbedding), so the packed tensors do not "
     "load, and the role loses precision where a loader dequantizes them",
     "",
     "re-export with the role in the ignore list (router gates: re:.*mlp.gate$, lm_head, embed_tokens)"},
    {"nonfinite_scale",
     "a global scale, quantizer multiplier or alpha is NaN, Inf, zero or negative (a missing, unloaded, zeroed or "
     "sign-flipped scale) (field reports C07, C08, C09, A31)",
     "a static fact on its own; where a calibrated value can be computed, replaying the stage with it restores it",
     "input_scale_calibrated: the input scale set to 2688/amax of this prompt's input",
     "re-export the scale; the --override shown sets a calibrated value for the whole run"},
    {"nan_weight_scale",
     "the weight has NaN/Inf block scales: E4M3 (NVFP4), E8M0 (MXFP4, DeepSeek's FP8 .scale) or real-valued (FP8 "
     "scale_inv) (field report C10)",
     "a static fact on its own; replaying with each NaN block scale replaced by its row neighbour restores the stage",
     "block_scale_fix: NaN block scales replaced by their nearest finite neighbour",
     "re-quantize the weight (its block scales are corrupt)"},
    {"nonfinite_weight",
     "a tensor the stage reads holds NaN or Inf values stored as such in the checkpoint: an unquantized weight (a "
     "norm, a router, an embedding, lm_head), a bias, FP8 codes, or the real-valued block scales of an FP8 weight; "
     "both paths read it, so the reference output is broken too (SPEC 7: the checkpoint itself is broken)",
     "a static fact on its own: the trace names the tensor and counts its NaN and Inf values",
     "none by override: the stored values are lost",
     "re-export the tensor from the original weights (check the conversion or merge step that wrote it)"},
    {"weight_packing",
     "the packed FP4 codes are stored in the other nibble order (or layout) than the kernel reads (field reports "
     "C38, A19, A20, A21)",
     "with --reference-checkpoint, replaying the stage with every byte's nibbles swapped brings it back to the floor",
     "nibble_swap: every packed byte read with its two 4-bit codes swapped",
     "fix the packing in the exporter (low nibble = even element)"},
    {"fused_scale_mismatch",
     "fused shards carry different global scales but the serving stack's fused GEMM uses one value for all of them "
     "(field reports C01, C02, C03, A1)",
     "replaying the stage with each shard's own scales (instead of the stack's max/min/first rule), or the reverse, "
     "brings it back to the floor",
     "fused_rule: the fused-shard rule of the stack replaced by own / max / min / first; weight_scale_fit: with "
     "--reference-checkpoint, a shard's weight global scale set to the value its block scales were made with",
     "serve with a stack that keeps per-shard scales (e.g. --stack exact), or re-export the shards with one shared "
     "global scale"},
    {"weight_global_mismatch",
     "the weight's global scale does not match the one its block scales were made with: the weight decodes too "
     "large or too small by one factor (no field report of its own: the single-module form of the global/block-scale "
     "contract of C01-C03)",
     "with --reference-checkpoint, replaying the stage with the divisor that best fits the stored codes and block "
     "scales to the original weight brings it back to the floor",
     "weight_scale_fit: the weight global scale set to the least-squares fit against the original",
     "re-export the weight global scale (weight_global_scale / weight_scale_2) with the value the block scales were "
     "made with"},
    {"gate_up_order",
     "gate and up in the other order: the serving stack reads the fused gate/up projection in the other order (W31 "
     "where the checkpoint is W13, or the reverse), so SwiGLU computes act(up) * gate instead of act(gate) * up "
     "(field reports C04, C05 (3c)); or the checkpoint itself stores an MLP's or expert's gate_proj and up_proj "
     "(w1 and w3) under each other's names",
     "replaying the MLP block (or the routed experts) with gate and up in the other order makes it healthy again "
     "(the cosine and magnitude of a clean NVFP4 block), every projection's own row clean either way; for the "
     "checkpoint's exchange (with --reference-checkpoint), replaying the projection with its sibling's tensors "
     "brings it back to the floor",
     "gate_up_swap: <stage>.gate_up_swap toggled (0: act(gate)*up, 1: act(up)*gate); gate_up_tensors_swapped: "
     "<mlp or expert>.gate_up_tensors_swapped=1 reads the checkpoint's gate and up tensors in each other's place",
     "fix the loader's W13/W31 choice for this MoE runner or MLP kernel (sglang PR #39388 for MegaMoE), or "
     "re-export the checkpoint with gate and up under their own names; the --override shown applies the fix to "
     "the run"},
    {"moe_output_scale",
     "the routed experts' output is scaled by routed_scaling_factor twice (or never) instead of once: the "
     "combine is off by exactly that factor (field reports C16, A2, A3)",
     "replaying the routed experts with the factor applied once brings their output back to the reference "
     "magnitude (a clean NVFP4 block)",
     "routed_scaling_once: <stage>.routed_scaling=1 (the stack applied it 0 or 2 times)",
     "apply routed_scaling_factor in one place only (top-k weights or the final sum: sglang PR #31762); the "
     "--override shown runs the stage with it applied once"},
    {"fp16_overflow",
     "an FP16 step overflows at 65504 where BF16 would not: the GEMM casts its FP32 accumulator to FP16 before "
     "applying alpha (the global scales), so sums past 65504 become Inf although the scaled output is small (field "
     "report C18); or the stack writes the output itself as FP16 (dtype=float16 serving) and a module with massive "
     "activations passes 65504 (vllm #14126, #17154, #16579)",
     "replaying the stage without the FP16 step (alpha in FP32, output kept in BF16) removes the Inf and brings "
     "it back to the floor",
     "epilogue_fp32: <stage>.epilogue_fp16=0 (scale first, no FP16 cast)",
     "serve with dtype=bfloat16 or a kernel that scales before casting (vLLM PR #37135 / #33972 for Marlin "
     "NVFP4); the --override shown runs the stage without the FP16 step"},
    {"kv_scale_ignored",
     "the checkpoint's FP8 KV-cache scales (k_scale / v_scale) are not used as they must be: dropped (the cache "
     "runs with 1.0), applied when K/V are written but not when attention reads them back, or applied twice (field "
     "reports C39, A6, A7)",
     "replaying the KV-cache stage with the scales applied once on write and once on read brings it back to the "
     "floor of a healthy FP8 cache (each tensor with its own calibrated scale)",
     "kv_scales_apply: <stage>.kv_scales=1 (x / s written, x s read)",
     "make the loader hand the scales to both the cache write and the attention kernel (vLLM PR #39418 for "
     "compressed-tensors with FlashInfer; sglang PR #35455 for the dropped ones); the --override shown applies "
     "them once in the whole run"},
    {"scale_pow2_rounding",
     "the weight's block scales are rounded up to powers of two (UE8M0 ceiling) without re-quantizing the codes "
     "they were made with: each block decodes too large by a factor in [1, 2) (DeepGEMM's UE8M0 scale format on "
     "Blackwell: field reports C29, C30, C31, C32)",
     "replaying the stage with the scales read as stored (stack behaviour), or, with --reference-checkpoint and "
     "stored scales that are all powers of two, with the scales refitted to the original weight (codes kept), "
     "brings it back to the floor",
     "block_scale_unrounded: <stage>.block_scale_pow2=0; block_scale_refit: model.<module>.block_scale_refit=1",
     "serve without the UE8M0 conversion or re-quantize the weight to the power-of-two scales (vLLM/SGLang "
     "requant_weight_ue8m0); re-export a checkpoint whose scales were rounded"},
    {"scale_layout_mismatch",
     "the block scales are read in another layout than they are stored in: the 128x4 swizzled layout of the "
     "CUTLASS / FlashInfer kernels where they are linear (or the reverse), transposed, or with another row stride "
     "(rows padded to a multiple, as a kernel's buffer, read as dense, or dense rows read with the padded stride) "
     "(field reports C20, C24, C25, C37, A15)",
     "replaying the stage with the scales read in the layout they are stored in (linear for a stack behaviour; "
     "with --reference-checkpoint, un-swizzled, un-transposed or in rows of the stored length for the checkpoint) "
     "brings it back to the floor; inspect names a padded scale tensor statically",
     "block_scale_linear: <stage>.block_scale_layout=0; scale_layout: model.<module>.scale_layout=1 (swizzled_128x4), "
     "2 (transposed) or 3 (rows of the stored tensor's length)",
     "swizzle the scales exactly once between the checkpoint and the kernel (the loader's swizzle_blockscale step); "
     "re-export a checkpoint that stored them swizzled or transposed"},
    {"scale_encoding_mismatch",
     "the block-scale bytes are decoded with another encoding than they were written in: E4M3 bytes read as E8M0 "
     "exponents or as integers (a U8-typed tensor converted numerically), E8M0 bytes read as E4M3, or bytes written "
     "with the exponent bias off (E8M0 bias 125, C26; E4M3 scales all 2^-k of their value) (field reports C26, C27, "
     "A18)",
     "replaying the stage with the bytes decoded as E4M3 (stack behaviour), or, with --reference-checkpoint, as "
     "E8M0 (a checkpoint whose scales are E8M0 exponents) brings it back to the floor; an exponent written k too "
     "low: reading the scales 2^k larger restores it, and the largest block scale is exactly 448/2^k while the "
     "global scale maps the original's amax exactly (a wrong global instead leaves the largest at 448)",
     "block_scale_e4m3: <stage>.block_scale_encoding=0; scale_encoding: model.<module>.scale_encoding=1 (e8m0); "
     "scale_exponent_shift: model.<module>.scale_exponent_shift=k",
     "decode the scale tensor by its format, not by its dtype tag (F8_E4M3 for NVFP4, E8M0 with bias 127 for MX); "
     "re-export scales written in the other encoding"},
    {"padding_scale_contamination",
     "a tensor-parallel rank's K shard is not a multiple of the kernel's tile and its padding is left "
     "uninitialised: the padded columns' codes, scales and activations are read into real outputs (field reports "
     "C22, C23, A8, A9, A10, A33; vLLM PR #30260, PR #38148)",
     "replaying the stage with the padding zeroed brings it back to the floor; inspect --tp names the splits "
     "that leave a remainder",
     "zero_padding: <stage>.pad_garbage=0",
     "zero the padded weight, scale and activation buffers (torch.zeros, or a quantizer that writes the padding), "
     "or serve with a tensor-parallel size whose shards are whole tiles"},
    {"router_precision",
     "the router selects experts with less precision than the model: its score-correction bias held in BF16, where "
     "biases that differ by less than BF16's step at their magnitude collapse into one value and top-k changes for "
     "many tokens (field report C33: SGLang's MoEGate under a quant_config, biases in [6.8, 7.1] became 8 values)",
     "on the same input, the production router picks other experts than the reference (isolated top-k agreement "
     "below 0.99); replaying it with the bias in FP32 gives the reference's picks",
     "router_bias_fp32: <stage>.router_bias_bf16=0 (the bias kept in FP32)",
     "keep the router's correction bias (and its gate) in FP32 in the loader (sglang PR #31213, vllm PR #23640); "
     "the --override shown runs the stage with it"},
    {"routing_divergence",
     "the production path routes tokens to other experts than the reference (field reports C34, C35)",
     "on the same input (isolated), the production router picks other experts than the reference for more than 1 pick "
     "in 100; a chained router whose picks moved with the error of earlier stages is drift, not this cause",
     "",
     "look at the first diverged stage before the router: routing follows its error"},
    {"nan_input",
     "NaN/Inf arrives from an earlier stage (the first-NaN locator of field reports C05, C18, C22)",
     "the stage's input already holds NaN/Inf on that path",
     "",
     "look at the stage where NaN/Inf appears first"},
    {"stack_kernel",
     "the serving stack's own output of this stage (captured with --prod-dump) differs from what the checkpoint "
     "and the stack profile compute, while the same stage replayed here from the same input is healthy: the fault "
     "is in the stack's kernel or its launch (a backend, a layout, a buffer), not in the checkpoint (field reports "
     "N1-N12)",
     "the captured row diverges; the isolated replay of the stage is within its floor, so no repair of the "
     "checkpoint's values or the stack's parameters can restore the captured tensor",
     "",
     "capture the stage's input too (NAME.input) to judge the kernel alone, then switch the stack's backend for "
     "this op (e.g. another MoE or GEMM backend) and capture again"},
    {"accumulated_error",
     "the error exceeds what NVFP4 quantization of this stage explains, and no single repair restores it (field "
     "report C40's layer-44 MoE before its cause was known)",
     "every candidate repair was replayed and none brought the stage back to its floor (the tries are listed)",
     "",
     "compare with --reference-checkpoint, try another --stack, or bisect the stage's operands"},
    {"unknown",
     "the output is broken (NaN, Inf or empty) and no candidate repair restores it (field reports C36, A22, A27)",
     "every candidate repair was replayed and none restored the stage",
     "",
     "make a repro bundle (nvfp4dbg repro) and look at the stage's tensors"},
};

const nd_cause *nd_causes(int *n) {
    *n = (int)ND_COUNT(CAUSES);
    return CAUSES;
}

const nd_cause *nd_cause_find(const char *code) {
    return nd_table_find(CAUSES, ND_COUNT(CAUSES), sizeof CAUSES[0], offsetof(nd_cause, code), code);
}
