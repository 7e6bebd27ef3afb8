#!/usr/bin/env bash
# Issue 18's classes on checkpoints nvfp4dbg did not write (golden/conformance: quantized by
# llmcompressor and by ModelOpt), each with what triggers it:
#   scale_layout_mismatch, checkpoint side: synth --from scale-row-stride=M stores a module's block
#     scales in rows padded to a multiple of M ([N, round_up(K/16, M)], a kernel's padded buffer);
#     inspect names it statically (error, the row stride), trace --reference-checkpoint diverges
#     there (every path reads the bytes as the [N, K/16] it expects) and the repair that reads rows
#     of the stored length (model.M.scale_layout=3) proves it; the next command clears the stage.
#     Also on synth's own checkpoints (the writer's path), one per format.
#   scale_layout_mismatch, stack side: block_scale_layout: padded_128x4 (dense scales read with the
#     padded row stride round_up(K/16, 4)): the first linear whose K/16 is not a multiple of 4
#     diverges, repair block_scale_linear; fixtures whose rows are all multiples of 4 stay clean.
#   fp16_overflow, checkpoint side: synth --from weight-mul=F makes one down_proj's output pass 65504
#     (a model with massive activations): clean under the default (BF16) stack, clean fixtures clean
#     under --stack vllm-fp16 (epilogue: fp16_output), the faulted one diverges there with Inf, cause
#     fp16_overflow proven by epilogue_fp32, and the next command clears it.
#   gate_up_order (sglang-megamoe-w31), moe_output_scale (sglang-marlin-moe-twice) and
#     padding_scale_contamination (vllm-tp8-unaligned: K/8 = 8 columns of o_proj padded to 32)
#     are runtime behaviours of a stack (no checkpoint holds them): each profile on the fixtures
#     names its stage and cause, proven by repair, and the next command clears it.
# Llama and DeepSeek-V3 (V4 where V3 has nothing to show) in both formats. Bad values exit 2.
#   usage: class_triggers.sh NVFP4DBG SOURCE_ROOT
bin="$1"; root="$2"
conf="$root/golden/conformance"
. "$(dirname "$0")/../lib.sh"
be=(--backend "${ND_TEST_BACKEND:-cpu}")
trace() { # out.json ckpt [args]: exit code in $rc
  local out="$1"; shift
  "$bin" trace --force "$@" "${be[@]}" --json --out "$tmp/t.h5" >"$out" 2>"$tmp/err"
  rc=$?
}
plant() { # out src fault@module
  rm -rf "$1" "$1.faults.json"
  "$bin" synth "$1" --from "$2" --inject "$3" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: synth --from $2 $3: $(cat "$tmp/err")"; fail=$((fail + 1)); return 1; }
}

# expect LABEL STAGE CAUSE REPAIR CKPT [trace args]: exit 1, first divergence STAGE with CAUSE proven
# by REPAIR; the printed next command, run as printed, makes STAGE ok
expect() {
  local label="$1" stage="$2" cause="$3" repair="$4"; shift 4
  trace "$tmp/o.json" "$@"
  local gs gc pr rp next
  gs=$(json_field first_divergence "$tmp/o.json"); gc=$(json_field cause "$tmp/o.json")
  pr=$(json_field proof "$tmp/o.json"); rp=$(json_field repair "$tmp/o.json"); next=$(json_field next_command "$tmp/o.json")
  ok "$label: exit 1 at $stage, $cause proven by $repair (got $rc, '$gs' '$gc' '$pr' '$rp')" \
    '[ $rc -eq 1 ] && [ "$gs" = "$stage" ] && [ "$gc" = "$cause" ] && [ "$pr" = repair ] && [ "$rp" = "$repair" ]'
  local -a argv
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  trace "$tmp/n.json" "${argv[@]}"
  ok "$label: after the next command ($next) $stage is ok" '[ "$(row_verdict "$stage" "$tmp/n.json")" = ok ]'
}

