#!/usr/bin/env bash
# synth_families.sh — every family synth builds from its recipe's `synth:` section (issues 19, 23):
# for each line of the table, `synth --size tiny` in both formats; the clean checkpoint traces
# with exit 0 (no divergence), and with the seed bug planted (input-scale-inverted: the input
# global scale stored as its reciprocal) on a layer-0 linear the trace exits 1 naming that module
# with cause scale_inverted and a proof. Also: --recipe lists exactly the recipes with a synth:
# section when the name is unknown (exit 2); mistakes in a section are exit 2 with file and line.
#   usage: synth_families.sh NVFP4DBG SOURCE_ROOT
set -u
bin="$1"; root="$2"
. "$(dirname "$0")/../lib.sh"

table() { cat <<'LIST'
llama layers.0.self_attn.k_proj
deepseek_v3 layers.0.self_attn.q_b_proj
qwen3 layers.0.self_attn.q_proj
qwen3_moe layers.0.self_attn.v_proj
mixtral layers.0.self_attn.o_proj
glm4_moe layers.0.mlp.up_proj
gpt_oss layers.0.self_attn.q_proj
qwen3_next layers.0.mlp.shared_expert.up_proj
qwen3_5_moe layers.0.mlp.shared_expert.gate_proj
LIST
}

while read -r fam mod; do
  for fmt in compressed-tensors modelopt; do
    ck="$tmp/$fam-$fmt"
    "$bin" synth "$ck" --recipe "$fam" --size tiny --format "$fmt" >/dev/null 2>"$tmp/err"
    rc=$?
    ok "$fam/$fmt: synth clean exit 0 (got $rc: $(tail -c 200 "$tmp/err"))" '[ $rc -eq 0 ]'
    "$bin" trace "$ck" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/c.h5" >"$tmp/c.json" 2>"$tmp/err"
    rc=$?
    ok "$fam/$fmt: clean trace exit 0 (got $rc, first divergence '$(json_field first_divergence "$tmp/c.json")')" '[ $rc -eq 0 ]'
    "$bin" synth "$ck-bug" --recipe "$fam" --size tiny --format "$fmt" --inject "input-scale-inverted@$mod" >/dev/null 2>"$tmp/err"
    rc=$?
    ok "$fam/$fmt: synth --inject exit 0 (got $rc: $(tail -c 200 "$tmp/err"))" '[ $rc -eq 0 ]'
    ok "$fam/$fmt: the side file names model.$mod" "grep -q '\"model.$mod\"\\|\"$mod\"' '$ck-bug.faults.json'"
    "$bin" trace "$ck-bug" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/b.h5" >"$tmp/b.json" 2>"$tmp/err"
    rc=$?
    got=$(json_field first_divergence "$tmp/b.json"); cause=$(json_field cause "$tmp/b.json"); proof=$(json_field proof "$tmp/b.json")
    ok "$fam/$fmt: seed bug at $mod: exit 1, found there with cause scale_inverted (got exit $rc, '$got', '$cause', proof '$proof')" \
      '[ $rc -eq 1 ] && [ "$got" = "$mod" ] && [ "$cause" = scale_inverted ] && [ -n "$proof" ] && [ "$proof" != none ]'
  done
done < <(table)

# an unknown recipe: exit 2, the message lists the recipes with a synth: section (and only those)
"$bin" synth "$tmp/none" --recipe no_such_family >/dev/null 2>"$tmp/err"
rc=$?
ok "unknown recipe: exit 2 (got $rc)" '[ $rc -eq 2 ]'
known=$(sed -n 's/.*(known: \([^)]*\)).*/\1/p' "$tmp/err" | head -n 1)
want=$(for f in "$root"/recipes/*.yaml; do
         case "$(basename "$f")" in stack-*|tolerances*) continue ;; esac
         if grep -q '^synth:' "$f" || [ "$(basename "$f")" = deepseek_v4.yaml ]; then basename "$f" .yaml; fi
       done | LC_ALL=C sort | paste -sd, - | sed 's/,/, /g')
ok "unknown recipe: lists the recipes with a synth: section ('$known' = '$want')" '[ -n "$known" ] && [ "$known" = "$want" ]'
while read -r fam mod; do
  ok "$fam is among the listed recipes" "case ', $known, ' in *', $fam, '*) true ;; *) false ;; esac"
done < <(table)
# a recipe without a synth: section (llama's without it, as every shipped family has one): exit 2 naming it
sed '/^synth:/,$d' "$root/recipes/llama.yaml" >"$tmp/nosynth.yaml"
"$bin" synth "$tmp/none" --recipe "$tmp/nosynth.yaml" >/dev/null 2>"$tmp/err"
rc=$?
ok "a recipe without a synth: section: exit 2 naming it (got $rc: $(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q \"recipe 'llama' has no synth: section\" '$tmp/err' && [ ! -e '$tmp/none' ]"

# mistakes in a synth: section: exit 2 naming the recipe file, the line and the key
sed 's/in: num_attention_heads\*head_dim, gain: 0.5}/in: num_attention_heads*head_dimm, gain: 0.5}/' "$root/recipes/llama.yaml" >"$tmp/bad1.yaml"
line=$(grep -n 'head_dimm' "$tmp/bad1.yaml" | cut -d: -f1)
"$bin" synth "$tmp/none" --recipe "$tmp/bad1.yaml" >/dev/null 2>"$tmp/err"
rc=$?
ok "unknown key in an expression: exit 2 with file:$line and the key ($(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q \"bad1.yaml:$line: .*'head_dimm'\" '$tmp/err' && [ ! -e '$tmp/none' ]"
sed 's/    tiny:  {vocab_size: 256,/    tiny:  {vocabsize: 256,/' "$root/recipes/llama.yaml" >"$tmp/bad2.yaml"
"$bin" synth "$tmp/none" --recipe "$tmp/bad2.yaml" >/dev/null 2>"$tmp/err"
rc=$?
ok "a size key config does not mark ~: exit 2 naming sizes.tiny.vocabsize ($(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q 'bad2.yaml:[0-9]*: synth: sizes.tiny.vocabsize' '$tmp/err'"
sed '0,/when: full_attention}/s//when: full_attn}/' "$root/recipes/qwen3_next.yaml" >"$tmp/bad3.yaml"
line=$(grep -n 'full_attn}' "$tmp/bad3.yaml" | cut -d: -f1)
"$bin" synth "$tmp/none" --recipe "$tmp/bad3.yaml" >/dev/null 2>"$tmp/err"
rc=$?
ok "when: naming no layer type: exit 2 with file:$line listing the types ($(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q \"bad3.yaml:$line: synth: when: 'full_attn' is not dense, moe, full_attention or linear_attention\" '$tmp/err'"

echo "synth families: $pass passed, $fail failed"
[ $fail -eq 0 ]
