#!/usr/bin/env bash
# Recipes are checked against the op table (src/pipeline/op_desc.c, issue 23):
#  - docs/ops.md is `explain --ops --markdown`;
#  - every attribute name the ops read in src/pipeline is declared in the table;
#  - every shipped recipe passes;
#  - a misspelled attribute, an unknown op, a missing required attribute, a number that is not one,
#    a flag that is not 0/1 and a linear without its module are each exit 2 naming the recipe file,
#    the line, the stage, the op and the attribute (with a suggestion where one is close).
#   usage: recipe_attrs.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"

"$bin" explain --ops --markdown >"$tmp/ops.md"
ok "docs/ops.md is explain --ops --markdown (regenerate it)" 'cmp -s "$tmp/ops.md" "$root/docs/ops.md"'

# attribute names read by the ops (literal names passed to the attribute readers)
grep -ohE '(nd_attr_(num|req|str)\([^"]*|nd_stage_attr\([^"]*|stage_tensor\(c, |need_tensor\(c, |hc_params\(c, )"[a-z0-9_]+"' \
  "$root"/src/pipeline/*.c | grep -oE '"[a-z0-9_]+"$' | tr -d '"' | sort -u >"$tmp/read"
"$bin" explain --ops >"$tmp/ops.txt"
missing=""
while read -r a; do
  grep -qE "^    $a " "$tmp/ops.txt" || [ "$a" = tf ] || missing="$missing $a"
done <"$tmp/read"
ok "every attribute the ops read is declared ($(wc -l <"$tmp/read") names; undeclared:${missing:- none})" '[ -z "$missing" ]'

# every shipped recipe passes the check (a run stops later, at the checkpoint, not at the recipe)
for r in "$root"/recipes/*.yaml "$root"/golden/conformance/*/nvfp4/recipe.yaml; do
  case "$(basename "$r")" in stack-*|tolerances*) continue ;; esac
  [ -f "$r" ] || continue
  "$bin" trace --force "$root/golden/clean-v4" --recipe "$r" --backend cpu --layers 0 --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  ok "recipe $(basename "$r") passes the op table: $(head -c 200 "$tmp/err")" '! grep -q "(op [a-z_]*)\|unknown op" "$tmp/err"'
done

# broken copies of the llama recipe, one fault each
src="$root/recipes/llama.yaml"
bad() { # name sed-expression want-rc pattern
  sed "$2" "$src" >"$tmp/$1.yaml"
  if cmp -s "$tmp/$1.yaml" "$src"; then echo "FAIL $1: the case did not change the recipe"; fail=$((fail + 1)); return; fi
  "$bin" trace --force "$root/golden/conformance/llama/nvfp4" --recipe "$tmp/$1.yaml" --backend cpu --out "$tmp/t.h5" >/dev/null 2>"$tmp/err"
  local rc=$? pat="$3"
  ok "$1: exit $rc (want 2), '$(head -c 300 "$tmp/err")'" '[ $rc -eq 2 ] && grep -q -- "$pat" "$tmp/err"'
}
bad misspelled 's/\beps: /epss: /' "[a-z-]*.yaml:[0-9]*: stage .* (op rmsnorm): unknown attribute 'epss' (did you mean 'eps'?)"
bad unknown-op 's/op: rmsnorm/op: rmsnrom/' "[a-z-]*.yaml:[0-9]*: stage .*: unknown op 'rmsnrom' (did you mean 'rmsnorm'?)"
bad missing-required 's/, *eps: \$rms_norm_eps//; s/eps: \$rms_norm_eps, *//' "(op rmsnorm): needs attribute 'eps'"
bad not-a-number 's/head_dim: \$head_dim/head_dim: banana/' "attribute head_dim must be a number or a \$config key, not 'banana'"
bad flag-not-01 's/interleaved: 0/interleaved: 2/' "(op rope): attribute interleaved must be 0 or 1, not '2'"
echo "recipe attributes: $pass passed, $fail failed"
[ $fail -eq 0 ]
