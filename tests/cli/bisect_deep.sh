#!/usr/bin/env bash
# bisect on a deep model (issue 13): a 60-layer DeepSeek-V4 with one inverted input scale in
# layer 41. The clean NVFP4 chain of 60 random layers drifts far by itself (final cosine ~0.2-0.3),
# so judging the final output against the reference named a healthy layer-0 stage; bisect must
# name the planted stage, and find nothing to bisect on the clean model.
#   usage: bisect_deep.sh NVFP4DBG
set -u
bin="$1"
. "$(dirname "$0")/../lib.sh"
"$bin" synth "$tmp/bad" --recipe deepseek_v4 --size tiny --layers 60 --inject input-scale-inverted@layers.41.self_attn.q_b_proj >/dev/null
"$bin" bisect "$tmp/bad" --backend "${ND_TEST_BACKEND:-cpu}" --json >"$tmp/b.json" 2>"$tmp/err"
rc=$?
ok "bisect finds a set (exit $rc: $(cat "$tmp/err"))" '[ $rc -eq 1 ]'
stages=$(tr -d '\n ' <"$tmp/b.json" | sed 's/.*"stages":\[\([^]]*\)\].*/\1/')
ok "bisect names only the planted stage (got $stages)" '[ "$stages" = "\"layers.41.self_attn.q_b_proj\"" ]'
ok "the symptom is read at the diverged stage" 'grep -q "\"judged_stage\": \"layers.41.self_attn.q_b_proj\"" "$tmp/b.json"'
"$bin" synth "$tmp/clean" --recipe deepseek_v4 --size tiny --layers 60 >/dev/null
"$bin" bisect "$tmp/clean" --backend "${ND_TEST_BACKEND:-cpu}" >"$tmp/c.txt" 2>&1
rc=$?
ok "nothing to bisect on the clean 60-layer model (exit $rc)" '[ $rc -eq 0 ] && grep -q "nothing to bisect" "$tmp/c.txt"'
echo "bisect deep: $pass passed, $fail failed"
[ $fail -eq 0 ]
