#!/usr/bin/env bash
# A rope type the recipe cannot compute is exit 2 naming it, never frequencies silently left
# unscaled (issue 19): the llama31 fixture with its rope_type changed to ones the llama recipe lacks.
#   usage: rope_unsupported.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
for t in longrope dynamic yarn; do
  rm -rf "$tmp/ck"; cp -r "$root/golden/conformance/llama31/bf16" "$tmp/ck"
  sed -i "s/\"llama3\"/\"$t\"/" "$tmp/ck/config.json"
  "$bin" trace --force "$tmp/ck" --allow-unquantized --backend cpu --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ $rc -eq 2 ] && grep -q "rope_type '$t'" "$tmp/err"; then pass=$((pass + 1))
  else echo "FAIL rope_type $t: exit $rc: $(cat "$tmp/err")"; fail=$((fail + 1)); fi
done
echo "unsupported rope types: $pass passed, $fail failed"
[ $fail -eq 0 ]
