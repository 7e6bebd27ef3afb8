#!/usr/bin/env bash
# A family made of one YAML file (issue 23): a recipe that extends llama with one extra stage of an
# existing op, in a recipe folder of its own, traces the llama fixture and gives llama's rows plus the
# new stage's; the bad inputs of extends / edits / fuse are exit 2 naming the file and the line.
#   usage: recipe_extends.sh NVFP4DBG SOURCE_ROOT
. "$(dirname "$0")/../lib.sh"
bin="$1"; root="$2"
ck="$root/golden/conformance/llama/nvfp4"
exact="$root/recipes/stack-exact.yaml"

# every row of a trace --json as one line "name mode op figures..." (the index left out: it moves
# when a stage is inserted)
rows() { awk '
  /^ "stages": \[/ { in_st = 1; next }
  in_st && /^ \]/ { in_st = 0 }
  in_st && /^  \{/ { row = ""; next }
  in_st && /^  \}/ { print row; next }
  in_st && !/"index":/ { sub(/^ +/, ""); row = row " " $0 }' "$1"; }

# ---- the family: one file in a folder of its own (NVFP4DBG_RECIPES), found by model_type ----
mkdir -p "$tmp/fam"
cat > "$tmp/fam/llama_probe.yaml" <<'EOF'
# Llama with a named point after o_proj
recipe: llama_probe
match: [llama]
extends: llama
insert_after:
  stage: "layers.{L}.self_attn.o_proj"
  stages:
    - {stage: "layers.{L}.self_attn.o_mark", op: identity, in: ya, out: ya}
EOF
"$bin" trace --force "$ck" --backend cpu --json --no-color --out "$tmp/stock.h5" > "$tmp/stock.json" 2> "$tmp/stock.err"
ok "stock llama trace exit 0 ($(tail -1 "$tmp/stock.err"))" "[ $? -eq 0 ]"
NVFP4DBG_RECIPES="$tmp/fam" "$bin" trace --force "$ck" --stack "$exact" --backend cpu --json --no-color --out "$tmp/fam.h5" \
  > "$tmp/fam.json" 2> "$tmp/fam.err"
ok "family trace exit 0 ($(tail -1 "$tmp/fam.err"))" "[ $? -eq 0 ]"
ok "the family is picked by model_type" "[ \"$(json_field recipe "$tmp/fam.json")\" = llama_probe ]"
rows "$tmp/stock.json" > "$tmp/stock.rows"
rows "$tmp/fam.json" > "$tmp/fam.rows"
n_stock=$(wc -l < "$tmp/stock.rows"); n_fam=$(wc -l < "$tmp/fam.rows")
layers=$(grep -c '"name": "layers\.[0-9]*", "op": "add", "mode": "isolated"' "$tmp/stock.rows")
ok "llama fixture has 2 layers (found $layers)" "[ $layers -eq 2 ]"
ok "one row per layer and mode more ($n_fam rows, llama $n_stock)" "[ $n_fam -eq $((n_stock + 2 * layers)) ]"
grep -v '"layers\.[0-9]*\.self_attn\.o_mark"' "$tmp/fam.rows" > "$tmp/fam.rest"
ok "every other row identical to llama's, in order" "cmp -s \"$tmp/stock.rows\" \"$tmp/fam.rest\""
# the new stage sits right after o_proj and passes o_proj's output on unchanged: its chained figures
# are o_proj's; isolated, both paths see the same input, so it is exact
fig() { grep "\"name\": \"$1\", \"op\": \"[a-z_]*\", \"mode\": \"$2\"" "$tmp/fam.rows" | grep -o "\"$3\": [^,]*"; }
for l in 0 1; do
  # o_proj's rows (isolated, chained), then o_mark's
  after=$(grep -A1 "\"name\": \"layers.$l.self_attn.o_proj\", \"op\": \"linear\", \"mode\": \"chained\"" "$tmp/fam.rows" | tail -1)
  ok "layer $l: o_mark follows o_proj" "grep -q '\"name\": \"layers.$l.self_attn.o_mark\", \"op\": \"identity\", \"mode\": \"isolated\"' <<< \"\$after\""
  for f in ref_amax prod_amax cosine sqnr_db; do
    a=$(fig "layers.$l.self_attn.o_mark" chained $f); b=$(fig "layers.$l.self_attn.o_proj" chained $f)
    ok "layer $l chained $f of o_mark (${a#*: }) is o_proj's (${b#*: })" "[ -n \"\$a\" ] && [ \"\${a#*: }\" = \"\${b#*: }\" ]"
  done
  iso=$(fig "layers.$l.self_attn.o_mark" isolated cosine)
  ok "layer $l isolated o_mark is exact ($iso)" "[ \"\${iso#*: }\" = 1.0 ]"
done

# ---- bad inputs: exit 2, FILE:LINE in the message ----
bad() {   # NAME RECIPE_FILE WANT_GREP
  "$bin" trace --force "$ck" --recipe "$2" --backend cpu --out "$tmp/bad.h5" > /dev/null 2> "$tmp/bad.err"
  local rc=$?
  ok "$1: exit 2 (got $rc: $(head -c 300 "$tmp/bad.err"))" "[ $rc -eq 2 ]"
  ok "$1: message '$3' (got: $(head -c 300 "$tmp/bad.err"))" "grep -qF -- \"$3\" \"$tmp/bad.err\""
}
mkdir -p "$tmp/bad"
printf 'recipe: a\nextends: b\n' > "$tmp/bad/a.yaml"
printf 'recipe: b\n\nextends: a.yaml\n' > "$tmp/bad/b.yaml"
bad "cycle" "$tmp/bad/a.yaml" "$tmp/bad/b.yaml:3: extends: a cycle ($tmp/bad/a.yaml -> $tmp/bad/b.yaml -> $tmp/bad/a.yaml)"
printf 'recipe: orphan\n# no such parent\nextends: llama_nonexistent\n' > "$tmp/bad/orphan.yaml"
bad "missing parent" "$tmp/bad/orphan.yaml" "$tmp/bad/orphan.yaml:3: extends: no recipe named 'llama_nonexistent'"
printf 'recipe: orphan2\nextends: ../nowhere/llama.yaml\n' > "$tmp/bad/orphan2.yaml"
bad "missing parent file" "$tmp/bad/orphan2.yaml" "$tmp/bad/orphan2.yaml:2: extends: $tmp/bad/../nowhere/llama.yaml: no such recipe file"
cat > "$tmp/bad/typo.yaml" <<'EOF'
recipe: typo
extends: llama
remove: ["layers.{L}.self_attn.k_rope"]
insert_after:
  stage: "layers.{L}.self_attn.q_nrom"
  stages: [{stage: x, op: identity, in: a, out: a}]
EOF
bad "unknown stage in an edit" "$tmp/bad/typo.yaml" "$tmp/bad/typo.yaml:5: insert_after: no stage 'layers.{L}.self_attn.q_nrom'"
cat > "$tmp/bad/twice.yaml" <<'EOF'
recipe: twice
extends: qwen3_next
set: {stage: "layers.{L}.mlp", attrs: {tf: bf16}}
EOF
bad "an edit naming two stages" "$tmp/bad/twice.yaml" "$tmp/bad/twice.yaml:3: set: stage 'layers.{L}.mlp' names 2 stages"
cat > "$tmp/bad/fuse.yaml" <<'EOF'
recipe: fuse
extends: llama
set:
  - stage: "layers.{L}.self_attn.k_proj"
    attrs:
      fused: qvk
EOF
bad "bad fused: name" "$tmp/bad/fuse.yaml" "$tmp/bad/fuse.yaml:6: stage layers.{L}.self_attn.k_proj: fused: 'qvk' is no entry of the recipe's fuse: table (known: qkv)"
cat > "$tmp/bad/fuse2.yaml" <<'EOF'
recipe: fuse2
extends: llama
fuse:
  qkv: [q_proj, v_proj]
EOF
bad "a fuse group without the stage's module" "$tmp/bad/fuse2.yaml" "llama.yaml"
ok "... names the stage and its module" "grep -qF \"does not hold the stage's own module model.layers.{L}.self_attn.k_proj\" \"$tmp/bad.err\""
# a bad attribute in an inherited stage is reported where it was written: the parent's file and line
cat > "$tmp/bad/parent.yaml" <<'EOF'
recipe: parent
extends: llama
replace:
  stage: norm
  with:
    - {stage: norm, op: rmsnorm, weight: model.norm.weight, in: x, out: xn, epss: $rms_norm_eps}
EOF
printf 'recipe: child\nextends: parent\n' > "$tmp/bad/child.yaml"
bad "bad attribute in an inherited stage" "$tmp/bad/child.yaml" "$tmp/bad/parent.yaml:6: stage norm (op rmsnorm): unknown attribute 'epss'"
cat > "$tmp/bad/setbad.yaml" <<'EOF'
recipe: setbad
extends: llama
set:
  stage: "layers.{L}.self_attn.q_rope"
  attrs: {interleaved: 2}
EOF
bad "bad attribute set on an inherited stage" "$tmp/bad/setbad.yaml" "$tmp/bad/setbad.yaml:5: stage layers.{L}.self_attn.q_rope (op rope): attribute interleaved must be 0 or 1, not '2'"
# a run-time message about an inherited stage names the parent's file and line too: without k_rope,
# llama's kv_cache stage reads a buffer nothing wrote
printf 'recipe: nokrope\nextends: llama\nremove: ["layers.{L}.self_attn.k_rope"]\n' > "$tmp/bad/nokrope.yaml"
kv_line=$(grep -n 'stage: "layers.{L}.self_attn.kv_cache"' "$root/recipes/llama.yaml" | cut -d: -f1)
bad "an inherited stage at run time" "$tmp/bad/nokrope.yaml" "$root/recipes/llama.yaml:$kv_line: stage layers.{L}.self_attn.kv_cache reads 'kp', which no earlier stage wrote"
printf 'recipe: lone\nlayer: [{stage: a, op: identity, in: x, out: x}]\nremove: [a]\n' > "$tmp/bad/lone.yaml"
bad "an edit without extends" "$tmp/bad/lone.yaml" "$tmp/bad/lone.yaml:3: remove: edits the stages of the recipe it extends"

echo "recipe extends: $pass passed, $fail failed"
[ $fail -eq 0 ]
