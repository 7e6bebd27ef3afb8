#!/usr/bin/env bash
# The fault catalogue on checkpoints nvfp4dbg did not write (issue 13): the conformance fixtures
# (transformers' own model classes, quantized by llmcompressor/compressed-tensors and by ModelOpt,
# golden/conformance) get one fault each with `synth OUT --from CKPT --inject FAULT@MODULE`, and a
# trace under the default stack must name it at that stage with the right cause, proven by repair
# or by a static fact; the next command it prints, run as printed, must clear that stage. The
# DeepSeek-V4 fixture written by llmcompressor has fused shards (wq_a/wkv) with unequal weight
# global scales: an inverted input scale on that projection must still be scale_inverted.
#   usage: planted_faults.sh NVFP4DBG SOURCE_ROOT
set -u
. "$(dirname "$0")/plant_check.sh" "$@"

faults=("input-scale-inverted scale_inverted" "input-scale-mul=100 scale_saturation"
        "input-scale-mul=0.00000001 scale_underflow" "input-scale-inf nonfinite_scale"
        "weight-global-scale-zero nonfinite_scale" "weight-scale-nan nan_weight_scale"
        "missing-input-scale nonfinite_scale" "nibble-swap weight_packing")
for fmt in nvfp4 modelopt; do
  for fc in "${faults[@]}"; do
    read -r fault cause <<<"$fc"
    check llama "$fmt" layers.1.self_attn.o_proj layers.1.self_attn.o_proj "$fault" "$cause"
    check deepseek_v3 "$fmt" layers.0.self_attn.q_b_proj layers.0.self_attn.q_b_proj "$fault" "$cause"
    check deepseek_v4 "$fmt" layers.1.attn.wq_b layers.1.self_attn.q_b_proj "$fault" "$cause"
  done
  # the issue's case: an inverted input scale on a fused shard whose weight globals differ
  check deepseek_v4 "$fmt" layers.0.attn.wq_a layers.0.self_attn.q_a_proj input-scale-inverted scale_inverted
  check llama "$fmt" layers.0.self_attn.k_proj layers.0.self_attn.k_proj input-scale-inverted scale_inverted
done
echo "planted faults on foreign checkpoints: $pass passed, $fail failed"
[ $fail -eq 0 ]
