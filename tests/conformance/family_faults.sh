#!/usr/bin/env bash
# Faults planted into the issue-19 family fixtures (transformers' own classes, quantized by
# llmcompressor: golden/conformance/{minimax_m2,olmo3,gemma3_text,glm4,olmo2,phi3,smollm3,glm4_moe,qwen3,qwen3_moe,mixtral,qwen3_next,qwen3_5_moe,qwen2,llama31,
# mistral3}/nvfp4) with
# `synth OUT --from CKPT --inject FAULT@MODULE`: a trace under the default stack must name the
# planted module with the right cause, proven by repair or by a static fact, and the next command
# it prints, run as printed, must leave that stage ok. Two faults per family besides the seed bug: one
# on attention or a dense MLP, one on a routed expert that the prompt's tokens reach (MoE families; the
# dense Qwen2, Llama 3.1 and Mistral 3: a second one on attention or the MLP); Qwen3-Next also one
# on its sigmoid-gated shared expert and one on a gated-attention q_proj (its gate half included).
# A checkpoint that stores an expert's or an MLP's gate_proj and up_proj exchanged (gate-up-swap,
# traced with its original) is gate_up_order, proven by reading them in each other's place.
# Block scales written with their exponent K too low (scale-exponent-shift=K) are
# scale_encoding_mismatch, and a global scale off by the same factor (weight-mul) stays
# weight_global_mismatch: both repairs restore either, the block-scale range tells them apart;
# also on a v_proj or up_proj, whose global its fused group shares (calibrated to the group's amax).
# The seed bug (input-scale-inverted: input_global_scale stored as its reciprocal) in every family;
# on Qwen3-Next's and Qwen3.5's full-attention projections (inputs of amax about 10, global scale
# about 270) it costs only 2 to 4 dB, caught by the verdict's far-multiplier rule (probes/verdict.c
# (e)); on Mistral 3 the module is found under the checkpoint's language_model.model. prefix.
#   usage: family_faults.sh NVFP4DBG SOURCE_ROOT
set -u
. "$(dirname "$0")/plant_check.sh" "$@"

