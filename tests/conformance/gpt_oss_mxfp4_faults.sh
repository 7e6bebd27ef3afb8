#!/usr/bin/env bash
# Faults planted into gpt-oss's MXFP4 experts (golden/conformance/gpt_oss_mxfp4/mxfp4: the release's
# fused *_blocks / *_scales / *_bias, tools/conformance/make_gpt_oss_mxfp4_fixture.py) with `synth OUT
# --from CKPT --inject scale-encoding=e8m0_bias125|e8m0_bias128@layers.L.mlp.experts.X.PROJ`: one
# expert's slice of the fused E8M0 scales written with another exponent bias (C26), the other slices
# untouched. Both paths read the same bytes, so without the original the trace is clean; against the
# original (--reference-checkpoint dequantized/, transformers' own dequantization of mxfp4/) it names
# the planted expert with scale_encoding_mismatch, proven by reading the bytes with the bias they were
# written with, and the printed next command, run as printed, leaves that stage ok. The healthy
# checkpoint against the same original is clean; two experts of one fused tensor in one run are exit 2.
#   usage: gpt_oss_mxfp4_faults.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
be="${ND_TEST_BACKEND:-cpu}"
. "$(dirname "$0")/../lib.sh"
fx="$root/golden/conformance/gpt_oss_mxfp4"
orig="$fx/dequantized"
toks=$(tr -d ' \n' < "$fx/manifest.json" | sed 's/.*"tokens":\[\([0-9,]*\)\].*/\1/')

"$bin" trace --force "$fx/mxfp4" --backend "$be" --tokens "$toks" --reference-checkpoint "$orig" -o "$tmp/h.h5" --json --quiet > "$tmp/h.json" 2> "$tmp/h.err"; rc=$?
ok "healthy MXFP4 experts against transformers' dequantization: exit 0 (got $rc: $(head -c 200 "$tmp/h.err"))" '[ $rc -eq 0 ]'

# module value bias-as-read scales-in-the-slice ([N, K/32]: gate_up 192 x 2, down 64 x 3)
while read -r mod enc v nsf; do
  f="$tmp/f$v"
  rm -rf "$f" "$f.faults.json"
  "$bin" synth "$f" --from "$fx/mxfp4" --inject "scale-encoding=$enc@$mod" > /dev/null 2> "$tmp/s.err"; rc=$?
  ok "synth --from scale-encoding=$enc@$mod: exit 0, $nsf scales of the slice rewritten (exit $rc: $(head -c 200 "$tmp/s.err"))" \
    '[ $rc -eq 0 ] && grep -q "\"scales_changed\": $nsf" "$f.faults.json"'
  "$bin" trace --force "$f" --backend "$be" --tokens "$toks" -o "$tmp/c$v.h5" --json --quiet > /dev/null 2>&1; rc=$?
  ok "$enc@$mod without the original: both paths read the same bytes, clean (exit $rc)" '[ $rc -eq 0 ]'
  j="$tmp/r$v.json"
  "$bin" trace --force "$f" --backend "$be" --tokens "$toks" --reference-checkpoint "$orig" -o "$tmp/r$v.h5" --json --quiet > "$j" 2>/dev/null; rc=$?
  ok "$enc@$mod against the original: exit 1 at $mod, scale_encoding_mismatch proven by scale_encoding (exit $rc, '$(json_field first_divergence "$j")' '$(json_field cause "$j")' '$(json_field proof "$j")' '$(json_field repair "$j")')" \
    '[ $rc -eq 1 ] && [ "$(json_field first_divergence "$j")" = "$mod" ] && [ "$(json_field cause "$j")" = scale_encoding_mismatch ] && [ "$(json_field proof "$j")" = repair ] && [ "$(json_field repair "$j")" = scale_encoding ]'
  next="$(json_field next_command "$j")"
  ok "$enc@$mod: the next command reads the bytes with the bias written ($next)" '[[ "$next" == *"--override model.$mod.scale_encoding=$v --out "*"-repaired.h5" ]]'
  read -r -a argv <<<"${next#nvfp4dbg trace }"
  "$bin" trace --force "${argv[@]}" --backend "$be" --tokens "$toks" -o "$tmp/n$v.h5" --json --quiet > "$tmp/n$v.json" 2>/dev/null; rc=$?
  ok "$enc@$mod: the next command, run as printed, is clean (exit $rc, verdict '$(row_verdict "$mod" "$tmp/n$v.json")')" \
    '[ $rc -eq 0 ] && [ "$(row_verdict "$mod" "$tmp/n$v.json")" = ok ]'
done <<'LIST'
layers.0.mlp.experts.3.gate_up_proj e8m0_bias125 3 384
layers.2.mlp.experts.6.down_proj e8m0_bias128 4 192
LIST

rm -rf "$tmp/two"
"$bin" synth "$tmp/two" --from "$fx/mxfp4" --inject scale-encoding=e8m0_bias125@layers.1.mlp.experts.0.down_proj \
  --inject scale-encoding=e8m0_bias125@layers.1.mlp.experts.5.down_proj > /dev/null 2> "$tmp/t.err"; rc=$?
ok "two experts of one fused tensor in one run: exit 2 naming it (exit $rc: $(head -c 200 "$tmp/t.err"))" \
  '[ $rc -eq 2 ] && grep -q "model.layers.1.mlp.experts.down_proj_scales" "$tmp/t.err"'

echo "gpt_oss_mxfp4_faults: $pass passed, $fail failed"
[ $fail -eq 0 ]
