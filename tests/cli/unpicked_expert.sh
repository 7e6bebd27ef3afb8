#!/usr/bin/env bash
# A fault in a routed expert that no token picks is not a divergence on that prompt (the expert is
# never loaded), while `inspect` still reports it statically (issue 4); trace lists it among the
# static findings that break its stack and exits 1 for it (issue 37: a run that names a broken
# module must not exit 0), its status staying "ok". With token 3 alone, layer 1 of the shipped tiny
# V4 checkpoint routes to experts 0 and 5 (checked below from the trace).
#   usage: unpicked_expert.sh NVFP4DBG
set -u
bin="$1"
. "$(dirname "$0")/../lib.sh"
"$bin" synth "$tmp/ck" --recipe deepseek_v4 --size tiny --inject weight-scale-nan@layers.1.mlp.experts.3.down_proj >/dev/null
"$bin" trace --force "$tmp/ck" --backend cpu --tokens 3 --json --out "$tmp/t.h5" >"$tmp/out.json" 2>&1
rc=$?
ok "expert 3 is not picked by token 3" '! grep -q "\"name\": \"layers.1.mlp.experts.3\." "$tmp/out.json"'
ok "so the prompt has no divergence, but the static error fails the run (exit $rc)" \
   '[ $rc -eq 1 ] && grep -q "\"status\": \"ok\"" "$tmp/out.json" && grep -q "\"static_errors\": 1," "$tmp/out.json"'
"$bin" inspect "$tmp/ck" >"$tmp/insp" 2>&1
rc=$?
ok "inspect reports the NaN block scales statically (exit $rc)" '[ $rc -eq 1 ] && grep -q "layers.1.mlp.experts.3.down_proj" "$tmp/insp"'
"$bin" trace --force "$tmp/ck" --backend cpu --out "$tmp/t2.h5" >"$tmp/out2" 2>&1
rc=$?
ok "a prompt that picks expert 3 finds it (exit $rc)" '[ $rc -eq 1 ] && grep -q "first divergence at layers.1.mlp.experts.3.down_proj.*nan_weight_scale" "$tmp/out2"'
echo "unpicked expert: $pass passed, $fail failed"
[ $fail -eq 0 ]
