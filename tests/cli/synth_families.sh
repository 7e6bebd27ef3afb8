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
deepseek_v4 layers.0.self_attn.q_a_proj
qwen3 layers.0.self_attn.q_proj
qwen3_moe layers.0.self_attn.v_proj
mixtral layers.0.self_attn.o_proj
glm4 layers.0.mlp.gate_up_proj
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
    "$bin" trace --force "$ck" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/c.h5" >"$tmp/c.json" 2>"$tmp/err"
    rc=$?
    ok "$fam/$fmt: clean trace exit 0 (got $rc, first divergence '$(json_field first_divergence "$tmp/c.json")')" '[ $rc -eq 0 ]'
    "$bin" synth "$ck-bug" --recipe "$fam" --size tiny --format "$fmt" --inject "input-scale-inverted@$mod" >/dev/null 2>"$tmp/err"
    rc=$?
    ok "$fam/$fmt: synth --inject exit 0 (got $rc: $(tail -c 200 "$tmp/err"))" '[ $rc -eq 0 ]'
    ok "$fam/$fmt: the side file names model.$mod" "grep -q '\"model.$mod\"\\|\"$mod\"' '$ck-bug.faults.json'"
    "$bin" trace --force "$ck-bug" --backend "${ND_TEST_BACKEND:-cpu}" --json --out "$tmp/b.h5" >"$tmp/b.json" 2>"$tmp/err"
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
         if grep -q '^synth:' "$f"; then basename "$f" .yaml; fi
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

# mistakes in a synth: section: exit 2 naming the recipe file, the line and the key, nothing written.
#   bad NAME RECIPE SED MARK MESSAGE: NAME.yaml = RECIPE's file edited by SED; the message expected is
#   "NAME.yaml:L: synth: MESSAGE" with L the first line holding MARK after the edit.
bad() {
  sed "$3" "$root/recipes/$2.yaml" >"$tmp/$1.yaml"
  local line rc
  line=$(grep -n -m1 -F -- "$4" "$tmp/$1.yaml" | cut -d: -f1)
  "$bin" synth "$tmp/none" --recipe "$tmp/$1.yaml" >/dev/null 2>"$tmp/err"
  rc=$?
  ok "$1: exit 2 with $1.yaml:$line: synth: $5 (got $rc: $(cat "$tmp/err"))" \
    "[ $rc -eq 2 ] && [ -n '$line' ] && grep -qF -- \"$1.yaml:$line: synth: $5\" '$tmp/err' && [ ! -e '$tmp/none' ]"
}
bad bad1 llama 's/in: num_attention_heads\*head_dim, gain: 0.5}/in: num_attention_heads*head_dimm, gain: 0.5}/' head_dimm \
  "in 'num_attention_heads*head_dimm': unknown or non-integer config key 'head_dimm'"
bad bad2 llama 's/    tiny:  {vocab_size: 256,/    tiny:  {vocabsize: 256,/' vocabsize \
  "sizes.tiny.vocabsize must be a config key whose value is ~"
# round 24: a zero dimension (a zero-size tensor ran the generator on an unset chunk: SIGBUS blamed
# on a file, or memory overwritten), and mistakes that were exit 3 without the line
mlp='    - {mlp: mlp, inter: intermediate_size}'
bad zero_shape llama "s/^$mlp\$/$mlp\n    - {tensor: foo.weight, shape: [0]}/" '{tensor: foo.weight' "shape '0' is 0: a dimension is 1 to 2^31"
bad zero_norm llama "s/^$mlp\$/$mlp\n    - {norm: extra_norm, dim: 0}/" '{norm: extra_norm' "dim '0' is 0: a dimension is 1 to 2^31"
bad zero_out llama "s/^$mlp\$/$mlp\n    - {linear: self_attn.o2_proj, out: 0, in: 64}/" 'o2_proj' "out '0' is 0: a dimension is 1 to 2^31"
bad k_not16 llama "s/^$mlp\$/$mlp\n    - {linear: self_attn.extra_proj, out: hidden_size, in: 7}/" 'extra_proj' \
  "model.layers.0.self_attn.extra_proj.weight is NVFP4 with K = 7, not a multiple of 16"
bad twice llama "s/^$mlp\$/$mlp\n    - {linear: self_attn.q_proj, out: 64, in: 64}/" '{linear: self_attn.q_proj, out: 64' \
  "tensor model.layers.0.self_attn.q_proj.weight is made twice (also by line"
bad unread llama "s/^$mlp\$/$mlp\n    - {linear: self_attn.extra_proj, out: hidden_size, in: hidden_size}/" 'extra_proj' \
  "model.layers.0.self_attn.extra_proj is quantized, and no stage of the recipe reads it"
bad huge llama "s/^$mlp\$/$mlp\n    - {tensor: foo.weight, shape: [100000, 100000, 100000]}/" '{tensor: foo.weight' \
  "tensor 'foo.weight' of 100000 x 100000 x 100000 values: more than 2^34 in one tensor"
bad bad3 qwen3_next '0,/when: full_attention}/s//when: full_attn}/' 'full_attn}' \
  "when: 'full_attn' is not dense, moe, full_attention or linear_attention"
# the grammar deepseek_v4 needs: layer_types {first, cycle}, layer_values, hash_layers, experts, init tid2eid / hc_base
bad v4_mixed deepseek_v4 's/layer_types: {first: sliding_attention, cycle:/layer_types: {every: 2, cycle:/' 'layer_types: {' \
  "layer_types is either every, type, else or first, cycle, not both"
