#!/usr/bin/env bash
# The second-wave families under ModelOpt's naming (issue 32 item 1): golden/conformance/<family>/modelopt,
# bf16/ quantized by NVIDIA ModelOpt 0.47 (NVFP4_DEFAULT_CFG) and written by export_hf_checkpoint
# (weight + weight_scale + weight_scale_2 + input_scale; MiniMax-M2's experts as the release names
# them, w1/w3/w2). Each: inspect names the recipe and naming, trace exits 0 (no divergence), and the
# seed bug planted in ModelOpt's own convention (input_scale stored as its reciprocal) is named at its
# stage, proven, and cleared by the printed next command.
#   usage: family_modelopt.sh NVFP4DBG SOURCE_ROOT
set -u
. "$(dirname "$0")/plant_check.sh" "$@"

# family naming-inspect-prints module-to-plant (= in the checkpoint) stage
while read -r fam naming mod stage; do
  d="$conf/$fam/modelopt"
  "$bin" inspect "$d" >"$tmp/i.out" 2>&1; rc=$?
  ok "$fam/modelopt: inspect exit $rc, $(grep '^family' "$tmp/i.out")" \
     '[ $rc -eq 0 ] && grep -q "^format      modelopt" "$tmp/i.out" && grep -qx "family      recipe $fam, naming $naming" "$tmp/i.out"'
  "$bin" trace --force "$d" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/c.h5" >"$tmp/c.json" 2>"$tmp/err"; rc=$?
  ok "$fam/modelopt: clean trace exit $rc ($(json_field first_divergence "$tmp/c.json") $(head -c 200 "$tmp/err"))" '[ $rc -eq 0 ]'
  check "$fam" modelopt "$mod" "$stage" input-scale-inverted scale_inverted
done <<'LIST'
gemma3_text canonical layers.1.self_attn.q_proj layers.1.self_attn.q_proj
glm4 canonical layers.0.mlp.gate_up_proj layers.0.mlp.gate_up_proj
olmo2 canonical layers.1.mlp.down_proj layers.1.mlp.down_proj
olmo3 canonical layers.2.self_attn.o_proj layers.2.self_attn.o_proj
phi3 canonical layers.1.self_attn.qkv_proj layers.1.self_attn.qkv_proj
smollm3 canonical layers.3.self_attn.q_proj layers.3.self_attn.q_proj
minimax_m2 w123 layers.1.block_sparse_moe.experts.3.w2 layers.1.block_sparse_moe.experts.3.down_proj
LIST
echo "families under ModelOpt's naming: $pass passed, $fail failed"
[ $fail -eq 0 ]
