#!/usr/bin/env bash
# The static classes of issue 18 on checkpoints nvfp4dbg did not write (golden/conformance: Llama and
# DeepSeek-V3, quantized by llmcompressor and by ModelOpt), each planted with synth --from:
#   config-ignore, dequantize        inspect: quant_config_mismatch (error, breaks every profile) at the
#                                    module, exit 1; trace --stack vllm lists it among its stack findings
#   scale-renamed, weight-scale-renamed, scale-missing-expert
#                                    inspect: scale_not_loaded naming the orphan tensor; trace: first
#                                    divergence at the stage, cause scale_not_loaded proven by the repair
#                                    that loads the orphan's (or the siblings') value, and the printed next
#                                    command clears the stage
#   quantize (lm_head, a router gate) inspect: quant_config_mismatch (the config ignores the role), exit 1
#   quantize-unignored (the same, dropped from the ignore list) inspect: precision_policy_violation, exit 1
#   weight-global-scale-mul=4e-6     inspect: scale_underflow with the subnormal share and the first
#                                    block's coordinates; trace --reference-checkpoint: scale_underflow,
#                                    static fact
#   inspect --tp N                   partial 16-blocks are errors naming the row-parallel module and the
#                                    block column where rank 1 begins; tile remainders are warnings
# and bad uses of the faults exit 2 naming the module.
#   usage: static_classes.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
conf="$root/golden/conformance"
. "$(dirname "$0")/../lib.sh"
be=(--backend "${ND_TEST_BACKEND:-cpu}")

plant() { # family format fault@module -> $tmp/ck
  rm -rf "$tmp/ck" "$tmp/ck.faults.json"
  "$bin" synth "$tmp/ck" --from "$conf/$1/$2" --inject "$3" >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: synth --from $1/$2 $3: $(cat "$tmp/err")"; fail=$((fail + 1)); return 1; }
}

# inspect --json: the finding of CODE at MODULE (one line per finding: code module tensor severity)
findings() { "$bin" inspect "$tmp/ck" --json >"$tmp/i.json" 2>"$tmp/err"; echo $? >"$tmp/rc"
  tr -d '\n' <"$tmp/i.json" | sed 's/}, *{/}\n{/g' | grep '"code"' |
    sed -n 's/.*"severity": "\([a-z]*\)".*"code": "\([a-z_0-9]*\)".*"module": "\([^"]*\)".*"tensor": "\([^"]*\)".*/\2 \3 \4 \1/p' >"$tmp/f.txt"; }
has() { grep -q "^$1 $2 " "$tmp/f.txt"; }

static_case() { # family format fault module-in-ckpt code severity [tensor [inspect exit]]
  local fam="$1" fmt="$2" fault="$3" mod="$4" code="$5" sev="$6" tensor="${7:-}" want_rc="${8:-}"
  plant "$fam" "$fmt" "$fault@${mod#model.}" || return
  findings
  local rc; rc=$(cat "$tmp/rc")
  [ -z "$want_rc" ] && { want_rc=0; [ "$sev" = error ] && want_rc=1; }
  ok "$fam/$fmt $fault: inspect exit $rc, want $want_rc" '[ "$rc" -eq $want_rc ]'
  ok "$fam/$fmt $fault: $code ($sev) at $mod" 'grep -q "^$code $mod .* $sev\$" "$tmp/f.txt"'
  [ -n "$tensor" ] && ok "$fam/$fmt $fault: the finding names $tensor" 'grep -q "^$code $mod $tensor " "$tmp/f.txt"'
  # every finding says which stacks it breaks; an error here breaks every shipped profile
  [ "$sev" = error ] && ok "$fam/$fmt $fault: breaks exact and vllm" \
    'tr -d "\n " <"$tmp/i.json" | grep -q "\"code\":\"$code\",\"module\":\"$mod\"[^}]*\"breaks_stacks\":\[[^]]*\"exact\"[^]]*\"vllm\""'
}

