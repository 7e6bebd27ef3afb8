#!/usr/bin/env bash
# Faults planted into the gpt-oss fixture (transformers' GptOssForCausalLM quantized by llmcompressor,
# per-expert Linears with biases: golden/conformance/gpt_oss/nvfp4) with `synth OUT --from CKPT
# --inject FAULT@MODULE`: a trace under the default stack names the planted module with the right
# cause, proven by repair or by a static fact, and the next command it prints, run as printed, leaves
# that stage ok (plant_check.sh). Three on attention projections (biased; sliding-window layers 0
# and 2, the full-attention layer 1), three on routed experts (the clamped SwiGLU's input and output).
# The nibble swaps are proven against bf16/ (--reference-checkpoint), which holds the experts fused
# (gate_up_proj, rows interleaved) where nvfp4/ has per-expert gate_proj/up_proj: the reference of each
# is its half of the fused weight.
#   usage: gpt_oss_faults.sh NVFP4DBG SOURCE_ROOT
set -u
. "$(dirname "$0")/plant_check.sh" "$@"

# family module (= stage) fault cause
check_nvfp4_list <<'LIST'
gpt_oss layers.0.self_attn.o_proj input-scale-mul=100 scale_saturation
gpt_oss layers.1.self_attn.k_proj input-scale-inverted scale_inverted
gpt_oss layers.2.self_attn.q_proj weight-global-scale-zero nonfinite_scale
gpt_oss layers.0.mlp.experts.1.up_proj input-scale-inverted scale_inverted
gpt_oss layers.1.mlp.experts.5.down_proj weight-scale-nan nan_weight_scale
gpt_oss layers.2.mlp.experts.5.gate_proj nibble-swap weight_packing
gpt_oss layers.0.mlp.experts.1.up_proj nibble-swap weight_packing
LIST
echo "planted faults on the gpt-oss fixture: $pass passed, $fail failed"
[ $fail -eq 0 ]
