#!/usr/bin/env bash
# Stack-aware findings of `inspect` (SPEC §7: static findings say which stack profiles they break;
# under a stack they do not break they are warnings).
# - the checkpoints written by llmcompressor and ModelOpt (golden/conformance/*/nvfp4, /modelopt)
#   and golden/clean-v4: exit 0 by default (llmcompressor's V4 wq_a/wkv keep different weight
#   global scales: warnings);
# - a synth checkpoint with fused-scale-mismatch=4 at kv_proj: exit 0 by default with a warning
#   whose breaks_stacks are exactly the profiles with a fused_weight rule other than own (read from
#   recipes/stack-*.yaml), exit 1 with --stack vllm or all, 0 with --stack exact; --stack nosuch
#   exit 2;
# - a non-finite input scale (input-scale-inf): exit 1 by default and under every profile.
#   usage: inspect_stacks.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1" root="$2"
recipes="${NVFP4DBG_RECIPES:-$root/recipes}"
. "$(dirname "$0")/../lib.sh"

for d in "$root"/golden/conformance/*/nvfp4 "$root"/golden/conformance/*/modelopt "$root"/golden/clean-v4; do
    [ -d "$d" ] || continue
    "$bin" inspect "$d" >"$tmp/out" 2>&1
    rc=$?
    ok "inspect ${d#"$root"/}: exit $rc, want 0" '[ $rc -eq 0 ]'
done

# the fusing profiles, from the profiles themselves
fusing=$(for f in "$recipes"/stack-*.yaml; do
    grep -qE '^fused_weight:[[:space:]]*(max|min|first)' "$f" && basename "$f" .yaml | sed 's/^stack-//'
done | sort | tr '\n' ' ')
ok "some profile fuses weight scales" '[ -n "$fusing" ]'

ck="$tmp/fused"
"$bin" synth "$ck" --recipe deepseek_v4 --size tiny --inject fused-scale-mismatch=4@layers.0.self_attn.kv_proj >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: synth: $(cat "$tmp/err")"; exit 1; }
"$bin" inspect "$ck" >"$tmp/out" 2>&1
rc=$?
ok "fused mismatch, default: exit $rc, want 0" '[ $rc -eq 0 ]'
ok "fused mismatch, default: a warning" 'grep -q "^  warning fused_scale_mismatch  *model.layers.0.self_attn.q_a_proj" "$tmp/out"'
got=$(grep -A1 "fused_scale_mismatch" "$tmp/out" | sed -n 's/^ *breaks_stacks: \[\(.*\)\]$/\1/p' | head -1 | tr -d ',' | tr ' ' '\n' |
      grep . | sort | tr '\n' ' ')
ok "fused mismatch breaks_stacks [$got], want the fusing profiles [$fusing]" '[ "$got" = "$fusing" ]'
ok "vllm among the stacks it breaks" 'case " $got" in *" vllm "*) true ;; *) false ;; esac'
"$bin" inspect "$ck" --json >"$tmp/json" 2>&1
rc=$?
ok "fused mismatch --json: exit $rc, breaks_stacks and severity" \
    '[ $rc -eq 0 ] && grep -q "\"breaks_stacks\": \[" "$tmp/json" && grep -q "\"severity\": \"warning\"" "$tmp/json"'
for s in vllm all vllm-old,exact; do
    "$bin" inspect "$ck" --stack "$s" >"$tmp/out" 2>&1
    rc=$?
    ok "fused mismatch --stack $s: exit $rc, want 1" '[ $rc -eq 1 ] && grep -q "^  error   fused_scale_mismatch" "$tmp/out"'
done
"$bin" inspect "$ck" --stack exact >"$tmp/out" 2>&1
rc=$?
ok "fused mismatch --stack exact: exit $rc, want 0" '[ $rc -eq 0 ]'
"$bin" inspect "$ck" --stack nosuch >"$tmp/out" 2>"$tmp/err"
rc=$?
ok "--stack nosuch: exit $rc, want 2" '[ $rc -eq 2 ] && grep -q "nosuch" "$tmp/err" && [ ! -s "$tmp/out" ]'

ck="$tmp/inf"
"$bin" synth "$ck" --recipe deepseek_v4 --size tiny --inject input-scale-inf@layers.1.self_attn.q_b_proj >/dev/null 2>"$tmp/err" ||
    { echo "FAIL: synth: $(cat "$tmp/err")"; exit 1; }
"$bin" inspect "$ck" >"$tmp/out" 2>&1
rc=$?
ok "non-finite input scale, default: exit $rc, want 1" '[ $rc -eq 1 ] && grep -q "^  error   nonfinite_scale" "$tmp/out"'
for f in "$recipes"/stack-*.yaml; do
    s=$(basename "$f" .yaml)
    s=${s#stack-}
    "$bin" inspect "$ck" --stack "$s" >"$tmp/out" 2>&1
    rc=$?
    ok "non-finite input scale --stack $s: exit $rc, want 1" '[ $rc -eq 1 ]'
done

# the scheme each module is replayed with (issue 33 item 4), in the header and per module
"$bin" inspect "$root/golden/conformance/llama/nvfp4" --modules >"$tmp/out" 2>&1
ok "llama NVFP4: the schemes line" 'grep -qx "schemes     bf16 2, W4A4 g16 (nvfp4) 14" "$tmp/out"'
ok "llama NVFP4: q_proj's row says W4A4 g16" 'grep -qE "^model\.layers\.0\.self_attn\.q_proj +nvfp4 +W4A4 g16 +ct " "$tmp/out"'
"$bin" inspect "$root/golden/conformance/llama/nvfp4" --json >"$tmp/j" 2>&1
ok "llama NVFP4 --json: scheme, bits, group" 'tr -d " \n" <"$tmp/j" | grep -q "\"scheme\":\"W4A4g16\",\"weight_bits\":4,\"act_bits\":4,\"group\":16"'
"$bin" inspect "$root/golden/conformance/mxfp4/ct" --modules >"$tmp/out" 2>&1
ok "compressed-tensors MXFP4: W4A16 g32" 'grep -q "W4A16 g32 (mxfp4)" "$tmp/out"'

echo "inspect_stacks: $pass passed, $fail failed"
[ $fail -eq 0 ]
