#!/usr/bin/env bash
# Printed commands are pasted as data (issue 37 item 5): a checkpoint folder whose name holds $(...),
# backquotes, a quote and spaces gets a seed bug; the next command trace prints (text and --json) and
# the inspect hint name it shell-quoted, and the next command pasted into `sh -c` runs on that folder
# (the stage is ok after it) without running what the name says.
#   usage: next_quoted.sh NVFP4DBG
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
. "$(dirname "$0")/../lib.sh"
cd "$tmp" || exit 1
dir='we$(touch pwned1)ird `touch pwned2` it'"'"'s; touch pwned3'
"$bin" synth "$dir" --recipe llama --layers 2 --inject input-scale-inverted@layers.0.self_attn.q_proj >/dev/null 2>err.txt
ok "synth into the hostile name ($(head -c 200 err.txt))" '[ -d "$dir" ]'
"$bin" trace --force "$dir" --backend "${ND_TEST_BACKEND:-cpu}" --out t.h5 >s.txt 2>&1
rc=$?
ok "the seed bug is found (exit $rc)" '[ $rc -eq 1 ]'
next=$(sed -n 's/^  next: //p' s.txt)
ok "the next command quotes the folder (got: $next)" '[[ "$next" == "nvfp4dbg trace '"'"'we\$(touch pwned1)ird \`touch pwned2\` it'"'"'\\'"'"''"'"'s; touch pwned3'"'"' --override "* ]]'
ok "the inspect hint quotes it" 'grep -qF "(nvfp4dbg inspect '"'"'we\$(touch pwned1)" s.txt'
# pasted as printed (nvfp4dbg from this build): runs on the hostile folder, runs nothing it names
mkdir bin && ln -s "$bin" bin/nvfp4dbg
PATH="$tmp/bin:$PATH" sh -c "$next --backend ${ND_TEST_BACKEND:-cpu} --out n.h5 --json" >n.json 2>n.err
rc=$?
ok "pasted into sh -c: it ran (exit $rc: $(head -c 200 n.err))" '[ $rc -eq 0 ] || [ $rc -eq 1 ]'
ok "pasted into sh -c: the stage is ok after the repair" '[ "$(row_verdict layers.0.self_attn.q_proj n.json)" = ok ]'
ok "nothing the name says was run" '[ ! -e pwned1 ] && [ ! -e pwned2 ] && [ ! -e pwned3 ] && [ ! -e "$dir/pwned1" ]'
"$bin" trace --force "$dir" --backend "${ND_TEST_BACKEND:-cpu}" --out t.h5 --json >j.json 2>/dev/null
jnext=$(json_field next_command j.json)   # as JSON writes it: each backslash doubled
ok "trace --json stores the same quoted command" '[ "$jnext" = "${next//\\/\\\\}" ]'
# repro's printed replay command quotes the bundle's name: pasted, it replays and runs nothing else
"$bin" repro t.h5 --out 'b;touch pwned4;#.h5' >r.txt 2>&1
rcmd=$(sed -n 's/.*(replay: \(.*\))$/\1/p' r.txt)
ok "repro's replay command quotes the name (got: $rcmd)" '[ "$rcmd" = "nvfp4dbg replay '"'"'b;touch pwned4;#.h5'"'"'" ]'
PATH="$tmp/bin:$PATH" sh -c "$rcmd --backend ${ND_TEST_BACKEND:-cpu}" >rr.txt 2>&1
rc=$?
ok "pasted: it replays (exit $rc) and runs nothing the name says" '[ $rc -le 1 ] && [ ! -e pwned4 ] && grep -q "q_proj" rr.txt'
echo "next quoted: $pass passed, $fail failed"
[ $fail -eq 0 ]
