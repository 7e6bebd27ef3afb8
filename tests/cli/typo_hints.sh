#!/usr/bin/env bash
# Names a user types are checked before anything runs, with the nearest known name (issue 36 item 9):
# synth's fault names and modules, trace's --override targets (a checkpoint tensor, or a module or
# stage of the recipe followed by a knob).
#   usage: typo_hints.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
ck="$root/golden/conformance/qwen3/nvfp4"

expect2() { # name want-in-stderr command...
  local name="$1" want="$2"; shift 2
  "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
  ok "$name: exit 2 (got $rc)" '[ $rc -eq 2 ]'
  ok "$name: says '$want' ($(head -c 300 "$tmp/err"))" 'grep -qF -- "$want" "$tmp/err"'
}
expect2 "synth fault nible-swap" "unknown fault 'nible-swap' (did you mean 'nibble-swap'?)" \
  "$bin" synth "$tmp/s1" --from "$ck" --inject nible-swap@layers.0.self_attn.q_proj
ok "nothing written for the typo" '[ ! -e "$tmp/s1" ]'
expect2 "synth module q_prj" "no module 'layers.0.self_attn.q_prj' (nor model.layers.0.self_attn.q_prj) (did you mean 'layers.0.self_attn.q_proj'?)" \
  "$bin" synth "$tmp/s2" --from "$ck" --inject nibble-swap@layers.0.self_attn.q_prj
expect2 "override of a misspelt module's scale" "no module, stage or tensor named 'model.layers.0.self_attn.q_prj' (did you mean 'model.layers.0.self_attn.q_proj'?)" \
  "$bin" trace --force "$ck" --out "$tmp/t1.h5" --override model.layers.0.self_attn.q_prj.input_global_scale=3
ok "no trace written for it" '[ ! -e "$tmp/t1.h5" ]'
expect2 "override of a stage of a layer the model lacks" "no module, stage or tensor named 'layers.9.self_attn.q_proj'" \
  "$bin" trace --force "$ck" --out "$tmp/t2.h5" --override layers.9.self_attn.q_proj.quant_mult=2
# names that exist pass the check: a stage knob, a module's scale
"$bin" trace --force "$ck" --out "$tmp/t3.h5" -q --override layers.0.self_attn.q_proj.quant_mult=2 >/dev/null 2>"$tmp/err"; rc=$?
ok "a stage's knob is accepted (exit $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 0 ] || [ $rc -eq 1 ]'
"$bin" trace --force "$ck" --out "$tmp/t4.h5" -q --override model.layers.0.self_attn.q_proj.input_global_scale=300 >/dev/null 2>"$tmp/err"; rc=$?
ok "a module's scale is accepted (exit $rc: $(head -c 200 "$tmp/err"))" '[ $rc -eq 0 ] || [ $rc -eq 1 ]'
echo "typo hints: $pass passed, $fail failed"
[ $fail -eq 0 ]