# family module (= stage) fault cause
check_nvfp4_list <<'LIST'
glm4_moe layers.1.self_attn.k_proj input-scale-inverted scale_inverted
glm4_moe layers.1.mlp.experts.4.up_proj weight-scale-nan nan_weight_scale
qwen3 layers.1.self_attn.o_proj input-scale-mul=100 scale_saturation
qwen3 layers.0.self_attn.q_proj nibble-swap weight_packing
qwen3_moe layers.0.mlp.down_proj input-scale-mul=0.00000001 scale_underflow
qwen3_moe layers.1.mlp.experts.2.gate_proj nibble-swap weight_packing
mixtral layers.1.block_sparse_moe.experts.4.up_proj weight-global-scale-zero nonfinite_scale
mixtral layers.1.block_sparse_moe.experts.4.down_proj input-scale-inverted scale_inverted
qwen3_next layers.1.self_attn.o_proj input-scale-mul=100 scale_saturation
qwen3_next layers.3.self_attn.q_proj weight-scale-nan nan_weight_scale
qwen3_next layers.3.mlp.experts.5.up_proj nibble-swap weight_packing
qwen3_next layers.2.mlp.shared_expert.down_proj input-scale-mul=0.00000001 scale_underflow
qwen3_5_moe layers.1.self_attn.o_proj input-scale-mul=100 scale_saturation
qwen3_5_moe layers.2.mlp.experts.3.up_proj nibble-swap weight_packing
qwen3_5_moe layers.0.mlp.shared_expert.gate_proj weight-global-scale-zero nonfinite_scale
qwen3 layers.0.self_attn.v_proj input-scale-inverted scale_inverted
qwen3_moe layers.1.self_attn.q_proj input-scale-inverted scale_inverted
qwen3_next layers.3.self_attn.k_proj input-scale-inverted scale_inverted
qwen3_5_moe layers.1.self_attn.v_proj input-scale-inverted scale_inverted
qwen2 layers.0.self_attn.q_proj input-scale-inverted scale_inverted
llama31 layers.1.mlp.gate_proj input-scale-inverted scale_inverted
mistral3 layers.1.self_attn.o_proj input-scale-inverted scale_inverted
qwen2 layers.1.mlp.down_proj nibble-swap weight_packing
llama31 layers.0.self_attn.k_proj weight-scale-nan nan_weight_scale
mistral3 layers.0.mlp.up_proj input-scale-mul=100 scale_saturation
glm4 layers.0.mlp.gate_up_proj input-scale-inverted scale_inverted
glm4 layers.1.self_attn.o_proj nibble-swap weight_packing
glm4 layers.1.mlp.down_proj weight-scale-nan nan_weight_scale
glm4 layers.0.self_attn.v_proj input-scale-mul=100 scale_saturation
olmo2 layers.0.self_attn.q_proj input-scale-inverted scale_inverted
olmo2 layers.1.mlp.down_proj nibble-swap weight_packing
olmo2 layers.1.self_attn.k_proj weight-scale-nan nan_weight_scale
phi3 layers.0.self_attn.qkv_proj input-scale-inverted scale_inverted
phi3 layers.1.mlp.gate_up_proj nibble-swap weight_packing
phi3 layers.0.mlp.down_proj input-scale-mul=100 scale_saturation
smollm3 layers.3.self_attn.o_proj input-scale-inverted scale_inverted
smollm3 layers.3.self_attn.k_proj nibble-swap weight_packing
smollm3 layers.1.mlp.up_proj weight-global-scale-zero nonfinite_scale
gemma3_text layers.0.self_attn.k_proj input-scale-inverted scale_inverted
gemma3_text layers.1.mlp.gate_proj input-scale-inverted scale_inverted
gemma3_text layers.1.self_attn.q_proj nibble-swap weight_packing
gemma3_text layers.0.mlp.down_proj weight-scale-nan nan_weight_scale
minimax_m2 layers.0.self_attn.q_proj input-scale-inverted scale_inverted
minimax_m2 layers.1.block_sparse_moe.experts.3.down_proj nibble-swap weight_packing
minimax_m2 layers.1.self_attn.o_proj weight-scale-nan nan_weight_scale
olmo3 layers.3.self_attn.v_proj input-scale-inverted scale_inverted
olmo3 layers.0.mlp.gate_proj nibble-swap weight_packing
qwen3_moe layers.1.mlp.experts.3.gate_proj gate-up-swap gate_up_order
mixtral layers.1.block_sparse_moe.experts.4.gate_proj gate-up-swap gate_up_order
llama31 layers.0.mlp.gate_proj gate-up-swap gate_up_order
llama31 layers.0.self_attn.o_proj scale-exponent-shift=2 scale_encoding_mismatch
qwen3 layers.1.mlp.down_proj scale-exponent-shift=3 scale_encoding_mismatch
llama31 layers.0.self_attn.v_proj scale-exponent-shift=2 scale_encoding_mismatch
qwen3 layers.1.mlp.up_proj scale-exponent-shift=3 scale_encoding_mismatch
llama31 layers.0.self_attn.o_proj weight-mul=0.25 weight_global_mismatch
qwen3 layers.1.mlp.down_proj weight-mul=0.125 weight_global_mismatch
LIST
# the exponent shift in ModelOpt's convention (weight_scale_2 a multiplier)
check glm4 modelopt layers.1.self_attn.o_proj layers.1.self_attn.o_proj scale-exponent-shift=2 scale_encoding_mismatch
# planted at an up_proj: the MLP's gate_proj row (replayed first) is the first to diverge
check smollm3 nvfp4 layers.2.mlp.up_proj layers.2.mlp.gate_proj gate-up-swap gate_up_order
echo "planted faults on the family fixtures: $pass passed, $fail failed"
[ $fail -eq 0 ]
