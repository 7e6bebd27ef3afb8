#!/usr/bin/env bash
# Command-line conventions (issue 22): --opt=value is --opt value, -o/-s/... are the long options,
# a misspelt option, command, recipe, stack or cause code gets "did you mean", --color and NO_COLOR
# decide colours (never into a pipe by default).
#   usage: cli_conventions.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"
seed="$root/golden/seed-bug-v4"
esc=$'\033'
status() { tr -d '\n ' <"$1" | sed 's/.*"status":"\([a-z]*\)".*/\1/'; }
first() { tr -d '\n ' <"$1" | sed 's/.*"first_divergence":"\([^"]*\)".*/\1/'; }
stack() { tr -d '\n ' <"$1" | sed 's/.*"stack":"\([^"]*\)".*/\1/'; }

# the same run three ways
"$bin" trace --force "$seed" --backend cpu --stack vllm --layers 0 --out "$tmp/a.h5" --json >"$tmp/a.json" 2>"$tmp/err"
ok "long options with a space (exit $?)" '[ -s "$tmp/a.h5" ]'
"$bin" trace --force "$seed" --backend=cpu --stack=vllm --layers=0 --out="$tmp/b.h5" --json >"$tmp/b.json" 2>"$tmp/err"
rc=$?
ok "--opt=value: same exit ($rc), file, status and first divergence" \
  '[ $rc -eq 1 ] && [ -s "$tmp/b.h5" ] && [ "$(status "$tmp/b.json")" = "$(status "$tmp/a.json")" ] && [ "$(first "$tmp/b.json")" = "$(first "$tmp/a.json")" ] && [ "$(stack "$tmp/b.json")" = vllm ]'
"$bin" trace --force "$seed" -b cpu -s vllm -l 0 -o "$tmp/c.h5" -j >"$tmp/c.json" 2>"$tmp/err"
rc=$?
ok "short options -b -s -l -o -j: same run ($rc)" \
  '[ $rc -eq 1 ] && [ -s "$tmp/c.h5" ] && [ "$(first "$tmp/c.json")" = "$(first "$tmp/a.json")" ] && [ "$(stack "$tmp/c.json")" = vllm ]'
"$bin" trace --force "$seed" -bcpu -s=vllm -l0 -o"$tmp/e.h5" -j >"$tmp/e.json" 2>"$tmp/err"
rc=$?
ok "short options with the value attached (-bcpu -s=vllm -l0 -oFILE), as getopt: same run ($rc)" \
  '[ $rc -eq 1 ] && [ -s "$tmp/e.h5" ] && [ "$(first "$tmp/e.json")" = "$(first "$tmp/a.json")" ] && [ "$(stack "$tmp/e.json")" = vllm ]'
"$bin" trace --force "$seed" --backend cpu --override=model.layers.0.self_attn.q_a_proj.input_global_scale=719.799134 --out "$tmp/d.h5" --json >"$tmp/d.json" 2>/dev/null
ok "--override=NAME=VALUE splits at the first = only" '[ "$(first "$tmp/d.json")" = layers.0.self_attn.kv_proj ]'