bad v4_cycle_twice deepseek_v4 's/cycle: \[compressed_sparse_attention, heavily_compressed_attention\]/cycle: [compressed_sparse_attention, compressed_sparse_attention]/' \
  'layer_types: {' "layer_types: 'compressed_sparse_attention' twice in 'cycle'"
bad v4_lt_key deepseek_v4 's/layer_types: {first: sliding_attention,/layer_types: {start: sliding_attention,/' 'layer_types: {' \
  "layer_types: unknown key 'start' (known: every, type, else, first, cycle)"
bad v4_value_missing deepseek_v4 's/{sliding_attention: 0, /{/' 'compress_ratios: {' \
  "layer_values.compress_ratios has no value for layer type 'sliding_attention'"
bad v4_value_type deepseek_v4 's/{sliding_attention: 0, /{sliding_attn: 0, /' 'compress_ratios: {' \
  "layer_values.compress_ratios: 'sliding_attn' is not a layer type"
bad v4_value_key deepseek_v4 's/{sliding_attention: 0, /{sliding_attention: window_size, /' 'compress_ratios: {' \
  "compress_ratios 'window_size': unknown or non-integer config key 'window_size'"
bad v4_no_hash_layers deepseek_v4 '/^  hash_layers:/d' '{tensor: mlp.gate.e_score_correction_bias' \
  "when: 'scored' is not dense, moe, sliding_attention, compressed_sparse_attention or heavily_compressed_attention"
bad v4_experts_key deepseek_v4 's/experts: {count: n_routed_experts, top_k:/experts: {count: n_routed_experts, topk:/' \
  'experts: {count' "experts: unknown key 'topk' (known: count, top_k)"
bad v4_tid2eid_dtype deepseek_v4 's/dtype: I32, init: tid2eid/dtype: BF16, init: tid2eid/' '{tensor: mlp.gate.tid2eid' \
  "tensor 'mlp.gate.tid2eid': init: tid2eid needs dtype: I32"
bad v4_tid2eid_aux deepseek_v4 's/ aux: n_routed_experts,//' '{tensor: mlp.gate.tid2eid' \
  "tensor 'mlp.gate.tid2eid': init: tid2eid and hc_base need 'aux' (experts / streams)"
bad v4_aux_stray deepseek_v4 's/{tensor: self_attn.sinks, shape: \[num_attention_heads\],/{tensor: self_attn.sinks, shape: [num_attention_heads], aux: 2,/' \
  '{tensor: self_attn.sinks' "tensor 'self_attn.sinks': 'aux' is for init: tid2eid and hc_base only"
bad v4_aux_key deepseek_v4 's/aux: n_routed_experts/aux: n_experts/' '{tensor: mlp.gate.tid2eid' \
  "aux 'n_experts': unknown or non-integer config key 'n_experts'"
bad v4_tid2eid_cols deepseek_v4 's/aux: n_routed_experts/aux: num_experts_per_tok-1/' '{tensor: mlp.gate.tid2eid' \
  "tensor 'mlp.gate.tid2eid': aux 'num_experts_per_tok-1' (1 experts) is fewer than its 2 columns"
bad v4_hc_base_dims deepseek_v4 '0,/shape: \[(2+hc_mult)\*hc_mult\], dtype: F32, init: hc_base/s//shape: [(2+hc_mult)*hc_mult, 1], dtype: F32, init: hc_base/' \
  'init: hc_base' "tensor 'attn_hc.base': init: hc_base needs dtype: F32 and a shape of 1 dimension"
bad v4_div_zero deepseek_v4 's|in: (num_attention_heads/o_groups)\*head_dim|in: (num_attention_heads/(o_groups-o_groups))*head_dim|' \
  '{linear: self_attn.o_a_proj' "in '(num_attention_heads/(o_groups-o_groups))*head_dim': division by zero"
bad v4_paren deepseek_v4 's|in: (num_attention_heads/o_groups)\*head_dim|in: (num_attention_heads/o_groups*head_dim|' \
  '{linear: self_attn.o_a_proj' "in '(num_attention_heads/o_groups*head_dim': a ')' is missing"

# --experts: the section's experts: count key (and the sizes' top-k as its floor); a recipe without one refuses it
"$bin" synth "$tmp/x12" --recipe deepseek_v4 --size tiny --experts 12 >/dev/null 2>"$tmp/err"
rc=$?
ok "deepseek_v4 --experts 12: exit 0, n_routed_experts 12, experts 0..11 (got $rc: $(cat "$tmp/err"))" \
  "[ $rc -eq 0 ] && grep -q '\"n_routed_experts\": 12' '$tmp/x12/config.json' && grep -aq 'layers.1.mlp.experts.11.up_proj' '$tmp/x12/model.safetensors' && ! grep -aq 'layers.1.mlp.experts.12.up_proj' '$tmp/x12/model.safetensors'"
"$bin" synth "$tmp/none" --recipe deepseek_v4 --size tiny --experts 1 >/dev/null 2>"$tmp/err"
rc=$?
ok "deepseek_v4 --experts 1: exit 2, fewer than top-k 2 (got $rc: $(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q 'experts 1 is fewer than top-k 2' '$tmp/err' && [ ! -e '$tmp/none' ]"
"$bin" synth "$tmp/none" --recipe llama --size tiny --experts 4 >/dev/null 2>"$tmp/err"
rc=$?
ok "llama --experts 4: exit 2, the recipe has no synth: experts: (got $rc: $(cat "$tmp/err"))" \
  "[ $rc -eq 2 ] && grep -q \"llama.yaml: synth: --experts needs the recipe's synth: experts: {count, top_k} (recipe 'llama' has none)\" '$tmp/err' && [ ! -e '$tmp/none' ]"

echo "synth families: $pass passed, $fail failed"
[ $fail -eq 0 ]
