#!/usr/bin/env bash
# A static error finding the replay cannot reach still fails the trace (issue 37, round 13): a NaN
# block scale on a qwen3_moe expert that the prompt routes no token to is printed above the table,
# the replay finds no divergence, and trace exits 1 with a line saying why (the JSON counts it in
# static_errors). A prompt that does route to the expert diverges there with nan_weight_scale; a
# --layers range without the expert's layer leaves it out (exit 0, marked outside --layers).
#   usage: static_unreached.sh NVFP4DBG
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
. "$(dirname "$0")/../lib.sh"
cd "$tmp" || exit 1
be="${ND_TEST_BACKEND:-cpu}"
"$bin" synth q3 --recipe qwen3_moe --size tiny --inject weight-scale-nan@layers.0.mlp.experts.3.up_proj >/dev/null 2>err.txt
ok "synth ($(head -c 200 err.txt))" '[ -d q3 ]'

# token 3 routes nowhere near expert 3 in layer 0 (seed 0); token 9 routes to it
"$bin" trace q3 --backend "$be" --tokens 3 --out a.h5 >a.txt 2>&1
rc=$?
ok "unreached: exit 1 ($rc)" '[ $rc -eq 1 ]'
ok "unreached: the finding is listed" 'grep -q "nan_weight_scale *model.layers.0.mlp.experts.3.up_proj" a.txt'
ok "unreached: no divergence in the replay" 'grep -q "^no divergence" a.txt'
ok "unreached: the reason for exit 1 is printed" 'grep -q "^but 1 static finding above breaks stack exact" a.txt'
"$bin" trace q3 --backend "$be" --tokens 3 --out a.h5 --force --json >a.json 2>/dev/null
rc=$?
ok "unreached --json: exit 1 ($rc)" '[ $rc -eq 1 ]'
ok "unreached --json: status ok" '[ "$(json_field status a.json)" = ok ]'
ok "unreached --json: static_errors 1" 'grep -q "\"static_errors\": 1," a.json'
ok "unreached --json: in the replayed layers" 'grep -q "\"in_replayed_layers\": true" a.json'

"$bin" trace q3 --backend "$be" --tokens 9 --out b.h5 --json >b.json 2>/dev/null
rc=$?
ok "reached: exit 1 ($rc)" '[ $rc -eq 1 ]'
ok "reached: diverges at the expert" '[ "$(json_field first_divergence b.json)" = layers.0.mlp.experts.3.up_proj ]'
ok "reached: cause nan_weight_scale" 'grep -q "\"cause\": \"nan_weight_scale\"" b.json'

"$bin" trace q3 --backend "$be" --tokens 3 --layers 1 --out c.h5 >c.txt 2>&1
rc=$?
ok "outside --layers: exit 0 ($rc)" '[ $rc -eq 0 ]'
ok "outside --layers: marked" 'grep -q "experts.3.up_proj (outside this run.s --layers)" c.txt'
ok "outside --layers: no exit-1 line" '! grep -q "^but " c.txt'

echo "static_unreached: $pass passed, $fail failed"
[ $fail -eq 0 ]
