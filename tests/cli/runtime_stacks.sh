#!/usr/bin/env bash
# Runtime behaviours of serving stacks (issue 18), each a stack-profile knob, a per-stage override
# and a cause the diagnosis proves by repair:
#   gate_up_order    gate_up_order: w31      <stage>.gate_up_swap=0|1     (sglang MegaMoE, C04)
#   moe_output_scale routed_scaling: twice   <stage>.routed_scaling=0|1|2 (sglang Marlin MoE, C16)
#   fp16_overflow    epilogue: fp16          <stage>.epilogue_fp16=0|1    (vLLM Marlin FP16, C18)
# On healthy synth checkpoints of DeepSeek-V4, DeepSeek-V3 and Llama in both formats:
#   - under the default stack the checkpoint is clean (exit 0);
#   - under the shipped profile with the knob: exit 1, first divergence at the stage that has the
#     behaviour, the cause proven by repair (diagnosis[0].proof "repair"), with the figures the
#     behaviour gives (the projections' own rows clean under a gate/up swap; the routed output 2.5x
#     (the factor) too large or too small; Inf in the output of the FP16 epilogue);
#   - the printed next command, run as given, makes that stage ok;
#   - the per-stage override alone, under the default stack, breaks that stage the same way.
# The routed scaling only exists where the family has routed experts (not Llama: clean there).
# Bad input: switch values and profile values outside their sets are exit 2 naming them.
#   usage: [FAMILIES="llama ..."] runtime_stacks.sh NVFP4DBG
set -u
bin="$1"
be="${ND_TEST_BACKEND:-cpu}"
read -r -a families <<<"${FAMILIES:-deepseek_v4 deepseek_v3 llama}"
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/stacks_lib.sh"
# a field of the isolated row named $1 in the trace JSON $3 ($2: verdict, ref_amax, prod_amax, ...)
row_field() { awk -v want="$1" -v key="$2" '
  function val(s) { sub(/^[^:]*: "?/, "", s); sub(/"?,?$/, "", s); return s }
  /^ *"name":/ { n = val($0) }
  /^ *"mode":/ { m = val($0) }
  $0 ~ "^ *\"" key "\":" && n == want && m == "isolated" { print val($0); exit }' "$3"; }
# every isolated row under prefix $1 (its projections) is ok in $2
projections_ok() { awk -v p="$1." '
  function val(s) { sub(/^[^:]*: "?/, "", s); sub(/"?,?$/, "", s); return s }
  /^ *"name":/ { n = val($0) }
  /^ *"mode":/ { m = val($0) }
  /^ *"verdict":/ { if (m == "isolated" && index(n, p) == 1) { seen++; if (val($0) != "ok") bad++ } }
  END { exit !(seen >= 3 && bad == 0) }' "$2"; }


# family -> stages: the first SwiGLU block, the first routed experts ("-" none), the first NVFP4 linear
stages() {
  case "$1" in
    deepseek_v4) echo "layers.0.mlp.experts layers.0.mlp.experts layers.0.self_attn.q_a_proj" ;;
    deepseek_v3) echo "layers.0.mlp layers.1.mlp.experts layers.0.self_attn.q_a_proj" ;;
    llama) echo "layers.0.mlp - layers.0.self_attn.q_proj" ;;
  esac
}

# the never variant of the routed scaling, as a profile file (a stack may also be given by path)
cat >"$tmp/stack-never.yaml" <<'EOF'
stack: routed-never
description: the routed scaling factor never applied (sglang NPU renormalize path before PR #31449)
routed_scaling: never
EOF

# expect: label ckpt stack stage cause -> checks the diagnosis and the next command
expect() {
  local label="$1" ck="$2" stack="$3" stage="$4" cause="$5" j="$tmp/o.json"
  stack_trace "$j" "$ck" "$stack"
  local dstage
  dstage=$(json_field stage "$j")
  ok "$label: exit 1 at $stage, cause $cause proven by repair (got exit $rc, '$d_stage' '$d_cause' proof '$d_proof')" \
    '[ $rc -eq 1 ] && [ "$d_stage" = "$stage" ] && [ "$dstage" = "$stage" ] && [ "$d_cause" = "$cause" ] && [ "$d_proof" = repair ]'
  case "$cause" in
    gate_up_order)
      ok "$label: the projections of $stage are clean, the block is not" 'projections_ok "$stage" "$j"' ;;
    moe_output_scale)
      # the output is off by the factor: amax about f (or 1/f) times the reference's; the
      # magnitude part of the error sqrt(rel_l2^2 - (1 - cos^2)) is |f - 1| (or 1 - 1/f)
      local ra pa c e f="${FACTOR:-2.5}" k
      ra=$(row_field "$stage" ref_amax "$j"); pa=$(row_field "$stage" prod_amax "$j")
      c=$(row_field "$stage" cosine "$j"); e=$(row_field "$stage" rel_l2 "$j")
      if [ "$stack" = sglang-marlin-moe-twice ]; then k="$f"; else k=$(awk -v f="$f" 'BEGIN{print 1 / f}'); fi
      ok "$label: routed output amax $pa is about $k x the reference's $ra" \
        'awk -v r="$ra" -v p="$pa" -v k="$k" "BEGIN{exit !(p > 0.8 * k * r && p < 1.25 * k * r)}"'
      ok "$label: the scale part of the error (cosine $c, rel L2 $e) is |$k - 1| within 0.1" \
        'awk -v c="$c" -v e="$e" -v k="$k" "BEGIN{m = sqrt(e * e - (1 - c * c)); d = k - 1; if (d < 0) d = -d; exit !(m > d - 0.1 && m < d + 0.1)}"'
      ;;
    fp16_overflow)
      ok "$label: Inf in the production output of $stage" 'grep -q "production output has [0-9]* NaN and [1-9][0-9]* Inf" "$j"' ;;
  esac
  # the next command as printed: that stage is ok
  next_clears "$label" "$ck" "$stack" "$stage"
}

