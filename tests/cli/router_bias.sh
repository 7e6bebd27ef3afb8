#!/usr/bin/env bash
# The router's correction bias held in BF16 (issue 18, stack key router_bias: bf16; profile
# sglang-router-bias-bf16, field report C33). synth --from plants router-bias-offset=64 on a
# router: every bias plus 64, which leaves the FP32 selection as it was (one offset for every
# expert) but puts the biases where BF16's step (0.5) is larger than their spread. On the
# llmcompressor and ModelOpt fixtures of DeepSeek-V3 and DeepSeek-V4 (32 tokens):
#   - the default stack traces it clean; under the per-stage switch <router>.router_bias_bf16=1
#     the router stage (isolated: same input) picks other experts, the first divergence is that
#     stage, cause router_precision proven by the repair that keeps the bias in FP32, and the
#     printed next command makes it ok;
#   - the shipped profile does the same on DeepSeek-V3 (its fused-shard rules are those of SGLang);
#   - the unplanted fixtures are clean under the profile; bad values are exit 2.
#   usage: router_bias.sh NVFP4DBG SOURCE_ROOT
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
be="${ND_TEST_BACKEND:-cpu}"
toks=3,10,17,24,31,38,45,52,59,66,73,80,87,94,101,108,115,122,129,136,143,150,157,164,171,178,185,192,199,206,213,220
first() { grep -m1 "\"$1\":" "$2" | sed 's/.*: "\(.*\)",*/\1/'; }
verdict_of() { grep -A40 "\"name\": \"$1\"" "$2" | grep -m1 '"verdict"' | sed 's/.*: "\(.*\)",*/\1/'; }
tr_() { local out="$1"; shift; "$bin" trace --force "$@" --tokens "$toks" --backend "$be" --json --out "$tmp/t.h5" >"$out" 2>/dev/null; rc=$?; }
for fam in deepseek_v3 deepseek_v4; do
  mod=layers.1.mlp.gate; [ $fam = deepseek_v4 ] && mod=layers.1.ffn.gate
  stage=layers.1.mlp.gate
  for fmt in nvfp4 modelopt; do
    ck="$tmp/$fam-$fmt"; l="$fam/$fmt"
    "$bin" synth "$ck" --from "$root/golden/conformance/$fam/$fmt" --inject "router-bias-offset=64@$mod" >/dev/null 2>"$tmp/err" ||
      { echo "FAIL synth $l: $(cat "$tmp/err")"; fail=$((fail + 1)); continue; }
    tr_ "$tmp/a.json" "$ck"
    ok "$l: offset bias under the default stack: exit $rc (want 0)" '[ $rc -eq 0 ]'
    tr_ "$tmp/b.json" "$ck" --override "$stage.router_bias_bf16=1"
    ok "$l: BF16 bias at $stage: exit $rc, '$(first first_divergence "$tmp/b.json")' '$(first cause "$tmp/b.json")' '$(first proof "$tmp/b.json")'" \
       '[ $rc -eq 1 ] && [ "$(first first_divergence "$tmp/b.json")" = "$stage" ] && [ "$(first cause "$tmp/b.json")" = router_precision ] && [ "$(first proof "$tmp/b.json")" = repair ]'
    ok "$l: the evidence is the routing, before and after" 'grep -q "restores the stage: top-k agreement 0\.[0-9]* -> 1\.000" "$tmp/b.json"'
    next=$(grep -m1 '"next_command": "' "$tmp/b.json" | sed 's/.*: "\(.*\)",*/\1/')
    read -r -a argv <<<"${next#nvfp4dbg trace }"
    "$bin" trace --force "${argv[@]}" --tokens "$toks" --backend "$be" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
    ok "$l: the next command clears the router: $(verdict_of "$stage" "$tmp/n.json")" '[ "$(verdict_of "$stage" "$tmp/n.json")" = ok ]'
  done
done
for fmt in nvfp4 modelopt; do
  tr_ "$tmp/p.json" "$tmp/deepseek_v3-$fmt" --stack sglang-router-bias-bf16
  ok "deepseek_v3/$fmt under sglang-router-bias-bf16: exit $rc, $(first cause "$tmp/p.json")" \
     '[ $rc -eq 1 ] && [ "$(first first_divergence "$tmp/p.json")" = layers.1.mlp.gate ] && [ "$(first cause "$tmp/p.json")" = router_precision ]'
  tr_ "$tmp/q.json" "$root/golden/conformance/deepseek_v3/$fmt" --stack sglang-router-bias-bf16
  ok "unplanted deepseek_v3/$fmt under the profile: exit $rc (want 0)" '[ $rc -eq 0 ]'
done
printf 'stack: x\nrouter_bias: bf8\n' >"$tmp/stack-x.yaml"
"$bin" trace --force "$root/golden/clean-v4" --stack "$tmp/stack-x.yaml" --backend "$be" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"; rc=$?
ok "router_bias: bf8: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "router_bias must be fp32 or bf16, not .bf8." "$tmp/err"'
"$bin" synth "$tmp/nob" --from "$root/golden/conformance/llama/nvfp4" --inject "router-bias-offset=64@layers.0.mlp.gate_proj" >/dev/null 2>"$tmp/err"; rc=$?
ok "router-bias-offset on a module without a correction bias: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "has no F32 e_score_correction_bias" "$tmp/err"'
echo "router bias precision: $pass passed, $fail failed"
[ $fail -eq 0 ]