# did you mean
"$bin" trace --force "$seed" --stak vllm >/dev/null 2>"$tmp/err"
ok "misspelt option: exit 2 and the closest one" '[ $? -eq 2 ] && grep -q "unknown option .--stak.; did you mean --stack?" "$tmp/err"'
"$bin" trace --force "$seed" --jsno >/dev/null 2>"$tmp/err"
ok "transposed letters: --jsno -> --json" '[ $? -eq 2 ] && grep -q "did you mean --json?" "$tmp/err"'
"$bin" trace --force "$seed" --frobnicate >/dev/null 2>"$tmp/err"
ok "nothing close: no suggestion" '[ $? -eq 2 ] && grep -q "unknown option .--frobnicate." "$tmp/err" && ! grep -q "did you mean" "$tmp/err"'
"$bin" trace --force "$seed" --json=yes >/dev/null 2>"$tmp/err"
ok "a flag given a value is refused" '[ $? -eq 2 ] && grep -q -- "--json takes no value" "$tmp/err"'
"$bin" inspect "$seed" --stakc vllm >/dev/null 2>"$tmp/err"
ok "inspect: did you mean --stack" '[ $? -eq 2 ] && grep -q "did you mean --stack?" "$tmp/err"'
"$bin" compare a.h5 b.h5 --tolerance x >/dev/null 2>"$tmp/err"
rc=$?
ok "compare: did you mean --tolerances (got: $(head -1 "$tmp/err"))" '[ $rc -eq 2 ] && grep -q "did you mean --tolerances?" "$tmp/err"'
"$bin" trac "$seed" >/dev/null 2>"$tmp/err"
ok "misspelt command" '[ $? -eq 2 ] && grep -q "unknown command .trac.; did you mean .trace.?" "$tmp/err"'
"$bin" trace --force "$seed" --backend cpu --stack vlm --out "$tmp/x.h5" >/dev/null 2>"$tmp/err"
ok "misspelt stack profile" '[ $? -eq 2 ] && grep -q "no serving-stack profile named .vlm.; did you mean .vllm.?" "$tmp/err"'
"$bin" trace --force "$seed" --backend cpu --recipe deepseek_v5 --out "$tmp/x.h5" >/dev/null 2>"$tmp/err"
ok "misspelt recipe" '[ $? -eq 2 ] && grep -q "no recipe named .deepseek_v5.; did you mean .deepseek_v4.?" "$tmp/err"'
"$bin" synth "$tmp/s" --recipe lama >/dev/null 2>"$tmp/err"
ok "synth: misspelt recipe" '[ $? -eq 2 ] && grep -q "did you mean .llama.?" "$tmp/err"'
"$bin" explain scale_invertd >/dev/null 2>"$tmp/err"
ok "misspelt cause code" '[ $? -eq 2 ] && grep -q "did you mean .scale_inverted.?" "$tmp/err"'

# colours: never into a pipe unless asked, NO_COLOR and --color=never win over the terminal,
# --color=always over NO_COLOR
"$bin" trace --force "$seed" --backend cpu --out "$tmp/x.h5" >"$tmp/o" 2>/dev/null
ok "no colour into a pipe" '! grep -q "$esc" "$tmp/o"'
"$bin" trace --force "$seed" --backend cpu --out "$tmp/x.h5" --color=always >"$tmp/o" 2>/dev/null
ok "--color=always colours the diverged layers" 'grep -q "${esc}\[1;31m0 " "$tmp/o"'
NO_COLOR=1 "$bin" trace --force "$seed" --backend cpu --out "$tmp/x.h5" --color always >"$tmp/o" 2>/dev/null
ok "--color always beats NO_COLOR" 'grep -q "$esc" "$tmp/o"'
"$bin" trace --force "$seed" --backend cpu --out "$tmp/x.h5" --color=always --no-color >"$tmp/o" 2>/dev/null
ok "--no-color after it: none" '! grep -q "$esc" "$tmp/o"'
if command -v script >/dev/null 2>&1; then
  script -qec "NO_COLOR=1 '$bin' trace --force '$seed' --backend cpu --out '$tmp/x.h5'" /dev/null >"$tmp/o" 2>&1
  ok "NO_COLOR on a terminal: none" '! grep -qE "${esc}\[[0-9;]*m" "$tmp/o" && grep -q "first divergence" "$tmp/o"'
  script -qec "'$bin' trace --force '$seed' --backend cpu --out '$tmp/x.h5' --color=never" /dev/null >"$tmp/o" 2>&1
  ok "--color=never on a terminal: none" '! grep -qE "${esc}\[[0-9;]*m" "$tmp/o" && grep -q "first divergence" "$tmp/o"'
  script -qec "env -u NO_COLOR '$bin' trace --force '$seed' --backend cpu --out '$tmp/x.h5'" /dev/null >"$tmp/o" 2>&1
  ok "on a terminal by default: colours" 'grep -q "${esc}\[1;31m" "$tmp/o"'
fi
"$bin" trace --force "$seed" --color=sometimes >/dev/null 2>"$tmp/err"
ok "--color with another value: exit 2" '[ $? -eq 2 ] && grep -q "expected auto, always or never" "$tmp/err"'
echo "cli conventions: $pass passed, $fail failed"
[ $fail -eq 0 ]