# ---- scale_layout_mismatch: block scales stored in padded rows ----
for fmt in nvfp4 modelopt; do
  for fm in "llama layers.1.self_attn.o_proj 8 64 4" "deepseek_v3 layers.0.self_attn.q_b_proj 4 96 3"; do
    read -r fam mod mult n nb <<<"$fm"
    stride=$(( (nb + mult - 1) / mult * mult ))
    l="$fam/$fmt scale-row-stride=$mult@$mod"
    plant "$tmp/ck" "$conf/$fam/$fmt" "scale-row-stride=$mult@$mod" || continue
    ok "$l: the side file records rows of $stride bytes" 'grep -q "\"row_bytes\": $stride" "$tmp/ck.faults.json"'
    "$bin" inspect "$tmp/ck" --json >"$tmp/i.json" 2>"$tmp/err"; r=$?
    # the finding: from its code to the end of its coordinates, on one line
    one=$(grep -B1 -A40 '"code": "scale_layout_mismatch"' "$tmp/i.json" | sed '/"block_col"/q' | tr -d '\n')
    ok "$l: inspect exit 1 (got $r)" '[ $r -eq 1 ]'
    ok "$l: scale_layout_mismatch (error) at model.$mod naming its weight_scale, [$n, $stride] for K/16 = $nb, row 1" \
      '[[ "$one" == *"\"severity\": \"error\""* && "$one" == *"\"module\": \"model.$mod\""* && "$one" == *"\"tensor\": \"model.$mod.weight_scale\""* && "$one" == *"stored as [$n, $stride]"* && "$one" == *"K/16 = $nb"* && "$one" == *"\"block_row\": 1"* ]]'
    # both paths read the same bytes: without the original the trace can only list the static finding
    "$bin" trace --force "$tmp/ck" "${be[@]}" --out "$tmp/t.h5" >"$tmp/s.txt" 2>"$tmp/err"; r=$?
    ok "$l: trace without the original exits $r (want 0) and lists the static finding" \
      '[ $r -eq 0 ] && grep -q "scale_layout_mismatch *model.$mod" "$tmp/s.txt"'
    expect "$l" "$mod" scale_layout_mismatch scale_layout "$tmp/ck" --reference-checkpoint "$conf/$fam/bf16"
  done
done
# synth's own checkpoints (its writer pads the tensor it writes), the original next to them
for ff in "llama modelopt layers.0.self_attn.o_proj" "deepseek_v3 compressed-tensors layers.0.self_attn.q_b_proj"; do
  read -r fam fmt mod <<<"$ff"
  rm -rf "$tmp/s" "$tmp/s.faults.json"
  if "$bin" synth "$tmp/s" --recipe "$fam" --size tiny --format "$fmt" --inject "scale-row-stride=128@$mod" >/dev/null 2>"$tmp/err"; then
    expect "synth $fam $fmt scale-row-stride=128@$mod" "$mod" scale_layout_mismatch scale_layout "$tmp/s" --reference-checkpoint "$tmp/s/original"
  else
    echo "FAIL: synth $fam $fmt: $(cat "$tmp/err")"; fail=$((fail + 1))
  fi
done

# ---- scale_layout_mismatch: dense block scales read with the padded row stride ----
printf 'stack: padded\ndescription: dense block scales read in rows of round_up(K/16, 4)\nblock_scale_layout: padded_128x4\n' >"$tmp/stack-padded.yaml"
for fmt in nvfp4 modelopt; do
  for fam in deepseek_v3 deepseek_v4; do # q_b_proj: K/16 = 3 (V3), wq_b (V4) not a multiple of 4 either
    expect "$fam/$fmt block_scale_layout: padded_128x4" layers.0.self_attn.q_b_proj scale_layout_mismatch block_scale_linear \
      "$conf/$fam/$fmt" --stack "$tmp/stack-padded.yaml"
  done
  trace "$tmp/o.json" "$conf/llama/$fmt" --stack "$tmp/stack-padded.yaml"
  ok "llama/$fmt: every K/16 a multiple of 4, padded rows read the same bytes: exit $rc (want 0)" '[ $rc -eq 0 ]'
done
trace "$tmp/o.json" "$conf/deepseek_v3/nvfp4" --override layers.0.self_attn.q_b_proj.block_scale_layout=3
ok "the switch block_scale_layout=3 alone: exit 1 at q_b_proj with scale_layout_mismatch (got $rc)" \
  '[ $rc -eq 1 ] && [ "$(json_field first_divergence "$tmp/o.json")" = layers.0.self_attn.q_b_proj ] && [ "$(json_field cause "$tmp/o.json")" = scale_layout_mismatch ]'

# ---- fp16_overflow: a module whose output passes 65504 ----
for fmt in nvfp4 modelopt; do
  for fm in "llama layers.1.mlp.down_proj" "deepseek_v3 layers.1.mlp.shared_experts.down_proj"; do
    read -r fam mod <<<"$fm"
    l="$fam/$fmt weight-mul=1e5@$mod"
    trace "$tmp/o.json" "$conf/$fam/$fmt" --stack vllm-fp16
    ok "$fam/$fmt: the clean fixture under vllm-fp16 (outputs written as FP16) is clean (exit $rc)" '[ $rc -eq 0 ]'
    plant "$tmp/ck" "$conf/$fam/$fmt" "weight-mul=1e5@$mod" || continue
    ok "$l: the side file records the new global" 'grep -q "\"stored\": [0-9]" "$tmp/ck.faults.json"'
    trace "$tmp/o.json" "$tmp/ck"
    ok "$l: clean under the default stack (BF16 holds 1e5; exit $rc)" '[ $rc -eq 0 ]'
    expect "$l --stack vllm-fp16" "$mod" fp16_overflow epilogue_fp32 "$tmp/ck" --stack vllm-fp16
    trace "$tmp/o.json" "$tmp/ck" --stack vllm-fp16
    ok "$l: Inf in the production output of $mod" 'grep -q "production output has [0-9]* NaN and [1-9][0-9]* Inf" "$tmp/o.json"'
  done
