#!/usr/bin/env bash
# Progress on stderr (issue 22): synth, trace and bisect print plain lines when stderr is not a
# terminal (here every update: NVFP4DBG_PROGRESS_INTERVAL=0; by default at most one per 5 s, so a
# short run prints none), a bar redrawn in place on a terminal, and nothing with --quiet / -q.
# Standard output is left alone.
#   usage: progress.sh NVFP4DBG
set -u
bin="$1"
. "$(dirname "$0")/../lib.sh"
export NVFP4DBG_PROGRESS_INTERVAL=0
ck="$tmp/ck"

"$bin" synth "$ck" --recipe deepseek_v4 --layers 8 >"$tmp/out" 2>"$tmp/err"
ok "synth: exit 0, stdout as before" '[ $? -eq 0 ] && grep -q "^wrote " "$tmp/out" && ! grep -q "nvfp4dbg: synth:" "$tmp/out"'
ok "synth: its three steps" 'grep -q "^nvfp4dbg: synth: 0/3 steps .*writing the unquantized original" "$tmp/err" && grep -q "^nvfp4dbg: synth: 1/3 steps .*calibrating" "$tmp/err" && grep -q "^nvfp4dbg: synth: 2/3 steps .*writing the NVFP4 checkpoint" "$tmp/err"'
ok "synth: the tensors written and the layers calibrated within a step" 'grep -qE "writing the unquantized original, [0-9]+/[0-9]+ tensors" "$tmp/err" && grep -q "calibrating the input scales on it, 8/8 layers" "$tmp/err"'
ok "synth: a closing line" '[ "$(tail -1 "$tmp/err" | sed "s/ in .*//")" = "nvfp4dbg: synth: done, 3/3 steps" ]'
ok "synth: every line a plain line (no carriage return, no escape)" '! grep -q $'"'"'[\r\033]'"'"' "$tmp/err"'
rm -rf "$ck"
"$bin" synth "$ck" --recipe deepseek_v4 --layers 8 --quiet >/dev/null 2>"$tmp/err"
ok "synth --quiet: nothing on stderr" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'

"$bin" trace --force "$ck" --backend cpu --out "$tmp/t.h5" --json >"$tmp/t.json" 2>"$tmp/err"
ok "trace: exit 0, the JSON on stdout untouched" '[ $? -eq 0 ] && head -c1 "$tmp/t.json" | grep -q "{" && tail -c2 "$tmp/t.json" | grep -q "}"'
ok "trace: one line per layer, in order" '[ "$(grep -oE "^nvfp4dbg: trace: [0-9]+/8 layers" "$tmp/err" | grep -oE "[0-9]+/" | tr -d / | tr "\n" " ")" = "1 2 3 4 5 6 7 8 " ]'
ok "trace: the share done" 'grep -q "^nvfp4dbg: trace: 4/8 layers (50%)" "$tmp/err" && grep -q "^nvfp4dbg: trace: done, 8/8 layers in" "$tmp/err"'
"$bin" trace --force "$ck" --backend cpu --out "$tmp/t.h5" -q >/dev/null 2>"$tmp/err"
ok "trace -q: nothing on stderr" '[ $? -eq 0 ] && [ ! -s "$tmp/err" ]'
NVFP4DBG_PROGRESS_INTERVAL=3600 "$bin" trace --force "$ck" --backend cpu --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
ok "trace by default: a run shorter than the interval prints no progress (an hour here, so a loaded machine cannot make it longer)" '[ $? -eq 0 ] && ! grep -q "nvfp4dbg: trace:" "$tmp/err"'

"$bin" bisect "$ck" --backend cpu >/dev/null 2>"$tmp/err"
ok "bisect: the traces it runs" 'grep -q "^nvfp4dbg: bisect: 0 traces run, trace 1: the full NVFP4 run, [0-9]/8 layers" "$tmp/err" && grep -q "^nvfp4dbg: bisect: 1 traces run, trace 2: " "$tmp/err"'
"$bin" bisect "$ck" --backend cpu --quiet >/dev/null 2>"$tmp/err"
ok "bisect --quiet: nothing on stderr" '[ ! -s "$tmp/err" ]'

if command -v script >/dev/null 2>&1; then
  script -qec "'$bin' trace --force '$ck' --backend cpu --out '$tmp/t.h5' >/dev/null" /dev/null >"$tmp/tty" 2>&1
  ok "on a terminal: a bar redrawn in place" 'grep -q "trace \[############            \] 4/8 layers" "$tmp/tty" && [ "$(tr -cd "\r" <"$tmp/tty" | wc -c)" -ge 8 ]'
  ok "on a terminal: the bar erased at the end" 'tr -d "\n" <"$tmp/tty" | grep -q $'"'"'\r\033\[K$'"'"''
  script -qec "'$bin' trace '$ck' --backend cpu --out '$tmp/t.h5' --quiet >/dev/null" /dev/null >"$tmp/tty" 2>&1
  ok "on a terminal with --quiet: nothing" '! grep -q "layers" "$tmp/tty"'
fi
echo "progress: $pass passed, $fail failed"
[ $fail -eq 0 ]
