#!/usr/bin/env bash
# The weight global scale folded into the E4M3 block scales (issue 18, stack key global_scale:
# baked; profile vllm-b12x-baked, field report C19). A module whose weights are small (planted with
# synth --from: its global divisor 16x larger, codes and block scales unchanged, so the checkpoint
# is consistent) traces clean under the default stack; under the profile its block scales fall into
# E4M3's subnormal range and the stage diverges: named scale_underflow, proven by the repair that
# keeps the global apart, and the printed next command clears it. The per-stage switch alone does
# the same under the default stack. On the llmcompressor and ModelOpt fixtures of Llama and
# DeepSeek-V3. Bad values of the key and of the switch are exit 2.
#   usage: global_scale_baked.sh NVFP4DBG SOURCE_ROOT
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
be="${ND_TEST_BACKEND:-cpu}"
first() { grep -m1 "\"$1\":" "$2" | sed 's/.*: "\(.*\)",*/\1/'; }
verdict_of() { grep -A40 "\"name\": \"$1\"" "$2" | grep -m1 '"verdict"' | sed 's/.*: "\(.*\)",*/\1/'; }
for fam in llama deepseek_v3; do
  for fmt in nvfp4 modelopt; do
    m=layers.0.mlp.down_proj; ck="$tmp/$fam-$fmt"; l="$fam/$fmt"
    "$bin" synth "$ck" --from "$root/golden/conformance/$fam/$fmt" --inject "fused-scale-mismatch=16@$m" >/dev/null 2>"$tmp/err" ||
      { echo "FAIL synth $l: $(cat "$tmp/err")"; fail=$((fail + 1)); continue; }
    "$bin" trace --force "$ck" --backend "$be" --json --out "$tmp/t.h5" >"$tmp/a.json" 2>/dev/null; rc=$?
    ok "$l: small weights under the default stack: exit $rc (want 0)" '[ $rc -eq 0 ]'
    "$bin" trace --force "$ck" --stack vllm-b12x-baked --backend "$be" --json --out "$tmp/t.h5" >"$tmp/b.json" 2>/dev/null; rc=$?
    ok "$l: under vllm-b12x-baked: exit $rc, '$(first first_divergence "$tmp/b.json")' '$(first cause "$tmp/b.json")' '$(first proof "$tmp/b.json")'" \
       '[ $rc -eq 1 ] && [ "$(first first_divergence "$tmp/b.json")" = "$m" ] && [ "$(first cause "$tmp/b.json")" = scale_underflow ] && [ "$(first proof "$tmp/b.json")" = repair ]'
    ok "$l: the repair that proves it keeps the global apart" 'grep -q "global_scale_apart" "$tmp/b.json"'
    next=$(grep -m1 '"next_command": "' "$tmp/b.json" | sed 's/.*: "\(.*\)",*/\1/')
    read -r -a argv <<<"${next#nvfp4dbg trace }"
    "$bin" trace --force "${argv[@]}" --backend "$be" --json --out "$tmp/n.h5" >"$tmp/n.json" 2>/dev/null
    ok "$l: the next command ($next) clears the stage: $(verdict_of "$m" "$tmp/n.json")" '[ "$(verdict_of "$m" "$tmp/n.json")" = ok ]'
    "$bin" trace --force "$ck" --override "$m.global_scale_baked=1" --backend "$be" --json --out "$tmp/t.h5" >"$tmp/c.json" 2>/dev/null; rc=$?
    ok "$l: the switch alone under the default stack: exit $rc, $(first cause "$tmp/c.json")" \
       '[ $rc -eq 1 ] && [ "$(first first_divergence "$tmp/c.json")" = "$m" ] && [ "$(first cause "$tmp/c.json")" = scale_underflow ]'
  done
done
# the healthy fixture under the profile: its weights are large enough that folding keeps E4M3 normals
"$bin" trace --force "$root/golden/conformance/llama/nvfp4" --stack vllm-b12x-baked --backend "$be" --out "$tmp/t.h5" >/dev/null 2>&1; rc=$?
ok "unchanged llama fixture under vllm-b12x-baked: exit $rc (want 0)" '[ $rc -eq 0 ]'
printf 'stack: x\nglobal_scale: folded\n' >"$tmp/stack-x.yaml"
"$bin" trace --force "$root/golden/clean-v4" --stack "$tmp/stack-x.yaml" --backend "$be" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"; rc=$?
ok "global_scale: folded: exit $rc (want 2): $(cat "$tmp/err")" '[ $rc -eq 2 ] && grep -q "stack-x.yaml:2: global_scale must be apart or baked, not .folded." "$tmp/err"'
"$bin" trace --force "$root/golden/clean-v4" --override layers.0.mlp.down_proj.global_scale_baked=2 --backend "$be" --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"; rc=$?
ok "switch value 2: exit $rc (want 2)" '[ $rc -eq 2 ] && grep -q "global_scale_baked takes 0 or 1" "$tmp/err"'
echo "global scale baked: $pass passed, $fail failed"
[ $fail -eq 0 ]
