#!/usr/bin/env bash
# The printed and stored next command is whole for long paths (issue 37, round 15): an --out under a
# folder of about 1 KB kept both overrides and its --out (the command was cut to the checkpoint
# alone at 1 KB and then wrote ./nvfp4dbg-trace.h5 and still diverged), and an --out whose name is
# 250 characters gets a repaired name that fits NAME_MAX. Each, pasted into sh -c, clears the
# seed bug (exit 0) and writes where it says.
#   usage: next_long_paths.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; root="$(cd "$2" && pwd)"
. "$(dirname "$0")/../lib.sh"
cd "$tmp" || exit 1
mkdir bin && ln -s "$bin" bin/nvfp4dbg
a=$(printf 'a%.0s' $(seq 1 200)); deep="$tmp/$a/$a/$a/$a/$a"; mkdir -p "$deep" run
n=$(printf 'n%.0s' $(seq 1 250))
for out in "$deep/run.h5" "$tmp/$n.h5"; do
  label="out of $(printf %s "$out" | wc -c) bytes, name of $(basename "$out" | wc -c)"
  "$bin" trace "$root/golden/seed-bug-v4" --backend cpu --out "$out" >t.txt 2>&1
  rc=$?
  ok "$label: the seed bug found (exit $rc)" '[ $rc -eq 1 ]'
  next=$(sed -n 's/^  next: //p' t.txt)
  stored=$("$bin" show "$out" --json | sed -n 's/^ *"next_command": "\(.*\)",*$/\1/p' | head -1)
  ok "$label: the command has the override and --out (${#next} bytes)" \
     'printf %s "$next" | grep -q -- "--override model.layers.0.self_attn.q_a_proj.input_global_scale=" && printf %s "$next" | grep -q -- "--out .*-repaired.h5"'
  ok "$label: the stored command is the printed one" '[ -n "$stored" ] && [ "$stored" = "$next" ]'
  (cd run && PATH="$tmp/bin:$PATH" sh -c "$next" >../n.txt 2>&1); rc=$?
  ok "$label: run as printed it clears the divergence (exit $rc: $(tail -n 2 n.txt | head -c 300))" '[ $rc -eq 0 ] && [ ! -e run/nvfp4dbg-trace.h5 ]'
done
ok "the repaired name of the long one fits NAME_MAX" '[ "$(ls "$tmp" | awk "length(\$0) > 255" | wc -l)" -eq 0 ] && ls "$tmp" | grep -q -- "-repaired.h5$"'
# a checkpoint under a path of about 1.2 KB: repro opens it (its config.json path was cut at 1200)
mkdir -p "$deep/$a" && cp -r "$root/golden/seed-bug-v4" "$deep/$a/ck"
"$bin" trace "$deep/$a/ck" --backend cpu --out "$deep/$a/t.h5" >/dev/null 2>&1
"$bin" repro "$deep/$a/t.h5" --out "$deep/$a/b.h5" >r.txt 2>&1; rc=$?
ok "repro of a checkpoint under $(printf %s "$deep/$a/ck" | wc -c) bytes: exit $rc ($(head -c 200 r.txt))" '[ $rc -eq 0 ] && [ -f "$deep/$a/b.h5" ]'
echo "next_long_paths: $pass passed, $fail failed"
[ $fail -eq 0 ]