done
# synth's own checkpoint (its writer applies the fault): ModelOpt's weight_scale_2 x F
rm -rf "$tmp/s" "$tmp/s.faults.json"
if "$bin" synth "$tmp/s" --recipe llama --size tiny --format modelopt --inject weight-mul=1e5@layers.1.mlp.down_proj >/dev/null 2>"$tmp/err"; then
  trace "$tmp/o.json" "$tmp/s"
  ok "synth llama modelopt weight-mul=1e5: clean under the default stack (exit $rc)" '[ $rc -eq 0 ]'
  expect "synth llama modelopt weight-mul=1e5 --stack vllm-fp16" layers.1.mlp.down_proj fp16_overflow epilogue_fp32 "$tmp/s" --stack vllm-fp16
else
  echo "FAIL: synth llama modelopt weight-mul: $(cat "$tmp/err")"; fail=$((fail + 1))
fi

# ---- runtime-only classes under their stacks, on the writers' fixtures ----
for fmt in nvfp4 modelopt; do
  for fam in llama deepseek_v3; do
    expect "$fam/$fmt sglang-megamoe-w31" layers.0.mlp gate_up_order gate_up_swap "$conf/$fam/$fmt" --stack sglang-megamoe-w31
    expect "$fam/$fmt vllm-tp8-unaligned" layers.0.self_attn.o_proj padding_scale_contamination zero_padding \
      "$conf/$fam/$fmt" --stack vllm-tp8-unaligned
  done
  expect "deepseek_v3/$fmt sglang-marlin-moe-twice" layers.1.mlp.experts moe_output_scale routed_scaling_once \
    "$conf/deepseek_v3/$fmt" --stack sglang-marlin-moe-twice
  expect "deepseek_v4/$fmt sglang-marlin-moe-twice" layers.0.mlp.experts moe_output_scale routed_scaling_once \
    "$conf/deepseek_v4/$fmt" --stack sglang-marlin-moe-twice
done

# ---- bad input ----
nope() { # label want synth-args...
  local label="$1" want="$2"; shift 2
  rm -rf "$tmp/x"
  "$bin" synth "$tmp/x" "$@" >/dev/null 2>"$tmp/err"; local r=$?
  ok "$label: exit 2 naming '$want' (got $r: $(head -c 200 "$tmp/err"))" '[ $r -eq 2 ] && grep -q -- "$want" "$tmp/err"'
}
src=(--from "$conf/llama/nvfp4")
nope "row stride 3 (not a power of two)" "a power of two from 2 to 128" "${src[@]}" --inject scale-row-stride=3@layers.1.self_attn.o_proj
nope "row stride 4 on K/16 = 4" "already a multiple of 4" "${src[@]}" --inject scale-row-stride=4@layers.1.self_attn.o_proj
nope "row stride 256" "not 256" "${src[@]}" --inject scale-row-stride=256@layers.1.self_attn.o_proj
nope "a scale fault after the row stride" "give scale-row-stride last" "${src[@]}" \
  --inject scale-row-stride=8@layers.1.self_attn.o_proj --inject scale-pow2@layers.1.self_attn.o_proj
nope "weight-mul=0" "not a finite number > 0" "${src[@]}" --inject weight-mul=0@layers.1.mlp.down_proj
nope "weight-mul without a factor" "needs a factor" "${src[@]}" --inject weight-mul@layers.1.mlp.down_proj
for ovr in layers.0.self_attn.q_proj.block_scale_layout=4 model.layers.0.self_attn.q_proj.scale_layout=4 \
           layers.0.self_attn.q_proj.epilogue_fp16=3; do
  trace "$tmp/b.json" "$conf/llama/nvfp4" --override "$ovr"
  ok "--override $ovr: exit 2 naming it (got $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 2 ] && grep -qF "$ovr" "$tmp/err"'
done
printf 'stack: bad\nepilogue: fp16_outputs\n' >"$tmp/bad.yaml"
trace "$tmp/b.json" "$conf/llama/nvfp4" --stack "$tmp/bad.yaml"
ok "profile 'epilogue: fp16_outputs': exit 2 naming file:line (got $rc)" '[ $rc -eq 2 ] && grep -qF "$tmp/bad.yaml:2:" "$tmp/err"'
echo "class triggers: $pass passed, $fail failed"
[ $fail -eq 0 ]