# override: label ckpt NAME=VALUE stage cause -> the switch alone breaks the stage under the default stack
override() {
  local label="$1" ck="$2" ovr="$3" stage="$4" cause="$5" j="$tmp/v.json"
  trace "$j" "$ck" --override "$ovr"
  local got_stage got_cause
  got_stage=$(json_field first_divergence "$j"); got_cause=$(json_field cause "$j")
  ok "$label: --override $ovr alone: exit 1 at $stage with $cause (got exit $rc, '$got_stage' '$got_cause')" \
    '[ $rc -eq 1 ] && [ "$got_stage" = "$stage" ] && [ "$got_cause" = "$cause" ] && [ "$(json_field proof "$j")" = repair ]'
}

for fam in "${families[@]}"; do
  read -r mlp moe lin <<<"$(stages "$fam")"
  for fmt in compressed-tensors modelopt; do
    tiny_clean "$fam" "$fmt" || continue
    expect "$l gate_up_order" "$ck" sglang-megamoe-w31 "$mlp" gate_up_order
    expect "$l fp16_overflow" "$ck" vllm-marlin-fp16 "$lin" fp16_overflow
    if [ "$moe" = - ]; then
      trace "$tmp/o.json" "$ck" --stack sglang-marlin-moe-twice
      ok "$l: no routed experts, so the routed scaling knob changes nothing (exit $rc)" '[ $rc -eq 0 ]'
    else
      expect "$l moe_output_scale (twice)" "$ck" sglang-marlin-moe-twice "$moe" moe_output_scale
      expect "$l moe_output_scale (never)" "$ck" "$tmp/stack-never.yaml" "$moe" moe_output_scale
    fi
    if [ "$fmt" = compressed-tensors ]; then
      override "$l" "$ck" "$mlp.gate_up_swap=1" "$mlp" gate_up_order
      override "$l" "$ck" "$lin.epilogue_fp16=1" "$lin" fp16_overflow
      [ "$moe" != - ] && override "$l" "$ck" "$moe.routed_scaling=2" "$moe" moe_output_scale
    fi
  done
done

# DeepSeek-V4-Flash's routed_scaling_factor is 1.5 (Pro and V3: 2.5): applied twice it gives a 1.5x
# output, under the 2x amax rule; the block row's scale rule (probes/verdict.c) still finds it
if [[ " ${families[*]} " == *" deepseek_v4 "* ]]; then
  ck="$tmp/v4-flash"
  cp -r "$tmp/deepseek_v4-compressed-tensors" "$ck"
  sed -i 's/"routed_scaling_factor": 2.5/"routed_scaling_factor": 1.5/' "$ck/config.json"
  ok "v4 factor 1.5: config rewritten" 'grep -q "\"routed_scaling_factor\": 1.5" "$ck/config.json"'
  trace "$tmp/d.json" "$ck"
  ok "v4 factor 1.5: clean under the default stack (exit $rc)" '[ $rc -eq 0 ]'
  FACTOR=1.5 expect "v4 factor 1.5 moe_output_scale (twice)" "$ck" sglang-marlin-moe-twice layers.0.mlp.experts moe_output_scale
  FACTOR=1.5 expect "v4 factor 1.5 moe_output_scale (never)" "$ck" "$tmp/stack-never.yaml" layers.0.mlp.experts moe_output_scale
fi

# bad input: a switch value outside its set, a profile value outside its set (file:line), booleans
ck="$tmp/${families[0]}-compressed-tensors"
read -r mlp moe lin <<<"$(stages "${families[0]}")"
for ovr in "$mlp.gate_up_swap=2" "$lin.epilogue_fp16=0.5" "layers.0.mlp.experts.routed_scaling=3"; do
  trace "$tmp/b.json" "$ck" --override "$ovr"
  ok "--override $ovr: exit 2 naming it (exit $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 2 ] && grep -qF "$ovr" "$tmp/err"'
done
for kv in "gate_up_order: w12" "routed_scaling: thrice" "epilogue: fp32" "reciprocal_input: ture" "reciprocal_input: 2"; do
  printf 'stack: bad\ndescription: a value outside its set on line 3\n%s\n' "$kv" >"$tmp/bad.yaml"
  trace "$tmp/b.json" "$ck" --stack "$tmp/bad.yaml"
  ok "profile '$kv': exit 2 naming file:line (exit $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 2 ] && grep -qF "$tmp/bad.yaml:3:" "$tmp/err"'
done
for kv in "reciprocal_input: No" "reciprocal_input: FALSE" "reciprocal_input: 0"; do
  printf 'stack: b\n%s\n' "$kv" >"$tmp/b.yaml"
  trace "$tmp/b.json" "$ck" --stack "$tmp/b.yaml"
  ok "profile '$kv' is false: clean (exit $rc)" '[ $rc -eq 0 ]'
done
for kv in "reciprocal_input: YES" "reciprocal_input: True" "reciprocal_input: 1"; do
  printf 'stack: b\n%s\n' "$kv" >"$tmp/b.yaml"
  trace "$tmp/b.json" "$ck" --stack "$tmp/b.yaml"
  ok "profile '$kv' is true: the input scale taken as its reciprocal (exit $rc, $(json_field cause "$tmp/b.json"))" \
    '[ $rc -eq 1 ] && [ "$(json_field cause "$tmp/b.json")" = scale_inverted ]'
done
echo "runtime stacks: $pass passed, $fail failed"
[ $fail -eq 0 ]
