#!/usr/bin/env bash
# A model_type no recipe matches is exit 2 (bad input), and the message lists every recipe with
# the model types it matches and points to docs/families.md; with --recipe the same checkpoint runs.
#   usage: unknown_family.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
pass=0; fail=0
ok() { pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }
src="$root/golden/conformance/qwen3/bf16"
mkdir "$tmp/ck"
cp "$src/model.safetensors" "$tmp/ck/"
sed 's/"model_type": "qwen3"/"model_type": "falcon_h1"/' "$src/config.json" >"$tmp/ck/config.json"
grep -q '"model_type": "falcon_h1"' "$tmp/ck/config.json" || bad "fixture config has no model_type qwen3"
"$bin" trace --force "$tmp/ck" --allow-unquantized --tokens 1,2,3 --backend cpu --out "$tmp/t.h5" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && ok || bad "unknown model_type: exit $rc, want 2"
grep -q "model_type 'falcon_h1'" "$tmp/err" && ok || bad "message does not name the model_type: $(cat "$tmp/err")"
grep -q "docs/families.md" "$tmp/err" && ok || bad "message does not point to docs/families.md"
for f in "$root"/recipes/*.yaml; do
  name=$(sed -n 's/^recipe: *//p' "$f")
  [ -z "$name" ] && continue   # stacks and tolerances are not model recipes
  types=$(sed -n 's/^match: *\[\(.*\)\]/\1/p' "$f")
  grep -qF "$name ($types)" "$tmp/err" && ok || bad "recipe $name ($types) not listed: $(cat "$tmp/err")"
done
"$bin" trace --force "$tmp/ck" --allow-unquantized --recipe qwen3 --tokens 1,2,3 --backend cpu --out "$tmp/t2.h5" >/dev/null 2>"$tmp/err2"
rc=$?
[ $rc -eq 0 ] && ok || bad "--recipe qwen3 on the same checkpoint: exit $rc: $(tail -2 "$tmp/err2")"
echo "unknown family: $pass passed, $fail failed"
[ $fail -eq 0 ]