trace_case() { # family format fault module stage [extra trace args]
  local fam="$1" fmt="$2" fault="$3" mod="$4" stage="$5"; shift 5
  "$bin" trace --force "$tmp/ck" "${be[@]}" --json --out "$tmp/t.h5" "$@" >"$tmp/o.json" 2>"$tmp/err"
  local rc=$? got_stage got_cause proof
  got_stage=$(json_field first_divergence "$tmp/o.json"); got_cause=$(json_field cause "$tmp/o.json")
  proof=$(json_field proof "$tmp/o.json")
  echo "$rc $got_stage $got_cause $proof" >"$tmp/trace_result"
}

for fmt in nvfp4 modelopt; do
  for fam in llama deepseek_v3; do
    case $fam in
      llama) lin=model.layers.1.self_attn.o_proj; stage=layers.1.self_attn.o_proj; role=lm_head ;;
      deepseek_v3) lin=model.layers.1.self_attn.q_b_proj; stage=layers.1.self_attn.q_b_proj; role=model.layers.1.mlp.gate ;;
    esac
    if [ $fmt = nvfp4 ]; then own_in=input_global_scale; other_in=input_scale; other_w=weight_scale_2
    else own_in=input_scale; other_in=input_global_scale; other_w=weight_global_scale; fi

    # quant_config_mismatch: ignored but quantized, quantized but stored BF16
    static_case $fam $fmt config-ignore $lin quant_config_mismatch error
    "$bin" trace --force "$tmp/ck" "${be[@]}" --stack vllm --json --out "$tmp/t.h5" >"$tmp/o.json" 2>/dev/null
    ok "$fam/$fmt config-ignore: trace --stack vllm lists quant_config_mismatch among its stack findings" \
      'tr -d "\n " <"$tmp/o.json" | grep -q "\"stack_findings\":\[[^]]*\"code\":\"quant_config_mismatch\",\"module\":\"$lin\""'
    static_case $fam $fmt dequantize $lin quant_config_mismatch error "$lin.weight"

    # scale_not_loaded: the input scale / weight global under the other format's name
    for w in in wt; do
      if [ $w = in ]; then fault=scale-renamed; orphan="$lin.$other_in"; else fault=weight-scale-renamed; orphan="$lin.$other_w"; fi
      static_case $fam $fmt $fault $lin scale_not_loaded error "$orphan"
      trace_case $fam $fmt $fault $lin $stage
      read -r rc got_stage got_cause proof <"$tmp/trace_result"
      ok "$fam/$fmt $fault: trace exit $rc at '$got_stage' cause '$got_cause' proof '$proof' (want 1 $stage scale_not_loaded repair)" \
        '[ "$rc" = 1 ] && [ "$got_stage" = "$stage" ] && [ "$got_cause" = scale_not_loaded ] && [ "$proof" = repair ]'
      ok "$fam/$fmt $fault: the repair loads the orphan's value" 'grep -q "\"repair\": \"load_orphan_scale\"" "$tmp/o.json"'
      next=$(grep -m1 '"next_command": "' "$tmp/o.json" | sed 's/.*: "\(.*\)",*/\1/')
      read -r -a argv <<<"${next#nvfp4dbg trace }"
      "$bin" trace --force "${argv[@]}" "${be[@]}" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
      ok "$fam/$fmt $fault: the next command clears $stage" \
        'grep -A40 "\"name\": \"$stage\"" "$tmp/n.json" | grep -m1 "\"verdict\"" | grep -q "\"ok\""'
    done

    # a high-precision role quantized: where the config ignores it (the fixtures' configs do), config and
    # tensors contradict each other: quant_config_mismatch (issue 33's miss: it was named
    # precision_policy_violation); quantized with the config saying so: precision_policy_violation
    static_case $fam $fmt quantize $role quant_config_mismatch error
    static_case $fam $fmt quantize-unignored $role precision_policy_violation error

    # scale_underflow: block scales pushed into E4M3 subnormals, codes re-quantized
    # (exit 1: a weight global that small is also below 1 / above 1 in the format's convention, an error)
    static_case $fam $fmt weight-global-scale-mul=0.000004 $lin scale_underflow warning "$lin.weight_scale" 1
    ok "$fam/$fmt subnormal scales: the global is also scale_convention" 'has scale_convention $lin' 
    ok "$fam/$fmt subnormal scales: coordinates of the first subnormal block" \
      'tr -d "\n " <"$tmp/i.json" | grep -q "\"code\":\"scale_underflow\",\"module\":\"$lin\"[^}]*\"coord\":{\"block_row\":[0-9]*,\"block_col\":[0-9]*}"'
    share=$(tr -d '\n ' <"$tmp/i.json" | sed "s/.*\"module\":\"$lin\",\"role\"//" | grep -o '"subnormal_share":[0-9.e-]*' | head -1)
    ok "$fam/$fmt subnormal scales: the share per weight in the audit ($share)" '[[ "$share" =~ ^\"subnormal_share\":0\.[1-9] ]]'
    trace_case $fam $fmt weight-global-scale-mul $lin $stage --reference-checkpoint "$conf/$fam/bf16"
    read -r rc got_stage got_cause proof <"$tmp/trace_result"
    ok "$fam/$fmt subnormal scales: trace exit $rc at '$got_stage' cause '$got_cause' proof '$proof' (want 1 $stage scale_underflow static)" \
      '[ "$rc" = 1 ] && [ "$got_stage" = "$stage" ] && [ "$got_cause" = scale_underflow ] && [ "$proof" = static ]'
    # a global 1e-6 of its value: every block scale flushes to zero (compressed-tensors stores its eps
    # 0.125 instead, so no scale looks subnormal) and every code is 0; the reference path dequantizes
    # the same zeros, the original shows the loss: scale_underflow, static, on the zero-code blocks
    # (round 22: "unknown" / accumulated_error)
    plant $fam $fmt "weight-global-scale-mul=0.000001@${lin#model.}" || continue
    trace_case $fam $fmt weight-global-scale-mul $lin $stage --reference-checkpoint "$conf/$fam/bf16"
    read -r rc got_stage got_cause proof <"$tmp/trace_result"
    ok "$fam/$fmt global x1e-6 (all codes 0): trace exit $rc at '$got_stage' cause '$got_cause' proof '$proof' (want 1 $stage scale_underflow static)" \
      '[ "$rc" = 1 ] && [ "$got_stage" = "$stage" ] && [ "$got_cause" = scale_underflow ] && [ "$proof" = static ] && grep -q "hold only zero codes" "$tmp/o.json"'
  done

  # a routed expert without the input scale its siblings have (DeepSeek-V3: expert 3 is routed to)
  ex=model.layers.1.mlp.experts.3.down_proj
  static_case deepseek_v3 $fmt scale-missing-expert $ex scale_not_loaded error
  trace_case deepseek_v3 $fmt scale-missing-expert $ex layers.1.mlp.experts.3.down_proj
  read -r rc got_stage got_cause proof <"$tmp/trace_result"
  ok "deepseek_v3/$fmt scale-missing-expert: trace exit $rc at '$got_stage' cause '$got_cause' proof '$proof'" \
    '[ "$rc" = 1 ] && [ "$got_stage" = layers.1.mlp.experts.3.down_proj ] && [ "$got_cause" = scale_not_loaded ] && [ "$proof" = repair ]'
  ok "deepseek_v3/$fmt scale-missing-expert: the siblings' value" 'grep -q "\"repair\": \"input_scale_from_sibling\"" "$tmp/o.json"'
