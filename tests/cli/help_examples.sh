#!/usr/bin/env bash
# Every example in every command's --help runs as written (issue 22): in a fresh folder holding the
# shipped golden/ checkpoints, the "(FILE from: COMMANDS)" lines first (what an example reads),
# then each example line, split at "; ". An example may find a divergence (exit 1); exit 2 (bad
# usage or input) or 3 fails. A command without an example fails too.
#   usage: help_examples.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"; root="$(cd "$2" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
nvfp4dbg() { "$bin" "$@"; }
cmds=$("$bin" --help | awk '/^  [a-z]+ /{print $1}')
[ -n "$cmds" ] || { echo "FAIL: nvfp4dbg --help lists no command"; exit 1; }
for c in $cmds; do
  "$bin" "$c" --help >"$tmp/$c.help" 2>&1
  # the example block: from the first line starting "example" to the end
  awk '/^examples?:/{m=1} m' "$tmp/$c.help" | sed 's/^examples\{0,1\}://' >"$tmp/$c.block"
  before=$(sed -n 's/^ *(.* from: \(nvfp4dbg .*\))$/\1/p' "$tmp/$c.block")
  lines=$(sed -n 's/^ *\(nvfp4dbg .*\)$/\1/p' "$tmp/$c.block")
  if [ -z "$lines" ]; then echo "FAIL: $c --help has no example"; fail=$((fail + 1)); continue; fi
  d="$tmp/run-$c"; mkdir -p "$d"; ln -s "$root/golden" "$d/golden"
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    IFS=';' read -r -a parts <<<"$line"
    for p in "${parts[@]}"; do
      p="${p# }"
      (cd "$d" && eval "$p") >"$tmp/out" 2>&1
      rc=$?
      if [ $rc -le 1 ]; then pass=$((pass + 1)); else
        echo "FAIL: $c --help example '$p': exit $rc: $(grep -m1 nvfp4dbg: "$tmp/out")"; fail=$((fail + 1))
      fi
    done
  done <<<"$before
$lines"
done
echo "help examples: $pass passed, $fail failed"
[ $fail -eq 0 ]