done

# --tp: DeepSeek-V3's down_proj is [64 x 96]: at 8 ranks K/8 = 12 is a partial block
"$bin" inspect "$conf/deepseek_v3/nvfp4" --tp 8 --json >"$tmp/tp.json" 2>"$tmp/err"; rc=$?
ok "--tp 8: exit $rc, want 1" '[ $rc -eq 1 ]'
ok "--tp 8: down_proj's partial block (rank 1 begins at block column 0)" \
  'tr -d "\n " <"$tmp/tp.json" | grep -q "\"severity\":\"error\",\"code\":\"padding_scale_contamination\",\"module\":\"model.layers.0.mlp.down_proj\"[^}]*\"coord\":{\"block_row\":-1,\"block_col\":0}"'
# the text names the same coordinates as --json (round 22: a row-parallel finding printed a stray 0
# after the tensor name, a column-parallel one a 0 after its row)
"$bin" inspect "$conf/deepseek_v3/nvfp4" --tp 8 >"$tmp/tp8.txt" 2>"$tmp/err"
ok "--tp 8 text: down_proj's scale at block col 0, no row" \
  'grep -q "^          at: model.layers.0.mlp.down_proj.weight_scale block col 0$" "$tmp/tp8.txt" && ! grep -q "weight_scale0" "$tmp/tp8.txt"'
"$bin" inspect "$conf/deepseek_v3/nvfp4" --tp 2 >"$tmp/tp.txt" 2>"$tmp/err"; rc=$?
ok "--tp 2: exit $rc, want 0 (whole blocks; tile remainders are warnings)" '[ $rc -eq 0 ]'
ok "--tp 2: the 128-row scale swizzle remainder of a column-parallel projection" \
  'grep -q "warning padding_scale_contamination model.layers.0.mlp.gate_proj: .*column-parallel.*\[48 x 64\].*128x4" "$tmp/tp.txt"'
"$bin" inspect "$conf/llama/nvfp4" --tp 0 >/dev/null 2>&1; rc=$?
ok "--tp 0: exit $rc, want 2" '[ $rc -eq 2 ]'
# the healthy fixtures stay clean of the new codes
for d in "$conf"/llama/nvfp4 "$conf"/llama/modelopt "$conf"/deepseek_v3/nvfp4 "$conf"/deepseek_v3/modelopt; do
  "$bin" inspect "$d" --json >"$tmp/h.json" 2>&1; rc=$?
  ok "${d#"$conf"/}: exit $rc and no audit finding" \
    '[ $rc -eq 0 ] && ! grep -qE "quant_config_mismatch|scale_not_loaded|precision_policy_violation|scale_underflow" "$tmp/h.json"'
done

# bad uses: exit 2 naming the module
bad() { # family format spec words
  local want="$4"
  rm -rf "$tmp/bad"
  "$bin" synth "$tmp/bad" --from "$conf/$1/$2" --inject "$3" >/dev/null 2>"$tmp/err"; local rc=$?
  ok "synth --from $1/$2 $3: exit $rc (want 2), '$want' in: $(cat "$tmp/err")" '[ $rc -eq 2 ] && grep -q "$want" "$tmp/err"'
}
bad llama nvfp4 config-ignore@lm_head "is not quantized"
bad llama nvfp4 quantize@layers.0.self_attn.o_proj "not an unquantized"
bad llama nvfp4 scale-missing-expert@layers.0.self_attn.o_proj "not a routed expert"
bad llama modelopt dequantize@lm_head "not an NVFP4 linear"
bad llama nvfp4 config-ignore@layers.9.mlp.up_proj "no module"
rm -rf "$tmp/bad"
"$bin" synth "$tmp/bad" --recipe llama --size tiny --inject config-ignore@layers.0.self_attn.o_proj >/dev/null 2>"$tmp/err"; rc=$?
ok "synth without --from: config-ignore exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q -- "--from" "$tmp/err"'

echo "static classes on foreign checkpoints: $pass passed, $fail failed"
[ $fail -eq 0 ]
